"""torch.export converters: special functions and distances built from elementary IR ops.

``polygamma`` of any order (Hurwitz zeta by direct sum plus Euler-Maclaurin tail),
``special_erfcx`` (direct form below 2, Laplace's continued fraction above),
modified Bessel I0, I1 and their scaled forms (power series, asymptotic expansion for large
arguments), Chebyshev polynomials, ``segment_reduce``, ``_cdist_forward``, a few losses, and
transformers' MoE grouped matmul.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from irkit.frontends.torch_cx import ConvertContext, Unsupported
from irkit.frontends.torch_ops import _float_dtype, _opname, _require, converter
from irkit.ir.core import Value
from irkit.ir.types import DType, dim_add, dim_mul, dim_prod, normalize_axis

# Euler-Maclaurin for zeta(s, q): N direct terms, then the tail at a = q + N.
_ZETA_TERMS = 24
_ZETA_TAIL = 10


def _bernoulli(n: int) -> list[Fraction]:
    """B_0 .. B_n (B_1 = -1/2), exact."""
    b = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a = [Fraction(0)] * (m + 1)
        for j in range(m + 1):
            a[j] = Fraction(1, j + 1)
            for k in range(j, 0, -1):
                a[k - 1] = k * (a[k - 1] - a[k])
        b[m] = a[0]
    b[1] = Fraction(-1, 2) if n >= 1 else b[1]
    return b


_B = _bernoulli(2 * _ZETA_TAIL)


def _input(a: dict) -> Value:
    """The tensor operand: ``self`` in most schemas, ``x`` in ``special_*`` ones, ``input`` elsewhere."""
    for k in ("self", "x", "input"):
        if k in a:
            return _require(a[k], "input")
    raise Unsupported("no tensor operand")


def _iota_axis(cx: ConvertContext, x: Value, n: int, dt: DType) -> Value:
    """0..n-1 along a new last axis, broadcastable against ``x[..., None]``."""
    return cx.b.iota(shape=(1,) * x.type.rank + (n,), axis=x.type.rank, dtype=dt)


def hurwitz_zeta(cx: ConvertContext, s: int, q: Value) -> Value:
    """zeta(s, q) = sum_k (q + k)^-s for an integer ``s >= 2`` (any real q; poles at q = 0, -1, ...).

    The first ``_ZETA_TERMS`` terms are summed directly; the rest is the Euler-Maclaurin
    tail at ``a = q + N``: ``a^(1-s)/(s-1) + a^-s/2 + sum_j B_2j/(2j)! * s(s+1)..(s+2j-2) * a^(1-s-2j)``,
    accurate to float64 rounding for ``a >= 10`` (``q >= -14``)."""
    dt = q.dtype
    n = _ZETA_TERMS
    qq = cx.reshape(q, q.shape + (1,))
    terms = cx.b.pow(cx.b.add(qq, _iota_axis(cx, q, n, dt)), cx.tensor(float(-s), dt))
    head = cx.b.reduce_sum(terms, axes=(q.type.rank,), keepdims=False)
    a = cx.b.add(q, cx.tensor(float(n), dt))
    tail = cx.b.add(cx.b.div(cx.b.pow(a, cx.tensor(float(1 - s), dt)), cx.tensor(float(s - 1), dt)),
                    cx.b.mul(cx.b.pow(a, cx.tensor(float(-s), dt)), cx.tensor(0.5, dt)))
    poch = Fraction(s)  # s (s+1) ... (s + 2j - 2)
    for j in range(1, _ZETA_TAIL + 1):
        if j > 1:
            poch *= (s + 2 * j - 3) * (s + 2 * j - 2)
        c = float(_B[2 * j] / math.factorial(2 * j) * poch)
        tail = cx.b.add(tail, cx.b.mul(cx.b.pow(a, cx.tensor(float(1 - s - 2 * j), dt)), cx.tensor(c, dt)))
    return cx.b.add(head, tail)


def hurwitz_zeta_tensor(cx: ConvertContext, s: Value, q: Value) -> Value:
    """zeta(s, q) for tensors (float64), with Cephes' domain: ``s == 1`` gives +inf, ``s < 1`` NaN,
    ``q`` a non-positive integer +inf, a negative ``q`` with a non-integer ``s`` NaN; else
    :func:`hurwitz_zeta`'s direct sum and Euler-Maclaurin tail with the tail's Pochhammer
    products built from ``s``."""
    dt = q.dtype
    shape = cx.out_shape
    s, q = cx.broadcast(s, shape), cx.broadcast(q, shape)
    n = _ZETA_TERMS
    ss = cx.reshape(s, shape + (1,))
    qq = cx.reshape(q, shape + (1,))
    terms = cx.b.pow(cx.b.add(qq, _iota_axis(cx, q, n, dt)), cx.b.neg(ss))
    head = cx.b.reduce_sum(terms, axes=(len(shape),), keepdims=False)
    a = cx.b.add(q, cx.tensor(float(n), dt))
    one = cx.tensor(1.0, dt)
    sm1 = cx.b.sub(s, one)
    tail = cx.b.add(cx.b.div(cx.b.pow(a, cx.b.neg(sm1)), sm1), cx.b.mul(cx.b.pow(a, cx.b.neg(s)), cx.tensor(0.5, dt)))
    poch = s
    for j in range(1, _ZETA_TAIL + 1):
        if j > 1:
            step = cx.b.mul(cx.b.add(s, cx.tensor(2.0 * j - 3, dt)), cx.b.add(s, cx.tensor(2.0 * j - 2, dt)))
            poch = cx.b.mul(poch, step)
        c = float(_B[2 * j] / math.factorial(2 * j))
        e = cx.b.sub(cx.tensor(1.0 - 2 * j, dt), s)
        tail = cx.b.add(tail, cx.b.mul(cx.b.mul(cx.b.pow(a, e), poch), cx.tensor(c, dt)))
    out = cx.b.add(head, tail)
    inf, nan = cx.tensor(float("inf"), dt), cx.tensor(float("nan"), dt)
    q_int = cx.b.eq(q, cx.b.floor(q))
    q_pos = cx.b.gt(q, cx.tensor(0.0, dt))
    s_int = cx.b.eq(s, cx.b.floor(s))
    out = cx.b.where(q_pos, out, cx.b.where(q_int, inf, cx.b.where(s_int, out, nan)))
    out = cx.b.where(cx.b.lt(s, one), nan, out)
    return cx.b.where(cx.b.eq(s, one), inf, out)


@converter("special_zeta", "prims.zeta.default")
def _zeta(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    f64 = DType.f64
    s, q = a["self"], a["other"]
    s = cx.cast(s, f64) if isinstance(s, Value) else cx.tensor(float(s), f64)
    q = cx.cast(q, f64) if isinstance(q, Value) else cx.tensor(float(q), f64)
    return cx.cast(hurwitz_zeta_tensor(cx, s, q), dt)


@converter("polygamma", "special_polygamma")
def _polygamma(cx: ConvertContext, a: dict) -> Any:
    n = int(a["n"])
    dt = _float_dtype(cx)
    if n < 0:
        raise Unsupported(f"polygamma of negative order {n}")
    if n == 0:
        return cx.b.digamma(cx.cast(_input(a), dt))
    # psi^(n)(x) = (-1)^(n+1) n! zeta(n+1, x) for x >= 0, in float64; below 0 the reflection
    # psi^(n)(x) = (-1)^n psi^(n)(1 - x) - pi^(n+1) P_n(cot(pi x)), where
    # d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x)), P_0 = c, P_k+1 = -(1 + c^2) P_k'(c).
    f64 = DType.f64
    x = cx.cast(_input(a), f64)
    neg = cx.b.lt(x, cx.tensor(0.0, f64))
    xp = cx.b.where(neg, cx.b.sub(cx.tensor(1.0, f64), x), x)
    c = (1.0 if n % 2 else -1.0) * math.factorial(n)
    psi = cx.b.mul(hurwitz_zeta(cx, n + 1, xp), cx.tensor(c, f64))
    px = cx.b.mul(x, cx.tensor(math.pi, f64))
    cot = cx.b.div(cx.b.cos(px), cx.b.sin(px))
    poly = cx.tensor(0.0, f64)
    for coef in reversed(_cot_derivative(n)):
        poly = cx.b.add(cx.b.mul(poly, cot), cx.tensor(float(coef), f64))
    refl = cx.b.sub(cx.b.mul(psi, cx.tensor(float((-1) ** n), f64)),
                    cx.b.mul(poly, cx.tensor(math.pi ** (n + 1), f64)))
    return cx.cast(cx.b.where(neg, refl, psi), dt)


def _cot_derivative(n: int) -> list[int]:
    """Coefficients (lowest power first) of P_n with d^n/dx^n cot(pi x) = pi^n P_n(cot(pi x))."""
    p = [0, 1]
    for _ in range(n):
        d = [k * p[k] for k in range(1, len(p))] or [0]  # P'
        q = [0] * (len(d) + 2)
        for k, v in enumerate(d):  # -(1 + c^2) P'
            q[k] -= v
            q[k + 2] -= v
        p = q
    return p


_ERFCX_SPLIT = 2.0
_ERFCX_DEPTH = 40


@converter("special_erfcx", "prims.erfcx.default")
def _erfcx(cx: ConvertContext, a: dict) -> Any:
    """exp(x^2) erfc(x): ``exp(x^2) (1 - erf(x))`` below 2 (no cancellation there), else
    Laplace's continued fraction ``1 / (sqrt(pi) (x + 1/2 / (x + 1 / (x + 3/2 / (x + ...)))))``
    (40 levels: float64 rounding for x >= 2).  Computed in float64."""
    out_dt = _float_dtype(cx)
    dt = DType.f64
    x = cx.cast(_input(a), dt)
    direct = cx.b.mul(cx.b.exp(cx.b.mul(x, x)), cx.b.sub(cx.tensor(1.0, dt), cx.b.erf(x)))
    big = cx.b.max(x, cx.tensor(_ERFCX_SPLIT, dt))  # keeps the fraction finite where it is not used
    t = cx.tensor(0.0, dt)
    for k in range(_ERFCX_DEPTH, 0, -1):
        t = cx.b.div(cx.tensor(k / 2.0, dt), cx.b.add(big, t))
    frac = cx.b.reciprocal(cx.b.mul(cx.b.add(big, t), cx.tensor(math.sqrt(math.pi), dt)))
    return cx.cast(cx.b.where(cx.b.lt(x, cx.tensor(_ERFCX_SPLIT, dt)), direct, frac), out_dt)


_BESSEL_TERMS = 120
_BESSEL_SPLIT = 60.0
_BESSEL_ASYMPTOTIC = 8


def bessel_i(cx: ConvertContext, x: Value, nu: int, scaled: bool) -> Value:
    """The modified Bessel function I_nu(x) (nu = 0 or 1), times ``exp(-|x|)`` when ``scaled``.

    Up to |x| = 60 the power series ``sum_k (x/2)^(2k+nu) / (k! (k+nu)!)``, each term computed as
    the exp of its logarithm (no overflow in the terms); beyond, the asymptotic expansion
    ``e^|x| / sqrt(2 pi |x|) sum_k (-1)^k a_k / |x|^k`` with
    ``a_k = (4nu^2 - 1)(4nu^2 - 9)..(4nu^2 - (2k-1)^2) / (k! 8^k)``.  I_1 is odd, I_0 even."""
    dt = x.dtype
    ax = cx.b.abs(x)
    small = cx.b.min(ax, cx.tensor(_BESSEL_SPLIT, dt))
    k = _iota_axis(cx, x, _BESSEL_TERMS, dt)
    lh = cx.reshape(cx.b.log(cx.b.mul(small, cx.tensor(0.5, dt))), x.shape + (1,))
    power = cx.b.add(cx.b.mul(k, cx.tensor(2.0, dt)), cx.tensor(float(nu), dt))
    expo = cx.b.sub(cx.b.mul(power, lh), cx.b.add(cx.b.lgamma(cx.b.add(k, cx.tensor(1.0, dt))),
                                                   cx.b.lgamma(cx.b.add(k, cx.tensor(nu + 1.0, dt)))))
    if nu == 0:  # the k = 0 term is 1, also at x = 0 (where 0 * log 0 is NaN)
        expo = cx.b.where(cx.b.eq(k, cx.tensor(0.0, dt)), cx.tensor(0.0, dt), expo)
    if scaled:
        expo = cx.b.sub(expo, cx.reshape(small, x.shape + (1,)))
    series = cx.b.reduce_sum(cx.b.exp(expo), axes=(x.type.rank,), keepdims=False)
    large = cx.b.max(ax, cx.tensor(_BESSEL_SPLIT, dt))
    inv = cx.b.reciprocal(large)
    coef = [1.0]
    for j in range(1, _BESSEL_ASYMPTOTIC):
        coef.append(-coef[-1] * (4 * nu * nu - (2 * j - 1) ** 2) / (j * 8))
    poly = cx.tensor(coef[-1], dt)
    for c in reversed(coef[:-1]):
        poly = cx.b.add(cx.b.mul(poly, inv), cx.tensor(c, dt))
    # sum_k (-1)^k a_k / x^k: coef already carries the sign
    asym = cx.b.div(poly, cx.b.sqrt(cx.b.mul(large, cx.tensor(2 * math.pi, dt))))
    if not scaled:
        asym = cx.b.mul(asym, cx.b.exp(large))
    out = cx.b.where(cx.b.le(ax, cx.tensor(_BESSEL_SPLIT, dt)), series, asym)
    if nu == 1:
        out = cx.b.where(cx.b.lt(x, cx.tensor(0.0, dt)), cx.b.neg(out), out)
    return cx.b.where(cx.b.isnan(x), x, out)


_BESSEL = {"i0": (0, False), "special_i0": (0, False), "special_modified_bessel_i0": (0, False),
           "special_modified_bessel_i1": (1, False), "special_i0e": (0, True), "special_i1": (1, False),
           "special_i1e": (1, True), "prims.bessel_i0.default": (0, False), "prims.bessel_i0e.default": (0, True),
           "prims.bessel_i1.default": (1, False), "prims.bessel_i1e.default": (1, True)}


@converter(*_BESSEL)
def _bessel(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x = cx.cast(_input(a), DType.f64)  # the series loses digits in float32
    key = str(cx.node.target)
    name = key if key.startswith("prims.") else _opname(cx)
    nu, scaled = _BESSEL[name]
    return cx.cast(bessel_i(cx, x, nu, scaled), dt)


@converter("special_spherical_bessel_j0", "prims.spherical_bessel_j0.default")
def _spherical_j0(cx: ConvertContext, a: dict) -> Any:
    """sin(x) / x, 1 at 0 (``1 - x^2/6`` below |x| = 1e-4, where the quotient loses digits)."""
    dt = _float_dtype(cx)
    x = cx.cast(_input(a), DType.f64)
    f64 = DType.f64
    tiny = cx.b.lt(cx.b.abs(x), cx.tensor(1e-4, f64))
    safe = cx.b.where(tiny, cx.tensor(1.0, f64), x)
    series = cx.b.sub(cx.tensor(1.0, f64), cx.b.div(cx.b.mul(x, x), cx.tensor(6.0, f64)))
    return cx.cast(cx.b.where(tiny, series, cx.b.div(cx.b.sin(safe), safe)), dt)


@converter("special_ndtri", "prims.ndtri.default")
def _ndtri(cx: ConvertContext, a: dict) -> Any:
    """The standard normal quantile ``sqrt(2) erfinv(2p - 1)`` (in float64: 2p - 1 keeps p's digits)."""
    dt = _float_dtype(cx)
    p = cx.cast(_input(a), DType.f64)
    q = cx.b.sub(cx.b.mul(p, cx.tensor(2.0, DType.f64)), cx.tensor(1.0, DType.f64))
    return cx.cast(cx.b.mul(cx.b.erfinv(q), cx.tensor(math.sqrt(2.0), DType.f64)), dt)



def _reduce_loss(cx: ConvertContext, loss: Value, reduction: int) -> Value:
    """ATen's loss reduction: 0 none, 1 mean, 2 sum."""
    if reduction == 0:
        return cx.broadcast(loss, cx.out_shape)
    axes = tuple(range(loss.type.rank))
    if reduction == 1:
        return cx.b.reduce_mean(loss, axes=axes, keepdims=False)
    return cx.b.reduce_sum(loss, axes=axes, keepdims=False)


@converter("hinge_embedding_loss")
def _hinge_embedding_loss(cx: ConvertContext, a: dict) -> Any:
    """``x`` where target is 1, ``max(0, margin - x)`` where it is -1 (ATen sums both terms:
    other targets get both), reduced by ATen's int reduction."""
    dt = cx.out_dtype
    x = cx.cast(_input(a), dt)
    y = cx.cast(_require(a["target"], "target"), dt)
    zero = cx.tensor(0.0, dt)
    margin = cx.tensor(float(a.get("margin", 1.0)), dt)
    neg = cx.b.where(cx.b.ne(y, cx.tensor(1.0, dt)), cx.b.max(cx.b.sub(margin, x), zero), zero)
    pos = cx.b.where(cx.b.ne(y, cx.tensor(-1.0, dt)), x, zero)
    loss = cx.b.add(pos, neg)
    return _reduce_loss(cx, loss, int(a.get("reduction", 1)))


_CHEBYSHEV = {f"special_{p}chebyshev_polynomial_{k}": (k, bool(p)) for k in "tuvw" for p in ("", "shifted_")}


@converter(*_CHEBYSHEV)
def _chebyshev(cx: ConvertContext, a: dict) -> Any:
    """Chebyshev polynomials of the four kinds (and the shifted ones, of ``2x - 1``) of degree
    ``trunc(n)`` (0 below degree 0, as torch), by their closed forms in float64: with
    ``x = cos(th)`` inside [-1, 1], ``x = cosh(t)`` beyond, e.g. ``T_n = cos(n th)``,
    ``U_n = sin((n+1) th) / sin(th)``, ``V_n = cos((n+1/2) th) / cos(th/2)``,
    ``W_n = sin((n+1/2) th) / sin(th/2)``; the kinds' values at +-1 are set exactly, and below -1
    ``T, U`` take the sign ``(-1)^n`` while ``V`` and ``W`` swap (``V_n(x) = (-1)^n W_n(-x)``)."""
    kind, shifted = _CHEBYSHEV[_opname(cx)]
    f64 = DType.f64
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["x"], "x"), f64)
    n = cx.b.trunc(cx.cast(_require(a["n"], "n"), f64) if isinstance(a["n"], Value) else cx.tensor(a["n"], f64))
    if shifted:
        x = cx.b.sub(cx.b.mul(x, cx.tensor(2.0, f64)), cx.tensor(1.0, f64))
    one, half = cx.tensor(1.0, f64), cx.tensor(0.5, f64)
    sign = cx.b.sub(one, cx.b.mul(cx.b.mod(n, cx.tensor(2.0, f64)), cx.tensor(2.0, f64)))  # (-1)^n, n >= 0
    ax = cx.b.abs(x)
    th = cx.b.acos(cx.b.max(cx.b.min(x, one), cx.b.neg(one)))
    t = cx.b.acosh(cx.b.max(ax, one))  # of |x|
    m = cx.b.add(n, one) if kind == "u" else cx.b.add(n, half) if kind in "vw" else n

    def q(num: Value, den: Value) -> Value:
        return cx.b.div(num, den)

    if kind == "t":
        inside = cx.b.cos(cx.b.mul(n, th))
        pos, neg = cx.b.cosh(cx.b.mul(n, t)), cx.b.mul(sign, cx.b.cosh(cx.b.mul(n, t)))
        at1, atm1 = one, sign
    elif kind == "u":
        inside = q(cx.b.sin(cx.b.mul(m, th)), cx.b.sin(th))
        hyp = q(cx.b.sinh(cx.b.mul(m, t)), cx.b.sinh(t))
        pos, neg = hyp, cx.b.mul(sign, hyp)
        at1, atm1 = m, cx.b.mul(sign, m)
    else:
        cos_form = q(cx.b.cosh(cx.b.mul(m, t)), cx.b.cosh(cx.b.mul(t, half)))
        sin_form = q(cx.b.sinh(cx.b.mul(m, t)), cx.b.sinh(cx.b.mul(t, half)))
        odd = cx.b.mul(m, cx.tensor(2.0, f64))  # 2n + 1
        if kind == "v":
            inside = q(cx.b.cos(cx.b.mul(m, th)), cx.b.cos(cx.b.mul(th, half)))
            pos, neg = cos_form, cx.b.mul(sign, sin_form)
            at1, atm1 = one, cx.b.mul(sign, odd)
        else:
            inside = q(cx.b.sin(cx.b.mul(m, th)), cx.b.sin(cx.b.mul(th, half)))
            pos, neg = sin_form, cx.b.mul(sign, cos_form)
            at1, atm1 = odd, sign
    out = cx.b.where(cx.b.gt(x, one), pos, cx.b.where(cx.b.lt(x, cx.b.neg(one)), neg, inside))
    out = cx.b.where(cx.b.eq(x, one), at1, cx.b.where(cx.b.eq(x, cx.b.neg(one)), atm1, out))
    out = cx.b.where(cx.b.lt(n, cx.tensor(0.0, f64)), cx.tensor(0.0, f64), out)
    return cx.cast(out, dt)


