"""T5 example models (encoder-decoder and encoder-only): torch modules and JAX twins.

Design note. The torch code follows the Hugging Face T5 spelling:

- ``T5LayerNorm``: RMS-style, no mean subtraction and no bias, variance in float32.
- Relative position bias: ``relative_position = memory - context`` from two
  ``arange``s, log-bucketed (``torch.log``, ``.to(torch.long)``, ``torch.min``,
  ``torch.where``) into ``num_buckets`` (split by sign in the bidirectional
  encoder, one-sided in the causal decoder), looked up in an ``Embedding`` of
  shape (buckets, heads) owned by the first block, and shared by all blocks.
- Attention is *not* scaled by 1/sqrt(d). Eager form: ``scores += bias`` then
  ``softmax(scores.float()).type_as(scores)``; SDPA form: the bias as a float
  ``attn_mask`` and ``scale=1.0``.
- Masks: the encoder's 0/1 ``attention_mask`` becomes ``(1 - m) * finfo.min``
  added to the position bias; the decoder's causal mask is
  ``triu(full((T, T), finfo.min), 1)``; cross-attention uses the encoder mask only.
- FFN: ReLU (T5 v1.0, ``wi``/``wo``) or gated GELU (v1.1, ``wi_0``/``wi_1``/``wo``,
  tanh GELU via ``F.gelu(approximate="tanh")``). The tied LM head (v1.0) scales
  the decoder output by ``d_model ** -0.5``.

The JAX twins are pure functions of a flat params dict keyed by the torch
``state_dict`` names.
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
FeedForward = Literal["relu", "gated-gelu"]

TorchExample = tuple[nn.Module, tuple[torch.Tensor, ...], dict[str, Any] | None]
JaxExample = tuple[Callable[..., Any], tuple[Any, ...]]


@dataclass(frozen=True)
class T5Config:
    """Size and spelling of a T5 model, plus its example-input shapes."""

    vocab_size: int = 512
    d_model: int = 64
    d_kv: int = 16
    d_ff: int = 128
    num_heads: int = 4
    num_layers: int = 2
    num_decoder_layers: int = 2
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    feed_forward: FeedForward = "relu"
    tie_word_embeddings: bool = True
    encoder_only: bool = False
    attn: AttnForm = "eager"
    dropout: float = 0.1
    layer_norm_eps: float = 1e-6
    seed: int = 3
    batch: int = 2
    seq: int = 16
    """Example encoder length."""
    decoder_seq: int = 8
    """Example decoder length."""
    max_seq: int = 1024
    """Upper bound of the dynamic lengths (relative positions have no hard limit)."""

    @property
    def inner_dim(self) -> int:
        """Width of all heads together."""
        return self.num_heads * self.d_kv


# ----------------------------------------------------------------------------- torch


class T5LayerNorm(nn.Module):
    """T5's RMS norm: ``weight * x / sqrt(mean(x^2) + eps)``, variance in float32, no bias."""

    def __init__(self, hidden: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class T5DenseActDense(nn.Module):
    """v1.0 FFN: ``wo(dropout(relu(wi(x))))``."""

    def __init__(self, cfg: T5Config) -> None:
        super().__init__()
        self.wi = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.wo = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.wo(self.dropout(self.act(self.wi(x))))


class T5DenseGatedActDense(nn.Module):
    """v1.1 FFN: ``wo(dropout(gelu_tanh(wi_0(x)) * wi_1(x)))``."""

    def __init__(self, cfg: T5Config) -> None:
        super().__init__()
        self.wi_0 = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.wi_1 = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.wo = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.wi_0(x), approximate="tanh") * self.wi_1(x)
        return self.wo(self.dropout(h))


