"""Measure this machine for ``targets/specs/host-cpu.toml``.

Measures, on one thread so the numbers do not depend on how a shared host
time-slices its cores:

* cores available to this process and the CPU model (``/proc/cpuinfo``, affinity);
* SIMD width from the CPU flags (avx512f -> 512 bits, avx2/avx -> 256, sse2/asimd -> 128);
* NumPy f32 GEMM throughput, GFLOP/s: median of repeated ``a @ b`` at n x n;
* stream-copy bandwidth, GB/s: median of ``np.copyto`` over an array far larger than
  the caches, counting bytes read plus bytes written (STREAM's "copy").

Each run is timed twice: by the wall clock and by the CPU time of the measuring
thread (``time.thread_time``; BLAS runs in the calling thread when pinned to one).
The spec takes the CPU-time medians, so time the host spends on other tenants does
not count against this machine; the wall-clock medians go into the file's header.

Usage::

    python benchmarks/measure_host_cpu.py            # print the TOML
    python benchmarks/measure_host_cpu.py --write    # also write targets/specs/host-cpu.toml

The load average is recorded in the file: measure on a quiet machine (it warns when
the load exceeds the core count).
"""

from __future__ import annotations

import os

# BLAS reads its thread count once, at import: pin it to one thread before NumPy loads.
for _var in (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
):
    os.environ[_var] = "1"

import argparse
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from irkit.fileio import atomic_write

SPEC_PATH = ROOT / "targets" / "specs" / "host-cpu.toml"

# Flags that tell the vector width, widest first.
_WIDTH_FLAGS = (
    ("avx512f", 512),
    ("avx2", 256),
    ("avx", 256),
    ("sse2", 128),
    ("asimd", 128),
    ("neon", 128),
)
# SIMD-related flags worth keeping in the spec for people.
_SHOWN_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "asimd",
    "sve",
)


def cpuinfo() -> dict[str, str]:
    """First processor's fields from /proc/cpuinfo (empty off Linux)."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_mhz_all() -> list[float]:
    """'cpu MHz' of every processor listed in /proc/cpuinfo."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    return [float(line.split(":")[1]) for line in text.splitlines() if line.startswith("cpu MHz")]


def microarch(info: dict[str, str], flags: set[str]) -> str:
    """AMD Zen generation from the CPU family and flags, as LLVM names it (``-mcpu``).

    Family 0x17 is Zen 1/2, 0x19 Zen 3 or Zen 4 (Zen 4 alone has AVX-512), 0x1a Zen 5.
    Other vendors: empty (the flags below still say what the vector units can do).
    """
    if info.get("vendor_id") != "AuthenticAMD":
        return ""
    try:
        family, model = int(info.get("cpu family", "")), int(info.get("model", ""))
    except ValueError:
        return ""
    if family == 0x17:
        return "znver2" if model >= 0x30 else "znver1"
    if family == 0x19:
        return "znver4" if "avx512f" in flags else "znver3"
    if family == 0x1A:
        return "znver5"
    return ""


def vector_bits(flags: set[str]) -> int:
    """Widest SIMD register the flags advertise."""
    for flag, bits in _WIDTH_FLAGS:
        if flag in flags:
            return bits
    return 128


def _timed(fn: object, repeats: int, work: float) -> tuple[list[float], list[float]]:
    """Rates ``work / seconds`` of ``repeats`` calls: (by wall clock, by thread CPU time)."""
    wall, cpu = [], []
    for _ in range(repeats):
        start_wall, start_cpu = time.perf_counter(), time.thread_time()
        fn()  # type: ignore[operator]
        end_wall, end_cpu = time.perf_counter(), time.thread_time()
        wall.append(work / (end_wall - start_wall))
        # CPU time never exceeds wall time; a coarse CPU clock must not make a run look slower.
        cpu.append(work / max(end_cpu - start_cpu, 1e-9))
    return wall, [max(c, w) for c, w in zip(cpu, wall, strict=True)]


