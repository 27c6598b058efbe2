"""The zoo's table: one :class:`Arch` per transformers architecture.

Design note. Every entry is data: the transformers config class and model
class *by name*, the config keyword arguments of its toy size and of its full
size, and the kind of inputs it takes.  Nothing here imports transformers or
torch, so listing the zoo (``irkit.zoo.names()``) is free; :mod:`irkit.zoo.build`
turns an entry into a module.

- **toy** is 2 layers (per stack) and a hidden width of 64, with vocabularies,
  images and audio cut to match, so a model builds, exports and runs on the
  interpreter in seconds.  Each toy keeps its architecture's distinguishing
  trait switched on (GQA, a sliding window shorter than the example sequence,
  MoE routing, soft-capping, q/k norms, relative position buckets...).
- **full** is the shape of a published checkpoint (named in ``full_note``): the
  config class's own defaults where those are a released model, else the
  overrides given.  Building a full model allocates its weights in float32
  (4 bytes a parameter).
- The table is the one registration point: an architecture is one ``Arch(...)``
  in :data:`ARCHITECTURES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Family = Literal["decoder", "encoder", "encoder-decoder", "vision", "audio", "vision-text"]
InputKind = Literal["tokens", "tokens+mask", "seq2seq", "speech2seq", "mel", "pixels", "text+pixels", "audio"]
ExportPath = Literal["pt2", "onnx"]

INPUT_NAMES: dict[str, tuple[str, ...]] = {
    "tokens": ("input_ids",),
    "tokens+mask": ("input_ids", "attention_mask"),
    "seq2seq": ("input_ids", "decoder_input_ids"),
    "speech2seq": ("input_features", "decoder_input_ids"),
    "mel": ("input_features",),
    "pixels": ("pixel_values",),
    "text+pixels": ("input_ids", "pixel_values"),
    "audio": ("input_values",),
}
"""The model's keyword arguments for each input kind, in the order of the example inputs."""


