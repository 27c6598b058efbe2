"""The coverage ops (issue 14) on ``ort`` and ``xla-cpu`` against the float64 interpreter.

Every new op runs alone on both targets for each of its samples (``irkit.testing.op_samples``:
special values, ties, negative indices, narrow and unsigned integers) and must match the oracle
under ``module_tolerance`` and keep the IR's dtypes, or be refused with a one-line
``TargetUnavailable`` naming the op (only where the table below says why). Then the edge cases
the lowerings handle by hand: NaN through onnxruntime's reductions and arg-reductions, the
sort order of NaN and -0, last-wins duplicate scatters, XLA's clamped starts, integer division
by zero, shifts by the bit width, transposed and N-d convolutions, fully masked attention rows.
``xla-tpu-v5e`` must compile the new ops ahead of time (float32 / int32 samples).

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

from irkit.check import compare_all, module_tolerance
from irkit.interp import run
from irkit.ir.types import DType
from irkit.targets.base import TargetUnavailable
from irkit.targets.registry import get_target
from irkit.testing.op_samples import Sample, one_op_module, sample_id, samples

NEW_OPS = sorted(
    {f"ik.{n}" for n in (
        "tan asin acos atan sinh cosh asinh acosh atanh log1p expm1 round trunc erfinv lgamma digamma "
        "isnan isinf isfinite bitwise_not popcount clz atan2 nextafter bitwise_and bitwise_or bitwise_xor "
        "shift_left shift_right_logical shift_right_arithmetic mod floor_div argmin argmax cumsum cumprod cummax "
        "cummin gather_elements gather_nd scatter_elements scatter_nd dynamic_slice dynamic_update_slice reverse "
        "sort topk reduce_window conv"
    ).split()}
)

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


def test_both_tables_cover_every_registry_op() -> None:
    from irkit.ir import OPS
    from irkit.targets.ort import ORT_RULES
    from irkit.targets.xla_lower import XLA_RULES

    ops = set(OPS) - {"func.return", "ik.yield"}
    assert not ops - ORT_RULES.names and not ops - XLA_RULES.names
    assert get_target("ort").lowering_table is ORT_RULES
    assert all(get_target("ort").supports(n) for n in NEW_OPS)


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


def test_sort_orders_nan_and_signed_zero_like_numpy() -> None:
    x = np.array([[0.0, -0.0, np.nan, -1.0, 0.0, -np.nan, np.inf, -0.0, 2.0]], np.float32)
    for desc in (False, True):
        _run_both("ik.sort", [x], {"descending": desc})
        _run_both("ik.sort", [x.astype(np.float16)], {"descending": desc})
    _run_both("ik.topk", [x], {"k": 5})
    _run_both("ik.topk", [x], {"k": 5, "largest": False, "sorted": False})


def test_sort_and_topk_of_ints_and_bools() -> None:
    for dt in (np.int64, np.uint8, np.int16, np.uint32):
        x = rng.integers(0, 4, size=(2, 7)).astype(dt)
        _run_both("ik.sort", [x], {"descending": True})
        _run_both("ik.topk", [x], {"k": 3, "largest": False})
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
        _run_both("ik.dynamic_update_slice", [x, rng.standard_normal((2, 5)).astype(np.float32), st.astype(np.int64)], {})


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
    _check("xla-cpu", one_op_module("ik.erfinv", Sample([np.array([-1.0, -0.5, 0.0, 0.999, 1.0, 2.0], np.float32)], {})),
           [np.array([-1.0, -0.5, 0.0, 0.999, 1.0, 2.0], np.float32)])


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
    failed = []
    for name in NEW_OPS:
        if name in TPU_NO_KERNEL:
            continue
        for s in samples(name):
            if all(np.dtype(x.dtype) in (np.float32, np.int32, np.bool_) for x in s.inputs):
                break
        else:
            continue
        try:
            art = t.lower(one_op_module(name, s))
            assert "ENTRY" in art.files["hlo.txt"] and art.runner is None
        except Exception as e:  # collect them all, one assertion
            failed.append(f"{name}: {str(e).splitlines()[0][:200]}")
    assert not failed, failed
