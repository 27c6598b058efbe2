"""GPU GEMM model (tiles, waves, occupancy, tensor cores), roofline and attention costs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irkit.targets.costmodel import (
    CtaTile,
    attention_bytes,
    attention_cost,
    attention_flops,
    choose_cta_tile,
    choose_matmul_tile,
    cta_resources,
    layout_tile,
    matmul_cost,
    op_cost,
    roofline,
    simt_gemm,
)
from irkit.targets.hwspec import load_spec

H100_TILE = CtaTile(128, 128, 64, warps=4, stages=3)


def test_occupancy_by_hand_h100() -> None:
    res = cta_resources(H100_TILE, "h100", "bf16")
    # smem: 3 stages * (128*64 + 64*128) * 2 B = 98304 B (+1 KiB reserved) -> 2 per 228 KiB.
    assert res.smem_bytes == 98_304
    # registers: 128*128 f32 accumulators over 128 threads + 32 -> 160 -> 3 CTAs by registers.
    assert res.regs_per_thread == 160
    assert (res.ctas_per_sm, res.limiter) == (2, "smem")
    assert res.instruction == "wgmma m64n128k16"


def test_occupancy_by_hand_a100() -> None:
    res = cta_resources(CtaTile(128, 128, 32, warps=4, stages=3), "a100", "bf16")
    assert res.smem_bytes == 3 * (128 * 32 + 32 * 128) * 2
    # 2x2 warps of 64x64: 128 accumulators + 64 fragment registers + 32 = 224.
    assert res.regs_per_thread == 224
    assert (res.ctas_per_sm, res.limiter) == (2, "registers")
    assert res.instruction == "mma.sync m16n8k16"


def test_wave_quantisation_by_hand() -> None:
    spec = load_spec("h100")
    sm_rate = 989.4e12 / 132
    k = 4096
    # 12 x 11 = 132 CTAs: one per SM, one wave (2 slots per SM, so half full).
    full = simt_gemm(128 * 12, k, 128 * 11, spec, tile=H100_TILE)
    assert (full.ctas, full.ctas_per_sm, full.waves) == (132, 2, 1)
    assert full.wave_efficiency == pytest.approx(132 / 264)
    assert full.math_seconds == pytest.approx(2 * 128 * 128 * k / sm_rate)
    # One more column of C: 12 x 12 = 144 CTAs; 12 SMs run two, so the time doubles.
    tail = simt_gemm(128 * 12, k, 128 * 11 + 1, spec, tile=H100_TILE)
    assert (tail.ctas, tail.waves) == (144, 1)
    assert tail.math_seconds == pytest.approx(2 * full.math_seconds)
    # 265 CTAs need a second wave.
    assert simt_gemm(128 * 265, 256, 128, spec, tile=H100_TILE).waves == 2


def test_tile_quantisation_by_hand() -> None:
    cost = simt_gemm(129, 1024, 256, "h100", tile=H100_TILE)
    assert (cost.tiles_m, cost.tiles_n, cost.padded_m, cost.padded_n) == (2, 2, 256, 256)
    assert cost.tile_efficiency == pytest.approx(129 / 256)
    assert cost.executed_flops == 4 * 2 * 128 * 128 * 1024
    assert cost.flops == 2 * 129 * 256 * 1024
    odd_k = simt_gemm(128, 1000, 128, "h100", tile=H100_TILE)
    assert odd_k.k_steps == 16 and odd_k.k_efficiency == pytest.approx(1000 / 1024)


def test_illegal_tiles_say_why() -> None:
    too_much_smem = cta_resources(CtaTile(128, 256, 128, warps=8, stages=3), "h100", "bf16")
    assert not too_much_smem.legal and "shared memory" in too_much_smem.reason
    too_many_regs = cta_resources(CtaTile(256, 256, 32, warps=4, stages=2), "a100", "bf16")
    assert not too_many_regs.legal and "registers" in too_many_regs.reason
    bad_wgmma = cta_resources(CtaTile(64, 128, 32, warps=8, stages=2), "h100", "bf16")
    assert not bad_wgmma.legal and "wgmma" in bad_wgmma.reason
    with pytest.raises(ValueError, match="illegal"):
        simt_gemm(512, 512, 512, "a100", tile=CtaTile(256, 256, 32, warps=4, stages=2))


def test_smem_bandwidth_penalises_small_tiles_on_big_gemms() -> None:
    small = simt_gemm(8192, 8192, 8192, "a100", tile=CtaTile(64, 64, 32, warps=8, stages=3))
    big = simt_gemm(8192, 8192, 8192, "a100", tile=CtaTile(128, 128, 32, warps=4, stages=3))
    # 8 warps as 2x4 over a 64x64 tile re-read A and B more than the tile's math hides.
    assert small.smem_seconds > small.math_seconds
    assert big.seconds < small.seconds


def test_misaligned_dims_pad_or_fall_back() -> None:
    aligned = simt_gemm(1024, 1008, 1024, "h100", tile=H100_TILE)
    padded = simt_gemm(1024, 1001, 1024, "h100", tile=H100_TILE)
    fallback = simt_gemm(1024, 1001, 1024, "h100", tile=H100_TILE, misaligned="fallback")
    assert aligned.aligned and not padded.aligned
    assert padded.tensor_cores and padded.padded_k == 1024
    assert padded.dram_bytes > aligned.dram_bytes  # the padding copy
    assert not fallback.tensor_cores and fallback.peak_flops == pytest.approx(66.9e12)
    assert fallback.seconds > 5 * padded.seconds
    # f32 runs on CUDA cores unless TF32 is allowed.
    f32 = simt_gemm(2048, 2048, 2048, "h100", "f32", tile=H100_TILE)
    tf32 = simt_gemm(2048, 2048, 2048, "h100", "f32", tile=H100_TILE, allow_tf32=True)
    assert not f32.tensor_cores and tf32.tensor_cores and tf32.seconds < f32.seconds


def test_choose_tile_picks_the_fastest_legal() -> None:
    choice = choose_cta_tile(4096, 4096, 4096, "h100", "bf16")
    assert choice.best is choice.candidates[0]
    assert choice.best.seconds == min(c.seconds for c in choice.candidates)
    assert all(c.resources.legal for c in choice.candidates)
    assert choice.rejected and all(reason for _, reason in choice.rejected)
    assert choice.best.utilization > 0.8
    # A skinny GEMM is memory-bound and its best tile fills few waves.
    skinny = choose_cta_tile(16, 4096, 4096, "h100").best
    assert skinny.bound == "memory"
    # Default tile in simt_gemm is the chooser's.
    assert simt_gemm(4096, 4096, 4096, "h100").tile == choice.best.tile


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 5000),
    n=st.integers(1, 5000),
    k=st.integers(1, 5000),
    grow=st.integers(1, 2000),
)
def test_time_monotonic_in_m_for_a_fixed_tile(m: int, n: int, k: int, grow: int) -> None:
    a = simt_gemm(m, k, n, "a100", tile=CtaTile(128, 128, 32, 4, 3))
    b = simt_gemm(m + grow, k, n, "a100", tile=CtaTile(128, 128, 32, 4, 3))
    assert b.seconds >= a.seconds
    assert 0 < a.wave_efficiency <= 1 and 0 < a.tile_efficiency <= 1
    assert a.seconds == max(a.compute_seconds, a.memory_seconds)


def test_l2_reuse() -> None:
    # Operands that fit in L2 move once.
    fits = simt_gemm(2048, 2048, 2048, "h100", tile=H100_TILE)
    assert fits.dram_bytes == (2 * 2048 * 2048 + 2048 * 2048) * 2
    # Operands far larger than L2 are re-read once per wave column/row of tiles.
    huge = simt_gemm(16384, 16384, 16384, "h100", tile=H100_TILE)
    assert huge.dram_bytes > 3 * 16384 * 16384 * 2
    assert huge.dram_bytes < huge.l2_bytes


def test_roofline_and_op_cost() -> None:
    cost = roofline(1e12, 1e9, peak_flops=1e14, bandwidth=1e12)
    assert cost.compute_seconds == pytest.approx(0.01) and cost.memory_seconds == pytest.approx(
        1e-3
    )
    assert cost.bound == "compute" and cost.intensity == 1000 and cost.ridge == 100
    mem = op_cost(1e6, 1e9, "h100", "bf16")
    assert mem.bound == "memory" and mem.seconds == pytest.approx(1e9 / 3.35e12)
    cpu = op_cost(1e9, 0, "host-cpu", "f32")
    spec = load_spec("host-cpu")
    assert cpu.seconds == pytest.approx(1e9 / spec.peak_flops("f32"))


def test_matmul_cost_dispatches_by_kind() -> None:
    tpu = matmul_cost(1024, 1024, 1024, "tpu-v5e")
    gpu = matmul_cost(1024, 1024, 1024, "h100")
    cpu = matmul_cost(256, 256, 256, "host-cpu", "f32")
    assert type(tpu.detail).__name__ == "SystolicGemmCost"
    assert type(gpu.detail).__name__ == "SimtGemmCost"
    assert cpu.detail is None and cpu.bytes == 3 * 256 * 256 * 4
    assert all(c.flops == 2 * n**3 for c, n in ((tpu, 1024), (gpu, 1024), (cpu, 256)))


# ---------------------------------------------------------------- attention

B, H, N, D = 2, 12, 1024, 64


def test_attention_bytes_formulas() -> None:
    b = 2
    unfused = attention_bytes(B, H, N, D, b, fused=False)
    assert unfused == b * B * H * (4 * N * D + 4 * N * N)
    resident = attention_bytes(B, H, N, D, b, fused=True, kv_resident=True)
    assert resident == b * B * H * 4 * N * D
    streamed = attention_bytes(B, H, N, D, b, fused=True, q_block=128)
    assert streamed == b * B * H * (2 * N * D + 2 * N * D * (N // 128))
    one_block = attention_bytes(B, H, 100, D, b, fused=True, q_block=128)
    assert one_block == b * B * H * 4 * 100 * D
    assert attention_flops(B, H, N, D) == 4 * B * H * N * N * D


def test_unfused_moves_the_score_matrix() -> None:
    for spec in ("h100", "tpu-v5e", "host-cpu"):
        fused = attention_cost(B, H, N, D, spec, fused=True)
        unfused = attention_cost(B, H, N, D, spec, fused=False)
        assert fused.flops == unfused.flops
        assert unfused.score_bytes == 2 * B * H * 4 * N * N and fused.score_bytes == 0
        assert unfused.bytes - fused.bytes >= unfused.score_bytes - 2 * B * H * 2 * N * D * 8
        assert unfused.intensity < D / 2
        assert fused.seconds < unfused.seconds
    # Long sequences: unfused memory-bound (intensity -> d/2), fused compute-bound.
    assert attention_cost(1, 16, 4096, 128, "h100", fused=False).bound == "memory"
    long_fused = attention_cost(1, 16, 4096, 128, "h100", fused=True)
    assert long_fused.bound == "compute" and long_fused.kv_resident
    assert long_fused.intensity == pytest.approx(4096 / 2)


def test_causal_fused_skips_blocks() -> None:
    full = attention_flops(1, 1, 1024, 64, fused=True)
    causal = attention_flops(1, 1, 1024, 64, fused=True, causal=True, q_block=128)
    blocks = 1024 // 128
    assert causal == pytest.approx(full * (blocks * (blocks + 1) / 2) / blocks**2)
    assert attention_flops(1, 1, 1024, 64, fused=False, causal=True) == full
    cost = attention_cost(1, 8, 1024, 64, "a100", fused=True, causal=True)
    assert cost.flops == pytest.approx(8 * causal)


def test_attention_on_tpu_pays_for_head_dim_64() -> None:
    # d = 64 fills half a 128-row MXU: matmul time about twice the peak time.
    cost = attention_cost(1, 12, 2048, 64, "tpu-v5e", fused=True)
    at_peak = cost.flops / load_spec("tpu-v5e").peak_flops("bf16")
    assert 1.8 * at_peak < cost.compute_seconds < 2.3 * at_peak
    assert math.isfinite(cost.seconds)


# ---------------------------------------------------------------- pass entry points


def test_choose_matmul_tile_dispatches_by_kind() -> None:
    tpu = choose_matmul_tile(512, 768, 3072, "tpu-v5e")
    gpu = choose_matmul_tile(512, 768, 3072, "h100")
    assert tpu.best.dataflow == "ws" and tpu.best.warps is None
    assert gpu.best.dataflow is None and gpu.best.warps in (4, 8)
    for choice in (tpu, gpu):
        assert choice.best is choice.candidates[0]
        assert choice.best.seconds == min(c.seconds for c in choice.candidates)
    with pytest.raises(ValueError, match="CPU"):
        choose_matmul_tile(64, 64, 64, "host-cpu")


def test_layout_tiles() -> None:
    assert layout_tile("tpu-v5e", "f32") == (8, 128)
    assert layout_tile("tpu-v5e", "bf16") == (16, 128)
    assert layout_tile("tpu-v6e", "int8") == (32, 128)
    assert layout_tile("h100", "bf16") == (1, 8)
    assert layout_tile("a100", "f32") == (1, 4)
