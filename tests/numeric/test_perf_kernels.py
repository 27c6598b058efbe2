"""The performance paths of the CPU targets agree with the float64 reference.

- tvm-llvm lowers a 2-D convolution as one GEMM where that is what it is (patchify: kernel ==
  stride, no padding; 1x1; small strided/padded convs through im2col) and keeps the direct conv
  otherwise (groups); odd sizes, dilation, a runtime weight, no bias.
- Small matmuls, row kernels and attention run on one thread (no pool launch); the results are
  the same kernels' results.
- The ort target's Attention expands a mask only over the query/key dims and reads "row has a live
  key" off the unexpanded mask: still exact, fully masked rows included.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm")

from irkit.check import compare_all, module_tolerance
from irkit.interp import run
from irkit.ir.builder import new_function
from irkit.ir.core import Module
from irkit.ir.types import DType, TensorType
from irkit.ir.verify import verify
from irkit.targets.registry import get_target


def _conv_module(xs, ws, *, const_w=True, bias=True, seed=0, **attrs):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal(ws) * 0.2).astype(np.float32)
    types = [TensorType(tuple(xs), DType.f32)] + ([] if const_w else [TensorType(tuple(ws), DType.f32)])
    f, b = new_function("main", types, ["x"] + ([] if const_w else ["w"]))
    wv = b.constant(w) if const_w else f.args[1]
    ops = [f.args[0], wv] + ([b.constant(rng.standard_normal(ws[0]).astype(np.float32))] if bias else [])
    b.ret(b.create("ik.conv2d", ops, attrs).results[0])
    m = Module([f])
    verify(m)
    x = rng.standard_normal(xs).astype(np.float32)
    return m, [x] + ([] if const_w else [w])


CONVS = [
    # (x shape, w shape, attrs, const weight, bias, expect the GEMM path)
    pytest.param((2, 3, 32, 32), (64, 3, 8, 8), {"strides": (8, 8)}, True, True, True, id="patchify-vit"),
    pytest.param((1, 3, 30, 23), (17, 3, 7, 7), {"strides": (7, 7)}, True, True, True, id="patchify-ragged", marks=pytest.mark.slow),
    pytest.param((2, 13, 5, 9), (7, 13, 1, 1), {}, True, False, True, id="pointwise-odd"),
    pytest.param((1, 3, 15, 17), (8, 3, 3, 3), {"strides": (2, 2), "padding": (1, 1, 1, 1)}, True, True, True,
                 id="stem-3x3-s2-pad"),
    pytest.param((1, 4, 11, 10), (5, 4, 3, 3), {"padding": (2, 1, 0, 2), "dilations": (2, 1)}, True, True, True,
                 id="dilated-asym-pad", marks=pytest.mark.slow),
    pytest.param((2, 3, 16, 16), (12, 3, 4, 4), {"strides": (4, 4)}, False, True, True, id="patchify-runtime-w", marks=pytest.mark.slow),
    pytest.param((1, 6, 9, 9), (4, 3, 3, 3), {"groups": 2, "padding": (1, 1, 1, 1)}, True, True, False,
                 id="grouped-direct"),
]


@pytest.mark.parametrize("xs, ws, attrs, const_w, bias, gemm", CONVS)
def test_conv_as_gemm_matches_float64(xs, ws, attrs, const_w, bias, gemm) -> None:
    m, ins = _conv_module(xs, ws, const_w=const_w, bias=bias, **attrs)
    t = get_target("tvm-llvm")
    art = t.lower(m)
    fns = [f for k in art.kernels for f in k.extra.get("functions", [])]
    assert any(f.endswith("_im2col") for f in fns) == gemm, fns
    got = t.run(art, ins)
    rep = compare_all(got, run(m, ins, float64=True), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons if not c.ok]
    # the staging buffers are reused: a second call with other inputs gives that call's result
    ins2 = [x * -1.5 + 0.25 for x in ins]
    got2 = t.run(art, ins2)
    rep2 = compare_all(got2, run(m, ins2, float64=True), module_tolerance(m))
    assert rep2.ok
    assert not np.allclose(got[0], got2[0])


def test_gemm_plan_refuses_grouped_and_huge() -> None:
    from irkit.targets.tvm_kernels.conv import gemm_plan

    assert gemm_plan((1, 4, 8, 8), (4, 2, 3, 3), groups=2) is None
    assert gemm_plan((8, 64, 256, 256), (64, 64, 3, 3), padding=(1, 1, 1, 1)) is None  # 1.2 GB of columns
    p = gemm_plan((2, 3, 64, 64), (256, 3, 16, 16), stride=(16, 16))
    assert p is not None and p["kind"] == "patchify" and (p["m"], p["k"]) == (32, 768)


def test_identity_output_is_not_aliased_to_staging() -> None:
    """An output that is an input comes back as its own array: the next call cannot change it."""
    f, b = new_function("main", [TensorType((2, 3), DType.f32)] * 2, ["x", "y"])
    b.ret(f.args[0], b.create("ik.add", list(f.args), {}).results[0])
    m = Module([f])
    t = get_target("tvm-llvm")
    art = t.lower(m)
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    first = t.run(art, [a, a])
    t.run(art, [a * 7, a])
    np.testing.assert_array_equal(first[0], a)
    np.testing.assert_array_equal(first[1], a + a)


def _conv1d_module(xs, ws, seed=1, **attrs):
    rng = np.random.default_rng(seed)
    f, b = new_function("main", [TensorType(tuple(xs), DType.f32)], ["x"])
    w = b.constant((rng.standard_normal(ws) * 0.2).astype(np.float32))
    bias = b.constant(rng.standard_normal(ws[0]).astype(np.float32))
    b.ret(b.create("ik.conv", [f.args[0], w, bias], attrs).results[0])
    m = Module([f])
    verify(m)
    return m, [rng.standard_normal(xs).astype(np.float32)]


@pytest.mark.parametrize("attrs, gemm", [
    pytest.param({"strides": (1,), "padding": (1, 1)}, True, id="whisper-conv1"),
    pytest.param({"strides": (2,), "padding": (1, 1)}, True, id="whisper-conv2-stride2"),
    pytest.param({"strides": (1,), "padding": (2, -1)}, False, id="negative-pad-direct", marks=pytest.mark.slow),
])
def test_conv1d_as_gemm_matches_float64(attrs, gemm) -> None:
    m, ins = _conv1d_module((2, 8, 31), (16, 8, 3), **attrs)
    t = get_target("tvm-llvm")
    art = t.lower(m)
    fns = [f for k in art.kernels for f in k.extra.get("functions", [])]
    assert any(f.endswith("_im2col") for f in fns) == gemm, fns
    rep = compare_all(t.run(art, ins), run(m, ins, float64=True), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons if not c.ok]


def _attention_module(mask_shape, causal: bool):
    f_types = [TensorType((2, 4, 6, 8), DType.f32), TensorType((2, 4, 7, 8), DType.f32),
               TensorType((2, 4, 7, 8), DType.f32), TensorType(mask_shape, DType.bool)]
    f, b = new_function("main", f_types, ["q", "k", "v", "mask"])
    b.ret(b.create("ik.attention", list(f.args), {"scale": 0.35, "causal": causal}).results[0])
    m = Module([f])
    verify(m)
    return m


@pytest.mark.parametrize("mask_shape, causal", [
    pytest.param((2, 1, 1, 7), False, id="key-padding-mask"),
    pytest.param((2, 1, 1, 7), True, id="key-padding-mask-causal", marks=pytest.mark.slow),
    pytest.param((6, 7), False, id="rank2-mask"),
    pytest.param((2, 4, 6, 7), False, id="full-mask", marks=pytest.mark.slow),
])
def test_ort_attention_masks_match_float64(mask_shape, causal) -> None:
    """The ort target's Attention with its mask expanded only over the query/key dims: exact, including a
    batch row whose keys are all masked (zeros, not onnxruntime's NaN) and negative inputs."""
    pytest.importorskip("onnxruntime")
    m = _attention_module(mask_shape, causal)
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 4, 6, 8)).astype(np.float32) * 3 - 1
    k = rng.standard_normal((2, 4, 7, 8)).astype(np.float32) * 3 - 1
    v = rng.standard_normal((2, 4, 7, 8)).astype(np.float32) - 0.5
    mask = rng.random(mask_shape) > 0.3
    if len(mask_shape) == 4 and mask_shape[1] == 1:
        mask[1] = False  # every key of batch row 1 padded
        mask[0, ..., 0] = True
    elif len(mask_shape) == 2:
        mask[2] = False  # query row 2 sees no key
        mask[0, 0] = True
    else:
        mask[0, 1, 3] = False
    ins = [q, k, v, mask]
    t = get_target("ort")
    art = t.lower(m)
    got = t.run(art, ins)
    ref = run(m, ins, float64=True)
    assert np.isfinite(got[0]).all()
    rep = compare_all(got, ref, module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons if not c.ok]


