"""Build a zoo entry: config -> random-weight transformers model -> a module of plain tensors.

Design note. transformers models take keyword arguments and return output
dataclasses; torch.export and the ONNX exporter want positional tensors in and
tensors out, and name the graph inputs after ``forward``'s parameters.  So the
model is wrapped in a ``ZooModel`` whose ``forward`` has exactly the
model's input names as parameters (the class is generated once per input
kind, because Python gives a function its parameter names only at definition)
and returns one tensor: ``logits`` or ``last_hidden_state``.

Weights are random (``torch.manual_seed(seed)`` before construction, then the
architecture's own ``init_weights``); inputs come from a separate generator, so
the same seed gives the same model and inputs in every process.  Nothing is
downloaded: configs are built from keyword arguments in
:mod:`irkit.zoo.registry`, and no tokenizer or processor is used.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any, Literal, cast

from irkit.errors import InputError
from irkit.zoo.registry import ARCHITECTURES, INPUT_NAMES, Arch

Size = Literal["toy", "full"]
SIZES: tuple[Size, ...] = ("toy", "full")


class ZooError(InputError):
    """A zoo name, size or option that does not exist (one line, names what does)."""


def names() -> list[str]:
    """The architectures of the zoo, in table order (decoders, encoders, seq2seq, vision/audio)."""
    return [a.name for a in ARCHITECTURES]


def entry(name: str) -> Arch:
    """The registry entry of ``name``."""
    for a in ARCHITECTURES:
        if a.name == name:
            return a
    raise ZooError(f"no zoo architecture '{name}' (known: {', '.join(names())})")


def _check_size(size: str) -> None:
    if size not in SIZES:
        raise ZooError(f"unknown zoo size '{size}' (expected one of {', '.join(SIZES)})")


def as_size(size: str) -> Size:
    """``size`` (e.g. from a command line) checked to be one of :data:`SIZES`."""
    _check_size(size)
    return cast(Size, size)


@contextlib.contextmanager
def _quiet_transformers() -> Any:
    """transformers logs config warnings (toy vocabularies vs default special-token ids) at WARNING;
    they say nothing about the toy model, so building stays silent."""
    lg = logging.getLogger("transformers")
    old = lg.level
    lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        lg.setLevel(old)


POSITION_FIELDS = ("max_position_embeddings", "n_positions")
"""Config fields that bound a token model's sequence length (its position table or rotary cache)."""


def make_config(arch: Arch, size: Size = "toy", attn: str | None = None, positions: int | None = None) -> Any:
    """The transformers config object of ``arch`` at ``size`` (``attn``: force an attention
    implementation, ``"eager"`` or ``"sdpa"``; default: transformers' choice).  ``positions``: raise
    every sequence bound of the (text) config (:data:`POSITION_FIELDS`) to at least that many, so a
    toy model (64 positions) takes longer sequences; the position table grows, nothing else."""
    import transformers

    _check_size(size)
    if attn not in (None, "eager", "sdpa"):
        raise ZooError(f"unknown attention implementation '{attn}' (expected eager or sdpa)")
    cls = getattr(transformers, arch.config_class, None)
    if cls is None:
        raise ZooError(f"zoo '{arch.name}': transformers {transformers.__version__} has no {arch.config_class}")
    kwargs = dict(arch.toy if size == "toy" else arch.full)
    if attn is not None:
        kwargs["attn_implementation"] = attn
    with _quiet_transformers():
        config = cls(**kwargs)
    if positions is not None:
        for c in (config, getattr(config, "text_config", None)):
            for f in POSITION_FIELDS:
                if c is not None and isinstance(getattr(c, f, None), int) and getattr(c, f) < positions:
                    setattr(c, f, positions)
    return config


@functools.cache
def _forward_class(input_names: tuple[str, ...]) -> type:
    """A ``ZooModel`` subclass whose ``forward`` parameters are ``input_names``."""
    for n in input_names:
        if not n.isidentifier():
            raise ZooError(f"input name '{n}' is not an identifier")
    params = ", ".join(input_names)
    ns: dict[str, Any] = {}
    # The exporters read graph-input names from forward's signature (see the design note).
    exec(f"def forward(self, {params}):\n    return self._call({params})\n", ns)  # noqa: S102
    forward = ns["forward"]
    forward.__doc__ = f"The model on ({params}), returning one tensor."
    return type(f"ZooModel_{'_'.join(input_names)}", (zoo_model_class(),), {"forward": forward})


