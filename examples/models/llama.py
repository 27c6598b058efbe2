"""Llama example models: torch modules and their JAX twins.

Design note. The torch code follows the Hugging Face Llama spelling:

- ``LlamaRMSNorm`` upcasts to float32, multiplies by ``rsqrt(mean(x^2) + eps)``,
  casts back and scales by the weight.
- Rotary embeddings: ``inv_freq`` buffer, ``inv_freq @ position_ids`` for the
  angles, ``cat((freqs, freqs))`` then ``cos``/``sin``, and ``rotate_half``
  (``cat((-x2, x1))``) applied to Q and K.
- Grouped-query attention (``kv_heads < heads``): K and V are repeated to all
  heads with ``expand`` + ``reshape`` (``repeat_kv``) or, by flag, with
  ``repeat_interleave``. Scores are *multiplied* by ``head_dim ** -0.5``.
- Causal mask from comparing ``arange`` positions (a boolean (S, S) matrix, built
  once per forward): eager attention applies it with ``masked_fill(-inf)`` and
  takes ``softmax(..., dtype=float32)``; the SDPA form passes it as a boolean
  ``attn_mask`` and leaves ``scale`` at its default (equal to ``head_dim ** -0.5``).
- SiLU-gated MLP: ``down(silu(gate(x)) * up(x))``; untied LM head.
- Dropout (identity in eval mode, present in the graph) on the attention
  probabilities and, unlike Hugging Face, on the attention output.

``dtype="bfloat16"``/``"float16"`` casts the weights; the RMSNorm and the eager
softmax then run in float32 (the upcasts are in the graph).

The JAX twins are pure functions of a flat params dict keyed by the torch
``state_dict`` names. Their SDPA form calls ``jax.nn.dot_product_attention`` with
the unrepeated K/V (JAX handles grouped heads itself).
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
DTypeName = Literal["float32", "float16", "bfloat16"]

_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

TorchExample = tuple[nn.Module, tuple[torch.Tensor, ...], dict[str, Any] | None]
JaxExample = tuple[Callable[..., Any], tuple[Any, ...]]


@dataclass(frozen=True)
class LlamaConfig:
    """Size and spelling of a Llama model, plus its example-input shape."""

    vocab_size: int = 512
    hidden: int = 64
    intermediate: int = 176
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    """Fewer than ``heads``: grouped-query attention."""
    max_positions: int = 64
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    attn: AttnForm = "eager"
    repeat_kv: Literal["expand", "repeat_interleave"] = "expand"
    """How K/V heads are repeated to match the query heads."""
    dtype: DTypeName = "float32"
    dropout: float = 0.1
    seed: int = 2
    batch: int = 2
    seq: int = 16

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads


# ----------------------------------------------------------------------------- torch


class LlamaRMSNorm(nn.Module):
    """``weight * (x / sqrt(mean(x^2) + eps))``, computed in float32."""

    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    """Rotary angles: ``cos`` and ``sin`` of ``position * inv_freq``, each (1, S, head_dim)."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        d = cfg.head_dim
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq_expanded = (
            self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        )
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Rotate half the hidden dims: ``(x1, x2) -> (-x2, x1)``."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate Q and K (B, heads, S, D) by the angles (1, S, D)."""
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, kv_heads, S, D) -> (B, kv_heads * n_rep, S, D) through ``expand`` + ``reshape``."""
    batch, kv_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, kv_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, kv_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
    """Grouped-query attention with rotary Q/K."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.num_key_value_groups = cfg.heads // cfg.kv_heads
        self.scaling = cfg.head_dim**-0.5
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        # Not in Hugging Face Llama; here so every form (SDPA too) has an eval-mode dropout.
        self.resid_dropout = nn.Dropout(cfg.dropout)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, causal: torch.Tensor
    ) -> torch.Tensor:
        cfg = self.cfg
        input_shape = x.shape[:-1]
        hidden_shape = (*input_shape, -1, cfg.head_dim)
        q = self.q_proj(x).view(hidden_shape).transpose(1, 2)
        k = self.k_proj(x).view(hidden_shape).transpose(1, 2)
        v = self.v_proj(x).view(hidden_shape).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        if cfg.repeat_kv == "expand":
            k = repeat_kv(k, self.num_key_value_groups)
            v = repeat_kv(v, self.num_key_value_groups)
        else:
            k = k.repeat_interleave(self.num_key_value_groups, dim=1)
            v = v.repeat_interleave(self.num_key_value_groups, dim=1)
        if cfg.attn == "sdpa":
            out = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=causal,
                dropout_p=cfg.dropout if self.training else 0.0,
                # No `scale=`: SDPA's default equals `self.scaling`, and the TorchScript ONNX
                # exporter (torch 2.13) fails on bfloat16 SDPA given an explicit scale
                # ("ScalarType ComplexDouble is an unexpected tensor scalar type").
            )
        else:
            w = torch.matmul(q, k.transpose(2, 3)) * self.scaling
            w = w.masked_fill(~causal, float("-inf"))
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            w = self.attn_dropout(w)
            out = torch.matmul(w, v)
        out = out.transpose(1, 2).reshape(*input_shape, -1)
        return self.resid_dropout(self.o_proj(out))


