"""State in the IR: outputs that overwrite arguments (buffer donation).

A function may declare that some of its outputs are the new values of some of
its arguments: ``Function.attrs["aliases"]`` is a tuple of
``(output_index, arg_index)`` int pairs, printed as the function attribute
``aliases = [[0, 3], [1, 4]]``.  After a call, the caller's buffer for the
argument holds the output's value; the callee may update it in place (XLA's
``input_output_alias``, JAX's ``donate_argnums``, a KV cache written by
``ik.dynamic_update_slice`` or ``ik.scatter_*``).  Passes leave the attribute
alone: they never reorder outputs or arguments.

``Function.attrs["cache_pairs"]`` has the same form but is only a pairing, not
an alias: output ``o`` is the next value to feed as argument ``a`` (an ONNX
``present.*`` output that is a concat of ``past_key_values.*`` has a different
shape, so it cannot overwrite the buffer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from irkit.ir.core import Diagnostic, Function, Value

ALIASES = "aliases"
CACHE_PAIRS = "cache_pairs"


def _pairs(raw: Any) -> dict[int, int] | None:
    """The pairs of a well-formed attribute as a dict, or None when malformed."""
    if raw is None:
        return {}
    if not isinstance(raw, tuple):
        return None
    out: dict[int, int] = {}
    for p in raw:
        if (not isinstance(p, tuple) or len(p) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in p)):
            return None
        if p[0] in out:
            return None
        out[p[0]] = p[1]
    return out


def get_aliases(f: Function) -> dict[int, int]:
    """``{output_index: arg_index}`` of ``f`` (empty when it declares none)."""
    p = _pairs(f.attrs.get(ALIASES))
    if p is None:
        raise ValueError(f"@{f.name}: malformed 'aliases' attribute {f.attrs.get(ALIASES)!r}")
    return p


def set_aliases(f: Function, aliases: Mapping[int, int]) -> None:
    """Declare ``{output_index: arg_index}`` (sorted by output); empty removes the attribute."""
    if aliases:
        f.attrs[ALIASES] = tuple((int(o), int(a)) for o, a in sorted(aliases.items()))
    else:
        f.attrs.pop(ALIASES, None)


def get_cache_pairs(f: Function) -> dict[int, int]:
    """``{output_index: arg_index}``: feed output ``o`` back as argument ``a`` on the next step."""
    p = _pairs(f.attrs.get(CACHE_PAIRS))
    if p is None:
        raise ValueError(f"@{f.name}: malformed 'cache_pairs' attribute {f.attrs.get(CACHE_PAIRS)!r}")
    return p


def set_cache_pairs(f: Function, pairs: Mapping[int, int]) -> None:
    if pairs:
        f.attrs[CACHE_PAIRS] = tuple((int(o), int(a)) for o, a in sorted(pairs.items()))
    else:
        f.attrs.pop(CACHE_PAIRS, None)


# Ops whose result is their operand 0 with some elements overwritten (an in-place update).
UPDATE_OPS = frozenset({"ik.dynamic_update_slice", "ik.scatter_elements", "ik.scatter_nd"})


def updated_base(v: Value) -> Value:
    """The value a chain of in-place updates (:data:`UPDATE_OPS`, through operand 0) starts from."""
    while v.producer is not None and v.producer.name in UPDATE_OPS:
        v = v.producer.operand(0)
    return v


def donation_aliases(f: Function, donated: Iterable[int]) -> dict[int, int]:
    """``{output: arg}`` for the donated arguments ``donated`` of ``f``.

    First, an output that is a chain of in-place updates of a donated argument
    (``dynamic_update_slice``/``scatter`` of it, same type) aliases that argument.
    Then the remaining donated arguments are matched the way ``jax.jit`` does: each
    remaining output, in order, takes the first remaining donated argument of exactly
    its type.  An output value that is returned twice is never aliased.
    """
    outs = f.outputs
    args = f.args
    left = [a for a in sorted(set(donated)) if 0 <= a < len(args)]
    counts: dict[int, int] = {}
    for v in outs:
        counts[id(v)] = counts.get(id(v), 0) + 1
    aliases: dict[int, int] = {}
    arg_ids = {id(a): i for i, a in enumerate(args)}
    for o, v in enumerate(outs):
        if counts[id(v)] > 1 or v.producer is None:
            continue
        a = arg_ids.get(id(updated_base(v)))
        if a is not None and a in left and args[a].type == v.type:
            aliases[o] = a
            left.remove(a)
    for o, v in enumerate(outs):
        if o in aliases or counts[id(v)] > 1:
            continue
        for a in left:
            if args[a].type == v.type:
                aliases[o] = a
                left.remove(a)
                break
    return aliases


def alias_diagnostics(f: Function) -> list[Diagnostic]:
    """Problems with ``f``'s ``aliases`` (and ``cache_pairs``), located at the function.

    Rules: the attribute is a list of distinct-output ``[output, arg]`` int pairs;
    indices are in range; an aliased output has exactly its argument's type; each
    argument is aliased at most once; the value returned as an aliased output is
    not also returned as another output (the two would share one buffer).
    """
    diags: list[Diagnostic] = []
    outs = f.outputs
    args = f.args
    names = f.arg_names()
    for key, same_type in ((ALIASES, True), (CACHE_PAIRS, False)):
        raw = f.attrs.get(key)
        if raw is None:
            continue
        pairs = _pairs(raw)
        if pairs is None:
            diags.append(Diagnostic(
                f"@{f.name}: '{key}' must be a list of [output, arg] integer pairs, each output at most once",
                loc=f.loc))
            continue
        seen_args: dict[int, int] = {}
        for o, a in pairs.items():
            if not 0 <= o < len(outs):
                diags.append(Diagnostic(f"@{f.name}: '{key}' pair [{o}, {a}]: output {o} is out of range "
                                        f"(the function has {len(outs)} outputs)", loc=f.loc))
                continue
            if not 0 <= a < len(args):
                diags.append(Diagnostic(f"@{f.name}: '{key}' pair [{o}, {a}]: argument {a} is out of range "
                                        f"(the function has {len(args)} arguments)", loc=f.loc))
                continue
            if a in seen_args:
                diags.append(Diagnostic(f"@{f.name}: '{key}': argument {a} ('{names[a]}') is paired with "
                                        f"outputs {seen_args[a]} and {o}; each argument at most once",
                                        loc=f.loc))
                continue
            seen_args[a] = o
            if not same_type:
                continue
            ot, at = outs[o].type, args[a].type
            if ot != at:
                diags.append(Diagnostic(f"@{f.name}: '{key}' pair [{o}, {a}]: output {o} has type {ot} but "
                                        f"argument {a} ('{names[a]}') has type {at}; an alias needs the same "
                                        "type", loc=f.loc))
                continue
            v = outs[o]
            for k, w in enumerate(outs):
                if k != o and w is v:
                    diags.append(Diagnostic(f"@{f.name}: '{key}' pair [{o}, {a}]: the value returned as "
                                            f"output {o} is also output {k}; an aliased output must be its own "
                                            "buffer", loc=f.loc))
                    break
    return diags


__all__ = [
    "ALIASES",
    "CACHE_PAIRS",
    "UPDATE_OPS",
    "alias_diagnostics",
    "donation_aliases",
    "get_aliases",
    "get_cache_pairs",
    "set_aliases",
    "set_cache_pairs",
    "updated_base",
]
