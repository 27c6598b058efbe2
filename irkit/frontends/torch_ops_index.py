"""ATen -> irkit converters for indexing, scatter, sorting and reordering ops.

Design note.  These converters register in the same table as
:mod:`irkit.frontends.torch_ops` (with its ``converter`` decorator) and map torch's
index ops onto the IR's ``ik.gather_elements`` / ``ik.scatter_elements`` /
``ik.scatter_nd`` / ``ik.sort`` / ``ik.topk`` / ``ik.reverse`` (issue 14's op
set).  torch and the IR agree on negative indices (they wrap); where torch
allows an index tensor smaller than the data on the other dims (``gather``,
``scatter``), the data is sliced, or full coordinates are built, so the IR op
sees ONNX's shapes.  Ops whose output size depends on the data (``nonzero``,
``masked_select``, ``unique``) are refused with :class:`DataDependent`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from irkit.frontends.torch_cx import ConvertContext, DataDependent, Unsupported, lazy
from irkit.frontends.torch_ops import _axis, _norm_index, _opname, _require, _static, converter
from irkit.ir.core import Value
from irkit.ir.types import Dim, DType, dim_prod, dim_sub


def _i64(cx: ConvertContext, v: Value) -> Value:
    return cx.cast(v, DType.i64)


def _slice_to(cx: ConvertContext, x: Value, shape: tuple[Dim, ...], skip: int | None = None) -> Value:
    """``x[:shape[0], :shape[1], ...]`` (dim ``skip`` kept whole)."""
    limit = tuple(x.shape[i] if i == skip else shape[i] for i in range(len(shape)))
    if limit == x.shape:
        return x
    return cx.b.slice(x, start=(0,) * len(shape), limit=limit)


def _coords(cx: ConvertContext, idx: Value, ax: int) -> Value:
    """Full coordinates (``idx.shape + (rank,)``) for an elementwise index on ``ax``."""
    r = idx.type.rank
    cols = []
    for d in range(r):
        c = _i64(cx, idx) if d == ax else cx.b.iota(shape=idx.shape, axis=d, dtype=DType.i64)
        cols.append(cx.reshape(c, idx.shape + (1,)))
    return cols[0] if r == 1 else cx.b.concat(*cols, axis=r)


# ---------------------------------------------------------------------------
# gather / scatter


@converter("gather", "take_along_dim")
def _gather(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    idx = _require(a.get("index", a.get("indices")), "index")
    if x.type.rank == 0:
        return cx.reshape(x, cx.out_shape)
    if _opname(cx) == "take_along_dim":
        if a.get("dim") is None:
            x = cx.reshape(x, (dim_prod(x.shape),))
            idx = cx.reshape(idx, (dim_prod(idx.shape),))
            ax = 0
        else:
            ax = _axis(a["dim"], x.type.rank)
            shape = tuple(idx.shape[i] if i == ax else cx.out_shape[i] for i in range(x.type.rank))
            idx = cx.broadcast(idx, shape)
            x = cx.broadcast(x, tuple(x.shape[i] if i == ax else cx.out_shape[i] for i in range(x.type.rank)))
    else:
        ax = _axis(a["dim"], x.type.rank)
    if idx.type.rank == 0:
        idx = cx.reshape(idx, (1,) * x.type.rank)
    x = _slice_to(cx, x, idx.shape, skip=ax)
    return cx.reshape(cx.b.gather_elements(x, idx, axis=ax), cx.out_shape)


_REDUCTIONS = {"sum": "add", "add": "add", "prod": "mul", "multiply": "mul", "amax": "max", "amin": "min"}
_IDENTITY = {"add": 0, "mul": 1, "max": float("-inf"), "min": float("inf")}


def _identity(dt: DType, red: str) -> Any:
    v = _IDENTITY[red]
    if dt.is_int and isinstance(v, float):
        info = np.iinfo(dt.np)
        return int(info.min if v < 0 else info.max)
    if dt.is_bool:
        return red in ("mul", "min")
    return v


def _scatter_into(cx: ConvertContext, x: Value, ax: int, idx: Value, upd: Value, red: str) -> Value:
    """ONNX ScatterElements of ``upd`` at ``idx`` (shapes equal) into ``x`` along ``ax``;
    full coordinates through ``ik.scatter_nd`` when ``idx`` is smaller than ``x``."""
    if any(idx.shape[i] != x.shape[i] for i in range(x.type.rank) if i != ax):
        return cx.b.scatter_nd(x, _coords(cx, idx, ax), upd, reduction=red)
    return cx.b.scatter_elements(x, idx, upd, axis=ax, reduction=red)


@converter("scatter", "scatter_add")
def _scatter(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.cast(_require(a["self"], "input"), dt)
    idx = _require(a["index"], "index")
    r = x.type.rank
    if r == 0:
        x, idx = cx.reshape(x, (1,)), cx.reshape(idx, (1,))
    ax = _axis(a["dim"], x.type.rank)
    src = a.get("src", a.get("value"))
    if isinstance(src, Value):
        upd = cx.cast(src, dt)
        upd = cx.reshape(upd, (1,)) if upd.type.rank == 0 else upd
        upd = _slice_to(cx, upd, idx.shape)
    else:
        upd = cx.splat(src, dt, idx.shape)
    red = "add" if _opname(cx) == "scatter_add" else _REDUCTIONS.get(a.get("reduce") or "", "none")
    if a.get("reduce") not in (None, "add", "multiply") and _opname(cx) == "scatter":
        raise Unsupported(f"scatter reduce '{a.get('reduce')}'")
    if idx.shape and 0 in idx.shape:
        out = x
    else:
        out = _scatter_into(cx, x, ax, idx, upd, red)
    return cx.reshape(out, cx.out_shape)


@converter("scatter_reduce.two")
def _scatter_reduce(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.cast(_require(a["self"], "input"), dt)
    idx = _require(a["index"], "index")
    src = cx.cast(_require(a["src"], "src"), dt)
    if x.type.rank == 0:
        x, idx, src = (cx.reshape(t, (1,)) for t in (x, idx, src))
    ax = _axis(a["dim"], x.type.rank)
    src = _slice_to(cx, src, idx.shape)
    reduce = a["reduce"]
    include_self = bool(a.get("include_self", True))
    if 0 in idx.shape:
        return cx.reshape(x, cx.out_shape)
    red = "add" if reduce == "mean" else _REDUCTIONS.get(reduce)
    if red is None:
        raise Unsupported(f"scatter_reduce '{reduce}'")
    base = x
    if not include_self:
        # Positions that receive an update start from the reduction's identity.
        base = _scatter_into(cx, x, ax, idx, cx.splat(_identity(dt, red), dt, idx.shape), "none")
    out = _scatter_into(cx, base, ax, idx, src, red)
    if reduce == "mean":
        zeros = cx.splat(0, dt, x.shape)
        cnt = _scatter_into(cx, zeros, ax, idx, cx.splat(1, dt, idx.shape), "add")
        if include_self:
            cnt = cx.b.add(cnt, cx.tensor(1, dt))
        safe = cx.b.max(cnt, cx.tensor(1, dt))
        q = cx.b.floor_div(out, safe) if dt.is_int else cx.b.div(out, safe)
        out = cx.b.where(cx.b.eq(cnt, cx.tensor(0, dt)), x, q)
    return cx.reshape(out, cx.out_shape)


@converter("index_reduce")
def _index_reduce(cx: ConvertContext, a: dict) -> Any:
    # index_reduce along dim == scatter_reduce with the index laid along that dim of source.
    x = _require(a["self"], "input")
    src = _require(a["source"], "source")
    if x.type.rank == 0:
        out = _index_reduce(cx, {**a, "self": cx.reshape(x, (1,)), "source": cx.reshape(src, (1,)),
                                 "index": cx.reshape(_require(a["index"], "index"), (1,)), "dim": 0})
        return cx.reshape(out, ())
    ax = _axis(a["dim"], x.type.rank)
    idx = _require(a["index"], "index")
    idx = cx.reshape(idx, tuple(src.shape[i] if i == ax else 1 for i in range(src.type.rank)))
    idx = cx.broadcast(idx, src.shape)
    return _scatter_reduce(cx, {"self": x, "index": idx, "src": src, "dim": ax, "reduce": a["reduce"],
                                "include_self": a.get("include_self", True)})


@converter("diagonal_scatter")
def _diagonal_scatter(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    src = cx.cast(_require(a["src"], "src"), x.dtype)
    r = x.type.rank
    d1, d2 = _axis(a.get("dim1", 0), r), _axis(a.get("dim2", 1), r)
    off = int(a.get("offset", 0))
    n1, n2 = _static(x.shape[d1], "diagonal size"), _static(x.shape[d2], "diagonal size")
    r0, c0 = max(0, -off), max(0, off)
    k = max(0, min(n1 - r0, n2 - c0))
    if k == 0:
        return x
    # Mark the diagonal with a constant mask, and spread src over it with a broadcast.
    mask = np.zeros((n1, n2), dtype=bool)
    mask[np.arange(k) + r0, np.arange(k) + c0] = True
    rest = [i for i in range(r) if i not in (d1, d2)]
    # src is rest... + (k,): place it on rows (i + r0) by a one-hot product along the diagonal.
    sel = np.zeros((k, n1, n2), dtype=x.dtype.np)
    sel[np.arange(k), np.arange(k) + r0, np.arange(k) + c0] = 1
    spread = cx.b.contract(src, cx.b.constant(sel), lhs_batch=(), rhs_batch=(),
                           lhs_contract=(src.type.rank - 1,), rhs_contract=(0,))
    # spread: rest... + (n1, n2); move back to x's layout.
    order = rest + [d1, d2]
    inv = tuple(int(i) for i in np.argsort(order))
    spread = cx.b.transpose(spread, perm=inv) if inv != tuple(range(r)) else spread
    mshape = [1] * r
    mshape[d1], mshape[d2] = n1, n2
    m = cx.b.constant(mask.reshape([n1 if i == d1 else n2 if i == d2 else 1 for i in range(r)])
                      if d1 < d2 else mask.T.reshape([n1 if i == d1 else n2 if i == d2 else 1 for i in range(r)]))
    return cx.b.where(cx.broadcast(m, x.shape), spread, x)


def _broadcast_indices(cx: ConvertContext, x: Value, indices: list[Any]) -> tuple[list[int], list[Value]]:
    """The positions and i64 values of the tensor indices of ``x[indices]``, broadcast together."""
    pos = [i for i, t in enumerate(indices) if t is not None]
    ts = []
    for i in pos:
        t = indices[i]
        if not isinstance(t, Value):
            raise Unsupported("index with a non-tensor index")
        if t.dtype.is_bool:
            raise DataDependent("boolean-mask indexing: the number of selected elements depends on the data")
        ts.append(_i64(cx, t))
    shape: tuple[Dim, ...] = ()
    for t in ts:
        shape = _broadcast_shape(shape, t.shape)
    return pos, [cx.broadcast(t, tuple(shape)) for t in ts]


def _broadcast_shape(x: tuple[Dim, ...], y: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """NumPy broadcasting of two shapes whose dims may be symbolic."""
    n = max(len(x), len(y))
    x, y = (1,) * (n - len(x)) + tuple(x), (1,) * (n - len(y)) + tuple(y)
    out: list[Dim] = []
    for a, b in zip(x, y):
        if a == b or b == 1:
            out.append(a)
        elif a == 1:
            out.append(b)
        else:
            raise Unsupported(f"index shapes {x} and {y} do not broadcast")
    return tuple(out)


@converter("index_put", "_unsafe_index_put", "index_put_")
def _index_put(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.cast(_require(a["self"], "input"), dt)
    indices = list(a["indices"]) + [None] * (x.type.rank - len(a["indices"]))
    vals = a["values"]
    acc = bool(a.get("accumulate"))
    masks = [i for i, t in enumerate(indices) if isinstance(t, Value) and t.dtype.is_bool]
    if masks:
        if masks != [0] or any(t is not None for t in indices[1:]):
            raise DataDependent("boolean-mask indexing mixed with other indices")
        return _mask_put(cx, x, indices[0], vals, acc)
    pos, ts = _broadcast_indices(cx, x, indices)
    if not pos:
        raise Unsupported("index_put without index tensors")
    bshape = ts[0].shape
    rest = [i for i in range(x.type.rank) if i not in pos]
    # Move the indexed dims to the front: x[idx...] has shape bshape + rest.
    perm = tuple(pos) + tuple(rest)
    xp = cx.b.transpose(x, perm=perm) if perm != tuple(range(x.type.rank)) else x
    rest_shape = tuple(x.shape[i] for i in rest)
    # torch broadcasts values to x[indices]'s shape, which puts the index dims where the
    # (adjacent) index tensors were, or first when they are separated.
    adjacent = pos == list(range(pos[0], pos[0] + len(pos)))
    lead = pos[0] if adjacent else 0
    res_shape = rest_shape[:lead] + tuple(bshape) + rest_shape[lead:]
    v = cx.broadcast(cx.tensor(vals, dt) if not isinstance(vals, Value) else cx.cast(vals, dt), res_shape)
    if lead:
        nb = len(bshape)
        vperm = tuple(range(lead, lead + nb)) + tuple(range(lead)) + tuple(range(lead + nb, len(res_shape)))
        v = cx.b.transpose(v, perm=vperm)
    coords = cx.b.concat(*[cx.reshape(t, tuple(bshape) + (1,)) for t in ts], axis=len(bshape)) \
        if len(ts) > 1 else cx.reshape(ts[0], tuple(bshape) + (1,))
    out = cx.b.scatter_nd(xp, coords, v, reduction="add" if acc else "none")
    if perm != tuple(range(x.type.rank)):
        out = cx.b.transpose(out, perm=tuple(int(i) for i in np.argsort(perm)))
    return out


def _mask_put(cx: ConvertContext, x: Value, mask: Value, vals: Any, acc: bool) -> Value:
    """``x[mask] = vals`` (or ``+=``): the k-th True row takes the k-th row of ``vals``
    (a running count of the mask numbers the rows), or ``vals`` broadcast when it has one row."""
    dt = x.dtype
    m = mask.type.rank
    lead, rest = x.shape[:m], x.shape[m:]
    n = dim_prod(lead)
    v = cx.tensor(vals, dt) if not isinstance(vals, Value) else cx.cast(vals, dt)
    if v.type.rank <= len(rest) or v.shape[0] == 1:
        rows = cx.broadcast(cx.reshape(v, v.shape[1:]) if v.type.rank > len(rest) else v, rest)
        rows = cx.broadcast(cx.reshape(rows, (1,) * m + rows.shape), x.shape)
    else:
        v = cx.broadcast(v, v.shape[:1] + rest)
        flat = cx.reshape(cx.cast(mask, DType.i64), (n,))
        pos = cx.b.max(cx.b.sub(cx.b.cumsum(flat, axis=0), cx.tensor(1, DType.i64)), cx.tensor(0, DType.i64))
        rows = cx.reshape(cx.b.gather(v, pos, axis=0), x.shape)
    mb = cx.broadcast(cx.reshape(mask, mask.shape + (1,) * len(rest)), x.shape)
    return cx.b.where(mb, cx.b.add(x, rows) if acc else rows, x)


def _index_dim(cx: ConvertContext, a: dict, values: Any, acc: bool) -> Value:
    """``x[..., index, ...] = values`` (or ``+=``) on dim ``a["dim"]``."""
    x = _require(a["self"], "input")
    idx = _require(a["index"], "index")
    if x.type.rank == 0:
        v = cx.reshape(values, (1,)) if isinstance(values, Value) else values
        out = _index_put(cx, {"self": cx.reshape(x, (1,)), "indices": [cx.reshape(idx, (1,))],
                              "values": v, "accumulate": acc})
        return cx.reshape(out, ())
    ax = _axis(a["dim"], x.type.rank)
    idx = cx.reshape(idx, (dim_prod(idx.shape),)) if idx.type.rank != 1 else idx
    if isinstance(values, Value) and values.type.rank == x.type.rank:
        # One scatter along the dim (no transposes around a scatter_nd: a KV cache written by
        # index_copy stays in its layout and can be updated in place).
        src = cx.cast(values, x.dtype)
        r = x.type.rank
        at = cx.broadcast(cx.reshape(cx.cast(idx, DType.i64), tuple(idx.shape[0] if i == ax else 1 for i in range(r))),
                          src.shape)
        return cx.b.scatter_elements(x, at, src, axis=ax, reduction="add" if acc else "none")
    return _index_put(cx, {"self": x, "indices": [None] * ax + [idx], "values": values, "accumulate": acc})


@converter("index_copy")
def _index_copy(cx: ConvertContext, a: dict) -> Any:
    return _index_dim(cx, a, a["source"], False)


@converter("index_add")
def _index_add(cx: ConvertContext, a: dict) -> Any:
    src = a["source"]
    alpha = a.get("alpha")
    if alpha is not None and alpha != 1:
        src = cx.b.mul(cx.cast(src, cx.out_dtype), cx.tensor(alpha, cx.out_dtype))
    return _index_dim(cx, a, src, True)


@converter("index_fill")
def _index_fill(cx: ConvertContext, a: dict) -> Any:
    return _index_dim(cx, a, a["value"], False)


@converter("masked_scatter")
def _masked_scatter(cx: ConvertContext, a: dict) -> Any:
    # The k-th True of the (broadcast) mask, in row-major order, takes source's k-th element:
    # a running count of the mask gives each position its source index.
    dt = cx.out_dtype
    shape = cx.out_shape
    x = cx.broadcast(cx.cast(_require(a["self"], "input"), dt), shape)
    mask = cx.broadcast(_require(a["mask"], "mask"), shape)
    src = cx.cast(_require(a["source"], "source"), dt)
    n = dim_prod(shape)
    if n == 0:
        return x
    flat = cx.reshape(cx.cast(mask, DType.i64), (n,))
    pos = cx.b.sub(cx.b.cumsum(flat, axis=0), cx.tensor(1, DType.i64))
    pos = cx.b.max(pos, cx.tensor(0, DType.i64))
    srcf = cx.reshape(src, (dim_prod(src.shape),))
    picked = cx.reshape(cx.b.gather(srcf, pos, axis=0), shape)
    return cx.b.where(mask, picked, x)


def _scatter_slice(cx: ConvertContext, x: Value, src: Value, ax: int, start: Dim, step: int) -> Value:
    """``x`` with positions ``start, start+step, ...`` on ``ax`` replaced by ``src``."""
    src = cx.cast(src, x.dtype)
    n = src.shape[ax]
    if n == 0:
        return x
    idx = cx.b.iota(shape=src.shape, axis=ax, dtype=DType.i64)
    if step != 1:
        idx = cx.b.mul(idx, cx.tensor(step, DType.i64))
    idx = cx.b.add(idx, cx.dim_tensor(start) if not isinstance(start, int) else cx.tensor(start, DType.i64))
    return _scatter_into(cx, x, ax, idx, src, "none")


@converter("slice_scatter")
def _slice_scatter(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    ax = _axis(a.get("dim", 0), x.type.rank)
    start = a.get("start")
    start = 0 if start is None else _norm_index(start, x.shape[ax])
    return _scatter_slice(cx, x, _require(a["src"], "src"), ax, start, int(a.get("step") or 1))


@converter("select_scatter")
def _select_scatter(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    ax = _axis(a["dim"], x.type.rank)
    i = int(a["index"])
    if i < 0:
        i += _static(x.shape[ax], "select size")
    src = _require(a["src"], "src")
    src = cx.reshape(src, src.shape[:ax] + (1,) + src.shape[ax:])
    return _scatter_slice(cx, x, src, ax, i, 1)


# ---------------------------------------------------------------------------
# reordering


@converter("flip", "fliplr", "flipud")
def _flip(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    name = _opname(cx)
    dims = a.get("dims") if name == "flip" else ([1] if name == "fliplr" else [0])
    axes = tuple(sorted({_axis(d, max(x.type.rank, 1)) for d in dims or ()}))
    if not axes or x.type.rank == 0:
        return x
    return cx.b.reverse(x, axes=axes)


@converter("roll")
def _roll(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    shifts = [int(s) for s in (a["shifts"] if isinstance(a["shifts"], (list, tuple)) else [a["shifts"]])]
    dims = a.get("dims") or []
    dims = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    if not dims:
        flat = cx.reshape(x, (dim_prod(x.shape),))
        return cx.reshape(_roll1(cx, flat, shifts[0], 0), x.shape)
    for s, d in zip(shifts, dims):
        x = _roll1(cx, x, s, _axis(d, x.type.rank))
    return x


def _roll1(cx: ConvertContext, x: Value, shift: int, ax: int) -> Value:
    n = _static(x.shape[ax], "rolled size")
    if n == 0:
        return x
    k = shift % n
    if k == 0:
        return x
    tail, head = cx.b.split(x, axis=ax, sizes=(n - k, k))
    return cx.b.concat(head, tail, axis=ax)


@converter("diff")
def _diff(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    ax = _axis(a.get("dim", -1), x.type.rank)
    parts = [p for p in (a.get("prepend"), x, a.get("append")) if p is not None]
    if len(parts) > 1:
        dt = x.dtype
        parts = [cx.broadcast(cx.cast(p, dt), x.shape[:ax] + (p.shape[ax] if p.type.rank else 1,) + x.shape[ax + 1:])
                 if isinstance(p, Value) else cx.splat(p, dt, x.shape[:ax] + (1,) + x.shape[ax + 1:]) for p in parts]
        x = cx.b.concat(*parts, axis=ax)
    for _ in range(int(a.get("n", 1))):
        d = x.shape[ax]
        if isinstance(d, int) and d <= 1:
            x = cx.b.slice(x, start=(0,) * x.type.rank, limit=x.shape[:ax] + (0,) + x.shape[ax + 1:])
            continue
        r = x.type.rank
        hi = cx.b.slice(x, start=tuple(1 if i == ax else 0 for i in range(r)), limit=x.shape)
        lo = cx.b.slice(x, start=(0,) * r, limit=x.shape[:ax] + (dim_sub(d, 1),) + x.shape[ax + 1:])
        x = cx.b.xor(hi, lo) if x.dtype.is_bool else cx.b.sub(hi, lo)
    return x


# ---------------------------------------------------------------------------
# sorting


@converter("sort", "sort.stable", "argsort", "argsort.stable", "msort")
def _sort(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    name = _opname(cx)
    if x.type.rank == 0:
        return x if name == "msort" else (cx.splat(0, DType.i64, ()) if name == "argsort"
                                          else (x, cx.splat(0, DType.i64, ())))
    ax = 0 if name == "msort" else _axis(a.get("dim", -1), x.type.rank)
    desc = bool(a.get("descending") or False)
    xs = cx.cast(x, DType.i8) if x.dtype.is_bool else x
    vals, idx = cx.b.sort(xs, axis=ax, descending=desc)
    vals = cx.cast(vals, x.dtype)
    if name == "argsort":
        return idx
    if name == "msort":
        return vals
    return (vals, idx)


@converter("topk")
def _topk(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    k = int(a["k"])
    if x.type.rank == 0:
        return (x, cx.splat(0, DType.i64, ()))
    ax = _axis(a.get("dim", -1), x.type.rank)
    vals, idx = cx.b.topk(x, k=k, axis=ax, largest=bool(a.get("largest", True)), sorted=True)
    return (vals, idx)


def _kth(cx: ConvertContext, x: Value, ax: int, k: int, keep: bool) -> tuple[Value, Any]:
    """The k-th smallest along ``ax`` (0-based) and its index."""
    vals, idx = cx.b.sort(x, axis=ax)
    r = x.type.rank
    start = tuple(k if i == ax else 0 for i in range(r))
    limit = tuple(k + 1 if i == ax else x.shape[i] for i in range(r))
    out_shape = x.shape if keep else x.shape[:ax] + x.shape[ax + 1:]
    out_shape = tuple(1 if (keep and i == ax) else d for i, d in enumerate(out_shape))
    v = cx.reshape(cx.b.slice(vals, start=start, limit=limit), out_shape)
    return v, lazy(lambda: cx.reshape(cx.b.slice(idx, start=start, limit=limit), out_shape))


@converter("kthvalue")
def _kthvalue(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    if x.type.rank == 0:
        return (x, cx.splat(0, DType.i64, ()))
    ax = _axis(a.get("dim", -1), x.type.rank)
    return _kth(cx, x, ax, int(a["k"]) - 1, bool(a.get("keepdim")))


@converter("median", "nanmedian")
def _median(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    dim = a.get("dim")
    if _opname(cx) == "nanmedian" and x.dtype.is_float:
        return _nanmedian(cx, x, dim, bool(a.get("keepdim")))
    if dim is not None and x.type.rank == 0:
        return (x, cx.splat(0, DType.i64, ()))
    if dim is None:
        flat = cx.reshape(x, (dim_prod(x.shape),))
        n = _static(flat.shape[0], "median size")
        v, _ = _kth(cx, flat, 0, (n - 1) // 2, False)
        return v
    ax = _axis(dim, x.type.rank)
    n = _static(x.shape[ax], "median size")
    # torch's median is the lower one; NaN sorts last and propagates as the median.
    v, i = _kth(cx, x, ax, (n - 1) // 2, bool(a.get("keepdim")))
    if x.dtype.is_float:
        anynan = cx.b.reduce_max(cx.cast(cx.b.isnan(x), DType.i8), axes=(ax,), keepdims=bool(a.get("keepdim")))
        v = cx.b.where(cx.cast(anynan, DType.bool), cx.tensor(float("nan"), x.dtype), v)
        i = lazy(lambda: _unsupported("median's index with NaN present"))
    return (v, i)


def _nanmedian(cx: ConvertContext, x: Value, dim: Any, keep: bool) -> Any:
    """The lower median of the non-NaN values: sort (NaN last), then pick position
    ``(count - 1) // 2`` of each row, where ``count`` is its number of non-NaN values (an
    all-NaN row gives NaN at position 0)."""
    if dim is None:
        x = cx.reshape(x, (dim_prod(x.shape),))
        ax, keep = 0, False
    elif x.type.rank == 0:
        return (x, cx.splat(0, DType.i64, ()))
    else:
        ax = _axis(dim, x.type.rank)
    vals, idx = cx.b.sort(x, axis=ax)
    present = cx.b.create("ik.not", [cx.b.isnan(x)]).results[0]
    count = cx.b.reduce_sum(cx.cast(present, DType.i64), axes=(ax,), keepdims=True)
    k = cx.b.max(cx.b.floor_div(cx.b.sub(count, cx.tensor(1, DType.i64)), cx.tensor(2, DType.i64)),
                 cx.tensor(0, DType.i64))
    out_shape = x.shape[:ax] + ((1,) if keep else ()) + x.shape[ax + 1:]
    v = cx.reshape(cx.b.gather_elements(vals, k, axis=ax), out_shape)
    if dim is None:
        return v
    return (v, lazy(lambda: cx.reshape(cx.b.gather_elements(idx, k, axis=ax), out_shape)))


@converter("mode")
def _mode(cx: ConvertContext, a: dict) -> Any:
    """The most frequent value along ``dim`` (the smallest among equally frequent ones) and the
    last position holding it, as torch's CPU kernel: a pairwise compare counts each value."""
    x = _require(a["self"], "input")
    if x.type.rank == 0:
        return (x, cx.splat(0, DType.i64, ()))
    ax = _axis(a.get("dim", -1), x.type.rank)
    keep = bool(a.get("keepdim"))
    r = x.type.rank
    n = _static(x.shape[ax], "mode size")
    if n == 0:
        raise Unsupported("mode of an empty dim")
    pair = cx.b.eq(cx.reshape(x, x.shape[:ax + 1] + (1,) + x.shape[ax + 1:]),
                   cx.reshape(x, x.shape[:ax] + (1,) + x.shape[ax:]))
    count = cx.b.reduce_sum(cx.cast(pair, DType.i64), axes=(ax + 1,), keepdims=False)
    best = cx.b.reduce_max(count, axes=(ax,), keepdims=True)
    if x.dtype.is_float:
        big = cx.tensor(float("inf"), x.dtype)
    elif x.dtype.is_bool:
        raise Unsupported("mode of a boolean tensor")
    else:
        big = cx.tensor(int(np.iinfo(x.dtype.np).max), x.dtype)
    v = cx.b.reduce_min(cx.b.where(cx.b.eq(count, best), x, big), axes=(ax,), keepdims=True)
    pos = cx.b.iota(shape=tuple(n if i == ax else 1 for i in range(r)), axis=ax, dtype=DType.i64)
    at = cx.b.where(cx.b.eq(x, v), pos, cx.tensor(-1, DType.i64))
    i = cx.b.reduce_max(at, axes=(ax,), keepdims=keep)
    return (v if keep else cx.reshape(v, x.shape[:ax] + x.shape[ax + 1:]), i)


