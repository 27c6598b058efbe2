"""The ort session's in-place KV-cache rewrite (targets/ort_session.py, ``inplace_updates``) on a hand-built
``index_copy``-style graph: applied when the scatter is the cache's only reader, refused otherwise."""

from __future__ import annotations

import numpy as np
from irkit.targets.ort_session import inplace_updates


def _model(extra_reader: bool):
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    nodes = [helper.make_node("Transpose", ["cache"], ["t"], perm=[2, 0, 1, 3]),
             helper.make_node("ScatterND", ["t", "idx", "upd"], ["s"]),
             helper.make_node("Transpose", ["s"], ["new"], perm=[1, 2, 0, 3]),
             helper.make_node("ReduceSum", ["new"], ["total"], keepdims=0),
             helper.make_node("Identity", ["new"], ["cache_out"])]
    outs = [helper.make_tensor_value_info("total", f, []), helper.make_tensor_value_info("cache_out", f, [1, 2, 6, 3])]
    if extra_reader:
        nodes.append(helper.make_node("ReduceMax", ["cache"], ["old_max"], keepdims=0))
        outs.append(helper.make_tensor_value_info("old_max", f, []))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("cache", f, [1, 2, 6, 3]),
                                       helper.make_tensor_value_info("idx", TensorProto.INT64, [1, 1]),
                                       helper.make_tensor_value_info("upd", f, [1, 1, 2, 3])], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def test_inplace_rewrite_updates_the_callers_buffer():
    import onnxruntime as ort

    m = _model(False)
    assert inplace_updates(m, {1: 0}) == {1}
    assert [n.op_type for n in m.graph.node].count("Transpose") == 1  # only the small update is transposed
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    cache = rng.standard_normal((1, 2, 6, 3)).astype(np.float32)
    want = cache.copy()
    buf = ort.OrtValue.ortvalue_from_numpy(cache)
    for pos in (0, 3, 5):
        upd = rng.standard_normal((1, 1, 2, 3)).astype(np.float32)
        want[:, :, pos, :] = upd[0]
        b = sess.io_binding()
        b.bind_ortvalue_input("cache", buf)
        b.bind_cpu_input("idx", np.array([[pos]], np.int64))
        b.bind_cpu_input("upd", upd)
        b.bind_output("total")
        b.bind_ortvalue_output("cache_out", buf)  # the output is the argument's own buffer
        sess.run_with_iobinding(b)
        np.testing.assert_allclose(b.get_outputs()[0].numpy(), want.sum(), rtol=1e-5)
        np.testing.assert_array_equal(buf.numpy(), want)


def test_inplace_rewrite_refused_when_the_old_value_is_read():
    m = _model(True)
    before = m.SerializeToString()
    assert inplace_updates(m, {1: 0}) == set()
    assert m.SerializeToString() == before  # untouched: the session keeps double buffering
