"""Graph walks: producer cones, their leaves, users, escapes.

Design note.  A *producer cone* is the set of ops that compute some values:
their producers, those ops' operands' producers, and so on.  Every fusion, the
rewrite checker, the attention-mask analysis and the interpreter's oracle (the
cones of float-to-integer casts) need one, each bounded its own way, so one
walk, :func:`producer_cone`, takes the bounds as arguments:

* ``stop``: values the walk ends at (the variable of an expression, values
  given by the caller); always leaves;
* ``skip``: values that are neither walked nor leaves (scalar constants folded
  into an expression);
* ``enter(op)``: whether to walk into a producer; the value of a producer it
  refuses is a leaf (default: every producer is entered);
* ``through(v)``: values the walk continues at besides ``v``'s producer, each
  time ``v`` is walked (a region argument's operand outside, a region op's
  result's yielded value inside); a value without a producer is still a leaf;
* ``limit``: a soft bound; once ``limit`` ops are taken, no further producer is
  entered and the values met become leaves (``Cone.truncated`` says so);
* ``max_ops``: a hard bound; more ops than that and the walk gives up (None);
* ``refuse(op)``: an op the walk may not take (one with regions, say); taking
  it gives up (None);
* ``closed``: every leaf must be a ``stop`` value; any other leaf (a function
  argument, a refused producer) gives up (None).

The walk is depth first, the last start and the last operand of an op walked
first; ``Cone.ops`` lists the ops in the order taken (a start op before its producers)
and ``Cone.leaves`` the leaves, each once, in the order met.
``Cone.topological()`` orders the ops producers before users (to evaluate
them).  The result is a pure function of the graph and the arguments: passes
built on it are deterministic.

:func:`producer_rings` walks the same cone breadth first, so that each op is
taken at its shortest distance from the starts and a ``depth`` bounds that
distance (the rewrite checker's neighbourhoods); ``free(op)`` names ops taken
whatever the bounds (constants, which are computed, never made leaves).
The forward counterpart, :func:`user_rings`, walks users breadth first up to a
distance.  :func:`escaping_user` is the check every fusion makes before it
replaces a group of ops by one: no value computed inside may be read outside,
except the group's outputs.

The walks know only :mod:`irkit.ir.core`, so every floor may use them (the
interpreter included); :mod:`irkit.rewrite.walk` re-exports them for the rewrites.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from irkit.ir.core import Op, Value

Start = Op | Value | Iterable[Op | Value]
"""Where a walk starts: an op (taken, then its operands walked), a value, or several of them."""

StopSpec = Value | Collection[Value] | Callable[[Value], bool] | None


@dataclass
class Cone:
    """The ops a :func:`producer_cone` walk took, and the values it stopped at."""

    ops: list[Op] = field(default_factory=list)
    """The ops in the order taken (by :func:`producer_cone`: depth first, the last start and the last
    operand first; by :func:`producer_rings`: breadth first, the first start and operand first)."""
    leaves: dict[int, Value] = field(default_factory=dict)
    """The values the walk stopped at, by ``id``, in the order met."""
    truncated: bool = False
    """True when ``limit`` (or ``depth``) left a producer out (its value is a leaf)."""
    starts: list[Op | Value] = field(default_factory=list)
    """Where the walk started, as given (``topological`` starts there)."""

    @property
    def leaf_values(self) -> list[Value]:
        return list(self.leaves.values())

    def topological(self) -> list[Op]:
        """The ops, producers before users: a post-order from the start values, first operand first.

        A producer is reached through a value that is not a leaf, so a ``stop``
        value whose producer is also in the cone does not order that producer.
        """
        inside = {id(o) for o in self.ops}
        leaves = self.leaves
        order: list[Op] = []
        placed: set[int] = set()  # on the stack or emitted
        roots: list[Op] = []
        for s in self.starts:
            p = s if isinstance(s, Op) else (None if id(s) in leaves else s.producer)
            if p is not None and id(p) in inside:
                roots.append(p)
        for root in roots + self.ops:
            if id(root) in placed:
                continue
            placed.add(id(root))
            stack: list[tuple[Op, Iterator[Value]]] = [(root, iter(root.operands))]
            while stack:
                op, rest = stack[-1]
                for x in rest:
                    p = x.producer
                    if p is not None and id(p) in inside and id(p) not in placed and id(x) not in leaves:
                        placed.add(id(p))
                        stack.append((p, iter(p.operands)))
                        break
                else:
                    stack.pop()
                    order.append(op)
        return order


def producer_cone(start: Start, *, stop: StopSpec = None,
                  enter: Callable[[Op], bool] | None = None,
                  skip: Callable[[Value], bool] | None = None,
                  through: Callable[[Value], Iterable[Value]] | None = None,
                  limit: int | None = None, max_ops: int | None = None,
                  refuse: Callable[[Op], bool] | None = None,
                  closed: bool = False) -> Cone | None:
    """The producer cone of ``start``, bounded as the module note says; None when the walk gives up.

    ``start`` is an op (taken first, then its operands walked), a value (walked
    like an operand: it may be a leaf itself) or several.  ``stop`` is one value,
    a collection of values or a predicate.
    """
    # The matchers call this in their inner loops: the per-value checks are inlined.
    stop_value: Value | None = None
    is_stop: Callable[[Value], bool] | None = None
    if isinstance(stop, Value):
        stop_value = stop
    elif callable(stop):
        is_stop = stop
    elif stop is not None:
        stop_ids = {id(v) for v in stop}
        if stop_ids:
            is_stop = lambda v: id(v) in stop_ids  # noqa: E731
    starts: list[Op | Value] = [start] if isinstance(start, (Op, Value)) else list(start)
    leaves: dict[int, Value] = {}
    taken: dict[int, Op] = {}
    truncated = False
    stack: list[Op | Value] = list(starts)  # values to walk; start ops to take as they are
    # For ``limit``: how many ops were taken when each value was met.  Values are pushed in groups
    # (an op's operands) and popped last first, so one mark per group says it: (first index, count).
    marks: list[tuple[int, int]] = [(0, 0)]
    while stack:
        v = stack.pop()
        if isinstance(v, Op):
            p = v
        else:
            if v is stop_value or (is_stop is not None and is_stop(v)):
                leaves[id(v)] = v
                continue
            if skip is not None and skip(v):
                continue
            h = len(stack)  # the index v had (for ``limit``)
            if through is not None:
                stack.extend(through(v))
            p = v.producer  # type: ignore[assignment]
            if p is None or (enter is not None and not enter(p)):
                if closed:
                    return None
                leaves[id(v)] = v
                continue
            if limit is not None and len(taken) >= limit:  # (before that, every count is below limit)
                while marks[-1][0] > h:
                    marks.pop()
                if marks[-1][1] >= limit:
                    if closed:
                        return None
                    truncated = True
                    leaves[id(v)] = v
                    continue
        if id(p) in taken:
            continue
        if refuse is not None and refuse(p):
            return None
        taken[id(p)] = p
        if max_ops is not None and len(taken) > max_ops:
            return None
        if limit is not None:
            marks.append((len(stack), len(taken)))
        stack.extend(p.operands)
    return Cone(list(taken.values()), leaves, truncated, starts)


def cone_leaves(start: Start, **bounds: Any) -> list[Value] | None:
    """The leaves of :func:`producer_cone` (same arguments), in the order met; None when it gives up."""
    cone = producer_cone(start, **bounds)
    return None if cone is None else cone.leaf_values


def closed_cone(v: Value, stop: StopSpec = None, *, enter: Callable[[Op], bool] | None = None,
                max_ops: int | None = None) -> list[Op] | None:
    """The ops computing ``v`` from ``stop`` values and source ops only, producers before users.

    None when the cone reaches any other value (a function argument, a producer
    ``enter`` refuses) or holds more than ``max_ops`` ops.
    """
    cone = producer_cone(v, stop=stop, enter=enter, max_ops=max_ops, closed=True)
    return None if cone is None else cone.topological()


def producer_rings(start: Start, depth: int | None = None, *,
                   enter: Callable[[Op], bool] | None = None,
                   free: Callable[[Op], bool] | None = None,
                   limit: int | None = None) -> Cone:
    """The producer cone of ``start`` walked breadth first, each op at its shortest distance.

    A start op is at distance 0; the producer of a value an op at distance ``d``
    reads (or of a start value) is at ``d + 1``.  Producers past ``depth``, and
    any once ``limit`` ops are taken, are left out (their values are leaves,
    ``Cone.truncated``) unless ``free`` accepts them; start ops count towards
    ``limit`` too.  A value whose producer ``enter`` refuses, or that has none,
    is a leaf.  The walk always ends; ``Cone.ops`` is in the order taken.
    """
    starts: list[Op | Value] = [start] if isinstance(start, (Op, Value)) else list(start)
    taken: dict[int, Op] = {}
    leaves: dict[int, Value] = {}
    truncated = False
    queue: deque[tuple[Op | Value, int]] = deque((s, 0) for s in starts)  # a value: its reader's distance
    while queue:
        v, d = queue.popleft()
        if isinstance(v, Op):
            p = v
            if id(p) in taken:
                continue
            if limit is not None and len(taken) >= limit and (free is None or not free(p)):
                truncated = True
                continue
        else:
            p = v.producer  # type: ignore[assignment]
            if p is None or (enter is not None and not enter(p)):
                leaves[id(v)] = v
                continue
            if id(p) in taken:
                continue
            d += 1
            if (((depth is not None and d > depth) or (limit is not None and len(taken) >= limit))
                    and (free is None or not free(p))):
                truncated = True
                leaves[id(v)] = v
                continue
        taken[id(p)] = p
        queue.extend((x, d) for x in p.operands)
    return Cone(list(taken.values()), leaves, truncated, starts)


def user_rings(root: Op, depth: int, accept: Callable[[Op], bool] | None = None) -> list[tuple[int, Op]]:
    """Ops reachable from ``root`` through users, breadth first, with their distance (``root`` at 0).

    Each op once, at its shortest distance, in the order found; users ``accept``
    refuses are neither listed nor walked through.
    """
    out: list[tuple[int, Op]] = [(0, root)]
    found = {id(root)}
    frontier = [root]
    for d in range(1, depth + 1):
        nxt = []
        for o in frontier:
            for r in o.results:
                for u in r.users:
                    if id(u) not in found and (accept is None or accept(u)):
                        found.add(id(u))
                        out.append((d, u))
                        nxt.append(u)
        frontier = nxt
    return out


def escaping_user(ops: Sequence[Op], outputs: Iterable[Op] = ()) -> tuple[Op, Op] | None:
    """The first op of ``ops`` (not in ``outputs``) with a result read outside ``ops``, and that reader.

    None when the group can be replaced by ops computing only the outputs' values.
    """
    inside = {id(o) for o in ops}
    exempt = {id(o) for o in outputs}
    for o in ops:
        if id(o) in exempt:
            continue
        for r in o.results:
            for u in r.users:
                if id(u) not in inside:
                    return o, u
    return None


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


__all__ = [
    "Cone",
    "closed_cone",
    "cone_leaves",
    "escaping_user",
    "only_user",
    "other_operand",
    "producer_chain",
    "producer_cone",
    "producer_rings",
    "user_rings",
]
