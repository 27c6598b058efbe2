"""Rule tables: local algebra written as data.

A rule reads like a line of an algebra sheet::

    Rule("mul-one", P("ik.mul", X, One), X)

``P(name, *operands, where=...)`` matches an op, ``V(name)`` binds any value,
``C(value)`` matches a splat constant equal to ``value``.  The replacement is
a bound name or a function ``(rewriter, root op, bindings) -> Value``; an
optional ``guard(root op, bindings) -> bool`` declines a match before anything
is built.  Commutative ops are matched in both operand orders for free.
A rewrite never changes a result's type: ``x + 0`` where the zero broadcasts
``x`` to a larger shape is left alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from irkit.ir.core import Op, Value
from irkit.ir.ops import OPS
from irkit.rewrite.pattern import Fail, Match, MatchResult, Pattern, Rewriter


@dataclass(frozen=True)
class V:
    """Binds any value to ``name`` (the same name twice must be the same value)."""

    name: str


@dataclass(frozen=True)
class C:
    """A splat constant equal to ``value`` (any shape that does not widen the result)."""

    value: float
    name: str | None = None


@dataclass(frozen=True)
class P:
    """An op named ``op`` whose operands match ``operands``; ``where`` checks attributes."""

    op: str
    operands: tuple[Any, ...]
    where: Callable[[Op], bool] | None = None
    name: str | None = None

    def __init__(self, op: str, *operands: Any, where: Callable[[Op], bool] | None = None, name: str | None = None):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "operands", operands)
        object.__setattr__(self, "where", where)
        object.__setattr__(self, "name", name)


PatExpr = V | C | P
Replacement = str | Callable[[Rewriter, Op, "Match"], Value]


def splat_constant(v: Value) -> Any:
    """The scalar of a splat constant value, or None."""
    p = v.producer
    if p is None or p.name != "ik.constant":
        return None
    d = p.attrs["value"]
    if not d.is_splat or d.size == 0:
        return None
    return d.splat_value()


def _match(pat: PatExpr, v: Value, b: Match) -> str | None:
    """None on success (bindings in ``b``), else a reason."""
    if isinstance(pat, V):
        prev = b.get(pat.name)
        if prev is not None and prev is not v:
            return f"'{pat.name}' bound to two different values"
        b[pat.name] = v
        return None
    if isinstance(pat, C):
        c = splat_constant(v)
        if c is None or c != pat.value:
            return f"operand is not the constant {pat.value}"
        if pat.name:
            b[pat.name] = v
        return None
    op = v.producer
    if op is None or op.name != pat.op:
        return f"operand is not produced by '{pat.op}'"
    return _match_op(pat, op, b)


def _match_op(pat: P, op: Op, b: Match) -> str | None:
    if op.name != pat.op:
        return f"not '{pat.op}'"
    if len(op.operands) != len(pat.operands):
        return "operand count differs"
    if pat.where is not None and not pat.where(op):
        return "attribute condition failed"
    orders = [list(range(len(pat.operands)))]
    d = OPS.get(op.name)
    if d is not None and d.has("commutative") and len(pat.operands) == 2:
        orders.append([1, 0])
    reason = None
    for order in orders:
        trial = Match(b)
        reason = None
        for i, sub in zip(order, pat.operands):
            reason = _match(sub, op.operand(i), trial)
            if reason is not None:
                break
        if reason is None:
            b.clear()
            b.update(trial)
            if pat.name:
                b[pat.name] = op
            return None
    return reason


def operand_needs(pat: P) -> tuple[str | C | None, ...]:
    """Per operand of a rule's root: the producer name it needs, the splat constant
    (a ``C``), or None for any value."""
    return tuple(sub.op if isinstance(sub, P) else sub if isinstance(sub, C) else None
                 for sub in pat.operands)


def _needs_fit_names(needs: tuple[str | C | None, ...], producers: tuple[str | None, ...]) -> bool:
    for need, prod in zip(needs, producers):
        if need is None:
            continue
        if prod != (need if type(need) is str else "ik.constant"):
            return False
    return True


class Rule(Pattern):
    """A table-driven rewrite: pattern expression -> replacement."""

    filters_producers = True

    def __init__(self, name: str, pattern: P, replacement: Replacement, benefit: int = 1,
                 guard: Callable[[Op, Match], bool] | None = None):
        self.name = name
        self.pattern = pattern
        self.replacement = replacement
        self.guard = guard
        self.roots = (pattern.op,)
        self.benefit = benefit
        self.needs = operand_needs(pattern)
        d = OPS.get(pattern.op)
        self.commutative = d is not None and d.has("commutative") and len(self.needs) == 2

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        """The producer names fit the root's operand patterns (either order when commutative)."""
        if len(producers) != len(self.needs):
            return False
        return _needs_fit_names(self.needs, producers) or (
            self.commutative and _needs_fit_names(self.needs[::-1], producers))

    def match(self, op: Op) -> MatchResult:
        b = Match()
        reason = _match_op(self.pattern, op, b)
        if reason is not None:
            return Fail(reason, op)
        b["__root__"] = op
        return b

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        raise AssertionError("Rule is applied through apply()")

    def apply(self, rw: Rewriter, op: Op, m: Match) -> bool:
        rep = self.replacement
        new = m[rep] if isinstance(rep, str) else rep(rw, op, m)
        if new.type != op.results[0].type:
            # The replacement's ops are left unused; the driver erases them as dead.
            return False
        rw.replace_op(op, [new])
        return True


class RuleSet(Pattern):
    """Rules grouped under one root op name, tried in order (one Pattern per root)."""

    filters_producers = True

    def __init__(self, rules: list[Rule]):
        self.rules = rules
        self.name = "rules:" + rules[0].roots[0]
        self.roots = rules[0].roots

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return any(r.accepts(name, producers) for r in self.rules)

    def match(self, op: Op) -> MatchResult:
        for r in self.rules:
            m = match_rule(r, op)
            if m is not None:
                return m
        return Fail("no algebraic rule applies", op)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        m["__rule__"].apply(rw, op, m)


def match_rule(r: Rule, op: Op) -> Match | None:
    """``r``'s match at ``op`` (tagged with the rule), or None; a rule whose replacement
    declines (wrong type, guard) is not a match."""
    m = r.match(op)
    if isinstance(m, Match):
        m["__rule__"] = r
        if _would_apply(r, op, m):
            return m
    return None


def _would_apply(r: Rule, op: Op, m: Match) -> bool:
    if r.guard is not None and not r.guard(op, m):
        return False
    rep = r.replacement
    if isinstance(rep, str):
        return m[rep].type == op.results[0].type
    return True


def rule_patterns(rules: list[Rule]) -> list[Pattern]:
    """Group rules by root op so the driver tries each op's table once."""
    groups: dict[str, list[Rule]] = {}
    for r in rules:
        groups.setdefault(r.roots[0], []).append(r)
    return [RuleSet(rs) for rs in groups.values()]


X, Y, Z = V("x"), V("y"), V("z")

__all__ = ["V", "C", "P", "Rule", "RuleSet", "match_rule", "operand_needs", "rule_patterns", "splat_constant", "X", "Y",
           "Z"]
