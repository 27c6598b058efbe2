"""Tiny models for the example sweeps: a torch attention block and a JAX MLP.

Each factory returns what ``irkit import FILE.py:FACTORY`` takes: a torch
module (or a JAX function), example inputs and the dynamic dims.
"""

from __future__ import annotations

from typing import Any


def torch_block() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """A pre-LN self-attention block (hidden 32, 2 heads) with dynamic batch B and sequence S."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, hidden: int = 32, heads: int = 2):
            super().__init__()
            self.heads = heads
            self.ln = nn.LayerNorm(hidden)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, h = x.shape
            q, k, v = self.qkv(self.ln(x)).split(h, dim=-1)
            q, k, v = (t.reshape(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
            att = torch.softmax(q @ k.transpose(-1, -2) / (h // self.heads) ** 0.5, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, s, h)
            return x + self.proj(y)

    torch.manual_seed(0)
    batch, seq = torch.export.Dim("B", max=64), torch.export.Dim("S", max=512)
    return Block().eval(), (torch.randn(2, 8, 32),), {"x": {0: batch, 1: seq}}


def jax_mlp() -> tuple[Any, tuple[Any, ...], tuple[str, ...]]:
    """A GELU MLP (32 -> 64 -> 32) with a residual, polymorphic in batch B and sequence S."""
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    w1 = jnp.asarray(rng.standard_normal((32, 64), dtype=np.float32) * 0.1)
    w2 = jnp.asarray(rng.standard_normal((64, 32), dtype=np.float32) * 0.1)

    def mlp(x: Any) -> Any:
        import jax

        return x + jax.nn.gelu(x @ w1) @ w2

    return mlp, (np.ones((2, 8, 32), np.float32),), ("B, S, _",)


def tiny_decoder() -> Any:
    """A one-layer toy decoder LM for ``generate`` sweeps, built directly in irkit IR (no export):
    vocabulary 64, hidden 32, a 32-position KV cache, token count ``S`` symbolic so the same
    function serves as prefill (S = prompt length) and decode (S = 1).

    Each call writes the new tokens' keys and values into the cache at ``cache_position`` and
    attends (single head, causal over the cache) from the new tokens; logits = tanh(h + attn) @ W_out.
    """
    import numpy as np

    from irkit.ir import DType, SymDim, TensorType
    from irkit.ir.aliases import set_aliases
    from irkit.ir.builder import module_of, new_function
    from irkit.zoo.decode import DecodeModel

    vocab, hidden, cache_len = 64, 32, 32
    f32, i64 = DType.f32, DType.i64
    s = SymDim.symbol("S")
    rng = np.random.default_rng(0)
    f, b = new_function("main", [TensorType((1, s), i64), TensorType((s,), i64),
                                 TensorType((1, 1, cache_len, hidden), f32),
                                 TensorType((1, 1, cache_len, hidden), f32)],
                        ["input_ids", "cache_position", "key_cache", "value_cache"])
    ids, pos, kc, vc = f.args

    def w(*shape: int) -> Any:
        return b.constant((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), f32)

    emb, wk, wv, wq, wo = w(vocab, hidden), w(hidden, hidden), w(hidden, hidden), w(hidden, hidden), w(hidden, vocab)
    h = b.gather(emb, ids, axis=0)                                   # [1, S, H]
    start = b.slice(pos, start=(0,), limit=(1,))                    # [1]
    zero = b.constant(np.zeros(2, np.int64), i64)
    starts = b.concat(zero, start, b.constant(np.zeros(1, np.int64), i64), axis=0)
    k4 = b.reshape(b.matmul(h, wk), shape=(1, 1, s, hidden))
    v4 = b.reshape(b.matmul(h, wv), shape=(1, 1, s, hidden))
    kc2 = b.dynamic_update_slice(kc, k4, starts)
    vc2 = b.dynamic_update_slice(vc, v4, starts)
    q = b.matmul(h, wq)                                              # [1, S, H]
    keys = b.reshape(kc2, shape=(1, cache_len, hidden))
    vals = b.reshape(vc2, shape=(1, cache_len, hidden))
    scores = b.mul(b.matmul(q, b.transpose(keys, perm=(0, 2, 1))), b.scalar(1.0 / np.sqrt(hidden), f32))
    # causal: cache slot j is visible from the token at position p when j <= p
    slot = b.iota(shape=(1, cache_len), axis=1, dtype=i64)
    visible = b.le(slot, b.reshape(pos, shape=(s, 1)))              # [S, T]
    scores = b.where(visible, scores, b.scalar(-1e9, f32))
    attn = b.matmul(b.softmax(scores, axis=-1), vals)               # [1, S, H]
    logits = b.matmul(b.tanh(b.add(h, attn)), wo)                   # [1, S, V]
    b.ret(logits, kc2, vc2)
    set_aliases(f, {1: 2, 2: 3})
    m = module_of(f)
    return DecodeModel("tiny_decoder", m, m, batch=1, max_cache_len=cache_len, vocab=vocab)
