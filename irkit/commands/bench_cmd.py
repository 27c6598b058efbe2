"""``irkit bench`` and ``irkit show``, and the per-op timing helpers ``irkit compare``
(irkit/commands/compare_cmd.py) uses."""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from irkit.cli import (
    INPUT_HELP,
    add_pipeline_args,
    args_for,
    command,
    load_plugins,
    read_input_module,
)
from irkit.errors import InputError


def _ints(text: str | None) -> list[int]:
    if not text:
        return []
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"expected comma-separated integers, got '{text}'") from None


def _prepare(args: argparse.Namespace) -> Any:
    from irkit.ir.verify import verify
    from irkit.passmanager import run_pipeline

    load_plugins(args)
    m = read_input_module(args.input)
    verify(m)
    if args.pipeline:
        run_pipeline(m, args.pipeline)
    return m


def _symbols(m: Any) -> set[str]:
    out: set[str] = set()
    for a in m.entry.args:
        out |= a.type.symbols
    return out


def _bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help=INPUT_HELP)
    add_pipeline_args(p)
    p.add_argument("--targets", required=True)
    p.add_argument("--batch", default="", help="values of the batch symbol B, e.g. 1,8")
    p.add_argument("--seq", default="", help="values of the sequence symbol S, e.g. 128,512")
    p.add_argument("--bind", help="other symbolic dims, e.g. T=16")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--price", help="dollars per hour per target or spec: tpu-v5e=1.2,h200=3.5 or a TOML file")
    p.add_argument("--json", dest="json_out", metavar="FILE")
    p.add_argument("--csv", dest="csv_out", metavar="FILE")
    p.add_argument("--markdown", dest="md_out", metavar="FILE")
    p.add_argument("--plot", metavar="DIR", help="write PNG plots here")
    p.add_argument("--breakdown", action="store_true",  # irkit/breakdown.py
                   help="split each measured latency into kernels (per kernel), per-call overhead and engine "
                        "other (docs/performance.md)")
    from irkit.commands.generate_cmd import add_bench_generate_args  # --generate and its options

    add_bench_generate_args(p)


_UNITS = {
    "compile_seconds": "s", "latency_median": "s", "latency_p90": "s", "latency_p99": "s",
    "spread": "interquartile range / median", "throughput": "sequences/s", "achieved_flops": "FLOP/s",
    "roofline_fraction": "estimated time / measured time", "estimated_seconds": "s", "peak_live_bytes": "bytes",
    "cost_per_million": "USD per 1M sequences", "flops": "FLOP",
}
_COLUMNS = ("target", "B", "S", "source", "compile (s)", "median (ms)", "p90 (ms)", "p99 (ms)",
            "spread (% of median)", "throughput (seq/s)", "achieved (GFLOP/s)", "of roofline (%)",
            "price (USD/hour)", "cost (USD per 1M seq)")


def _row_label(r: Any, spec_of: dict[str, str | None], avail_of: dict[str, Any],
               prices: dict[str, float]) -> dict[str, Any]:
    """Where a row's numbers come from: measured on the target here, or estimated from spec S."""
    spec = spec_of.get(r.target)
    if r.measured:
        kind, basis = "measured", f"measured on {r.target} here"
    elif r.latency_median:
        kind, basis = "estimated", f"estimated from spec {spec}"
    else:
        kind, basis = ("failed" if r.status != "ok" else "no estimate"), (r.note or "no spec to estimate from")
    from irkit.bench import price_for

    price = price_for(r.target, spec, prices)
    price_src = None
    if price is not None:
        price_src = "--price " + (r.target if r.target in prices else str(spec))
    note = ""
    av = avail_of.get(r.target)
    if r.cost_per_million is not None and not r.measured:
        if av is not None and not av.can_compile:
            state = "unavailable in `irkit list-targets`"
        else:
            state = "compile only here"
        reason = (av.reason or "").split(" (")[0].split("; ")[0][:120] if av is not None else ""
        note = (f"USD per 1M seq is an estimate from spec {spec} at {price:g} USD/hour ({r.target}: {state}"
                + (f": {reason}" if reason else "") + ")")
    return {"target": r.target, "batch": r.batch, "seq": r.seq, "kind": kind, "basis": basis, "spec": spec,
            "price_usd_per_hour": price, "price_source": price_src, "price_note": note}


