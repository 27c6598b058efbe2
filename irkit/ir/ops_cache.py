"""Attention over a KV cache as one op: ``ik.cache_attention``.

Design note.  A decode step of a decoder LM with a static KV cache writes the
new keys and values into the cache at the current position and then attends
over the valid prefix.  Spelled with ``scatter_nd``/``dynamic_update_slice``
and ``ik.attention`` every target copies (or at least reads and writes) the
whole cache per token; as one op a target writes the ``S`` new rows in place
and reads only the prefix.

Operands (BHSD layout, the layout of transformers' ``StaticCache``)::

    q        [B, Hq, S, D]
    k_new    [B, Hkv, S, D]     v_new   [B, Hkv, S, Dv]
    k_cache  [B, Hkv, T, D]     v_cache [B, Hkv, T, Dv]
    pos      i64/i32, rank 0 (one position for the batch) or [B] (one per row)
    mask?    i1, broadcastable to [B, Hq, S, T] (an extra keep-mask: sliding window, padding)

Results: ``out [B, Hq, S, Dv]``, ``k_cache'``, ``v_cache'`` (the caches' types).

Semantics: ``p = clamp(pos, 0, T - S)`` (as XLA's dynamic_update_slice clamps its
start); ``k_cache'[:, :, p:p+S] = k_new`` (likewise ``v``), every other row
unchanged; query ``i`` attends to keys ``j <= p + i`` of the updated cache (and
``mask`` where given) with ``softmax(scale * q k^T) v``; ``Hq`` a multiple of
``Hkv`` (grouped-query attention); a row with no key kept is zeros, as
``ik.attention``.  The results ``k_cache'``/``v_cache'`` are meant to be the
outputs aliased to the cache arguments (see :mod:`irkit.ir.aliases`), so a
target updates them in place.

Cost: memory-bound.  Only ``S`` rows per cache are written, and only the valid
prefix is read; its length is the run-time position, so the cost model charges
``prefix_len`` positions when the attribute is set (a hint, e.g. the mean
position of a generation) and the whole cache (the worst case, the last
position) otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from irkit.ir.ops import (
    AttrSpec,
    Cost,
    OpDef,
    OpError,
    _f,
    _float_only,
    _numel,
    _out,
    attention_reference,
    named_operands,
    register_op,
)
from irkit.ir.types import TensorType, broadcast_shapes, shape_str


def _eq(a: Any, b: Any) -> bool:
    """Dims equal, or not both static (symbols are checked where bound)."""
    return a == b or not (isinstance(a, int) and isinstance(b, int))


def _cache_attention_infer(ts: list[TensorType], a: Mapping[str, Any]) -> list[TensorType]:
    if len(ts) < 6:
        raise OpError(f"expects q, k_new, v_new, k_cache, v_cache, pos [, mask]; got {len(ts)} operands")
    q, kn, vn, kc, vc, pos = ts[:6]
    names = ("q", "k_new", "v_new", "k_cache", "v_cache")
    for t, n in zip(ts[:5], names):
        _float_only(t, n)
        if t.rank != 4:
            raise OpError(f"{n} must be [batch, heads, seq, head_dim], got {shape_str(t.shape)}")
        if t.dtype != q.dtype:
            raise OpError(f"{n} element type {t.dtype} must equal q's {q.dtype}")
    b, hq, s, d = q.shape
    hk, t_len = kc.shape[1], kc.shape[2]
    dv = vc.shape[3]
    for t, n, want in ((kn, "k_new", (b, hk, s, d)), (vn, "v_new", (b, hk, s, dv)),
                       (kc, "k_cache", (b, hk, t_len, d)), (vc, "v_cache", (b, hk, t_len, dv))):
        if not all(_eq(x, y) for x, y in zip(t.shape, want)):
            raise OpError(f"{n} shape {shape_str(t.shape)} must be {shape_str(want)} (q {shape_str(q.shape)}, "
                          f"k_cache {shape_str(kc.shape)}, v_cache {shape_str(vc.shape)})")
    if isinstance(hq, int) and isinstance(hk, int) and (hk == 0 or hq % hk):
        raise OpError(f"query heads {hq} are not a multiple of key/value heads {hk}")
    if isinstance(s, int) and isinstance(t_len, int) and s > t_len:
        raise OpError(f"{s} new positions do not fit the cache of {t_len} positions")
    if not pos.dtype.is_int or pos.dtype.is_bool:
        raise OpError(f"pos must be an integer tensor, got {pos.dtype}")
    if pos.rank > 1 or (pos.rank == 1 and not _eq(pos.shape[0], b)):
        raise OpError(f"pos must be a scalar or [batch] = [{b}], got {shape_str(pos.shape)}")
    if len(ts) > 6:
        m = ts[6]
        if not m.dtype.is_bool:
            raise OpError(f"mask must be i1, got {m.dtype}")
        scores = (b, hq, s, t_len)
        try:
            got = broadcast_shapes(m.shape, scores)
        except ValueError:
            raise OpError(f"mask shape {shape_str(m.shape)} does not broadcast to scores {shape_str(scores)}") from None
        if len(got) != 4:
            raise OpError("mask must broadcast to rank 4")
    if a.get("prefix_len", 0) < 0:
        raise OpError(f"prefix_len must be >= 0, got {a['prefix_len']}")
    return [TensorType((b, hq, s, dv), q.dtype), kc, vc]


def cache_positions(pos: np.ndarray, batch: int, s: int, t_len: int) -> np.ndarray:
    """The clamped write position per batch row, ``[batch]`` int64."""
    p = np.broadcast_to(np.asarray(pos).astype(np.int64).reshape(-1), (batch,))
    return np.clip(p, 0, t_len - s)


def prefix_keep(p: np.ndarray, s: int, t_len: int) -> np.ndarray:
    """Keep-mask ``[B, 1, S, T]``: query ``i`` of row ``b`` sees keys ``j <= p[b] + i``."""
    j = np.arange(t_len)[None, None, None, :]
    i = np.arange(s)[None, None, :, None]
    return j <= (p[:, None, None, None] + i)


def cache_attention_reference(q: np.ndarray, k_new: np.ndarray, v_new: np.ndarray, k_cache: np.ndarray,
                              v_cache: np.ndarray, pos: np.ndarray, mask: np.ndarray | None,
                              scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(out, k_cache', v_cache') of ``ik.cache_attention`` in NumPy (the module note has the semantics)."""
    b, _, s, _ = q.shape
    t_len = k_cache.shape[2]
    p = cache_positions(pos, b, s, t_len)
    kc = np.array(k_cache, copy=True)
    vc = np.array(v_cache, copy=True)
    for r in range(b):
        kc[r, :, p[r]:p[r] + s] = k_new[r]
        vc[r, :, p[r]:p[r] + s] = v_new[r]
    keep = prefix_keep(p, s, t_len)
    if mask is not None:
        keep = keep & mask
    out = attention_reference(q, kc, vc, keep, None, scale, False)
    return out, kc, vc


