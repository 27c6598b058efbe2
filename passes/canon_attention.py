"""Canonical forms of attention: contraction, scale, masks and softmax.

Design note.  Exporters spell one attention in many ways: QKᵀ as
``matmul(q, transpose(k))``, as a JAX ``dot_general`` with batch dims in the
middle, or as a 3-D ``bmm`` over flattened heads; the scale on Q, on K, on both
(√scale each), or on the scores, as a ``mul`` or a ``div``; masks as
``where``/``masked_fill`` with ``-inf``, ``-1e9`` or ``finfo.min``, or as an
additive ``(1 - m) * -10000``; softmax as one op or as max/sub/exp/sum/div.
The patterns here, run by ``canonicalize`` to a fixed point, bring every
spelling to ONE form, so ``fuse-attention`` matches meaning and not spelling:

* **Contraction.**  The generic forms of :mod:`irkit.passes.canon_forms`
  (``ik.contract`` as ``ik.matmul`` with explicit transposes, 3-D ``bmm``
  reshapes moved after the matmul) make QKᵀ always
  ``ik.matmul(Q, ik.transpose(K, perm))`` where ``perm`` puts K's head dim
  second to last; here P·V with V on the left (JAX's einsum) is turned
  around so the probabilities are the left operand.
* **Scale.**  Every scalar factor on Q, on K (before or after its transpose) or
  on the scores, given as ``mul`` or ``div`` by a splat constant of any shape
  that does not widen, becomes one ``ik.mul(scores, c)`` with a rank-0
  constant ``c`` right after the matmul.  (Constant expressions such as
  ``1/sqrt(64)`` or ``rsqrt(64)`` are folded by ``fold-constants`` first.)
* **Masks.**  A boolean keep-mask is applied as ``ik.where(keep, scores, F)``
  with the fill ``F`` (a splat ≤ -1e4 or -inf) on the else side; nested wheres
  with the same fill merge into one ``and`` of keep-masks; ``masked_fill``
  orientation (fill on the then side, ``not`` on the condition) is flipped.  An
  additive mask is ``ik.add(scores, ik.where(keep, 0, C))``: ``(1 - m) * C``
  for a boolean (or 0/1 integer) ``m`` takes that form, and an additive
  ``-inf`` mask becomes a ``where`` on the scores.  Every one of these
  rewrites is exact: canonicalize never changes a number.  Whether a finite
  fill or an additive term *is* a mask (values 0 or ≤ -1e4) is decided by
  ``fuse-attention``, where the one documented refinement (a row with every
  key masked gives zeros) is made.
* **Softmax.**  ``exp(x - c) / sum(exp(x - c))`` along one axis, where ``c``
  is constant along that axis (usually ``max(x)``; softmax does not depend on
  it), becomes ``ik.softmax``.  Upcasts around it stay: cast→softmax→cast is
  the canonical form of a float32 softmax in a half-precision model.

The module also holds the attention analysis the fusion passes share (mask
values, the scores path, causal checks) and re-exports the match and build
helpers of :mod:`irkit.passes.canon_forms`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import ClassVar

import numpy as np
from irkit.passes.canon_forms import (  # noqa: F401 - re-exported: the helpers the fusion passes share
    const_scalar,
    emit_op,
    float_splat,
    int_splat,
    is_float_cast,
    op_is,
    producer,
    reshaped,
    scalar_factor,
    transposed,
)

from irkit.ir.core import Op, Value
from irkit.ir.ops import OPS
from irkit.ir.types import SymDim, eval_dim, normalize_axis
from irkit.rewrite import (
    Fail,
    Match,
    Pattern,
    Rewriter,
)
from irkit.rewrite.numeric_check import cone, evaluate, symbols_of

MASK_FILL_MAX = -1.0e4
"""A fill or additive constant counts as a mask only when it is at most this (or -inf)."""

# ---------------------------------------------------------------------------
# Analysis helpers shared by the fusion passes


def is_mask_fill(x: float | None) -> bool:
    """True for a value that masks a score: -inf or at most :data:`MASK_FILL_MAX`."""
    return x is not None and (x == -math.inf or x <= MASK_FILL_MAX)


def softmax_axis_is_last(op: Op) -> bool:
    r = op.operand(0).type.rank
    return normalize_axis(op.attrs.get("axis", -1), r) == r - 1


_SCORES_PATH = frozenset({"ik.mul", "ik.div", "ik.add", "ik.sub", "ik.where", "ik.cast", "ik.dropout", "ik.reshape"})


def reaches_softmax(v: Value, depth: int = 8) -> bool:
    """True if ``v`` flows into a softmax over its last axis through scale, mask, bias and casts."""
    if depth < 0:
        return False
    for u in v.users:
        if u.name == "ik.softmax":
            if softmax_axis_is_last(u) and u.operand(0).type.shape[-1:] == v.type.shape[-1:]:
                return True
        elif u.name in ("ik.reduce_max", "ik.exp") and _softmax_to_be(u, v):
            return True  # a softmax still written out (raised later in the same run)
        elif u.name in _SCORES_PATH and u.results:
            r = u.results[0]
            if u.name == "ik.reshape" and r.type.shape[-2:] != v.type.shape[-2:]:
                continue
            if reaches_softmax(r, depth - 1):
                return True
        elif u.name == "ik.transpose" and tuple(u.attrs["perm"])[-1:] == (v.type.rank - 1,) \
                and reaches_softmax(u.results[0], depth - 1):
            return True  # JAX's grouped scores: [B, K, T, G, S] permuted to [B, K, G, T, S], keys last
    return False


def _softmax_to_be(u: Op, v: Value) -> bool:
    """``u`` starts a decomposed softmax of ``v`` over its last axis (max, or exp summed)."""
    r = v.type.rank
    if u.name == "ik.reduce_max":
        axes = tuple(u.attrs.get("axes") or ())
        return len(axes) == 1 and normalize_axis(axes[0], r) == r - 1
    for w in u.results[0].users:
        if w.name == "ik.reduce_sum":
            axes = tuple(w.attrs.get("axes") or ())
            if len(axes) == 1 and normalize_axis(axes[0], r) == r - 1:
                return True
    return False


def is_scores_contraction(op: Op) -> bool:
    """A matmul (or contract) whose result flows into a softmax over its last axis."""
    return op.name in ("ik.matmul", "ik.contract") and reaches_softmax(op.results[0])


def feeds_scores_contraction(v: Value, depth: int = 4) -> bool:
    """True if ``v`` is (through shape ops and scalar factors) an operand of a scores contraction."""
    if depth < 0:
        return False
    for u in v.users:
        if u.name in ("ik.matmul", "ik.contract") and is_scores_contraction(u):
            return True
        if u.name in ("ik.transpose", "ik.reshape", "ik.mul", "ik.div", "ik.cast") and u.results \
                and feeds_scores_contraction(u.results[0], depth - 1):
            return True
    return False


def same_value(a: Value, b: Value, depth: int = 6) -> bool:
    """Structural equality: the same value, or the same pure op of structurally equal operands."""
    if a is b:
        return True
    if depth <= 0 or a.type != b.type:
        return False
    pa, pb = a.producer, b.producer
    if pa is None or pb is None or pa.name != pb.name or a.index != b.index:
        return False
    d = OPS.get(pa.name)
    if d is None or not d.has("pure") or pa.regions or pb.regions:
        return False
    if pa.attrs != pb.attrs or pa.num_operands != pb.num_operands:
        return False
    return all(same_value(x, y, depth - 1) for x, y in zip(pa.operands, pb.operands))


SAMPLE_SIZES = (1, 2, 3, 5, 8)
"""Sizes at which a cone with symbolic dims is evaluated (every symbol at once)."""


def sample_bindings(symbols: Iterable[str]) -> list[dict[str, int]]:
    syms = sorted(set(symbols))
    if not syms:
        return [{}]
    return [{s: n for s in syms} for n in SAMPLE_SIZES]


MAX_THRESHOLD_SAMPLE = 8192
"""The largest integer constant of a mask cone past which :func:`keep_pattern` evaluates the mask."""


def _threshold_bindings(ops: Sequence[Op], syms: set[str], scores_shape: Sequence) -> list[dict[str, int]] | None:
    """Sizes past every integer constant of a mask cone: a sliding window of 8 equals a causal mask at
    every size up to 8, so the small samples alone would call it causal. The query/key symbols go
    just past each constant, the others stay 1. None when a constant is too large to check."""
    big: set[int] = set()
    for o in ops:
        if o.name != "ik.constant" or not o.results[0].dtype.is_int:
            continue
        arr = np.asarray(o.attrs["value"].array)
        if arr.size > 4096:
            continue
        info = np.iinfo(arr.dtype)
        for k in np.unique(np.abs(arr.astype(np.float64))):
            k = int(k)
            if k + 1 < max(SAMPLE_SIZES) or k in (info.max, -int(info.min), info.max + 1):
                continue
            if k > MAX_THRESHOLD_SAMPLE:
                return None
            big.add(k)
    if not big:
        return []
    qk = {s for d in scores_shape[-2:] if isinstance(d, SymDim) for s in d.symbols}
    if not qk:
        return []
    out = []
    for k in sorted(big):
        out.append({s: (k + 2 if s in qk else 1) for s in syms})
    return out


def keep_pattern(keep: Value, scores_shape: Sequence) -> tuple[str, str]:
    """Classify a constant boolean keep-mask against the scores ``[..., Sq, Skv]``.

    Returns ``(kind, detail)`` with kind ``"causal"`` (key j kept for query i iff
    j <= i, top-left aligned), ``"all"`` (every key kept), ``"other"`` (a constant
    pattern; ``detail`` names a witness), or ``"unknown"`` (not a constant cone).
    Symbolic sizes are checked at :data:`SAMPLE_SIZES`.
    """
    ops = cone(keep)
    if ops is None:
        return "unknown", "depends on an input"
    syms = symbols_of(ops, [keep]) | {s for d in scores_shape if isinstance(d, SymDim) for s in d.symbols}
    kinds: set[str] = set()
    detail = ""
    evaluated = 0
    extra = _threshold_bindings(ops, syms, scores_shape)
    if extra is None:
        return "unknown", "an integer constant in the mask is too large to check the mask past it"
    for b in sample_bindings(syms) + extra:
        arr = evaluate(keep, b)
        if arr is None:
            continue
        try:
            sq, sk = eval_dim(scores_shape[-2], b), eval_dim(scores_shape[-1], b)
            full = np.broadcast_to(arr.astype(bool), tuple(arr.shape[:-2]) + (sq, sk)) if arr.ndim >= 2 \
                else np.broadcast_to(arr.astype(bool), (sq, sk))
        except (ValueError, KeyError):
            return "other", f"its shape {list(arr.shape)} does not broadcast to the scores"
        evaluated += 1
        tril = np.tril(np.ones((sq, sk), dtype=bool))
        if np.all(full):
            kinds.add("all")
        elif np.all(full == tril):
            kinds.add("causal")
        else:
            kinds.add("other")
            bad = np.argwhere(full != tril.reshape((1,) * (full.ndim - 2) + (sq, sk)))[0]
            i, j = int(bad[-2]), int(bad[-1])
            detail = (f"query {i} {'keeps' if full[tuple(bad)] else 'drops'} key {j} "
                      f"(sizes {dict(b) if b else 'static'})")
    if not evaluated:
        return "unknown", "cannot be evaluated"
    if kinds == {"all"}:
        return "all", ""
    if kinds <= {"causal", "all"} and "causal" in kinds:
        # A 1x1 causal mask is all-true; any larger size decides.
        return "causal", ""
    return "other", detail or "it is not lower-triangular"


# ---------------------------------------------------------------------------
# Contraction patterns


class ProbsOnLeft(Pattern):
    """``matmul(V', transpose(P))`` with P a softmax → ``transpose(matmul(P, transpose(V')))``.

    JAX writes ``einsum('bnqk,bknh->bqnh')`` with V as the left operand, which is
    (P·V)ᵀ; this puts the probabilities on the left, as every other exporter does.
    """

    name = "attention-probs-on-left"
    roots = ("ik.matmul",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return producers[1:2] == ("ik.transpose",)

    def match(self, op: Op) -> Match | Fail:
        a, b = op.operands
        r = b.type.rank
        t = op_is(b, "ik.transpose")
        if t is None or r < 2 or tuple(t.attrs["perm"]) != tuple(range(r - 2)) + (r - 1, r - 2):
            return Fail("the right operand is not a transpose of the last two axes", op)
        p = t.operand(0)
        src = p.producer
        while src is not None and is_float_cast(src):
            src = src.operand(0).producer
        if src is None or src.name != "ik.softmax" or not softmax_axis_is_last(src):
            return Fail("the transposed operand is not a softmax over the last axis", t)
        if a.type.rank != r:
            return Fail("the operands' ranks differ", op)
        return Match(p=p)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        a = op.operand(0)
        r = a.type.rank
        swap = tuple(range(r - 2)) + (r - 1, r - 2)
        mm = rw.create(op, "ik.matmul", [m["p"], transposed(rw, op, a, swap)], {}).results[0]
        rw.replace_op(op, [transposed(rw, op, mm, swap)])


# ---------------------------------------------------------------------------
# Scale patterns


class ScaleDivToMul(Pattern):
    """``div(x, c)`` by a scalar on the attention scores path → ``mul(x, 1/c)``."""

    name = "attention-scale-div"
    roots = ("ik.div",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return len(producers) == 2 and producers[1] == "ik.constant" and producers[0] != "ik.constant"

    def match(self, op: Op) -> Match | Fail:
        x, c = op.operands
        f = scalar_factor(c, x)
        if f is None or f == 0 or not math.isfinite(f):
            return Fail("the divisor is not a finite non-zero scalar constant", op)
        if x.producer is not None and x.producer.name == "ik.constant":
            return Fail("the dividend is a constant (constant folding handles it)", op)
        if not (reaches_softmax(x) or feeds_scores_contraction(op.results[0])):
            return Fail("the division is not on the attention scores path", op)
        return Match(f=f)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        x = op.operand(0)
        c = const_scalar(rw, op, 1.0 / m["f"], x.type.dtype)
        rw.replace_op(op, [emit_op(rw, op, "ik.mul", x, c)])


class ScaleCombine(Pattern):
    """``mul(mul(x, a), b)`` with scalars on the scores path → ``mul(x, a*b)``."""

    name = "attention-scale-combine"
    roots = ("ik.mul",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return producers == ("ik.mul", "ik.constant")

    def match(self, op: Op) -> Match | Fail:
        inner, c = op.operands
        b = scalar_factor(c, inner)
        p = op_is(inner, "ik.mul")
        if b is None or p is None or not p.results[0].has_one_use:
            return Fail("not a scalar multiple of a single-use mul", op)
        x, c2 = p.operands
        a = scalar_factor(c2, x)
        if a is None or x.type != inner.type:
            return Fail("the inner mul is not by a scalar constant of the same type", p)
        if not (reaches_softmax(op.results[0]) or feeds_scores_contraction(op.results[0])):
            return Fail("the product is not on the attention scores path", op)
        return Match(x=x, f=a * b)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        x = m["x"]
        c = const_scalar(rw, op, m["f"], x.type.dtype)
        rw.replace_op(op, [emit_op(rw, op, "ik.mul", x, c)])


class ScaleThroughShape(Pattern):
    """``transpose(mul(x, c))`` / ``reshape(mul(x, c))`` feeding the scores → ``mul(transpose(x), c)``."""

    name = "attention-scale-through-shape"
    roots = ("ik.transpose", "ik.reshape", "ik.cast")

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return producers[:1] == ("ik.mul",)

    def match(self, op: Op) -> Match | Fail:
        p = op_is(op.operand(0), "ik.mul")
        if p is None:
            return Fail("the operand is not a mul", op)
        if op.name == "ik.cast" and not is_float_cast(op):
            return Fail("the cast is not between float types", op)
        x, c = p.operands
        f = scalar_factor(c, x)
        if f is None or x.type != p.results[0].type:
            return Fail("the mul is not by a scalar constant of the same type", p)
        if not (feeds_scores_contraction(op.results[0]) or reaches_softmax(op.results[0])):
            return Fail("the result does not feed the attention scores", op)
        return Match(x=x, f=f)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        inner = rw.create(op, op.name, [m["x"]], dict(op.attrs)).results[0]
        c = const_scalar(rw, op, m["f"], inner.type.dtype)
        rw.replace_op(op, [emit_op(rw, op, "ik.mul", inner, c)])


class ScaleOutOfScores(Pattern):
    """``matmul(mul(q, a), mul(kT, b))`` on the attention scores → ``mul(matmul(q, kT), a*b)``.

    The same for an ``ik.contract`` (a contraction is linear in each operand): JAX's grouped
    ``[B, T, K, G, D] · [B, S, K, D]`` scores stay a contraction, and a scale on Q or K must
    still reach the scores.
    """

    name = "attention-scale-out-of-matmul"
    roots = ("ik.matmul", "ik.contract")

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return "ik.mul" in producers

    def match(self, op: Op) -> Match | Fail:
        f = 1.0
        new = list(op.operands)
        found = False
        for i, v in enumerate(op.operands):
            p = op_is(v, "ik.mul")
            if p is None:
                continue
            x, c = p.operands
            s = scalar_factor(c, x)
            if s is None or x.type != v.type:
                continue
            f *= s
            new[i] = x
            found = True
        if not found:
            return Fail("no operand is a mul by a scalar constant of the same type", op)
        if not is_scores_contraction(op):
            return Fail("the product is not the attention scores (Q·Kᵀ feeding a softmax)", op)
        return Match(operands=new, f=f)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        mm = rw.create(op, op.name, m["operands"], dict(op.attrs)).results[0]
        c = const_scalar(rw, op, m["f"], mm.type.dtype)
        rw.replace_op(op, [emit_op(rw, op, "ik.mul", mm, c)])


# ---------------------------------------------------------------------------
# Mask patterns (all exact)


def _not(rw: Rewriter, before: Op, c: Value) -> Value:
    p = op_is(c, "ik.not")
    if p is not None:
        return p.operand(0)
    for a, b in (("ik.eq", "ik.ne"), ("ik.ne", "ik.eq")):
        q = op_is(c, a)
        if q is not None:
            return emit_op(rw, before, b, *q.operands)
    return emit_op(rw, before, "ik.not", c)


class WhereNot(Pattern):
    """``where(not(c), x, y)`` → ``where(c, y, x)``, unless that puts a mask fill on the then side."""

    name = "where-not"
    roots = ("ik.where",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return producers[:1] == ("ik.not",)

    def match(self, op: Op) -> Match | Fail:
        c, x, y = op.operands
        if op_is(c, "ik.not") is None:
            return Fail("the condition is not a not", op)
        if is_mask_fill(float_splat(y)) and not is_mask_fill(float_splat(x)):
            return Fail("already the canonical masked_fill orientation (the mask fill on the else side)", op)
        return Match()

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        c, x, y = op.operands
        rw.replace_op(op, [emit_op(rw, op, "ik.where", c.producer.operand(0), y, x)])  # type: ignore[union-attr]


class MaskFillOnElse(Pattern):
    """``where(c, F, x)`` with a mask fill F → ``where(not c, x, F)`` (masked_fill → keep-mask form)."""

    name = "mask-fill-on-else"
    roots = ("ik.where",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return producers[1:2] == ("ik.constant",)

    def match(self, op: Op) -> Match | Fail:
        _c, x, y = op.operands
        if is_mask_fill(float_splat(x)) and not is_mask_fill(float_splat(y)):
            return Match()
        return Fail("the then side is not a mask fill, or both sides are", op)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        c, x, y = op.operands
        keep = _not(rw, op, c)
        rw.replace_op(op, [emit_op(rw, op, "ik.where", keep, y, x)])


class NotCompare(Pattern):
    """``not(eq(a, b))`` → ``ne(a, b)``; ``not(lt)`` → ``ge`` and friends on integers."""

    name = "not-compare"
    roots = ("ik.not",)
    _EXACT: ClassVar[dict[str, str]] = {"ik.eq": "ik.ne", "ik.ne": "ik.eq"}
    _INT: ClassVar[dict[str, str]] = {"ik.lt": "ik.ge", "ik.ge": "ik.lt", "ik.gt": "ik.le", "ik.le": "ik.gt"}

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return producers[:1] != () and (producers[0] in self._EXACT or producers[0] in self._INT)

    def match(self, op: Op) -> Match | Fail:
        p = op.operand(0).producer
        if p is None:
            return Fail("the operand is a function argument, not a comparison", op)
        if p.name in self._EXACT:
            return Match(name=self._EXACT[p.name])
        if p.name in self._INT and not p.operand(0).type.dtype.is_float:
            return Match(name=self._INT[p.name])
        return Fail("the operand is not eq/ne or an integer ordering comparison (with NaN, not(lt) is not ge)", op)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        p = op.operand(0).producer
        rw.replace_op(op, [emit_op(rw, op, m["name"], *p.operands)])  # type: ignore[union-attr]


class MergeWhereMasks(Pattern):
    """``where(a, where(b, x, F), F)`` → ``where(and(a, b), x, F)`` for the same mask fill F."""

    name = "merge-where-masks"
    roots = ("ik.where",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return producers[1:] == ("ik.where", "ik.constant")

    def match(self, op: Op) -> Match | Fail:
        a, inner, f = op.operands
        p = op_is(inner, "ik.where")
        fv = float_splat(f)
        if p is None or not is_mask_fill(fv) or not inner.has_one_use:
            return Fail("the then side is not a single-use where, or the else side is not a mask fill", op)
        b, x, f2 = p.operands
        if float_splat(f2) != fv or p.results[0].type != op.results[0].type:
            return Fail("the inner where fills with another value or has another type", p)
        return Match(a=a, b=b, x=x)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        keep = emit_op(rw, op, "ik.and", m["a"], m["b"])
        out = emit_op(rw, op, "ik.where", keep, m["x"], op.operand(2))
        if out.type != op.results[0].type:
            return
        rw.replace_op(op, [out])


class AdditiveInfMask(Pattern):
    """``add(x, where(keep, 0, -inf))`` → ``where(keep, x, -inf)``."""

    name = "additive-inf-mask"
    roots = ("ik.add",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return "ik.where" in producers

    def match(self, op: Op) -> Match | Fail:
        for i in (0, 1):
            x, a = op.operand(i), op.operand(1 - i)
            p = op_is(a, "ik.where")
            if p is None:
                continue
            keep, zero, fill = p.operands
            if float_splat(zero) != 0.0 or float_splat(fill) != -math.inf:
                continue
            if x.producer is not None and x.producer.name == "ik.constant":
                continue
            if op.results[0].type.shape != _bshape(keep, x):
                continue
            return Match(x=x, keep=keep, fill=fill)
        return Fail("no operand is where(keep, 0, -inf) added to a non-constant of the result's shape", op)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        fill = const_scalar(rw, op, -math.inf, m["x"].type.dtype)
        out = emit_op(rw, op, "ik.where", m["keep"], m["x"], fill)
        rw.replace_op(op, [out])


def _bshape(*vs: Value) -> tuple:
    from irkit.ir.types import broadcast_shapes

    try:
        return broadcast_shapes(*(v.type.shape for v in vs))
    except ValueError:
        return ()


class WhereBiasInside(Pattern):
    """``add(where(keep, x, -inf), b)`` → ``where(keep, add(x, b), -inf)`` (bias before the mask)."""

    name = "where-bias-inside"
    roots = ("ik.add",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return "ik.where" in producers

    def match(self, op: Op) -> Match | Fail:
        for i in (0, 1):
            w, b = op.operand(i), op.operand(1 - i)
            p = op_is(w, "ik.where")
            if p is None or not w.has_one_use:
                continue
            keep, x, fill = p.operands
            if float_splat(fill) != -math.inf or is_mask_fill(float_splat(b)):
                continue
            bp = b.producer
            if bp is not None and bp.name == "ik.where" and float_splat(bp.operand(2)) == -math.inf:
                continue
            return Match(keep=keep, x=x, b=b, fill=fill)
        return Fail("no operand is a single-use where(keep, x, -inf) plus a bias that is not a mask", op)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        s = emit_op(rw, op, "ik.add", m["x"], m["b"])
        out = emit_op(rw, op, "ik.where", m["keep"], s, m["fill"])
        if out.type != op.results[0].type:
            return
        rw.replace_op(op, [out])


class OneMinusMaskTimesC(Pattern):
    """``(1 - cast(m)) * C`` with C ≤ -1e4 → ``where(keep, 0, C)``; ``cast(b) * C`` → ``where(b, C, 0)``.

    ``keep`` is ``m`` for a boolean mask and ``ne(m, 0)`` for an integer one
    (integer attention masks hold 0 and 1, as every exporter documents).
    ``(cast(m) - 1) * C'`` with C' ≥ 1e4 is the same mask.
    """

    name = "additive-mask-form"
    roots = ("ik.mul",)

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        return len(producers) == 2 and producers[1] == "ik.constant" and producers[0] in ("ik.cast", "ik.sub")

    def match(self, op: Op) -> Match | Fail:
        x, c = op.operands
        cv = float_splat(c)
        if cv is None or x.type != op.results[0].type:
            return Fail("not a mul by a float splat constant keeping the operand's type", op)
        p = x.producer
        if p is None:
            return Fail("the multiplied operand is a function argument", op)
        if p.name == "ik.cast" and p.operand(0).type.dtype.is_bool and is_mask_fill(cv):
            return Match(kind="bool-times-c", m=p.operand(0), c=cv)
        if p.name != "ik.sub":
            return Fail("the multiplied operand is neither cast(bool mask) times a mask value nor 1 - cast(mask)", op)
        a, b = p.operands
        if float_splat(a) == 1.0 and is_mask_fill(cv):
            cast = op_is(b, "ik.cast")
            if cast is not None and not cast.operand(0).type.dtype.is_float and cast.results[0].type == x.type:
                return Match(kind="one-minus", m=cast.operand(0), c=cv)
        if float_splat(b) == 1.0 and is_mask_fill(-cv):
            cast = op_is(a, "ik.cast")
            if cast is not None and not cast.operand(0).type.dtype.is_float and cast.results[0].type == x.type:
                return Match(kind="one-minus", m=cast.operand(0), c=-cv)
        return Fail("not (1 - cast(mask)) * C with C <= -1e4, nor (cast(mask) - 1) * C with C >= 1e4", op)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        dt = op.results[0].type.dtype
        mm: Value = m["m"]
        zero = const_scalar(rw, op, 0.0, dt)
        fill = const_scalar(rw, op, m["c"], dt)
        if m["kind"] == "bool-times-c":
            out = emit_op(rw, op, "ik.where", mm, fill, zero)
        else:
            keep = mm if mm.type.dtype.is_bool else emit_op(rw, op, "ik.ne", mm, const_scalar(rw, op, 0, mm.type.dtype))
            out = emit_op(rw, op, "ik.where", keep, zero, fill)
        if out.type != op.results[0].type:
            return
        rw.replace_op(op, [out])


# ---------------------------------------------------------------------------
# Softmax raising


def _reduced_axis(op: Op, rank: int) -> int | None:
    axes = op.attrs.get("axes") or tuple(range(op.operand(0).type.rank))
    if len(axes) != 1:
        return None
    return normalize_axis(axes[0], op.operand(0).type.rank)


def _peel_keepdims(v: Value, want_rank: int) -> Value:
    """Look through a reshape/broadcast that re-inserts a reduced axis as size 1."""
    for _ in range(3):
        p = op_is(v, "ik.reshape", "ik.broadcast")
        if p is None:
            break
        v = p.operand(0)
    return v


def _is_kept_sum(den: Value, red: Op, ax: int) -> bool:
    """``den`` is ``red``'s per-row result with axis ``ax`` kept as 1 (then maybe broadcast back)."""
    x = red.operand(0)
    kept = tuple(1 if i == ax else d for i, d in enumerate(x.type.shape))
    v = den
    b = op_is(v, "ik.broadcast")
    if b is not None:
        if tuple(b.operand(0).type.shape) != kept:
            return False
        v = b.operand(0)
    if v is red.results[0]:
        return bool(red.attrs.get("keepdims", False)) and tuple(v.type.shape) == kept
    r = op_is(v, "ik.reshape")
    return r is not None and r.operand(0) is red.results[0] and tuple(v.type.shape) == kept \
        and not red.attrs.get("keepdims", False)


