"""The greedy worklist driver: apply patterns until nothing matches.

Every op of the graph (nested regions included) starts on the worklist; when
a pattern rewrites, the ops it created and the users of the values it replaced
go back on.  Dead pure ops are erased as they are found.  The number of
rewrites is bounded (``max_rewrites``, by default proportional to the graph),
so a pair of patterns that undo each other stops with a clear error naming the
pattern that kept firing, never a hang.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence

from irkit.errors import IrkitError
from irkit.ir.core import Function, Graph, Module, Op, gc_paused
from irkit.ir.ops import OPS
from irkit.rewrite.pattern import Fail, NearMiss, Pattern, Rewriter, RewriteReport


class RewriteLimitError(IrkitError):
    """The driver hit its rewrite bound: some pattern keeps firing."""


def is_trivially_dead(op: Op) -> bool:
    d = OPS.get(op.name)
    return d is not None and d.has("pure") and not op.is_used and not d.has("terminator")


_ERASABLE: tuple[int, frozenset[str]] = (-1, frozenset())


def erasable_op_names() -> frozenset[str]:
    """Ops that may be erased when unused: registered, pure, not a terminator (recomputed
    only when ops are registered)."""
    global _ERASABLE
    if _ERASABLE[0] != len(OPS):
        _ERASABLE = (len(OPS), frozenset(n for n, d in OPS.items()
                                         if "pure" in d.traits and "terminator" not in d.traits))
    return _ERASABLE[1]


_DEFAULT_ON_REWRITE: contextvars.ContextVar[Callable[[Pattern, Op], Callable[[], None] | None] | None] = \
    contextvars.ContextVar("irkit_default_on_rewrite", default=None)
"""The hook every :func:`apply_patterns` call uses when its caller passes none: the pass manager
sets it while a pass runs under ``--check-rewrites``, so every pass's rewrites are checked,
plugins' included, without a line in the pass."""


@contextlib.contextmanager
def default_on_rewrite(hook: Callable[[Pattern, Op], Callable[[], None] | None] | None) -> Iterator[None]:
    """Use ``hook`` for every :func:`apply_patterns` call inside the block that passes no hook."""
    token = _DEFAULT_ON_REWRITE.set(hook)
    try:
        yield
    finally:
        _DEFAULT_ON_REWRITE.reset(token)


def apply_patterns(target: Module | Function | Graph, patterns: Sequence[Pattern], *,
                   report: RewriteReport | None = None, explain: bool = False,
                   max_rewrites: int | None = None, erase_dead: bool = True,
                   on_rewrite: Callable[[Pattern, Op], Callable[[], None] | None] | None = None) -> bool:
    """Apply ``patterns`` greedily to a fixed point; True if anything changed.

    ``on_rewrite(pattern, op)`` is called before each rewrite and may return a
    callback run after it (the numeric per-rewrite check uses this). Without one, the hook
    installed by :func:`default_on_rewrite` (the pass manager's ``--check-rewrites``) is used.
    """
    if on_rewrite is None:
        on_rewrite = _DEFAULT_ON_REWRITE.get()
    graphs: list[Graph]
    if isinstance(target, Module):
        graphs = [f.body for f in target.functions]
    elif isinstance(target, Function):
        graphs = [target.body]
    else:
        graphs = [target]
    rep = report if report is not None else RewriteReport()
    changed = False
    with gc_paused():
        plan = _plan(patterns)
        n = len(plan.patterns)
        counts = ([0] * n, [0] * n, [0] * n)  # tried, matched, applied, by pattern index
        for g in graphs:
            changed |= _run(g, plan, counts, rep, explain, max_rewrites, erase_dead, on_rewrite)
        for i, p in enumerate(plan.patterns):
            if counts[0][i]:
                st = rep.stat(p.name)
                st.tried += counts[0][i]
                st.matched += counts[1][i]
                st.applied += counts[2][i]
    return changed


