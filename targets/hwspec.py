"""Hardware descriptions: load and validate the TOML files in ``targets/specs/``.

Design note. A hardware description is data, not code: one TOML file per device,
every number with its source in a comment. This module turns such a file into a
frozen :class:`HardwareSpec` and is the one place that knows the file format, so
the cost models, the ``tile-matmul`` and ``assign-layout`` passes and the
targets' ``estimate`` all read the same numbers.

There are three kinds of device, each with its own table:

* ``kind = "systolic"`` (TPU-like): ``[systolic]`` holds the array geometry
  (rows x cols processing elements, how many arrays, clock, dataflow, whether the
  stationary operand is double-buffered) and the on-chip vector memory.
* ``kind = "simt"`` (GPU-like): ``[simt]`` holds SMs, clock, per-dtype peaks,
  shared memory, registers, occupancy limits and the tensor-core instruction.
* ``kind = "cpu"``: ``[cpu]`` holds numbers measured on the host by
  ``benchmarks/measure_host_cpu.py``.

Any kind may have ``[memory]`` (off-chip bandwidth and capacity) and ``[price]``
(``usd_per_hour``, a positive number of US dollars per device-hour, with ``source``
naming where the figure comes from; ``irkit choose`` and ``irkit bench`` use it
when no ``--price`` is given).

A bad file raises :class:`SpecError` whose message is one line naming the file,
the key and what to do; the CLI prints it without a traceback. Unknown keys are
errors too, because a misspelt key silently falling back to a default would make
a cost estimate quietly wrong.
"""

from __future__ import annotations

import functools
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from irkit.errors import IrkitError

__all__ = [
    "DEFAULT_STREAM_EFFICIENCY",
    "SPEC_DIR",
    "CpuSpec",
    "HardwareSpec",
    "MemorySpec",
    "SimtSpec",
    "SpecError",
    "SystolicSpec",
    "dtype_bytes",
    "list_specs",
    "load_spec",
    "normalize_dtype",
    "spec_from_dict",
]

SPEC_DIR = Path(__file__).resolve().parent / "specs"
"""Folder of the built-in hardware descriptions (installed as package data)."""

Kind = Literal["systolic", "simt", "cpu"]
Dataflow = Literal["ws", "is", "os", "auto"]

_KINDS = ("systolic", "simt", "cpu")
_DATAFLOWS = ("ws", "is", "os", "auto")


class SpecError(IrkitError, ValueError):
    """A hardware description is missing, malformed or inconsistent.

    The message is a single line meant for a person: which file, which key, and
    what to do about it.
    """


# --------------------------------------------------------------------------- dtypes

# Canonical dtype names used by the specs' peak tables and the cost models. The IR's
# names (f32, bf16, i8, ...) and NumPy-style names map onto these.
_DTYPE_BYTES: dict[str, int] = {
    "f64": 8,
    "f32": 4,
    # TF32 is stored as f32 in memory; only the tensor-core math is narrower.
    "tf32": 4,
    "bf16": 2,
    "f16": 2,
    "fp8": 1,
    "int8": 1,
    "int32": 4,
    "int64": 8,
}

_DTYPE_ALIASES: dict[str, str] = {
    "float64": "f64",
    "fp64": "f64",
    "double": "f64",
    "float32": "f32",
    "fp32": "f32",
    "float": "f32",
    "tensorfloat32": "tf32",
    "bfloat16": "bf16",
    "float16": "f16",
    "fp16": "f16",
    "half": "f16",
    "f8": "fp8",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "f8e4m3": "fp8",
    "f8e5m2": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "i8": "int8",
    "s8": "int8",
    "u8": "int8",
    "uint8": "int8",
    "i32": "int32",
    "s32": "int32",
    "i64": "int64",
    "s64": "int64",
}


def normalize_dtype(dtype: object) -> str:
    """Return the canonical dtype name (``f32``, ``bf16``, ``int8``, ...).

    Accepts the IR's names (``i8``), NumPy-style names (``float32``, ``bfloat16``),
    NumPy dtypes and enum members whose ``value`` is such a name.
    """
    value = getattr(dtype, "value", dtype)
    if not isinstance(value, str):
        # numpy.dtype and ml_dtypes types print as their name.
        value = getattr(value, "name", None) or str(value)
    name = value.strip().lower()
    name = _DTYPE_ALIASES.get(name, name)
    if name not in _DTYPE_BYTES:
        known = ", ".join(sorted(_DTYPE_BYTES))
        raise ValueError(f"unknown dtype {value!r}; use one of: {known}")
    return name