def _cache_attention_ref(xs, a, ctx):
    n = named_operands(ctx.op) if ctx.op is not None else {}
    mask = xs[6] if len(xs) > 6 and n.get("mask", True) is not None else None
    if mask is not None and mask.dtype != np.bool_:
        raise TypeError("cache_attention mask must be i1")
    q, kn, vn, kc, vc = (_f(x) for x in xs[:5])
    out, kc2, vc2 = cache_attention_reference(q, kn, vn, kc, vc, xs[5], mask, a["scale"])
    return [_out(out, ctx.out_types[0].dtype), _out(kc2, ctx.out_types[1].dtype), _out(vc2, ctx.out_types[2].dtype)]


def _cache_attention_cost(ins, outs, dts, a):
    b, hq, s, d = ins[0]
    hk, t_len = ins[3][1], ins[3][2]
    dv = ins[4][3]
    hint = int(a.get("prefix_len", 0) or 0)
    prefix = min(max(hint, s), t_len) if hint else t_len
    flops = 2.0 * b * hq * s * prefix * (d + dv) + 5.0 * b * hq * s * prefix
    it = dts[0].itemsize
    read = (_numel(ins[0]) + _numel(ins[1]) + _numel(ins[2])) * it  # q and the new rows
    read += b * hk * prefix * (d + dv) * it  # the valid prefix of both caches (not the whole cache)
    read += _numel(ins[5]) * dts[5].itemsize
    if len(ins) > 6:
        read += _numel(ins[6]) * dts[6].itemsize
    written = _numel(outs[0]) * it + b * hk * s * (d + dv) * it  # out and the S new rows, in place
    return Cost(flops, float(read), float(written))


