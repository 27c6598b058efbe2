"""Import time of the example models' ONNX files: irkit vs TVM Relax's ONNX frontend.

Run from the repository root::

    .venv/bin/python benchmarks/import_onnx.py [--models gpt2_tiny,llama_small] [--repeat 7]

Each example model is exported once (cached; export time is not measured)
through both torch exporters, with the example's static shapes, and imported
``--repeat`` times by each frontend: irkit's ``import_onnx(path)`` and TVM's
``tvm.relax.frontend.onnx.from_onnx(onnx.load(path))`` (both include reading
and parsing the file).  Medians and the spread (min–max) are reported, with
the ratio TVM / irkit measured in the same run.  The same models exported with
dynamic batch and sequence dims are imported by irkit too; TVM's column says
whether it accepts them.  The markdown table is printed and written to
``benchmarks/results/import_onnx.md`` with the command that produced it.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
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


def _fmt(t: tuple[float, float, float] | None) -> str:
    if t is None:
        return "—"
    med, lo, hi = t
    return f"{med * 1e3:.1f} ({lo * 1e3:.0f}–{hi * 1e3:.0f})"


def _tvm_import(path: Path) -> Callable[[], Any]:
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    def run() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return from_onnx(onnx.load(str(path)))

    return run


def _short_error(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    msg = lines[-1] if lines else type(e).__name__
    return f"fails: {type(e).__name__}: {msg[:70]}".replace("|", "/")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated example factories")
    p.add_argument("--exporters", default="dynamo,torchscript")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "irkit-onnx-bench"),
                   help="folder for the exported .onnx files (reused across runs)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "import_onnx.md"))
    args = p.parse_args(argv)

    import onnx

    from irkit.frontends.onnx import import_onnx
    from irkit.testing.onnx_export import export_example, find_factory

    try:
        import tvm

        tvm_version = tvm.__version__
    except ImportError:
        tvm_version = None
    rows = []
    for name in [m for m in args.models.split(",") if m]:
        try:
            find_factory(name)
        except KeyError:
            print(f"skip {name}: no such example", file=sys.stderr)
            continue
        for exporter in args.exporters.split(","):
            print(f"{name} / {exporter} ...", file=sys.stderr, flush=True)
            try:
                static = export_example(name, args.cache, exporter=exporter, dynamic=False, reuse=True)  # type: ignore[arg-type]
                dynamic = export_example(name, args.cache, exporter=exporter, reuse=True)  # type: ignore[arg-type]
            except Exception as e:  # noqa: BLE001 - an exporter failure is a row, not a crash
                rows.append((name, exporter, "—", "export " + _short_error(e), "", "", "", ""))
                continue
            n_nodes = len(onnx.load(str(static.path), load_external_data=False).graph.node)
            t_ir = _time(lambda p=static.path: import_onnx(p), args.repeat)
            t_dyn = _time(lambda p=dynamic.path: import_onnx(p), args.repeat)
            t_tvm: tuple[float, float, float] | None = None
            tvm_note = ""
            if tvm_version is None:
                tvm_note = "TVM not installed"
            else:
                try:
                    t_tvm = _time(_tvm_import(static.path), args.repeat)
                except Exception as e:  # noqa: BLE001
                    tvm_note = _short_error(e)
            try:
                _tvm_import(dynamic.path)()
                tvm_dyn = "accepts"
            except Exception as e:  # noqa: BLE001
                tvm_dyn = _short_error(e)
            ratio = f"{t_tvm[0] / t_ir[0]:.1f}x" if t_tvm else ""
            rows.append((name, exporter, str(n_nodes), _fmt(t_ir), _fmt(t_tvm) if t_tvm else tvm_note, ratio,
                         _fmt(t_dyn), tvm_dyn))

    shown = list(argv if argv is not None else sys.argv[1:])
    for flag in ("--cache", "--out"):  # machine-local paths do not belong in the report
        while flag in shown and shown.index(flag) + 1 < len(shown):
            i = shown.index(flag)
            del shown[i:i + 2]
    cmd = "python benchmarks/import_onnx.py " + " ".join(shown)
    head = ("| model | exporter | ONNX nodes | irkit ms, static (min–max) | TVM ms, static (min–max) "
            "| TVM / irkit | irkit ms, dynamic B,S | TVM on dynamic B,S |")
    lines = [
        "# ONNX import time: irkit vs TVM Relax",
        "",
        f"Command: `{cmd.strip()}`  ",
        (f"Host: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
         f"TVM {tvm_version or 'n/a'}, onnx {onnx.__version__}; {args.repeat} timed runs after a warm-up, "
         "medians. Each run reads and parses the file; export time is excluded. The ratio is measured in this "
         "run on this machine, so only it carries over to another machine."),
        "",
        head,
        "|" + "---|" * 8,
    ]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from irkit.fileio import atomic_write

    atomic_write(out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
