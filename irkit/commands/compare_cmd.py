"""``irkit compare``: the same model side by side, IR op by IR op, on several targets.

For every heavy IR op (matmul, attention, fused regions, norms...) and every target: how
many kernels implement it and their time, measured with the target's own profiler where the
target runs here, else estimated from the cost model of the target's hardware spec (and the
reason).  A totals row per target, full source locations and the artifact folders in a
footer.  Formats: ``table`` (default; wraps targets into groups that fit ``--width``),
``wide`` (one table), ``long`` (one block per op, every kernel by name and file), ``csv``.
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import shutil
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
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

FORMATS = ("table", "wide", "long", "csv")


def _compare_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help=INPUT_HELP)
    add_pipeline_args(p)
    p.add_argument("--targets", required=True, help="comma-separated target names (see `irkit list-targets`)")
    p.add_argument("--bind", help="values of symbolic dims, e.g. B=1,S=128")
    p.add_argument("--artifacts", default="out/compare", help="folder for each target's `irkit lower` output")
    p.add_argument("--format", default="table", choices=FORMATS,
                   help="table: fits --width, targets wrapped into groups (default); wide: one table; "
                        "long: one block per op with every kernel; csv: one row per op and target")
    p.add_argument("--width", type=int, default=None,
                   help="columns for table output (default: the terminal's, 120 when not a terminal)")
    p.add_argument("--markdown", dest="md_out", metavar="FILE", help="also write a Markdown table")
    p.add_argument("--seed", type=int, default=0, help="seed for the random inputs that are profiled")


@dataclass
class Cell:
    """One IR op on one target."""

    kernels: list[Any] = field(default_factory=list)
    seconds: float | None = None
    source: str = ""  # "measured" | "estimated" | ""
    reason: str = ""  # why estimated (or why there is no time)
    est: Any = None  # the OpEstimate, when the target has a spec

    def time_text(self) -> str:
        return _fmt_time(self.seconds) if self.seconds is not None else "-"

    def short(self) -> str:
        """``12.3µs m ×3``: time, m(easured)/e(stimated), kernel count when more than one."""
        if self.seconds is None:
            t = "no kernel" if not self.kernels else "no time"
        else:
            flag = "m" if self.source == "measured" else ("e*" if "profiler has no" in self.reason else "e")
            t = f"{self.time_text()} {flag}"
        return t + (f" ×{len(self.kernels)}" if len(self.kernels) > 1 else "")


@dataclass
class TargetResult:
    name: str
    spec: str | None
    status: str = ""
    dir: Path | None = None
    error: str | None = None
    kernels: list[Any] = field(default_factory=list)
    compile_seconds: float | None = None
    measured: dict[str, float] = field(default_factory=dict)
    measured_total: float | None = None
    estimated: dict[str, Any] = field(default_factory=dict)
    estimated_total: float | None = None
    estimate_reason: str = ""
    files: list[str] = field(default_factory=list)

    @property
    def ran(self) -> bool:
        return self.measured_total is not None


def _fmt_time(s: float) -> str:
    if s < 1e-6:
        return f"{s * 1e9:.1f}ns"
    if s < 1e-3:
        return f"{s * 1e6:.1f}µs"
    if s < 1.0:
        return f"{s * 1e3:.2f}ms"
    return f"{s:.2f}s"


def _short_path(path: str) -> str:
    """An installed package's file from its package folder, a file under the working folder
    relative to it, any other path as it is."""
    for marker in ("/site-packages/", "/dist-packages/"):
        i = path.rfind(marker)
        if i >= 0:
            return path[i + len(marker):]
    if not os.path.isabs(path):
        return path
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel


def location_text(loc: Any) -> str:
    """An op's source locations in one line: the names at one file line together
    (``diff, ne_1, cumsum at transformers/models/llama/modeling_llama.py:382``), lines in
    the order first met, joined by ``; ``; paths as :func:`_short_path` writes them."""
    groups: dict[tuple[str, int, int] | str, list[str]] = {}
    for leaf in loc.leaves():
        if leaf.file is None:
            groups.setdefault(leaf.short(), [])
        else:
            names = groups.setdefault((leaf.file, leaf.line, leaf.col), [])
            if leaf.name and leaf.name not in names:
                names.append(leaf.name)
    parts = []
    for key, names in groups.items():
        if isinstance(key, str):
            parts.append(key)
            continue
        file, line, col = key
        base = f"{_short_path(file)}:{line}" + (f":{col}" if col else "")
        parts.append(f"{', '.join(names)} at {base}" if names else base)
    return "; ".join(parts) or "unknown location"


def _why_estimated(t: Any, av: Any, spec: str | None) -> str:
    """``estimated: tpu-v5e spec, no device (...)``."""
    if not spec:
        why = av.reason or ("target unavailable here" if not av.can_compile else "no device")
        return f"not measured ({why}) and no hardware spec to estimate from"
    base = f"estimated: {spec} spec"
    if not av.can_compile:
        return f"{base}, target unavailable here ({av.reason})" if av.reason else f"{base}, target unavailable here"
    if not av.can_run:
        return f"{base}, no device ({av.reason})" if av.reason else f"{base}, no device"
    return f"{base}, no profiler for this target"


def collect(m: Any, targets: list[Any], b: dict[str, int], xs: list[np.ndarray], root: Path) -> list[TargetResult]:
    """Lower ``m`` for each target, write its artifacts under ``root/NAME``, profile it where it
    runs here, and estimate it from its spec."""
    from irkit.commands.bench_cmd import _per_op
    from irkit.fileio import atomic_write
    from irkit.targets.estimate import estimate
    from irkit.text.printer import Printer

    out = []
    for t in targets:
        av = t.availability()
        r = TargetResult(t.name, t.spec, av.label)
        if t.spec:
            try:
                e = estimate(m, t.spec, b)
                r.estimated = {o.op: o for o in e.ops}
                r.estimated_total = e.seconds
            except Exception as ex:  # noqa: BLE001 - reported in the footer; the other targets go on
                r.error = f"estimate failed: {str(ex).splitlines()[0][:200] if str(ex) else type(ex).__name__}"
        r.estimate_reason = _why_estimated(t, av, t.spec)
        if av.can_compile:
            try:
                art = t.lower(m, b)
                d = art.write(root / t.name)
                atomic_write(d / "module.mlir", Printer().module(m))
                r.dir = Path(d)
                r.kernels = list(art.kernels)
                r.compile_seconds = art.compile_seconds
                r.files = sorted(art.files)
                if av.can_run and art.profiler is not None:
                    calls = art.profiler(xs)
                    r.measured = _per_op(calls, art.kernels)
                    r.measured_total = float(sum(sec for _, sec in calls))
            except Exception as ex:  # noqa: BLE001
                msg = str(ex).splitlines()[0][:200] if str(ex) else type(ex).__name__
                r.error = f"lowering failed: {msg}"
        out.append(r)
    return out


def cell(r: TargetResult, oid: str) -> Cell:
    ks = [k for k in r.kernels if oid in k.ir_ops]
    c = Cell(kernels=ks, est=r.estimated.get(oid))
    if r.error and r.error.startswith("lowering failed") and not r.estimated:
        c.reason = r.error
        return c
    if oid in r.measured:
        c.seconds, c.source = r.measured[oid], "measured"
    elif c.est is not None:
        c.seconds, c.source = c.est.seconds, "estimated"
        c.reason = ("estimated: ran here, but the profiler has no kernel call for this op "
                    f"(folded into another kernel); {r.spec} spec") if r.ran else r.estimate_reason
    else:
        c.reason = ("ran here, but the profiler has no kernel call for this op and the target has no hardware "
                    "spec to estimate from") if r.ran else r.estimate_reason
    return c


def total_cell(r: TargetResult) -> Cell:
    c = Cell(kernels=list(r.kernels))
    if r.measured_total is not None:
        c.seconds, c.source = r.measured_total, "measured"
    elif r.estimated_total is not None:
        c.seconds, c.source, c.reason = r.estimated_total, "estimated", r.estimate_reason
    return c


def _wrap(text: str, width: int, indent: str) -> list[str]:
    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_long_words=True,
                         break_on_hyphens=False) or [""]


def render_table(rows: list[tuple[str, int, list[Cell]]], totals: list[Cell], results: list[TargetResult],
                 width: int | None) -> list[str]:
    """Rows of (op id, location footnote, cells); targets wrapped into groups of columns that
    fit ``width`` (None: one group)."""
    opw = max([len("IR op"), len("total (all ops)")] + [len(o) for o, _, _ in rows])
    locw = max([len("loc")] + [len(f"[{n}]") for _, n, _ in rows])
    colw = [max([len(r.name)] + [len(cs[i].short()) for _, _, cs in rows] + [len(totals[i].short())])
            for i, r in enumerate(results)]
    groups: list[list[int]] = []
    used = opw + 2 + locw
    for i, w in enumerate(colw):
        if groups and (width is None or used + 2 + w <= width):
            groups[-1].append(i)
            used += 2 + w
        else:
            groups.append([i])
            used = opw + 2 + locw + 2 + w
    lines: list[str] = []
    for gi, g in enumerate(groups):
        if gi:
            lines.append("")
        head = f"{'IR op':<{opw}}  {'loc':<{locw}}" + "".join(f"  {results[i].name:>{colw[i]}}" for i in g)
        lines += [head, "-" * len(head)]
        for oid, n, cs in rows:
            lines.append(f"{oid:<{opw}}  {f'[{n}]':<{locw}}" + "".join(f"  {cs[i].short():>{colw[i]}}" for i in g))
        lines.append("-" * len(head))
        lines.append(f"{'total (all ops)':<{opw}}  {'':<{locw}}"
                     + "".join(f"  {totals[i].short():>{colw[i]}}" for i in g))
    return lines


def render_footer(results: list[TargetResult], locs: list[str], width: int) -> list[str]:
    w = width
    out = [""]
    out += _wrap("times: m = measured here with the target's profiler (a kernel's time counts for every IR op it "
                 "implements); e = estimated from the cost model of the target's hardware spec (the reason is "
                 "under targets); e* = estimated although the target ran here: the profiler has no kernel call "
                 "for the op (folded into another kernel); ×N = the op runs as N kernels; total = every kernel "
                 "of the module", w, "  ")
    out.append("targets:")
    nw = max(len(r.name) for r in results)
    for r in results:
        if r.ran:
            how = f"measured here ({r.status})"
        else:
            how = r.estimate_reason
        bits = [how]
        if r.kernels or r.compile_seconds is not None:
            bits.append(f"{len(r.kernels)} kernels, compiled in {r.compile_seconds or 0.0:.2f} s")
        if r.error:
            bits.append(r.error)
        out += _wrap(f"  {r.name:<{nw}}  " + "; ".join(bits), w, " " * (nw + 4))
    out.append("artifacts:")
    for r in results:
        files = list(dict.fromkeys(r.files + ["manifest.json", "module.mlir"]))
        where = f"{r.dir}/ ({', '.join(files)})" if r.dir else "(none: not compiled here)"
        out += _wrap(f"  {r.name:<{nw}}  {where}", w, " " * (nw + 4))
    out.append("locations:")
    nl = len(f"[{len(locs)}]")
    for i, loc in enumerate(locs, 1):
        out += _wrap(f"  {f'[{i}]':<{nl}}  {loc}", w, " " * (nl + 4))
    return out


def render_long(ops: list[tuple[str, str]], cells: dict[str, list[Cell]], totals: list[Cell],
                results: list[TargetResult], width: int) -> list[str]:
    w = width
    nw = max(len(r.name) for r in results)
    out: list[str] = []

    def block(c: Cell, r: TargetResult) -> list[str]:
        if c.seconds is not None:
            line = f"{c.time_text()} {c.source}"
        else:
            line = "no time"
        if c.reason and c.reason == r.estimate_reason:
            line += f" ({r.spec} spec; why: see targets below)" if r.spec else " (see targets below)"
        elif c.reason:
            line += f" ({c.reason.removeprefix('estimated: ')})"
        if c.est is not None:
            line += f"; model: {c.est.flops / 1e6:.3g} MFLOP, {c.est.bytes / 1e6:.3g} MB, {c.est.bound}"
        n = len(c.kernels)
        lines = _wrap(f"  {r.name:<{nw}}  {line}", w, " " * (nw + 4))
        if n:
            names = ", ".join(k.name + (f" ({r.dir / k.file if r.dir else k.file})" if k.file else "")
                              for k in c.kernels)
            lines += _wrap(f"  {'':<{nw}}  {n} kernel{'s' if n > 1 else ''}: {names}", w, " " * (nw + 4))
        else:
            lines.append(f"  {'':<{nw}}  " + ("no kernel of its own" if r.dir is not None else "not compiled here"))
        return lines

    for oid, loc in ops:
        out += _wrap(f"{oid}  at {loc}", w, "    ")
        for i, r in enumerate(results):
            out += block(cells[oid][i], r)
        out.append("")
    out.append("total (all ops)")
    for i, r in enumerate(results):
        c = totals[i]
        t = f"{c.time_text()} {c.source}" if c.seconds is not None else "no time"
        out += _wrap(f"  {r.name:<{nw}}  {t}, {len(c.kernels)} kernels", w, " " * (nw + 4))
    return out


def render_csv(ops: list[tuple[str, str]], cells: dict[str, list[Cell]], totals: list[Cell],
               results: list[TargetResult]) -> str:
    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    wr.writerow(["op", "loc", "target", "kernels", "kernel_names", "files", "seconds", "source", "reason",
                 "est_seconds", "est_flops", "est_bytes", "est_bound", "artifacts"])
    for oid, loc in [*ops, ("total", "")]:
        for i, r in enumerate(results):
            c = totals[i] if oid == "total" else cells[oid][i]
            per_op = oid != "total"
            wr.writerow([oid, loc, r.name, len(c.kernels), ";".join(k.name for k in c.kernels) if per_op else "",
                         ";".join(k.file for k in c.kernels if k.file) if per_op else "",
                         "" if c.seconds is None else f"{c.seconds:.6g}", c.source, c.reason,
                         "" if c.est is None else f"{c.est.seconds:.6g}", "" if c.est is None else f"{c.est.flops:.6g}",
                         "" if c.est is None else f"{c.est.bytes:.6g}", "" if c.est is None else c.est.bound,
                         str(r.dir) if r.dir else ""])
    return buf.getvalue()


def render_markdown(ops: list[tuple[str, str]], cells: dict[str, list[Cell]], totals: list[Cell],
                    results: list[TargetResult]) -> str:
    def md(c: Cell, r: TargetResult) -> str:
        parts = [", ".join(k.name for k in c.kernels) if c.kernels else "(no kernel)"]
        if c.seconds is not None:
            parts.append(f"{c.seconds * 1e6:.2f} µs {c.source}" + (f" ({c.reason.removeprefix('estimated: ')})"
                                                                   if c.source == "estimated" and c.reason else ""))
        else:
            parts.append("-")
        if c.est is not None:
            parts.append(f"{c.est.flops / 1e6:.2f} MFLOP, {c.est.bytes / 1e6:.3f} MB, {c.est.bound}")
        if r.dir is not None:
            parts += [str(r.dir / k.file) for k in c.kernels if k.file]
        return "<br>".join(p.replace("|", "\\|") for p in parts)

    lines = ["| IR op | loc | " + " | ".join(r.name for r in results) + " |",
             "|---|---|" + "---|" * len(results)]
    for oid, loc in ops:
        lines.append(f"| {oid} | {loc} | " + " | ".join(md(cells[oid][i], r) for i, r in enumerate(results)) + " |")
    lines.append("| total (all ops) | | " + " | ".join(
        (f"{t.seconds * 1e6:.2f} µs {t.source}, " if t.seconds is not None else "") + f"{len(t.kernels)} kernels"
        for t in totals) + " |")
    return "\n".join(lines) + "\n"


@command("compare", "the same model side by side: each fused region's kernels and times on each target")
@args_for(_compare_args)
def cmd_compare(args: argparse.Namespace) -> int:
    from irkit.commands.bench_cmd import _HEAVY
    from irkit.commands.targets_cmd import checked_bindings
    from irkit.fileio import atomic_write
    from irkit.interp import default_bindings, random_inputs
    from irkit.ir.verify import verify
    from irkit.passmanager import run_pipeline
    from irkit.targets.base import op_ids
    from irkit.targets.registry import get_target

    names = [t.strip() for t in args.targets.split(",") if t.strip()]
    if not names:
        raise InputError("--targets: name at least one target (see `irkit list-targets`)")
    if args.width is not None and args.width < 40:
        raise InputError(f"--width {args.width}: use at least 40 columns")
    targets = [get_target(n) for n in names]  # an unknown name fails before a slow import
    load_plugins(args)
    m = read_input_module(args.input)
    verify(m)
    if args.pipeline:
        run_pipeline(m, args.pipeline)
    b = default_bindings(m.entry, checked_bindings(m.entry, args.bind))
    xs = random_inputs(m.entry, args.seed, b)
    ids = op_ids(m)
    heavy = [op for op in m.entry.body if op.name in _HEAVY]
    results = collect(m, targets, b, xs, Path(args.artifacts))

    locs: list[str] = []
    rows = []
    ops = []
    cells: dict[str, list[Cell]] = {}
    for op in heavy:
        oid = ids[id(op)]
        full = location_text(op.loc)
        if full not in locs:
            locs.append(full)
        cells[oid] = [cell(r, oid) for r in results]
        rows.append((oid, locs.index(full) + 1, cells[oid]))
        ops.append((oid, full))
    totals = [total_cell(r) for r in results]

    if args.width is not None:
        width = args.width
    else:
        width = shutil.get_terminal_size((120, 24)).columns if sys.stdout.isatty() else 120
    title = f"irkit compare: {len(heavy)} heavy ops of @{m.entry.name} on {', '.join(names)}; dims " + \
        (", ".join(f"{k}={v}" for k, v in b.items()) or "static")
    if args.format == "csv":
        sys.stdout.write(render_csv(ops, cells, totals, results))
    else:
        lines = _wrap(title, width, "  ")
        if args.format == "long":
            lines += [""] + render_long(ops, cells, totals, results, width)
            lines += render_footer(results, [], width)[:-1]  # the locations are inline
        else:
            lines += [""] + render_table(rows, totals, results, width if args.format == "table" else None)
            lines += render_footer(results, locs, width)
        sys.stdout.write("\n".join(lines) + "\n")
    if args.md_out:
        atomic_write(args.md_out, render_markdown(ops, cells, totals, results))
    return 0


__all__ = ["FORMATS", "Cell", "TargetResult", "cmd_compare", "collect", "location_text"]