class T5LayerFF(nn.Module):
    """``x + dropout(ffn(layer_norm(x)))``."""

    def __init__(self, cfg: T5Config) -> None:
        super().__init__()
        ffn = T5DenseGatedActDense if cfg.feed_forward == "gated-gelu" else T5DenseActDense
        self.DenseReluDense = ffn(cfg)
        self.layer_norm = T5LayerNorm(cfg.d_model, cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.dropout(self.DenseReluDense(self.layer_norm(x)))


def relative_position_bucket(
    relative_position: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """T5's bucket of each relative position: exact below ``num_buckets // 2`` (per sign), log-spaced above."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


class T5Attention(nn.Module):
    """Unscaled multi-head attention; the first block of a stack owns the relative-position table."""

    def __init__(
        self, cfg: T5Config, *, is_decoder: bool, has_relative_attention_bias: bool
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.is_decoder = is_decoder
        self.q = nn.Linear(cfg.d_model, cfg.inner_dim, bias=False)
        self.k = nn.Linear(cfg.d_model, cfg.inner_dim, bias=False)
        self.v = nn.Linear(cfg.d_model, cfg.inner_dim, bias=False)
        self.o = nn.Linear(cfg.inner_dim, cfg.d_model, bias=False)
        self.dropout = nn.Dropout(cfg.dropout)
        if has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(
                cfg.relative_attention_num_buckets, cfg.num_heads
            )

    def compute_bias(
        self, query_length: int, key_length: int, device: torch.device
    ) -> torch.Tensor:
        """Position bias (1, heads, query_length, key_length)."""
        context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        relative_position = memory_position - context_position
        bucket = relative_position_bucket(
            relative_position,
            bidirectional=not self.is_decoder,
            num_buckets=self.cfg.relative_attention_num_buckets,
            max_distance=self.cfg.relative_attention_max_distance,
        )
        values = self.relative_attention_bias(bucket)  # (q, k, heads)
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(
        self,
        hidden_states: torch.Tensor,
        bias: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
    ) -> torch.Tensor:
        cfg = self.cfg
        batch_size = hidden_states.shape[0]
        source = hidden_states if key_value_states is None else key_value_states
        q = self.q(hidden_states).view(batch_size, -1, cfg.num_heads, cfg.d_kv).transpose(1, 2)
        k = self.k(source).view(batch_size, -1, cfg.num_heads, cfg.d_kv).transpose(1, 2)
        v = self.v(source).view(batch_size, -1, cfg.num_heads, cfg.d_kv).transpose(1, 2)
        if cfg.attn == "sdpa":
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=bias, dropout_p=cfg.dropout if self.training else 0.0, scale=1.0
            )
        else:
            scores = torch.matmul(q, k.transpose(3, 2))  # no 1/sqrt(d): T5 folds it into the init
            scores += bias
            attn_weights = F.softmax(scores.float(), dim=-1).type_as(scores)
            attn_weights = self.dropout(attn_weights)
            out = torch.matmul(attn_weights, v)
        out = out.transpose(1, 2).contiguous().view(batch_size, -1, cfg.inner_dim)
        return self.o(out)


class T5LayerSelfAttention(nn.Module):
    """``x + dropout(self_attention(layer_norm(x)))``."""

    def __init__(
        self, cfg: T5Config, *, is_decoder: bool, has_relative_attention_bias: bool
    ) -> None:
        super().__init__()
        self.SelfAttention = T5Attention(
            cfg, is_decoder=is_decoder, has_relative_attention_bias=has_relative_attention_bias
        )
        self.layer_norm = T5LayerNorm(cfg.d_model, cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return x + self.dropout(self.SelfAttention(self.layer_norm(x), bias))


class T5LayerCrossAttention(nn.Module):
    """``x + dropout(cross_attention(layer_norm(x), encoder_states))``."""

    def __init__(self, cfg: T5Config) -> None:
        super().__init__()
        self.EncDecAttention = T5Attention(cfg, is_decoder=True, has_relative_attention_bias=False)
        self.layer_norm = T5LayerNorm(cfg.d_model, cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(
        self, x: torch.Tensor, encoder_states: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        return x + self.dropout(self.EncDecAttention(self.layer_norm(x), bias, encoder_states))


class T5Block(nn.Module):
    """Self-attention, [cross-attention,] feed-forward."""

    def __init__(
        self, cfg: T5Config, *, is_decoder: bool, has_relative_attention_bias: bool
    ) -> None:
        super().__init__()
        self.is_decoder = is_decoder
        self.layer = nn.ModuleList(
            [
                T5LayerSelfAttention(
                    cfg,
                    is_decoder=is_decoder,
                    has_relative_attention_bias=has_relative_attention_bias,
                )
            ]
        )
        if is_decoder:
            self.layer.append(T5LayerCrossAttention(cfg))
        self.layer.append(T5LayerFF(cfg))

    def forward(
        self,
        x: torch.Tensor,
        self_bias: torch.Tensor,
        encoder_states: torch.Tensor | None = None,
        cross_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        x = self.layer[0](x, self_bias)
        if self.is_decoder:
            assert encoder_states is not None and cross_bias is not None
            x = self.layer[1](x, encoder_states, cross_bias)
        return self.layer[-1](x)


class T5Stack(nn.Module):
    """Embedding, dropout, blocks, final norm, dropout; the first block computes the position bias."""

    def __init__(self, cfg: T5Config, embed_tokens: nn.Embedding, *, is_decoder: bool) -> None:
        super().__init__()
        self.is_decoder = is_decoder
        self.embed_tokens = embed_tokens
        n = cfg.num_decoder_layers if is_decoder else cfg.num_layers
        self.block = nn.ModuleList(
            T5Block(cfg, is_decoder=is_decoder, has_relative_attention_bias=i == 0)
            for i in range(n)
        )
        self.final_layer_norm = T5LayerNorm(cfg.d_model, cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(
        self,
        input_ids: torch.Tensor,
        mask_bias: torch.Tensor,
        encoder_states: torch.Tensor | None = None,
        cross_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        h = self.dropout(self.embed_tokens(input_ids))
        seq = input_ids.shape[1]
        position_bias = self.block[0].layer[0].SelfAttention.compute_bias(seq, seq, h.device)
        position_bias = position_bias + mask_bias
        for block in self.block:
            h = block(h, position_bias, encoder_states, cross_bias)
        return self.dropout(self.final_layer_norm(h))


def _padding_bias(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0/1 mask (B, S) -> additive bias (B, 1, 1, S): 0 where kept, ``finfo.min`` where padded."""
    mask = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - mask) * torch.finfo(dtype).min


class T5EncoderModel(nn.Module):
    """T5 encoder: ``(input_ids, attention_mask)`` (B, S) int64 -> (B, S, d_model)."""

    def __init__(self, cfg: T5Config) -> None:
        super().__init__()
        self.config = cfg
        self.shared = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.encoder = T5Stack(cfg, self.shared, is_decoder=False)
        _init_params(self, cfg.seed)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_ids, _padding_bias(attention_mask, self.shared.weight.dtype))


