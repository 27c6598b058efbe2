"""Flax NNX versions of zoo architectures, with the weights of the transformers model.

Design note. JAX users write their models in Flax; the zoo's transformers
models are torch.  For GPT-2, Llama, BERT, T5 and ViT this module holds a
Flax NNX (``flax.nnx``) model written the way a Flax user writes it
(``nnx.Linear``, ``nnx.Embed``, ``nnx.LayerNorm`` / ``nnx.RMSNorm``,
``nnx.MultiHeadAttention``, ``jax.nn.dot_product_attention``, explicit
einsums), built from the *same* transformers config as the zoo entry
(:func:`irkit.zoo.make_config`), and :func:`copy_weights` copies a transformers
model's weights into it, so both compute the same function and the Flax model
can be checked against the torch one before it is imported into irkit
(jaxpr: :func:`irkit.frontends.jax.import_jax`; StableHLO:
:func:`irkit.frontends.jax.import_stablehlo`).

The attention spellings differ on purpose, one per model, since each is a
form Flax code uses: GPT-2 writes ``q @ k^T * scale`` with a ``jnp.tril``
causal mask and ``jax.nn.softmax``; Llama calls ``jax.nn.dot_product_attention``
with grouped K/V heads and ``is_causal=True``; BERT and ViT use
``nnx.MultiHeadAttention`` (BERT with a key padding mask); T5 writes
unscaled ``einsum`` scores plus a relative-position bias (and a causal mask in
the decoder's self-attention) and ``einsum`` cross-attention.

Inputs are what the transformers model takes, as NumPy/JAX arrays: token ids
as int32 ``[B, S]``, BERT's attention mask ``[B, S]`` (1 keep, 0 pad), T5's
``decoder_input_ids``, ViT's ``pixel_values`` NCHW (transposed to NHWC inside).
Importing this module needs flax; ``import irkit.zoo`` does not import it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from irkit.zoo.build import ZooError, build, entry, make_config
from irkit.zoo.registry import INPUT_NAMES

try:
    import jax
    import jax.numpy as jnp
    from flax import nnx
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ZooError(f"irkit.zoo.flax_models needs flax and jax ({e}); install flax==0.12.8 with jax 0.10.2") from e

FLAX_NAMES: tuple[str, ...] = ("gpt2", "llama", "bert", "t5", "vit")
"""The zoo architectures that have a Flax NNX model here."""

TESTED_WITH = {"flax": "0.12.8", "jax": "0.10.2", "transformers": "5.24.0", "torch": "2.13.0"}


def _set(var: Any, value: Any) -> None:
    """Copy a torch tensor or array into an NNX variable, checking the shape."""
    arr = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value, dtype=np.float32)
    if tuple(var.shape) != arr.shape:
        raise ZooError(f"weight shape {arr.shape} does not fit the Flax parameter of shape {tuple(var.shape)}")
    var.set_value(jnp.asarray(arr))


def _linear(dst: Any, src: Any) -> None:
    """torch ``nn.Linear`` (weight ``[out, in]``) into ``nnx.Linear`` (kernel ``[in, out]``)."""
    _set(dst.kernel, src.weight.detach().numpy().T)
    if src.bias is not None:
        _set(dst.bias, src.bias)


def _norm(dst: Any, src: Any) -> None:
    _set(dst.scale, src.weight)
    if getattr(src, "bias", None) is not None:
        _set(dst.bias, src.bias)


def _mha(dst: Any, q: Any, k: Any, v: Any, o: Any, heads: int) -> None:
    """Four torch Linears into ``nnx.MultiHeadAttention`` (kernels ``[E, H, D]``, out ``[H, D, E]``)."""
    for d, s in ((dst.query, q), (dst.key, k), (dst.value, v)):
        w = s.weight.detach().numpy()  # [H*D, E]
        _set(d.kernel, w.T.reshape(w.shape[1], heads, -1))
        _set(d.bias, s.bias.detach().numpy().reshape(heads, -1))
    w = o.weight.detach().numpy()  # [E, H*D]
    _set(dst.out.kernel, w.T.reshape(heads, -1, w.shape[0]))
    _set(dst.out.bias, o.bias)


# ---------------------------------------------------------------------------- GPT-2


class GPT2Block(nnx.Module):
    def __init__(self, c: Any, rngs: nnx.Rngs) -> None:
        e = c.n_embd
        self.heads = c.n_head
        self.ln_1 = nnx.LayerNorm(e, epsilon=c.layer_norm_epsilon, rngs=rngs)
        self.c_attn = nnx.Linear(e, 3 * e, rngs=rngs)
        self.c_proj = nnx.Linear(e, e, rngs=rngs)
        self.ln_2 = nnx.LayerNorm(e, epsilon=c.layer_norm_epsilon, rngs=rngs)
        self.c_fc = nnx.Linear(e, c.n_inner or 4 * e, rngs=rngs)
        self.mlp_proj = nnx.Linear(c.n_inner or 4 * e, e, rngs=rngs)

    def attention(self, x: Any) -> Any:
        b, s, e = x.shape
        d = e // self.heads
        q, k, v = jnp.split(self.c_attn(x), 3, axis=-1)
        q, k, v = (t.reshape(b, s, self.heads, d).transpose(0, 2, 1, 3) for t in (q, k, v))
        scores = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(d)
        causal = jnp.tril(jnp.ones((s, s), dtype=bool))
        scores = jnp.where(causal, scores, jnp.finfo(scores.dtype).min)
        out = jax.nn.softmax(scores, axis=-1) @ v
        return self.c_proj(out.transpose(0, 2, 1, 3).reshape(b, s, e))

    def __call__(self, x: Any) -> Any:
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(jax.nn.gelu(self.c_fc(self.ln_2(x)), approximate=True))


class FlaxGPT2(nnx.Module):
    """GPT-2 LM head model: ``input_ids [B, S] -> logits [B, S, V]`` (tied embeddings)."""

    zoo_name = "gpt2"

    def __init__(self, c: Any, rngs: nnx.Rngs) -> None:
        self.wte = nnx.Embed(c.vocab_size, c.n_embd, rngs=rngs)
        self.wpe = nnx.Embed(c.n_positions, c.n_embd, rngs=rngs)
        self.h = nnx.List([GPT2Block(c, rngs) for _ in range(c.n_layer)])
        self.ln_f = nnx.LayerNorm(c.n_embd, epsilon=c.layer_norm_epsilon, rngs=rngs)

    def __call__(self, input_ids: Any) -> Any:
        x = self.wte(input_ids) + self.wpe(jnp.arange(input_ids.shape[1]))[None]
        for blk in self.h:
            x = blk(x)
        return self.wte.attend(self.ln_f(x))


def _copy_gpt2(hf: Any, m: FlaxGPT2) -> None:
    t = hf.transformer
    _set(m.wte.embedding, t.wte.weight)
    _set(m.wpe.embedding, t.wpe.weight)
    for dst, src in zip(m.h, t.h):
        _norm(dst.ln_1, src.ln_1)
        _norm(dst.ln_2, src.ln_2)
        # GPT-2's Conv1D stores weight as [in, out], nnx.Linear's kernel layout.
        for d, s in ((dst.c_attn, src.attn.c_attn), (dst.c_proj, src.attn.c_proj), (dst.c_fc, src.mlp.c_fc),
                     (dst.mlp_proj, src.mlp.c_proj)):
            _set(d.kernel, s.weight)
            _set(d.bias, s.bias)
    _norm(m.ln_f, t.ln_f)


# ---------------------------------------------------------------------------- Llama


def _rope(x: Any, positions: Any, theta: float) -> Any:
    """Rotary embedding, rotate-half form, on ``x [B, S, N, D]``."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (jnp.arange(0, d, 2, dtype=jnp.float32) / d))
    freqs = positions[:, None].astype(jnp.float32) * inv[None, :]
    emb = jnp.concatenate([freqs, freqs], axis=-1)
    cos, sin = jnp.cos(emb)[None, :, None, :], jnp.sin(emb)[None, :, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + jnp.concatenate([-x2, x1], axis=-1) * sin


class LlamaBlock(nnx.Module):
    def __init__(self, c: Any, rngs: nnx.Rngs) -> None:
        e = c.hidden_size
        self.heads, self.kv_heads = c.num_attention_heads, c.num_key_value_heads
        self.head_dim = getattr(c, "head_dim", None) or e // self.heads
        self.theta = float((getattr(c, "rope_parameters", None) or {}).get("rope_theta", 10000.0))
        self.input_layernorm = nnx.RMSNorm(e, epsilon=c.rms_norm_eps, rngs=rngs)
        self.q_proj = nnx.Linear(e, self.heads * self.head_dim, use_bias=False, rngs=rngs)
        self.k_proj = nnx.Linear(e, self.kv_heads * self.head_dim, use_bias=False, rngs=rngs)
        self.v_proj = nnx.Linear(e, self.kv_heads * self.head_dim, use_bias=False, rngs=rngs)
        self.o_proj = nnx.Linear(self.heads * self.head_dim, e, use_bias=False, rngs=rngs)
        self.post_attention_layernorm = nnx.RMSNorm(e, epsilon=c.rms_norm_eps, rngs=rngs)
        self.gate_proj = nnx.Linear(e, c.intermediate_size, use_bias=False, rngs=rngs)
        self.up_proj = nnx.Linear(e, c.intermediate_size, use_bias=False, rngs=rngs)
        self.down_proj = nnx.Linear(c.intermediate_size, e, use_bias=False, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        b, s, _ = x.shape
        h = self.input_layernorm(x)
        pos = jnp.arange(s)
        q = _rope(self.q_proj(h).reshape(b, s, self.heads, self.head_dim), pos, self.theta)
        k = _rope(self.k_proj(h).reshape(b, s, self.kv_heads, self.head_dim), pos, self.theta)
        v = self.v_proj(h).reshape(b, s, self.kv_heads, self.head_dim)
        a = jax.nn.dot_product_attention(q, k, v, is_causal=True)  # grouped K/V heads
        x = x + self.o_proj(a.reshape(b, s, -1))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(jax.nn.silu(self.gate_proj(h)) * self.up_proj(h))


class FlaxLlama(nnx.Module):
    """Llama causal LM: ``input_ids [B, S] -> logits [B, S, V]`` (GQA, rotary, RMSNorm, SwiGLU)."""

    zoo_name = "llama"

    def __init__(self, c: Any, rngs: nnx.Rngs) -> None:
        self.embed_tokens = nnx.Embed(c.vocab_size, c.hidden_size, rngs=rngs)
        self.layers = nnx.List([LlamaBlock(c, rngs) for _ in range(c.num_hidden_layers)])
        self.norm = nnx.RMSNorm(c.hidden_size, epsilon=c.rms_norm_eps, rngs=rngs)
        self.lm_head = nnx.Linear(c.hidden_size, c.vocab_size, use_bias=False, rngs=rngs)

    def __call__(self, input_ids: Any) -> Any:
        x = self.embed_tokens(input_ids)
        for blk in self.layers:
            x = blk(x)
        return self.lm_head(self.norm(x))


def _copy_llama(hf: Any, m: FlaxLlama) -> None:
    t = hf.model
    _set(m.embed_tokens.embedding, t.embed_tokens.weight)
    for dst, src in zip(m.layers, t.layers):
        _norm(dst.input_layernorm, src.input_layernorm)
        _norm(dst.post_attention_layernorm, src.post_attention_layernorm)
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            _linear(getattr(dst, n), getattr(src.self_attn, n))
        for n in ("gate_proj", "up_proj", "down_proj"):
            _linear(getattr(dst, n), getattr(src.mlp, n))
    _norm(m.norm, t.norm)
    _linear(m.lm_head, hf.lm_head)


# ---------------------------------------------------------------------------- BERT


class BertLayer(nnx.Module):
    def __init__(self, c: Any, rngs: nnx.Rngs) -> None:
        e = c.hidden_size
        self.attention = nnx.MultiHeadAttention(num_heads=c.num_attention_heads, in_features=e, decode=False,
                                                dropout_rate=0.0, deterministic=True, rngs=rngs)
        self.attention_norm = nnx.LayerNorm(e, epsilon=c.layer_norm_eps, rngs=rngs)
        self.intermediate = nnx.Linear(e, c.intermediate_size, rngs=rngs)
        self.output = nnx.Linear(c.intermediate_size, e, rngs=rngs)
        self.output_norm = nnx.LayerNorm(e, epsilon=c.layer_norm_eps, rngs=rngs)

    def __call__(self, x: Any, mask: Any) -> Any:
        x = self.attention_norm(x + self.attention(x, mask=mask))
        return self.output_norm(x + self.output(jax.nn.gelu(self.intermediate(x), approximate=False)))


class FlaxBert(nnx.Module):
    """BERT encoder: ``(input_ids, attention_mask) [B, S] -> last_hidden_state [B, S, E]`` (post-LN)."""

    zoo_name = "bert"

    def __init__(self, c: Any, rngs: nnx.Rngs) -> None:
        e = c.hidden_size
        self.word_embeddings = nnx.Embed(c.vocab_size, e, rngs=rngs)
        self.position_embeddings = nnx.Embed(c.max_position_embeddings, e, rngs=rngs)
        self.token_type_embeddings = nnx.Embed(c.type_vocab_size, e, rngs=rngs)
        self.embeddings_norm = nnx.LayerNorm(e, epsilon=c.layer_norm_eps, rngs=rngs)
        self.layers = nnx.List([BertLayer(c, rngs) for _ in range(c.num_hidden_layers)])

    def __call__(self, input_ids: Any, attention_mask: Any) -> Any:
        s = input_ids.shape[1]
        x = (self.word_embeddings(input_ids) + self.position_embeddings(jnp.arange(s))[None]
             + self.token_type_embeddings(jnp.zeros_like(input_ids)))
        x = self.embeddings_norm(x)
        mask = (attention_mask > 0)[:, None, None, :]  # [B, 1, 1, S]: padded keys masked
        for layer in self.layers:
            x = layer(x, mask)
        return x


def _copy_bert(hf: Any, m: FlaxBert) -> None:
    emb = hf.embeddings
    _set(m.word_embeddings.embedding, emb.word_embeddings.weight)
    _set(m.position_embeddings.embedding, emb.position_embeddings.weight)
    _set(m.token_type_embeddings.embedding, emb.token_type_embeddings.weight)
    _norm(m.embeddings_norm, emb.LayerNorm)
    heads = hf.config.num_attention_heads
    for dst, src in zip(m.layers, hf.encoder.layer):
        a = src.attention
        _mha(dst.attention, a.self.query, a.self.key, a.self.value, a.output.dense, heads)
        _norm(dst.attention_norm, a.output.LayerNorm)
        _linear(dst.intermediate, src.intermediate.dense)
        _linear(dst.output, src.output.dense)
        _norm(dst.output_norm, src.output.LayerNorm)


# ---------------------------------------------------------------------------- T5


def _relative_position_bucket(rel: Any, bidirectional: bool, num_buckets: int, max_distance: int) -> Any:
    """T5's bucketing of ``memory - query`` positions (the Mesh TensorFlow formula)."""
    buckets = jnp.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (rel > 0).astype(rel.dtype) * num_buckets
        rel = jnp.abs(rel)
    else:
        rel = -jnp.minimum(rel, 0)
    max_exact = num_buckets // 2
    is_small = rel < max_exact
    large = max_exact + (jnp.log(rel.astype(jnp.float32) / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).astype(rel.dtype)
    large = jnp.minimum(large, num_buckets - 1)
    return buckets + jnp.where(is_small, rel, large)


class T5Attention(nnx.Module):
    def __init__(self, c: Any, rngs: nnx.Rngs, *, relative_bias: bool, causal: bool) -> None:
        inner = c.num_heads * c.d_kv
        self.heads, self.d_kv, self.causal = c.num_heads, c.d_kv, causal
        self.buckets, self.max_distance = c.relative_attention_num_buckets, c.relative_attention_max_distance
        self.q = nnx.Linear(c.d_model, inner, use_bias=False, rngs=rngs)
        self.k = nnx.Linear(c.d_model, inner, use_bias=False, rngs=rngs)
        self.v = nnx.Linear(c.d_model, inner, use_bias=False, rngs=rngs)
        self.o = nnx.Linear(inner, c.d_model, use_bias=False, rngs=rngs)
        self.relative_attention_bias: nnx.Embed | None = (
            nnx.Embed(self.buckets, c.num_heads, rngs=rngs) if relative_bias else None)

    def position_bias(self, q_len: int, k_len: int) -> Any:
        if self.relative_attention_bias is None:
            raise ZooError("T5 position bias asked of an attention layer without a relative-position table")
        rel = jnp.arange(k_len)[None, :] - jnp.arange(q_len)[:, None]
        bucket = _relative_position_bucket(rel, not self.causal, self.buckets, self.max_distance)
        return self.relative_attention_bias(bucket).transpose(2, 0, 1)[None]  # [1, H, Q, K]

    def __call__(self, x: Any, kv: Any, bias: Any) -> Any:
        b, s, _ = x.shape
        t = kv.shape[1]
        q = self.q(x).reshape(b, s, self.heads, self.d_kv)
        k = self.k(kv).reshape(b, t, self.heads, self.d_kv)
        v = self.v(kv).reshape(b, t, self.heads, self.d_kv)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k)  # T5 does not scale the scores
        if bias is not None:
            scores = scores + bias
        if self.causal:
            scores = jnp.where(jnp.tril(jnp.ones((s, t), dtype=bool)), scores, jnp.finfo(scores.dtype).min)
        out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v)
        return self.o(out.reshape(b, s, -1))


class T5FF(nnx.Module):
    def __init__(self, c: Any, rngs: nnx.Rngs) -> None:
        self.wi = nnx.Linear(c.d_model, c.d_ff, use_bias=False, rngs=rngs)
        self.wo = nnx.Linear(c.d_ff, c.d_model, use_bias=False, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return self.wo(jax.nn.relu(self.wi(x)))


class T5Block(nnx.Module):
    def __init__(self, c: Any, rngs: nnx.Rngs, *, first: bool, decoder: bool) -> None:
        self.self_norm = nnx.RMSNorm(c.d_model, epsilon=c.layer_norm_epsilon, rngs=rngs)
        self.self_attn = T5Attention(c, rngs, relative_bias=first, causal=decoder)
        self.cross_norm: nnx.RMSNorm | None = (
            nnx.RMSNorm(c.d_model, epsilon=c.layer_norm_epsilon, rngs=rngs) if decoder else None)
        self.cross_attn: T5Attention | None = (
            T5Attention(c, rngs, relative_bias=False, causal=False) if decoder else None)
        self.ff_norm = nnx.RMSNorm(c.d_model, epsilon=c.layer_norm_epsilon, rngs=rngs)
        self.ff = T5FF(c, rngs)

    def __call__(self, x: Any, bias: Any, enc: Any = None) -> Any:
        h = self.self_norm(x)
        x = x + self.self_attn(h, h, bias)
        if self.cross_attn is not None and self.cross_norm is not None:
            x = x + self.cross_attn(self.cross_norm(x), enc, None)
        return x + self.ff(self.ff_norm(x))


class T5Stack(nnx.Module):
    def __init__(self, c: Any, rngs: nnx.Rngs, *, decoder: bool, layers: int) -> None:
        self.blocks = nnx.List([T5Block(c, rngs, first=i == 0, decoder=decoder) for i in range(layers)])
        self.final_layer_norm = nnx.RMSNorm(c.d_model, epsilon=c.layer_norm_epsilon, rngs=rngs)

    def __call__(self, x: Any, enc: Any = None) -> Any:
        # The first block's relative-position bias is shared by every block of the stack.
        bias = self.blocks[0].self_attn.position_bias(x.shape[1], x.shape[1])
        for blk in self.blocks:
            x = blk(x, bias, enc)
        return self.final_layer_norm(x)


class FlaxT5(nnx.Module):
    """T5 encoder-decoder: ``(input_ids [B, S], decoder_input_ids [B, T]) -> logits [B, T, V]``."""

    zoo_name = "t5"

    def __init__(self, c: Any, rngs: nnx.Rngs) -> None:
        self.shared = nnx.Embed(c.vocab_size, c.d_model, rngs=rngs)
        self.encoder = T5Stack(c, rngs, decoder=False, layers=c.num_layers)
        self.decoder = T5Stack(c, rngs, decoder=True, layers=c.num_decoder_layers)
        self.lm_head = nnx.Linear(c.d_model, c.vocab_size, use_bias=False, rngs=rngs)
        self.output_scale = c.d_model ** -0.5 if getattr(c, "scale_decoder_outputs", c.tie_word_embeddings) else 1.0

    def __call__(self, input_ids: Any, decoder_input_ids: Any) -> Any:
        enc = self.encoder(self.shared(input_ids))
        dec = self.decoder(self.shared(decoder_input_ids), enc)
        return self.lm_head(dec * self.output_scale)


def _copy_t5(hf: Any, m: FlaxT5) -> None:
    _set(m.shared.embedding, hf.shared.weight)
    for stack, src_stack in ((m.encoder, hf.encoder), (m.decoder, hf.decoder)):
        for dst, src in zip(stack.blocks, src_stack.block):
            sa = src.layer[0]
            _norm(dst.self_norm, sa.layer_norm)
            for n in "qkvo":
                _linear(getattr(dst.self_attn, n), getattr(sa.SelfAttention, n))
            if dst.self_attn.relative_attention_bias is not None:
                _set(dst.self_attn.relative_attention_bias.embedding, sa.SelfAttention.relative_attention_bias.weight)
            if dst.cross_attn is not None and dst.cross_norm is not None:
                ca = src.layer[1]
                _norm(dst.cross_norm, ca.layer_norm)
                for n in "qkvo":
                    _linear(getattr(dst.cross_attn, n), getattr(ca.EncDecAttention, n))
            ff = src.layer[-1]
            _norm(dst.ff_norm, ff.layer_norm)
            _linear(dst.ff.wi, ff.DenseReluDense.wi)
            _linear(dst.ff.wo, ff.DenseReluDense.wo)
        _norm(stack.final_layer_norm, src_stack.final_layer_norm)
    _linear(m.lm_head, hf.lm_head)


# ---------------------------------------------------------------------------- ViT


class ViTLayer(nnx.Module):
    def __init__(self, c: Any, rngs: nnx.Rngs) -> None:
        e = c.hidden_size
        self.layernorm_before = nnx.LayerNorm(e, epsilon=c.layer_norm_eps, rngs=rngs)
        self.attention = nnx.MultiHeadAttention(num_heads=c.num_attention_heads, in_features=e, decode=False,
                                                use_bias=c.qkv_bias, dropout_rate=0.0, deterministic=True,
                                                rngs=rngs)
        self.layernorm_after = nnx.LayerNorm(e, epsilon=c.layer_norm_eps, rngs=rngs)
        self.intermediate = nnx.Linear(e, c.intermediate_size, rngs=rngs)
        self.output = nnx.Linear(c.intermediate_size, e, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        x = x + self.attention(self.layernorm_before(x))
        return x + self.output(jax.nn.gelu(self.intermediate(self.layernorm_after(x)), approximate=False))


class FlaxViT(nnx.Module):
    """ViT encoder: ``pixel_values [B, C, H, W] -> last_hidden_state [B, 1 + patches, E]``."""

    zoo_name = "vit"

    def __init__(self, c: Any, rngs: nnx.Rngs) -> None:
        e, p = c.hidden_size, c.patch_size
        n = (c.image_size // p) ** 2
        self.patch = nnx.Conv(c.num_channels, e, (p, p), strides=(p, p), padding="VALID", rngs=rngs)
        self.cls_token = nnx.Param(jnp.zeros((1, 1, e)))
        self.position_embeddings = nnx.Param(jnp.zeros((1, n + 1, e)))
        self.layers = nnx.List([ViTLayer(c, rngs) for _ in range(c.num_hidden_layers)])
        self.layernorm = nnx.LayerNorm(e, epsilon=c.layer_norm_eps, rngs=rngs)

    def __call__(self, pixel_values: Any) -> Any:
        x = self.patch(pixel_values.transpose(0, 2, 3, 1))  # NCHW -> NHWC -> [B, H/p, W/p, E]
        b = x.shape[0]
        x = x.reshape(b, -1, x.shape[-1])
        cls = jnp.broadcast_to(self.cls_token[...], (b, 1, x.shape[-1]))
        x = jnp.concatenate([cls, x], axis=1) + self.position_embeddings[...]
        for layer in self.layers:
            x = layer(x)
        return self.layernorm(x)


def _copy_vit(hf: Any, m: FlaxViT) -> None:
    emb = hf.embeddings
    conv = emb.patch_embeddings.projection
    _set(m.patch.kernel, conv.weight.detach().numpy().transpose(2, 3, 1, 0))  # OIHW -> HWIO
    _set(m.patch.bias, conv.bias)
    _set(m.cls_token, emb.cls_token)
    _set(m.position_embeddings, emb.position_embeddings)
    heads = hf.config.num_attention_heads
    for dst, src in zip(m.layers, hf.layers):
        a = src.attention
        _mha(dst.attention, a.q_proj, a.k_proj, a.v_proj, a.o_proj, heads)
        _norm(dst.layernorm_before, src.layernorm_before)
        _norm(dst.layernorm_after, src.layernorm_after)
        _linear(dst.intermediate, src.mlp.fc1)
        _linear(dst.output, src.mlp.fc2)
    _norm(m.layernorm, hf.layernorm)


# ---------------------------------------------------------------------------- registry

_BUILDERS: dict[str, tuple[type, Any]] = {
    "gpt2": (FlaxGPT2, _copy_gpt2),
    "llama": (FlaxLlama, _copy_llama),
    "bert": (FlaxBert, _copy_bert),
    "t5": (FlaxT5, _copy_t5),
    "vit": (FlaxViT, _copy_vit),
}


def _check_name(name: str) -> None:
    entry(name)  # an unknown zoo name: the zoo's own one-line error
    if name not in _BUILDERS:
        raise ZooError(f"zoo '{name}' has no Flax NNX model (Flax models: {', '.join(FLAX_NAMES)})")


def flax_model(name: str, size: str = "toy", *, seed: int = 0, abstract: bool = False) -> Any:
    """A Flax NNX model of zoo architecture ``name`` at ``size``, from the same transformers config
    as :func:`irkit.zoo.build`, with Flax's own random init (``nnx.Rngs(seed)``).  ``abstract=True``
    builds it with ``nnx.eval_shape`` instead: parameters are shapes only, to be filled by
    :func:`copy_weights` (no initialiser runs, which is most of the build time)."""
    _check_name(name)
    cls, _ = _BUILDERS[name]
    config = make_config(entry(name), size)  # type: ignore[arg-type]
    if abstract:
        return nnx.eval_shape(lambda: cls(config, nnx.Rngs(seed)))
    return cls(config, nnx.Rngs(seed))


def copy_weights(hf_model: Any, nnx_model: Any) -> Any:
    """Copy the weights of a transformers model (or the zoo's wrapper of one) into ``nnx_model``,
    in place; returns ``nnx_model``.  Every parameter is written, shape-checked; a parameter left
    unwritten in an abstract model (:func:`flax_model` ``abstract=True``) is an error."""
    name = getattr(nnx_model, "zoo_name", None)
    if name not in _BUILDERS:
        raise ZooError(f"copy_weights: {type(nnx_model).__name__} is not a zoo Flax model")
    hf = getattr(hf_model, "model", hf_model) if hasattr(hf_model, "arch_name") else hf_model
    _BUILDERS[name][1](hf, nnx_model)
    left = [".".join(map(str, path)) for path, v in nnx.to_flat_state(nnx.state(nnx_model))
            if isinstance(v.get_raw_value() if hasattr(v, "get_raw_value") else v, jax.ShapeDtypeStruct)]
    if left:
        raise ZooError(f"copy_weights: {name}: no transformers weight for {', '.join(left)}")
    return nnx_model


def flax_inputs(inputs: tuple[Any, ...]) -> tuple[np.ndarray, ...]:
    """The zoo's torch example inputs as NumPy arrays for the Flax model (integers as int32)."""
    out = []
    for x in inputs:
        a = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
        out.append(a.astype(np.int32) if np.issubdtype(a.dtype, np.integer) else a.astype(np.float32))
    return tuple(out)


def build_pair(name: str, size: str = "toy", *, seed: int = 0) -> tuple[Any, Any, tuple[np.ndarray, ...]]:
    """``(hf_module, nnx_model, inputs)``: the zoo's transformers module (see :func:`irkit.zoo.build`),
    the Flax model holding its weights, and the example inputs as NumPy arrays."""
    _check_name(name)
    hf, inputs = build(name, size, seed=seed)  # type: ignore[arg-type]
    m = copy_weights(hf, flax_model(name, size, seed=seed, abstract=True))
    return hf, m, flax_inputs(inputs)


def as_function(nnx_model: Any, input_names: tuple[str, ...] | None = None) -> Any:
    """A plain function of the model's inputs, the weights closed over as a nested dict of arrays
    (``nnx.to_pure_dict``): what ``import_jax`` and ``jax.jit(...).lower`` take.  Its parameters
    are named like the transformers model's inputs (``input_ids``, ``pixel_values``...; default:
    the zoo entry's), so the jaxpr import names its arguments after them and its constants by
    their NNX path (``layers.0.q_proj.kernel``)."""
    names = input_names or INPUT_NAMES[entry(nnx_model.zoo_name).inputs]
    if not all(n.isidentifier() for n in names):
        raise ZooError(f"input names {names} are not identifiers")
    graphdef, state = nnx.split(nnx_model)
    params = nnx.to_pure_dict(state)
    ns: dict[str, Any] = {"_run": lambda *xs: nnx.merge(graphdef, params)(*xs), "params": params}
    args = ", ".join(names)
    # Python gives a function its parameter names only at definition (as in irkit.zoo.build).
    exec(f"def forward({args}):\n    params\n    return _run({args})\n", ns)  # noqa: S102
    return ns["forward"]


__all__ = ["FLAX_NAMES", "TESTED_WITH", "FlaxBert", "FlaxGPT2", "FlaxLlama", "FlaxT5", "FlaxViT", "as_function",
           "build_pair", "copy_weights", "flax_inputs", "flax_model"]
