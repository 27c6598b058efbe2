"""Analytic cost of a GEMM on a GPU: tiles, waves, occupancy, tensor cores, roofline.

Design note. A GPU GEMM kernel cuts ``C[M,N]`` into CTA tiles of ``bm x bn`` and
walks K in steps of ``bk``, staging ``stages`` slices of A and B in shared memory.
The model follows NVIDIA's "Matrix Multiplication Background" guide:

* **Tile quantisation**: edge tiles are computed whole, so the work is
  ``ceil(M/bm)*bm x ceil(N/bn)*bn x ceil(K/bk)*bk``.
* **Occupancy**: CTAs resident per SM = the smallest of the limits set by shared
  memory (``stages * (bm*bk + bk*bn) * bytes`` plus the 1 KiB the driver reserves
  per CTA), registers (accumulators ``bm*bn/threads`` plus operand fragments and
  ~32 for addressing, allocated in warp-sized granules of 256), threads and the
  CTA limit. A tile that needs more than the per-CTA maximum of shared memory or
  255 registers per thread is illegal.
* **Wave quantisation**: ``ctas_per_sm * SMs`` CTAs run at once (a wave); the last
  wave may be partly empty. Time is counted per SM: the busiest SM runs
  ``ceil(ctas / SMs)`` CTA-times, each CTA sharing its SM's tensor cores with the
  others resident there, which is the waves-times-wave-time of the guide with a
  partial last wave costing only the CTAs it holds per SM.
* **Tensor cores**: 16-bit, tf32, 8-bit types run at the tensor-core peak; the CTA
  tile must be a multiple of the instruction (``mma.sync`` m16n8k16 on sm_80,
  warpgroup ``wgmma`` m64nNk16 on sm_90, where each 4-warp warpgroup owns a multiple
  of 64 rows). Operand rows must be 16-byte aligned for the vector (cp.async/TMA)
  loads the tensor-core kernels use: with K or N not a multiple of 16 bytes the
  GEMM either pays a padding copy (``misaligned="pad"``, the default) or falls back
  to the CUDA-core FMA rate (``misaligned="fallback"``, what cuBLAS did before 11.0).
  Fewer than 4 resident warps per SM leave some of its 4 tensor cores idle.
* **Shared-memory bandwidth**: operands reach the tensor cores through shared
  memory (32 banks x 4 bytes per clock per SM). With ``mma.sync`` each warp reads its
  rows of A and columns of B, so A is re-read once per warp column and B once per
  warp row; each ``wgmma`` m64 instruction reads its 64 rows of A and all of B's
  slice. The on-chip time is the larger of the math time and this read time, which
  is what makes tiny tiles slow on big GEMMs.
* **CUDA-core register blocking**: without tensor cores each thread owns an
  ``r x c`` block of C (``r * c = bm * bn / threads``) and, per k, loads ``r + c``
  operands from shared memory before its ``r * c`` FMAs. Loads and FMAs share the
  issue slots, so the FMA rate is scaled by ``r*c / (r*c + r + c)`` with the block
  taken square (the shape that needs fewest loads): 0.5 for 2x2, 0.67 for 4x4, 0.8
  for 8x8 (the register-blocking argument of Volkov and Demmel, SC 2008).
* **Memory and L2**: HBM traffic is the compulsory A + B + C when A and B fit in L2;
  otherwise the CTAs of one wave, rasterised as a near-square block of tiles, share
  A rows and B columns through L2, so A is read once per wave-column of tiles and B
  once per wave-row.
* **Roofline** (Williams, Waterman, Patterson, CACM 2009): time is
  ``max(compute, memory)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from irkit.targets.hwspec import HardwareSpec, SimtSpec, dtype_bytes, load_spec, normalize_dtype

__all__ = [
    "DEFAULT_CTA_TILES",
    "GEMV_MAX_ROWS",
    "CtaResources",
    "CtaTile",
    "SimtGemmCost",
    "SimtTileChoice",
    "choose_cta_tile",
    "cta_resources",
    "default_cta_tiles",
    "simt_gemm",
    "simt_gemv",
]

Bound = Literal["compute", "memory"]
Misaligned = Literal["pad", "fallback"]

_SMEM_RESERVED_PER_CTA = 1024
"""Shared memory the driver reserves per resident CTA on sm_80 and later (CUDA guide)."""
_REG_ALLOC_UNIT = 256
"""Registers are allocated per warp in granules of 256 (8 per thread)."""
_REG_OVERHEAD = 32
"""Registers per thread for addresses, loop counters and predicates (estimate)."""
_ALIGN_BYTES = 16
"""Row alignment the 16-byte vector loads (cp.async, TMA) of tensor-core kernels need."""


@dataclass(frozen=True)
class CtaTile:
    """A CTA tile: ``bm x bn`` of C per CTA, ``bk`` of K per step, ``warps`` warps,
    ``stages`` K-slices buffered in shared memory."""

    bm: int
    """Rows of C per CTA."""
    bn: int
    """Columns of C per CTA."""
    bk: int
    """K elements per main-loop step."""
    warps: int = 4
    """Warps per CTA."""
    stages: int = 3
    """Shared-memory pipeline depth (K slices in flight)."""

    def threads(self, warp_size: int = 32) -> int:
        """Threads per CTA."""
        return self.warps * warp_size

    def __str__(self) -> str:
        return f"{self.bm}x{self.bn}x{self.bk}/w{self.warps}/s{self.stages}"


def default_cta_tiles() -> tuple[CtaTile, ...]:
    """Candidate CTA tiles: bm, bn in {64, 128, 256}, bk in {32, 64}, 4 or 8 warps,
    2 to 4 stages (the range CUTLASS and cuBLAS heuristics draw from)."""
    tiles = []
    for bm in (64, 128, 256):
        for bn in (64, 128, 256):
            for bk in (32, 64):
                for warps in (4, 8):
                    for stages in (2, 3, 4):
                        tiles.append(CtaTile(bm, bn, bk, warps, stages))
    return tuple(tiles)


DEFAULT_CTA_TILES: tuple[CtaTile, ...] = default_cta_tiles()
"""The candidates :func:`choose_cta_tile` tries by default."""


@dataclass(frozen=True)
class CtaResources:
    """What one CTA of a tile needs, and how many fit on an SM."""

    tile: CtaTile
    """The tile."""
    legal: bool
    """Whether the tile can run at all on this GPU for this dtype."""
    reason: str
    """Why not, when illegal; empty otherwise."""
    instruction: str
    """Instruction the tile is built from: ``mma.sync m16n8k16``, ``wgmma m64n128k16``, ``fma``."""
    smem_bytes: int
    """Shared memory per CTA (pipeline stages of A and B)."""
    regs_per_thread: int
    """Estimated registers per thread."""
    ctas_per_sm: int
    """Resident CTAs per SM (0 when illegal)."""
    limiter: str
    """What bounds ctas_per_sm: ``smem``, ``registers``, ``threads`` or ``blocks``."""
    smem_reads_per_step: int
    """Bytes the math reads from shared memory per K step (operand re-reads across warps)."""
    issue_efficiency: float = 1.0
    """CUDA cores: the share of issue slots left to FMAs beside the shared-memory loads
    that feed them (1.0 for tensor cores)."""


def _warp_grid(warps: int) -> tuple[int, int]:
    # Warps are laid out as a near-square grid over the CTA tile, wider along N.
    rows = 1
    while rows * rows * 2 <= warps:
        rows *= 2
    return rows, warps // rows


def cta_resources(
    tile: CtaTile,
    spec: HardwareSpec | str,
    dtype: str = "bf16",
    *,
    tensor_cores: bool | None = None,
) -> CtaResources:
    """Shared memory, registers and occupancy of ``tile`` for ``dtype`` on ``spec``."""
    hw = _resolve(spec)
    g = hw.simt
    assert g is not None
    name = normalize_dtype(dtype)
    size = dtype_bytes(name)
    use_tc = g.uses_tensor_cores(name) if tensor_cores is None else tensor_cores
    threads = tile.threads(g.warp_size)
    smem = tile.stages * (tile.bm * tile.bk + tile.bk * tile.bn) * size
    acc_regs = _cdiv(tile.bm * tile.bn, threads)  # one 32-bit accumulator per output
    wg = use_tc and g.wgmma
    reason = ""
    if use_tc:
        mma_m, mma_n, _ = g.mma_shape
        mma_k = g.mma_k(name)
        if wg:
            groups = max(1, tile.warps // 4)
            if tile.warps % 4:
                reason = "wgmma needs whole warpgroups (warps a multiple of 4)"
            elif tile.bm % (64 * groups):
                reason = f"wgmma needs {64 * groups} | bm ({groups} warpgroups x m64)"
            elif tile.bn > g.wgmma_n_max or tile.bn % 8:
                reason = f"wgmma N must be a multiple of 8 up to {g.wgmma_n_max}"
            instruction = f"wgmma m64n{tile.bn}k{mma_k}"
            # A and B are read from shared memory by wgmma; fragments stay small.
            frag_regs = 0
            # Each m64 instruction reads its 64 rows of A and all of B's bk x bn slice.
            smem_reads = (tile.bm * tile.bk + max(1, tile.bm // 64) * tile.bk * tile.bn) * size
        else:
            wr, wc = _warp_grid(tile.warps)
            warp_m, warp_n = tile.bm // wr, tile.bn // wc
            if tile.bm % wr or tile.bn % wc or warp_m % mma_m or warp_n % mma_n:
                reason = (
                    f"warp tile {tile.bm}/{wr} x {tile.bn}/{wc} is not a multiple "
                    f"of mma m{mma_m}n{mma_n}"
                )
            if tile.bk % mma_k:
                reason = reason or f"bk={tile.bk} is not a multiple of the mma k={mma_k}"
            instruction = f"mma.sync m{mma_m}n{mma_n}k{mma_k}"
            # A and B fragments for one k-step, double-buffered in registers.
            frag_regs = _cdiv(2 * (warp_m * mma_k + mma_k * warp_n) * size, 4 * g.warp_size)
            # Every warp loads its rows of A and columns of B: A is read once per warp
            # column, B once per warp row.
            smem_reads = tile.bk * (wc * tile.bm + wr * tile.bn) * size
    else:
        instruction = "fma"
        # Each thread owns a tm x tn block of C (tm * tn = acc_regs) and needs tm values
        # of A and tn of B per k, double-buffered: about 4 * sqrt(acc_regs) registers.
        frag_regs = 4 * math.isqrt(acc_regs - 1) + 4 if acc_regs > 1 else 4
        wr, wc = _warp_grid(tile.warps)
        smem_reads = tile.bk * (wc * tile.bm + wr * tile.bn) * size
    # CUDA cores: r*c FMAs per k beside r + c loads, the block taken square.
    side = math.sqrt(acc_regs)
    issue = 1.0 if use_tc else acc_regs / (acc_regs + 2 * side)
    regs = acc_regs + frag_regs + _REG_OVERHEAD
    regs = _round_up(regs, 8)
    if not reason and threads > g.max_threads_per_block:
        reason = f"{threads} threads exceed {g.max_threads_per_block} per CTA"
    if not reason and regs > g.max_regs_per_thread:
        reason = f"needs ~{regs} registers per thread, limit {g.max_regs_per_thread} (would spill)"
    if not reason and smem > g.smem_block_limit:
        reason = f"{smem} B shared memory exceeds {g.smem_block_limit} B per CTA"
    if reason:
        return CtaResources(tile, False, reason, instruction, smem, regs, 0, "", smem_reads)
    warps_regs = _round_up(regs * g.warp_size, _REG_ALLOC_UNIT) * tile.warps
    limits = {
        "smem": g.smem_per_sm_bytes // (smem + _SMEM_RESERVED_PER_CTA),
        "registers": g.regs_per_sm // warps_regs,
        "threads": g.max_threads_per_sm // threads,
        "blocks": g.max_blocks_per_sm,
    }
    limiter = min(limits, key=lambda key: (limits[key], list(limits).index(key)))
    ctas = limits[limiter]
    if ctas < 1:
        return CtaResources(
            tile,
            False,
            f"no CTA fits an SM ({limiter} limit)",
            instruction,
            smem,
            regs,
            0,
            limiter,
            smem_reads,
        )
    return CtaResources(tile, True, "", instruction, smem, regs, ctas, limiter, smem_reads, issue)


@dataclass(frozen=True)
class SimtGemmCost:
    """Cost of ``batch`` GEMMs ``A[m,k] @ B[k,n]`` on a GPU with one CTA tile."""

    m: int
    """Rows of A and C."""
    k: int
    """Reduction dimension."""
    n: int
    """Columns of B and C."""
    batch: int
    """Independent GEMMs of this shape (their CTAs share the waves)."""
    dtype: str
    """Input dtype (canonical)."""
    tile: CtaTile
    """The CTA tile."""
    resources: CtaResources
    """Shared memory, registers and occupancy of the tile."""
    tensor_cores: bool
    """Whether the math ran on tensor cores."""
    aligned: bool
    """Whether K and N rows are 16-byte aligned for vector loads."""
    misaligned_policy: str
    """``pad`` or ``fallback``: what a misaligned GEMM did."""
    tiles_m: int
    """ceil(M_eff / bm)."""
    tiles_n: int
    """ceil(N_eff / bn)."""
    k_steps: int
    """ceil(K_eff / bk)."""
    ctas: int
    """CTAs launched (tiles_m * tiles_n * batch)."""
    ctas_per_sm: int
    """Resident CTAs per SM."""
    waves: int
    """ceil(ctas / (ctas_per_sm * SMs))."""
    wave_efficiency: float
    """ctas / (waves * ctas_per_sm * SMs): how full the waves are."""
    tile_efficiency: float
    """M*N / (tiles_m*bm * tiles_n*bn): 1 - tile-quantisation waste."""
    k_efficiency: float
    """K / (k_steps*bk)."""
    padded_m: int
    """tiles_m * bm."""
    padded_n: int
    """tiles_n * bn."""
    padded_k: int
    """k_steps * bk."""
    flops: int
    """Useful FLOPs: 2*M*N*K*batch."""
    executed_flops: int
    """FLOPs the padded tiles execute."""
    peak_flops: float
    """Math rate used (tensor-core or FMA peak for the dtype)."""
    math_seconds: float
    """Busiest SM's CTAs times one CTA's FLOPs at the SM's math rate."""
    smem_seconds: float
    """Busiest SM's CTAs times one CTA's shared-memory reads at the SM's smem bandwidth."""
    compute_seconds: float
    """max(math_seconds, smem_seconds): the on-chip time."""
    l2_bytes: int
    """Global loads into the SMs (A once per tile column, B once per tile row, C out)."""
    dram_bytes: int
    """HBM traffic including any padding copies."""
    memory_seconds: float
    """dram_bytes / bandwidth."""
    seconds: float
    """max(compute_seconds, memory_seconds)."""
    bound: Bound
    """``memory`` if memory_seconds > compute_seconds else ``compute``."""
    kernel: str = "gemm"
    """``gemm`` (the CTA-tile model) or ``gemv`` (at most :data:`GEMV_MAX_ROWS` rows: a
    split-K matrix-vector kernel streaming the weights, see :func:`simt_gemv`)."""

    @property
    def achieved_tflops(self) -> float:
        """Useful TFLOP/s at the modelled time."""
        return self.flops / self.seconds / 1e12 if self.seconds else math.inf

    @property
    def utilization(self) -> float:
        """Useful FLOP/s as a fraction of the dtype's peak."""
        return self.flops / (self.seconds * self.peak_flops) if self.seconds else 0.0

    @property
    def intensity(self) -> float:
        """Useful FLOPs per HBM byte."""
        return self.flops / self.dram_bytes if self.dram_bytes else math.inf


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _cdiv(a, b) * b


