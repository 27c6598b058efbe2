"""ONNX converters for indexing, scans, sorting, bit ops, Einsum and quantisation.

Design note: each ONNX op maps onto one of the coverage IR ops where one exists
(``ik.gather_elements``, ``ik.scatter_nd``, ``ik.topk``, ``ik.cumsum``...);
everything else is decomposed here into existing ops, as the op spec asks:
OneHot is an ``eq`` against an ``iota``, Einsum is transposes around
``ik.contract`` and ``reduce_sum``, the quantisation ops are round / clip /
cast and an integer matmul in i32.  Values whose ONNX form is an input in new
opsets and an attribute in old ones (TopK ``k``, CumSum ``axis``...) are read
from whichever the node has.
"""

from __future__ import annotations

import string

import ml_dtypes
import numpy as np

from irkit.frontends.common import FrontendError
from irkit.frontends.onnx_load import ir_dtype
from irkit.frontends.onnx_ops import (
    Emitter,
    Node,
    OnnxValue,
    Unsupported,
    _axis,
    converter,
)
from irkit.ir.core import Value
from irkit.ir.types import Dim, DType, dim_prod, static_dim, static_shape

# ---------------------------------------------------------------------------
# Gather / scatter


def _index_value(cx: Emitter, node: Node, t: OnnxValue, what: str) -> Value:
    if not t.dtype.is_int:
        raise FrontendError(f"node '{node.name}' ({node.op_type}): {what} must be integers, got {t.dtype}")
    return cx.ir(t if t.dtype in (DType.i32, DType.i64) else cx.cast(t, DType.i64))


