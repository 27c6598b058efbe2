"""ONNX converters for onnxruntime's ``com.microsoft`` contrib ops used by generation models.

Design note: ``com.microsoft.GroupQueryAttention`` (GQA), the attention of
onnxruntime-genai's decoder models, is one node doing rotary embedding, the
KV-cache update and grouped-query attention.  It becomes plain IR:

- Per batch entry ``b``: ``T = seqlens_k[b] + 1`` tokens are in the cache after
  the step, ``Q = min(S, T)`` of the ``S`` new rows are valid and
  ``P = T - Q`` tokens were cached before (onnxruntime's contract without
  ``query_seqlens``).  Query row ``s`` sits at absolute position ``P + s``.
- Rotary (``do_rotary``): ``cos_cache``/``sin_cache`` rows gathered at those
  positions rotate Q and the new K (half-split or ``rotary_interleaved``),
  over the first ``2 * cos_cache.shape[1]`` channels of each head.
- Cache update: ``present[b, :, c] = new[b, :, c - P]`` for ``P <= c < T``,
  else ``past[b, :, c]`` -- a ``gather_elements`` and a ``where``, so ragged
  batches need no loop.  When ``present`` has the sequence length of ``past``
  (the graph declares it, or the dims are equal: the shared past/present
  buffer of onnxruntime-genai), the cache keeps its length; otherwise it grows
  by ``S`` (``past_sequence_length + sequence_length``).
- Attention over the present cache with a keep-mask: key ``j < T`` and, when
  causal, ``j <= P + s``, and with ``local_window_size`` ``W``,
  ``j > P + s - W`` (``W`` keys, the query's own included).  Cache rows at or beyond ``T`` and output rows at or
  beyond ``Q`` are unspecified in onnxruntime; irkit computes them but tests
  compare only the specified part.

Refused (one ``Unsupported`` line each): quantized caches (``k_scale``,
``v_scale``), ``position_ids``, ``attention_bias``, ``head_sink``,
``smooth_softmax``, ``softcap``, ``q_norm_weight``/``k_norm_weight``,
``query_seqlens``, ``sliding_window_cache`` and the ``output_qk`` output.

Tested against onnxruntime 1.32 (CPU execution provider).
"""

from __future__ import annotations

import math

import numpy as np

from irkit.frontends.common import FrontendError
from irkit.frontends.onnx_ops import Emitter, Node, OnnxValue, Unsupported, apply_rotary, converter
from irkit.ir.core import Value
from irkit.ir.types import DType, dim_str

_REFUSED_INPUTS = {9: "position_ids", 10: "attention_bias", 11: "head_sink", 12: "k_scale", 13: "v_scale",
                   14: "q_norm_weight", 15: "k_norm_weight", 16: "query_seqlens"}


def _i64(cx: Emitter, v: Value) -> Value:
    return v if v.type.dtype is DType.i64 else cx.op("ik.cast", v, to=DType.i64)


