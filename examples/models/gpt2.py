"""GPT-2 and BERT example models: torch modules and their JAX twins.

Design note. The torch code follows the spelling of the Hugging Face models it
imitates, because that spelling is what the frontends and fusion passes meet in
the wild:

- GPT-2: learned positions, pre-LN, GPT-2's ``Conv1D`` (``addmm`` with a weight
  of shape (in, out)) producing fused QKV that is ``split`` in three, scores
  *divided* by sqrt(head_dim), a causal mask sliced from a registered
  lower-triangular buffer (``self.bias[:, :, :T, :T]``) applied with
  ``torch.where`` and ``finfo.min``, the explicit tanh "gelu_new" formula, and a
  tied LM head. The SDPA form calls ``scaled_dot_product_attention(is_causal=True)``.
- BERT: word + position + token-type embeddings, post-LN, separate Q/K/V
  ``Linear``, erf GELU, and a 0/1 ``attention_mask`` turned into an additive
  ``-10000.0`` bias, which the SDPA form passes as a float ``attn_mask``.

``dtype="float16"``/``"bfloat16"`` casts the weights and computes the attention
softmax in float32 after an upcast (``.float()`` ... ``.to(v.dtype)``).

The JAX twins are pure functions of a flat params dict keyed by the torch
``state_dict`` names, so the same numbers flow through both.
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
GeluForm = Literal["erf", "tanh", "gelu_new"]

_TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

TorchExample = tuple[nn.Module, tuple[torch.Tensor, ...], dict[str, Any] | None]
JaxExample = tuple[Callable[..., Any], tuple[Any, ...]]


@dataclass(frozen=True)
class GPT2Config:
    """Size and spelling of a GPT-2 or BERT model, plus its example-input shape."""

    vocab_size: int = 512
    max_positions: int = 64
    hidden: int = 64
    layers: int = 2
    heads: int = 2
    mlp_ratio: int = 4
    gelu: GeluForm = "gelu_new"
    """``gelu_new``: GPT-2's explicit tanh formula; ``tanh``: ``F.gelu(approximate="tanh")``;
    ``erf``: exact ``F.gelu``."""
    tie_word_embeddings: bool = True
    type_vocab_size: int = 2
    """BERT only: number of token types."""
    attn: AttnForm = "eager"
    dtype: DTypeName = "float32"
    dropout: float = 0.1
    layer_norm_eps: float = 1e-5
    seed: int = 0
    """Seed of the random weights."""
    batch: int = 2
    seq: int = 16
    """Example-input sequence length (at most ``max_positions``)."""

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.hidden // self.heads


# ----------------------------------------------------------------------------- torch


class Conv1D(nn.Module):
    """GPT-2's linear layer: ``y = b + x @ W`` with ``W`` of shape (in, out), through ``addmm``."""

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.empty(nf))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size_out = x.size()[:-1] + (self.nf,)
        # Hugging Face writes `x.view(-1, ...)`. That breaks `run_decompositions()` after SDPA
        # (torch 2.13, CPU): the decomposed SDPA returns a sequence-major layout, unlike the
        # layout the trace assumed when it dropped `.contiguous()`, so the view no longer
        # fits. `reshape` is decided after decomposition and copies when it must.
        x = torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class NewGELU(nn.Module):
    """GPT-2's ``gelu_new``: the tanh approximation written out as elementwise math."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (
            0.5
            * x
            * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))
        )


def _activation(form: GeluForm) -> nn.Module:
    if form == "gelu_new":
        return NewGELU()
    return nn.GELU(approximate="tanh" if form == "tanh" else "none")


class GPT2Attention(nn.Module):
    """Causal self-attention with fused QKV (``Conv1D`` then ``split``)."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.c_attn = Conv1D(3 * cfg.hidden, cfg.hidden)
        self.c_proj = Conv1D(cfg.hidden, cfg.hidden)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        n = cfg.max_positions
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((n, n), dtype=torch.bool)).view(1, 1, n, n),
            persistent=True,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        bsz, seq, _ = x.size()
        q, k, v = self.c_attn(x).split(cfg.hidden, dim=2)
        q = q.view(bsz, seq, cfg.heads, cfg.head_dim).transpose(1, 2)
        k = k.view(bsz, seq, cfg.heads, cfg.head_dim).transpose(1, 2)
        v = v.view(bsz, seq, cfg.heads, cfg.head_dim).transpose(1, 2)
        if cfg.attn == "sdpa":
            y = F.scaled_dot_product_attention(
                q, k, v, dropout_p=cfg.dropout if self.training else 0.0, is_causal=True
            )
        else:
            w = torch.matmul(q, k.transpose(-1, -2))
            w = w / (float(cfg.head_dim) ** 0.5)
            if cfg.dtype != "float32":
                w = w.float()  # softmax in float32 for half-precision models
            causal = self.bias[:, :, :seq, :seq]
            mask_value = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device)
            w = torch.where(causal, w, mask_value)
            w = F.softmax(w, dim=-1)
            w = w.to(v.dtype)
            w = self.attn_dropout(w)
            y = torch.matmul(w, v)
        y = y.transpose(1, 2).contiguous().view(bsz, seq, cfg.hidden)
        return self.resid_dropout(self.c_proj(y))


