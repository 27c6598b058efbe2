"""What the fusion passes share: the driver loop, explain notes and graph walks.

Every fusion pass (``fuse-attention``, ``fuse-norm``, ``fuse-activation``,
``fuse-elementwise``) runs its patterns through :func:`run_fusion`, which counts
the fusions per function, checks each rewrite numerically under
``--check-rewrites`` and forwards the :class:`FusionNote` records a pattern
wrote about what it decided.  The walks below are the ones their matchers
share: the single user of a value, the other operand of a binary op, and the
ops of an expression between its root and its variable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from irkit.ir.core import Op, Value
from irkit.rewrite.driver import apply_patterns
from irkit.rewrite.pattern import NearMiss, Pattern, RewriteReport

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
# Graph walks


def only_user(v: Value) -> Op | None:
    """The op using ``v``, when exactly one use exists (else None)."""
    return v.users[0] if len(v.uses) == 1 else None


def other_operand(op: Op | None, v: Value) -> Value | None:
    """The operand of the binary ``op`` that is not ``v`` (None unless exactly one is ``v``)."""
    if op is None or op.num_operands != 2:
        return None
    a, b = op.operands
    if a is v and b is not v:
        return b
    if b is v and a is not v:
        return a
    return None


def producer_chain(v: Value, depth: int = 6) -> list[Op]:
    """The producers of ``v``, its producer's first operand and so on, up to ``depth`` ops."""
    out = []
    while v.producer is not None and depth > 0:
        out.append(v.producer)
        if not v.producer.operands:
            break
        v = v.producer.operand(0)
        depth -= 1
    return out


def expression_ops(root: Op, stop: Value | None = None, *,
                   enter: Callable[[Op], bool] | None = None,
                   skip: Callable[[Value], bool] | None = None,
                   limit: int = 64) -> tuple[list[Op], dict[int, Value]]:
    """The ops of the expression computing ``root`` (``root`` first), and its leaves by id.

    The walk goes from ``root`` up through operands' producers.  A value is a leaf
    when it is ``stop``, a function argument, produced by an op ``enter`` refuses
    (default: every op is entered), or met once ``limit`` ops are taken; values
    ``skip`` accepts (constants folded into the expression) are neither walked
    nor leaves.
    """
    leaves: dict[int, Value] = {}
    seen: dict[int, Op] = {}
    stack = [root]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen[id(o)] = o
        for v in o.operands:
            if v is stop:
                leaves[id(v)] = v
                continue
            if skip is not None and skip(v):
                continue
            p = v.producer
            if p is not None and (enter is None or enter(p)) and len(seen) < limit:
                stack.append(p)
            else:
                leaves[id(v)] = v
    return list(seen.values()), leaves


__all__ = [
    "FusionNote",
    "expression_ops",
    "loc_str",
    "only_user",
    "other_operand",
    "producer_chain",
    "run_fusion",
]
