"""Systolic-array GEMM model: SCALE-Sim-exact cycles, double buffering, tiles, properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irkit.targets.costmodel import (
    best_dataflow,
    choose_systolic_tile,
    systolic_gemm,
)
from irkit.targets.hwspec import HardwareSpec, load_spec, spec_from_dict


def array(
    size: int,
    dataflow: str = "ws",
    *,
    double_buffer: bool = False,
    arrays: int = 1,
    hbm_gbps: float | None = None,
    vmem_mib: float | None = None,
) -> HardwareSpec:
    """A user spec like SCALE-Sim's: one square array, clock 1 GHz."""
    systolic: dict[str, object] = {
        "rows": size,
        "cols": size,
        "dataflow": dataflow,
        "arrays": arrays,
        "clock_ghz": 1.0,
        "weight_double_buffer": double_buffer,
    }
    if vmem_mib is not None:
        systolic["vmem_mib"] = vmem_mib
    data: dict[str, object] = {"name": f"sa{size}", "kind": "systolic", "systolic": systolic}
    if hbm_gbps is not None:
        data["memory"] = {"hbm_gbps": hbm_gbps}
    return spec_from_dict(data)


# SCALE-Sim v3.0.0 "Total Cycles" (compute; stall cycles 0), CALC bandwidth mode, measured
# with the config of benchmarks/scalesim_compare.py: (array, dataflow, M, K, N) -> cycles.
SCALESIM_SMALL = {
    (8, "ws", 20, 10, 12): 167,
    (8, "ws", 8, 8, 8): 29,
    (8, "ws", 33, 29, 17): 659,
    (8, "is", 20, 10, 12): 203,
    (8, "is", 8, 8, 8): 29,
    (8, "is", 33, 29, 17): 779,
    (8, "os", 20, 10, 12): 143,
    (8, "os", 8, 8, 8): 21,
    (8, "os", 33, 29, 17): 644,
}

# GPT-2-small GEMMs (sequence 256): benchmarks/results/scalesim.md, same SCALE-Sim run.
SCALESIM_GPT2: dict[tuple[int, str, int, int, int], int] = {
    (128, "ws", 256, 768, 3072): 91_871,  # ffn_up
    (128, "ws", 256, 3072, 768): 91_871,  # ffn_down
    (128, "ws", 256, 64, 256): 1_275,  # qk_t
    (128, "ws", 256, 256, 64): 1_275,  # pv
    (128, "is", 256, 768, 3072): 41_447,  # ffn_up
    (128, "is", 256, 3072, 768): 55_199,  # ffn_down
    (128, "is", 256, 64, 256): 1_275,  # qk_t
    (128, "is", 256, 256, 64): 1_783,  # pv
    (128, "os", 256, 768, 3072): 49_055,  # ffn_up
    (128, "os", 256, 3072, 768): 39_911,  # ffn_down
    (128, "os", 256, 64, 256): 1_271,  # qk_t
    (128, "os", 256, 256, 64): 1_019,  # pv
    (256, "ws", 256, 768, 3072): 36_791,  # ffn_up
    (256, "ws", 256, 3072, 768): 36_791,  # ffn_down
    (256, "ws", 256, 64, 256): 1_021,  # qk_t
    (256, "ws", 256, 256, 64): 1_021,  # pv
    (256, "is", 256, 768, 3072): 11_513,  # ffn_up
    (256, "is", 256, 3072, 768): 18_407,  # ffn_down
    (256, "is", 256, 64, 256): 1_021,  # qk_t
    (256, "is", 256, 256, 64): 829,  # pv
    (256, "os", 256, 768, 3072): 15_335,  # ffn_up
    (256, "os", 256, 3072, 768): 10_745,  # ffn_down
    (256, "os", 256, 64, 256): 573,  # qk_t
    (256, "os", 256, 256, 64): 765,  # pv
}

# SCALE-Sim's SRAM access counts for FFN-up (256x768x3072) on 128x128, ws:
# IFMAP reads, Filter reads, OFMAP writes.
SCALESIM_FFN_UP_WS_SRAM = (4_718_592, 2_359_296, 4_718_592)


