"""How the optimising pipeline's time grows with model depth (GPT-2-style, 1 to 24 layers).

Two sources of GPT-2-style modules:

- ``synthetic``: :func:`irkit.testing.blocks.gpt2_style_module` (exporter
  spelling built directly in the IR; hidden 64, 4 heads, dynamic ``B``/``S``);
- ``torch``: the torch GPT-2 example (``examples/models/gpt2.py``, tiny config
  with ``layers=n``) imported through the torch frontend
  (``import_torch_factory``, the factory's dynamic dims).  The import time is
  reported too; ``--torch-layers ''`` leaves this source out.

For each module the pipeline (default: the optimising pipeline
``canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce``)
runs under :class:`irkit.passmanager.PassManager` with timing on, on a fresh
clone each repeat; repeats are interleaved across sizes (round r runs every
size once) so machine load hits every size alike.  Reported: the median time of
each pass, the pipeline total (sum of passes), the per-pass IR verification the
pass manager does on top (``verify``), the time per layer and per op, a
least-squares fit ``total = a + b * layers`` with its R², and for every pass the
exponent k of ``time ~ ops^k`` (log-log least squares; 1.0 is linear, 2.0
quadratic) on the medians and on the minimum of the repeats (the least
disturbed sample on a loaded machine).

Writes markdown to stdout and to ``benchmarks/results/pipeline_scaling.md``,
the command at the top.

Run: python benchmarks/pipeline_scaling.py [--layers 1,2,4,8,12,24] [--torch-layers 1,2,4,8,12,24]
     [--repeats 15] [--pipeline PIPELINE] [--out FILE]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import contextlib
import io
import platform
import shlex
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from irkit.bench import Timing
from irkit.ir.core import Module
from irkit.passmanager import PassManager

PIPELINE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"


@dataclass
class Case:
    source: str
    layers: int
    module: Module
    ops_before: int
    import_s: float | None = None
    ops_after: int = 0
    attention: int = 0
    pass_names: list[str] = field(default_factory=list)
    pass_samples: dict[str, list[float]] = field(default_factory=dict)
    total_samples: list[float] = field(default_factory=list)
    wall_samples: list[float] = field(default_factory=list)

    def median(self, name: str) -> float:
        return Timing(self.pass_samples[name]).median

    def minimum(self, name: str) -> float:
        return min(self.total_samples if name == "total" else self.pass_samples[name])

    @property
    def total(self) -> Timing:
        return Timing(self.total_samples)

    @property
    def verify(self) -> float:
        return Timing([w - t for w, t in zip(self.wall_samples, self.total_samples)]).median


def num_ops(m: Module) -> int:
    return sum(1 for _ in m.entry.walk())


def synthetic(n: int) -> Case:
    from irkit.testing.blocks import gpt2_style_module

    m = gpt2_style_module(layers=n)
    return Case("synthetic", n, m, num_ops(m))


def torch_gpt2(n: int) -> Case:
    import torch

    from examples.models.gpt2 import _GPT2_TINY, gpt2
    from irkit.frontends.torch_export import import_torch_factory

    torch.set_num_threads(1)
    from dataclasses import replace

    model, inputs, dyn = gpt2(replace(_GPT2_TINY, layers=n))
    t0 = time.perf_counter()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        m = import_torch_factory(model.eval(), inputs, dyn)
    return Case("torch", n, m, num_ops(m), import_s=time.perf_counter() - t0)


def run_once(c: Case, pipeline: str) -> None:
    m = c.module.clone()
    pm = PassManager(pipeline, timing=True)
    t0 = time.perf_counter()
    pm.run(m)
    wall = time.perf_counter() - t0
    if not c.pass_names:
        c.pass_names = [t.name for t in pm.timings]
        c.ops_after = num_ops(m)
        c.attention = sum(1 for op in m.entry.walk() if op.name == "ik.attention")
    for t in pm.timings:
        c.pass_samples.setdefault(t.name, []).append(t.seconds)
    c.total_samples.append(sum(t.seconds for t in pm.timings))
    c.wall_samples.append(wall)


def fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least squares ``y = a + b x``: (a, b, R²)."""
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    if len(x) < 2:
        return float(y[0]) if len(y) else 0.0, 0.0, 1.0
    b, a = np.polyfit(x, y, 1)
    pred = a + b * x
    ss_res = float(np.sum((y - pred) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2)) or 1e-30
    return float(a), float(b), 1.0 - ss_res / ss_tot


def loglog(xs: list[float], ys: list[float]) -> float:
    """The exponent k of ``y ~ x^k`` (least squares in log-log): 1 is linear, 2 quadratic."""
    pts = [(x, y) for x, y in zip(xs, ys) if x > 0 and y > 0]
    if len(pts) < 2:
        return float("nan")
    lx, ly = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(lx, ly, 1)[0])


