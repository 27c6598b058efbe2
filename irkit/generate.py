"""Greedy autoregressive generation with a KV cache, on any runnable target, through sessions.

>>> from irkit.zoo.decode import decode_model
>>> from irkit.generate import generate
>>> dm = decode_model("llama", "toy", prompt_len=8)
>>> r = generate(dm, "ort", prompt_ids=[[1, 2, 3, 4, 5, 6, 7, 8]], new_tokens=16)
>>> r.tokens.shape, r.ttft_seconds, r.step_seconds[:2]

Design note. A decoder is a decode function (one token per call, the position a
run-time value) and optionally a prefill function (``P`` tokens); both take
``(input_ids, cache_position, caches...)`` and return ``(logits, caches...)``
with the caches aliased to their arguments (see :mod:`irkit.zoo.decode`).  Each
function is lowered once for the target and opened as a
:class:`irkit.targets.base.Session`: the caches are bound once (zeros) and stay
resident on the target, updated by every call; only the logits come back.
After prefill the caches move once from the prefill session to the decode
session.  Without a prefill function (or for a prompt of another length) the
prompt runs through the decode function one token at a time.

Timing: ``ttft_seconds`` is from the start of prefill to the first generated
token (the caches moved to the decode session included); ``step_seconds[i]`` is
the wall time of decode call ``i`` with the argmax; compile time is reported
separately (``compile_seconds``) and is not part of either.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irkit.errors import IrkitError
from irkit.ir.core import Module
from irkit.ir.types import eval_dim


class GenerateError(IrkitError):
    """A generation request that cannot run (prompt too long for the cache, wrong batch...)."""


@dataclass
class GenerationResult:
    """What :func:`generate` produced and how long it took."""

    tokens: np.ndarray
    """Generated token ids, ``[batch, new_tokens]`` (the prompt not included)."""
    ttft_seconds: float
    step_seconds: list[float]
    """Seconds of each decode step after the first token (``new_tokens - 1`` entries)."""
    logits: list[np.ndarray] | None = None
    """Last-position logits of each generated token, ``[batch, vocab]`` each (when asked for)."""
    target: str = ""
    prompt_len: int = 0
    batch: int = 1
    compile_seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def decode_tokens_per_second(self) -> float:
        s = sum(self.step_seconds)
        return self.batch * len(self.step_seconds) / s if s > 0 else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens.tolist(), "ttft_seconds": self.ttft_seconds,
                "step_seconds": list(self.step_seconds), "target": self.target, "prompt_len": self.prompt_len,
                "batch": self.batch, "compile_seconds": self.compile_seconds}


@dataclass
class CompiledDecoder:
    """A decoder lowered for one target: sessions can be opened again and again (bench loops)."""

    target: Any
    decode: Any
    """Artifact of the decode function (one token per call)."""
    prefill: Any | None
    """Artifact of the prefill function, for ``prompt_len`` tokens (None: token by token)."""
    roles: Any
    prefill_roles: Any | None
    prompt_len: int | None
    batch: int
    max_cache_len: int
    state_types: dict[int, tuple[tuple[int, ...], Any]]
    compile_seconds: float


def _as_pair(model: Any) -> tuple[Module, Module | None, str]:
    from irkit.zoo.decode import DecodeModel

    if isinstance(model, DecodeModel):
        return model.decode, model.prefill, model.name
    if isinstance(model, Module):
        return model, None, model.entry.name
    if isinstance(model, tuple) and len(model) == 2:
        pre, dec = model
        if not isinstance(dec, Module) or (pre is not None and not isinstance(pre, Module)):
            raise GenerateError("generate: a pair must be (prefill Module or None, decode Module)")
        return dec, pre, dec.entry.name
    raise GenerateError(f"generate: expected a DecodeModel, a decode Module or a (prefill, decode) pair, got "
                        f"{type(model).__name__}")


def seq_bindings(module: Module, roles: Any, n: int) -> dict[str, int] | None:
    """Bindings that make the function take ``n`` tokens per call, or None when it takes another fixed count."""
    fn = module.entry
    d = fn.args[roles.ids].type.shape[1]
    syms = sorted(fn.args[roles.ids].type.symbols)
    if not syms:
        return {} if d == n else None
    if len(syms) != 1 or syms[0] not in fn.args[roles.position].type.symbols:
        return None
    from irkit.interp import default_bindings

    b = default_bindings(fn, {syms[0]: n})
    return b if eval_dim(d, b) == n else None


def decode_model_of(m: Module, name: str, source: str) -> Any:
    """A ``DecodeModel`` called ``name`` of a decode function read from ``source`` (named in errors): it
    must take 1 token per call or a symbolic count (which then serves as prefill too)."""
    from irkit.zoo.decode import DecodeModel, DecodeRoles

    roles = DecodeRoles.of(m, source)
    fn = m.entry
    b = seq_bindings(m, roles, 1)
    if b is None:
        raise GenerateError(f"{source}: the function takes {fn.args[roles.ids].type} token ids; it must take 1 token "
                            "per call or a symbolic count")
    dynamic = bool(fn.args[roles.ids].type.symbols)
    caches = [fn.args[i].type.concrete_shape(b) for i in roles.state]
    return DecodeModel(name, m, m if dynamic else None, batch=int(fn.args[roles.ids].type.concrete_shape(b)[0]),
                       max_cache_len=max((s[2] for s in caches if len(s) >= 3), default=0),
                       vocab=int(fn.outputs[roles.logits].type.concrete_shape(b)[-1]))


def compile_decoder(model: Any, target: Any, prompt_len: int | None = None) -> CompiledDecoder:
    """Lower the decode function of ``model`` (and its prefill function for ``prompt_len`` tokens, where
    it has one that takes that many) for ``target`` (a name or a Target)."""
    from irkit.targets.base import lower_for_session
    from irkit.targets.registry import get_target
    from irkit.zoo.decode import DecodeRoles

    tg = get_target(target) if isinstance(target, str) else target
    av = tg.availability()
    if not av.can_run:
        raise GenerateError(f"generate: target '{tg.name}' cannot run here: {av.reason or 'compile-only target'}")
    dec, pre, name = _as_pair(model)
    roles = DecodeRoles.of(dec, f"{name} (decode)")
    fn = dec.entry
    db = seq_bindings(dec, roles, 1)
    if db is None:
        raise GenerateError(f"generate: the decode function of {name} takes {fn.args[roles.ids].type} token ids; "
                            "it must take 1 token per call (export it with seq length 1 or a symbolic length)")
    ids_shape = fn.args[roles.ids].type.concrete_shape(db)
    batch = ids_shape[0]
    state_types = {i: (tuple(fn.args[i].type.concrete_shape(db)), fn.args[i].dtype.np) for i in roles.state}
    cache_len = max((s[2] for s, _ in state_types.values() if len(s) >= 3), default=0)
    t0 = time.perf_counter()
    dec_art = lower_for_session(tg, dec, db)
    pre_art = pre_roles = None
    if pre is not None and prompt_len is not None and prompt_len > 1:
        pre_roles = DecodeRoles.of(pre, f"{name} (prefill)")
        pb = seq_bindings(pre, pre_roles, prompt_len)
        if pb is not None:
            pfn = pre.entry
            pstate = {i: (tuple(pfn.args[i].type.concrete_shape(pb)), pfn.args[i].dtype.np)
                      for i in pre_roles.state}
            if (sorted(map(str, pstate.values())) != sorted(map(str, state_types.values()))
                    or pfn.args[pre_roles.ids].type.concrete_shape(pb)[0] != batch):
                raise GenerateError(f"generate: the prefill and decode functions of {name} have different caches "
                                    "or batch sizes; export both from the same model and cache")
            pre_art = lower_for_session(tg, pre, pb)
    dt = time.perf_counter() - t0
    return CompiledDecoder(tg, dec_art, pre_art, roles, pre_roles if pre_art else None,
                           prompt_len if pre_art else None, batch, cache_len, state_types, dt)


def _prompt(prompt_ids: Any, batch: int | None, want_batch: int) -> np.ndarray:
    p = np.asarray(prompt_ids, dtype=np.int64)
    if p.ndim == 1:
        p = np.broadcast_to(p, (batch or want_batch, p.shape[0])).copy()
    if p.ndim != 2 or p.shape[1] == 0:
        raise GenerateError(f"generate: prompt ids must be [batch, length] (or one row), got shape {p.shape}")
    if p.shape[0] != want_batch:
        raise GenerateError(f"generate: the model was exported for batch {want_batch}, the prompt has "
                            f"{p.shape[0]} rows; export with --batch {p.shape[0]} or pass {want_batch} rows")
    return p


def generate(model: Any, target: Any, prompt_ids: Any, new_tokens: int, batch: int | None = None, *,
             keep_logits: bool = False, compiled: CompiledDecoder | None = None) -> GenerationResult:
    """Greedy generation: ``new_tokens`` tokens after ``prompt_ids`` (``[batch, P]``, or one row repeated
    ``batch`` times).  ``model``: a :class:`irkit.zoo.decode.DecodeModel`, a decode Module, or a
    ``(prefill, decode)`` pair; ``target``: a target name or object (or give ``compiled``, from
    :func:`compile_decoder`, to reuse the lowering)."""
    if new_tokens < 1:
        raise GenerateError(f"generate: new tokens must be >= 1, got {new_tokens}")
    plen0 = np.asarray(prompt_ids).shape[-1]
    cache_len = compiled.max_cache_len if compiled else getattr(model, "max_cache_len", 0)
    if cache_len and plen0 + new_tokens - 1 > cache_len:
        raise GenerateError(f"generate: prompt {plen0} + {new_tokens} new tokens needs {plen0 + new_tokens - 1} "
                            f"cache positions; the cache holds {cache_len} (export with a longer max cache length)")
    c = compiled or compile_decoder(model, target, plen0)
    p = _prompt(prompt_ids, batch, c.batch)
    plen = p.shape[1]
    if c.max_cache_len and plen + new_tokens - 1 > c.max_cache_len:
        raise GenerateError(f"generate: prompt {plen} + {new_tokens} new tokens needs {plen + new_tokens - 1} cache "
                            f"positions; the cache holds {c.max_cache_len} (export with a longer max cache length)")
    tg = c.target
    r = c.roles
    dec = tg.open_session(c.decode)
    for i, (shape, dt) in c.state_types.items():
        dec.bind(i, np.zeros(shape, dt))
    logits_kept: list[np.ndarray] = []
    n_args = len(c.decode.input_shapes)

    def call(sess: Any, roles: Any, ids: np.ndarray, start: int, n: int) -> np.ndarray:
        xs: list[np.ndarray | None] = [None] * n
        xs[roles.ids] = ids
        xs[roles.position] = np.arange(start, start + ids.shape[1], dtype=np.int64)
        return sess.run(xs, fetch=[roles.logits])[0]

    t0 = time.perf_counter()
    if c.prefill is not None and c.prompt_len == plen:
        pre = tg.open_session(c.prefill)
        for i, (shape, dt) in c.state_types.items():
            pre.bind(i, np.zeros(shape, dt))
        lg = call(pre, c.prefill_roles, p, 0, len(c.prefill.input_shapes))
        for i in c.state_types:  # the caches move once, prefill -> decode
            dec.bind(i, pre.read(i))
        pre.close()
        mode = "prefill"
    else:
        for k in range(plen):
            lg = call(dec, r, p[:, k:k + 1], k, n_args)
        mode = "token-by-token"
    last = np.asarray(lg)[:, -1, :]
    nxt = np.argmax(last, axis=-1).astype(np.int64)
    ttft = time.perf_counter() - t0
    toks = [nxt]
    if keep_logits:
        logits_kept.append(np.array(last, copy=True))
    steps: list[float] = []
    for k in range(new_tokens - 1):
        s0 = time.perf_counter()
        lg = call(dec, r, nxt[:, None], plen + k, n_args)
        last = np.asarray(lg)[:, -1, :]
        nxt = np.argmax(last, axis=-1).astype(np.int64)
        steps.append(time.perf_counter() - s0)
        toks.append(nxt)
        if keep_logits:
            logits_kept.append(np.array(last, copy=True))
    dec.close()
    return GenerationResult(np.stack(toks, axis=1), ttft, steps, logits_kept if keep_logits else None, tg.name,
                            plen, c.batch, c.compile_seconds, {"prefill": mode, "session": type(dec).__name__})


__all__ = ["CompiledDecoder", "GenerateError", "GenerationResult", "compile_decoder", "generate", "seq_bindings"]