def dtype_bytes(dtype: object) -> int:
    """Bytes per element of ``dtype`` (any name :func:`normalize_dtype` accepts)."""
    return _DTYPE_BYTES[normalize_dtype(dtype)]


# --------------------------------------------------------------------------- parts


DEFAULT_STREAM_EFFICIENCY = 0.85
"""Achievable fraction of datasheet HBM bandwidth when a spec does not give one: gpt-fast
(github.com/pytorch-labs/gpt-fast, README) reports ~1700 of 2039 GB/s reachable on A100-80GB
(0.83); 0.85 is the round figure used for every spec without its own measurement."""


@dataclass(frozen=True)
class MemorySpec:
    """Off-chip memory: bandwidth and capacity of HBM (accelerators) or DRAM (CPU)."""

    bandwidth_gbps: float | None
    """Peak bandwidth in GB/s (10^9 bytes per second); None when unknown."""
    capacity_gb: float | None = None
    """Capacity in GB as the vendor quotes it; None when unknown."""
    technology: str = "hbm"
    """``hbm`` for accelerators, ``dram`` for host memory."""
    stream_efficiency: float = DEFAULT_STREAM_EFFICIENCY
    """Fraction of the datasheet bandwidth a streaming kernel (a decode GEMV reading its
    weights once) achieves; ``[memory] stream_efficiency``, default
    :data:`DEFAULT_STREAM_EFFICIENCY`."""

    @property
    def bandwidth_bytes_per_s(self) -> float | None:
        """Bandwidth in bytes per second, or None when unknown."""
        return None if self.bandwidth_gbps is None else self.bandwidth_gbps * 1e9

    @property
    def stream_bandwidth_bytes_per_s(self) -> float | None:
        """Achievable streaming bandwidth: datasheet bandwidth x ``stream_efficiency``."""
        bw = self.bandwidth_bytes_per_s
        return None if bw is None else bw * self.stream_efficiency


@dataclass(frozen=True)
class SystolicSpec:
    """A TPU-like device: one or more systolic arrays of rows x cols MAC units."""

    rows: int
    """Rows of processing elements; the reduction (K) dimension maps here under ws/is."""
    cols: int
    """Columns of processing elements."""
    dataflow: Dataflow
    """Default dataflow: ``ws`` weight-, ``is`` input-, ``os`` output-stationary, or ``auto``."""
    arrays: int
    """Arrays (MXUs) per core that work on different folds in parallel."""
    clock_ghz: float
    """Array clock in GHz."""
    weight_double_buffer: bool
    """Whether the next stationary tile loads while the current one computes."""
    cores: int = 1
    """Cores (TensorCores) per chip; chip-level estimates use arrays * cores arrays."""
    overlap_memory: bool = True
    """Whether off-chip transfers overlap with compute (TPU DMA) or add to it (SCALE-Sim)."""
    vmem_bytes: int | None = None
    """On-chip vector memory per core in bytes; bounds the tile working set."""
    native_tile_f32: tuple[int, int] = (8, 128)
    """Native memory tile (sublanes, lanes) for 32-bit types."""
    native_tile_bf16: tuple[int, int] = (16, 128)
    """Native memory tile for 16-bit types (two values packed per 32-bit word)."""
    peak_tflops: dict[str, float] = field(default_factory=dict)
    """Per-chip peak per dtype in TFLOP/s (TOP/s for int8), from the vendor."""
    f32_passes: int = 1
    """Passes an f32 matmul takes on the array: 1 for an array that multiplies f32
    natively; the TPU specs say 6 (bf16 passes at XLA's HIGHEST precision)."""

    @property
    def total_arrays(self) -> int:
        """Arrays on the whole chip (arrays per core times cores)."""
        return self.arrays * self.cores

    @property
    def pes(self) -> int:
        """Processing elements in one array."""
        return self.rows * self.cols

    def derived_peak_flops(self) -> float:
        """bf16 peak implied by the geometry: 2 * rows * cols * arrays * cores * clock."""
        return 2.0 * self.rows * self.cols * self.total_arrays * self.clock_ghz * 1e9

    def macs_per_pe_cycle(self, dtype: object) -> float:
        """MACs one PE retires per cycle for ``dtype`` (bf16 = 1).

        Taken from the ratio of the vendor's peak for ``dtype`` to the bf16 peak where
        both are given (int8 is 2 on v5e and later); f32 costs ``f32_passes`` bf16
        passes; a dtype with no peak runs at the bf16 rate.
        """
        name = normalize_dtype(dtype)
        if name in ("f32", "f64", "tf32"):
            if name in self.peak_tflops and "bf16" in self.peak_tflops:
                return self.peak_tflops[name] / self.peak_tflops["bf16"]
            return 1.0 / self.f32_passes
        if name in self.peak_tflops and "bf16" in self.peak_tflops:
            return self.peak_tflops[name] / self.peak_tflops["bf16"]
        return 1.0


