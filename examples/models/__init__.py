"""Small Transformer models written twice: a torch ``nn.Module`` and a JAX twin.

Every frontend, pass and target is tested on these. Each family lives in one
self-contained file (it imports only torch, numpy and, lazily, jax), so a file
can be loaded by path, as in ``irkit import examples/models/gpt2.py:gpt2_tiny``:

- ``gpt2.py``  GPT-2 (causal, pre-LN, tanh GELU, fused QKV through ``Conv1D``)
  and BERT (bidirectional, post-LN, erf GELU, token types, padding mask).
- ``llama.py`` Llama (RMSNorm, rotary embeddings, grouped-query attention,
  SiLU-gated MLP).
- ``t5.py``    T5 (relative position buckets, unscaled attention, T5LayerNorm,
  ReLU or gated-GELU FFN), encoder-decoder and encoder-only.
- ``vit.py``   ViT (conv patch embedding, class token, GELU MLP, class head).

A torch factory takes no required argument and returns
``(module, example_inputs, dynamic_shapes_or_None)``; the JAX factory of the same
name plus ``_jax`` returns ``(jax_fn, example_args)`` computing the same numbers
from the same weights. ``registry.py`` lists them all for tests to parametrize on.
"""