class T5ForConditionalGeneration(nn.Module):
    """T5 encoder-decoder: ``(input_ids, attention_mask, decoder_input_ids)`` -> logits (B, T, vocab)."""

    def __init__(self, cfg: T5Config) -> None:
        super().__init__()
        self.config = cfg
        self.shared = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.encoder = T5Stack(cfg, self.shared, is_decoder=False)
        self.decoder = T5Stack(cfg, self.shared, is_decoder=True)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        _init_params(self, cfg.seed)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.shared.weight

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, decoder_input_ids: torch.Tensor
    ) -> torch.Tensor:
        dtype = self.shared.weight.dtype
        enc_bias = _padding_bias(attention_mask, dtype)
        encoder_states = self.encoder(input_ids, enc_bias)
        tgt = decoder_input_ids.shape[1]
        causal_bias = torch.triu(
            torch.full((tgt, tgt), torch.finfo(dtype).min, dtype=dtype, device=input_ids.device),
            diagonal=1,
        )
        h = self.decoder(decoder_input_ids, causal_bias[None, None], encoder_states, enc_bias)
        if self.config.tie_word_embeddings:
            h = h * (self.config.d_model**-0.5)
        return self.lm_head(h)


def _init_params(module: nn.Module, seed: int) -> None:
    """Fill every parameter with seeded random values; Q is scaled by d_kv^-0.5 as in T5's init."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for mod_name, mod in module.named_modules():
            for _, p in mod.named_parameters(recurse=False):
                noise = torch.randn(p.shape, generator=gen)
                if isinstance(mod, T5LayerNorm):
                    p.copy_(1.0 + 0.1 * noise)
                elif isinstance(mod, nn.Linear):
                    scale = 1.0 / math.sqrt(p.shape[1])
                    if mod_name.endswith(".q"):
                        scale /= math.sqrt(module.config.d_kv)  # type: ignore[union-attr]
                    p.copy_(noise * scale)
                elif mod_name.endswith("relative_attention_bias"):
                    p.copy_(noise)
                else:  # token embeddings
                    p.copy_(0.5 * noise)


def numpy_params(module: nn.Module) -> dict[str, np.ndarray]:
    """The module's ``state_dict`` as NumPy arrays (floating tensors widened to float32)."""
    out = {}
    for name, t in module.state_dict().items():
        t = t.detach()
        out[name] = (t.float() if t.is_floating_point() else t).numpy().copy()
    return out


