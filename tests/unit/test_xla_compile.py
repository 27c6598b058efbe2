"""XLA compile plumbing: CPU runs, TPU compiles ahead of time, GPU compiles deviceless or says why.

Every compile here is small (a 128x256 @ 256x512 matmul, softmax, layernorm), so the whole
file stays well under a minute on two cores; each platform is compiled once per module.
"""

from __future__ import annotations

import functools
import importlib.util

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from irkit.targets import xla_compile as xc
from irkit.targets.xla_compile import (
    HloKernel,
    IrScope,
    XlaCompileError,
    XlaUnavailable,
    canonical_platform,
    compile_xla,
    format_kernels,
    hlo_kernels,
    ir_scope,
    parse_ir_scopes,
    tpu_device,
)

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
needs_libtpu = pytest.mark.skipif(
    not HAS_LIBTPU, reason="libtpu not installed (pip install irkit[tpu])"
)

M, K, N = 128, 256, 512
TPUS = ["tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"]
SCOPES = {
    "matmul": ir_scope("ik.matmul", "models/gpt.py:42", id="3"),
    "softmax": ir_scope("ik.softmax", "model.py:43"),
    "layernorm": ir_scope("ik.layernorm", "model.py:44"),
}


def block(x, w, g):
    """A transformer-ish step: projection, softmax over features, layernorm with a gain."""
    with jax.named_scope(SCOPES["matmul"]):
        h = x @ w
    with jax.named_scope(SCOPES["softmax"]):
        s = jax.nn.softmax(h, axis=-1)
    with jax.named_scope(SCOPES["layernorm"]):
        mean = s.mean(-1, keepdims=True)
        var = ((s - mean) ** 2).mean(-1, keepdims=True)
        return (s - mean) * jax.lax.rsqrt(var + 1e-5) * g


def block_numpy(x, w, g):
    h = x.astype(np.float64) @ w.astype(np.float64)
    e = np.exp(h - h.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    mean = s.mean(-1, keepdims=True)
    var = ((s - mean) ** 2).mean(-1, keepdims=True)
    return (s - mean) / np.sqrt(var + 1e-5) * g


SPECS = (
    jax.ShapeDtypeStruct((M, K), jnp.float32),
    jax.ShapeDtypeStruct((K, N), jnp.float32),
    jax.ShapeDtypeStruct((N,), jnp.float32),
)
# 2MKN for the matmul plus ~14 FLOPs per output element for softmax and layernorm (max, sub,
# sum, div; mean, sub, square, sum, div, add, mul, mul ...). XLA's count differs by a few
# FLOPs per element between versions, far below 3% of the total.
ANALYTIC_FLOPS = 2 * M * K * N + 14 * M * N


def random_inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal((M, K)).astype(np.float32),
        (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32),
        rng.uniform(0.5, 1.5, N).astype(np.float32),
    ]


@pytest.fixture(scope="module")
def cpu_artifact():
    return compile_xla(block, SPECS, "xla-cpu")


@pytest.fixture(scope="module", params=TPUS)
def tpu_artifact(request):
    if not HAS_LIBTPU:
        pytest.skip("libtpu not installed")
    return compile_xla(block, SPECS, request.param)


# ---- CPU ---------------------------------------------------------------------------------


def test_cpu_runs_and_matches_numpy(cpu_artifact):
    assert cpu_artifact.runnable and not cpu_artifact.deviceless
    for seed in (0, 1):
        inputs = random_inputs(seed)
        out = cpu_artifact.run(*inputs)
        assert isinstance(out, np.ndarray) and out.shape == (M, N)
        np.testing.assert_allclose(out, block_numpy(*inputs), rtol=2e-4, atol=2e-4)


