"""What full-size models need from the targets, on a model small enough for the default suite:
tvm-llvm compiles each distinct kernel once (identical layers share one PrimFunc) and takes weights as
parameters instead of constants in the executable; ort sends the weights as ONNX external data read in
place.  Every result is checked against the float64 interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from irkit.targets.registry import get_target

from irkit.check import compare_all, module_tolerance
from irkit.interp import random_inputs, run
from irkit.passmanager import run_pipeline
from irkit.testing.blocks import gpt2_style_module

PIPE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"
BIND = {"B": 1, "S": 16}


@pytest.fixture(scope="module")
def model():
    # hidden 512: every weight matrix is >= 1 MiB, so the large-weight paths are taken
    m = gpt2_style_module(layers=2, hidden=512, heads=8, vocab=512, seq=16)
    run_pipeline(m, PIPE)
    xs = random_inputs(m.entry, seed=3, bindings=BIND)
    assert np.any(xs[0] != 0)
    return m, xs, run(m, xs, float64=True)


def _check(got, want, m) -> None:
    rep = compare_all(got, want, module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]


def test_tvm_merges_identical_layers_and_binds_weights(model) -> None:
    m, xs, want = model
    t = get_target("tvm-llvm")
    if not t.availability().can_run:
        pytest.skip(t.availability().reason or "tvm-llvm cannot run here")
    art = t.lower(m, BIND)
    assert "fusion" not in art.info, art.info.get("fusion")
    # two identical layers: the second layer's kernels are the first layer's functions
    assert art.info.get("merged_functions", 0) >= 4, art.info
    per_layer = [k for k in art.kernels if k.kind == "scheduled TensorIR"]
    fns = [f for k in per_layer for f in k.extra["functions"]]
    assert len(set(fns)) < len(fns)
    # and the merged copies are gone from the module LLVM compiles (not just no longer called)
    ll = art.files.get("kernels.ll", "")
    copies = [k.name for k in per_layer if k.name not in k.extra["functions"]]
    assert copies and ll
    assert not [c for c in copies if f"@__tvm_ffi_{c}(" in ll], copies  # the entry TVM emits per kernel
    assert all(f"@__tvm_ffi_{f}(" in ll for f in set(fns))
    # weights are parameters bound by the runner, not constants of the executable
    assert art.info.get("weight_params", 0) >= 2 * 4, art.info
    _check(t.run(art, xs), want, m)
    _check(t.run(art, xs), want, m)  # the bound weights are not consumed by a call
    s = t.open_session(art)
    _check(s.run(xs), want, m)


def test_tvm_small_constants_stay_in_the_executable() -> None:
    m = gpt2_style_module(layers=1, hidden=64, heads=4, vocab=128, seq=16)
    run_pipeline(m, PIPE)
    t = get_target("tvm-llvm")
    if not t.availability().can_run:
        pytest.skip(t.availability().reason or "tvm-llvm cannot run here")
    art = t.lower(m, BIND)
    assert "weight_params" not in art.info
    xs = random_inputs(m.entry, seed=1, bindings=BIND)
    _check(t.run(art, xs), run(m, xs, float64=True), m)


def test_ort_weights_are_external_data_read_in_place(model, tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort
    from irkit.targets.ort import EXTERNAL_DATA, check_model

    m, xs, want = model
    t = get_target("ort")
    art = t.lower(m, BIND)
    weights = art.files[EXTERNAL_DATA]
    proto = onnx.load_from_string(art.files["model.onnx"])
    ext = [i for i in proto.graph.initializer if i.data_location == onnx.TensorProto.EXTERNAL]
    assert len(ext) >= 2 * 4 + 1  # every layer's matrices and the embedding
    assert len(art.files["model.onnx"]) < len(weights) // 20  # the proto holds no weight bytes
    check_model(proto)
    _check(t.run(art, xs), want, m)
    _check(t.open_session(art).run(xs), want, m)
    # written out, it is a standard ONNX model with external data that onnxruntime loads from the path
    out = art.write(tmp_path / "art")
    assert (out / EXTERNAL_DATA).stat().st_size == len(weights)
    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    got = sess.run(None, {sess.get_inputs()[0].name: xs[0]})
    _check(got, want, m)


def test_ort_small_model_stays_self_contained() -> None:
    import onnx
    from irkit.targets.ort import EXTERNAL_DATA

    m = gpt2_style_module(layers=1, hidden=64, heads=4, vocab=128, seq=16)
    art = get_target("ort").lower(m, BIND)
    assert EXTERNAL_DATA not in art.files
    onnx.checker.check_model(onnx.load_from_string(art.files["model.onnx"]), full_check=True)


def test_ort_large_weights_are_written_only_when_saved(model, tmp_path: Path, monkeypatch) -> None:
    import onnxruntime as ort
    import irkit.targets.ort as ort_target

    m, xs, want = model
    small = ort_target.EXTERNAL_DATA
    whole = get_target("ort").lower(m, BIND).files[small]
    monkeypatch.setattr(ort_target, "EXTERNAL_FILE_MAX_BYTES", 0)  # as if the weights were over the limit
    art = get_target("ort").lower(m, BIND)
    assert small not in art.files and small in art.streamed and "written from them" in art.info["external_data"]
    out = art.write(tmp_path / "big")
    assert (out / small).read_bytes() == bytes(whole)  # the same file, streamed tensor by tensor
    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    _check(sess.run(None, {sess.get_inputs()[0].name: xs[0]}), want, m)
