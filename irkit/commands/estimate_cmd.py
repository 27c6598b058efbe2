"""``irkit estimate``: the analytic cost of a module on a hardware description."""

from __future__ import annotations

import argparse
import json
import sys

from irkit.cli import INPUT_HELP, add_pipeline_args, args_for, command, load_plugins, read_input_module
from irkit.errors import InputError


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help=INPUT_HELP)
    add_pipeline_args(p)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--target", help="a hardware description name (tpu-v5e, h100, ...) or a target name")
    g.add_argument("--target-spec", help="your own hardware description (TOML)")
    p.add_argument("--bind", help="values of symbolic dims, e.g. B=1,S=128")
    p.add_argument("--json", action="store_true", help='print {"ops": [...], "total": {...}}')


def resolve_spec(name: str) -> str:
    """A spec name from a spec or target name (xla-tpu-v5e -> tpu-v5e)."""
    from irkit.targets.hwspec import list_specs

    if name in list_specs():
        return name
    from irkit.targets.registry import TARGETS, get_target, load_targets

    load_targets()
    if name in TARGETS:
        spec = get_target(name).spec
        if spec:
            return spec
    raise InputError(f"unknown hardware '{name}'; specs: {', '.join(list_specs())}")


@command("estimate", "analytic cost per op and in total on a hardware description")
@args_for(_args)
def cmd_estimate(args: argparse.Namespace) -> int:
    from irkit.commands.targets_cmd import checked_bindings
    from irkit.ir.verify import verify
    from irkit.passmanager import run_pipeline
    from irkit.targets.estimate import estimate, peak_for
    from irkit.targets.hwspec import SpecError, load_spec

    load_plugins(args)
    m = read_input_module(args.input)
    verify(m)
    if args.pipeline:
        run_pipeline(m, args.pipeline)
    spec = args.target_spec if args.target_spec else resolve_spec(args.target)
    try:
        hw = load_spec(spec)
    except SpecError as e:
        raise InputError(str(e)) from None
    est = estimate(m, hw, checked_bindings(m.entry, args.bind))
    peak = peak_for(m, hw)
    if args.json:
        print(json.dumps(est.as_json(peak), indent=2, default=float))
        return 0
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{hw.name} ({hw.kind}), dims {est.bindings}")
    for c in ("op", "loc", "GFLOP", "MB", "FLOP/B", "cycles", "µs", "bound", "util"):
        t.add_column(c, justify="right" if c not in ("op", "loc", "bound") else "left")
    for o in est.ops:
        t.add_row(o.op, o.loc[:40], f"{o.flops / 1e9:.4f}", f"{o.bytes / 1e6:.3f}", f"{o.intensity:.1f}",
                  f"{o.cycles:.0f}" if o.cycles is not None else "-", f"{o.seconds * 1e6:.2f}", o.bound,
                  f"{100 * o.utilization:.1f}%")
    tot = est.total(peak)
    t.add_row("total", "", f"{tot['flops'] / 1e9:.4f}", f"{tot['bytes'] / 1e6:.3f}", f"{tot['intensity']:.1f}",
              "", f"{tot['seconds'] * 1e6:.2f}", "", f"{100 * tot['utilization']:.1f}%")
    Console(width=None if sys.stdout.isatty() else 180).print(t)
    return 0