# ----------------------------------------------------------------------------- JAX twin


def _jax_bucket(
    relative_position: Any, bidirectional: bool, num_buckets: int, max_distance: int
) -> Any:
    import jax.numpy as jnp

    buckets = jnp.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).astype(relative_position.dtype) * num_buckets
        relative_position = jnp.abs(relative_position)
    else:
        relative_position = -jnp.minimum(relative_position, 0)
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (
        jnp.log(relative_position.astype(jnp.float32) / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).astype(relative_position.dtype)
    large = jnp.minimum(large, num_buckets - 1)
    return buckets + jnp.where(is_small, relative_position, large)


def t5_jax_apply(
    params: dict[str, Any],
    input_ids: Any,
    attention_mask: Any,
    decoder_input_ids: Any = None,
    *,
    cfg: T5Config,
) -> Any:
    """JAX twin of :class:`T5ForConditionalGeneration` (or of :class:`T5EncoderModel` when
    ``cfg.encoder_only``, without ``decoder_input_ids``)."""
    import jax
    import jax.numpy as jnp

    p = {k: jnp.asarray(v) for k, v in params.items()}
    nh, dkv = cfg.num_heads, cfg.d_kv
    minval = jnp.finfo(jnp.float32).min

    def linear(name: str, x: Any) -> Any:
        return x @ p[f"{name}.weight"].T

    def norm(name: str, x: Any) -> Any:
        var = jnp.mean(x * x, axis=-1, keepdims=True)
        return p[f"{name}.weight"] * (x * jax.lax.rsqrt(var + cfg.layer_norm_eps))

    def attention(name: str, x: Any, source: Any, bias: Any) -> Any:
        b = x.shape[0]
        q = linear(f"{name}.q", x).reshape(b, -1, nh, dkv)
        k = linear(f"{name}.k", source).reshape(b, -1, nh, dkv)
        v = linear(f"{name}.v", source).reshape(b, -1, nh, dkv)
        if cfg.attn == "sdpa":
            bias = jnp.broadcast_to(bias, (b, nh, q.shape[1], k.shape[1]))
            y = jax.nn.dot_product_attention(q, k, v, bias=bias, scale=1.0)
        else:
            s = jnp.einsum("bqnh,bknh->bnqk", q, k) + bias
            y = jnp.einsum("bnqk,bknh->bqnh", jax.nn.softmax(s, axis=-1), v)
        return linear(f"{name}.o", y.reshape(b, -1, cfg.inner_dim))

    def position_bias(prefix: str, seq: int, bidirectional: bool) -> Any:
        pos = jnp.arange(seq, dtype=jnp.int32)
        bucket = _jax_bucket(
            pos[None, :] - pos[:, None],
            bidirectional,
            cfg.relative_attention_num_buckets,
            cfg.relative_attention_max_distance,
        )
        table = p[f"{prefix}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
        return jnp.transpose(table[bucket], (2, 0, 1))[None]

    def stack(
        prefix: str, ids: Any, mask_bias: Any, enc: Any = None, cross_bias: Any = None
    ) -> Any:
        is_decoder = enc is not None
        h = p["shared.weight"][ids]
        bias = position_bias(prefix, ids.shape[1], not is_decoder) + mask_bias
        n = cfg.num_decoder_layers if is_decoder else cfg.num_layers
        for i in range(n):
            blk = f"{prefix}.block.{i}.layer"
            x = norm(f"{blk}.0.layer_norm", h)
            h = h + attention(f"{blk}.0.SelfAttention", x, x, bias)
            if is_decoder:
                h = h + attention(
                    f"{blk}.1.EncDecAttention", norm(f"{blk}.1.layer_norm", h), enc, cross_bias
                )
            ff = f"{blk}.{2 if is_decoder else 1}"
            x = norm(f"{ff}.layer_norm", h)
            if cfg.feed_forward == "gated-gelu":
                g = jax.nn.gelu(linear(f"{ff}.DenseReluDense.wi_0", x), approximate=True)
                x = g * linear(f"{ff}.DenseReluDense.wi_1", x)
            else:
                x = jax.nn.relu(linear(f"{ff}.DenseReluDense.wi", x))
            h = h + linear(f"{ff}.DenseReluDense.wo", x)
        return norm(f"{prefix}.final_layer_norm", h)

    enc_bias = (1.0 - attention_mask[:, None, None, :].astype(jnp.float32)) * minval
    enc = stack("encoder", input_ids, enc_bias)
    if cfg.encoder_only:
        return enc
    tgt = decoder_input_ids.shape[1]
    causal_bias = jnp.triu(jnp.full((tgt, tgt), minval, jnp.float32), k=1)[None, None]
    h = stack("decoder", decoder_input_ids, causal_bias, enc, enc_bias)
    if cfg.tie_word_embeddings:
        h = h * (cfg.d_model**-0.5)
    return h @ (p["shared.weight"] if cfg.tie_word_embeddings else p["lm_head.weight"]).T


# ----------------------------------------------------------------------------- factories

_TINY = T5Config()
_SMALL = T5Config(
    vocab_size=2048,
    d_model=256,
    d_kv=32,
    d_ff=640,
    num_heads=8,
    num_layers=3,
    num_decoder_layers=3,
    feed_forward="gated-gelu",
    tie_word_embeddings=False,
    seq=128,
    decoder_seq=64,
)
_ENCODER_TINY = replace(_TINY, encoder_only=True, feed_forward="gated-gelu", seed=4)


def _inputs(cfg: T5Config, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(
        0, cfg.vocab_size, (cfg.batch, cfg.seq), generator=gen, dtype=torch.int64
    )
    attention_mask = torch.ones_like(input_ids)
    for b in range(1, cfg.batch):  # row 0 full, later rows padded at the end
        attention_mask[b, cfg.seq - min(cfg.seq - 1, b * max(1, cfg.seq // 4)) :] = 0
    if cfg.encoder_only:
        return input_ids, attention_mask
    decoder_input_ids = torch.randint(
        0, cfg.vocab_size, (cfg.batch, cfg.decoder_seq), generator=gen, dtype=torch.int64
    )
    return input_ids, attention_mask, decoder_input_ids


def t5(cfg: T5Config = _TINY) -> TorchExample:
    """T5 from a config. Encoder-decoder inputs ``(input_ids, attention_mask)`` (B, S) and
    ``decoder_input_ids`` (B, T); encoder-only takes the first two."""
    # Frozen weights, as for inference. With a trainable relative-position table the SDPA
    # mask requires grad, and torch.onnx.export(dynamo=True) (torch 2.13) then re-traces
    # SDPA through its math kernel, whose (B, H, S, D) output no longer fits the `view`
    # recorded after `.transpose(1, 2).contiguous()`.
    model = (T5EncoderModel if cfg.encoder_only else T5ForConditionalGeneration)(cfg)
    model.eval().requires_grad_(False)
    b = torch.export.Dim("B", max=1024)
    s = torch.export.Dim("S", max=cfg.max_seq)
    dyn: dict[str, Any] = {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}}
    if not cfg.encoder_only:
        dyn["decoder_input_ids"] = {0: b, 1: torch.export.Dim("T", max=cfg.max_seq)}
    return model, _inputs(cfg, seed=100 + cfg.seed), dyn


def t5_jax(cfg: T5Config = _TINY) -> JaxExample:
    """JAX twin of :func:`t5` built from the same torch weights; ids and mask as int32."""
    import jax.numpy as jnp

    model, inputs, _ = t5(cfg)
    params = numpy_params(model)

    def jax_fn(*args: Any) -> Any:
        return t5_jax_apply(params, *args, cfg=cfg)

    return jax_fn, tuple(jnp.asarray(t.numpy().astype(np.int32)) for t in inputs)


def t5_tiny() -> TorchExample:
    """T5 v1.0 encoder-decoder, d_model 64, 4 heads, 2+2 layers, ReLU FFN, tied head;
    encoder (2, 16) with row 1 padded, decoder (2, 8)."""
    return t5(_TINY)


def t5_tiny_sdpa() -> TorchExample:
    """:func:`t5_tiny` with SDPA (bias as float ``attn_mask``, ``scale=1.0``)."""
    return t5(replace(_TINY, attn="sdpa"))


def t5_encoder_tiny() -> TorchExample:
    """T5 v1.1 encoder only, d_model 64, 4 heads, 2 layers, gated-GELU FFN; (2, 16) inputs."""
    return t5(_ENCODER_TINY)


def t5_encoder_tiny_sdpa() -> TorchExample:
    """:func:`t5_encoder_tiny` with SDPA attention."""
    return t5(replace(_ENCODER_TINY, attn="sdpa"))


def t5_small() -> TorchExample:
    """T5 v1.1 encoder-decoder, d_model 256, 8 heads, 3+3 layers, gated-GELU FFN, untied head;
    encoder (2, 128), decoder (2, 64)."""
    return t5(_SMALL)


def t5_small_sdpa() -> TorchExample:
    """:func:`t5_small` with SDPA attention."""
    return t5(replace(_SMALL, attn="sdpa"))


def t5_tiny_jax() -> JaxExample:
    """JAX twin of :func:`t5_tiny`."""
    return t5_jax(_TINY)


def t5_tiny_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`t5_tiny_sdpa` (``jax.nn.dot_product_attention``, ``scale=1.0``)."""
    return t5_jax(replace(_TINY, attn="sdpa"))


def t5_encoder_tiny_jax() -> JaxExample:
    """JAX twin of :func:`t5_encoder_tiny`."""
    return t5_jax(_ENCODER_TINY)


def t5_encoder_tiny_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`t5_encoder_tiny_sdpa`."""
    return t5_jax(replace(_ENCODER_TINY, attn="sdpa"))


def t5_small_jax() -> JaxExample:
    """JAX twin of :func:`t5_small`."""
    return t5_jax(_SMALL)


def t5_small_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`t5_small_sdpa`."""
    return t5_jax(replace(_SMALL, attn="sdpa"))
