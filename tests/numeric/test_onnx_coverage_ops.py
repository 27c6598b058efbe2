"""Converters added for the ONNX backend node suite: each small model is imported, run on the float64
interpreter and on onnxruntime through irkit's ``ort`` target, and compared with the ONNX reference
implementation (``onnx.reference.ReferenceEvaluator``) on random, non-trivial inputs."""

from __future__ import annotations

import warnings
from typing import Any

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from irkit.targets.registry import get_target
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from irkit.frontends.common import UnsupportedOpsError
from irkit.frontends.onnx import import_onnx
from irkit.interp import run
from irkit.ir import verify


def _model(nodes: list, inputs: list, outputs: list, inits: list = (), opset: int = 20) -> Any:
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _vi(name: str, elem: int, shape: list | None) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def _expected(model: Any, feeds: dict[str, np.ndarray], oracle: str = "reference") -> list[np.ndarray]:
    if oracle == "onnxruntime":
        import onnxruntime as ort

        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return [np.asarray(o) for o in sess.run(None, feeds)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]


def _close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def check(model: Any, feeds: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-5,
          target: str | None = "ort", oracle: str = "reference") -> Any:
    """``oracle`` vs irkit's interpreter (and ``target``) on ``feeds``; returns the imported module."""
    m = import_onnx(model)
    verify(m)
    xs = list(feeds.values())
    want = _expected(model, feeds, oracle)
    for got, w in zip(run(m, xs), want):
        _close(got, w, rtol, atol, "interpreter")
    if target is not None:
        for got, w in zip(get_target(target).run_module(m, xs), want):
            _close(got, w, rtol, atol, target)
    return m


RNG = np.random.default_rng(7)


# ---------------------------------------------------------------------------
# Tile with repeats from Shape (x.repeat(B, 1, 1) in dynamo exports)


def test_tile_with_symbolic_repeats_over_a_dynamic_batch() -> None:
    w = RNG.standard_normal((1, 4, 8)).astype(np.float32)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             helper.make_node("Concat", ["b", "one", "one"], ["reps"], axis=0),
             helper.make_node("Tile", ["w", "reps"], ["t"]),
             helper.make_node("Add", ["t", "x"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([0], np.int64), "i0"),
             numpy_helper.from_array(np.array([1], np.int64), "one")]
    model = _model(nodes, [_vi("x", TP.FLOAT, ["B", 4, 8])], [_vi("y", TP.FLOAT, ["B", 4, 8])], inits, opset=17)
    m = None
    for b in (1, 3):
        m = check(model, {"x": RNG.standard_normal((b, 4, 8)).astype(np.float32)})
    assert m is not None and "B" in str(m.entry.args[0].type)


# ---------------------------------------------------------------------------
# DFT / STFT (a matmul with a DFT matrix)


@pytest.mark.parametrize("attrs,shape,axis,length", [
    ({}, (2, 6, 3, 1), 1, None),                       # real forward
    ({}, (2, 5, 3, 2), 2, None),                       # complex forward on another axis
    ({"onesided": 1}, (2, 8, 3, 1), 1, None),          # rfft
    ({"inverse": 1}, (2, 7, 3, 2), 1, None),           # complex inverse
    ({"inverse": 1, "onesided": 1}, (2, 5, 3, 2), 1, None),  # irfft (default length 8)
    ({"inverse": 1, "onesided": 1}, (2, 5, 3, 2), 1, 9),     # irfft, odd length
    ({}, (2, 6, 3, 2), 1, 4),                          # truncated
    ({}, (2, 6, 3, 1), -2 - 1, 9),                     # zero padded, negative axis
])
def test_dft_matches_the_reference(attrs: dict, shape: tuple, axis: int, length: int | None) -> None:
    names = ["x", "len" if length is not None else "", "axis"]
    inits = [numpy_helper.from_array(np.array(axis, np.int64), "axis")]
    if length is not None:
        inits.append(numpy_helper.from_array(np.array(length, np.int64), "len"))
    model = _model([helper.make_node("DFT", names, ["y"], **attrs)], [_vi("x", TP.FLOAT, list(shape))],
                   [_vi("y", TP.FLOAT, None)], inits)
    check(model, {"x": RNG.standard_normal(shape).astype(np.float32)}, rtol=1e-4, atol=1e-4)