def _unsupported(what: str) -> Any:
    raise Unsupported(what)


@converter("searchsorted.Tensor", "bucketize.Tensor")
def _searchsorted(cx: ConvertContext, a: dict) -> Any:
    # The insertion point of v is how many boundaries lie before it: a compare
    # against every boundary and a sum, exact for any sizes.
    name = _opname(cx)
    if name == "bucketize":
        seq, v = _require(a["boundaries"], "boundaries"), _require(a["self"], "input")
    else:
        seq, v = _require(a["sorted_sequence"], "sorted_sequence"), a["self"]
        if not isinstance(v, Value):
            v = cx.tensor(v, seq.dtype)
        if a.get("sorter") is not None:
            raise Unsupported("searchsorted with a sorter")
    side = a.get("side")
    right = bool(a.get("right")) or side == "right"
    dt = DType.f64 if (seq.dtype.is_float or v.dtype.is_float) else DType.i64
    seq, v = cx.cast(seq, dt), cx.cast(v, dt)
    if seq.type.rank <= 1:
        b = cx.reshape(seq, (1,) * v.type.rank + seq.shape[-1:])
        vv = cx.reshape(v, v.shape + (1,))
    else:
        b = cx.reshape(seq, seq.shape[:-1] + (1,) + seq.shape[-1:])
        vv = cx.reshape(v, v.shape + (1,))
    before = cx.b.le(b, vv) if right else cx.b.lt(b, vv)
    r = before.type.rank
    out = cx.b.reduce_sum(cx.cast(before, DType.i64), axes=(r - 1,), keepdims=False)
    return cx.cast(out, cx.out_dtype)


