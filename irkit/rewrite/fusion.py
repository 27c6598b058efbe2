"""What the fusion passes share: the driver loop, explain notes and graph walks.

Every fusion pass (``fuse-attention``, ``fuse-norm``, ``fuse-activation``,
``fuse-elementwise``) runs its patterns through :func:`run_fusion`, which counts
the fusions per function, checks each rewrite numerically under
``--check-rewrites`` and forwards the :class:`FusionNote` records a pattern
wrote about what it decided.  The graph walks their matchers use (producer
cones, the single user of a value, the other operand of a binary op, escape
checks) live in :mod:`irkit.rewrite.walk`; :func:`expression_ops` is the
producer-cone walk in the shape the expression matchers want.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from irkit.ir.core import Op, Value
from irkit.rewrite.driver import apply_patterns
from irkit.rewrite.pattern import NearMiss, Pattern, RewriteReport
from irkit.rewrite.walk import only_user, other_operand, producer_chain, producer_cone

if TYPE_CHECKING:
    from irkit.passmanager import PassContext


@dataclass
class FusionNote(NearMiss):
    """An explain record for a fusion that happened, with what it had to decide."""

    def describe(self) -> str:
        return f"{self.pattern}: '{self.op.name}' at {self.op.loc.short()} fused: {self.reason}"


def loc_str(op: Op) -> str:
    """``'ik.mul' at model.py:12``: an op and its location, for messages."""
    return f"'{op.name}' at {op.loc.short()}"


def run_fusion(module: Any, ctx: PassContext, patterns: Sequence[Pattern], counter: str,
               notes: list[NearMiss]) -> bool:
    """Apply fusion ``patterns``; count applied rewrites under ``counter``; forward explain records.

    In a module of several functions each function's count is also kept, as ``counter@name``.
    """
    from irkit.rewrite.numeric_check import rewrite_checker

    changed = False
    pats = list(patterns)
    for f in module.functions:
        rep = RewriteReport()
        hook = rewrite_checker(ctx) if ctx.check_rewrites else None
        changed |= apply_patterns(f, pats, report=rep, explain=ctx.explain, on_rewrite=hook)
        ctx.absorb(rep)
        n = sum(rep.stats[p.name].applied for p in pats if p.name in rep.stats)
        ctx.count(counter, n)
        if len(module.functions) > 1:
            ctx.count(f"{counter}@{f.name}", n)
    if ctx.explain:
        ctx.near_misses.extend(notes)
    return changed


# ---------------------------------------------------------------------------
# Graph walks (see irkit.rewrite.walk)


def expression_ops(root: Op, stop: Value | None = None, *,
                   enter: Callable[[Op], bool] | None = None,
                   skip: Callable[[Value], bool] | None = None,
                   limit: int = 64) -> tuple[list[Op], dict[int, Value]]:
    """The ops of the expression computing ``root`` (``root`` first), and its leaves by id.

    This is :func:`irkit.rewrite.walk.producer_cone` from ``root``: the walk
    goes up through operands' producers.  A value is a leaf when it is ``stop``,
    a function argument, produced by an op ``enter`` refuses (default: every op
    is entered), or met once ``limit`` ops are taken; values ``skip`` accepts
    (constants folded into the expression) are neither walked nor leaves.
    """
    cone = producer_cone(root, stop=stop, enter=enter, skip=skip, limit=limit)
    assert cone is not None  # only max_ops, refuse or closed make a walk give up
    return cone.ops, cone.leaves


__all__ = [
    "FusionNote",
    "expression_ops",
    "loc_str",
    "only_user",
    "other_operand",
    "producer_chain",
    "run_fusion",
]
