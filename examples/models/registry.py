"""Every example model by name, with what tests need to know about it.

``MODELS`` lists one :class:`ExampleModel` per torch factory; tests parametrize
over it (``[m.name for m in MODELS if m.size == "tiny"]``). Each entry knows its
torch factory, its JAX twin, its family, size, attention form and dtype, and
where its masks are, so mask tests can perturb the right input.

>>> from examples.models.registry import get
>>> module, inputs, dynamic_shapes = get("gpt2_tiny")()      # or get(...).torch_factory()
>>> jax_fn, args = get("gpt2_tiny").jax_factory()
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from . import gpt2, llama, t5, vit

Family = Literal["gpt2", "bert", "llama", "t5", "vit"]
Size = Literal["tiny", "small"]


@dataclass(frozen=True)
class ExampleModel:
    """One example model: its factories and the facts tests rely on.

    Calling the entry calls the torch factory, so ``get(name)()`` returns
    ``(module, example_inputs, dynamic_shapes)``.
    """

    name: str
    family: Family
    size: Size
    attn: Literal["eager", "sdpa"]
    dtype: Literal["float32", "float16", "bfloat16"]
    torch_factory: Callable[[], tuple[Any, tuple[Any, ...], dict[str, Any] | None]]
    """``() -> (torch module, example inputs, dynamic_shapes or None)``."""
    jax_factory: Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]
    """``() -> (jax_fn, example args)``: same weights and input values as the torch factory."""
    module_file: str
    """Path of the defining file, relative to the repository root."""
    causal_input: int | None = None
    """Index of a token input whose position ``t`` may only affect outputs at positions ``>= t``
    (the output's dim 1 runs over the same positions)."""
    padding: tuple[int, int] | None = None
    """``(token input index, 0/1 mask input index)``: tokens where the mask is 0 must not
    affect the outputs."""
    padding_aligned: bool = False
    """Whether the output's dim 1 runs over the padded input's positions (encoders); if so
    only unpadded positions are compared, else the whole output."""
    features: tuple[str, ...] = ()
    """What the graph exercises, for humans and for picking models in tests."""
    eager_twin: str | None = None
    """For an SDPA model: the name of the model identical to it except for eager attention."""

    @property
    def spec(self) -> str:
        """Command-line form of the torch factory: ``examples/models/gpt2.py:gpt2_tiny``."""
        return f"{self.module_file}:{self.name}"

    @property
    def jax_spec(self) -> str:
        """Command-line form of the JAX factory."""
        return f"{self.module_file}:{self.name}_jax"

    def __call__(self) -> tuple[Any, tuple[Any, ...], dict[str, Any] | None]:
        return self.torch_factory()


_GPT2 = (
    "learned-positions",
    "layernorm",
    "gelu-tanh-explicit",
    "fused-qkv-split",
    "conv1d-addmm",
    "causal-buffer-slice",
    "where-finfo-min",
    "tied-lm-head",
    "dropout",
)
_BERT = (
    "learned-positions",
    "token-types",
    "layernorm",
    "post-ln",
    "gelu-erf",
    "separate-qkv",
    "padding-mask-additive-1e4",
    "dropout",
)
_LLAMA = (
    "rmsnorm",
    "rotary",
    "rotate-half",
    "gqa",
    "silu-gated-mlp",
    "causal-arange-compare",
    "masked-fill-neg-inf",
    "softmax-fp32",
    "dropout",
)
_T5 = (
    "t5-layernorm",
    "relative-position-buckets",
    "unscaled-attention",
    "padding-mask-finfo-min",
    "dropout",
)
_VIT = (
    "conv-patch-embed",
    "class-token-concat",
    "learned-positions",
    "layernorm",
    "gelu-erf",
    "fused-qkv-unbind",
    "scale-q-first",
    "classification-head",
    "dropout",
)


def _entry(module: Any, name: str, family: Family, **kw: Any) -> ExampleModel:
    size: Size = "small" if "_small" in name else "tiny"
    attn = "sdpa" if name.endswith("_sdpa") else "eager"
    dtype = "bfloat16" if "_bf16" in name else "float16" if "_fp16" in name else "float32"
    features = kw.pop("features") + (("sdpa",) if attn == "sdpa" else ())
    if dtype != "float32":
        features += (f"{dtype}-weights", "fp32-upcast")
    return ExampleModel(
        name=name,
        family=family,
        size=size,
        attn=attn,
        dtype=dtype,
        torch_factory=getattr(module, name),
        jax_factory=getattr(module, f"{name}_jax"),
        module_file=f"examples/models/{module.__name__.rsplit('.', 1)[-1]}.py",
        features=features,
        eager_twin=name.removesuffix("_sdpa") if attn == "sdpa" else None,
        **kw,
    )


MODELS: list[ExampleModel] = [
    *(
        _entry(gpt2, n, "gpt2", causal_input=0, features=_GPT2)
        for n in ("gpt2_tiny", "gpt2_tiny_sdpa", "gpt2_small", "gpt2_small_sdpa")
    ),
    _entry(gpt2, "gpt2_tiny_fp16", "gpt2", causal_input=0, features=_GPT2),
    *(
        _entry(gpt2, n, "bert", padding=(0, 2), padding_aligned=True, features=_BERT)
        for n in ("bert_tiny", "bert_tiny_sdpa", "bert_small", "bert_small_sdpa")
    ),
    *(
        _entry(llama, n, "llama", causal_input=0, features=_LLAMA + ("repeat-kv-expand",))
        for n in (
            "llama_tiny",
            "llama_tiny_sdpa",
            "llama_small",
            "llama_small_sdpa",
            "llama_tiny_bf16",
            "llama_tiny_bf16_sdpa",
        )
    ),
    _entry(
        llama,
        "llama_tiny_interleave",
        "llama",
        causal_input=0,
        features=_LLAMA + ("repeat-kv-interleave",),
    ),
    *(
        _entry(
            t5,
            n,
            "t5",
            causal_input=2,
            padding=(0, 1),
            features=_T5 + ("encoder-decoder", "cross-attention", "causal-triu-finfo-min"),
        )
        for n in ("t5_tiny", "t5_tiny_sdpa")
    ),
    *(
        _entry(
            t5,
            n,
            "t5",
            causal_input=2,
            padding=(0, 1),
            features=_T5
            + ("encoder-decoder", "cross-attention", "causal-triu-finfo-min", "gated-gelu"),
        )
        for n in ("t5_small", "t5_small_sdpa")
    ),
    *(
        _entry(t5, n, "t5", padding=(0, 1), padding_aligned=True, features=_T5 + ("gated-gelu",))
        for n in ("t5_encoder_tiny", "t5_encoder_tiny_sdpa")
    ),
    *(
        _entry(vit, n, "vit", features=_VIT)
        for n in ("vit_tiny", "vit_tiny_sdpa", "vit_small", "vit_small_sdpa")
    ),
]
"""All example models; the tiny ones are fast enough for every CI run."""

_BY_NAME = {m.name: m for m in MODELS}


def get(name: str) -> ExampleModel:
    """The entry named ``name`` (``gpt2_tiny``...)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no example model {name!r}; known: {', '.join(_BY_NAME)}") from None


def factory(name: str) -> Callable[..., Any]:
    """The factory called ``name``: the torch one, or the JAX one for a ``..._jax`` name."""
    if name.endswith("_jax") and name not in _BY_NAME:
        return get(name.removesuffix("_jax")).jax_factory
    return get(name).torch_factory


def names(
    *, size: Size | None = None, family: Family | None = None, attn: str | None = None
) -> list[str]:
    """Names of the models matching every given filter, in registry order."""
    return [
        m.name
        for m in MODELS
        if (size is None or m.size == size)
        and (family is None or m.family == family)
        and (attn is None or m.attn == attn)
    ]


__all__ = ["MODELS", "ExampleModel", "factory", "get", "names"]
