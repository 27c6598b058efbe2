"""One fused kernel from an expression tree of elementwise and broadcast ops.

Design note
-----------
The tree is a small immutable data structure (:class:`Input`, :class:`Const`, :class:`Unary`,
:class:`Binary`, :class:`Where`, :class:`Cast`, built with the lower-case helpers) so an IR
region (say ``x * sigmoid(x)`` or ``where(mask, a, b) + bias``) translates node for node.
Shapes broadcast as in NumPy; the output shape is the broadcast of the inputs.

The tree becomes one TE ``compute`` whose body is the whole expression (no intermediate
tensors at all), scheduled as one flat loop: vectorised and parallel on CPU, bound to a 1-D
grid on CUDA. float16/bfloat16 values are computed in float32 and rounded when stored (or at
an explicit :class:`Cast`), like a fused kernel rather than per-op eager rounding.

Transcendentals on float32 use straight-line polynomial/rational forms (``exp``: Cephes;
``tanh``, ``erf``: the rational approximations of ``tvm.topi.fast_tanh``/``fast_erf``) because
``tirx.exp``/``erf`` lower to one libm call per lane on x86 (``erff`` measured at ~100 ns per
element here); they stay within ~2e-7 of float64. ``fast=False`` keeps TVM's intrinsics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tvm import s_tir, te, tirx

from .common import (
    Kernel,
    TargetLike,
    as_target,
    broadcast_index,
    broadcast_shapes,
    f32,
    fast_exp,
    is_gpu,
    is_nan_bits,
    make_kernel,
    schedule_elementwise_cpu,
    schedule_elementwise_gpu,
    simd_lanes,
)

UNARY_OPS = (
    "neg",
    "abs",
    "exp",
    "log",
    "log1p",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "tanh",
    "erf",
    "sigmoid",
    "relu",
    "sin",
    "cos",
    "floor",
    "ceil",
    "round",
    "sign",
    "square",
    "not",
    "isnan",
    "isinf",
)
BINARY_OPS = (
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "max",
    "min",
    "mod",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "and",
    "or",
)
COMPARE_OPS = ("eq", "ne", "lt", "le", "gt", "ge")
LOGIC_OPS = ("and", "or")
HALF_TYPES = ("float16", "bfloat16")


# --------------------------------------------------------------------------- the tree


@dataclass(frozen=True)
class Input:
    """The ``index``-th kernel input."""

    index: int


@dataclass(frozen=True)
class Const:
    """A scalar constant of ``dtype``."""

    value: float | int | bool
    dtype: str = "float32"


@dataclass(frozen=True)
class Unary:
    """``op(x)`` for ``op`` in :data:`UNARY_OPS`."""

    op: str
    x: Node


@dataclass(frozen=True)
class Binary:
    """``op(x, y)`` with broadcasting, ``op`` in :data:`BINARY_OPS`."""

    op: str
    x: Node
    y: Node


@dataclass(frozen=True)
class Where:
    """``cond ? x : y`` (``cond`` is bool)."""

    cond: Node
    x: Node
    y: Node


@dataclass(frozen=True)
class Cast:
    """``x`` converted to ``dtype`` (rounds when narrowing)."""

    x: Node
    dtype: str


Node = Input | Const | Unary | Binary | Where | Cast


def input(index: int) -> Input:
    """Leaf: kernel input ``index``."""
    return Input(index)


def const(value: float | bool, dtype: str = "float32") -> Const:
    """Leaf: a scalar constant."""
    return Const(value, dtype)


def unary(op: str, x: Node) -> Unary:
    """``op(x)``."""
    if op not in UNARY_OPS:
        raise ValueError(f"unknown unary op {op!r}; expected one of {UNARY_OPS}")
    return Unary(op, x)


def binary(op: str, x: Node, y: Node) -> Binary:
    """``op(x, y)`` with broadcasting."""
    if op not in BINARY_OPS:
        raise ValueError(f"unknown binary op {op!r}; expected one of {BINARY_OPS}")
    return Binary(op, x, y)


def where(cond: Node, x: Node, y: Node) -> Where:
    """``cond ? x : y``."""
    return Where(cond, x, y)


def cast(x: Node, dtype: str) -> Cast:
    """``x`` as ``dtype``."""
    return Cast(x, dtype)


def infer_dtype(node: Node, in_dtypes: Sequence[str]) -> str:
    """Result dtype of ``node`` given the input dtypes (raises on mismatched operands)."""
    if isinstance(node, Input):
        if not 0 <= node.index < len(in_dtypes):
            raise ValueError(f"input({node.index}) but the kernel has {len(in_dtypes)} inputs")
        return in_dtypes[node.index]
    if isinstance(node, Const):
        return node.dtype
    if isinstance(node, Cast):
        infer_dtype(node.x, in_dtypes)
        return node.dtype
    if isinstance(node, Unary):
        xd = infer_dtype(node.x, in_dtypes)
        if node.op in ("isnan", "isinf", "not"):
            return "bool"
        return xd
    if isinstance(node, Binary):
        xd, yd = infer_dtype(node.x, in_dtypes), infer_dtype(node.y, in_dtypes)
        if xd != yd:
            raise ValueError(
                f"{node.op}: operand dtypes differ ({xd} vs {yd}); insert an explicit cast"
            )
        return "bool" if node.op in COMPARE_OPS or node.op in LOGIC_OPS else xd
    if isinstance(node, Where):
        cd = infer_dtype(node.cond, in_dtypes)
        xd, yd = infer_dtype(node.x, in_dtypes), infer_dtype(node.y, in_dtypes)
        if cd != "bool":
            raise ValueError(f"where: condition must be bool, got {cd}")
        if xd != yd:
            raise ValueError(f"where: branch dtypes differ ({xd} vs {yd})")
        return xd
    raise TypeError(f"not an expression node: {node!r}")


# --------------------------------------------------------------------------- emission


def _compute_dtype(dtype: str) -> str:
    return "float32" if dtype in HALF_TYPES else dtype


def fast_tanh(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """tanh for float32: the rational form of ``tvm.topi.fast_tanh`` (Eigen), clamped to ±9
    where it has saturated (the unclamped ratio diverges for large |x|)."""
    x = tirx.max(tirx.min(x, f32(9.0)), f32(-9.0))
    x2 = x * x
    p = f32(-2.76076847742355e-16)
    for c in (
        2.00018790482477e-13,
        -8.60467152213735e-11,
        5.12229709037114e-08,
        1.48572235717979e-05,
        6.37261928875436e-04,
        4.89352455891786e-03,
    ):
        p = p * x2 + f32(c)
    q = f32(1.19825839466702e-06)
    for c in (1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03):
        q = q * x2 + f32(c)
    return x * p / q


def fast_erf(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """erf for float32: the rational form of ``tvm.topi.fast_erf`` (Eigen), exact to float32
    rounding (saturates to ±1 beyond |x| = 4)."""
    x = tirx.max(tirx.min(x, f32(4.0)), f32(-4.0))
    x2 = x * x
    p = f32(-2.72614225801306e-10)
    for c in (
        2.77068142495902e-08,
        -2.10102402082508e-06,
        -5.69250639462346e-05,
        -7.34990630326855e-04,
        -2.95459980854025e-03,
        -1.60960333262415e-02,
    ):
        p = p * x2 + f32(c)
    q = f32(-1.45660718464996e-05)
    for c in (
        -2.13374055278905e-04,
        -1.68282697438203e-03,
        -7.37332916720468e-03,
        -1.42647390514189e-02,
    ):
        q = q * x2 + f32(c)
    return x * p / q


def exp_nan(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """:func:`fast_exp` with IEEE edges: NaN passes through and overflow gives +inf (the
    polynomial's clamps would hide both). Results below float32's normal range flush to 0."""
    big = tirx.Select(x > f32(88.72283935546875), tirx.const(math.inf, "float32"), fast_exp(x))
    return tirx.Select(is_nan_bits(x), x, big)


def unary_expr(op: str, x: tirx.PrimExpr, dtype: str, fast: bool) -> tirx.PrimExpr:
    """``op`` applied to one scalar; ``fast`` uses the vectorisable polynomials for float32."""
    is_f32 = dtype == "float32"
    one = tirx.const(1, dtype)
    if op == "neg":
        return -x
    if op == "abs":
        return tirx.abs(x)
    if op == "exp":
        return exp_nan(x) if fast and is_f32 else tirx.exp(x)
    if op == "log":
        return tirx.log(x)
    if op == "log1p":
        return tirx.log1p(x)
    if op == "sqrt":
        return tirx.sqrt(x)
    if op == "rsqrt":
        return one / tirx.sqrt(x)
    if op == "reciprocal":
        return one / x
    if op == "tanh":
        return tirx.Select(is_nan_bits(x), x, fast_tanh(x)) if fast and is_f32 else tirx.tanh(x)
    if op == "erf":
        return tirx.Select(is_nan_bits(x), x, fast_erf(x)) if fast and is_f32 else tirx.erf(x)
    if op == "sigmoid":
        if fast and is_f32:
            return one / (one + exp_nan(-x))
        return tirx.sigmoid(x)
    if op == "relu":
        return tirx.max(x, tirx.const(0, dtype))
    if op == "sin":
        return tirx.sin(x)
    if op == "cos":
        return tirx.cos(x)
    if op == "floor":
        return tirx.floor(x)
    if op == "ceil":
        return tirx.ceil(x)
    if op == "round":
        # NumPy rounds half to even, which is nearbyint under the default rounding mode
        return tirx.nearbyint(x)
    if op == "sign":
        zero = tirx.const(0, dtype)
        return tirx.Select(x > zero, one, tirx.Select(x < zero, -one, x))
    if op == "square":
        return x * x
    if op == "not":
        return tirx.Not(x)
    if op in ("isnan", "isinf") and str(x.dtype) == "bfloat16":
        x = tirx.Cast("float32", x)  # TVM has no bf16 isnan / isinf; the widening is exact
    if op == "isnan":
        return tirx.isnan(x)
    if op == "isinf":
        return tirx.isinf(x)
    raise ValueError(f"unknown unary op {op!r}")


def _binary(op: str, x: tirx.PrimExpr, y: tirx.PrimExpr, dtype: str, fast: bool) -> tirx.PrimExpr:
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    if op == "mul":
        return x * y
    if op == "div":
        if dtype.startswith("int"):
            return tirx.floordiv(x, y)  # NumPy's // semantics for integer division
        return x / y
    if op == "pow":
        return tirx.power(x, y)
    if op == "max":
        return tirx.max(x, y)
    if op == "min":
        return tirx.min(x, y)
    if op == "mod":
        return tirx.floormod(x, y) if dtype.startswith("int") else x - tirx.floor(x / y) * y
    if op == "eq":
        return x == y
    if op == "ne":
        return x != y
    if op == "lt":
        return x < y
    if op == "le":
        return x <= y
    if op == "gt":
        return x > y
    if op == "ge":
        return x >= y
    if op == "and":
        return tirx.And(x, y)
    if op == "or":
        return tirx.Or(x, y)
    raise ValueError(f"unknown binary op {op!r}")


class _Emitter:
    """Turns the tree into one PrimExpr at an output index (compute dtypes: f32 for halves)."""

    def __init__(self, tensors: Sequence[te.Tensor], in_dtypes: Sequence[str], fast: bool) -> None:
        self.tensors = tensors
        self.in_dtypes = in_dtypes
        self.fast = fast

    def emit(self, node: Node, idx: Sequence[Any]) -> tirx.PrimExpr:
        dtype = infer_dtype(node, self.in_dtypes)
        cdt = _compute_dtype(dtype)
        if isinstance(node, Input):
            t = self.tensors[node.index]
            return t[tuple(broadcast_index(t.shape, idx))].astype(cdt)
        if isinstance(node, Const):
            return tirx.const(node.value, dtype).astype(cdt)
        if isinstance(node, Cast):
            # round through the target type, then compute on in the wider type
            return self.emit(node.x, idx).astype(dtype).astype(cdt)
        if isinstance(node, Unary):
            xdt = _compute_dtype(infer_dtype(node.x, self.in_dtypes))
            return unary_expr(node.op, self.emit(node.x, idx), xdt, self.fast)
        if isinstance(node, Binary):
            xdt = _compute_dtype(infer_dtype(node.x, self.in_dtypes))
            x, y = self.emit(node.x, idx), self.emit(node.y, idx)
            return _binary(node.op, x, y, xdt, self.fast)
        if isinstance(node, Where):
            return tirx.Select(
                self.emit(node.cond, idx), self.emit(node.x, idx), self.emit(node.y, idx)
            )
        raise TypeError(f"not an expression node: {node!r}")


def _inputs_used(node: Node, acc: set[int]) -> set[int]:
    if isinstance(node, Input):
        acc.add(node.index)
    for child in ("x", "y", "cond"):
        sub = getattr(node, child, None)
        if sub is not None:
            _inputs_used(sub, acc)
    return acc


def elementwise(
    expr: Node | Sequence[Node],
    input_shapes: Sequence[Sequence[int]],
    input_dtypes: Sequence[str],
    *,
    out_shape: Sequence[int] | None = None,
    fast_math: bool = True,
    target: TargetLike | None = None,
    name: str = "elementwise",
) -> Kernel:
    """Build one kernel evaluating ``expr`` (or several expressions: one output each).

    ``input_shapes``/``input_dtypes`` describe ``input(0)``, ``input(1)``, ... The output shape is
    the broadcast of all input shapes (or ``out_shape`` when given, e.g. to broadcast a
    constant-only expression). ``fast_math`` uses the polynomial exp/tanh/erf on float32.
    """
    exprs: list[Node] = [expr] if isinstance(expr, (Input, Const, Unary, Binary, Where, Cast)) else list(expr)
    if len(input_shapes) != len(input_dtypes):
        raise ValueError("input_shapes and input_dtypes differ in length")
    tgt = as_target(target)
    shapes = [tuple(int(d) for d in s) for s in input_shapes]
    shape = tuple(int(d) for d in out_shape) if out_shape is not None else broadcast_shapes(*shapes)
    if out_shape is not None:
        broadcast_shapes(shape, *shapes)  # validates
    used: set[int] = set()
    for e in exprs:
        _inputs_used(e, used)
    tensors = [
        te.placeholder(s, d, name=f"in{i}")
        for i, (s, d) in enumerate(zip(shapes, input_dtypes, strict=True))
    ]
    emitter = _Emitter(tensors, list(input_dtypes), fast_math)

    def body(e: Node, odt: str) -> Any:
        # a closure per output (te.compute rejects keyword-default lambdas)
        return lambda *idx: emitter.emit(e, idx).astype(odt)

    outs = [
        te.compute(shape, body(e, infer_dtype(e, input_dtypes)), name=f"out{n}")
        for n, e in enumerate(exprs)
    ]
    lanes = simd_lanes(tgt, "float32") if not is_gpu(tgt) else 4

    def schedule(sch: s_tir.Schedule) -> None:
        for n in range(len(outs)):
            blk = sch.get_sblock(f"out{n}")
            if is_gpu(tgt):
                schedule_elementwise_gpu(sch, blk, 256, vec=1)
            else:
                schedule_elementwise_cpu(sch, blk, lanes)

    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    return make_kernel(
        name,
        tensors,
        outs,
        tgt,
        schedule,
        flops=size * len(exprs),
        config={"out_shape": shape, "inputs_used": sorted(used), "fast_math": fast_math},
    )


def evaluate_reference(expr: Node, inputs: Sequence[np.ndarray]) -> np.ndarray:
    """NumPy float64 evaluation of a tree (the oracle for tests); bools stay bool."""
    import scipy.special as sp  # only tests and benchmarks call this

    def ev(node: Node) -> np.ndarray:
        if isinstance(node, Input):
            a = np.asarray(inputs[node.index])
            return a if a.dtype == np.bool_ or a.dtype.kind in "iu" else a.astype(np.float64)
        if isinstance(node, Const):
            return np.asarray(node.value, dtype=np.bool_ if node.dtype == "bool" else np.float64)
        if isinstance(node, Cast):
            x = ev(node.x)
            if node.dtype == "bool":
                return x.astype(np.bool_)
            return (
                x.astype(_np_dtype(node.dtype)).astype(np.float64)
                if not node.dtype.startswith(("int", "uint"))
                else x.astype(node.dtype)
            )
        if isinstance(node, Unary):
            x = ev(node.x)
            with np.errstate(all="ignore"):
                return {
                    "neg": lambda: -x,
                    "abs": lambda: np.abs(x),
                    "exp": lambda: np.exp(x),
                    "log": lambda: np.log(x),
                    "log1p": lambda: np.log1p(x),
                    "sqrt": lambda: np.sqrt(x),
                    "rsqrt": lambda: 1 / np.sqrt(x),
                    "reciprocal": lambda: 1 / x,
                    "tanh": lambda: np.tanh(x),
                    "erf": lambda: sp.erf(x),
                    "sigmoid": lambda: sp.expit(x),
                    "relu": lambda: np.maximum(x, 0),
                    "sin": lambda: np.sin(x),
                    "cos": lambda: np.cos(x),
                    "floor": lambda: np.floor(x),
                    "ceil": lambda: np.ceil(x),
                    "round": lambda: np.round(x),
                    "sign": lambda: np.sign(x),
                    "square": lambda: x * x,
                    "not": lambda: ~x,
                    "isnan": lambda: np.isnan(x),
                    "isinf": lambda: np.isinf(x),
                }[node.op]()
        if isinstance(node, Binary):
            x, y = ev(node.x), ev(node.y)
            with np.errstate(all="ignore"):
                return {
                    "add": lambda: x + y,
                    "sub": lambda: x - y,
                    "mul": lambda: x * y,
                    "div": lambda: x // y if x.dtype.kind in "iu" else x / y,
                    "pow": lambda: np.power(x, y),
                    "max": lambda: np.maximum(x, y),
                    "min": lambda: np.minimum(x, y),
                    "mod": lambda: np.mod(x, y),
                    "eq": lambda: x == y,
                    "ne": lambda: x != y,
                    "lt": lambda: x < y,
                    "le": lambda: x <= y,
                    "gt": lambda: x > y,
                    "ge": lambda: x >= y,
                    "and": lambda: x & y,
                    "or": lambda: x | y,
                }[node.op]()
        if isinstance(node, Where):
            return np.where(ev(node.cond), ev(node.x), ev(node.y))
        raise TypeError(node)

    return ev(expr)


def _np_dtype(dtype: str) -> Any:
    if dtype == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.dtype(dtype)


__all__ = [
    "unary_expr",
    "BINARY_OPS",
    "UNARY_OPS",
    "Binary",
    "Cast",
    "Const",
    "Input",
    "Node",
    "Unary",
    "Where",
    "binary",
    "cast",
    "const",
    "elementwise",
    "evaluate_reference",
    "fast_erf",
    "fast_tanh",
    "infer_dtype",
    "input",
    "unary",
    "where",
]