class GPT2MLP(nn.Module):
    """``c_fc`` -> GELU -> ``c_proj`` -> dropout."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.c_fc = Conv1D(cfg.mlp_ratio * cfg.hidden, cfg.hidden)
        self.act = _activation(cfg.gelu)
        self.c_proj = Conv1D(cfg.hidden, cfg.mlp_ratio * cfg.hidden)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class GPT2Block(nn.Module):
    """Pre-LN block: ``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.mlp = GPT2MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2LMHeadModel(nn.Module):
    """GPT-2 language model: ``input_ids`` (B, S) int64 -> logits (B, S, vocab)."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.wpe = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.drop = nn.Dropout(cfg.dropout)
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab_size, bias=False)
        _init_params(self, cfg.seed)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.wte.weight
        self.to(_TORCH_DTYPES[cfg.dtype])

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq = input_ids.size(1)
        position_ids = torch.arange(0, seq, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        h = self.drop(self.wte(input_ids) + self.wpe(position_ids))
        for block in self.h:
            h = block(h)
        return self.lm_head(self.ln_f(h))


class BertEmbeddings(nn.Module):
    """Word + position + token-type embeddings, then LayerNorm and dropout."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.position_embeddings = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden)
        self.LayerNorm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        seq = input_ids.size(1)
        position_ids = torch.arange(seq, dtype=torch.long, device=input_ids.device).unsqueeze(0)
        e = (
            self.word_embeddings(input_ids)
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )
        return self.dropout(self.LayerNorm(e))