@converter("GatherElements")
def _gather_elements(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    data, idx = node.req(0, "data"), node.req(1, "indices")
    ax = _axis(node, int(node.attr("axis", 0)), data.rank)
    return [OnnxValue.of(cx.op("ik.gather_elements", cx.ir(data), _index_value(cx, node, idx, "indices"), axis=ax))]


@converter("GatherND")
def _gather_nd(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    data, idx = node.req(0, "data"), node.req(1, "indices")
    return [OnnxValue.of(cx.op("ik.gather_nd", cx.ir(data), _index_value(cx, node, idx, "indices"),
                        batch_dims=int(node.attr("batch_dims", 0))))]


@converter("ScatterElements", "Scatter")
def _scatter_elements(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    data, idx, upd = node.req(0, "data"), node.req(1, "indices"), node.req(2, "updates")
    ax = _axis(node, int(node.attr("axis", 0)), data.rank)
    red = node.attr("reduction", "none")
    return [OnnxValue.of(cx.op("ik.scatter_elements", cx.ir(data), _index_value(cx, node, idx, "indices"), cx.ir(upd),
                        axis=ax, reduction=red))]


@converter("ScatterND")
def _scatter_nd(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    data, idx, upd = node.req(0, "data"), node.req(1, "indices"), node.req(2, "updates")
    red = node.attr("reduction", "none")
    return [OnnxValue.of(cx.op("ik.scatter_nd", cx.ir(data), _index_value(cx, node, idx, "indices"), cx.ir(upd),
                        reduction=red))]


@converter("NonZero")
def _nonzero(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    if x.known is None or x.is_symbolic:
        raise Unsupported("NonZero of a tensor computed at run time (its output shape depends on the data)")
    return [OnnxValue.const(np.array(np.nonzero(x.known), dtype=np.int64).reshape(x.rank, -1), DType.i64)]


@converter("OneHot")
def _one_hot(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    idx, depth_t, values = node.req(0, "indices"), node.req(1, "depth"), node.req(2, "values")
    depth = cx.scalar_value(depth_t, node, "depth")
    if not isinstance(depth, (int, float, np.integer, np.floating)):
        raise Unsupported("OneHot with a dynamic depth")
    depth = int(depth)
    r = idx.rank + 1
    ax = _axis(node, int(node.attr("axis", -1)), r)
    iv = cx.ir(cx.cast(idx, DType.i64))
    # Negative indices count from the end (ONNX OneHot).
    zero = cx.scalar(0, DType.i64)
    iv = cx.op("ik.where", cx.op("ik.lt", iv, zero), cx.op("ik.add", iv, cx.scalar(depth, DType.i64)), iv)
    shape = list(idx.shape)
    shape.insert(ax, 1)
    iv = cx.op("ik.reshape", iv, shape=tuple(shape))
    full = list(idx.shape)
    full.insert(ax, depth)
    ramp = cx.op("ik.iota", shape=tuple(full), axis=ax, dtype=DType.i64)
    hot = cx.op("ik.eq", iv, ramp)
    vv = cx.ir(values)
    off = cx.op("ik.reshape", cx.op("ik.slice", vv, start=(0,), limit=(1,)), shape=())
    on = cx.op("ik.reshape", cx.op("ik.slice", vv, start=(1,), limit=(2,)), shape=())
    return [OnnxValue.of(cx.op("ik.where", hot, on, off))]


# ---------------------------------------------------------------------------
# Scans, sorting, arg reductions


def _scalar_axis(cx: Emitter, node: Node, idx: int, rank: int) -> int:
    if "axis" in node.attrs:
        a = int(node.attrs["axis"])
    else:
        a = int(cx.ints(node.req(idx, "axis"), node, "axis")[0])
    return _axis(node, a, rank)


@converter("CumSum", "CumProd")
def _cumsum(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    ax = _scalar_axis(cx, node, 1, x.rank)
    name = "ik.cumsum" if node.op_type == "CumSum" else "ik.cumprod"
    return [OnnxValue.of(cx.op(name, cx.ir(x), axis=ax, reverse=bool(node.attr("reverse", 0)),
                        exclusive=bool(node.attr("exclusive", 0))))]


@converter("TopK")
def _topk(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    k = int(node.attrs["k"]) if "k" in node.attrs else int(cx.ints(node.req(1, "K"), node, "K")[0])
    ax = _axis(node, int(node.attr("axis", -1)), x.rank)
    vals, idx = cx.emit("ik.topk", [cx.ir(x)], k=k, axis=ax, largest=bool(node.attr("largest", 1)),
                        sorted=bool(node.attr("sorted", 1)))
    return [OnnxValue.of(vals), OnnxValue.of(idx)]


@converter("ArgMax", "ArgMin")
def _arg(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    ax = _axis(node, int(node.attr("axis", 0)), x.rank)
    name = "ik.argmax" if node.op_type == "ArgMax" else "ik.argmin"
    return [OnnxValue.of(cx.op(name, cx.ir(x), axis=ax, keepdims=bool(node.attr("keepdims", 1)),
                        select_last_index=bool(node.attr("select_last_index", 0))))]


@converter("Hardmax")
def _hardmax(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    v = cx.ir(x)
    ax = _axis(node, int(node.attr("axis", -1 if cx.opset >= 13 else 1)), x.rank)
    shape = x.shape
    if cx.opset < 13:  # old Hardmax works on the 2-D flattening at axis
        v = cx.op("ik.reshape", v, shape=(dim_prod(shape[:ax]), dim_prod(shape[ax:])))
        ax = 1
    am = cx.op("ik.argmax", v, axis=ax, keepdims=True)
    ramp = cx.op("ik.iota", shape=v.type.shape, axis=ax, dtype=DType.i64)
    dt = x.dtype
    y = cx.op("ik.where", cx.op("ik.eq", ramp, am), cx.scalar(1.0, dt), cx.scalar(0.0, dt))
    if cx.opset < 13:
        y = cx.op("ik.reshape", y, shape=shape)
    return [OnnxValue.of(y)]


# ---------------------------------------------------------------------------
# Bit and integer ops


@converter("BitShift")
def _bit_shift(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    a, b = node.req(0), node.req(1)
    cx.same_dtype(node, a, b)
    d = node.attr("direction", "")
    if d not in ("LEFT", "RIGHT"):
        raise FrontendError(f"node '{node.name}' (BitShift): direction must be LEFT or RIGHT, got '{d}'")
    name = "ik.shift_left" if d == "LEFT" else \
        "ik.shift_right_arithmetic" if a.dtype.is_signed else "ik.shift_right_logical"
    return [OnnxValue.of(cx.op(name, cx.ir(a), cx.ir(b)))]


_BITWISE = {"BitwiseAnd": "ik.bitwise_and", "BitwiseOr": "ik.bitwise_or", "BitwiseXor": "ik.bitwise_xor"}


@converter(*_BITWISE)
def _bitwise(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    a, b = node.req(0), node.req(1)
    cx.same_dtype(node, a, b)
    return [OnnxValue.of(cx.op(_BITWISE[node.op_type], cx.ir(a), cx.ir(b)))]


@converter("BitwiseNot")
def _bitwise_not(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    return [OnnxValue.of(cx.op("ik.bitwise_not", cx.ir(node.req(0))))]


# ---------------------------------------------------------------------------
# Einsum


def _einsum_terms(node: Node, eq: str, ranks: list[int]) -> tuple[list[str], str]:
    eq = eq.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise FrontendError(f"node '{node.name}' (Einsum): equation '{eq}' has {len(terms)} operands, the node "
                            f"{len(ranks)}")
    used = set("".join(terms).replace(".", ""))
    free = [c for c in string.ascii_letters if c not in used]
    n_ell = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t), default=0)
    ell = "".join(free[:n_ell])
    res = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            k = r - len(t.replace("...", ""))
            t = t.replace("...", ell[n_ell - k:])
        if len(t) != r:
            raise FrontendError(f"node '{node.name}' (Einsum): term '{t}' does not fit an operand of rank {r}")
        res.append(t)
    if not arrow:
        counts = {c: "".join(res).count(c) for c in set("".join(res))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    return res, out


@converter("Einsum")
def _einsum(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    xs = [t for t in node.inputs if t is not None]
    terms, out = _einsum_terms(node, str(node.attr("equation", "")), [t.rank for t in xs])
    dt = cx.same_dtype(node, *xs)
    vals = [cx.ir(x) for x in xs]
    for j, t in enumerate(terms):
        # A repeated index ('ii') is a diagonal: keep where the two positions agree, sum the second away.
        while len(set(t)) != len(t):
            c = next(ch for ch in t if t.count(ch) > 1)
            p, q = t.index(c), t.index(c, t.index(c) + 1)
            v = vals[j]
            shape = v.type.shape
            if shape[p] != shape[q] or not isinstance(shape[p], int):
                raise FrontendError(f"node '{node.name}' (Einsum): '{c}' indexes dims of sizes {shape[p]} and "
                                    f"{shape[q]}")
            eq_shape: list[Dim] = [1] * len(shape)
            eq_shape[p] = eq_shape[q] = shape[p]
            a = cx.op("ik.iota", shape=tuple(eq_shape), axis=p, dtype=DType.i64)
            b = cx.op("ik.iota", shape=tuple(eq_shape), axis=q, dtype=DType.i64)
            v = cx.op("ik.where", cx.op("ik.eq", a, b), v, cx.scalar(0, dt))
            vals[j] = cx.op("ik.reduce_sum", v, axes=(q,), keepdims=False)
            t = t[:q] + t[q + 1:]
        terms[j] = t

    def reduce_private(v: Value, t: str, others: str) -> tuple[Value, str]:
        # Letters only this operand has and the output lacks are summed away first.
        drop = [i for i, c in enumerate(t) if c not in others and c not in out]
        if drop:
            v = cx.op("ik.reduce_sum", v, axes=tuple(drop), keepdims=False)
            t = "".join(c for i, c in enumerate(t) if i not in drop)
        return v, t

    v, t = vals[0], terms[0]
    v, t = reduce_private(v, t, "".join(terms[1:]))
    for j in range(1, len(vals)):
        w, u = vals[j], terms[j]
        rest = "".join(terms[j + 1:])
        w, u = reduce_private(w, u, t + rest)
        keep = out + rest
        batch = [c for c in t if c in u and c in keep]
        contract = [c for c in t if c in u and c not in keep]
        y = cx.op("ik.contract", v, w, lhs_batch=tuple(t.index(c) for c in batch),
                  rhs_batch=tuple(u.index(c) for c in batch), lhs_contract=tuple(t.index(c) for c in contract),
                  rhs_contract=tuple(u.index(c) for c in contract))
        t = "".join(batch) + "".join(c for c in t if c not in batch and c not in contract) + \
            "".join(c for c in u if c not in batch and c not in contract)
        v = y
    v, t = reduce_private(v, t, "")
    if sorted(t) != sorted(out):
        raise FrontendError(f"node '{node.name}' (Einsum): output '{out}' does not match the operands")
    if t != out:
        v = cx.op("ik.transpose", v, perm=tuple(t.index(c) for c in out))
    if v.type.dtype is not dt:
        v = cx.op("ik.cast", v, to=dt)
    return [OnnxValue.of(v)]


# ---------------------------------------------------------------------------
# Quantisation (opset 10+): round half to even, saturate, cast


def _qparams(cx: Emitter, node: Node, x: OnnxValue, scale: OnnxValue, zp: OnnxValue | None, axis: int | None,
             block: int) -> tuple[Value, Value | None]:
    """Scale and zero point broadcastable against ``x`` (per-tensor, per-axis or blocked)."""
    sv, zv = cx.ir(scale), cx.ir(zp) if zp is not None else None
    if scale.rank == 0 or (scale.rank == 1 and scale.shape[0] == 1 and x.rank != 1):
        return sv, zv
    ax = _axis(node, axis if axis is not None else 1, x.rank)
    if block:
        if scale.rank != x.rank:
            raise FrontendError(f"node '{node.name}' ({node.op_type}): blocked scale must have the input's rank")
        # Repeat every scale `block` times along the axis, then cut to the input's length.
        def expand(v: Value) -> Value:
            s = list(v.type.shape)
            inter = s[:ax + 1] + [1] + s[ax + 1:]
            v = cx.op("ik.reshape", v, shape=tuple(inter))
            inter[ax + 1] = block
            v = cx.op("ik.broadcast", v, shape=tuple(inter))
            s[ax] = s[ax] * block
            v = cx.op("ik.reshape", v, shape=tuple(s))
            if s[ax] != x.shape[ax]:
                lim = list(s)
                lim[ax] = x.shape[ax]
                v = cx.op("ik.slice", v, start=(0,) * len(s), limit=tuple(lim))
            return v
        return expand(sv), expand(zv) if zv is not None else None
    shape: list[Dim] = [1] * x.rank
    shape[ax] = scale.shape[0]
    sv = cx.op("ik.reshape", sv, shape=tuple(shape))
    if zv is not None:
        zv = cx.op("ik.reshape", zv, shape=tuple(shape))
    return sv, zv


def _saturate(cx: Emitter, v: Value, dt: DType) -> Value:
    info = np.iinfo(dt.np)
    f = v.type.dtype
    v = cx.op("ik.max", v, cx.scalar(float(info.min), f))
    v = cx.op("ik.min", v, cx.scalar(float(info.max), f))
    return cx.op("ik.cast", v, to=dt)


@converter("QuantizeLinear")
def _quantize(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, scale, zp = node.req(0), node.req(1, "y_scale"), node.input(2)
    out_dt = zp.dtype if zp is not None else DType.ui8
    if node.attrs.get("output_dtype"):
        from irkit.frontends.onnx_load import ir_dtype

        out_dt = ir_dtype(int(node.attrs["output_dtype"]), cx.source, f"node '{node.name}' output_dtype")
    if not out_dt.is_int and not out_dt.is_float8:
        raise Unsupported(f"QuantizeLinear to {out_dt}")
    sv, zv = _qparams(cx, node, x, scale, zp, node.attr("axis"), int(node.attr("block_size", 0)))
    f = DType.f32 if x.dtype is not DType.f64 else DType.f64
    xv = cx.ir(x) if x.dtype is f else cx.op("ik.cast", cx.ir(x), to=f)
    if sv.type.dtype is not f:
        sv = cx.op("ik.cast", sv, to=f)
    if out_dt.is_float8:
        # x / scale (+ zero point) rounded to the float8 grid; saturate (default 1) clamps +-Inf and
        # out-of-range values to +-max, as ONNX Cast does.
        q = cx.op("ik.div", xv, sv)
        if zv is not None:
            q = cx.op("ik.add", q, cx.op("ik.cast", zv, to=f))
        sat = bool(node.attr("saturate", 1))
        if sat:
            top = float(ml_dtypes.finfo(out_dt.np).max)
            q = cx.op("ik.min", cx.op("ik.max", q, cx.scalar(-top, f)), cx.scalar(top, f))
        return [OnnxValue.of(cx.op("ik.cast", q, to=out_dt, saturate=True if sat else None))]
    q = cx.op("ik.round", cx.op("ik.div", xv, sv))
    if zv is not None:
        q = cx.op("ik.add", q, cx.op("ik.cast", zv, to=f))
    return [OnnxValue.of(_saturate(cx, q, out_dt))]


@converter("DequantizeLinear")
def _dequantize(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, scale, zp = node.req(0), node.req(1, "x_scale"), node.input(2)
    if not x.dtype.is_int and not x.dtype.is_float8:
        raise Unsupported(f"DequantizeLinear from {x.dtype}")
    sv, zv = _qparams(cx, node, x, scale, zp, node.attr("axis"), int(node.attr("block_size", 0)))
    f = scale.dtype
    if x.dtype.is_float8:  # (x - zero point) * scale, exactly in the scale's type
        xf = cx.op("ik.cast", cx.ir(x), to=f)
        if zv is not None:
            xf = cx.op("ik.sub", xf, cx.op("ik.cast", zv, to=f))
        return [OnnxValue.of(cx.op("ik.mul", xf, sv))]
    # Subtract in i32/i64 so uint8 - zero point cannot wrap.
    wide = DType.i64 if x.dtype in (DType.i64, DType.ui32, DType.ui64, DType.i32) else DType.i32
    xv = cx.op("ik.cast", cx.ir(x), to=wide)
    if zv is not None:
        xv = cx.op("ik.sub", xv, cx.op("ik.cast", zv, to=wide))
    y = cx.op("ik.mul", cx.op("ik.cast", xv, to=f), sv)
    return [OnnxValue.of(y)]


@converter("DynamicQuantizeLinear")
def _dyn_quantize(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = cx.ir(node.req(0))
    f = x.type.dtype
    r = x.type.rank
    zero = cx.scalar(0.0, f)
    mx = cx.op("ik.max", cx.op("ik.reduce_max", x, axes=tuple(range(r)), keepdims=False), zero)
    mn = cx.op("ik.min", cx.op("ik.reduce_min", x, axes=tuple(range(r)), keepdims=False), zero)
    scale = cx.op("ik.div", cx.op("ik.sub", mx, mn), cx.scalar(255.0, f))
    zp = cx.op("ik.round", cx.op("ik.sub", zero, cx.op("ik.div", mn, scale)))
    zp_c = cx.op("ik.min", cx.op("ik.max", zp, zero), cx.scalar(255.0, f))
    q = cx.op("ik.add", cx.op("ik.round", cx.op("ik.div", x, scale)), zp_c)
    return [OnnxValue.of(_saturate(cx, q, DType.ui8)), OnnxValue.of(scale),
            OnnxValue.of(cx.op("ik.cast", zp_c, to=DType.ui8))]


def _int_matmul(cx: Emitter, node: Node, a: Value, b: Value, a_zp: Value | None, b_zp: Value | None,
                a_rank: int) -> Value:
    """(a - a_zp) @ (b - b_zp) in i32; a_zp per row of a (or scalar), b_zp per column of b (or scalar)."""
    a = cx.op("ik.cast", a, to=DType.i32)
    b = cx.op("ik.cast", b, to=DType.i32)
    if a_zp is not None:
        z = cx.op("ik.cast", a_zp, to=DType.i32)
        if z.type.rank == 1 and z.type.shape[0] != 1:
            z = cx.op("ik.reshape", z, shape=(z.type.shape[0], 1))
        a = cx.op("ik.sub", a, z)
    if b_zp is not None:
        b = cx.op("ik.sub", b, cx.op("ik.cast", b_zp, to=DType.i32))
    return cx.op("ik.matmul", a, b)


@converter("MatMulInteger")
def _matmul_integer(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    a, b = node.req(0), node.req(1)
    if a.rank < 2 or b.rank < 2:
        raise Unsupported("MatMulInteger with a 1-D operand")
    azp, bzp = node.input(2), node.input(3)
    return [OnnxValue.of(_int_matmul(cx, node, cx.ir(a), cx.ir(b), cx.ir(azp) if azp is not None else None,
                              cx.ir(bzp) if bzp is not None else None, a.rank))]


@converter("QLinearMatMul")
def _qlinear_matmul(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (node.req(i) for i in range(8))
    if a.rank < 2 or b.rank < 2:
        raise Unsupported("QLinearMatMul with a 1-D operand")
    acc = _int_matmul(cx, node, cx.ir(a), cx.ir(b), cx.ir(a_zp), cx.ir(b_zp), a.rank)
    f = DType.f32 if a_s.dtype is not DType.f64 else DType.f64
    def f32(t: OnnxValue) -> Value:
        v = cx.ir(t)
        return v if v.type.dtype is f else cx.op("ik.cast", v, to=f)
    # The ONNX reference rescales in float: acc * (a_scale * b_scale / y_scale), rounded half to even.
    y = cx.op("ik.mul", cx.op("ik.cast", acc, to=f), cx.op("ik.div", cx.op("ik.mul", f32(a_s), f32(b_s)), f32(y_s)))
    y = cx.op("ik.add", cx.op("ik.round", y), cx.op("ik.cast", cx.ir(y_zp), to=f))
    return [OnnxValue.of(_saturate(cx, y, y_zp.dtype))]


@converter("ConvInteger")
def _conv_integer(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    from irkit.frontends.onnx_nn import conv_value

    x, w, xzp, wzp = node.req(0), node.req(1, "w"), node.input(2), node.input(3)
    xv = cx.op("ik.cast", cx.ir(x), to=DType.i32)
    wv = cx.op("ik.cast", cx.ir(w), to=DType.i32)
    if xzp is not None:
        xv = cx.op("ik.sub", xv, cx.op("ik.cast", cx.ir(xzp), to=DType.i32))
    if wzp is not None:
        z = cx.op("ik.cast", cx.ir(wzp), to=DType.i32)
        if wzp.rank == 1 and wzp.shape[0] != 1:
            z = cx.op("ik.reshape", z, shape=(wzp.shape[0],) + (1,) * (w.rank - 1))
        wv = cx.op("ik.sub", wv, z)
    return [OnnxValue.of(conv_value(cx, node, OnnxValue.of(xv), OnnxValue.of(wv), None))]


@converter("QLinearConv")
def _qlinear_conv(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    """ConvInteger on (x - x_zp), (w - w_zp) in i32, plus the i32 bias, rescaled by x_scale * w_scale / y_scale
    (per output channel when w_scale is 1-D), rounded half to even, plus y_zp, saturated."""
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp = (node.req(i) for i in range(8))
    bias = node.input(8)
    acc = _conv_integer(cx, Node(node.proto, node.name, node.op_type, node.domain, [x, w, x_zp, w_zp],
                                 node.outputs, node.attrs, node.used))[0]
    assert acc is not None
    av = cx.ir(acc)
    shape = av.type.shape
    per_channel = (1, shape[1]) + (1,) * (len(shape) - 2)
    if bias is not None:
        bv = cx.op("ik.cast", cx.ir(bias), to=DType.i32)
        av = cx.op("ik.add", av, cx.op("ik.reshape", bv, shape=per_channel))
    f = DType.f32 if x_s.dtype is not DType.f64 else DType.f64

    def fl(t: OnnxValue) -> Value:
        v = cx.ir(t)
        return v if v.type.dtype is f else cx.op("ik.cast", v, to=f)

    ws = fl(w_s)
    if w_s.rank == 1 and w_s.shape[0] != 1:
        ws = cx.op("ik.reshape", ws, shape=per_channel)
    elif w_s.rank == 1:
        ws = cx.op("ik.reshape", ws, shape=())
    scale = cx.op("ik.div", cx.op("ik.mul", fl(x_s), ws), fl(y_s))
    y = cx.op("ik.round", cx.op("ik.mul", cx.op("ik.cast", av, to=f), scale))
    y = cx.op("ik.add", y, cx.op("ik.cast", cx.ir(y_zp), to=f))
    return [OnnxValue.of(_saturate(cx, y, y_zp.dtype))]


__all__: list[str] = []


# ---------------------------------------------------------------------------
# Small ops: EyeLike, Shrink, Compress, TensorScatter


@converter("EyeLike")
def _eye_like(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    if x.rank != 2 or not all(isinstance(d, int) for d in x.shape):
        raise FrontendError(f"node '{node.name}' (EyeLike): input must be 2-D with static dims")
    dt = x.dtype
    if node.attr("dtype") is not None:
        from irkit.frontends.onnx_load import ir_dtype

        dt = ir_dtype(int(node.attr("dtype")), cx.source, f"node '{node.name}' (EyeLike) dtype")
    eye = np.eye(static_dim(x.shape[0]), static_dim(x.shape[1]), int(node.attr("k", 0)))
    return [OnnxValue.of(cx.constant(eye.astype(dt.np), dt))]


@converter("Shrink")
def _shrink(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    v, dt = cx.ir(x), x.dtype
    lambd, bias = float(node.attr("lambd", 0.5)), float(node.attr("bias", 0.0))
    lo = cx.op("ik.lt", v, cx.scalar(-lambd, dt))
    hi = cx.op("ik.gt", v, cx.scalar(lambd, dt))
    bv = cx.scalar(bias, dt)
    y = cx.op("ik.where", hi, cx.op("ik.sub", v, bv), cx.scalar(0, dt))
    return [OnnxValue.of(cx.op("ik.where", lo, cx.op("ik.add", v, bv), y))]


@converter("Compress")
def _compress(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, cond = node.req(0), node.req(1, "condition")
    if cond.known is None:
        raise Unsupported("Compress whose condition is computed at run time (its output shape depends on the data)")
    v = cx.ir(x)
    if node.attr("axis") is None:
        v = cx.op("ik.reshape", v, shape=(dim_prod(x.shape),))
        ax = 0
    else:
        ax = _axis(node, int(node.attr("axis")), x.rank)
    n = v.type.shape[ax]
    c = np.asarray(cond.known).astype(bool).reshape(-1)
    if isinstance(n, int):
        c = c[:n]
    idx = np.nonzero(c)[0].astype(np.int64)
    return [OnnxValue.of(cx.op("ik.gather", v, cx.constant(idx, DType.i64), axis=ax))]


@converter("TensorScatter")
def _tensor_scatter(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    cache, upd, widx = node.req(0, "past_cache"), node.req(1, "update"), node.input(2)
    ax = _axis(node, int(node.attr("axis", -2)), cache.rank)
    if ax == 0:
        raise FrontendError(f"node '{node.name}' (TensorScatter): axis must not be the batch axis")
    mode = node.attr("mode", "linear")
    pos = cx.op("ik.iota", shape=upd.shape, axis=ax, dtype=DType.i64)
    if widx is not None:
        w = cx.op("ik.cast", cx.ir(widx), to=DType.i64) if widx.dtype is not DType.i64 else cx.ir(widx)
        w = cx.op("ik.reshape", w, shape=(upd.shape[0],) + (1,) * (upd.rank - 1))
        pos = cx.op("ik.add", pos, w)
    if mode == "circular":
        pos = cx.op("ik.mod", pos, cx.dim_value(cache.shape[ax]))
    elif mode != "linear":
        raise FrontendError(f"node '{node.name}' (TensorScatter): unknown mode '{mode}'")
    return [OnnxValue.of(cx.op("ik.scatter_elements", cx.ir(cache), pos, cx.ir(upd), axis=ax, reduction="none"))]


@converter("ReverseSequence")
def _reverse_sequence(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, lens_t = node.req(0), node.req(1, "sequence_lens")
    t_ax, b_ax = int(node.attr("time_axis", 0)), int(node.attr("batch_axis", 1))
    lens = cx.ints(lens_t, node, "sequence_lens")
    t_n, b_n = x.shape[t_ax], x.shape[b_ax]
    if not isinstance(t_n, int) or not isinstance(b_n, int) or len(lens) != b_n:
        raise FrontendError(f"node '{node.name}' (ReverseSequence): sequence_lens must have one entry per batch")
    # A constant index map along the time axis: reversed prefix of each batch's length, the rest kept.
    idx = np.tile(np.arange(t_n, dtype=np.int64)[:, None], (1, b_n))
    for b, n in enumerate(lens):
        idx[:n, b] = np.arange(n - 1, -1, -1)
    shape = [1] * x.rank
    shape[t_ax], shape[b_ax] = t_n, b_n
    idx = idx if t_ax < b_ax else idx.T
    full = np.broadcast_to(idx.reshape(shape), static_shape(x.shape)) if all(
        isinstance(d, int) for d in x.shape) else None
    if full is None:
        raise Unsupported("ReverseSequence over dynamic dims")
    return [OnnxValue.of(cx.op("ik.gather_elements", cx.ir(x), cx.constant(np.ascontiguousarray(full), DType.i64),
                        axis=t_ax))]


@converter("BitCast")
def _bitcast(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    """BitCast-26: the same bits as another type of the same width (``ik.bitcast``, shape kept)."""
    x = node.req(0)
    to = ir_dtype(int(node.attr("to", 0)), cx.source, f"node '{node.name}' (BitCast) target type")
    if to is DType.bool or x.dtype is DType.bool:
        raise Unsupported("BitCast to or from bool (irkit's i1 has no defined bit layout)")
    if to.np.itemsize != x.dtype.np.itemsize:
        raise FrontendError(f"node '{node.name}' (BitCast): {x.dtype} and {to} differ in bit width; "
                            "BitCast needs the same width")
    if to is x.dtype:
        return [x]
    return [OnnxValue.of(cx.op("ik.bitcast", cx.ir(x), dtype=to))]


@converter("Unique", "NonMaxSuppression")
def _refused(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    """Ops irkit refuses with a reason (their output shape depends on the data)."""
    raise Unsupported(f"{node.op_type} (its output shape depends on the data)")
