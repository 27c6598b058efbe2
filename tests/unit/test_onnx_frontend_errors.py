"""Broken, hostile and unsupported ONNX files: one clear line each, fast, bounded memory.

Every case writes a bad file to a temp folder, imports it, and checks the error
is a FrontendError (or UnsupportedOpsError) whose one-line message names the
file and the problem, raised in well under a second without allocating what
the file declares.  One case runs the command line to check the exit status
and that no traceback is printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper

from irkit.frontends.common import FrontendError, UnsupportedOpsError
from irkit.frontends.onnx import import_onnx

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


def raw_tensor(name: str, dims: list[int], raw: bytes = b"") -> Any:
    """A float32 TensorProto built by hand (onnx.helper refuses inconsistent ones, which is the point)."""
    t = TensorProto()
    t.name = name
    t.data_type = F32
    t.dims.extend(dims)
    if raw:
        t.raw_data = raw
    return t


def vi(name: str, elem: int, shape: list | None) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def model_of(nodes: list, inputs: list, outputs: list, inits: list = (), opset: int = 20) -> Any:
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def good_model() -> Any:
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 7.0, "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="r")]
    return model_of(nodes, [vi("x", F32, ["B", 4])], [vi("y", F32, ["B", 3])], [w])


def write(tmp: Path, m: Any, name: str = "model.onnx") -> Path:
    p = tmp / name
    p.write_bytes(m if isinstance(m, bytes) else m.SerializeToString())
    return p


def expect_error(path: Path | Any, *needles: str, kind: type = FrontendError, **kw: Any) -> str:
    """Import must fail with ``kind`` within a second; the message is one line naming the file."""
    t0 = time.perf_counter()
    with pytest.raises(kind) as ei:
        import_onnx(path, **kw)
    elapsed = time.perf_counter() - t0
    msg = str(ei.value)
    assert elapsed < 1.0, f"took {elapsed:.2f}s"
    assert "\n" not in msg, msg
    if isinstance(path, Path):
        assert str(path) in msg, msg
    for n in needles:
        assert n.lower() in msg.lower(), f"{n!r} not in: {msg}"
    return msg


# ---------------------------------------------------------------------------
# Files that are not ONNX models


def test_the_good_model_imports(tmp_path: Path) -> None:
    m = import_onnx(write(tmp_path, good_model()))
    assert [op.name for op in m.entry.walk()][-2:] == ["ik.relu", "func.return"]


def test_truncated_file(tmp_path: Path) -> None:
    data = good_model().SerializeToString()
    expect_error(write(tmp_path, data[: len(data) // 2]), "truncated")


def test_random_bytes(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    expect_error(write(tmp_path, rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()), "not")


def test_text_file(tmp_path: Path) -> None:
    expect_error(write(tmp_path, b"this is a README, not a model\n" * 20), "not")


def test_empty_file(tmp_path: Path) -> None:
    expect_error(write(tmp_path, b""), "no graph")


def test_protobuf_that_is_not_a_model(tmp_path: Path) -> None:
    t = numpy_helper.from_array(np.ones((3, 3), dtype=np.float32), "t")
    expect_error(write(tmp_path, t.SerializeToString()), "not")
    ver = onnx.OperatorSetIdProto(domain="", version=17)  # parses as a ModelProto with no graph
    expect_error(write(tmp_path, ver.SerializeToString(), "opset.onnx"), "no graph")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    expect_error(tmp_path / "nope.onnx", "no such file")
    expect_error(tmp_path, "directory")


def test_unsupported_opsets(tmp_path: Path) -> None:
    for opset in (29, 30):
        m = good_model()
        m.opset_import[0].version = opset
        expect_error(write(tmp_path, m, f"o{opset}.onnx"), f"opset {opset}", "up to 28")


def test_old_opsets_are_upgraded_by_the_version_converter(tmp_path: Path) -> None:
    """Opsets 1-6 go through onnx.version_converter; 7 and up import directly."""
    x = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4)
    for opset in (6, 7, 9, 13):
        m = good_model()
        m.opset_import[0].version = opset
        m.ir_version = 7
        mod = import_onnx(write(tmp_path, m, f"o{opset}.onnx"))
        from irkit.interp import run

        got = run(mod, [x])[0]
        w = np.arange(12, dtype=np.float32).reshape(4, 3) / 7.0
        np.testing.assert_allclose(got, np.maximum(x @ w, 0), rtol=1e-6)


def test_out_of_scope_ops_name_the_reason(tmp_path: Path) -> None:
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "b", [], [vi("o", F32, [5])])
    nodes = [
        helper.make_node("Greater", ["x", "zero"], ["c0"], name="gt"),
        helper.make_node("ReduceMax", ["c0"], ["c"], keepdims=0, name="any"),
        helper.make_node("If", ["c"], ["i"], then_branch=body, else_branch=body, name="runtime_if"),
        helper.make_node("SequenceEmpty", [], ["s"], name="seq"),
        helper.make_node("Scaler", ["x"], ["ml"], domain="ai.onnx.ml", name="scaler"),
        helper.make_node("Det", ["m"], ["d"], name="det"),
    ]
    zero = numpy_helper.from_array(np.zeros(5, dtype=np.float32), "zero")
    m = model_of(nodes, [vi("x", F32, [5]), vi("m", F32, [4, 4])],
                 [vi("i", F32, None), vi("ml", F32, None), vi("d", F32, None)], [zero])
    m.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    expect_error(write(tmp_path, m), "If (control flow is out of scope", "runtime_if",
                 "SequenceEmpty (sequences are out of scope)", "ai.onnx.ml::Scaler (ai.onnx.ml", "scaler",
                 "Det of 4x4 matrices", "LU decomposition", kind=UnsupportedOpsError)


def test_constants_must_name_graph_inputs(tmp_path: Path) -> None:
    expect_error(write(tmp_path, good_model()), "constants= names nope", constants={"nope": np.ones(2)})


# ---------------------------------------------------------------------------
# Structure


def test_missing_initializer(tmp_path: Path) -> None:
    m = good_model()
    del m.graph.initializer[:]
    expect_error(write(tmp_path, m), "'w'", "missing initializer")


def test_dangling_input(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]
    expect_error(write(tmp_path, model_of(nodes, [vi("x", F32, [2])], [vi("y", F32, [2])])), "'add'", "'ghost'",
                 "dangling")


def test_cycle(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2"),
             helper.make_node("Relu", ["a"], ["y"], name="n3")]
    expect_error(write(tmp_path, model_of(nodes, [vi("x", F32, [2])], [vi("y", F32, [2])])), "cycle", "n1")


def test_unsorted_acyclic_graph_is_sorted(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="second"), helper.make_node("Neg", ["x"], ["a"], name="first")]
    m = import_onnx(write(tmp_path, model_of(nodes, [vi("x", F32, [2])], [vi("y", F32, [2])])))
    assert [op.name for op in m.entry.walk()] == ["ik.neg", "ik.relu", "func.return"]


def test_duplicate_names(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")]
    expect_error(write(tmp_path, model_of(nodes, [vi("x", F32, [2])], [vi("y", F32, [2])])), "duplicate", "'y'")
    m = good_model()
    m.graph.initializer.append(m.graph.initializer[0])
    expect_error(write(tmp_path, m, "dup_init.onnx"), "duplicate", "'w'")
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="self")]
    expect_error(write(tmp_path, model_of(nodes, [vi("x", F32, [2])], [vi("x", F32, [2])]), "dup_in.onnx"),
                 "duplicate", "'x'")


def test_undefined_graph_output(tmp_path: Path) -> None:
    m = good_model()
    m.graph.output[0].name = "nowhere"
    expect_error(write(tmp_path, m), "'nowhere'")


# ---------------------------------------------------------------------------
# Absurd sizes: rejected without allocating them


def _peak_during(fn: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        fn()
    except (FrontendError, UnsupportedOpsError):
        pass
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def test_absurd_input_dim(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    p = write(tmp_path, model_of(nodes, [vi("x", F32, [10**7, 10**7])], [vi("y", F32, None)]))
    expect_error(p, "graph input 'x'", "2^40")
    neg = model_of(nodes, [vi("x", F32, [2, 3])], [vi("y", F32, None)])
    neg.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -5
    expect_error(write(tmp_path, neg, "neg.onnx"), "negative")


def test_absurd_initializer_is_not_allocated(tmp_path: Path) -> None:
    t = raw_tensor("w", [1 << 21, 1 << 20], b"\0" * 16)
    nodes = [helper.make_node("Add", ["x", "w"], ["y"])]
    p = write(tmp_path, model_of(nodes, [vi("x", F32, [1])], [vi("y", F32, None)], [t]))
    expect_error(p, "initializer 'w'", "2^40")
    t2 = raw_tensor("w", [1000, 1000], b"\0" * 16)
    p2 = write(tmp_path, model_of(nodes, [vi("x", F32, [1])], [vi("y", F32, None)], [t2]), "short.onnx")
    expect_error(p2, "initializer 'w'", "holds 16 bytes")
    assert _peak_during(lambda: import_onnx(p2)) < 16 << 20


def test_absurd_constant_of_shape(tmp_path: Path) -> None:
    shape = numpy_helper.from_array(np.array([1 << 30, 1 << 30, 1 << 10], dtype=np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["c"], name="cos"), helper.make_node("Add", ["x", "c"], ["y"])]
    p = write(tmp_path, model_of(nodes, [vi("x", F32, [1])], [vi("y", F32, None)], [shape]))
    expect_error(p, "'cos'", "2^40")
    assert _peak_during(lambda: import_onnx(p)) < 16 << 20


# ---------------------------------------------------------------------------
# External data confinement


def _external_model(location: str) -> Any:
    t = raw_tensor("w", [4, 3])
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "48")):
        e = t.external_data.add()
        e.key, e.value = k, v
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    return model_of(nodes, [vi("x", F32, ["B", 4])], [vi("y", F32, ["B", 3])], [t])


def test_external_data_inside_the_folder_loads(tmp_path: Path) -> None:
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "w.bin").write_bytes(w.tobytes())
    m = import_onnx(write(tmp_path, _external_model("weights/w.bin")))
    const = next(op for op in m.entry.walk() if op.name == "ik.constant")
    np.testing.assert_array_equal(const.attrs["value"].array, w)


def test_external_data_parent_path(tmp_path: Path) -> None:
    (tmp_path / "secret.bin").write_bytes(b"\0" * 48)
    sub = tmp_path / "model"
    sub.mkdir()
    expect_error(write(sub, _external_model("../secret.bin")), "'../secret.bin'", "..")
    expect_error(write(sub, _external_model("a/../../secret.bin"), "m2.onnx"), "..")


def test_external_data_absolute_path(tmp_path: Path) -> None:
    target = tmp_path / "abs.bin"
    target.write_bytes(b"\0" * 48)
    expect_error(write(tmp_path, _external_model(str(target))), "absolute")


def test_external_data_symlink_leaving_the_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"\0" * 48)
    sub = tmp_path / "model"
    sub.mkdir()
    os.symlink(outside, sub / "w.bin")
    expect_error(write(sub, _external_model("w.bin")), "outside", "symlink")
    os.symlink(tmp_path, sub / "up")
    expect_error(write(sub, _external_model("up/outside.bin"), "m2.onnx"), "outside")


def test_external_data_missing_or_short(tmp_path: Path) -> None:
    expect_error(write(tmp_path, _external_model("gone.bin")), "missing")
    (tmp_path / "short.bin").write_bytes(b"\0" * 20)
    expect_error(write(tmp_path, _external_model("short.bin"), "m2.onnx"), "48")


def test_external_data_needs_a_folder() -> None:
    expect_error(_external_model("w.bin"), "external data", "path")


# ---------------------------------------------------------------------------
# Wrong types


def test_string_input(tmp_path: Path) -> None:
    nodes = [helper.make_node("Identity", ["x"], ["y"])]
    p = write(tmp_path, model_of(nodes, [vi("x", TensorProto.STRING, [2])], [vi("y", TensorProto.STRING, [2])]))
    expect_error(p, "graph input 'x'", "string")


def test_sequence_input(tmp_path: Path) -> None:
    seq = helper.make_tensor_sequence_value_info("x", F32, [2])
    nodes = [helper.make_node("Identity", ["x"], ["y"])]
    expect_error(write(tmp_path, model_of(nodes, [seq], [vi("y", F32, [2])])), "graph input 'x'", "sequence")


def test_mismatched_operand_types(tmp_path: Path) -> None:
    nodes = [helper.make_node("Add", ["x", "i"], ["y"], name="bad_add")]
    p = write(tmp_path, model_of(nodes, [vi("x", F32, [2]), vi("i", I64, [2])], [vi("y", F32, [2])]))
    expect_error(p, "'bad_add'", "element types")


def test_float_condition(tmp_path: Path) -> None:
    nodes = [helper.make_node("Where", ["x", "x", "x"], ["y"], name="w")]
    expect_error(write(tmp_path, model_of(nodes, [vi("x", F32, [2])], [vi("y", F32, [2])])), "'w'", "bool")


def test_shapes_that_do_not_fit(tmp_path: Path) -> None:
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")]
    p = write(tmp_path, model_of(nodes, [vi("a", F32, [2, 3]), vi("b", F32, [4, 5])], [vi("y", F32, None)]))
    expect_error(p, "'mm'", "contracting")


def test_declared_output_type_disagrees(tmp_path: Path) -> None:
    m = good_model()
    m.graph.output[0].type.tensor_type.elem_type = I64
    expect_error(write(tmp_path, m), "graph output 'y'", "i64")


# ---------------------------------------------------------------------------
# Unsupported ops: all of them, once


def test_unsupported_ops_are_listed_together(tmp_path: Path) -> None:
    k = numpy_helper.from_array(np.array([2], dtype=np.int64), "k")
    nodes = [
        helper.make_node("TopK", ["x", "k"], ["v1", "i1"], name="topk_a"),
        helper.make_node("Loop", ["", "", "v1"], ["l1"], body=helper.make_graph([], "b", [], []), name="loop_a"),
        helper.make_node("Relu", ["l1"], ["r"], name="relu_after_unsupported"),
        helper.make_node("Loop", ["", "", "x"], ["l2"], body=helper.make_graph([], "b", [], []), name="loop_b"),
        helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
        helper.make_node("Custom", ["x"], ["c"], domain="my.domain", name="mine"),
        helper.make_node("Add", ["r", "l2"], ["y"], name="add"),
    ]
    m = model_of(nodes, [vi("x", F32, [5])], [vi("y", F32, None), vi("nz", I64, None), vi("c", F32, None)], [k])
    m.opset_import.append(helper.make_opsetid("my.domain", 1))
    msg = expect_error(write(tmp_path, m), "Loop (control flow is out of scope", "x2 (loop_a, loop_b)",
                       "NonZero", "depends on the data", "nonzero",
                       "my.domain::Custom", kind=UnsupportedOpsError)
    assert "TopK" not in msg
    assert "relu_after_unsupported" not in msg  # downstream of an unsupported op: not reported


# ---------------------------------------------------------------------------
# The command line: exit status 1, one line, no traceback


def test_command_line_reports_one_line(tmp_path: Path) -> None:
    bad = write(tmp_path, good_model().SerializeToString()[:50])
    r = subprocess.run([sys.executable, "-m", "irkit.frontends.onnx", str(bad)], capture_output=True, text=True, check=False,
                       timeout=120)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("irkit: error:") and str(bad) in lines[0], r.stderr
    from irkit.frontends.onnx import main

    good = write(tmp_path, good_model(), "good.onnx")
    out = tmp_path / "good.mlir"
    assert main([str(good), "-o", str(out)]) == 0
    assert '"ik.matmul"' in out.read_text()
    assert main([str(bad)]) == 1