def _cache_update_module(read_after: bool = False):
    from irkit.ir.aliases import set_aliases

    f, b = new_function("main", [TensorType((2, 3, 16, 8), DType.f32), TensorType((2, 3, 1, 8), DType.f32),
                                 TensorType((4,), DType.i64)], ["cache", "new", "starts"])
    upd = b.create("ik.dynamic_update_slice", list(f.args), {}).results[0]
    outs = [upd]
    if read_after:
        outs.append(b.create("ik.add", [f.args[0], f.args[0]], {}).results[0])
    b.ret(*outs)
    set_aliases(f, {0: 0})
    m = Module([f])
    verify(m)
    return m


@pytest.mark.parametrize("read_after", [False, True], ids=["inplace", "read-after-keeps-copy"])
def test_kv_cache_update_in_place(read_after: bool) -> None:
    """An aliased cache argument is updated in place (``call_tir_inplace``): Target.run stays functional
    (the caller's array is untouched, outputs do not change under the next call), a session carries the
    cache from call to call, and a later reader of the old cache keeps the copying update."""
    m = _cache_update_module(read_after)
    t = get_target("tvm-llvm")
    art = t.lower(m)
    assert ("inplace_args" in art.info) == (not read_after)
    rng = np.random.default_rng(5)
    cache = rng.standard_normal((2, 3, 16, 8)).astype(np.float32)
    keep = cache.copy()
    rows = [rng.standard_normal((2, 3, 1, 8)).astype(np.float32) for _ in range(3)]
    starts = [np.array([0, 0, p, 0], np.int64) for p in (3, 20, -2)]  # in range, clamped high, clamped low
    first = t.run(art, [cache, rows[0], starts[0]])
    np.testing.assert_array_equal(cache, keep)
    ref = run(m, [cache, rows[0], starts[0]], float64=True)
    for g, r in zip(first, ref):
        np.testing.assert_allclose(g, r, rtol=0, atol=0)
    snapshot = first[0].copy()
    t.run(art, [cache, rows[1], starts[1]])
    np.testing.assert_array_equal(first[0], snapshot)
    sess = t.open_session(art)
    expect = cache.copy()
    for i, (row, st) in enumerate(zip(rows, starts)):
        sess.run([cache if i == 0 else None, row, st])
        expect = run(m, [expect, row, st])[0]
    np.testing.assert_array_equal(sess.read(0), expect)
