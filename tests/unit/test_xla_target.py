"""The XLA targets: registration, availability, artifacts, kernel provenance, TPU compiles, Pallas.

Numerics per op and per model are in tests/numeric/test_xla_target_numeric.py. TPU
targets compile ahead of time through libtpu; the gpt2-style module is kept at one
layer so that the four compiles stay within a few seconds each.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re

import pytest

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # see targets/xla.py
pytest.importorskip("jax")

from irkit.targets.base import TargetUnavailable, op_ids
from irkit.targets.registry import get_target, list_targets
from irkit.targets.xla import XlaTarget, kernel_costs
from irkit.targets.xla_lower import XLA_RULES, LoweringError

from irkit.check import compare_all, module_tolerance
from irkit.errors import IrkitError
from irkit.interp import random_inputs, run
from irkit.ir import OPS, DType, Module, TensorType, new_function, verify
from irkit.ir.core import Location
from irkit.testing.blocks import gpt2_style_module

HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None
needs_libtpu = pytest.mark.skipif(
    not HAS_LIBTPU, reason="libtpu not installed (pip install irkit[tpu])"
)

XLA_TARGETS = {
    "xla-cpu": "host-cpu",
    "xla-gpu": "h100",
    "xla-tpu-v4": "tpu-v4",
    "xla-tpu-v5e": "tpu-v5e",
    "xla-tpu-v5p": "tpu-v5p",
    "xla-tpu-v6e": "tpu-v6e",
}


@pytest.fixture(scope="module")
def gpt2() -> Module:
    return gpt2_style_module(layers=1)


@pytest.fixture(scope="module")
def gpt2_cpu(gpt2: Module):
    return get_target("xla-cpu").lower(gpt2)


def test_every_registry_op_has_a_lowering_rule() -> None:
    missing = sorted(set(OPS) - XLA_RULES.names - {"func.return", "ik.yield"})
    assert not missing, f"ops without an XLA lowering rule: {missing}"
    for name in ("xla-cpu", "xla-gpu", "xla-tpu-v5e"):
        t = get_target(name)
        assert t.lowering_table is XLA_RULES and all(t.supports(op) for op in XLA_RULES.names)


def test_targets_are_registered_with_their_hardware_descriptions() -> None:
    names = {t.name: t for t in list_targets()}
    for name, spec in XLA_TARGETS.items():
        assert name in names, f"{name} is not registered"
        t = get_target(name)
        assert isinstance(t, XlaTarget) and t.name == name and t.spec == spec and t.summary


def test_availability_says_what_each_target_does_here() -> None:
    cpu = get_target("xla-cpu").availability()
    assert cpu.can_compile and cpu.can_run
    gpu = get_target("xla-gpu").availability()
    assert gpu.can_run or gpu.reason, "xla-gpu must say why it cannot run"
    if not gpu.can_compile:
        assert "pip install" in gpu.reason


@needs_libtpu
def test_tpu_targets_compile_but_do_not_run() -> None:
    for v in ("v4", "v5e", "v5p", "v6e"):
        av = get_target(f"xla-tpu-{v}").availability()
        assert av.can_compile and not av.can_run, av
        assert "no TPU attached" in av.reason and f"{v}:" in av.reason


def test_cpu_artifact_holds_what_xla_produced(gpt2_cpu) -> None:
    art = gpt2_cpu
    assert set(art.files) == {
        "stablehlo.mlir",
        "hlo.txt",
        "cost.json",
        "memory.json",
        "kernels.txt",
    }
    assert "stablehlo.dot_general" in art.files["stablehlo.mlir"]
    assert "ENTRY" in art.files["hlo.txt"]
    cost = json.loads(art.files["cost.json"])
    assert cost["flops"] > 0 and cost == art.info["cost_analysis"]
    assert json.loads(art.files["memory.json"])["argument"] > 0
    assert art.info["device_kind"] == "cpu" and not art.info["deviceless"]
    assert art.compile_seconds == pytest.approx(
        art.info["lower_seconds"] + art.info["compile_seconds"]
    )
    assert art.info["compile_seconds"] > 0 and art.info["lower_seconds"] > 0
    assert art.bindings == {"B": 2, "S": 16} and art.input_shapes == [(2, 16)]
    assert art.runner is not None


def test_weights_are_parameters_not_literals(gpt2: Module, gpt2_cpu) -> None:
    """Big constants travel as arguments, so the StableHLO stays small."""
    w = gpt2_cpu.info["weights"]
    n_big = sum(
        1 for op in gpt2.entry.walk() if op.name == "ik.constant" and op.attrs["value"].size > 64
    )
    assert 0 < w["count"] <= n_big and "wte.weight" in w["names"]
    assert len(gpt2_cpu.files["stablehlo.mlir"]) < 200_000
    assert not re.search(r'dense<"0x[0-9A-F]{600}', gpt2_cpu.files["stablehlo.mlir"])


def test_kernels_map_back_to_ir_ops_and_locations(gpt2: Module, gpt2_cpu) -> None:
    ids = set(op_ids(gpt2).values())
    kernels = gpt2_cpu.kernels
    assert kernels
    mapped = [k for k in kernels if k.ir_ops]
    # XLA's own helpers (a reduce split into reduce-window + reduce) may carry no metadata.
    assert len(mapped) >= 0.8 * len(kernels), [k.name for k in kernels if not k.ir_ops]
    for k in mapped:
        assert set(k.ir_ops) <= ids, k.ir_ops
        assert k.locations and all("gpt2_block.py" in loc for loc in k.locations), k
        assert k.file == "hlo.txt"
    matmuls = {i for i in ids if i.startswith("ik.matmul#")}
    assert matmuls <= {i for k in kernels for i in k.ir_ops}, "every matmul should own a kernel"
    dot_kernels = [k for k in kernels if "dot" in k.extra["ops"]]
    assert dot_kernels and all(
        any(i.startswith("ik.matmul#") for i in k.ir_ops) for k in dot_kernels
    )
    assert "ik.matmul#" in gpt2_cpu.files["kernels.txt"]


def test_kernel_flops_and_bytes_add_up_to_xla_cost(gpt2_cpu) -> None:
    total = sum(k.flops or 0.0 for k in gpt2_cpu.kernels)
    xla = gpt2_cpu.info["cost_analysis"]["flops"]
    assert abs(total - xla) <= 0.05 * xla, (total, xla)
    assert all(k.bytes and k.bytes > 0 for k in gpt2_cpu.kernels)
    dot = max((k for k in gpt2_cpu.kernels if "dot" in k.extra["ops"]), key=lambda k: k.flops or 0)
    # The biggest dots are the MLP's: 2 * (B*S) * hidden * 4 hidden.
    assert dot.flops == pytest.approx(2 * 32 * 64 * 256)


def test_kernel_costs_of_a_hand_written_dot() -> None:
    hlo = """HloModule m, entry_computation_layout={(f32[8,16]{1,0}, f32[16,4]{1,0})->f32[8,4]{1,0}}

