"""tvm-llvm runs and matches the oracle; tvm-cuda produces CUDA source and PTX without a GPU."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from irkit.check import compare_all, module_tolerance
from irkit.interp import random_inputs, run
from irkit.passmanager import run_pipeline
from irkit.targets.registry import get_target
from irkit.testing.blocks import gpt2_style_module

sys.path.insert(0, str(Path(__file__).parents[1] / "numeric"))
import test_op_kernels as K  # noqa: E402

PIPE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"
# A representative subset runs by default (each TVM compile takes seconds); IRKIT_SLOW=1 runs every op.
DEFAULT = {"ik.matmul", "ik.attention", "ik.layer_norm", "ik.softmax", "ik.gelu", "ik.gather", "ik.conv2d",
           "ik.contract", "ik.split", "ik.where", "ik.cast", "ik.reduce_mean"}


@pytest.mark.parametrize("i", range(len(K.CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(K.CASES)])
def test_op_on_tvm_llvm(i: int, request) -> None:
    name, inputs, attrs, _ = K.CASES[i]
    if name not in DEFAULT:
        request.applymarker(pytest.mark.slow)
        import os

        if not os.environ.get("IRKIT_SLOW"):
            pytest.skip("slow: run with IRKIT_SLOW=1")
    t = get_target("tvm-llvm")
    if not t.supports(name):
        pytest.skip(f"{name} has no tvm rule (not claimed by irkit coverage)")
    m = K._single_op_module(name, inputs, attrs)
    got = t.run(t.lower(m), inputs)
    rep = compare_all(got, run(m, inputs, float64=True), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]


@pytest.mark.parametrize("pipeline", ["", PIPE])
def test_gpt2_block_on_tvm_llvm(pipeline: str) -> None:
    m = gpt2_style_module(layers=1, hidden=32, heads=2, vocab=64, max_pos=32)
    if pipeline:
        run_pipeline(m, pipeline)
    xs = random_inputs(m.entry, 5, {"B": 2, "S": 16})
    t = get_target("tvm-llvm")
    art = t.lower(m, {"B": 2, "S": 16})
    rep = compare_all(t.run(art, xs), run(m, xs, float64=True), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]
    scheduled = [k for k in art.kernels if k.kind == "scheduled TensorIR"]
    assert scheduled and all(k.ir_ops for k in scheduled)
    if pipeline:
        assert any(any(o.startswith("ik.attention") for o in k.ir_ops) for k in scheduled)


def test_tvm_cuda_source_and_ptx() -> None:
    m = gpt2_style_module(layers=1, hidden=32, heads=2, vocab=64, max_pos=32)
    run_pipeline(m, PIPE)
    t = get_target("tvm-cuda")
    assert t.availability().can_compile
    art = t.lower(m, {"B": 1, "S": 16})
    src = art.files["kernels.cu"]
    assert "__global__" in src and "blockIdx.x" in src
    if shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists():
        assert ".entry" in art.files["kernels.ptx"]
    assert any(any(o.startswith("ik.attention") for o in k.ir_ops) for k in art.kernels)



def test_gelu_new_spelling_is_vectorised_not_libm() -> None:
    """GPT-2's ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x**3)))``: ``pow(x, 3)`` becomes
    multiplies and ``tanh`` the polynomial, so the LLVM IR calls neither ``powf`` nor ``tanhf``;
    NaN and the saturated tails still match the float64 oracle."""
    import math

    from irkit.ir.builder import new_function
    from irkit.ir.core import Module
    from irkit.ir.types import DType, TensorType

    f, b = new_function("main", [TensorType((64, 96), DType.f32)])
    (x,) = f.args
    x3 = b.pow(x, b.scalar(3.0, DType.f32))
    inner = b.mul(b.scalar(math.sqrt(2 / math.pi), DType.f32), b.add(x, b.mul(b.scalar(0.044715, DType.f32), x3)))
    y = b.mul(b.mul(b.scalar(0.5, DType.f32), x), b.add(b.scalar(1.0, DType.f32), b.tanh(inner)))
    b.ret(y)
    m = Module([f])
    xs = [(np.random.default_rng(3).standard_normal((64, 96)) * 4).astype(np.float32)]
    xs[0][0, :4] = [np.nan, 30.0, -30.0, 1e-7]
    t = get_target("tvm-llvm")
    art = t.lower(m)
    rep = compare_all(t.run(art, xs), run(m, xs, float64=True), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]
    ll = art.files.get("kernels.ll", "")
    assert ll and "@powf" not in ll and "@tanhf" not in ll


def test_gather_with_a_scalar_index_drops_the_axis() -> None:
    """ViT's class token through ONNX (TorchScript): Gather with a rank-0 index."""
    from irkit.text import parse_module

    t = get_target("tvm-llvm")
    if not t.availability().can_run:
        pytest.skip(t.availability().reason)
    m = parse_module('''
"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<2x17x8xf32>):
    %i = "ik.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %0 = "ik.gather"(%x, %i) {axis = 1 : i64} : (tensor<2x17x8xf32>, tensor<i64>) -> tensor<2x8xf32>
    "func.return"(%0) : (tensor<2x8xf32>) -> ()
  }) {function_type = (tensor<2x17x8xf32>) -> tensor<2x8xf32>, sym_name = "main"} : () -> ()
}) : () -> ()
''')
    xs = random_inputs(m.entry, seed=0)
    got = t.run(t.lower(m, {}), xs)[0]
    np.testing.assert_array_equal(got, run(m, xs)[0])