def test_dft_opset17_axis_attribute_and_stft_with_window() -> None:
    model = _model([helper.make_node("DFT", ["x"], ["y"], axis=2)], [_vi("x", TP.FLOAT, [1, 3, 10, 1])],
                   [_vi("y", TP.FLOAT, None)], opset=17)
    check(model, {"x": RNG.standard_normal((1, 3, 10, 1)).astype(np.float32)}, rtol=1e-4, atol=1e-4)
    inits = [numpy_helper.from_array(np.array(3, np.int64), "step")]
    model = _model([helper.make_node("STFT", ["sig", "step", "win"], ["y"])],
                   [_vi("sig", TP.FLOAT, [2, 20, 1]), _vi("win", TP.FLOAT, [8])], [_vi("y", TP.FLOAT, None)],
                   inits, opset=17)
    check(model, {"sig": RNG.standard_normal((2, 20, 1)).astype(np.float32),
                  "win": np.hanning(8).astype(np.float32)}, rtol=1e-4, atol=1e-4)


def test_dft_over_a_dynamic_length_is_refused() -> None:
    model = _model([helper.make_node("DFT", ["x"], ["y"], axis=1)], [_vi("x", TP.FLOAT, [1, "N", 1])],
                   [_vi("y", TP.FLOAT, None)], opset=17)
    with pytest.raises(UnsupportedOpsError, match="DFT over a dynamic length"):
        import_onnx(model)


# ---------------------------------------------------------------------------
# Det, MelWeightMatrix


def test_det_closed_forms_and_refusal_above_3x3() -> None:
    for n in (1, 2, 3):
        model = _model([helper.make_node("Det", ["x"], ["y"])], [_vi("x", TP.FLOAT, [4, n, n])],
                       [_vi("y", TP.FLOAT, None)], opset=22)
        check(model, {"x": RNG.standard_normal((4, n, n)).astype(np.float32)}, rtol=1e-4, atol=1e-5)
    model = _model([helper.make_node("Det", ["x"], ["y"])], [_vi("x", TP.FLOAT, [4, 4])],
                   [_vi("y", TP.FLOAT, None)], opset=22)
    with pytest.raises(UnsupportedOpsError, match="Det of 4x4"):
        import_onnx(model)


def test_mel_weight_matrix_is_built_at_import() -> None:
    vals = [("bins", np.array(6, np.int32)), ("dft", np.array(32, np.int32)), ("rate", np.array(8000, np.int32)),
            ("lo", np.array(100.0, np.float32)), ("hi", np.array(3500.0, np.float32))]
    model = _model([helper.make_node("MelWeightMatrix", [n for n, _ in vals], ["y"])], [],
                   [_vi("y", TP.FLOAT, None)], [numpy_helper.from_array(v, n) for n, v in vals], opset=17)
    m = check(model, {}, target=None)
    want = _expected(model, {})[0]
    assert want.shape == (17, 6) and np.count_nonzero(want) > 6
    assert [op.name for op in m.entry.body.ops][:1] == ["ik.constant"]


# ---------------------------------------------------------------------------
# BitCast, float8 Cast / QuantizeLinear / DequantizeLinear


def test_bitcast_same_width() -> None:
    x = np.array([[1.0, -0.0, np.nan, -np.inf], [3.5, 1e-40, -2.0, 7.0]], np.float32)
    model = _model([helper.make_node("BitCast", ["x"], ["y"], to=TP.INT32)], [_vi("x", TP.FLOAT, [2, 4])],
                   [_vi("y", TP.INT32, [2, 4])], opset=26)
    m = import_onnx(model)
    want = x.view(np.int32)
    np.testing.assert_array_equal(run(m, [x])[0], want)
    np.testing.assert_array_equal(get_target("ort").run_module(m, [x])[0], want)