class RaiseSoftmax(Pattern):
    """``exp(x - c) / sum(exp(x - c), axis)`` → ``softmax(x, axis)`` (``c`` constant along the axis)."""

    name = "softmax-raise"
    roots = ("ik.div", "ik.mul")
    explain = True

    filters_producers = True

    def accepts(self, name: str, producers: tuple[str | None, ...]) -> bool:
        if name == "ik.mul":
            return "ik.reciprocal" in producers and "ik.exp" in producers
        return producers[:1] == ("ik.exp",)

    def match(self, op: Op) -> Match | Fail:
        num, den = op.operands
        if op.name == "ik.mul":
            rp = op_is(den, "ik.reciprocal")
            if rp is None:
                rp = op_is(num, "ik.reciprocal")
                if rp is None:
                    return Fail("neither operand is a reciprocal", op, near_miss=False)
                num, den = den, num
            den = rp.operand(0)
        e = op_is(num, "ik.exp")
        if e is None:
            return Fail("the numerator is not an exp", op, near_miss=False)
        red = op_is(_peel_keepdims(den, num.type.rank), "ik.reduce_sum")
        if red is None:
            return Fail("the denominator is not a sum (a reduce_sum, maybe with keepdims)", op, near_miss=False)
        # From here on this is a softmax candidate: failures are worth explaining.
        if not same_value(red.operand(0), num):
            return Fail("the denominator sums a different tensor than the numerator's exp", red)
        rank = num.type.rank
        ax = _reduced_axis(red, rank)
        if ax is None:
            return Fail(f"the sum reduces axes {list(red.attrs.get('axes') or ())}, not one axis", red)
        if not _is_kept_sum(den, red, ax):
            return Fail(f"the sum over axis {ax} is not broadcast back along axis {ax}", red)
        if op.results[0].type != num.type:
            return Fail("the division broadcasts to a larger shape than the exp", op)
        z = e.operand(0)
        x = z
        s = op_is(z, "ik.sub")
        if s is not None:
            c = s.operand(1)
            # softmax(x) = exp(x - c) / sum(exp(x - c)) for any c constant along the axis (usually max(x)).
            if c.type.rank <= rank and (c.type.rank < rank - ax or c.type.shape[ax - rank] == 1) \
                    and s.operand(0).type == z.type:
                x = s.operand(0)
        return Match(x=x, axis=ax)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        x: Value = m["x"]
        out = emit_op(rw, op, "ik.softmax", x, axis=m["axis"] - x.type.rank)
        rw.replace_op(op, [out])


def attention_canonicalization_patterns() -> list[Pattern]:
    """The patterns :mod:`passes.canonicalize` runs for attention spellings."""
    return [
        ProbsOnLeft(),
        ScaleDivToMul(), ScaleCombine(), ScaleThroughShape(), ScaleOutOfScores(),
        WhereNot(), MaskFillOnElse(), NotCompare(), MergeWhereMasks(), AdditiveInfMask(),
        WhereBiasInside(), OneMinusMaskTimesC(),
        RaiseSoftmax(),
    ]


__all__ = [
    "MASK_FILL_MAX",
    "attention_canonicalization_patterns",
    "cone",
    "const_scalar",
    "emit_op",
    "evaluate",
    "float_splat",
    "int_splat",
    "is_mask_fill",
    "keep_pattern",
    "reshaped",
    "same_value",
    "sample_bindings",
    "scalar_factor",
    "transposed",
]