@pytest.mark.parametrize(("key", "cycles"), sorted({**SCALESIM_SMALL, **SCALESIM_GPT2}.items()))
def test_cycles_equal_scalesim(key: tuple[int, str, int, int, int], cycles: int) -> None:
    size, flow, m, k, n = key
    cost = systolic_gemm(m, k, n, array(size, flow), "int8")
    assert cost.compute_cycles == cycles
    # Without a bandwidth there is no memory time: the total is the compute count.
    assert cost.cycles == cycles


# SCALE-Sim's SRAM counts for FFN-down (256x3072x768) on 128x128, same run: IFMAP reads,
# Filter reads, OFMAP writes. Its OS OFMAP count adds rows + cols per fold (12 folds here)
# to the M*N real writes (systolic_compute_os.py).
SCALESIM_FFN_DOWN_SRAM = {
    "ws": (4_718_592, 2_359_296, 4_718_592),
    "is": (786_432, 4_718_592, 4_718_592),
    "os": (4_718_592, 4_718_592, 199_680),
}


def test_sram_counts_equal_scalesim() -> None:
    cost = systolic_gemm(256, 768, 3072, array(128, "ws"))
    assert cost.compute_cycles == 91_871
    assert (cost.sram_reads_a, cost.sram_reads_b, cost.sram_writes_c) == SCALESIM_FFN_UP_WS_SRAM
    for flow, (a, b, c) in SCALESIM_FFN_DOWN_SRAM.items():
        down = systolic_gemm(256, 3072, 768, array(128, flow))
        assert (down.sram_reads_a, down.sram_reads_b) == (a, b)
        quirk = down.folds * (128 + 128) if flow == "os" else 0
        assert down.sram_writes_c + quirk == c


def test_fold_arithmetic_by_hand() -> None:
    # ws on 8x8: K=10 -> 2 row folds, N=12 -> 2 column folds; T = M = 20.
    cost = systolic_gemm(20, 10, 12, array(8, "ws"))
    assert (cost.folds, cost.temporal, cost.cycles_per_fold) == (4, 20, 2 * 8 + 8 + 20 - 2)
    assert (cost.padded_m, cost.padded_k, cost.padded_n) == (20, 16, 16)
    assert cost.padding_waste == pytest.approx(1 - (20 * 10 * 12) / (20 * 16 * 16))
    assert cost.mapping_efficiency == pytest.approx(120 / 256)
    # os on 8x8: spatial M x N = 20 x 12 -> 3 x 2 folds of T = K = 10.
    os_cost = systolic_gemm(20, 10, 12, array(8, "os"))
    assert (os_cost.folds, os_cost.cycles_per_fold) == (6, 8 + 8 + 10 - 2)
    assert os_cost.flops == 2 * 20 * 10 * 12


def test_double_buffering_hand_count() -> None:
    # ws, R = C = 8, T = 20, 4 folds: load 8, then folds every max(20, 8) = 20 cycles,
    # the last one streams 20 rows and fills and drains 8 + 8 - 2; minus 1 (from zero).
    cost = systolic_gemm(20, 10, 12, array(8, "ws", double_buffer=True))
    assert cost.compute_cycles == 8 + 3 * 20 + 20 + 8 + 8 - 2 - 1
    # A short stream cannot hide the next tile's R-cycle load: the interval is R.
    short = systolic_gemm(4, 16, 16, array(8, "ws", double_buffer=True))
    assert short.folds == 4
    assert short.compute_cycles == 8 + 3 * 8 + 4 + 8 + 8 - 2 - 1


dims = st.integers(min_value=1, max_value=700)


@settings(max_examples=60, deadline=None)
@given(
    m=dims,
    k=dims,
    n=dims,
    flow=st.sampled_from(["ws", "is", "os"]),
    size=st.sampled_from([4, 8, 16, 128]),
)
def test_double_buffering_never_slower(m: int, k: int, n: int, flow: str, size: int) -> None:
    plain = systolic_gemm(m, k, n, array(size, flow))
    overlapped = systolic_gemm(m, k, n, array(size, flow), weight_double_buffer=True)
    assert overlapped.compute_cycles <= plain.compute_cycles
    if plain.folds == 1:
        assert overlapped.compute_cycles == plain.compute_cycles
    else:
        assert overlapped.compute_cycles < plain.compute_cycles


