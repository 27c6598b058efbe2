"""Check one rewrite numerically: the subgraph it replaced against the one it built.

Design note.  The greedy driver calls ``on_rewrite(pattern, op)`` before each
rewrite and runs the callback it returns right after.  Before, we snapshot a
neighbourhood of the root (its backward cone and a few users, with every
operand list and use list).  After, the ops of that neighbourhood that are now
dead (erased, or used only by dead ops) are exactly what the rewrite replaced:
the *before* subgraph.  Each of their values that had a live user is an
output; what that user reads now is the matching *after* output, computed by
the ops the rewrite created.  Both subgraphs run in the float64 interpreter on
the same inputs:

* values that come from constants (or constant-only cones) keep their real
  values — a causal buffer or a scale is never replaced by noise;
* every other input is random: floats N(0, 1), booleans mostly true and 0/1
  integers — with one slice forced to false/0 so that some attention rows are
  fully masked;
* symbolic dims are bound to small distinct sizes.

``ik.attention`` defines a fully masked row as zeros, where the unfused
spellings give NaN, a uniform average or the unmasked softmax; positions that
derive from such rows are excluded from the comparison (their count is
reported), and everything else must agree within the tolerance of the
subgraph's lowest float type.  A mismatch raises :class:`NumericsError` naming
the pattern, the root op and its location.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from irkit.check import compare, tolerance
from irkit.errors import NumericsError
from irkit.ir.core import Graph, Op, Value
from irkit.ir.ops import OPS, named_operands
from irkit.ir.types import DType, eval_dim
from irkit.rewrite.pattern import Pattern
from irkit.rewrite.walk import closed_cone, cone_leaves, producer_cone, producer_rings, user_rings

BACKWARD_DEPTH = 24
FORWARD_DEPTH = 6
MAX_OPS = 600
CONTEXT_DEPTH = 6
CONTEXT_MAX = 200
SIZES = (4, 3, 5, 6, 7, 2, 8, 9)
"""Sizes given to symbols, in order of their sorted names (distinct, so a transposed dim shows)."""


# ---------------------------------------------------------------------------
# Evaluating cones (shared with the fusion passes; the walks are irkit.rewrite.walk's)

_CONE_OPS_SKIP = frozenset({"ik.fused", "ik.attention"})


def _plain(op: Op) -> bool:
    return op.name not in _CONE_OPS_SKIP and not op.regions


def cone(v: Value, leaves: Iterable[Value] = (), limit: int = 96) -> list[Op] | None:
    """The ops computing ``v`` from ``leaves`` and source ops, producers before users.

    None when the cone reaches a function argument or another value not listed in
    ``leaves``, holds a region op, or has more than ``limit`` ops.
    """
    return closed_cone(v, list(leaves), enter=_plain, max_ops=limit)


def leaves_of(v: Value, limit: int = 96, allowed: frozenset[str] | None = None) -> list[Value] | None:
    """The non-constant values the cone of ``v`` starts from (arguments and ops outside ``allowed``).

    None when the cone holds a region op it would enter or more than ``limit`` ops.
    """
    enter = None if allowed is None else (lambda p: p.name in allowed or _is_source(p))
    return cone_leaves(v, enter=enter, refuse=lambda p: bool(p.regions), max_ops=limit)


def _is_source(op: Op) -> bool:
    d = OPS.get(op.name)
    return d is not None and d.has("source")


def symbols_of(ops: Sequence[Op], extra: Sequence[Value] = ()) -> set[str]:
    out: set[str] = set()
    for o in ops:
        for v in list(o.operands) + list(o.results):
            out |= v.type.symbols
    for v in extra:
        out |= v.type.symbols
    return out


def evaluate(v: Value, bindings: Mapping[str, int], given: Mapping[int, np.ndarray] | None = None,
             limit: int = 96) -> np.ndarray | None:
    """Evaluate ``v`` from constants (and ``given`` values keyed by id) in float64; None if it cannot."""
    from irkit.interp import Interpreter

    given = dict(given or {})
    ops = closed_cone(v, (lambda x: id(x) in given) if given else None, enter=_plain, max_ops=limit)
    if ops is None:
        return None
    env: dict[int, np.ndarray] = dict(given)
    it = Interpreter(float64=True)
    try:
        with np.errstate(all="ignore"):
            for o in ops:
                outs = it._op(o, [env[id(x)] for x in o.operands], bindings)
                for r, y in zip(o.results, outs):
                    env[id(r)] = y
    except Exception:  # noqa: BLE001 - e.g. an out-of-range slice at a sample size: not evaluable there
        return None
    return env.get(id(v))


@dataclass
class _Rec:
    op: Op
    operands: tuple[Value, ...]
    uses: list[list[tuple[Op, int]]]
    pos: int


class _Snapshot:
    """The neighbourhood of a rewrite's root, as it was before the rewrite."""

    def __init__(self, root: Op):
        self.root = root
        self.graph: Graph = root.parent  # type: ignore[assignment]
        order = self.graph.order()
        self.before_ids = set(order)
        # Breadth first, so each op is recorded at its shortest distance from the root.
        walk = producer_rings(self._forward(root), BACKWARD_DEPTH, enter=lambda p: p.parent is self.graph,
                              limit=MAX_OPS)
        recs = [_Rec(o, o.operands, [list(r.uses) for r in o.results], order[id(o)]) for o in walk.ops]
        self.recs = sorted(recs, key=lambda r: r.pos)

    def _forward(self, root: Op) -> list[Op]:
        rings = user_rings(root, FORWARD_DEPTH, lambda u: u.parent is self.graph and u.name != "func.return")
        return [o for _, o in rings]

    # -- after the rewrite ----------------------------------------------------
    def dead(self) -> dict[int, _Rec]:
        dead: dict[int, _Rec] = {}
        for rec in reversed(self.recs):
            o = rec.op
            if o.parent is None:
                dead[id(o)] = rec
                continue
            if all(all(id(u) in dead for u, _ in r.uses) for r in o.results) and o.results:
                d = OPS.get(o.name)
                if d is not None and d.has("pure"):
                    dead[id(o)] = rec
        return dead