def _cells(r: Any, lab: dict[str, Any]) -> list[str]:
    def f(x: float | None, k: float = 1.0, fmt: str = ".3g") -> str:
        return "-" if x is None else format(x * k, fmt)

    src = lab["kind"] if lab["kind"] not in ("measured", "estimated") else (
        "measured here" if lab["kind"] == "measured" else f"estimated (spec {lab['spec']})")
    cost = f(r.cost_per_million, 1, ".4g")
    if r.cost_per_million is not None and lab["kind"] == "estimated":
        cost += " (est.)"
    return [r.target, str(r.batch), str(r.seq), src, f(r.compile_seconds), f(r.latency_median, 1e3),
            f(r.latency_p90, 1e3), f(r.latency_p99, 1e3), f(r.spread, 100, ".0f"), f(r.throughput),
            f(r.achieved_flops, 1e-9), f(r.roofline_fraction, 100, ".1f"), f(lab["price_usd_per_hour"], 1, ".2f"),
            cost]


def _break_even_line(e: dict[str, Any], by_key: dict[tuple[str, int, int], dict[str, Any]]) -> str:
    line = (f"B={e['batch']} S={e['seq']}: {e['faster']} compiles slower than {e['slower']} but wins after "
            f"{e['inferences_to_break_even']} inferences")
    est = [f"{t}'s latency is estimated from spec {by_key[(t, e['batch'], e['seq'])]['spec']}"
           for t in e.get("estimated", [])]
    if est:
        line += " (" + "; ".join(est) + "; compile times measured here)"
    else:
        line += " (both measured here)"
    return line