def test_epilogue_through_a_row_regrouping_reshape_is_one_kernel() -> None:
    """GPT-2's MLP views ``x @ W + b`` as [B, S, N] before the GELU and back after: the bias and GELU
    still go into the matmul kernel, and the reshapes around it are views, not copy kernels."""
    from irkit.ir.builder import new_function
    from irkit.ir.core import Module
    from irkit.ir.types import DType, TensorType

    rng = np.random.default_rng(4)
    f, b = new_function("main", [TensorType((16, 32), DType.f32)])
    (x,) = f.args
    w1 = b.constant((rng.standard_normal((32, 64)) * 0.2).astype(np.float32))
    b1 = b.constant(rng.standard_normal(64).astype(np.float32))
    w2 = b.constant((rng.standard_normal((64, 32)) * 0.2).astype(np.float32))
    h = b.reshape(b.add(b.matmul(x, w1), b1), shape=(2, 8, 64))
    g = b.reshape(b.gelu(h, approximate="tanh"), shape=(16, 64))
    b.ret(b.matmul(g, w2))
    m = Module([f])
    run_pipeline(m, PIPE)
    xs = random_inputs(m.entry, 7)
    t = get_target("tvm-llvm")
    art = t.lower(m)
    rep = compare_all(t.run(art, xs), run(m, xs, float64=True), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]
    assert any(k.kind == "scheduled TensorIR" and any(o.startswith("ik.gelu") for o in k.ir_ops)
               for k in art.kernels)
    called = [name for name, _ in art.profiler(xs)]
    assert len(called) == 2 and not any("reshape" in n or "gelu" in n for n in called), called


@pytest.mark.parametrize("dtype", ["f32", "i32"])
def test_rem_is_truncated_like_fmod(dtype: str) -> None:
    """``ik.rem`` is ``np.fmod`` (the sign of the dividend), not Python's ``%``; the target used to
    call ``topi.fmod``, which TVM 0.27 does not have (found by the slow op matrix)."""
    from irkit.ir.builder import new_function
    from irkit.ir.core import Module
    from irkit.ir.types import DType, TensorType

    dt = DType.parse(dtype)
    f, b = new_function("main", [TensorType((4, 6), dt), TensorType((4, 6), dt)])
    b.ret(b.rem(*f.args))
    m = Module([f])
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((4, 6)) * 20).astype(dt.np)
    y = rng.choice(np.array([-7, -3, 2, 5], dtype=dt.np), size=(4, 6))
    t = get_target("tvm-llvm")
    got = t.run(t.lower(m), [x, y])[0]
    np.testing.assert_allclose(got, np.fmod(x, y), rtol=1e-6)
    assert (np.sign(got[got != 0]) == np.sign(x[got != 0])).all()


# ---------------------------------------------------------------------------------------------
# The rule table, and regressions for the silent wrong answers found by the ONNX node suite