def _heads(cx: Emitter, node: Node, x: Value, heads: int, what: str) -> Value:
    """[B, S, heads*D] -> [B, S, heads, D]."""
    b, s, w = x.type.shape
    if not isinstance(w, int) or w % heads:
        raise FrontendError(f"node '{node.name}' (GroupQueryAttention): {what} width {dim_str(w)} is not a multiple "
                            f"of {heads} heads")
    return cx.op("ik.reshape", x, shape=(b, s, heads, w // heads))


@converter("GroupQueryAttention", domain="com.microsoft")
def _group_query_attention(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    for i, what in _REFUSED_INPUTS.items():
        if node.input(i) is not None:
            raise Unsupported(f"GroupQueryAttention with {what}")
    for a in ("smooth_softmax", "sliding_window_cache"):
        if int(node.attr(a, 0)):
            raise Unsupported(f"GroupQueryAttention with {a}")
    if float(node.attr("softcap", 0.0)) != 0.0:
        raise Unsupported("GroupQueryAttention with softcap")
    for a in ("k_quant_type", "v_quant_type"):
        if node.attr(a, "NONE") not in ("NONE", b"NONE"):
            raise Unsupported(f"GroupQueryAttention with a quantized cache ({a})")
    if node.n_outputs > 3 and node.used[3]:
        raise Unsupported("GroupQueryAttention whose output_qk is used")
    heads = node.attr("num_heads")
    kv_heads = node.attr("kv_num_heads")
    if not heads or not kv_heads or int(heads) % int(kv_heads):
        raise FrontendError(f"node '{node.name}' (GroupQueryAttention): num_heads ({heads}) must be a positive "
                            f"multiple of kv_num_heads ({kv_heads})")
    heads, kv_heads = int(heads), int(kv_heads)
    causal = bool(int(node.attr("causal", 1)))
    window = int(node.attr("local_window_size", -1))
    query = node.req(0, "query")
    if query.rank != 3:
        raise FrontendError(f"node '{node.name}' (GroupQueryAttention): query must be 3-D [batch, seq, hidden]")
    past_k, past_v = node.input(3), node.input(4)
    if past_k is None or past_v is None:
        raise Unsupported("GroupQueryAttention without past_key/past_value")
    seqlens = node.req(5, "seqlens_k")
    node.req(6, "total_sequence_length")  # an upper bound; the per-entry lengths come from seqlens_k
    q_all = cx.ir(query)
    bsz, seq, width = q_all.type.shape
    if not isinstance(seq, int):
        raise Unsupported("GroupQueryAttention with a dynamic query length")
    key, value = node.input(1), node.input(2)
    if (key is None) != (value is None):
        raise FrontendError(f"node '{node.name}' (GroupQueryAttention): key and value must come together")
    if key is None:  # packed QKV
        if not isinstance(width, int) or width % (heads + 2 * kv_heads):
            raise FrontendError(f"node '{node.name}' (GroupQueryAttention): packed QKV width {dim_str(width)} is not "
                                f"a multiple of num_heads + 2*kv_num_heads = {heads + 2 * kv_heads}")
        d = width // (heads + 2 * kv_heads)
        q_w, kv_w = heads * d, kv_heads * d
        parts = cx.emit("ik.split", [q_all], axis=2, sizes=(q_w, kv_w, kv_w))
        q_in, k_in, v_in = parts
    else:
        assert value is not None
        q_in, k_in, v_in = q_all, cx.ir(key), cx.ir(value)
        if k_in.type.shape[1] != seq:
            raise Unsupported("GroupQueryAttention with a key length other than the query length")
    q4 = _heads(cx, node, q_in, heads, "query")
    k4 = _heads(cx, node, k_in, kv_heads, "key")
    v4 = _heads(cx, node, v_in, kv_heads, "value")
    hd = q4.type.shape[3]
    if not isinstance(hd, int):
        raise Unsupported("GroupQueryAttention with a dynamic head size")
    d = hd
    dt = q4.type.dtype
    # per-entry lengths: T (after the step), Q (valid new rows), P (cached before)
    total = cx.op("ik.add", _i64(cx, cx.ir(seqlens)), cx.constant(np.array(1, np.int64), DType.i64))
    valid = cx.op("ik.min", total, cx.constant(np.array(seq, np.int64), DType.i64))
    past_len = cx.op("ik.sub", total, valid)
    rows = cx.op("ik.iota", shape=(1, seq), axis=1, dtype=DType.i64)
    pos = cx.op("ik.add", cx.op("ik.reshape", past_len, shape=(bsz, 1)), rows)  # [B, S] absolute positions
    if int(node.attr("do_rotary", 0)):
        cos_c, sin_c = node.input(7), node.input(8)
        if cos_c is None or sin_c is None:
            raise FrontendError(f"node '{node.name}' (GroupQueryAttention): do_rotary=1 needs cos_cache and sin_cache")
        vc, vs = cx.ir(cos_c), cx.ir(sin_c)
        half = vc.type.shape[1]
        if not isinstance(half, int) or 2 * half > d:
            raise FrontendError(f"node '{node.name}' (GroupQueryAttention): cos_cache width {dim_str(half)} must be "
                                f"at most head_size/2 = {d // 2}")
        if vc.type.dtype is not dt:
            vc, vs = cx.op("ik.cast", vc, to=dt), cx.op("ik.cast", vs, to=dt)
        cos = cx.op("ik.reshape", cx.op("ik.gather", vc, pos, axis=0), shape=(bsz, seq, 1, half))
        sin = cx.op("ik.reshape", cx.op("ik.gather", vs, pos, axis=0), shape=(bsz, seq, 1, half))
        inter = bool(int(node.attr("rotary_interleaved", 0)))
        q4 = apply_rotary(cx, q4, cos, sin, inter)
        k4 = apply_rotary(cx, k4, cos, sin, inter)
    qh = cx.op("ik.transpose", q4, perm=(0, 2, 1, 3))  # [B, H, S, D]
    kh = cx.op("ik.transpose", k4, perm=(0, 2, 1, 3))
    vh = cx.op("ik.transpose", v4, perm=(0, 2, 1, 3))
    pk, pv = cx.ir(past_k), cx.ir(past_v)
    if pk.type.rank != 4 or pk.type.shape[1] != kv_heads or pk.type.shape[3] != d:
        raise FrontendError(f"node '{node.name}' (GroupQueryAttention): past_key must be [batch, {kv_heads}, "
                            f"past_seq, {d}] (BNSH)")
    past_seq = pk.type.shape[2]
    declared = cx.fallback_shape(node.outputs[1]) if node.n_outputs > 1 and node.outputs[1] else None
    grow = not (declared is not None and len(declared) == 4 and declared[2] == past_seq)
    if grow:
        pads = (0, 0, 0, 0, 0, 0, seq, 0)  # ONNX order: all begins, then all ends
        pk = cx.op("ik.pad", pk, pads=pads, value=0.0)
        pv = cx.op("ik.pad", pv, pads=pads, value=0.0)
    cap = pk.type.shape[2]
    # present[b, :, c] = new[b, :, c - P] where P <= c < T
    cols = cx.op("ik.iota", shape=(1, cap), axis=1, dtype=DType.i64)
    rel = cx.op("ik.sub", cols, cx.op("ik.reshape", past_len, shape=(bsz, 1)))  # [B, C]
    write = cx.op("ik.and", cx.op("ik.ge", rel, cx.constant(np.array(0, np.int64), DType.i64)),
                  cx.op("ik.lt", rel, cx.op("ik.reshape", valid, shape=(bsz, 1))))
    idx = cx.op("ik.min", cx.op("ik.max", rel, cx.constant(np.array(0, np.int64), DType.i64)),
                cx.constant(np.array(seq - 1, np.int64), DType.i64))
    idx = cx.op("ik.broadcast", cx.op("ik.reshape", idx, shape=(bsz, 1, cap, 1)), shape=(bsz, kv_heads, cap, d))
    write4 = cx.op("ik.reshape", write, shape=(bsz, 1, cap, 1))
    new_k = cx.op("ik.where", write4, cx.op("ik.gather_elements", kh, idx, axis=2), pk)
    new_v = cx.op("ik.where", write4, cx.op("ik.gather_elements", vh, idx, axis=2), pv)
    # keep-mask [B, 1, S, C]
    keys = cx.op("ik.reshape", cols, shape=(1, 1, cap))
    qpos = cx.op("ik.reshape", pos, shape=(bsz, seq, 1))
    keep = cx.op("ik.lt", keys, cx.op("ik.reshape", total, shape=(bsz, 1, 1)))
    if causal:
        keep = cx.op("ik.and", keep, cx.op("ik.le", keys, qpos))
    if window > 0:
        lo = cx.op("ik.sub", qpos, cx.constant(np.array(window, np.int64), DType.i64))
        keep = cx.op("ik.and", keep, cx.op("ik.gt", keys, lo))
    keep = cx.op("ik.reshape", keep, shape=(bsz, 1, seq, cap))
    scale = node.attr("scale")
    scale = float(scale) if scale not in (None, 0.0) else 1.0 / math.sqrt(d)
    y = cx.op("ik.attention", qh, new_k, new_v, keep, None, scale=scale, causal=False)
    y = cx.op("ik.reshape", cx.op("ik.transpose", y, perm=(0, 2, 1, 3)), shape=(bsz, seq, heads * d))
    outs: list[OnnxValue | None] = [OnnxValue.of(y), OnnxValue.of(new_k), OnnxValue.of(new_v)]
    return outs[:node.n_outputs] + [None] * (node.n_outputs - 3)


__all__: list[str] = []
