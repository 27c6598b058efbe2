"""The decode-time GEMV kernel (targets/tvm_kernels/gemv.py): against float64 NumPy, and its dispatch
from the tvm-llvm matmul lowering (a few rows times a constant weight)."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from irkit.targets.tvm_kernels import gemv as gv  # noqa: E402
from irkit.targets.tvm_kernels.common import compile_kernel, cpu_target, run  # noqa: E402


@pytest.mark.parametrize("a_shape,n,bias,act", [
    ((1, 96), 37, False, None),          # N not a multiple of the block
    ((3, 1, 64), 200, True, "gelu_tanh"),  # leading dims flattened: M = 3, bias + activation epilogue
    ((8, 40), 130, True, "relu"),         # M = MAX_ROWS
])
def test_gemv_matches_float64(a_shape, n, bias, act):
    rng = np.random.default_rng(0)
    k = a_shape[-1]
    a = rng.standard_normal(a_shape).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    bvec = rng.standard_normal(n).astype(np.float32)
    kern = gv.gemv(a_shape, (k, n), bias=bias, activation=act)
    args = [a, gv.pack(w, kern.config["block"])] + ([bvec] if bias else [])
    got = run(kern, *args, lib=compile_kernel(kern)[0])[0]
    x = a.astype(np.float64) @ w.astype(np.float64) + (bvec if bias else 0.0)
    if act == "gelu_tanh":
        x = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    elif act == "relu":
        x = np.maximum(x, 0)
    assert got.shape == (*a_shape[:-1], n)
    np.testing.assert_allclose(got, x, rtol=1e-5, atol=1e-4)


def test_applies_only_to_small_float32_gemvs():
    t = cpu_target()
    assert gv.applies((1, 768), (768, 2304), "float32", t)
    assert gv.applies((8, 1, 768), (768, 50257), "float32", t)
    assert not gv.applies((9, 768), (768, 64), "float32", t)       # enough rows for the matmul's tiling
    assert not gv.applies((1, 768), (768, 64), "float16", t)
    assert not gv.applies((1, 768), (2, 768, 64), "float32", t)    # batched weight
    with pytest.raises(ValueError, match="not a float32 CPU GEMV"):
        gv.gemv((16, 8), (8, 8))


def test_pack_layout():
    w = np.arange(3 * 10, dtype=np.float32).reshape(3, 10)
    p = gv.pack(w, 4)
    assert p.shape == (3, 3, 4)
    np.testing.assert_array_equal(p[1, 2], w[2, 4:8])
    np.testing.assert_array_equal(p[2, :, 2:], 0)  # padded columns


def test_tvm_lowering_uses_gemv_for_decode_matmuls(monkeypatch):
    """A [2, 1, K] @ constant [K, N] + bias (a decode step's projection) lowers to the GEMV on tvm-llvm
    and matches the float64 interpreter."""
    from irkit.targets.registry import get_target

    from irkit.interp import run as interp_run
    from irkit.ir.builder import module_of, new_function
    from irkit.ir.types import DType, TensorType

    rng = np.random.default_rng(1)
    k, n = 48, 70
    w = rng.standard_normal((k, n)).astype(np.float32)
    bvec = rng.standard_normal(n).astype(np.float32)
    f, bb = new_function("proj", [TensorType((2, 1, k), DType.f32)], ["x"])
    y = bb.add(bb.matmul(f.args[0], bb.constant(w)), bb.constant(bvec))
    bb.ret(y)
    m = module_of(f)
    built = []
    real = gv.gemv
    monkeypatch.setattr(gv, "gemv", lambda *a, **kw: built.append(a) or real(*a, **kw))
    tg = get_target("tvm-llvm")
    x = rng.standard_normal((2, 1, k)).astype(np.float32)
    got = tg.run(tg.lower(m), [x])[0]
    want = interp_run(m, [x], float64=True)[0]
    assert built and tuple(built[0][0]) == (2, 1, k)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
