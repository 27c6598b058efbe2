"""Prefill and decode entry points of the zoo's decoder LMs, with a static KV cache.

Design note. A zoo decoder is built with its cache switched on, wrapped in
transformers' ``TorchExportableModuleForDecoderOnlyLM`` (a ``StaticCache`` of
``max_cache_len`` positions held as module buffers), and exported with
``torch.export`` (strict): either twice, once for ``prompt_len`` tokens (prefill)
and once for one token (decode) -- or once with the token count a symbol
``S``, which serves as both (lowered for S=1 and for S=P).  The torch frontend imports the cache buffers
the graph writes as function arguments and their new values as extra outputs
aliased to them, so both functions read::

    (input_ids: [B, S] i64, cache_position: [S] i64, <cache args>...)
        -> (logits: [B, S, V], <updated caches>...)   aliases = [[1, a1], [2, a2], ...]

(the cache arguments may come in any position; :class:`DecodeModel` finds them
by the aliases).  The position is a run-time value, so the decode function is
compiled once and serves every position up to ``max_cache_len``.  Prefill and
decode have the same cache arguments, so a generation loop hands the caches from
one to the other.

Tested with transformers 5.24.0 and torch 2.13.0.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irkit.errors import IrkitError
from irkit.ir.core import Module
from irkit.zoo.build import Size, ZooError, _quiet_transformers, entry, make_config

DECODERS: tuple[str, ...] = ("gpt2", "gptj", "gpt_neox", "opt", "bloom", "falcon", "llama", "mistral", "mixtral",
                              "qwen2", "qwen3", "gemma", "gemma2", "phi", "phi3", "stablelm", "olmo")
"""The zoo decoders whose greedy tokens the decode tests check against transformers (every zoo decoder)."""


class NoCacheError(IrkitError):
    """A module given for generation has no KV-cache state (no aliased or paired outputs)."""


@dataclass
class DecodeRoles:
    """Which argument of a prefill/decode function is what."""

    ids: int
    position: int
    state: list[int]
    """Cache arguments (aliased), in argument order."""
    logits: int
    """The output holding the logits."""
    aliases: dict[int, int]
    """Output -> argument."""

    @staticmethod
    def of(module: Module, what: str = "module") -> DecodeRoles:
        """Find the roles by argument names (``input_ids``, ``cache_position``) and the aliases."""
        from irkit.targets.base import module_aliases

        fn = module.entry
        aliases = module_aliases(module)
        if not aliases:
            raise NoCacheError(f"{what}: function @{fn.name} has no KV-cache state (no 'aliases' attribute: no output "
                               "overwrites an argument); export the model with a static cache "
                               "(irkit.zoo.decode, or transformers' TorchExportableModuleForDecoderOnlyLM)")
        state = sorted(aliases.values())
        rest = [i for i in range(len(fn.args)) if i not in aliases.values()]
        names = {(fn.args[i].name or "").lower(): i for i in rest}
        ids = next((i for n, i in names.items() if "input_ids" in n), None)
        pos = next((i for n, i in names.items() if "position" in n), None)
        ints = [i for i in rest if fn.args[i].dtype.is_int]
        if ids is None:
            ids = next((i for i in ints if fn.args[i].type.rank == 2), None)
        if pos is None:
            pos = next((i for i in ints if fn.args[i].type.rank == 1 and i != ids), None)
        if ids is None or pos is None or len(rest) != 2:
            got = ", ".join(f"{a.name or i}: {a.type}" for i, a in enumerate(fn.args) if i in rest)
            raise NoCacheError(f"{what}: function @{fn.name} must take (input_ids [B, S] int, cache_position [S] int) "
                               f"besides its cache arguments; it takes {got}")
        outs = [o for o in range(len(fn.outputs)) if o not in aliases]
        if len(outs) != 1:
            raise NoCacheError(f"{what}: function @{fn.name} must return the logits and the updated caches; it has "
                               f"{len(outs)} outputs that are not caches")
        return DecodeRoles(ids, pos, state, outs[0], aliases)


@dataclass
class DecodeModel:
    """A decoder LM as two irkit functions sharing one KV cache."""

    name: str
    decode: Module
    prefill: Module | None = None
    """Compiled for ``prompt_len`` tokens; None: prefill runs the decode function token by token."""
    batch: int = 1
    max_cache_len: int = 64
    prompt_len: int | None = None
    vocab: int = 0
    torch_model: Any = None
    """The transformers model the functions were exported from (None when imported from a file)."""
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def roles(self) -> DecodeRoles:
        return DecodeRoles.of(self.decode, f"{self.name} (decode)")

    def cache_bytes(self) -> int:
        """Bytes of the KV-cache arguments (all layers, keys and values)."""
        fn = self.decode.entry
        total = 0
        for i in self.roles.state:
            t = fn.args[i].type
            if t.rank >= 3:  # key/value caches; small bookkeeping buffers (lengths) are not the cache
                total += int(np.prod(t.concrete_shape({}))) * fn.args[i].dtype.np.itemsize
        return total

    def weight_bytes(self) -> int:
        """Bytes of the constants of the decode function (the weights)."""
        from irkit.ir.core import Dense

        total = 0
        seen: set[int] = set()
        for op in self.decode.entry.walk():
            if op.name == "ik.constant":
                v = op.attrs.get("value")
                if isinstance(v, Dense) and id(v) not in seen:
                    seen.add(id(v))
                    total += int(np.prod(op.results[0].type.concrete_shape({}))) * op.results[0].dtype.np.itemsize
        return total


def build_lm(name: str, size: Size = "toy", seed: int = 0) -> Any:
    """The transformers LM of zoo entry ``name`` with its cache on (eval mode, random weights)."""
    import torch
    import transformers

    arch = entry(name)
    if arch.family != "decoder":
        raise ZooError(f"zoo '{name}' is a {arch.family} model; generation needs a decoder LM "
                       f"(one of: {', '.join(decoder_names())})")
    cls = getattr(transformers, arch.model_class)
    model = None
    for attn in ("sdpa", "eager"):  # eager where transformers has no SDPA path (bloom, gemma2's soft-capping)
        cfg = make_config(arch, size, attn=attn)
        cfg.use_cache = True
        if getattr(cfg, "multi_query", False) and not getattr(cfg, "new_decoder_architecture", True):
            # falcon's multi-query attention keeps one KV head, the static cache sizes itself from the config
            cfg.num_kv_heads = 1
            cfg.num_key_value_heads = 1
        torch.manual_seed(seed)
        try:
            with _quiet_transformers():
                model = cls(cfg).eval()
            break
        except ValueError as e:
            if attn == "eager" or "scaled_dot_product_attention" not in str(e):
                raise
    return model


def decoder_names() -> list[str]:
    """Every zoo entry that is a decoder LM."""
    from irkit.zoo.registry import ARCHITECTURES

    return [a.name for a in ARCHITECTURES if a.family == "decoder"]


def export_static(model: Any, batch: int, max_cache_len: int, seq: int | None = None) -> Any:
    """torch.export of ``model`` wrapped with a static cache: for ``seq`` tokens per call, or (``seq``
    None) with the token count a symbol ``S`` in 1..max_cache_len."""
    import torch
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    model.generation_config.cache_implementation = "static"
    model.generation_config.use_cache = True
    with _quiet_transformers(), _no_info_logs():
        wrapped = TorchExportableModuleForDecoderOnlyLM(model, batch_size=batch, max_cache_len=max_cache_len)
        if getattr(model.config, "model_type", "") in _EXPLICIT_POSITIONS:
            inner = wrapped.model
            inner.__class__ = type(f"{type(inner).__name__}WithPositions", (type(inner),),
                                   {"forward": _forward_positions, "_irkit_cache_len": max_cache_len})
        n = seq or min(2, max_cache_len)
        ids = torch.zeros((batch, n), dtype=torch.long)
        pos = torch.arange(n, dtype=torch.long)
        dyn = None
        if seq is None:
            s = torch.export.Dim("S", min=1, max=max_cache_len)
            dyn = {"input_ids": {1: s}, "cache_position": {0: s}}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # dynamo's notes on transformers' output collectors
            # strict (dynamo) export: the cache tensors come in as BUFFER inputs the graph writes; the
            # non-strict tracer lifts the cache lengths as constants instead
            ep = wrapped.export(input_ids=ids, cache_position=pos, dynamic_shapes=dyn, strict=True)
    ep._irkit_dynamic_shapes = dyn  # type: ignore[attr-defined]  # names the symbol S on import
    return ep


# Models whose forward derives positions from the cache length read back as a Python number (OPT's
# ``past_seen_tokens`` slicing): they get ``position_ids = cache_position`` explicitly.
_EXPLICIT_POSITIONS = frozenset({"opt"})


def _forward_positions(self: Any, input_ids: Any = None, inputs_embeds: Any = None, cache_position: Any = None) -> Any:
    """transformers' static-cache export forward, with the positions passed as ``position_ids``."""
    import torch

    for layer in self.static_cache.layers:
        layer.cumulative_length.copy_(cache_position[0])
    x = input_ids if input_ids is not None else inputs_embeds
    pos = cache_position.unsqueeze(0).expand(x.shape[0], -1)
    # an all-ones padding mask over the cache: the same causal attention, and no position arithmetic on the
    # cache length read back as a number
    mask = torch.ones((x.shape[0], self._irkit_cache_len), dtype=torch.long)
    outs = self.model(input_ids=input_ids, inputs_embeds=inputs_embeds, attention_mask=mask, position_ids=pos,
                      cache=self.static_cache, use_cache=True)
    return outs.logits if hasattr(outs, "logits") else outs.last_hidden_state


