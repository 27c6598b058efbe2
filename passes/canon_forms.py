"""Canonical forms every pattern relies on: contractions, reductions, broadcasts.

Design note.  Exporters spell the same computation several ways, and the
matchers downstream (``fuse-attention``, ``fuse-norm``, the targets' lowering
rules) should see one.  The patterns here, run by ``canonicalize`` to a fixed
point next to the algebra rules and the attention forms of
:mod:`irkit.passes.canon_attention`, settle the spellings that have nothing
to do with attention:

* **Contraction.**  An ``ik.contract`` that is a (batched) matrix product
  becomes ``ik.matmul`` with explicit ``ik.transpose`` ops on its operands;
  transposes then compose.  Reshapes that only merge the leading batch dims of
  both matmul operands (the 3-D ``bmm`` form) move after the matmul, and a
  transpose between a flattening and an unflattening reshape becomes one
  transpose of the unflattened tensor.
* **Keepdims.**  A reduction followed by a reshape that re-inserts the reduced
  axes as 1 is one reduction with ``keepdims``; ``reduce_sum(x) / N`` over N
  elements is ``reduce_mean``.
* **Implicit broadcast.**  Elementwise ops broadcast NumPy-style, so an
  explicit ``ik.broadcast`` (or a reshape that only prepends 1s) of an operand
  is dropped, and a splat constant of any shape becomes a rank-0 constant,
  whenever the result type stays the same.  ``max(x, -inf)`` and
  ``min(x, inf)`` are ``x``.

Every rewrite here is exact.  The module also holds the small match and build
helpers the other pattern modules share (splat constants, producers, emitting
an op before another).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from irkit.ir.core import Dense, Op, Value
from irkit.ir.ops import OPS
from irkit.ir.types import DType, TensorType, dim_prod, normalize_axis
from irkit.rewrite import (
    C,
    Fail,
    Match,
    P,
    Pattern,
    Rewriter,
    Rule,
    V,
    rule_patterns,
    splat_constant,
)

# ---------------------------------------------------------------------------
# Match helpers


def float_splat(v: Value) -> float | None:
    """The value of a float splat constant, else None."""
    if not v.type.dtype.is_float:
        return None
    c = splat_constant(v)
    return None if c is None else float(c)


def int_splat(v: Value) -> int | None:
    """The value of an integer or boolean splat constant, else None."""
    if v.type.dtype.is_float:
        return None
    c = splat_constant(v)
    return None if c is None else int(c)


def scalar_factor(v: Value, like: Value) -> float | None:
    """The float of a splat constant ``v`` that broadcasts into ``like`` without widening it."""
    c = float_splat(v)
    if c is None or v.type.rank > like.type.rank:
        return None
    for d in v.type.shape:
        if d != 1:
            return None
    return c


def is_float_cast(op: Op) -> bool:
    return op.name == "ik.cast" and op.operand(0).type.dtype.is_float and op.attrs["to"].is_float


def producer(v: Value) -> Op | None:
    return v.producer


def op_is(v: Value, *names: str) -> Op | None:
    """The producer of ``v`` when its name is one of ``names``."""
    p = v.producer
    return p if p is not None and p.name in names else None


# ---------------------------------------------------------------------------
# Build helpers


def emit_op(rw: Rewriter, before: Op, name: str, *operands: Value | None, **attrs) -> Value:
    """Create ``name`` before ``before`` (location of ``before``) and return its single result."""
    return rw.create(before, name, list(operands), attrs).results[0]


def const_scalar(rw: Rewriter, before: Op, value: float | bool, dtype: DType) -> Value:
    return rw.create(before, "ik.constant", [], {"value": Dense.splat(value, (), dtype)}).results[0]


def transposed(rw: Rewriter, before: Op, x: Value, perm: Sequence[int]) -> Value:
    """``x`` permuted by ``perm``, composing with a transpose that produced ``x``; no-op perms vanish."""
    perm = tuple(int(p) for p in perm)
    p = x.producer
    if p is not None and p.name == "ik.transpose":
        inner = p.attrs["perm"]
        perm = tuple(inner[i] for i in perm)
        x = p.operand(0)
    if perm == tuple(range(len(perm))):
        return x
    return emit_op(rw, before, "ik.transpose", x, perm=perm)


def reshaped(rw: Rewriter, before: Op, x: Value, shape: Sequence) -> Value:
    """``x`` reshaped to ``shape``, looking through a reshape that produced it."""
    shape = tuple(shape)
    p = x.producer
    if p is not None and p.name == "ik.reshape":
        x = p.operand(0)
    if tuple(x.type.shape) == shape:
        return x
    return emit_op(rw, before, "ik.reshape", x, shape=shape)


# ---------------------------------------------------------------------------
# Contraction patterns


class ContractToMatmul(Pattern):
    """An ``ik.contract`` that is a batched matrix product becomes ``ik.matmul`` with transposes.

    ``contract(a, b){lhs_batch, rhs_batch, lhs_contract=[i], rhs_contract=[j]}`` with
    one free dim per side, or without batch dims and a rank-2 right operand.
    """

    name = "contract-to-matmul"
    roots = ("ik.contract",)

    def match(self, op: Op) -> Match | Fail:
        lb, rb = tuple(op.attrs.get("lhs_batch", ())), tuple(op.attrs.get("rhs_batch", ()))
        lc, rc = tuple(op.attrs["lhs_contract"]), tuple(op.attrs["rhs_contract"])
        if op.attrs.get("tile") is not None or op.attrs.get("dataflow") is not None:
            return Fail("the contraction is already tiled or scheduled (a tile or dataflow attribute)", op)
        x, y = op.operands
        if len(lc) != 1:
            return Fail(f"it contracts {len(lc)} axes; a matmul contracts one", op)
        lf = [i for i in range(x.type.rank) if i not in lb and i not in lc]
        rf = [i for i in range(y.type.rank) if i not in rb and i not in rc]
        if lb and len(lf) == 1 and len(rf) == 1:
            if tuple(x.type.shape[i] for i in lb) != tuple(y.type.shape[i] for i in rb):
                return Fail("the batch dims of the two operands differ", op)
            return Match(lperm=lb + (lf[0],) + lc, rperm=rb + rc + (rf[0],))
        if not lb and y.type.rank == 2 and len(lf) >= 1 and len(rf) == 1:
            return Match(lperm=tuple(lf) + lc, rperm=rc + (rf[0],))
        return Fail("not a batched matrix product (one free dim per side, or no batch dims and a rank-2 "
                    "right operand)", op)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        x = transposed(rw, op, op.operand(0), m["lperm"])
        y = transposed(rw, op, op.operand(1), m["rperm"])
        out = rw.create(op, "ik.matmul", [x, y], {}).results[0]
        rw.replace_op(op, [out])


class BatchReshapeOutOfMatmul(Pattern):
    """``matmul`` of operands whose leading batch dim is a merge of dims ``L`` → a matmul over ``L``.

    The 3-D ``bmm`` over ``[B*H, S, D]`` that torch's matmul decomposition
    produces becomes the 4-D matmul it stands for, followed by a reshape: ``L``
    comes from an operand that is a reshape of a ``L + [r, c]`` tensor, and the
    other operand is reshaped to ``L`` too (a view; reshapes compose).
    """

    name = "batch-reshape-out-of-matmul"
    roots = ("ik.matmul",)
    benefit = 2  # before a scale leaves the matmul, so the scale lands on the 4-D scores

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return "ik.reshape" in producers

    def match(self, op: Op) -> Match | Fail:
        x, y = op.operands
        if x.type.rank != 3 or y.type.rank != 3 or x.type.shape[0] != y.type.shape[0]:
            return Fail("not a 3-D matmul with equal batch dims", op)
        n = x.type.shape[0]
        for v in (x, y):
            r = op_is(v, "ik.reshape")
            if r is None:
                continue
            z = r.operand(0)
            lead = tuple(z.type.shape[:-2])
            while len(lead) > 2 and lead[0] == 1:  # unbind's leading 1 (qkv[0]) is not a batch dim
                lead = lead[1:]
            if len(lead) >= 2 and tuple(z.type.shape[-2:]) == tuple(v.type.shape[-2:]) and dim_prod(lead) == n:
                return Match(lead=lead)
        return Fail("no operand is a reshape that merges leading batch dims into the batch dim", op)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        lead = m["lead"]
        x, y = op.operands
        x4 = reshaped(rw, op, x, lead + tuple(x.type.shape[-2:]))
        y4 = reshaped(rw, op, y, lead + tuple(y.type.shape[-2:]))
        mm = rw.create(op, "ik.matmul", [x4, y4], {}).results[0]
        out = emit_op(rw, op, "ik.reshape", mm, shape=op.results[0].type.shape)
        rw.replace_op(op, [out])


class TransposeThroughBatchReshape(Pattern):
    """``reshape(transpose(reshape(x)))`` that flattens leading dims, permutes the rest and unflattens
    → ``transpose(x)``.

    The dynamo ONNX exporter transposes K as ``[B*H, S, D] -> [B*H, D, S]``
    between views of the 4-D tensor; this is ``transpose(k, [0, 1, 3, 2])``.
    """

    name = "transpose-through-batch-reshape"
    roots = ("ik.reshape",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return producers[:1] == ("ik.transpose",)

    def match(self, op: Op) -> Match | Fail:
        t = op_is(op.operand(0), "ik.transpose")
        if t is None or t.attrs["perm"][0] != 0:
            return Fail("the operand is not a transpose that keeps axis 0", op)
        inner = op_is(t.operand(0), "ik.reshape")
        if inner is None:
            return Fail("the transpose's operand is not a reshape", t)
        x = inner.operand(0)
        flat = inner.results[0].type.shape
        rest = len(flat) - 1
        lead = x.type.shape[: x.type.rank - rest]
        if not lead or tuple(x.type.shape[len(lead):]) != tuple(flat[1:]) or dim_prod(lead) != flat[0]:
            return Fail("the inner reshape does not flatten leading dims into axis 0", inner)
        perm = tuple(t.attrs["perm"])
        out = tuple(lead) + tuple(t.results[0].type.shape[1:])
        if tuple(op.results[0].type.shape) != out:
            return Fail("the outer reshape does not unflatten the same leading dims", op)
        k = len(lead)
        return Match(x=x, perm=tuple(range(k)) + tuple(p - 1 + k for p in perm[1:]))

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        rw.replace_op(op, [transposed(rw, op, m["x"], m["perm"])])


# ---------------------------------------------------------------------------
# Reductions and broadcasting (the JAX / StableHLO spellings)


_REDUCE = ("ik.reduce_sum", "ik.reduce_mean", "ik.reduce_max", "ik.reduce_min", "ik.reduce_prod")


class ReduceKeepdims(Pattern):
    """``reshape(reduce(x, axes))`` that re-inserts the reduced axes as 1 → ``reduce(x, axes, keepdims)``."""

    name = "reduce-keepdims"
    roots = ("ik.reshape",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return producers[:1] != () and producers[0] in _REDUCE

    def match(self, op: Op) -> Match | Fail:
        red = op_is(op.operand(0), *_REDUCE)
        if red is None or red.attrs.get("keepdims", False):
            return Fail("the operand is not a reduction without keepdims", op)
        x = red.operand(0)
        axes = red.attrs.get("axes") or tuple(range(x.type.rank))
        axes = {normalize_axis(a, x.type.rank) for a in axes}
        want = tuple(1 if i in axes else d for i, d in enumerate(x.type.shape))
        if tuple(op.results[0].type.shape) != want:
            return Fail("the reshape does not re-insert exactly the reduced axes as 1", op)
        return Match(red=red)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        red = m["red"]
        attrs = dict(red.attrs)
        attrs["keepdims"] = True
        out = rw.create(op, red.name, [red.operand(0)], attrs).results[0]
        rw.replace_op(op, [out])


class SumDivToMean(Pattern):
    """``reduce_sum(x, axes) / N`` with N the number of reduced elements → ``reduce_mean(x, axes)``."""

    name = "sum-div-to-mean"
    roots = ("ik.div", "ik.mul")

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return producers == ("ik.reduce_sum", "ik.constant")

    def match(self, op: Op) -> Match | Fail:
        s, c = op.operands
        red = op_is(s, "ik.reduce_sum")
        f = scalar_factor(c, s)
        if red is None or f is None or not s.type.dtype.is_float:
            return Fail("not a float reduce_sum scaled by a scalar constant", op)
        x = red.operand(0)
        axes = red.attrs.get("axes") or tuple(range(x.type.rank))
        n = 1
        for a in axes:
            d = x.type.shape[normalize_axis(a, x.type.rank)]
            if not isinstance(d, int):
                return Fail(f"reduced dim {d} is symbolic", red)
            n *= d
        want = float(n) if op.name == "ik.div" else 1.0 / n
        if n == 0 or abs(f - want) > 1e-6 * abs(want):
            return Fail(f"the factor {f:g} is not 1/{n}, one over the number of reduced elements", op)
        if op.results[0].type != s.type:
            return Fail("the scaling broadcasts the sum to a larger shape", op)
        return Match(red=red)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        red = m["red"]
        out = rw.create(op, "ik.reduce_mean", [red.operand(0)], dict(red.attrs)).results[0]
        rw.replace_op(op, [out])


_NARY_ELEMENTWISE = frozenset({"ik.where"}) | {
    n for n, d in OPS.items() if d.has("elementwise") and (d.has("binary") or d.has("compare") or d.has("logical"))
    and n != "ik.not"}


class ImplicitBroadcast(Pattern):
    """An elementwise operand ``broadcast(x)`` (or a reshape that only prepends 1s) → ``x``.

    The ops broadcast their operands NumPy-style, so the explicit broadcast that
    JAX and StableHLO write is dropped whenever the result type stays the same.
    """

    name = "implicit-broadcast"

    def applies_to(self, name: str) -> bool:
        return name in _NARY_ELEMENTWISE

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return "ik.broadcast" in producers or "ik.reshape" in producers

    def match(self, op: Op) -> Match | Fail:
        if op.name not in _NARY_ELEMENTWISE:
            return Fail("not an n-ary elementwise op", op)
        new = list(op.operands)
        changed = False
        for i, v in enumerate(op.operands):
            p = v.producer
            if p is None:
                continue
            if p.name == "ik.broadcast":
                new[i] = p.operand(0)
                changed = True
            elif p.name == "ik.reshape":
                x = p.operand(0)
                lead = v.type.rank - x.type.rank
                if lead > 0 and tuple(v.type.shape[lead:]) == tuple(x.type.shape) and \
                        all(d == 1 for d in v.type.shape[:lead]):
                    new[i] = x
                    changed = True
        if not changed:
            return Fail("no operand is a broadcast or a reshape that only prepends 1s", op)
        from irkit.ir.ops import OpError, infer_types

        try:
            got = infer_types(op.name, [v.type for v in new], op.attrs)
        except OpError:
            return Fail("without the broadcasts the operands do not broadcast together", op)
        if got != op.result_types:
            return Fail("dropping the broadcasts would change the result type", op)
        return Match(operands=new)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        out = rw.create(op, op.name, m["operands"], dict(op.attrs)).results[0]
        rw.replace_op(op, [out])


class SplatToScalar(Pattern):
    """An elementwise operand that is a splat constant of any shape → a rank-0 constant.

    Exporters (and constant folding of their broadcasts) materialise scalars at
    full shape; a rank-0 constant states the same thing and lets rules that
    look for "a scalar factor" see it.
    """

    name = "splat-to-scalar"

    def applies_to(self, name: str) -> bool:
        return name in _NARY_ELEMENTWISE

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return "ik.constant" in producers

    def match(self, op: Op) -> Match | Fail:
        if op.name not in _NARY_ELEMENTWISE:
            return Fail("not an n-ary elementwise op", op)
        types = [v.type for v in op.operands]
        changed = False
        for i, v in enumerate(op.operands):
            p = v.producer
            if p is None or p.name != "ik.constant" or v.type.rank == 0:
                continue
            d = p.attrs["value"]
            if d.size == 0 or not d.is_splat:
                continue
            types[i] = TensorType((), v.type.dtype)
            changed = True
        if not changed:
            return Fail("no operand is a splat constant of rank > 0", op)
        from irkit.ir.ops import OpError, infer_types

        try:
            got = infer_types(op.name, types, op.attrs)
        except OpError:
            return Fail("with rank-0 constants the operands do not broadcast together", op)
        if got != op.result_types:
            return Fail("rank-0 constants would change the result type", op)
        return Match(types=types)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        operands = []
        for v, t in zip(op.operands, m["types"]):
            if t != v.type:
                val = v.producer.attrs["value"].splat_value()  # type: ignore[union-attr]
                v = const_scalar(rw, op, val, v.type.dtype)
            operands.append(v)
        out = rw.create(op, op.name, operands, dict(op.attrs)).results[0]
        rw.replace_op(op, [out])


_INF_RULES = [
    Rule("max-neg-inf", P("ik.max", V("x"), C(-math.inf)), "x"),
    Rule("min-pos-inf", P("ik.min", V("x"), C(math.inf)), "x"),
]


def canonical_form_patterns() -> list[Pattern]:
    """The patterns :mod:`irkit.passes.canonicalize` runs for contraction, reduction and
    broadcast spellings."""
    return [
        ContractToMatmul(), BatchReshapeOutOfMatmul(), TransposeThroughBatchReshape(),
        ReduceKeepdims(), SumDivToMean(), ImplicitBroadcast(), SplatToScalar(), *rule_patterns(_INF_RULES),
    ]


__all__ = [
    "BatchReshapeOutOfMatmul",
    "ContractToMatmul",
    "ImplicitBroadcast",
    "ReduceKeepdims",
    "SplatToScalar",
    "SumDivToMean",
    "TransposeThroughBatchReshape",
    "canonical_form_patterns",
    "const_scalar",
    "emit_op",
    "float_splat",
    "int_splat",
    "is_float_cast",
    "op_is",
    "producer",
    "reshaped",
    "scalar_factor",
    "transposed",
]
