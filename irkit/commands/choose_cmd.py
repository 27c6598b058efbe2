"""``irkit choose``: which hardware serves a model cheapest at each batch and sequence length."""

from __future__ import annotations

import argparse
import json
import sys

from irkit.cli import INPUT_HELP, add_pipeline_args, args_for, command
from irkit.errors import InputError


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help=INPUT_HELP)
    add_pipeline_args(p)
    p.add_argument("--batch", default="", help="values of the batch symbol B, e.g. 1,8")
    p.add_argument("--seq", default="", help="values of the sequence symbol S, e.g. 64,512")
    p.add_argument("--bind", help="other symbolic dims, e.g. T=16")
    p.add_argument("--hardware", default="h100,h200,tpu-v5e,tpu-v6e,host-cpu",
                   help="hardware descriptions to compare (see targets/specs; host-cpu is measured here)")
    p.add_argument("--price", metavar="FILE",
                   help="TOML or JSON file of hardware = US dollars per hour (default: the spec's [price], "
                        "else example list prices, labelled as such)")
    p.add_argument("--latency-budget", type=float, metavar="MS",
                   help="only hardware whose latency per call (one batch) is at most MS milliseconds can win")
    p.add_argument("--requests", type=int, default=1_000_000, metavar="N",
                   help="requests served per compile: the compile time is amortised over N (default 1000000)")
    p.add_argument("--generate", action="store_true",
                   help="price decoding: cost per million generated tokens, each step reading the weights and "
                        "the KV cache (from the model's ik.attention ops) at HBM bandwidth")
    p.add_argument("--cpu-targets", default="xla-cpu,ort",
                   help="targets measured for host-cpu; the fastest counts (default xla-cpu,ort)")
    p.add_argument("--no-measure", action="store_true", help="estimate host-cpu from its spec too (no runs)")
    p.add_argument("--compile-here", action="store_true",
                   help="compile ahead of time here for hardware with a compile-only target (xla-tpu-*) and "
                        "amortise that measured compile time")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per measured shape")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    p.add_argument("--plot", metavar="FILE.png", help="cost per million against B and S per hardware")


def _ints(text: str, flag: str) -> list[int]:
    if not text:
        return []
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{flag}: expected comma-separated positive integers, got '{text}'") from None
    if any(v <= 0 for v in vals):
        raise InputError(f"{flag}: values must be positive, got '{text}'")
    return vals


@command("choose", "which hardware is cheapest per batch and sequence length (measured here, else estimated)")
@args_for(_args)
def cmd_choose(args: argparse.Namespace) -> int:
    from irkit.choose import evaluate, load_price_file, parse_hardware, plot
    from irkit.commands.bench_cmd import _prepare, _symbols
    from irkit.commands.targets_cmd import checked_bindings
    from irkit.interp import default_bindings

    if args.requests <= 0:
        raise InputError(f"--requests: must be a positive number of requests, got {args.requests}")
    if args.latency_budget is not None and not args.latency_budget > 0:
        raise InputError(f"--latency-budget: must be a positive number of milliseconds, got {args.latency_budget}")
    if args.repeats <= 0:
        raise InputError(f"--repeats: must be positive, got {args.repeats}")
    hardware = parse_hardware(args.hardware)
    batches, seqs = _ints(args.batch, "--batch"), _ints(args.seq, "--seq")
    prices = load_price_file(args.price, hardware) if args.price else {}
    cpu_targets = [t.strip() for t in args.cpu_targets.split(",") if t.strip()]
    if cpu_targets:
        from irkit.targets.registry import get_target

        for t in cpu_targets:
            get_target(t)  # an unknown name is a one-line error before the model is read
    m = _prepare(args)
    fn = m.entry
    syms = _symbols(m)
    for name, vals in (("B", batches), ("S", seqs)):
        if vals and name not in syms:
            raise InputError(f"--{'batch' if name == 'B' else 'seq'} sets the symbolic dim '{name}', but "
                             f"{args.input}'s inputs have {sorted(syms) or 'no symbolic dims'}; use --bind")
    base = default_bindings(fn, checked_bindings(fn, args.bind))
    shapes = [(b, s) for b in (batches or [base.get("B", 1)]) for s in (seqs or [base.get("S", 0)])]

    def progress(msg: str) -> None:
        if sys.stderr.isatty():
            sys.stderr.write(f"\r\033[Kchoose: {msg}")
            sys.stderr.flush()

    rep = evaluate(m, model=args.input, hardware=hardware, shapes=shapes, base_bindings=base, symbols=syms,
                   prices=prices, price_file=args.price, requests=args.requests,
                   latency_budget_ms=args.latency_budget, cpu_targets=cpu_targets, compile_here=args.compile_here,
                   generate=args.generate, repeats=args.repeats, seed=args.seed,
                   measure_cpu=not args.no_measure, progress=progress)
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
    if args.plot:
        plot(rep, args.plot)
    if args.json:
        print(json.dumps(rep.as_json(), indent=2, default=float))
        return 0
    _print_table(rep)
    if args.plot:
        print(f"plot: {args.plot}")
    return 0