@converter("_cdist_forward", "cdist")
def _cdist(cx: ConvertContext, a: dict) -> Any:
    """p-norm distance of every row pair: ``x1 (..., P, M)``, ``x2 (..., R, M)`` -> ``(..., P, R)``,
    computed directly from the differences (torch may use a matmul form for p = 2 on large inputs;
    the direct form is the exact one)."""
    dt = _float_dtype(cx)
    x1 = cx.cast(_require(a["x1"], "x1"), dt)
    x2 = cx.cast(_require(a["x2"], "x2"), dt)
    p = float(a.get("p", 2.0))
    out = cx.out_shape
    batch = out[:-2]
    x1 = cx.broadcast(x1, batch + x1.shape[-2:])
    x2 = cx.broadcast(x2, batch + x2.shape[-2:])
    nb = len(batch)
    d = cx.b.sub(cx.reshape(x1, batch + (x1.shape[-2], 1, x1.shape[-1])),
                 cx.reshape(x2, batch + (1,) + x2.shape[-2:]))
    last = (nb + 2,)
    if p == 0:
        return cx.b.reduce_sum(cx.cast(cx.b.ne(d, cx.tensor(0.0, dt)), dt), axes=last, keepdims=False)
    ad = cx.b.abs(d)
    if math.isinf(p):
        return cx.b.reduce_max(ad, axes=last, keepdims=False)
    if p == 1:
        return cx.b.reduce_sum(ad, axes=last, keepdims=False)
    if p == 2:
        return cx.b.sqrt(cx.b.reduce_sum(cx.b.mul(d, d), axes=last, keepdims=False))
    s = cx.b.reduce_sum(cx.b.pow(ad, cx.tensor(p, dt)), axes=last, keepdims=False)
    return cx.b.pow(s, cx.tensor(1.0 / p, dt))


