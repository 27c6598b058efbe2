"""CONFORMANCE.md: per suite, per target and peer, pass counts against the goals, failures grouped.

The goals (issue 14): ONNX node tests >= 98% of the in-scope cases onnxruntime
passes, on the interpreter and each of ort, tvm-llvm, xla-cpu; torch OpInfo >=
95% of exportable float32 samples and more than TVM's from_exported_program;
JAX harnesses >= 95% of in-scope cases; zero silent wrong answers anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence

from irkit.conformance.results import STATUSES, SuiteResult, reason_key

PEERS = ("onnxruntime", "tvm-relax")
GOAL_PCT = {"onnx": 98.0, "torch": 95.0, "jax": 95.0}


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


def _is_peer(runner: str) -> bool:
    return runner in PEERS


def goal_rows(res: SuiteResult) -> list[tuple[str, str, str, bool | None]]:
    """(goal, runner, measured, met) for one suite."""
    rows: list[tuple[str, str, str, bool | None]] = []
    summ = res.summary()
    goal = GOAL_PCT[res.suite]
    for runner in res.runners:
        if _is_peer(runner):
            continue
        s = summ[runner]
        if res.suite == "onnx":
            ok, n = res.relative_to(runner, "onnxruntime")
            met = (100.0 * ok / n >= goal) if n else None
            rows.append((f">= {goal:g}% of the in-scope cases onnxruntime passes", runner,
                         f"{ok}/{n} = {_pct(ok, n)}", met))
        else:
            what = "exportable samples" if res.suite == "torch" else "in-scope harnesses"
            met = (s["pass"] * 100.0 / s["in_scope"] >= goal) if s["in_scope"] else None
            measured = f"{s['pass']}/{s['in_scope']} = {_pct(s['pass'], s['in_scope'])}"
            rows.append((f">= {goal:g}% of {what}", runner, measured, met))
            if res.suite == "torch" and "tvm-relax" in summ:
                t = summ["tvm-relax"]
                rows.append(("more than TVM's from_exported_program", runner,
                             f"{s['pass']} vs {t['pass']}", s["pass"] > t["pass"]))
        rows.append(("zero silent wrong answers", runner, f"{s['wrong']} wrong", s["wrong"] == 0))
    return rows


def _mark(met: bool | None) -> str:
    return "n/a" if met is None else ("yes" if met else "**no**")


def suite_section(res: SuiteResult, top: int = 12) -> list[str]:
    L: list[str] = []
    meta = res.meta
    L.append(f"## {res.suite}\n")
    scope = meta.get("scope")
    sel = ", ".join(f"{k}={meta[k]}" for k in ("filter", "sample", "limit") if meta.get(k))
    if meta.get("partial"):
        L.append(f"{meta.get('cases', '?')} cases finished before the run was stopped.")
    else:
        L.append(f"{meta.get('cases', '?')} cases{' (' + sel + ')' if sel else ' (the full suite)'}; "
                 f"{meta.get('seconds', '?')} s with {meta.get('jobs') or 'no'} worker processes; "
                 f"peak worker memory {meta.get('peak_rss_mb', '?')} MB.")
    if scope:
        L.append(f"Scope: {scope}.")
    if meta.get("partial"):
        L.append("**Partial**: the run was stopped; these are the cases that finished.")
    if meta.get("rejudged"):
        L.append(f"Re-judged: {meta['rejudged']}.")
    L.append("")
    L.append("| runner | pass | wrong | refused | crash | skip | in scope | pass % |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for runner, s in res.summary().items():
        name = f"{runner} (peer)" if _is_peer(runner) else runner
        L.append(f"| {name} | {s['pass']} | {s['wrong']} | {s['refused']} | {s['crash']} | {s['skip']} | "
                 f"{s['in_scope']} | {s['pass_pct'] if s['pass_pct'] is not None else 'n/a'} |")
    L.append("")
    wrong = [r for r in res.results if r.status == "wrong" and not _is_peer(r.runner)]
    if wrong:
        L.append(f"Silent wrong answers ({len(wrong)}):\n")
        for r in wrong[:60]:
            err = f" (max error {r.max_error:.3g})" if r.max_error is not None else ""
            L.append(f"- `{r.case}` on {r.runner}{err}: {r.reason}")
        if len(wrong) > 60:
            L.append(f"- ... and {len(wrong) - 60} more (see the JSON results)")
        L.append("")
    for runner in res.runners:
        groups = [(st, res.reasons(runner, st, top)) for st in ("crash", "refused", "wrong")]
        if not any(g for _, g in groups):
            continue
        L.append(f"Failure reasons on {runner}, grouped (most common first):\n")
        for st, g in groups:
            for key, n in g:
                L.append(f"- {st} x{n}: {key}")
        L.append("")
    skips: dict[str, int] = {}
    for r in res.results:
        if r.status == "skip" and r.runner == res.runners[0]:
            k = reason_key(r.reason)
            skips[k] = skips.get(k, 0) + 1
    if skips:
        L.append("Skipped (out of scope or not a case), grouped:\n")
        for k, n in sorted(skips.items(), key=lambda kv: -kv[1])[:top]:
            L.append(f"- x{n}: {k}")
        L.append("")
    return L


def render(results: Sequence[SuiteResult], command: str) -> str:
    intro = ("irkit on the frameworks' own conformance material: the ONNX backend node tests, PyTorch's OpInfo "
             "database and JAX's primitive harnesses (see docs/conformance.md for how cases are run, what each "
             "status means and how scope is decided).\n")
    L = ["# Conformance\n", intro]
    if results:
        m = results[0].meta
        L.append(f"Produced by `{command}` on {m.get('date', '?')}.\n")
        L.append(f"CPU: {m.get('cpu', '?')}.\n")
        v = m.get("versions", {})
        L.append("Versions: " + ", ".join(f"{k} {v[k]}" for k in ("irkit", "python", "numpy", "onnx", "onnxruntime",
                                                                  "torch", "jax", "jaxlib", "tvm") if k in v) + ".\n")
    L.append("Statuses: " + ", ".join(STATUSES) + "; percentages are over the in-scope cases (all but skip).\n")
    L.append("## Goals\n")
    L.append("| suite | goal | runner | measured | met |")
    L.append("|---|---|---|---|---|")
    for res in results:
        for goal, runner, measured, met in goal_rows(res):
            L.append(f"| {res.suite} | {goal} | {runner} | {measured} | {_mark(met)} |")
    L.append("")
    for res in results:
        L.extend(suite_section(res))
    return "\n".join(L).rstrip() + "\n"


def write_report(results: Sequence[SuiteResult], path: str, command: str) -> None:
    from irkit.fileio import atomic_write

    atomic_write(path, render(results, command))


__all__ = ["goal_rows", "render", "write_report"]
