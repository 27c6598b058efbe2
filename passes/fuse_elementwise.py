"""``fuse-elementwise``: elementwise chains and matmul epilogues → ``ik.fused`` region ops.

Design note.  Two patterns, both producer-into-consumer:

* **matmul epilogue** (``kind = "matmul_epilogue"``): a matmul whose only user
  chain is an ``add`` of a per-column bias (a tensor whose shape is the output's
  last dim, with leading 1s) and/or an activation (``gelu``, ``silu``, ``relu``,
  ``tanh``, ``sigmoid``), with reshapes (views) allowed between them.  The region
  holds the matmul and its epilogue, so a target can apply the bias and the
  activation to the accumulator before it leaves the registers.
* **elementwise group** (``kind = "elementwise"``): a tree of elementwise and
  broadcast ops, each feeding only the next, rooted at an op whose result is not
  consumed by exactly one more such op.  A value with several users ends a
  group (fusing across it would compute it twice) — except splat constants,
  which are cheap to duplicate: they are cloned into the region.

Regions are isolated from above: every other value the ops read becomes a
region argument.  Ops keep their locations inside the region; the fused op
carries all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from irkit.ir.core import Graph, Location, Op, Value, clone_op
from irkit.ir.ops import OPS
from irkit.passmanager import Pass, PassContext, register_pass
from irkit.rewrite import Fail, Match, NearMiss, Pattern, Rewriter, splat_constant
from irkit.rewrite.fusion import only_user, run_fusion

ACTIVATIONS = frozenset({"ik.gelu", "ik.silu", "ik.relu", "ik.tanh", "ik.sigmoid"})


def _is_elementwise(op: Op) -> bool:
    d = OPS.get(op.name)
    return d is not None and d.has("elementwise") and not d.has("source") and not op.regions


def _is_splat_scalar(v: Value) -> bool:
    p = v.producer
    return p is not None and p.name == "ik.constant" and splat_constant(v) is not None and \
        all(d == 1 for d in v.type.shape)


def _in_region(op: Op) -> bool:
    g = op.parent
    return g is not None and g.parent_op is not None


def build_region(rw: Rewriter, ops: list[Op], out: Value, kind: str) -> Value:
    """Move ``ops`` (in program order, ending in the producer of ``out``) into an ``ik.fused`` region."""
    inside = {id(o) for o in ops}
    inputs: list[Value] = []
    cloned_consts: list[Op] = []
    for o in ops:
        for v in o.operands:
            p = v.producer
            if p is not None and id(p) in inside:
                continue
            if _is_splat_scalar(v):
                if all(c.results[0] is not v for c in cloned_consts):
                    cloned_consts.append(p)  # type: ignore[arg-type]
                continue
            if v not in inputs:
                inputs.append(v)
    body = Graph([v.type for v in inputs])
    mapping: dict[int, Value] = {id(v): a for v, a in zip(inputs, body.args)}
    for c in cloned_consts:
        body.append(clone_op(c, mapping))
    for o in ops:
        body.append(clone_op(o, mapping))
    body.append(Op("ik.yield", [mapping[id(out)]], []))
    loc = Location.fuse([o.loc for o in ops])
    fused = rw.create(ops[-1], "ik.fused", inputs, {"kind": kind}, loc=loc,
                      result_types=[out.type], regions=[body])
    return fused.results[0]


class MatmulEpiloguePattern(Pattern):
    """matmul → (add bias) → (activation), with views between, into one region."""

    name = "fuse-matmul-epilogue"
    roots = ("ik.matmul",)
    benefit = 5

    def match(self, op: Op) -> Match | Fail:
        if _in_region(op) or op.attrs.get("tile") is not None:
            return Fail("the matmul is inside a fused region or already tiled", op)
        chain: list[Op] = [op]
        cur = op.results[0]
        n_cols = op.results[0].type.shape[-1]
        saw_bias = saw_act = False
        while True:
            u = only_user(cur)
            if u is None:
                break
            if u.name == "ik.reshape":
                chain.append(u)
                cur = u.results[0]
                continue
            if u.name == "ik.add" and not saw_bias and not saw_act:
                other = u.operand(1) if u.operand(0) is cur else u.operand(0)
                shp = other.type.shape
                if other is cur or not shp or shp[-1] != n_cols or any(d != 1 for d in shp[:-1]) \
                        or u.results[0].type.shape != cur.type.shape or other.type.dtype != cur.type.dtype:
                    break
                chain.append(u)
                cur = u.results[0]
                saw_bias = True
                continue
            if u.name in ACTIVATIONS and not saw_act:
                chain.append(u)
                cur = u.results[0]
                saw_act = True
                continue
            break
        while chain and chain[-1].name == "ik.reshape":
            chain.pop()
        if not (saw_bias or saw_act):
            return Fail("no bias add or activation follows the matmul", op)
        return Match(ops=chain)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        ops: list[Op] = m["ops"]
        out = ops[-1].results[0]
        new = build_region(rw, ops, out, "matmul_epilogue")
        rw.replace_op(ops[-1], [new])


class ElementwiseGroupPattern(Pattern):
    """A single-use tree of elementwise ops, rooted where the chain ends, into one region."""

    name = "fuse-elementwise-group"
    roots = ()
    benefit = 1

    def match(self, op: Op) -> Match | Fail:
        if not _is_elementwise(op) or _in_region(op) or op.name == "ik.constant":
            return Fail("not an elementwise op outside a fused region", op)
        u = only_user(op.results[0])
        if u is not None and _is_elementwise(u):
            # The consumer takes this op into its group.
            return Fail(f"not the end of the chain: its only user '{u.name}' is elementwise", op)
        group: list[Op] = []
        seen: set[int] = set()

        def take(o: Op) -> None:
            if id(o) in seen:
                return
            seen.add(id(o))
            for v in o.operands:
                p = v.producer
                if p is None or p.name == "ik.constant" or not _is_elementwise(p):
                    continue
                if len(v.uses) != 1 or len(p.results) != 1:
                    continue
                take(p)
            group.append(o)

        take(op)
        if len(group) < 2:
            return Fail("no single-use elementwise producer to group with", op)
        return Match(ops=group)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        order = op.parent.order()  # type: ignore[union-attr]
        ops = sorted(m["ops"], key=lambda o: order[id(o)])
        new = build_region(rw, ops, op.results[0], "elementwise")
        rw.replace_op(op, [new])


@register_pass("fuse-elementwise")
@dataclass(frozen=True)
class FuseElementwise(Pass):
    """Group elementwise chains, and bias/activation epilogues with their matmul, into ``ik.fused`` regions.

    before: %1 = "ik.matmul"(%x, %w) ...  %2 = "ik.add"(%1, %b) ...  %3 = "ik.gelu"(%2) ...
    after:  %3 = "ik.fused"(%x, %w, %b) ({ matmul, add, gelu; "ik.yield" }) {kind = "matmul_epilogue"} ...
    """

    epilogues: bool = True
    """Fuse bias and activation epilogues into the matmul that feeds them."""

    def run(self, module, ctx: PassContext) -> bool:
        pats: list[Pattern] = [ElementwiseGroupPattern()]
        if self.epilogues:
            pats.insert(0, MatmulEpiloguePattern())
        notes: list[NearMiss] = []
        return run_fusion(module, ctx, pats, "fused-regions", notes)
