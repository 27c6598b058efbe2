"""``dce``: dead code elimination."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from irkit.ir.core import Graph, Module
from irkit.passmanager import Pass, PassContext, register_pass
from irkit.rewrite.driver import erasable_op_names


def _dce_graph(g: Graph, erasable: frozenset[str]) -> int:
    removed = 0
    op = g._last
    while op is not None:
        prev = op._prev
        for r in op.regions:
            removed += _dce_graph(r, erasable)
        if op.name in erasable and not op.is_used:
            g.erase(op)
            removed += 1
        op = prev
    return removed


@register_pass("dce")
@dataclass(frozen=True)
class DCE(Pass):
    """Erase pure ops whose results are never used.

    before: %1 = "ik.exp"(%0) ...   (no users)
            "func.return"(%0) ...
    after:  "func.return"(%0) ...
    """

    exact: ClassVar[bool] = True
    """Never changes arithmetic: results are bitwise identical."""

    def run(self, module: Module, ctx: PassContext) -> bool:
        erasable = erasable_op_names()
        n = sum(_dce_graph(f.body, erasable) for f in module.functions)
        if n:
            ctx.count("ops-erased", n)
        return n > 0
