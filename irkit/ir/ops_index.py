"""Indexing, scatter, reversal and sorting ops (ONNX, torch and XLA spellings meet here).

Design note: every op here is defined once with ``register_op(OpDef(...))`` like the
rest of the op set (see :mod:`irkit.ir.ops`); this module only groups a family.
Index operands are any integer type.  Negative indices wrap (``i + dim``), as ONNX,
NumPy and torch define them; an index outside ``[-dim, dim)`` is an error in the
reference (IndexError naming the range), never clamped silently — clamping is XLA's
rule only for ``dynamic_slice`` and ``dynamic_update_slice``, whose starts are
clamped by definition.  Scatters with repeated indices and ``reduction = "none"``
keep the last update in row-major order of the indices.  Sorting is stable; NaN sorts
last ascending and first descending (NaN is the largest key), and ``topk`` breaks ties
by the lower index (ONNX TopK).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from irkit.ir.ops import (
    AttrSpec,
    Cost,
    OpDef,
    OpError,
    _f,
    _move_cost,
    _nbytes,
    _numel,
    _out,
    register_op,
    wrap_indices,
)
from irkit.ir.types import Dim, DType, TensorType, normalize_axis, shape_str

REDUCTIONS = ("none", "add", "mul", "max", "min")


def _axis(a: Any, rank: int) -> int:
    try:
        return normalize_axis(a, rank)
    except ValueError as e:
        raise OpError(str(e)) from None


def _int_operand(t: TensorType, what: str) -> None:
    if not t.dtype.is_int:
        raise OpError(f"{what} must be an integer type, got {t.dtype}")


def _le(a: Dim, b: Dim) -> bool:
    """a <= b where both are static; True when either is symbolic (checked at run time)."""
    return not (isinstance(a, int) and isinstance(b, int)) or a <= b


def _grid(shape: Sequence[int], axis: int, along: np.ndarray) -> tuple[np.ndarray, ...]:
    """Index arrays addressing every element of ``shape``, with ``along`` on ``axis``."""
    g = list(np.indices(shape, sparse=True))
    g[axis] = along
    return tuple(g)


def _data_cost(ins, outs, dts, a) -> Cost:
    n = len(ins)
    return Cost(0.0, _nbytes(ins, dts[:n]), _nbytes(outs, dts[n:]))


# ---------------------------------------------------------------------------
# gather_elements / scatter_elements (torch.gather / scatter, ONNX *Elements)


def _elements_check(data: TensorType, idx: TensorType, ax: int, what: str) -> None:
    _int_operand(idx, "indices")
    if idx.rank != data.rank:
        raise OpError(f"indices rank {idx.rank} must equal data rank {data.rank}")
    for i, (di, dd) in enumerate(zip(idx.shape, data.shape)):
        if i != ax and not _le(di, dd):
            raise OpError(f"indices dim {i} ({di}) exceeds data dim {i} ({dd}); {what} needs indices "
                          f"{shape_str(idx.shape)} to fit in data {shape_str(data.shape)} off the axis")


def _gather_elements_infer(ts, a):
    data, idx = ts
    if data.rank == 0:
        raise OpError("data must have rank >= 1")
    ax = _axis(a["axis"], data.rank)
    _elements_check(data, idx, ax, "gather_elements")
    return [TensorType(idx.shape, data.dtype)]


def _gather_elements_ref(xs, a, ctx):
    data, idx = xs
    ax = normalize_axis(a["axis"], data.ndim)
    along = wrap_indices(idx, data.shape[ax], "gather_elements")
    for i, (di, dd) in enumerate(zip(idx.shape, data.shape)):
        if i != ax and di > dd:
            raise IndexError(f"gather_elements indices dim {i} ({di}) exceeds data dim ({dd})")
    return [data[_grid(idx.shape, ax, along)]]


register_op(OpDef("ik.gather_elements", "out[i...] = data[i... with indices[i...] on axis] (torch.gather)",
                  ("data", "indices"), _gather_elements_infer, _gather_elements_ref, _data_cost,
                  attrs={"axis": AttrSpec("int")}, traits=frozenset({"pure", "indexing"})))


def _scatter_apply(flat: np.ndarray, target: np.ndarray, upd: np.ndarray, reduction: str) -> None:
    """``flat[target[i]] (reduction)= upd[i]`` in order of i; for "none" the last i wins."""
    if reduction == "none":
        if target.size:
            _, first_rev = np.unique(target[::-1], return_index=True)
            last = target.size - 1 - first_rev
            flat[target[last]] = upd[last]
        return
    ufunc = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[reduction]
    ufunc.at(flat, target, upd)


def _scatter_elements_infer(ts, a):
    data, idx, upd = ts
    if data.rank == 0:
        raise OpError("data must have rank >= 1")
    ax = _axis(a["axis"], data.rank)
    _elements_check(data, idx, ax, "scatter_elements")
    if upd.shape != idx.shape:
        raise OpError(f"updates shape {shape_str(upd.shape)} must equal indices shape {shape_str(idx.shape)}")
    if upd.dtype != data.dtype:
        raise OpError(f"updates element type {upd.dtype} must equal data's {data.dtype}")
    if data.dtype.is_bool and a.get("reduction", "none") not in ("none", "max", "min"):
        raise OpError(f"reduction '{a['reduction']}' needs numeric data, got i1")
    return [data]


def _scatter_elements_ref(xs, a, ctx):
    data, idx, upd = xs
    ax = normalize_axis(a["axis"], data.ndim)
    along = wrap_indices(idx, data.shape[ax], "scatter_elements")
    for i, (di, dd) in enumerate(zip(idx.shape, data.shape)):
        if i != ax and di > dd:
            raise IndexError(f"scatter_elements indices dim {i} ({di}) exceeds data dim ({dd})")
    out = np.array(_f(data), copy=True, order="C")
    target = np.ravel_multi_index(np.broadcast_arrays(*_grid(idx.shape, ax, along)), data.shape).reshape(-1) \
        if data.size else np.zeros(0, np.int64)
    with np.errstate(all="ignore"):
        _scatter_apply(out.reshape(-1), target, _f(upd).reshape(-1).astype(out.dtype), a.get("reduction", "none"))
    return [_out(out, ctx.out_types[0].dtype)]


register_op(OpDef("ik.scatter_elements", "data with updates written (or reduced) at indices along an axis "
                  "(ONNX ScatterElements)", ("data", "indices", "updates"), _scatter_elements_infer,
                  _scatter_elements_ref, _data_cost,
                  attrs={"axis": AttrSpec("int"), "reduction": AttrSpec("str", "none", REDUCTIONS)},
                  traits=frozenset({"pure", "indexing", "scatter"})))


# ---------------------------------------------------------------------------
# gather_nd / scatter_nd (ONNX GatherND / ScatterND)


def _index_depth(idx: TensorType, limit: int, what: str) -> int:
    if idx.rank < 1:
        raise OpError(f"{what} indices must have rank >= 1")
    k = idx.shape[-1]
    if not isinstance(k, int):
        raise OpError(f"{what} indices' last dim must be static, got {k}")
    if not 1 <= k <= limit:
        raise OpError(f"{what} indices' last dim is {k}, must be in [1, {limit}]")
    return k


def _gather_nd_infer(ts, a):
    data, idx = ts
    _int_operand(idx, "indices")
    b = a.get("batch_dims", 0)
    if not 0 <= b < min(data.rank, idx.rank):
        raise OpError(f"batch_dims {b} must be in [0, min(data rank {data.rank}, indices rank {idx.rank}))")
    if data.shape[:b] != idx.shape[:b]:
        raise OpError(f"batch dims differ: data {shape_str(data.shape[:b])} vs indices {shape_str(idx.shape[:b])}")
    k = _index_depth(idx, data.rank - b, "gather_nd")
    return [TensorType(tuple(idx.shape[:-1]) + tuple(data.shape[b + k:]), data.dtype)]


def _nd_targets(idx: np.ndarray, dims: Sequence[int], what: str) -> np.ndarray:
    """Row-major positions in ``dims`` of the index tuples in ``idx`` ([..., k]), flattened."""
    k = idx.shape[-1]
    rows = idx.reshape(-1, k)
    cols = [wrap_indices(rows[:, j], dims[j], what) for j in range(k)]
    if not rows.shape[0]:
        return np.zeros(0, np.int64)
    return np.ravel_multi_index(cols, tuple(dims)).astype(np.int64)


def _gather_nd_ref(xs, a, ctx):
    data, idx = xs
    b = a.get("batch_dims", 0)
    k = idx.shape[-1]
    nb = _numel(data.shape[:b])
    inner = data.shape[b:]
    m = _numel(idx.shape[b:-1])
    flat = data.reshape((nb, _numel(inner[:k])) + inner[k:])
    out = np.empty((nb, m) + inner[k:], dtype=data.dtype)
    for i in range(nb):
        sub = idx.reshape((nb, m, k))[i]
        out[i] = flat[i][_nd_targets(sub, inner[:k], "gather_nd")]
    return [out.reshape(ctx.out_shapes[0])]


register_op(OpDef("ik.gather_nd", "slices of data at index tuples in the last indices dim (ONNX GatherND)",
                  ("data", "indices"), _gather_nd_infer, _gather_nd_ref, _data_cost,
                  attrs={"batch_dims": AttrSpec("int", 0)}, traits=frozenset({"pure", "indexing"})))


def _scatter_nd_infer(ts, a):
    data, idx, upd = ts
    _int_operand(idx, "indices")
    if data.rank == 0:
        raise OpError("data must have rank >= 1")
    k = _index_depth(idx, data.rank, "scatter_nd")
    want = tuple(idx.shape[:-1]) + tuple(data.shape[k:])
    if upd.shape != want:
        raise OpError(f"updates shape {shape_str(upd.shape)} must be indices.shape[:-1] + data.shape[{k}:] "
                      f"= {shape_str(want)}")
    if upd.dtype != data.dtype:
        raise OpError(f"updates element type {upd.dtype} must equal data's {data.dtype}")
    if data.dtype.is_bool and a.get("reduction", "none") not in ("none", "max", "min"):
        raise OpError(f"reduction '{a['reduction']}' needs numeric data, got i1")
    return [data]


def _scatter_nd_ref(xs, a, ctx):
    data, idx, upd = xs
    k = idx.shape[-1]
    out = np.array(_f(data), copy=True, order="C")
    rows = out.reshape((_numel(data.shape[:k]),) + data.shape[k:])
    target = _nd_targets(idx, data.shape[:k], "scatter_nd")
    u = _f(upd).reshape((target.size,) + data.shape[k:]).astype(out.dtype)
    with np.errstate(all="ignore"):
        _scatter_apply(rows, target, u, a.get("reduction", "none"))
    return [_out(out, ctx.out_types[0].dtype)]


register_op(OpDef("ik.scatter_nd", "data with update slices written (or reduced) at index tuples (ONNX ScatterND)",
                  ("data", "indices", "updates"), _scatter_nd_infer, _scatter_nd_ref, _data_cost,
                  attrs={"reduction": AttrSpec("str", "none", REDUCTIONS)},
                  traits=frozenset({"pure", "indexing", "scatter"})))


# ---------------------------------------------------------------------------
# dynamic_slice / dynamic_update_slice (XLA: starts are clamped)


def _starts_check(x: TensorType, starts: TensorType) -> None:
    _int_operand(starts, "starts")
    if starts.rank != 1 or starts.shape[0] != x.rank:
        raise OpError(f"starts must be a 1-D tensor of {x.rank} entries (one per dim), got {shape_str(starts.shape)}")


def _clamped_starts(starts: np.ndarray, dims: Sequence[int], sizes: Sequence[int]) -> list[int]:
    return [int(min(max(int(s), 0), d - n)) for s, d, n in zip(starts.astype(np.int64), dims, sizes)]


def _dynamic_slice_infer(ts, a):
    x, starts = ts
    _starts_check(x, starts)
    sizes = a["sizes"]
    if len(sizes) != x.rank:
        raise OpError(f"sizes needs {x.rank} entries, got {len(sizes)}")
    for i, (n, d) in enumerate(zip(sizes, x.shape)):
        if n < 0 or not _le(n, d):
            raise OpError(f"size {n} on dim {i} must be in [0, {d}]")
    return [TensorType(tuple(sizes), x.dtype)]


def _dynamic_slice_ref(xs, a, ctx):
    x, starts = xs
    sizes = a["sizes"]
    for i, (n, d) in enumerate(zip(sizes, x.shape)):
        if n > d:
            raise IndexError(f"dynamic_slice size {n} exceeds dim {i} of size {d}")
    st = _clamped_starts(starts, x.shape, sizes)
    return [x[tuple(slice(s, s + n) for s, n in zip(st, sizes))]]


register_op(OpDef("ik.dynamic_slice", "slice of static sizes at run-time starts, clamped into range (XLA)",
                  ("x", "starts"), _dynamic_slice_infer, _dynamic_slice_ref, _move_cost,
                  attrs={"sizes": AttrSpec("ints")}, traits=frozenset({"pure", "indexing"})))


def _dynamic_update_slice_infer(ts, a):
    x, upd, starts = ts
    _starts_check(x, starts)
    if upd.rank != x.rank:
        raise OpError(f"update rank {upd.rank} must equal operand rank {x.rank}")
    if upd.dtype != x.dtype:
        raise OpError(f"update element type {upd.dtype} must equal operand's {x.dtype}")
    for i, (n, d) in enumerate(zip(upd.shape, x.shape)):
        if not _le(n, d):
            raise OpError(f"update dim {i} ({n}) exceeds operand dim {i} ({d})")
    return [x]


def _dynamic_update_slice_ref(xs, a, ctx):
    x, upd, starts = xs
    for i, (n, d) in enumerate(zip(upd.shape, x.shape)):
        if n > d:
            raise IndexError(f"dynamic_update_slice update dim {i} ({n}) exceeds operand dim ({d})")
    st = _clamped_starts(starts, x.shape, upd.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(s, s + n) for s, n in zip(st, upd.shape))] = upd
    return [out]


register_op(OpDef("ik.dynamic_update_slice", "x with update written at run-time starts, clamped into range (XLA)",
                  ("x", "update", "starts"), _dynamic_update_slice_infer, _dynamic_update_slice_ref, _data_cost,
                  traits=frozenset({"pure", "indexing"})))


# ---------------------------------------------------------------------------
# reverse


def _reverse_axes(a: Any, rank: int) -> tuple[int, ...]:
    axes = [_axis(x, rank) for x in a["axes"]]
    if len(set(axes)) != len(axes):
        raise OpError(f"axes {list(a['axes'])} repeat a dim")
    return tuple(axes)


def _reverse_infer(ts, a):
    _reverse_axes(a, ts[0].rank)
    return [ts[0]]


register_op(OpDef("ik.reverse", "flip along axes", ("x",), _reverse_infer,
                  lambda xs, a, ctx: [np.flip(xs[0], _reverse_axes(a, xs[0].ndim))], _move_cost,
                  attrs={"axes": AttrSpec("ints")}, traits=frozenset({"pure", "shape"})))


# ---------------------------------------------------------------------------
# sort / topk


def sort_order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable sorting permutation along ``axis``: equal keys keep index order; NaN is the
    largest key (last ascending, first descending)."""
    x = _f(x)
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        # lexsort: the last key is primary; NaN first, then by decreasing value, ties by index.
        return np.lexsort((np.where(nan, 0, -x), ~nan), axis=axis)
    if x.dtype.kind == "b":
        return np.argsort(~x, axis=axis, kind="stable")
    return np.argsort(np.invert(x), axis=axis, kind="stable")  # ~x reverses integer order, no overflow