def test_double_buffering_lowers_cycles_on_tpu() -> None:
    spec = load_spec("tpu-v5e")
    on = systolic_gemm(1024, 4096, 4096, spec)
    off = systolic_gemm(1024, 4096, 4096, spec, weight_double_buffer=False)
    assert on.weight_double_buffer and not off.weight_double_buffer
    assert on.compute_cycles < off.compute_cycles
    assert on.utilization > off.utilization


@settings(max_examples=60, deadline=None)
@given(
    m=dims,
    k=dims,
    n=dims,
    flow=st.sampled_from(["ws", "is", "os"]),
    db=st.booleans(),
    which=st.sampled_from(["m", "k", "n"]),
    grow=st.integers(1, 300),
)
def test_cycles_monotonic_in_each_dim(
    m: int, k: int, n: int, flow: str, db: bool, which: str, grow: int
) -> None:
    spec = array(16, flow, double_buffer=db)
    base = systolic_gemm(m, k, n, spec)
    bigger = {"m": (m + grow, k, n), "k": (m, k + grow, n), "n": (m, k, n + grow)}[which]
    assert systolic_gemm(*bigger, spec).compute_cycles >= base.compute_cycles


@settings(max_examples=60, deadline=None)
@given(
    m=dims,
    k=dims,
    n=dims,
    flow=st.sampled_from(["ws", "is", "os"]),
    db=st.booleans(),
    arrays=st.integers(1, 8),
)
def test_consistency(m: int, k: int, n: int, flow: str, db: bool, arrays: int) -> None:
    spec = array(32, flow, double_buffer=db, arrays=8, hbm_gbps=100.0)
    one = systolic_gemm(m, k, n, spec, arrays=1)
    many = systolic_gemm(m, k, n, spec, arrays=arrays)
    assert many.compute_cycles <= one.compute_cycles
    assert many.folds_per_array == math.ceil(many.folds / arrays)
    for cost in (one, many):
        assert 0 < cost.utilization <= 1.0 + 1e-12
        assert 0 <= cost.padding_waste < 1
        assert 0 < cost.mapping_efficiency <= 1
        assert cost.padded_m >= m and cost.padded_k >= k and cost.padded_n >= n
        assert cost.cycles == max(cost.compute_cycles, cost.memory_cycles)
        assert cost.bound == ("memory" if cost.memory_cycles > cost.compute_cycles else "compute")
        assert cost.dram_bytes == 2 * (m * k + k * n + m * n)
    serial = systolic_gemm(m, k, n, spec, arrays=arrays, overlap_memory=False)
    assert serial.cycles == serial.compute_cycles + serial.memory_cycles >= many.cycles


def test_memory_bound_when_bandwidth_is_low() -> None:
    fast = systolic_gemm(512, 512, 512, array(128, hbm_gbps=1e6))
    slow = systolic_gemm(512, 512, 512, array(128, hbm_gbps=1.0))
    assert fast.bound == "compute" and slow.bound == "memory"
    assert slow.memory_seconds == pytest.approx(slow.dram_bytes / 1e9)
    assert slow.seconds == pytest.approx(slow.cycles / 1e9)


def test_tile_traffic_and_vmem() -> None:
    # Pallas grid with K innermost: A once per N block, B once per M block, C once.
    cost = systolic_gemm(512, 1024, 768, array(128, vmem_mib=1), "bf16", tile=(256, 256, 512))
    assert cost.blocks == 2 * 3 * 2
    assert cost.dram_read_bytes == (512 * 1024 * 3 + 1024 * 768 * 2) * 2
    assert cost.dram_write_bytes == 512 * 768 * 2
    working_set = 2 * (256 * 512 + 512 * 256) * 2 + 2 * 256 * 256 * 2 + 256 * 256 * 4
    assert cost.vmem_bytes == working_set
    assert cost.fits_vmem == (working_set <= 2**20)
    # Tile padding: M = 300 with tile_m = 256 computes two whole blocks.
    padded = systolic_gemm(300, 128, 128, array(128), tile=(256, 128, 128))
    assert padded.padded_m == 512