@converter("segment_reduce")
def _segment_reduce(cx: ConvertContext, a: dict) -> Any:
    """Reduce consecutive segments of ``data`` along ``axis`` (sizes ``lengths``, or ``offsets``):
    a (segment, position) membership mask from the cumulative ends, then a masked reduction.
    ``initial`` joins every segment's reduction (a mean divides by the element count only);
    an empty segment without it gives torch's identities (0, 1, -inf, +inf; NaN for mean)."""
    data = _require(a["data"], "data")
    reduce = str(a["reduce"])
    if reduce not in ("sum", "mean", "max", "min", "prod"):
        raise Unsupported(f"segment_reduce with reduce='{reduce}'")
    dt = _float_dtype(cx)
    data = cx.cast(data, dt)
    ax = normalize_axis(int(a.get("axis", 0)), data.type.rank)
    lengths, offsets = a.get("lengths"), a.get("offsets")
    if isinstance(lengths, Value):
        if lengths.type.rank != 1:
            raise Unsupported("segment_reduce with multi-dimensional lengths")
        ends = cx.b.cumsum(cx.cast(lengths, DType.i64), axis=0, reverse=False, exclusive=False)
        starts = cx.b.sub(ends, cx.cast(lengths, DType.i64))
    elif isinstance(offsets, Value):
        if offsets.type.rank != 1:
            raise Unsupported("segment_reduce with multi-dimensional offsets")
        o = cx.cast(offsets, DType.i64)
        n_off = o.shape[0]
        starts = cx.b.slice(o, start=(0,), limit=(dim_add(n_off, -1),))
        ends = cx.b.slice(o, start=(1,), limit=(n_off,))
    else:
        raise Unsupported("segment_reduce without lengths or offsets")
    if a.get("indices") is not None:
        raise Unsupported("segment_reduce with indices")
    r = data.type.rank
    n, seg = data.shape[ax], starts.shape[0]
    # (seg, n) membership, laid out against data moved to (seg, n, rest...) with axis first
    pos = cx.b.iota(shape=(1, n), axis=1, dtype=DType.i64)
    member = cx.b.create("ik.and", [cx.b.ge(pos, cx.reshape(starts, (seg, 1))),
                                    cx.b.lt(pos, cx.reshape(ends, (seg, 1)))]).results[0]
    perm = (ax,) + tuple(i for i in range(r) if i != ax)
    xt = cx.b.transpose(data, perm=perm) if perm != tuple(range(r)) else data
    rest = xt.shape[1:]
    m = cx.reshape(member, (seg, n) + (1,) * len(rest))
    xs = cx.reshape(xt, (1,) + xt.shape)
    count = cx.b.reduce_sum(cx.cast(member, dt), axes=(1,), keepdims=False)
    count = cx.reshape(count, (seg,) + (1,) * len(rest))
    ident = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}[reduce]
    masked = cx.b.where(m, xs, cx.tensor(ident, dt))
    kind = {"sum": "reduce_sum", "mean": "reduce_sum", "prod": "reduce_prod", "max": "reduce_max",
            "min": "reduce_min"}[reduce]
    out = getattr(cx.b, kind)(masked, axes=(1,), keepdims=False)
    init = a.get("initial")
    if init is not None:
        iv = cx.tensor(float(init), dt)
        out = {"sum": cx.b.add, "mean": cx.b.add, "prod": cx.b.mul, "max": cx.b.max, "min": cx.b.min}[reduce](out, iv)
    if reduce == "mean":
        mean = cx.b.div(out, count)
        empty = cx.b.eq(count, cx.tensor(0.0, dt))
        out = cx.b.where(empty, iv, mean) if init is not None else mean
    inv = tuple(int(i) for i in np.argsort(perm))
    return cx.b.transpose(out, perm=inv) if perm != tuple(range(r)) else out