@pytest.mark.parametrize("to,saturate", [(TP.FLOAT8E4M3FN, 1), (TP.FLOAT8E4M3FNUZ, 1), (TP.FLOAT8E5M2, 1),
                                         (TP.FLOAT8E5M2FNUZ, 1), (TP.FLOAT8E5M2, 0), (TP.FLOAT8E4M3FNUZ, 0)])
def test_float8_cast_round_trip(to: int, saturate: int) -> None:
    x = np.array([0.3, -1.7, 1e6, -1e6, np.inf, -np.inf, np.nan, 1e-7, 240.0, 17.2], np.float32)
    nodes = [helper.make_node("Cast", ["x"], ["q"], to=to, saturate=saturate),
             helper.make_node("Cast", ["q"], ["y"], to=TP.FLOAT)]
    model = _model(nodes, [_vi("x", TP.FLOAT, [10])], [_vi("y", TP.FLOAT, [10])], opset=21)
    check(model, {"x": x}, rtol=0, atol=0, target="xla-cpu")


def test_float8_quantize_dequantize() -> None:
    x = (RNG.standard_normal((3, 5)) * 50).astype(np.float32)
    x[0, 0] = np.inf
    scale = numpy_helper.from_array(np.array(2.0, np.float32), "s")
    zp = helper.make_tensor("zp", TP.FLOAT8E4M3FN, [], [0.0])
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"])]
    model = _model(nodes, [_vi("x", TP.FLOAT, [3, 5])], [_vi("y", TP.FLOAT, [3, 5])], [scale, zp], opset=21)
    check(model, {"x": x}, rtol=0, atol=0)


def test_float8_initializer_loads_bit_patterns() -> None:
    vals = np.array([1.5, -448.0, 0.0625], dtype=ml_dtypes.float8_e4m3fn)
    t = helper.make_tensor("c", TP.FLOAT8E4M3FN, [3], vals.view(np.uint8).tobytes(), raw=True)
    model = _model([helper.make_node("Cast", ["c"], ["y"], to=TP.FLOAT)], [], [_vi("y", TP.FLOAT, [3])], [t],
                   opset=21)
    np.testing.assert_array_equal(run(import_onnx(model), [])[0], vals.astype(np.float32))


# ---------------------------------------------------------------------------
# QLinearConv, TfIdfVectorizer, empty constants


def test_qlinear_conv_per_channel_with_bias() -> None:
    x = RNG.integers(0, 255, (1, 2, 6, 6)).astype(np.uint8)
    w = RNG.integers(0, 255, (3, 2, 3, 3)).astype(np.uint8)
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("xs", np.array(0.02, np.float32)), ("xz", np.array(120, np.uint8)), ("w", w),
        ("ws", np.array([0.01, 0.03, 0.02], np.float32)), ("wz", np.array([100, 130, 128], np.uint8)),
        ("ys", np.array(0.5, np.float32)), ("yz", np.array(90, np.uint8)), ("b", np.array([-500, 40, 900], np.int32))]]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                            pads=[1, 1, 1, 1])
    model = _model([node], [_vi("x", TP.UINT8, [1, 2, 6, 6])], [_vi("y", TP.UINT8, None)], inits, opset=10)
    check(model, {"x": x}, rtol=0, atol=1)  # ties may round either way between implementations


@pytest.mark.parametrize("mode,weights", [("TF", None), ("IDF", None), ("IDF", [0.5, 2, 3, 4, 5, 6, 7]),
                                          ("TFIDF", [0.5, 2, 3, 4, 5, 6, 7])])
