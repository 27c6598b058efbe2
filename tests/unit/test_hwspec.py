"""Hardware descriptions: every built-in spec loads, user files load, bad files fail clearly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from irkit.targets.hwspec import (
    SPEC_DIR,
    HardwareSpec,
    SpecError,
    dtype_bytes,
    list_specs,
    load_spec,
    normalize_dtype,
    spec_from_dict,
)

BUILTIN = ["a100", "h100", "h200", "host-cpu", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"]

MIN_SYSTOLIC = """\
name = "my-npu"
kind = "systolic"

[systolic]
rows = 32
cols = 16
dataflow = "os"
arrays = 2
clock_ghz = 0.8
weight_double_buffer = false
"""

MIN_SIMT = """\
name = "my-gpu"
kind = "simt"

[simt]
sms = 10
clock_ghz = 1.5
smem_per_sm_kib = 100
regs_per_sm = 65536

[simt.peak_tflops]
f16 = 50.0
f32 = 10.0

[memory]
hbm_gbps = 500.0
"""

MIN_CPU = """\
name = "my-cpu"
kind = "cpu"

[cpu]
cores = 4
gemm_f32_gflops_1t = 50.0
"""


def write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_list_specs_has_every_device() -> None:
    assert list_specs() == BUILTIN


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_spec_loads(name: str) -> None:
    spec = load_spec(name)
    assert isinstance(spec, HardwareSpec)
    assert spec.name == name
    assert spec.source.endswith(f"{name}.toml")
    part = {"systolic": spec.systolic, "simt": spec.simt, "cpu": spec.cpu}[spec.kind]
    assert part is not None
    assert spec.bandwidth_bytes_per_s is not None and spec.bandwidth_bytes_per_s > 0
    assert spec.peak_flops("f32") > 0


@pytest.mark.parametrize(
    ("name", "bf16_tflops", "hbm_gbps"),
    [
        ("tpu-v4", 275, 1200),
        ("tpu-v5e", 197, 819),
        ("tpu-v5p", 459, 2765),
        ("tpu-v6e", 918, 1638),
        ("a100", 312, 2039),
        ("h100", 989.4, 3350),
        ("h200", 989.4, 4800),
    ],
)
def test_peaks_match_vendor_numbers(name: str, bf16_tflops: float, hbm_gbps: float) -> None:
    spec = load_spec(name)
    assert spec.peak_flops("bf16") / 1e12 == pytest.approx(bf16_tflops, rel=0.01)
    assert spec.memory is not None and spec.memory.bandwidth_gbps == hbm_gbps


def test_tpu_geometry() -> None:
    v5e, v6e, v4 = load_spec("tpu-v5e"), load_spec("tpu-v6e"), load_spec("tpu-v4")
    assert v5e.systolic is not None and v6e.systolic is not None and v4.systolic is not None
    assert (v5e.systolic.rows, v5e.systolic.cols, v5e.systolic.arrays) == (128, 128, 4)
    assert (v6e.systolic.rows, v6e.systolic.cols) == (256, 256)
    assert v4.systolic.total_arrays == 8
    assert v5e.systolic.native_tile_f32 == (8, 128)
    assert v5e.systolic.native_tile_bf16 == (16, 128)
    assert v5e.systolic.vmem_bytes == 128 * 2**20
    assert v5e.systolic.weight_double_buffer and v5e.systolic.dataflow == "ws"
    # int8 runs at twice the bf16 rate on v5e, at the same rate on v4.
    assert v5e.systolic.macs_per_pe_cycle("int8") == pytest.approx(2.0, rel=0.01)
    assert v4.systolic.macs_per_pe_cycle("int8") == 1.0
    assert v5e.systolic.macs_per_pe_cycle("f32") == pytest.approx(1 / 6)


def test_gpu_details() -> None:
    a100, h100 = load_spec("a100"), load_spec("h100")
    assert a100.simt is not None and h100.simt is not None
    assert a100.simt.arch == "sm_80" and not a100.simt.wgmma
    assert h100.simt.arch == "sm_90" and h100.simt.wgmma and h100.simt.sm_version == 90
    assert h100.simt.sms == 132 and a100.simt.sms == 108
    assert h100.simt.smem_block_limit == 227 * 1024
    assert h100.simt.l2_bytes == 50 * 2**20
    assert h100.simt.mma_k("bf16") == 16
    assert h100.simt.mma_k("tf32") == 8
    assert h100.simt.mma_k("int8") == 32
    assert h100.simt.uses_tensor_cores("bf16") and not h100.simt.uses_tensor_cores("f32")
    assert h100.peak_flops("int8") == pytest.approx(2 * h100.peak_flops("bf16"), rel=1e-3)


def test_host_cpu_is_measured() -> None:
    text = (SPEC_DIR / "host-cpu.toml").read_text()
    assert "benchmarks/measure_host_cpu.py" in text
    spec = load_spec("host-cpu")
    assert spec.cpu is not None and spec.cpu.cores >= 1
    assert spec.cpu.vector_bits in (128, 256, 512)
    assert spec.peak_flops("f32") == pytest.approx(
        spec.cpu.gemm_f32_gflops_1t * 1e9 * spec.cpu.cores
    )


def _measure_script():
    import importlib.util

    path = SPEC_DIR.parents[1] / "benchmarks" / "measure_host_cpu.py"
    spec = importlib.util.spec_from_file_location("measure_host_cpu", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_host_cpu_spec_is_consistent_with_its_own_flags() -> None:
    """The vector width and microarchitecture the file states follow from the flags it
    records (Zen 3 and Zen 4 share CPU family 25; only Zen 4 has AVX-512)."""
    import tomllib

    data = tomllib.loads((SPEC_DIR / "host-cpu.toml").read_text())["cpu"]
    flags = set(data["flags"].split())
    m = _measure_script()
    assert data["vector_bits"] == m.vector_bits(flags)
    if data.get("microarch", "").startswith("znver"):
        assert (data["microarch"] == "znver4") == ("avx512f" in flags)


@pytest.mark.parametrize(
    "info, flags, want",
    [
        ({"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "1"}, {"avx2", "fma"}, "znver3"),
        ({"vendor_id": "AuthenticAMD", "cpu family": "25", "model": "17"}, {"avx2", "avx512f"}, "znver4"),
        ({"vendor_id": "AuthenticAMD", "cpu family": "23", "model": "49"}, {"avx2"}, "znver2"),
        ({"vendor_id": "AuthenticAMD", "cpu family": "26", "model": "2"}, {"avx512f"}, "znver5"),
        ({"vendor_id": "GenuineIntel", "cpu family": "6", "model": "143"}, {"avx512f"}, ""),
        ({"vendor_id": "AuthenticAMD", "cpu family": "?"}, set(), ""),
    ],
)
def test_microarch_from_family_and_flags(info: dict, flags: set, want: str) -> None:
    assert _measure_script().microarch(info, flags) == want


@pytest.mark.parametrize("name", [n for n in BUILTIN if n != "host-cpu"])
def test_every_number_has_a_source_comment(name: str) -> None:
    """Each numeric setting carries a comment on its line, the line above, or its table header."""
    header_commented = False
    previous = ""
    for line in (SPEC_DIR / f"{name}.toml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            header_commented = "#" in stripped
        elif re.match(r"^\w+\s*=\s*[\d\[]", stripped):
            assert "#" in stripped or previous.startswith("#") or header_commented, (
                f"{name}.toml: '{stripped}' has no source comment"
            )
        if stripped:
            previous = stripped


def test_user_systolic_file_with_minimum_keys(tmp_path: Path) -> None:
    spec = load_spec(str(write(tmp_path, MIN_SYSTOLIC)))
    assert spec.kind == "systolic" and spec.systolic is not None
    s = spec.systolic
    assert (s.rows, s.cols, s.arrays, s.dataflow) == (32, 16, 2, "os")
    assert s.cores == 1 and s.overlap_memory and s.vmem_bytes is None
    assert spec.memory is None and spec.bandwidth_bytes_per_s is None
    assert spec.peak_flops("bf16") == pytest.approx(2 * 32 * 16 * 2 * 0.8e9)


def test_user_simt_and_cpu_files(tmp_path: Path) -> None:
    gpu = load_spec(write(tmp_path, MIN_SIMT, "gpu.toml"))  # a Path works too
    assert gpu.simt is not None and gpu.simt.sms == 10
    assert gpu.simt.smem_block_limit == 100 * 1024
    assert gpu.simt.max_threads_per_sm == 2048 and gpu.simt.arch == "sm_80"
    assert gpu.peak_flops("f16") == 50e12 and gpu.peak_flops("f64") == 10e12
    cpu = load_spec(str(write(tmp_path, MIN_CPU, "cpu.toml")))
    assert cpu.cpu is not None and cpu.peak_flops("f32") == 200e9


def test_spec_passes_through_and_dict_source() -> None:
    spec = load_spec("tpu-v5e")
    assert load_spec(spec) is spec
    built = spec_from_dict(
        {"name": "x", "kind": "cpu", "cpu": {"cores": 1, "gemm_f32_gflops_1t": 1.0}}
    )
    assert built.source == "<dict>"


@pytest.mark.parametrize(
    ("text", "key", "hint"),
    [
        (MIN_SYSTOLIC.replace("rows = 32\n", ""), "systolic.rows", "missing"),
        (MIN_SYSTOLIC.replace("rows = 32", 'rows = "32"'), "systolic.rows", "positive integer"),
        (MIN_SYSTOLIC.replace("rows = 32", "rows = 0"), "systolic.rows", "positive integer"),
        (MIN_SYSTOLIC.replace('"os"', '"rs"'), "systolic.dataflow", '"ws" | "is" | "os" | "auto"'),
        (MIN_SYSTOLIC.replace("false", "0"), "systolic.weight_double_buffer", "true or false"),
        (
            MIN_SYSTOLIC.replace("arrays = 2", "arrays = 2\nrowz = 4"),
            "systolic.rowz",
            "not a known key",
        ),
        (MIN_SYSTOLIC.replace('kind = "systolic"', 'kind = "fpga"'), "kind", "use one of"),
        (MIN_SYSTOLIC.replace('name = "my-npu"\n', ""), "name", "missing"),
        (
            MIN_SYSTOLIC + "\n[systolic.peak_tflops]\nbf16 = 100.0\n",
            "systolic.peak_tflops.bf16",
            "disagrees",
        ),
        (
            MIN_SYSTOLIC + "\n[systolic.peak_tflops]\nbf17 = 1.0\n",
            "systolic.peak_tflops.bf17",
            "not a dtype",
        ),
        (MIN_SIMT.replace("sms = 10\n", ""), "simt.sms", "missing"),
        (
            MIN_SIMT.replace("sms = 10", 'sms = 10\narch = "sm_80"\nwgmma = true'),
            "simt.wgmma",
            "sm_90",
        ),
        (MIN_SIMT.replace("hbm_gbps = 500.0", "hbm_gbps = -1.0"), "memory.hbm_gbps", "positive"),
        (MIN_SIMT + "\n[cpu]\ncores = 1\n", "cpu", "does not belong"),
        (
            MIN_CPU.replace("gemm_f32_gflops_1t = 50.0", "gemm_f32_gflops_1t = true"),
            "cpu.gemm_f32_gflops_1t",
            "positive number",
        ),
    ],
)
def test_bad_file_names_file_and_key(tmp_path: Path, text: str, key: str, hint: str) -> None:
    path = write(tmp_path, text, "broken.toml")
    with pytest.raises(SpecError) as info:
        load_spec(str(path))
    message = str(info.value)
    assert "\n" not in message
    assert "broken.toml" in message
    assert f"'{key}'" in message
    assert hint in message
    assert isinstance(info.value, ValueError)


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    path = write(tmp_path, "name = \n", "syntax.toml")
    with pytest.raises(SpecError, match=r"syntax\.toml: not valid TOML"):
        load_spec(str(path))
    with pytest.raises(SpecError, match=r"nowhere\.toml: no such hardware description file"):
        load_spec(str(tmp_path / "nowhere.toml"))


def test_unknown_name_lists_known_specs() -> None:
    with pytest.raises(SpecError, match=r"unknown hardware 'tpu-v9'.*tpu-v5e"):
        load_spec("tpu-v9")


def test_edited_file_is_reread(tmp_path: Path) -> None:
    path = write(tmp_path, MIN_CPU)
    assert load_spec(str(path)).cpu.cores == 4  # type: ignore[union-attr]
    path.write_text(MIN_CPU.replace("cores = 4", "cores = 8"))
    import os

    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert load_spec(str(path)).cpu.cores == 8  # type: ignore[union-attr]


def test_dtypes() -> None:
    assert normalize_dtype("bfloat16") == "bf16"
    assert normalize_dtype("i8") == "int8"
    assert normalize_dtype("float32") == "f32"
    assert dtype_bytes("tf32") == 4 and dtype_bytes("bf16") == 2 and dtype_bytes("fp8") == 1

    class Enumish:
        value = "f16"

    assert normalize_dtype(Enumish()) == "f16"
    with pytest.raises(ValueError, match="unknown dtype"):
        normalize_dtype("complex64")