def _significant(x: float) -> float:
    # Times that differ only by float rounding must tie, so the tie-breakers decide.
    return float(f"{x:.9g}")


def _resolve(spec: HardwareSpec | str) -> HardwareSpec:
    hw = load_spec(spec)
    if hw.simt is None:
        raise ValueError(
            f"hardware '{hw.name}' is kind '{hw.kind}', not 'simt'; "
            "use the systolic or CPU cost model for it"
        )
    return hw


def _output_bytes(name: str) -> int:
    if name == "int8":
        return 4  # int32 accumulators are the output of an int8 GEMM
    if name == "fp8":
        return 2  # fp8 GEMMs write bf16
    return dtype_bytes(name)


def _dram_bytes(
    g: SimtSpec,
    m: int,
    k: int,
    n: int,
    size: int,
    out_size: int,
    tiles_m: int,
    tiles_n: int,
    concurrent: int,
) -> int:
    """HBM bytes for one GEMM: compulsory if A and B fit in L2, else wave-level reuse."""
    a, b, c = m * k * size, k * n * size, m * n * out_size
    if g.l2_bytes is not None and a + b <= g.l2_bytes:
        return a + b + c
    wave = max(1, min(concurrent, tiles_m * tiles_n))
    # A wave rasterised as a near-square block of tiles shares A rows and B columns.
    wave_rows = min(tiles_m, max(1, math.isqrt(wave)))
    wave_cols = min(tiles_n, _cdiv(wave, wave_rows))
    if g.l2_bytes is None:
        wave_rows = wave_cols = 1  # no L2 model: every CTA streams its own A and B
    return a * _cdiv(tiles_n, wave_cols) + b * _cdiv(tiles_m, wave_rows) + c