@converter("searchsorted.Scalar")
def _searchsorted_scalar(cx: ConvertContext, a: dict) -> Any:
    return _searchsorted(cx, a)


# ---------------------------------------------------------------------------
# views and data-dependent ops


@converter("diagonal", "diagonal_copy", "linalg_diagonal")
def _diagonal(cx: ConvertContext, a: dict) -> Any:
    x = _require(a.get("self", a.get("A")), "input")
    r = x.type.rank
    lin = _opname(cx) == "linalg_diagonal"
    d1, d2 = _axis(a.get("dim1", -2 if lin else 0), r), _axis(a.get("dim2", -1 if lin else 1), r)
    off = int(a.get("offset", 0))
    rest = [i for i in range(r) if i not in (d1, d2)]
    xt = cx.b.transpose(x, perm=tuple(rest) + (d1, d2)) if tuple(rest) + (d1, d2) != tuple(range(r)) else x
    n1, n2 = _static(x.shape[d1], "diagonal size"), _static(x.shape[d2], "diagonal size")
    k = cx.out_shape[-1]
    k = _static(k, "diagonal length")
    r0, c0 = max(0, -off), max(0, off)
    pos = np.array([(i + r0) * n2 + (i + c0) for i in range(k)], dtype=np.int64)
    flat = cx.reshape(xt, xt.shape[:-2] + (n1 * n2,))
    return cx.b.gather(flat, cx.b.constant(pos), axis=len(rest))


