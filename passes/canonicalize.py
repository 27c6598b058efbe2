"""``canonicalize``: local algebra, shape-op chains and small constant folding.

The algebra is a rule table (see ``RULES``); structural rewrites that need a
little code (composing transposes, folding constants) are patterns below it.
The canonical forms of exporter spellings live in their own modules and are
listed explicitly in :func:`canonicalization_patterns`: contractions, keepdims
and implicit broadcasts in :mod:`irkit.passes.canon_forms`, attention scale,
masks and softmax in :mod:`irkit.passes.canon_attention`; canonicalize is the
one place that runs them all to a fixed point.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from irkit.passes.canon_attention import attention_canonicalization_patterns
from irkit.passes.canon_forms import canonical_form_patterns

from irkit.ir.core import Dense, Op, Value
from irkit.ir.ops import OPS
from irkit.ir.types import DType
from irkit.passmanager import Pass, PassContext, register_pass
from irkit.rewrite import (
    C,
    Fail,
    Match,
    P,
    Pattern,
    Rewriter,
    RewriteReport,
    Rule,
    apply_patterns,
    rule_patterns,
)
from irkit.rewrite.rules import RuleSet, V, X, match_rule, splat_constant


def _new(rw: Rewriter, root: Op, name: str, operands: list[Value], **attrs) -> Value:
    return rw.create(root, name, operands, attrs).results[0]


def _same_type(a: str, b: str = "__root__") -> Callable[[Op, Match], bool]:
    return lambda op, m: m[a].type == op.results[0].type


# Exact widening conversions: casting through them loses nothing.
_WIDENS: dict[DType, set[DType]] = {
    DType.bool: {DType.i8, DType.i16, DType.i32, DType.i64, DType.ui8, DType.ui16, DType.ui32, DType.ui64,
                 DType.f16, DType.bf16, DType.f32, DType.f64},
    DType.i8: {DType.i16, DType.i32, DType.i64, DType.f16, DType.bf16, DType.f32, DType.f64},
    DType.ui8: {DType.i16, DType.i32, DType.i64, DType.ui16, DType.ui32, DType.ui64, DType.f16, DType.bf16,
                DType.f32, DType.f64},
    DType.i16: {DType.i32, DType.i64, DType.f32, DType.f64},
    DType.ui16: {DType.i32, DType.i64, DType.ui32, DType.ui64, DType.f32, DType.f64},
    DType.i32: {DType.i64, DType.f64},
    DType.ui32: {DType.i64, DType.ui64, DType.f64},
    DType.f16: {DType.f32, DType.f64},
    DType.bf16: {DType.f32, DType.f64},
    DType.f32: {DType.f64},
}


def _cast_chain(rw: Rewriter, op: Op, m: Match) -> Value:
    x = m["x"]
    to = op.attrs["to"]
    if x.type.dtype == to:
        return x
    return _new(rw, op, "ik.cast", [x], to=to)


def _compose_transpose(rw: Rewriter, op: Op, m: Match) -> Value:
    inner = m["t"]
    p1, p2 = inner.attrs["perm"], op.attrs["perm"]
    perm = tuple(p1[i] for i in p2)
    x = inner.operand(0)
    if perm == tuple(range(len(perm))):
        return x
    return _new(rw, op, "ik.transpose", [x], perm=perm)


def _reshape_chain(rw: Rewriter, op: Op, m: Match) -> Value:
    x = m["r"].operand(0)
    if x.type.shape == op.results[0].type.shape:
        return x
    return _new(rw, op, "ik.reshape", [x], shape=op.attrs["shape"])


def _broadcast_chain(rw: Rewriter, op: Op, m: Match) -> Value:
    return _new(rw, op, "ik.broadcast", [m["b"].operand(0)], shape=op.attrs["shape"])


def _rsqrt(rw: Rewriter, op: Op, m: Match) -> Value:
    return _new(rw, op, "ik.rsqrt", [m["x"]])


def _square(rw: Rewriter, op: Op, m: Match) -> Value:
    return _new(rw, op, "ik.mul", [m["x"], m["x"]])


def _sqrt(rw: Rewriter, op: Op, m: Match) -> Value:
    return _new(rw, op, "ik.sqrt", [m["x"]])


def _is_float_op(op: Op, m: Match) -> bool:
    return op.results[0].type.dtype.is_float and _same_type("x")(op, m)


def _identity_perm(op: Op) -> bool:
    return tuple(op.attrs["perm"]) == tuple(range(len(op.attrs["perm"])))


def _full_slice(op: Op) -> bool:
    t = op.operand(0).type
    step = op.attrs.get("step") or (1,) * t.rank
    return all(s == 0 and lim == d and st == 1
               for s, lim, st, d in zip(op.attrs["start"], op.attrs["limit"], step, t.shape))


RULES: list[Rule] = [
    Rule("add-zero", P("ik.add", X, C(0.0)), "x"),
    Rule("sub-zero", P("ik.sub", X, C(0.0)), "x"),
    Rule("mul-one", P("ik.mul", X, C(1.0)), "x"),
    Rule("div-one", P("ik.div", X, C(1.0)), "x"),
    Rule("pow-one", P("ik.pow", X, C(1.0)), "x"),
    Rule("pow-two", P("ik.pow", X, C(2.0)), _square, guard=_same_type("x")),
    Rule("pow-half", P("ik.pow", X, C(0.5)), _sqrt, guard=_is_float_op),
    Rule("pow-neg-half", P("ik.pow", X, C(-0.5)), _rsqrt, guard=_is_float_op),
    Rule("one-over-sqrt", P("ik.div", C(1.0), P("ik.sqrt", X)), _rsqrt, guard=_same_type("x")),
    Rule("reciprocal-sqrt", P("ik.reciprocal", P("ik.sqrt", X)), _rsqrt),
    Rule("neg-neg", P("ik.neg", P("ik.neg", X)), "x"),
    Rule("not-not", P("ik.not", P("ik.not", X)), "x"),
    Rule("dropout", P("ik.dropout", X), "x"),
    Rule("cast-noop", P("ik.cast", X, where=lambda op: op.attrs["to"] == op.operand(0).type.dtype), "x"),
    Rule("cast-cast",
         P("ik.cast", P("ik.cast", X, where=lambda op: op.attrs["to"] in _WIDENS.get(op.operand(0).type.dtype, ()))),
         _cast_chain),
    Rule("transpose-identity", P("ik.transpose", X, where=_identity_perm), "x"),
    Rule("transpose-transpose", P("ik.transpose", P("ik.transpose", X, name="t")), _compose_transpose),
    Rule("reshape-noop", P("ik.reshape", X, where=lambda op: op.attrs["shape"] == op.operand(0).type.shape), "x"),
    Rule("reshape-reshape", P("ik.reshape", P("ik.reshape", X, name="r")), _reshape_chain),
    Rule("broadcast-noop", P("ik.broadcast", X, where=lambda op: op.attrs["shape"] == op.operand(0).type.shape), "x"),
    Rule("broadcast-broadcast", P("ik.broadcast", P("ik.broadcast", X, name="b")), _broadcast_chain),
    Rule("slice-full", P("ik.slice", X, where=_full_slice), "x"),
    Rule("where-same", P("ik.where", V("c"), X, X), "x",
         guard=_same_type("x")),
]



def _producers_fit(needs: tuple[str | C | None, ...], operands: list[Value]) -> bool:
    for need, v in zip(needs, operands):
        if need is None:
            continue
        p = v.producer
        if p is None:
            return False
        if type(need) is str:
            if p.name != need:
                return False
        else:
            # Exactly the rule's own test for a C(...) operand.
            c = splat_constant(v)
            if c is None or c != need.value:  # type: ignore[union-attr]
                return False
    return True


def _same_value_pairs(pat: P) -> tuple[tuple[int, int], ...]:
    """Operand positions a rule binds to one name (``P(op, V("c"), X, X)``): they must hold one value."""
    first: dict[str, int] = {}
    pairs = []
    for i, sub in enumerate(pat.operands):
        if isinstance(sub, V):
            if sub.name in first:
                pairs.append((first[sub.name], i))
            else:
                first[sub.name] = i
    return tuple(pairs)


class IndexedRuleSet(RuleSet):
    """A :class:`RuleSet` that skips a rule at once when the op cannot fit its
    pattern: the operand count, the root's ``where`` condition, the splat
    constant where it wants ``C``, the named op where it wants ``P`` (in either
    order for commutative ops) and one value where a name repeats.  These are
    necessary conditions of the full match, so the outcome is the same; most
    ops are rejected without building any bindings."""

    def __init__(self, rules: list[Rule]):
        super().__init__(rules)
        d = OPS.get(self.roots[0])
        commutative = d is not None and d.has("commutative")
        self._checks: list[tuple[Rule, int, Callable[[Op], bool] | None, tuple[str | C | None, ...],
                                 tuple[str | C | None, ...] | None, tuple[tuple[int, int], ...]]] = []
        for r in rules:
            needs = r.needs
            swapped = needs[::-1] if commutative and len(needs) == 2 else None
            self._checks.append((r, len(needs), r.pattern.where, needs, swapped, _same_value_pairs(r.pattern)))
        self._by_key: dict[tuple[str | None, ...], list] = {}

    def match(self, op: Op) -> Match | Fail:
        operands = op._operands
        n = len(operands)
        # The rules whose producer names fit, once per tuple of producer names.
        key = tuple([None if (q := v.producer) is None else q.name for v in operands])
        checks = self._by_key.get(key)
        if checks is None:
            checks = self._by_key[key] = [c for c in self._checks if c[0].accepts(op.name, key)]
        for r, arity, where, needs, swapped, same in checks:
            if n != arity or not (_producers_fit(needs, operands) or
                                  (swapped is not None and _producers_fit(swapped, operands))):
                continue
            if same and any(operands[i] is not operands[j] for i, j in same):
                continue
            if where is not None and not where(op):
                continue
            m = match_rule(r, op)
            if m is not None:
                return m
        return Fail("no algebraic rule applies", op)


def indexed_rule_patterns(rules: list[Rule]) -> list[Pattern]:
    """Like :func:`rule_patterns` (one pattern per root op), with the producer pre-check."""
    return [IndexedRuleSet(rs.rules) for rs in rule_patterns(rules)]  # type: ignore[attr-defined]


class ConstantOperandRight(Pattern):
    """Commutative ops keep a constant operand on the right: add(C, x) -> add(x, C)."""

    name = "constant-right"

    filters_producers = True

    def applies_to(self, name: str) -> bool:
        d = OPS.get(name)
        return d is not None and d.has("commutative")

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return len(producers) == 2 and producers[0] == "ik.constant" and producers[1] != "ik.constant"

    def match(self, op: Op) -> Match | Fail:
        d = OPS.get(op.name)
        if d is None or not d.has("commutative") or op.num_operands != 2:
            return _NOT_COMMUTATIVE
        a, b = op._operands
        pa, pb = a.producer, b.producer
        if pa is not None and pa.name == "ik.constant" and (pb is None or pb.name != "ik.constant"):
            return Match()
        return _ALREADY_RIGHT

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        a, b = op.operands
        rw.set_operand(op, 0, b)
        rw.set_operand(op, 1, a)


_NOT_COMMUTATIVE = Fail("not a commutative binary op")
_ALREADY_RIGHT = Fail("constant is already on the right")


class SingleConcat(Pattern):
    name = "concat-single"
    roots = ("ik.concat",)

    def match(self, op: Op) -> Match | Fail:
        return Match() if op.num_operands == 1 else Fail("more than one operand")

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        rw.replace_op(op, [op.operand(0)])


class ConcatDropEmpty(Pattern):
    """Operands with no elements along the concat axis (a statically 0 dim) add nothing: drop them;
    with one operand left, the concat is that operand.  (Phi-3's rotary embedding concatenates the
    rotated head with an empty pass-through slice; a GPU schedule of that empty copy divides by its
    zero extent.)  A concat of only empty operands is left as it is."""

    name = "concat-drop-empty"
    roots = ("ik.concat",)

    def match(self, op: Op) -> Match | Fail:
        rank = op.results[0].type.rank
        ax = op.attrs["axis"] % rank if rank else 0
        keep = [v for v in op.operands if v.type.shape[ax] != 0]
        if len(keep) == op.num_operands:
            return Fail("no operand is empty along the axis")
        if not keep:
            return Fail("every operand is empty")
        if len(keep) == 1 and keep[0].type != op.results[0].type:  # the same shape, a dim spelled otherwise
            return Fail("the one non-empty operand's type differs from the result's")
        return Match(keep=keep)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        keep = m["keep"]
        new = keep[0] if len(keep) == 1 else rw.create(op, "ik.concat", keep, dict(op.attrs)).results[0]
        rw.replace_op(op, [new])


FOLD_LIMIT = 4096
"""Constant-fold an op only when its results hold at most this many elements."""


class FoldConstants(Pattern):
    """Evaluate a pure op whose operands are all constants (small results only)."""

    name = "fold-constants"

    filters_producers = True

    def applies_to(self, name: str) -> bool:
        d = OPS.get(name)
        return d is not None and d.has("pure") and not d.has("source")

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return bool(producers) and all(p == "ik.constant" for p in producers)

    def match(self, op: Op) -> Match | Fail:
        operands = op._operands
        if not operands:
            return _NOT_FOLDABLE
        # The cheap test first: almost every op has a non-constant operand.
        for v in operands:
            p = v.producer
            if p is None or p.name != "ik.constant":
                return _NOT_CONSTANT
        d = OPS.get(op.name)
        if d is None or not d.has("pure") or d.has("source"):
            return _NOT_FOLDABLE
        for r in op.results:
            if not r.type.is_static or r.type.num_elements() > FOLD_LIMIT:
                return Fail("result too large to fold")
        for v in operands:
            dense = v.producer.attrs["value"]  # type: ignore[union-attr]
            if not dense.is_splat and dense.size > FOLD_LIMIT:
                return Fail("operand too large to fold")
        return Match()

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        from irkit.interp import Interpreter

        ins = [v.producer.attrs["value"].array for v in op.operands]  # type: ignore[union-attr]
        try:
            outs = Interpreter()._op(op, ins, {})
        except Exception:
            return  # leave it: the interpreter will report the error at run time
        new = []
        for r, y in zip(op.results, outs):
            arr = np.ascontiguousarray(y).reshape(np.shape(y))  # ascontiguousarray makes 0-d arrays 1-d
            d = Dense(arr, r.type.dtype)
            if arr.size > 1 and d.is_splat:
                d = Dense.splat(arr.reshape(-1)[0], arr.shape, r.type.dtype)
            new.append(rw.create(op, "ik.constant", [], {"value": d}).results[0])
        rw.replace_op(op, new)


_NOT_FOLDABLE = Fail("not a foldable op")
_NOT_CONSTANT = Fail("an operand is not constant")


_PATTERNS: list[Pattern] | None = None


def canonicalization_patterns() -> list[Pattern]:
    """The patterns canonicalize runs: the algebra rules and structural patterns above, the
    generic canonical forms (:func:`~irkit.passes.canon_forms.canonical_form_patterns`) and the
    attention forms (:func:`~irkit.passes.canon_attention.attention_canonicalization_patterns`).
    Built once (patterns hold no state between runs), so the driver's dispatch plan for them
    is reused from run to run."""
    global _PATTERNS
    if _PATTERNS is None:
        _PATTERNS = [*indexed_rule_patterns(RULES), ConstantOperandRight(), SingleConcat(), ConcatDropEmpty(),
                     FoldConstants(),
                     *canonical_form_patterns(), *attention_canonicalization_patterns()]
    return list(_PATTERNS)


@register_pass("canonicalize")
@dataclass(frozen=True)
class Canonicalize(Pass):
    """Simplify algebra, collapse reshape/transpose/cast chains, fold small constants.

    before: %1 = "ik.transpose"(%0) {perm = array<i64: 1, 0>} ...
            %2 = "ik.transpose"(%1) {perm = array<i64: 1, 0>} ...
            %3 = "ik.mul"(%2, %one) ...
    after:  (uses of %3 read %0 directly)
    """

    max_rewrites: int = 0
    """Bound on rewrites per function (0: 20 x ops + 1000)."""

    def check_options(self) -> None:
        super().check_options()
        if self.max_rewrites < 0:
            raise ValueError(f"max-rewrites must be >= 0 (0: 20 x ops + 1000), got {self.max_rewrites}")

    def run(self, module, ctx: PassContext) -> bool:
        rep = RewriteReport()
        changed = apply_patterns(module, canonicalization_patterns(), report=rep, explain=ctx.explain,
                                 max_rewrites=self.max_rewrites or None)
        ctx.absorb(rep)
        return changed
