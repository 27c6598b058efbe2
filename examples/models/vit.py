"""ViT example models: torch modules and their JAX twins.

Design note. The torch code follows the timm ``VisionTransformer`` spelling:

- Patch embedding is a ``Conv2d`` with ``stride == kernel_size == patch``, then
  ``flatten(2).transpose(1, 2)``; a learned class token is ``expand``-ed to the
  batch and ``cat``-ed in front; a learned position embedding is added.
- Pre-LN blocks. Attention: one fused ``qkv`` ``Linear``, ``reshape(B, N, 3, H, D)
  .permute(2, 0, 3, 1, 4).unbind(0)``; eager attention scales *Q* before the
  product (``q * scale``, then ``q @ k.transpose(-2, -1)``, ``softmax``); the
  SDPA form calls ``scaled_dot_product_attention`` with no mask.
- MLP: ``fc1``, exact (erf) GELU, ``fc2``, with dropout after each.
- Final LayerNorm, class-token pooling ``x[:, 0]``, dropout, classification head.

Only the batch is dynamic: the position table fixes the number of patches.

The JAX twins are pure functions of a flat params dict keyed by the torch
``state_dict`` names, taking the same NCHW float32 images.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

AttnForm = Literal["eager", "sdpa"]

TorchExample = tuple[nn.Module, tuple[torch.Tensor, ...], dict[str, Any] | None]
JaxExample = tuple[Callable[..., Any], tuple[Any, ...]]


@dataclass(frozen=True)
class ViTConfig:
    """Size and spelling of a ViT classifier, plus its example-input batch."""

    image_size: int = 32
    patch_size: int = 8
    num_channels: int = 3
    hidden: int = 64
    layers: int = 2
    heads: int = 2
    mlp_ratio: int = 4
    num_classes: int = 10
    attn: AttnForm = "eager"
    dropout: float = 0.1
    layer_norm_eps: float = 1e-6
    seed: int = 5
    batch: int = 2

    @property
    def num_patches(self) -> int:
        """Patches per image (the sequence is one longer, for the class token)."""
        return (self.image_size // self.patch_size) ** 2

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads


# ----------------------------------------------------------------------------- torch


class PatchEmbed(nn.Module):
    """Non-overlapping patches through a strided ``Conv2d``: (B, C, H, W) -> (B, N, hidden)."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.proj = nn.Conv2d(
            cfg.num_channels, cfg.hidden, kernel_size=cfg.patch_size, stride=cfg.patch_size
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    """Bidirectional self-attention with fused QKV, unbound from one permuted tensor."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.num_heads = cfg.heads
        self.head_dim = cfg.head_dim
        self.scale = cfg.head_dim**-0.5
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.proj_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        if self.cfg.attn == "sdpa":
            x = F.scaled_dot_product_attention(
                q, k, v, dropout_p=self.cfg.dropout if self.training else 0.0
            )
        else:
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn = attn.softmax(dim=-1)
            attn = self.attn_drop(attn)
            x = attn @ v
        x = x.transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


class Mlp(nn.Module):
    """``drop(fc2(drop(gelu(fc1(x)))))``."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden, cfg.mlp_ratio * cfg.hidden)
        self.act = nn.GELU()
        self.drop1 = nn.Dropout(cfg.dropout)
        self.fc2 = nn.Linear(cfg.mlp_ratio * cfg.hidden, cfg.hidden)
        self.drop2 = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop2(self.fc2(self.drop1(self.act(self.fc1(x)))))


class Block(nn.Module):
    """Pre-LN block: ``x + attn(norm1(x))``, then ``x + mlp(norm2(x))``."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.attn = Attention(cfg)
        self.norm2 = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.mlp = Mlp(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """ViT classifier: ``pixel_values`` (B, C, H, W) float32 -> logits (B, num_classes)."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.config = cfg
        self.patch_embed = PatchEmbed(cfg)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, cfg.hidden))
        self.pos_embed = nn.Parameter(torch.zeros(1, cfg.num_patches + 1, cfg.hidden))
        self.pos_drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.head_drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.hidden, cfg.num_classes)
        _init_params(self, cfg.seed)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(pixel_values)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
        x = self.pos_drop(x + self.pos_embed)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x)
        return self.head(self.head_drop(x[:, 0]))


def _init_params(module: nn.Module, seed: int) -> None:
    """Fill every parameter with seeded random values that keep activations near unit scale."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in module.modules():
            for name, p in mod.named_parameters(recurse=False):
                noise = torch.randn(p.shape, generator=gen)
                if isinstance(mod, nn.LayerNorm):
                    p.copy_((1.0 if name == "weight" else 0.0) + 0.1 * noise)
                elif name == "bias":
                    p.copy_(0.1 * noise)
                elif isinstance(mod, (nn.Linear, nn.Conv2d)):
                    p.copy_(noise / math.sqrt(p[0].numel()))
                else:  # class token, position embedding
                    p.copy_(0.5 * noise)


def numpy_params(module: nn.Module) -> dict[str, np.ndarray]:
    """The module's ``state_dict`` as NumPy float32 arrays."""
    return {name: t.detach().float().numpy().copy() for name, t in module.state_dict().items()}


