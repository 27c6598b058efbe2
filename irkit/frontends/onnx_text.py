"""ONNX converter for ``TfIdfVectorizer`` over integer tokens.

Design note: the pool of n-grams is an attribute, so counting becomes dense
comparisons with static shapes.  For every n-gram length ``L`` in
``[min_gram_length, max_gram_length]`` and skip distance ``s`` (1 to
``max_skip_count + 1``; unigrams once), the windows ``x[i], x[i+s], ...,
x[i+s(L-1)]`` are gathered with a constant index matrix, compared with every
pool n-gram of that length, and the full matches are summed over positions.
A constant 0/1 matrix then sends each n-gram's count to its output slot
(``ngram_indexes``), and ``mode`` weights it (TF: the count; IDF: the weight
when the count is positive; TFIDF: weight times count; weights default to 1).
As in the reference implementation, a repeated pool n-gram counts only under
its last id.  String pools are out of scope.
"""

from __future__ import annotations

import numpy as np

from irkit.frontends.common import FrontendError
from irkit.frontends.onnx_ops import Emitter, Node, OnnxValue, Unsupported, converter
from irkit.ir.core import Value
from irkit.ir.types import DType

MAX_WINDOWS = 1 << 20
"""The most (row length x pool n-grams) comparisons per length and skip built at import."""


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


@converter("TfIdfVectorizer")
def _tfidf(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0, "X")
    if "pool_strings" in node.attrs and "pool_int64s" not in node.attrs:
        raise Unsupported("TfIdfVectorizer over strings (string tensors are out of scope)")
    if not x.dtype.is_int:
        raise FrontendError(f"node '{node.name}' (TfIdfVectorizer): X must be int32 or int64, got {x.dtype}")
    if x.rank not in (1, 2) or not all(isinstance(d, int) for d in x.shape):
        raise Unsupported(f"TfIdfVectorizer over input of shape {list(x.shape)} (needs static [C] or [N, C])")
    mode = _text(node.attr("mode", "TF"))
    if mode not in ("TF", "IDF", "TFIDF"):
        raise FrontendError(f"node '{node.name}' (TfIdfVectorizer): unknown mode '{mode}' (TF, IDF or TFIDF)")
    lo, hi = int(node.attr("min_gram_length", 1)), int(node.attr("max_gram_length", 1))
    skips = int(node.attr("max_skip_count", 0))
    counts = [int(c) for c in node.attr("ngram_counts", [])]
    indexes = [int(i) for i in node.attr("ngram_indexes", [])]
    pool = [int(p) for p in node.attr("pool_int64s", [])]
    weights = [float(w) for w in node.attr("weights", [])]
    if lo < 1 or hi < lo or skips < 0 or not counts or not indexes:
        raise FrontendError(f"node '{node.name}' (TfIdfVectorizer): needs 1 <= min_gram_length <= max_gram_length, "
                            "max_skip_count >= 0, ngram_counts and ngram_indexes")
    out_size = max(indexes) + 1
    if weights and len(weights) < out_size:
        raise FrontendError(f"node '{node.name}' (TfIdfVectorizer): {len(weights)} weights for {out_size} outputs")
    # The pool as (id, n-gram) per length; ids count every pool n-gram from 0, in order.
    grams: dict[tuple[int, ...], int] = {}
    nid = 0
    for size, start in enumerate(counts, start=1):
        end = counts[size] if size < len(counts) else len(pool)
        if end < start or (end - start) % size:
            raise FrontendError(f"node '{node.name}' (TfIdfVectorizer): ngram_counts {counts} do not split a pool "
                                f"of {len(pool)} items into n-grams")
        for k in range(start, end, size):
            if lo <= size <= hi:
                grams[tuple(pool[k:k + size])] = nid  # a repeated n-gram keeps its last id
            nid += 1
    if nid > len(indexes):
        raise FrontendError(f"node '{node.name}' (TfIdfVectorizer): {nid} pool n-grams but {len(indexes)} "
                            "ngram_indexes")
    n_b, c = (1, x.shape[0]) if x.rank == 1 else (x.shape[0], x.shape[1])
    assert isinstance(n_b, int) and isinstance(c, int)
    xv = cx.ir(x) if x.rank == 2 else cx.op("ik.reshape", cx.ir(x), shape=(1, c))
    f = DType.f32
    # counts[n_b, out_size] = sum over lengths of per-gram counts [n_b, G_L] @ slot matrix [G_L, out_size]
    total: Value | None = None
    for size in range(lo, hi + 1):
        sized = [(g, i) for g, i in grams.items() if len(g) == size]
        if not sized:
            continue
        pool_l = np.array([g for g, _ in sized], dtype=x.dtype.np)  # [G, L]
        slots = np.zeros((len(sized), out_size), dtype=np.float32)
        for row, (_, i) in enumerate(sized):
            slots[row, indexes[i]] = 1.0
        per: Value | None = None
        for s in range(1, (1 if size == 1 else skips + 1) + 1):
            w = c - s * (size - 1)
            if w <= 0:
                continue
            if w * len(sized) * size > MAX_WINDOWS:
                raise Unsupported(f"TfIdfVectorizer with {w} windows x {len(sized)} n-grams (over {MAX_WINDOWS})")
            pos = (np.arange(w)[:, None] + s * np.arange(size)[None, :]).reshape(-1).astype(np.int64)
            win = cx.op("ik.gather", xv, cx.constant(pos, DType.i64), axis=1)  # [n_b, w*L]
            win = cx.op("ik.reshape", win, shape=(n_b, w, 1, size))
            eq = cx.op("ik.eq", win, cx.constant(pool_l.reshape(1, 1, len(sized), size), x.dtype))
            hit = cx.op("ik.reduce_min", cx.op("ik.cast", eq, to=f), axes=(3,), keepdims=False)  # [n_b, w, G]
            cnt = cx.op("ik.reduce_sum", hit, axes=(1,), keepdims=False)  # [n_b, G]
            per = cnt if per is None else cx.op("ik.add", per, cnt)
        if per is None:
            continue
        part = cx.op("ik.matmul", per, cx.constant(slots, f))
        total = part if total is None else cx.op("ik.add", total, part)
    if total is None:
        total = cx.op("ik.broadcast", cx.scalar(0.0, f), shape=(n_b, out_size))
    wv = cx.constant(np.array(weights[:out_size], dtype=np.float32), f) if weights else None
    if mode == "IDF":
        pos_v = cx.op("ik.gt", total, cx.scalar(0.0, f))
        total = cx.op("ik.where", pos_v, wv if wv is not None else cx.scalar(1.0, f), cx.scalar(0.0, f))
    elif mode == "TFIDF" and wv is not None:
        total = cx.op("ik.mul", total, wv)
    if x.rank == 1:
        total = cx.op("ik.reshape", total, shape=(out_size,))
    return [OnnxValue.of(total)]
