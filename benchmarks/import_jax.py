"""Import time of the example models' JAX twins: the jaxpr path, the StableHLO path, HLO text.

Run from the repository root::

    .venv/bin/python benchmarks/import_jax.py [--models gpt2_tiny,llama_small] [--repeat 5]

For each example model (``examples/models/registry.py``), after one warm-up:

- jaxpr: ``import_jax(fn, args)``, which includes JAX's trace (``make_jaxpr``,
  also timed alone so the frontend's own share shows);
- StableHLO: ``import_stablehlo(text)`` on ``jax.jit(fn).lower(*args).as_text()``
  (parse with the MLIR bindings, then the walk); JAX's lowering is timed apart;
- HLO: ``import_hlo(text)`` on the same computation as XLA HLO text (XLA's HLO
  parser and its conversion to StableHLO, then the StableHLO walk).

Medians with (min–max) over ``--repeat`` runs.  The peer is TVM Relax's StableHLO
frontend (``tvm.relax.frontend.stablehlo.from_stablehlo``) on the same text,
timed where it imports and otherwise reported with the error it raises; TVM
has no jaxpr or HLO importer.  The markdown table is printed and written to
``benchmarks/results/import_jax.md`` with the command.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_MODELS = ["gpt2_tiny", "gpt2_small", "bert_tiny", "bert_small", "llama_tiny", "llama_small", "t5_tiny",
                  "t5_small", "vit_tiny", "vit_small"]


def _time(fn: Callable[[], Any], repeat: int) -> tuple[float, float, float]:
    """(median, min, max) seconds of ``fn`` over ``repeat`` runs after one warm-up."""
    fn()
    ts = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), max(ts)


def _fmt(t: tuple[float, float, float]) -> str:
    med, lo, hi = t
    return f"{med * 1e3:.0f} ({lo * 1e3:.0f}–{hi * 1e3:.0f})"


def _tvm(text: str, repeat: int, errors: list[str]) -> str:
    """TVM Relax's StableHLO import of ``text``: a time, or why it fails (the message
    goes to ``errors`` once, the cell says which one)."""
    try:
        from tvm.relax.frontend.stablehlo import from_stablehlo
    except Exception as e:  # noqa: BLE001 - TVM missing or broken is a result too
        return f"not available ({type(e).__name__})"
    try:
        from_stablehlo(text)
    except Exception as e:  # noqa: BLE001 - report TVM's failure, whatever it is
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        err = f"{type(e).__name__}: {msg[:160]}"
        if err not in errors:
            errors.append(err)
        return f"fails ({errors.index(err) + 1})"
    return _fmt(_time(lambda: from_stablehlo(text), repeat))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated registry names")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "import_jax.md"))
    args = ap.parse_args()

    import jax

    from examples.models.registry import get
    from irkit.frontends.jax import import_hlo, import_jax, import_stablehlo

    rows = []
    tvm_errors: list[str] = []
    for name in [m for m in args.models.split(",") if m]:
        fn, ex = get(name).jax_factory()
        ex = tuple(ex)
        lowered = jax.jit(fn).lower(*ex)
        shlo = lowered.as_text()
        hlo = lowered.as_text(dialect="hlo")
        m_jaxpr = import_jax(fn, ex)
        m_shlo = import_stablehlo(shlo)
        # A new partial each run: JAX caches traces per function object, and a user's first
        # import of a function pays for the trace.
        t_trace = _time(lambda fn=fn, ex=ex: jax.make_jaxpr(functools.partial(fn))(*ex), args.repeat)
        t_jaxpr = _time(lambda fn=fn, ex=ex: import_jax(functools.partial(fn), ex), args.repeat)
        t_lower = _time(lambda fn=fn, ex=ex: jax.jit(fn).lower(*ex).as_text(), args.repeat)
        t_shlo = _time(lambda shlo=shlo: import_stablehlo(shlo), args.repeat)
        t_hlo = _time(lambda hlo=hlo: import_hlo(hlo), args.repeat)
        tvm = _tvm(shlo, args.repeat, tvm_errors)
        rows.append((name, m_jaxpr.num_ops(), t_jaxpr, t_trace, m_shlo.num_ops(), t_lower, t_shlo, t_hlo, tvm))
        print(f"{name}: jaxpr {_fmt(t_jaxpr)} ms, stablehlo {_fmt(t_shlo)} ms, hlo {_fmt(t_hlo)} ms",
              file=sys.stderr)

    header = ("| model | IR ops (jaxpr) | `import_jax` ms | of which JAX trace ms | frontend share | "
              "IR ops (StableHLO) | JAX lowering ms | `import_stablehlo` ms | `import_hlo` ms | "
              "TVM `from_stablehlo` ms |")
    lines = [
        header,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, n1, tj, tt, n2, tl, ts, th, tvm in rows:
        share = max(0.0, (tj[0] - tt[0]) / tj[0]) if tj[0] else 0.0
        lines.append(f"| {name} | {n1} | {_fmt(tj)} | {_fmt(tt)} | {share:.0%} | {n2} | {_fmt(tl)} | "
                     f"{_fmt(ts)} | {_fmt(th)} | {tvm} |")
    table = "\n".join(lines)
    cmd = "python benchmarks/import_jax.py " + " ".join(sys.argv[1:])
    try:
        load = f"load average {os.getloadavg()[0]:.1f}, "
    except OSError:  # pragma: no cover - not on every platform
        load = ""
    note = (
        f"Command: `{cmd.strip()}`\n\n"
        f"Median (min–max) of {args.repeat} runs after one warm-up; jax {jax.__version__}, Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs ({load}measured in one run).\n\n"
        "`import_jax` includes JAX's own trace (`jax.make_jaxpr`, timed alone in the next column; each run "
        "traces a new `functools.partial` of the function, since JAX caches traces per function object); "
        "`import_stablehlo` parses the text with jaxlib's MLIR bindings and walks it, and JAX's lowering "
        "(`jax.jit(f).lower(x).as_text()`) is timed apart; `import_hlo` includes XLA's HLO parser and its "
        "conversion to StableHLO. The StableHLO path has more IR ops because JAX's lowering spells out "
        "broadcasts and expands some ops (`logistic` as exp/add/divide). TVM has no jaxpr or HLO importer; "
        "its Relax StableHLO frontend (`tvm.relax.frontend.stablehlo.from_stablehlo`) is the only peer, and "
        f"with the MLIR bindings of jaxlib {jax.__version__} it fails before reading an op (it calls "
        "`ShapedType.isinstance`, which these bindings no longer have); it also covers only about twenty "
        "StableHLO ops (no gather, transpose, compare, select, iota, concatenate or func.call), so it "
        "could not import these models in any case.\n\n"
    )
    if tvm_errors:
        table += "\n\nTVM errors: " + "; ".join(f"({i + 1}) `{e}`" for i, e in enumerate(tvm_errors))
    out = note + table + "\n"
    print(out)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    from irkit.fileio import atomic_write

    atomic_write(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