def _symbols(values: list[Value]) -> list[str]:
    out: set[str] = set()
    for v in values:
        out |= v.type.symbols
    return sorted(out)


def _input_array(v: Value, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    dt = v.type.dtype
    if dt.is_float:
        return rng.standard_normal(shape)
    if dt.is_bool or dt.is_int:
        from irkit.interp import _index_bound

        hi = _index_bound(v)
        if hi is not None and not dt.is_bool:
            return rng.integers(0, max(hi, 1), size=shape).astype(dt.np)
        x = rng.random(shape) < 0.8
        ax = next((i for i, n in enumerate(shape[:-1]) if n >= 2), None)
        if ax is not None:
            idx: list[slice | int] = [slice(None)] * len(shape)
            idx[ax] = 0
            x[tuple(idx)] = False  # some rows fully masked
        return x if dt.is_bool else x.astype(dt.np)
    return rng.standard_normal(shape).astype(dt.np)


def _run(ops: list[tuple[Op, tuple[Value, ...]]], env: dict[int, np.ndarray], bindings: dict[str, int],
         taint: bool) -> dict[int, np.ndarray]:
    from irkit.interp import Interpreter

    it = Interpreter(float64=True)
    with np.errstate(all="ignore"):
        for op, operands in ops:
            ins = [env[id(v)] for v in operands]
            outs = it._op(op, ins, bindings)
            if taint and op.name == "ik.attention":
                outs = [_taint_masked_rows(op, ins, outs[0])]
            for r, y in zip(op.results, outs):
                env[id(r)] = y
    return env


def _taint_masked_rows(op: Op, ins: list[np.ndarray], out: np.ndarray) -> np.ndarray:
    """``out`` with NaN in every query row whose keys are all masked (mask and causal)."""
    n = named_operands(op)
    rest = list(ins[3:])
    mask = rest.pop(0) if n.get("mask") is not None else None
    b, h, sq = out.shape[:3]
    sk = ins[1].shape[2]
    keep = np.ones((b, h, sq, sk), dtype=bool)
    if mask is not None:
        keep &= np.broadcast_to(mask.astype(bool), keep.shape)
    if op.attrs.get("causal", False):
        keep &= np.tril(np.ones((sq, sk), dtype=bool))
    dead = ~keep.any(-1)
    if not dead.any():
        return out
    out = out.astype(np.float64, copy=True)
    out[dead] = np.nan
    return out


class RewriteChecker:
    """``on_rewrite`` hook for :func:`irkit.rewrite.apply_patterns`; see the module note."""

    def __init__(self, seed: int = 0, count: Callable[[str, int], None] | None = None, seeds: int = 2):
        self.seed = seed
        self.seeds = seeds
        self.count = count or (lambda k, n: None)
        self.checked = 0
        self.masked_positions = 0

    def __call__(self, pattern: Pattern, op: Op) -> Callable[[], None] | None:
        if op.parent is None:
            return None
        snap = _Snapshot(op)
        loc = op.loc.short()
        opname = op.name
        return lambda: self._check(pattern, opname, loc, snap)

    def _check(self, pattern: Pattern, opname: str, loc: str, snap: _Snapshot) -> None:
        dead = snap.dead()
        if not dead:
            return
        outputs: list[tuple[Value, Value]] = []
        for rec in dead.values():
            for r, uses in zip(rec.op.results, rec.uses):
                for u, i in uses:
                    if id(u) not in dead and u.parent is not None and i < u.num_operands:
                        outputs.append((r, u.operand(i)))
                        break
        if not outputs:
            return
        before_ops = [(rec.op, rec.operands) for rec in sorted(dead.values(), key=lambda r: r.pos)]
        produced = {id(r) for rec in dead.values() for r in rec.op.results}
        inputs: dict[int, Value] = {}
        for _, operands in before_ops:
            for v in operands:
                if id(v) not in produced:
                    inputs[id(v)] = v
        after_ops = self._after_ops(snap, [new for _, new in outputs], inputs)
        context, leaves = self._context(snap, inputs, dead)
        syms = _symbols([v for v in leaves.values()] + [r for o, _ in context for r in o.results]
                        + [r for o, _ in before_ops for r in o.results]
                        + [r for o, _ in after_ops for r in o.results])
        done = [self._compare_once(pattern, opname, loc, context, before_ops, after_ops, leaves, outputs, syms, s)
                for s in range(self.seeds)]
        if any(done):
            self.checked += 1
            self.count("rewrites-checked", 1)
        else:
            self.count("rewrites-not-checkable", 1)

    def _after_ops(self, snap: _Snapshot, news: list[Value], inputs: dict[int, Value]) -> list[tuple[Op, tuple]]:
        walk = producer_cone(news, enter=lambda p: id(p) not in snap.before_ids)
        assert walk is not None  # unbounded: the walk always ends
        for v in walk.leaf_values:
            inputs.setdefault(id(v), v)
        order = snap.graph.order()
        ops = sorted(walk.ops, key=lambda o: order.get(id(o), 0))
        return [(o, o.operands) for o in ops]

    def _context(self, snap: _Snapshot, inputs: dict[int, Value],
                 dead: dict[int, _Rec]) -> tuple[list[tuple[Op, tuple]], dict[int, Value]]:
        """Surviving ops that compute the inputs from a common frontier, and that frontier.

        Inputs of the two subgraphs are often related (a mask and the keep-mask it
        was built from); computing them from shared leaves keeps them consistent.
        Constants are always computed, never replaced by noise.
        """
        walk = producer_rings(
            list(inputs.values()), CONTEXT_DEPTH, free=_is_source, limit=CONTEXT_MAX,
            enter=lambda p: id(p) not in dead and id(p) in snap.before_ids and p.parent is not None and not p.regions)
        produced = {id(r) for o in walk.ops for r in o.results}
        leaves = {k: v for k, v in walk.leaves.items() if k not in produced}
        order = snap.graph.order()
        ctx = sorted(walk.ops, key=lambda o: order.get(id(o), 0))
        return [(o, o.operands) for o in ctx], leaves

    def _compare_once(self, pattern: Pattern, opname: str, loc: str, context: list, before_ops: list,
                      after_ops: list, leaves: dict[int, Value], outputs: list[tuple[Value, Value]],
                      syms: list[str], k: int) -> bool:
        """One comparison on seed ``k``; False when the neighbourhood cannot be evaluated."""
        bindings = {s: SIZES[i % len(SIZES)] for i, s in enumerate(syms)}
        needed = {id(v) for o, operands in before_ops + after_ops for v in operands}
        env: dict[int, np.ndarray] | None = None
        # Random leaves inside a model can leave an input's domain (rsqrt of a negative
        # "variance"); then draw positive floats instead, and skip if that fails too.
        for positive in (False, True):
            rng = np.random.default_rng(self.seed * 1000 + k)
            trial: dict[int, np.ndarray] = {}
            for vid, v in leaves.items():
                try:
                    shape = tuple(eval_dim(d, bindings) for d in v.type.shape)
                except KeyError:
                    return False
                x = _input_array(v, shape, rng)
                if positive and v.type.dtype.is_float:
                    x = np.abs(x) + 0.5
                trial[vid] = x
            try:
                trial = _run(context, trial, bindings, taint=False)
            except Exception:  # noqa: BLE001 - any kernel error means: not evaluable here
                return False  # the checker cannot evaluate this neighbourhood (e.g. sizes it does not admit)
            if all(np.all(np.isfinite(a)) for vid, a in trial.items() if vid in needed and a.dtype.kind == "f"):
                env = trial
                break
        if env is None:
            return False
        try:
            before = _run(before_ops, dict(env), bindings, taint=False)
        except Exception:  # noqa: BLE001 - the original subgraph does not run at these sizes
            return False
        try:
            after = _run(after_ops, dict(env), bindings, taint=False)
            tainted = _run(after_ops, dict(env), bindings, taint=True)
        except Exception as e:  # noqa: BLE001 - reported as the rewrite's fault
            raise NumericsError(f"--check-rewrites: pattern '{pattern.name}' at {opname} ({loc}) built IR the "
                                f"interpreter cannot run: {e}") from None
        low = _lowest_float([o for o, _ in before_ops])
        tol = tolerance(low, reorders=True)
        for old, new in outputs:
            want, got = before[id(old)], after[id(new)]
            dont_care = np.isnan(tainted[id(new)]) & ~np.isnan(got)
            if dont_care.any():
                self.masked_positions += int(dont_care.sum())
                want = np.where(dont_care, got, want)
            c = compare(got, want, tol, "result")
            if not c.ok:
                raise NumericsError(
                    f"--check-rewrites: pattern '{pattern.name}' at {opname} ({loc}) changed the numbers: "
                    f"max_abs={c.max_abs:.3g} max_rel={c.max_rel:.3g} at {list(c.worst_index)} "
                    f"(rtol={tol.rtol:g}, atol={tol.atol:g}; sizes {bindings or 'static'}, seed {k})"
                    + (f"; {c.note}" if c.note else ""))
        return True


def _lowest_float(ops: list[Op]) -> DType:
    order = [DType.bf16, DType.f16, DType.f32, DType.f64]
    low = DType.f64
    for o in ops:
        for v in list(o.results) + list(o.operands):
            dt = v.type.dtype
            if dt.is_float and order.index(dt) < order.index(low):
                low = dt
    return low


def rewrite_checker(ctx: Any) -> RewriteChecker:
    """A checker wired to a :class:`~irkit.passmanager.PassContext` (its seed and counters)."""
    return RewriteChecker(seed=getattr(ctx, "seed", 0), count=getattr(ctx, "count", None))


__all__ = ["RewriteChecker", "cone", "evaluate", "leaves_of", "rewrite_checker", "symbols_of"]