class BertSelfAttention(nn.Module):
    """Bidirectional attention with separate Q/K/V projections and an additive padding bias."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.query = nn.Linear(cfg.hidden, cfg.hidden)
        self.key = nn.Linear(cfg.hidden, cfg.hidden)
        self.value = nn.Linear(cfg.hidden, cfg.hidden)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        bsz, seq, _ = x.shape
        shape = (bsz, seq, cfg.heads, cfg.head_dim)
        q = self.query(x).view(shape).permute(0, 2, 1, 3)
        k = self.key(x).view(shape).permute(0, 2, 1, 3)
        v = self.value(x).view(shape).permute(0, 2, 1, 3)
        if cfg.attn == "sdpa":
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask_bias, dropout_p=cfg.dropout if self.training else 0.0
            )
        else:
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(cfg.head_dim)
            scores = scores + mask_bias
            if cfg.dtype != "float32":
                probs = F.softmax(scores.float(), dim=-1).to(v.dtype)
            else:
                probs = F.softmax(scores, dim=-1)
            probs = self.dropout(probs)
            y = torch.matmul(probs, v)
        return y.permute(0, 2, 1, 3).reshape(bsz, seq, cfg.hidden)


class BertLayer(nn.Module):
    """Post-LN encoder layer: ``LN(x + drop(W_o attn(x)))``, then ``LN(h + drop(W_2 gelu(W_1 h)))``."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.attention = BertSelfAttention(cfg)
        self.attention_output = nn.Linear(cfg.hidden, cfg.hidden)
        self.attention_dropout = nn.Dropout(cfg.dropout)
        self.attention_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.intermediate = nn.Linear(cfg.hidden, cfg.mlp_ratio * cfg.hidden)
        self.act = _activation(cfg.gelu)
        self.output = nn.Linear(cfg.mlp_ratio * cfg.hidden, cfg.hidden)
        self.output_dropout = nn.Dropout(cfg.dropout)
        self.output_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        a = self.attention_dropout(self.attention_output(self.attention(x, mask_bias)))
        h = self.attention_norm(x + a)
        f = self.output_dropout(self.output(self.act(self.intermediate(h))))
        return self.output_norm(h + f)