def test_dtype_rates_on_v5e() -> None:
    spec = load_spec("tpu-v5e")
    bf16 = systolic_gemm(2048, 2048, 2048, spec, "bf16")
    int8 = systolic_gemm(2048, 2048, 2048, spec, "int8")
    f32 = systolic_gemm(2048, 2048, 2048, spec, "f32")
    assert int8.compute_cycles == math.ceil(bf16.compute_cycles / (393 / 197))
    assert f32.compute_cycles == 6 * bf16.compute_cycles
    assert int8.dram_write_bytes == 2048 * 2048 * 4  # int32 results


def test_chip_uses_every_mxu() -> None:
    v4 = systolic_gemm(4096, 4096, 4096, "tpu-v4")
    assert v4.arrays == 8
    assert v4.utilization > 0.99  # big GEMM, double buffered: near peak


def test_head_dim_64_half_fills_a_128_array() -> None:
    # QKᵀ contracts over the head dim: K = 64 uses half the rows of a 128x128 MXU.
    cost = systolic_gemm(1024, 64, 1024, "tpu-v5e", batch=12)
    assert cost.mapping_efficiency == pytest.approx(0.5)
    assert cost.utilization < 0.51


def test_best_dataflow_is_the_minimum() -> None:
    spec = array(16, "auto")
    best = systolic_gemm(40, 300, 24, spec)
    each = [systolic_gemm(40, 300, 24, spec, dataflow=f) for f in ("ws", "is", "os")]
    assert best.cycles == min(c.cycles for c in each)
    assert best_dataflow(40, 300, 24, spec).dataflow == best.dataflow


def test_choose_tile_on_v5e() -> None:
    choice = choose_systolic_tile(1024, 768, 3072, "tpu-v5e", "bf16")
    best = choice.best
    assert best.dataflow == "ws"  # the MXU's own dataflow
    assert best.cost.cycles == min(c.cost.cycles for c in choice.candidates)
    assert choice.candidates[0] is best
    for cand in choice.candidates:
        assert cand.cost.fits_vmem
        assert cand.tile_m % 16 == 0 or cand.tile_m == 1024  # bf16 sublane tile (16, 128)
        assert cand.tile_n % 128 == 0 and cand.tile_k % 128 == 0
    assert best.cost.tile == best.tile


def test_choose_tile_aligns_to_256_on_v6e_and_rejects_over_vmem() -> None:
    choice = choose_systolic_tile(4096, 4096, 4096, "tpu-v6e")
    assert all(c.tile_n % 256 == 0 and c.tile_k % 256 == 0 for c in choice.candidates)
    small = array(128, "auto", vmem_mib=1)
    picked = choose_systolic_tile(2048, 2048, 2048, small)
    assert picked.rejected
    assert {c.dataflow for c in picked.candidates} == {"ws", "is", "os"}
    assert all(c.cost.vmem_bytes <= 2**20 for c in picked.candidates)


def test_errors() -> None:
    with pytest.raises(ValueError, match="not 'systolic'"):
        systolic_gemm(8, 8, 8, "h100")
    with pytest.raises(ValueError, match="unknown dataflow"):
        systolic_gemm(8, 8, 8, array(8), dataflow="rs")
    with pytest.raises(ValueError, match="m must be a positive integer"):
        systolic_gemm(0, 8, 8, array(8))


def test_tile_larger_than_dim_is_padded_not_clipped() -> None:
    cost = systolic_gemm(100, 128, 128, array(128), tile=(112, 128, 128))
    assert cost.tile == (112, 128, 128) and cost.blocks == 1 and cost.padded_m == 112
    choice = choose_systolic_tile(100, 300, 200, "tpu-v5e")
    assert choice.best.cost.tile == choice.best.tile
    assert choice.best.tile_m % 16 == 0
