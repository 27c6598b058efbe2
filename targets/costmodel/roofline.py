"""Roofline costs for any op, matmul dispatch by device kind, and attention fused vs unfused.

Design note. The roofline (Williams, Waterman, Patterson, CACM 2009) bounds an op by
its FLOPs at peak compute and its bytes at peak bandwidth: ``time = max(flops/peak,
bytes/bandwidth)``; which term wins is the op's bound. Every kind of spec has a peak
per dtype and (optionally) a memory bandwidth, so :func:`op_cost` works for TPUs,
GPUs and the host CPU alike. Matmuls get the kind's own model (systolic folds, or
CTA tiles and waves) through :func:`matmul_cost`; the CPU has only the roofline,
with its peak measured by ``benchmarks/measure_host_cpu.py``.

Attention (B batch, H heads, N query and Nk key positions, d head dim, b bytes):

* FLOPs: ``4·B·H·N·Nk·d`` (QKᵀ and PV), either way.
* Unfused: three kernels. QKᵀ reads Q, K and writes the scores S; softmax reads S,
  writes P; PV reads P, V and writes O. HBM bytes ``b·B·H·(2Nd + 2Nk·d + 4·N·Nk)``,
  i.e. ``b·B·H·(4Nd + 4N²)`` for N = Nk: the N² term makes it memory-bound
  (intensity tends to d/2).
* Fused (FlashAttention): one kernel keeps S and P on chip; Q is read and O written
  once, and K and V are re-streamed once per block of ``q_block`` queries:
  ``b·B·H·(2Nd + 2Nk·d·ceil(N/q_block))``. When those re-reads stay on chip (GPU L2,
  TPU VMEM) K and V leave HBM once: ``b·B·H·4Nd`` for N = Nk, and the intensity
  ``4N²d / (4Nd·b)`` grows as N/2 (bf16): compute-bound once N is a few hundred.
  Without on-chip reuse the intensity tends to ``q_block/2`` instead.
* Causal masking lets the fused kernel skip key blocks above the diagonal (the
  FLOPs and the K/V re-reads shrink to the blocks it visits); the unfused form
  computes the full score matrix and masks it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from irkit.targets.hwspec import HardwareSpec, dtype_bytes, load_spec, normalize_dtype

__all__ = [
    "AttentionCost",
    "OpCost",
    "attention_bytes",
    "attention_cost",
    "attention_flops",
    "matmul_cost",
    "op_cost",
    "roofline",
]

Bound = Literal["compute", "memory"]


@dataclass(frozen=True)
class OpCost:
    """Roofline cost of one op."""

    flops: float
    """Floating-point (or integer) operations."""
    bytes: float
    """Bytes moved to and from off-chip memory."""
    peak_flops: float
    """Peak FLOP/s used."""
    bandwidth: float | None
    """Bytes/s used; None when the spec has no memory bandwidth (memory time 0)."""
    compute_seconds: float
    """flops / peak_flops (or the kind's model for matmuls)."""
    memory_seconds: float
    """bytes / bandwidth."""
    seconds: float
    """max(compute_seconds, memory_seconds)."""
    bound: Bound
    """``memory`` when memory_seconds > compute_seconds, else ``compute``."""
    detail: object | None = None
    """The kind-specific cost (SystolicGemmCost, SimtGemmCost) when there is one."""

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte."""
        return self.flops / self.bytes if self.bytes else math.inf

    @property
    def ridge(self) -> float:
        """Intensity at which compute and memory time are equal (peak / bandwidth)."""
        return self.peak_flops / self.bandwidth if self.bandwidth else 0.0


def roofline(
    flops: float, bytes_moved: float, peak_flops: float, bandwidth: float | None
) -> OpCost:
    """``max(flops / peak_flops, bytes_moved / bandwidth)`` with its bound label."""
    if flops < 0 or bytes_moved < 0:
        raise ValueError("flops and bytes must be non-negative")
    if peak_flops <= 0:
        raise ValueError(f"peak_flops must be positive, got {peak_flops}")
    compute = flops / peak_flops
    memory = bytes_moved / bandwidth if bandwidth else 0.0
    return OpCost(
        flops=flops,
        bytes=bytes_moved,
        peak_flops=peak_flops,
        bandwidth=bandwidth,
        compute_seconds=compute,
        memory_seconds=memory,
        seconds=max(compute, memory),
        bound="memory" if memory > compute else "compute",
    )


def op_cost(
    flops: float, bytes_moved: float, spec: HardwareSpec | str, dtype: str = "f32"
) -> OpCost:
    """Roofline cost of an op with ``flops`` and ``bytes_moved`` on any kind of spec."""
    hw = load_spec(spec)
    return roofline(flops, bytes_moved, hw.peak_flops(dtype), hw.bandwidth_bytes_per_s)


def matmul_cost(
    m: int, k: int, n: int, spec: HardwareSpec | str, dtype: str = "bf16", *, batch: int = 1
) -> OpCost:
    """Cost of ``batch`` matmuls ``[m,k] @ [k,n]`` with the model of the spec's kind.

    Systolic: :func:`~irkit.targets.costmodel.systolic.systolic_gemm` with the spec's
    dataflow and no tiling; SIMT: :func:`~irkit.targets.costmodel.simt.simt_gemm` with
    the best CTA tile; CPU: the roofline with compulsory traffic.
    """
    from irkit.targets.costmodel.simt import simt_gemm
    from irkit.targets.costmodel.systolic import systolic_gemm

    hw = load_spec(spec)
    name = normalize_dtype(dtype)
    if hw.systolic is not None:
        c = systolic_gemm(m, k, n, hw, name, batch=batch)
        return OpCost(
            flops=c.flops,
            bytes=c.dram_bytes,
            peak_flops=hw.peak_flops(name),
            bandwidth=hw.bandwidth_bytes_per_s,
            compute_seconds=c.compute_seconds,
            memory_seconds=c.memory_seconds,
            seconds=c.seconds,
            bound=c.bound,
            detail=c,
        )
    if hw.simt is not None:
        g = simt_gemm(m, k, n, hw, name, batch=batch)
        return OpCost(
            flops=g.flops,
            bytes=g.dram_bytes,
            peak_flops=g.peak_flops,
            bandwidth=hw.bandwidth_bytes_per_s,
            compute_seconds=g.compute_seconds,
            memory_seconds=g.memory_seconds,
            seconds=g.seconds,
            bound=g.bound,
            detail=g,
        )
    size = dtype_bytes(name)
    traffic = batch * (m * k + k * n + m * n) * size
    return op_cost(2 * m * n * k * batch, traffic, hw, name)


# --------------------------------------------------------------------------- attention


def _fused_blocks(seq_q: int, seq_kv: int, q_block: int, causal: bool) -> list[tuple[int, int]]:
    """(query rows, keys read) for each query block of a fused attention kernel.

    Without a mask every block reads all keys. With a causal mask (queries aligned to
    the end of the keys, as when decoding with a cache) a block reads the key blocks
    up to its last query's position, rounded up to whole blocks of ``q_block`` keys.
    """
    blocks = []
    offset = seq_kv - seq_q
    for start in range(0, seq_q, q_block):
        rows = min(q_block, seq_q - start)
        if not causal:
            keys = seq_kv
        else:
            last = max(1, offset + start + rows)
            keys = min(seq_kv, math.ceil(last / q_block) * q_block)
        blocks.append((rows, keys))
    return blocks


def attention_flops(
    batch: int,
    heads: int,
    seq_len: int,
    head_dim: int,
    *,
    kv_seq_len: int | None = None,
    fused: bool = True,
    causal: bool = False,
    q_block: int = 128,
) -> float:
    """FLOPs of QKᵀ and PV: ``4·B·H·N·Nk·d``; a fused causal kernel does only the
    key blocks on or below the diagonal."""
    seq_kv = seq_len if kv_seq_len is None else kv_seq_len
    if not (fused and causal):
        return 4.0 * batch * heads * seq_len * seq_kv * head_dim
    pairs = sum(rows * keys for rows, keys in _fused_blocks(seq_len, seq_kv, q_block, True))
    return 4.0 * batch * heads * pairs * head_dim


def attention_bytes(
    batch: int,
    heads: int,
    seq_len: int,
    head_dim: int,
    dtype_size: int,
    *,
    fused: bool,
    kv_seq_len: int | None = None,
    causal: bool = False,
    q_block: int = 128,
    kv_resident: bool = False,
) -> float:
    """HBM bytes of attention (see the module note for the formulas).

    ``kv_resident``: the fused kernel's K/V re-reads hit on-chip memory or cache, so
    K and V leave HBM once per head.
    """
    seq_kv = seq_len if kv_seq_len is None else kv_seq_len
    bh = batch * heads
    if not fused:
        return float(
            dtype_size
            * bh
            * (2 * seq_len * head_dim + 2 * seq_kv * head_dim + 4 * seq_len * seq_kv)
        )
    if kv_resident:
        keys_read = seq_kv
    else:
        keys_read = sum(keys for _, keys in _fused_blocks(seq_len, seq_kv, q_block, causal))
    # Q in and O out once; K and V once per query block, for the keys it visits.
    return float(dtype_size * bh * (2 * seq_len * head_dim + 2 * keys_read * head_dim))


@dataclass(frozen=True)
class AttentionCost:
    """Cost of scaled-dot-product attention, fused or not."""

    fused: bool
    """Whether S and P stay on chip (FlashAttention) or go through HBM."""
    batch: int
    """Batch size B."""
    heads: int
    """Heads H."""
    seq_len: int
    """Query positions N."""
    kv_seq_len: int
    """Key/value positions Nk."""
    head_dim: int
    """Head dimension d."""
    dtype: str
    """Element dtype."""
    causal: bool
    """Whether a causal mask applies."""
    kv_resident: bool
    """Fused only: whether K and V were read from HBM once per head (on-chip re-reads)."""
    flops: float
    """FLOPs of the two matmuls."""
    bytes: float
    """HBM bytes."""
    score_bytes: float
    """Of which, bytes of the N x Nk score/probability matrices (0 when fused)."""
    compute_seconds: float
    """Time of the matmuls with the spec kind's model (or at peak, for CPUs)."""
    memory_seconds: float
    """bytes / bandwidth."""
    seconds: float
    """Fused: max(compute, memory). Unfused: sum over the three kernels of each one's max."""
    bound: Bound
    """``memory`` when memory_seconds > compute_seconds, else ``compute``."""

    @property
    def intensity(self) -> float:
        """FLOPs per HBM byte."""
        return self.flops / self.bytes if self.bytes else math.inf


def _matmul_seconds(
    hw: HardwareSpec, m: int, k: int, n: int, dtype: str, batch: int, flops: float
) -> float:
    """Compute-only time of a batched matmul with the kind's model."""
    if hw.cpu is not None:
        return flops / hw.peak_flops(dtype)
    return matmul_cost(m, k, n, hw, dtype, batch=batch).compute_seconds


def attention_cost(
    batch: int,
    heads: int,
    seq_len: int,
    head_dim: int,
    spec: HardwareSpec | str,
    dtype: str = "bf16",
    *,
    fused: bool,
    kv_seq_len: int | None = None,
    causal: bool = False,
    q_block: int = 128,
    kv_resident: bool | None = None,
) -> AttentionCost:
    """Cost of attention on ``spec``, fused (FlashAttention) or as three kernels.

    The matmul time comes from the spec kind's GEMM model with ``batch * heads``
    independent GEMMs (so a head dim of 64 on a 128-wide MXU costs what it should);
    the memory time from :func:`attention_bytes`. ``kv_resident`` (fused only)
    defaults to whether the K/V re-reads stay on chip: on a GPU when the K and V of
    the heads in flight (one per SM at most) fit in L2, on a TPU when one head's K
    and V fit in a quarter of VMEM (room for double buffering and the Q/O blocks);
    never on a CPU.
    """
    hw = load_spec(spec)
    name = normalize_dtype(dtype)
    size = dtype_bytes(name)
    seq_kv = seq_len if kv_seq_len is None else kv_seq_len
    bh = batch * heads
    for label, value in (
        ("batch", batch),
        ("heads", heads),
        ("seq_len", seq_len),
        ("head_dim", head_dim),
        ("kv_seq_len", seq_kv),
        ("q_block", q_block),
    ):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if kv_resident is None:
        kv_bytes = 2 * seq_kv * head_dim * size
        if hw.simt is not None and hw.simt.l2_bytes is not None:
            kv_resident = kv_bytes * min(bh, hw.simt.sms) <= hw.simt.l2_bytes
        elif hw.systolic is not None and hw.systolic.vmem_bytes is not None:
            kv_resident = kv_bytes <= hw.systolic.vmem_bytes // 4
        else:
            kv_resident = False
    flops = attention_flops(
        batch,
        heads,
        seq_len,
        head_dim,
        kv_seq_len=seq_kv,
        fused=fused,
        causal=causal,
        q_block=q_block,
    )
    total_bytes = attention_bytes(
        batch,
        heads,
        seq_len,
        head_dim,
        size,
        fused=fused,
        kv_seq_len=seq_kv,
        causal=causal,
        q_block=q_block,
        kv_resident=kv_resident,
    )
    bandwidth = hw.bandwidth_bytes_per_s
    half = flops / 2
    qk_s = _matmul_seconds(hw, seq_len, head_dim, seq_kv, name, bh, half)
    pv_s = _matmul_seconds(hw, seq_len, seq_kv, head_dim, name, bh, half)
    if fused and causal:
        # The fused kernel skips masked blocks: scale by the fraction it computes.
        full = 4.0 * bh * seq_len * seq_kv * head_dim
        qk_s *= flops / full
        pv_s *= flops / full
    compute_seconds = qk_s + pv_s
    memory_seconds = total_bytes / bandwidth if bandwidth else 0.0
    if fused:
        score_bytes = 0.0
        seconds = max(compute_seconds, memory_seconds)
    else:
        score_bytes = float(size * bh * 4 * seq_len * seq_kv)

        def mem(nbytes: float) -> float:
            return nbytes / bandwidth if bandwidth else 0.0

        # Each kernel is its own roofline; they run one after another.
        qk_bytes = size * bh * (seq_len * head_dim + seq_kv * head_dim + seq_len * seq_kv)
        softmax_bytes = size * bh * 2 * seq_len * seq_kv
        pv_bytes = size * bh * (seq_len * seq_kv + seq_kv * head_dim + seq_len * head_dim)
        seconds = max(qk_s, mem(qk_bytes)) + mem(softmax_bytes) + max(pv_s, mem(pv_bytes))
    return AttentionCost(
        fused=fused,
        batch=batch,
        heads=heads,
        seq_len=seq_len,
        kv_seq_len=seq_kv,
        head_dim=head_dim,
        dtype=name,
        causal=causal,
        kv_resident=bool(kv_resident and fused),
        flops=flops,
        bytes=total_bytes,
        score_bytes=score_bytes,
        compute_seconds=compute_seconds,
        memory_seconds=memory_seconds,
        seconds=seconds,
        bound="memory" if memory_seconds > compute_seconds else "compute",
    )