ENTRY %main (a: f32[8,16], b: f32[16,4]) -> f32[8,4] {
  %a = f32[8,16]{1,0} parameter(0)
  %b = f32[16,4]{1,0} parameter(1)
  %dot = f32[8,4]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = f32[8,4]{1,0} tanh(%dot)
}
"""
    costs = kernel_costs(hlo)
    assert costs["dot"] == (2 * 8 * 4 * 16, 4 * (8 * 16 + 16 * 4 + 8 * 4), 0.0)
    assert costs["t"] == (0.0, 4 * 2 * 32, 32.0)


def test_runs_match_the_oracle_and_reject_other_shapes(gpt2: Module, gpt2_cpu) -> None:
    t = get_target("xla-cpu")
    xs = random_inputs(gpt2.entry, seed=11)
    got = t.run(gpt2_cpu, xs)
    assert compare_all(got, run(gpt2, xs, float64=True), module_tolerance(gpt2)).ok
    with pytest.raises(TargetUnavailable, match="lower again"):
        t.run(gpt2_cpu, random_inputs(gpt2.entry, seed=1, bindings={"B": 3, "S": 8}))


def test_dynamic_dims_lower_at_each_binding(gpt2: Module) -> None:
    t = get_target("xla-cpu")
    for b, s in ((1, 8), (3, 24)):  # (2, 16) is the fixture's
        art = t.lower(gpt2, {"B": b, "S": s})
        assert art.bindings == {"B": b, "S": s} and art.input_shapes == [(b, s)]
        assert f"s64[{b},{s}]" in art.files["hlo.txt"]
        xs = random_inputs(gpt2.entry, seed=b, bindings={"B": b, "S": s})
        (out,) = t.run(art, xs)
        assert out.shape == (b, s, 128)
        assert compare_all([out], run(gpt2, xs, float64=True), module_tolerance(gpt2)).ok


def test_missing_binding_names_the_symbol() -> None:
    from irkit.targets.xla_lower import LowerOptions, lower_to_jax

    from irkit.ir.types import SymDim

    f, b = new_function("main", [TensorType((SymDim.symbol("N"), 4), DType.f32)])
    b.ret(b.exp(f.args[0]))
    m = Module([f])
    with pytest.raises(LoweringError, match="symbol N"):
        lower_to_jax(m, {}, LowerOptions())
    lf = get_target("xla-cpu").lower_jax(m, {"N": 3})
    assert lf.input_specs[0].shape == (3, 4)


def test_lowering_errors_are_user_errors() -> None:
    assert issubclass(LoweringError, IrkitError)
    with pytest.raises(ValueError, match="precision"):
        XlaTarget("cpu", "host-cpu", precision="fast")


def test_scopes_carry_locations_with_special_characters() -> None:
    """A location with '/' and '@' (a torch node name) survives into the HLO and back."""
    f, b = new_function("main", [TensorType((8, 16), DType.f32), TensorType((16, 8), DType.f32)])
    b.loc = Location("models/my@model.py", 7, 0)
    b.ret(b.tanh(b.matmul(f.args[0], f.args[1])))
    m = Module([f])
    verify(m)
    art = get_target("xla-cpu").lower(m)
    locs = {loc for k in art.kernels for loc in k.locations}
    assert "models/my@model.py:7" in locs
    assert {"ik.matmul#0", "ik.tanh#1"} <= {i for k in art.kernels for i in k.ir_ops}


def test_precision_option_reaches_the_hlo() -> None:
    f, b = new_function("main", [TensorType((8, 16), DType.f32), TensorType((16, 8), DType.f32)])
    b.ret(b.matmul(f.args[0], f.args[1]))
    m = Module([f])
    t = get_target("xla-cpu").with_options(precision="highest")
    assert t.name == "xla-cpu"
    assert "HIGHEST" in t.lower(m).files["stablehlo.mlir"]


# ----------------------------------------------------------------------------------------------
# TPU ahead of time


@pytest.fixture(scope="module")
def gpt2_small_layers() -> Module:
    return gpt2_style_module(layers=1)


def _check_tpu_artifact(art, m: Module, version: str) -> None:
    ids = set(op_ids(m).values())
    assert art.runner is None and art.info["deviceless"]
    assert art.info["device_kind"].startswith("TPU")
    hlo = art.files["hlo.txt"]
    # TPU tiled layouts: 2-D f32 arrays in (8, 128) tiles of sublanes x lanes.
    assert re.search(r"\{1,0:T\(8,128\)", hlo), "no (8,128)-tiled layout in the TPU HLO"
    compute = [
        k
        for k in art.kernels
        if k.kind in ("kLoop", "kInput", "kOutput", "kCustom", "convolution")
        or "convolution" in k.extra["ops"]
    ]
    assert compute
    unmapped = [k.name for k in compute if not k.ir_ops]
    assert not unmapped, f"{version}: compute kernels without IR ops: {unmapped}"
    for k in art.kernels:
        assert set(k.ir_ops) <= ids
    # On TPU a dot is a convolution; every matmul of the module owns one.
    conv_ops = {i for k in art.kernels if "convolution" in k.extra["ops"] for i in k.ir_ops}
    assert {i for i in ids if i.startswith("ik.matmul#")} <= conv_ops
    # XLA's copies of weights (prefetch into VMEM) map to the constants they copy; copies of
    # small inlined constants carry no metadata.
    copies = [k for k in art.kernels if k.kind == "copy-start"]
    assert all(i.startswith("ik.constant#") for k in copies for i in k.ir_ops)
    assert sum(1 for k in copies if k.ir_ops) >= 4
    assert art.info["cost_analysis"].get("flops", 0) > 0


@needs_libtpu
@pytest.mark.parametrize(
    "version", ["v5e", "v4", "v6e", pytest.param("v5p", marks=pytest.mark.slow)]
)
def test_tpu_compiles_gpt2_style_module(version: str, gpt2_small_layers: Module) -> None:
    t = get_target(f"xla-tpu-{version}")
    art = t.lower(gpt2_small_layers)
    _check_tpu_artifact(art, gpt2_small_layers, version)
    with pytest.raises(TargetUnavailable, match="cannot run here"):
        t.run(art, random_inputs(gpt2_small_layers.entry, seed=0))


# ----------------------------------------------------------------------------------------------
# Pallas matmuls for tiled ops


def _tiled_matmul_module(
    m: int,
    k: int,
    n: int,
    tile: tuple[int, int, int],
    batch: int | None = None,
    dtype: DType = DType.f32,
) -> Module:
    lhs = (batch, m, k) if batch else (m, k)
    f, b = new_function("main", [TensorType(lhs, dtype), TensorType((k, n), dtype)])
    b.ret(b.gelu(b.matmul(f.args[0], f.args[1], tile=tile)))
    mod = Module([f])
    verify(mod)
    return mod


@pytest.mark.parametrize("batch", [None, 2])
def test_pallas_matmul_matches_oracle_in_interpret_mode(batch: int | None) -> None:
    m = _tiled_matmul_module(64, 256, 256, (32, 256, 128), batch=batch)  # grid (2, 1, 2)
    t = get_target("xla-cpu").with_options(pallas=True)
    art = t.lower(m)
    assert art.info["notes"] == []
    # Interpret mode runs the kernel's grid as an HLO while loop, under the kernel's name.
    assert "stablehlo.while" in art.files["stablehlo.mlir"]
    assert "ik_matmul_32x256x128" in art.files["hlo.txt"]
    xs = random_inputs(m.entry, seed=5)
    assert compare_all(t.run(art, xs), run(m, xs, float64=True), module_tolerance(m)).ok


def test_tile_that_does_not_fit_keeps_the_plain_dot() -> None:
    m = _tiled_matmul_module(24, 96, 40, (16, 128, 128))
    t = get_target("xla-cpu").with_options(pallas=True)
    art = t.lower(m)
    assert len(art.info["notes"]) == 1 and "kept the plain dot" in art.info["notes"][0]
    assert "ik.matmul#0" in art.info["notes"][0]
    xs = random_inputs(m.entry, seed=6)
    assert compare_all(t.run(art, xs), run(m, xs, float64=True), module_tolerance(m)).ok


def test_without_the_option_tiles_are_ignored() -> None:
    m = _tiled_matmul_module(64, 256, 256, (32, 128, 128))
    art = get_target("xla-cpu").lower(m)
    assert "ik_matmul" not in art.files["hlo.txt"] and art.info["notes"] == []


@needs_libtpu
def test_pallas_matmul_compiles_for_tpu_v5e() -> None:
    m = _tiled_matmul_module(256, 512, 256, (128, 128, 256), dtype=DType.bf16)
    art = get_target("xla-tpu-v5e").with_options(pallas=True).lower(m)
    assert art.info["notes"] == []
    custom = [k for k in art.kernels if k.extra.get("backend_kind") == "tpu_custom_call"]
    assert len(custom) == 1 and custom[0].ir_ops == ["ik.matmul#0"]
    assert "tpu_custom_call" in art.files["hlo.txt"]
