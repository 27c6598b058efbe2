"""Fusion pipeline time against depth: GPT-2-style modules of 1 to 24 layers.

The modules come from :func:`irkit.testing.blocks.gpt2_style_module`: GPT-2
written the way an exporter spells it (decomposed layer norm, attention as
matmul / divide / causal ``where`` on a sliced buffer / decomposed softmax /
matmul, the tanh GELU as a formula; hidden 64, 4 heads, symbolic ``B`` and
``S``), so canonicalisation and every fusion have work to do.  For each depth
the pipeline ``canonicalize,fuse-attention,fuse-norm,fuse-activation,cse,dce``
runs on a fresh module under :class:`irkit.passmanager.PassManager`, with and
without its per-pass verification; repeats are interleaved across depths so
machine load hits every size alike.  Times are process CPU time by default
(the development machine is shared; ``--wall`` for wall clock).  Reported: the
median per pass, the total, time per layer, a least-squares fit
``total = a + b * layers`` with its R², and the fused-op counts (which must be
one attention, two layer norms and one GELU per layer, plus the final norm).

Writes markdown to stdout and to ``benchmarks/results/fusion_scaling.md``.

Run: python benchmarks/fusion_scaling.py [--layers 1,2,4,8,12,16,24] [--repeats 5] [--wall]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from irkit.fileio import atomic_write
from irkit.passmanager import PassContext, PassManager
from irkit.testing.blocks import gpt2_style_module

PIPELINE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,cse,dce"
PASSES = PIPELINE.split(",")


def run_once(layers: int, verify: bool, clock) -> tuple[float, dict[str, float], dict[str, int], int, int]:
    m = gpt2_style_module(layers=layers)
    before = m.num_ops()
    ctx = PassContext()
    pm = PassManager(PIPELINE, ctx=ctx, verify_each=verify)
    # PassManager times passes with perf_counter; for CPU time wrap each pass's run.
    per: dict[str, float] = {}
    for p in pm.passes:
        orig = p.run

        def timed(module, c, _orig=orig, _name=p.name):
            t0 = clock()
            r = _orig(module, c)
            per[_name] = per.get(_name, 0.0) + clock() - t0
            return r

        object.__setattr__(p, "run", timed)
    t0 = clock()
    pm.run(m)
    total = clock() - t0
    counts = {k: sum(1 for op in m.walk() if op.name == k)
              for k in ("ik.attention", "ik.layer_norm", "ik.gelu", "ik.softmax")}
    return total, per, counts, before, m.num_ops()


def fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    ss_res = sum((y - (a + b * x)) ** 2 for x, y in zip(xs, ys))
    ss_tot = sum((y - my) ** 2 for y in ys) or 1e-30
    return a, b, 1 - ss_res / ss_tot


def _span(lo_hi: tuple[float, float]) -> str:
    return f"{lo_hi[0]:.1f}–{lo_hi[1]:.1f}"


def _residuals(sizes: list[int], med: dict, a: float, b: float) -> str:
    """Largest relative gap between a measured median and the fitted line."""
    worst = max(sizes, key=lambda n: abs(med[n]["total"] - (a + b * n)) / med[n]["total"])
    gap = (med[worst]["total"] - (a + b * worst)) / med[worst]["total"]
    return f"largest {gap:+.0%} at {worst} layers"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="1,2,4,8,12,16,24")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--wall", action="store_true", help="wall clock instead of process CPU time")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "fusion_scaling.md"))
    args = ap.parse_args()
    clock = time.perf_counter if args.wall else time.process_time
    sizes = [int(x) for x in args.layers.split(",")]
    samples: dict[int, dict[str, list]] = {n: {"total": [], "verified": [], **{p: [] for p in PASSES}} for n in sizes}
    info: dict[int, tuple] = {}
    t_start = time.perf_counter()
    for n in sizes:  # one untimed run each (imports, caches)
        run_once(n, False, clock)
    for _ in range(args.repeats):
        for n in sizes:
            total, per, counts, before, after = run_once(n, False, clock)
            samples[n]["total"].append(total)
            for p in PASSES:
                samples[n][p].append(per.get(p, 0.0))
            samples[n]["verified"].append(run_once(n, True, clock)[0])
            info[n] = (counts, before, after)
        print(f"round done ({time.perf_counter() - t_start:.0f} s)", file=sys.stderr)
    med = {n: {k: statistics.median(v) * 1000 for k, v in d.items()} for n, d in samples.items()}
    spread = {n: {k: (min(v) * 1000, max(v) * 1000) for k, v in d.items()} for n, d in samples.items()}
    a, b, r2 = fit([float(n) for n in sizes], [med[n]["total"] for n in sizes])
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0, 0, 0)
    clock_name = "wall clock" if args.wall else "process CPU time"
    cmd = "python benchmarks/fusion_scaling.py " + " ".join(sys.argv[1:])
    lines = [
        "# Fusion pipeline time against depth", "",
        f"Command: `{cmd.strip()}`", "",
        (f"Pipeline `{PIPELINE}` on `irkit.testing.blocks.gpt2_style_module(layers=n)` (exporter spelling, hidden 64, "
        f"4 heads, symbolic B and S). Median of {args.repeats} interleaved runs on fresh modules, {clock_name}; "
        f"load average at the end {load[0]:.1f}. *total* is the passes alone; *with verify* adds the pass "
        "manager's IR verification after every pass."), "",
        "| layers | ops before | ops after | ik.attention | ik.layer_norm | ik.gelu | softmax left | "
        + " | ".join(f"{p} ms" for p in PASSES) + " | total ms (min–max) | with verify ms (min–max) | ms / layer |",
        "|---:|---:|---:|---:|---:|---:|---:|" + "---:|" * len(PASSES) + "---:|---:|---:|",
    ]
    for n in sizes:
        counts, before, after = info[n]
        d = med[n]
        lines.append(f"| {n} | {before} | {after} | {counts['ik.attention']} | {counts['ik.layer_norm']} | "
                     f"{counts['ik.gelu']} | {counts['ik.softmax']} | "
                     + " | ".join(f"{d[p]:.1f}" for p in PASSES)
                     + f" | {d['total']:.1f} ({_span(spread[n]['total'])}) | {d['verified']:.1f} "
                       f"({_span(spread[n]['verified'])}) | {d['total'] / n:.1f} |")
    last = sizes[-1]
    lines += ["", (f"Linear fit: total ≈ {a:.1f} ms + {b:.2f} ms × layers (R² = {r2:.3f}). "
              f"{last} layers: {med[last]['total']:.0f} ms ({med[last]['verified']:.0f} ms with verification) — "
              f"{'under' if med[last]['verified'] < 1000 else 'OVER'} the 1 s budget. "
              f"Residuals of the fit: {_residuals(sizes, med, a, b)}. The machine is shared and noisy; "
              "CPU time is less disturbed by other jobs than wall clock, not immune to them.")]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