def _markdown(rows: Sequence[Any], labels: Sequence[dict[str, Any]], be: Sequence[dict[str, Any]],
              by_key: dict[tuple[str, int, int], dict[str, Any]]) -> str:
    out = ["| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
    for r, lab in zip(rows, labels):
        out.append("| " + " | ".join(_cells(r, lab)) + " |")
    notes = [f"- {r.target} B={r.batch} S={r.seq}: {lab['price_note']}" for r, lab in zip(rows, labels)
             if lab["price_note"]]
    notes += [f"- {_break_even_line(e, by_key)}" for e in be]
    return "\n".join(out + ([""] + notes if notes else [])) + "\n"


@command("bench", "latency, throughput, compile time and cost per target and shape")
@args_for(_bench_args)
def cmd_bench(args: argparse.Namespace) -> int:
    if getattr(args, "generate", False):  # generation with a KV cache: irkit/commands/generate_cmd.py
        from irkit.commands.generate_cmd import bench_generate

        return bench_generate(args)
    from rich.console import Console
    from rich.progress import Progress

    from irkit.bench import (
        BenchRow,
        KernelPoint,
        break_even,
        measure,
        parse_prices,
        peak_live_bytes,
        plot_all,
        price_for,
        rows_csv,
        rows_json,
        shape_bindings,
    )
    from irkit.commands.targets_cmd import checked_bindings
    from irkit.fileio import atomic_write
    from irkit.interp import default_bindings, random_inputs
    from irkit.ir.ops import op_cost
    from irkit.targets.estimate import estimate, peak_for
    from irkit.targets.hwspec import load_spec
    from irkit.targets.registry import get_target

    targets = [get_target(t.strip()) for t in args.targets.split(",") if t.strip()]  # before a slow import
    m = _prepare(args)
    fn = m.entry
    syms = _symbols(m)
    batches, seqs = _ints(args.batch), _ints(args.seq)
    for name, vals in (("B", batches), ("S", seqs)):
        if vals and name not in syms:
            raise InputError(f"--{'batch' if name == 'B' else 'seq'} sets the symbolic dim '{name}', but the "
                             f"module's inputs have {sorted(syms) or 'no symbolic dims'}")
    extra = checked_bindings(fn, args.bind)
    base = default_bindings(fn, extra)
    shapes = [(b, s) for b in (batches or [base.get("B", 1)]) for s in (seqs or [base.get("S", 0)])]
    prices = parse_prices(args.price)
    if prices:
        from irkit.bench import check_price_keys
        from irkit.targets.hwspec import list_specs
        from irkit.targets.registry import TARGETS, load_targets

        load_targets()
        check_price_keys(prices, sorted(TARGETS) + list_specs())
    rows: list[BenchRow] = []
    breakdowns: list[Any] = []  # irkit/breakdown.py
    points: list[KernelPoint] = []
    peaks: dict[str, tuple[float, float]] = {}
    spec_of = {t.name: t.spec for t in targets}
    avail_of = {t.name: t.availability() for t in targets}
    console = Console(stderr=True)
    interrupted = False
    try:
        with Progress(console=console, transient=True, disable=not console.is_terminal) as prog:
            task = prog.add_task("benchmarking", total=len(shapes) * len(targets))
            for b, s in shapes:
                bind = shape_bindings(base, syms, b, s)
                xs = random_inputs(fn, args.seed, bind)
                flops = sum(op_cost(op, bind).flops for op in fn.body if op.name != "func.return")
                live = peak_live_bytes(m, bind)
                for t in targets:
                    prog.update(task, description=f"{t.name} B={b} S={s}")
                    row = BenchRow(t.name, b, s, False, None, None, flops=flops, peak_live_bytes=live)
                    av = t.availability()
                    est = None
                    if t.spec:
                        try:
                            est = estimate(m, t.spec, bind)
                            row.estimated_seconds = est.seconds
                            hw = load_spec(t.spec)
                            peaks[t.name] = (peak_for(m, hw), hw.bandwidth_bytes_per_s or 1e12)
                            points.extend(KernelPoint(t.name, o.op, o.flops, o.bytes, o.seconds) for o in est.ops)
                        except Exception as e:  # noqa: BLE001 - an estimate failure is reported, not fatal
                            row.note = f"estimate failed: {e}"
                    if av.can_compile:
                        try:
                            t0 = time.perf_counter()
                            art = t.lower(m, bind)
                            row.compile_seconds = art.compile_seconds or (time.perf_counter() - t0)
                        except Exception as e:  # noqa: BLE001
                            row.status, row.note = "lowering failed", str(e).splitlines()[0][:200]
                            rows.append(row)
                            prog.advance(task)
                            continue
                        if av.can_run:
                            tm = measure(functools.partial(t.run, art, xs), warmup=args.warmup,
                                         repeats=args.repeats)
                            row.measured = True
                            row.latency_median = tm.median
                            row.latency_p90, row.latency_p99 = tm.percentile(90), tm.percentile(99)
                            row.spread = tm.spread
                            if args.breakdown:  # irkit/breakdown.py
                                from irkit.breakdown import breakdown
                                breakdowns.append((b, s, breakdown(t, art, xs, rounds=max(args.repeats, 5))))
                    if not row.measured and est is not None:
                        row.latency_median = est.seconds
                        row.note = row.note or ("estimated: " + (av.reason or "compile only"))
                    if row.latency_median:
                        row.throughput = b / row.latency_median
                        row.achieved_flops = flops / row.latency_median
                        if row.measured and row.estimated_seconds:
                            row.roofline_fraction = row.estimated_seconds / row.latency_median
                        pr = price_for(t.name, t.spec, prices)
                        if pr is not None:
                            row.cost_per_million = pr / 3600.0 * row.latency_median / b * 1e6
                    rows.append(row)
                    prog.advance(task)
    except KeyboardInterrupt:
        interrupted = True
        console.print("interrupted: writing the results measured so far")
    labels = [_row_label(r, spec_of, avail_of, prices) for r in rows]
    from rich.table import Table

    tab = Table(title="irkit bench" + (" (partial)" if interrupted else ""))
    for c in _COLUMNS:
        tab.add_column(c)
    for r, lab in zip(rows, labels):
        tab.add_row(*_cells(r, lab))
    Console(width=None if sys.stdout.isatty() else 240).print(tab)
    for r in rows:
        if r.status != "ok" or not r.latency_median:
            why = r.note or "no hardware description to estimate from"
            print(f"{r.target} B={r.batch} S={r.seq}: {r.status}: {why}")
    for r, lab in zip(rows, labels):
        if lab["price_note"]:
            print(f"{r.target} B={r.batch} S={r.seq}: {lab['price_note']}")
    if breakdowns:  # irkit/breakdown.py
        from irkit.breakdown import render
        for bb, ss, bd in breakdowns:
            print(f"breakdown B={bb} S={ss} " + render(bd))
    be = break_even(rows)
    by_key = {(r.target, r.batch, r.seq): lab for r, lab in zip(rows, labels)}
    for pair in be:
        pair["estimated"] = [t for t in (pair["faster"], pair["slower"])
                             if by_key[(t, pair["batch"], pair["seq"])]["kind"] == "estimated"]
        print(_break_even_line(pair, by_key))
    extra_out = {"break_even": be, "interrupted": interrupted, "prices_per_hour": prices,
                 "labels": labels, "units": _UNITS}
    if breakdowns:  # irkit/breakdown.py
        extra_out["breakdown"] = [{"batch": bb, "seq": ss, **bd.as_dict()} for bb, ss, bd in breakdowns]
    if args.json_out:
        atomic_write(args.json_out, rows_json(rows, extra_out))
    if args.md_out:
        atomic_write(args.md_out, _markdown(rows, labels, be, by_key))
    if args.csv_out:
        atomic_write(args.csv_out, rows_csv(rows))
    if args.plot:
        for p in plot_all(rows, points, peaks, args.plot):
            print(f"plot: {p}")
    return 130 if interrupted else 0


_HEAVY = ("ik.matmul", "ik.contract", "ik.attention", "ik.fused", "ik.conv2d", "ik.softmax", "ik.layer_norm",
          "ik.rms_norm", "ik.gelu", "ik.silu", "ik.gather")


def _per_op(calls: Sequence[tuple[str, float]], kernels: Any) -> dict[str, float]:
    """Device-function calls spread over IR ops; a kernel's time goes to every IR op it implements.

    A function that several equal kernels share (TVM keeps one PrimFunc for equal layers) is called
    once per kernel, in program order: the i-th call is the i-th kernel's.  A function the target's
    compiler fused from several (TVM: ``fused_add_55_reshape_57``) belongs to the kernels whose
    functions it joins; when they are not one per call, the time is shared evenly."""
    import re

    def fns(k: Any) -> list[str]:
        return list(k.extra.get("functions", [k.name]))

    n_calls: dict[str, int] = {}
    for name, _ in calls:
        n_calls[name] = n_calls.get(name, 0) + 1
    owners: dict[str, list[Any]] = {}
    for name in n_calls:
        owners[name] = [k for k in kernels if name in fns(k)] or [
            k for k in kernels if any(re.search(rf"(?:^|_){re.escape(f)}(?:_|$)", name) for f in fns(k))]
    seen: dict[str, int] = {}
    out: dict[str, float] = {}
    for name, sec in calls:
        i = seen[name] = seen.get(name, -1) + 1
        ks = owners[name]
        if len(ks) == n_calls[name]:
            ks = [ks[i]]
        for k in ks:
            for o in k.ir_ops:
                out[o] = out.get(o, 0.0) + sec / len(ks)
    return out


def _measured_op_times(art: Any, xs: list[np.ndarray]) -> dict[str, float]:
    """Per-IR-op seconds from the artifact's own profiler, where its target has one (the interpreter
    op by op, onnxruntime's profiler, each PrimFunc call of TVM's VM, XLA CPU's thunk events)."""
    return _per_op(art.profiler(xs), art.kernels) if art.profiler is not None else {}


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help=INPUT_HELP)
    add_pipeline_args(p)
    p.add_argument("-o", "--output", default="graph.svg", help="graph.svg, graph.png or graph.dot")
    p.add_argument("--max-ops", type=int, default=400, help="refuse to draw larger graphs (they are unreadable)")


@command("show", "draw the graph with fused regions grouped and coloured")
@args_for(_show_args)
def cmd_show(args: argparse.Namespace) -> int:
    from irkit.show import render

    m = _prepare(args)
    path = render(m, args.output, max_ops=args.max_ops)
    print(f"wrote {path}")
    return 0
