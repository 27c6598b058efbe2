"""torch.export converters: Bessel functions of the first and second kind, modified Bessel
functions of the second kind, the Airy function Ai, the regularized incomplete gamma
functions, the matrix exponential, Hermite/Laguerre/Legendre polynomials of a constant
degree, ``nll_loss`` and torch's chunked ``linear_cross_entropy``, ``combinations``, and the
in-place ``zero_`` and ``resize_as_``.

Everything decomposes into elementary IR ops evaluated in float64 (so every target runs it
with no lowering work), with ``ik.where`` range splits as Cephes does:

* ``J0, J1, Y0, Y1``: their power series (Horner in ``-x^2/4``) up to ``|x| = 15``, Hankel's
  asymptotic expansion (30 terms) beyond;
* ``K0, K1`` and the scaled ``e^x K``: the trapezoidal rule on
  ``e^x K_nu(x) = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt`` (step 0.1, exponentially
  accurate for this even, analytic integrand) up to ``x = 25``, the asymptotic expansion
  beyond, the leading terms of the small-argument series below ``1e-8``;
* ``Ai``: the Maclaurin series on ``[-8.5, 1]``, ``sqrt(x/3) K_1/3(2/3 x^1.5) / pi`` above,
  the oscillating asymptotic expansion (32 terms) below ``-8.5``.

The incomplete gamma functions, ``matrix_exp`` and the polynomials are described at their
converters.  Special values follow torch: ``Y`` is ``-inf`` at 0 and NaN below, ``K`` is ``+inf`` at 0, NaN
below and 0 at ``+inf``; ``J``, ``Y`` and ``Ai`` are NaN at infinite arguments, as in torch.
"""

from __future__ import annotations

import math
from typing import Any

from irkit.frontends.torch_cx import ConvertContext, Unsupported
from irkit.frontends.torch_ops import _float_dtype, _opname, _require, converter
from irkit.ir.core import Value
from irkit.ir.types import DType, dim_prod

F64 = DType.f64
_EULER = 0.57721566490153286061

_J_SPLIT = 15.0  # series below, Hankel's expansion above
_J_TERMS = 40
_J_HANKEL_TERMS = 15  # per P and Q: up to a_29, before the terms grow again (k ~ 2x)
_HANKEL_TERMS = 30  # K's expansion at x >= 25
_K_SPLIT = 25.0  # trapezoidal rule below, asymptotic expansion above
_K_TINY = 1e-8  # leading series terms below
_K_STEP = 0.1
_K_NODES = 240  # t up to 23.9: x (cosh t - 1) > 40 for x >= 1e-8
_AI_LOW = -8.5
_AI_HIGH = 1.0
_AI_TERMS = 48
_AI_ASYMPTOTIC = 16  # per P and Q: up to u_31, below 2 zeta = 33 at x = -8.5


def _input(a: dict) -> Value:
    for k in ("self", "x", "input"):
        if k in a:
            return _require(a[k], "input")
    raise Unsupported("no tensor operand")


def _c(cx: ConvertContext, v: float) -> Value:
    return cx.tensor(float(v), F64)


def _horner(cx: ConvertContext, coef: list[float], z: Value) -> Value:
    """``sum_k coef[k] z^k``."""
    acc = _c(cx, coef[-1])
    for c in reversed(coef[:-1]):
        acc = cx.b.add(cx.b.mul(acc, z), _c(cx, c))
    return acc


def _hankel_coef(nu: float, n: int) -> list[float]:
    """``a_k(nu) = (4nu^2 - 1)(4nu^2 - 9)..(4nu^2 - (2k-1)^2) / (k! 8^k)``, k < n."""
    out = [1.0]
    mu = 4.0 * nu * nu
    for k in range(1, n):
        out.append(out[-1] * (mu - (2 * k - 1) ** 2) / (k * 8.0))
    return out


def _bessel_jy_series(cx: ConvertContext, x: Value, nu: int, second: bool) -> Value:
    """J_nu (or Y_nu when ``second``) by the power series, for ``x > 0`` of moderate size."""
    z = cx.b.neg(cx.b.mul(cx.b.mul(x, x), _c(cx, 0.25)))  # -(x/2)^2
    fact = [1.0]
    for k in range(1, _J_TERMS + 2):
        fact.append(fact[-1] * k)
    j_coef = [1.0 / (fact[k] * fact[k + nu]) for k in range(_J_TERMS)]
    j = _horner(cx, j_coef, z)
    if nu == 1:
        j = cx.b.mul(j, cx.b.mul(x, _c(cx, 0.5)))
    if not second:
        return j
    lg = cx.b.add(cx.b.log(cx.b.mul(x, _c(cx, 0.5))), _c(cx, _EULER))  # ln(x/2) + gamma
    harm = [0.0]
    for k in range(1, _J_TERMS + 2):
        harm.append(harm[-1] + 1.0 / k)
    if nu == 0:
        # Y0 = 2/pi [(ln(x/2) + gamma) J0 - sum_{k>=1} H_k z^k / (k!)^2]
        s = _horner(cx, [0.0] + [harm[k] / (fact[k] ** 2) for k in range(1, _J_TERMS)], z)
        return cx.b.mul(cx.b.sub(cx.b.mul(lg, j), s), _c(cx, 2.0 / math.pi))
    # Y1 = -2/(pi x) + 2/pi (ln(x/2) + gamma) J1 - (x / 2pi) sum_k (H_k + H_{k+1}) z^k / (k! (k+1)!)
    s = _horner(cx, [(harm[k] + harm[k + 1]) / (fact[k] * fact[k + 1]) for k in range(_J_TERMS)], z)
    out = cx.b.sub(cx.b.mul(cx.b.mul(lg, j), _c(cx, 2.0 / math.pi)), cx.b.div(_c(cx, 2.0 / math.pi), x))
    return cx.b.sub(out, cx.b.mul(cx.b.mul(s, x), _c(cx, 0.5 / math.pi)))