@converter("bilinear")
def _bilinear(cx: ConvertContext, a: dict) -> Any:
    """``y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]``: one matmul against W laid
    out as (I, O*J), then a product with x2 summed over j."""
    dt = cx.out_dtype
    x1 = cx.cast(_require(a["input1"], "input1"), dt)
    x2 = cx.cast(_require(a["input2"], "input2"), dt)
    w = cx.cast(_require(a["weight"], "weight"), dt)
    o, i, j = w.shape
    lead = cx.out_shape[:-1]
    x1 = cx.broadcast(x1, lead + (i,))
    x2 = cx.broadcast(x2, lead + (j,))
    wt = cx.reshape(cx.b.transpose(w, perm=(1, 0, 2)), (i, dim_mul(o, j)))
    t = cx.reshape(cx.b.matmul(cx.reshape(x1, (dim_prod(lead), i)), wt), lead + (o, j))
    y = cx.b.reduce_sum(cx.b.mul(t, cx.reshape(x2, lead + (1, j))), axes=(len(lead) + 1,), keepdims=False)
    b = a.get("bias")
    if isinstance(b, Value):
        y = cx.b.add(y, cx.cast(b, dt))
    return y


@converter("margin_ranking_loss")
def _margin_ranking_loss(cx: ConvertContext, a: dict) -> Any:
    """``max(0, -target * (input1 - input2) + margin)``, reduced by ATen's int reduction."""
    dt = cx.out_dtype
    x1 = cx.cast(_require(a["input1"], "input1"), dt)
    x2 = cx.cast(_require(a["input2"], "input2"), dt)
    y = cx.cast(_require(a["target"], "target"), dt)
    z = cx.b.add(cx.b.neg(cx.b.mul(y, cx.b.sub(x1, x2))), cx.tensor(float(a.get("margin", 0.0)), dt))
    loss = cx.b.max(z, cx.tensor(0.0, dt))
    return _reduce_loss(cx, loss, int(a.get("reduction", 1)))