def simt_gemm(
    m: int,
    k: int,
    n: int,
    spec: HardwareSpec | str,
    dtype: str = "bf16",
    *,
    tile: CtaTile | None = None,
    batch: int = 1,
    misaligned: Misaligned = "pad",
    allow_tf32: bool = False,
) -> SimtGemmCost:
    """Cost of ``batch`` GEMMs ``A[m,k] @ B[k,n]`` on the GPU ``spec``.

    ``tile`` defaults to the best of :data:`DEFAULT_CTA_TILES` (see
    :func:`choose_cta_tile`); an illegal tile raises ValueError with the reason.
    f32 runs on CUDA cores unless ``allow_tf32``. See the module note for the model.
    """
    hw = _resolve(spec)
    g = hw.simt
    assert g is not None
    for label, value in (("m", m), ("k", k), ("n", n), ("batch", batch)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if misaligned not in ("pad", "fallback"):
        raise ValueError(f"misaligned must be 'pad' or 'fallback', got {misaligned!r}")
    if tile is None:
        best = choose_cta_tile(
            m, k, n, hw, dtype, batch=batch, misaligned=misaligned, allow_tf32=allow_tf32
        ).best
        if m * batch <= GEMV_MAX_ROWS:
            return simt_gemv(best, hw)
        return best
    name = normalize_dtype(dtype)
    size = dtype_bytes(name)
    out_size = _output_bytes(name)
    math_dtype = "tf32" if (name == "f32" and allow_tf32 and "tf32" in g.peak_tflops) else name
    tensor_cores = g.uses_tensor_cores(math_dtype)
    align = max(1, _ALIGN_BYTES // size)
    aligned = k % align == 0 and n % align == 0
    extra_bytes = 0
    m_eff, k_eff, n_eff = m, k, n
    if tensor_cores and not aligned:
        if misaligned == "fallback":
            tensor_cores = False
        else:
            # Copy the operands into padded buffers first: read the original, write the
            # padded copy; the GEMM then reads the padded copy.
            k_eff, n_eff = _round_up(k, align), _round_up(n, align)
            a_copy = (m * k + m * k_eff) * size if k_eff != k else 0
            b_copy = (k * n + k_eff * n_eff) * size
            # A wider C is sliced back: read the padded result, write the real one.
            c_slice = (m * n_eff + m * n) * out_size if n_eff != n else 0
            extra_bytes = batch * (a_copy + b_copy + c_slice)
    res = cta_resources(tile, hw, math_dtype, tensor_cores=tensor_cores)
    if not res.legal:
        raise ValueError(f"CTA tile {tile} is illegal on '{hw.name}' for {name}: {res.reason}")
    peak = g.peak_flops(math_dtype) if tensor_cores else g.peak_flops("f32")
    tiles_m, tiles_n = _cdiv(m_eff, tile.bm), _cdiv(n_eff, tile.bn)
    k_steps = _cdiv(k_eff, tile.bk)
    ctas = tiles_m * tiles_n * batch
    concurrent = res.ctas_per_sm * g.sms
    waves = _cdiv(ctas, concurrent)
    sm_rate = peak / g.sms
    # An SM's 4 sub-partitions each own a tensor core and issue from their own warps.
    resident_warps = min(res.ctas_per_sm, _cdiv(ctas, g.sms)) * tile.warps
    sm_rate *= min(1.0, resident_warps / 4)
    cta_flops = 2 * tile.bm * tile.bn * k_steps * tile.bk
    busiest_sm_ctas = _cdiv(ctas, g.sms)
    math_seconds = busiest_sm_ctas * cta_flops / (sm_rate * res.issue_efficiency)
    # Operands reach the tensor cores through shared memory, whose bandwidth caps how
    # small a tile can be before it starves them.
    smem_bw = g.smem_bytes_per_clk * g.clock_ghz * 1e9
    smem_seconds = busiest_sm_ctas * k_steps * res.smem_reads_per_step / smem_bw
    compute_seconds = max(math_seconds, smem_seconds)
    l2 = batch * (
        (m_eff * k_eff * tiles_n + k_eff * n_eff * tiles_m) * size + m_eff * n_eff * out_size
    )
    # The CTAs of one wave are spread over the batch's GEMMs; each GEMM gets its share.
    per_gemm_concurrent = max(1, concurrent // batch)
    dram = batch * _dram_bytes(
        g, m_eff, k_eff, n_eff, size, out_size, tiles_m, tiles_n, per_gemm_concurrent
    )
    dram += extra_bytes
    bandwidth = hw.bandwidth_bytes_per_s
    memory_seconds = dram / bandwidth if bandwidth else 0.0
    seconds = max(compute_seconds, memory_seconds)
    return SimtGemmCost(
        m=m,
        k=k,
        n=n,
        batch=batch,
        dtype=name,
        tile=tile,
        resources=res,
        tensor_cores=tensor_cores,
        aligned=aligned,
        misaligned_policy=misaligned,
        tiles_m=tiles_m,
        tiles_n=tiles_n,
        k_steps=k_steps,
        ctas=ctas,
        ctas_per_sm=res.ctas_per_sm,
        waves=waves,
        wave_efficiency=ctas / (waves * concurrent),
        tile_efficiency=(m * n) / (tiles_m * tile.bm * tiles_n * tile.bn),
        k_efficiency=k / (k_steps * tile.bk),
        padded_m=tiles_m * tile.bm,
        padded_n=tiles_n * tile.bn,
        padded_k=k_steps * tile.bk,
        flops=2 * m * n * k * batch,
        executed_flops=cta_flops * ctas,
        peak_flops=peak,
        math_seconds=math_seconds,
        smem_seconds=smem_seconds,
        compute_seconds=compute_seconds,
        l2_bytes=l2,
        dram_bytes=dram,
        memory_seconds=memory_seconds,
        seconds=seconds,
        bound="memory" if memory_seconds > compute_seconds else "compute",
    )


GEMV_MAX_ROWS = 8
"""At most this many output rows (M x batch) a GEMM runs as a GEMV kernel (cuBLAS gemv /
split-K, the kernels batch-1 decode uses), not as M-padded CTA tiles."""


def simt_gemv(tiled: SimtGemmCost, spec: HardwareSpec | str) -> SimtGemmCost:
    """The GEMV cost of a GEMM with few rows, from its CTA-tile cost ``tiled``.

    A matrix-vector kernel splits K and N over every SM, so it neither pads M to a tile
    nor leaves SMs idle: it reads A, B and writes C once (compulsory bytes, no alignment
    copies) at the achievable streaming bandwidth (``[memory] stream_efficiency`` x the
    datasheet figure), and its FLOPs run at the dtype's peak:
    ``max(bytes / (stream_efficiency * hbm_bw), flops / peak)``.
    """
    hw = _resolve(spec)
    size = dtype_bytes(tiled.dtype)
    out = _output_bytes(tiled.dtype)
    m, k, n, batch = tiled.m, tiled.k, tiled.n, tiled.batch
    dram = batch * ((m * k + k * n) * size + m * n * out)
    bw = hw.stream_bandwidth_bytes_per_s
    memory_seconds = dram / bw if bw else 0.0
    compute_seconds = tiled.flops / tiled.peak_flops if tiled.peak_flops else 0.0
    return replace(
        tiled,
        kernel="gemv",
        math_seconds=compute_seconds,
        smem_seconds=0.0,
        compute_seconds=compute_seconds,
        executed_flops=tiled.flops,
        l2_bytes=dram,
        dram_bytes=dram,
        memory_seconds=memory_seconds,
        seconds=max(compute_seconds, memory_seconds),
        bound="memory" if memory_seconds > compute_seconds else "compute",
    )


@dataclass(frozen=True)
class SimtTileChoice:
    """The best CTA tile for a GEMM, the legal candidates best first, and the rejected ones."""

    best: SimtGemmCost
    """Cost with the fastest legal tile."""
    candidates: tuple[SimtGemmCost, ...]
    """Every legal candidate's cost, sorted best first."""
    rejected: tuple[tuple[CtaTile, str], ...]
    """Illegal candidates with the reason."""


def choose_cta_tile(
    m: int,
    k: int,
    n: int,
    spec: HardwareSpec | str,
    dtype: str = "bf16",
    *,
    tiles: Iterable[CtaTile] | None = None,
    batch: int = 1,
    misaligned: Misaligned = "pad",
    allow_tf32: bool = False,
) -> SimtTileChoice:
    """Cost every candidate CTA tile (default :data:`DEFAULT_CTA_TILES`) and pick the best.

    Ranking: shortest time; then less HBM traffic and less L2-to-SM traffic (L2
    bandwidth is not priced, so among equally fast tiles the one that loads less
    wins), more resident CTAs per SM (latency hiding), fewer stages.
    """
    hw = _resolve(spec)
    legal: list[SimtGemmCost] = []
    rejected: list[tuple[CtaTile, str]] = []
    for tile in DEFAULT_CTA_TILES if tiles is None else tiles:
        try:
            legal.append(
                simt_gemm(
                    m,
                    k,
                    n,
                    hw,
                    dtype,
                    tile=tile,
                    batch=batch,
                    misaligned=misaligned,
                    allow_tf32=allow_tf32,
                )
            )
        except ValueError as exc:
            rejected.append((tile, str(exc).rsplit(": ", 1)[-1]))
    if not legal:
        raise ValueError(f"no legal CTA tile for {m}x{k}x{n} {dtype} on '{hw.name}'")
    legal.sort(
        key=lambda c: (
            _significant(c.seconds),
            c.dram_bytes,
            c.l2_bytes,
            -c.ctas_per_sm,
            c.tile.stages,
            c.tile.bk,
            c.tile.warps,
            c.tile.bm,
        )
    )
    return SimtTileChoice(best=legal[0], candidates=tuple(legal), rejected=tuple(rejected))