@converter("as_strided", "as_strided_copy")
def _as_strided(cx: ConvertContext, a: dict) -> Any:
    # On the contiguous tensor the graph holds, a strided view is a gather of
    # constant flat positions.
    x = _require(a["self"], "input")
    size = [_static(cx.dim(s), "as_strided size") for s in a["size"]]
    stride = [int(s) for s in a["stride"]]
    off = int(a.get("storage_offset") or 0)
    pos = np.full(size, off, dtype=np.int64) if size else np.array(off, dtype=np.int64)
    for i, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[i] = n
        pos = pos + (np.arange(n, dtype=np.int64) * st).reshape(shape)
    flat = cx.reshape(x, (dim_prod(x.shape),))
    total = _static(flat.shape[0], "as_strided input size")
    if pos.size and (pos.min() < 0 or pos.max() >= total):
        raise Unsupported("as_strided reaches outside the tensor's own elements")
    return cx.b.gather(flat, cx.b.constant(pos), axis=0)


@converter("broadcast_tensors")
def _broadcast_tensors(cx: ConvertContext, a: dict) -> Any:
    ts = [_require(t, "tensor") for t in a["tensors"]]
    return tuple(cx.broadcast(t, cx.out_type(i).shape) for i, t in enumerate(ts))


@converter("histc")
def _histc(cx: ConvertContext, a: dict) -> Any:
    # Bin i counts lo + i*w <= x < lo + (i+1)*w (the last bin includes hi); values outside
    # [lo, hi] are ignored.  A one-hot compare against every bin and a sum: static size.
    x = _require(a["self"], "input")
    dt = x.dtype
    bins = int(a.get("bins", 100))
    lo, hi = float(a.get("min", 0) or 0), float(a.get("max", 0) or 0)
    flat = cx.reshape(x, (dim_prod(x.shape),))
    if lo == hi:
        if lo != 0 or hi != 0:
            lo, hi = lo - 1, hi + 1  # torch widens a degenerate range by 1 each way
            lo_v, hi_v = cx.tensor(lo, dt), cx.tensor(hi, dt)
        else:
            lo_v = cx.b.reduce_min(flat, axes=(0,), keepdims=False)
            hi_v = cx.b.reduce_max(flat, axes=(0,), keepdims=False)
            same = cx.b.eq(lo_v, hi_v)
            lo_v = cx.b.where(same, cx.b.sub(lo_v, cx.tensor(1.0, dt)), lo_v)
            hi_v = cx.b.where(same, cx.b.add(hi_v, cx.tensor(1.0, dt)), hi_v)
    else:
        lo_v, hi_v = cx.tensor(lo, dt), cx.tensor(hi, dt)
    pos = cx.b.div(cx.b.mul(cx.b.sub(flat, lo_v), cx.tensor(float(bins), dt)), cx.b.sub(hi_v, lo_v))
    idx = cx.b.min(cx.cast(cx.b.floor(pos), DType.i64), cx.tensor(bins - 1, DType.i64))
    inside = _and2(cx, cx.b.ge(flat, lo_v), cx.b.le(flat, hi_v))
    idx = cx.b.where(inside, idx, cx.tensor(-1, DType.i64))
    onehot = cx.b.eq(cx.reshape(idx, idx.shape + (1,)), cx.b.iota(shape=(1, bins), axis=1, dtype=DType.i64))
    return cx.cast(cx.b.reduce_sum(cx.cast(onehot, dt), axes=(0,), keepdims=False), cx.out_dtype)