def measure_gemm(n: int, repeats: int) -> tuple[list[float], list[float]]:
    """GFLOP/s of repeated f32 ``a @ b`` (n x n) on one BLAS thread: (wall, cpu)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), dtype=np.float32)
    np.matmul(a, b, out=c)  # warm up: page in, let the clock ramp
    return _timed(lambda: np.matmul(a, b, out=c), repeats, 2.0 * n**3 / 1e9)


def measure_copy(nbytes: int, repeats: int) -> tuple[list[float], list[float]]:
    """GB/s of ``np.copyto`` (bytes read + bytes written) over ``nbytes`` arrays: (wall, cpu)."""
    src = np.ones(nbytes // 8, dtype=np.float64)
    dst = np.zeros_like(src)
    np.copyto(dst, src)  # warm up: fault in the destination pages
    return _timed(lambda: np.copyto(dst, src), repeats, 2.0 * src.nbytes / 1e9)


def blas_name() -> str:
    """Name of the BLAS NumPy was built with, if NumPy says."""
    try:
        config = np.show_config(mode="dicts")  # NumPy >= 1.26
        return str(config["Build Dependencies"]["blas"]["name"])
    except (TypeError, KeyError, AttributeError):  # older NumPy only prints it
        return "unknown"


def cache_kib() -> dict[str, int]:
    """Per-core L1 data and L2 sizes from sysfs (empty where the kernel does not say)."""
    out: dict[str, int] = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return out
    for e in entries:
        try:
            with open(f"{base}/{e}/level") as f:
                level = f.read().strip()
            with open(f"{base}/{e}/type") as f:
                kind = f.read().strip()
            with open(f"{base}/{e}/size") as f:
                size = f.read().strip()
        except OSError:
            continue
        kib = int(size[:-1]) * (1024 if size.endswith("M") else 1) if size[:-1].isdigit() else None
        if kib is None:
            continue
        if level == "1" and kind == "Data":
            out["l1d_kib"] = kib
        elif level == "2":
            out["l2_kib"] = kib
    return out


def render(gemm_n: int, copy_bytes: int, repeats: int) -> str:
    """Measure and return the TOML text of host-cpu.toml."""
    info = cpuinfo()
    flags = set(info.get("flags", info.get("Features", "")).split())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    mhz = cpu_mhz_all()
    clock = round(statistics.median(mhz) / 1000.0, 3) if mhz else None
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    if load > (cores or 1):
        print(
            f"warning: load average {load:.2f} exceeds {cores} cores; numbers will be low",
            file=sys.stderr,
        )
    gemm_wall, gemm = measure_gemm(gemm_n, repeats)
    copy_wall, copy = measure_copy(copy_bytes, repeats)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    model = info.get("model name", platform.processor() or platform.machine())
    shown = " ".join(f for f in _SHOWN_FLAGS if f in flags)
    arch = microarch(info, flags)
    family = f"family {info.get('cpu family', '?')} model {info.get('model', '?')}"
    load_after = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    gemm_med, copy_med = statistics.median(gemm), statistics.median(copy)
    lines = [
        "# The machine irkit runs on: numbers MEASURED, not from a datasheet.",
        "#",
        "# Produced by:  python benchmarks/measure_host_cpu.py --write",
        (
            f"# Measured at:  {now} (1-minute load average {load:.2f} before, "
            f"{load_after:.2f} after, on {cores} cores)"
        ),
        (
            f"# GEMM: f32 {gemm_n}x{gemm_n} @ {gemm_n}x{gemm_n}, one BLAS thread, {repeats} runs: "
            f"median {gemm_med:.1f} GFLOP/s per CPU-second (min {min(gemm):.1f}, max "
            f"{max(gemm):.1f}); by wall clock median {statistics.median(gemm_wall):.1f}"
        ),
        (
            f"# Copy: np.copyto over {copy_bytes // 2**20} MiB, bytes read + written, {repeats} "
            f"runs: median {copy_med:.1f} GB/s per CPU-second (min {min(copy):.1f}, max "
            f"{max(copy):.1f}); by wall clock median {statistics.median(copy_wall):.1f}"
        ),
        "# Re-run the command on another machine; the cost model reads only the values below.",
        "",
        'name = "host-cpu"',
        'kind = "cpu"',
        f'description = "This machine: {model} ({cores} cores)"',
        "",
        "[cpu]",
        f'model = "{model}"',
        f'microarch = "{arch}"  # from /proc/cpuinfo {family} and the flags (LLVM -mcpu name)',
        f"cores = {cores}  # os.sched_getaffinity: cores this process may use",
        f"vector_bits = {vector_bits(flags)}  # widest SIMD among the flags below",
    ]
    if clock is not None:
        lines.append(f"clock_ghz = {clock}  # median 'cpu MHz' in /proc/cpuinfo")
    for key, kib in cache_kib().items():
        lines.append(f"{key} = {kib}  # /sys/devices/system/cpu/cpu0/cache")
    lines += [
        f"gemm_f32_gflops_1t = {gemm_med:.1f}  # measured: median 1-thread f32 GEMM per CPU-second",
        f'flags = "{shown}"',
        f"gemm_n = {gemm_n}",
        f"copy_bytes = {copy_bytes}",
        f'numpy = "{np.__version__}"',
        f'blas = "{blas_name()}"',
        f'python = "{platform.python_version()}"',
        'measured_by = "python benchmarks/measure_host_cpu.py --write"',
        f'measured_at = "{now}"',
        "",
        "[memory]",
        f"dram_gbps = {copy_med:.1f}  # measured: median stream copy (read + write) per CPU-second",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {SPEC_PATH.name}")
    parser.add_argument("--gemm-n", type=int, default=2048, help="GEMM size (default 2048)")
    parser.add_argument("--copy-mib", type=int, default=256, help="copy array MiB (default 256)")
    parser.add_argument("--repeats", type=int, default=9, help="timed repeats (default 9)")
    args = parser.parse_args(argv)
    text = render(args.gemm_n, args.copy_mib * 2**20, args.repeats)
    sys.stdout.write(text)
    if args.write:
        atomic_write(SPEC_PATH, text)
        print(f"wrote {SPEC_PATH.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
