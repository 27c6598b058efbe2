"""The IR: types, values, ops, graphs, functions, modules; the op registry; builder; verifier.

This package is the ground floor: it imports nothing from irkit.text, passes or targets.
"""

from __future__ import annotations

from irkit.ir import ops_cache, ops_index, ops_window  # noqa: F401  (they register their op families)
from irkit.ir.builder import Builder, BuildError, new_function
from irkit.ir.core import Dense, Function, Graph, Location, Module, Op, Value, clone_function
from irkit.ir.ops import OPS, Cost, OpDef, OpError, get_op, infer_types, named_operands, op_cost
from irkit.ir.types import DType, SymDim, TensorType, parse_dim
from irkit.ir.verify import VerifyError, verify

__all__ = [
    "Builder", "BuildError", "new_function", "Dense", "Function", "Graph", "Location", "Module", "Op",
    "Value", "clone_function", "OPS", "Cost", "OpDef", "OpError", "get_op", "infer_types",
    "named_operands", "op_cost", "DType", "SymDim", "TensorType", "parse_dim", "VerifyError", "verify",
]
