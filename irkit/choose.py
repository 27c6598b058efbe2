"""Which hardware serves a model cheapest, per shape: the library behind ``irkit choose``.

Design note.  For every hardware x (batch, sequence) pair the latency of one
call comes from a measurement where the hardware is this machine (``host-cpu``:
the fastest of the CPU targets that run here) and otherwise from the analytic
estimate of :mod:`irkit.targets.estimate` on the hardware description
(``targets/specs/NAME.toml``).  Every row says which it is and which target or
spec it came from.  Cost per million requests is

    price per hour / 3600 * (compile seconds + ceil(N / B) * latency) / N * 1e6

for N requests served B at a time (the compile amortised over the N requests;
a compile time that was not measured counts as 0 and the row says so).  The
price per hour comes from ``--price`` (a TOML or JSON file, hardware -> US
dollars per hour), else the spec's ``[price]`` table, else the example list
prices below, which are labelled as such wherever they are used.

``generate`` prices decoding instead of the prefill: one decode step of a batch
of B sequences at context S reads every weight once and the whole KV cache
(the K and V operands of every ``ik.attention`` op at that shape), so it is
memory-bound on every accelerator here:

    step seconds = max(bytes / bandwidth, FLOPs / peak),
    bytes = weight bytes + KV-cache bytes(B, S),  FLOPs = prefill FLOPs / S,

and cost per million generated tokens = price / 3600 * step / B * 1e6.
"""

from __future__ import annotations

import difflib
import functools
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from irkit.errors import InputError
from irkit.ir.core import Module

DEFAULT_HARDWARE = ("h100", "h200", "tpu-v5e", "tpu-v6e", "host-cpu")
DEFAULT_CPU_TARGETS = ("xla-cpu", "ort")

# Example on-demand list prices (US dollars per device-hour).  Cloud prices change and
# differ by provider, region and commitment: pass your own with --price FILE.
EXAMPLE_PRICES: dict[str, tuple[float, str]] = {
    "tpu-v4": (3.22, "example list price: Google Cloud TPU v4 on-demand, per chip-hour, us-central2, 2025"),
    "tpu-v5e": (1.20, "example list price: Google Cloud TPU v5e on-demand, per chip-hour, us regions, 2025"),
    "tpu-v5p": (4.20, "example list price: Google Cloud TPU v5p on-demand, per chip-hour, us regions, 2025"),
    "tpu-v6e": (2.70, "example list price: Google Cloud TPU v6e on-demand, per chip-hour, us-east1, 2025"),
    "a100": (1.80, "example rate: A100 80GB on-demand at GPU clouds, per GPU-hour, 2025 (1.3-4 $/h by provider)"),
    "h100": (3.00, "example rate: H100 SXM on-demand at GPU clouds, per GPU-hour, 2025 (2-12 $/h by provider)"),
    "h200": (3.80, "example rate: H200 on-demand at GPU clouds, per GPU-hour, 2025 (3-11 $/h by provider)"),
    "host-cpu": (0.10, "example rate: a 2-vCPU cloud VM on-demand, per hour, 2025"),
}

COST_UNIT = "USD per 1M requests"
GEN_UNIT = "USD per 1M generated tokens"


@dataclass
class Price:
    usd_per_hour: float
    source: str


@dataclass
class ChoiceRow:
    """One hardware at one shape."""

    hardware: str
    batch: int
    seq: int
    kind: str
    """``measured`` (ran here) or ``estimated`` (from the spec's cost model)."""
    basis: str
    """Where the latency comes from, e.g. ``measured on xla-cpu here`` or ``estimated from spec h100``."""
    spec: str
    latency_s: float
    throughput_seq_per_s: float
    bound: str
    """``compute`` or ``memory``: which side the estimate's time is mostly spent on."""
    memory_bound_fraction: float
    flops: float
    bytes: float
    compile_s: float | None
    compile_basis: str
    requests: int
    price_usd_per_hour: float | None
    price_source: str
    cost_usd_per_million_requests: float | None
    cost_unit: str = COST_UNIT
    meets_budget: bool | None = None
    gen_step_s: float | None = None
    gen_tokens_per_s: float | None = None
    gen_cost_usd_per_million_tokens: float | None = None
    gen_unit: str | None = None
    weight_bytes: float | None = None
    kv_cache_bytes: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Pick:
    batch: int
    seq: int
    hardware: str | None
    reason: str