def _print_table(rep: object) -> None:
    from rich.console import Console
    from rich.table import Table

    from irkit.choose import COST_UNIT, GEN_UNIT, ChoiceReport

    assert isinstance(rep, ChoiceReport)
    t = Table(title=f"irkit choose: {rep.model}, {rep.requests} requests per compile")
    cols = ["hardware", "B", "S", "kind", "latency ms", "seq/s", "bound", "compile s", "$/hour",
            f"{COST_UNIT}"]
    if rep.latency_budget_ms is not None:
        cols.append(f"<= {rep.latency_budget_ms:g} ms")
    if rep.generate:
        cols += ["KV cache MB", "decode step ms", "tokens/s", GEN_UNIT]
    for c in cols:
        t.add_column(c)
    for r in rep.rows:
        def f(x: float | None, k: float = 1.0, fmt: str = ".3g") -> str:
            return "-" if x is None else format(x * k, fmt)
        cells = [r.hardware, str(r.batch), str(r.seq), r.kind, f(r.latency_s, 1e3), f(r.throughput_seq_per_s),
                 r.bound, f(r.compile_s), f(r.price_usd_per_hour, 1, ".2f"),
                 f(r.cost_usd_per_million_requests, 1, ".4g")]
        if rep.latency_budget_ms is not None:
            cells.append("yes" if r.meets_budget else "no")
        if rep.generate:
            cells += [f(r.kv_cache_bytes, 1e-6), f(r.gen_step_s, 1e3), f(r.gen_tokens_per_s),
                      f(r.gen_cost_usd_per_million_tokens, 1, ".4g")]
        t.add_row(*cells)
    Console(width=None if sys.stdout.isatty() else 200).print(t)
    print("sources:")
    seen: set[tuple[str, str]] = set()
    for r in rep.rows:
        key = (r.hardware, r.basis)
        if key in seen:
            continue
        seen.add(key)
        print(f"  {r.hardware}: latency {r.basis}; compile {r.compile_basis}; "
              f"price ${r.price_usd_per_hour}/hour from {r.price_source}" if r.price_usd_per_hour else
              f"  {r.hardware}: latency {r.basis}; compile {r.compile_basis}; {r.price_source}")
    if rep.generate:
        print("  decode (every hardware): estimated from its spec: (weight bytes + KV-cache bytes) / memory "
              "bandwidth, or prefill FLOPs / S / peak if longer; KV cache = K and V of every ik.attention op")
    if rep.latency_budget_ms is not None:
        print(f"  budget: {'decode step' if rep.generate else 'latency of one call (one batch)'} "
              f"<= {rep.latency_budget_ms:g} ms")
    print("cheapest:")
    for p in rep.picks:
        print(f"  B={p.batch} S={p.seq}: {p.reason}")
    for n in rep.notes:
        print(f"note: {n}")
