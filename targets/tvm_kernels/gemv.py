"""Matrix-vector products (decode-time matmuls) with a constant weight, on the CPU.

Design note
-----------
A decode step multiplies a handful of rows (one token per sequence: ``M`` = batch) by every
weight matrix of the model once.  That is memory bound: each weight element is read once per
step and used ``M`` times, so what matters is streaming the weight at full bandwidth, on both
cores, with nothing else in the way.  The general matmul (:mod:`.matmul`) pads ``M`` to its
register tile (4 or 8 rows: 4-8x the FMAs of a GEMV), splits ``N`` into 256-wide tiles (three
tasks for a 768-wide projection: one core idles a third of the time) and, when ``A`` has batch
dimensions (``[B, 1, K] @ [K, N]``, the LM head), reads the weight once per batch row.

This kernel instead::

    W_packed[N/NB, K, NB]  = W zero-padded to NB columns, packed once when the model is lowered
    acc[m, j]              = Σ_k A[m, k] · W_packed[j / NB, k, j % NB]     (float32)
    out[..., j]            = act(acc[m, j] + bias[j])                    (m = the flattened rows of A)

- the leading dimensions of ``A`` are flattened into ``M`` (``[B, 1, K]`` is ``M = B``), so the
  weight is read once per call whatever the batch shape;
- one parallel task per ``NB``-wide column block: the block's weight panel is one contiguous
  ``K × NB`` stream (no strided rows), and with ``N / NB`` blocks (12 for ``N = 768`` at
  ``NB = 64``) the two cores stay balanced;
- per ``k`` the ``M × NB`` accumulators (``M · NB / lanes`` vector registers: NB shrinks as M
  grows, so they stay in registers) take one broadcast of ``A[m, k]`` and one FMA per vector;
- the bias and activation epilogue runs on the block while it is in cache.

Use :func:`applies` to ask whether a matmul is a GEMV this kernel handles (CPU, float32, 2-D
constant weight, ``M <= MAX_ROWS``), :func:`gemv` to build it and :func:`pack` to lay out the
weight.  Tested with TVM 0.27 (the ``tirx`` / ``s_tir`` namespaces).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from tvm import s_tir, te, tirx

from .common import Kernel, TargetLike, as_target, is_gpu, make_kernel, prod, round_up, simd_lanes

MAX_ROWS = 8
"""Largest flattened row count ``M`` served by the GEMV kernel (beyond it the matmul's register
tiling wins: each weight element is reused enough times for the FMAs to matter)."""

ACC_VECTORS = 8
"""Vector accumulators per task (``M × NB / lanes``): half the AVX2 register file, a quarter of
AVX-512's, leaving room for the weight loads and the broadcasts."""