@contextlib.contextmanager
def _no_info_logs() -> Any:
    import logging

    lg = logging.getLogger()
    old = lg.level
    lg.setLevel(max(old, logging.WARNING))
    try:
        yield
    finally:
        lg.setLevel(old)


def import_static(ep: Any, what: str) -> Module:
    """Import a static-cache program; the cache must come in as aliased state."""
    from irkit.frontends.torch_export import import_exported_program

    m = import_exported_program(ep, "main", dynamic_shapes=getattr(ep, "_irkit_dynamic_shapes", None))
    DecodeRoles.of(m, what)  # a clear error when the cache did not come in as state
    return m


_MEMO: dict[tuple[Any, ...], DecodeModel] = {}


def decode_model(name: str, size: Size = "toy", *, batch: int = 1, max_cache_len: int | None = None,
                 prompt_len: int | None = None, seed: int = 0, dynamic: bool = True) -> DecodeModel:
    """Zoo decoder ``name`` as a :class:`DecodeModel` (built once per process for the same arguments:
    exports take seconds; treat the modules as read-only, e.g. ``.clone()`` before running passes).

    ``dynamic`` (default): one export with the token count a symbol ``S``; it is both the decode
    function (lowered for S=1) and the prefill function (lowered for S=P when a prompt of P tokens
    comes).  Else two static exports: decode for 1 token and, when ``prompt_len`` > 1 is given,
    prefill for ``prompt_len`` tokens.  ``max_cache_len`` defaults to the model's position limit capped
    at 64 (toy) or 1024 (full)."""
    key = (name, size, batch, max_cache_len, None if dynamic else prompt_len, seed, dynamic)
    if key not in _MEMO:
        _MEMO[key] = _decode_model(name, size, batch, max_cache_len, prompt_len, seed, dynamic)
    return _MEMO[key]