@dataclass(frozen=True)
class SimtSpec:
    """A GPU-like device: streaming multiprocessors with tensor cores."""

    sms: int
    """Streaming multiprocessors."""
    clock_ghz: float
    """Clock at which the vendor's peaks are quoted, in GHz."""
    peak_tflops: dict[str, float]
    """Dense peak per dtype in TFLOP/s (TOP/s for int8); f32 is the non-tensor-core FMA rate."""
    smem_per_sm_bytes: int
    """Shared memory per SM (the carve-out maximum)."""
    regs_per_sm: int
    """32-bit registers per SM."""
    smem_per_block_bytes: int = 0
    """Largest shared-memory allocation one CTA may opt into (0: same as per SM)."""
    arch: str = "sm_80"
    """Compute capability as ``sm_XY``; ``sm_90`` enables wgmma."""
    max_regs_per_thread: int = 255
    """Register limit per thread."""
    max_threads_per_sm: int = 2048
    """Resident threads per SM (64 warps)."""
    max_threads_per_block: int = 1024
    """Threads per CTA."""
    max_blocks_per_sm: int = 32
    """Resident CTAs per SM."""
    warp_size: int = 32
    """Threads per warp."""
    l2_bytes: int | None = None
    """L2 cache size in bytes; None disables the L2 reuse model."""
    mma_shape: tuple[int, int, int] = (16, 8, 16)
    """Warp-level tensor-core instruction (m, n, k) for 16-bit inputs (``mma.sync``)."""
    wgmma: bool = False
    """Whether warpgroup MMA (m64nNk16, sm_90a) is available."""
    wgmma_n_max: int = 256
    """Largest N of a wgmma instruction (N = 8..256 in steps of 8)."""
    smem_bytes_per_clk: int = 128
    """Shared-memory bandwidth per SM per clock (32 banks x 4 bytes, CUDA guide)."""

    @property
    def smem_block_limit(self) -> int:
        """Shared memory one CTA may use."""
        return self.smem_per_block_bytes or self.smem_per_sm_bytes

    @property
    def sm_version(self) -> int:
        """Numeric compute capability, e.g. 90 for ``sm_90``/``sm_90a``."""
        digits = "".join(ch for ch in self.arch.split("_", 1)[-1] if ch.isdigit())
        return int(digits)

    def peak_flops(self, dtype: object) -> float:
        """Dense peak FLOP/s for ``dtype`` (f64 and missing dtypes fall back to f32)."""
        name = normalize_dtype(dtype)
        if name in self.peak_tflops:
            return self.peak_tflops[name] * 1e12
        return self.peak_tflops.get("f32", min(self.peak_tflops.values())) * 1e12

    def uses_tensor_cores(self, dtype: object) -> bool:
        """Whether ``dtype`` runs on tensor cores (its peak exceeds the f32 FMA rate)."""
        name = normalize_dtype(dtype)
        return name in self.peak_tflops and name != "f32" and name != "f64"

    def mma_k(self, dtype: object) -> int:
        """K of the tensor-core instruction for ``dtype``: 32 bytes of K per instruction.

        m16n8k16 for 16-bit types, m16n8k8 for tf32, m16n8k32 for 8-bit types (PTX ISA).
        """
        return max(1, (self.mma_shape[2] * 2) // dtype_bytes(dtype))


@dataclass(frozen=True)
class CpuSpec:
    """The host CPU, described by numbers measured on it."""

    cores: int
    """Cores available to the process."""
    gemm_f32_gflops_1t: float
    """Median single-thread NumPy f32 GEMM throughput, GFLOP/s (measured)."""
    vector_bits: int = 128
    """Widest SIMD register in bits, from the CPU flags."""
    clock_ghz: float | None = None
    """Nominal clock from /proc/cpuinfo, if known."""
    model: str = ""
    """CPU model string."""
    fma_units: int = 2
    """FMA pipes per core, for the theoretical peak."""
    l1d_kib: int = 32
    """L1 data cache per core, KiB (sysfs); sizes the k step of a CPU matmul tile."""
    l2_kib: int = 512
    """L2 cache per core, KiB (sysfs); sizes the n extent of a CPU matmul tile."""

    def peak_flops(self, dtype: object = "f32") -> float:
        """Attainable FLOP/s: the measured single-thread GEMM rate times cores.

        f64 runs at half the f32 rate (half as many lanes); 16-bit and 8-bit types are
        taken at the f32 rate because NumPy computes them through f32.
        """
        rate = self.gemm_f32_gflops_1t * 1e9 * self.cores
        if normalize_dtype(dtype) == "f64":
            return rate / 2
        return rate

    def theoretical_peak_flops(self) -> float | None:
        """cores * (vector_bits / 32) lanes * 2 (FMA) * fma_units * clock, or None."""
        if self.clock_ghz is None:
            return None
        lanes = self.vector_bits // 32
        return self.cores * lanes * 2 * self.fma_units * self.clock_ghz * 1e9


@dataclass(frozen=True)
class HardwareSpec:
    """One device: its kind, the part for that kind, and its memory."""

    name: str
    """Short name, e.g. ``tpu-v5e`` (the file's stem for built-in specs)."""
    kind: Kind
    """``systolic``, ``simt`` or ``cpu``."""
    description: str = ""
    """One line for people."""
    source: str = ""
    """Where the spec was loaded from (file path, or ``<dict>``)."""
    systolic: SystolicSpec | None = None
    """The systolic part, for ``kind = "systolic"``."""
    simt: SimtSpec | None = None
    """The SIMT part, for ``kind = "simt"``."""
    cpu: CpuSpec | None = None
    """The CPU part, for ``kind = "cpu"``."""
    memory: MemorySpec | None = None
    """Off-chip memory, when given."""
    price_usd_per_hour: float | None = None
    """``[price] usd_per_hour``: US dollars per device-hour, when the spec gives one."""
    price_source: str = ""
    """``[price] source``: where the price comes from (provider, region, date)."""

    def peak_flops(self, dtype: object = "bf16") -> float:
        """Peak FLOP/s of the whole device for ``dtype``."""
        if self.systolic is not None:
            s = self.systolic
            return s.derived_peak_flops() * s.macs_per_pe_cycle(dtype)
        if self.simt is not None:
            return self.simt.peak_flops(dtype)
        assert self.cpu is not None
        return self.cpu.peak_flops(dtype)

    @property
    def bandwidth_bytes_per_s(self) -> float | None:
        """Off-chip bandwidth in bytes/s, or None when the spec gives none."""
        return None if self.memory is None else self.memory.bandwidth_bytes_per_s

    @property
    def stream_bandwidth_bytes_per_s(self) -> float | None:
        """Achievable off-chip bandwidth of a streaming kernel in bytes/s (datasheet
        bandwidth x ``[memory] stream_efficiency``), or None when the spec gives none."""
        return None if self.memory is None else self.memory.stream_bandwidth_bytes_per_s

    @property
    def clock_hz(self) -> float | None:
        """Clock of the compute units in Hz, when the spec has one."""
        if self.systolic is not None:
            return self.systolic.clock_ghz * 1e9
        if self.simt is not None:
            return self.simt.clock_ghz * 1e9
        assert self.cpu is not None
        return None if self.cpu.clock_ghz is None else self.cpu.clock_ghz * 1e9


# --------------------------------------------------------------------------- loading


class _Reader:
    """Typed access to one TOML table that reports errors as ``file: key: what to do``."""

    def __init__(self, source: str, table: dict[str, Any], prefix: str) -> None:
        self.source = source
        self.table = table
        self.prefix = prefix
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def fail(self, name: str, what: str) -> SpecError:
        return SpecError(f"{self.source}: key '{self.key(name)}' {what}")

    def has(self, name: str) -> bool:
        return name in self.table

    def raw(self, name: str, required: bool) -> Any:
        self.used.add(name)
        if name not in self.table:
            if required:
                raise self.fail(name, "is missing; add it (see docs/hardware.md for the format)")
            return None
        return self.table[name]

    def int_(self, name: str, default: int | None = None, *, required: bool = False) -> int:
        value = self.raw(name, required)
        if value is None:
            return default  # type: ignore[return-value]
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.fail(name, f"must be a positive integer, got {value!r}; fix the value")
        return value

    def float_(self, name: str, default: float | None = None, *, required: bool = False) -> float:
        value = self.raw(name, required)
        if value is None:
            return default  # type: ignore[return-value]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(name, f"must be a positive number, got {value!r}; fix the value")
        if not math.isfinite(value) or value <= 0:
            raise self.fail(name, f"must be a positive number, got {value!r}; fix the value")
        return float(value)

    def bool_(self, name: str, default: bool | None = None, *, required: bool = False) -> bool:
        value = self.raw(name, required)
        if value is None:
            return default  # type: ignore[return-value]
        if not isinstance(value, bool):
            raise self.fail(name, f"must be true or false, got {value!r}; fix the value")
        return value

    def str_(
        self,
        name: str,
        default: str | None = None,
        *,
        required: bool = False,
        choices: tuple[str, ...] | None = None,
    ) -> str:
        value = self.raw(name, required)
        if value is None:
            return default  # type: ignore[return-value]
        if not isinstance(value, str):
            raise self.fail(name, f"must be a string, got {value!r}; quote the value")
        if choices is not None and value not in choices:
            options = " | ".join(f'"{c}"' for c in choices)
            raise self.fail(name, f"is {value!r}; use one of {options}")
        return value

    def pair(self, name: str, default: tuple[int, int]) -> tuple[int, int]:
        value = self.raw(name, False)
        if value is None:
            return default
        if (
            not isinstance(value, list)
            or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        ):
            raise self.fail(name, f"must be two positive integers like [8, 128], got {value!r}")
        return (value[0], value[1])

    def triple(self, name: str, default: tuple[int, int, int]) -> tuple[int, int, int]:
        value = self.raw(name, False)
        if value is None:
            return default
        if (
            not isinstance(value, list)
            or len(value) != 3
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        ):
            raise self.fail(
                name, f"must be three positive integers like [16, 8, 16], got {value!r}"
            )
        return (value[0], value[1], value[2])

    def subtable(self, name: str, *, required: bool = False) -> _Reader | None:
        value = self.raw(name, required)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self.fail(name, f"must be a table [{self.key(name)}], got {value!r}")
        return _Reader(self.source, value, self.key(name))

    def peaks(self, name: str, *, required: bool = False) -> dict[str, float]:
        table = self.subtable(name, required=required)
        if table is None:
            return {}
        peaks: dict[str, float] = {}
        for dtype in list(table.table):
            try:
                canonical = normalize_dtype(dtype)
            except ValueError:
                known = ", ".join(sorted(_DTYPE_BYTES))
                raise table.fail(dtype, f"is not a dtype; use one of: {known}") from None
            peaks[canonical] = table.float_(dtype)
        if required and not peaks:
            raise self.fail(name, "is empty; give at least one dtype, e.g. bf16 = 312.0")
        return peaks

    def finish(self) -> None:
        """Reject keys nobody read: a typo must not silently become a default."""
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            allowed = ", ".join(sorted(self.used)) or "(none)"
            raise self.fail(
                unknown[0], f"is not a known key; remove or rename it (known here: {allowed})"
            )


def _mib(reader: _Reader, name: str) -> int | None:
    value = reader.float_(name)
    return None if value is None else int(value * 1024 * 1024)


def _kib(reader: _Reader, name: str, *, required: bool = False) -> int | None:
    value = reader.float_(name, required=required)
    return None if value is None else int(value * 1024)


def _parse_memory(top: _Reader, kind: str) -> MemorySpec | None:
    mem = top.subtable("memory")
    if mem is None:
        return None
    if kind == "cpu":
        bandwidth = mem.float_("dram_gbps")
        capacity = mem.float_("dram_gb")
        technology = "dram"
    else:
        bandwidth = mem.float_("hbm_gbps")
        capacity = mem.float_("hbm_gb")
        technology = "hbm"
    efficiency = mem.float_("stream_efficiency", DEFAULT_STREAM_EFFICIENCY)
    if efficiency > 1.0:
        raise mem.fail(
            "stream_efficiency",
            f"is {efficiency!r}; it is a fraction of the datasheet bandwidth, give a value in (0, 1]",
        )
    mem.finish()
    return MemorySpec(
        bandwidth_gbps=bandwidth,
        capacity_gb=capacity,
        technology=technology,
        stream_efficiency=efficiency,
    )


def _parse_systolic(top: _Reader) -> SystolicSpec:
    s = top.subtable("systolic", required=True)
    assert s is not None
    rows = s.int_("rows", required=True)
    cols = s.int_("cols", required=True)
    dataflow = s.str_("dataflow", required=True, choices=_DATAFLOWS)
    arrays = s.int_("arrays", required=True)
    clock = s.float_("clock_ghz", required=True)
    double_buffer = s.bool_("weight_double_buffer", required=True)
    cores = s.int_("cores", 1)
    overlap = s.bool_("overlap_memory", True)
    vmem = _mib(s, "vmem_mib")
    tile32 = s.pair("native_tile_f32", (8, min(cols, 128)))
    tile16 = s.pair("native_tile_bf16", (2 * tile32[0], tile32[1]))
    f32_passes = s.int_("f32_passes", 1)
    peaks = s.peaks("peak_tflops")
    spec = SystolicSpec(
        rows=rows,
        cols=cols,
        dataflow=dataflow,  # type: ignore[arg-type]
        arrays=arrays,
        clock_ghz=clock,
        weight_double_buffer=double_buffer,
        cores=cores,
        overlap_memory=overlap,
        vmem_bytes=vmem,
        native_tile_f32=tile32,
        native_tile_bf16=tile16,
        peak_tflops=peaks,
        f32_passes=f32_passes,
    )
    if "bf16" in peaks:
        # The geometry and the vendor's peak must tell the same story, otherwise a
        # cycle count and a roofline built on the same spec would disagree.
        derived = spec.derived_peak_flops() / 1e12
        if abs(derived - peaks["bf16"]) > 0.02 * peaks["bf16"]:
            raise s.fail(
                "peak_tflops.bf16",
                f"= {peaks['bf16']} disagrees with 2*rows*cols*arrays*cores*clock_ghz = "
                f"{derived:.1f} TFLOP/s; fix clock_ghz, arrays or cores so they agree (2%)",
            )
    s.finish()
    return spec


def _parse_simt(top: _Reader) -> SimtSpec:
    s = top.subtable("simt", required=True)
    assert s is not None
    sms = s.int_("sms", required=True)
    clock = s.float_("clock_ghz", required=True)
    peaks = s.peaks("peak_tflops", required=True)
    smem_sm = _kib(s, "smem_per_sm_kib", required=True)
    regs = s.int_("regs_per_sm", required=True)
    smem_block = _kib(s, "smem_per_block_kib") or 0
    arch = s.str_("arch", "sm_80")
    if not arch.startswith("sm_") or not any(ch.isdigit() for ch in arch):
        raise s.fail("arch", f'is {arch!r}; write the compute capability like "sm_80"')
    l2 = _mib(s, "l2_mib")
    spec = SimtSpec(
        sms=sms,
        clock_ghz=clock,
        peak_tflops=peaks,
        smem_per_sm_bytes=smem_sm or 0,
        regs_per_sm=regs,
        smem_per_block_bytes=smem_block,
        arch=arch,
        max_regs_per_thread=s.int_("max_regs_per_thread", 255),
        max_threads_per_sm=s.int_("max_threads_per_sm", 2048),
        max_threads_per_block=s.int_("max_threads_per_block", 1024),
        max_blocks_per_sm=s.int_("max_blocks_per_sm", 32),
        warp_size=s.int_("warp_size", 32),
        l2_bytes=l2,
        mma_shape=s.triple("mma", (16, 8, 16)),
        wgmma=s.bool_("wgmma", False),
        wgmma_n_max=s.int_("wgmma_n_max", 256),
        smem_bytes_per_clk=s.int_("smem_bytes_per_clk", 128),
    )
    if spec.smem_block_limit > spec.smem_per_sm_bytes:
        raise s.fail(
            "smem_per_block_kib",
            "exceeds smem_per_sm_kib; a CTA cannot use more shared memory than its SM has",
        )
    if spec.wgmma and spec.sm_version < 90:
        raise s.fail("wgmma", f"= true needs arch sm_90 or later, got {arch!r}")
    s.finish()
    return spec


def _parse_cpu(top: _Reader) -> CpuSpec:
    s = top.subtable("cpu", required=True)
    assert s is not None
    spec = CpuSpec(
        cores=s.int_("cores", required=True),
        gemm_f32_gflops_1t=s.float_("gemm_f32_gflops_1t", required=True),
        vector_bits=s.int_("vector_bits", 128),
        clock_ghz=s.float_("clock_ghz"),
        model=s.str_("model", ""),
        fma_units=s.int_("fma_units", 2),
        l1d_kib=s.int_("l1d_kib", 32),
        l2_kib=s.int_("l2_kib", 512),
    )
    # Measurement provenance is kept in the file for people; the model does not use it.
    for key in (
        "measured_by",
        "measured_at",
        "copy_bytes",
        "gemm_n",
        "python",
        "numpy",
        "blas",
        "flags",
        "microarch",
    ):
        s.raw(key, False)
    s.finish()
    return spec


def spec_from_dict(data: dict[str, Any], source: str = "<dict>") -> HardwareSpec:
    """Validate a parsed TOML document (or an equivalent dict) into a :class:`HardwareSpec`.

    ``source`` names the origin in error messages. Raises :class:`SpecError`.
    """
    top = _Reader(source, data, "")
    name = top.str_("name", required=True)
    if not name:
        raise top.fail("name", 'is empty; give the device a short name like "tpu-v5e"')
    kind = top.str_("kind", required=True, choices=_KINDS)
    description = top.str_("description", "")
    systolic = simt = cpu = None
    if kind == "systolic":
        systolic = _parse_systolic(top)
    elif kind == "simt":
        simt = _parse_simt(top)
    else:
        cpu = _parse_cpu(top)
    for other in _KINDS:
        if other != kind and top.has(other):
            raise top.fail(other, f'does not belong in a kind = "{kind}" spec; remove it')
    memory = _parse_memory(top, kind)
    price = top.subtable("price")
    usd = price_src = None
    if price is not None:
        usd = price.float_("usd_per_hour", required=True)
        price_src = price.str_("source", "")
        price.finish()
    top.finish()
    return HardwareSpec(
        name=name,
        kind=kind,  # type: ignore[arg-type]
        description=description,
        source=source,
        systolic=systolic,
        simt=simt,
        cpu=cpu,
        memory=memory,
        price_usd_per_hour=usd,
        price_source=price_src or "",
    )


@functools.lru_cache(maxsize=64)
def _load_file(path: str, mtime_ns: int) -> HardwareSpec:
    # mtime is part of the key so an edited file is re-read within one process.
    del mtime_ns
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML ({exc}); fix the syntax") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror}); check the path") from None
    return spec_from_dict(data, source=path)


