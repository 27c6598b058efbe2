"""``irkit tune``: choose the TVM CPU matmul tiles of a model by cost model, then by measurement."""

from __future__ import annotations

import argparse
import json
import sys

from irkit.cli import (
    INPUT_HELP,
    add_pipeline_args,
    args_for,
    command,
    load_plugins,
    read_input_module,
)
from irkit.errors import InputError

TUNABLE = ("tvm-llvm",)


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help=INPUT_HELP)
    add_pipeline_args(p)
    p.add_argument("--target", default="tvm-llvm", help="the target whose kernels are tuned (tvm-llvm)")
    p.add_argument("--bind", help="values of symbolic dims, e.g. B=1,S=128 (default: the module's examples)")
    p.add_argument("--store", required=True, help="results store (SQLite) that keeps the timings and the choices")
    p.add_argument("--budget", type=int, help="rank at most N candidates per matmul (default: the whole space)")
    p.add_argument("--top", type=int, default=4, help="time the K best-ranked candidates per matmul (default 4)")
    p.add_argument("--jobs", type=int, help="N local worker processes")
    p.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS", help="time on a Ray cluster")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per timing task")
    p.add_argument("-o", "--output", help="write the module with the chosen tiles set (IR), for `irkit lower`")
    p.add_argument("--json", action="store_true")


@command("tune", "search TVM CPU matmul tiles: rank by cost model, time the top K, store the choices")
@args_for(_args)
def cmd_tune(args: argparse.Namespace) -> int:
    from irkit.commands.targets_cmd import checked_bindings
    from irkit.interp import default_bindings
    from irkit.ir.verify import verify
    from irkit.passmanager import run_pipeline
    from irkit.sweep.executors import make_executor
    from irkit.sweep.store import Store
    from irkit.sweep.tune import apply_tuning, tune

    if args.target not in TUNABLE:
        raise InputError(f"--target {args.target}: tuning covers {', '.join(TUNABLE)} (its matmul tiles)")
    if args.top < 1 or (args.budget is not None and args.budget < 1):
        raise InputError("--top and --budget: give at least 1")
    load_plugins(args)
    m = read_input_module(args.input)
    verify(m)
    if args.pipeline:
        run_pipeline(m, args.pipeline)
    b = default_bindings(m.entry, checked_bindings(m.entry, args.bind))
    ex = make_executor(args.jobs, args.ray)
    try:
        with Store(args.store) as st:
            rep = tune(m, b, st, ex, target=args.target, top_k=args.top, budget=args.budget, timeout=args.timeout,
                       log=lambda s: print(s, file=sys.stderr, flush=True))
            if args.output:
                from irkit.cli import write_output_module

                n = apply_tuning(m, st, args.target, b)
                write_output_module(m, args.output)
                print(f"{n} matmul(s) tiled -> {args.output}", file=sys.stderr)
    finally:
        ex.close()
    if args.json:
        print(json.dumps({"sites": rep.sites, "ranked": rep.ranked, "measured": rep.measured,
                          "wall_seconds": rep.wall_seconds}, indent=2))
        return 0
    for s in rep.sites:
        sp = f"x{s['speedup']:.2f} vs default" if s["speedup"] else ""
        print(f"{s['a']} @ {s['b']}: tile {s['best_tile']} {s['best_ms']:.3f} ms {sp} "
              f"(cost-model rank {s['model_rank_of_best']})")
    print(f"{rep.ranked} candidates ranked, {rep.measured} timed, {rep.wall_seconds:.1f} s")
    return 0