def _decode_model(name: str, size: Size, batch: int, max_cache_len: int | None, prompt_len: int | None, seed: int,
                  dynamic: bool) -> DecodeModel:
    model = build_lm(name, size, seed)
    cfg = model.config
    limit = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 1024
    if max_cache_len is None:
        max_cache_len = min(limit, 64 if size == "toy" else 1024)
    if not 2 <= max_cache_len <= limit:
        raise ZooError(f"zoo '{name}': max_cache_len {max_cache_len} must be in 2..{limit} (the model's positions)")
    if prompt_len is not None and not 1 <= prompt_len <= max_cache_len:
        raise ZooError(f"zoo '{name}': prompt length {prompt_len} must be in 1..{max_cache_len}")
    vocab = int(getattr(cfg, "vocab_size", 0))
    info = {"size": size, "seed": seed, "dynamic": dynamic}
    if dynamic:
        m = import_static(export_static(model, batch, max_cache_len, None), f"zoo:{name}")
        return DecodeModel(name, m, m, batch, max_cache_len, None, vocab, model, info)
    dec = import_static(export_static(model, batch, max_cache_len, 1), f"zoo:{name} decode")
    pre = None
    if prompt_len is not None and prompt_len > 1:
        pre = import_static(export_static(model, batch, max_cache_len, prompt_len), f"zoo:{name} prefill")
    return DecodeModel(name, dec, pre, batch, max_cache_len, prompt_len, vocab, model, info)


__all__ = ["DECODERS", "DecodeModel", "DecodeRoles", "NoCacheError", "build_lm", "decode_model", "decoder_names",
           "export_static", "import_static"]