def list_specs() -> list[str]:
    """Names of the built-in hardware descriptions, sorted (``a100``, ..., ``tpu-v6e``)."""
    if not SPEC_DIR.is_dir():
        return []
    return sorted(p.stem for p in SPEC_DIR.glob("*.toml"))


def load_spec(name_or_path: str | os.PathLike[str] | HardwareSpec) -> HardwareSpec:
    """Load a hardware description by built-in name (``tpu-v5e``) or by path to a TOML file.

    A :class:`HardwareSpec` passes through unchanged, so callers may accept either.
    Raises :class:`SpecError` for an unknown name, a missing file or a bad file.
    """
    if isinstance(name_or_path, HardwareSpec):
        return name_or_path
    text = os.fspath(name_or_path)
    looks_like_path = (
        isinstance(name_or_path, os.PathLike)
        or text.endswith(".toml")
        or os.sep in text
        or (os.altsep is not None and os.altsep in text)
    )
    if looks_like_path:
        path = Path(text).expanduser()
        if not path.is_file():
            raise SpecError(f"{text}: no such hardware description file; check the path")
    else:
        path = SPEC_DIR / f"{text}.toml"
        if not path.is_file():
            known = ", ".join(list_specs()) or "(none installed)"
            raise SpecError(
                f"unknown hardware '{text}'; use one of: {known}, or a path to a .toml file"
            )
    resolved = str(path.resolve())
    return _load_file(resolved, path.stat().st_mtime_ns)