def _bessel_jy_hankel(cx: ConvertContext, x: Value, nu: int, second: bool) -> Value:
    """Hankel's expansion for large ``x > 0``: ``sqrt(2/(pi x)) (P cos chi - Q sin chi)`` for J,
    ``(P sin chi + Q cos chi)`` for Y, ``chi = x - (nu/2 + 1/4) pi``."""
    a = _hankel_coef(nu, 2 * _J_HANKEL_TERMS)
    inv2 = cx.b.reciprocal(cx.b.mul(x, x))
    p = _horner(cx, [(-1) ** k * a[2 * k] for k in range(_J_HANKEL_TERMS)], inv2)
    q = cx.b.div(_horner(cx, [(-1) ** k * a[2 * k + 1] for k in range(_J_HANKEL_TERMS)], inv2), x)
    chi = cx.b.sub(x, _c(cx, (nu / 2.0 + 0.25) * math.pi))
    c, s = cx.b.cos(chi), cx.b.sin(chi)
    if second:
        v = cx.b.add(cx.b.mul(p, s), cx.b.mul(q, c))
    else:
        v = cx.b.sub(cx.b.mul(p, c), cx.b.mul(q, s))
    return cx.b.mul(v, cx.b.sqrt(cx.b.div(_c(cx, 2.0 / math.pi), x)))


def bessel_jy(cx: ConvertContext, x: Value, nu: int, second: bool) -> Value:
    """J_nu(x) or Y_nu(x) for nu = 0, 1 (float64 in and out)."""
    ax = cx.b.abs(x)
    small = cx.b.min(ax, _c(cx, _J_SPLIT))
    large = cx.b.max(ax, _c(cx, _J_SPLIT))
    if second:  # the series needs x > 0 (log); x <= 0 is set below
        small = cx.b.max(small, _c(cx, 1e-300))
    out = cx.b.where(cx.b.le(ax, _c(cx, _J_SPLIT)), _bessel_jy_series(cx, small, nu, second),
                     _bessel_jy_hankel(cx, large, nu, second))
    out = cx.b.where(cx.b.isinf(ax), _c(cx, math.nan), out)  # as torch (the limit is 0)
    if second:
        out = cx.b.where(cx.b.eq(x, _c(cx, 0.0)), _c(cx, -math.inf), out)
        out = cx.b.where(cx.b.lt(x, _c(cx, 0.0)), _c(cx, math.nan), out)
    elif nu == 1:
        out = cx.b.where(cx.b.lt(x, _c(cx, 0.0)), cx.b.neg(out), out)
    return cx.b.where(cx.b.isnan(x), x, out)


def bessel_k_scaled(cx: ConvertContext, x: Value, nu: float) -> Value:
    """``e^x K_nu(x)`` for ``x > 0`` (float64), any real order ``nu``; see the module docstring."""
    rank = x.type.rank
    mid = cx.b.max(cx.b.min(x, _c(cx, _K_SPLIT)), _c(cx, _K_TINY))
    t = cx.b.mul(cx.b.iota(shape=(1,) * rank + (_K_NODES,), axis=rank, dtype=F64), _c(cx, _K_STEP))
    ch = cx.b.sub(cx.b.cosh(t), _c(cx, 1.0))
    f = cx.b.exp(cx.b.neg(cx.b.mul(cx.reshape(mid, mid.shape + (1,)), ch)))
    if nu != 0:
        f = cx.b.mul(f, cx.b.cosh(cx.b.mul(t, _c(cx, nu))))
    total = cx.b.reduce_sum(f, axes=(rank,), keepdims=False)
    at0 = 1.0  # the t = 0 node, which the trapezoidal rule weighs by 1/2
    trap = cx.b.mul(cx.b.sub(total, _c(cx, 0.5 * at0)), _c(cx, _K_STEP))
    large = cx.b.max(x, _c(cx, _K_SPLIT))
    a = _hankel_coef(nu, _HANKEL_TERMS)
    asym = cx.b.mul(_horner(cx, a, cx.b.reciprocal(large)),
                    cx.b.sqrt(cx.b.div(_c(cx, math.pi / 2.0), large)))
    out = cx.b.where(cx.b.gt(x, _c(cx, _K_SPLIT)), asym, trap)
    if nu in (0, 1):
        tiny = cx.b.max(x, _c(cx, 1e-300))
        if nu == 0:
            lead = cx.b.neg(cx.b.add(cx.b.log(cx.b.mul(tiny, _c(cx, 0.5))), _c(cx, _EULER)))
        else:
            lead = cx.b.reciprocal(tiny)
        lead = cx.b.mul(lead, cx.b.exp(tiny))  # scaled like the rest
        out = cx.b.where(cx.b.lt(x, _c(cx, _K_TINY)), lead, out)
    return out


