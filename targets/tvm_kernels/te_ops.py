"""TE computes for the ops TOPI lacks, or has with semantics other than the IR's.

Design note
-----------
These builders take and return ``te.Tensor``s (plus Python parameters) and know nothing of
the IR; the ``tvm-llvm`` / ``tvm-cuda`` rule table calls them.  Each one exists for a reason
the IR's reference kernel makes visible:

* **NaN.** ``tirx.max``/``min`` lower to LLVM's ``maxnum``/``minnum``, which *drop* NaN, and
  TVM's simplifier folds ``x != x`` to false.  NumPy (the oracle) propagates NaN through
  ``maximum``, ``max`` and ``argmax`` and ``x != x`` is the classic NaN test, so
  :func:`nan_max`, :func:`nan_min`, :func:`max_reduce` and :func:`arg_reduce` spell the NaN
  case out with ``tirx.isnan``.
* **Indices.** Negative indices wrap (``index + dim``) for every gather/scatter, as ONNX,
  NumPy and torch define them; after wrapping they are clamped to the axis only so that an
  out-of-range index (an error in the reference) cannot read or write outside the buffer.
* **Division.** Integer division or remainder by zero, and ``INT_MIN / -1``, trap on x86
  (SIGFPE would kill the process); NumPy gives 0 and ``-x`` (wrapped).  The guarded forms
  here give the same.
* **Sorting.** TVM's CPU sort (``tvm.contrib.sort``) is a stable ``std::stable_sort`` whose
  comparator is not a total order on NaN.  Floats are therefore sorted by an integer key
  that orders like NumPy (``-inf < ... < -0 == +0 < ... < +inf < NaN``, every NaN equal),
  and the values gathered back by the indices.
* **Special functions.** ``expm1``, ``erfinv``, ``digamma`` have no TIR intrinsic; they are
  computed in float64 (so every input precision gets a correctly rounded-enough result) from
  ``exp``/``log``/``erf`` with classic formulas; ``lgamma`` calls the C library's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tvm import te, tirx, topi

PrimExpr = Any
Tensor = Any


def ints(shape: Sequence[Any]) -> list[int]:
    return [int(d) for d in shape]


def is_float(dtype: str) -> bool:
    return str(dtype).startswith(("float", "bfloat"))


def bits_of(dtype: str) -> int:
    import tvm

    return int(tvm.DataType(str(dtype)).bits)


def dtype_of(e: Any) -> str:
    """The dtype of a tensor, tensor element or scalar expression (0.27's PrimExprs carry it in ``ty``)."""
    if hasattr(e, "ty") and hasattr(e.ty, "dtype"):
        return str(e.ty.dtype)
    return str(e.dtype)


def const(v: Any, dtype: str) -> PrimExpr:
    return tirx.const(v, str(dtype))


# --------------------------------------------------------------------------- broadcasting


def broadcast_map(f: Callable[..., PrimExpr], *ts: Tensor, name: str = "bcast") -> Tensor:
    """``f`` applied elementwise to ``ts`` broadcast NumPy-style (right-aligned)."""
    shapes = [ints(t.shape) for t in ts]
    out = list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    rank = len(out)

    def at(t: Tensor, s: list[int], idx: Sequence[Any]) -> PrimExpr:
        off = rank - len(s)
        return t[tuple(0 if s[i] == 1 and out[off + i] != 1 else idx[off + i] for i in range(len(s)))]

    return te.compute(out, lambda *i: f(*[at(t, s, i) for t, s in zip(ts, shapes)]), name=name)


# --------------------------------------------------------------------------- NaN-aware max/min


def isnan(x: PrimExpr) -> PrimExpr:
    """``tirx.isnan`` for every float type: TVM has no bf16 isnan, so bf16 is widened (exactly) first."""
    if str(dtype_of(x)) == "bfloat16":
        x = tirx.Cast("float32", x)
    return tirx.isnan(x)


def nan_max(a: PrimExpr, b: PrimExpr, floating: bool | None = None) -> PrimExpr:
    """``np.maximum``: NaN if either is NaN (``tirx.max`` is LLVM's NaN-dropping maxnum)."""
    if not (is_float(dtype_of(b)) if floating is None else floating):
        return tirx.max(a, b)
    return tirx.Select(isnan(a) | (a > b), a, b)


def nan_min(a: PrimExpr, b: PrimExpr, floating: bool | None = None) -> PrimExpr:
    """``np.minimum``: NaN if either is NaN."""
    if not (is_float(dtype_of(b)) if floating is None else floating):
        return tirx.min(a, b)
    return tirx.Select(isnan(a) | (a < b), a, b)


def lowest(dtype: str) -> PrimExpr:
    """The identity of max: -inf for floats, the minimum value for ints."""
    return const(-math.inf, dtype) if is_float(dtype) else tirx.min_value(str(dtype))


def highest(dtype: str) -> PrimExpr:
    """The identity of min: +inf for floats, the maximum value for ints."""
    return const(math.inf, dtype) if is_float(dtype) else tirx.max_value(str(dtype))


def _reducer(kind: str, dtype: str) -> Any:
    if kind == "sum":
        return te.sum
    if kind == "prod":
        return te.comm_reducer(lambda a, b: a * b, lambda t: tirx.const(1, t), name="prod")
    f = is_float(dtype)
    if kind == "max":
        return te.comm_reducer(lambda a, b: nan_max(a, b, f), lambda t: lowest(t), name="nan_max")
    if kind == "min":
        return te.comm_reducer(lambda a, b: nan_min(a, b, f), lambda t: highest(t), name="nan_min")
    raise ValueError(f"unknown reduction {kind!r}")


def reduce(x: Tensor, kind: str, axes: Sequence[int], keepdims: bool) -> Tensor:
    """sum / prod / max / min over ``axes``; max and min propagate NaN like NumPy."""
    if kind in ("sum", "prod") or not is_float(dtype_of(x)):
        fn = {"sum": topi.sum, "prod": topi.prod, "max": topi.max, "min": topi.min}[kind]
        return fn(x, axis=list(axes), keepdims=keepdims)
    shape = ints(x.shape)
    red = {a: te.reduce_axis((0, shape[a]), f"r{a}") for a in axes}
    out = [1 if i in red else d for i, d in enumerate(shape) if keepdims or i not in red]
    reducer = _reducer(kind, dtype_of(x))

    def body(*o: Any) -> PrimExpr:
        it = iter(o)
        idx = []
        for i in range(len(shape)):
            if i in red:
                if keepdims:
                    next(it)
                idx.append(red[i])
            else:
                idx.append(next(it))
        return reducer(x[tuple(idx)], axis=list(red.values()))

    return te.compute(out, body, name=f"reduce_{kind}")


def arg_reduce(x: Tensor, axis: int, keepdims: bool, largest: bool, last: bool) -> Tensor:
    """argmax / argmin as int64, like NumPy: the first NaN wins; ties take the first index
    (the last with ``last``, ONNX ``select_last_index``).  Two plain reductions (the best value,
    then the first index holding it) rather than one over (index, value) pairs: DLight
    schedules these on CUDA, where the pair reduction left a global temporary."""
    shape = ints(x.shape)
    best = reduce(x, "max" if largest else "min", [axis], keepdims=True)
    f = is_float(dtype_of(x))
    k = te.reduce_axis((0, shape[axis]), "k")
    out = [d for i, d in enumerate(shape) if i != axis]
    if keepdims:
        out.insert(axis, 1)
    none = tirx.const(-1 if last else shape[axis], "int64")

    def body(*outer: Any) -> PrimExpr:
        o = list(outer)
        if keepdims:
            o.pop(axis)
        v = x[tuple(o[:axis] + [k] + o[axis:])]
        m = best[tuple(o[:axis] + [0] + o[axis:])]
        hit = (v == m) | (isnan(v) & isnan(m)) if f else v == m
        idx = tirx.Select(hit, tirx.Cast("int64", k), none)
        return te.max(idx, axis=k) if last else te.min(idx, axis=k)

    return te.compute(out, body, name="argbest")


# --------------------------------------------------------------------------- integer arithmetic


def _safe(y: PrimExpr) -> PrimExpr:
    """A divisor that never traps: 1 where ``y`` is 0 or -1 (handled by the callers)."""
    one = const(1, dtype_of(y))
    if dtype_of(y).startswith("uint"):
        return tirx.Select(y == const(0, dtype_of(y)), one, y)
    return tirx.Select((y == const(0, dtype_of(y))) | (y == const(-1, dtype_of(y))), one, y)


def int_div(x: PrimExpr, y: PrimExpr, floor: bool) -> PrimExpr:
    """Truncated (C) or floored (NumPy ``//``) integer division; 0 for a zero divisor."""
    zero = const(0, dtype_of(x))
    q = tirx.floordiv(x, _safe(y)) if floor else tirx.truncdiv(x, _safe(y))
    if not dtype_of(y).startswith("uint"):
        q = tirx.Select(y == const(-1, dtype_of(y)), zero - x, q)
    return tirx.Select(y == zero, zero, q)


def int_mod(x: PrimExpr, y: PrimExpr, floor: bool) -> PrimExpr:
    """Truncated (``np.fmod``) or floored (``np.mod``) integer remainder; 0 for a zero divisor."""
    zero = const(0, dtype_of(x))
    r = tirx.floormod(x, _safe(y)) if floor else tirx.truncmod(x, _safe(y))
    if not dtype_of(y).startswith("uint"):
        r = tirx.Select(y == const(-1, dtype_of(y)), zero, r)
    return tirx.Select(y == zero, zero, r)


def _differ(p: PrimExpr, q: PrimExpr) -> PrimExpr:
    """``p != q`` for booleans (TVM 0.27's LLVM codegen emits a float compare for bool != bool)."""
    return (p & tirx.Not(q)) | (tirx.Not(p) & q)


def float_fmod(x: PrimExpr, y: PrimExpr) -> PrimExpr:
    return tirx.truncmod(x, y)


def float_mod(x: PrimExpr, y: PrimExpr) -> PrimExpr:
    """``np.mod`` for floats: fmod, moved into the divisor's sign (exact, unlike x - floor(x/y)*y)."""
    r = tirx.truncmod(x, y)
    zero = const(0.0, dtype_of(x))
    fix = (r != zero) & _differ(r < zero, y < zero)
    return tirx.Select(fix, r + y, r)


def float_floor_div(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``np.floor_divide`` for floats, NumPy's ``npy_divmod`` step by step (floor(a / b) is
    off by one where a / b rounds up to an integer, e.g. 1 // 0.1 = 9)."""
    zero, one, half = const(0.0, dtype_of(a)), const(1.0, dtype_of(a)), const(0.5, dtype_of(a))
    mod = tirx.truncmod(a, b)
    div = (a - mod) / b
    div = tirx.Select((mod != zero) & _differ(b < zero, mod < zero), div - one, div)
    fl = tirx.floor(div)
    fl = tirx.Select(div - fl > half, fl + one, fl)
    # NaN (an infinite dividend, a NaN operand) propagates; TIR's float != is ordered, so test it first
    res = tirx.Select(isnan(div), div, tirx.Select(div == zero, zero, fl))
    return tirx.Select(b == zero, a / b, res)


def shift(x: PrimExpr, y: PrimExpr, kind: str) -> PrimExpr:
    """XLA shifts: an amount outside [0, bits) gives 0 (left, logical) or the sign fill (arithmetic)."""
    dt = dtype_of(x)
    nbits = bits_of(dt)
    unsigned = dt.startswith("uint")
    in_range = y < const(nbits, dt) if unsigned else (y >= const(0, dt)) & (y < const(nbits, dt))
    ys = tirx.Select(in_range, y, const(0, dt))
    zero = const(0, dt)
    if kind == "left":
        return tirx.Select(in_range, tirx.shift_left(x, ys), zero)
    if kind == "right_logical":
        if unsigned:
            return tirx.Select(in_range, tirx.shift_right(x, ys), zero)
        ut = f"uint{nbits}"
        r = tirx.shift_right(tirx.reinterpret(ut, x), tirx.Cast(ut, ys))
        return tirx.Select(in_range, tirx.reinterpret(dt, r), zero)
    if kind == "right_arithmetic":
        if unsigned:
            st = f"int{nbits}"
            sx = tirx.reinterpret(st, x)
            r = tirx.Select(in_range, tirx.shift_right(sx, tirx.Cast(st, ys)),
                            tirx.Select(sx < const(0, st), const(-1, st), const(0, st)))
            return tirx.reinterpret(dt, r)
        return tirx.Select(in_range, tirx.shift_right(x, ys), tirx.Select(x < zero, const(-1, dt), zero))
    raise ValueError(f"unknown shift {kind!r}")


def int_pow(x: Tensor, y: Tensor) -> Tensor:
    """Integer power of broadcast tensors by binary exponentiation over every bit of the
    exponent, wrapping like NumPy's (TIR's ``power`` is float only); a negative exponent (an
    error in NumPy) gives 0.  One TE stage per bit: as one expression the squared base would
    be a tree of 2**bits nodes."""
    dt = str(x.dtype)
    nbits = bits_of(dt)
    one, zero = const(1, dt), const(0, dt)
    base = broadcast_map(lambda a, b: a, x, y, name="pow_base")
    expo = broadcast_map(lambda a, b: b, x, y, name="pow_exp")
    result = te.compute(base.shape, lambda *i: one, name="pow_r")

    def multiply(r: Tensor, b: Tensor, k: int) -> Tensor:
        def body(*i: Any) -> PrimExpr:
            bit = tirx.bitwise_and(tirx.shift_right(expo[i], const(k, dt)), one) == one
            return r[i] * tirx.Select(bit, b[i], one)
        return te.compute(b.shape, body, name=f"pow_r{k}")

    def square(b: Tensor, k: int) -> Tensor:
        return te.compute(b.shape, lambda *i: b[i] * b[i], name=f"pow_b{k}")

    for k in range(nbits):
        result = multiply(result, base, k)
        if k + 1 < nbits:
            base = square(base, k)
    if dt.startswith("uint"):
        return result
    return te.compute(result.shape, lambda *i: tirx.Select(expo[i] < zero, zero, result[i]), name="pow")


def sign(x: PrimExpr) -> PrimExpr:
    """``np.sign``: -1, 0 or 1, and NaN for NaN (TOPI's sign gives 0 there)."""
    dt = dtype_of(x)
    zero, one = const(0, dt), const(1, dt)
    s = tirx.Select(x > zero, one, tirx.Select(x < zero, zero - one, zero))
    return tirx.Select(isnan(x), x, s) if is_float(dt) else s


def popcount(x: PrimExpr) -> PrimExpr:
    """Set bits of the value's bit pattern, by the SWAR bit-slicing sum on the unsigned bits
    widened to 32 or 64 (``tirx.popcount`` has no CUDA lowering in 0.27; LLVM turns this idiom
    back into ``ctpop``)."""
    dt = dtype_of(x)
    nbits = bits_of(dt)
    wide = 64 if nbits == 64 else 32
    ut = f"uint{wide}"
    u = tirx.reinterpret(f"uint{nbits}", x) if not dt.startswith("uint") else x
    v = tirx.Cast(ut, u)
    c = lambda k: tirx.const(k, ut)
    m1, m2, m4, h01 = (0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x0101010101010101)
    if wide == 32:
        m1, m2, m4, h01 = m1 & 0xFFFFFFFF, m2 & 0xFFFFFFFF, m4 & 0xFFFFFFFF, h01 & 0xFFFFFFFF
    v = v - (tirx.shift_right(v, c(1)) & c(m1))
    v = (v & c(m2)) + (tirx.shift_right(v, c(2)) & c(m2))
    v = (v + tirx.shift_right(v, c(4))) & c(m4)
    v = tirx.shift_right(v * c(h01), c(wide - 8))
    return tirx.Cast(dt, v)


def clz(x: PrimExpr) -> PrimExpr:
    """Leading zeros in the type's width (``width`` for 0); computed on the unsigned bits."""
    dt = dtype_of(x)
    nbits = bits_of(dt)
    u = tirx.reinterpret(f"uint{nbits}", x) if not dt.startswith("uint") else x
    # ctlz on the unsigned type of the same width, done in 32/64 bits where narrower types lack it
    wide = 64 if nbits == 64 else 32
    n = tirx.clz(tirx.Cast(f"uint{wide}", u)) - (wide - nbits)
    return tirx.Cast(dt, n)


# --------------------------------------------------------------------------- special functions


def _f64(x: PrimExpr) -> PrimExpr:
    return tirx.Cast("float64", x) if dtype_of(x) != "float64" else x


def expm1(x: PrimExpr) -> PrimExpr:
    """exp(x) - 1 without cancellation near 0 (Kahan: (u - 1) * x / log(u)), in float64."""
    d = _f64(x)
    u = tirx.exp(d)
    one = const(1.0, "float64")
    um1 = u - one
    r = tirx.Select(u == one, d, tirx.Select(um1 == -one, -one, um1 * d / tirx.log(u)))
    r = tirx.Select(u == const(math.inf, "float64"), u, r)
    return tirx.Cast(dtype_of(x), r)


def log1p(x: PrimExpr) -> PrimExpr:
    return tirx.Cast(dtype_of(x), tirx.log1p(_f64(x)))


def erfinv(x: PrimExpr) -> PrimExpr:
    """Inverse erf: Giles' single-precision approximation refined by two Newton steps on erf,
    in float64; ±1 give ±inf, |x| > 1 NaN."""
    y = _f64(x)
    c = lambda v: const(v, "float64")
    w = -tirx.log((c(1.0) - y) * (c(1.0) + y))
    w1 = w - c(2.5)
    p1 = c(2.81022636e-08)
    for k in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        p1 = c(k) + p1 * w1
    w2 = tirx.sqrt(w) - c(3.0)
    p2 = c(-0.000200214257)
    for k in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        p2 = c(k) + p2 * w2
    r = tirx.Select(w < c(5.0), p1, p2) * y
    for _ in range(2):
        r = r - (tirx.erf(r) - y) / (c(2.0 / math.sqrt(math.pi)) * tirx.exp(-r * r))
    a = tirx.abs(y)
    r = tirx.Select(a == c(1.0), y * c(math.inf), tirx.Select(a > c(1.0), c(math.nan), r))
    return tirx.Cast(dtype_of(x), r)


def lgamma(x: PrimExpr) -> PrimExpr:
    """log|Γ(x)| from the C math library (libm on CPU, CUDA's device library on GPUs)."""
    d = _f64(x)
    r = tirx.call_pure_extern("float64", "lgamma", d)
    # SciPy's gammaln (the reference) gives -inf at -inf, the C library +inf
    return tirx.Cast(dtype_of(x), tirx.Select(d == const(-math.inf, "float64"), d, r))


def digamma(x: PrimExpr) -> PrimExpr:
    """ψ(x): reflection below 0.5, recurrence up to 6, then the asymptotic series (float64,
    error ~1e-12); ∓inf at ±0 and NaN at the negative integers, like SciPy."""
    c = lambda v: const(v, "float64")
    d = _f64(x)
    refl = d < c(0.5)
    y = tirx.Select(refl, c(1.0) - d, d)
    n = tirx.max(c(0.0), tirx.ceil(c(6.0) - y))
    acc = c(0.0)
    for k in range(7):
        acc = acc + tirx.Select(c(float(k)) < n, c(1.0) / (y + c(float(k))), c(0.0))
    z = y + n
    z2 = c(1.0) / (z * z)
    series = c(691.0 / 32760.0)
    for coef in (-1.0 / 132.0, 1.0 / 240.0, -1.0 / 252.0, 1.0 / 120.0, -1.0 / 12.0):
        series = c(coef) + series * z2
    psi = tirx.log(z) - c(0.5) / z + series * z2 - acc
    psi = tirx.Select(refl, psi - c(math.pi) / tirx.tan(c(math.pi) * d), psi)
    pole = (d <= c(0.0)) & (tirx.floor(d) == d)
    psi = tirx.Select(pole, tirx.Select(d == c(0.0), c(-1.0) / d, c(math.nan)), psi)  # ψ(±0) = ∓inf
    return tirx.Cast(dtype_of(x), psi)


def nextafter(x: PrimExpr, y: PrimExpr) -> PrimExpr:
    """The next representable value after ``x`` towards ``y``: the C library's for float and
    double; for half types a step of one in the bit pattern (C has no half nextafter)."""
    dt = dtype_of(x)
    if dt not in ("float16", "bfloat16"):
        return tirx.nextafter(x, y)
    it = "int16"
    b = tirx.reinterpret(it, x)
    zero = const(0.0, dt)
    one = tirx.const(1, it)
    away = tirx.Not(_differ(y > x, x > zero))  # moving away from zero: the magnitude grows
    step = tirx.reinterpret(dt, tirx.Select(away, b + one, b - one))
    tiny = tirx.Select(y > zero, tirx.reinterpret(dt, tirx.const(1, it)), tirx.reinterpret(dt, tirx.const(-32767, it)))
    r = tirx.Select(x == zero, tiny, step)
    r = tirx.Select(x == y, y, r)
    return tirx.Select(isnan(x) | isnan(y), x + y, r)


def round_half_even(x: PrimExpr) -> PrimExpr:
    """``np.round``: ties to even (``nearbyint`` under the default rounding mode; TIR's
    ``round`` is C's ``round``, ties away from zero)."""
    return tirx.nearbyint(x)


# --------------------------------------------------------------------------- indexing


def wrap(i: PrimExpr, dim: int) -> PrimExpr:
    """A possibly negative index on an axis of ``dim``: ``i + dim`` below 0, then clamped into
    the axis so that an out-of-range index (an error in the reference) stays in bounds."""
    i = tirx.Cast("int64", i) if dtype_of(i) != "int64" else i
    d = tirx.const(dim, "int64")
    j = tirx.Select(i < tirx.const(0, "int64"), i + d, i)
    return tirx.max(tirx.min(j, d - tirx.const(1, "int64")), tirx.const(0, "int64"))


def take(data: Tensor, idx: Tensor, axis: int) -> Tensor:
    """``np.take(data, idx, axis)`` with negative indices wrapped (ONNX Gather)."""
    ds, ish = ints(data.shape), ints(idx.shape)
    r = len(ish)
    out = ds[:axis] + ish + ds[axis + 1:]

    def body(*o: Any) -> PrimExpr:
        i = idx[tuple(o[axis:axis + r])] if r else idx[()]
        return data[tuple(o[:axis]) + (wrap(i, ds[axis]),) + tuple(o[axis + r:])]

    return te.compute(out, body, name="take")


def take_along_axis(data: Tensor, idx: Tensor, axis: int) -> Tensor:
    """``np.take_along_axis`` / ONNX GatherElements with negative indices wrapped."""
    ds = ints(data.shape)

    def body(*o: Any) -> PrimExpr:
        return data[tuple(o[:axis]) + (wrap(idx[o], ds[axis]),) + tuple(o[axis + 1:])]

    return te.compute(ints(idx.shape), body, name="gather_elements")


def gather_nd(data: Tensor, idx: Tensor, batch_dims: int) -> Tensor:
    """ONNX GatherND: ``idx[..., :k]`` addresses ``data`` after ``batch_dims`` leading dims."""
    ds, ish = ints(data.shape), ints(idx.shape)
    b = batch_dims
    k = ish[-1]
    out = ish[:-1] + ds[b + k:]
    mid = len(ish) - 1 - b

    def body(*o: Any) -> PrimExpr:
        lead = list(o[:b + mid])
        pos = [wrap(idx[tuple(lead) + (j,)], ds[b + j]) for j in range(k)]
        return data[tuple(o[:b]) + tuple(pos) + tuple(o[b + mid:])]

    return te.compute(out, body, name="gather_nd")


def wrap_indices(idx: Tensor, dims: Sequence[int] | int, last_axis: bool = False) -> Tensor:
    """Indices with negatives wrapped, as int64: against one ``dims`` for every element, or,
    with ``last_axis``, against ``dims[j]`` for the j-th entry of the last axis (ScatterND)."""
    if last_axis:
        dl = list(dims)  # type: ignore[arg-type]

        def body(*o: Any) -> PrimExpr:
            d = tirx.const(dl[0], "int64")
            for j in range(1, len(dl)):
                d = tirx.Select(o[-1] == j, tirx.const(dl[j], "int64"), d)
            i = tirx.Cast("int64", idx[o])
            j2 = tirx.Select(i < tirx.const(0, "int64"), i + d, i)
            return tirx.max(tirx.min(j2, d - tirx.const(1, "int64")), tirx.const(0, "int64"))

        return te.compute(ints(idx.shape), body, name="wrapped")
    return te.compute(ints(idx.shape), lambda *o: wrap(idx[o], int(dims)), name="wrapped")  # type: ignore[arg-type]


_SCATTER_MODE = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def scatter_elements(data: Tensor, idx: Tensor, upd: Tensor, axis: int, reduction: str, gpu: bool) -> Tensor:
    """ONNX ScatterElements (TOPI's; duplicates with "none": the last in row-major order wins on CPU)."""
    w = wrap_indices(idx, int(data.shape[axis]))
    fn = topi.gpu.scatter_elements if gpu else topi.scatter_elements
    return fn(data, w, upd, axis, _SCATTER_MODE[reduction])


def scatter_nd(data: Tensor, idx: Tensor, upd: Tensor, reduction: str, gpu: bool) -> Tensor:
    """ONNX ScatterND through TOPI's, whose indices put the index tuple first: [K, ...]."""
    k = int(idx.shape[-1])
    w = wrap_indices(idx, ints(data.shape)[:k], last_axis=True)
    r = len(idx.shape)
    wt = topi.transpose(w, [r - 1] + list(range(r - 1)))
    fn = topi.gpu.scatter_nd if gpu else topi.scatter_nd
    return fn(data, wt, upd, _SCATTER_MODE[reduction])


# Scatters with reduction "none" whose indices may repeat, for targets that run every update in
# parallel (TOPI's GPU scatters): as gathers.  Each output element finds the last update that lands
# on it (a max-reduction over update numbers) and takes it, else keeps data: the IR's "last update
# wins" without a race, at the price of comparing every output row against every update.


def scatter_nd_last_wins(data: Tensor, idx: Tensor, upd: Tensor) -> Tensor:
    """ScatterND (reduction "none") as a gather: ``winner[p] = max{j : idx[j] == p}`` over the
    index tuples, then ``out[p, r] = upd[winner[p], r]`` where some update lands on ``p``."""
    k = int(idx.shape[-1])
    dims = ints(data.shape)
    lead, rest = dims[:k], dims[k:]
    n = int(np.prod(ints(idx.shape)[:-1], dtype=np.int64))
    w = topi.reshape(wrap_indices(idx, lead, last_axis=True), [n, k])
    u = topi.reshape(upd, [n, *rest])
    j = te.reduce_axis((0, n), name="j")

    def last(*p: Any) -> PrimExpr:
        hit = tirx.const(True, "bool")
        for m in range(k):
            hit = hit & (w[j, m] == tirx.Cast("int64", p[m]))
        return te.max(tirx.Select(hit, tirx.Cast("int64", j), tirx.const(-1, "int64")), axis=j)

    winner = te.compute(lead, last, name="scatter_winner")

    def body(*o: Any) -> PrimExpr:
        wi = winner[o[:k]]
        safe = tirx.max(wi, tirx.const(0, "int64"))
        return tirx.Select(wi >= tirx.const(0, "int64"), u[(safe, *o[k:])], data[o])

    return te.compute(dims, body, name="scatter_nd_last_wins")


def scatter_elements_last_wins(data: Tensor, idx: Tensor, upd: Tensor, axis: int) -> Tensor:
    """ScatterElements (reduction "none") as a gather: output element ``o`` can only receive the
    updates in its lane (same coordinates off ``axis``); the last whose index is ``o[axis]`` wins."""
    dims, ish = ints(data.shape), ints(idx.shape)
    w = wrap_indices(idx, dims[axis])
    j = te.reduce_axis((0, ish[axis]), name="j")
    lanes = [d for d in range(len(dims)) if d != axis and ish[d] < dims[d]]

    def at(o: Sequence[Any], jj: Any) -> tuple[Any, ...]:
        # clamped off the axis: a lane past the indices' extent is masked below
        return tuple(jj if d == axis else (tirx.min(o[d], ish[d] - 1) if d in lanes else o[d])
                     for d in range(len(dims)))

    def last(*o: Any) -> PrimExpr:
        hit = w[at(o, j)] == tirx.Cast("int64", o[axis])
        for d in lanes:
            hit = hit & (o[d] < ish[d])
        return te.max(tirx.Select(hit, tirx.Cast("int64", j), tirx.const(-1, "int64")), axis=j)

    winner = te.compute(dims, last, name="scatter_winner")

    def body(*o: Any) -> PrimExpr:
        wi = winner[o]
        return tirx.Select(wi >= tirx.const(0, "int64"), upd[at(o, tirx.max(wi, tirx.const(0, "int64")))], data[o])

    return te.compute(dims, body, name="scatter_elements_last_wins")


def _clamped_starts(starts: Tensor, dims: Sequence[int], sizes: Sequence[int]) -> list[PrimExpr]:
    out = []
    for i, (d, s) in enumerate(zip(dims, sizes)):
        v = tirx.Cast("int64", starts[i])
        out.append(tirx.max(tirx.min(v, tirx.const(d - s, "int64")), tirx.const(0, "int64")))
    return out


def dynamic_slice(x: Tensor, starts: Tensor, sizes: Sequence[int]) -> Tensor:
    """XLA DynamicSlice: each start clamped to [0, dim - size]."""
    dims = ints(x.shape)

    def body(*o: Any) -> PrimExpr:
        st = _clamped_starts(starts, dims, sizes)
        return x[tuple(s + tirx.Cast("int64", i) for s, i in zip(st, o))]

    return te.compute(list(sizes), body, name="dynamic_slice")


def dynamic_update_slice(x: Tensor, upd: Tensor, starts: Tensor) -> Tensor:
    """XLA DynamicUpdateSlice: each start clamped to [0, dim - update dim]."""
    dims, us = ints(x.shape), ints(upd.shape)

    def body(*o: Any) -> PrimExpr:
        st = _clamped_starts(starts, dims, us)
        rel = [tirx.Cast("int64", i) - s for s, i in zip(st, o)]
        inside = tirx.const(True, "bool")
        for r, u in zip(rel, us):
            inside = inside & (r >= tirx.const(0, "int64")) & (r < tirx.const(u, "int64"))
        safe = [tirx.max(tirx.min(r, tirx.const(u - 1, "int64")), tirx.const(0, "int64")) for r, u in zip(rel, us)]
        return tirx.Select(inside, upd[tuple(safe)], x[o])

    return te.compute(dims, body, name="dynamic_update_slice")


# --------------------------------------------------------------------------- scans


def scan(x: Tensor, kind: str, axis: int, reverse: bool, exclusive: bool, gpu: bool) -> Tensor:
    """cumsum / cumprod / cummax / cummin along ``axis`` (TOPI's scans; max/min propagate NaN)."""
    mod = topi.gpu if gpu else topi
    y = topi.flip(x, axis) if reverse else x
    if kind == "sum":
        r = mod.cumsum(y, axis, dtype_of(x), exclusive)
    elif kind == "prod":
        r = mod.cumprod(y, axis, dtype_of(x), exclusive)
    else:
        f = is_float(dtype_of(x))
        pick = nan_max if kind == "max" else nan_min
        ident = lowest(dtype_of(x)) if kind == "max" else highest(dtype_of(x))

        def binop(a: Any, b: Any) -> Any:
            if isinstance(a, te.Tensor):  # the GPU inclusive scan combines whole tensors
                return te.compute(a.shape, lambda *i: pick(a[i], b[i], f), name=f"cum{kind}")
            return pick(a, b, f)
        if gpu:  # the GPU scan takes no op name
            r = topi.gpu.scan.scanop(y, binop, ident, axis, dtype_of(x), exclusive)
        else:
            r = topi.scan.scanop(y, binop, ident, f"cum{kind}", axis, dtype_of(x), exclusive)
    return topi.flip(r, axis) if reverse else r


# --------------------------------------------------------------------------- sorting


def sort_key(x: Tensor) -> Tensor:
    """An integer tensor ordered like NumPy orders ``x``: for floats the IEEE bits made
    monotone, with -0 as +0 and every NaN one value above +inf; ints as they are."""
    dt = dtype_of(x)
    if not is_float(dt):
        if dt.startswith("uint") and bits_of(dt) < 64:
            return topi.cast(x, "int64")
        if dt.startswith("uint"):
            return te.compute(x.shape, lambda *i: tirx.reinterpret("int64", x[i] ^ tirx.const(1 << 63, dt)),
                              name="sort_key")
        return x
    nb = bits_of(dt)
    it = f"int{nb}"
    kt = "int32" if nb < 32 else it
    nan_bits = {16: 0x7E00 if dt == "float16" else 0x7FC0, 32: 0x7FC00000, 64: 0x7FF8000000000000}[nb]
    mask = (1 << (nb - 1)) - 1

    def body(*i: Any) -> PrimExpr:
        v = x[i]
        canon = tirx.Select(v == const(0, dt), const(0, dt), v)
        b = tirx.Cast(kt, tirx.reinterpret(it, canon))
        b = tirx.Select(isnan(v), tirx.const(nan_bits, kt), b)
        return tirx.Select(b < tirx.const(0, kt), b ^ tirx.const(mask, kt), b)

    return te.compute(x.shape, body, name="sort_key")


def argsort(x: Tensor, axis: int, descending: bool, gpu: bool) -> Tensor:
    """Stable argsort (int64) of ``x`` along ``axis``, NaN last ascending and first descending."""
    key = sort_key(x)
    if gpu:
        return topi.gpu.argsort(key, axis=axis, is_ascend=not descending, dtype="int64")
    return topi.argsort(key, axis=axis, is_ascend=not descending, dtype="int64")


def topk_indices(x: Tensor, k: int, axis: int, largest: bool, gpu: bool) -> Tensor:
    """Indices (int64) of the ``k`` largest (smallest) along ``axis``, ties to the lower index."""
    key = sort_key(x)
    fn = topi.gpu.topk if gpu else topi.topk
    return fn(key, k, axis=axis, ret_type="indices", is_ascend=not largest, dtype="int64")


# --------------------------------------------------------------------------- windows and convolution


def reduce_window(x: Tensor, kind: str, window: Sequence[int], strides: Sequence[int], pads: Sequence[int],
                  dilations: Sequence[int]) -> Tensor:
    """XLA ReduceWindow over every dim; padding is the reduction's identity; max/min propagate NaN."""
    shape = ints(x.shape)
    r = len(shape)
    pb, pa = list(pads[:r]), list(pads[r:])
    out = [(shape[i] + pb[i] + pa[i] - dilations[i] * (window[i] - 1) - 1) // strides[i] + 1 for i in range(r)]
    if any(o <= 0 for o in out):
        raise ValueError(f"reduce_window output shape {out} is empty")
    ks = {i: te.reduce_axis((0, window[i]), f"w{i}") for i in range(r) if window[i] > 1}
    dt = dtype_of(x)
    ident = {"sum": const(0, dt), "max": lowest(dt), "min": highest(dt)}[kind]
    reducer = _reducer(kind, dt)

    def body(*o: Any) -> PrimExpr:
        idx, conds = [], []
        for i in range(r):
            p = o[i] * strides[i] - pb[i]
            if i in ks:
                p = p + ks[i] * dilations[i]
            lo_ok = pb[i] > 0
            hi_ok = (out[i] - 1) * strides[i] - pb[i] + (window[i] - 1) * dilations[i] >= shape[i]
            if lo_ok or hi_ok:
                conds.append((p >= 0) & (p < shape[i]))
                p = tirx.max(tirx.min(p, shape[i] - 1), 0)
            idx.append(p)
        val = x[tuple(idx)]
        if conds:
            c = conds[0]
            for cc in conds[1:]:
                c = c & cc
            val = tirx.Select(c, val, ident)
        return reducer(val, axis=list(ks.values())) if ks else val

    return te.compute(out, body, name=f"reduce_window_{kind}")


def conv(x: Tensor, w: Tensor, bias: Tensor | None, strides: Sequence[int], padding: Sequence[int],
         dilations: Sequence[int], lhs_dilation: Sequence[int], groups: int) -> Tensor:
    """N-d convolution (N C spatial..., O I/groups spatial...) through ``topi.nn.conv``; input
    (lhs) dilation through ``topi.nn.dilate``, and negative padding (from a transposed
    convolution with large padding) as a crop."""
    nsp = len(x.shape) - 2
    if any(d != 1 for d in lhs_dilation):
        x = topi.nn.dilate(x, [1, 1] + list(lhs_dilation))
    pb, pa = list(padding[:nsp]), list(padding[nsp:])
    if any(p != 0 for p in pb + pa):
        if any(p > 0 for p in pb + pa):
            x = topi.nn.pad(x, [0, 0] + [max(p, 0) for p in pb], [0, 0] + [max(p, 0) for p in pa])
        if any(p < 0 for p in pb + pa):
            shp = ints(x.shape)
            x = topi.strided_slice(x, [0, 0] + [max(-p, 0) for p in pb],
                                   shp[:2] + [shp[2 + i] - max(-pa[i], 0) for i in range(nsp)], [1] * len(shp))
    layout = "NC" + "DHW"[3 - nsp:]
    ker = "OI" + "DHW"[3 - nsp:]
    y = topi.nn.conv(x, w, list(strides), [0] * nsp, list(dilations), groups, layout, ker, out_dtype=dtype_of(x))
    if bias is not None:
        y = topi.add(y, topi.reshape(bias, [1, int(bias.shape[0])] + [1] * nsp))
    return y


# --------------------------------------------------------------------------- attention


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, bias: Tensor | None, scale: float,
              causal: bool, softcap: float = 0.0) -> Tensor:
    """Unfused attention for what the kernel library does not cover (float64, Dv != D): the
    scores materialised, masked softmax with the reference's convention that a row with every
    key masked gives zeros (never NaN), accumulation in the query's float type (float32 for
    half types)."""
    b, h, sq, d = ints(q.shape)
    hk, sk, dv = int(k.shape[1]), int(k.shape[2]), int(v.shape[3])
    group = h // hk
    acc = "float64" if str(q.dtype) == "float64" else "float32"
    full = [b, h, sq, sk]

    def expand(t: Tensor | None) -> Tensor | None:
        return None if t is None else topi.broadcast_to(t, full)

    mk, bs = expand(mask), expand(bias)
    rd = te.reduce_axis((0, d), "d")

    def score(bi: Any, hi: Any, i: Any, j: Any) -> PrimExpr:
        qs = tirx.Cast(acc, q[bi, hi, i, rd]) * const(scale, acc)
        return te.sum(qs * tirx.Cast(acc, k[bi, hi // group, j, rd]), axis=rd)

    s = te.compute(full, score, name="scores")
    if softcap:  # Gemma 2's logit soft-cap, on the scaled scores before the bias
        s0 = s
        s = te.compute(full, lambda *i: const(softcap, acc) * tirx.tanh(s0[i] / const(softcap, acc)), name="capped")
    if bs is not None:
        s = te.compute(full, lambda *i: s[i] + tirx.Cast(acc, bs[i]), name="biased")

    def keep(bi: Any, hi: Any, i: Any, j: Any) -> PrimExpr:
        kp = tirx.const(True, "bool")
        if mk is not None:
            kp = kp & mk[bi, hi, i, j]
        if causal:
            kp = kp & (j <= i)
        return kp

    ninf = const(-math.inf, acc)
    masked = te.compute(full, lambda *i: tirx.Select(keep(*i), s[i], ninf), name="masked")
    rj = te.reduce_axis((0, sk), "j")
    mx = te.compute([b, h, sq], lambda bi, hi, i: te.max(masked[bi, hi, i, rj], axis=rj), name="rowmax")
    m0 = te.compute([b, h, sq], lambda *i: tirx.Select(mx[i] == ninf, const(0.0, acc), mx[i]), name="rowmax0")
    e = te.compute(full, lambda bi, hi, i, j: tirx.Select(keep(bi, hi, i, j), tirx.exp(s[bi, hi, i, j] - m0[bi, hi, i]),
                                                           const(0.0, acc)), name="expd")
    rj2 = te.reduce_axis((0, sk), "j2")
    den = te.compute([b, h, sq], lambda bi, hi, i: te.sum(e[bi, hi, i, rj2], axis=rj2), name="den")
    zero = const(0.0, acc)
    p = te.compute(full, lambda bi, hi, i, j: tirx.Select(den[bi, hi, i] == zero, zero,
                                                           e[bi, hi, i, j] / den[bi, hi, i]), name="probs")
    rj3 = te.reduce_axis((0, sk), "j3")
    out = te.compute([b, h, sq, dv], lambda bi, hi, i, c: te.sum(
        p[bi, hi, i, rj3] * tirx.Cast(acc, v[bi, hi // group, rj3, c]), axis=rj3), name="pv")
    return topi.cast(out, q.dtype) if str(q.dtype) != acc else out


# --------------------------------------------------------------------------- float8 and bit casts


def round_to_float8(x: PrimExpr, nmant: int, minexp: int, maxval: float, overflow: str, negzero: bool,
                    saturate: bool) -> PrimExpr:
    """``x`` (float32 or float64) rounded to a float8 type's value, as a value of ``x``'s type: round
    to nearest even at the type's precision (``nmant`` fraction bits, smallest normal exponent
    ``minexp``, subnormals below it); beyond ``maxval`` ``overflow`` (``"inf"`` or ``"nan"``), or
    ``maxval`` with ``saturate`` (infinities too); NaN stays NaN; ``negzero=False`` (the FNUZ types)
    turns -0 into +0.  Exact: scaling by a power of two and ``nearbyint`` do not round twice."""
    dt = dtype_of(x)
    wide = dt == "float64"
    it, ebits, mbits, bias = ("int64", 11, 52, 1023) if wide else ("int32", 8, 23, 127)
    c = lambda v: const(v, dt)  # noqa: E731
    ic = lambda v: tirx.const(v, it)  # noqa: E731
    a = tirx.abs(x)
    e = tirx.bitwise_and(tirx.shift_right(tirx.reinterpret(it, a), ic(mbits)), ic((1 << ebits) - 1)) - ic(bias)
    e = tirx.max(e, ic(minexp))  # below the normal range the quantum is fixed (subnormals)
    # the quantum 2**(e - nmant) as a float of x's type, built from its exponent field
    q = tirx.reinterpret(dt, tirx.shift_left(e - ic(nmant) + ic(bias), ic(mbits)))
    r = tirx.nearbyint(a / q) * q
    over = r > c(maxval)
    big = c(maxval) if saturate else c(math.inf if overflow == "inf" else math.nan)
    r = tirx.Select(over, big, r)
    signed = tirx.Select(x < c(0.0), c(0.0) - r, r)
    if negzero:
        signed = tirx.Select((r == c(0.0)) & (tirx.reinterpret(it, x) < ic(0)), c(-0.0), signed)
    return tirx.Select(tirx.isnan(x), x, signed)


def bitcast(x: Tensor, to: str, out_shape: Sequence[int]) -> Tensor:
    """XLA BitcastConvertType: reinterpret ``x``'s bits as ``to``; a narrower ``to`` splits each
    element into a trailing dim (least significant part first), a wider one packs the last dim."""
    src = str(x.dtype)
    a, b = bits_of(src), bits_of(to)
    ua, ub = f"uint{a}", f"uint{b}"
    if a == b:
        return te.compute(ints(x.shape), lambda *i: tirx.reinterpret(to, x[i]), name="bitcast")
    if a > b:
        mask = tirx.const((1 << b) - 1, ua)

        def split(*i: Any) -> PrimExpr:
            word = tirx.reinterpret(ua, x[i[:-1]]) if src != ua else x[i[:-1]]
            part = tirx.bitwise_and(tirx.shift_right(word, tirx.Cast(ua, i[-1]) * tirx.const(b, ua)), mask)
            return tirx.reinterpret(to, tirx.Cast(ub, part))
        return te.compute(ints(out_shape), split, name="bitcast")
    ratio = b // a

    def pack(*i: Any) -> PrimExpr:
        word = tirx.const(0, ub)
        for k in range(ratio):
            part = x[(*i, k)]
            part = tirx.reinterpret(ua, part) if src != ua else part
            word = tirx.bitwise_or(word, tirx.shift_left(tirx.Cast(ub, part), tirx.const(k * a, ub)))
        return tirx.reinterpret(to, word)
    return te.compute(ints(out_shape), pack, name="bitcast")