class LlamaMLP(nn.Module):
    """SiLU-gated MLP: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(cfg.hidden, cfg.rms_norm_eps)
        self.self_attn = LlamaAttention(cfg)
        self.post_attention_layernorm = LlamaRMSNorm(cfg.hidden, cfg.rms_norm_eps)
        self.mlp = LlamaMLP(cfg)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, causal: torch.Tensor
    ) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, causal)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaForCausalLM(nn.Module):
    """Llama language model: ``input_ids`` (B, S) int64 -> logits (B, S, vocab)."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        assert cfg.heads % cfg.kv_heads == 0, "heads must be a multiple of kv_heads"
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg.layers))
        self.norm = LlamaRMSNorm(cfg.hidden, cfg.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(cfg)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab_size, bias=False)
        _init_params(self, cfg.seed)
        self.to(_TORCH_DTYPES[cfg.dtype])

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.embed_tokens(input_ids)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        cos, sin = self.rotary_emb(h, positions.unsqueeze(0))
        causal = positions[None, :] <= positions[:, None]  # (S, S): query i sees keys j <= i
        for layer in self.layers:
            h = layer(h, cos, sin, causal)
        return self.lm_head(self.norm(h))


def _init_params(module: nn.Module, seed: int) -> None:
    """Fill every parameter with seeded random values that keep activations near unit scale."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod in module.modules():
            for _, p in mod.named_parameters(recurse=False):
                noise = torch.randn(p.shape, generator=gen)
                if isinstance(mod, LlamaRMSNorm):
                    p.copy_(1.0 + 0.1 * noise)
                elif isinstance(mod, nn.Linear):
                    p.copy_(noise / math.sqrt(p.shape[1]))
                else:  # embeddings
                    p.copy_(0.5 * noise)


def numpy_params(module: nn.Module) -> dict[str, np.ndarray]:
    """The module's ``state_dict`` as NumPy arrays (floating tensors widened to float32)."""
    out = {}
    for name, t in module.state_dict().items():
        t = t.detach()
        out[name] = (t.float() if t.is_floating_point() else t).numpy().copy()
    return out


# ----------------------------------------------------------------------------- JAX twin


def llama_jax_apply(params: dict[str, Any], input_ids: Any, *, cfg: LlamaConfig) -> Any:
    """JAX twin of :class:`LlamaForCausalLM`; ``params`` as from :func:`numpy_params`."""
    import jax
    import jax.numpy as jnp

    dt = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}[cfg.dtype]
    p = {k: jnp.asarray(v, dtype=dt if v.dtype.kind == "f" else None) for k, v in params.items()}
    bsz, seq = input_ids.shape
    hd, rep = cfg.head_dim, cfg.heads // cfg.kv_heads

    def rms_norm(name: str, x: Any) -> Any:
        xf = x.astype(jnp.float32)
        xf = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + cfg.rms_norm_eps)
        return p[f"{name}.weight"] * xf.astype(x.dtype)

    def linear(name: str, x: Any) -> Any:
        return x @ p[f"{name}.weight"].T

    def rotate_half(x: Any) -> Any:
        x1, x2 = jnp.split(x, 2, axis=-1)
        return jnp.concatenate((-x2, x1), axis=-1)

    positions = jnp.arange(seq)
    inv_freq = 1.0 / (
        cfg.rope_theta ** (np.arange(0, hd, 2, dtype=np.int64).astype(np.float32) / hd)
    )
    freqs = positions.astype(jnp.float32)[:, None] * jnp.asarray(inv_freq, jnp.float32)[None, :]
    emb = jnp.concatenate((freqs, freqs), axis=-1)
    cos = jnp.cos(emb).astype(dt)[None, :, None, :]  # (1, S, 1, D) against (B, S, N, D)
    sin = jnp.sin(emb).astype(dt)[None, :, None, :]
    causal = positions[None, :] <= positions[:, None]

    h = p["embed_tokens.weight"][input_ids]
    for i in range(cfg.layers):
        pre = f"layers.{i}."
        a = rms_norm(pre + "input_layernorm", h)
        q = linear(pre + "self_attn.q_proj", a).reshape(bsz, seq, cfg.heads, hd)
        k = linear(pre + "self_attn.k_proj", a).reshape(bsz, seq, cfg.kv_heads, hd)
        v = linear(pre + "self_attn.v_proj", a).reshape(bsz, seq, cfg.kv_heads, hd)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cfg.attn == "sdpa":
            y = jax.nn.dot_product_attention(q, k, v, is_causal=True, scale=hd**-0.5)
        else:
            k = jnp.repeat(k, rep, axis=2)
            v = jnp.repeat(v, rep, axis=2)
            w = jnp.einsum("bqnh,bknh->bnqk", q, k) * hd**-0.5
            w = jnp.where(causal, w, -jnp.inf)
            w = jax.nn.softmax(w.astype(jnp.float32), axis=-1).astype(q.dtype)
            y = jnp.einsum("bnqk,bknh->bqnh", w, v)
        h = h + linear(pre + "self_attn.o_proj", y.reshape(bsz, seq, cfg.heads * hd))
        m = rms_norm(pre + "post_attention_layernorm", h)
        gate = jax.nn.silu(linear(pre + "mlp.gate_proj", m))
        h = h + linear(pre + "mlp.down_proj", gate * linear(pre + "mlp.up_proj", m))
    return linear("lm_head", rms_norm("norm", h))


