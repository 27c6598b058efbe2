"""ONNX converters for convolution, pooling, resizing and the normalisations around them.

Design note: N-d convolution and transposed convolution become ``ik.conv``
(plain 2-D Conv keeps ``ik.conv2d`` so fusion and layout passes still see it);
ConvTranspose is a convolution with input (lhs) dilation = stride, padding
``dil*(k-1) - pad`` and the kernel flipped with in/out channels swapped.  Every
pooling op is an ``ik.reduce_window`` over all dims (window 1 on N and C);
``ceil_mode`` is extra after-padding and an average divides by a count that is
itself a ``reduce_window`` of ones, so padding is counted exactly as ONNX says.

Resize is separable: along each resized axis the output is a fixed linear map
of the input.  We let the ONNX reference implementation (``onnx.reference``)
compute that map, by resizing the identity matrix along one axis with the
node's own attributes — so every mode, coordinate transformation, cubic
coefficient, antialias and extrapolation rule is ONNX's, not ours.  Nearest
becomes a gather with constant indices (exact for every dtype); linear and
cubic become a contraction with the constant weight matrix.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from irkit.frontends.common import FrontendError
from irkit.frontends.onnx_ops import Emitter, Node, OnnxValue, Unsupported, _axis, converter
from irkit.ir.core import Value
from irkit.ir.types import Dim, DType

# ---------------------------------------------------------------------------
# Windows: pads, auto_pad, ceil_mode


def _static(node: Node, dims: Sequence[Dim], what: str) -> list[int]:
    out = [d for d in dims if isinstance(d, int)]
    if len(out) != len(dims):
        raise Unsupported(f"{node.op_type} over dynamic {what}")
    return out


def _window_pads(node: Node, sp: Sequence[int], k: Sequence[int], strides: Sequence[int],
                 dil: Sequence[int]) -> list[int]:
    """Explicit pads (befores then afters) from ``pads`` / ``auto_pad``."""
    nd = len(sp)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        return [int(p) for p in node.attr("pads", [0] * (2 * nd))]
    if auto == "VALID":
        return [0] * (2 * nd)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise FrontendError(f"node '{node.name}' ({node.op_type}): unknown auto_pad '{auto}'")
    pads = [0] * (2 * nd)
    for i in range(nd):
        out = -(-sp[i] // strides[i])
        total = max((out - 1) * strides[i] + (k[i] - 1) * dil[i] + 1 - sp[i], 0)
        small = total // 2
        pads[i], pads[i + nd] = (small, total - small) if auto == "SAME_UPPER" else (total - small, small)
    return pads


def _ceil_extra(sp: Sequence[int], k: Sequence[int], strides: Sequence[int], dil: Sequence[int],
                pads: Sequence[int]) -> list[int]:
    """After-padding that turns floor into ceil output sizes (the last window starts inside input + left pad)."""
    nd = len(sp)
    extra = []
    for i in range(nd):
        span = sp[i] + pads[i] + pads[i + nd] - dil[i] * (k[i] - 1) - 1
        out = -(-span // strides[i]) + 1
        if (out - 1) * strides[i] >= sp[i] + pads[i]:
            out -= 1
        extra.append(max((out - 1) * strides[i] - span, 0))
    return extra


def _pool_geometry(node: Node, x: OnnxValue) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """(kernel, strides, dilations, pads, ceil extra) of a pooling node over x's spatial dims."""
    nd = x.rank - 2
    if nd < 1:
        raise FrontendError(f"node '{node.name}' ({node.op_type}): input must be N C spatial...")
    sp = _static(node, x.shape[2:], "spatial dims")
    k = [int(v) for v in node.attr("kernel_shape", [])]
    if len(k) != nd:
        raise FrontendError(f"node '{node.name}' ({node.op_type}): kernel_shape {k} does not fit {nd} spatial dims")
    strides = [int(v) for v in node.attr("strides", [1] * nd)]
    dil = [int(v) for v in node.attr("dilations", [1] * nd)]
    pads = _window_pads(node, sp, k, strides, dil)
    extra = _ceil_extra(sp, k, strides, dil, pads) if node.attr("ceil_mode", 0) else [0] * nd
    return k, strides, dil, pads, extra


def _reduce_window(cx: Emitter, v: Value, kind: str, k: Sequence[int], strides: Sequence[int],
                   dil: Sequence[int], befores: Sequence[int], afters: Sequence[int]) -> Value:
    return cx.op("ik.reduce_window", v, kind=kind, window=(1, 1, *k), strides=(1, 1, *strides),
                 pads=(0, 0, *befores, 0, 0, *afters), dilations=(1, 1, *dil))