# ----------------------------------------------------------------------------- JAX twin


def vit_jax_apply(params: dict[str, Any], pixel_values: Any, *, cfg: ViTConfig) -> Any:
    """JAX twin of :class:`VisionTransformer`; ``params`` as from :func:`numpy_params`."""
    import jax
    import jax.numpy as jnp

    p = {k: jnp.asarray(v) for k, v in params.items()}
    nh, hd = cfg.heads, cfg.head_dim

    def linear(name: str, x: Any) -> Any:
        return x @ p[f"{name}.weight"].T + p[f"{name}.bias"]

    def layer_norm(name: str, x: Any) -> Any:
        mu = x.mean(-1, keepdims=True)
        var = jnp.square(x - mu).mean(-1, keepdims=True)
        y = (x - mu) * jax.lax.rsqrt(var + cfg.layer_norm_eps)
        return y * p[f"{name}.weight"] + p[f"{name}.bias"]

    x = jax.lax.conv_general_dilated(
        pixel_values,
        p["patch_embed.proj.weight"],
        window_strides=(cfg.patch_size, cfg.patch_size),
        padding="VALID",
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
    )
    x = x + p["patch_embed.proj.bias"][None, :, None, None]
    b = x.shape[0]
    x = x.reshape(b, cfg.hidden, -1).transpose(0, 2, 1)
    x = jnp.concatenate((jnp.broadcast_to(p["cls_token"], (b, 1, cfg.hidden)), x), axis=1)
    x = x + p["pos_embed"]
    n = x.shape[1]
    for i in range(cfg.layers):
        pre = f"blocks.{i}."
        qkv = linear(pre + "attn.qkv", layer_norm(pre + "norm1", x)).reshape(b, n, 3, nh, hd)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        if cfg.attn == "sdpa":
            y = jax.nn.dot_product_attention(q, k, v)
        else:
            w = jnp.einsum("bqnh,bknh->bnqk", q * hd**-0.5, k)
            y = jnp.einsum("bnqk,bknh->bqnh", jax.nn.softmax(w, axis=-1), v)
        x = x + linear(pre + "attn.proj", y.reshape(b, n, cfg.hidden))
        m = linear(pre + "mlp.fc1", layer_norm(pre + "norm2", x))
        x = x + linear(pre + "mlp.fc2", jax.nn.gelu(m, approximate=False))
    x = layer_norm("norm", x)
    return linear("head", x[:, 0])


# ----------------------------------------------------------------------------- factories

_TINY = ViTConfig()
_SMALL = ViTConfig(image_size=96, patch_size=8, hidden=256, layers=4, heads=4, num_classes=100)


def vit(cfg: ViTConfig = _TINY) -> TorchExample:
    """ViT from a config: ``(model, (pixel_values,), {"pixel_values": {0: B}})``."""
    model = VisionTransformer(cfg)
    model.eval().requires_grad_(False)  # inference: frozen weights
    gen = torch.Generator().manual_seed(100 + cfg.seed)
    pixel_values = torch.randn(
        cfg.batch, cfg.num_channels, cfg.image_size, cfg.image_size, generator=gen
    )
    return model, (pixel_values,), {"pixel_values": {0: torch.export.Dim("B", max=1024)}}


def vit_jax(cfg: ViTConfig = _TINY) -> JaxExample:
    """JAX twin of :func:`vit` built from the same torch weights and images."""
    import jax.numpy as jnp

    model, (pixel_values,), _ = vit(cfg)
    params = numpy_params(model)

    def jax_fn(pixel_values: Any) -> Any:
        return vit_jax_apply(params, pixel_values, cfg=cfg)

    return jax_fn, (jnp.asarray(pixel_values.numpy()),)


def vit_tiny() -> TorchExample:
    """ViT, 32x32 images, 8x8 patches (17 tokens), hidden 64, 2 heads, 2 layers, 10 classes; batch 2."""
    return vit(_TINY)


def vit_tiny_sdpa() -> TorchExample:
    """:func:`vit_tiny` with SDPA attention."""
    return vit(replace(_TINY, attn="sdpa"))


def vit_small() -> TorchExample:
    """ViT, 96x96 images, 8x8 patches (145 tokens), hidden 256, 4 heads, 4 layers, 100 classes."""
    return vit(_SMALL)


def vit_small_sdpa() -> TorchExample:
    """:func:`vit_small` with SDPA attention."""
    return vit(replace(_SMALL, attn="sdpa"))


def vit_tiny_jax() -> JaxExample:
    """JAX twin of :func:`vit_tiny`."""
    return vit_jax(_TINY)


def vit_tiny_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`vit_tiny_sdpa` (``jax.nn.dot_product_attention``)."""
    return vit_jax(replace(_TINY, attn="sdpa"))


def vit_small_jax() -> JaxExample:
    """JAX twin of :func:`vit_small`."""
    return vit_jax(_SMALL)


def vit_small_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`vit_small_sdpa`."""
    return vit_jax(replace(_SMALL, attn="sdpa"))
