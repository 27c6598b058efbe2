"""The greedy worklist driver: apply patterns until nothing matches.

Every op of the graph (nested regions included) starts on the worklist; when
a pattern rewrites, the ops it created and the users of the values it replaced
go back on.  Dead pure ops are erased as they are found.  The number of
rewrites is bounded (``max_rewrites``, by default proportional to the graph),
so a pair of patterns that undo each other stops with a clear error naming the
pattern that kept firing, never a hang.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable, Sequence

from irkit.errors import IrkitError
from irkit.ir.core import Function, Graph, Module, Op
from irkit.ir.ops import OPS
from irkit.rewrite.pattern import Fail, NearMiss, Pattern, RewriteReport, Rewriter


class RewriteLimitError(IrkitError):
    """The driver hit its rewrite bound: some pattern keeps firing."""


def is_trivially_dead(op: Op) -> bool:
    d = OPS.get(op.name)
    return d is not None and d.has("pure") and not op.is_used and not d.has("terminator")


def apply_patterns(target: Module | Function | Graph, patterns: Sequence[Pattern], *,
                   report: RewriteReport | None = None, explain: bool = False,
                   max_rewrites: int | None = None, erase_dead: bool = True,
                   on_rewrite: Callable[[Pattern, Op], Callable[[], None] | None] | None = None) -> bool:
    """Apply ``patterns`` greedily to a fixed point; True if anything changed.

    ``on_rewrite(pattern, op)`` is called before each rewrite and may return a
    callback run after it (the numeric per-rewrite check uses this).
    """
    graphs: list[Graph]
    if isinstance(target, Module):
        graphs = [f.body for f in target.functions]
    elif isinstance(target, Function):
        graphs = [target.body]
    else:
        graphs = [target]
    rep = report if report is not None else RewriteReport()
    changed = False
    for g in graphs:
        changed |= _run(g, patterns, rep, explain, max_rewrites, erase_dead, on_rewrite)
    return changed


def _all_ops(g: Graph) -> Iterable[Op]:
    return g.walk()


def _run(g: Graph, patterns: Sequence[Pattern], rep: RewriteReport, explain: bool,
         max_rewrites: int | None, erase_dead: bool,
         on_rewrite: Callable[[Pattern, Op], Callable[[], None] | None] | None) -> bool:
    by_root: dict[str, list[Pattern]] = {}
    generic: list[Pattern] = []
    for p in sorted(patterns, key=lambda p: -p.benefit):
        if p.roots:
            for r in p.roots:
                by_root.setdefault(r, []).append(p)
        else:
            generic.append(p)

    worklist: list[Op] = []
    queued: set[int] = set()

    def push(op: Op) -> None:
        if id(op) not in queued and op.parent is not None:
            queued.add(id(op))
            worklist.append(op)

    def push_users(op: Op) -> None:
        push(op)
        for r in op.results:
            for u in r.users:
                push(u)

    ops = list(_all_ops(g))
    # Process in program order: reverse the list because we pop from the end.
    for op in reversed(ops):
        queued.add(id(op))
        worklist.append(op)
    limit = max_rewrites if max_rewrites is not None else 20 * len(ops) + 1000
    fired: Counter[str] = Counter()
    rewrites = 0
    changed = False
    explained: dict[tuple[str, int], NearMiss] = {}
    rw = Rewriter(on_new=push_users, on_changed=push_users, on_erased=lambda op: queued.discard(id(op)))

    while worklist:
        op = worklist.pop()
        queued.discard(id(op))
        if op.parent is None:
            continue
        if erase_dead and is_trivially_dead(op):
            rw.erase_op(op)
            rep.erased_dead += 1
            changed = True
            continue
        cands = by_root.get(op.name, ())
        for p in (*cands, *generic):
            st = rep.stat(p.name)
            st.tried += 1
            m = p.match(op)
            if isinstance(m, Fail) or not m:
                if explain and p.explain and isinstance(m, Fail):
                    explained[(p.name, id(op))] = NearMiss(p.name, op, m.reason, m.op)
                continue
            st.matched += 1
            after = on_rewrite(p, op) if on_rewrite is not None else None
            p.rewrite(rw, op, m)
            if after is not None:
                after()
            st.applied += 1
            explained.pop((p.name, id(op)), None)
            fired[p.name] += 1
            rewrites += 1
            changed = True
            if rewrites > limit:
                worst, n = fired.most_common(1)[0]
                raise RewriteLimitError(
                    f"rewriting did not converge after {rewrites} rewrites: pattern '{worst}' fired {n} times; "
                    "two patterns may undo each other (report this with the input IR)")
            break
    rep.rewrites += rewrites
    # Keep only near misses on ops that survived (a later fusion may have taken them).
    rep.near_misses.extend(nm for nm in explained.values() if nm.op.parent is not None)
    return changed


__all__ = ["apply_patterns", "RewriteLimitError", "is_trivially_dead"]