@converter("MaxPool")
def _max_pool(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    k, st, dil, pads, extra = _pool_geometry(node, x)
    nd = len(k)
    afters = [pads[nd + i] + extra[i] for i in range(nd)]
    y = _reduce_window(cx, cx.ir(x), "max", k, st, dil, pads[:nd], afters)
    if node.n_outputs > 1 and node.used[1]:
        return [OnnxValue.of(y), _max_pool_indices(cx, node, x, k, st, dil, pads[:nd], afters)]
    return [OnnxValue.of(y), None]


def _max_pool_indices(cx: Emitter, node: Node, x: OnnxValue, k: list[int], st: list[int], dil: list[int],
                      befores: list[int], afters: list[int]) -> OnnxValue:
    """MaxPool's Indices: every window's elements gathered (constant indices), the first max's flat position."""
    import itertools

    nd = len(k)
    n_b, c = x.shape[0], x.shape[1]
    sp = _static(node, x.shape[2:], "spatial dims")
    if not isinstance(n_b, int) or not isinstance(c, int):
        raise Unsupported("MaxPool Indices over a dynamic batch or channel count")
    outs = [(sp[i] + befores[i] + afters[i] - dil[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(nd)]
    total = int(np.prod(sp))
    rows = []
    for o in itertools.product(*[range(n) for n in outs]):
        row = []
        for w in itertools.product(*[range(n) for n in k]):
            p = [o[i] * st[i] - befores[i] + w[i] * dil[i] for i in range(nd)]
            inside = all(0 <= p[i] < sp[i] for i in range(nd))
            row.append(int(np.ravel_multi_index(p, sp)) if inside else total)  # total: the padding slot
        rows.append(row)
    table = np.array(rows, dtype=np.int64)  # [out, window]
    n_out, n_w = table.shape
    dt = x.dtype
    low = float("-inf") if dt.is_float else float(np.iinfo(dt.np).min)
    xv = cx.op("ik.reshape", cx.ir(x), shape=(n_b, c, total))
    xv = cx.op("ik.pad", xv, pads=(0, 0, 0, 0, 0, 1), value=low)
    idx = np.ascontiguousarray(np.broadcast_to(table.reshape(1, 1, -1), (n_b, c, n_out * n_w)))
    win = cx.op("ik.gather_elements", xv, cx.constant(idx, DType.i64), axis=2)
    win = cx.op("ik.reshape", win, shape=(n_b, c, n_out, n_w))
    arg = cx.op("ik.argmax", win, axis=3, keepdims=True)
    tbl = cx.constant(np.ascontiguousarray(np.broadcast_to(table.reshape(1, 1, n_out, n_w), (n_b, c, n_out, n_w))),
                      DType.i64)
    pos = cx.op("ik.reshape", cx.op("ik.gather_elements", tbl, arg, axis=3), shape=(n_b, c, n_out))
    if int(node.attr("storage_order", 0)) == 1:
        if nd != 2:
            raise Unsupported("MaxPool Indices with storage_order=1 beyond 2-D")
        sh, sw = sp
        r = cx.op("ik.floor_div", pos, cx.scalar(sw, DType.i64))
        col = cx.op("ik.sub", pos, cx.op("ik.mul", r, cx.scalar(sw, DType.i64)))
        pos = cx.op("ik.add", cx.op("ik.mul", col, cx.scalar(sh, DType.i64)), r)
    # Flat over the whole input: + (n * C + c) * spatial size.
    base = (np.arange(n_b * c, dtype=np.int64) * total).reshape(n_b, c, 1)
    pos = cx.op("ik.add", pos, cx.constant(base, DType.i64))
    return OnnxValue.of(cx.op("ik.reshape", pos, shape=(n_b, c, *outs)))


@converter("AveragePool")
def _avg_pool(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    k, st, dil, pads, extra = _pool_geometry(node, x)
    nd = len(k)
    afters = [pads[nd + i] + extra[i] for i in range(nd)]
    v = cx.ir(x)
    total = _reduce_window(cx, v, "sum", k, st, dil, pads[:nd], afters)
    # The divisor: how many input (and, with count_include_pad, explicit-pad) elements each window covers.
    sp = _static(node, x.shape[2:], "spatial dims")
    if node.attr("count_include_pad", 0):
        ones_shape = [sp[i] + pads[i] + pads[nd + i] for i in range(nd)]
        count_pads = ([0] * nd, extra)
    else:
        ones_shape = sp
        count_pads = (pads[:nd], afters)
    ones = cx.op("ik.broadcast", cx.scalar(1.0, x.dtype), shape=(1, 1, *ones_shape))
    count = _reduce_window(cx, ones, "sum", k, st, dil, *count_pads)
    return [OnnxValue.of(cx.op("ik.div", total, count))]


@converter("LpPool")
def _lp_pool(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    k, st, dil, pads, extra = _pool_geometry(node, x)
    nd = len(k)
    p = float(node.attr("p", 2))
    v = cx.op("ik.pow", cx.op("ik.abs", cx.ir(x)), cx.scalar(p, x.dtype))
    s = _reduce_window(cx, v, "sum", k, st, dil, pads[:nd], [pads[nd + i] + extra[i] for i in range(nd)])
    return [OnnxValue.of(cx.op("ik.pow", s, cx.scalar(1.0 / p, x.dtype)))]


@converter("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    axes = tuple(range(2, x.rank))
    v = cx.ir(x)
    if node.op_type == "GlobalAveragePool":
        return [OnnxValue.of(cx.op("ik.reduce_mean", v, axes=axes, keepdims=True))]
    if node.op_type == "GlobalMaxPool":
        return [OnnxValue.of(cx.op("ik.reduce_max", v, axes=axes, keepdims=True))]
    p = float(node.attr("p", 2))
    s = cx.op("ik.reduce_sum", cx.op("ik.pow", cx.op("ik.abs", v), cx.scalar(p, x.dtype)), axes=axes, keepdims=True)
    return [OnnxValue.of(cx.op("ik.pow", s, cx.scalar(1.0 / p, x.dtype)))]


# ---------------------------------------------------------------------------
# Convolution


def conv_value(cx: Emitter, node: Node, x: OnnxValue, w: OnnxValue, b: OnnxValue | None) -> Value:
    """An ONNX Conv (any of 1-3 spatial dims) as ik.conv2d (plain 2-D) or ik.conv."""
    nd = x.rank - 2
    if not 1 <= nd <= 3 or w.rank != x.rank:
        raise Unsupported(f"{node.op_type} with {nd} spatial dims (irkit supports 1 to 3)")
    sp = _static(node, x.shape[2:], "spatial dims")
    k = _static(node, w.shape[2:], "kernel dims")
    strides = [int(s) for s in node.attr("strides", [1] * nd)]
    dil = [int(d) for d in node.attr("dilations", [1] * nd)]
    pads = _window_pads(node, sp, k, strides, dil)
    group = int(node.attr("group", 1))
    name = "ik.conv2d" if nd == 2 else "ik.conv"
    return cx.op(name, cx.ir(x), cx.ir(w), None if b is None else cx.ir(b), strides=tuple(strides),
                 padding=tuple(pads), dilations=tuple(dil), groups=group)


@converter("Conv")
def _conv(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, w, b = node.req(0), node.req(1, "W"), node.input(2)
    cx.same_dtype(node, x, w)
    return [OnnxValue.of(conv_value(cx, node, x, w, b))]


@converter("ConvTranspose")
def _conv_transpose(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, w, b = node.req(0), node.req(1, "W"), node.input(2)
    cx.same_dtype(node, x, w)
    nd = x.rank - 2
    if not 1 <= nd <= 3 or w.rank != x.rank:
        raise Unsupported(f"ConvTranspose with {nd} spatial dims (irkit supports 1 to 3)")
    sp = _static(node, x.shape[2:], "spatial dims")
    k = _static(node, w.shape[2:], "kernel dims")
    g = int(node.attr("group", 1))
    strides = [int(s) for s in node.attr("strides", [1] * nd)]
    dil = [int(d) for d in node.attr("dilations", [1] * nd)]
    opad = [int(p) for p in node.attr("output_padding", [0] * nd)][:nd]
    auto = node.attr("auto_pad", "NOTSET")
    out_shape = [int(s) for s in node.attr("output_shape", [])][-nd:] if node.attr("output_shape") else None
    full = [strides[i] * (sp[i] - 1) + opad[i] + (k[i] - 1) * dil[i] + 1 for i in range(nd)]
    if "pads" in node.attrs and auto in ("NOTSET", ""):
        pads = [int(p) for p in node.attrs["pads"]]
    elif auto in ("SAME_UPPER", "SAME_LOWER") or out_shape is not None:
        target = out_shape or [sp[i] * strides[i] for i in range(nd)]
        pads = [0] * (2 * nd)
        for i in range(nd):
            total = full[i] - target[i]
            lo, hi = total // 2, total - total // 2
            pads[i], pads[i + nd] = (lo, hi) if auto == "SAME_UPPER" else (hi, lo)
    else:
        pads = [0] * (2 * nd)
    # Weight [Cin, Cout/g, k...] -> [Cout, Cin/g, k...], spatially flipped.
    cin, cog = w.shape[0], w.shape[1]
    if not isinstance(cin, int) or not isinstance(cog, int):
        raise Unsupported("ConvTranspose with dynamic channel counts")
    wv = cx.ir(w)
    wv = cx.op("ik.reshape", wv, shape=(g, cin // g, cog, *k))
    wv = cx.op("ik.transpose", wv, perm=(0, 2, 1, *range(3, 3 + nd)))
    wv = cx.op("ik.reshape", wv, shape=(g * cog, cin // g, *k))
    wv = cx.op("ik.reverse", wv, axes=tuple(range(2, 2 + nd)))
    conv_pads = [dil[i] * (k[i] - 1) - pads[i] for i in range(nd)] + \
                [dil[i] * (k[i] - 1) - pads[nd + i] + opad[i] for i in range(nd)]
    # ik.conv pads are >= 0: pad what is positive, then crop what is negative.
    pos = [max(p, 0) for p in conv_pads]
    y = cx.op("ik.conv", cx.ir(x), wv, None if b is None else cx.ir(b), strides=(1,) * nd, padding=tuple(pos),
              dilations=tuple(dil), lhs_dilation=tuple(strides), groups=g)
    if any(p < 0 for p in conv_pads):
        shape = y.type.shape
        start = [0, 0] + [max(-conv_pads[i], 0) for i in range(nd)]
        limit = list(shape[:2]) + [shape[2 + i] - max(-conv_pads[nd + i], 0) for i in range(nd)]
        y = cx.op("ik.slice", y, start=tuple(start), limit=tuple(limit))
    if out_shape is not None:
        have = _static(node, y.type.shape[2:], "output dims")
        if have != out_shape:
            grow = [max(o - h, 0) for o, h in zip(out_shape, have)]
            if any(grow):
                y = cx.op("ik.pad", y, pads=(0, 0, *[0] * nd, 0, 0, *grow), value=0.0)
            shape = y.type.shape
            y = cx.op("ik.slice", y, start=(0,) * (nd + 2), limit=tuple(shape[:2]) + tuple(out_shape))
    return [OnnxValue.of(y)]


# ---------------------------------------------------------------------------
# Normalisations built from reductions


@converter("LpNormalization")
def _lp_norm(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    ax = _axis(node, int(node.attr("axis", -1)), x.rank)
    p = int(node.attr("p", 2))
    v = cx.ir(x)
    if p == 1:
        n = cx.op("ik.reduce_sum", cx.op("ik.abs", v), axes=(ax,), keepdims=True)
    elif p == 2:
        n = cx.op("ik.sqrt", cx.op("ik.reduce_sum", cx.op("ik.mul", v, v), axes=(ax,), keepdims=True))
    else:
        raise FrontendError(f"node '{node.name}' (LpNormalization): p must be 1 or 2, got {p}")
    zero = cx.scalar(0.0, x.dtype)
    # The reference gives 0 where the norm is 0.
    safe = cx.op("ik.where", cx.op("ik.eq", n, zero), cx.scalar(1.0, x.dtype), n)
    return [OnnxValue.of(cx.op("ik.div", v, safe))]


@converter("BatchNormalization")
def _batch_norm(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, sc, b, mean, var = (node.req(i) for i in range(5))
    training = bool(node.attr("training_mode", 0))
    if any(node.used[1:]) and not training:
        raise Unsupported("BatchNormalization whose running statistics outputs are used outside training mode")
    shape = (1, x.shape[1]) + (1,) * (x.rank - 2)

    def chan(t: OnnxValue) -> Value:
        v = cx.ir(t)
        if t.dtype is not x.dtype:
            v = cx.op("ik.cast", v, to=x.dtype)
        return cx.op("ik.reshape", v, shape=shape)

    eps = cx.scalar(float(node.attr("epsilon", 1e-5)), x.dtype)
    extra: list[OnnxValue | None] = [None] * (node.n_outputs - 1)
    m_v, var_v = chan(mean), chan(var)
    if training:
        # Training mode normalises with the batch's own statistics (deterministic, no dropout-like state);
        # the running statistics outputs blend them in with `momentum`.
        axes = (0,) + tuple(range(2, x.rank))
        xv = cx.ir(x)
        bm = cx.op("ik.reduce_mean", xv, axes=axes, keepdims=True)
        d = cx.op("ik.sub", xv, bm)
        bvar = cx.op("ik.reduce_mean", cx.op("ik.mul", d, d), axes=axes, keepdims=True)
        mom = float(node.attr("momentum", 0.9))
        for i, (run_v, cur) in enumerate(((m_v, bm), (var_v, bvar))):
            if i + 1 < node.n_outputs and node.used[i + 1]:
                blend = cx.op("ik.add", cx.op("ik.mul", run_v, cx.scalar(mom, x.dtype)),
                              cx.op("ik.mul", cur, cx.scalar(1.0 - mom, x.dtype)))
                out = cx.op("ik.reshape", blend, shape=(x.shape[1],))
                t = (mean if i == 0 else var).dtype
                extra[i] = OnnxValue.of(out if t is x.dtype else cx.op("ik.cast", out, to=t))
        m_v, var_v = bm, bvar
    inv = cx.op("ik.rsqrt", cx.op("ik.add", var_v, eps))
    y = cx.op("ik.mul", cx.op("ik.sub", cx.ir(x), m_v), cx.op("ik.mul", inv, chan(sc)))
    return [OnnxValue.of(cx.op("ik.add", y, chan(b)))] + extra


@converter("InstanceNormalization")
def _instance_norm(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, sc, b = node.req(0), node.req(1, "scale"), node.req(2, "B")
    axes = tuple(range(2, x.rank))
    v = cx.ir(x)
    mean = cx.op("ik.reduce_mean", v, axes=axes, keepdims=True)
    d = cx.op("ik.sub", v, mean)
    var = cx.op("ik.reduce_mean", cx.op("ik.mul", d, d), axes=axes, keepdims=True)
    inv = cx.op("ik.rsqrt", cx.op("ik.add", var, cx.scalar(float(node.attr("epsilon", 1e-5)), x.dtype)))
    shape = (1, x.shape[1]) + (1,) * (x.rank - 2)
    y = cx.op("ik.mul", cx.op("ik.mul", d, inv), cx.op("ik.reshape", cx.ir(sc), shape=shape))
    return [OnnxValue.of(cx.op("ik.add", y, cx.op("ik.reshape", cx.ir(b), shape=shape)))]


@converter("DepthToSpace", "SpaceToDepth")
def _depth_space(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    if x.rank != 4:
        raise FrontendError(f"node '{node.name}' ({node.op_type}): input must be 4-D")
    bs = int(node.attr("blocksize", 0))
    n = x.shape[0]
    c, h, w = _static(node, x.shape[1:], "dims")
    v = cx.ir(x)
    if node.op_type == "DepthToSpace":
        if node.attr("mode", "DCR") == "DCR":
            v = cx.op("ik.reshape", v, shape=(n, bs, bs, c // (bs * bs), h, w))
            v = cx.op("ik.transpose", v, perm=(0, 3, 4, 1, 5, 2))
        else:
            v = cx.op("ik.reshape", v, shape=(n, c // (bs * bs), bs, bs, h, w))
            v = cx.op("ik.transpose", v, perm=(0, 1, 4, 2, 5, 3))
        return [OnnxValue.of(cx.op("ik.reshape", v, shape=(n, c // (bs * bs), h * bs, w * bs)))]
    v = cx.op("ik.reshape", v, shape=(n, c, h // bs, bs, w // bs, bs))
    crd = node.attr("mode", "DCR") == "CRD"
    v = cx.op("ik.transpose", v, perm=(0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4))
    return [OnnxValue.of(cx.op("ik.reshape", v, shape=(n, c * bs * bs, h // bs, w // bs)))]


# ---------------------------------------------------------------------------
# Resize / Upsample


def _resize_matrix(attrs: dict, n_in: int, scale: float | None, size: int | None,
                   roi: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """(M [n_in, n_out], extrapolated [n_out] mask) of a 1-D ONNX Resize, from ONNX's reference."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    keep = {k: v for k, v in attrs.items() if k in (
        "mode", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside", "nearest_mode", "antialias")}
    inits = [helper.make_tensor("roi", TensorProto.FLOAT, [2], list(roi or (0.0, 1.0)))]
    if size:
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [1], [size]))
    else:
        assert scale is not None
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [1], [scale]))

    def model(extrapolation: float) -> object:
        node = helper.make_node("Resize", ["X", "roi", "" if size else "scales", "sizes" if size else ""], ["Y"],
                                axes=[1], extrapolation_value=extrapolation, **keep)
        g = helper.make_graph([node], "r", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, None)],
                              [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, None)], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = list(ReferenceEvaluator(model(0.0)).run(None, {"X": np.eye(n_in, dtype=np.float64)}))[0]
        mask = list(ReferenceEvaluator(model(1.0)).run(None, {"X": np.zeros((1, n_in), dtype=np.float64)}))[0][0]
    return np.asarray(m), np.asarray(mask)


def _resize_axis(cx: Emitter, v: Value, ax: int, m: np.ndarray, mask: np.ndarray, nearest: bool,
                 extrap: float) -> Value:
    dt = v.type.dtype
    n_out = m.shape[1]
    if nearest:
        idx = np.argmax(m, axis=0).astype(np.int64)
        y = cx.op("ik.gather", v, cx.constant(idx, DType.i64), axis=ax)
    else:
        r = v.type.rank
        perm = [i for i in range(r) if i != ax] + [ax]
        t = cx.op("ik.transpose", v, perm=tuple(perm)) if ax != r - 1 else v
        y = cx.op("ik.matmul", t, cx.constant(m.astype(dt.np), dt))
        if ax != r - 1:
            inv = [0] * r
            for i, p in enumerate(perm):
                inv[p] = i
            y = cx.op("ik.transpose", y, perm=tuple(inv))
    if np.any(mask != 0):
        shape = [1] * v.type.rank
        shape[ax] = n_out
        keep = cx.constant((mask == 0).reshape(shape), DType.bool)
        y = cx.op("ik.where", keep, y, cx.scalar(extrap, dt))
    return y


def _resize(cx: Emitter, node: Node, x: OnnxValue, attrs: dict, scales: list[float] | None, sizes: list[int] | None,
            roi: list[float] | None, axes: list[int]) -> OnnxValue:
    sp = _static(node, x.shape, "dims")
    policy = attrs.get("keep_aspect_ratio_policy", "stretch")
    sizes_used: list[int] | None
    if sizes is not None and policy != "stretch":
        ratios = [sizes[i] / sp[a] for i, a in enumerate(axes)]
        s = min(ratios) if policy == "not_larger" else max(ratios)
        sizes = [math.floor(s * sp[a] + 0.5) for a in axes]
        scales, sizes_used = [s] * len(axes), sizes
    else:
        sizes_used = sizes
    mode = attrs.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise FrontendError(f"node '{node.name}' (Resize): unknown mode '{mode}'")
    nearest = mode == "nearest"
    if not nearest and not x.dtype.is_float:
        raise Unsupported(f"Resize {mode} on {x.dtype}")
    v = cx.ir(x)
    for i, a in enumerate(axes):
        sc = scales[i] if scales is not None else None
        sz = sizes_used[i] if sizes_used is not None else None
        if sc is not None and sz is None and sc == 1.0 and attrs.get("coordinate_transformation_mode") != \
                "tf_crop_and_resize":
            continue
        r = (roi[i], roi[i + len(axes)]) if roi else None
        try:
            m, mask = _resize_matrix(attrs, sp[a], sc, sz, r)
        except Exception as e:  # noqa: BLE001 - the reference raises many kinds of errors
            raise FrontendError(f"node '{node.name}' (Resize): ONNX's reference rejects the parameters "
                                f"({str(e).splitlines()[0][:200] if str(e) else type(e).__name__})") from None
        if sizes is not None and policy != "stretch" and m.shape[1] != sizes[i]:
            keep = m.shape[1]
            m = m[:, :sizes[i]] if keep > sizes[i] else np.pad(m, ((0, 0), (0, sizes[i] - keep)))
        v = _resize_axis(cx, v, a, m, mask, nearest, float(attrs.get("extrapolation_value", 0.0)))
    return OnnxValue.of(v)


def _float_list(cx: Emitter, t: OnnxValue | None, node: Node, what: str) -> list[float] | None:
    if t is None or (t.known is not None and t.known.size == 0):
        return None
    if t.known is None:
        raise Unsupported(f"{node.op_type} whose '{what}' is computed at run time")
    return [float(e) for e in np.asarray(t.known, dtype=np.float64).reshape(-1)]


@converter("Resize")
def _resize_node(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    attrs = dict(node.attrs)
    if cx.opset < 11:  # Resize-10: scales is input 1, asymmetric coordinates
        scales = _float_list(cx, node.input(1), node, "scales")
        attrs.setdefault("coordinate_transformation_mode", "asymmetric")
        attrs.setdefault("nearest_mode", "floor")
        return [_resize(cx, node, x, attrs, scales, None, None, list(range(x.rank)))]
    roi = _float_list(cx, node.input(1), node, "roi")
    scales = _float_list(cx, node.input(2), node, "scales")
    sizes_t = node.input(3)
    sizes = cx.ints(sizes_t, node, "sizes") if sizes_t is not None and not (
        sizes_t.known is not None and sizes_t.known.size == 0) else None
    axes = [_axis(node, int(a), x.rank) for a in node.attr("axes", range(x.rank))]
    if scales is None and sizes is None:
        raise FrontendError(f"node '{node.name}' (Resize): needs scales or sizes")
    n = len(scales) if scales is not None else len(sizes or ())
    if n != len(axes):
        raise FrontendError(f"node '{node.name}' (Resize): {n} scales/sizes for {len(axes)} axes")
    if roi is not None and len(roi) != 2 * len(axes):
        roi = None if attrs.get("coordinate_transformation_mode") != "tf_crop_and_resize" else roi
    return [_resize(cx, node, x, attrs, scales, sizes, roi, axes)]


@converter("Upsample")
def _upsample(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    scales = [float(s) for s in node.attrs["scales"]] if "scales" in node.attrs else \
        _float_list(cx, node.req(1, "scales"), node, "scales")
    mode = node.attr("mode", "nearest")
    attrs = {"mode": "linear" if mode in ("linear", "bilinear") else mode,
             "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return [_resize(cx, node, x, attrs, scales, None, None, list(range(x.rank)))]


__all__ = ["conv_value"]


@converter("LRN")
def _lrn(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    size = int(node.attr("size", 0))
    if size < 1:
        raise FrontendError(f"node '{node.name}' (LRN): size must be >= 1")
    alpha, beta, bias = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75)), float(node.attr("bias", 1.0))
    v = cx.ir(x)
    dt = x.dtype
    r = x.rank
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    window = [1] * r
    window[1] = size
    pads = [0] * (2 * r)
    pads[1], pads[r + 1] = lo, hi
    sq = cx.op("ik.reduce_window", cx.op("ik.mul", v, v), kind="sum", window=tuple(window), strides=(1,) * r,
               pads=tuple(pads), dilations=(1,) * r)
    den = cx.op("ik.add", cx.scalar(bias, dt), cx.op("ik.mul", sq, cx.scalar(alpha / size, dt)))
    return [OnnxValue.of(cx.op("ik.div", v, cx.op("ik.pow", den, cx.scalar(beta, dt))))]


# ---------------------------------------------------------------------------
# GridSample: per-dim taps (ONNX reference semantics), one gather per tap combination


def _gs_reflect(cx: Emitter, x: Value, lo: float, hi: float) -> Value:
    """ONNX GridSample's reflection of a coordinate into [lo, hi] (by the near border, repeatedly)."""
    dt = x.type.dtype
    s = lambda v: cx.scalar(v, dt)
    rng = s(hi - lo)

    def fold(dx: Value, near: float, far: float) -> Value:
        n = cx.op("ik.trunc", cx.op("ik.div", dx, rng))
        r = cx.op("ik.sub", dx, cx.op("ik.mul", n, rng))
        even = cx.op("ik.eq", cx.op("ik.mod", n, s(2.0)), s(0.0))
        toward = cx.op("ik.add", s(near), r) if near < far else cx.op("ik.sub", s(near), r)
        back = cx.op("ik.sub", s(far), r) if near < far else cx.op("ik.add", s(far), r)
        return cx.op("ik.where", even, toward, back)

    below = fold(cx.op("ik.sub", s(lo), x), lo, hi)
    above = fold(cx.op("ik.sub", x, s(hi)), hi, lo)
    return cx.op("ik.where", cx.op("ik.lt", x, s(lo)), below, cx.op("ik.where", cx.op("ik.gt", x, s(hi)), above, x))


def _cubic_coeffs(cx: Emitter, t: Value) -> list[Value]:
    dt = t.type.dtype
    s = lambda v: cx.scalar(v, dt)
    a = -0.75

    def near(u: Value) -> Value:  # ((a+2)u - (a+3)) u^2 + 1
        return cx.op("ik.add", cx.op("ik.mul", cx.op("ik.sub", cx.op("ik.mul", u, s(a + 2)), s(a + 3)),
                                     cx.op("ik.mul", u, u)), s(1.0))

    def far(u: Value) -> Value:  # ((a u - 5a) u + 8a) u - 4a
        v = cx.op("ik.sub", cx.op("ik.mul", u, s(a)), s(5 * a))
        v = cx.op("ik.add", cx.op("ik.mul", v, u), s(8 * a))
        return cx.op("ik.sub", cx.op("ik.mul", v, u), s(4 * a))

    one_m = cx.op("ik.sub", s(1.0), t)
    return [far(cx.op("ik.add", t, s(1.0))), near(t), near(one_m), far(cx.op("ik.sub", s(2.0), t))]


@converter("GridSample")
def _grid_sample(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, grid = node.req(0, "X"), node.req(1, "grid")
    nd = x.rank - 2
    sp = _static(node, x.shape[2:], "spatial dims")
    if grid.rank != nd + 2:
        raise FrontendError(f"node '{node.name}' (GridSample): grid must be N spatial... {nd}")
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(node.attr("mode", "linear"), node.attr("mode", "linear"))
    pad = node.attr("padding_mode", "zeros")
    align = bool(node.attr("align_corners", 0))
    if mode not in ("nearest", "linear", "cubic") or pad not in ("zeros", "border", "reflection"):
        raise FrontendError(f"node '{node.name}' (GridSample): unknown mode '{mode}' or padding_mode '{pad}'")
    n_b = x.shape[0]
    out_sp = tuple(grid.shape[1:-1])
    f = DType.f64 if grid.dtype is DType.f64 else DType.f32
    gv = cx.ir(grid) if grid.dtype is f else cx.op("ik.cast", cx.ir(grid), to=f)
    s = lambda v: cx.scalar(v, f)
    # Per spatial dim: the tap indices (i64) and weights, each shaped like the output grid [N, out...].
    per_dim: list[list[tuple[Value, Value | None, Value | None]]] = []
    for i in range(nd):
        d = sp[i]
        comp = _slice_last(cx, gv, nd - 1 - i)
        xc = cx.op("ik.mul", cx.op("ik.add", comp, s(1.0)), s((d - 1) / 2.0)) if align else \
            cx.op("ik.div", cx.op("ik.sub", cx.op("ik.mul", cx.op("ik.add", comp, s(1.0)), s(float(d))), s(1.0)),
                  s(2.0))
        if mode == "nearest":
            xc = cx.op("ik.round", xc)
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if pad == "border":
            outside = cx.op("ik.or", cx.op("ik.lt", xc, s(lo)), cx.op("ik.gt", xc, s(hi)))
            xc = cx.op("ik.where", outside, cx.op("ik.min", cx.op("ik.max", xc, s(0.0)), s(d - 1.0)), xc)
        elif pad == "reflection":
            xc = _gs_reflect(cx, xc, lo, hi)
        taps: list[tuple[Value, Value | None]]
        if mode == "nearest":
            taps = [(xc, None)]
        else:
            x0 = cx.op("ik.floor", xc)
            t = cx.op("ik.sub", xc, x0)
            if mode == "linear":
                taps = [(x0, cx.op("ik.sub", s(1.0), t)), (cx.op("ik.add", x0, s(1.0)), t)]
            else:
                ws = _cubic_coeffs(cx, t)
                taps = [(cx.op("ik.add", x0, s(float(k))), w) for k, w in zip((-1, 0, 1, 2), ws)]
        dim_taps: list[tuple[Value, Value | None, Value | None]] = []
        for pos, w in taps:
            valid: Value | None = None
            if pad == "zeros":
                valid = cx.op("ik.and", cx.op("ik.ge", pos, s(0.0)), cx.op("ik.le", pos, s(d - 1.0)))
                pos = cx.op("ik.min", cx.op("ik.max", pos, s(0.0)), s(d - 1.0))
            elif pad == "border":
                pos = cx.op("ik.min", cx.op("ik.max", pos, s(0.0)), s(d - 1.0))
            else:
                pos = cx.op("ik.trunc", _gs_reflect(cx, pos, lo, hi))
                pos = cx.op("ik.min", cx.op("ik.max", pos, s(0.0)), s(d - 1.0))
            dim_taps.append((cx.op("ik.cast", pos, to=DType.i64), w, valid))
        per_dim.append(dim_taps)
    # Sum over every combination of taps: weight product times the gathered pixel.
    p = 1
    for o in out_sp:
        p = p * o if isinstance(o, int) else -1
    if p < 0:
        raise Unsupported("GridSample over a dynamic output grid")
    c = x.shape[1]
    xv = cx.op("ik.reshape", cx.ir(x), shape=(n_b, c, int(np.prod(sp))))
    strides = [int(np.prod(sp[i + 1:])) for i in range(nd)]
    acc: Value | None = None
    import itertools

    for combo in itertools.product(*per_dim):
        flat: Value | None = None
        weight: Value | None = None
        valid = None
        for (idx, w, ok), st in zip(combo, strides):
            term = cx.op("ik.mul", idx, cx.scalar(st, DType.i64)) if st != 1 else idx
            flat = term if flat is None else cx.op("ik.add", flat, term)
            if w is not None:
                weight = w if weight is None else cx.op("ik.mul", weight, w)
            if ok is not None:
                valid = ok if valid is None else cx.op("ik.and", valid, ok)
        flat = cx.op("ik.broadcast", cx.op("ik.reshape", flat, shape=(n_b, 1, p)), shape=(n_b, c, p))
        val = cx.op("ik.gather_elements", xv, flat, axis=2)
        if val.type.dtype is not f:
            val = cx.op("ik.cast", val, to=f)
        if valid is not None:
            val = cx.op("ik.where", cx.op("ik.reshape", valid, shape=(n_b, 1, p)), val, s(0.0))
        if weight is not None:
            val = cx.op("ik.mul", val, cx.op("ik.reshape", weight, shape=(n_b, 1, p)))
        acc = val if acc is None else cx.op("ik.add", acc, val)
    assert acc is not None
    y = cx.op("ik.reshape", acc, shape=(n_b, c, *out_sp))
    if x.dtype is not f:
        y = cx.op("ik.cast", y, to=x.dtype)
    return [OnnxValue.of(y)]


def _slice_last(cx: Emitter, v: Value, i: int) -> Value:
    shape = v.type.shape
    r = len(shape)
    part = cx.op("ik.slice", v, start=(0,) * (r - 1) + (i,), limit=tuple(shape[:-1]) + (i + 1,))
    return cx.op("ik.reshape", part, shape=tuple(shape[:-1]))


@converter("Col2Im")
def _col2im(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    img = cx.ints(node.req(1, "image_shape"), node, "image_shape")
    blk = cx.ints(node.req(2, "block_shape"), node, "block_shape")
    nd = len(img)
    dil = [int(v) for v in node.attr("dilations", [1] * nd)]
    pads = [int(v) for v in node.attr("pads", [0] * (2 * nd))]
    st = [int(v) for v in node.attr("strides", [1] * nd)]
    n_b, ck, n_l = x.shape
    if not isinstance(ck, int) or not isinstance(n_l, int):
        raise Unsupported("Col2Im over dynamic dims")
    k = int(np.prod(blk))
    c = ck // k
    counts = [(img[i] + pads[i] + pads[nd + i] - dil[i] * (blk[i] - 1) - 1) // st[i] + 1 for i in range(nd)]
    if int(np.prod(counts)) != n_l or c * k != ck:
        raise FrontendError(f"node '{node.name}' (Col2Im): input {list(x.shape)} does not fit image {img}, "
                            f"block {blk}")
    # Where each column element lands in the flat image (prod(img) = a dropped slot for padding).
    kk = np.stack(np.meshgrid(*[np.arange(b) for b in blk], indexing="ij"), -1).reshape(k, nd)
    ll = np.stack(np.meshgrid(*[np.arange(n) for n in counts], indexing="ij"), -1).reshape(n_l, nd)
    pos = ll[None, :, :] * np.array(st) - np.array(pads[:nd]) + kk[:, None, :] * np.array(dil)  # [k, L, nd]
    inside = np.all((pos >= 0) & (pos < np.array(img)), axis=-1)
    flat = np.ravel_multi_index(tuple(np.clip(pos, 0, np.array(img) - 1).transpose(2, 0, 1)), tuple(img))
    total = int(np.prod(img))
    flat = np.where(inside, flat, total).reshape(1, 1, k * n_l)
    idx = np.ascontiguousarray(np.broadcast_to(flat, (1, c, k * n_l)))
    nb = n_b if isinstance(n_b, int) else None
    if nb is None:
        raise Unsupported("Col2Im over a dynamic batch")
    idx = np.ascontiguousarray(np.broadcast_to(idx, (nb, c, k * n_l)))
    upd = cx.op("ik.reshape", cx.ir(x), shape=(nb, c, k * n_l))
    zeros = cx.op("ik.broadcast", cx.scalar(0.0, x.dtype), shape=(nb, c, total + 1))
    y = cx.op("ik.scatter_elements", zeros, cx.constant(idx.astype(np.int64), DType.i64), upd, axis=2,
              reduction="add")
    y = cx.op("ik.slice", y, start=(0, 0, 0), limit=(nb, c, total))
    return [OnnxValue.of(cx.op("ik.reshape", y, shape=(nb, c, *img)))]


# ---------------------------------------------------------------------------
# DeformConv (2-D): bilinear samples at offset kernel taps (zeros outside), then a grouped matmul


@converter("DeformConv")
def _deform_conv(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, w, off = node.req(0, "X"), node.req(1, "W"), node.req(2, "offset")
    bias, mask = node.input(3), node.input(4)
    if x.rank != 4 or w.rank != 4 or off.rank != 4:
        raise Unsupported(f"DeformConv with {x.rank - 2} spatial dims (irkit supports 2-D)")
    n, c, ih, iw = _static(node, x.shape, "input dims")
    oc, icpg, kh, kw = _static(node, w.shape, "weight dims")
    _, off_c, oh, ow = _static(node, off.shape, "offset dims")
    kh, kw = (int(v) for v in node.attr("kernel_shape", [kh, kw]))
    sth, stw = (int(v) for v in node.attr("strides", [1, 1]))
    dh, dw = (int(v) for v in node.attr("dilations", [1, 1]))
    pt, pl, pb, pr = (int(v) for v in node.attr("pads", [0, 0, 0, 0]))
    group, og = int(node.attr("group", 1)), int(node.attr("offset_group", 1))
    k = kh * kw
    if c != icpg * group or oc % group or c % og or off_c != og * 2 * k:
        raise FrontendError(f"node '{node.name}' (DeformConv): X {list(x.shape)}, W {list(w.shape)}, offset "
                            f"{list(off.shape)} do not fit group {group}, offset_group {og}")
    if oh != (ih + pt + pb - (kh - 1) * dh - 1) // sth + 1 or ow != (iw + pl + pr - (kw - 1) * dw - 1) // stw + 1:
        raise FrontendError(f"node '{node.name}' (DeformConv): offset spatial dims {[oh, ow]} do not match the "
                            "convolution's output")
    dt = x.dtype
    s = lambda v: cx.scalar(v, dt)  # noqa: E731
    p = oh * ow
    # Sampling positions [N, G, K, P]: the kernel tap's place plus its learned offset.
    ov = cx.op("ik.reshape", cx.ir(off), shape=(n, og, k, 2, p))

    def coord(i: int) -> Value:
        return cx.op("ik.reshape", cx.op("ik.slice", ov, start=(0, 0, 0, i, 0), limit=(n, og, k, i + 1, p)),
                     shape=(n, og, k, p))

    base_h = (np.arange(kh)[:, None, None, None] * dh + np.arange(oh)[None, None, :, None] * sth - pt)
    base_w = (np.arange(kw)[None, :, None, None] * dw + np.arange(ow)[None, None, None, :] * stw - pl)
    bh = np.broadcast_to(base_h, (kh, kw, oh, ow)).reshape(1, 1, k, p).astype(dt.np)
    bw = np.broadcast_to(base_w, (kh, kw, oh, ow)).reshape(1, 1, k, p).astype(dt.np)
    ph = cx.op("ik.add", coord(0), cx.constant(bh, dt))
    pw = cx.op("ik.add", coord(1), cx.constant(bw, dt))
    h0, w0 = cx.op("ik.floor", ph), cx.op("ik.floor", pw)
    lh, lw = cx.op("ik.sub", ph, h0), cx.op("ik.sub", pw, w0)
    cg = c // og
    xg = cx.op("ik.reshape", cx.ir(x), shape=(n, og, cg, ih * iw))
    mv = None if mask is None else cx.op("ik.reshape", cx.ir(mask), shape=(n, og, k, p))
    acc: Value | None = None
    for a in (0, 1):
        hc = h0 if a == 0 else cx.op("ik.add", h0, s(1.0))
        wh = cx.op("ik.sub", s(1.0), lh) if a == 0 else lh
        for b in (0, 1):
            wc = w0 if b == 0 else cx.op("ik.add", w0, s(1.0))
            ww = cx.op("ik.sub", s(1.0), lw) if b == 0 else lw
            ok = cx.op("ik.and", cx.op("ik.and", cx.op("ik.ge", hc, s(0.0)), cx.op("ik.le", hc, s(ih - 1.0))),
                       cx.op("ik.and", cx.op("ik.ge", wc, s(0.0)), cx.op("ik.le", wc, s(iw - 1.0))))
            hi = cx.op("ik.cast", cx.op("ik.min", cx.op("ik.max", hc, s(0.0)), s(ih - 1.0)), to=DType.i64)
            wi = cx.op("ik.cast", cx.op("ik.min", cx.op("ik.max", wc, s(0.0)), s(iw - 1.0)), to=DType.i64)
            flat = cx.op("ik.add", cx.op("ik.mul", hi, cx.scalar(iw, DType.i64)), wi)  # [N, G, K, P]
            idx = cx.op("ik.broadcast", cx.op("ik.reshape", flat, shape=(n, og, 1, k * p)), shape=(n, og, cg, k * p))
            val = cx.op("ik.gather_elements", xg, idx, axis=3)  # [N, G, Cg, K*P]
            wt = cx.op("ik.where", ok, cx.op("ik.mul", wh, ww), s(0.0))
            if mv is not None:
                wt = cx.op("ik.mul", wt, mv)
            val = cx.op("ik.mul", val, cx.op("ik.reshape", wt, shape=(n, og, 1, k * p)))
            acc = val if acc is None else cx.op("ik.add", acc, val)
    assert acc is not None
    # [N, C, K, P] -> per conv group [N, group, icpg*K, P]; weights [1, group, ocpg, icpg*K].
    cols = cx.op("ik.reshape", acc, shape=(n, group, icpg * k, p))
    wv = cx.op("ik.reshape", cx.ir(w), shape=(1, group, oc // group, icpg * k))
    y = cx.op("ik.reshape", cx.op("ik.matmul", wv, cols), shape=(n, oc, oh, ow))
    if bias is not None:
        y = cx.op("ik.add", y, cx.op("ik.reshape", cx.ir(bias), shape=(1, oc, 1, 1)))
    return [OnnxValue.of(y)]


# ---------------------------------------------------------------------------
# MaxUnpool: scatter X at its (flat, whole-tensor) MaxPool indices into zeros


@converter("MaxUnpool")
def _max_unpool(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, ind = node.req(0, "X"), node.req(1, "I")
    nd = x.rank - 2
    dims = _static(node, x.shape, "input dims")
    kernel = [int(v) for v in node.attr("kernel_shape", [])]
    if nd < 1 or len(kernel) != nd or list(ind.shape) != list(x.shape) or not ind.dtype.is_int:
        raise FrontendError(f"node '{node.name}' (MaxUnpool): X {list(x.shape)} and I {list(ind.shape)} must have "
                            f"the same shape with {len(kernel)} kernel dims")
    strides = [int(v) for v in node.attr("strides", [1] * nd)]
    pads = [int(v) for v in node.attr("pads", [0] * (2 * nd))]
    out = dims[:2] + [(dims[2 + i] - 1) * strides[i] - pads[i] - pads[nd + i] + kernel[i] for i in range(nd)]
    shape_t = node.input(2)
    if shape_t is not None:
        want = cx.ints(shape_t, node, "output_shape")
        if want != out:
            # onnx.reference pads the inferred result; onnxruntime indexes into the larger tensor.
            raise Unsupported(f"MaxUnpool with an output_shape {want} other than the inferred {out} "
                              "(implementations disagree on its meaning)")
    total = int(np.prod(out))
    size = int(np.prod(dims))
    zeros = cx.op("ik.broadcast", cx.scalar(0.0, x.dtype), shape=(total,))
    iv = cx.ir(ind) if ind.dtype is DType.i64 else cx.op("ik.cast", cx.ir(ind), to=DType.i64)
    y = cx.op("ik.scatter_elements", zeros, cx.op("ik.reshape", iv, shape=(size,)),
              cx.op("ik.reshape", cx.ir(x), shape=(size,)), axis=0)
    return [OnnxValue.of(cx.op("ik.reshape", y, shape=tuple(out)))]