class BertModel(nn.Module):
    """BERT encoder: ``(input_ids, token_type_ids, attention_mask)`` (B, S) int64 -> (B, S, hidden)."""

    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = BertEmbeddings(cfg)
        self.layer = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.layers))
        _init_params(self, cfg.seed)
        self.to(_TORCH_DTYPES[cfg.dtype])

    def forward(
        self, input_ids: torch.Tensor, token_type_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> torch.Tensor:
        h = self.embeddings(input_ids, token_type_ids)
        # Classic BERT: 1 keeps a position, 0 adds -10000 to its score.
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * -10000.0
        for layer in self.layer:
            h = layer(h, mask_bias)
        return h


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
                elif isinstance(mod, nn.Linear):
                    p.copy_(noise / math.sqrt(p.shape[1]))
                elif isinstance(mod, Conv1D):
                    p.copy_(noise / math.sqrt(p.shape[0]))
                else:  # embeddings
                    p.copy_(0.5 * noise)


def numpy_params(module: nn.Module) -> dict[str, np.ndarray]:
    """The module's ``state_dict`` as NumPy arrays (floating tensors widened to float32)."""
    out = {}
    for name, t in module.state_dict().items():
        t = t.detach()
        out[name] = (t.float() if t.is_floating_point() else t).numpy().copy()
    return out


# ----------------------------------------------------------------------------- inputs


def _token_ids(cfg: GPT2Config, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab_size, (cfg.batch, cfg.seq), generator=gen, dtype=torch.int64)


def _bert_inputs(cfg: GPT2Config, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    input_ids = _token_ids(cfg, seed)
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, cfg.seq // 2 :] = 1
    attention_mask = torch.ones_like(input_ids)
    # Row 0 is full; each later row has more padding at its end.
    for b in range(1, cfg.batch):
        attention_mask[b, cfg.seq - min(cfg.seq - 1, b * max(1, cfg.seq // 4)) :] = 0
    return input_ids, token_type_ids, attention_mask


def _dims(cfg: GPT2Config, *, causal_buffer: bool) -> tuple[Any, Any]:
    # A slice of the causal buffer at its full length is contiguous, and torch.export
    # (2.13) guards on that layout (S != max_positions) when the slice meets
    # `torch.where`; so a model slicing the buffer takes sequences one shorter.
    s_max = cfg.max_positions - 1 if causal_buffer else cfg.max_positions
    return torch.export.Dim("B", max=1024), torch.export.Dim("S", max=s_max)


# ----------------------------------------------------------------------------- JAX twin


def _jnp_dtype(name: DTypeName) -> Any:
    import jax.numpy as jnp

    return {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}[name]


def _jax_params(params: dict[str, np.ndarray], dtype: DTypeName) -> dict[str, Any]:
    import jax.numpy as jnp

    dt = _jnp_dtype(dtype)
    return {k: jnp.asarray(v, dtype=dt if v.dtype.kind == "f" else None) for k, v in params.items()}


def _jax_layer_norm(x: Any, w: Any, b: Any, eps: float) -> Any:
    import jax
    import jax.numpy as jnp

    xf = x.astype(jnp.float32)
    mu = xf.mean(-1, keepdims=True)
    var = jnp.square(xf - mu).mean(-1, keepdims=True)
    y = (xf - mu) * jax.lax.rsqrt(var + eps)
    return (y * w.astype(jnp.float32) + b.astype(jnp.float32)).astype(x.dtype)


def _jax_gelu(x: Any, form: GeluForm) -> Any:
    import jax
    import jax.numpy as jnp

    if form == "gelu_new":
        return 0.5 * x * (1.0 + jnp.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return jax.nn.gelu(x, approximate=form == "tanh")


def gpt2_jax_apply(params: dict[str, Any], input_ids: Any, *, cfg: GPT2Config) -> Any:
    """JAX twin of :class:`GPT2LMHeadModel`; ``params`` as from :func:`numpy_params`."""
    import jax
    import jax.numpy as jnp

    p = _jax_params(params, cfg.dtype)
    bsz, seq = input_ids.shape
    nh, hd = cfg.heads, cfg.head_dim

    def conv1d(name: str, x: Any) -> Any:
        return x @ p[f"{name}.weight"] + p[f"{name}.bias"]

    h = p["wte.weight"][input_ids] + p["wpe.weight"][jnp.arange(seq)][None]
    for i in range(cfg.layers):
        pre = f"h.{i}."
        a = _jax_layer_norm(h, p[pre + "ln_1.weight"], p[pre + "ln_1.bias"], cfg.layer_norm_eps)
        q, k, v = jnp.split(conv1d(pre + "attn.c_attn", a), 3, axis=-1)
        q, k, v = (t.reshape(bsz, seq, nh, hd) for t in (q, k, v))
        if cfg.attn == "sdpa":
            y = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        else:
            w = jnp.einsum("bqnh,bknh->bnqk", q, k) / (float(hd) ** 0.5)
            if cfg.dtype != "float32":
                w = w.astype(jnp.float32)
            causal = p[pre + "attn.bias"][:, :, :seq, :seq]
            w = jnp.where(causal, w, jnp.finfo(w.dtype).min)
            w = jax.nn.softmax(w, axis=-1).astype(v.dtype)
            y = jnp.einsum("bnqk,bknh->bqnh", w, v)
        h = h + conv1d(pre + "attn.c_proj", y.reshape(bsz, seq, cfg.hidden))
        m = _jax_layer_norm(h, p[pre + "ln_2.weight"], p[pre + "ln_2.bias"], cfg.layer_norm_eps)
        m = conv1d(pre + "mlp.c_proj", _jax_gelu(conv1d(pre + "mlp.c_fc", m), cfg.gelu))
        h = h + m
    h = _jax_layer_norm(h, p["ln_f.weight"], p["ln_f.bias"], cfg.layer_norm_eps)
    head = p["wte.weight"] if cfg.tie_word_embeddings else p["lm_head.weight"]
    return h @ head.T


def bert_jax_apply(
    params: dict[str, Any],
    input_ids: Any,
    token_type_ids: Any,
    attention_mask: Any,
    *,
    cfg: GPT2Config,
) -> Any:
    """JAX twin of :class:`BertModel`; ``params`` as from :func:`numpy_params`."""
    import jax
    import jax.numpy as jnp

    p = _jax_params(params, cfg.dtype)
    bsz, seq = input_ids.shape
    nh, hd = cfg.heads, cfg.head_dim

    def linear(name: str, x: Any) -> Any:
        return x @ p[f"{name}.weight"].T + p[f"{name}.bias"]

    def ln(name: str, x: Any) -> Any:
        return _jax_layer_norm(x, p[f"{name}.weight"], p[f"{name}.bias"], cfg.layer_norm_eps)

    e = (
        p["embeddings.word_embeddings.weight"][input_ids]
        + p["embeddings.token_type_embeddings.weight"][token_type_ids]
        + p["embeddings.position_embeddings.weight"][jnp.arange(seq)][None]
    )
    h = ln("embeddings.LayerNorm", e)
    mask_bias = (1.0 - attention_mask[:, None, None, :].astype(h.dtype)) * -10000.0
    for i in range(cfg.layers):
        pre = f"layer.{i}."
        q, k, v = (
            linear(pre + f"attention.{n}", h).reshape(bsz, seq, nh, hd)
            for n in ("query", "key", "value")
        )
        if cfg.attn == "sdpa":
            y = jax.nn.dot_product_attention(q, k, v, bias=mask_bias.astype(q.dtype))
        else:
            s = jnp.einsum("bqnh,bknh->bnqk", q, k) / math.sqrt(hd) + mask_bias
            probs = jax.nn.softmax(s.astype(jnp.float32), axis=-1).astype(v.dtype)
            y = jnp.einsum("bnqk,bknh->bqnh", probs, v)
        a = linear(pre + "attention_output", y.reshape(bsz, seq, cfg.hidden))
        h = ln(pre + "attention_norm", h + a)
        f = linear(pre + "output", _jax_gelu(linear(pre + "intermediate", h), cfg.gelu))
        h = ln(pre + "output_norm", h + f)
    return h


# ----------------------------------------------------------------------------- factories

_GPT2_TINY = GPT2Config(hidden=64, layers=2, heads=2, seq=16, max_positions=64)
_GPT2_SMALL = GPT2Config(
    hidden=256,
    layers=4,
    heads=8,
    seq=128,
    max_positions=256,
    vocab_size=2048,
    tie_word_embeddings=False,
)
_BERT_TINY = GPT2Config(
    hidden=64, layers=2, heads=4, seq=16, max_positions=64, gelu="erf", layer_norm_eps=1e-12, seed=1
)
_BERT_SMALL = GPT2Config(
    hidden=256,
    layers=4,
    heads=4,
    seq=128,
    max_positions=256,
    vocab_size=2048,
    gelu="erf",
    layer_norm_eps=1e-12,
    seed=1,
)


def gpt2(cfg: GPT2Config = _GPT2_TINY) -> TorchExample:
    """GPT-2 from a config: ``(model, (input_ids,), {"input_ids": {0: B, 1: S}})``."""
    model = GPT2LMHeadModel(cfg)
    model.eval().requires_grad_(False)  # inference: frozen weights
    b, s = _dims(cfg, causal_buffer=cfg.attn == "eager")
    return model, (_token_ids(cfg, seed=100 + cfg.seed),), {"input_ids": {0: b, 1: s}}


def bert(cfg: GPT2Config = _BERT_TINY) -> TorchExample:
    """BERT from a config: inputs ``(input_ids, token_type_ids, attention_mask)``, all (B, S) int64."""
    model = BertModel(cfg)
    model.eval().requires_grad_(False)  # inference: frozen weights
    b, s = _dims(cfg, causal_buffer=False)
    dyn = {
        "input_ids": {0: b, 1: s},
        "token_type_ids": {0: b, 1: s},
        "attention_mask": {0: b, 1: s},
    }
    return model, _bert_inputs(cfg, seed=100 + cfg.seed), dyn


def _jax_example(example: TorchExample, apply: Callable[..., Any]) -> JaxExample:
    import jax.numpy as jnp

    model, inputs, _ = example
    params = numpy_params(model)
    cfg = model.config

    def jax_fn(*args: Any) -> Any:
        return apply(params, *args, cfg=cfg)

    return jax_fn, tuple(jnp.asarray(t.numpy().astype(np.int32)) for t in inputs)


def gpt2_jax(cfg: GPT2Config = _GPT2_TINY) -> JaxExample:
    """JAX twin of :func:`gpt2` built from the same torch weights; ids as int32."""
    return _jax_example(gpt2(cfg), gpt2_jax_apply)


def bert_jax(cfg: GPT2Config = _BERT_TINY) -> JaxExample:
    """JAX twin of :func:`bert` built from the same torch weights; ids and mask as int32."""
    return _jax_example(bert(cfg), bert_jax_apply)


def gpt2_tiny() -> TorchExample:
    """GPT-2, hidden 64, 2 heads, 2 layers, tied head; input_ids (2, 16)."""
    return gpt2(_GPT2_TINY)


def gpt2_tiny_sdpa() -> TorchExample:
    """:func:`gpt2_tiny` with ``scaled_dot_product_attention(is_causal=True)``."""
    return gpt2(replace(_GPT2_TINY, attn="sdpa"))


def gpt2_tiny_fp16() -> TorchExample:
    """:func:`gpt2_tiny` with float16 weights and the softmax upcast to float32."""
    return gpt2(replace(_GPT2_TINY, dtype="float16"))


def gpt2_small() -> TorchExample:
    """GPT-2, hidden 256, 8 heads, 4 layers, untied head; input_ids (2, 128)."""
    return gpt2(_GPT2_SMALL)


def gpt2_small_sdpa() -> TorchExample:
    """:func:`gpt2_small` with SDPA attention."""
    return gpt2(replace(_GPT2_SMALL, attn="sdpa"))


def bert_tiny() -> TorchExample:
    """BERT, hidden 64, 4 heads, 2 layers; three (2, 16) inputs, row 1 padded."""
    return bert(_BERT_TINY)


def bert_tiny_sdpa() -> TorchExample:
    """:func:`bert_tiny` with SDPA attention (the padding bias as a float ``attn_mask``)."""
    return bert(replace(_BERT_TINY, attn="sdpa"))


def bert_small() -> TorchExample:
    """BERT, hidden 256, 4 heads, 4 layers; three (2, 128) inputs."""
    return bert(_BERT_SMALL)


def bert_small_sdpa() -> TorchExample:
    """:func:`bert_small` with SDPA attention."""
    return bert(replace(_BERT_SMALL, attn="sdpa"))


def gpt2_tiny_jax() -> JaxExample:
    """JAX twin of :func:`gpt2_tiny` with the same weights and inputs (ids as int32)."""
    return gpt2_jax(_GPT2_TINY)


def gpt2_tiny_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`gpt2_tiny_sdpa` (``jax.nn.dot_product_attention``)."""
    return gpt2_jax(replace(_GPT2_TINY, attn="sdpa"))


def gpt2_tiny_fp16_jax() -> JaxExample:
    """JAX twin of :func:`gpt2_tiny_fp16`."""
    return gpt2_jax(replace(_GPT2_TINY, dtype="float16"))


def gpt2_small_jax() -> JaxExample:
    """JAX twin of :func:`gpt2_small`."""
    return gpt2_jax(_GPT2_SMALL)


def gpt2_small_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`gpt2_small_sdpa`."""
    return gpt2_jax(replace(_GPT2_SMALL, attn="sdpa"))


def bert_tiny_jax() -> JaxExample:
    """JAX twin of :func:`bert_tiny`."""
    return bert_jax(_BERT_TINY)


def bert_tiny_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`bert_tiny_sdpa`."""
    return bert_jax(replace(_BERT_TINY, attn="sdpa"))


def bert_small_jax() -> JaxExample:
    """JAX twin of :func:`bert_small`."""
    return bert_jax(_BERT_SMALL)


def bert_small_sdpa_jax() -> JaxExample:
    """JAX twin of :func:`bert_small_sdpa`."""
    return bert_jax(replace(_BERT_SMALL, attn="sdpa"))
