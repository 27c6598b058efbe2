"""Patterns, match results with reasons, and the rewriter.

A pattern's ``match`` returns a :class:`Match` (named values and ops it found)
or a :class:`Fail` that says, in plain words, why this op is not an instance —
that reason is what ``--explain`` prints.  A pattern's ``rewrite`` changes the
IR only through the :class:`Rewriter`, which tells the driver what changed so
it can revisit the right ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from irkit.ir.builder import Builder
from irkit.ir.core import Graph, Location, Op, Value


@dataclass
class Fail:
    """Why a pattern did not match; ``op`` is where it looked when it gave up.

    Every pattern's ``match`` returns a :class:`Match` or a ``Fail`` with a reason,
    never None.  ``near_miss=False`` marks an op that is not a candidate at all (a
    ``tanh`` that is not part of any GELU spelling): ``--explain`` lists only near
    misses, so it names the ops that almost fused without listing every other op.
    """

    reason: str
    op: Op | None = None
    near_miss: bool = True

    def __bool__(self) -> bool:  # a Fail is falsy, so `if m := p.match(op):` reads well
        return False


class Match(dict):
    """What a pattern found: names bound to values, ops and plain data."""

    def __bool__(self) -> bool:
        return True


MatchResult = Match | Fail


class Pattern:
    """A rewrite: ``match`` an op (or fail with a reason), then ``rewrite`` it.

    ``roots`` lists the op names this pattern can start from (empty: any op).
    ``explain`` marks patterns whose failures ``--explain`` reports (fusions).
    """

    name: str = "pattern"
    roots: tuple[str, ...] = ()
    benefit: int = 1
    explain: bool = False

    def match(self, op: Op) -> MatchResult:
        raise NotImplementedError

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        raise NotImplementedError

    filters_producers: bool = False
    """True when :meth:`accepts` looks at the operands' producers."""

    def applies_to(self, name: str) -> bool:
        """False when this pattern can never match an op named ``name``.

        Only consulted for patterns without ``roots``: the driver asks once per
        op name and never tries the pattern on ops it rules out.
        """
        return True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        """False when this pattern cannot match an op named ``name`` whose operands are
        produced by ops named ``producers`` (None for a block argument).

        Consulted only when ``filters_producers`` is set.  The driver asks once per
        distinct (name, producers) and skips the pattern on every op it rules out,
        so this must be a necessary condition of :meth:`match` (most patterns look
        for a particular producer first, and most ops do not have it).
        """
        return True


class _ReportingBuilder(Builder):
    """A builder whose inserted ops are reported to the rewriter as new."""

    def __init__(self, rw: Rewriter, graph: Graph, before: Op, loc: Location):
        super().__init__(graph, before, loc)
        self._rw = rw

    def insert(self, op: Op) -> Op:
        super().insert(op)
        self._rw._on_new(op)
        return op


class Rewriter:
    """The only way a pattern edits IR; it reports every change to its listener."""

    def __init__(self, on_new: Callable[[Op], None] | None = None,
                 on_changed: Callable[[Op], None] | None = None,
                 on_erased: Callable[[Op], None] | None = None):
        self._on_new = on_new or (lambda op: None)
        self._on_changed = on_changed or (lambda op: None)
        self._on_erased = on_erased or (lambda op: None)

    def builder(self, before: Op, loc: Location | None = None) -> Builder:
        """A builder inserting before ``before``; created ops are reported as new."""
        return _ReportingBuilder(self, before.parent, before,  # type: ignore[arg-type]
                                 loc if loc is not None else before.loc)

    def create(self, before: Op, name: str, operands: Sequence[Value | None], attrs: dict[str, Any] | None = None,
               loc: Location | None = None, **kw: Any) -> Op:
        return self.builder(before, loc).create(name, operands, attrs, loc, **kw)

    def replace_all_uses(self, old: Value, new: Value) -> None:
        on_changed = self._on_changed
        for user in old.users:
            on_changed(user)
        old.replace_all_uses_with(new)

    def replace_op(self, op: Op, new_values: Sequence[Value]) -> None:
        """Replace every result of ``op`` by ``new_values`` and erase it."""
        if len(new_values) != len(op.results):
            raise ValueError(f"replacing '{op.name}' needs {len(op.results)} values, got {len(new_values)}")
        for r, v in zip(op.results, new_values):
            if r.type != v.type:
                raise ValueError(f"replacing '{op.name}' at {op.loc.short()}: type {v.type} differs from {r.type}")
            self.replace_all_uses(r, v)
        self.erase_op(op)

    def erase_op(self, op: Op) -> None:
        g = op.parent
        assert g is not None, "op is not in a graph"
        producers = [v.producer for v in op._operands if v.producer is not None]
        g.erase(op)
        self._on_erased(op)
        for p in producers:
            self._on_changed(p)

    def set_operand(self, op: Op, i: int, v: Value) -> None:
        op.set_operand(i, v)
        self._on_changed(op)

    def move_before(self, op: Op, anchor: Op) -> None:
        g = op.parent
        assert g is not None and anchor.parent is g
        g.unlink(op)
        g.insert_before(anchor, op)
        self._on_changed(op)


@dataclass
class PatternStats:
    """Per-pattern counts: how often it was tried, matched and applied."""

    tried: int = 0
    matched: int = 0
    applied: int = 0


@dataclass
class NearMiss:
    """An explain record: the first reason a fusion did not match at an op."""

    pattern: str
    op: Op
    reason: str
    at: Op | None = None

    def describe(self) -> str:
        where = self.op.loc.short()
        at = self.at
        focus = f" (at '{at.name}', {at.loc.short()})" if at is not None and at is not self.op else ""
        return f"{self.pattern}: '{self.op.name}' at {where} not fused: {self.reason}{focus}"


@dataclass
class RewriteReport:
    """What a driver run did."""

    stats: dict[str, PatternStats] = field(default_factory=dict)
    near_misses: list[NearMiss] = field(default_factory=list)
    rewrites: int = 0
    erased_dead: int = 0

    def stat(self, name: str) -> PatternStats:
        s = self.stats.get(name)
        if s is None:
            s = self.stats[name] = PatternStats()
        return s


def graph_of(op: Op) -> Graph:
    assert op.parent is not None
    return op.parent


__all__ = ["Fail", "Match", "MatchResult", "Pattern", "Rewriter", "PatternStats", "NearMiss", "RewriteReport"]