def bessel_k(cx: ConvertContext, x: Value, nu: int, scaled: bool) -> Value:
    """K_nu(x) (nu = 0, 1), times ``e^x`` when ``scaled``: +inf at 0, NaN below 0."""
    out = bessel_k_scaled(cx, x, float(nu))
    if not scaled:
        out = cx.b.mul(out, cx.b.exp(cx.b.neg(x)))
    out = cx.b.where(cx.b.isinf(x), _c(cx, 0.0), out)
    out = cx.b.where(cx.b.eq(x, _c(cx, 0.0)), _c(cx, math.inf), out)
    out = cx.b.where(cx.b.lt(x, _c(cx, 0.0)), _c(cx, math.nan), out)
    return cx.b.where(cx.b.isnan(x), x, out)


def airy_ai(cx: ConvertContext, x: Value) -> Value:
    """Ai(x) in float64; see the module docstring for the three ranges."""
    # Maclaurin: Ai = c1 f - c2 g, f = sum_k x^3k / prod_j<k (3j+2)(3j+3),
    # g = sum_k x^(3k+1) / prod_j<k (3j+3)(3j+4)
    c1, c2 = 0.355028053887817239260, 0.258819403792806798405
    fc, gc = [1.0], [1.0]
    for k in range(_AI_TERMS - 1):
        fc.append(fc[-1] / ((3 * k + 2) * (3 * k + 3)))
        gc.append(gc[-1] / ((3 * k + 3) * (3 * k + 4)))
    xm = cx.b.max(cx.b.min(x, _c(cx, _AI_HIGH)), _c(cx, _AI_LOW))
    x3 = cx.b.mul(cx.b.mul(xm, xm), xm)
    mac = cx.b.sub(cx.b.mul(_horner(cx, fc, x3), _c(cx, c1)),
                   cx.b.mul(cx.b.mul(_horner(cx, gc, x3), xm), _c(cx, c2)))
    # x > 1: Ai = sqrt(x/3) / pi * K_1/3(zeta), zeta = 2/3 x^1.5
    xp = cx.b.max(x, _c(cx, _AI_HIGH))
    zeta = cx.b.mul(cx.b.mul(xp, cx.b.sqrt(xp)), _c(cx, 2.0 / 3.0))
    kz = cx.b.mul(bessel_k_scaled(cx, zeta, 1.0 / 3.0), cx.b.exp(cx.b.neg(zeta)))
    pos = cx.b.mul(cx.b.mul(cx.b.sqrt(cx.b.div(xp, _c(cx, 3.0))), kz), _c(cx, 1.0 / math.pi))
    # x < -8.5: Ai(-z) = z^-1/4 / sqrt(pi) (cos(zeta - pi/4) P + sin(zeta - pi/4) Q),
    # P = sum (-1)^k u_2k zeta^-2k, Q = sum (-1)^k u_2k+1 zeta^-2k-1
    u = [1.0]
    for k in range(1, 2 * _AI_ASYMPTOTIC):
        num = 1.0
        for j in range(2 * k + 1, 6 * k, 2):
            num *= j
        u.append(num / (216.0 ** k * math.factorial(k)))
    zn = cx.b.neg(cx.b.min(x, _c(cx, _AI_LOW)))
    zeta_n = cx.b.mul(cx.b.mul(zn, cx.b.sqrt(zn)), _c(cx, 2.0 / 3.0))
    inv2 = cx.b.reciprocal(cx.b.mul(zeta_n, zeta_n))
    p = _horner(cx, [(-1) ** k * u[2 * k] for k in range(_AI_ASYMPTOTIC)], inv2)
    q = cx.b.div(_horner(cx, [(-1) ** k * u[2 * k + 1] for k in range(_AI_ASYMPTOTIC)], inv2), zeta_n)
    ph = cx.b.sub(zeta_n, _c(cx, math.pi / 4.0))
    osc = cx.b.add(cx.b.mul(cx.b.cos(ph), p), cx.b.mul(cx.b.sin(ph), q))
    neg = cx.b.div(osc, cx.b.mul(cx.b.sqrt(cx.b.sqrt(zn)), _c(cx, math.sqrt(math.pi))))
    out = cx.b.where(cx.b.gt(x, _c(cx, _AI_HIGH)), pos, cx.b.where(cx.b.lt(x, _c(cx, _AI_LOW)), neg, mac))
    out = cx.b.where(cx.b.isinf(x), _c(cx, math.nan), out)  # as torch
    return cx.b.where(cx.b.isnan(x), x, out)