@converter("angle")
def _angle(cx: ConvertContext, a: dict) -> Any:
    """The argument of a real number: pi below zero, 0 otherwise, NaN kept (complex inputs are refused
    at the dtype)."""
    x = _input(a)
    dt = _float_dtype(cx)
    xf = cx.cast(x, dt)
    out = cx.b.where(cx.b.lt(xf, cx.tensor(0.0, dt)), cx.tensor(math.pi, dt), cx.tensor(0.0, dt))
    return cx.b.where(cx.b.isnan(xf), xf, out) if dt.is_float else out


@converter("transformers.grouped_mm_fallback.default")
def _grouped_mm(cx: ConvertContext, a: dict) -> Any:
    """transformers' MoE grouped matmul: ``input (S, K)`` rows sorted by expert, ``weight (E, K, N)``,
    ``offs (E,)`` each expert's cumulative end row; row ``s`` is ``input[s] @ weight[e]`` for the
    first ``e`` with ``s < offs[e]``, zero past ``offs[-1]``.  Every expert's product is computed and
    masked in (static shapes whatever the routing)."""
    x = _require(a["input"], "input")
    w = _require(a["weight"], "weight")
    offs = cx.cast(_require(a["offs"], "offs"), DType.i64)
    dt = cx.out_dtype
    x, w = cx.cast(x, dt), cx.cast(w, dt)
    s_dim, e_dim = x.shape[0], w.shape[0]
    rows = cx.b.iota(shape=(1, s_dim), axis=1, dtype=DType.i64)
    ends = cx.reshape(offs, (e_dim, 1))
    starts = cx.b.concat(cx.b.constant(np.zeros((1, 1), dtype=np.int64)),
                         cx.b.slice(ends, start=(0, 0), limit=(dim_add(e_dim, -1), 1)), axis=0) \
        if not (isinstance(e_dim, int) and e_dim == 1) else cx.b.constant(np.zeros((1, 1), dtype=np.int64))
    mine = cx.b.create("ik.and", [cx.b.ge(rows, starts), cx.b.lt(rows, ends)]).results[0]  # (E, S)
    y = cx.b.matmul(cx.broadcast(cx.reshape(x, (1,) + x.shape), (e_dim,) + x.shape), w)  # (E, S, N)
    y = cx.b.where(cx.reshape(mine, (e_dim, s_dim, 1)), y, cx.tensor(0.0, dt))
    return cx.b.reduce_sum(y, axes=(0,), keepdims=False)


__all__ = ["bessel_i", "hurwitz_zeta", "hurwitz_zeta_tensor"]