def block_width(m: int, lanes: int) -> int:
    """Columns per task (``NB``) for ``m`` rows: ``ACC_VECTORS`` accumulators, at least one vector."""
    return lanes * max(1, ACC_VECTORS // max(1, m))


def applies(a_shape: Sequence[int], b_shape: Sequence[int], dtype: str, target: TargetLike | None = None) -> bool:
    """Whether ``A[a_shape] @ B[b_shape]`` (B 2-D) is a GEMV this kernel serves on ``target``."""
    tgt = as_target(target)
    if is_gpu(tgt) or dtype != "float32" or len(b_shape) != 2 or len(a_shape) < 2:
        return False
    if any(not isinstance(d, (int, np.integer)) for d in (*a_shape, *b_shape)):
        return False
    m = prod([int(d) for d in a_shape[:-1]])
    return 1 <= m <= MAX_ROWS and int(a_shape[-1]) == int(b_shape[0]) and int(b_shape[1]) >= 1


def gemv(
    a_shape: Sequence[int],
    b_shape: Sequence[int],
    *,
    bias: bool = False,
    activation: str | None = None,
    target: TargetLike | None = None,
    name: str = "gemv",
    parallel: bool = True,
) -> Kernel:
    """``out = act(A @ W [+ bias])`` for ``A[..., K]`` with few rows and a packed ``W[K, N]``.

    The kernel's inputs are ``(A, W_packed[, bias])`` where ``W_packed`` is :func:`pack` of the
    weight with this kernel's ``config["block"]``; the output is ``[*a_shape[:-1], N]`` float32.
    """
    from .matmul import ACTIVATIONS, apply_activation

    tgt = as_target(target)
    a_shape = tuple(int(d) for d in a_shape)
    k, n = (int(d) for d in b_shape)
    if not applies(a_shape, (k, n), "float32", tgt):
        raise ValueError(f"gemv: A{list(a_shape)} @ W{[k, n]} is not a float32 CPU GEMV with at most "
                         f"{MAX_ROWS} rows")
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; expected one of {ACTIVATIONS} or None")
    lead = a_shape[:-1]
    m = prod(lead)
    lanes = simd_lanes(tgt, "float32")
    nb = block_width(m, lanes)
    np_ = round_up(n, nb)
    a = te.placeholder(a_shape, "float32", name="A")
    w = te.placeholder((np_ // nb, k, nb), "float32", name="W_packed")
    inputs = [a, w]
    r = te.reduce_axis((0, k), name="k")

    def a_at(row: Any, kk: Any) -> tirx.PrimExpr:
        idx = []
        for d in reversed(lead):  # unflatten the row index (row-major)
            idx.append(tirx.floormod(row, d) if d > 1 else tirx.const(0, "int32"))
            row = tirx.floordiv(row, d)
        return a[(*reversed(idx), kk)]

    acc = te.compute((m, np_), lambda i, j: te.sum(a_at(i, r) * w[tirx.floordiv(j, nb), r, tirx.floormod(j, nb)],
                                                   axis=r), name="C_acc")
    bias_t = None
    if bias:
        bias_t = te.placeholder((n,), "float32", name="bias")
        inputs.append(bias_t)

    def out_fn(*idx: Any) -> tirx.PrimExpr:
        *lo, j = idx
        row: Any = tirx.const(0, "int32")
        for d, i in zip(lead, lo):
            row = row * d + i
        v = acc[row, j]
        if bias_t is not None:
            v = v + bias_t[j]
        return apply_activation(v, activation)

    out = te.compute((*lead, n), out_fn, name="out")

    def schedule(sch: s_tir.Schedule) -> None:
        blk = sch.get_sblock("C_acc")
        i, j, kk = sch.get_loops(blk)
        jo, ji = sch.split(j, [None, nb])
        jv_o, jv = sch.split(ji, [None, lanes])
        sch.reorder(jo, kk, i, jv_o, jv)
        if parallel:
            sch.parallel(jo)
        sch.vectorize(jv)
        if nb // lanes > 1:
            sch.unroll(jv_o)
        if m > 1:
            sch.unroll(i)
        sch.decompose_reduction(blk, kk)
        ob = sch.get_sblock("out")
        sch.reverse_compute_at(ob, jo)

    return make_kernel(name, inputs, [out], tgt, schedule, flops=2 * m * n * k,
                       config={"block": nb, "rows": m, "padded_n": np_, "lanes": lanes, "parallel": parallel})


def pack(w: np.ndarray, block: int) -> np.ndarray:
    """Weight ``W[K, N]`` as ``[ceil(N / block), K, block]`` float32 panels (zero-padded columns)."""
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2:
        raise ValueError(f"gemv.pack: the weight must be 2-D, got shape {list(w.shape)}")
    k, n = w.shape
    np_ = round_up(n, block)
    out = np.zeros((k, np_), np.float32)
    out[:, :n] = w
    return np.ascontiguousarray(out.reshape(k, np_ // block, block).transpose(1, 0, 2))





def try_lower(lw: Any, op: Any, wconst: np.ndarray | None, bias: Any = None, act: str | None = None,
              ops: list[Any] | None = None, out: Any = None) -> bool:
    """Lower the matmul ``op`` (``x @ w``, ``w`` the constant ``wconst``) with this kernel when it is a
    GEMV (:func:`applies`), for the TVM lowerer ``lw`` (``targets/tvm.py``); False leaves it to the
    general matmul."""
    if wconst is None or lw.gpu or wconst.ndim != 2 or wconst.dtype != np.float32:
        return False
    x = op.operands[0]
    xs_ = lw.shape(x)
    if getattr(x.dtype, "value", None) != "f32" or not applies(xs_, wconst.shape, "float32", lw.target):
        return False
    k = gemv(xs_, wconst.shape, bias=bias is not None, activation=act, target=lw.target, name=lw.kname(out or op),
             parallel=True)
    wv = lw.bb.emit(lw.relax.const(pack(wconst, k.config["block"]), "float32"))
    args = [lw.env[id(x)], wv] + ([lw.env[id(bias)]] if bias is not None else [])
    lw.env[id((out or op).results[0])] = lw.call_kernel(k, args, out or op, ops or [op])
    return True
__all__ = ["ACC_VECTORS", "MAX_ROWS", "applies", "block_width", "gemv", "pack", "try_lower"]
