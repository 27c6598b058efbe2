"""The coverage ops (issue 14) on ``ort`` and ``xla-cpu`` against the float64 interpreter.

Every new op runs alone on both targets for each of its samples (``irkit.testing.op_samples``:
special values, ties, negative indices, narrow and unsigned integers) and must match the oracle
under ``module_tolerance`` and keep the IR's dtypes, or be refused with a one-line
``TargetUnavailable`` naming the op (only where the table below says why). Then the edge cases
the lowerings handle by hand: NaN through onnxruntime's reductions and arg-reductions, the
sort order of NaN and -0, last-wins duplicate scatters, XLA's clamped starts, integer division
by zero, shifts by the bit width, transposed and N-d convolutions, fully masked attention rows.
``xla-tpu-v5e`` must compile every new op ahead of time (a float32 / int32 sample of each).

The table-driven check of every op on every target is the conformance suite's; this file is
about the two lowerings' own decisions.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # see targets/xla.py
pytest.importorskip("onnxruntime")
pytest.importorskip("jax")

from irkit.targets.base import TargetUnavailable
from irkit.targets.registry import get_target

from irkit.check import compare_all, module_tolerance
from irkit.interp import InterpError, run
from irkit.ir.types import DType
from irkit.testing.op_samples import Sample, one_op_module, sample_id, samples

NEW_OPS = [
    "ik.tan", "ik.asin", "ik.acos", "ik.atan", "ik.sinh", "ik.cosh", "ik.asinh", "ik.acosh", "ik.atanh",
    "ik.log1p", "ik.expm1", "ik.round", "ik.trunc", "ik.erfinv", "ik.lgamma", "ik.digamma", "ik.isnan",
    "ik.isinf", "ik.isfinite", "ik.bitwise_not", "ik.popcount", "ik.clz", "ik.atan2", "ik.nextafter",
    "ik.bitwise_and", "ik.bitwise_or", "ik.bitwise_xor", "ik.shift_left", "ik.shift_right_logical",
    "ik.shift_right_arithmetic", "ik.mod", "ik.floor_div", "ik.argmin", "ik.argmax", "ik.cumsum", "ik.cumprod",
    "ik.cummax", "ik.cummin", "ik.gather_elements", "ik.gather_nd", "ik.scatter_elements", "ik.scatter_nd",
    "ik.dynamic_slice", "ik.dynamic_update_slice", "ik.reverse", "ik.sort", "ik.topk", "ik.reduce_window",
    "ik.conv",
]
"""The coverage ops (docs/ir.md), and argmax for its new select_last_index."""

ORT_REFUSES = {
    "ik.erfinv": "no erfinv",
    "ik.lgamma": "no lgamma",
    "ik.digamma": "no digamma",
    "ik.nextafter": "no nextafter",
}
"""Ops ONNX has no operator for and that have no exact decomposition; ort refuses them, naming the op."""

TARGETS = ("ort", "xla-cpu")
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None


def _oracle(m: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The float64 interpreter, its float results rounded into the declared type's range: a value
    the declared type cannot hold (exp(100) in f32) is ±inf on every real target."""
    want = run(m, inputs, float64=True)
    out = []
    for w, v in zip(want, m.entry.outputs):
        if v.dtype.is_float:
            big = float(np.finfo(v.dtype.np).max)
            w = np.where(np.abs(w) > big, np.copysign(np.inf, w), w)
        out.append(w)
    return out


