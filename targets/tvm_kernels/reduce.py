"""Reductions and row normalisations: softmax, layer_norm, rms_norm, reduce sum/mean/max/min.

Design note
-----------
Softmax and the norms reduce over the last axis and then rewrite the same row, so they are
written as explicit row kernels with TVM's IRBuilder (like :mod:`.attention`):

* CPU: one parallel task per row; each reduction keeps ``lanes`` partial results in a stack
  array (vectorised across the row, then folded), so LLVM emits full-width SIMD for both the
  reductions and the final rewrite. Two-pass statistics (mean, then centred sum of squares)
  avoid the cancellation of ``E[x²] − E[x]²``.
* CUDA: one thread block per row; threads stride the row, then a shared-memory tree folds the
  per-thread partials (``log2(threads)`` barrier steps).

Arithmetic is float32 for f16/bf16 rows; results round once on store. A softmax row that is all
``-inf`` gives NaN, as the NumPy reference ``exp(x - max) / sum`` does.

The general :func:`reduce` (any axes, keepdims) is a TE reduction with an explicit schedule:
spatial loops fused and parallel, reduction loops inside, and the innermost spatial axis moved
inside the reduction and vectorised when the last axis is kept.
"""

# ruff: noqa: SIM117 - one `with` per IRBuilder frame keeps the emitted loop nest readable

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from tvm import s_tir, te, tirx
from tvm.script.ir_builder import IRBuilder
from tvm.target import Target
from tvm.tirx.op import tvm_storage_sync
from tvm.tirx.script.builder import ir as T

from .common import (
    Kernel,
    TargetLike,
    TensorSig,
    as_target,
    f32,
    is_gpu,
    largest_divisor,
    make_kernel,
    prod,
    simd_lanes,
)
from .elementwise import exp_nan

REDUCE_OPS = ("sum", "mean", "max", "min")
Combine = Callable[[Any, Any], Any]


def _add(a: Any, b: Any) -> Any:
    return a + b


def _max(a: Any, b: Any) -> Any:
    return tirx.max(a, b)


def _store(buf: Any, value: Any, *idx: Any) -> None:
    T.buffer_store(buf, value, list(idx))


