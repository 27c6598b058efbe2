"""Synthetic Transformer modules built directly in the IR.

Used by the demo, the scaling benchmarks and tests: a GPT-2-style decoder with
``layers`` blocks, written the way an exporter spells it (decomposed layer
norm, attention as matmul/scale/mask/softmax/matmul, tanh-GELU as a formula),
so that canonicalisation and fusion have real work to do.  Weights are random
(seeded), never zeros.
"""

from __future__ import annotations

import math

import numpy as np

from irkit.ir.builder import Builder, new_function
from irkit.ir.core import Location, Module, Value
from irkit.ir.types import DType, SymDim, TensorType


def _w(rng: np.random.Generator, *shape: int, scale: float = 0.02) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _layer_norm_decomposed(b: Builder, x: Value, w: Value, bias: Value, eps: float = 1e-5) -> Value:
    mean = b.reduce_mean(x, axes=(-1,), keepdims=True)
    xc = b.sub(x, mean)
    var = b.reduce_mean(b.mul(xc, xc), axes=(-1,), keepdims=True)
    inv = b.rsqrt(b.add(var, b.scalar(eps, DType.f32)))
    return b.add(b.mul(b.mul(xc, inv), w), bias)


def _gelu_tanh_decomposed(b: Builder, x: Value) -> Value:
    c = b.scalar(math.sqrt(2.0 / math.pi), DType.f32)
    x3 = b.mul(b.mul(x, x), x)
    inner = b.mul(c, b.add(x, b.mul(b.scalar(0.044715, DType.f32), x3)))
    return b.mul(b.mul(b.scalar(0.5, DType.f32), x), b.add(b.scalar(1.0, DType.f32), b.tanh(inner)))


def gpt2_style_module(layers: int = 2, hidden: int = 64, heads: int = 4, vocab: int = 128, seq: int = 16,
                      max_pos: int = 64, dynamic: bool = True, seed: int = 0, name: str = "main") -> Module:
    """A GPT-2-style decoder (token ids -> logits) in exporter spelling.

    With ``dynamic`` the batch and sequence dims are symbols ``B`` and ``S``.
    """
    rng = np.random.default_rng(seed)
    B: int | SymDim = SymDim.symbol("B") if dynamic else 2
    S: int | SymDim = SymDim.symbol("S") if dynamic else seq
    dh = hidden // heads
    f, b = new_function(name, [TensorType((B, S), DType.i64)], ["input_ids"], Location("gpt2_block.py", 1, 0))
    if dynamic:
        f.attrs["ik.sym_examples"] = ("B=2", f"S={seq}")
    (ids,) = f.args
    b.loc = Location("gpt2_block.py", 10, 0, name="embed")
    wte = b.constant(_w(rng, vocab, hidden), name="wte.weight")
    wpe = b.constant(_w(rng, max_pos, hidden), name="wpe.weight")
    pos = b.iota(shape=(S,), axis=0, dtype=DType.i64)
    h = b.add(b.gather(wte, ids, axis=0), b.gather(wpe, pos, axis=0))
    causal = np.tril(np.ones((max_pos, max_pos), dtype=bool)).reshape(1, 1, max_pos, max_pos)
    mask_buf = b.constant(causal, name="causal_mask")
    for i in range(layers):
        p = f"h.{i}."
        b.loc = Location("gpt2_block.py", 20, 0, name=f"{p}ln_1")
        x = _layer_norm_decomposed(b, h, b.constant(1 + _w(rng, hidden), name=p + "ln_1.weight"),
                                   b.constant(_w(rng, hidden), name=p + "ln_1.bias"))
        b.loc = Location("gpt2_block.py", 30, 0, name=f"{p}attn")
        qkv = b.add(b.matmul(x, b.constant(_w(rng, hidden, 3 * hidden), name=p + "attn.c_attn.weight")),
                    b.constant(_w(rng, 3 * hidden), name=p + "attn.c_attn.bias"))
        q, k, v = b.split(qkv, axis=2, sizes=(hidden, hidden, hidden))

        def heads_of(t: Value) -> Value:
            return b.transpose(b.reshape(t, shape=(B, S, heads, dh)), perm=(0, 2, 1, 3))

        q, k, v = heads_of(q), heads_of(k), heads_of(v)
        b.loc = Location("gpt2_block.py", 40, 0, name=f"{p}attn.scores")
        scores = b.matmul(q, b.transpose(k, perm=(0, 1, 3, 2)))
        scores = b.div(scores, b.scalar(math.sqrt(dh), DType.f32))
        m = b.slice(mask_buf, start=(0, 0, 0, 0), limit=(1, 1, S, S))
        scores = b.where(m, scores, b.scalar(float(np.finfo(np.float32).min), DType.f32))
        mx = b.reduce_max(scores, axes=(-1,), keepdims=True)
        e = b.exp(b.sub(scores, mx))
        probs = b.div(e, b.reduce_sum(e, axes=(-1,), keepdims=True))
        b.loc = Location("gpt2_block.py", 50, 0, name=f"{p}attn.out")
        ctx = b.matmul(probs, v)
        ctx = b.reshape(b.transpose(ctx, perm=(0, 2, 1, 3)), shape=(B, S, hidden))
        proj = b.add(b.matmul(ctx, b.constant(_w(rng, hidden, hidden), name=p + "attn.c_proj.weight")),
                     b.constant(_w(rng, hidden), name=p + "attn.c_proj.bias"))
        h = b.add(h, proj)
        b.loc = Location("gpt2_block.py", 60, 0, name=f"{p}mlp")
        x = _layer_norm_decomposed(b, h, b.constant(1 + _w(rng, hidden), name=p + "ln_2.weight"),
                                   b.constant(_w(rng, hidden), name=p + "ln_2.bias"))
        up = b.add(b.matmul(x, b.constant(_w(rng, hidden, 4 * hidden), name=p + "mlp.c_fc.weight")),
                   b.constant(_w(rng, 4 * hidden), name=p + "mlp.c_fc.bias"))
        act = _gelu_tanh_decomposed(b, up)
        down = b.add(b.matmul(act, b.constant(_w(rng, 4 * hidden, hidden), name=p + "mlp.c_proj.weight")),
                     b.constant(_w(rng, hidden), name=p + "mlp.c_proj.bias"))
        h = b.add(h, down)
    b.loc = Location("gpt2_block.py", 70, 0, name="ln_f")
    h = _layer_norm_decomposed(b, h, b.constant(1 + _w(rng, hidden), name="ln_f.weight"),
                               b.constant(_w(rng, hidden), name="ln_f.bias"))
    logits = b.matmul(h, b.transpose(wte, perm=(1, 0)))
    b.ret(logits)
    return Module([f])


__all__ = ["gpt2_style_module"]