@dataclass(frozen=True)
class Arch:
    """One architecture: how to build it at each size and what to feed it."""

    name: str
    family: Family
    attention: str
    """The attention variant in a few words (what makes this architecture's attention its own)."""
    config_class: str
    """Name of the config class in ``transformers`` (``GPT2Config``)."""
    model_class: str
    """Name of the model class in ``transformers`` (``GPT2LMHeadModel``)."""
    toy: dict[str, Any]
    """Config keyword arguments of the toy size."""
    full: dict[str, Any]
    """Config keyword arguments of the full size on top of the class defaults ({}: the defaults)."""
    full_note: str
    """Which published model the full size has the shape of."""
    inputs: InputKind
    output: str = "logits"
    """Attribute of the model output the exported function returns."""
    submodule: str | None = None
    """Build ``model_class`` and export only this attribute of it (``model.encoder``)."""
    call_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments of every call (``use_cache=False``)."""
    exports: tuple[ExportPath, ...] = ("pt2", "onnx")
    """The export paths that apply."""
    toy_seq: int = 16
    """Example sequence length (tokens) of the toy size; decoder side of seq2seq models: half of it."""
    toy_image: int = 32
    """Example image side (pixels) of the toy size."""
    toy_audio: int = 3200
    """Example audio length (samples) of the toy size."""
    dynamic: tuple[str, ...] = ("B", "S")
    """Dims exported as symbols where torch.export accepts them: ``B`` batch, ``S`` sequence."""


_LM = {"use_cache": False}
_VOCAB = 256


def _decoder(hidden: int = 64, layers: int = 2, heads: int = 4, inter: int = 128, **kw: Any) -> dict[str, Any]:
    """Toy kwargs in the Llama spelling most decoders share."""
    return {"vocab_size": _VOCAB, "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
            "intermediate_size": inter, "max_position_embeddings": 64, **kw}


def _encoder(**kw: Any) -> dict[str, Any]:
    """Toy kwargs in the BERT spelling most encoders share."""
    return {"vocab_size": _VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 128, "max_position_embeddings": 64, **kw}


def _vision(**kw: Any) -> dict[str, Any]:
    """Toy kwargs of a ViT-like image encoder: 32x32 images in 8x8 patches."""
    return {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
            "image_size": 32, "patch_size": 8, **kw}


ARCHITECTURES: tuple[Arch, ...] = (
    # ------------------------------------------------------------------ decoder LMs
    Arch("gpt2", "decoder", "MHA, learned positions, Conv1D fused QKV", "GPT2Config", "GPT2LMHeadModel",
         {"vocab_size": _VOCAB, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64},
         {}, "gpt2 (124M)", "tokens", call_kwargs=_LM),
    Arch("gptj", "decoder", "MHA, partial interleaved rotary, parallel attention+MLP", "GPTJConfig",
         "GPTJForCausalLM",
         {"vocab_size": _VOCAB, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64, "rotary_dim": 8},
         {}, "gpt-j-6b", "tokens", call_kwargs=_LM),
    Arch("gpt_neox", "decoder", "MHA, partial rotary (25%), parallel residual", "GPTNeoXConfig",
         "GPTNeoXForCausalLM", _decoder(rotary_pct=0.25),
         {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 8, "intermediate_size": 8192,
          "vocab_size": 50304, "max_position_embeddings": 2048}, "pythia-1b", "tokens", call_kwargs=_LM),
    Arch("opt", "decoder", "MHA, learned positions (offset 2), scale on q", "OPTConfig", "OPTForCausalLM",
         {"vocab_size": _VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 128,
          "max_position_embeddings": 64, "word_embed_proj_dim": 64},
         {}, "opt-125m", "tokens", call_kwargs=_LM),
    Arch("bloom", "decoder", "MHA with ALiBi position bias", "BloomConfig", "BloomForCausalLM",
         {"vocab_size": _VOCAB, "hidden_size": 64, "n_layer": 2, "n_head": 4},
         {"vocab_size": 250880, "hidden_size": 1024, "n_layer": 24, "n_head": 16}, "bloom-560m", "tokens",
         call_kwargs=_LM),
    Arch("falcon", "decoder", "multi-query attention, rotary, parallel attention+MLP", "FalconConfig",
         "FalconForCausalLM",
         {"vocab_size": _VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "multi_query": True, "parallel_attn": True, "max_position_embeddings": 64},
         {}, "falcon-7b", "tokens", call_kwargs=_LM),
    Arch("llama", "decoder", "GQA (4 q / 2 kv heads), rotary, RMSNorm, SwiGLU", "LlamaConfig", "LlamaForCausalLM",
         _decoder(num_key_value_heads=2),
         {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
          "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 2048, "rope_theta": 500000.0,
          "tie_word_embeddings": True}, "Llama-3.2-1B shape", "tokens", call_kwargs=_LM),
    Arch("mistral", "decoder", "GQA, sliding-window causal mask (window 8 < seq 16)", "MistralConfig",
         "MistralForCausalLM", _decoder(num_key_value_heads=2, sliding_window=8),
         {}, "Mistral-7B-v0.1", "tokens", call_kwargs=_LM),
    Arch("mixtral", "decoder", "GQA, sparse MoE MLP (4 experts, top-2)", "MixtralConfig", "MixtralForCausalLM",
         _decoder(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
         {}, "Mixtral-8x7B (46.7B parameters)", "tokens", call_kwargs=_LM),
    Arch("qwen2", "decoder", "GQA with q/k/v bias, rotary", "Qwen2Config", "Qwen2ForCausalLM",
         _decoder(num_key_value_heads=2),
         {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
          "num_key_value_heads": 2, "vocab_size": 151936, "max_position_embeddings": 32768,
          "tie_word_embeddings": True}, "Qwen2-0.5B", "tokens", call_kwargs=_LM),
    Arch("qwen3", "decoder", "GQA with per-head q/k RMSNorm", "Qwen3Config", "Qwen3ForCausalLM",
         _decoder(num_key_value_heads=2, head_dim=16),
         {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
          "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960,
          "tie_word_embeddings": True}, "Qwen3-0.6B", "tokens", call_kwargs=_LM),
    Arch("gemma", "decoder", "multi-query (1 kv head), head_dim 16, scaled embeddings, GeGLU", "GemmaConfig",
         "GemmaForCausalLM", _decoder(num_key_value_heads=1, head_dim=16),
         {"hidden_size": 2048, "intermediate_size": 16384, "num_hidden_layers": 18, "num_attention_heads": 8,
          "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 256000}, "gemma-2b", "tokens", call_kwargs=_LM),
    Arch("gemma2", "decoder", "GQA, attention and final logit soft-capping, alternating sliding(8)/global layers",
         "Gemma2Config", "Gemma2ForCausalLM",
         _decoder(num_key_value_heads=2, head_dim=16, sliding_window=8, attn_logit_softcapping=50.0,
                  final_logit_softcapping=30.0),
         {"hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8,
          "num_key_value_heads": 4, "head_dim": 256, "vocab_size": 256000, "sliding_window": 4096},
         "gemma-2-2b", "tokens", call_kwargs=_LM),
    Arch("phi", "decoder", "MHA, partial rotary (50%), parallel attention+MLP", "PhiConfig", "PhiForCausalLM",
         _decoder(partial_rotary_factor=0.5),
         {"hidden_size": 2560, "intermediate_size": 10240, "num_hidden_layers": 32, "num_attention_heads": 32,
          "vocab_size": 51200}, "phi-2", "tokens", call_kwargs=_LM),
    Arch("phi3", "decoder", "fused QKV projection, rotary, RMSNorm", "Phi3Config", "Phi3ForCausalLM",
         _decoder(num_key_value_heads=4, pad_token_id=0),
         {}, "Phi-3-mini-4k", "tokens", call_kwargs=_LM),
    Arch("stablelm", "decoder", "MHA, partial rotary (25%), LayerNorm", "StableLmConfig", "StableLmForCausalLM",
         _decoder(num_key_value_heads=4),
         {}, "stablelm-3b-4e1t", "tokens", call_kwargs=_LM),
    Arch("olmo", "decoder", "MHA, rotary, non-parametric LayerNorm", "OlmoConfig", "OlmoForCausalLM",
         _decoder(pad_token_id=0, eos_token_id=1),
         {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 16,
          "vocab_size": 50304, "max_position_embeddings": 2048, "tie_word_embeddings": True}, "OLMo-1B",
         "tokens", call_kwargs=_LM),
    # ------------------------------------------------------------------ encoders
    Arch("bert", "encoder", "bidirectional MHA, padding mask", "BertConfig", "BertModel", _encoder(),
         {}, "bert-base-uncased", "tokens+mask", output="last_hidden_state"),
    Arch("roberta", "encoder", "bidirectional MHA, padding mask, positions offset by the pad id", "RobertaConfig",
         "RobertaModel", _encoder(max_position_embeddings=66),
         {}, "roberta-base (vocab 50265)", "tokens+mask", output="last_hidden_state"),
    Arch("distilbert", "encoder", "bidirectional MHA, padding mask, 6 layers in full", "DistilBertConfig",
         "DistilBertModel",
         {"vocab_size": _VOCAB, "dim": 64, "n_layers": 2, "n_heads": 4, "hidden_dim": 128,
          "max_position_embeddings": 64},
         {}, "distilbert-base-uncased", "tokens+mask", output="last_hidden_state"),
    Arch("albert", "encoder", "bidirectional MHA, layers share weights, factorised embeddings", "AlbertConfig",
         "AlbertModel", _encoder(embedding_size=32),
         {"embedding_size": 128, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
          "intermediate_size": 3072}, "albert-base-v2", "tokens+mask", output="last_hidden_state"),
    Arch("electra", "encoder", "bidirectional MHA, embedding projection", "ElectraConfig", "ElectraModel",
         _encoder(embedding_size=32),
         {}, "electra-small-discriminator", "tokens+mask", output="last_hidden_state"),
    Arch("deberta_v2", "encoder", "disentangled attention: content-to-position and position-to-content bias",
         "DebertaV2Config", "DebertaV2Model",
         _encoder(relative_attention=True, position_buckets=8, max_relative_positions=-1, pos_att_type=["p2c", "c2p"],
                  position_biased_input=False, norm_rel_ebd="layer_norm", type_vocab_size=0),
         {"vocab_size": 128100, "relative_attention": True, "position_buckets": 256, "max_relative_positions": -1,
          "pos_att_type": ["p2c", "c2p"], "position_biased_input": False, "norm_rel_ebd": "layer_norm",
          "type_vocab_size": 0}, "deberta-v3-base", "tokens+mask", output="last_hidden_state"),
    Arch("xlm_roberta", "encoder", "bidirectional MHA, padding mask (RoBERTa with a 250k vocabulary)",
         "XLMRobertaConfig", "XLMRobertaModel", _encoder(max_position_embeddings=66),
         {"vocab_size": 250002, "max_position_embeddings": 514, "type_vocab_size": 1}, "xlm-roberta-base",
         "tokens+mask", output="last_hidden_state"),
    Arch("t5_encoder", "encoder", "T5's encoder alone: relative position buckets, unscaled scores, padding mask",
         "T5Config", "T5EncoderModel",
         {"vocab_size": _VOCAB, "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_heads": 4,
          "relative_attention_num_buckets": 8},
         {}, "t5-small encoder", "tokens+mask", output="last_hidden_state"),
    # ------------------------------------------------------------------ encoder-decoders
    Arch("t5", "encoder-decoder", "relative position buckets, unscaled scores, cross-attention", "T5Config",
         "T5ForConditionalGeneration",
         {"vocab_size": _VOCAB, "d_model": 64, "d_kv": 16, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2,
          "num_heads": 4, "relative_attention_num_buckets": 8, "decoder_start_token_id": 0},
         {}, "t5-small", "seq2seq", call_kwargs=_LM),
    Arch("bart", "encoder-decoder", "learned positions, post-LN, cross-attention", "BartConfig",
         "BartForConditionalGeneration",
         {"vocab_size": _VOCAB, "d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
          "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "max_position_embeddings": 64},
         {}, "bart-large", "seq2seq", call_kwargs=_LM),
    Arch("marian", "encoder-decoder", "sinusoidal positions, cross-attention", "MarianConfig", "MarianMTModel",
         {"vocab_size": _VOCAB, "d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
          "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "max_position_embeddings": 64,
          "pad_token_id": 0, "decoder_start_token_id": 0},
         {}, "opus-mt-en-de", "seq2seq", call_kwargs=_LM),
    Arch("whisper", "encoder-decoder", "conv front end on log-mel frames, sinusoidal encoder positions, "
         "cross-attention", "WhisperConfig", "WhisperForConditionalGeneration",
         {"vocab_size": _VOCAB, "d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
          "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "num_mel_bins": 16,
          "max_source_positions": 32, "max_target_positions": 64, "decoder_start_token_id": 1, "pad_token_id": 0,
          "bos_token_id": 1, "eos_token_id": 2},
         {}, "whisper-tiny", "speech2seq", call_kwargs=_LM, dynamic=("B",)),
    Arch("whisper_encoder", "audio", "Whisper's encoder alone: conv front end, bidirectional MHA",
         "WhisperConfig", "WhisperModel",
         {"vocab_size": _VOCAB, "d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
          "decoder_attention_heads": 4, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128, "num_mel_bins": 16,
          "max_source_positions": 32, "max_target_positions": 64, "decoder_start_token_id": 1, "pad_token_id": 0,
          "bos_token_id": 1, "eos_token_id": 2},
         {}, "whisper-tiny encoder", "mel", output="last_hidden_state", submodule="encoder", dynamic=("B",)),
    # ------------------------------------------------------------------ vision and audio
    Arch("vit", "vision", "bidirectional MHA over 16 patches + [CLS]", "ViTConfig", "ViTModel", _vision(),
         {}, "ViT-B/16 (224)", "pixels", output="last_hidden_state", dynamic=("B",)),
    Arch("deit", "vision", "bidirectional MHA over patches + [CLS] + distillation token", "DeiTConfig", "DeiTModel",
         _vision(), {}, "DeiT-B (224)", "pixels", output="last_hidden_state", dynamic=("B",)),
    Arch("beit", "vision", "MHA with a learned relative position bias per layer", "BeitConfig", "BeitModel",
         _vision(use_relative_position_bias=True, use_absolute_position_embeddings=False),
         {"use_relative_position_bias": True, "use_absolute_position_embeddings": False}, "beit-base-patch16-224",
         "pixels", output="last_hidden_state", dynamic=("B",)),
    Arch("swin", "vision", "shifted-window MHA (window 4) with relative position bias, patch merging", "SwinConfig",
         "SwinModel",
         {"image_size": 32, "patch_size": 2, "embed_dim": 32, "depths": [1, 1], "num_heads": [2, 4],
          "window_size": 4},
         {}, "swin-tiny-patch4-window7-224", "pixels", output="last_hidden_state", dynamic=("B",)),
    Arch("clip", "vision-text", "causal text tower + ViT image tower, contrastive logits", "CLIPConfig",
         "CLIPModel",
         {"text_config": {"vocab_size": _VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                          "intermediate_size": 128, "max_position_embeddings": 16},
          "vision_config": _vision(), "projection_dim": 32},
         {}, "clip-vit-base-patch32", "text+pixels", output="logits_per_image", toy_seq=8, dynamic=("B",)),
    Arch("siglip", "vision-text", "bidirectional text tower + ViT image tower, attention-pooling head, "
         "sigmoid logits", "SiglipConfig", "SiglipModel",
         {"text_config": {"vocab_size": _VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                          "intermediate_size": 128, "max_position_embeddings": 8},
          "vision_config": _vision()},
         {}, "siglip-base-patch16-224", "text+pixels", output="logits_per_image", toy_seq=8, dynamic=("B",)),
    Arch("dinov2", "vision", "bidirectional MHA, LayerScale, interpolated position embeddings", "Dinov2Config",
         "Dinov2Model", {**_vision(), "mlp_ratio": 2},
         {}, "dinov2-base", "pixels", output="last_hidden_state", dynamic=("B",)),
    Arch("wav2vec2", "audio", "conv feature encoder, convolutional positions, bidirectional MHA", "Wav2Vec2Config",
         "Wav2Vec2Model",
         {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
          "conv_dim": [32] * 7, "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 4},
         {}, "wav2vec2-base", "audio", output="last_hidden_state", dynamic=("B",)),
)

_BY_NAME = {a.name: a for a in ARCHITECTURES}
assert len(_BY_NAME) == len(ARCHITECTURES), "duplicate zoo names"

__all__ = ["ARCHITECTURES", "INPUT_NAMES", "Arch", "ExportPath", "Family", "InputKind"]
