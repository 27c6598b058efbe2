"""``fuse-norm``: decomposed layer and RMS normalisation → ``ik.layer_norm`` / ``ik.rms_norm``.

Design note.  The pattern starts at the op that normalises — ``div(d, sqrt(v + eps))``
or ``mul(d, rsqrt(v + eps))`` (``canonicalize`` turns ``pow(., -0.5)``,
``1/sqrt`` and ``reciprocal(sqrt)`` into ``rsqrt``) — and checks meaning:

* layer norm: ``d = x - mean(x)`` and ``v = mean(d * d)`` over the same trailing
  axes (or ``v = mean(x*x) - mean(x)^2``);
* RMS norm: ``d = x`` and ``v = mean(x * x)`` over trailing axes;
* ``eps`` is a scalar constant ≥ 0 (absent means 0).

Then it absorbs, through an optional float cast, a per-feature ``mul`` by a
weight and (layer norm) an ``add`` of a bias — tensors whose shape is the
normalised shape, possibly with leading 1s.  A weight applied after a cast back
to half precision (Llama's and T5's ``weight * x.to(dtype)``) is absorbed too:
the fused op runs in the wide type and the cast moves after it.  Every value
inside the match must have no user outside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from irkit.passes.canon_attention import (
    emit_op,
    float_splat,
    is_float_cast,
    op_is,
    reshaped,
    same_value,
)

from irkit.ir.core import Location, Op, Value
from irkit.ir.types import DType, normalize_axis
from irkit.passmanager import Pass, PassContext, register_pass
from irkit.rewrite import Fail, Match, NearMiss, Pattern, Rewriter
from irkit.rewrite.fusion import run_fusion
from irkit.rewrite.walk import escaping_user, only_user, other_operand, producer_cone

MAX_NORM_OPS = 64
"""How many ops the walk from the normalising op up to ``x`` takes at most."""


def _mean_axis(op: Op) -> int | None:
    """The first axis of a reduce_mean over trailing axes [a, rank), with keepdims; else None."""
    if op.name != "ik.reduce_mean":
        return None
    r = op.operand(0).type.rank
    axes = sorted(normalize_axis(a, r) for a in (op.attrs.get("axes") or range(r)))
    if not axes or axes != list(range(axes[0], r)):
        return None
    if not op.attrs.get("keepdims", False):
        return None
    return axes[0]


def _square_of(v: Value) -> Value | None:
    p = op_is(v, "ik.mul")
    if p is not None and same_value(p.operand(0), p.operand(1)):
        return p.operand(0)
    p = op_is(v, "ik.pow")
    if p is not None and float_splat(p.operand(1)) == 2.0:
        return p.operand(0)
    return None


def _per_feature(w: Value, x: Value, axis: int) -> bool:
    """``w`` holds one value per normalised feature: shape x.shape[axis:] with optional leading 1s."""
    norm = tuple(x.type.shape[axis:])
    shape = tuple(w.type.shape)
    if len(shape) < len(norm):
        return False
    lead = shape[: len(shape) - len(norm)]
    return shape[len(shape) - len(norm):] == norm and all(d == 1 for d in lead) and len(shape) <= x.type.rank


def _per_feature_step(cur: Value, opname: str, nm: NormMatch) -> tuple[Op, Value] | None:
    """The only user of ``cur`` when it is ``opname`` with a per-feature other operand, and that operand."""
    u = only_user(cur)
    if u is None or u.name != opname:
        return None
    w = other_operand(u, cur)
    if w is None or not _per_feature(w, nm.x, nm.axis) or u.results[0].type != cur.type:
        return None
    return u, w


@dataclass
class NormMatch:
    kind: str  # "layer_norm" | "rms_norm"
    x: Value
    axis: int
    eps: float
    ops: list[Op]
    weight: Value | None = None
    bias: Value | None = None
    last: Op | None = None
    cast_to: object = None  # dtype of a cast moved after the fused op
    eps_dtype: object = None  # element type of the eps constant


class FuseNormPattern(Pattern):
    """Match a normalisation core, absorb weight and bias, build the fused op."""

    name = "fuse-norm"
    roots = ("ik.div", "ik.mul")
    explain = True
    benefit = 5

    def match(self, op: Op) -> Match | Fail:
        d, den = op.operands
        if op.name == "ik.div":
            sq = op_is(den, "ik.sqrt")
        else:
            sq = op_is(den, "ik.rsqrt")
            if sq is None:
                d, den = den, d
                sq = op_is(den, "ik.rsqrt")
        if sq is None:
            return Fail("the denominator is not a sqrt or an rsqrt", op, near_miss=False)
        inner = sq.operand(0)
        eps = 0.0
        eps_dtype = None
        add = op_is(inner, "ik.add")
        var_v = inner
        if add is not None:
            e = float_splat(add.operand(1))
            if e is None:
                e, var_v = float_splat(add.operand(0)), add.operand(1)
            else:
                var_v = add.operand(0)
            if e is None:
                return Fail("the term added under the square root is not a float splat constant (an eps)", add,
                            near_miss=False)
            eps = e
            eps_dtype = inner.type.dtype
        # A normalisation candidate from here: the denominator is sqrt(mean(...) + eps).
        vp = var_v.producer
        if vp is None or vp.name not in ("ik.reduce_mean", "ik.sub"):
            return Fail("the square root is not of a mean (a variance)", sq, near_miss=False)
        if eps < 0:
            return Fail(f"eps {eps:g} is negative", add)
        ops: list[Op] = [op, sq] + ([add] if add is not None else [])
        sub = op_is(d, "ik.sub")
        if sub is not None:
            mean = op_is(sub.operand(1), "ik.reduce_mean")
            if mean is not None and same_value(mean.operand(0), sub.operand(0)):
                m = self._layer_norm(op, sub, mean, var_v, eps, ops)
            else:
                m = self._rms_norm(op, d, var_v, eps, ops)
        else:
            m = self._rms_norm(op, d, var_v, eps, ops)
        if isinstance(m, Match):
            m["nm"].eps_dtype = eps_dtype
        return m

    def _layer_norm(self, op: Op, sub: Op, mean: Op, var_v: Value, eps: float, ops: list[Op]) -> Match | Fail:
        x = sub.operand(0)
        ax = _mean_axis(mean)
        if ax is None:
            return Fail("the mean is not over trailing axes with keepdims", mean)
        vp = var_v.producer
        assert vp is not None
        if vp.name == "ik.reduce_mean":
            if _mean_axis(vp) != ax:
                return Fail(f"the variance is over axis {_mean_axis(vp)}, the mean over axis {ax}", vp)
            t = _square_of(vp.operand(0))
            if t is None or not same_value(t, sub.results[0]):
                return Fail("the variance is not the mean of (x - mean)^2", vp)
            ops += [vp, vp.operand(0).producer]  # type: ignore[list-item]
        else:  # E[x^2] - E[x]^2
            m2 = op_is(vp.operand(0), "ik.reduce_mean")
            mm = _square_of(vp.operand(1))
            if m2 is None or mm is None or _mean_axis(m2) != ax or not same_value(mm, mean.results[0]):
                return Fail("the variance is neither mean((x-mean)^2) nor mean(x^2) - mean^2", vp)
            t = _square_of(m2.operand(0))
            if t is None or not same_value(t, x):
                return Fail("the variance's mean(x^2) squares another tensor", m2)
            ops += [vp, m2, m2.operand(0).producer, vp.operand(1).producer]  # type: ignore[list-item]
        ops += [sub, mean]
        nm = NormMatch("layer_norm", x, ax, eps, ops)
        return self._finish(op, nm)

    def _rms_norm(self, op: Op, x: Value, var_v: Value, eps: float, ops: list[Op]) -> Match | Fail:
        vp = var_v.producer
        if vp is None or vp.name != "ik.reduce_mean":
            return Fail("the denominator is not sqrt(mean(.) + eps)", vp)
        ax = _mean_axis(vp)
        if ax is None:
            return Fail("the mean of squares is not over trailing axes with keepdims", vp)
        t = _square_of(vp.operand(0))
        if t is None:
            return Fail("the mean is not of a square", vp)
        if not same_value(t, x):
            return Fail("the mean of squares is of another tensor than the one normalised", vp)
        ops += [vp, vp.operand(0).producer]  # type: ignore[list-item]
        nm = NormMatch("rms_norm", x, ax, eps, ops)
        return self._finish(op, nm)

    def _finish(self, core: Op, nm: NormMatch) -> Match | Fail:
        walk = producer_cone(core, stop=nm.x, limit=MAX_NORM_OPS)  # every op computing core from x and constants
        assert walk is not None  # only max_ops, refuse or closed make a walk give up
        nm.ops = walk.ops
        escape = escaping_user(nm.ops, outputs=[o for o in nm.ops if o is core or o.name == "ik.constant"])
        if escape is not None:
            o, user = escape
            return Fail(f"'{o.name}' inside the normalisation has a user outside it ({user.name})", o)
        last = core
        cur = core.results[0]
        cast_to = None
        # weight (possibly after a cast back to a narrow type), then bias
        u = only_user(cur)
        if u is not None and is_float_cast(u) and nm.kind == "rms_norm":
            w_user = only_user(u.results[0])
            w = other_operand(w_user, u.results[0]) if w_user is not None and w_user.name == "ik.mul" else None
            if w is not None and _per_feature(w, nm.x, nm.axis) and w.type.dtype == u.results[0].type.dtype:
                assert w_user is not None  # w is its other operand
                nm.weight, cast_to, last = w, u.attrs["to"], w_user
                nm.ops += [u, w_user]
                cur = w_user.results[0]
        if nm.weight is None:
            step = _per_feature_step(cur, "ik.mul", nm)
            if step is not None:
                last, nm.weight = step
                nm.ops.append(last)
                cur = last.results[0]
        if nm.kind == "layer_norm":
            step = _per_feature_step(cur, "ik.add", nm)
            if step is not None:
                last, nm.bias = step
                nm.ops.append(last)
        nm.last = last
        nm.cast_to = cast_to
        return Match(nm=nm)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        nm: NormMatch = m["nm"]
        last = nm.last
        assert last is not None
        loc = Location.fuse([o.loc for o in nm.ops])
        w, b = nm.weight, nm.bias
        dt = nm.x.type.dtype
        norm_shape = tuple(nm.x.type.shape[nm.axis:])
        if w is not None and tuple(w.type.shape) != norm_shape:
            w = reshaped(rw, last, w, norm_shape)
        if b is not None and tuple(b.type.shape) != norm_shape:
            b = reshaped(rw, last, b, norm_shape)
        if w is not None and w.type.dtype != dt:
            w = emit_op(rw, last, "ik.cast", w, to=dt)
        if b is not None and b.type.dtype != dt:
            b = emit_op(rw, last, "ik.cast", b, to=dt)
        attrs = {"axis": nm.axis, "eps": _shortest(nm.eps, nm.eps_dtype)}
        operands = [nm.x, w, b] if nm.kind == "layer_norm" else [nm.x, w]
        y = rw.create(last, f"ik.{nm.kind}", operands, attrs, loc=loc).results[0]
        if nm.cast_to is not None:
            y = emit_op(rw, last, "ik.cast", y, to=nm.cast_to)
        if y.type != last.results[0].type:
            return
        rw.replace_op(last, [y])


def _shortest(x: float, dtype: object) -> float:
    """``x`` as the shortest decimal its constant's type prints it as (1e-05, not 9.99999974e-06)."""
    import numpy as np

    if dtype in (DType.f32, DType.f16, DType.bf16):
        return float(str(np.float32(x) if dtype == DType.f32 else np.float16(x))) if dtype != DType.bf16 else x
    return float(x)


@register_pass("fuse-norm")
@dataclass(frozen=True)
class FuseNorm(Pass):
    """Fuse decomposed layer norm and RMS norm (with weight, bias and fp32 upcasts) into one op.

    before: %m = "ik.reduce_mean"(%x) {axes = [2], keepdims = true}   %d = "ik.sub"(%x, %m)
            %v = "ik.reduce_mean"(%dd) ...  %r = "ik.rsqrt"(%ve) ...  %n = "ik.mul"(%d, %r)
            %y = "ik.add"("ik.mul"(%n, %w), %b)
    after:  %y = "ik.layer_norm"(%x, %w, %b) {axis = 2, eps = 1.0e-05}
    """

    def run(self, module, ctx: PassContext) -> bool:
        notes: list[NearMiss] = []
        return run_fusion(module, ctx, [FuseNormPattern()], "fused-norms", notes)