def _check(target: str, m: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    t = get_target(target)
    got = t.run(t.lower(m), inputs)
    rep = compare_all(got, _oracle(m, inputs), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]
    for g, v in zip(got, m.entry.outputs):
        want_dt = np.dtype(np.float32) if (target == "ort" and v.dtype is DType.bf16) else v.dtype.np
        assert np.asarray(g).dtype in (want_dt, v.dtype.np), (g.dtype, v.dtype)
    return got


def _cases() -> list[Any]:
    out = []
    for name in NEW_OPS:
        for i, s in enumerate(samples(name)):
            for target in TARGETS:
                out.append(pytest.param(target, name, s, id=f"{target}-{sample_id(name, i, s)}"))
    return out


@pytest.mark.parametrize("target,name,sample", _cases())
def test_new_op_matches_the_oracle(target: str, name: str, sample: Sample) -> None:
    m = one_op_module(name, sample)
    if target == "ort" and name in ORT_REFUSES:
        with pytest.raises(TargetUnavailable, match=f"'{name}' at .*{ORT_REFUSES[name]}"):
            get_target(target).lower(m)
        return
    _check(target, m, sample.inputs)


def test_the_tables_are_the_coverage() -> None:
    from irkit.targets.ort import NO_ONNX_OP, ORT_RULES
    from irkit.targets.xla_lower import XLA_RULES

    from irkit.ir import OPS

    ops = set(OPS) - {"func.return", "ik.yield"}
    assert not ops - XLA_RULES.names
    assert ops - ORT_RULES.names == set(NO_ONNX_OP) == set(ORT_REFUSES)
    ort = get_target("ort")
    assert ort.lowering_table is ORT_RULES
    assert {n for n in NEW_OPS if not ort.supports(n)} == set(ORT_REFUSES)


# --------------------------------------------------------------------------------------------
# Edge cases the lowerings handle by hand
# --------------------------------------------------------------------------------------------

rng = np.random.default_rng(14)
NAN_ROWS = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, -1.0, 5.0, 5.0], [-np.inf, np.inf, 0.5, -0.0]], np.float32)


def _run_both(name: str, inputs: list[np.ndarray], attrs: dict[str, Any]) -> None:
    m = one_op_module(name, Sample(inputs, attrs))
    for target in TARGETS:
        _check(target, m, inputs)


@pytest.mark.parametrize("name", ["ik.reduce_max", "ik.reduce_min"])
def test_nan_propagates_through_reductions(name: str) -> None:
    # onnxruntime's ReduceMax/Min skip NaN; NumPy's propagate it.
    _run_both(name, [NAN_ROWS], {"axes": (1,)})
    _run_both(name, [NAN_ROWS.astype(np.float16)], {"axes": (0, 1), "keepdims": True})


@pytest.mark.parametrize("name", ["ik.argmax", "ik.argmin"])
@pytest.mark.parametrize("last", [False, True])
def test_nan_is_the_extreme_of_arg_reductions(name: str, last: bool) -> None:
    _run_both(name, [NAN_ROWS], {"axis": 1, "select_last_index": last})
    _run_both(name, [NAN_ROWS.T.copy()], {"axis": 0, "keepdims": True, "select_last_index": last})


def test_arg_reductions_of_narrow_and_unsigned_ints() -> None:
    for dt in (np.int16, np.uint16, np.uint32, np.int8, np.uint64):
        x = rng.integers(0, 7, size=(3, 6)).astype(dt)
        if dt == np.uint64:
            x[1, 2] = np.iinfo(np.uint64).max  # beyond i64: the order must survive the lowering
        _run_both("ik.argmin", [x], {"axis": 1, "select_last_index": True})
        _run_both("ik.argmax", [x], {"axis": 0})
        _run_both("ik.reduce_max", [x], {"axes": (1,)})
        _run_both("ik.reduce_min", [x], {"axes": (0,)})


@pytest.mark.parametrize("dt", [np.uint8, np.int16, np.uint16, np.uint64])
def test_older_ops_on_the_new_integer_types(dt: Any) -> None:
    """onnxruntime lacks many narrow/unsigned kernels (Neg, Relu, Pow, Max, Min, MatMul, Pad, Where...):
    the export widens (or rewrites) around them; XLA has them all."""
    x = rng.integers(1, 9, size=(2, 3)).astype(dt)
    y = rng.integers(1, 5, size=(2, 3)).astype(dt)
    for name in ("ik.neg", "ik.relu", "ik.abs"):
        _run_both(name, [x], {})
    for name in ("ik.pow", "ik.max", "ik.min", "ik.div", "ik.rem", "ik.sub"):
        _run_both(name, [x, y], {})
    _run_both("ik.matmul", [x, y.T.copy()], {})
    _run_both("ik.pad", [x], {"pads": (1, 0, 0, 2), "value": 3.0})
    _run_both("ik.where", [x > 3, x, y], {})
    if dt != np.uint64:
        _run_both("ik.reduce_mean", [x], {"axes": (1,)})


