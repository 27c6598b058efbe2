"""Data-movement kernels: reshape, transpose, slice, concat, gather (embedding), pad.

Each is one TE ``compute`` (index arithmetic only) with the shared flat elementwise schedule:
loops fused, innermost vectorised, outer parallel on CPU; a 1-D grid on CUDA. Reads may be
strided (transpose, strided slice); writes are always contiguous.

Out-of-range indices in :func:`gather` wrap once if negative (ONNX ``Gather``) and are then
clamped into range, so a bad index reads a valid row instead of faulting; validating indices
is the frontend's job.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tvm import s_tir, te, tirx

from .common import (
    Kernel,
    TargetLike,
    as_target,
    is_gpu,
    make_kernel,
    prod,
    schedule_elementwise_cpu,
    schedule_elementwise_gpu,
    simd_lanes,
)


def _kernel(
    name: str,
    inputs: Sequence[te.Tensor],
    out: te.Tensor,
    target: TargetLike | None,
    config: dict[str, Any],
) -> Kernel:
    tgt = as_target(target)
    lanes = simd_lanes(tgt, str(out.dtype)) if not is_gpu(tgt) else 1

    def schedule(sch: s_tir.Schedule) -> None:
        blk = sch.get_sblock("out")
        if is_gpu(tgt):
            schedule_elementwise_gpu(sch, blk, 256)
        else:
            schedule_elementwise_cpu(sch, blk, lanes)

    return make_kernel(name, list(inputs), [out], tgt, schedule, flops=0, config=config)


def _unravel(flat: Any, shape: Sequence[int]) -> list[Any]:
    idx: list[Any] = []
    for d in reversed(shape):
        idx.append(tirx.floormod(flat, d) if d != 1 else tirx.const(0, "int32"))
        flat = tirx.floordiv(flat, d)
    return list(reversed(idx))


def _ravel(idx: Sequence[Any], shape: Sequence[int]) -> Any:
    flat: Any = tirx.const(0, "int32")
    for i, d in zip(idx, shape, strict=True):
        flat = flat * d + i
    return flat


def reshape(
    shape: Sequence[int],
    new_shape: Sequence[int],
    dtype: str = "float32",
    *,
    target: TargetLike | None = None,
    name: str = "reshape",
) -> Kernel:
    """Row-major reshape (a copy; ``-1`` infers one dim)."""
    shape = tuple(int(d) for d in shape)
    new = [int(d) for d in new_shape]
    if new.count(-1) > 1:
        raise ValueError("reshape: at most one -1")
    if -1 in new:
        known = prod([d for d in new if d != -1])
        new[new.index(-1)] = prod(shape) // max(known, 1)
    if prod(new) != prod(shape):
        raise ValueError(
            f"reshape: {list(shape)} has {prod(shape)} elements, {new} has {prod(new)}"
        )
    x = te.placeholder(shape, dtype, name="x")
    out = te.compute(tuple(new), lambda *i: x[tuple(_unravel(_ravel(i, new), shape))], name="out")
    return _kernel(name, [x], out, target, {"new_shape": tuple(new)})


def transpose(
    shape: Sequence[int],
    perm: Sequence[int],
    dtype: str = "float32",
    *,
    target: TargetLike | None = None,
    name: str = "transpose",
) -> Kernel:
    """``numpy.transpose(x, perm)``."""
    shape = tuple(int(d) for d in shape)
    perm = [int(p) % len(shape) for p in perm]
    if sorted(perm) != list(range(len(shape))):
        raise ValueError(f"transpose: {perm} is not a permutation of {len(shape)} axes")
    x = te.placeholder(shape, dtype, name="x")
    out_shape = tuple(shape[p] for p in perm)

    def fn(*i: Any) -> Any:
        src = [None] * len(shape)
        for o, p in enumerate(perm):
            src[p] = i[o]
        return x[tuple(src)]

    out = te.compute(out_shape, fn, name="out")
    return _kernel(name, [x], out, target, {"perm": tuple(perm)})


def slice_(
    shape: Sequence[int],
    begin: Sequence[int],
    end: Sequence[int],
    strides: Sequence[int] | None = None,
    dtype: str = "float32",
    *,
    target: TargetLike | None = None,
    name: str = "slice",
) -> Kernel:
    """``x[b0:e0:s0, b1:e1:s1, ...]`` with Python slice semantics (negatives, clamping)."""
    shape = tuple(int(d) for d in shape)
    strides = list(strides) if strides is not None else [1] * len(begin)
    starts, counts = [], []
    for a, d in enumerate(shape):
        if a < len(begin):
            start, stop, step = slice(begin[a], end[a], strides[a]).indices(d)
        else:
            start, stop, step = 0, d, 1
        starts.append((start, step))
        counts.append(len(range(start, stop, step)))
    x = te.placeholder(shape, dtype, name="x")
    out = te.compute(
        tuple(counts),
        lambda *i: x[tuple(s + i[a] * st for a, (s, st) in enumerate(starts))],
        name="out",
    )
    return _kernel(name, [x], out, target, {"starts": starts, "out_shape": tuple(counts)})


def concat(
    shapes: Sequence[Sequence[int]],
    axis: int,
    dtype: str = "float32",
    *,
    target: TargetLike | None = None,
    name: str = "concat",
) -> Kernel:
    """``numpy.concatenate(xs, axis)``."""
    shapes = [tuple(int(d) for d in s) for s in shapes]
    rank = len(shapes[0])
    axis %= rank
    for s in shapes:
        if len(s) != rank or any(s[a] != shapes[0][a] for a in range(rank) if a != axis):
            raise ValueError(f"concat: shapes {shapes} differ off axis {axis}")
    xs = [te.placeholder(s, dtype, name=f"x{n}") for n, s in enumerate(shapes)]
    offsets = [0]
    for s in shapes:
        offsets.append(offsets[-1] + s[axis])
    out_shape = tuple(offsets[-1] if a == axis else shapes[0][a] for a in range(rank))

    def fn(*i: Any) -> Any:
        val: Any = None
        for n in reversed(range(len(xs))):
            local = tirx.max(tirx.min(i[axis] - offsets[n], shapes[n][axis] - 1), 0)
            load = xs[n][tuple(local if a == axis else i[a] for a in range(rank))]
            val = load if val is None else tirx.Select(i[axis] < offsets[n + 1], load, val)
        return val

    out = te.compute(out_shape, fn, name="out")
    return _kernel(name, xs, out, target, {"axis": axis})


def gather(
    table_shape: Sequence[int],
    indices_shape: Sequence[int],
    axis: int = 0,
    dtype: str = "float32",
    index_dtype: str = "int64",
    *,
    target: TargetLike | None = None,
    name: str = "gather",
) -> Kernel:
    """``numpy.take(table, indices, axis)`` (an embedding lookup with ``axis=0``)."""
    tshape = tuple(int(d) for d in table_shape)
    ishape = tuple(int(d) for d in indices_shape)
    axis %= len(tshape)
    table = te.placeholder(tshape, dtype, name="table")
    indices = te.placeholder(ishape, index_dtype, name="indices")
    out_shape = tshape[:axis] + ishape + tshape[axis + 1 :]
    n = tshape[axis]

    def fn(*i: Any) -> Any:
        pre, mid, post = i[:axis], i[axis : axis + len(ishape)], i[axis + len(ishape) :]
        raw = indices[tuple(mid)].astype("int32") if ishape else indices[()].astype("int32")
        wrapped = tirx.Select(raw < 0, raw + n, raw)
        safe = tirx.max(tirx.min(wrapped, n - 1), 0)
        return table[(*pre, safe, *post)]

    out = te.compute(out_shape, fn, name="out")
    return _kernel(name, [table, indices], out, target, {"axis": axis})


def pad(
    shape: Sequence[int],
    before: Sequence[int],
    after: Sequence[int],
    value: float = 0.0,
    dtype: str = "float32",
    *,
    target: TargetLike | None = None,
    name: str = "pad",
) -> Kernel:
    """Constant padding (``numpy.pad(mode="constant")``); negative pads crop."""
    shape = tuple(int(d) for d in shape)
    before = [int(b) for b in before]
    after = [int(a) for a in after]
    out_shape = tuple(d + b + a for d, b, a in zip(shape, before, after, strict=True))
    x = te.placeholder(shape, dtype, name="x")

    def fn(*i: Any) -> Any:
        src = [i[a] - before[a] for a in range(len(shape))]
        inside = (
            tirx.all(*[tirx.all(s >= 0, s < shape[a]) for a, s in enumerate(src)]) if src else True
        )
        safe = [tirx.max(tirx.min(s, shape[a] - 1), 0) for a, s in enumerate(src)]
        return tirx.Select(inside, x[tuple(safe)], tirx.const(value, dtype))

    out = te.compute(out_shape, fn, name="out")
    return _kernel(name, [x], out, target, {"before": before, "after": after, "value": value})


def dynamic_update_slice_inplace(
    x_shape: Sequence[int], upd_shape: Sequence[int], starts_len: int, dtype: str, starts_dtype: str,
    name: str = "dynamic_update_slice_inplace",
) -> Any:
    """A PrimFunc ``(x, update, starts)`` writing ``update`` into ``x`` itself at the clamped starts
    (XLA DynamicUpdateSlice semantics: each start clamped to ``[0, dim - update dim]``).

    Plain loops (no blocks), the outer update dim parallel when the update is large: for Relax's
    ``call_tir_inplace`` with ``inplace_indices=[0]``, so a KV-cache row write costs the row,
    not a copy of the cache."""
    import math as _math

    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script.builder import ir as T

    dims = [int(d) for d in x_shape]
    us = [int(d) for d in upd_shape]
    with IRBuilder() as ib:
        with T.prim_func():
            T.func_name(name)
            x = T.arg("x", T.buffer(tuple(dims), dtype))
            upd = T.arg("update", T.buffer(tuple(us), dtype))
            st = T.arg("starts", T.buffer((starts_len,), starts_dtype))
            T.func_attr({"global_symbol": name})
            starts = [tirx.max(tirx.min(tirx.Cast("int64", st[i]), tirx.const(d - u, "int64")),
                               tirx.const(0, "int64")) for i, (d, u) in enumerate(zip(dims, us))]
            total = _math.prod(us) if us else 1

            def nest(level: int, idx: list[Any]) -> None:
                if level == len(us):
                    T.buffer_store(x, upd[tuple(idx)], [starts[i] + tirx.Cast("int64", v) for i, v in enumerate(idx)])
                    return
                loop = T.parallel if level == 0 and total >= (1 << 16) and us[0] > 1 else T.serial
                with loop(0, us[level]) as i:
                    nest(level + 1, [*idx, i])

            if us:
                nest(0, [])
            else:
                T.buffer_store(x, upd[()], [])
    return ib.get()