def test_cpu_artifact_holds_what_xla_produced(cpu_artifact):
    a = cpu_artifact
    assert (a.platform, a.target, a.topology) == ("cpu", "xla-cpu", "host")
    assert "stablehlo.dot_general" in a.stablehlo
    assert a.hlo.startswith("HloModule jit_block")
    assert "fusion(" in a.hlo
    assert a.lower_seconds > 0 and a.compile_seconds > 0
    assert a.memory["argument"] == 4 * (M * K + K * N + N)
    assert a.memory["output"] == 4 * M * N
    assert a.flops == pytest.approx(ANALYTIC_FLOPS, rel=0.03)
    assert all(isinstance(v, float) for v in a.cost.values())
    assert a.versions["jax"] == jax.__version__


def test_cpu_run_checks_inputs(cpu_artifact):
    x, w, g = random_inputs(2)
    with pytest.raises(TypeError, match=r"input 0 is float64\[128, 256\], compiled for float32"):
        cpu_artifact.run(x.astype(np.float64), w, g)
    with pytest.raises(TypeError, match="expected 3 inputs"):
        cpu_artifact.run(x, w)


def test_each_compile_is_timed_afresh():
    # JAX caches compilations per traced module; compile_xla must not report a cache hit.
    first = compile_xla(block, SPECS, "cpu")
    second = compile_xla(block, SPECS, "cpu")
    assert second.compile_seconds > 0.2 * first.compile_seconds


def test_cpu_kernels_map_back_to_ir_ops(cpu_artifact):
    kernels = cpu_artifact.kernels()
    assert kernels and all(isinstance(k, HloKernel) for k in kernels)
    found = {str(s) for k in kernels for s in k.ir_ops}
    assert found == {
        "ik.matmul#3[models/gpt.py:42]",
        "ik.softmax[model.py:43]",
        "ik.layernorm[model.py:44]",
    }
    dot = next(k for k in kernels if "dot" in k.ops)
    assert IrScope("ik.matmul", "3", "models/gpt.py:42") in dot.ir_ops
    assert dot.operands[0].dims == (M, K) and dot.operands[0].minor_to_major == (1, 0)
    assert any(
        src.endswith(f"{__file__.rsplit('/', 1)[-1]}:{_line_of('h = x @ w')}") for src in dot.source
    )


def _line_of(snippet: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if snippet in line)


# ---- TPU ahead of time -------------------------------------------------------------------


@needs_libtpu
def test_tpu_compiles_ahead_of_time_with_tiled_layouts(tpu_artifact):
    a = tpu_artifact
    assert a.deviceless and not a.runnable
    assert a.topology == xc.TPU_DEFAULT_TOPOLOGY[a.platform]
    assert a.device_kind.startswith("TPU v")
    # f32 arrays live in (8 sublane x 128 lane) tiles on every TPU generation.
    assert "f32[128,512]{1,0:T(8,128)}" in a.hlo
    assert a.flops == pytest.approx(ANALYTIC_FLOPS, rel=0.03)
    assert a.bytes_accessed >= 4 * (M * K + K * N + M * N)
    assert a.memory["generated_code"] > 0
    with pytest.raises(XlaUnavailable, match="no such device is attached"):
        a.run(*random_inputs(3))


@needs_libtpu
def test_tpu_kernels_show_fusions_layouts_and_ir_ops(tpu_artifact):
    kernels = tpu_artifact.kernels()
    matmul = [k for k in kernels if "convolution" in k.ops]
    assert len(matmul) == 1, format_kernels(kernels)
    mk = matmul[0]
    # XLA:TPU writes a dot as a convolution in a kOutput fusion and fuses the softmax max into it.
    assert mk.kind == "kOutput"
    assert str(mk.ir_ops[0]) == "ik.matmul#3[models/gpt.py:42]"
    assert mk.estimated_cycles and mk.estimated_cycles > 0
    assert any(s.tiles == ((8, 128),) and s.dims == (M, N) for s in mk.outputs)
    assert {str(s) for k in kernels for s in k.ir_ops} == {
        "ik.matmul#3[models/gpt.py:42]",
        "ik.softmax[model.py:43]",
        "ik.layernorm[model.py:44]",
    }
    assert all(k.kind.startswith("k") for k in kernels if k.computation)


