"""torch.export converters: ``frexp``, ``embedding_bag``, ``as_strided_scatter``,
``grid_sampler_3d``, ``histogram`` / ``histogramdd``, and the Hermite/Laguerre/Legendre
polynomials of a degree given as a constant tensor.

Everything decomposes into existing IR ops (so every target runs it with no lowering work):

* ``frexp``: the exponent field read through ``ik.bitcast`` and integer shifts/masks; the
  mantissa is the input's bits with the exponent field replaced by that of 0.5.  Subnormals
  are normalized in integers (``ik.clz`` of the fraction gives the shift), so targets that
  flush subnormal floats still read them; zeros, infinities and NaN keep the input as the
  mantissa with exponent 0, as torch (``std::frexp``) does;
* ``embedding_bag``: one ``ik.gather`` of the rows, a bag-membership mask built from the run-time
  offsets (``offsets[b] <= j < offsets[b + 1]``, the last bag running to the end unless
  ``include_last_offset``), entries equal to ``padding_idx`` masked out, and a masked
  sum/mean/max over the indices (empty bags give 0; a max keeps a NaN only from a bag's first
  row, as torch's CPU kernel, which replaces the first row by any later greater value);
* ``as_strided_scatter``: the strided positions computed at import time (static sizes and
  strides, as ``as_strided``), then one ``ik.scatter_elements`` into the flattened input (a
  view that writes an element twice is refused, as torch refuses it);
* ``grid_sampler_3d``: trilinear (8 taps) or nearest (``round`` half to even, as torch's
  ``nearbyint``) sampling of ``(N, C, D, H, W)``, with torch's unnormalization, padding modes
  (zeros / border / reflection: ``reflect_coordinates`` then a clip) and ``align_corners``;
  every tap is an ``ik.gather_elements`` over the flattened volume, out-of-bounds taps count 0
  (so do NaN and infinite coordinates with zeros padding; the clip sends NaN to the last voxel);
* ``histogram`` / ``histogramdd`` (bin counts or bin-edge tensors, ``range``, ``weight``,
  ``density``): the edges as torch computes them (``linspace`` of the range, or of the data's
  min/max widened by 0.5 when equal, ``[0, 1]`` for no data), a point's bin per dim as the
  count of interior edges at or below it (the last bin includes the right edge, values outside
  or NaN are dropped), and one ``ik.scatter_elements`` add into the flat histogram.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from irkit.frontends.torch_cx import ConvertContext, Unsupported
from irkit.frontends.torch_ops import _opname, _require, _static, converter
from irkit.ir.core import Value
from irkit.ir.types import DType, dim_prod

I64 = DType.i64


def _and(cx: ConvertContext, x: Value, y: Value) -> Value:
    return cx.b.create("ik.and", [x, y]).results[0]


def _or(cx: ConvertContext, x: Value, y: Value) -> Value:
    return cx.b.create("ik.or", [x, y]).results[0]


def _i(cx: ConvertContext, v: int, dt: DType = I64) -> Value:
    return cx.tensor(int(v), dt)


def _f(cx: ConvertContext, v: float, dt: DType) -> Value:
    return cx.tensor(float(v), dt)


def _column(cx: ConvertContext, v: Value, i: int) -> Value:
    """``v[..., i]`` with the last dim dropped."""
    shape = v.shape
    r = len(shape)
    part = cx.b.slice(v, start=(0,) * (r - 1) + (i,), limit=tuple(shape[:-1]) + (i + 1,))
    return cx.reshape(part, shape[:-1])


# ---------------------------------------------------------------------------
# frexp

# (int type, exponent bits, fraction bits)
_FREXP = {DType.f32: (DType.i32, 8, 23), DType.f64: (DType.i64, 11, 52)}


def _signed(v: int, bits: int) -> int:
    """``v`` (an unsigned bit pattern of ``bits`` bits) as the signed integer of the same bits."""
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


@converter("frexp", "prims.frexp.default")
def _frexp(cx: ConvertContext, a: dict) -> Any:
    """``x = mantissa * 2^exponent`` with ``0.5 <= |mantissa| < 1`` (see the module docstring).
    All in integer arithmetic on the bits, so a target that flushes subnormal floats to zero
    (XLA on CPU) still reads them exactly."""
    x = _require(a["self"], "input")
    dt = x.dtype
    if not dt.is_float:
        raise Unsupported(f"frexp of a {dt} tensor (torch takes floating point only)")
    work = dt if dt in _FREXP else DType.f32  # f16/bf16: exact in f32
    it, ebits, fbits = _FREXP[work]
    width = 1 + ebits + fbits
    xw = cx.cast(x, work)
    bits = cx.b.bitcast(xw, dtype=it)
    emask = (1 << ebits) - 1
    field = cx.b.bitwise_and(cx.b.shift_right_logical(bits, _i(cx, fbits, it)), _i(cx, emask, it))
    frac = cx.b.bitwise_and(bits, _i(cx, (1 << fbits) - 1, it))
    sign = cx.b.bitwise_and(bits, _i(cx, _signed(1 << (width - 1), width), it))
    half = _i(cx, (emask >> 1) - 1, it)  # the exponent field of 0.5
    # normal numbers: keep the fraction, exponent field - (bias - 1)
    e_norm = cx.b.sub(field, half)
    # subnormals: the leading fraction bit at p = width - 1 - clz moves to the implicit bit
    lz = cx.b.clz(frac)
    e_sub = cx.b.sub(_i(cx, width - ((emask >> 1) + fbits - 1), it), lz)  # p + 1 - (bias + fbits - 1)
    frac_sub = cx.b.bitwise_and(cx.b.shift_left(frac, cx.b.sub(lz, _i(cx, width - 1 - fbits, it))),
                                _i(cx, (1 << fbits) - 1, it))
    sub = cx.b.eq(field, _i(cx, 0, it))
    e = cx.b.where(sub, e_sub, e_norm)
    f = cx.b.where(sub, frac_sub, frac)
    mant = cx.b.bitcast(cx.b.bitwise_or(cx.b.bitwise_or(sign, cx.b.shift_left(half, _i(cx, fbits, it))), f),
                        dtype=work)
    zero = _and(cx, sub, cx.b.eq(frac, _i(cx, 0, it)))
    special = _or(cx, zero, cx.b.eq(field, _i(cx, emask, it)))  # +-0, +-inf, NaN: x and 0
    mant = cx.b.where(special, xw, mant)
    e = cx.b.where(special, _i(cx, 0, it), e)
    return cx.cast(mant, dt), cx.cast(e, cx.out_type(1).dtype)


# ---------------------------------------------------------------------------
# embedding_bag


def _used_results(cx: ConvertContext) -> set[int]:
    """The indices of the node's results that some later node reads (through ``getitem``)."""
    out: set[int] = set()
    for u in cx.node.users:
        if getattr(u, "op", None) == "call_function" and "getitem" in str(u.target) and len(u.args) > 1:
            if u.users:
                out.add(int(u.args[1]))
        else:
            out.update(range(4))
    return out

