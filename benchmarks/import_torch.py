"""Import time of the example models: irkit's torch frontend vs TVM Relax's importer.

Both importers get the same ``ExportedProgram`` object, exported once per model
(export time is not counted):

- as exported (torch's training IR: ``linear``, ``layer_norm``, SDPA...), with
  TVM's own ``run_decompositions()`` switched off (``run_ep_decomposition=False``)
  so that both translate the same graph;
- after ``run_decompositions()`` (core ATen), decomposed once beforehand.

Runs are interleaved (irkit, TVM, irkit, TVM, ...) after one warm-up each, so
that load on the machine falls on both alike; the table gives medians and the
ratio TVM / irkit (above 1: irkit is faster).  Figures depend on the machine;
the ratios are measured in one run.

    .venv/bin/python benchmarks/import_torch.py                   # tiny + small models
    .venv/bin/python benchmarks/import_torch.py --models gpt2_tiny,llama_tiny --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results" / "import_torch.md"


def _time(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure(ep: Any, repeats: int) -> dict[str, Any]:
    """Median seconds of irkit and TVM on ``ep`` (or the reason TVM failed)."""
    from tvm.relax.frontend.torch import from_exported_program

    from irkit.frontends.torch_export import import_exported_program

    def irkit_fn() -> Any:
        return import_exported_program(ep)

    def tvm_fn() -> Any:
        return from_exported_program(ep, run_ep_decomposition=False)

    out: dict[str, Any] = {"nodes": sum(1 for n in ep.graph.nodes if n.op == "call_function")}
    irkit_fn()  # warm-up: first-call imports and caches
    try:
        tvm_fn()
        tvm_ok = True
    except Exception as e:  # noqa: BLE001 - a failure is a result to report
        tvm_ok = False
        out["tvm_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
    ik_times, tvm_times = [], []
    for _ in range(repeats):
        ik_times.append(_time(irkit_fn))
        if tvm_ok:
            tvm_times.append(_time(tvm_fn))
    out["irkit"] = statistics.median(ik_times)
    out["tvm"] = statistics.median(tvm_times) if tvm_times else None
    return out


def _ms(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e3:.1f}"


def _ratio(r: dict[str, Any]) -> str:
    if r.get("tvm") is None:
        return f"TVM fails ({r.get('tvm_error', '?')})"
    return f"{r['tvm'] / r['irkit']:.2f}x"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="", help="comma-separated registry names (default: all tiny and small)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per importer and graph (default 5)")
    p.add_argument("--no-decomposed", action="store_true", help="skip the run_decompositions() graphs")
    p.add_argument("--output", default=str(RESULTS), help="markdown file to write")
    args = p.parse_args(argv)

    warnings.filterwarnings("ignore")
    import torch
    import tvm

    from examples.models import registry

    names = [n for n in args.models.split(",") if n] or [m.name for m in registry.MODELS]
    rows = []
    for name in names:
        model, inputs, dyn = registry.get(name)()
        t0 = time.perf_counter()
        ep = torch.export.export(model, tuple(inputs), dynamic_shapes=dyn)
        export_s = time.perf_counter() - t0
        row: dict[str, Any] = {"name": name, "export": export_s, "plain": measure(ep, args.repeats)}
        if not args.no_decomposed:
            t0 = time.perf_counter()
            core = ep.run_decompositions()
            row["decompose"] = time.perf_counter() - t0
            row["core"] = measure(core, args.repeats)
        rows.append(row)
        print(f"{name}: irkit {_ms(row['plain']['irkit'])} ms, TVM {_ms(row['plain']['tvm'])} ms"
              + (f"; core: irkit {_ms(row['core']['irkit'])} ms, TVM {_ms(row['core']['tvm'])} ms"
                 if "core" in row else ""), file=sys.stderr, flush=True)

    given = list(argv if argv is not None else sys.argv[1:])
    cmd = " ".join(["python benchmarks/import_torch.py", *given])
    note = (f"torch {torch.__version__}, TVM {tvm.__version__}; median of {args.repeats} interleaved runs "
            "after one warm-up each. Both importers translate the same `ExportedProgram` (TVM with "
            "`run_ep_decomposition=False`); export and decomposition are not counted. Ratio = TVM / irkit "
            "(above 1: irkit is faster). Absolute times depend on this machine and its load; the ratios "
            "are measured in one run.")
    header = ("| model | ATen nodes | irkit ms | TVM ms | TVM/irkit | core nodes | irkit core ms | "
              "TVM core ms | TVM/irkit core | export s | decompose s |")
    lines = [
        "# Import time: irkit torch frontend vs TVM Relax `from_exported_program`",
        "",
        f"Command: `{cmd}`  ",
        note,
        "",
        header,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        pl, co = r["plain"], r.get("core")
        lines.append(
            f"| {r['name']} | {pl['nodes']} | {_ms(pl['irkit'])} | {_ms(pl['tvm'])} | {_ratio(pl)} | "
            + (f"{co['nodes']} | {_ms(co['irkit'])} | {_ms(co['tvm'])} | {_ratio(co)} | "
               if co else "— | — | — | — | ")
            + f"{r['export']:.1f} | " + (f"{r['decompose']:.1f} |" if "decompose" in r else "— |"))
    ratios = [r["plain"]["tvm"] / r["plain"]["irkit"] for r in rows if r["plain"].get("tvm")]
    ratios += [r["core"]["tvm"] / r["core"]["irkit"] for r in rows if r.get("core", {}).get("tvm")]
    graphs = [r[k] for r in rows for k in ("plain", "core") if k in r]
    tvm_ok = sum(1 for g in graphs if g.get("tvm") is not None)
    lines += ["", f"Graphs imported: irkit {len(graphs)}/{len(graphs)}, TVM {tvm_ok}/{len(graphs)}."]
    if ratios:
        gm = statistics.geometric_mean(ratios)
        lines += [f"Geometric mean of TVM/irkit over the {len(ratios)} graphs both import: {gm:.2f}x."]
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    from irkit.fileio import atomic_write

    atomic_write(out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
