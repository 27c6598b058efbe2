"""Batched matmul with broadcasting and a fused bias + activation epilogue.

Design note
-----------
One TE definition serves both targets::

    A_pad[*ba, Mp, Kp]  = A zero-padded to the tile grid (and cast to the compute dtype)
    B_pad[*bb, Kp, Np]  = B (or Bᵀ) zero-padded
    C_acc[*bo, Mp, Np]  = Σ_k A_pad · B_pad            (float32 accumulation)
    out[*bo, M, N]      = act(C_acc + bias).astype(out_dtype)

Padding to the tile grid costs a few wasted FMAs on ragged edges but keeps every inner loop
free of bounds checks, which is what lets LLVM keep the register tile in registers and
vectorise it; the epilogue writes only the valid ``M×N`` region.

CPU schedule (BLIS-like): ``B_pad`` is packed once into ``[Np/NR, Kp, NR]`` panels (so the
micro-kernel streams B contiguously); each ``tile_m × tile_n`` output tile is a parallel task that
walks K in ``tile_k`` steps, packs its ``tile_m × tile_k`` block of A into ``[MR, k]`` slivers,
and runs an ``MR × NR`` register micro-kernel (``NR`` = two SIMD vectors, unrolled, vectorised)
over it. The epilogue runs on the finished tile while it is still in cache.

CUDA schedule: one thread block per ``tile_m × tile_n`` tile, A/B tiles staged in shared memory
(cast to f32 on the way in), and a per-thread register tile; for f16 and bf16 inputs a
tensor-core variant (WMMA 16×16×16 through TVM's tensorize intrinsics, f32 accumulate) is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from tvm import s_tir, te, tirx
from tvm.target import Target

from . import tensorize
from .common import (
    Kernel,
    TargetLike,
    as_target,
    broadcast_index,
    broadcast_shapes,
    dtype_of,
    is_gpu,
    largest_divisor,
    make_kernel,
    prod,
    round_up,
    simd_lanes,
    simd_registers,
)

ACTIVATIONS = ("gelu_erf", "gelu_tanh", "silu", "relu", "sigmoid", "tanh")
"""Epilogue activations the matmul can fuse (``None`` for none)."""

DTYPES = ("float32", "float16", "bfloat16")

MIN_TILE_K = 2
"""Smallest k step: schedules of an extent-1 k loop fail (TVM folds the loop away)."""


def apply_activation(x: tirx.PrimExpr, activation: str | None) -> tirx.PrimExpr:
    """The activation applied to one float32 value (``None``: identity).

    tanh, erf and the sigmoid's exp are the kernel library's polynomials
    (:func:`.elementwise.unary_expr`): ``tirx.tanh``/``erf`` lower to one libm call
    per element on x86, which made a GELU epilogue cost as much as its matmul."""
    if activation is None:
        return x
    from .elementwise import unary_expr

    dtype = dtype_of(x)
    half = tirx.const(0.5, dtype)
    one = tirx.const(1.0, dtype)

    def u(op: str, v: tirx.PrimExpr) -> tirx.PrimExpr:
        return unary_expr(op, v, dtype, True)

    if activation == "gelu_erf":
        return half * x * (one + u("erf", x * tirx.const(0.7071067811865476, dtype)))
    if activation == "gelu_tanh":
        inner = tirx.const(0.7978845608028654, dtype) * (
            x + tirx.const(0.044715, dtype) * x * x * x
        )
        return half * x * (one + u("tanh", inner))
    if activation == "silu":
        return x * u("sigmoid", x)
    if activation == "relu":
        return tirx.max(x, tirx.const(0.0, dtype))
    if activation == "sigmoid":
        return u("sigmoid", x)
    if activation == "tanh":
        return u("tanh", x)
    raise ValueError(f"unknown activation {activation!r}; expected one of {ACTIVATIONS} or None")


def default_tiles(target: Target, dtype: str = "float32") -> dict[str, int]:
    """Tile sizes used when the caller (normally the tiling pass) gives none.

    CPU: ``tile_k × NR`` B panels of 16 KiB stay in L1 while ``tile_m × tile_k`` of packed A
    (64 KiB) stays in L2. CUDA: 64×64×32 thread-block tiles (128×128×32 for tensor cores).
    """
    if is_gpu(target):
        if dtype in ("float16", "bfloat16"):
            return {"tile_m": 128, "tile_n": 128, "tile_k": 32}
        return {"tile_m": 64, "tile_n": 64, "tile_k": 16}
    return {"tile_m": 64, "tile_n": 256, "tile_k": 256}


def default_micro(target: Target) -> tuple[int, int]:
    """Register micro-tile ``(MR, NR)`` for the CPU: NR = two vectors, MR fills the registers.

    AVX2 (16 ymm): 4×16 → 8 accumulators + 2 B vectors + broadcasts. AVX-512 (32 zmm): 8×32 →
    16 accumulators. Measured on a Zen 3 VM: 4×16 reaches NumPy/OpenBLAS speed at 512³; 6×16
    was no faster once padding 512 to a multiple of 6 was paid for.
    """
    lanes = simd_lanes(target, "float32")
    mr = 8 if simd_registers(target) >= 32 else 4
    return mr, 2 * lanes


def matmul(
    a_shape: Sequence[int],
    b_shape: Sequence[int],
    dtype: str = "float32",
    *,
    transpose_b: bool = False,
    bias: bool = False,
    activation: str | None = None,
    out_dtype: str | None = None,
    tile_m: int | None = None,
    tile_n: int | None = None,
    tile_k: int | None = None,
    micro: tuple[int, int] | None = None,
    tensor_core: bool | None = None,
    parallel: bool = True,
    target: TargetLike | None = None,
    name: str = "matmul",
    b_packed: bool = False,
) -> Kernel:
    """Build ``out = act(A @ B [+ bias])`` with NumPy batch broadcasting.

    Parameters
    ----------
    a_shape, b_shape:
        ``[..., M, K]`` and ``[..., K, N]`` (``[..., N, K]`` with ``transpose_b``); leading
        batch dims broadcast as in ``numpy.matmul``. Both must be at least 2-D.
    dtype:
        Input dtype: float32, float16 or bfloat16. Accumulation is always float32.
    bias:
        Add a ``[N]`` bias (same dtype as the inputs) before the activation.
    activation:
        One of :data:`ACTIVATIONS` or None.
    out_dtype:
        Output dtype (defaults to ``dtype``).
    tile_m, tile_n, tile_k:
        Cache/thread-block tile sizes, normally chosen by the tiling pass; defaults from
        :func:`default_tiles`. On CPU they are clamped to the problem and rounded to the
        micro-tile.
    micro:
        CPU register tile ``(MR, NR)``; default from :func:`default_micro`.
    tensor_core:
        CUDA only: use WMMA tensor cores (default: yes for f16/bf16).
    parallel:
        CPU only: run output tiles on TVM's thread pool.
    b_packed:
        CPU only, 2-D B: the kernel takes B already in its panel layout (:func:`pack_b`
        with this kernel's ``config``), as for a constant weight packed at build time.

    Returns a :class:`Kernel` with inputs ``(A, B[, bias])`` and one output ``[*batch, M, N]``.
    """
    if dtype not in DTYPES:
        raise ValueError(f"matmul dtype {dtype!r} not supported; expected one of {DTYPES}")
    if len(a_shape) < 2 or len(b_shape) < 2:
        raise ValueError(
            f"matmul needs operands of rank >= 2, got {list(a_shape)} and {list(b_shape)}"
        )
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(
            f"unknown activation {activation!r}; expected one of {ACTIVATIONS} or None"
        )
    tgt = as_target(target)
    out_dtype = out_dtype or dtype
    a_shape = tuple(int(d) for d in a_shape)
    b_shape = tuple(int(d) for d in b_shape)
    m, k = a_shape[-2:]
    n, kb = (b_shape[-2], b_shape[-1]) if transpose_b else (b_shape[-1], b_shape[-2])
    if k != kb:
        raise ValueError(
            f"matmul contraction mismatch: A{list(a_shape)} has K={k}, "
            f"B{list(b_shape)}{' (transposed)' if transpose_b else ''} has K={kb}"
        )
    batch = broadcast_shapes(a_shape[:-2], b_shape[:-2])
    tiles = default_tiles(tgt, dtype)
    tiles.update(
        {k_: v for k_, v in (("tile_m", tile_m), ("tile_n", tile_n), ("tile_k", tile_k)) if v}
    )
    flops = 2 * prod(batch) * m * n * k

    if is_gpu(tgt):
        if b_packed:
            raise ValueError("a pre-packed B is for the CPU kernel only")
        use_tc = tensor_core if tensor_core is not None else dtype in ("float16", "bfloat16")
        if use_tc and dtype == "float32":
            raise ValueError("tensor-core matmul needs float16 or bfloat16 inputs")
        if use_tc:
            return _matmul_cuda_wmma(
                a_shape,
                b_shape,
                dtype,
                transpose_b,
                bias,
                activation,
                out_dtype,
                tiles,
                tgt,
                name,
                flops,
                batch,
            )
        return _matmul_cuda_simt(
            a_shape,
            b_shape,
            dtype,
            transpose_b,
            bias,
            activation,
            out_dtype,
            tiles,
            tgt,
            name,
            flops,
            batch,
        )
    return _matmul_cpu(
        a_shape,
        b_shape,
        dtype,
        transpose_b,
        bias,
        activation,
        out_dtype,
        tiles,
        micro or default_micro(tgt),
        parallel,
        tgt,
        name,
        flops,
        batch,
        b_packed,
    )


# --------------------------------------------------------------------------- TE definition


def _define(
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
    dtype: str,
    transpose_b: bool,
    bias: bool,
    activation: str | None,
    out_dtype: str,
    batch: tuple[int, ...],
    padded: tuple[int, int, int],
    pad_dtype: str,
    b_packed_nr: int | None = None,
) -> tuple[list[te.Tensor], te.Tensor, dict[str, te.Tensor]]:
    """The padded matmul as TE; returns (inputs, output, named stages).

    ``b_packed_nr``: B arrives already packed (:func:`pack_b`, ``[Np/NR, Kp, NR]`` in
    ``pad_dtype``), so the kernel has no B_pad stage."""
    m, k = a_shape[-2:]
    n = b_shape[-2] if transpose_b else b_shape[-1]
    mp, np_, kp = padded
    a = te.placeholder(a_shape, dtype, name="A")
    if b_packed_nr is not None:
        b = te.placeholder((np_ // b_packed_nr, kp, b_packed_nr), pad_dtype, name="B_packed")
    else:
        b = te.placeholder(b_shape, dtype, name="B")
    zero = tirx.const(0, pad_dtype)

    def a_pad_fn(*idx: Any) -> tirx.PrimExpr:
        *bi, i, kk = idx
        val = a[(*bi, i, kk)].astype(pad_dtype)
        if (mp, kp) == (m, k):
            return val
        # Clamp the index as well as guarding it: the load is then in bounds even if the
        # select is evaluated eagerly (LLVM may hoist it when vectorising).
        safe = a[(*bi, tirx.min(i, m - 1), tirx.min(kk, k - 1))].astype(pad_dtype)
        return tirx.if_then_else(tirx.all(i < m, kk < k), safe, zero)

    def b_pad_fn(*idx: Any) -> tirx.PrimExpr:
        *bi, kk, j = idx
        if (np_, kp) == (n, k):
            return (b[(*bi, j, kk)] if transpose_b else b[(*bi, kk, j)]).astype(pad_dtype)
        jj, kc = tirx.min(j, n - 1), tirx.min(kk, k - 1)
        safe = (b[(*bi, jj, kc)] if transpose_b else b[(*bi, kc, jj)]).astype(pad_dtype)
        return tirx.if_then_else(tirx.all(j < n, kk < k), safe, zero)

    a_pad = te.compute((*a_shape[:-2], mp, kp), a_pad_fn, name="A_pad")
    b_pad = None if b_packed_nr is not None else te.compute((*b_shape[:-2], kp, np_), b_pad_fn, name="B_pad")
    r = te.reduce_axis((0, kp), name="k")

    def b_at(bi: list[Any], kk: Any, j: Any) -> tirx.PrimExpr:
        if b_pad is None:
            nr = b_packed_nr
            return b[(tirx.floordiv(j, nr), kk, tirx.floormod(j, nr))]
        return b_pad[(*bi, kk, j)]

    def acc_fn(*idx: Any) -> tirx.PrimExpr:
        *bo, i, j = idx
        ai = broadcast_index(a_shape[:-2], bo)
        bi = broadcast_index(b_shape[:-2], bo)
        prod_ = a_pad[(*ai, i, r)].astype("float32") * b_at(bi, r, j).astype("float32")
        return te.sum(prod_, axis=r)

    acc = te.compute((*batch, mp, np_), acc_fn, name="C_acc")
    inputs = [a, b]
    bias_t = None
    if bias:
        bias_t = te.placeholder((n,), dtype, name="bias")
        inputs.append(bias_t)

    def out_fn(*idx: Any) -> tirx.PrimExpr:
        *bo, i, j = idx
        v = acc[(*bo, i, j)]
        if bias_t is not None:
            v = v + bias_t[j].astype("float32")
        return apply_activation(v, activation).astype(out_dtype)

    out = te.compute((*batch, m, n), out_fn, name="out")
    return inputs, out, {"A_pad": a_pad, "B_pad": b_pad, "C_acc": acc}


# --------------------------------------------------------------------------- CPU


def _matmul_cpu(
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
    dtype: str,
    transpose_b: bool,
    bias: bool,
    activation: str | None,
    out_dtype: str,
    tiles: dict[str, int],
    micro: tuple[int, int],
    parallel: bool,
    tgt: Target,
    name: str,
    flops: int,
    batch: tuple[int, ...],
    b_packed: bool = False,
) -> Kernel:
    m, k = a_shape[-2:]
    n = b_shape[-2] if transpose_b else b_shape[-1]
    mr, nr = micro
    if b_packed and len(b_shape) != 2:
        raise ValueError("a pre-packed B must be a 2-D matrix")
    lanes = simd_lanes(tgt, "float32")
    if nr % lanes:
        raise ValueError(f"micro NR={nr} must be a multiple of the SIMD width {lanes}")
    # Clamp tiles to the problem (a 37-row matmul does not need a 64-row tile), then round
    # them to the micro-tile so the micro-kernel never straddles a tile edge.
    tm = round_up(min(tiles["tile_m"], round_up(m, mr)), mr)
    tn = round_up(min(tiles["tile_n"], round_up(n, nr)), nr)
    # At least 2: a k-step loop of extent 1 is folded away by the schedule, and the A packing
    # then no longer sits in a loop chain (ScheduleError in reorder). K = 1 (an outer product,
    # e.g. rotary frequencies x positions) is zero-padded to 2.
    tk = max(MIN_TILE_K, min(tiles["tile_k"], k))
    mp, np_, kp = round_up(m, tm), round_up(n, tn), round_up(k, tk)
    inputs, out, _st = _define(
        a_shape,
        b_shape,
        dtype,
        transpose_b,
        bias,
        activation,
        out_dtype,
        batch,
        (mp, np_, kp),
        "float32",
        nr if b_packed else None,
    )
    nb = len(batch)

    def schedule(sch: s_tir.Schedule) -> None:
        acc = sch.get_sblock("C_acc")
        a_pad = sch.get_sblock("A_pad")
        loops = sch.get_loops(acc)
        bl, (i, j, kk) = loops[:nb], loops[nb:]
        io, ii = sch.split(i, [None, tm])
        jo, ji = sch.split(j, [None, tn])
        ko, ki = sch.split(kk, [None, tk])
        jm, jr = sch.split(ji, [None, nr])
        im, ir = sch.split(ii, [None, mr])
        jrv_o, jrv = sch.split(jr, [None, lanes])
        sch.reorder(*bl, io, jo, ko, jm, im, ki, ir, jrv_o, jrv)
        tile = sch.fuse(*bl, io, jo)
        if parallel:
            sch.parallel(tile)
        # Packing: B into NR-wide panels ([Np/NR, Kp, NR]), once, at the root (or not at
        # all: a constant B arrives packed, see pack_b); A into MR-tall slivers
        # ([Mp/MR, Kp, MR]) per (tile, k-step), inside the tile's task.
        if not b_packed:
            b_pad = sch.get_sblock("B_pad")
            sch.transform_layout(
                b_pad, ("write", 0), lambda *x: (*x[:-2], x[-1] // nr, x[-2], x[-1] % nr)
            )
            *bb_loops, bk, bj = sch.get_loops(b_pad)
            bjo, bji = sch.split(bj, [None, nr])
            sch.reorder(bjo, bk, bji)
            _, bjv = sch.split(bji, [None, lanes])
            sch.vectorize(bjv)
            if parallel:
                sch.parallel(sch.fuse(*bb_loops, bjo))
        sch.transform_layout(
            a_pad, ("write", 0), lambda *x: (*x[:-2], x[-2] // mr, x[-1], x[-2] % mr)
        )
        sch.compute_at(a_pad, ko)
        *_, ai, ak = sch.get_loops(a_pad)
        aio, air = sch.split(ai, [None, mr])
        sch.reorder(aio, ak, air)
        sch.unroll(air)
        # register micro-kernel
        sch.vectorize(jrv)
        sch.unroll(jrv_o)
        sch.unroll(ir)
        sch.decompose_reduction(acc, ko)
        # epilogue on the finished tile
        ob = sch.get_sblock("out")
        sch.reverse_compute_at(ob, tile)
        ol = sch.get_loops(ob)
        # With M = N = 1 the tile has no row or column loop of its own: the innermost loop is the
        # (parallel) tile loop, which also holds the reduction, and is not the epilogue's to vectorise.
        own = not sch.get_sref(ol[-1]).same_as(sch.get_sref(tile))
        ext = int(sch.get(ol[-1]).extent)
        vec = largest_divisor(ext, lanes) if own else 1
        if vec > 1:
            _, ov = sch.split(ol[-1], [None, vec])
            sch.vectorize(ov)

    return make_kernel(
        name,
        inputs,
        [out],
        tgt,
        schedule,
        flops=flops,
        config={
            "tile_m": tm,
            "tile_n": tn,
            "tile_k": tk,
            "micro": (mr, nr),
            "lanes": lanes,
            "padded": (mp, np_, kp),
            "parallel": parallel,
            "b_packed": b_packed,
        },
    )


def pack_b(b: np.ndarray, padded: tuple[int, int, int], nr: int, transpose_b: bool = False) -> np.ndarray:
    """A constant 2-D B in the CPU kernel's panel layout ``[Np/NR, Kp, NR]`` (float32,
    zero-padded), done once when the model is built instead of on every call; pass the
    kernel's ``config["padded"]`` and ``config["micro"][1]``."""
    _, np_, kp = padded
    b = np.asarray(b)
    if transpose_b:
        b = b.T
    k, n = b.shape
    out = np.zeros((kp, np_), np.float32)
    out[:k, :n] = b.astype(np.float32)
    return np.ascontiguousarray(out.reshape(kp, np_ // nr, nr).transpose(1, 0, 2))


# --------------------------------------------------------------------------- CUDA


def _cuda_tiles(m: int, n: int, tiles: dict[str, int], quantum: int) -> tuple[int, int, int]:
    """Block tiles clamped to the problem (rounded to ``quantum``) so tiny matmuls do not pay
    for a 128-wide block of padding."""
    tm = round_up(min(tiles["tile_m"], round_up(m, quantum)), quantum)
    tn = round_up(min(tiles["tile_n"], round_up(n, quantum)), quantum)
    return tm, tn, tiles["tile_k"]


def _cooperative_fetch(
    sch: s_tir.Schedule, block: Any, ndim: int, threads: tuple[tuple[str, int], ...], vec: int
) -> None:
    """Spread a shared-memory fill over the thread block (innermost ``vec`` elements per thread,
    consecutive threads on consecutive addresses so global loads coalesce)."""
    loops = sch.get_loops(block)[-ndim:]
    fused = sch.fuse(*loops)
    extent = int(sch.get(fused).extent)
    total = prod([t for _, t in threads])
    vec = largest_divisor(max(1, extent // total), vec) if extent % total == 0 else 1
    factors = [None, *[t for _, t in threads], vec]
    parts = sch.split(fused, factors)
    for (axis, _), loop in zip(threads, parts[1:-1], strict=True):
        sch.bind(loop, axis)
    if vec > 1:
        sch.vectorize(parts[-1])


def _matmul_cuda_simt(
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
    dtype: str,
    transpose_b: bool,
    bias: bool,
    activation: str | None,
    out_dtype: str,
    tiles: dict[str, int],
    tgt: Target,
    name: str,
    flops: int,
    batch: tuple[int, ...],
) -> Kernel:
    """CUDA cores: 16×16 threads, each owning a contiguous (tile_m/16)×(tile_n/16) register tile.

    A thread's tile is contiguous rather than strided by 16 (the classic bank-conflict-free
    layout) because TVM's region analysis takes the bounding box of a strided per-thread
    region: the local accumulator grew to 49×49 floats and the epilogue placed by
    ``reverse_compute_at`` iterated that whole box, writing other threads' outputs.
    """
    m, k = a_shape[-2:]
    n = b_shape[-2] if transpose_b else b_shape[-1]
    ty_n = tx_n = 16
    tm, tn, tk = _cuda_tiles(m, n, tiles, 16)
    tk = max(MIN_TILE_K, min(tk, k))  # see _matmul_cpu: an extent-1 k step breaks the fuse
    mp, np_, kp = round_up(m, tm), round_up(n, tn), round_up(k, tk)
    inputs, out, _ = _define(
        a_shape,
        b_shape,
        dtype,
        transpose_b,
        bias,
        activation,
        out_dtype,
        batch,
        (mp, np_, kp),
        "float32",
    )
    nb = len(batch)

    def schedule(sch: s_tir.Schedule) -> None:
        acc = sch.get_sblock("C_acc")
        loops = sch.get_loops(acc)
        bl, (i, j, kk) = loops[:nb], loops[nb:]
        by, ty, ii = sch.split(i, [None, ty_n, tm // ty_n])
        bx, tx, ji = sch.split(j, [None, tx_n, tn // tx_n])
        ko, ki = sch.split(kk, [None, tk])
        sch.reorder(*bl, by, bx, ty, tx, ko, ki, ii, ji)
        if bl:
            sch.bind(sch.fuse(*bl), "blockIdx.z")
        sch.bind(by, "blockIdx.y")
        sch.bind(bx, "blockIdx.x")
        sch.bind(ty, "threadIdx.y")
        sch.bind(tx, "threadIdx.x")
        threads = (("threadIdx.y", ty_n), ("threadIdx.x", tx_n))
        for stage in ("A_pad", "B_pad"):
            blk = sch.get_sblock(stage)
            sch.set_scope(blk, 0, "shared")
            sch.compute_at(blk, ko)
            _cooperative_fetch(sch, blk, 2, threads, 4)
        sch.set_scope(acc, 0, "local")
        # k steps: ``#pragma unroll`` for nvcc, not unrolled in TIR (tile_k x the register tile
        # of straight-line statements made 280 KB of CUDA per kernel and 10 s of nvcc)
        sch.unroll(ki)
        sch.annotate(ki, "pragma_unroll_explicit", 0)
        sch.unroll(ii)
        sch.unroll(ji)
        sch.decompose_reduction(acc, ko)
        ob = sch.get_sblock("out")
        sch.reverse_compute_at(ob, tx)
        # the loops under ``tx`` only: a register tile of extent 1 leaves no loop, and unrolling
        # ``loops[-2:]`` then took ``threadIdx.x`` itself (every thread computed the whole tile)
        ob_loops = sch.get_loops(ob)
        tx_stmt = sch.get(tx)
        at = next(p for p, loop in enumerate(ob_loops) if sch.get(loop).same_as(tx_stmt))
        epilogue = ob_loops[at + 1:]
        for loop in epilogue:
            # unrolled so the accumulator is indexed by constants and stays in registers
            sch.unroll(loop)
        if epilogue:
            # by nvcc (``#pragma unroll``): an activation's expression repeated per element in
            # TIR is most of the source
            sch.annotate(epilogue[0], "pragma_unroll_explicit", 0)

    return make_kernel(
        name,
        inputs,
        [out],
        tgt,
        schedule,
        flops=flops,
        config={
            "tile_m": tm,
            "tile_n": tn,
            "tile_k": tk,
            "threads": (ty_n, tx_n),
            "padded": (mp, np_, kp),
            "tensor_core": False,
        },
    )


def _matmul_cuda_wmma(
    a_shape: tuple[int, ...],
    b_shape: tuple[int, ...],
    dtype: str,
    transpose_b: bool,
    bias: bool,
    activation: str | None,
    out_dtype: str,
    tiles: dict[str, int],
    tgt: Target,
    name: str,
    flops: int,
    batch: tuple[int, ...],
) -> Kernel:
    """Tensor cores through WMMA 16×16×16 (f16/bf16 in, f32 accumulate).

    The thread block owns a ``tile_m × tile_n`` tile split over a 2×4 grid of warps; each warp
    holds (tile_m/32)×(tile_n/64) accumulator fragments. A and B tiles are staged through
    padded shared memory (``storage_align`` avoids bank conflicts for ``load_matrix_sync``),
    fragments are loaded per 16-wide k step, and the accumulators go through shared memory to
    the fused epilogue, which writes only the valid region.

    The schedule follows the one in ``tvm.s_tir.dlight.gpu.matmul.MatmulTensorization`` (the
    0.27 reference for which tensorize patterns match), rebuilt on this module's padded TE; the
    16×16 nests become WMMA calls through :mod:`.tensorize` because ``Schedule.tensorize``
    segfaults in this wheel. bf16 uses the same ``nvcuda::wmma`` calls with ``nv_bfloat16``
    fragments (sm_80+), which TVM ships no registered intrinsic for.
    """
    m, k = a_shape[-2:]
    n = b_shape[-2] if transpose_b else b_shape[-1]
    warps_m, warps_n = 2, 4
    tm, tn, tk = _cuda_tiles(m, n, tiles, 16)
    tm = round_up(tm, 16 * warps_m)
    tn = round_up(tn, 16 * warps_n)
    tk = round_up(max(16, min(tk, round_up(k, 16))), 16)
    frag_m, frag_n = tm // (16 * warps_m), tn // (16 * warps_n)
    mp, np_, kp = round_up(m, tm), round_up(n, tn), round_up(k, tk)
    inputs, out, _ = _define(
        a_shape,
        b_shape,
        dtype,
        transpose_b,
        bias,
        activation,
        out_dtype,
        batch,
        (mp, np_, kp),
        dtype,
    )
    nb = len(batch)
    num_warps = warps_m * warps_n

    def schedule(sch: s_tir.Schedule) -> None:
        acc = sch.get_sblock("C_acc")
        loops = sch.get_loops(acc)
        bl, (i, j, kk) = loops[:nb], loops[nb:]
        i, i_in = sch.split(i, [None, 16])
        j, j_in = sch.split(j, [None, 16])
        kk, k_in = sch.split(kk, [None, 16])
        sch.reorder(i, j, kk, i_in, j_in, k_in)
        inner = acc
        outer = sch.blockize(i_in)
        i0, i2, i3 = sch.split(i, [None, warps_m, frag_m])
        j0, j2, j3 = sch.split(j, [None, warps_n, frag_n])
        k0, k1 = sch.split(kk, [None, tk // 16])
        sch.reorder(i0, j0, i2, j2, k0, k1, i3, j3)
        if bl:
            sch.bind(sch.fuse(*bl), "blockIdx.z")
        sch.bind(i0, "blockIdx.y")
        sch.bind(j0, "blockIdx.x")
        warp = sch.fuse(i2, j2)
        sch.bind(warp, "threadIdx.y")
        threads = (("threadIdx.y", num_warps), ("threadIdx.x", 32))
        for stage in ("A_pad", "B_pad"):
            blk = sch.get_sblock(stage)
            sch.set_scope(blk, 0, "shared.dyn")
            sch.compute_at(blk, k0)
            _cooperative_fetch(sch, blk, 2, threads, 8)
            sch.storage_align(blk, 0, axis=-2, factor=16, offset=8)
        a_frag = sch.cache_read(outer, 0, "wmma.matrix_a")
        b_frag = sch.cache_read(outer, 1, "wmma.matrix_b")
        sch.compute_at(a_frag, k1)
        sch.compute_at(b_frag, k1)
        store = sch.cache_write(outer, 0, "wmma.accumulator")
        # The accumulator tile leaves the fragments through shared memory: C_acc itself
        # lives there, so the epilogue reads shared and writes global (never a padded global).
        sch.set_scope(store, 0, "shared.dyn")
        sch.storage_align(store, 0, axis=-2, factor=16, offset=4)
        sch.reverse_compute_at(store, warp)
        si, sj = sch.get_loops(store)[-2:]
        si0, si1 = sch.split(si, [None, 16])
        sj0, sj1 = sch.split(sj, [None, 16])
        sch.reorder(si0, sj0, si1, sj1)
        ob = sch.get_sblock("out")
        sch.reverse_compute_at(ob, warp)
        _cooperative_fetch(sch, ob, 2, (("threadIdx.x", 32),), 4)
        init = sch.decompose_reduction(outer, k0)
        init_inner = sch.get_child_blocks(init)[0]
        for frag, role in ((a_frag, "load_a"), (b_frag, "load_b")):
            fi, fj = sch.get_loops(frag)[-2:]
            fi0, fi1 = sch.split(fi, [None, 16])
            fj0, fj1 = sch.split(fj, [None, 16])
            sch.reorder(fi0, fj0, fi1, fj1)
            sch.unroll(fi0)
            sch.unroll(fj0)
            tensorize.mark(sch, fi1, role)
        tensorize.mark(sch, sch.get_loops(init_inner)[-2], "fill")
        tensorize.mark(sch, sch.get_loops(store)[-2], "store")
        tensorize.mark(sch, sch.get_loops(inner)[-3], "mma")

    return make_kernel(
        name,
        inputs,
        [out],
        tgt,
        schedule,
        flops=flops,
        config={
            "tile_m": tm,
            "tile_n": tn,
            "tile_k": tk,
            "warps": (warps_m, warps_n),
            "fragments_per_warp": (frag_m, frag_n),
            "padded": (mp, np_, kp),
            "tensor_core": "wmma.m16n16k16",
        },
    )
