"""IR core throughput: parse, print, verify and `canonicalize,cse,dce` on GPT-2-style modules.

Synthetic GPT-2-style modules of 1 to 96 layers (irkit.testing.blocks, exporter
spelling). For each size: median wall time of each stage over repeats, ops per
second, and the growth factor against the smallest size (linear growth means
time ratio <= 1.1 x op ratio).  Writes a markdown table to stdout and to
benchmarks/results/ir_scaling.md.

Run: python benchmarks/ir_scaling.py [--layers 1,12,24,48,96] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from irkit.ir.verify import verify
from irkit.passmanager import PassContext, parse_pipeline
from irkit.testing.blocks import gpt2_style_module
from irkit.text.parser import parse_module
from irkit.text.printer import Printer


CLOCK = time.perf_counter


def timed(fn, repeats: int) -> tuple[float, float]:
    ts = []
    for _ in range(repeats):
        t0 = CLOCK()
        fn()
        ts.append(CLOCK() - t0)
    med = statistics.median(ts)
    spread = (max(ts) - min(ts)) / med if med else 0.0
    return med, spread


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default="1,12,24,48,96")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cpu-time", action="store_true",
                    help="time with the process's CPU clock (use on a shared, loaded machine)")
    args = ap.parse_args()
    global CLOCK
    if args.cpu_time:
        CLOCK = time.process_time
    rows = []
    for n in [int(x) for x in args.layers.split(",")]:
        m = gpt2_style_module(layers=n, hidden=64, heads=4, vocab=128)
        pr = Printer(inline_resources=False)
        text = pr.module(m)
        res = {k: d.array for k, d in pr.resources.items()}
        ops = m.num_ops()
        t_parse = timed(lambda: parse_module(text, resources=res), args.repeats)
        t_print = timed(lambda: Printer(inline_resources=False).module(m), args.repeats)
        t_verify = timed(lambda: verify(m), args.repeats)

        def pipeline() -> None:
            c = parse_module(text, resources=res)
            t0 = CLOCK()
            for p in parse_pipeline("canonicalize,cse,dce"):
                p.run(c, PassContext())
            pipeline.t = CLOCK() - t0  # type: ignore[attr-defined]

        pts = []
        for _ in range(args.repeats):
            pipeline()
            pts.append(pipeline.t)  # type: ignore[attr-defined]
        med = statistics.median(pts)
        t_pipe = (med, (max(pts) - min(pts)) / med)
        rows.append((n, ops, t_parse, t_print, t_verify, t_pipe))
        print(f"layers={n} ops={ops} done", file=sys.stderr)
    base = rows[0]
    lines = [
        "| layers | ops | parse ms (ops/s) | print ms (ops/s) | verify ms (ops/s) | canonicalize,cse,dce ms (ops/s) | time growth / op growth (parse, print, verify, pipeline) |",
        "|---:|---:|---|---|---|---|---|",
    ]
    for n, ops, *ts in rows:
        cells = [f"{t[0] * 1e3:.1f} ±{t[1] * 50:.0f}% ({ops / t[0] / 1e3:.0f}k)" for t in ts]
        growth = ", ".join(f"{(t[0] / b[0]) / (ops / base[1]):.2f}" for t, b in zip(ts, base[2:]))
        lines.append(f"| {n} | {ops} | " + " | ".join(cells) + f" | {growth} |")
    table = "\n".join(lines)
    cmd = "python benchmarks/ir_scaling.py " + " ".join(sys.argv[1:])
    clock = "process CPU time" if args.cpu_time else "wall time"
    out = (f"Command: `{cmd.strip()}`\n\nMedian of {args.repeats} runs ({clock}), spread = (max-min)/median/2; "
           f"ops/s in thousands.\n\n{table}\n")
    print(out)
    Path(__file__).parent.joinpath("results").mkdir(exist_ok=True)
    Path(__file__).parent.joinpath("results", "ir_scaling.md").write_text(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