@needs_libtpu
@pytest.mark.parametrize(
    "platform, topology, devices_kind",
    [
        ("tpu-v4", "v4:2x2x1", "TPU v4"),
        ("tpu-v5e", "v5e:2x2", "TPU v5 lite"),
        ("tpu-v5e", "v5e:1x2", "TPU v5 lite"),
        ("tpu-v5p", "v5p:2x2x1", "TPU v5"),
        ("tpu-v6e", "v6e:2x4", "TPU v6 lite"),
    ],
)
def test_tpu_topology_strings(platform, topology, devices_kind):
    device, name = tpu_device(platform, topology)
    assert name == topology and device.device_kind == devices_kind


@needs_libtpu
def test_tpu_bad_topologies_say_what_works():
    with pytest.raises(ValueError, match="describes 'TPU v6 lite' chips, not tpu-v5e"):
        compile_xla(block, SPECS, "v5e", topology="v6e:1x1")
    with pytest.raises(ValueError, match="Invalid TPU external name"):
        tpu_device("v5e", "v5litepod:2x2")
    with pytest.raises(ValueError, match="not a TPU topology string"):
        tpu_device("v5e", "2x2")


def test_missing_or_wrong_libtpu_names_the_package(monkeypatch):
    from irkit.targets import xla_platform as xp

    real = xp.dist_version
    monkeypatch.setattr(xp, "dist_version", lambda n: None if n == "libtpu" else real(n))
    with pytest.raises(XlaUnavailable, match=r"pip install 'libtpu==0\.0\.42\.\*'"):
        tpu_device("v5e")
    monkeypatch.setattr(xp, "dist_version", lambda n: "0.0.40" if n == "libtpu" else real(n))
    if importlib.util.find_spec("libtpu") is not None:
        with pytest.raises(XlaUnavailable, match=r"libtpu 0\.0\.40 does not match jax"):
            tpu_device("v5e")


# ---- GPU ---------------------------------------------------------------------------------


def test_gpu_compiles_deviceless_or_says_why():
    try:
        a = compile_xla(block, SPECS, "xla-gpu")
    except XlaUnavailable as e:
        msg = str(e)
        assert "\n" not in msg
        assert "no GPU backend" in msg and f"jax-cuda13-pjrt=={jax.__version__}" in msg
        return
    kernels = a.kernels()
    assert a.platform == "gpu" and kernels
    if a.deviceless:
        assert a.device_kind == "NVIDIA H100 80GB HBM3"
        assert any(k.backend_kind and "triton" in k.backend_kind for k in kernels)
    else:
        inputs = random_inputs(4)
        np.testing.assert_allclose(a.run(*inputs), block_numpy(*inputs), rtol=1e-2, atol=1e-2)


def test_gpu_unknown_target():
    with pytest.raises(ValueError, match="unknown GPU target 'b200'"):
        compile_xla(block, SPECS, "gpu", topology="b200")


# ---- names, scopes, parsing --------------------------------------------------------------


def test_platform_names():
    assert canonical_platform("xla-tpu-v5e") == canonical_platform("v5e") == "tpu-v5e"
    assert canonical_platform("XLA-CPU") == "cpu"
    assert canonical_platform("cuda") == "gpu"
    with pytest.raises(ValueError, match="unknown XLA platform 'tpu-v3'"):
        canonical_platform("tpu-v3")
    with pytest.raises(ValueError, match="takes no topology"):
        compile_xla(block, SPECS, "cpu", topology="v5e:1x1")