def test_sort_orders_nan_and_signed_zero_like_numpy() -> None:
    x = np.array([[0.0, -0.0, np.nan, -1.0, 0.0, -np.nan, np.inf, -0.0, 2.0]], np.float32)
    for desc in (False, True):
        _run_both("ik.sort", [x], {"descending": desc})
        _run_both("ik.sort", [x.astype(np.float16)], {"descending": desc})
        _run_both("ik.sort", [x.astype(np.float64)], {"descending": desc})
    _run_both("ik.topk", [x], {"k": 5})
    _run_both("ik.topk", [x], {"k": 5, "largest": False, "sorted": False})


def test_sort_and_topk_of_ints_and_bools() -> None:
    for dt in (np.int64, np.uint8, np.int16, np.uint32):
        x = rng.integers(0, 4, size=(2, 7)).astype(dt)
        _run_both("ik.sort", [x], {"descending": True})
        _run_both("ik.topk", [x], {"k": 3, "largest": False})
    big = np.array([[3, 2**64 - 1, 5, 2**63, 3, 0, 2**63 + 1]], np.uint64)  # beyond i64: order kept
    _run_both("ik.sort", [big], {"descending": True})
    _run_both("ik.topk", [big], {"k": 3})
    _run_both("ik.cummax", [big], {"axis": 1})
    b = rng.random((3, 5)) < 0.5
    b.flat[0] = True
    _run_both("ik.sort", [b], {"axis": 1, "descending": True})


def test_negative_and_duplicate_indices() -> None:
    data = rng.standard_normal((4, 5)).astype(np.float32)
    idx = np.array([[-1, 0, -5], [2, -2, 4]], np.int64)
    _run_both("ik.gather_elements", [data, idx], {"axis": 1})
    dup = np.array([[1, 1, -4], [0, -1, 4], [3, 3, 3]], np.int32)  # -4 == 1 on a dim of 5: duplicates
    upd = rng.standard_normal((3, 3)).astype(np.float32)
    for red in ("none", "add", "mul", "max", "min"):
        _run_both("ik.scatter_elements", [data, dup, upd], {"axis": 1, "reduction": red})
    nd = np.array([[[-1, 0], [1, -5]], [[0, 4], [-4, 2]]], np.int64)
    _run_both("ik.gather_nd", [data, nd], {})
    rows = np.array([[-1], [3], [0], [-4]], np.int32)  # rows 3 and -1 collide
    upd2 = rng.standard_normal((4, 5)).astype(np.float32)
    for red in ("none", "add", "max"):
        _run_both("ik.scatter_nd", [data, rows, upd2], {"reduction": red})
    batched = rng.standard_normal((2, 3, 4)).astype(np.float32)
    _run_both("ik.gather_nd", [batched, np.array([[[-1, 0]], [[2, -4]]], np.int64)], {"batch_dims": 1})


def test_scatter_of_bools_and_unsigned() -> None:
    b = np.array([[True, False, True], [False, False, True]])
    _run_both("ik.scatter_elements", [b, np.array([[2, 0]], np.int64), np.array([[False, True]])],
              {"axis": 1, "reduction": "none"})
    u = rng.integers(0, 200, size=(3, 4)).astype(np.uint8)
    _run_both("ik.scatter_nd", [u, np.array([[1], [-1]], np.int64), rng.integers(0, 200, (2, 4)).astype(np.uint8)],
              {"reduction": "max"})