_BAG_MODES = {0: "sum", 1: "mean", 2: "max"}


def _refuse_bookkeeping(cx: ConvertContext) -> None:
    if _used_results(cx) & {1, 2, 3}:
        raise Unsupported("embedding_bag's offset2bag, bag_size and max_indices results are used (only the "
                          "bags convert: those three are torch's bookkeeping for the backward pass)")


@converter("embedding_bag", "_embedding_bag", "_embedding_bag_forward_only")
def _embedding_bag(cx: ConvertContext, a: dict) -> Any:
    """``embedding_bag`` (sum / mean / max) as a gather and a masked reduction over the bags;
    only the first result (the bags) converts, the other three are torch's bookkeeping."""
    w = _require(a["weight"], "weight")
    idx = cx.cast(_require(a["indices"], "indices"), I64)
    offs = cx.cast(_require(a["offsets"], "offsets"), I64)
    mode = _BAG_MODES.get(int(a.get("mode", 0)))
    if mode is None:
        raise Unsupported(f"embedding_bag mode {a.get('mode')}")
    if idx.type.rank != 1 or offs.type.rank != 1:
        raise Unsupported("embedding_bag with indices or offsets not 1-D (torch flattens 2-D indices first)")
    psw = a.get("per_sample_weights")
    if psw is not None and mode != "sum":
        raise Unsupported(f"embedding_bag per_sample_weights with mode '{mode}' (torch allows only 'sum')")
    pad = a.get("padding_idx")
    nrows = _static(w.shape[0], "embedding_bag weight rows")
    if pad is None or (int(pad) < 0 and _opname(cx).startswith("_")):
        pad = -1  # none (``_embedding_bag*`` get it wrapped already, -1 for none)
    else:
        pad = int(pad) + (nrows if int(pad) < 0 else 0)  # embedding_bag: negative counts from the end
    n = _static(idx.shape[0], "embedding_bag index count")
    nb = _static(offs.shape[0], "embedding_bag offsets count")
    last = bool(a.get("include_last_offset", False))
    bags = nb - 1 if last else nb
    if bags < 0:
        raise Unsupported("embedding_bag with include_last_offset and no offsets")
    dt = w.dtype
    d = w.shape[1]
    _refuse_bookkeeping(cx)
    if n == 0 or bags == 0:  # every bag empty: zeros
        return (cx.splat(0.0, cx.out_type(0).dtype, cx.out_type(0).shape), None, None, None)
    starts = cx.b.slice(offs, start=(0,), limit=(bags,)) if bags != nb else offs
    tail = cx.b.constant(np.array([n], dtype=np.int64))
    # Bag b ends where bag b + 1 starts, the last one at the end of the indices.  With
    # include_last_offset the last bag's sum stops at offsets[-1] (the CSR end, normally n);
    # torch's CPU kernels count a mean's divisor and take a max up to n regardless.
    ends = cx.b.concat(cx.b.slice(offs, start=(1,), limit=(bags,)), tail, axis=0) if bags > 1 else tail
    ends_sum = cx.b.slice(offs, start=(1,), limit=(nb,)) if last else ends
    j = cx.b.iota(shape=(1, n), axis=1, dtype=I64)
    valid = cx.reshape(cx.b.ne(idx, _i(cx, pad)), (1, n)) if pad >= 0 else None

    def members(end: Value) -> Value:
        m = _and(cx, cx.b.le(cx.reshape(starts, (bags, 1)), j), cx.b.lt(j, cx.reshape(end, (bags, 1))))
        return _and(cx, m, valid) if valid is not None else m

    member = members(ends)
    member_sum = members(ends_sum) if last else member
    rows = cx.b.gather(w, idx, axis=0)  # (n, d)
    if psw is not None:
        rows = cx.b.mul(rows, cx.reshape(cx.cast(_require(psw, "per_sample_weights"), dt), (n, 1)))
    rows3 = cx.reshape(rows, (1, n, d))
    count = cx.b.reduce_sum(cx.cast(member, dt), axes=(1,), keepdims=True)  # (bags, 1)
    zero = _f(cx, 0.0, dt)
    if mode == "max":
        # torch keeps a bag's first row and replaces it by any later greater value: a NaN in the
        # first row stays, a later NaN is never taken.
        m3 = cx.reshape(member, (bags, n, 1))
        ninf = _f(cx, -math.inf, dt)
        finite_rows = cx.b.where(cx.b.isnan(rows3), ninf, rows3)
        out = cx.b.reduce_max(cx.b.where(m3, finite_rows, ninf), axes=(1,), keepdims=False)
        first = cx.b.reduce_min(cx.b.where(member, j, _i(cx, n - 1)), axes=(1,), keepdims=False)
        first_rows = cx.b.gather(rows, first, axis=0)  # (bags, d)
        out = cx.b.where(cx.b.isnan(first_rows), first_rows, out)
        out = cx.b.where(cx.b.eq(count, zero), zero, out)
    else:
        m3 = cx.reshape(member_sum, (bags, n, 1))
        out = cx.b.reduce_sum(cx.b.where(m3, rows3, zero), axes=(1,), keepdims=False)
        if mode == "mean":
            out = cx.b.div(out, cx.b.max(count, _f(cx, 1.0, dt)))
    # The other three are unread (torch.export keeps their getitem nodes): nothing is built for them.
    return (cx.cast(out, cx.out_type(0).dtype), None, None, None)


