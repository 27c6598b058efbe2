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
