"""The `ort` target's fast forms: ``ik.attention`` as com.microsoft MultiHeadAttention where that kernel
is exact for the op, and the head split/merge transposes and reshapes cancelled at export; every case
against the float64 interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from irkit.check import compare_all, module_tolerance
from irkit.interp import run
from irkit.ir.builder import new_function
from irkit.ir.core import Module
from irkit.ir.types import DType, TensorType
from irkit.ir.verify import verify

pytest.importorskip("onnxruntime")

from irkit.targets.ort import OrtTarget  # noqa: E402

B, S, H, D = 2, 5, 3, 4
E = H * D


def _block(extra: np.ndarray | None = None, slot: str = "mask", causal: bool = False, softcap: float = 0.0,
           split: tuple[bool, bool, bool] = (True, True, True),
           bias: np.ndarray | None = None) -> tuple[Module, list[np.ndarray]]:
    """x, y, z [B, S, H*D] -> head split -> ik.attention (+ mask or bias) -> head merge [B, S, H*D].
    ``split[i]`` False: that operand is passed in as [B, H, S, D] (no head split to cancel)."""
    rng = np.random.default_rng(7)
    xs: list[np.ndarray] = []
    for s in split:
        shape = (B, S, E) if s else (B, H, S, D)
        xs.append(rng.standard_normal(shape).astype(np.float32))
    if extra is not None:
        xs.append(extra)
    if bias is not None:  # with a mask (``extra``) in the mask slot
        xs.append(bias)
    f, b = new_function("main", [TensorType(x.shape, DType.from_numpy(x.dtype)) for x in xs],
                        [f"a{i}" for i in range(len(xs))])
    args = list(f.args)
    heads = []
    for i, s in enumerate(split):
        v = args[i]
        if s:
            v = b.create("ik.reshape", [v], {"shape": (B, S, H, D)}).results[0]
            v = b.create("ik.transpose", [v], {"perm": (0, 2, 1, 3)}).results[0]
        heads.append(v)
    attrs: dict[str, Any] = {"scale": 0.5}
    if causal:
        attrs["causal"] = True
    if softcap:
        attrs["softcap"] = softcap
    ops: list[Any] = heads + ([None, None] if extra is None else
                              ([args[3], None] if slot == "mask" else [None, args[3]]))
    if bias is not None:
        ops[4] = args[4]
    o = b.create("ik.attention", ops, attrs).results[0]
    o = b.create("ik.transpose", [o], {"perm": (0, 2, 1, 3)}).results[0]
    b.ret(b.create("ik.reshape", [o], {"shape": (B, S, E)}).results[0])
    m = Module([f])
    verify(m)
    return m, xs


def _lower_run(m: Module, xs: list[np.ndarray], attention: str = "contrib") -> tuple[list[str], np.ndarray]:
    t = OrtTarget(attention)
    art = t.lower(m)
    got = t.run(art, xs)
    rep = compare_all(got, run(m, xs, float64=True), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]
    return [k.kind for k in art.kernels], got[0]


def test_plain_attention_is_one_multiheadattention_and_no_transpose() -> None:
    m, xs = _block()
    kinds, _ = _lower_run(m, xs)
    assert kinds.count("MultiHeadAttention") == 1
    assert "Transpose" not in kinds and "Attention" not in kinds
    assert kinds.count("Reshape") == 0  # the split and merge cancel; only the output Identity is left


def test_padding_mask_is_key_padding_mask_with_fully_masked_batch_zero() -> None:
    keep = np.ones((B, 1, 1, S), bool)
    keep[0, ..., 3:] = False
    keep[1] = False  # every key of batch 1 masked: zeros, not NaN
    m, xs = _block(keep)
    kinds, out = _lower_run(m, xs)
    assert "MultiHeadAttention" in kinds
    assert np.all(out[1] == 0) and np.all(np.isfinite(out))


@pytest.mark.parametrize("shape", [(B, 1, S, S), (1, 1, S, S), (S, S)])
def test_general_mask_is_an_additive_bias(shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    keep = rng.random(shape) < 0.6
    keep[..., 0, :] = False  # a query row with no live key
    keep[..., 1:, 0] = True
    m, xs = _block(keep)
    kinds, out = _lower_run(m, xs)
    assert "MultiHeadAttention" in kinds
    assert np.all(out[:, 0] == 0) and np.all(np.isfinite(out))


def test_additive_bias_with_minus_inf_row() -> None:
    bias = np.random.default_rng(4).standard_normal((1, 1, S, S)).astype(np.float32)
    bias[..., 2, :] = -np.inf
    bias[..., 3, :2] = -np.inf
    m, xs = _block(bias, slot="bias")
    kinds, out = _lower_run(m, xs)
    assert "MultiHeadAttention" in kinds
    assert np.all(out[:, 2] == 0) and np.all(np.isfinite(out))


@pytest.mark.parametrize("shape,kernel", [((B, 1, S, S), "MultiHeadAttention"), ((B, H, S, S), "Attention")])
def test_bias_at_the_lowest_float_is_a_number_not_a_mask(shape: tuple[int, ...], kernel: str) -> None:
    """A bias of ``finfo(float32).min`` (DeBERTa's masked_fill on padded query rows) is added like any
    number: a row at it throughout is uniform, not zeros as onnxruntime's kernels make it, and a key
    at it next to live keys gets no weight."""
    low = np.finfo(np.float32).min
    bias = np.random.default_rng(11).standard_normal(shape).astype(np.float32)
    bias[0, ..., 1, :] = low  # every key at the lowest float: uniform over the keys
    bias[1, ..., 3, :2] = low
    m, xs = _block(bias, slot="bias")
    kinds, out = _lower_run(m, xs)
    assert kernel in kinds and "MultiHeadAttention" not in set(kinds) - {kernel}
    v = xs[2].reshape(B, S, H, D)
    np.testing.assert_allclose(out[0, 1].reshape(H, D), v[0].mean(0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["causal", "softcap", "q-not-split", "v-not-split", "mask-per-head", "mask-and-bias"])
def test_cases_multiheadattention_does_not_take_stay_exact(case: str) -> None:
    if case == "mask-per-head":
        m, xs = _block(np.random.default_rng(5).random((B, H, S, S)) < 0.7)
    elif case == "mask-and-bias":
        keep = np.ones((B, 1, 1, S), bool)
        keep[0, ..., :2] = False
        m, xs = _block(keep, bias=np.random.default_rng(8).standard_normal((1, 1, S, S)).astype(np.float32))
    else:
        m, xs = _block(causal=case == "causal", softcap=2.0 if case == "softcap" else 0.0,
                       split=(case != "q-not-split", True, case != "v-not-split"))
    kinds, _ = _lower_run(m, xs)
    assert "MultiHeadAttention" not in kinds
    assert {"Attention", "Softmax", "Exp"} & set(kinds)  # opset-23 Attention, or the decomposition


def test_onnx_attention_mode_stays_standard_onnx() -> None:
    import onnx

    m, xs = _block()
    kinds, _ = _lower_run(m, xs, attention="onnx")
    assert "MultiHeadAttention" not in kinds and "Attention" in kinds
    art = OrtTarget("onnx").lower(m)
    model = onnx.load_from_string(art.files["model.onnx"])
    assert {o.domain for o in model.opset_import} == {""}
    art = OrtTarget().lower(m)
    model = onnx.load_from_string(art.files["model.onnx"])
    assert {o.domain for o in model.opset_import} == {"", "com.microsoft"}


def test_transposes_and_reshapes_compose_exactly() -> None:
    """transpose(transpose(x)) cancels or composes into one Transpose; reshape(reshape(x)) is one Reshape
    (none where it restores x's shape); nodes left unused are dropped."""
    x = np.random.default_rng(6).standard_normal((2, 3, 4, 5)).astype(np.float32)
    f, b = new_function("main", [TensorType(x.shape, DType.f32)], ["x"])
    a = b.create("ik.transpose", [f.args[0]], {"perm": (0, 2, 1, 3)}).results[0]
    back = b.create("ik.transpose", [a], {"perm": (0, 2, 1, 3)}).results[0]  # cancels: x
    rot = b.create("ik.transpose", [a], {"perm": (3, 0, 1, 2)}).results[0]  # composes: one Transpose of x
    r1 = b.create("ik.reshape", [f.args[0]], {"shape": (6, 20)}).results[0]
    r2 = b.create("ik.reshape", [r1], {"shape": (120,)}).results[0]  # one Reshape of x
    r3 = b.create("ik.reshape", [r1], {"shape": (2, 3, 4, 5)}).results[0]  # x itself
    s = b.create("ik.add", [back, r3], {}).results[0]
    b.ret(s, rot, r2)
    m = Module([f])
    verify(m)
    t = OrtTarget()
    art = t.lower(m)
    kinds = [k.kind for k in art.kernels]
    assert kinds.count("Transpose") == 1 and kinds.count("Reshape") == 1, kinds
    got = t.run(art, [x])
    want = run(m, [x], float64=True)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w.astype(np.float32))


@pytest.mark.parametrize("attention", ["contrib", "onnx"])
@pytest.mark.parametrize("dead_row", [False, True])
def test_constant_mask_needs_no_dead_row_guard_unless_a_row_is_dead(attention: str, dead_row: bool) -> None:
    """A constant mask (a sliding window, a causal band folded at import) whose every query row keeps a
    key needs no zeroing Where after the attention kernel; one with a dead row keeps it."""
    keep = np.tril(np.ones((1, 1, S, S), bool)) & ~np.tril(np.ones((1, 1, S, S), bool), -3)  # a window of 3
    if dead_row:
        keep[..., 2, :] = False
    rng = np.random.default_rng(9)
    xs = [rng.standard_normal((B, S, E)).astype(np.float32) for _ in range(3)]
    f, b = new_function("main", [TensorType(x.shape, DType.f32) for x in xs], ["x", "y", "z"])
    heads = [b.create("ik.transpose", [b.create("ik.reshape", [a], {"shape": (B, S, H, D)}).results[0]],
                      {"perm": (0, 2, 1, 3)}).results[0] for a in f.args]
    o = b.create("ik.attention", heads + [b.constant(keep), None], {"scale": 0.5}).results[0]
    o = b.create("ik.transpose", [o], {"perm": (0, 2, 1, 3)}).results[0]
    b.ret(b.create("ik.reshape", [o], {"shape": (B, S, E)}).results[0])
    m = Module([f])
    verify(m)
    kinds, out = _lower_run(m, xs, attention)
    kernel = "MultiHeadAttention" if attention == "contrib" else "Attention"
    assert ("Where" in kinds[kinds.index(kernel):]) == dead_row, kinds  # the guard follows the kernel
    assert np.all(np.isfinite(out)) and (not dead_row or np.all(out[:, 2] == 0))
