"""tvm-llvm on empty tensors: empty inputs (the VM wants compact strides) and empty results computed
from constants only (folded into an empty constant, which TVM's executable cannot load back)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from irkit.frontends.onnx import import_onnx  # noqa: E402
from irkit.interp import run as interp_run  # noqa: E402


def _tvm() -> object:
    from irkit.targets.registry import get_target

    t = get_target("tvm-llvm")
    av = t.availability()
    if not av.can_run:
        pytest.skip(f"tvm-llvm cannot run here: {av.reason}")
    return t


def _model(nodes: list, inputs: list, outputs: list, inits: list | None = None) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits or [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def _check(model: onnx.ModelProto, xs: list[np.ndarray], want_shapes: list[tuple[int, ...]]) -> None:
    t = _tvm()
    m = import_onnx(model)
    want = [np.asarray(o) for o in interp_run(m, xs)]
    got = [np.asarray(o) for o in t.run_module(m, xs)]  # type: ignore[attr-defined]
    assert [g.shape for g in got] == [w.shape for w in want] == want_shapes
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_empty_input_reduce_and_a_live_output() -> None:
    # ReduceSum over a non-empty axis of an empty input; beside it, a non-empty output of a second input.
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [2])
    model = _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1),
                    helper.make_node("Neg", ["z"], ["w"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 0, 4]),
                    helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 0, 1]),
                    helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])], [axes])
    z = np.array([1.5, -2.0, 3.25], np.float32)
    _check(model, [np.zeros((2, 0, 4), np.float32), z], [(2, 0, 1), (3,)])


def test_empty_result_from_constants() -> None:
    # Reshape with allowzero to a shape with a 0: the result is empty and depends on no input value.
    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [3, 4, 0])
    model = _model([helper.make_node("Reshape", ["x", "shape"], ["y"], allowzero=1),
                    helper.make_node("Relu", ["v"], ["r"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3, 4]),
                    helper.make_tensor_value_info("v", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4, 0]),
                    helper.make_tensor_value_info("r", TensorProto.FLOAT, [4])], [shape])
    v = np.array([-1.0, 2.0, -0.5, 4.0], np.float32)
    _check(model, [np.zeros((0, 3, 4), np.float32), v], [(3, 4, 0), (4,)])
