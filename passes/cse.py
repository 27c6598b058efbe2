"""``cse``: common subexpression elimination."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from irkit.ir.core import Graph, Module
from irkit.ir.ops import OPS
from irkit.passmanager import Pass, PassContext, register_pass


def _cse_graph(g: Graph, ctx: PassContext) -> int:
    seen: dict[tuple, list] = {}
    removed = 0
    for op in list(g):
        for r in op.regions:
            removed += _cse_graph(r, ctx)
        d = OPS.get(op.name)
        if d is None or not d.has("pure") or op.regions or not op.results:
            continue
        key = (op.name, tuple(id(v) for v in op.operands), tuple(op.attrs.items()),
               tuple(op.result_types))
        prev = seen.get(key)
        if prev is None:
            seen[key] = op.results
            continue
        for old, new in zip(op.results, prev):
            old.replace_all_uses_with(new)
        g.erase(op)
        removed += 1
    return removed


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
        n = sum(_cse_graph(f.body, ctx) for f in module.functions)
        if n:
            ctx.count("ops-eliminated", n)
        return n > 0