def test_dynamic_slices_clamp_their_starts() -> None:
    x = rng.standard_normal((5, 6)).astype(np.float32)
    for starts in ([-3, 4], [7, -100], [1, 2]):
        st = np.array(starts, np.int32)
        _run_both("ik.dynamic_slice", [x, st], {"sizes": (3, 4)})
        upd = rng.standard_normal((2, 5)).astype(np.float32)
        _run_both("ik.dynamic_update_slice", [x, upd, st.astype(np.int64)], {})


def test_floored_division_and_remainder() -> None:
    x = np.array([7.0, -7.0, 7.0, -7.0, 1.0, 0.0, -0.5, np.inf, 5.0, -3.0], np.float32)
    y = np.array([2.0, 2.0, -2.0, -2.0, 0.1, 3.0, 2.0, 2.0, 0.0, 0.0], np.float32)
    for name in ("ik.mod", "ik.floor_div"):
        _run_both(name, [x, y], {})
        _run_both(name, [x.astype(np.float64), y.astype(np.float64)], {})
    xi = np.array([7, -7, 7, -7, 0, 5, -128], np.int8)
    yi = np.array([2, 2, -2, -2, 3, 0, 0], np.int8)  # integer x / 0 is 0 in the reference
    for dt in (np.int8, np.int16, np.int32, np.int64):
        for name in ("ik.mod", "ik.floor_div"):
            _run_both(name, [xi.astype(dt), yi.astype(dt)], {})
    xu, yu = np.array([7, 200, 5, 0], np.uint8), np.array([2, 7, 0, 3], np.uint8)
    for dt in (np.uint8, np.uint16, np.uint64):
        _run_both("ik.mod", [xu.astype(dt), yu.astype(dt)], {})
        _run_both("ik.floor_div", [xu.astype(dt), yu.astype(dt)], {})


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64])
def test_shifts_and_bit_counts(dt: Any) -> None:
    bits = 8 * np.dtype(dt).itemsize
    info = np.iinfo(dt)
    x = np.array([1, 5, info.max, info.min, 3, info.max // 3 + 1, 6, 2], dt)
    n = np.array([0, 1, 3, 1, bits - 1, bits, bits + 3, 2], dt)
    for name in ("ik.shift_left", "ik.shift_right_logical", "ik.shift_right_arithmetic"):
        _run_both(name, [x, n], {})
    if np.dtype(dt).kind == "i":
        _run_both("ik.shift_right_arithmetic", [x, np.array([-1, 1, 2, -3, 0, 1, 1, 1], dt)], {})
    for name in ("ik.popcount", "ik.clz", "ik.bitwise_not"):
        _run_both(name, [x], {})
    _run_both("ik.bitwise_xor", [x, n], {})


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64, np.float16])
def test_scans_of_narrow_types_wrap_like_the_reference(dt: Any) -> None:
    x = (rng.integers(1, 90, size=(3, 6)) * (1 if np.dtype(dt).kind in "uf" else rng.choice([-1, 1], (3, 6))))
    x = x.astype(dt)
    for name in ("ik.cumsum", "ik.cumprod", "ik.cummax", "ik.cummin"):
        _run_both(name, [x], {"axis": 1, "exclusive": True, "reverse": name in ("ik.cumsum", "ik.cummin")})


def test_scans_propagate_nan() -> None:
    for name in ("ik.cummax", "ik.cummin", "ik.cumprod", "ik.cumsum"):
        _run_both(name, [NAN_ROWS], {"axis": 1})
        _run_both(name, [NAN_ROWS], {"axis": 1, "reverse": True, "exclusive": True})