# ----------------------------------------------------------------------------- factories

_TINY = LlamaConfig()
_SMALL = LlamaConfig(
    vocab_size=2048,
    hidden=256,
    intermediate=688,
    layers=4,
    heads=8,
    kv_heads=2,
    max_positions=256,
    seq=128,
)


def _token_ids(cfg: LlamaConfig, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab_size, (cfg.batch, cfg.seq), generator=gen, dtype=torch.int64)


def llama(cfg: LlamaConfig = _TINY) -> TorchExample:
    """Llama from a config: ``(model, (input_ids,), {"input_ids": {0: B, 1: S}})``."""
    model = LlamaForCausalLM(cfg)
    model.eval().requires_grad_(False)  # inference: frozen weights
    dims = {0: torch.export.Dim("B", max=1024), 1: torch.export.Dim("S", max=cfg.max_positions)}
    return model, (_token_ids(cfg, seed=100 + cfg.seed),), {"input_ids": dims}


def llama_jax(cfg: LlamaConfig = _TINY) -> JaxExample:
    """JAX twin of :func:`llama` built from the same torch weights; ids as int32."""
    import jax.numpy as jnp

    model, (input_ids,), _ = llama(cfg)
    params = numpy_params(model)

    def jax_fn(input_ids: Any) -> Any:
        return llama_jax_apply(params, input_ids, cfg=cfg)

    return jax_fn, (jnp.asarray(input_ids.numpy().astype(np.int32)),)


def llama_tiny() -> TorchExample:
    """Llama, hidden 64, 4 query / 2 KV heads, 2 layers; input_ids (2, 16)."""
    return llama(_TINY)


def llama_tiny_sdpa() -> TorchExample:
    """:func:`llama_tiny` with SDPA (boolean causal ``attn_mask``)."""
    return llama(replace(_TINY, attn="sdpa"))


def llama_tiny_interleave() -> TorchExample:
    """:func:`llama_tiny` repeating K/V heads with ``repeat_interleave``."""
    return llama(replace(_TINY, repeat_kv="repeat_interleave"))


def llama_tiny_bf16() -> TorchExample:
    """:func:`llama_tiny` in bfloat16 (RMSNorm and softmax upcast to float32)."""
    return llama(replace(_TINY, dtype="bfloat16"))


def llama_tiny_bf16_sdpa() -> TorchExample:
    """:func:`llama_tiny_bf16` with SDPA attention."""
    return llama(replace(_TINY, dtype="bfloat16", attn="sdpa"))


def llama_small() -> TorchExample:
    """Llama, hidden 256, 8 query / 2 KV heads, 4 layers; input_ids (2, 128)."""
    return llama(_SMALL)


def llama_small_sdpa() -> TorchExample:
    """:func:`llama_small` with SDPA attention."""
    return llama(replace(_SMALL, attn="sdpa"))


def llama_tiny_jax() -> JaxExample:
    """JAX twin of :func:`llama_tiny`."""
    return llama_jax(_TINY)


def llama_tiny_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`llama_tiny_sdpa` (``jax.nn.dot_product_attention`` with grouped K/V)."""
    return llama_jax(replace(_TINY, attn="sdpa"))


def llama_tiny_interleave_jax() -> JaxExample:
    """JAX twin of :func:`llama_tiny_interleave`."""
    return llama_jax(replace(_TINY, repeat_kv="repeat_interleave"))


def llama_tiny_bf16_jax() -> JaxExample:
    """JAX twin of :func:`llama_tiny_bf16`."""
    return llama_jax(replace(_TINY, dtype="bfloat16"))


def llama_tiny_bf16_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`llama_tiny_bf16_sdpa`."""
    return llama_jax(replace(_TINY, dtype="bfloat16", attn="sdpa"))


def llama_small_jax() -> JaxExample:
    """JAX twin of :func:`llama_small`."""
    return llama_jax(_SMALL)


def llama_small_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`llama_small_sdpa`."""
    return llama_jax(replace(_SMALL, attn="sdpa"))