_JY = {"special_bessel_j0": (0, False), "special_bessel_j1": (1, False),
       "special_bessel_y0": (0, True), "special_bessel_y1": (1, True),
       "prims.bessel_j0.default": (0, False), "prims.bessel_j1.default": (1, False)}


def _name(cx: ConvertContext) -> str:
    key = str(cx.node.target)
    return key if key.startswith("prims.") else _opname(cx)


@converter(*_JY)
def _bessel_jy(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    nu, second = _JY[_name(cx)]
    return cx.cast(bessel_jy(cx, cx.cast(_input(a), F64), nu, second), dt)


_K = {"special_modified_bessel_k0": (0, False), "special_modified_bessel_k1": (1, False),
      "special_scaled_modified_bessel_k0": (0, True), "special_scaled_modified_bessel_k1": (1, True)}


@converter(*_K)
def _bessel_k(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    nu, scaled = _K[_name(cx)]
    return cx.cast(bessel_k(cx, cx.cast(_input(a), F64), nu, scaled), dt)


@converter("special_airy_ai")
def _airy_ai(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    return cx.cast(airy_ai(cx, cx.cast(_input(a), F64)), dt)


# ---------------------------------------------------------------------------
# in-place tensor ops whose functional form is simple


@converter("zero")
def _zero(cx: ConvertContext, a: dict) -> Any:
    """``zero_``: zeros of the input's type (its in-place form is SSA-renamed by the importer)."""
    out = cx.out_type()
    return cx.splat(0, out.dtype, out.shape)


@converter("resize_as")
def _resize_as(cx: ConvertContext, a: dict) -> Any:
    """``resize_as_`` to the shape the input already has, or another shape of the same element
    count (a reshape of the row-major storage); a size change would leave elements uninitialized."""
    x = _require(a["self"], "self")
    out = cx.out_type()
    if tuple(x.shape) == tuple(out.shape):
        return x
    if dim_prod(x.shape) != dim_prod(out.shape):
        raise Unsupported(f"resize_as_ from {tuple(x.shape)} to {tuple(out.shape)} changes the element "
                          "count (new elements are uninitialized memory)")
    return cx.reshape(x, out.shape)


# ---------------------------------------------------------------------------
# losses


def nll(cx: ConvertContext, x: Value, target: Value, weight: Value | None, ignore_index: int,
        dt: DType) -> tuple[Value, Value]:
    """Per-element ``-w[t] x[t]`` (0 where ``t == ignore_index``) and the weights ``w[t]`` (0 there),
    both of the target's shape; ``x`` is ``(C,)`` or ``(N, C, d1, ...)`` (classes on axis 1)."""
    axis = 0 if x.type.rank == 1 else 1
    c = x.shape[axis]
    t = cx.cast(target, DType.i64)
    tt = cx.reshape(t, t.shape[:axis] + (1,) + t.shape[axis:])
    ishape = tuple(1 if i != axis else c for i in range(x.type.rank))
    hot = cx.b.eq(tt, cx.b.iota(shape=ishape, axis=axis, dtype=DType.i64))
    zero = cx.tensor(0.0, dt)
    picked = cx.b.reduce_sum(cx.b.where(hot, cx.cast(x, dt), zero), axes=(axis,), keepdims=False)
    if weight is None:
        w = cx.b.where(cx.b.ne(t, cx.tensor(ignore_index, DType.i64)), cx.tensor(1.0, dt), zero)
    else:
        wb = cx.reshape(cx.cast(weight, dt), ishape)
        w = cx.b.reduce_sum(cx.b.where(hot, wb, zero), axes=(axis,), keepdims=False)
        w = cx.b.where(cx.b.ne(t, cx.tensor(ignore_index, DType.i64)), w, zero)
    return cx.b.neg(cx.b.mul(picked, w)), w


@converter("nll_loss", "nll_loss2d", "nll_loss_nd")
def _nll_loss(cx: ConvertContext, a: dict) -> Any:
    """ATen's ``nll_loss`` (int reduction: 0 none, 1 mean over the target weights, 2 sum)."""
    dt = _float_dtype(cx)
    x = _input(a)
    w = a.get("weight")
    loss, tw = nll(cx, x, _require(a["target"], "target"), w if isinstance(w, Value) else None,
                   int(a.get("ignore_index", -100)), dt)
    red = int(a.get("reduction", 1))
    if red == 0:
        return loss
    axes = tuple(range(loss.type.rank))
    total = cx.b.reduce_sum(loss, axes=axes, keepdims=False)
    if red == 2:
        return total
    return cx.b.div(total, cx.b.reduce_sum(tw, axes=axes, keepdims=False))


def _linear_ce(cx: ConvertContext, a: dict, reduction: str, smoothing: float, dt: DType) -> Value:
    """Cross entropy of ``input @ linear_weight^T + linear_bias`` against class indices, with
    class weights, ``ignore_index`` and label smoothing as ``F.cross_entropy``."""
    if not dt.is_float:
        raise Unsupported(f"result dtype {dt} where a float was expected")
    x = cx.cast(_require(a["input"], "input"), dt)
    lw = cx.cast(_require(a["linear_weight"], "linear_weight"), dt)
    if lw.type.rank != 2:
        raise Unsupported(f"linear_weight of rank {lw.type.rank} (expected (classes, features))")
    logits = cx.b.matmul(x, cx.b.transpose(lw, perm=(1, 0))) if x.type.rank > 1 else \
        cx.reshape(cx.b.matmul(cx.reshape(x, (1,) + tuple(x.shape)), cx.b.transpose(lw, perm=(1, 0))),
                   (lw.shape[0],))
    if isinstance(a.get("linear_bias"), Value):
        logits = cx.b.add(logits, cx.cast(a["linear_bias"], dt))
    axis = logits.type.rank - 1
    logp = cx.b.log_softmax(logits, axis=axis)
    w = a.get("weight") if isinstance(a.get("weight"), Value) else None
    ignore = int(a.get("ignore_index", -100))
    target = _require(a["target"], "target")
    loss, tw = nll(cx, logp, target, w, ignore, dt)
    if smoothing:
        wc = cx.cast(w, dt) if w is not None else cx.tensor(1.0, dt)
        c = logits.shape[axis]
        smooth = cx.b.neg(cx.b.reduce_sum(cx.b.mul(logp, wc), axes=(axis,), keepdims=False))
        valid = cx.b.ne(cx.cast(target, DType.i64), cx.tensor(ignore, DType.i64))
        smooth = cx.b.where(valid, cx.b.div(smooth, cx.tensor(float(c), dt)), cx.tensor(0.0, dt))
        loss = cx.b.add(cx.b.mul(loss, cx.tensor(1.0 - smoothing, dt)),
                        cx.b.mul(smooth, cx.tensor(smoothing, dt)))
    if reduction == "none":
        return loss
    axes = tuple(range(loss.type.rank))
    total = cx.b.reduce_sum(loss, axes=axes, keepdims=False)
    if reduction == "sum":
        return total
    return cx.b.div(total, cx.b.reduce_sum(tw, axes=axes, keepdims=False))


@converter("torch_nn._linear_cross_entropy_batch_chunked.default")
def _linear_ce_chunked(cx: ConvertContext, a: dict) -> Any:
    """torch's batch-chunked ``linear_cross_entropy`` (mean or sum): the loss, computed unchunked,
    and its three gradient slots, empty when not requested (the importer runs no autograd)."""
    if any(a.get(k) for k in ("compute_input_grad", "compute_linear_weight_grad", "compute_linear_bias_grad")):
        raise Unsupported("linear_cross_entropy's precomputed gradients (export without requires_grad)")
    loss = _linear_ce(cx, a, str(a.get("reduction", "mean")), float(a.get("label_smoothing", 0.0)),
                      cx.out_type(0).dtype)
    empties = []
    for k in (1, 2, 3):
        t = cx.out_type(k)
        empties.append(cx.splat(0, t.dtype, t.shape))
    return (loss, *empties)


@converter("torch_nn._linear_cross_entropy_batch_chunked_no_reduction.default")
def _linear_ce_chunked_none(cx: ConvertContext, a: dict) -> Any:
    """torch's batch-chunked ``linear_cross_entropy`` without reduction: the per-sample loss."""
    return _linear_ce(cx, a, "none", 0.0, cx.out_dtype)


# ---------------------------------------------------------------------------
# matrix exponential

_EXPM_TAYLOR = 18  # degree: 1/19! < 1e-17 for a scaled norm <= 1
_EXPM_SQUARINGS = 40  # 1-norms up to 2^40; larger ones give NaN


@converter("linalg_matrix_exp", "matrix_exp")
def _matrix_exp(cx: ConvertContext, a: dict) -> Any:
    """``exp(A)`` of square matrices ``(..., n, n)`` by scaling and squaring in float64:
    ``s = ceil(log2 |A|_1)`` (at least 0), the degree-18 Taylor polynomial of ``A / 2^s``
    (Horner), then ``s`` squarings, unrolled to 40 and selected per matrix with ``ik.where``
    (a 1-norm above ``2^40`` gives NaN)."""
    dt = _float_dtype(cx)
    x = cx.cast(_input(a), F64)
    r = x.type.rank
    if r < 2:
        raise Unsupported(f"matrix_exp of a rank-{r} tensor (expected (..., n, n))")
    n = x.shape[-1]
    if not isinstance(n, int):
        raise Unsupported(f"matrix_exp of a symbolic size {n}")
    lead = (1,) * (r - 2)
    eye = cx.cast(cx.b.eq(cx.b.iota(shape=lead + (n, 1), axis=r - 2, dtype=DType.i64),
                          cx.b.iota(shape=lead + (1, n), axis=r - 1, dtype=DType.i64)), F64)
    norm = cx.b.reduce_max(cx.b.reduce_sum(cx.b.abs(x), axes=(r - 2,), keepdims=True), axes=(r - 1,),
                           keepdims=True)  # (..., 1, 1)
    s = cx.b.ceil(cx.b.div(cx.b.log(norm), _c(cx, math.log(2.0))))
    s = cx.b.max(s, _c(cx, 0.0))
    too_big = cx.b.gt(s, _c(cx, float(_EXPM_SQUARINGS)))
    s = cx.b.min(s, _c(cx, float(_EXPM_SQUARINGS)))
    xs = cx.b.mul(x, cx.b.pow(_c(cx, 2.0), cx.b.neg(s)))
    acc = eye
    for k in range(_EXPM_TAYLOR, 0, -1):
        acc = cx.b.add(eye, cx.b.div(cx.b.matmul(xs, acc), _c(cx, float(k))))
    for k in range(_EXPM_SQUARINGS):
        acc = cx.b.where(cx.b.lt(_c(cx, float(k)), s), cx.b.matmul(acc, acc), acc)
    acc = cx.b.where(too_big, _c(cx, math.nan), acc)
    return cx.cast(acc, dt)


@converter("combinations")
def _combinations(cx: ConvertContext, a: dict) -> Any:
    """``torch.combinations`` of a 1-D tensor: the index tuples are static (``n choose r`` of
    them, or ``n + r - 1 choose r`` with replacement, in lexicographic order), so it is a gather
    by a constant index table."""
    import itertools

    import numpy as np

    x = _input(a)
    if x.type.rank != 1:
        raise Unsupported(f"combinations of a rank-{x.type.rank} tensor (expected 1-D)")
    n = x.shape[0]
    if not isinstance(n, int):
        raise Unsupported(f"combinations of a symbolic length {n}")
    r = int(a.get("r", 2))
    if r < 0:
        raise Unsupported(f"combinations with r = {r} (expected r >= 0)")
    if r == 0:  # torch returns an empty 1-D tensor
        return cx.splat(0, x.dtype, (0,))
    # torch records the size as data-dependent (its kernel uses masked_select): it is static here
    pick = itertools.combinations_with_replacement if a.get("with_replacement") else itertools.combinations
    idx = np.array(list(pick(range(n), r)), dtype=np.int64).reshape(-1, r)
    if idx.shape[0] == 0:
        return cx.splat(0, x.dtype, (0, r))
    flat = cx.b.gather(x, cx.b.constant(idx.reshape(-1), DType.i64), axis=0)
    return cx.reshape(flat, idx.shape)


# ---------------------------------------------------------------------------
# regularized incomplete gamma functions

_IGAMMA_TERMS = 256  # series terms (as an extra axis) and continued-fraction depth


def igamma_pq(cx: ConvertContext, a: Value, x: Value) -> tuple[Value, Value]:
    """``P(a, x)`` and ``Q(a, x) = 1 - P`` (float64, broadcast operands) with torch's domain.

    Below ``x = a + 1`` the series ``P = sum_n exp((a+n) ln x - x - lgamma(a+n+1))`` (each term
    from its logarithm, 256 terms along a new axis); above, Legendre's continued fraction for
    ``Q = x^a e^-x / Gamma(a) / (x+1-a - 1(1-a)/(x+3-a - 2(2-a)/(x+5-a - ...)))`` evaluated
    backwards from depth 256.  Where 256 series terms do not reach float64 rounding (``a``
    above about 800 with ``x`` close to ``a``) the result is NaN rather than a wrong number."""
    zero, one = _c(cx, 0.0), _c(cx, 1.0)
    nan = _c(cx, math.nan)
    pos_a = cx.b.max(cx.b.min(a, _c(cx, 1e300)), _c(cx, 1e-300))  # finite, positive for the kernels
    pos_x = cx.b.max(cx.b.min(x, _c(cx, 1e300)), _c(cx, 1e-300))
    lx = cx.b.log(pos_x)
    rank = len(cx.out_shape)
    n = cx.b.iota(shape=(1,) * rank + (_IGAMMA_TERMS,), axis=rank, dtype=F64)

    def col(v: Value) -> Value:
        return cx.reshape(v, tuple(v.shape) + (1,))

    an = cx.b.add(col(pos_a), n)
    terms = cx.b.exp(cx.b.sub(cx.b.sub(cx.b.mul(an, col(lx)), col(pos_x)), cx.b.lgamma(cx.b.add(an, one))))
    p_series = cx.b.reduce_sum(terms, axes=(rank,), keepdims=False)
    last = cx.b.reduce_max(cx.b.where(cx.b.eq(n, _c(cx, float(_IGAMMA_TERMS - 1))), terms, zero),
                           axes=(rank,), keepdims=False)
    # continued fraction, backwards: f = b_D; f = b_i + a_(i+1) / f with b_i = x + 2i + 1 - a,
    # a_i = -i (i - a)
    xa = cx.b.sub(pos_x, pos_a)
    f = cx.b.add(xa, _c(cx, 2.0 * _IGAMMA_TERMS + 1))
    for i in range(_IGAMMA_TERMS - 1, -1, -1):
        a_next = cx.b.mul(cx.b.sub(pos_a, _c(cx, i + 1.0)), _c(cx, i + 1.0))  # -(i+1)(i+1-a)
        f = cx.b.add(cx.b.add(xa, _c(cx, 2.0 * i + 1)), cx.b.div(a_next, f))
    pref = cx.b.exp(cx.b.sub(cx.b.sub(cx.b.mul(pos_a, lx), pos_x), cx.b.lgamma(pos_a)))
    q_cf = cx.b.div(pref, f)
    use_series = cx.b.lt(pos_x, cx.b.add(pos_a, one))
    p = cx.b.where(use_series, p_series, cx.b.sub(one, q_cf))
    q = cx.b.where(use_series, cx.b.sub(one, p_series), q_cf)
    unconverged = cx.b.where(use_series, cx.b.gt(last, cx.b.mul(p_series, _c(cx, 1e-17))), cx.b.ne(one, one))
    p = cx.b.where(unconverged, nan, p)
    q = cx.b.where(unconverged, nan, q)
    # torch's special values, in its order of checks (later ones win here, so reversed)
    a_inf, x_inf = cx.b.isinf(a), cx.b.isinf(x)
    p = cx.b.where(x_inf, one, p)
    q = cx.b.where(x_inf, zero, q)
    p = cx.b.where(a_inf, cx.b.where(x_inf, nan, zero), p)
    q = cx.b.where(a_inf, cx.b.where(x_inf, nan, one), q)
    x0 = cx.b.eq(x, zero)
    p = cx.b.where(x0, zero, p)
    q = cx.b.where(x0, one, q)
    a0 = cx.b.eq(a, zero)
    p = cx.b.where(a0, cx.b.where(cx.b.gt(x, zero), one, nan), p)
    q = cx.b.where(a0, cx.b.where(cx.b.gt(x, zero), zero, nan), q)
    bad = cx.b.where(cx.b.lt(a, zero), cx.b.eq(one, one), cx.b.lt(x, zero))
    p = cx.b.where(bad, nan, p)
    q = cx.b.where(bad, nan, q)
    isn = cx.b.where(cx.b.isnan(a), cx.b.eq(one, one), cx.b.isnan(x))
    return cx.b.where(isn, nan, p), cx.b.where(isn, nan, q)


@converter("igamma", "igammac", "special_gammainc", "special_gammaincc", "prims.igamma.default",
           "prims.igammac.default")
def _igamma(cx: ConvertContext, a: dict) -> Any:
    """The regularized lower (``igamma``, ``gammainc``) and upper (``igammac``, ``gammaincc``)
    incomplete gamma functions; see :func:`igamma_pq`."""
    dt = _float_dtype(cx)
    shape = cx.out_shape
    av, xv = a["self"], a["other"]
    av = cx.cast(av, F64) if isinstance(av, Value) else _c(cx, float(av))
    xv = cx.cast(xv, F64) if isinstance(xv, Value) else _c(cx, float(xv))
    p, q = igamma_pq(cx, cx.broadcast(av, shape), cx.broadcast(xv, shape))
    upper = _name(cx) in ("igammac", "special_gammaincc", "prims.igammac.default")
    return cx.cast(q if upper else p, dt)


# ---------------------------------------------------------------------------
# orthogonal polynomials of a constant degree

_POLY_MAX_DEGREE = 1024


@converter("special_hermite_polynomial_h", "special_hermite_polynomial_he", "special_laguerre_polynomial_l",
           "special_legendre_polynomial_p")
def _orthogonal_polynomial(cx: ConvertContext, a: dict) -> Any:
    """Hermite ``H_n``/``He_n``, Laguerre ``L_n`` and Legendre ``P_n`` of a constant degree
    ``n`` (truncated to an integer, 0 below degree 0, as torch): the three-term recurrence,
    unrolled ``n`` times in float64.  A degree given as a tensor is refused: the unrolled
    length would depend on the data."""
    kind = _opname(cx)
    dt = _float_dtype(cx)
    n_arg = a["n"]
    if isinstance(n_arg, Value):
        from irkit.frontends.torch_ops_special3 import polynomial_tensor_degree

        x = cx.cast(_require(a["x"], "x"), F64) if isinstance(a["x"], Value) else _c(cx, float(a["x"]))
        return cx.cast(polynomial_tensor_degree(cx, kind, cx.broadcast(x, cx.out_shape), n_arg), dt)
    n = int(math.trunc(float(n_arg)))
    if n > _POLY_MAX_DEGREE:
        raise Unsupported(f"{kind} of degree {n} (at most {_POLY_MAX_DEGREE} is unrolled)")
    x = cx.cast(_require(a["x"], "x"), F64) if isinstance(a["x"], Value) else _c(cx, float(a["x"]))
    x = cx.broadcast(x, cx.out_shape)
    if n < 0:
        return cx.splat(0, dt, cx.out_shape)
    one = cx.splat(1.0, F64, cx.out_shape)
    if kind == "special_hermite_polynomial_h":
        p0, p1 = one, cx.b.mul(x, _c(cx, 2.0))
    elif kind == "special_hermite_polynomial_he":
        p0, p1 = one, x
    elif kind == "special_laguerre_polynomial_l":
        p0, p1 = one, cx.b.sub(_c(cx, 1.0), x)
    else:
        p0, p1 = one, x
    if n == 0:
        return cx.cast(p0, dt)
    for k in range(1, n):
        if kind == "special_hermite_polynomial_h":
            nxt = cx.b.sub(cx.b.mul(cx.b.mul(x, _c(cx, 2.0)), p1), cx.b.mul(p0, _c(cx, 2.0 * k)))
        elif kind == "special_hermite_polynomial_he":
            nxt = cx.b.sub(cx.b.mul(x, p1), cx.b.mul(p0, _c(cx, float(k))))
        elif kind == "special_laguerre_polynomial_l":
            nxt = cx.b.div(cx.b.sub(cx.b.mul(cx.b.sub(_c(cx, 2.0 * k + 1), x), p1), cx.b.mul(p0, _c(cx, float(k)))),
                           _c(cx, k + 1.0))
        else:
            nxt = cx.b.div(cx.b.sub(cx.b.mul(cx.b.mul(x, _c(cx, 2.0 * k + 1)), p1), cx.b.mul(p0, _c(cx, float(k)))),
                           _c(cx, k + 1.0))
        p0, p1 = p1, nxt
    return cx.cast(p1, dt)


# ---------------------------------------------------------------------------
# antialiased resize


def _aa_filter(kind: str, x: float) -> float:
    x = abs(x)
    if kind == "bilinear":
        return 1.0 - x if x < 1.0 else 0.0
    a = -0.5  # torch's antialiased bicubic uses a = -0.5 (PIL's)
    if x < 1.0:
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    if x < 2.0:
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a
    return 0.0


def aa_resize_matrix(kind: str, size_in: int, size_out: int, scale_opt: float | None) -> Any:
    """The ``(size_out, size_in)`` interpolation matrix of torch's antialiased resize along one
    axis (``align_corners=False``): output ``i`` is centred at ``scale (i + 0.5)``, the filter is
    stretched by ``scale`` when downsampling, and each row is normalised to sum 1."""
    import numpy as np

    scale = 1.0 / scale_opt if scale_opt else size_in / size_out
    interp = 2.0 if kind == "bilinear" else 4.0
    support = interp * 0.5 * scale if scale >= 1.0 else interp * 0.5
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    w = np.zeros((size_out, size_in))
    for i in range(size_out):
        center = scale * (i + 0.5)
        xmin = max(int(center - support + 0.5), 0)
        xsize = min(int(center + support + 0.5), size_in) - xmin
        row = [_aa_filter(kind, (j + xmin - center + 0.5) * invscale) for j in range(xsize)]
        total = sum(row)
        for j, v in enumerate(row):
            w[i, xmin + j] = v / total if total != 0.0 else v
    return w


@converter("_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa")
def _upsample_aa(cx: ConvertContext, a: dict) -> Any:
    """Antialiased bilinear/bicubic resize of ``(N, C, H, W)``: the weights depend only on the
    sizes, so it is two matmuls with interpolation matrices computed at import time."""
    kind = "bilinear" if "bilinear" in _opname(cx) else "bicubic"
    x = _input(a)
    if a.get("align_corners"):
        raise Unsupported(f"antialiased {kind} resize with align_corners=True")
    if x.type.rank != 4:
        raise Unsupported(f"antialiased {kind} resize of a rank-{x.type.rank} tensor (expected (N, C, H, W))")
    out = cx.out_type()
    h, w, oh, ow = x.shape[2], x.shape[3], out.shape[2], out.shape[3]
    if not all(isinstance(d, int) for d in (h, w, oh, ow)):
        raise Unsupported("antialiased resize of symbolic spatial sizes")
    dt = x.dtype
    sh, sw = a.get("scales_h"), a.get("scales_w")
    if a.get("scale_factors"):  # the .vec overload
        sh, sw = (float(v) for v in a["scale_factors"])
    assert isinstance(h, int) and isinstance(w, int) and isinstance(oh, int) and isinstance(ow, int)
    wh = cx.b.constant(aa_resize_matrix(kind, h, oh, sh).reshape(1, 1, oh, h).astype(dt.np), dt)
    ww = cx.b.constant(aa_resize_matrix(kind, w, ow, sw).T.reshape(1, 1, w, ow).astype(dt.np), dt)
    return cx.b.matmul(cx.b.matmul(wh, x), ww)
