"""The ``xla-cpu`` target against the float64 reference interpreter.

Every op of the registry is lowered alone (the op-kernel cases of
``test_op_kernels.py`` plus the edge cases below: integer semantics, half types,
masked attention rows, regions), then whole models: the synthetic GPT-2-style
decoder and the example models imported through the torch and JAX frontends.
Results must match the oracle under ``module_tolerance`` and have the IR's dtypes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # see targets/xla.py
pytest.importorskip("jax")

from irkit.targets.registry import get_target

from irkit.check import compare_all, module_tolerance
from irkit.interp import random_inputs, run
from irkit.ir import OPS, DType, Graph, Module, TensorType, new_function, verify
from irkit.ir.builder import Builder
from irkit.ir.core import Dense
from irkit.testing.blocks import gpt2_style_module

sys.path.insert(0, str(Path(__file__).parent))
from test_op_kernels import CASES, _single_op_module

ROOT = Path(__file__).resolve().parents[2]
rng = np.random.default_rng(2024)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def bf16(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(DType.bf16.np)


def ints(*shape: int, lo: int = -9, hi: int = 10, dtype: Any = np.int32) -> np.ndarray:
    x = rng.integers(lo, hi, size=shape).astype(dtype)
    return np.where(x == 0, 3, x).astype(dtype)


def bools(*shape: int) -> np.ndarray:
    return rng.random(shape) < 0.6


# (op, inputs, attrs): edge cases the torch-checked table does not reach.
EXTRA: list[tuple[str, list[np.ndarray], dict[str, Any]]] = [
    ("ik.div", [ints(3, 4), ints(4)], {}),  # integer division truncates
    ("ik.rem", [ints(3, 4), ints(3, 1)], {}),  # C remainder: sign of dividend
    ("ik.neg", [ints(2, 5, dtype=np.int64)], {}),
    ("ik.abs", [ints(2, 5)], {}),
    ("ik.sign", [ints(2, 5)], {}),
    ("ik.relu", [ints(2, 5)], {}),
    ("ik.max", [ints(2, 5), ints(5)], {}),
    ("ik.pow", [ints(3, lo=1, hi=5), ints(3, lo=0, hi=4)], {}),
    ("ik.mul", [bf16(4, 8), bf16(8)], {}),
    ("ik.exp", [bf16(4, 8)], {}),
    ("ik.gelu", [bf16(4, 8)], {"approximate": "tanh"}),
    ("ik.cast", [f32(3, 4) * 7], {"to": DType.i64}),  # negatives truncate toward zero
    ("ik.cast", [f32(3, 4)], {"to": DType.bool}),
    ("ik.cast", [bools(3, 4)], {"to": DType.f32}),
    ("ik.cast", [ints(3, 4)], {"to": DType.bf16}),
    ("ik.bitcast", [f32(3, 4)], {"dtype": DType.i32}),
    ("ik.bitcast", [f32(3, 2)], {"dtype": DType.ui8}),
    ("ik.reduce_sum", [ints(3, 4)], {"axes": (), "keepdims": False}),
    ("ik.reduce_mean", [ints(3, 4)], {"axes": (0,), "keepdims": False}),
    ("ik.reduce_max", [bf16(2, 3, 4)], {"axes": (-1,), "keepdims": False}),
    ("ik.argmax", [f32(3, 5, 2)], {"axis": -2, "keepdims": True}),
    ("ik.softmax", [bf16(3, 16)], {"axis": 0}),
    ("ik.layer_norm", [f32(2, 3, 8)], {"axis": 1, "eps": 1e-5}),  # no weight/bias, two dims
    ("ik.rms_norm", [bf16(2, 8)], {"axis": -1, "eps": 1e-6}),
    ("ik.matmul", [bf16(3, 16, 8), bf16(8, 4)], {}),
    ("ik.matmul", [ints(2, 3, 5), ints(2, 5, 4)], {}),
    ("ik.contract", [f32(6, 4), f32(5, 6)], {"lhs_contract": (0,), "rhs_contract": (1,)}),
    ("ik.conv2d", [f32(1, 3, 8, 8), f32(4, 3, 2, 2)], {"strides": (2, 2)}),
    ("ik.gather", [f32(6, 3), np.array([[-1, 0], [5, -6]], dtype=np.int64)], {"axis": 0}),
    ("ik.gather", [f32(2, 6, 3), ints(4, lo=0, hi=6)], {"axis": 1}),
    ("ik.pad", [ints(2, 3)], {"pads": (0, 1, 2, 0), "value": 1.0}),
    ("ik.iota", [], {"shape": (2, 5), "axis": 1, "dtype": DType.f32}),
    ("ik.slice", [f32(4, 9)], {"start": (1, 2), "limit": (4, 9)}),
    ("ik.constant", [], {"value": Dense(f32(20, 30))}),  # lifted to a parameter
    ("ik.constant", [], {"value": Dense(ints(2, 3))}),  # inlined
    ("ik.constant", [], {"value": Dense.splat(2.5, (3, 4), DType.bf16)}),
    ("ik.dim_value", [], {"dim": (7,), "dtype": DType.f32}),
]


def _attention_module(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None,
    bias: np.ndarray | None,
    scale: float,
    causal: bool,
) -> tuple[Module, list[np.ndarray]]:
    xs = [q, k, v] + [x for x in (mask, bias) if x is not None]
    f, b = new_function("main", [TensorType(x.shape, DType.from_numpy(x.dtype)) for x in xs])
    args = list(f.args)
    ops = args[:3] + [args[3] if mask is not None else None]
    ops.append(args[-1] if bias is not None else None)
    b.ret(b.attention(*ops, scale=scale, causal=causal))
    m = Module([f])
    verify(m)
    return m, xs


def _check(m: Module, inputs: list[np.ndarray], what: str) -> None:
    target = get_target("xla-cpu")
    art = target.lower(m)
    got = target.run(art, inputs)
    want = run(m, inputs, float64=True)
    rep = compare_all(got, want, module_tolerance(m))
    assert rep.ok, f"{what}: {rep.first_failure().describe()}"  # type: ignore[union-attr]
    for g, r in zip(got, m.entry.outputs):
        assert g.dtype == r.type.dtype.np, f"{what}: output dtype {g.dtype}, IR says {r.type.dtype}"


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_case_matches_oracle(i: int) -> None:
    name, inputs, attrs, _ = CASES[i]
    _check(_single_op_module(name, inputs, attrs), inputs, name)


@pytest.mark.parametrize("i", range(len(EXTRA)), ids=[f"{c[0]}-{i}" for i, c in enumerate(EXTRA)])
def test_edge_case_matches_oracle(i: int) -> None:
    name, inputs, attrs = EXTRA[i]
    _check(_single_op_module(name, inputs, attrs), inputs, name)


# Batch 0: row 0 keeps key 0 only, rows 1..3 keep nothing; batch 1 keeps everything.
_FULLY_MASKED = np.ones((2, 1, 4, 4), dtype=bool)
_FULLY_MASKED[0] = False
_FULLY_MASKED[0, 0, 0, 0] = True

ATTENTION = {
    # GQA (4 query heads over 2 KV heads), causal with Sq < Sk (top-left), keep-mask and bias.
    "gqa-causal-mask-bias": (
        f32(2, 4, 5, 8),
        f32(2, 2, 7, 8),
        f32(2, 2, 7, 6),
        bools(2, 1, 5, 7) | np.eye(5, 7, dtype=bool),
        f32(1, 4, 1, 7),
        0.35,
        True,
    ),
    # Rows 1.. of batch 0 have every key masked: zeros, like the reference (never NaN).
    "fully-masked-rows": (
        f32(2, 2, 4, 8),
        f32(2, 2, 4, 8),
        f32(2, 2, 4, 8),
        _FULLY_MASKED,
        None,
        0.5,
        False,
    ),
    "bf16-causal": (bf16(1, 2, 6, 8), bf16(1, 2, 6, 8), bf16(1, 2, 6, 8), None, None, 0.35, True),
    "per-head-mask": (
        f32(1, 4, 3, 4),
        f32(1, 2, 3, 4),
        f32(1, 2, 3, 4),
        bools(1, 4, 3, 3) | np.eye(3, dtype=bool),
        None,
        0.5,
        False,
    ),
}


@pytest.mark.parametrize("key", list(ATTENTION))
def test_attention_matches_oracle(key: str) -> None:
    m, xs = _attention_module(*ATTENTION[key])
    _check(m, xs, key)
    if key == "fully-masked-rows":
        out = get_target("xla-cpu").run_module(m, xs)[0]
        assert np.all(out[0, :, 1:] == 0) and np.all(np.isfinite(out))


def test_softmax_of_a_fully_masked_row_matches_the_reference() -> None:
    x = f32(3, 5)
    x[1] = -np.inf
    m = _single_op_module("ik.softmax", [x], {"axis": -1})
    got = get_target("xla-cpu").run_module(m, [x])[0]
    want = run(m, [x])[0]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[[0, 2]], want[[0, 2]], rtol=1e-5)


def test_fused_region_is_inlined() -> None:
    t = TensorType((3, 4), DType.f32)
    f, b = new_function("main", [t, t])
    body = Graph([t, t])
    bb = Builder.at_end(body)
    bb.create(
        "ik.yield",
        [bb.tanh(bb.add(bb.exp(body.args[0]), body.args[1])), bb.neg(body.args[1])],
        result_types=[],
    )
    y, z = b.fused([f.args[0], f.args[1]], body, "elementwise")
    b.ret(b.mul(y, z))
    m = Module([f])
    verify(m)
    _check(m, [f32(3, 4), f32(3, 4)], "ik.fused")


def test_every_op_is_exercised() -> None:
    covered = {c[0] for c in CASES} | {c[0] for c in EXTRA} | {"ik.attention", "ik.fused"}
    missing = sorted(set(OPS) - covered - {"ik.yield", "func.return"})
    assert not missing, f"ops never lowered through xla-cpu in these tests: {missing}"


def test_gpt2_style_module_matches_oracle() -> None:
    m = gpt2_style_module(layers=2)
    xs = random_inputs(m.entry, seed=3)
    _check(m, xs, "gpt2_style_module")


# ----------------------------------------------------------------------------------------------
# Example models through the torch frontend (examples/models/registry.py)

sys.path.insert(0, str(ROOT))
from examples.models import registry

# torch.export + import costs 15 s or more per model on two cores: CI runs one, a causal decoder
# whose SDPA becomes ik.attention with grouped heads; IRKIT_SLOW=1 runs all 26.
_DEFAULT = ("llama_tiny_sdpa",)


@pytest.mark.parametrize(
    "name",
    [n if n in _DEFAULT else pytest.param(n, marks=pytest.mark.slow) for n in registry.names()],
)
def test_example_model_matches_oracle(name: str) -> None:
    pytest.importorskip("torch")
    from irkit.frontends.torch_export import import_torch_factory
    from irkit.interp import bind_symbols

    model, inputs, dyn = registry.get(name)()
    m = import_torch_factory(model, inputs, dyn)
    xs = [t.numpy() for t in inputs]
    target = get_target("xla-cpu")
    art = target.lower(m, bind_symbols(m.entry, xs))
    got = target.run(art, xs)
    tol = module_tolerance(m)
    oracle = run(m, xs, float64=True)
    rep = compare_all(got, oracle, tol)
    if not rep.ok and not compare_all(run(m, xs), oracle, tol).ok:
        # The float64 oracle is out of reach of any float32 run: T5's relative-position buckets
        # truncate log(distance) to an int, and f32 and f64 round a boundary distance into
        # different buckets (torch agrees with f32 there). Then the interpreter in the model's
        # own dtypes is the reference.
        rep = compare_all(got, run(m, xs), tol)
    assert rep.ok, f"{name}: {rep.first_failure().describe()}"  # type: ignore[union-attr]
    assert all(k.ir_ops for k in art.kernels if "dot" in k.extra["ops"])


def test_example_jax_twin_through_the_jax_frontend() -> None:
    """The JAX frontend's spelling (``ik.contract`` from dot_general, decomposed softmax)."""
    from irkit.frontends.jax import import_jax
    from irkit.interp import bind_symbols

    fn, args = registry.get("llama_tiny_sdpa").jax_factory()
    m = import_jax(fn, args, polymorphic_shapes=["(B, S)"])
    assert any(op.name == "ik.contract" for op in m.entry.walk())
    xs = [np.asarray(a) for a in args]
    target = get_target("xla-cpu")
    got = target.run(target.lower(m, bind_symbols(m.entry, xs)), xs)
    rep = compare_all(got, run(m, xs, float64=True), module_tolerance(m))
    assert rep.ok, rep.first_failure().describe()  # type: ignore[union-attr]