# ---------------------------------------------------------------------------
# as_strided_scatter


@converter("as_strided_scatter", "prims.as_strided_scatter.default")
def _as_strided_scatter(cx: ConvertContext, a: dict) -> Any:
    """``src`` written into the strided view ``(size, stride, storage_offset)`` of a copy of the
    (contiguous) input: constant flat positions and one ``ik.scatter_elements``."""
    x = _require(a.get("self", a.get("input")), "input")
    src = cx.cast(_require(a["src"], "src"), x.dtype)
    size = [_static(cx.dim(s), "as_strided_scatter size") for s in a["size"]]
    stride = [int(s) for s in a["stride"]]
    off = int(a.get("storage_offset") or 0)
    pos = np.full(size, off, dtype=np.int64) if size else np.array(off, dtype=np.int64)
    for i, (k, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[i] = k
        pos = pos + (np.arange(k, dtype=np.int64) * st).reshape(shape)
    total = _static(dim_prod(x.shape), "as_strided_scatter input size")
    pos = pos.reshape(-1)
    if pos.size == 0:
        return x
    if pos.min() < 0 or pos.max() >= total:
        raise Unsupported(f"as_strided_scatter view (size {size}, stride {stride}, offset {off}) reaches "
                          f"outside the input's {total} elements")
    if tuple(src.shape) != tuple(size):
        raise Unsupported(f"as_strided_scatter src of shape {tuple(src.shape)} for a view of size {tuple(size)}")
    if np.unique(pos).size != pos.size:
        raise Unsupported(f"as_strided_scatter view (size {size}, stride {stride}) writes some elements more than "
                          "once (torch refuses such a write as well)")
    flat_src = cx.reshape(src, (pos.size,))
    flat = cx.reshape(x, (total,))
    out = cx.b.scatter_elements(flat, cx.b.constant(pos), flat_src, axis=0, reduction="none")
    return cx.reshape(out, x.shape)


# ---------------------------------------------------------------------------
# grid_sampler_3d


def _reflect(cx: ConvertContext, c: Value, twice_low: int, twice_high: int) -> Value:
    """torch's ``reflect_coordinates``: ``c`` folded into ``[twice_low / 2, twice_high / 2]``."""
    dt = c.dtype
    if twice_low == twice_high:
        return cx.b.mul(c, _f(cx, 0.0, dt))
    lo = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    v = cx.b.abs(cx.b.sub(c, _f(cx, lo, dt)))
    extra = cx.b.rem(v, _f(cx, span, dt))
    flips = cx.b.floor(cx.b.div(v, _f(cx, span, dt)))
    even = cx.b.eq(cx.b.rem(flips, _f(cx, 2.0, dt)), _f(cx, 0.0, dt))
    return cx.b.where(even, cx.b.add(extra, _f(cx, lo, dt)), cx.b.add(cx.b.sub(_f(cx, span, dt), extra),
                                                                      _f(cx, lo, dt)))


def _clip(cx: ConvertContext, c: Value, size: int) -> Value:
    """torch's ``clip_coordinates``, ``std::min(size - 1, std::max(c, 0))``: NaN becomes ``size - 1``."""
    dt = c.dtype
    lo, hi = _f(cx, 0.0, dt), _f(cx, size - 1.0, dt)
    c = cx.b.where(cx.b.lt(c, lo), lo, c)
    return cx.b.where(cx.b.lt(c, hi), c, hi)


@converter("grid_sampler_3d")
def _grid_sampler_3d(cx: ConvertContext, a: dict) -> Any:
    """``grid_sample`` of a 5-D input (see the module docstring)."""
    x = _require(a["input"], "input")
    grid = _require(a["grid"], "grid")
    interp = int(a["interpolation_mode"])
    padding = int(a["padding_mode"])
    align = bool(a["align_corners"])
    if interp not in (0, 1):
        raise Unsupported("grid_sampler_3d with bicubic interpolation (torch supports it on 4-D input only)")
    if padding not in (0, 1, 2):
        raise Unsupported(f"grid_sampler_3d padding_mode {padding}")
    if x.type.rank != 5 or grid.type.rank != 5:
        raise Unsupported("grid_sampler_3d expects a 5-D input and a 5-D grid")
    nb, ch = x.shape[0], x.shape[1]
    sp = [_static(s, "grid_sampler_3d input size") for s in x.shape[2:]]
    out_sp = [_static(s, "grid_sampler_3d grid size") for s in grid.shape[1:4]]
    p = int(np.prod(out_sp))
    dt = x.dtype
    f = dt if dt.is_float else DType.f32
    g = cx.cast(grid, f)
    per_dim: list[list[tuple[Value, Value | None, Value]]] = []
    for i, size in enumerate(sp):  # D, H, W are grid components 2, 1, 0
        comp = _column(cx, g, 2 - i)
        one = _f(cx, 1.0, f)
        if align:
            c = cx.b.mul(cx.b.add(comp, one), _f(cx, (size - 1) / 2.0, f))
        else:
            c = cx.b.div(cx.b.sub(cx.b.mul(cx.b.add(comp, one), _f(cx, float(size), f)), one), _f(cx, 2.0, f))
        if padding == 1:
            c = _clip(cx, c, size)
        elif padding == 2:
            c = _reflect(cx, c, 0, 2 * (size - 1)) if align else _reflect(cx, c, -1, 2 * size - 1)
            c = _clip(cx, c, size)
        if interp == 1:
            taps: list[tuple[Value, Value | None]] = [(cx.b.round(c), None)]
        else:
            c0 = cx.b.floor(c)
            t = cx.b.sub(c, c0)
            taps = [(c0, cx.b.sub(one, t)), (cx.b.add(c0, one), t)]
        dim_taps = []
        for pos, wt in taps:
            ok = _and(cx, cx.b.ge(pos, _f(cx, 0.0, f)), cx.b.le(pos, _f(cx, size - 1.0, f)))  # NaN: False
            pos = cx.b.where(ok, pos, _f(cx, 0.0, f))
            dim_taps.append((cx.cast(pos, I64), wt, ok))
        per_dim.append(dim_taps)
    strides = [sp[1] * sp[2], sp[2], 1]
    xv = cx.reshape(x, (nb, ch, sp[0] * sp[1] * sp[2]))
    import itertools

    acc: Value | None = None
    for combo in itertools.product(*per_dim):
        flat: Value | None = None
        weight: Value | None = None
        valid: Value | None = None
        for (idx, wt, ok), st in zip(combo, strides):
            term = cx.b.mul(idx, _i(cx, st)) if st != 1 else idx
            flat = term if flat is None else cx.b.add(flat, term)
            if wt is not None:
                weight = wt if weight is None else cx.b.mul(weight, wt)
            valid = ok if valid is None else _and(cx, valid, ok)
        assert flat is not None and valid is not None
        flat = cx.broadcast(cx.reshape(flat, (nb, 1, p)), (nb, ch, p))
        val = cx.cast(cx.b.gather_elements(xv, flat, axis=2), f)
        if weight is not None:
            val = cx.b.mul(val, cx.reshape(weight, (nb, 1, p)))
        # an out-of-bounds tap adds nothing, whatever its weight (inf or NaN coordinates)
        val = cx.b.where(cx.reshape(valid, (nb, 1, p)), val, _f(cx, 0.0, f))
        acc = val if acc is None else cx.b.add(acc, val)
    assert acc is not None
    return cx.cast(cx.reshape(acc, (nb, ch, *out_sp)), cx.out_dtype)


# ---------------------------------------------------------------------------
# histogram, histogramdd


def _linspace_edges(cx: ConvertContext, lo: Value, hi: Value, bins: int, dt: DType) -> Value:
    """torch's ``linspace(lo, hi, bins + 1)``: from ``lo`` up to the middle, from ``hi`` down after."""
    step = cx.b.div(cx.b.sub(hi, lo), _f(cx, float(bins), dt))
    i = cx.b.iota(shape=(bins + 1,), axis=0, dtype=dt)
    up = cx.b.add(lo, cx.b.mul(step, i))
    down = cx.b.sub(hi, cx.b.mul(step, cx.b.sub(_f(cx, float(bins), dt), i)))
    return cx.b.where(cx.b.lt(i, _f(cx, float((bins + 1) // 2), dt)), up, down)


def _data_range(cx: ConvertContext, col: Value, dt: DType) -> tuple[Value, Value]:
    """The data's min and max (``[0, 1]`` for no data), widened by 0.5 each way when equal."""
    m = _static(col.shape[0], "histogram input size")
    if m == 0:
        return _f(cx, 0.0, dt), _f(cx, 1.0, dt)
    lo = cx.b.reduce_min(col, axes=(0,), keepdims=False)
    hi = cx.b.reduce_max(col, axes=(0,), keepdims=False)
    same = cx.b.eq(lo, hi)
    half = _f(cx, 0.5, dt)
    return cx.b.where(same, cx.b.sub(lo, half), lo), cx.b.where(same, cx.b.add(hi, half), hi)


def _histogram_core(cx: ConvertContext, pts: Value, bins: Sequence[int | Value], rng: Sequence[float] | None,
                    weight: Value | None, density: bool) -> tuple[Value, list[Value]]:
    """``pts`` (M, D); per dim a bin count or an edge tensor: the (bins...) histogram and the edges."""
    dt = pts.dtype
    m, dims = _static(pts.shape[0], "histogram input size"), _static(pts.shape[1], "histogram dims")
    if len(bins) != dims:
        raise Unsupported(f"histogramdd with {len(bins)} bin specifications for {dims}-dimensional points")
    if rng is not None and len(rng) != 2 * dims:
        raise Unsupported(f"histogramdd range of {len(rng)} numbers for {dims} dims (expected {2 * dims})")
    edges: list[Value] = []
    counts: list[int] = []
    flat: Value | None = None
    inside: Value | None = None
    for d in range(dims):
        col = _column(cx, pts, d)
        spec = bins[d]
        if isinstance(spec, Value):
            if spec.type.rank != 1:
                raise Unsupported("histogram bin edges must be 1-D")
            e = cx.cast(spec, dt)
            nb = _static(e.shape[0], "histogram bin edge count") - 1
            if nb < 1:
                raise Unsupported("histogram with fewer than 2 bin edges")
            lo = cx.reshape(cx.b.slice(e, start=(0,), limit=(1,)), ())
            hi = cx.reshape(cx.b.slice(e, start=(nb,), limit=(nb + 1,)), ())
        else:
            nb = int(spec)
            if nb < 1:
                raise Unsupported(f"histogram with {nb} bins")
            if rng is not None:
                lo_f, hi_f = float(rng[2 * d]), float(rng[2 * d + 1])
                if lo_f == hi_f:
                    lo_f, hi_f = lo_f - 0.5, hi_f + 0.5
                lo, hi = _f(cx, lo_f, dt), _f(cx, hi_f, dt)
            else:
                lo, hi = _data_range(cx, col, dt)
            e = _linspace_edges(cx, lo, hi, nb, dt)
        edges.append(e)
        counts.append(nb)
        ok = _and(cx, cx.b.ge(col, lo), cx.b.le(col, hi))
        if nb > 1:
            interior = cx.reshape(cx.b.slice(e, start=(1,), limit=(nb,)), (1, nb - 1))
            k = cx.b.reduce_sum(cx.cast(cx.b.le(interior, cx.reshape(col, (m, 1))), I64), axes=(1,), keepdims=False)
        else:
            k = cx.splat(0, I64, (m,))
        flat = k if flat is None else cx.b.add(cx.b.mul(flat, _i(cx, nb)), k)
        inside = ok if inside is None else _and(cx, inside, ok)
    assert flat is not None and inside is not None
    total = int(np.prod(counts))
    target = cx.b.where(inside, flat, _i(cx, total))  # dropped points land in a spare slot
    w = cx.cast(weight, dt) if weight is not None else cx.splat(1.0, dt, (m,))
    hist = cx.b.scatter_elements(cx.splat(0.0, dt, (total + 1,)), target, cx.reshape(w, (m,)), axis=0,
                                 reduction="add")
    hist = cx.reshape(cx.b.slice(hist, start=(0,), limit=(total,)), tuple(counts))
    if density:
        hist = cx.b.div(hist, cx.b.reduce_sum(hist, axes=(), keepdims=False))
        for d, (e, nb) in enumerate(zip(edges, counts)):
            width = cx.b.sub(cx.b.slice(e, start=(1,), limit=(nb + 1,)), cx.b.slice(e, start=(0,), limit=(nb,)))
            shape = [1] * dims
            shape[d] = nb
            hist = cx.b.div(hist, cx.reshape(width, tuple(shape)))
    return hist, edges


def _float_input(cx: ConvertContext, a: dict) -> Value:
    x = _require(a["self"], "input")
    if not x.dtype.is_float:
        raise Unsupported(f"histogram of a {x.dtype} tensor (torch takes floating point only)")
    return x


@converter("histogram")
def _histogram(cx: ConvertContext, a: dict) -> Any:
    """``histogram`` of the flattened input: ``bins`` a count (with an optional ``range``, else the
    data's min/max) or an edge tensor."""
    x = _float_input(cx, a)
    m = dim_prod(x.shape)
    pts = cx.reshape(x, (m, 1))
    bins = a.get("bins", 100)
    weight = a.get("weight")
    wv = cx.reshape(_require(weight, "weight"), (m,)) if weight is not None else None
    hist, edges = _histogram_core(cx, pts, [bins if isinstance(bins, Value) else int(bins)], a.get("range"), wv,
                                  bool(a.get("density", False)))
    return hist, edges[0]


@converter("histogramdd", "histogramdd.int_bins", "histogramdd.TensorList_bins")
def _histogramdd(cx: ConvertContext, a: dict) -> Any:
    """``histogramdd`` of ``(..., D)`` points: per-dim bin counts or edge tensors."""
    x = _float_input(cx, a)
    dims = _static(x.shape[-1], "histogramdd point dims")
    m = dim_prod(x.shape[:-1])
    pts = cx.reshape(x, (m, dims))
    bins = a["bins"]
    specs: list[int | Value] = [int(bins)] * dims if isinstance(bins, int) else \
        [b if isinstance(b, Value) else int(b) for b in bins]
    weight = a.get("weight")
    wv = cx.reshape(_require(weight, "weight"), (m,)) if weight is not None else None
    hist, edges = _histogram_core(cx, pts, specs, a.get("range"), wv, bool(a.get("density", False)))
    return hist, edges


# ---------------------------------------------------------------------------
# Hermite / Laguerre / Legendre polynomials of a constant tensor degree

POLY_MAX_DEGREE = 1024


def _constant_array(v: Value) -> np.ndarray | None:
    """The values of ``v`` when an ``ik.constant`` (a lifted constant, a weight) produces it."""
    op = v.producer
    if op is None or op.name != "ik.constant":
        return None
    return np.asarray(op.attrs["value"].array)


def _poly_step(cx: ConvertContext, kind: str, k: int, x: Value, p0: Value, p1: Value) -> Value:
    """``p_{k+1}`` from ``p_{k-1}``, ``p_k`` (float64)."""
    c = lambda v: _f(cx, v, DType.f64)  # noqa: E731
    if kind == "special_hermite_polynomial_h":
        return cx.b.sub(cx.b.mul(cx.b.mul(x, c(2.0)), p1), cx.b.mul(p0, c(2.0 * k)))
    if kind == "special_hermite_polynomial_he":
        return cx.b.sub(cx.b.mul(x, p1), cx.b.mul(p0, c(float(k))))
    if kind == "special_laguerre_polynomial_l":
        return cx.b.div(cx.b.sub(cx.b.mul(cx.b.sub(c(2.0 * k + 1), x), p1), cx.b.mul(p0, c(float(k)))), c(k + 1.0))
    return cx.b.div(cx.b.sub(cx.b.mul(cx.b.mul(x, c(2.0 * k + 1)), p1), cx.b.mul(p0, c(float(k)))), c(k + 1.0))


def polynomial_tensor_degree(cx: ConvertContext, kind: str, x: Value, n: Value) -> Value:
    """Hermite ``H_n``/``He_n``, Laguerre ``L_n`` or Legendre ``P_n`` (``kind``: the ATen name) of
    ``x`` (float64, the result's shape) for a degree tensor ``n`` whose values are known at
    import time (a constant): the three-term recurrence unrolled up to the largest degree,
    each element taking the step of its own degree (``trunc(n)``, 0 below degree 0, as torch).
    A degree computed at run time is refused: the recurrence's length would depend on the data."""
    vals = _constant_array(n)
    if vals is None:
        raise Unsupported(f"{kind} with the degree n as a tensor computed at run time (the recurrence's "
                          "length would depend on the data); pass n as a Python number or a constant")
    if vals.size and not np.all(np.isfinite(vals.astype(np.float64))):
        raise Unsupported(f"{kind} with a non-finite degree")
    deg = np.trunc(vals.astype(np.float64))
    top = int(deg.max()) if deg.size else 0
    if top > POLY_MAX_DEGREE:
        raise Unsupported(f"{kind} of degree {top} (at most {POLY_MAX_DEGREE} is unrolled)")
    shape = cx.out_shape
    f64 = DType.f64
    nv = cx.broadcast(cx.b.constant(deg.astype(np.float64)), shape)
    one = cx.splat(1.0, f64, shape)
    if kind == "special_hermite_polynomial_h":
        p1 = cx.b.mul(x, _f(cx, 2.0, f64))
    elif kind == "special_laguerre_polynomial_l":
        p1 = cx.b.sub(_f(cx, 1.0, f64), x)
    else:
        p1 = x
    p0 = one
    at = lambda k: cx.b.eq(nv, _f(cx, float(k), f64))  # noqa: E731
    out = cx.b.where(at(0), one, cx.splat(0.0, f64, shape))
    if top >= 1:
        out = cx.b.where(at(1), p1, out)
    for k in range(1, top):
        p0, p1 = p1, _poly_step(cx, kind, k, x, p0, p1)
        out = cx.b.where(at(k + 1), p1, out)
    return out


__all__ = ["POLY_MAX_DEGREE", "polynomial_tensor_degree"]