class _Plan:
    """Which patterns to try for an op name, and for a name with its operands' producer
    names: computed once per distinct name (or key) and kept with the pattern list, so a
    pass that runs the same patterns again (canonicalize, many times per pipeline) does
    not recompute it.  Rooted patterns for the name come first, then the generic ones
    (each group by decreasing benefit, as given); a generic pattern whose
    ``applies_to(name)`` is False is left out, and when some of a name's patterns filter
    on producers (``Pattern.accepts``) the list is narrowed per producer tuple: most ops
    are then tried against none or one pattern."""

    def __init__(self, patterns: Sequence[Pattern]):
        self.patterns = list(patterns)  # keeps the ids in the cache key alive
        self.by_root: dict[str, list[Pattern]] = {}
        self.generic: list[Pattern] = []
        for p in sorted(patterns, key=lambda p: -p.benefit):
            if p.roots:
                for r in p.roots:
                    self.by_root.setdefault(r, []).append(p)
            else:
                self.generic.append(p)
        self.index = {id(p): i for i, p in enumerate(self.patterns)}
        # Entries are (pattern, its index): a run counts tries in plain lists by index.
        self.names: dict[str, tuple[tuple[tuple[Pattern, int], ...], bool]] = {}
        self.keys: dict[tuple[str, tuple[str | None, ...]], tuple[tuple[Pattern, int], ...]] = {}

    def for_name(self, name: str) -> tuple[tuple[tuple[Pattern, int], ...], bool]:
        hit = self.names.get(name)
        if hit is None:
            pats = (*self.by_root.get(name, ()), *(p for p in self.generic if p.applies_to(name)))
            hit = self.names[name] = (tuple((p, self.index[id(p)]) for p in pats),
                                      any(p.filters_producers for p in pats))
        return hit

    def for_key(self, name: str, producers: tuple[str | None, ...]) -> tuple[tuple[Pattern, int], ...]:
        hit = self.keys.get((name, producers))
        if hit is None:
            hit = self.keys[(name, producers)] = tuple(
                e for e in self.for_name(name)[0] if not e[0].filters_producers or e[0].accepts(name, producers))
        return hit


_PLANS: dict[tuple[int, ...], _Plan] = {}
_MAX_PLANS = 64


def _plan(patterns: Sequence[Pattern]) -> _Plan:
    key = tuple(map(id, patterns))
    hit = _PLANS.get(key)
    if hit is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        hit = _PLANS[key] = _Plan(patterns)
    return hit


def _all_ops(g: Graph) -> Iterable[Op]:
    return g.walk()


def _run(g: Graph, plan: _Plan, counts: tuple[list[int], list[int], list[int]], rep: RewriteReport,
         explain: bool,
         max_rewrites: int | None, erase_dead: bool,
         on_rewrite: Callable[[Pattern, Op], Callable[[], None] | None] | None) -> bool:
    # The worklist is a stack; ``queued`` holds the ids of ops on it, so an op is
    # queued at most once.  Only ops a rewrite touched (created ops, users of
    # replaced values, producers of erased ops' operands) are revisited.
    worklist: list[Op] = []
    queued: set[int] = set()
    push = worklist.append
    enqueue = queued.add

    def push_op(op: Op) -> None:
        if id(op) not in queued and op.parent is not None:
            enqueue(id(op))
            push(op)

    def push_users(op: Op) -> None:
        push_op(op)
        for r in op.results:
            for u, _ in r.uses:
                push_op(u)

    ops = list(_all_ops(g))
    # Process in program order: reverse the list because we pop from the end.
    worklist.extend(reversed(ops))
    queued.update(map(id, ops))
    limit = max_rewrites if max_rewrites is not None else 20 * len(ops) + 1000
    fired: Counter[str] = Counter()
    rewrites = 0
    changed = False
    explained: dict[tuple[str, int], NearMiss] = {}
    rw = Rewriter(on_new=push_users, on_changed=push_users, on_erased=lambda op: queued.discard(id(op)))
    erasable = erasable_op_names() if erase_dead else frozenset()
    erased_dead = 0
    pop = worklist.pop
    unqueue = queued.discard
    patterns_for = plan.for_name
    cache = plan.names
    keyed = plan.keys
    narrow = plan.for_key
    tried, matched, applied = counts

    while worklist:
        op = pop()
        unqueue(id(op))
        if op.parent is None:
            continue
        name = op.name
        if name in erasable:
            for r in op.results:
                if r.uses:
                    break
            else:
                rw.erase_op(op)
                erased_dead += 1
                changed = True
                continue
        ent = cache.get(name)
        if ent is None:
            ent = patterns_for(name)
        cands, by_producers = ent
        if by_producers:
            prods = tuple([None if (q := v.producer) is None else q.name for v in op._operands])
            c = keyed.get((name, prods))
            cands = c if c is not None else narrow(name, prods)
        for p, i in cands:
            tried[i] += 1
            m = p.match(op)
            if isinstance(m, Fail) or not m:
                if explain and p.explain and isinstance(m, Fail) and m.near_miss:
                    explained[(p.name, id(op))] = NearMiss(p.name, op, m.reason, m.op)
                continue
            matched[i] += 1
            after = on_rewrite(p, op) if on_rewrite is not None else None
            p.rewrite(rw, op, m)
            if after is not None:
                after()
            applied[i] += 1
            if explained:
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
    rep.erased_dead += erased_dead
    rep.rewrites += rewrites
    # Keep only near misses on ops that survived (a later fusion may have taken them).
    rep.near_misses.extend(nm for nm in explained.values() if nm.op.parent is not None)
    return changed


__all__ = ["apply_patterns", "RewriteLimitError", "is_trivially_dead", "erasable_op_names"]