register_op(OpDef(
    "ik.cache_attention",
    "write k_new/v_new into the KV cache at [pos, pos+S) and attend over the valid prefix (j <= pos+i); GQA",
    ("q", "k_new", "v_new", "k_cache", "v_cache", "pos", "mask?"),
    _cache_attention_infer, _cache_attention_ref, _cache_attention_cost,
    attrs={"scale": AttrSpec("float", doc="softmax scale"),
           "prefix_len": AttrSpec("int", 0, doc="cost hint: valid prefix length to charge (0: the whole cache)")},
    traits=frozenset({"pure", "fused"})))


def decompose(op: Any, bindings: Mapping[str, int] | None = None) -> Any:
    """``op`` (an ``ik.cache_attention``) as a detached graph of plain ops: ``dynamic_update_slice``
    of each cache, the prefix keep-mask (``le`` of ``iota``s, and-ed with the extra mask) and one
    ``ik.attention`` over the updated caches.  The graph's arguments are the op's operands and
    its ``func.return`` returns (out, k_cache', v_cache').  Targets lower it op by op where they
    have no kernel of their own.  A ``[B]`` position needs a static batch (one update per row)."""
    from irkit.ir.builder import Builder
    from irkit.ir.core import Graph
    from irkit.ir.types import DType, eval_dim

    types = [v.type for v in op.operands]
    if bindings is not None:
        types = [TensorType(tuple(eval_dim(d, bindings) for d in t.shape), t.dtype) for t in types]
    g = Graph(types)
    b = Builder.at_end(g, op.loc)
    args = list(g.args)
    q, kn, vn, kc, vc, pos = args[:6]
    mask = args[6] if len(args) > 6 else None
    s, t_len = q.type.shape[2], kc.type.shape[2]
    i64 = DType.i64
    p = pos if pos.dtype is i64 else b.cast(pos, to=i64)
    if isinstance(s, int) and isinstance(t_len, int):
        hi = b.scalar(t_len - s, i64)
    else:
        hi = b.sub(b.dim_value(dim=(t_len,), dtype=i64), b.dim_value(dim=(s,), dtype=i64))
    p = b.max(b.min(p, hi), b.scalar(0, i64))  # clamped as dynamic_update_slice clamps its start
    zero = b.scalar(0, i64, (1,))

    def write(cache: Any, rows: Any) -> Any:
        if p.type.rank == 0:
            starts = b.concat(zero, zero, b.reshape(p, shape=(1,)), zero, axis=0)
            return b.dynamic_update_slice(cache, rows, starts)
        nb = cache.type.shape[0]
        if not isinstance(nb, int):
            raise OpError("per-row positions need a static batch to decompose")
        parts = []
        for r in range(nb):
            sl = b.slice(cache, start=(r, 0, 0, 0), limit=(r + 1,) + tuple(cache.type.shape[1:]))
            ro = b.slice(rows, start=(r, 0, 0, 0), limit=(r + 1,) + tuple(rows.type.shape[1:]))
            pr = b.slice(p, start=(r,), limit=(r + 1,))
            parts.append(b.dynamic_update_slice(sl, ro, b.concat(zero, zero, pr, zero, axis=0)))
        return parts[0] if nb == 1 else b.concat(*parts, axis=0)

    kc2, vc2 = write(kc, kn), write(vc, vn)
    keys = b.iota(shape=(t_len,), axis=0, dtype=i64)
    rows = b.iota(shape=(s,), axis=0, dtype=i64)
    if p.type.rank == 0:
        last = b.reshape(b.add(rows, p), shape=(1, 1, s, 1))
    else:
        last = b.add(b.reshape(rows, shape=(1, 1, s, 1)), b.reshape(p, shape=(p.type.shape[0], 1, 1, 1)))
    keep = b.le(b.reshape(keys, shape=(1, 1, 1, t_len)), last)
    if mask is not None:
        keep = b.create("ik.and", [keep, mask]).results[0]
    out = b.attention(q, kc2, vc2, keep, scale=float(op.attrs["scale"]))
    b.ret(out, kc2, vc2)
    return g


__all__ = ["cache_attention_reference", "cache_positions", "prefix_keep", "decompose"]