def test_tfidf_vectorizer_modes(mode: str, weights: list | None) -> None:
    attrs: dict[str, Any] = dict(max_gram_length=2, min_gram_length=1, max_skip_count=2, mode=mode,
                                 ngram_counts=[0, 4], ngram_indexes=[0, 1, 2, 3, 4, 5, 6],
                                 pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7])
    if weights:
        attrs["weights"] = weights
    model = _model([helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)], [_vi("x", TP.INT64, [2, 9])],
                   [_vi("y", TP.FLOAT, None)], opset=9)
    x = np.array([[2, 3, 5, 4, 5, 6, 7, 8, 6], [5, 6, 6, 7, 2, 5, 6, 3, 3]], np.int64)
    # onnx.reference's IDF without weights fails on its own (len(None)); onnxruntime is the oracle there.
    check(model, {"x": x}, rtol=0, atol=0, oracle="onnxruntime" if mode == "IDF" and not weights else "reference")


def test_empty_constant_of_shape_runs_on_xla() -> None:
    value = helper.make_tensor("value", TP.INT32, [1], [0])
    model = _model([helper.make_node("ConstantOfShape", ["s"], ["c"], value=value),
                    helper.make_node("Concat", ["c", "x"], ["y"], axis=0)],
                   [_vi("x", TP.INT32, [3])], [_vi("y", TP.INT32, [3])],
                   [numpy_helper.from_array(np.array([0], np.int64), "s")], opset=20)
    check(model, {"x": np.array([4, -2, 9], np.int32)}, rtol=0, atol=0, target="xla-cpu")


def test_deform_conv_groups_strides_dilations_mask() -> None:
    x = RNG.standard_normal((1, 4, 5, 6)).astype(np.float32)
    w = RNG.standard_normal((2, 2, 2, 3)).astype(np.float32)
    # 2 offset groups x 2 coords x 6 taps; output (5+2-3)//2+1 = 3 by (6+1-5)//1+1 = 3
    off = (RNG.standard_normal((1, 24, 3, 3)) * 2.5).astype(np.float32)  # many samples fall outside
    mask = RNG.uniform(0, 1, (1, 12, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(2).astype(np.float32)
    node = helper.make_node("DeformConv", ["x", "w", "off", "b", "mask"], ["y"], group=2, offset_group=2,
                            strides=[2, 1], dilations=[2, 2], pads=[1, 0, 1, 1], kernel_shape=[2, 3])
    model = _model([node], [_vi("x", TP.FLOAT, [1, 4, 5, 6]), _vi("w", TP.FLOAT, [2, 2, 2, 3]),
                            _vi("off", TP.FLOAT, [1, 24, 3, 3]), _vi("b", TP.FLOAT, [2]),
                            _vi("mask", TP.FLOAT, [1, 12, 3, 3])], [_vi("y", TP.FLOAT, None)], opset=22)
    # onnxruntime as the oracle: the ONNX reference loops in Python (one GridSample per output element).
    check(model, {"x": x, "w": w, "off": off, "b": b, "mask": mask}, rtol=1e-4, atol=1e-4, oracle="onnxruntime")


def test_max_unpool_after_max_pool() -> None:
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    model = _model(nodes, [_vi("x", TP.FLOAT, [2, 3, 4, 6])], [_vi("y", TP.FLOAT, None)], opset=22)
    check(model, {"x": RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)}, rtol=0, atol=0)


def test_reshape_of_an_empty_tensor_runs_on_ort() -> None:
    shape = numpy_helper.from_array(np.array([3, 4, 0], np.int64), "shape")
    model = _model([helper.make_node("Reshape", ["x", "shape"], ["r"], allowzero=1),
                    helper.make_node("Transpose", ["r"], ["y"], perm=[2, 0, 1])],
                   [_vi("x", TP.FLOAT, [0, 3, 4])], [_vi("y", TP.FLOAT, None)], [shape], opset=19)
    check(model, {"x": np.zeros((0, 3, 4), np.float32)}, rtol=0, atol=0)