def test_reduce_window_windows() -> None:
    x = rng.standard_normal((1, 2, 7, 6)).astype(np.float32)
    attrs = {"window": (1, 1, 3, 2), "strides": (1, 1, 2, 1), "pads": (0, 0, 1, 0, 0, 0, 2, 1),
             "dilations": (1, 1, 2, 2)}
    for kind in ("sum", "max", "min"):
        _run_both("ik.reduce_window", [x], {"kind": kind, **attrs})
    xi = rng.integers(-100, 100, size=(2, 9)).astype(np.int16)
    for kind in ("sum", "max", "min"):
        _run_both("ik.reduce_window", [xi], {"kind": kind, "window": (1, 4), "strides": (1, 3), "pads": (0, 2, 0, 2)})
    _run_both("ik.reduce_window", [rng.integers(0, 250, size=(4, 5)).astype(np.uint8)],
              {"kind": "sum", "window": (2, 3)})


def _conv_case(ns: int, lhs: int, pad: int, groups: int = 1, bias: bool = True) -> tuple[list[np.ndarray], dict]:
    sp = (5, 4, 3)[:ns]
    x = rng.standard_normal((2, 2 * groups, *sp)).astype(np.float32)
    w = rng.standard_normal((3 * groups, 2, *(3, 2, 2)[:ns])).astype(np.float32)
    ins = [x, w] + ([rng.standard_normal(3 * groups).astype(np.float32)] if bias else [])
    attrs = {"strides": (2,) + (1,) * (ns - 1), "padding": (pad,) * ns + (1,) * ns, "dilations": (1,) * (ns - 1) + (2,),
             "lhs_dilation": (lhs,) * ns, "groups": groups}
    return ins, attrs


@pytest.mark.parametrize("ns", [1, 2, 3])
def test_nd_and_transposed_convolution(ns: int) -> None:
    for lhs, pad in ((1, 1), (2, 0), (3, -1)):  # -1: negative padding crops (transposed conv with a large pad)
        ins, attrs = _conv_case(ns, lhs, pad, groups=2 if ns == 2 else 1, bias=ns != 3)
        _run_both("ik.conv", ins, attrs)


def test_integer_convolution_is_exact_on_xla_and_refused_on_ort() -> None:
    x = rng.integers(-50, 50, size=(1, 2, 6)).astype(np.int32)
    w = rng.integers(-50, 50, size=(2, 2, 3)).astype(np.int32)
    m = one_op_module("ik.conv", Sample([x, w], {"padding": (1, 1)}))
    _check("xla-cpu", m, [x, w])
    with pytest.raises(TargetUnavailable, match="'ik.conv' at .*i32"):
        get_target("ort").lower(m)


def test_ort_refuses_f64_where_onnxruntime_has_no_double_kernel() -> None:
    x = rng.uniform(-0.9, 0.9, size=(3, 4))
    for name in ("ik.atan", "ik.asin"):
        with pytest.raises(TargetUnavailable, match=f"'{name}' at .*double"):
            get_target("ort").lower(one_op_module(name, Sample([x], {})))
        _check("xla-cpu", one_op_module(name, Sample([x], {})), [x])
    for name in ("ik.tan", "ik.sinh", "ik.cosh", "ik.asinh", "ik.atanh"):  # f64 identities instead
        _run_both(name, [x], {})
    _run_both("ik.acosh", [1.5 + np.abs(x)], {})


def test_special_functions_at_their_poles_on_xla() -> None:
    x = np.array([0.0, -0.0, -1.0, -2.5, 1e-8, 3.5, np.inf, np.nan], np.float32)
    for name in ("ik.lgamma", "ik.digamma"):
        _check("xla-cpu", one_op_module(name, Sample([x], {})), [x])
    edges = np.array([-1.0, -0.5, 0.0, 0.999, 1.0, 2.0], np.float32)
    _check("xla-cpu", one_op_module("ik.erfinv", Sample([edges], {})), [edges])


def test_atan2_quadrants_signed_zeros_and_infinities() -> None:
    v = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5], np.float32)
    y, x = np.meshgrid(v, v, indexing="ij")
    _run_both("ik.atan2", [y.copy(), x.copy()], {})


# --------------------------------------------------------------------------------------------
# Attention: a row with every key masked is zeros (attention_reference), on both targets
# --------------------------------------------------------------------------------------------


