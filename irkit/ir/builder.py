"""Building IR from Python.

``Builder`` inserts ops at a point in a graph and infers their result types
from the op registry, so code that builds IR reads like the math::

    b = Builder.at_end(fn.body)
    h = b.matmul(x, w)
    y = b.gelu(b.add(h, bias), approximate="tanh")

Any registered op ``ik.NAME`` is reachable as ``b.NAME(*operands, **attrs)``;
``None`` in an optional operand slot leaves it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from irkit.ir.core import Dense, Function, Graph, Location, Module, Op, Value
from irkit.ir.ops import OPS, SEGMENTS, OpError, get_op, infer_types
from irkit.ir.types import DType, TensorType


class BuildError(ValueError):
    """An op could not be built: wrong operands or attributes."""


class Builder:
    """Creates ops at an insertion point (end of a graph, or before an op)."""

    def __init__(self, graph: Graph, before: Op | None = None, loc: Location | None = None):
        self.graph = graph
        self.before = before
        self.loc = loc or Location.unknown()

    @staticmethod
    def at_end(graph: Graph, loc: Location | None = None) -> Builder:
        return Builder(graph, None, loc)

    @staticmethod
    def before_op(op: Op, loc: Location | None = None) -> Builder:
        assert op.parent is not None
        return Builder(op.parent, op, loc if loc is not None else op.loc)

    def insert(self, op: Op) -> Op:
        if self.before is None:
            self.graph.append(op)
        else:
            self.graph.insert_before(self.before, op)
        return op

    def create(self, name: str, operands: Sequence[Value | None], attrs: dict[str, Any] | None = None,
               loc: Location | None = None, result_types: Sequence[TensorType] | None = None,
               regions: Sequence[Graph] = ()) -> Op:
        """Create and insert op ``name``; result types are inferred unless given."""
        d = get_op(name)
        attrs = dict(attrs or {})
        present = [v for v in operands if v is not None]
        if d.optional_operands and not d.is_variadic:
            if len(operands) < len(d.operands):
                operands = list(operands) + [None] * (len(d.operands) - len(operands))
            seg = tuple(0 if v is None else 1 for v in operands)
            # Absent optionals at the end need no marker; a gap in the middle does.
            trimmed = list(seg)
            while trimmed and trimmed[-1] == 0 and d.operands[len(trimmed) - 1].endswith("?"):
                trimmed.pop()
            if 0 in trimmed:
                attrs[SEGMENTS] = seg
            else:
                attrs.pop(SEGMENTS, None)
        if result_types is None:
            try:
                result_types = infer_types(name, [v.type for v in present], attrs)
            except OpError as e:
                where = (loc or self.loc).short()
                raise BuildError(f"'{name}' at {where}: {e}") from None
        op = Op(name, present, result_types, attrs, regions, loc or self.loc)
        return self.insert(op)

    def value(self, name: str, *operands: Value | None, **attrs: Any) -> Value:
        op = self.create(name, list(operands), attrs)
        return op.results[0] if len(op.results) == 1 else op.results  # type: ignore[return-value]

    def __getattr__(self, short: str) -> Any:
        name = f"ik.{short}"
        if name not in OPS:
            raise AttributeError(f"no op '{name}'")

        def build(*operands: Value | None, loc: Location | None = None, **attrs: Any) -> Any:
            op = self.create(name, list(operands), attrs, loc)
            return op.results[0] if len(op.results) == 1 else list(op.results)

        return build

    # -- constants -----------------------------------------------------------
    def constant(self, value: np.ndarray | Dense, dtype: DType | None = None, name: str | None = None,
                 loc: Location | None = None) -> Value:
        d = value if isinstance(value, Dense) else Dense(np.asarray(value), dtype, resource=name)
        if name and isinstance(value, Dense) and value.resource != name:
            d = value.with_resource(name)
        return self.create("ik.constant", [], {"value": d}, loc).results[0]

    def scalar(self, value: float | int | bool, dtype: DType, shape: Sequence[int] = ()) -> Value:
        """A splat constant (rank 0 by default), for broadcasting into elementwise ops."""
        return self.create("ik.constant", [], {"value": Dense.splat(value, tuple(shape), dtype)}).results[0]

    def fused(self, inputs: Sequence[Value], body: Graph, kind: str, loc: Location | None = None) -> list[Value]:
        types = [v.type for v in body.outputs]
        op = self.create("ik.fused", list(inputs), {"kind": kind}, loc, result_types=types, regions=[body])
        return list(op.results)

    def ret(self, *values: Value) -> Op:
        return self.create("func.return", list(values), {}, result_types=[])


def new_function(name: str, arg_types: Sequence[TensorType], arg_names: Sequence[str] | None = None,
                 loc: Location | None = None) -> tuple[Function, Builder]:
    """A new empty function and a builder at its end."""
    g = Graph(arg_types, list(arg_names) if arg_names else None)
    f = Function(name, g, loc)
    return f, Builder.at_end(g)


def module_of(*functions: Function) -> Module:
    return Module(list(functions))


__all__ = ["Builder", "BuildError", "new_function", "module_of"]
