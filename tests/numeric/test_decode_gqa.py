"""onnxruntime's ``com.microsoft.GroupQueryAttention`` imported into irkit, checked against onnxruntime
running the same model: prompt and decode steps, ragged batches (``seqlens_k``), rotary, packed QKV,
a growing and a shared (fixed-length) cache."""

from __future__ import annotations

import numpy as np
import pytest

from irkit.frontends.common import UnsupportedOpsError
from irkit.frontends.onnx import import_onnx
from irkit.interp import run

B, H, KVH, D = 2, 4, 2, 32


def _gqa_model(seq, past, present, *, rotary=False, interleaved=False, packed=False, window=-1, rot_half=None,
               extra_attrs=None, extra_inputs=(), batch=B):
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    q_w, kv_w = H * D, KVH * D
    ins = [helper.make_tensor_value_info("query", f, [batch, seq, q_w + 2 * kv_w if packed else q_w])]
    names = ["query", "", ""]
    if not packed:
        ins += [helper.make_tensor_value_info("key", f, [batch, seq, kv_w]),
                helper.make_tensor_value_info("value", f, [batch, seq, kv_w])]
        names = ["query", "key", "value"]
    ins += [helper.make_tensor_value_info("past_key", f, [batch, KVH, past, D]),
            helper.make_tensor_value_info("past_value", f, [batch, KVH, past, D]),
            helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [batch]),
            helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, [])]
    names += ["past_key", "past_value", "seqlens_k", "total_sequence_length"]
    inits = []
    if rotary:
        half = rot_half or D // 2
        rng = np.random.default_rng(11)
        ang = np.arange(64)[:, None] * rng.uniform(0.05, 1.0, half)[None, :]
        inits = [helper.make_tensor("cos_cache", f, [64, half], np.cos(ang).astype(np.float32).ravel()),
                 helper.make_tensor("sin_cache", f, [64, half], np.sin(ang).astype(np.float32).ravel())]
        names += ["cos_cache", "sin_cache"]
    names += list(extra_inputs)
    attrs = dict(num_heads=H, kv_num_heads=KVH, do_rotary=int(rotary), rotary_interleaved=int(interleaved),
                 local_window_size=window, **(extra_attrs or {}))
    node = helper.make_node("GroupQueryAttention", names, ["output", "present_key", "present_value"],
                            name="gqa", domain="com.microsoft", **attrs)
    outs = [helper.make_tensor_value_info("output", f, [batch, seq, q_w]),
            helper.make_tensor_value_info("present_key", f, [batch, KVH, present, D]),
            helper.make_tensor_value_info("present_value", f, [batch, KVH, present, D])]
    g = helper.make_graph([node], "gqa", ins, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


def _ort(model, feeds):
    import onnxruntime as ort

    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _feeds(rng, seq, past, seqlens, packed=False, past_k=None, past_v=None):
    B = len(seqlens)
    q_w, kv_w = H * D, KVH * D
    feeds = {"query": rng.standard_normal((B, seq, q_w + 2 * kv_w if packed else q_w)).astype(np.float32)}
    if not packed:
        feeds["key"] = rng.standard_normal((B, seq, kv_w)).astype(np.float32)
        feeds["value"] = rng.standard_normal((B, seq, kv_w)).astype(np.float32)
    feeds["past_key"] = past_k if past_k is not None else rng.standard_normal((B, KVH, past, D)).astype(np.float32)
    feeds["past_value"] = past_v if past_v is not None else rng.standard_normal((B, KVH, past, D)).astype(np.float32)
    feeds["seqlens_k"] = np.asarray(seqlens, np.int32)
    feeds["total_sequence_length"] = np.array(max(seqlens) + 1, np.int32)
    return feeds


def _compare(model, feeds, seq):
    """irkit (float64 reference) against onnxruntime on the rows onnxruntime specifies."""
    want = _ort(model, feeds)
    m = import_onnx(model)
    got = run(m, [feeds[a.name] for a in m.entry.args])
    total = feeds["seqlens_k"].astype(int) + 1
    for b in range(len(total)):
        q = min(seq, total[b])
        np.testing.assert_allclose(got[0][b, :q], want[0][b, :q], rtol=2e-4, atol=2e-5)
        for o in (1, 2):
            np.testing.assert_allclose(got[o][b, :, :total[b]], want[o][b, :, :total[b]], rtol=2e-4, atol=2e-5)
    return m, got


@pytest.mark.parametrize("rotary,interleaved", [(False, False), (True, False), (True, True)])
def test_gqa_decode_step_shared_cache(rotary, interleaved):
    """One new token into a fixed-length cache (onnxruntime-genai's shared past/present buffer), ragged batch."""
    rng = np.random.default_rng(0)
    model = _gqa_model(1, 16, 16, rotary=rotary, interleaved=interleaved)
    feeds = _feeds(rng, 1, 16, [6, 11])
    m, want = _compare(model, feeds, 1)
    assert "ik.attention" in {op.name for op in m.entry.walk()}
    if rotary and not interleaved:  # the imported module lowers and runs on the ort target too
        from irkit.targets.registry import get_target

        got = get_target("ort").run_module(m, [feeds[a.name] for a in m.entry.args])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


def test_gqa_prompt_then_decode_growing_cache():
    """Prompt of 5 tokens with an empty past, then decode steps feeding present back as past (the
    cache grows by one each step), rotary on a part of the head (rotary dim < head size)."""
    rng = np.random.default_rng(1)
    feeds = _feeds(rng, 5, 0, [4, 4])
    prompt = _gqa_model(5, 0, 5, rotary=True, rot_half=D // 4)
    _compare(prompt, feeds, 5)
    want = _ort(prompt, feeds)
    pk, pv = want[1], want[2]
    for _ in range(3):
        past = pk.shape[2]
        model = _gqa_model(1, past, past + 1, rotary=True, rot_half=D // 4)
        f = _feeds(rng, 1, past, [past, past], past_k=pk, past_v=pv)
        _compare(model, f, 1)
        _, pk, pv = _ort(model, f)


def test_gqa_packed_qkv_local_window_prompt_padded():
    """Packed QKV, a local window, and a right-padded prompt (entry 0 has 3 of 6 tokens)."""
    rng = np.random.default_rng(2)
    model = _gqa_model(6, 12, 12, packed=True, window=2, rotary=True)
    _compare(model, _feeds(rng, 6, 12, [2, 5], packed=True), 6)


def test_gqa_chunk_after_past():
    """A multi-token chunk appended after cached tokens (speculative / chunked prefill; onnxruntime
    takes it for batch 1)."""
    rng = np.random.default_rng(3)
    model = _gqa_model(3, 10, 10, rotary=True, batch=1)
    _compare(model, _feeds(rng, 3, 10, [7]), 3)


def test_gqa_refused_features_are_named():
    model = _gqa_model(1, 8, 8, extra_attrs={"softcap": 30.0})
    with pytest.raises(UnsupportedOpsError, match="GroupQueryAttention with softcap"):
        import_onnx(model)