def _one_op(build, *types):
    from irkit.ir.builder import new_function
    from irkit.ir.core import Module

    f, b = new_function("main", list(types))
    b.ret(*build(b, *f.args))
    return Module([f])


def _matches_oracle(m, xs) -> list[np.ndarray]:
    t = get_target("tvm-llvm")
    got = t.run(t.lower(m), xs)
    rep = compare_all(got, run(m, xs, float64=True), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons if not c.ok]
    return got


def test_rule_table_is_the_coverage() -> None:
    """Every registry op has a rule (only the structural ends are not ops to lower), and
    ``supports`` answers from the table."""
    from irkit.ir.ops import OPS
    from irkit.targets.tvm import TVM_RULES

    for name in ("tvm-llvm", "tvm-cuda"):
        t = get_target(name)
        assert t.lowering_table is TVM_RULES
        assert sorted(n for n in OPS if not t.supports(n)) == ["func.return", "ik.yield"]
    assert not get_target("tvm-llvm").supports("ik.no_such_op")


def test_ops_without_a_rule_are_one_error_naming_each(monkeypatch) -> None:
    from irkit.ir.types import DType, TensorType
    from irkit.targets.base import TargetUnavailable
    from irkit.targets.tvm import TVM_RULES

    m = _one_op(lambda b, x: [b.cos(b.sin(b.sin(x)))], TensorType((4,), DType.f32))
    monkeypatch.delitem(TVM_RULES.rules, "ik.sin")
    monkeypatch.delitem(TVM_RULES.rules, "ik.cos")
    with pytest.raises(TargetUnavailable) as e:
        get_target("tvm-llvm").lower(m)
    msg = str(e.value)
    assert "'ik.cos' at" in msg and "'ik.sin' at" in msg and "\n" not in msg


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_ne_of_a_value_with_itself_finds_nan(dtype: str) -> None:
    """The frontends spell IsNaN as ``x != x``; TVM's simplifier folded it to false, so every
    NaN was reported as a number (ONNX test_isnan, f16 included).  ``eq``/``le``/``ge`` of a
    value with itself are false at NaN too."""
    from irkit.ir.types import DType, TensorType

    dt = DType.parse(dtype)
    m = _one_op(lambda b, x: [b.ne(x, x), b.eq(x, x), b.le(x, x), b.ge(x, x), b.create("ik.isnan", [x]).results[0]],
                TensorType((2, 5), dt))
    x = np.array([[np.nan, 1.5, -np.inf, np.inf, 0.0], [-2.0, np.nan, 3.0, -0.0, 7.0]], dt.np)
    ne, eq, le, ge, isnan = _matches_oracle(m, [x])
    np.testing.assert_array_equal(ne, np.isnan(x))
    np.testing.assert_array_equal(isnan, np.isnan(x))
    for r in (eq, le, ge):
        np.testing.assert_array_equal(r, ~np.isnan(x))


@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32])
def test_gather_negative_indices_wrap(idx_dtype) -> None:
    """ONNX test_gather_negative_indices: TOPI's take(mode="clip") clamped -1 to 0 (a silent
    wrong answer); indices wrap by the axis size like NumPy."""
    from irkit.ir.types import DType, TensorType

    m = _one_op(lambda b, d, i: [b.create("ik.gather", [d, i], {"axis": 0}).results[0]],
                TensorType((10,), DType.f32), TensorType((3,), DType.from_numpy(np.dtype(idx_dtype))))
    data = np.arange(10, dtype=np.float32) + 1
    idx = np.array([0, -9, -10], idx_dtype)
    (got,) = _matches_oracle(m, [data, idx])
    np.testing.assert_array_equal(got, data[idx])


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_fully_masked_attention_row_is_zero(dtype: str) -> None:
    """A query row whose every key is masked gives zeros, as ``attention_reference`` does; the
    online-softmax kernel (f32) returned 0/0 = NaN, and the f64 TE fallback did not exist."""
    from irkit.ir.types import DType, TensorType

    dt = DType.parse(dtype)
    b_, h, s, d = 1, 2, 6, 8
    m = _one_op(lambda b, q, k, v, mk: [b.create("ik.attention", [q, k, v, mk], {"scale": 0.35}).results[0]],
                TensorType((b_, h, s, d), dt), TensorType((b_, h, s, d), dt), TensorType((b_, h, s, d), dt),
                TensorType((b_, 1, s, s), DType.bool))
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((b_, h, s, d)).astype(dt.np) for _ in range(3))
    mask = rng.random((b_, 1, s, s)) < 0.7
    mask[0, 0, 2, :] = False
    mask[0, 0, 4, :] = True
    (got,) = _matches_oracle(m, [q, k, v, mask])
    assert np.isfinite(got).all()
    assert (got[0, :, 2] == 0).all() and np.abs(got[0, :, 4]).max() > 0


