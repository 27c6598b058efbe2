"""irkit's cost model against XLA's own cost analysis of the TPU ahead-of-time compiles.

The FLOPs of a matmul-dominated module are counted twice, independently: by irkit's op
registry (``irkit estimate``) and by XLA's HloCostAnalysis over the optimised TPU HLO
(``cost_analysis()`` of the ``xla-tpu-*`` compile). They must agree. XLA's ``bytes
accessed`` is re-counted from the HLO by :func:`irkit.targets.xla.hlo_traffic` (tiled
sizes, VMEM prefetches on both halves of the copy); agreement there is what lets
benchmarks/tpu_cost.py say where XLA's byte count parts from irkit's. Every TPU
generation is compiled here once (a few seconds each), so each ``xla-tpu-*`` target is
exercised on every CI run.
"""

from __future__ import annotations

import importlib.util
import math
import os

import pytest

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # see targets/xla.py
pytest.importorskip("jax")

from irkit.targets.estimate import estimate
from irkit.targets.registry import get_target
from irkit.targets.xla import hlo_traffic, padded_bytes
from irkit.targets.xla_compile import _parse_shapes

from irkit.ir import DType, Module, TensorType, new_function, verify
from irkit.passmanager import run_pipeline

needs_libtpu = pytest.mark.skipif(
    importlib.util.find_spec("libtpu") is None,
    reason="libtpu not installed (pip install irkit[tpu])",
)

TOKENS, HIDDEN, FFN = 256, 512, 2048


def ffn_module() -> Module:
    """A Transformer FFN: x @ W1 -> gelu -> @ W2, f32. 2·T·H·F·2 FLOPs in the matmuls, and a
    few per element of the [T, F] activation besides."""
    f, b = new_function(
        "main",
        [
            TensorType((TOKENS, HIDDEN), DType.f32),
            TensorType((HIDDEN, FFN), DType.f32),
            TensorType((FFN, HIDDEN), DType.f32),
        ],
        ["x", "w1", "w2"],
    )
    h = b.gelu(b.matmul(f.args[0], f.args[1]))
    b.ret(b.matmul(h, f.args[2]))
    m = Module([f])
    verify(m)
    return m


@pytest.fixture(scope="module")
def ffn() -> Module:
    return ffn_module()


_ARTIFACTS: dict[str, object] = {}


def tpu_artifact(chip: str, module: Module):
    """One compile per chip for this file's tests."""
    if chip not in _ARTIFACTS:
        _ARTIFACTS[chip] = get_target(f"xla-tpu-{chip}").lower(module)
    return _ARTIFACTS[chip]


@needs_libtpu
@pytest.mark.parametrize("chip", ["v4", "v5e", "v5p", "v6e"])
def test_flops_agree_with_xla_on_a_matmul_dominated_module(chip: str, ffn: Module) -> None:
    est = estimate(ffn, f"tpu-{chip}")
    art = tpu_artifact(chip, ffn)
    xla = art.info["cost_analysis"]
    gemm = 2 * 2 * TOKENS * HIDDEN * FFN
    assert est.flops > gemm  # the gelu is counted too, and is small beside the matmuls
    assert est.flops / gemm < 1.01
    assert xla["flops"] / est.flops == pytest.approx(1.0, abs=0.02)
    # XLA counts gelu's tanh (or erf) apart, as transcendentals: one per activation element.
    assert xla["transcendentals"] >= TOKENS * FFN
    # irkit's modelled time is that of the systolic GEMM model, and is compute-bound here.
    mm = [o for o in est.ops if o.model == "gemm"]
    assert len(mm) == 2 and all(o.cycles and o.cycles > 0 for o in mm)


@needs_libtpu
def test_hlo_traffic_reconstructs_xla_bytes_accessed(ffn: Module) -> None:
    art = tpu_artifact("v5e", ffn)
    xla_bytes = art.info["cost_analysis"]["bytes accessed"]
    t = hlo_traffic(art.files["hlo.txt"])
    assert t.padded == pytest.approx(xla_bytes, rel=0.02)
    # The aligned FFN has no padding: every byte beyond the logical operands and results is
    # a weight's prefetch into VMEM, counted on copy-start and again on copy-done (a read and
    # a write each): four times the weight.
    weight = 4 * HIDDEN * FFN
    assert t.prefetch > 0 and t.prefetch % (4 * weight) == 0
    assert t.padded - t.prefetch == pytest.approx(t.logical - t.prefetch / 2, rel=0.01)
    # Beside the prefetches XLA's one fused kernel reads x, W1 and W2 once and writes the
    # output once: the [T, F] activation stays on chip. irkit's estimate of the unfused
    # module moves it four times (matmul writes it, gelu reads and writes, matmul reads).
    io = 4 * (TOKENS * HIDDEN + 2 * HIDDEN * FFN + TOKENS * HIDDEN)
    assert xla_bytes - t.prefetch == pytest.approx(io, rel=0.01)
    est = estimate(ffn, "tpu-v5e")
    assert est.bytes == pytest.approx(io + 4 * 4 * TOKENS * FFN, rel=0.01)


def test_padded_bytes_rounds_minor_dims_to_the_tile() -> None:
    (s,) = _parse_shapes("f32[100,300]{0,1:T(8,128)}")  # dim 0 is minor: 100 -> 128, 300 -> 304
    assert padded_bytes(s) == 304 * 128 * 4
    (s,) = _parse_shapes("bf16[32,64]{1,0:T(8,128)(2,1)}")
    assert padded_bytes(s) == 32 * 128 * 2
    (s,) = _parse_shapes("f32[7]")  # no layout printed: logical size
    assert padded_bytes(s) == 28


def test_a_fused_matmul_is_costed_by_the_gemm_model() -> None:
    """matmul + bias + gelu fused into one region: the region's matmul is timed by the
    systolic model (not at the bare peak), so the region costs at least the matmul alone."""
    f, b = new_function(
        "main",
        [
            TensorType((TOKENS, HIDDEN), DType.f32),
            TensorType((HIDDEN, FFN), DType.f32),
            TensorType((FFN,), DType.f32),
        ],
    )
    b.ret(b.gelu(b.add(b.matmul(f.args[0], f.args[1]), f.args[2])))
    m = Module([f])
    verify(m)
    alone = next(o for o in estimate(m, "tpu-v5e").ops if o.op.startswith("ik.matmul"))
    run_pipeline(m, "fuse-activation,fuse-elementwise")
    rows = estimate(m, "tpu-v5e").ops
    fused = [o for o in rows if o.op.startswith("ik.fused")]
    assert fused, [o.op for o in rows]
    region = fused[0]
    assert region.model == "gemm"
    assert region.seconds >= alone.seconds * 0.999
    assert region.flops > 2 * TOKENS * HIDDEN * FFN
    assert not math.isnan(region.utilization) and 0 < region.utilization <= 1.0
