"""Sweep reports: a markdown table, a CSV of every row, and plots where matplotlib is installed."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .store import ResultRow


def headline(r: ResultRow) -> str:
    """The one number (or verdict) that says what a row measured."""
    x = r.result
    if r.status != "ok":
        return f"{r.status}: {r.error[:120]}"
    if r.measurement == "estimate":
        return f"{x.get('seconds', 0) * 1e6:.2f} µs est. ({x.get('spec', '')})"
    if r.measurement == "check":
        verdict = "OK" if x.get("ok") else "MISMATCH"
        return f"{verdict} max_abs={x.get('max_abs', 0):.3g} max_rel={x.get('max_rel', 0):.3g}"
    if r.measurement == "bench":
        return (f"{x.get('median', 0) * 1e3:.3f} ms (±{100 * x.get('spread', 0):.0f}%, "
                f"compile {x.get('compile_seconds', 0):.2f} s)")
    if r.measurement == "generate":
        return (f"TTFT {x.get('ttft_seconds', 0) * 1e3:.2f} ms, {x.get('decode_tokens_per_second', 0):.1f} decode "
                f"tok/s (batch {x.get('batch', 1)}, prompt {x.get('prompt_len', 0)}, compile "
                f"{x.get('compile_seconds', 0):.2f} s)")
    return json.dumps(x)


def _tile(r: ResultRow) -> str:
    t = r.options.get("tile")
    return "x".join(str(v) for v in t) if t else "-"


def _bind(r: ResultRow) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(r.bindings.items())) or "-"


def markdown(rows: Sequence[ResultRow], title: str = "Sweep") -> str:
    ok = sum(r.status == "ok" for r in rows)
    failed = sum(r.status == "failed" for r in rows)
    summary = f"{len(rows)} results: {ok} ok, {failed} failed, {len(rows) - ok - failed} unavailable here."
    lines = [f"# {title}", "", summary, ""]
    for meas in ("check", "bench", "generate", "estimate"):
        rs = [r for r in rows if r.measurement == meas]
        if not rs:
            continue
        lines += [f"## {meas}", "", "| model | frontend | pipeline | target | dims | tile | result | s |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in sorted(rs, key=lambda r: (r.model, r.frontend, r.pipeline, r.target, _bind(r), _tile(r))):
            lines.append(f"| {r.model} | {r.frontend} | {r.pipeline or '-'} | {r.target} | {_bind(r)} | {_tile(r)} | "
                         f"{headline(r).replace('|', '/')} | {r.duration:.2f} |")
        lines.append("")
    return "\n".join(lines)


def flat(r: ResultRow) -> dict[str, Any]:
    """A row as flat columns (result fields prefixed ``result.``)."""
    d = {k: v for k, v in r.as_dict().items() if k not in ("result", "versions", "machine", "options", "params",
                                                          "bindings")}
    d["bindings"] = _bind(r)
    d["tile"] = _tile(r)
    d["versions"] = ",".join(f"{k}={v}" for k, v in sorted(r.versions.items()))
    d["machine"] = r.machine.get("cpu", "")
    for k, v in sorted(r.result.items()):
        d[f"result.{k}"] = v
    return d


def csv_text(rows: Sequence[ResultRow]) -> str:
    flats = [flat(r) for r in rows]
    cols: list[str] = []
    for f in flats:
        for k in f:
            if k not in cols:
                cols.append(k)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols)
    w.writeheader()
    for f in flats:
        w.writerow(f)
    return buf.getvalue()


def write_report(rows: Sequence[ResultRow], folder: str | Path, title: str) -> list[Path]:
    """``report.md``, ``results.csv`` and (with matplotlib) the bench plots into ``folder``."""
    from irkit.fileio import atomic_write

    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    atomic_write(d / "report.md", markdown(rows, title))
    atomic_write(d / "results.csv", csv_text(rows))
    written = [d / "report.md", d / "results.csv"]
    bench = [r for r in rows if r.measurement == "bench" and r.status == "ok"]
    if bench:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return written
        from irkit.bench import BenchRow, plot_all

        brs = []
        for r in bench:
            b = r.bindings
            brs.append(BenchRow(target=f"{r.target} {r.pipeline or '-'} {Path(r.model.split(':')[0]).stem}",
                                batch=int(b.get("B", b.get("batch", 1))), seq=int(b.get("S", b.get("seq", 1))),
                                measured=True, compile_seconds=r.result.get("compile_seconds"),
                                latency_median=r.result.get("median"), latency_p90=r.result.get("p90"),
                                spread=r.result.get("spread")))
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for p in plot_all(brs, [], {}, d):
                if p.name != "roofline.png":  # no kernel points in a sweep: the roofline would be empty
                    written.append(p)
                else:
                    p.unlink(missing_ok=True)
    return written


__all__ = ["csv_text", "flat", "headline", "markdown", "write_report"]