def test_nan_propagates_through_max_min_relu_and_reductions() -> None:
    """``tirx.max``/``min`` are LLVM's maxnum/minnum, which drop NaN: relu(NaN) was 0 and
    max-reductions skipped NaN.  NumPy (the oracle) propagates it; argmax picks the first NaN."""
    from irkit.ir.types import DType, TensorType

    def build(b, x, y):
        return [b.max(x, y), b.min(x, y), b.relu(x), b.reduce_max(x, axes=(1,)), b.reduce_min(x, axes=(1,)),
                b.create("ik.argmax", [x], {"axis": 1}).results[0], b.create("ik.argmin", [x], {"axis": 1}).results[0]]

    m = _one_op(build, TensorType((2, 4), DType.f32), TensorType((2, 4), DType.f32))
    x = np.array([[1.0, np.nan, 5.0, np.nan], [-1.0, 2.0, -3.0, 4.0]], np.float32)
    y = np.array([[np.nan, 0.5, 9.0, 1.0], [0.0, 0.0, 0.0, 0.0]], np.float32)
    got = _matches_oracle(m, [x, y])
    assert np.isnan(got[2][0, 1]) and np.isnan(got[3][0]) and got[5][0] == 1 and got[6][0] == 1


@pytest.mark.parametrize("kind", ["sum", "prod", "mean"])
def test_a_reduction_over_an_empty_axis_is_its_identity(kind: str) -> None:
    """TE puts a reduction's init inside the reduced loop; with extent 0 it never ran and the result
    was uninitialised memory (NaN or garbage, found by the random graphs with empty dims)."""
    from irkit.interp import run
    from irkit.ir import DType, TensorType, verify
    from irkit.ir.builder import module_of, new_function
    from irkit.targets.registry import get_target

    f, b = new_function("main", [TensorType((2, 3, 4), DType.f32)], ["x"])
    x = f.args[0]
    empty = b.slice(x, start=(0, 0, 0), limit=(2, 3, 0))
    r = getattr(b, f"reduce_{kind}")(empty, axes=(-1,), keepdims=True)
    b.ret(b.add(x, r))
    m = module_of(f)
    verify(m)
    xs = [np.random.default_rng(7).standard_normal((2, 3, 4)).astype(np.float32)]
    want = run(m, xs, float64=True)[0]
    got = get_target("tvm-llvm").run_module(m, xs)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("name", ["ik.isnan", "ik.isinf", "ik.isfinite", "ik.ne", "ik.max"])
def test_nan_checks_on_bf16_and_scalar_inputs(name: str) -> None:
    """TVM has no bf16 isnan (the NaN-aware compares and max crashed on bf16), and a 0-d input reached
    the VM as a 1-d tensor; both found by the ONNX node tests."""
    import ml_dtypes

    from irkit.interp import run
    from irkit.ir import DType, TensorType, verify
    from irkit.ir.builder import module_of, new_function
    from irkit.targets.registry import get_target

    binary = name in ("ik.ne", "ik.max")
    f, b = new_function("main", [TensorType((5,), DType.bf16), TensorType((), DType.bf16)], ["x", "s"])
    x, s = f.args
    op = b.value(name, *([x, s] if binary else [x]))
    b.ret(op)
    m = module_of(f)
    verify(m)
    xs = [np.array([1.5, np.nan, -np.inf, 0.25, 3.0]).astype(ml_dtypes.bfloat16),
          np.array(0.25, dtype=ml_dtypes.bfloat16)]
    want = run(m, xs, float64=True)[0]
    got = get_target("tvm-llvm").run_module(m, xs)[0]
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64))