def section(source: str, cases: list[Case], pipeline: str) -> list[str]:
    L: list[str] = []
    title = {"synthetic": "Synthetic GPT-2-style modules (irkit.testing.blocks.gpt2_style_module)",
             "torch": "Torch GPT-2 example imported through torch.export (examples/models/gpt2.py, tiny config)"}
    L.append(f"## {title[source]}")
    L.append("")
    passes = cases[0].pass_names
    L.append("Per-pass median ms (spread of the total = inter-quartile range / median).")
    L.append("")
    L.append("| layers | ops before | ops after | ik.attention | " + " | ".join(passes)
             + " | total ms | spread | verify ms | total ms / layer | µs / op |")
    L.append("|---:|---:|---:|---:|" + "---:|" * len(passes) + "---:|---:|---:|---:|---:|")
    for c in cases:
        tot = c.total
        L.append(f"| {c.layers} | {c.ops_before} | {c.ops_after} | {c.attention} | "
                 + " | ".join(f"{1e3 * c.median(p):.1f}" for p in passes)
                 + f" | {1e3 * tot.median:.1f} | {100 * tot.spread:.0f}% | {1e3 * c.verify:.1f} | "
                 f"{1e3 * tot.median / c.layers:.1f} | {1e6 * tot.median / c.ops_before:.0f} |")
    L.append("")
    L.append("Per-pass minimum ms over the repeats (the least disturbed sample; small passes' medians on a loaded "
             "machine include scheduler preemptions of tens of ms).")
    L.append("")
    L.append("| layers | " + " | ".join(passes) + " | total ms | total ms / layer |")
    L.append("|---:|" + "---:|" * len(passes) + "---:|---:|")
    for c in cases:
        L.append(f"| {c.layers} | " + " | ".join(f"{1e3 * c.minimum(p):.1f}" for p in passes)
                 + f" | {1e3 * c.minimum('total'):.1f} | {1e3 * c.minimum('total') / c.layers:.1f} |")
    L.append("")
    # Linearity: time per layer, a straight-line fit against layers, and the log-log exponent
    # of time against op count (1.0 = linear); the exponent is given on medians and on the
    # minimum of the repeats (the least disturbed sample on a loaded machine).
    xs = [c.layers for c in cases]
    ops = [c.ops_before for c in cases]
    a, b, r2 = fit(xs, [c.total.median for c in cases])
    L.append(f"Linearity: total ≈ {1e3 * a:.1f} ms + {1e3 * b:.1f} ms × layers (R² = {r2:.3f}); total time grows as "
             f"ops^{loglog(ops, [c.total.median for c in cases]):.2f} on medians, "
             f"ops^{loglog(ops, [c.minimum('total') for c in cases]):.2f} on minimums (1.00 = linear).")
    L.append("")
    big = [c for c in cases if c.layers >= max(xs) // 2]
    top = cases[-2:] if len(cases) >= 2 else cases
    span = f"{top[0].layers}→{top[-1].layers}"
    L.append("| pass | ms per layer (slope) | R² | exponent k, medians | exponent k, minimums | "
             f"k {span} layers, minimums | " + " | ".join(f"ms/layer at {c.layers}" for c in big) + " |")
    L.append("|---|---:|---:|---:|---:|---:|" + "---:|" * len(big))
    for p in passes + ["total"]:
        ys = [c.total.median if p == "total" else c.median(p) for c in cases]
        mins = [c.minimum(p) for c in cases]
        _, pb, pr2 = fit(xs, ys)
        per = [(c.total.median if p == "total" else c.median(p)) / c.layers for c in big]
        k_top = loglog([c.ops_before for c in top], [c.minimum(p) for c in top])
        L.append(f"| {p} | {1e3 * pb:.2f} | {pr2:.3f} | {loglog(ops, ys):.2f} | {loglog(ops, mins):.2f} | {k_top:.2f} | "
                 + " | ".join(f"{1e3 * v:.1f}" for v in per) + " |")
    L.append("")
    if source == "torch":
        L.append("Import time (torch.export + IR import, once per size): "
                 + ", ".join(f"{c.layers} layers {c.import_s:.1f} s" for c in cases) + ".")
        L.append("")
    return L


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="1,2,4,8,12,24", help="synthetic module sizes")
    ap.add_argument("--torch-layers", default="1,2,4,8,12,24",
                    help="torch GPT-2 sizes imported through torch.export ('' to skip)")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--pipeline", default=PIPELINE)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "pipeline_scaling.md"))
    args = ap.parse_args()
    t_start = time.perf_counter()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())

    groups: dict[str, list[Case]] = {}
    sizes = [int(x) for x in args.layers.split(",") if x.strip()]
    if sizes:
        groups["synthetic"] = [synthetic(n) for n in sizes]
    tsizes = [int(x) for x in args.torch_layers.split(",") if x.strip()]
    if tsizes:
        groups["torch"] = []
        for n in tsizes:
            print(f"importing torch GPT-2 with {n} layers ...", file=sys.stderr, flush=True)
            groups["torch"].append(torch_gpt2(n))
    all_cases = [c for cs in groups.values() for c in cs]
    for c in all_cases:  # one untimed run each: imports, caches
        run_once(c, args.pipeline)
        c.pass_samples.clear()
        c.total_samples.clear()
        c.wall_samples.clear()
    for r in range(args.repeats):
        print(f"round {r + 1}/{args.repeats}", file=sys.stderr, flush=True)
        order = all_cases if r % 2 == 0 else all_cases[::-1]
        for c in order:
            run_once(c, args.pipeline)

    command = "python benchmarks/pipeline_scaling.py" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])
    header = (f"Pipeline: `{args.pipeline}`. Machine: {platform.machine()}, {os.cpu_count()} cores, load average "
              f"at start {load} (shared; single Python thread). Median of {args.repeats} interleaved repeats on fresh "
              "clones, after one untimed run each. Pass times are PassManager timings; `verify` is the IR verification "
              "the pass manager runs after every pass (not in the total). Run took "
              f"{(time.perf_counter() - t_start) / 60:.1f} min.")
    L = ["# Optimising-pipeline time against depth", "", f"Command: `{command}`", "", header, ""]
    for source, cases in groups.items():
        L += section(source, cases, args.pipeline)
    text = "\n".join(L)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