def test_ir_scope_round_trips_through_escaping():
    name = ir_scope("ik.matmul", "src/a@b[1].py:7", id="%3")
    assert "@" not in name and "/" not in name
    (scope,) = parse_ir_scopes(f"jit(f)/{name}/dot_general")
    assert scope == IrScope("ik.matmul", "%3", "src/a@b[1].py:7")
    assert parse_ir_scopes("jit(f)/outer/ik.softmax[m.py:1]/ik.exp[m.py:2]/exp") == (
        IrScope("ik.softmax", None, "m.py:1"),
        IrScope("ik.exp", None, "m.py:2"),
    )
    # Older JAX printed primitive parameters in brackets; an undotted name is never an IR op.
    assert parse_ir_scopes("jit(f)/transpose[permutation=(1, 0)]") == ()
    with pytest.raises(ValueError, match="dialect-qualified"):
        ir_scope("matmul", "x.py:1")


def test_at_sign_in_a_named_scope_is_cut_by_xla():
    """Why ir_scope escapes '@': XLA keeps only what precedes it (TensorFlow's op@function)."""

    def f(x):
        with jax.named_scope("ik.tanh@model.py:9"):
            return jnp.tanh(x) * 2.0

    hlo = compile_xla(f, [jax.ShapeDtypeStruct((8, 128), jnp.float32)], "cpu").hlo
    assert 'op_name="jit(f)/ik.tanh"' in hlo
    assert "model.py:9" not in hlo


HAND_WRITTEN_HLO = """\
HloModule m, is_scheduled=true

FileNames
1 "model.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=42 end_line=42 column=1 end_column=5}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%inner (p: bf16[16,128]) -> bf16[16,128] {
  ROOT %p = bf16[16,128]{1,0:T(8,128)(2,1)} parameter(0)
}

%add_region (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add = f32[] add(%a, %b)
}

%fused_computation (param_0: bf16[16,128]) -> (f32[16], f32[16,128]) {
  %param_0 = bf16[16,128]{1,0:T(8,128)(2,1)} parameter(0)
  %fusion.9 = bf16[16,128]{1,0:T(8,128)(2,1)} fusion(%param_0), kind=kLoop, calls=%inner
  %convert = f32[16,128]{1,0:T(8,128)} convert(%fusion.9), metadata={op_name="jit(f)/ik.cast[model.py:41]/convert_element_type"}
  %zero = f32[] constant(0)
  %sum = f32[16]{0:T(128)S(1)} reduce(%convert, %zero), dimensions={1}, to_apply=%add_region, metadata={op_name="jit(f)/ik.sum[model.py:42]/reduce_sum" stack_frame_id=1}
  ROOT %t = (f32[16]{0:T(128)S(1)}, f32[16,128]{1,0:T(8,128)}) tuple(%sum, %convert)
}

ENTRY %main (x: bf16[16,128]) -> (f32[16], f32[16,128]) {
  %x = bf16[16,128]{1,0:T(8,128)(2,1)} parameter(0), metadata={op_name="x"}
  %fusion = (f32[16]{0:T(128)S(1)}, f32[16,128]{1,0:T(8,128)}) fusion(%x), kind=kInput, calls=%fused_computation, metadata={op_name="jit(f)/ik.sum[model.py:42]/reduce_sum"}, backend_config={"window_config":{"estimated_cycles":"77"}}
  %gte = f32[16,128]{1,0:T(8,128)} get-tuple-element(%fusion), index=1
  %cc = f32[16,128]{1,0:T(8,128)} custom-call(%gte), custom_call_target="tpu_custom_call", frontend_attributes={kernel_metadata={}}, metadata={op_name="jit(f)/ik.matmul[model.py:50]/pallas_call"}
  ROOT %out = (f32[16]{0:T(128)S(1)}, f32[16,128]{1,0:T(8,128)}) tuple(%fusion, %cc)
}
"""