def _and2(cx: ConvertContext, x: Value, y: Value) -> Value:
    return cx.b.create("ik.and", [x, y]).results[0]


@converter("meshgrid", "meshgrid.indexing")
def _meshgrid(cx: ConvertContext, a: dict) -> Any:
    ts = [_require(t, "tensor") for t in a["tensors"]]
    xy = a.get("indexing") == "xy" and len(ts) >= 2
    out = []
    for i, t in enumerate(ts):
        shape = cx.out_type(i).shape
        pos = i
        if xy and i < 2:
            pos = 1 - i  # 'xy' swaps the first two output dims
        v = cx.reshape(t, tuple(shape[j] if j == pos else 1 for j in range(len(shape))))
        out.append(cx.broadcast(v, shape))
    return tuple(out)


@converter("put")
def _put(cx: ConvertContext, a: dict) -> Any:
    """``self`` seen flat, ``source`` written (or added, ``accumulate``) at the flat ``index``
    (negative counts from the end; a repeated index keeps the last write)."""
    x = _require(a["self"], "input")
    idx = cx.cast(_require(a["index"], "index"), DType.i64)
    src = cx.cast(_require(a["source"], "source"), x.dtype)
    n = dim_prod(x.shape)
    flat = cx.reshape(x, (n,))
    k = dim_prod(idx.shape)
    out = cx.b.scatter_elements(flat, cx.reshape(idx, (k,)), cx.reshape(src, (k,)), axis=0,
                                reduction="add" if a.get("accumulate") else "none")
    return cx.reshape(out, x.shape)