@functools.cache
def zoo_model_class() -> type:
    """The base class of every zoo wrapper (an ``nn.Module``; made on first use, so that
    ``import irkit.zoo`` does not import torch)."""
    import torch

    class ZooModel(torch.nn.Module):
        """A transformers model taking positional tensors and returning one tensor."""

        def __init__(self, model: Any, arch: Arch) -> None:
            super().__init__()
            self.model = model
            self.arch_name = arch.name
            self.input_names = INPUT_NAMES[arch.inputs]
            self.output_name = arch.output
            self.call_kwargs = dict(arch.call_kwargs)

        def _call(self, *tensors: Any) -> Any:
            out = self.model(**dict(zip(self.input_names, tensors)), **self.call_kwargs)
            return getattr(out, self.output_name)

    return ZooModel


def example_inputs(arch: Arch, config: Any, size: Size = "toy", *, batch: int | None = None,
                   seq: int | None = None, seed: int = 0) -> tuple[Any, ...]:
    """Random example inputs of ``arch`` in the order of its input names.

    Token ids avoid the first four ids (pad/bos/eos/unk in most vocabularies), so
    no position counting or pooling keys on a special token by accident; a
    ``tokens+mask`` input pads the last quarter of the second sequence, never a
    whole row.
    """
    import torch

    g = torch.Generator().manual_seed(seed + 1)
    b = batch or (2 if size == "toy" else 1)
    s = seq or (arch.toy_seq if size == "toy" else 128)
    if seq is None:  # the default never exceeds the model's own bound (CLIP's text: 77 positions)
        bound = getattr(_text_config(config), "max_position_embeddings", None)
        s = min(s, bound) if isinstance(bound, int) and bound > 0 else s

    def tokens(n: int) -> Any:
        return torch.randint(4, _text_config(config).vocab_size, (b, n), generator=g, dtype=torch.long)

    def pixels() -> Any:
        vc = getattr(config, "vision_config", config)
        side = vc.image_size if isinstance(vc.image_size, int) else vc.image_size[0]
        return torch.randn(b, getattr(vc, "num_channels", 3), side, side, generator=g)

    kind = arch.inputs
    if kind == "tokens":
        return (tokens(s),)
    if kind == "tokens+mask":
        mask = torch.ones(b, s, dtype=torch.long)
        if b > 1:
            mask[1, s - max(1, s // 4):] = 0
        return tokens(s), mask
    if kind == "seq2seq":
        return tokens(s), tokens(max(2, s // 2))
    if kind in ("speech2seq", "mel"):
        # Whisper's encoder takes exactly 2 x max_source_positions frames.
        feats = torch.randn(b, config.num_mel_bins, 2 * config.max_source_positions, generator=g)
        return (feats,) if kind == "mel" else (feats, tokens(max(2, s // 2)))
    if kind == "pixels":
        return (pixels(),)
    if kind == "text+pixels":
        return tokens(s), pixels()
    if kind == "audio":
        n = arch.toy_audio if size == "toy" else 16000
        return (torch.randn(b, n, generator=g),)
    raise ZooError(f"zoo '{arch.name}': unknown input kind '{kind}'")


def _text_config(config: Any) -> Any:
    return getattr(config, "text_config", None) or config


def dynamic_shapes(arch: Arch, inputs: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """torch.export ``dynamic_shapes`` for ``inputs``: ``B`` on dim 0 of every input; ``S`` on
    dim 1 of the encoder (or only) token inputs and ``T`` on dim 1 of ``decoder_input_ids``,
    where the entry lists ``S``."""
    import torch

    if not arch.dynamic:
        return None
    dims: dict[str, Any] = {}

    def dim(n: str, lo: int = 1, hi: int | None = None) -> Any:
        if n not in dims:
            dims[n] = torch.export.Dim(n, min=lo, max=hi) if hi else torch.export.Dim(n, min=lo)
        return dims[n]

    spec = []
    for name, x in zip(INPUT_NAMES[arch.inputs], inputs):
        axes: dict[int, Any] = {}
        if "B" in arch.dynamic:
            axes[0] = dim("B")
        if "S" in arch.dynamic and name in ("input_ids", "attention_mask", "decoder_input_ids") and x.dim() == 2:
            # 0/1 are specialised by torch.export; positions are bounded by the table size (a toy's
            # 64, or more when the example is longer: a full-size model, or build(positions=N)).
            axes[1] = dim("T" if name == "decoder_input_ids" else "S", 2, max(64, int(x.shape[1])))
        spec.append(axes or None)
    return tuple(spec)


def build(name: str, size: Size = "toy", *, attn: str | None = None, seed: int = 0, batch: int | None = None,
          seq: int | None = None, positions: int | None = None) -> tuple[Any, tuple[Any, ...]]:
    """``(module, example_inputs)``: architecture ``name`` at ``size`` with random weights.

    The module is a ``ZooModel`` (:func:`zoo_model_class`) in eval mode whose ``forward`` takes the
    tensors of ``example_inputs`` positionally (named as the transformers model
    names them: ``input_ids``, ``pixel_values``...) and returns one tensor.
    ``attn`` forces an attention implementation (``"eager"``, ``"sdpa"``); ``positions`` raises the
    config's sequence bounds (:func:`make_config`) for a ``seq`` beyond them.
    """
    import torch
    import transformers

    arch = entry(name)
    config = make_config(arch, size, attn, positions)
    cls = getattr(transformers, arch.model_class, None)
    if cls is None:
        raise ZooError(f"zoo '{name}': transformers {transformers.__version__} has no {arch.model_class}")
    torch.manual_seed(seed)
    with _quiet_transformers():
        model = cls(config)
    model.eval()
    if arch.submodule:
        model = getattr(model, arch.submodule)
    wrapper = _forward_class(INPUT_NAMES[arch.inputs])(model, arch).eval()
    return wrapper, example_inputs(arch, config, size, batch=batch, seq=seq, seed=seed)


def factory(name: str, size: Size = "toy", **kw: Any) -> tuple[Any, tuple[Any, ...], tuple[Any, ...] | None]:
    """What a ``FILE.py:FACTORY`` factory returns: ``(module, example_inputs, dynamic_shapes)``.

    ``irkit.frontends.torch_export.import_torch_factory(*irkit.zoo.factory("gpt2"))``
    imports it; ``dynamic_shapes`` names the batch ``B`` and sequence ``S`` dims
    (``None`` where the entry exports static shapes).
    """
    module, inputs = build(name, size, **kw)
    return module, inputs, dynamic_shapes(entry(name), inputs)


def _attention_modules(module: Any) -> list[Any]:
    """Modules named like an attention that hold no smaller one."""

    def named(m: Any) -> bool:
        return "Attention" in type(m).__name__

    return [m for m in module.modules() if named(m) and not any(c is not m and named(c) for c in m.modules())]


def attention_layers(module: Any, inputs: tuple[Any, ...] | None = None) -> int:
    """The model's attention layers: modules named like an attention holding no smaller one
    (``BertSelfAttention`` inside ``BertAttention`` counts once).  With ``inputs``, the number
    of times such modules run in one forward pass instead, which is what an exported graph
    holds (ALBERT runs its one shared layer once per layer)."""
    import torch

    mods = _attention_modules(module)
    if inputs is None:
        return len(mods)
    calls = [0]

    def hook(*_: Any) -> None:
        calls[0] += 1

    handles = [m.register_forward_hook(hook) for m in mods]
    try:
        with torch.no_grad():
            module(*inputs)
    finally:
        for h in handles:
            h.remove()
    return calls[0]


__all__ = ["SIZES", "Size", "ZooError", "as_size", "attention_layers", "build", "dynamic_shapes", "entry",
           "example_inputs", "factory", "make_config", "names", "zoo_model_class"]
