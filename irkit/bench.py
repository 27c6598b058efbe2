"""Timing harness and cross-target reports.

Design note: a measurement warms up, repeats, and keeps every sample, so the
report can give median, p90, p99 and a spread; compile time is measured apart
from run time and also amortised (the number of inferences after which a
target that compiles slower but runs faster has paid for its compile).  Where a
target cannot run here (TPU ahead-of-time, CUDA without a GPU) its latency is
the analytic estimate from its hardware description, and every such number is
marked ``estimated``.  Prices per hour are the user's (the docs' figures are
examples only).
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from irkit.ir.core import Module


@dataclass
class Timing:
    """Samples of one repeated measurement, in seconds."""

    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def percentile(self, q: float) -> float:
        return float(np.percentile(np.asarray(self.samples), q))

    @property
    def spread(self) -> float:
        """Interquartile range over the median (0 when a single sample)."""
        if len(self.samples) < 2:
            return 0.0
        q1, q3 = np.percentile(np.asarray(self.samples), [25, 75])
        return float((q3 - q1) / self.median) if self.median else 0.0


def measure(fn: Callable[[], Any], warmup: int = 2, repeats: int = 10, min_seconds: float = 0.0,
            max_seconds: float = 30.0) -> Timing:
    """Run ``fn`` ``warmup`` times, then at least ``repeats`` times (more until ``min_seconds``)."""
    for _ in range(warmup):
        fn()
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < repeats or (time.perf_counter() - start) < min_seconds:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
        if time.perf_counter() - start > max_seconds and len(samples) >= 3:
            break
    return Timing(samples)


@dataclass
class BenchRow:
    """One target at one shape."""

    target: str
    batch: int
    seq: int
    measured: bool
    compile_seconds: float | None
    latency_median: float | None
    latency_p90: float | None = None
    latency_p99: float | None = None
    spread: float | None = None
    throughput: float | None = None
    flops: float = 0.0
    achieved_flops: float | None = None
    roofline_fraction: float | None = None
    estimated_seconds: float | None = None
    peak_live_bytes: int = 0
    cost_per_million: float | None = None
    status: str = "ok"
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def shape_bindings(base: Mapping[str, int], symbols: set[str] | frozenset[str], batch: int,
                   seq: int) -> dict[str, int]:
    """``base`` with the batch dim ``B`` and sequence dim ``S`` set to one (batch, seq) point of a
    shape grid, for the symbols the model has (a model without ``S`` ignores ``seq``)."""
    bind = dict(base)
    if "B" in symbols:
        bind["B"] = batch
    if "S" in symbols:
        bind["S"] = seq
    return bind


def peak_live_bytes(m: Module, bindings: Mapping[str, int]) -> int:
    """The largest sum of live tensor bytes over the entry function (a liveness walk)."""
    from irkit.ir.types import eval_dim

    fn = m.entry
    ops = list(fn.body)
    last: dict[int, int] = {}
    for i, op in enumerate(ops):
        for v in op.operands:
            last[id(v)] = i

    def nbytes(v: Any) -> int:
        n = 1
        for d in v.type.shape:
            n *= eval_dim(d, bindings)
        return n * v.type.dtype.itemsize

    live = {id(a): nbytes(a) for a in fn.args}
    peak = sum(live.values())
    for i, op in enumerate(ops):
        for r in op.results:
            if op.name != "ik.constant" and op.name != "ik.reshape":
                live[id(r)] = nbytes(r)
        peak = max(peak, sum(live.values()))
        for v in op.operands:
            if last.get(id(v)) == i:
                live.pop(id(v), None)
    return peak


def parse_prices(text: str | None) -> dict[str, float]:
    """``tpu-v5e=1.2,h200=3.5`` or a TOML file of ``name = price`` (per hour)."""
    if not text:
        return {}
    p = Path(text)
    if p.suffix == ".toml" and p.exists():
        import tomllib

        from irkit.errors import InputError

        try:
            data = tomllib.loads(p.read_text())
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"{text}: invalid TOML ({e})") from None
        table = data.get("prices", data)
        bad = [k for k, v in table.items() if not isinstance(v, (int, float)) or isinstance(v, bool)]
        if bad:
            raise InputError(f"{text}: prices must be numbers (dollars per hour); not: {', '.join(bad)}")
        return {str(k): float(v) for k, v in table.items()}
    from irkit.errors import InputError

    out = {}
    for part in text.split(","):
        k, sep, v = part.partition("=")
        if not sep or not k.strip():
            raise InputError(f"--price: expected NAME=DOLLARS_PER_HOUR pairs like tpu-v5e=1.2, got '{part}'")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise InputError(f"--price: {k.strip()}={v.strip()}: the price must be a number of dollars per hour") \
                from None
        if not out[k.strip()] > 0:
            raise InputError(f"--price: {k.strip()}={v.strip()}: the price must be positive")
    return out


def check_price_keys(prices: Mapping[str, float], known: Sequence[str]) -> None:
    """Every price key must name a target or hardware spec in ``known``; a typo is an error with a hint."""
    import difflib

    from irkit.errors import InputError

    for k in prices:
        if k not in known:
            close = difflib.get_close_matches(k, known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known: {', '.join(sorted(known))}"
            raise InputError(f"--price: '{k}' names no target or hardware spec{hint}")


def price_for(target: str, spec: str | None, prices: Mapping[str, float]) -> float | None:
    for key in (target, spec or ""):
        if key in prices:
            return prices[key]
    return None


def break_even(rows: Sequence[BenchRow]) -> list[dict[str, Any]]:
    """For each pair at the same shape: after how many inferences the slower-compiling one wins."""
    out = []
    by_shape: dict[tuple[int, int], list[BenchRow]] = {}
    for r in rows:
        if r.latency_median is not None and r.compile_seconds is not None:
            by_shape.setdefault((r.batch, r.seq), []).append(r)
    for (b, s), rs in by_shape.items():
        for a in rs:
            for c in rs:
                if a is c or a.compile_seconds is None or c.compile_seconds is None:
                    continue
                # c compiles slower but runs faster than a
                if c.compile_seconds > a.compile_seconds and c.latency_median < a.latency_median:  # type: ignore[operator]
                    per_inf_gain = (a.latency_median - c.latency_median) / b  # type: ignore[operator]
                    n = (c.compile_seconds - a.compile_seconds) / per_inf_gain
                    out.append({"batch": b, "seq": s, "faster": c.target, "slower": a.target,
                                "inferences_to_break_even": math.ceil(n)})
    return out


def rows_markdown(rows: Sequence[BenchRow]) -> str:
    head = ("| target | batch | seq | measured? | compile s | latency ms (median) | p90 ms | p99 ms | spread | "
            "seq/s | GFLOP/s | of roofline | peak live MB | $ per 1M sequences |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        def f(x: float | None, scale: float = 1.0, fmt: str = ".3g") -> str:
            return "-" if x is None else format(x * scale, fmt)

        lines.append(
            f"| {r.target} | {r.batch} | {r.seq} | {'measured' if r.measured else 'estimated'} | "
            f"{f(r.compile_seconds)} | {f(r.latency_median, 1e3)} | {f(r.latency_p90, 1e3)} | "
            f"{f(r.latency_p99, 1e3)} | {f(r.spread, 100, '.0f')}{'%' if r.spread is not None else ''} | "
            f"{f(r.throughput)} | {f(r.achieved_flops, 1e-9)} | "
            f"{f(r.roofline_fraction, 100, '.1f')}{'%' if r.roofline_fraction is not None else ''} | "
            f"{r.peak_live_bytes / 1e6:.2f} | {f(r.cost_per_million, 1, '.4g')} |"
            + (f" {r.status}: {r.note}" if r.status != "ok" else ""))
    return "\n".join(lines) + "\n"


def rows_csv(rows: Sequence[BenchRow]) -> str:
    buf = io.StringIO()
    if not rows:
        return ""
    w = csv.DictWriter(buf, fieldnames=list(rows[0].as_dict()))
    w.writeheader()
    for r in rows:
        w.writerow(r.as_dict())
    return buf.getvalue()


def rows_json(rows: Sequence[BenchRow], extra: Mapping[str, Any]) -> str:
    return json.dumps({"rows": [r.as_dict() for r in rows], **extra}, indent=2, default=float) + "\n"


@dataclass
class KernelPoint:
    """A kernel placed on a roofline: FLOPs, bytes and (estimated) time."""

    target: str
    name: str
    flops: float
    bytes: float
    seconds: float


def plot_all(rows: Sequence[BenchRow], points: Sequence[KernelPoint], peaks: Mapping[str, tuple[float, float]],
             folder: str | Path) -> list[Path]:
    """PNG plots: latency vs sequence length, roofline with kernels, compile vs run time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from irkit.fileio import atomic_write

    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    written = []

    def save(fig: Any, name: str) -> None:
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        atomic_write(d / name, buf.getvalue())
        written.append(d / name)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for t in sorted({r.target for r in rows}):
        for b in sorted({r.batch for r in rows}):
            pts = sorted((r.seq, r.latency_median) for r in rows
                         if r.target == t and r.batch == b and r.latency_median is not None)
            if pts:
                est = not any(r.measured for r in rows if r.target == t)
                ax.plot([p[0] for p in pts], [p[1] * 1e3 for p in pts], "--" if est else "-o",
                        label=f"{t} b={b}" + (" (estimated)" if est else ""))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length")
    ax.set_ylabel("latency (ms)")
    ax.set_title("Latency vs sequence length")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, "latency_vs_seq.png")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = np.logspace(-2, 4, 200)
    for t, (peak, bw) in peaks.items():
        ax.plot(xs, np.minimum(peak, xs * bw) / 1e9, label=f"{t} roof")
        tp = [p for p in points if p.target == t and p.bytes > 0 and p.seconds > 0]
        if tp:
            ax.scatter([p.flops / p.bytes for p in tp], [p.flops / p.seconds / 1e9 for p in tp], s=12)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("Roofline: each kernel placed (estimated time)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, "roofline.png")

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        if r.compile_seconds is not None and r.latency_median is not None:
            ax.scatter(r.compile_seconds, r.latency_median * 1e3, marker="o" if r.measured else "x")
            ax.annotate(f"{r.target} b{r.batch} s{r.seq}", (r.compile_seconds, r.latency_median * 1e3), fontsize=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("compile time (s)")
    ax.set_ylabel("latency (ms); x = estimated")
    ax.set_title("Compile time vs run time")
    ax.grid(True, which="both", alpha=0.3)
    save(fig, "compile_vs_run.png")
    return written


__all__ = ["Timing", "measure", "BenchRow", "peak_live_bytes", "parse_prices", "price_for", "break_even",
           "rows_markdown", "rows_csv", "rows_json", "KernelPoint", "plot_all"]
_ = field