def test_hlo_kernels_reads_a_hand_written_module():
    fusion, call = hlo_kernels(HAND_WRITTEN_HLO)
    assert (fusion.name, fusion.kind, fusion.computation) == (
        "fusion",
        "kInput",
        "fused_computation",
    )
    assert fusion.ops == (
        "convert",
        "reduce",
    )  # nested kLoop fusion expanded; reducer not a kernel op
    assert [str(s) for s in fusion.outputs] == [
        "f32[16]{0:T(128)S(1)}",
        "f32[16,128]{1,0:T(8,128)}",
    ]
    assert fusion.outputs[0].memory_space == 1
    assert fusion.operands[0].tiles == ((8, 128), (2, 1)) and fusion.operands[0].dtype == "bf16"
    assert [str(s) for s in fusion.ir_ops] == ["ik.sum[model.py:42]", "ik.cast[model.py:41]"]
    assert fusion.source == ("model.py:42",)
    assert fusion.estimated_cycles == 77
    assert (call.kind, call.backend_kind, call.ops) == (
        "custom-call",
        "tpu_custom_call",
        ("custom-call",),
    )
    assert call.op_names == ("jit(f)/ik.matmul[model.py:50]/pallas_call",)
    table = format_kernels([fusion, call])
    assert "kInput" in table and "ik.matmul[model.py:50]" in table
    with pytest.raises(ValueError, match="no ENTRY"):
        hlo_kernels("HloModule empty\n")


# ---- Pallas ------------------------------------------------------------------------------


def test_pallas_matmul_interpreted_on_cpu_matches_numpy():
    from irkit.targets.xla_pallas import pallas_matmul

    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 256)).astype(np.float32)
    b = rng.standard_normal((256, 256)).astype(np.float32)
    fn = jax.jit(functools.partial(pallas_matmul, bm=64, bn=128, bk=128, interpret=True))
    np.testing.assert_allclose(np.asarray(fn(a, b)), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_pallas_blocks_are_checked():
    from irkit.targets.xla_pallas import check_blocks

    with pytest.raises(ValueError, match="does not divide K=384"):
        check_blocks(256, 512, 384, 128, 128, 256)
    with pytest.raises(ValueError, match="bm=8 must be a multiple of 16"):
        check_blocks(256, 512, 384, 8, 128, 128, sublane=16)
    check_blocks(256, 512, 384, 256, 512, 384)


@needs_libtpu
@pytest.mark.parametrize("platform", TPUS)
def test_pallas_matmul_compiles_for_tpu_as_a_mosaic_custom_call(platform):
    from irkit.targets.xla_pallas import pallas_matmul

    m, k, n = 256, 384, 512

    def mm(a, b):
        with jax.named_scope(ir_scope("ik.matmul", "model.py:7")):
            return pallas_matmul(a, b, bm=128, bn=256, bk=128)

    specs = [jax.ShapeDtypeStruct((m, k), jnp.bfloat16), jax.ShapeDtypeStruct((k, n), jnp.bfloat16)]
    art = compile_xla(mm, specs, platform)
    (kernel,) = art.kernels()
    assert (kernel.kind, kernel.backend_kind) == ("custom-call", "tpu_custom_call")
    assert str(kernel.outputs[0]) == "bf16[256,512]{1,0:T(8,128)(2,1)}"
    assert [str(s) for s in kernel.ir_ops] == ["ik.matmul[model.py:7]"]
    assert art.flops == 2 * m * k * n  # from the kernel's CostEstimate
    assert art.memory["generated_code"] > 0


@needs_libtpu
def test_mosaic_errors_arrive_as_compile_errors():
    from irkit.targets.xla_pallas import pallas_matmul

    # One 2048x2048 f32 b-block is 16 MiB, double-buffered 32 MiB: over Mosaic's default scoped
    # VMEM limit (16 MiB). A thin M keeps the kernel cheap to compile (Mosaic's compile time
    # grows with the block's work: whole 2048^3 blocks take over a minute to be rejected).
    specs = [
        jax.ShapeDtypeStruct((8, 2048), jnp.float32),
        jax.ShapeDtypeStruct((2048, 2048), jnp.float32),
    ]
    with pytest.raises(
        XlaCompileError, match=r"xla-tpu-v5e \(v5e:1x1\): .*CompileTimeScopedVmemOom"
    ):
        compile_xla(functools.partial(pallas_matmul, bm=8, bn=2048, bk=2048), specs, "v5e")
