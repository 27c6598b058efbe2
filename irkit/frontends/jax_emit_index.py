"""XLA's indexing operations (gather, scatter, dynamic slices) in irkit IR, shared by the
jaxpr and StableHLO importers.

Design note: XLA's ``gather`` and ``scatter`` are general (dimension numbers pick which
operand dims the index vector addresses, which are collapsed or inserted, which are
batch dims).  Two forms Transformers produce get their own IR: a take along one axis
(``ik.gather`` plus a transpose into XLA's output layout) and a gather at constant
start indices (``ik.slice``).  Every other form is built from first principles: the
full operand coordinate of each result (gather) or update (scatter) element is
computed (the clamped start from the index vector, plus an ``ik.iota`` for window
offsets and batch dims) and stacked into an index tensor for ``ik.gather_nd`` /
``ik.scatter_nd``.  XLA semantics are kept: gather start indices are clamped so the
slice fits; a scatter update window whose start does not fit is dropped (its row is
sent to a scratch row appended to the operand and sliced off afterwards), unless
jax asked for ``mode=clip``.  jax's ``fill`` gather mode masks with the fill value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from irkit.frontends.jax_emit import Emitter, Unsupported
from irkit.ir.core import Value
from irkit.ir.types import Dim, DType, dim_add, dim_sub


def _index_dtype(indices: Value) -> DType:
    return DType.i64 if indices.dtype in (DType.i64, DType.ui32, DType.ui64) else DType.i32


def _dim_scalar(em: Emitter, d: Dim, dt: DType) -> Value:
    return em.scalar(d, dt) if isinstance(d, int) else em.op("dim_value", dim=(d,), dtype=dt)


def _place(em: Emitter, v: Value, positions: Sequence[int], rank: int) -> Value:
    """Reshape ``v`` to ``rank`` dims with its dims at ``positions`` (increasing) and 1s elsewhere."""
    shape: list[Dim] = [1] * rank
    for p, d in zip(positions, v.shape):
        shape[p] = d
    return em.reshape(v, shape)


def _iota_at(em: Emitter, n: Dim, pos: int, rank: int, dt: DType) -> Value:
    shape: list[Dim] = [1] * rank
    shape[pos] = n
    return em.iota(shape, pos, dt)


def _index_vector_last(em: Emitter, indices: Value, index_vector_dim: int,
                       batching: Sequence[int]) -> tuple[Value, list[int]]:
    """Indices with the index vector as the last dim, and the batching dims renumbered to match."""
    irank = indices.type.rank
    batching = [int(b) for b in batching]
    if index_vector_dim == irank:
        return em.reshape(indices, tuple(indices.shape) + (1,)), batching
    if index_vector_dim != irank - 1:
        perm = [i for i in range(irank) if i != index_vector_dim] + [index_vector_dim]
        indices = em.transpose(indices, perm)
        batching = [b - 1 if b > index_vector_dim else b for b in batching]
    return indices, batching


def _start_components(em: Emitter, indices: Value, dt: DType) -> list[Value]:
    """``indices[..., k]`` for each k, in dtype ``dt``, shaped like the batch dims."""
    batch = tuple(indices.shape[:-1])
    k = indices.shape[-1]
    if not isinstance(k, int):
        raise Unsupported("an index vector of symbolic length")
    idx = em.cast(indices, dt)
    if k == 1:
        return [em.reshape(idx, batch)]
    out = []
    rank = idx.type.rank
    for i in range(k):
        start: list[Dim] = [0] * rank
        limit = list(idx.shape)
        start[-1], limit[-1] = i, i + 1
        out.append(em.reshape(em.slice(idx, start, limit, None), batch))
    return out


def _clamp(em: Emitter, s: Value, hi: Dim) -> Value:
    return em.clamp(em.scalar(0, s.dtype), s, _dim_scalar(em, hi, s.dtype))


def _in_range(em: Emitter, s: Value, hi: Dim) -> Value:
    return em.op("and", em.op("ge", s, em.scalar(0, s.dtype)), em.op("le", s, _dim_scalar(em, hi, s.dtype)))


def _all(em: Emitter, masks: Sequence[Value]) -> Value:
    out = masks[0]
    for m in masks[1:]:
        out = em.op("and", out, m)
    return out


def _stack_coords(em: Emitter, coords: Sequence[Value], shape: Sequence[Dim]) -> Value:
    """The coordinates (each broadcastable to ``shape``) stacked on a new last dim."""
    parts = []
    for c in coords:
        if tuple(c.shape) != tuple(shape):
            c = em.op("broadcast", c, shape=tuple(shape))
        parts.append(em.reshape(c, tuple(shape) + (1,)))
    return em.concat(parts, len(shape))


def _sum(em: Emitter, parts: Sequence[Value], dt: DType) -> Value:
    if not parts:
        return em.scalar(0, dt)
    out = parts[0]
    for p in parts[1:]:
        out = em.op("add", out, p)
    return out


# ---------------------------------------------------------------------------
# gather


def gather(em: Emitter, operand: Value, indices: Value, *, offset_dims: Sequence[int],
           collapsed_slice_dims: Sequence[int], start_index_map: Sequence[int],
           operand_batching_dims: Sequence[int], start_indices_batching_dims: Sequence[int],
           index_vector_dim: int, slice_sizes: Sequence[Dim], fill: Value | None = None) -> Value:
    """XLA gather; start indices are clamped so each slice fits.  With ``fill`` (jax's
    ``mode=fill``) a slice whose start does not fit gives ``fill`` instead."""
    offset_dims = sorted(int(d) for d in offset_dims)
    collapsed = [int(d) for d in collapsed_slice_dims]
    smap = [int(d) for d in start_index_map]
    obatch = [int(d) for d in operand_batching_dims]
    sizes = list(slice_sizes)
    indices, ibatch = _index_vector_last(em, indices, int(index_vector_dim), start_indices_batching_dims)
    batch_shape = tuple(indices.shape[:-1])
    rank = operand.type.rank
    nb = len(batch_shape)
    out_rank = nb + len(offset_dims)
    batch_pos = [p for p in range(out_rank) if p not in offset_dims]
    window = [d for d in range(rank) if d not in collapsed and d not in obatch]
    out_shape: list[Dim] = [0] * out_rank
    for i, p in enumerate(offset_dims):
        out_shape[p] = sizes[window[i]]
    for j, p in enumerate(batch_pos):
        out_shape[p] = batch_shape[j]
    dt = _index_dtype(indices)
    raw = _start_components(em, indices, dt)
    bounds = [dim_sub(operand.shape[d], sizes[d]) for d in smap]

    out = None
    if fill is None and not obatch:
        out = _gather_fast(em, operand, indices, offset_dims, collapsed, smap, sizes, out_shape)
    if out is None:
        starts = {d: _clamp(em, s, hi) for d, s, hi in zip(smap, raw, bounds)}
        coords = []
        for d in range(rank):
            parts = []
            if d in starts:
                parts.append(_place(em, starts[d], batch_pos, out_rank))
            if d in obatch:
                p = batch_pos[ibatch[obatch.index(d)]]
                parts.append(_iota_at(em, out_shape[p], p, out_rank, dt))
            if d in window and sizes[d] != 1:
                p = offset_dims[window.index(d)]
                parts.append(_iota_at(em, out_shape[p], p, out_rank, dt))
            coords.append(_sum(em, parts, dt))
        if rank == 0:
            return em.op("broadcast", operand, shape=tuple(out_shape))
        idx = _stack_coords(em, coords, out_shape)
        out = em.op("gather_nd", operand, idx)
    if fill is not None and smap:
        mask = _all(em, [_in_range(em, s, hi) for s, hi in zip(raw, bounds)])
        mask = _place(em, mask, batch_pos, out_rank)
        out = em.op("where", em.op("broadcast", mask, shape=tuple(out.shape)), out,
                    em.cast(em.reshape(fill, ()), out.dtype))
    return out


def _gather_fast(em: Emitter, operand: Value, indices: Value, offset_dims: list[int], collapsed: list[int],
                 smap: list[int], sizes: list[Dim], out_shape: list[Dim]) -> Value | None:
    """The Transformer forms: a gather at constant starts (a slice) or a take along one axis."""
    batch_shape = tuple(indices.shape[:-1])
    rank = operand.type.rank
    starts = em.const_value(indices) if indices.type.is_static else None
    n_batch = 1
    for d in batch_shape:
        n_batch = n_batch * d if isinstance(d, int) and isinstance(n_batch, int) else -1
    if starts is not None and n_batch == 1:
        return _gather_as_slice(em, operand, starts.reshape(-1), smap, sizes, out_shape)
    if len(smap) != 1 or collapsed not in ([], smap):
        return None
    # A take along axis k; XLA may keep k as a size-1 offset dim instead of collapsing it.
    k = smap[0]
    for d in range(rank):
        if sizes[d] != (1 if d == k else operand.shape[d]):
            return None
    idx = em.reshape(indices, batch_shape)
    idx = _clamp(em, idx, dim_sub(operand.shape[k], 1))
    g = em.op("gather", operand, idx, axis=k)
    labels = [("o", d) for d in range(k)] + [("b", j) for j in range(len(batch_shape))] + \
        [("o", d) for d in range(k + 1, rank)]
    offset_operand_dims = iter([d for d in range(rank) if d not in collapsed])
    batch_iter = iter(range(len(batch_shape)))
    target = []
    for p in range(len(offset_dims) + len(batch_shape)):
        target.append(("o", next(offset_operand_dims)) if p in offset_dims else ("b", next(batch_iter)))
    kept = [t for t in target if t != ("o", k)]
    y = em.transpose(g, [labels.index(t) for t in kept])
    if len(kept) != len(target):
        y = em.reshape(y, [1 if t == ("o", k) else y.shape[kept.index(t)] for t in target])
    return y


def _gather_as_slice(em: Emitter, operand: Value, starts: np.ndarray, smap: list[int], sizes: list[Dim],
                     out_shape: Sequence[Dim]) -> Value:
    rank = operand.type.rank
    start: list[Dim] = [0] * rank
    for pos, d in enumerate(smap):
        s = int(starts[pos])
        dim, size = operand.shape[d], sizes[d]
        if isinstance(dim, int) and isinstance(size, int):
            s = min(max(s, 0), dim - size)  # XLA clamps so the slice fits
        elif s < 0:
            raise Unsupported("gather at a negative start on a symbolic dim")
        start[d] = s
    limit = [dim_add(st, sz) for st, sz in zip(start, sizes)]
    x = em.slice(operand, start, limit, None)
    return em.reshape(x, tuple(out_shape))


# ---------------------------------------------------------------------------
# dynamic slices


def _start_vector(em: Emitter, starts: Sequence[Value]) -> Value:
    dt = DType.i64 if any(s.dtype in (DType.i64, DType.ui32, DType.ui64) for s in starts) else DType.i32
    return em.concat([em.reshape(em.cast(s, dt), (1,)) for s in starts], 0)


def dynamic_slice(em: Emitter, x: Value, starts: Sequence[Value], sizes: Sequence[Dim]) -> Value:
    """XLA dynamic_slice (starts clamped so the slice fits): ``ik.slice`` at constant starts,
    else ``ik.dynamic_slice``."""
    consts = [em.const_value(s) for s in starts]
    if all(c is not None for c in consts):
        start: list[Dim] = []
        for i, (c, size) in enumerate(zip(consts, sizes)):
            assert c is not None
            s = int(c.reshape(()))
            dim = x.shape[i]
            if isinstance(dim, int) and isinstance(size, int):
                s = min(max(s, 0), dim - size)
            elif s != 0:
                raise Unsupported("dynamic_slice at a non-zero start on a symbolic dim")
            start.append(s)
        limit = [dim_add(s, z) for s, z in zip(start, sizes)]
        return em.slice(x, start, limit, None)
    if not starts:
        return x
    return em.op("dynamic_slice", x, _start_vector(em, starts), sizes=tuple(sizes))


def dynamic_update_slice(em: Emitter, x: Value, update: Value, starts: Sequence[Value]) -> Value:
    """XLA dynamic_update_slice (starts clamped so the update fits)."""
    if not starts:
        return update
    return em.op("dynamic_update_slice", x, update, _start_vector(em, starts))


# ---------------------------------------------------------------------------
# scatter


SCATTER_KINDS = ("none", "add", "mul", "max", "min")


def scatter(em: Emitter, operand: Value, indices: Value, updates: Value, *, update_window_dims: Sequence[int],
            inserted_window_dims: Sequence[int], scatter_dims_to_operand_dims: Sequence[int],
            operand_batching_dims: Sequence[int], scatter_indices_batching_dims: Sequence[int],
            index_vector_dim: int, reduction: str, clip: bool) -> Value:
    """XLA scatter with combiner ``reduction`` (none = overwrite, add, mul, max, min).

    ``clip`` clamps start indices so each update window fits (jax ``mode=clip``);
    otherwise, as XLA defines it, a window that does not fit is skipped.
    """
    if reduction not in SCATTER_KINDS:
        raise Unsupported(f"scatter with a {reduction} combiner")
    if any(not isinstance(d, int) for d in tuple(operand.shape) + tuple(updates.shape)):
        raise Unsupported("scatter with symbolic dims")
    uwd = [int(d) for d in update_window_dims]
    inserted = [int(d) for d in inserted_window_dims]
    sdims = [int(d) for d in scatter_dims_to_operand_dims]
    obatch = [int(d) for d in operand_batching_dims]
    indices, ibatch = _index_vector_last(em, indices, int(index_vector_dim), scatter_indices_batching_dims)
    rank, urank = operand.type.rank, updates.type.rank
    ushape = [int(d) for d in updates.shape]
    n = int(np.prod(ushape)) if ushape else 1
    if n == 0 or rank == 0:
        return operand if n == 0 else _scatter_scalar(em, operand, updates, reduction)
    scatter_pos = [p for p in range(urank) if p not in uwd]
    window = [d for d in range(rank) if d not in inserted and d not in obatch]
    wsize = {d: ushape[uwd[window.index(d)]] if d in window else 1 for d in range(rank)}
    dt = _index_dtype(indices)
    raw = _start_components(em, indices, dt)
    bounds = [int(operand.shape[d]) - wsize[d] for d in sdims]
    valid: Value | None = None
    if clip:
        starts = [_clamp(em, s, hi) for s, hi in zip(raw, bounds)]
    else:
        starts = raw
        known = em.const_value(indices) if indices.type.is_static else None
        fits = known is not None and all(
            bool(np.all((known[..., k] >= 0) & (known[..., k] <= hi))) for k, hi in enumerate(bounds))
        if sdims and not fits:
            valid = _place(em, _all(em, [_in_range(em, s, hi) for s, hi in zip(raw, bounds)]), scatter_pos, urank)
            valid = em.op("broadcast", valid, shape=tuple(ushape)) if tuple(valid.shape) != tuple(ushape) else valid
    coords = []
    for d in range(rank):
        parts = []
        if d in sdims:
            parts.append(_place(em, starts[sdims.index(d)], scatter_pos, urank))
        if d in obatch:
            p = scatter_pos[ibatch[obatch.index(d)]]
            parts.append(_iota_at(em, ushape[p], p, urank, dt))
        if d in window and wsize[d] != 1:
            p = uwd[window.index(d)]
            parts.append(_iota_at(em, ushape[p], p, urank, dt))
        c = _sum(em, parts, dt)
        if valid is not None:
            # A dropped window goes to the scratch row (index dim 0 = its size), at column 0 elsewhere.
            c = em.op("where", valid, c, em.scalar(int(operand.shape[0]) if d == 0 else 0, dt))
        coords.append(c)
    idx = em.reshape(_stack_coords(em, coords, ushape), (n, rank))
    upd = em.reshape(updates, (n,))
    data = operand
    if valid is not None:
        data = em.pad(operand, em.scalar(0, operand.dtype), [0] * rank, [1] + [0] * (rank - 1), [0] * rank)
    out = _scatter_nd(em, data, idx, upd, reduction)
    if valid is not None:
        out = em.slice(out, [0] * rank, list(operand.shape), None)
    return out


def _scatter_nd(em: Emitter, data: Value, idx: Value, upd: Value, reduction: str) -> Value:
    if data.dtype != DType.bool:
        return em.op("scatter_nd", data, idx, upd, reduction=reduction)
    # i1: or is max, and is min on 0/1.
    red = {"add": "max", "mul": "min"}.get(reduction, reduction)
    r = em.op("scatter_nd", em.cast(data, DType.i32), idx, em.cast(upd, DType.i32), reduction=red)
    return em.cast(r, DType.bool)


def _scatter_scalar(em: Emitter, operand: Value, updates: Value, reduction: str) -> Value:
    """A scatter into a rank-0 operand: every update lands on the one element."""
    n = int(np.prod([int(d) for d in updates.shape]))
    flat = em.reshape(updates, (n,))
    acc = operand
    for i in range(n):
        u = em.reshape(em.slice(flat, [i], [i + 1], None), ())
        if reduction == "none":
            acc = u
        else:
            comb = {"add": "add", "mul": "mul", "max": "max", "min": "min"}[reduction]
            acc = em.minmax(comb, acc, u) if comb in ("max", "min") else em.op(comb, acc, u)
    return acc


__all__ = ["SCATTER_KINDS", "dynamic_slice", "dynamic_update_slice", "gather", "scatter"]
