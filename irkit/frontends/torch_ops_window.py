"""ATen -> irkit converters for convolution, pooling and padding modes.

Design note.  Convolutions of any rank and transposed ones map onto
``ik.conv`` (input dilation makes the transpose), except the plain 2-D
(and 1-D) case, which stays ``ik.conv2d`` so the fusion passes keep seeing
it.  Pools are ``ik.reduce_window``; an average pool divides the window sum by
a constant count computed here with NumPy from torch's rule (padding counted
or not, ceil-mode windows clipped), and adaptive average pools are a product
with a constant averaging matrix per spatial dim.  Reflect / replicate /
circular padding is a gather with constant indices (``np.pad`` computes them).
Output sizes are read from torch's metadata, never re-derived.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from irkit.frontends.torch_cx import ConvertContext, Unsupported, lazy
from irkit.frontends.torch_ops import _opname, _pair, _require, _static, converter
from irkit.ir.core import Value
from irkit.ir.types import DType


def _ints(v: Any, n: int, default: int) -> tuple[int, ...]:
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return (default,) * n
    return _pair(v, n)


# ---------------------------------------------------------------------------
# convolution


def conv_nd(cx: ConvertContext, x: Value, w: Value, bias: Any, stride: Any, padding: Any, dilation: Any, groups: int,
            transposed: bool = False, output_padding: Any = 0) -> Value:
    """torch's convolution (1-3 spatial dims, batched or not, transposed or not)."""
    dt = cx.out_dtype
    x, w = cx.cast(x, dt), cx.cast(w, dt)
    nd = w.type.rank - 2
    if nd < 1 or nd > 3:
        raise Unsupported(f"{nd}-d convolution (1 to 3 spatial dims are supported)")
    unbatched = x.type.rank == nd + 1
    if unbatched:
        x = cx.reshape(x, (1,) + x.shape)
    st, dl = _ints(stride, nd, 1), _ints(dilation, nd, 1)
    k = [_static(d, "kernel size") for d in w.shape[2:]]
    if isinstance(padding, str):
        if padding == "valid":
            lo = hi = (0,) * nd
        elif padding == "same":
            total = [dl[i] * (k[i] - 1) for i in range(nd)]
            lo, hi = tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)
        else:
            raise Unsupported(f"padding '{padding}'")
    else:
        lo = hi = _ints(padding, nd, 0)
    b = cx.cast(bias, dt) if isinstance(bias, Value) else None
    if transposed:
        op = _ints(output_padding, nd, 0)
        cin = _static(w.shape[0], "input channels")
        cout_g = _static(w.shape[1], "output channels")
        g = int(groups)
        # (Cin, Cout/g, k...) -> (Cout, Cin/g, k...), spatially flipped.
        wg = cx.reshape(w, (g, cin // g, cout_g) + tuple(k))
        wg = cx.b.transpose(wg, perm=(0, 2, 1) + tuple(range(3, 3 + nd)))
        wf = cx.reshape(wg, (g * cout_g, cin // g) + tuple(k))
        wf = cx.b.reverse(wf, axes=tuple(range(2, 2 + nd)))
        pad_lo = tuple(dl[i] * (k[i] - 1) - lo[i] for i in range(nd))
        pad_hi = tuple(dl[i] * (k[i] - 1) - hi[i] + op[i] for i in range(nd))
        if min(pad_lo + pad_hi) < 0:
            raise Unsupported("transposed convolution whose padding exceeds the kernel's reach")
        y = cx.b.conv(x, wf, b, strides=(1,) * nd, padding=pad_lo + pad_hi, dilations=dl, lhs_dilation=st,
                      groups=g)
    elif nd == 2 or nd == 1:
        if nd == 1:
            x = cx.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
            w = cx.reshape(w, (w.shape[0], w.shape[1], 1, w.shape[2]))
            st, dl, lo, hi = (1,) + st, (1,) + dl, (0,) + lo, (0,) + hi
        y = cx.b.conv2d(x, w, b, strides=st, padding=lo + hi, dilations=dl, groups=int(groups))
    else:
        y = cx.b.conv(x, w, b, strides=st, padding=lo + hi, dilations=dl, groups=int(groups))
    return cx.reshape(y, cx.out_shape)


@converter("convolution", "_convolution", "convolution_overrideable")
def _convolution(cx: ConvertContext, a: dict) -> Any:
    return conv_nd(cx, _require(a["input"], "input"), _require(a["weight"], "weight"), a.get("bias"),
                   a["stride"], a["padding"], a["dilation"], int(a["groups"]), bool(a.get("transposed")),
                   a.get("output_padding", 0))


@converter("conv1d", "conv2d", "conv3d", "conv1d.padding", "conv2d.padding", "conv3d.padding")
def _conv(cx: ConvertContext, a: dict) -> Any:
    return conv_nd(cx, _require(a["input"], "input"), _require(a["weight"], "weight"), a.get("bias"),
                   a.get("stride", 1), a.get("padding", 0), a.get("dilation", 1), int(a.get("groups", 1)))


@converter("conv_transpose1d", "conv_transpose2d.input", "conv_transpose3d.input")
def _conv_transpose(cx: ConvertContext, a: dict) -> Any:
    return conv_nd(cx, _require(a["input"], "input"), _require(a["weight"], "weight"), a.get("bias"),
                   a.get("stride", 1), a.get("padding", 0), a.get("dilation", 1), int(a.get("groups", 1)),
                   True, a.get("output_padding", 0))


# ---------------------------------------------------------------------------
# pooling


def _window_pads(cx: ConvertContext, x: Value, nd: int, k: tuple[int, ...], st: tuple[int, ...], pad: tuple[int, ...],
                 dl: tuple[int, ...]) -> tuple[int, ...]:
    """Before and after pads of every dim (after-pads grown for ceil mode to torch's output size)."""
    lead = x.type.rank - nd
    out = cx.out_shape if not isinstance(cx.meta, (tuple, list)) else cx.out_type(0).shape
    after = []
    for i in range(nd):
        d = _static(x.shape[lead + i], "pooled size")
        o = _static(out[lead + i], "pooled size")
        need = (o - 1) * st[i] + dl[i] * (k[i] - 1) + 1
        after.append(max(pad[i], need - d - pad[i]))
    return (0,) * lead + tuple(pad) + (0,) * lead + tuple(after)


def _pool_args(a: dict, nd: int) -> tuple[tuple[int, ...], ...]:
    k = _ints(a["kernel_size"], nd, 1)
    st = _ints(a.get("stride"), nd, 0)
    st = k if not any(st) else st
    pad = _ints(a.get("padding"), nd, 0)
    dl = _ints(a.get("dilation"), nd, 1)
    return k, st, pad, dl


def _nd(cx: ConvertContext) -> int:
    name = _opname(cx)
    for n in (1, 2, 3):
        if f"{n}d" in name:
            return n
    raise Unsupported(f"pool {name}")


@converter("max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "max_pool3d_with_indices",
      "max_pool1d_with_indices")
def _max_pool(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    nd = _nd(cx)
    k, st, pad, dl = _pool_args(a, nd)
    lead = x.type.rank - nd
    pads = _window_pads(cx, x, nd, k, st, pad, dl)
    xs = cx.cast(x, DType.i8) if x.dtype.is_bool else x
    y = cx.b.reduce_window(xs, kind="max", window=(1,) * lead + k, strides=(1,) * lead + st, pads=pads,
                           dilations=(1,) * lead + dl)
    y = cx.cast(y, x.dtype)
    if isinstance(cx.meta, (tuple, list)):
        return (y, lazy(lambda: _pool_indices(cx, x, nd, k, st, pads, dl)))
    return y


def _pool_indices(cx: ConvertContext, x: Value, nd: int, k: tuple[int, ...], st: tuple[int, ...], pads: tuple[int, ...],
                  dl: tuple[int, ...]) -> Value:
    """torch's max-pool indices (flat positions in each input plane): every window's
    elements gathered through a constant position table, ``ik.argmax`` picks the first
    maximum, and the table turns it back into a position."""
    if not x.dtype.is_float:
        raise Unsupported("max pooling indices of a non-float tensor")
    lead = x.type.rank - nd
    d = [_static(v, "pooled size") for v in x.shape[lead:]]
    out = [_static(v, "pooled size") for v in cx.out_type(1).shape[lead:]]
    size = int(np.prod(d))
    grids = np.meshgrid(*[np.arange(o) for o in out], *[np.arange(w) for w in k], indexing="ij")
    flat = np.zeros(grids[0].shape, dtype=np.int64)
    inside = np.ones(grids[0].shape, dtype=bool)
    for i in range(nd):
        c = grids[i] * st[i] - pads[lead + i] + grids[nd + i] * dl[i]
        inside &= (c >= 0) & (c < d[i])
        flat = flat * d[i] + np.clip(c, 0, d[i] - 1)
    n_out, n_win = int(np.prod(out)), int(np.prod(k))
    table = np.where(inside, flat, size).reshape(n_out, n_win)
    xf = cx.reshape(x, x.shape[:lead] + (size,))
    pad = cx.splat(float("-inf"), x.dtype, x.shape[:lead] + (1,))
    xf = cx.b.concat(xf, pad, axis=lead)
    win = cx.b.gather(xf, cx.b.constant(table.reshape(-1)), axis=lead)
    win = cx.reshape(win, x.shape[:lead] + (n_out, n_win))
    am = cx.b.argmax(win, axis=lead + 1, keepdims=False)
    lin = cx.b.add(am, cx.b.constant(np.arange(n_out, dtype=np.int64) * n_win))
    pos = cx.b.gather(cx.b.constant(table.reshape(-1)), lin, axis=0)
    return cx.reshape(pos, cx.out_type(1).shape)


def _avg_counts(d: int, o: int, k: int, s: int, p: int, include_pad: bool) -> np.ndarray:
    """torch's divisor for each output position of one spatial dim."""
    out = np.empty(o, dtype=np.float64)
    for i in range(o):
        start = i * s - p
        end = min(start + k, d + p)
        if include_pad:
            out[i] = end - start
        else:
            out[i] = min(end, d) - max(start, 0)
    return out


@converter("avg_pool1d", "avg_pool2d", "avg_pool3d")
def _avg_pool(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    nd = _nd(cx)
    k, st, pad, _ = _pool_args(a, nd)
    lead = x.type.rank - nd
    pads = _window_pads(cx, x, nd, k, st, pad, (1,) * nd)
    s = cx.b.reduce_window(x, kind="sum", window=(1,) * lead + k, strides=(1,) * lead + st, pads=pads)
    div = a.get("divisor_override")
    if div:
        return cx.b.div(s, cx.tensor(float(div), x.dtype))
    out = cx.out_shape
    include = bool(a.get("count_include_pad", True))
    cnt = np.ones((), dtype=np.float64)
    for i in range(nd):
        c = _avg_counts(_static(x.shape[lead + i], "pooled size"), _static(out[lead + i], "pooled size"),
                        k[i], st[i], pad[i], include)
        cnt = np.multiply.outer(cnt, c)
    cnt = cnt.reshape((1,) * lead + cnt.shape).astype(x.dtype.np)
    return cx.b.div(s, cx.b.constant(cnt))


def _adaptive_matrix(d: int, o: int) -> np.ndarray:
    """(d, o) averaging matrix of torch's adaptive pool windows [floor(i*d/o), ceil((i+1)*d/o))."""
    m = np.zeros((d, o), dtype=np.float64)
    for i in range(o):
        lo, hi = (i * d) // o, -((-(i + 1) * d) // o)
        m[lo:hi, i] = 1.0 / (hi - lo)
    return m


@converter("adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "_adaptive_avg_pool2d",
      "_adaptive_avg_pool3d")
def _adaptive_avg_pool(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    nd = _nd(cx)
    lead = x.type.rank - nd
    out = cx.out_shape
    y = x
    r = x.type.rank
    for i in range(nd):
        ax = lead + i
        d, o = _static(x.shape[ax], "pooled size"), _static(out[ax], "pooled size")
        if d == o:
            continue
        m = cx.b.constant(_adaptive_matrix(d, o).astype(x.dtype.np))
        perm = tuple(j for j in range(r) if j != ax) + (ax,)
        yt = cx.b.transpose(y, perm=perm)
        z = cx.b.matmul(yt, cx.broadcast(m, yt.shape[:-2] + m.shape)) if yt.type.rank > 2 else cx.b.matmul(yt, m)
        y = cx.b.transpose(z, perm=tuple(int(j) for j in np.argsort(perm)))
    return y


@converter("adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")
def _adaptive_max_pool(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    nd = _nd(cx)
    lead = x.type.rank - nd
    out = cx.out_type(0).shape
    sizes = [_static(x.shape[lead + i], "pooled size") for i in range(nd)]
    outs = [_static(out[lead + i], "pooled size") for i in range(nd)]
    if any(o == 0 for o in outs) or any(d == 0 for d in sizes):
        raise Unsupported("adaptive max pooling of an empty tensor")
    pos = _adaptive_positions(sizes, outs)
    windows = _adaptive_windows(cx, x, lead, sizes, pos)

    def indices() -> Value:
        # torch keeps the first maximum in scan order (a later NaN replaces it)
        nan = cx.b.isnan(windows)
        key = cx.b.where(nan, cx.tensor(float("inf"), x.dtype), windows) if x.dtype.is_float else windows
        j = cx.b.argmax(key, axis=key.type.rank - 1, keepdims=True, select_last_index=False)
        p = cx.broadcast(cx.b.constant(pos), windows.shape)
        return cx.reshape(cx.b.gather_elements(p, j, axis=key.type.rank - 1), out)

    if all(d % o == 0 for d, o in zip(sizes, outs)):
        k = tuple(d // o for d, o in zip(sizes, outs))
        y = cx.b.reduce_window(x, kind="max", window=(1,) * lead + k, strides=(1,) * lead + k)
    else:
        y = cx.reshape(cx.b.reduce_max(windows, axes=(windows.type.rank - 1,), keepdims=True), out)
    return (y, lazy(indices))


def _adaptive_positions(sizes: list[int], outs: list[int]) -> np.ndarray:
    """Flat input-plane positions of every adaptive window, ``outs + (K,)``: window ``j`` of a dim
    of size ``d`` pooled to ``o`` spans ``[floor(j*d/o), ceil((j+1)*d/o))``; shorter windows repeat
    their last position (a repeat changes neither the max nor the first position holding it)."""
    per_dim = []
    for d, o in zip(sizes, outs):
        st = [(j * d) // o for j in range(o)]
        en = [-((-(j + 1) * d) // o) for j in range(o)]
        k = max(e - s for s, e in zip(st, en))
        per_dim.append(np.array([[min(s + t, e - 1) for t in range(k)] for s, e in zip(st, en)], dtype=np.int64))
    strides = [int(np.prod(sizes[i + 1:])) for i in range(len(sizes))]
    nd = len(sizes)
    pos = np.zeros(tuple(outs) + tuple(p.shape[1] for p in per_dim), dtype=np.int64)
    for i, p in enumerate(per_dim):
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = p.shape
        pos = pos + (p * strides[i]).reshape(shape)
    return pos.reshape(tuple(outs) + (-1,))


def _adaptive_windows(cx: ConvertContext, x: Value, lead: int, sizes: list[int], pos: np.ndarray) -> Value:
    """Every window's elements, ``x.shape[:lead] + pos.shape``, by one gather of the flat planes."""
    flat = cx.reshape(x, x.shape[:lead] + (int(np.prod(sizes)),))
    return cx.b.gather(flat, cx.b.constant(pos), axis=lead)


# ---------------------------------------------------------------------------
# padding


def _pad_gather(cx: ConvertContext, x: Value, pad: list[int], mode: str) -> Value:
    """Pad by gathering constant indices (``np.pad`` of an arange computes them)."""
    r = x.type.rank
    np_modes: dict[str, Literal["reflect", "edge", "wrap"]] = {"reflect": "reflect", "replicate": "edge",
                                                               "circular": "wrap"}
    np_mode = np_modes[mode]
    for i in range(len(pad) // 2):
        ax = r - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        if lo == 0 and hi == 0:
            continue
        n = _static(x.shape[ax], "padded size")
        idx = np.arange(n, dtype=np.int64)
        # Negative pads crop (torch allows them for every mode).
        idx = idx[max(0, -lo): n - max(0, -hi)]
        if idx.size == 0 and (lo > 0 or hi > 0):
            raise Unsupported(f"{mode} padding of a dim cropped to nothing")
        idx = np.pad(idx, (max(lo, 0), max(hi, 0)), mode=np_mode) if (lo > 0 or hi > 0) else idx
        x = cx.b.gather(x, cx.b.constant(idx), axis=ax)
    return x


def _constant_pad(cx: ConvertContext, x: Value, pad: list[int], value: Any) -> Value:
    r = x.type.rank
    before, after = [0] * r, [0] * r
    for i in range(len(pad) // 2):
        before[r - 1 - i] = pad[2 * i]
        after[r - 1 - i] = pad[2 * i + 1]
    if any(p < 0 for p in before + after):
        # Negative pads crop first.
        start = tuple(max(0, -p) for p in before)
        limit = tuple(x.shape[i] - max(0, -after[i]) for i in range(r))
        x = cx.b.slice(x, start=start, limit=limit)
        before, after = [max(p, 0) for p in before], [max(p, 0) for p in after]
    if not any(before + after):
        return x
    v = 0.0 if value is None else value
    if x.dtype.is_float or isinstance(v, float) and not float(v).is_integer():
        return cx.b.pad(x, pads=tuple(before + after), value=float(v))
    return cx.b.pad(x, pads=tuple(before + after), value=float(v))


@converter("constant_pad_nd", "pad")
def _pad(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    mode = a.get("mode") or "constant"
    pad = [int(p) for p in a["pad"]]
    if mode == "constant":
        return _constant_pad(cx, x, pad, a.get("value"))
    if mode not in ("reflect", "replicate", "circular"):
        raise Unsupported(f"{mode} padding")
    return _pad_gather(cx, x, pad, mode)


@converter("reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d", "replication_pad2d",
      "replication_pad3d", "_pad_circular")
def _pad_modes(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    name = _opname(cx)
    mode = "reflect" if name.startswith("reflection") else "replicate" if name.startswith("replication") \
        else "circular"
    return _pad_gather(cx, x, [int(p) for p in a["padding" if "padding" in a else "pad"]], mode)


__all__ = ["conv_nd"]