@dataclass
class ChoiceReport:
    model: str
    rows: list[ChoiceRow] = field(default_factory=list)
    picks: list[Pick] = field(default_factory=list)
    latency_budget_ms: float | None = None
    requests: int = 1_000_000
    generate: bool = False
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "requests": self.requests,
            "latency_budget_ms": self.latency_budget_ms,
            "generate": self.generate,
            "cost_unit": GEN_UNIT if self.generate else COST_UNIT,
            "rows": [r.as_dict() for r in self.rows],
            "cheapest": [asdict(p) for p in self.picks],
            "notes": self.notes,
        }


# --------------------------------------------------------------------------- prices


def load_price_file(path: str, known: Sequence[str]) -> dict[str, float]:
    """``hardware -> US dollars per hour`` from a TOML or JSON file (optionally under a ``prices`` table).

    Unknown hardware names are an error naming the file and key with a did-you-mean."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"--price {path}: no such file; give a TOML or JSON file of hardware = dollars per hour")
    text = p.read_text(encoding="utf-8", errors="replace")
    data: Any
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{e.lineno}: not valid JSON ({e.msg}); fix the syntax") from None
    else:
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"{path}: not valid TOML ({e}); fix the syntax "
                             "(expected lines like h100 = 3.0, or a .json file)") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a table of hardware = dollars per hour, got {type(data).__name__}")
    table = data.get("prices", data) if isinstance(data.get("prices"), dict) else data
    out: dict[str, float] = {}
    for k, v in table.items():
        if k not in known:
            close = difflib.get_close_matches(k, known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known hardware: {', '.join(known)}"
            raise InputError(f"{path}: '{k}' is no hardware{hint}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise InputError(f"{path}: {k} = {v!r}: the price must be a positive number of US dollars per hour")
        out[k] = float(v)
    return out


def price_of(hardware: str, spec: Any, prices: Mapping[str, float], price_file: str | None) -> Price | None:
    """The price per hour of ``hardware`` and where it comes from."""
    if hardware in prices:
        return Price(prices[hardware], f"--price {price_file}")
    if getattr(spec, "price_usd_per_hour", None):
        src = spec.price_source or "no source given"
        return Price(spec.price_usd_per_hour, f"spec {spec.name} [price] ({src})")
    if hardware in EXAMPLE_PRICES:
        usd, src = EXAMPLE_PRICES[hardware]
        return Price(usd, src)
    return None


def known_hardware() -> list[str]:
    from irkit.targets.hwspec import list_specs

    return list_specs()


def parse_hardware(text: str | None) -> list[str]:
    names = [h.strip() for h in (text or ",".join(DEFAULT_HARDWARE)).split(",") if h.strip()]
    known = known_hardware()
    for h in names:
        if h not in known and not h.endswith(".toml"):
            close = difflib.get_close_matches(h, known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise InputError(f"--hardware: unknown hardware '{h}'{hint} (known: {', '.join(known)}, "
                             "or a path to your own spec .toml)")
    if not names:
        raise InputError("--hardware: give at least one hardware name, e.g. h100,tpu-v5e")
    return names


# --------------------------------------------------------------------------- model facts


def _nbytes(v: Any, b: Mapping[str, int]) -> int:
    from irkit.ir.types import eval_dim

    n = 1
    for d in v.type.shape:
        n *= eval_dim(d, b)
    return n * v.type.dtype.itemsize


def weight_bytes(m: Module) -> int:
    """Bytes of every constant (the weights) in the entry function."""
    return sum(_nbytes(op.results[0], {}) for op in m.entry.body if op.name == "ik.constant")


def kv_cache_bytes(m: Module, b: Mapping[str, int]) -> int | None:
    """Bytes of the K and V operands of every ``ik.attention`` op at bindings ``b`` (the KV cache a
    decoder keeps for a batch at that context length); None when the model has no attention op."""
    total = 0
    found = False
    for op in m.entry.walk():
        if op.name == "ik.attention":
            found = True
            total += _nbytes(op.operands[1], b) + _nbytes(op.operands[2], b)
    return total if found else None


# --------------------------------------------------------------------------- evaluation


def _bound(est: Any) -> tuple[str, float]:
    s = est.seconds
    mem = sum(o.seconds for o in est.ops if o.bound == "memory")
    frac = mem / s if s else 0.0
    return ("memory" if frac >= 0.5 else "compute"), frac


def _measure_cpu(m: Module, bind: Mapping[str, int], cpu_targets: Sequence[str], repeats: int, seed: int,
                 notes: list[str]) -> tuple[str, float, float] | None:
    """The fastest of ``cpu_targets`` that run here: (target, median seconds, compile seconds)."""
    from irkit.bench import measure
    from irkit.interp import random_inputs
    from irkit.targets.registry import get_target

    best: tuple[str, float, float] | None = None
    xs = random_inputs(m.entry, seed, dict(bind))
    for name in cpu_targets:
        t = get_target(name)
        if not t.availability().can_run:
            continue
        t0 = time.perf_counter()
        try:
            art = t.lower(m, dict(bind))
            comp = art.compile_seconds or (time.perf_counter() - t0)
            tm = measure(functools.partial(t.run, art, xs), warmup=1, repeats=repeats)
        except Exception as e:  # noqa: BLE001 - a target that fails here is reported, the others still count
            first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
            notes.append(f"host-cpu B={bind.get('B')} S={bind.get('S')}: {name} failed ({type(e).__name__}: {first}); "
                         "the row is estimated from spec host-cpu, not measured (a target that fails on the "
                         "inputs at this shape makes the others' timings suspect too)")
            return None
        if best is None or tm.median < best[1]:
            best = (name, tm.median, comp)
    if best is None:
        notes.append(f"host-cpu: none of {', '.join(cpu_targets)} runs here (see `irkit list-targets`); "
                     "estimated from spec host-cpu")
    return best


def _compile_here(m: Module, hw: str, bind: Mapping[str, int]) -> tuple[float, str] | None:
    """Compile ahead of time here with a target for ``hw`` (xla-tpu-v5e for tpu-v5e): seconds, target."""
    from irkit.targets.registry import TARGETS, get_target, load_targets

    load_targets()
    for name in sorted(TARGETS):
        t = get_target(name)
        if t.spec == hw and t.availability().can_compile:
            t0 = time.perf_counter()
            art = t.lower(m, dict(bind))
            return (art.compile_seconds or (time.perf_counter() - t0)), name
    return None


def evaluate(m: Module, *, model: str, hardware: Sequence[str], shapes: Sequence[tuple[int, int]],
             base_bindings: Mapping[str, int], symbols: set[str], prices: Mapping[str, float],
             price_file: str | None = None, requests: int = 1_000_000, latency_budget_ms: float | None = None,
             cpu_targets: Sequence[str] = DEFAULT_CPU_TARGETS, compile_here: bool = False,
             generate: bool = False, repeats: int = 5, seed: int = 0, measure_cpu: bool = True,
             progress: Any = None) -> ChoiceReport:
    """Every hardware at every (batch, seq) shape, and the cheapest per shape."""
    from irkit.bench import shape_bindings
    from irkit.targets.estimate import estimate, peak_for
    from irkit.targets.hwspec import load_spec

    rep = ChoiceReport(model, latency_budget_ms=latency_budget_ms, requests=requests, generate=generate)
    wbytes = weight_bytes(m) if generate else 0
    if generate and kv_cache_bytes(m, dict(base_bindings)) is None:
        raise InputError(f"{model}: --generate needs the KV-cache size, from the K and V of the model's "
                         "ik.attention ops, and it has none; fuse attention first (-p canonicalize,fuse-attention) "
                         "or give a decode model")
    specs = {h: load_spec(h) for h in hardware}
    for b, s in shapes:
        bind = shape_bindings(base_bindings, symbols, b, s)
        for h in hardware:
            hw = specs[h]
            if progress is not None:
                progress(f"{h} B={b} S={s}")
            est = estimate(m, hw, bind)
            bound, mfrac = _bound(est)
            spec_label = f"spec {hw.name}"
            latency, kind, basis = est.seconds, "estimated", f"estimated from {spec_label}"
            comp: float | None = None
            comp_basis = "not measured, counted as 0"
            if hw.kind == "cpu" and hw.name == "host-cpu" and measure_cpu:
                got = _measure_cpu(m, bind, cpu_targets, repeats, seed, rep.notes)
                if got is not None:
                    tname, latency, comp = got
                    kind, basis = "measured", f"measured on {tname} here (fastest of {', '.join(cpu_targets)})"
                    comp_basis = f"measured ({tname} here)"
                else:
                    basis += " (not measured here; see the note)"
            elif compile_here:
                got2 = _compile_here(m, hw.name, bind)
                if got2 is not None:
                    comp, tname = got2
                    comp_basis = f"measured ({tname}, compiled ahead of time here)"
            pr = price_of(h, hw, prices, price_file)
            calls = math.ceil(requests / b)
            total_s = (comp or 0.0) + calls * latency
            cost = pr.usd_per_hour / 3600.0 * total_s / requests * 1e6 if pr else None
            row = ChoiceRow(
                hardware=h, batch=b, seq=s, kind=kind, basis=basis, spec=hw.name, latency_s=latency,
                throughput_seq_per_s=b / latency if latency else 0.0, bound=bound, memory_bound_fraction=mfrac,
                flops=est.flops, bytes=est.bytes, compile_s=comp, compile_basis=comp_basis, requests=requests,
                price_usd_per_hour=pr.usd_per_hour if pr else None,
                price_source=pr.source if pr else "no price: give one with --price FILE",
                cost_usd_per_million_requests=cost)
            if generate:
                kv = kv_cache_bytes(m, bind) or 0
                step_bytes = wbytes + kv
                step_flops = est.flops / max(s, 1)
                bw = hw.bandwidth_bytes_per_s or 0.0
                peak = peak_for(m, hw)
                step = max(step_bytes / bw if bw else 0.0, step_flops / peak if peak else 0.0)
                row.weight_bytes, row.kv_cache_bytes = float(wbytes), float(kv)
                row.gen_step_s = step
                row.gen_tokens_per_s = b / step if step else None
                row.gen_unit = GEN_UNIT
                if pr and step:
                    row.gen_cost_usd_per_million_tokens = pr.usd_per_hour / 3600.0 * step / b * 1e6
            if latency_budget_ms is not None:
                per_call = row.gen_step_s if generate else latency
                row.meets_budget = per_call is not None and per_call * 1e3 <= latency_budget_ms
            rep.rows.append(row)
        shape_rows = [r for r in rep.rows if r.batch == b and r.seq == s]
        if any(r.compile_s is not None for r in shape_rows) and any(r.compile_s is None for r in shape_rows):
            none = sorted({r.hardware for r in shape_rows if r.compile_s is None})
            note = (f"compile time counted as 0 for {', '.join(none)} (not measured; --compile-here compiles "
                    "ahead of time for the TPUs), which favours them by the others' amortised compile")
            if note not in rep.notes:
                rep.notes.append(note)
        rep.picks.append(pick(rep.rows, b, s, specs, m, generate, latency_budget_ms))
    return rep


def _cost(r: ChoiceRow, generate: bool) -> float | None:
    return r.gen_cost_usd_per_million_tokens if generate else r.cost_usd_per_million_requests


def pick(rows: Sequence[ChoiceRow], b: int, s: int, specs: Mapping[str, Any], m: Module, generate: bool,
         budget_ms: float | None) -> Pick:
    """The cheapest hardware at (b, s) among those that meet the budget, with the reason."""
    from irkit.targets.estimate import peak_for

    here = [r for r in rows if r.batch == b and r.seq == s and _cost(r, generate) is not None]
    ok = [r for r in here if r.meets_budget is not False]
    if not here:
        return Pick(b, s, None, "no hardware has a price; give them with --price FILE")
    if not ok:
        best = min(here, key=lambda r: (r.gen_step_s or 0.0) if generate else r.latency_s)
        t = (best.gen_step_s or 0.0) if generate else best.latency_s
        return Pick(b, s, None, f"none meets the {budget_ms:g} ms budget at B={b} S={s} "
                                f"(fastest: {best.hardware}, {t * 1e3:.3g} ms, "
                                f"{'estimated' if generate else best.kind})")
    ok.sort(key=lambda r: _cost(r, generate))  # type: ignore[arg-type,return-value]
    w = ok[0]
    unit = GEN_UNIT if generate else COST_UNIT
    head = f"{w.hardware} at {_cost(w, generate):.4g} {unit} ({w.kind})"
    if len(ok) == 1:
        return Pick(b, s, w.hardware, head + "; the only hardware" + (" within the budget" if budget_ms else ""))
    r2 = ok[1]
    bound = "memory" if generate else w.bound

    def per_dollar(r: ChoiceRow) -> float:
        hw = specs[r.hardware]
        if bound == "memory":
            return (hw.bandwidth_bytes_per_s or 0.0) / 1e9 / r.price_usd_per_hour  # type: ignore[operator]
        return peak_for(m, hw) / 1e12 / r.price_usd_per_hour  # type: ignore[operator]

    fmt = "{:.0f} GB/s per $/h" if bound == "memory" else "{:.1f} TFLOP/s per $/h"
    what = "HBM bandwidth" if bound == "memory" else "peak FLOP/s"
    if specs[w.hardware].kind == "cpu":
        what = "memory bandwidth" if bound == "memory" else "peak FLOP/s"
    share = w.memory_bound_fraction if bound == "memory" else 1 - w.memory_bound_fraction
    lat = (w.gen_step_s or 0.0) if generate else w.latency_s  # a priced row has its step time
    lat2 = (r2.gen_step_s or 0.0) if generate else r2.latency_s
    where = f"{bound}-bound at B={b} S={s}" + (" (decode step)" if generate else f" ({100 * share:.0f}% of its time)")
    pw, p2 = per_dollar(w), per_dollar(r2)

    def run_cost(r: ChoiceRow) -> float:  # the cost without the compile
        return r.price_usd_per_hour / 3600.0 * math.ceil(r.requests / r.batch) * r.latency_s / r.requests * 1e6  # type: ignore[operator]

    if not generate and run_cost(r2) < run_cost(w):
        why = (f"{r2.hardware} runs cheaper ({run_cost(r2):.4g} vs {run_cost(w):.4g} without the compile) but its "
               f"{r2.compile_s or 0:.3g} s compile ({r2.compile_basis}) amortised over {r2.requests} requests "
               "costs more" + (f"; {w.hardware}'s compile was not measured and counts as 0"
                               if w.compile_s is None else ""))
    elif pw >= p2:
        why = (f"{what} per dollar wins: {w.hardware} {fmt.format(pw)} vs {r2.hardware} {fmt.format(p2)}")
    else:
        why = (f"{r2.hardware} has more {what} per dollar ({fmt.format(p2)} vs {fmt.format(pw)}) but reaches "
               f"less of it on this model: {w.hardware} takes {lat * 1e3:.3g} ms at ${w.price_usd_per_hour:g}/h, "
               f"{r2.hardware} {lat2 * 1e3:.3g} ms at ${r2.price_usd_per_hour:g}/h")
    reason = f"{head}: {where}; {why} (next: {r2.hardware} at {_cost(r2, generate):.4g}, {r2.kind})"
    return Pick(b, s, w.hardware, reason)


# --------------------------------------------------------------------------- plot


def plot(rep: ChoiceReport, path: str) -> str:
    """Cost per million (requests, or generated tokens) against sequence length, one panel per batch,
    one line per hardware; written atomically as PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'irkit[plot]'") from None
    import io

    from irkit.fileio import atomic_write

    batches = sorted({r.batch for r in rep.rows})
    fig, axes = plt.subplots(1, len(batches), figsize=(5 * len(batches), 4), squeeze=False)
    unit = GEN_UNIT if rep.generate else COST_UNIT
    for ax, b in zip(axes[0], batches):
        for h in dict.fromkeys(r.hardware for r in rep.rows):
            pts = sorted((r.seq, _cost(r, rep.generate), r.kind) for r in rep.rows
                         if r.batch == b and r.hardware == h and _cost(r, rep.generate) is not None)
            if not pts:
                continue
            kinds = sorted({p[2] for p in pts})
            line = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                           linestyle="-" if kinds == ["measured"] else "--", label=f"{h} ({', '.join(kinds)})")
            meas = [p for p in pts if p[2] == "measured"]
            if meas and len(kinds) > 1:  # measured points filled, estimated ones hollow
                ax.plot([p[0] for p in meas], [p[1] for p in meas], "o", color=line[0].get_color())
                line[0].set_markerfacecolor("none")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length S")
        ax.set_ylabel(unit)
        ax.set_title(f"batch B={b}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"irkit choose: {rep.model}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write(path, buf.getvalue())
    return path


__all__ = [
    "EXAMPLE_PRICES",
    "ChoiceReport",
    "ChoiceRow",
    "Pick",
    "Price",
    "evaluate",
    "kv_cache_bytes",
    "load_price_file",
    "parse_hardware",
    "pick",
    "plot",
    "price_of",
    "weight_bytes",
]