@converter("nonzero_static")
def _nonzero_static(cx: ConvertContext, a: dict) -> Any:
    """The coordinates of the first ``size`` nonzero elements (row-major), rows past the count
    filled with ``fill_value``: the k-th nonzero is the element whose running count is k."""
    x = _require(a["self"], "input")
    size = _static(cx.dim(a["size"]), "nonzero_static size")
    fill = int(a.get("fill_value", -1))
    shape = [_static(d, "nonzero_static input size") for d in x.shape]
    n = int(np.prod(shape)) if shape else 1
    r = max(len(shape), 0)
    flat = cx.reshape(x, (n,))
    nz = cx.b.ne(flat, cx.tensor(0, flat.dtype)) if not flat.dtype.is_bool else flat
    rank = cx.b.sub(cx.b.cumsum(cx.cast(nz, DType.i64), axis=0, reverse=False, exclusive=False),
                    cx.tensor(1, DType.i64))
    slot = cx.b.iota(shape=(size, 1), axis=0, dtype=DType.i64)
    hit = cx.b.create("ik.and", [cx.b.eq(cx.reshape(rank, (1, n)), slot),
                                 cx.reshape(nz, (1, n))]).results[0]  # (size, n)
    pos = cx.b.iota(shape=(1, n), axis=1, dtype=DType.i64)
    where = cx.b.reduce_sum(cx.b.where(hit, pos, cx.tensor(0, DType.i64)), axes=(1,), keepdims=True)
    found = cx.b.reduce_max(cx.cast(hit, DType.i64), axes=(1,), keepdims=True)
    strides = np.array([int(np.prod(shape[i + 1:])) for i in range(r)], dtype=np.int64).reshape(1, r)
    dims = np.array(shape, dtype=np.int64).reshape(1, r)
    coords = cx.b.mod(cx.b.floor_div(where, cx.b.constant(strides)), cx.b.constant(dims))
    out = cx.b.where(cx.b.eq(found, cx.tensor(1, DType.i64)), coords, cx.tensor(fill, DType.i64))
    return cx.cast(out, cx.out_dtype)


@converter("nonzero", "argwhere", "masked_select", "_unique", "_unique2",
      "unique_dim", "unique_consecutive", "nonzero_numpy", "_local_scalar_dense", "item")
def _data_dependent(cx: ConvertContext, a: dict) -> Any:
    name = _opname(cx)
    if name in ("_local_scalar_dense", "item"):
        raise DataDependent("a tensor read back as a Python number (.item()) makes later sizes or "
                            "control flow depend on the data; keep it a tensor")
    raise DataDependent(f"{name}'s output size depends on the data; the IR has static or "
                        "symbolic shapes only (use a mask with torch.where instead)")


__all__: list[str] = []
