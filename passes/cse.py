"""``cse``: common subexpression elimination."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from irkit.ir.aliases import get_aliases
from irkit.ir.core import Function, Graph, Module, Value, gc_paused
from irkit.ir.ops import OPS
from irkit.passmanager import Pass, PassContext, register_pass


def _cse_graph(g: Graph, ctx: PassContext, pure: frozenset[str], keep: frozenset[int] = frozenset()) -> int:
    # Key: name, operand identities and attributes.  Result types are compared on a
    # key hit instead of hashed (for valid IR they follow from the rest), so each
    # key holds the distinct result-type lists seen with it.  An op whose result is
    # in ``keep`` (ids of values returned as aliased outputs) is never merged away:
    # two aliased outputs must stay two values, each written back to its own buffer.
    seen: dict[tuple, list[list[Value]]] = {}
    removed = 0
    for op in list(g):
        if op.regions:
            for r in op.regions:
                removed += _cse_graph(r, ctx, pure)
            continue
        results = op.results
        if op.name not in pure or not results:
            continue
        attrs = op.attrs
        key = (op.name, *map(id, op._operands), tuple(attrs.items()) if attrs else ())
        prevs = seen.get(key)
        if prevs is None:
            seen[key] = [results]
            continue
        for prev in prevs:
            if len(prev) == len(results) and all(a.type is b.type or a.type == b.type
                                                  for a, b in zip(prev, results)):
                break
        else:
            prevs.append(results)
            continue
        if keep and any(id(r) in keep for r in results):
            continue
        for old, new in zip(results, prev):
            old.replace_all_uses_with(new)
        g.erase(op)
        removed += 1
    return removed


def _aliased_outputs(f: Function) -> frozenset[int]:
    """Ids of the values ``f`` returns at aliased output positions (irkit/ir/aliases.py)."""
    al = get_aliases(f)
    if not al:
        return frozenset()
    outs = f.outputs
    return frozenset(id(outs[i]) for i in al if i < len(outs))


@register_pass("cse")
@dataclass(frozen=True)
class CSE(Pass):
    """Merge identical pure ops (same name, operands, attributes and types).

    before: %1 = "ik.exp"(%0) ...
            %2 = "ik.exp"(%0) ...
            %3 = "ik.add"(%1, %2) ...
    after:  %1 = "ik.exp"(%0) ...
            %3 = "ik.add"(%1, %1) ...
    """

    exact: ClassVar[bool] = True
    """Never changes arithmetic: results are bitwise identical."""

    def run(self, module: Module, ctx: PassContext) -> bool:
        pure = frozenset(n for n, d in OPS.items() if "pure" in d.traits)
        with gc_paused():
            n = sum(_cse_graph(f.body, ctx, pure, _aliased_outputs(f)) for f in module.functions)
        if n:
            ctx.count("ops-eliminated", n)
        return n > 0
