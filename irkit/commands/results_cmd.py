"""``irkit results query|merge``: read and combine sweep results stores without re-running."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from irkit.cli import args_for, command
from irkit.errors import InputError


def _args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    q = sub.add_parser("query", help="list or group results, or compare two commits")
    q.add_argument("store", help="results store (SQLite) written by `irkit sweep`")
    q.add_argument("--where", action="append", default=[], metavar="K=V",
                   help="keep rows whose column (model, target, measurement, status, commit_id, ...), "
                        "dim (bindings.B) or result field (result.ok) equals V; repeatable")
    q.add_argument("--group-by", metavar="K[,K...]", help="one line per group: count, ok, failed and medians")
    q.add_argument("--json", action="store_true", help="print JSON")
    q.add_argument("--compare", nargs=2, metavar=("COMMIT_A", "COMMIT_B"),
                   help="what changed from commit A to commit B (prefixes allowed): verdicts, latency ratios")
    q.add_argument("--attempts", action="store_true", help="list every attempt (failures, timeouts, lost workers)")
    m = sub.add_parser("merge", help="merge stores into a new one (ok results win, then the newer)")
    m.add_argument("stores", nargs="+", help="stores to merge")
    m.add_argument("-o", "--output", required=True, help="the merged store (written atomically)")


def _field(row: Any, k: str) -> Any:
    if k.startswith("result."):
        return row.result.get(k[7:])
    if k.startswith("bindings."):
        return row.bindings.get(k[9:])
    if k.startswith("versions."):
        return row.versions.get(k[9:])
    if k.startswith("machine."):
        return row.machine.get(k[8:])
    if k.startswith("options."):  # e.g. options.tile, a sweep's matmul tile axis, shown as 64x256x256
        v = (row.options or {}).get(k[8:])
        return "x".join(map(str, v)) if isinstance(v, list) else v
    if not hasattr(row, k):
        from irkit.sweep.store import RESULT_COLUMNS

        raise InputError(f"'{k}': no such column; columns: {', '.join(RESULT_COLUMNS)}, or bindings.NAME, "
                         "result.NAME, versions.NAME, machine.NAME, options.NAME")
    v = getattr(row, k)
    return json.dumps(v, sort_keys=True) if isinstance(v, dict) else v


def _eq(value: Any, want: str) -> bool:
    if isinstance(value, bool):
        return want.lower() in (("true", "1", "yes") if value else ("false", "0", "no"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(want) == float(value)
        except ValueError:
            return False
    return str(value) == want


def filter_rows(rows: Sequence[Any], where: Sequence[str]) -> list[Any]:
    conds = []
    for w in where:
        k, sep, v = w.partition("=")
        if not sep or not k:
            raise InputError(f"--where {w}: expected KEY=VALUE, like target=ort or result.ok=false")
        conds.append((k.strip(), v.strip()))
    if rows:
        for k, _ in conds:
            _field(rows[0], k)  # an unknown column fails even when no row would match
    return [r for r in rows if all(_eq(_field(r, k), v) for k, v in conds)]


def _headline_number(r: Any) -> float | None:
    x = r.result
    if r.status != "ok":
        return None
    return {"bench": x.get("median"), "estimate": x.get("seconds"), "check": x.get("max_rel"),
            "generate": x.get("decode_tokens_per_second")}.get(r.measurement)


def group(rows: Sequence[Any], keys: Sequence[str]) -> list[dict[str, Any]]:
    groups: dict[tuple, list[Any]] = {}
    for r in rows:
        groups.setdefault(tuple(str(_field(r, k)) for k in keys), []).append(r)
    out = []
    for gk, rs in sorted(groups.items()):
        d: dict[str, Any] = dict(zip(keys, gk))
        d.update(count=len(rs), ok=sum(r.status == "ok" for r in rs), failed=sum(r.status == "failed" for r in rs),
                 unavailable=sum(r.status == "unavailable" for r in rs))
        checks = [r for r in rs if r.measurement == "check" and r.status == "ok"]
        if checks:
            d["check_pass"] = sum(bool(r.result.get("ok")) for r in checks)
        for meas, name, f in (("bench", "bench_median_ms", 1e3), ("estimate", "estimate_median_us", 1e6)):
            xs = [x for x in (_headline_number(r) for r in rs if r.measurement == meas) if x is not None]
            if xs:
                d[name] = statistics.median(xs) * f
        gens = [r for r in rs if r.measurement == "generate" and r.status == "ok"]
        if gens:
            d["ttft_median_ms"] = statistics.median(r.result["ttft_seconds"] for r in gens) * 1e3
            d["decode_tok_s_median"] = statistics.median(r.result["decode_tokens_per_second"] for r in gens)
        d["seconds"] = sum(r.duration for r in rs)
        out.append(d)
    return out


def _resolve_commit(prefix: str, commits: set[str]) -> str:
    hits = sorted(c for c in commits if c.startswith(prefix))
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise InputError(f"--compare: no results recorded at commit '{prefix}'; the store has "
                         f"{', '.join(sorted(c[:12] for c in commits)) or 'no results'}")
    raise InputError(f"--compare: '{prefix}' matches several commits ({', '.join(h[:12] for h in hits)}); "
                     "give more characters")


def _identity(r: Any) -> str:
    from irkit.sweep.work import digest

    vers = {k: v for k, v in r.versions.items() if k not in ("irkit", "irkit-commit")}
    return digest([r.ir_hash, r.pipeline, r.target, r.options, r.bindings, r.measurement, r.params, vers, r.machine])


def compare_commits(rows: Sequence[Any], a: str, b: str) -> dict[str, Any]:
    """Rows at commit ``a`` vs ``b`` matched by everything but the commit: what changed."""
    commits = {r.commit_id for r in rows}
    ca, cb = _resolve_commit(a, commits), _resolve_commit(b, commits)
    at_a = {_identity(r): r for r in rows if r.commit_id == ca}
    at_b = {_identity(r): r for r in rows if r.commit_id == cb}
    changes = []
    for ident in sorted(set(at_a) & set(at_b)):
        ra, rb = at_a[ident], at_b[ident]
        what = ""
        if ra.status != rb.status:
            what = f"status {ra.status} -> {rb.status}"
        elif ra.measurement == "check" and bool(ra.result.get("ok")) != bool(rb.result.get("ok")):
            ok_a, ok_b = ("OK" if r.result.get("ok") else "MISMATCH" for r in (ra, rb))
            what = f"check {ok_a} -> {ok_b}"
        else:
            xa, xb = _headline_number(ra), _headline_number(rb)
            # A timing changed when it moved by more than 10 % and by more than the two
            # measurements' spreads (IQR / median) together: noise on a busy machine is not a change.
            noise = float(ra.result.get("spread", 0) or 0) + float(rb.result.get("spread", 0) or 0)
            # (for "generate" the number is decode tokens/s: a ratio above 1 is faster)
            timed = ra.measurement in ("bench", "estimate", "generate")
            if timed and xa and xb and abs(xb / xa - 1) > max(0.10, noise):
                what = f"{ra.measurement} x{xb / xa:.2f}"
        if what:
            changes.append({"model": rb.model, "pipeline": rb.pipeline or "-", "target": rb.target,
                            "dims": ",".join(f"{k}={v}" for k, v in sorted(rb.bindings.items())) or "-",
                            "measurement": rb.measurement, "change": what})
    return {"a": ca, "b": cb, "matched": len(set(at_a) & set(at_b)), "only_a": len(set(at_a) - set(at_b)),
            "only_b": len(set(at_b) - set(at_a)), "changes": changes}


def _print_table(dicts: Sequence[dict[str, Any]]) -> None:
    if not dicts:
        print("(no rows)")
        return
    cols: list[str] = []
    for d in dicts:
        cols += [k for k in d if k not in cols]

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}"
        return "" if v is None else str(v)

    cells = [[fmt(d.get(c)) for c in cols] for d in dicts]
    widths = [min(60, max(len(c), *(len(r[i]) for r in cells))) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    for r in cells:
        print("  ".join(v[:60].ljust(w) for v, w in zip(r, widths)).rstrip())


def _query(args: argparse.Namespace) -> int:
    from irkit.sweep.report import headline
    from irkit.sweep.store import Store

    with Store(args.store, create=False) as st:
        if args.attempts:
            att = st.attempts()
            if args.json:
                print(json.dumps(att, indent=2))
            else:
                _print_table([{k: (v if k != "key" else v[:16]) for k, v in a.items() if k != "at"} for a in att])
            return 0
        rows = filter_rows(st.rows(), args.where)
    if args.compare:
        rep = compare_commits(rows, *args.compare)
        if args.json:
            print(json.dumps(rep, indent=2))
            return 0
        print(f"{rep['a'][:12]} -> {rep['b'][:12]}: {rep['matched']} results at both, {len(rep['changes'])} changed"
              f"; {rep['only_a']} only at the first, {rep['only_b']} only at the second")
        _print_table(rep["changes"])
        return 0
    if args.group_by:
        keys = [k.strip() for k in args.group_by.split(",") if k.strip()]
        if rows:
            for k in keys:
                _field(rows[0], k)
        g = group(rows, keys)
        if args.json:
            print(json.dumps(g, indent=2, default=float))
        else:
            _print_table(g)
        return 0
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=2, default=float))
        return 0
    _print_table([{"key": r.key[:12], "measurement": r.measurement, "model": r.model, "frontend": r.frontend,
                   "pipeline": r.pipeline or "-", "target": r.target,
                   "dims": ",".join(f"{k}={v}" for k, v in sorted(r.bindings.items())) or "-",
                   "commit": r.commit_id[:10], "result": headline(r)} for r in rows])
    return 0


def merge_stores(inputs: Sequence[str], output: str) -> dict[str, int]:
    """Merge ``inputs`` into a new store at ``output`` (built beside it, then renamed into place)."""
    from irkit.sweep.store import Store

    for p in inputs:
        if not Path(p).is_file():
            raise InputError(f"{p}: no such results store")
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent or ".")
    os.close(fd)
    os.unlink(tmp)
    totals = {"added": 0, "replaced": 0, "kept": 0}
    try:
        with Store(tmp) as dst:
            for p in inputs:
                with Store(p, create=False) as src:
                    for k, v in dst.merge_from(src).items():
                        totals[k] += v
            dst.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            dst.db.execute("PRAGMA journal_mode = DELETE")
        os.replace(tmp, out)
    finally:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(tmp + suffix):
                os.unlink(tmp + suffix)
    return totals


@command("results", "query sweep results (filter, group, compare commits) or merge stores")
@args_for(_args)
def cmd_results(args: argparse.Namespace) -> int:
    if args.action == "query":
        return _query(args)
    if args.action == "merge":
        t = merge_stores(args.stores, args.output)
        from irkit.sweep.store import Store

        with Store(args.output, create=False) as st:
            n = st.count()
        print(f"{args.output}: {n} results ({t['added']} added, {t['replaced']} replaced by a better one, "
              f"{t['kept']} duplicates kept as they were)")
        return 0
    raise InputError("results: give an action: query or merge (see `irkit results --help`)")
