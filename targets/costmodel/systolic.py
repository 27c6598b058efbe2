"""Analytic cost of a GEMM on systolic arrays (TPU MXUs and the like).

Design note. ``C[M,N] = A[M,K] @ B[K,N]`` is mapped onto an R x C array of MAC
units the way SCALE-Sim (Samajdar et al., ISPASS 2020) maps it. Each dataflow keeps
one operand in the array and streams the other:

====  =================  ==========================  =========================
flow  stationary         spatial rows x cols (Sr,Sc)  temporal T (rows streamed)
====  =================  ==========================  =========================
ws    B (weights)        K x N                        M
is    A (inputs)         K x M                        N
os    C (outputs)        M x N                        K
====  =================  ==========================  =========================

The spatial dims are cut into ``folds = ceil(Sr/R) * ceil(Sc/C)`` array-sized pieces
(edges padded with idle PEs). Without weight double buffering every fold runs alone:

* ws / is: load the stationary tile (R cycles), stream T rows through the skewed
  array (T + R - 1 cycles), drain the last partial sums across (C - 1 cycles):
  ``2R + C + T - 2`` cycles per fold;
* os: stream both operands for T steps with the skew of both edges
  (T + R - 1 + C - 1): ``R + C + T - 2`` cycles per fold;

and folds run back to back. SCALE-Sim numbers cycles from 0 and reports the cycle in
which the last output is written, one less than the count; ``compute_cycles`` uses
the same convention, so with one array and no double buffering it equals SCALE-Sim
v3's "Total Cycles" exactly (``benchmarks/scalesim_compare.py`` checks this, and
the unit tests pin the values it measured).

With ``weight_double_buffer`` (the TPU's MXU) the next stationary tile shifts in
while the current fold streams, and the weight switch travels with the data
wavefront, so folds pipeline: a fold starts ``max(T, R)`` cycles after the previous
one (T rows streamed, or the R cycles the next tile needs to load, whichever is
longer) and only the first load and the last fill and drain are paid. With one fold
both modes give the same count.

``arrays`` arrays (MXUs, times TensorCores for a whole chip) take folds round-robin.
Memory: bytes moved to and from HBM follow the tiling (a Pallas-style grid of
(tile_m, tile_n, tile_k) blocks with K innermost re-reads A once per N block and B
once per M block; without a tile, each operand moves once). With ``overlap_memory``
(TPU DMA) the time is ``max(compute, memory)``; without it (SCALE-Sim's stalls) the
two add up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from irkit.targets.hwspec import HardwareSpec, dtype_bytes, load_spec, normalize_dtype

__all__ = [
    "DATAFLOWS",
    "SystolicGemmCost",
    "SystolicTileCandidate",
    "SystolicTileChoice",
    "best_dataflow",
    "choose_systolic_tile",
    "systolic_accumulator_bytes",
    "systolic_gemm",
    "systolic_output_bytes",
    "systolic_tile_sizes",
]

DATAFLOWS: tuple[str, ...] = ("ws", "is", "os")
"""The three dataflows, in the order ties are broken."""

Bound = Literal["compute", "memory"]


@dataclass(frozen=True)
class SystolicGemmCost:
    """Cost of ``C[M,N] = A[M,K] @ B[K,N]`` (``batch`` times) on systolic arrays."""

    m: int
    """Rows of A and C."""
    k: int
    """Reduction dimension."""
    n: int
    """Columns of B and C."""
    batch: int
    """Independent GEMMs of this shape (e.g. batch * heads for attention)."""
    dtype: str
    """Input dtype (canonical name)."""
    dataflow: str
    """``ws``, ``is`` or ``os``."""
    rows: int
    """Array rows R."""
    cols: int
    """Array columns C."""
    arrays: int
    """Arrays working on folds in parallel."""
    weight_double_buffer: bool
    """Whether the next stationary tile loaded during the current fold."""
    overlap_memory: bool
    """Whether HBM traffic overlapped with compute."""
    tile: tuple[int, int, int] | None
    """(tile_m, tile_n, tile_k) block of the grid, or None for the whole GEMM at once."""
    blocks: int
    """Grid blocks per GEMM: ceil(M/tile_m) * ceil(N/tile_n) * ceil(K/tile_k)."""
    temporal: int
    """Rows streamed per fold (T): tile_m for ws, tile_n for is, tile_k for os."""
    folds: int
    """Array-sized pieces over all blocks and the batch."""
    folds_per_array: int
    """Folds the busiest array runs: ceil(folds / arrays)."""
    cycles_per_fold: int
    """Cycles one fold takes when it runs alone (fill, stream and drain)."""
    padded_m: int
    """M after padding to the tile and, where M is spatial, to the array."""
    padded_k: int
    """K after padding."""
    padded_n: int
    """N after padding."""
    compute_cycles: int
    """Array cycles, in SCALE-Sim's convention (index of the last output's cycle)."""
    memory_cycles: int
    """HBM transfer time expressed in array cycles (0 without a bandwidth)."""
    cycles: int
    """Total: max(compute, memory) when overlapped, their sum when not."""
    compute_seconds: float
    """compute_cycles / clock."""
    memory_seconds: float
    """dram_bytes / bandwidth."""
    seconds: float
    """cycles / clock."""
    flops: int
    """Useful FLOPs: 2 * M * N * K * batch."""
    utilization: float
    """flops / (seconds * peak of the arrays used): the fraction of peak achieved."""
    mapping_efficiency: float
    """Fraction of PEs holding real data, averaged over folds (spatial padding waste)."""
    padding_waste: float
    """1 - M*K*N / (padded_m * padded_k * padded_n)."""
    sram_reads_a: int
    """Elements of A read from on-chip SRAM (SCALE-Sim's IFMAP SRAM reads)."""
    sram_reads_b: int
    """Elements of B read from on-chip SRAM (SCALE-Sim's Filter SRAM reads)."""
    sram_writes_c: int
    """Elements of C (partial sums per K fold) written to SRAM."""
    sram_bytes: int
    """On-chip traffic in bytes: A and B at the input width, C at the accumulator width."""
    dram_read_bytes: int
    """Bytes read from HBM."""
    dram_write_bytes: int
    """Bytes written to HBM."""
    dram_bytes: int
    """dram_read_bytes + dram_write_bytes."""
    vmem_bytes: int
    """On-chip working set of a grid step: double-buffered inputs and output, plus accumulator."""
    fits_vmem: bool
    """Whether vmem_bytes fits the spec's VMEM per core (True when the spec gives none)."""
    bound: Bound
    """``memory`` when HBM time exceeds compute time, else ``compute``."""

    @property
    def intensity(self) -> float:
        """FLOPs per HBM byte."""
        return self.flops / self.dram_bytes if self.dram_bytes else math.inf


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _cdiv(a, b) * b


def systolic_output_bytes(dtype: str) -> int:
    """Bytes per element of C written to HBM: int8 accumulates to int32, fp8 to bf16."""
    name = normalize_dtype(dtype)
    if name == "int8":
        return 4
    if name == "fp8":
        return 2
    return dtype_bytes(name)


def systolic_accumulator_bytes(dtype: str) -> int:
    """Bytes per partial sum held on chip (f32 or int32 accumulators; f64 stays f64)."""
    return 8 if normalize_dtype(dtype) == "f64" else 4


def _mapping(dataflow: str, m: int, k: int, n: int) -> tuple[int, int, int]:
    """(Sr, Sc, T) for a block of shape m x k x n under ``dataflow``."""
    if dataflow == "ws":
        return k, n, m
    if dataflow == "is":
        return k, m, n
    if dataflow == "os":
        return m, n, k
    raise ValueError(f"unknown dataflow {dataflow!r}; use one of: ws, is, os, auto")


def _fold_cycles(dataflow: str, rows: int, cols: int, temporal: int) -> int:
    if dataflow == "os":
        return rows + cols + temporal - 2
    return 2 * rows + cols + temporal - 2


def _compute_cycles(
    dataflow: str, rows: int, cols: int, temporal: int, folds: int, double_buffer: bool
) -> int:
    """Cycles for ``folds`` folds on one array, SCALE-Sim's count-from-zero convention."""
    if folds == 0:
        return 0
    if not double_buffer:
        return folds * _fold_cycles(dataflow, rows, cols, temporal) - 1
    # The first stationary tile still has to be loaded before anything streams.
    first_load = 0 if dataflow == "os" else rows
    interval = max(temporal, rows)
    return first_load + (folds - 1) * interval + temporal + rows + cols - 2 - 1


def _resolve(spec: HardwareSpec | str) -> HardwareSpec:
    hw = load_spec(spec)
    if hw.systolic is None:
        raise ValueError(
            f"hardware '{hw.name}' is kind '{hw.kind}', not 'systolic'; "
            "use the SIMT or CPU cost model for it"
        )
    return hw


def systolic_gemm(
    m: int,
    k: int,
    n: int,
    spec: HardwareSpec | str,
    dtype: str = "bf16",
    *,
    dataflow: str | None = None,
    tile: Sequence[int] | None = None,
    batch: int = 1,
    arrays: int | None = None,
    weight_double_buffer: bool | None = None,
    overlap_memory: bool | None = None,
) -> SystolicGemmCost:
    """Cost of ``batch`` GEMMs ``A[m,k] @ B[k,n]`` on the systolic arrays of ``spec``.

    ``dataflow`` defaults to the spec's (``auto`` picks the fastest of ws/is/os);
    ``tile`` is an optional (tile_m, tile_n, tile_k) grid block; ``arrays`` defaults
    to every array of the chip (arrays per core times cores). ``weight_double_buffer``
    and ``overlap_memory`` default to the spec's. With ``weight_double_buffer=False``
    and ``arrays=1``, ``compute_cycles`` equals SCALE-Sim v3's compute cycles.
    """
    hw = _resolve(spec)
    s = hw.systolic
    assert s is not None
    for label, value in (("m", m), ("k", k), ("n", n), ("batch", batch)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    flow = s.dataflow if dataflow is None else dataflow
    if flow == "auto":
        return best_dataflow(
            m,
            k,
            n,
            hw,
            dtype,
            tile=tile,
            batch=batch,
            arrays=arrays,
            weight_double_buffer=weight_double_buffer,
            overlap_memory=overlap_memory,
        )
    name = normalize_dtype(dtype)
    in_bytes = dtype_bytes(name)
    out_bytes = systolic_output_bytes(name)
    acc_bytes = systolic_accumulator_bytes(name)
    n_arrays = s.total_arrays if arrays is None else arrays
    if n_arrays <= 0:
        raise ValueError(f"arrays must be positive, got {n_arrays}")
    double_buffer = s.weight_double_buffer if weight_double_buffer is None else weight_double_buffer
    overlap = s.overlap_memory if overlap_memory is None else overlap_memory
    rows, cols = s.rows, s.cols

    if tile is None:
        tm, tn, tk = m, n, k
        tile_t: tuple[int, int, int] | None = None
    else:
        if len(tile) != 3 or any(not isinstance(t, int) or t <= 0 for t in tile):
            raise ValueError(f"tile must be three positive integers (m, n, k), got {tile!r}")
        # A block larger than its dim is not clipped: the block is computed whole, as the
        # padded (8,128)-tiled layout computes it.
        tm, tn, tk = tile[0], tile[1], tile[2]
        tile_t = (tm, tn, tk)
    bm, bn, bk = _cdiv(m, tm), _cdiv(n, tn), _cdiv(k, tk)
    blocks = bm * bn * bk

    # One block is a (tm x tk) @ (tk x tn) GEMM; edge blocks are computed whole, as a
    # Pallas grid computes them (padding is tile quantisation).
    sr, sc, temporal = _mapping(flow, tm, tk, tn)
    row_folds, col_folds = _cdiv(sr, rows), _cdiv(sc, cols)
    folds_per_block = row_folds * col_folds
    folds = folds_per_block * blocks * batch
    folds_per_array = _cdiv(folds, n_arrays)
    base_cycles = _compute_cycles(flow, rows, cols, temporal, folds_per_array, double_buffer)
    # A dtype faster than bf16 (int8 at 2x) retires more MACs per PE-cycle; f32 takes
    # several bf16 passes. Scale the cycle count by the rate relative to bf16.
    rate = s.macs_per_pe_cycle(name)
    compute_cycles = base_cycles if rate == 1.0 else math.ceil(base_cycles / rate)

    # Padded extents: tile padding everywhere, array padding on the spatial dims.
    if flow == "ws":
        pm, pk, pn = bm * tm, bk * row_folds * rows, bn * col_folds * cols
    elif flow == "is":
        pm, pk, pn = bm * col_folds * cols, bk * row_folds * rows, bn * tn
    else:
        pm, pk, pn = bm * row_folds * rows, bk * tk, bn * col_folds * cols
    padding_waste = 1.0 - (m * k * n) / (pm * pk * pn)
    mapping_efficiency = (sr * sc) / (row_folds * rows * col_folds * cols)

    # On-chip traffic per block, in SCALE-Sim's counting: the streamed operand is read
    # once per fold across the other spatial dim; partial sums are written once per
    # fold along K.
    if flow == "ws":
        a_reads = tm * tk * col_folds
        b_reads = tk * tn
        c_writes = tm * tn * row_folds
    elif flow == "is":
        a_reads = tm * tk
        b_reads = tk * tn * col_folds
        c_writes = tm * tn * row_folds
    else:
        a_reads = tm * tk * col_folds
        b_reads = tk * tn * row_folds
        c_writes = tm * tn
    per_gemm_blocks = blocks * batch
    sram_reads_a = a_reads * per_gemm_blocks
    sram_reads_b = b_reads * per_gemm_blocks
    sram_writes_c = c_writes * per_gemm_blocks
    sram_bytes = (sram_reads_a + sram_reads_b) * in_bytes + sram_writes_c * acc_bytes

    # HBM traffic: with K innermost, A[i, :] is fetched once per N block and B[:, j]
    # once per M block; C leaves once, after its K loop.
    dram_read = batch * (m * k * bn + k * n * bm) * in_bytes
    dram_write = batch * m * n * out_bytes
    dram_bytes = dram_read + dram_write
    # Working set of one grid step: inputs and output double-buffered by the DMA
    # pipeline, plus an accumulator when K is split over several steps.
    vmem = 2 * (tm * tk + tk * tn) * in_bytes + 2 * tm * tn * out_bytes
    if bk > 1:
        vmem += tm * tn * acc_bytes
    fits = s.vmem_bytes is None or vmem <= s.vmem_bytes

    clock = s.clock_ghz * 1e9
    bandwidth = hw.bandwidth_bytes_per_s
    memory_seconds = dram_bytes / bandwidth if bandwidth else 0.0
    memory_cycles = math.ceil(memory_seconds * clock)
    if overlap:
        cycles = max(compute_cycles, memory_cycles)
    else:
        cycles = compute_cycles + memory_cycles
    seconds = cycles / clock
    flops = 2 * m * n * k * batch
    peak = 2.0 * rows * cols * n_arrays * rate * clock
    utilization = flops / (max(cycles, 1) / clock * peak)
    return SystolicGemmCost(
        m=m,
        k=k,
        n=n,
        batch=batch,
        dtype=name,
        dataflow=flow,
        rows=rows,
        cols=cols,
        arrays=n_arrays,
        weight_double_buffer=double_buffer,
        overlap_memory=overlap,
        tile=tile_t,
        blocks=blocks,
        temporal=temporal,
        folds=folds,
        folds_per_array=folds_per_array,
        cycles_per_fold=_fold_cycles(flow, rows, cols, temporal),
        padded_m=pm,
        padded_k=pk,
        padded_n=pn,
        compute_cycles=compute_cycles,
        memory_cycles=memory_cycles,
        cycles=cycles,
        compute_seconds=compute_cycles / clock,
        memory_seconds=memory_seconds,
        seconds=seconds,
        flops=flops,
        utilization=utilization,
        mapping_efficiency=mapping_efficiency,
        padding_waste=padding_waste,
        sram_reads_a=sram_reads_a,
        sram_reads_b=sram_reads_b,
        sram_writes_c=sram_writes_c,
        sram_bytes=sram_bytes,
        dram_read_bytes=dram_read,
        dram_write_bytes=dram_write,
        dram_bytes=dram_bytes,
        vmem_bytes=vmem,
        fits_vmem=fits,
        bound="memory" if memory_cycles > compute_cycles else "compute",
    )


def _rank(cost: SystolicGemmCost) -> tuple[float, int, int, int]:
    return (cost.cycles, cost.compute_cycles, cost.dram_bytes, DATAFLOWS.index(cost.dataflow))


def best_dataflow(
    m: int,
    k: int,
    n: int,
    spec: HardwareSpec | str,
    dtype: str = "bf16",
    *,
    dataflows: Iterable[str] = DATAFLOWS,
    **kwargs: object,
) -> SystolicGemmCost:
    """The cheapest of ``dataflows`` for this GEMM (fewest cycles; ties: fewer compute
    cycles, less HBM traffic, then ws < is < os). Other keywords go to :func:`systolic_gemm`.
    """
    costs = [
        systolic_gemm(m, k, n, spec, dtype, dataflow=flow, **kwargs)  # type: ignore[arg-type]
        for flow in dataflows
    ]
    if not costs:
        raise ValueError("no dataflow to choose from")
    return min(costs, key=_rank)


@dataclass(frozen=True)
class SystolicTileCandidate:
    """One (tile_m, tile_n, tile_k, dataflow) choice with its cost."""

    tile_m: int
    """Rows of A per grid block."""
    tile_n: int
    """Columns of B per grid block."""
    tile_k: int
    """Reduction length per grid block."""
    dataflow: str
    """Dataflow this candidate was costed with."""
    cost: SystolicGemmCost
    """Its full cost."""

    @property
    def tile(self) -> tuple[int, int, int]:
        """(tile_m, tile_n, tile_k)."""
        return (self.tile_m, self.tile_n, self.tile_k)


@dataclass(frozen=True)
class SystolicTileChoice:
    """The best tile for a GEMM and every candidate considered, best first."""

    best: SystolicTileCandidate
    """Fastest candidate that fits VMEM."""
    candidates: tuple[SystolicTileCandidate, ...]
    """All candidates that fit VMEM, sorted best first."""
    rejected: tuple[tuple[tuple[int, int, int], str], ...]
    """(tile, reason) for candidates left out (working set over VMEM)."""


def systolic_tile_sizes(extent: int, align: int, unit: int, limit: int = 4096) -> list[int]:
    """Candidate block sizes along one dim: multiples of ``align`` that are powers of two
    times ``unit`` up to ``limit``, plus the whole dim rounded up to ``align``.

    ``align`` is the memory tile (8/16/32 sublanes for M, 128 lanes for N and K);
    ``unit`` the array dimension the block feeds (128 or 256) or the sublane tile.
    """
    full = _round_up(extent, align)
    sizes = {full} if full <= limit else set()
    size = unit
    while size < full and size <= limit:
        sizes.add(_round_up(size, align))
        size *= 2
    return sorted(sizes)


def choose_systolic_tile(
    m: int,
    k: int,
    n: int,
    spec: HardwareSpec | str,
    dtype: str = "bf16",
    *,
    dataflows: Iterable[str] | None = None,
    batch: int = 1,
    tile_m: Iterable[int] | None = None,
    tile_n: Iterable[int] | None = None,
    tile_k: Iterable[int] | None = None,
    arrays: int | None = None,
    weight_double_buffer: bool | None = None,
    overlap_memory: bool | None = None,
) -> SystolicTileChoice:
    """Enumerate (tile_m, tile_n, tile_k, dataflow) for a GEMM and pick the fastest.

    Dataflows: the spec's own, or all three when it says ``auto`` (a TPU's MXU is
    weight-stationary in hardware, so only ``ws`` is tried for it unless
    ``dataflows`` says otherwise). Sizes: ``tile_m`` in multiples of the dtype's
    sublane tile (8 rows for 32-bit, 16 for 16-bit, 32 for 8-bit types), ``tile_n``
    and ``tile_k`` in multiples of 128 lanes, stepping by the array size; each list
    also holds the whole dim. A candidate whose working set exceeds VMEM is rejected.
    Ranking: fewest cycles, then less HBM traffic, then smaller working set.
    """
    hw = _resolve(spec)
    s = hw.systolic
    assert s is not None
    flows = (
        tuple(dataflows)
        if dataflows is not None
        else (DATAFLOWS if s.dataflow == "auto" else (s.dataflow,))
    )
    name = normalize_dtype(dtype)
    sublanes, lanes = s.native_tile_f32
    # Narrow types pack 32 // bits values per 32-bit word along sublanes.
    sublane_align = sublanes * max(1, 4 // dtype_bytes(name))
    ms = (
        sorted(set(tile_m))
        if tile_m is not None
        else systolic_tile_sizes(m, sublane_align, max(sublane_align, 128))
    )
    ns = sorted(set(tile_n)) if tile_n is not None else systolic_tile_sizes(n, lanes, s.cols)
    ks = sorted(set(tile_k)) if tile_k is not None else systolic_tile_sizes(k, lanes, s.rows)
    candidates: list[SystolicTileCandidate] = []
    rejected: list[tuple[tuple[int, int, int], str]] = []
    for flow in flows:
        for tm in ms:
            for tn in ns:
                for tk in ks:
                    cost = systolic_gemm(
                        m,
                        k,
                        n,
                        hw,
                        name,
                        dataflow=flow,
                        tile=(tm, tn, tk),
                        batch=batch,
                        arrays=arrays,
                        weight_double_buffer=weight_double_buffer,
                        overlap_memory=overlap_memory,
                    )
                    if not cost.fits_vmem:
                        if flow == flows[0]:
                            reason = (
                                f"working set {cost.vmem_bytes} B exceeds VMEM {s.vmem_bytes} B"
                            )
                            rejected.append(((tm, tn, tk), reason))
                        continue
                    candidates.append(SystolicTileCandidate(tm, tn, tk, flow, cost))
    if not candidates:
        raise ValueError(
            f"no tile for {m}x{k}x{n} {name} fits VMEM of '{hw.name}'; "
            "pass smaller tile_m/tile_n/tile_k"
        )
    candidates.sort(
        key=lambda c: (
            c.cost.cycles,
            c.cost.dram_bytes,
            c.cost.vmem_bytes,
            DATAFLOWS.index(c.dataflow),
            c.tile,
        )
    )
    return SystolicTileChoice(
        best=candidates[0], candidates=tuple(candidates), rejected=tuple(rejected)
    )