class _RowKernel:
    """Emits per-row reductions for either target inside an IRBuilder function."""

    def __init__(self, target: Target, n: int, threads: int) -> None:
        self.gpu = is_gpu(target)
        self.n = n
        self.lanes = largest_divisor(n, simd_lanes(target, "float32")) if not self.gpu else 1
        self.threads = threads
        self.tx: Any = None
        self.red: Any = None

    def reduce(self, load: Callable[[Any], Any], combine: Combine, init: float) -> Any:
        """Fold ``load(j)`` over the row; returns an expression for the result (valid after
        this call, in every thread)."""
        res = T.alloc_buffer((1,), "float32", scope="local")
        if self.gpu:
            part = T.alloc_buffer((1,), "float32", scope="local")
            _store(part, f32(init), 0)
            with T.serial(0, (self.n + self.threads - 1) // self.threads) as it:
                j = it * self.threads + self.tx
                with T.If(j < self.n), T.Then():
                    _store(part, combine(part[0], load(j)), 0)
            T.evaluate(tvm_storage_sync("shared"))
            _store(self.red, part[0], self.tx)
            T.evaluate(tvm_storage_sync("shared"))
            step = self.threads // 2
            while step >= 1:
                with T.If(self.tx < step), T.Then():
                    _store(self.red, combine(self.red[self.tx], self.red[self.tx + step]), self.tx)
                T.evaluate(tvm_storage_sync("shared"))
                step //= 2
            _store(res, self.red[0], 0)
            return res[0]
        lanes = self.lanes
        acc = T.alloc_buffer((lanes,), "float32", scope="local")
        with T.vectorized(0, lanes) as v:
            _store(acc, f32(init), v)
        with T.serial(0, self.n // lanes) as jo, T.vectorized(0, lanes) as v:
            _store(acc, combine(acc[v], load(jo * lanes + v)), v)
        _store(res, acc[0], 0)
        with T.serial(1, lanes) as v:
            _store(res, combine(res[0], acc[v]), 0)
        return res[0]

    def foreach(self, body: Callable[[Any], None]) -> None:
        """Run ``body(j)`` for every element of the row (vectorised / thread-strided)."""
        if self.gpu:
            with T.serial(0, (self.n + self.threads - 1) // self.threads) as it:
                j = it * self.threads + self.tx
                with T.If(j < self.n), T.Then():
                    body(j)
            return
        with T.serial(0, self.n // self.lanes) as jo, T.vectorized(0, self.lanes) as v:
            body(jo * self.lanes + v)


ROW_PARALLEL_MIN_ELEMS = 1 << 15
"""CPU row kernels over fewer elements than this run serially (a 17 x 64 layer norm is ~2 µs of work)."""


def _row_function(
    name: str,
    target: Target,
    shape: Sequence[int],
    dtype: str,
    extra: Sequence[tuple[str, tuple[int, ...], str]],
    body: Callable[[_RowKernel, Any, Any, dict[str, Any], Any], None],
    threads: int | None = None,
) -> tirx.PrimFunc:
    """A PrimFunc ``(x, *extra, out)`` running ``body(rk, x_row, out_row, extra, row)`` per row."""
    n = int(shape[-1])
    rows = prod(shape[:-1])
    if threads is None:
        threads = 1 << max(5, min(8, math.ceil(math.log2(max(n, 1)))))
    rk = _RowKernel(target, n, threads)
    with IRBuilder() as ib, T.prim_func():
        T.func_name(name)
        x = T.arg("x", T.buffer(tuple(shape), dtype))
        ex = {nm: T.arg(nm, T.buffer(shp, dt)) for nm, shp, dt in extra}
        out = T.arg("out", T.buffer(tuple(shape), dtype))
        T.func_attr({"tirx.noalias": True, "global_symbol": name})
        # A root block, as TVMScript gives every PrimFunc: Relax's analyses of a called PrimFunc
        # (RewriteDataflowReshape's reshape-pattern check) require one.
        with T.sblock("root"):
            # view both as [rows, n] (same memory, flat row-major)
            xf = T.decl_buffer((rows, n), dtype, data=x.data)
            of = T.decl_buffer((rows, n), dtype, data=out.data)
            if rk.gpu:
                with T.thread_binding(0, rows, thread="blockIdx.x") as r:
                    with T.thread_binding(0, threads, thread="threadIdx.x") as tx:
                        rk.tx = tx
                        rk.red = T.alloc_buffer((threads,), "float32", scope="shared")
                        body(rk, xf, of, ex, r)
            else:
                # a small tensor runs on one thread: waking the pool costs more than it saves
                loop = T.parallel if rows * n >= ROW_PARALLEL_MIN_ELEMS and rows > 1 else T.serial
                with loop(0, rows) as r:
                    body(rk, xf, of, ex, r)
    return ib.get()


def _row_kernel(
    name: str,
    target: TargetLike | None,
    shape: Sequence[int],
    dtype: str,
    extra: Sequence[tuple[str, tuple[int, ...], str]],
    body: Callable[[_RowKernel, Any, Any, dict[str, Any], Any], None],
    flops_per_elem: int,
    config: dict[str, Any],
) -> Kernel:
    tgt = as_target(target)
    shape = tuple(int(d) for d in shape)
    if not shape:
        raise ValueError(f"{name}: needs at least a 1-D input")
    func = _row_function(name, tgt, shape, dtype, extra, body)
    return Kernel(
        name=name,
        func=func,
        target=tgt,
        inputs=(TensorSig(shape, dtype), *(TensorSig(s, d) for _, s, d in extra)),
        outputs=(TensorSig(shape, dtype),),
        flops=flops_per_elem * prod(shape),
        config=config,
    )


def softmax(
    shape: Sequence[int],
    dtype: str = "float32",
    *,
    target: TargetLike | None = None,
    name: str = "softmax",
) -> Kernel:
    """Softmax over the last axis (max-subtracted; all ``-inf`` rows give NaN)."""

    def body(rk: _RowKernel, x: Any, out: Any, _ex: dict[str, Any], r: Any) -> None:
        m = rk.reduce(lambda j: x[r, j].astype("float32"), _max, -math.inf)
        mb = T.alloc_buffer((1,), "float32", scope="local")
        _store(mb, m, 0)
        s = rk.reduce(lambda j: exp_nan(x[r, j].astype("float32") - mb[0]), _add, 0.0)
        inv = T.alloc_buffer((1,), "float32", scope="local")
        _store(inv, f32(1.0) / s, 0)
        rk.foreach(
            lambda j: _store(
                out, (exp_nan(x[r, j].astype("float32") - mb[0]) * inv[0]).astype(dtype), r, j
            )
        )

    return _row_kernel(name, target, shape, dtype, [], body, 30, {"axis": -1})


def layer_norm(
    shape: Sequence[int],
    dtype: str = "float32",
    *,
    eps: float = 1e-5,
    weight: bool = True,
    bias: bool = True,
    target: TargetLike | None = None,
    name: str = "layer_norm",
) -> Kernel:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis (biased variance)."""
    n = int(shape[-1])
    extra = ([("weight", (n,), dtype)] if weight else []) + (
        [("bias", (n,), dtype)] if bias else []
    )

    def body(rk: _RowKernel, x: Any, out: Any, ex: dict[str, Any], r: Any) -> None:
        st = T.alloc_buffer((2,), "float32", scope="local")
        _store(st, rk.reduce(lambda j: x[r, j].astype("float32"), _add, 0.0) * f32(1.0 / n), 0)
        var = rk.reduce(
            lambda j: (x[r, j].astype("float32") - st[0]) * (x[r, j].astype("float32") - st[0]),
            _add,
            0.0,
        )
        _store(st, tirx.rsqrt(var * f32(1.0 / n) + f32(eps)), 1)

        def write(j: Any) -> None:
            y = (x[r, j].astype("float32") - st[0]) * st[1]
            if weight:
                y = y * ex["weight"][j].astype("float32")
            if bias:
                y = y + ex["bias"][j].astype("float32")
            _store(out, y.astype(dtype), r, j)

        rk.foreach(write)

    return _row_kernel(name, target, shape, dtype, extra, body, 8, {"axis": -1, "eps": eps})


def rms_norm(
    shape: Sequence[int],
    dtype: str = "float32",
    *,
    eps: float = 1e-6,
    weight: bool = True,
    target: TargetLike | None = None,
    name: str = "rms_norm",
) -> Kernel:
    """``x / sqrt(mean(x²) + eps) * weight`` over the last axis."""
    n = int(shape[-1])
    extra = [("weight", (n,), dtype)] if weight else []

    def body(rk: _RowKernel, x: Any, out: Any, ex: dict[str, Any], r: Any) -> None:
        st = T.alloc_buffer((1,), "float32", scope="local")
        ss = rk.reduce(lambda j: x[r, j].astype("float32") * x[r, j].astype("float32"), _add, 0.0)
        _store(st, tirx.rsqrt(ss * f32(1.0 / n) + f32(eps)), 0)

        def write(j: Any) -> None:
            y = x[r, j].astype("float32") * st[0]
            if weight:
                y = y * ex["weight"][j].astype("float32")
            _store(out, y.astype(dtype), r, j)

        rk.foreach(write)

    return _row_kernel(name, target, shape, dtype, extra, body, 4, {"axis": -1, "eps": eps})


# --------------------------------------------------------------------------- generic reduce


def reduce(
    shape: Sequence[int],
    dtype: str = "float32",
    op: str = "sum",
    axes: Sequence[int] | None = None,
    *,
    keepdims: bool = False,
    target: TargetLike | None = None,
    name: str | None = None,
) -> Kernel:
    """``op`` (sum, mean, max, min) over ``axes`` (all when None), NumPy ``keepdims`` rules."""
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduction {op!r}; expected one of {REDUCE_OPS}")
    tgt = as_target(target)
    shape = tuple(int(d) for d in shape)
    rank = len(shape)
    axes_n = sorted({a % rank for a in (axes if axes is not None else range(rank))})
    if any(not -rank <= a < rank for a in (axes or [])):
        raise ValueError(f"axes {list(axes or [])} out of range for rank {rank}")
    kept = [a for a in range(rank) if a not in axes_n]
    out_shape = (
        tuple(1 if a in axes_n else shape[a] for a in range(rank))
        if keepdims
        else tuple(shape[a] for a in kept)
    )
    acc_dt = "float32" if dtype in ("float16", "bfloat16") else dtype
    x = te.placeholder(shape, dtype, name="x")
    raxes = [te.reduce_axis((0, shape[a]), name=f"r{a}") for a in axes_n]
    count = prod([shape[a] for a in axes_n])

    def index(idx: Sequence[Any]) -> tuple[Any, ...]:
        full: list[Any] = []
        it = iter(idx)
        rit = iter(raxes)
        for a in range(rank):
            if a in axes_n:
                if keepdims:
                    next(it)
                full.append(next(rit))
            else:
                full.append(next(it))
        return tuple(full)

    reducer = {"sum": te.sum, "mean": te.sum, "max": te.max, "min": te.min}[op]
    acc = te.compute(
        out_shape, lambda *idx: reducer(x[index(idx)].astype(acc_dt), axis=raxes), name="acc"
    )
    scale = 1.0 / count if op == "mean" else None
    out = te.compute(
        out_shape,
        lambda *idx: (
            acc[idx] * tirx.const(scale, acc_dt) if scale is not None else acc[idx]
        ).astype(dtype),
        name="out",
    )
    lanes = simd_lanes(tgt, "float32")
    last_kept = (rank - 1) not in axes_n and rank > 0

    def schedule(sch: s_tir.Schedule) -> None:
        blk = sch.get_sblock("acc")
        ob = sch.get_sblock("out")
        loops = sch.get_loops(blk)
        nsp = len(out_shape)
        sp, rd = loops[:nsp], loops[nsp:]
        if is_gpu(tgt):
            fused = sch.fuse(*sp) if len(sp) > 1 else (sp[0] if sp else sch.add_unit_loop(blk))
            ext = int(sch.get(fused).extent)
            bx, tx = sch.split(fused, [None, min(256, ext)])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
            sch.set_scope(blk, 0, "local")  # per-thread accumulator, never a global temp
            sch.reverse_compute_at(ob, tx)
            return
        if not sp:
            return  # full reduction to a scalar: one serial loop nest
        if last_kept and rd:
            # innermost kept axis goes inside the reduction and is vectorised: each step
            # reduces `lanes` independent outputs at once.
            inner = sp[-1]
            ext = int(sch.get(inner).extent)
            vec = largest_divisor(ext, lanes)
            io, iv = sch.split(inner, [None, vec])
            outer = [*sp[:-1], io]
            sch.reorder(*outer, *rd, iv)
            fused = sch.fuse(*outer) if len(outer) > 1 else outer[0]
            sch.parallel(fused)
            # vectorise while the block still has its init (a decomposed update block is
            # neither "complete" nor "reduction" to the vectorize check)
            sch.vectorize(iv)
            sch.decompose_reduction(blk, rd[0])
            sch.reverse_compute_at(ob, fused)
        else:
            fused = sch.fuse(*sp) if len(sp) > 1 else sp[0]
            sch.parallel(fused)
            sch.reverse_compute_at(ob, fused)

    return make_kernel(
        name or f"reduce_{op}",
        [x],
        [out],
        tgt,
        schedule,
        flops=prod(shape),
        config={"op": op, "axes": axes_n, "keepdims": keepdims},
    )