def _masked_attention(bias: bool) -> tuple[Any, list[np.ndarray]]:
    q = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    k = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
    v = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
    if bias:
        b = rng.standard_normal((1, 1, 3, 5)).astype(np.float32)
        b[..., 1, :] = -np.inf
        return one_op_module("ik.attention", Sample([q, k, v, b], {"scale": 0.5}, slots=(0, 1, 2, None, 3))), \
            [q, k, v, b]
    mask = rng.random((1, 2, 3, 5)) < 0.6
    mask[0, 0, 1, :] = False
    mask[0, 1, 2, :] = False
    mask[0, :, 0, 0] = True
    return one_op_module("ik.attention", Sample([q, k, v, mask], {"scale": 0.5})), [q, k, v, mask]


@pytest.mark.parametrize("bias", [False, True], ids=["mask", "bias"])
def test_fully_masked_attention_rows_are_zeros(bias: bool) -> None:
    from irkit.targets.ort import OrtTarget

    m, ins = _masked_attention(bias)
    want = _oracle(m, ins)
    dead = (0, 0, 1) if not bias else (0, slice(None), 1)
    assert np.all(want[0][dead] == 0)
    for t in (OrtTarget("onnx"), OrtTarget("decomposed"), get_target("xla-cpu")):
        got = t.run(t.lower(m), ins)
        assert np.all(np.isfinite(got[0])) and np.all(got[0][dead] == 0), t.name
        assert compare_all(got, want, module_tolerance(m)).ok, t.name


# --------------------------------------------------------------------------------------------
# TPU: the new ops compile ahead of time
# --------------------------------------------------------------------------------------------

TPU_NO_KERNEL: dict[str, str] = {}
"""New ops XLA:TPU cannot compile (none so far)."""


@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu not installed (pip install irkit[tpu])")
def test_new_ops_compile_for_tpu_v5e() -> None:
    t = get_target("xla-tpu-v5e")
    failed: list[str] = []
    compiled = 0
    for name in NEW_OPS:
        if name in TPU_NO_KERNEL:
            continue
        for s in samples(name):
            if all(np.dtype(x.dtype) in (np.float32, np.int32, np.int64, np.bool_) for x in s.inputs):
                break
        else:
            failed.append(f"{name}: no f32/i32 sample to compile")
            continue
        compiled += 1
        try:
            art = t.lower(one_op_module(name, s))
            assert "ENTRY" in art.files["hlo.txt"] and art.runner is None
        except Exception as e:  # noqa: BLE001 -- collect them all, one assertion
            failed.append(f"{name}: {str(e).splitlines()[0][:200]}")
    assert not failed, failed
    assert compiled == len(NEW_OPS) - len(TPU_NO_KERNEL)


def test_out_of_range_gathers_are_never_a_plausible_number() -> None:
    """The reference raises on an out-of-range index; onnxruntime raises too, and XLA (which cannot
    raise) reads NaN rather than a clamped neighbour."""
    data = rng.standard_normal((3, 4)).astype(np.float32)
    bad = np.array([[0, 4], [1, -5]], np.int64)
    m = one_op_module("ik.gather_elements", Sample([data, bad], {"axis": 1}))
    with pytest.raises(InterpError, match="out of range"):
        run(m, [data, bad])
    t = get_target("xla-cpu")
    got = t.run(t.lower(m), [data, bad])[0]
    assert got[0, 0] == data[0, 0] and np.isnan(got[0, 1]) and np.isnan(got[1, 1])
    ids = np.array([1, 3, -4, -3], np.int32)
    g = one_op_module("ik.gather", Sample([data, ids], {"axis": 0}))
    got = t.run(t.lower(g), [data, ids])[0]
    assert np.array_equal(got[0], data[1]) and np.array_equal(got[3], data[0])
    assert np.all(np.isnan(got[1])) and np.all(np.isnan(got[2]))
    o = get_target("ort")
    with pytest.raises(Exception, match="(?i)index|out of|bound"):
        o.run(o.lower(m), [data, bad])