def _sort_infer(ts, a):
    x = ts[0]
    if x.rank == 0:
        raise OpError("operand must have rank >= 1")
    _axis(a.get("axis", -1), x.rank)
    return [x, x.with_dtype(DType.i64)]


def _sort_ref(xs, a, ctx):
    x = xs[0]
    ax = normalize_axis(a.get("axis", -1), x.ndim)
    order = sort_order(x, ax, a.get("descending", False))
    return [np.take_along_axis(x, order, ax), order.astype(np.int64)]


def _sort_cost(ins, outs, dts, a):
    n = _numel(ins[0])
    ax = a.get("axis", -1) % max(len(ins[0]), 1)
    m = ins[0][ax] if ins[0] else 1
    return Cost(float(n * max(1.0, math.log2(max(m, 1)))), _nbytes(ins, dts[:1]), _nbytes(outs, dts[1:]))


register_op(OpDef("ik.sort", "stable sort along an axis: values, then i64 indices (NaN is the largest key)",
                  ("x",), _sort_infer, _sort_ref, _sort_cost,
                  attrs={"axis": AttrSpec("int", -1), "descending": AttrSpec("bool", False)},
                  traits=frozenset({"pure", "multi_result", "sort"})))


def _topk_infer(ts, a):
    x = ts[0]
    if x.rank == 0:
        raise OpError("operand must have rank >= 1")
    ax = _axis(a.get("axis", -1), x.rank)
    k = a["k"]
    if k < 0 or not _le(k, x.shape[ax]):
        raise OpError(f"k = {k} must be in [0, {x.shape[ax]}] (the size of axis {ax})")
    shape = list(x.shape)
    shape[ax] = k
    return [TensorType(tuple(shape), x.dtype), TensorType(tuple(shape), DType.i64)]


def _topk_ref(xs, a, ctx):
    x = xs[0]
    ax = normalize_axis(a.get("axis", -1), x.ndim)
    k = a["k"]
    if k > x.shape[ax]:
        raise IndexError(f"topk k = {k} exceeds axis {ax} of size {x.shape[ax]}")
    order = np.take(sort_order(x, ax, a.get("largest", True)), np.arange(k), axis=ax)
    return [np.take_along_axis(x, order, ax), order.astype(np.int64)]


register_op(OpDef("ik.topk", "k largest (or smallest) along an axis, sorted, ties to the lower index: values, "
                  "then i64 indices", ("x",), _topk_infer, _topk_ref, _sort_cost,
                  attrs={"k": AttrSpec("int"), "axis": AttrSpec("int", -1), "largest": AttrSpec("bool", True),
                         "sorted": AttrSpec("bool", True)},
                  traits=frozenset({"pure", "multi_result", "sort"})))


__all__ = ["REDUCTIONS", "sort_order", "wrap_indices"]
