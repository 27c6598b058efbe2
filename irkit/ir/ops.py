"""The op set: one registry, each op defined once.

Design note: an :class:`OpDef` carries everything the rest of irkit needs to
know about an op — operand names (``?`` marks an optional one, ``*`` a variadic
one), its attribute schema, type inference, extra verification, a NumPy
reference kernel and a cost (FLOPs and bytes).  The printer, parser, verifier
and interpreter read only this table, so a new op is one definition.  Per-target
lowering rules live in each target's module, never here.

Elementwise ops are defined from tables (name, NumPy function, FLOPs per
element) — the algebra reads as data.  Reference kernels compute half types
(f16, bf16) in f32 and round the result, which is what the hardware does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special as _special

from irkit.ir.core import Dense, Op, Value
from irkit.ir.types import (
    Dim,
    DType,
    SymDim,
    TensorType,
    broadcast_shapes,
    dim_add,
    dim_prod,
    dim_sub,
    eval_dim,
    is_float_np,
    is_ml_float_np,
    normalize_axis,
    shape_str,
)

REQUIRED = object()


class OpError(ValueError):
    """Raised by type inference or verification of one op."""


@dataclass(frozen=True)
class AttrSpec:
    """An attribute's kind and default.

    kinds: ``int``, ``float``, ``bool``, ``str``, ``dtype``, ``ints`` (tuple of
    int), ``floats``, ``dims`` (tuple of int or symbolic dims), ``dense``,
    ``type``; ``choices`` restricts a ``str``.
    """

    kind: str
    default: Any = REQUIRED
    choices: tuple[str, ...] = ()
    doc: str = ""

    def check(self, name: str, v: Any) -> None:
        if not _ATTR_KIND_CHECKS[self.kind](v):
            raise OpError(f"attribute '{name}' must be {self.kind}, got {v!r}")
        if self.choices and v not in self.choices:
            raise OpError(f"attribute '{name}' must be one of {', '.join(self.choices)}, got '{v}'")


_ATTR_KIND_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int": lambda x: isinstance(x, int) and not isinstance(x, bool),
    "float": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
    "bool": lambda x: isinstance(x, bool),
    "str": lambda x: isinstance(x, str),
    "dtype": lambda x: isinstance(x, DType),
    "ints": lambda x: isinstance(x, tuple) and all(isinstance(i, int) and not isinstance(i, bool) for i in x),
    "floats": lambda x: isinstance(x, tuple) and all(isinstance(i, (int, float)) for i in x),
    "dims": lambda x: isinstance(x, tuple) and all(isinstance(i, (int, SymDim)) and not isinstance(i, bool) for i in x),
    "dense": lambda x: isinstance(x, Dense),
    "type": lambda x: isinstance(x, TensorType),
    "any": lambda x: True,
}


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes moved by one op execution (concrete shapes)."""

    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    def __add__(self, o: Cost) -> Cost:
        return Cost(self.flops + o.flops, self.bytes_read + o.bytes_read, self.bytes_written + o.bytes_written)


@dataclass
class RefContext:
    """What a reference kernel may need beyond its inputs."""

    out_types: list[TensorType]
    out_shapes: list[tuple[int, ...]]
    bindings: Mapping[str, int]
    run_region: Callable[[Any, list[np.ndarray]], list[np.ndarray]] | None = None
    op: Op | None = None


InferFn = Callable[[list[TensorType], Mapping[str, Any]], list[TensorType]]
RefFn = Callable[[list[np.ndarray], Mapping[str, Any], RefContext], list[np.ndarray]]
CostFn = Callable[[list[tuple[int, ...]], list[tuple[int, ...]], list[DType], Mapping[str, Any]], Cost]


@dataclass(frozen=True)
class OpDef:
    """The single definition of an op."""

    name: str
    summary: str
    operands: tuple[str, ...]
    infer: InferFn
    ref: RefFn
    cost: CostFn
    attrs: Mapping[str, AttrSpec] = field(default_factory=dict)
    verify: Callable[[list[TensorType], Mapping[str, Any]], None] | None = None
    traits: frozenset[str] = frozenset()
    has_region: bool = False

    @property
    def optional_operands(self) -> tuple[str, ...]:
        return tuple(n for n in self.operands if n.endswith("?"))

    @property
    def is_variadic(self) -> bool:
        return any(n.endswith("*") for n in self.operands)

    def has(self, trait: str) -> bool:
        return trait in self.traits

    def with_defaults(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: s.default for k, s in self.attrs.items() if s.default is not REQUIRED and s.default is not None}
        out.update(attrs)
        return out


OPS: dict[str, OpDef] = {}


def register_op(d: OpDef) -> OpDef:
    """Add an op definition to the registry (names are unique)."""
    if d.name in OPS:
        raise ValueError(f"op '{d.name}' is already defined")
    OPS[d.name] = d
    return d


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise OpError(f"unknown op '{name}'") from None


# ---------------------------------------------------------------------------
# Optional operands: MLIR's operandSegmentSizes


SEGMENTS = "operandSegmentSizes"


def segment_sizes(d: OpDef, present: Mapping[str, bool]) -> tuple[int, ...]:
    return tuple(1 if not n.endswith("?") or present.get(n[:-1], False) else 0 for n in d.operands)


def named_operands(op: Op) -> dict[str, Value | None]:
    """Operands by name, None for absent optional ones."""
    d = OPS[op.name]
    if d.is_variadic:
        return {d.operands[0].rstrip("*"): None}
    seg = op.attrs.get(SEGMENTS)
    out: dict[str, Value | None] = {}
    i = 0
    for k, n in enumerate(d.operands):
        key = n.rstrip("?")
        if n.endswith("?"):
            if seg is not None and k < len(seg) and seg[k] == 0:
                out[key] = None
                continue
            if seg is None and i >= op.num_operands:
                out[key] = None
                continue
        out[key] = op.operand(i) if i < op.num_operands else None
        i += 1
    return out


def check_operand_count(d: OpDef, n: int, attrs: Mapping[str, Any]) -> None:
    if d.is_variadic:
        if n < 1:
            raise OpError("expects at least one operand")
        return
    seg = attrs.get(SEGMENTS)
    required = sum(1 for x in d.operands if not x.endswith("?"))
    if seg is not None:
        if len(seg) != len(d.operands) or any(s not in (0, 1) for s in seg):
            raise OpError(f"{SEGMENTS} must have {len(d.operands)} entries of 0 or 1")
        for name, s in zip(d.operands, seg):
            if not name.endswith("?") and s != 1:
                raise OpError(f"{SEGMENTS} marks required operand '{name}' absent")
        if sum(seg) != n:
            raise OpError(f"{SEGMENTS} says {sum(seg)} operands, op has {n}")
        return
    if not required <= n <= len(d.operands):
        want = str(required) if required == len(d.operands) else f"{required} to {len(d.operands)}"
        raise OpError(f"expects {want} operands ({', '.join(d.operands)}), got {n}")


# ---------------------------------------------------------------------------
# Helpers for kernels


def _f(x: np.ndarray) -> np.ndarray:
    """Compute dtype for a reference kernel: half and float8 types go through f32."""
    if x.dtype in (np.float16,) or is_ml_float_np(x.dtype):
        return x.astype(np.float32)
    return x


def _out(x: Any, dtype: DType) -> np.ndarray:
    return np.asarray(x).astype(dtype.np, copy=False)


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _nbytes(shapes: Sequence[Sequence[int]], dtypes: Sequence[DType]) -> float:
    return float(sum(_numel(s) * d.itemsize for s, d in zip(shapes, dtypes)))


def _io_cost(flops_per_out: float) -> CostFn:
    def cost(ins, outs, dts, a):
        n_in = len(ins)
        return Cost(flops_per_out * sum(_numel(s) for s in outs),
                    _nbytes(ins, dts[:n_in]), _nbytes(outs, dts[n_in:]))
    return cost


_NO_COST: CostFn = lambda ins, outs, dts, a: Cost()  # noqa: E731


def _move_cost(ins, outs, dts, a) -> Cost:
    n_in = len(ins)
    return Cost(0.0, _nbytes(ins, dts[:n_in]), _nbytes(outs, dts[n_in:]))


def _view_cost(ins, outs, dts, a) -> Cost:
    # reshape is a view on every target we lower to: no data moves.
    return Cost()


def _axes(a: Mapping[str, Any], rank: int, key: str = "axes") -> tuple[int, ...]:
    ax = a.get(key)
    if ax is None or len(ax) == 0:
        return tuple(range(rank))
    try:
        out = tuple(sorted({normalize_axis(x, rank) for x in ax}))
    except ValueError as e:
        raise OpError(str(e)) from None
    return out


def _same_dtype(ts: Sequence[TensorType], what: str = "operands") -> DType:
    dts = {t.dtype for t in ts}
    if len(dts) != 1:
        raise OpError(f"{what} must have one element type, got {', '.join(sorted(str(d) for d in dts))}")
    return ts[0].dtype


def _bcast(ts: Sequence[TensorType]) -> tuple[Dim, ...]:
    try:
        return broadcast_shapes(*(t.shape for t in ts))
    except ValueError as e:
        raise OpError(str(e)) from None


def _float_only(t: TensorType, what: str = "operand") -> None:
    if not t.dtype.is_float:
        raise OpError(f"{what} must be a float type, got {t.dtype}")


# ---------------------------------------------------------------------------
# Elementwise ops, from tables


def _gelu_erf(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _special.erf(x / math.sqrt(2.0)))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return _special.expit(x)


def _unsigned_view(x: np.ndarray) -> np.ndarray:
    """The bits of an integer array as the unsigned type of the same width (any rank, 0-d too:
    ``np.ascontiguousarray`` alone makes a 0-d array 1-d)."""
    return np.ascontiguousarray(x).reshape(np.shape(x)).view(np.dtype(f"u{x.dtype.itemsize}"))


def _bit_length(x: np.ndarray) -> np.ndarray:
    u = _unsigned_view(x)
    n = np.zeros(x.shape, dtype=np.int64)
    for k in range(8 * x.dtype.itemsize):
        n += (u >> np.uint64(k).astype(u.dtype)) != 0
    return n


def _popcount(x: np.ndarray) -> np.ndarray:
    return np.bitwise_count(_unsigned_view(x)).astype(x.dtype)


def _clz(x: np.ndarray) -> np.ndarray:
    return (8 * x.dtype.itemsize - _bit_length(x)).astype(x.dtype)


def _round_half_even(x: np.ndarray) -> np.ndarray:
    return np.round(x)  # np.round rounds half to even (IEEE roundTiesToEven), as ONNX Round and torch.round


# name -> (numpy function, flops per element, domain: "float" | "numeric" | "int" | "float->i1")
UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float, str]] = {
    "neg": (np.negative, 1, "numeric"),
    "abs": (np.abs, 1, "numeric"),
    "exp": (np.exp, 1, "float"),
    "log": (np.log, 1, "float"),
    "sqrt": (np.sqrt, 1, "float"),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), 2, "float"),
    "reciprocal": (lambda x: 1.0 / x, 1, "float"),
    "tanh": (np.tanh, 1, "float"),
    "erf": (_special.erf, 1, "float"),
    "sigmoid": (_sigmoid, 3, "float"),
    "sin": (np.sin, 1, "float"),
    "cos": (np.cos, 1, "float"),
    "floor": (np.floor, 1, "float"),
    "ceil": (np.ceil, 1, "float"),
    "sign": (np.sign, 1, "numeric"),
    "relu": (lambda x: np.maximum(x, 0), 1, "numeric"),
    "silu": (lambda x: x * _special.expit(x), 4, "float"),
    "tan": (np.tan, 1, "float"),
    "asin": (np.arcsin, 1, "float"),
    "acos": (np.arccos, 1, "float"),
    "atan": (np.arctan, 1, "float"),
    "sinh": (np.sinh, 1, "float"),
    "cosh": (np.cosh, 1, "float"),
    "asinh": (np.arcsinh, 1, "float"),
    "acosh": (np.arccosh, 1, "float"),
    "atanh": (np.arctanh, 1, "float"),
    "log1p": (np.log1p, 1, "float"),
    "expm1": (np.expm1, 1, "float"),
    "round": (_round_half_even, 1, "float"),
    "trunc": (np.trunc, 1, "float"),
    "erfinv": (_special.erfinv, 1, "float"),
    "lgamma": (_special.gammaln, 1, "float"),  # log |Gamma(x)|, as torch.lgamma and lax.lgamma
    "digamma": (_special.psi, 1, "float"),
    "isnan": (np.isnan, 1, "float->i1"),
    "isinf": (np.isinf, 1, "float->i1"),
    "isfinite": (np.isfinite, 1, "float->i1"),
    "bitwise_not": (np.invert, 1, "int"),
    "popcount": (_popcount, 1, "int"),
    "clz": (_clz, 1, "int"),
}


def _int_trunc_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (C, ONNX, torch trunc), exact for 64-bit values."""
    safe = np.where(y == 0, 1, y).astype(np.result_type(x, y))
    q = np.floor_divide(x, safe)
    if x.dtype.kind == "i":
        q = q + ((x - q * safe != 0) & ((x < 0) != (safe < 0)))
    return np.where(y == 0, 0, q)


def _div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return _int_trunc_div(x, y) if x.dtype.kind in "iu" else np.divide(x, y)


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind in "iu":
        wide = np.uint64 if x.dtype.kind == "u" else np.int64
        return np.power(x.astype(wide), y.astype(wide))
    return np.power(x, y)


def _int_div_safe(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """Integer x / 0 gives 0 (NumPy's answer, without its warning); floats keep IEEE results."""
    def go(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        if x.dtype.kind in "iu":
            return np.where(y == 0, 0, fn(x, np.where(y == 0, 1, y).astype(y.dtype)))
        return fn(x, y)
    return go


def _shift(kind: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """XLA shifts: the amount is read as unsigned; an amount >= the bit width gives 0
    (left, logical) or the sign fill (arithmetic)."""
    def go(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x, y = np.broadcast_arrays(x, y)
        bits = 8 * x.dtype.itemsize
        u = _unsigned_view(x)
        amt = _unsigned_view(y.astype(x.dtype))
        big = amt >= bits
        amt = np.where(big, 0, amt).astype(u.dtype)
        if kind == "left":
            r = np.where(big, 0, u << amt).astype(u.dtype)
        elif kind == "logical":
            r = np.where(big, 0, u >> amt).astype(u.dtype)
        else:
            s = u.view(np.dtype(f"i{x.dtype.itemsize}"))
            fill = np.where(s < 0, -1, 0).astype(s.dtype)
            r = np.where(big, fill, s >> amt.astype(s.dtype)).astype(s.dtype)
        return np.ascontiguousarray(r).reshape(x.shape).view(x.dtype)
    return go


# name -> (numpy function, flops per element, commutative, domain: "float" | "numeric" | "int")
BINARY: dict[str, tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], float, bool, str]] = {
    "add": (np.add, 1, True, "numeric"),
    "sub": (np.subtract, 1, False, "numeric"),
    "mul": (np.multiply, 1, True, "numeric"),
    "div": (_div, 1, False, "numeric"),
    "pow": (_pow, 1, False, "numeric"),
    "max": (np.maximum, 1, True, "numeric"),
    "min": (np.minimum, 1, True, "numeric"),
    "rem": (_int_div_safe(np.fmod), 1, False, "numeric"),
    "mod": (_int_div_safe(np.mod), 1, False, "numeric"),
    "floor_div": (_int_div_safe(np.floor_divide), 1, False, "numeric"),
    "atan2": (np.arctan2, 1, False, "float"),
    "nextafter": (np.nextafter, 1, False, "float"),
    "bitwise_and": (np.bitwise_and, 1, True, "int"),
    "bitwise_or": (np.bitwise_or, 1, True, "int"),
    "bitwise_xor": (np.bitwise_xor, 1, True, "int"),
    "shift_left": (_shift("left"), 1, False, "int"),
    "shift_right_logical": (_shift("logical"), 1, False, "int"),
    "shift_right_arithmetic": (_shift("arithmetic"), 1, False, "int"),
}

COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}

LOGICAL: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
}


def _check_domain(t: TensorType, domain: str, what: str = "operand") -> None:
    if domain in ("float", "float->i1"):
        _float_only(t, what)
    elif domain == "int":
        if not t.dtype.is_int:
            raise OpError(f"{what} must be an integer type (signed or unsigned), got {t.dtype}")
    elif t.dtype.is_bool:
        raise OpError(f"{what} must be numeric, got i1")


def _def_unary(name: str, fn: Callable, flops: float, domain: str) -> None:
    def infer(ts, a):
        _check_domain(ts[0], domain)
        return [ts[0].with_dtype(DType.bool) if domain == "float->i1" else ts[0]]

    def ref(xs, a, ctx):
        x = xs[0]
        with np.errstate(all="ignore"):
            if x.dtype.kind in "iu" and name == "neg":
                return [np.negative(x)]
            return [_out(fn(_f(x)), ctx.out_types[0].dtype)]

    kind = {"float->i1": "predicate", "int": "bitwise"}.get(domain)
    traits = {"elementwise", "pure", "unary"} | ({kind} if kind else set())
    summary = f"elementwise {name}" + (", i1 result" if domain == "float->i1" else "")
    register_op(OpDef(f"ik.{name}", summary, ("x",), infer, ref, _io_cost(flops), traits=frozenset(traits)))


def _nextafter_ref(x: np.ndarray, y: np.ndarray, ctx: RefContext) -> np.ndarray:
    # The next representable value depends on the type: step in the program's declared
    # type even when the oracle runs in f64 (a f64 step is 2**-29 times an f32 one).
    declared = ctx.op.operands[0].type.dtype if ctx.op is not None else ctx.out_types[0].dtype
    return np.nextafter(x.astype(declared.np), y.astype(declared.np))


def _def_binary(name: str, fn: Callable, flops: float, commutative: bool, domain: str) -> None:
    def infer(ts, a):
        dt = _same_dtype(ts)
        _check_domain(ts[0], domain, "operands")
        return [TensorType(_bcast(ts), dt)]

    def ref(xs, a, ctx):
        dt = ctx.out_types[0].dtype
        x, y = xs
        with np.errstate(all="ignore"):
            if name == "nextafter":
                return [_out(_nextafter_ref(x, y, ctx), dt)]
            return [_out(fn(_f(x), _f(y)), dt)]

    kind = {"int": "bitwise"}.get(domain)
    traits = {"elementwise", "pure", "binary"} | ({"commutative"} if commutative else set()) | \
        ({kind} if kind else set())
    register_op(OpDef(f"ik.{name}", f"elementwise {name} with broadcasting", ("lhs", "rhs"),
                      infer, ref, _io_cost(flops), traits=frozenset(traits)))


def _def_compare(name: str, fn: Callable) -> None:
    def infer(ts, a):
        _same_dtype(ts)
        return [TensorType(_bcast(ts), DType.bool)]

    def ref(xs, a, ctx):
        return [fn(_f(xs[0]), _f(xs[1]))]

    register_op(OpDef(f"ik.{name}", f"elementwise comparison {name}, i1 result", ("lhs", "rhs"),
                      infer, ref, _io_cost(1), traits=frozenset({"elementwise", "pure", "compare"})))


def _def_logical(name: str, fn: Callable) -> None:
    def infer(ts, a):
        for t in ts:
            if not t.dtype.is_bool:
                raise OpError(f"operands must be i1, got {t.dtype}")
        return [TensorType(_bcast(ts), DType.bool)]

    def ref(xs, a, ctx):
        return [fn(xs[0], xs[1])]

    register_op(OpDef(f"ik.{name}", f"logical {name}", ("lhs", "rhs"), infer, ref, _io_cost(1),
                      traits=frozenset({"elementwise", "pure", "commutative", "logical"})))


for _n, (_ufn, _fl, _dom) in UNARY.items():
    _def_unary(_n, _ufn, _fl, _dom)
for _n, (_bfn, _fl, _c, _dom) in BINARY.items():
    _def_binary(_n, _bfn, _fl, _c, _dom)
for _n, _cfn in COMPARE.items():
    _def_compare(_n, _cfn)
for _n, _lfn in LOGICAL.items():
    _def_logical(_n, _lfn)


def _not_infer(ts, a):
    if not ts[0].dtype.is_bool:
        raise OpError(f"operand must be i1, got {ts[0].dtype}")
    return [ts[0]]


register_op(OpDef("ik.not", "logical not", ("x",), _not_infer,
                  lambda xs, a, ctx: [np.logical_not(xs[0])], _io_cost(1),
                  traits=frozenset({"elementwise", "pure", "unary", "logical"})))


def _gelu_ref(xs, a, ctx):
    f = _gelu_tanh if a.get("approximate", "none") == "tanh" else _gelu_erf
    with np.errstate(all="ignore"):
        return [_out(f(_f(xs[0])), ctx.out_types[0].dtype)]


def _float_unary_infer(ts, a):
    _float_only(ts[0])
    return [ts[0]]


register_op(OpDef(
    "ik.gelu", "GELU, exact (erf) or tanh approximation", ("x",), _float_unary_infer, _gelu_ref,
    _io_cost(8), attrs={"approximate": AttrSpec("str", "none", ("none", "tanh"))},
    traits=frozenset({"elementwise", "pure", "unary", "activation"})))


def _where_infer(ts, a):
    if not ts[0].dtype.is_bool:
        raise OpError(f"condition must be i1, got {ts[0].dtype}")
    dt = _same_dtype(ts[1:], "values")
    return [TensorType(_bcast(ts), dt)]


register_op(OpDef("ik.where", "select x where cond else y, with broadcasting", ("cond", "x", "y"),
                  _where_infer, lambda xs, a, ctx: [_out(np.where(xs[0], xs[1], xs[2]), ctx.out_types[0].dtype)],
                  _io_cost(1), traits=frozenset({"elementwise", "pure"})))


def to_float8(x: np.ndarray, to: DType, saturate: bool) -> np.ndarray:
    """Round ``x`` to the float8 type ``to`` (round to nearest even), as ONNX Cast does.

    ``saturate=False`` is IEEE-style overflow (XLA, ml_dtypes, ONNX ``saturate=0``): beyond the
    largest finite value a value becomes inf on f8E5M2 and NaN on the types without inf.
    ``saturate=True`` (ONNX ``saturate=1``, opset 24 table; onnxruntime and the ONNX reference
    evaluator agree) clamps values beyond the range, infinities included, to the largest finite
    value of that sign on every float8 type; NaN stays NaN.
    """
    x = np.asarray(x)
    if x.dtype.kind in "iub":
        x = x.astype(np.float64)
    elif is_ml_float_np(x.dtype):
        x = x.astype(np.float32)  # bf16 / another float8: exact in f32
    if not saturate:
        return x.astype(to.np)
    import ml_dtypes

    big = float(ml_dtypes.finfo(to.np).max)
    with np.errstate(all="ignore"):
        return np.asarray(np.clip(x, -big, big)).astype(to.np)


def _cast_ref(xs, a, ctx):
    dt: DType = a["to"]
    x = xs[0]
    if dt.is_int and is_float_np(x.dtype):
        with np.errstate(all="ignore"):
            return [np.trunc(x.astype(np.float64)).astype(dt.np)]
    if dt.is_bool:
        return [x != 0]
    if dt.is_float8:
        return [to_float8(x, dt, a.get("saturate", False))]
    return [x.astype(dt.np)]


register_op(OpDef("ik.cast", "convert element type (float to int truncates; to float8: round to nearest even, "
                  "saturate clamps out-of-range values as ONNX Cast saturate=1)", ("x",),
                  lambda ts, a: [ts[0].with_dtype(a["to"])], _cast_ref, _io_cost(1),
                  attrs={"to": AttrSpec("dtype"),
                         "saturate": AttrSpec("bool", False, doc="float8 destinations only: clamp values beyond "
                                              "the range to the largest finite value (ONNX saturate=1)")},
                  traits=frozenset({"elementwise", "pure", "unary"})))


def bitcast_type(t: TensorType, to: DType) -> TensorType:
    """The result type of reinterpreting ``t``'s bits as ``to`` (XLA BitcastConvertType): equal widths
    keep the shape; a narrower ``to`` appends a dim of width ratio; a wider one drops the last dim,
    which must equal the ratio.  OpError (one line) otherwise."""
    src = t.dtype
    if src.is_bool or to.is_bool:
        raise OpError(f"bitcast cannot reinterpret i1 (bits are not defined for it; use ik.cast), "
                      f"got {src} -> {to}")
    a, b = src.bits, to.bits
    if a == b:
        return t.with_dtype(to)
    if a > b:
        return TensorType(t.shape + (a // b,), to)
    ratio = b // a
    if t.rank == 0 or t.shape[-1] != ratio:
        last = t.shape[-1] if t.rank else "none (rank 0)"
        raise OpError(f"bitcast {src} -> {to} packs {ratio} elements into one: the last dim must be {ratio}, "
                      f"got {last} in {t}")
    return TensorType(t.shape[:-1], to)


def _bitcast_ref(xs, a, ctx):
    to: DType = a["dtype"]
    x = xs[0]
    if ctx.op is not None:
        # The float64 oracle holds floats in f64: the bits are those of the declared type.
        src = ctx.op.operands[0].type.dtype
        if x.dtype != src.np:
            x = x.astype(src.np)
    shape = ctx.out_shapes[0] if ctx.out_shapes else bitcast_type(TensorType(x.shape, DType.from_numpy(x.dtype)),
                                                                     to).shape
    # C-order bytes in the machine's (little-endian) order: element k of a split value is its k-th
    # least significant part, as XLA and NumPy's view give it.
    return [np.frombuffer(np.ascontiguousarray(x).tobytes(), dtype=to.np).reshape(shape).copy()]


register_op(OpDef("ik.bitcast", "reinterpret the bits as another element type (XLA BitcastConvertType, ONNX "
                  "BitCast): a narrower type adds a trailing dim, a wider one removes it", ("x",),
                  lambda ts, a: [bitcast_type(ts[0], a["dtype"])], _bitcast_ref, _move_cost,
                  attrs={"dtype": AttrSpec("dtype", doc="the element type to reinterpret as")},
                  traits=frozenset({"pure"})))

register_op(OpDef("ik.dropout", "dropout; the identity at inference", ("x",),
                  lambda ts, a: [ts[0]], lambda xs, a, ctx: [xs[0]], _view_cost,
                  attrs={"p": AttrSpec("float", 0.0)}, traits=frozenset({"pure"})))


# ---------------------------------------------------------------------------
# Reductions


def _reduce_infer(ts, a):
    t = ts[0]
    axes = _axes(a, t.rank)
    keep = a.get("keepdims", False)
    shape = [1 if i in axes else d for i, d in enumerate(t.shape)] if keep else \
        [d for i, d in enumerate(t.shape) if i not in axes]
    if t.dtype.is_bool:
        raise OpError("operand must be numeric, got i1")
    return [TensorType(tuple(shape), t.dtype)]


def _def_reduce(name: str, fn: Callable) -> None:
    def ref(xs, a, ctx):
        x = xs[0]
        axes = _axes(a, x.ndim)
        with np.errstate(all="ignore"):
            r = fn(_f(x) if is_float_np(x.dtype) else x, axis=axes,
                   keepdims=a.get("keepdims", False))
        return [_out(r, ctx.out_types[0].dtype)]

    def cost(ins, outs, dts, a):
        return Cost(float(_numel(ins[0])), _nbytes(ins, dts[:1]), _nbytes(outs, dts[1:]))

    register_op(OpDef(f"ik.reduce_{name}", f"{name} over axes (all if empty)", ("x",), _reduce_infer, ref,
                      cost, attrs={"axes": AttrSpec("ints", ()), "keepdims": AttrSpec("bool", False)},
                      traits=frozenset({"pure", "reduction", "reorders"})))


_REDUCE_FNS: dict[str, Callable[..., Any]] = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min,
                                              "prod": np.prod}
for _n, _rfn in _REDUCE_FNS.items():
    _def_reduce(_n, _rfn)


def _argmax_infer(ts, a):
    t = ts[0]
    if t.dtype.is_bool:
        raise OpError("operand must be numeric, got i1")
    try:
        ax = normalize_axis(a["axis"], t.rank)
    except ValueError as e:
        raise OpError(str(e)) from None
    keep = a.get("keepdims", False)
    shape = [1 if i == ax else d for i, d in enumerate(t.shape)] if keep else \
        [d for i, d in enumerate(t.shape) if i != ax]
    return [TensorType(tuple(shape), DType.i64)]


def _def_arg_reduce(name: str, fn: Callable[..., np.ndarray], what: str) -> None:
    def ref(xs, a, ctx):
        x = _f(xs[0])
        ax = normalize_axis(a["axis"], x.ndim)
        keep = a.get("keepdims", False)
        if x.shape[ax] == 0:
            raise ValueError(f"{name} over an empty axis {ax}")
        if a.get("select_last_index", False):
            n = x.shape[ax]
            r = n - 1 - fn(np.flip(x, ax), axis=ax, keepdims=keep)
        else:
            r = fn(x, axis=ax, keepdims=keep)
        return [np.asarray(r).astype(np.int64)]

    register_op(OpDef(f"ik.{name}", f"index of the {what} along an axis (first, or last with select_last_index; "
                      "NaN counts as the extreme)", ("x",), _argmax_infer, ref,
                      lambda ins, outs, dts, a: Cost(float(_numel(ins[0])), _nbytes(ins, dts[:1]),
                                                     _nbytes(outs, dts[1:])),
                      attrs={"axis": AttrSpec("int"), "keepdims": AttrSpec("bool", False),
                             "select_last_index": AttrSpec("bool", False)},
                      traits=frozenset({"pure", "reduction"})))


_def_arg_reduce("argmax", np.argmax, "maximum")
_def_arg_reduce("argmin", np.argmin, "minimum")


# ---------------------------------------------------------------------------
# Scans


def scan_identity(kind: str, dtype: DType) -> Any:
    """The identity of a scan (or window reduction) ``kind`` in ``dtype``: what an exclusive
    scan starts from and what padding holds."""
    if kind in ("sum", "cumsum"):
        return 0
    if kind in ("prod", "cumprod"):
        return 1
    lowest = kind in ("max", "cummax")
    if dtype.is_float:
        return -math.inf if lowest else math.inf
    info = np.iinfo(dtype.np)
    return int(info.min) if lowest else int(info.max)


_SCANS: dict[str, Callable[..., np.ndarray]] = {
    "cumsum": np.cumsum, "cumprod": np.cumprod,
    "cummax": np.maximum.accumulate, "cummin": np.minimum.accumulate,
}


def _scan_infer(ts, a):
    t = ts[0]
    if t.dtype.is_bool:
        raise OpError("operand must be numeric, got i1")
    try:
        normalize_axis(a["axis"], t.rank)
    except ValueError as e:
        raise OpError(str(e)) from None
    return [t]


def _def_scan(name: str) -> None:
    fn = _SCANS[name]

    def ref(xs, a, ctx):
        x = _f(xs[0])
        dt = ctx.out_types[0].dtype
        ax = normalize_axis(a["axis"], x.ndim)
        rev = a.get("reverse", False)
        if rev:
            x = np.flip(x, ax)
        if x.dtype.kind in "iu" and name in ("cumsum", "cumprod"):
            x = x.astype(np.uint64 if x.dtype.kind == "u" else np.int64)  # wraps like the target type
        with np.errstate(all="ignore"):
            r = fn(x, axis=ax)
        if a.get("exclusive", False) and x.shape[ax]:
            ident = np.full_like(np.take(r, [0], axis=ax), scan_identity(name, dt))
            r = np.concatenate([ident, np.take(r, np.arange(x.shape[ax] - 1), axis=ax)], axis=ax)
        if rev:
            r = np.flip(r, ax)
        return [_out(r, dt)]

    register_op(OpDef(f"ik.{name}", f"{name[3:]} scan along an axis (inclusive unless exclusive; reverse scans "
                      "from the end)", ("x",), _scan_infer, ref, _io_cost(1),
                      attrs={"axis": AttrSpec("int"), "reverse": AttrSpec("bool", False),
                             "exclusive": AttrSpec("bool", False)},
                      traits=frozenset({"pure", "scan", "reorders"})))


for _n in _SCANS:
    _def_scan(_n)


# ---------------------------------------------------------------------------
# Normalisations and softmax


def _softmax_ref(xs, a, ctx):
    x = _f(xs[0])
    ax = a.get("axis", -1)
    with np.errstate(all="ignore"):
        # a row holding +Inf is all NaN, as in torch, JAX and onnxruntime (Inf - Inf)
        m = np.max(x, axis=ax, keepdims=True)
        e = np.exp(x - m)
        r = e / np.sum(e, axis=ax, keepdims=True)
    return [_out(r, ctx.out_types[0].dtype)]


def _log_softmax_ref(xs, a, ctx):
    x = _f(xs[0])
    ax = a.get("axis", -1)
    with np.errstate(all="ignore"):
        m = np.max(x, axis=ax, keepdims=True)
        r = x - m - np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True))
    return [_out(r, ctx.out_types[0].dtype)]


def _axis_infer(ts, a):
    _float_only(ts[0])
    try:
        normalize_axis(a.get("axis", -1), ts[0].rank)
    except ValueError as e:
        raise OpError(str(e)) from None
    return [ts[0]]


for _n, _ref, _doc in (("softmax", _softmax_ref, "softmax along an axis"),
                       ("log_softmax", _log_softmax_ref, "log-softmax along an axis")):
    register_op(OpDef(f"ik.{_n}", _doc, ("x",), _axis_infer, _ref, _io_cost(5),
                      attrs={"axis": AttrSpec("int", -1)}, traits=frozenset({"pure", "reorders"})))


def _norm_infer(ts, a):
    x = ts[0]
    _float_only(x)
    try:
        ax = normalize_axis(a.get("axis", -1), x.rank)
    except ValueError as e:
        raise OpError(str(e)) from None
    norm_shape = x.shape[ax:]
    for t, what in zip(ts[1:], ("weight", "bias")):
        if t.shape != norm_shape and broadcast_shapes(t.shape, norm_shape) != tuple(norm_shape):
            raise OpError(f"{what} shape {shape_str(t.shape)} does not match normalised shape {shape_str(norm_shape)}")
    return [x]


def _layer_norm_ref(xs, a, ctx):
    x = _f(xs[0])
    ax = normalize_axis(a.get("axis", -1), x.ndim)
    axes = tuple(range(ax, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + a.get("eps", 1e-5))
    n = named_operands(ctx.op) if ctx.op is not None else None
    rest = list(xs[1:])
    w = b = None
    if n is not None:
        if n.get("weight") is not None:
            w = rest.pop(0)
        if n.get("bias") is not None:
            b = rest.pop(0)
    else:
        w = rest[0] if rest else None
        b = rest[1] if len(rest) > 1 else None
    if w is not None:
        y = y * _f(w)
    if b is not None:
        y = y + _f(b)
    return [_out(y, ctx.out_types[0].dtype)]


def _rms_norm_ref(xs, a, ctx):
    x = _f(xs[0])
    ax = normalize_axis(a.get("axis", -1), x.ndim)
    axes = tuple(range(ax, x.ndim))
    y = x / np.sqrt(np.mean(x * x, axis=axes, keepdims=True) + a.get("eps", 1e-6))
    if len(xs) > 1:
        y = y * _f(xs[1])
    return [_out(y, ctx.out_types[0].dtype)]


register_op(OpDef("ik.layer_norm", "layer normalisation over dims [axis, rank)", ("x", "weight?", "bias?"),
                  _norm_infer, _layer_norm_ref, _io_cost(8),
                  attrs={"axis": AttrSpec("int", -1), "eps": AttrSpec("float", 1e-5)},
                  traits=frozenset({"pure", "reorders", "norm"})))
register_op(OpDef("ik.rms_norm", "RMS normalisation over dims [axis, rank)", ("x", "weight?"),
                  _norm_infer, _rms_norm_ref, _io_cost(5),
                  attrs={"axis": AttrSpec("int", -1), "eps": AttrSpec("float", 1e-6)},
                  traits=frozenset({"pure", "reorders", "norm"})))


# ---------------------------------------------------------------------------
# Contractions


def _matmul_infer(ts, a):
    x, y = ts
    dt = _same_dtype(ts)
    if x.rank < 2 or y.rank < 2:
        raise OpError(f"operands must have rank >= 2, got {x.rank} and {y.rank}")
    if x.dtype.is_bool:
        raise OpError("operands must be numeric")
    k1, k2 = x.shape[-1], y.shape[-2]
    if k1 != k2 and not (isinstance(k1, SymDim) or isinstance(k2, SymDim)):
        raise OpError(f"contracting dims differ: {shape_str(x.shape)} @ {shape_str(y.shape)}")
    if k1 != k2:
        raise OpError(f"contracting dims differ: {k1} vs {k2}")
    batch = _bcast([TensorType(x.shape[:-2], dt), TensorType(y.shape[:-2], dt)])
    return [TensorType(batch + (x.shape[-2], y.shape[-1]), dt)]


def _acc_dtype(x: np.ndarray) -> Any:
    if x.dtype == np.float64:
        return np.float64
    return np.float32 if is_float_np(x.dtype) else np.int64


def _matmul_ref(xs, a, ctx):
    x, y = xs
    acc = _acc_dtype(x)
    return [_out(np.matmul(x.astype(acc), y.astype(acc)), ctx.out_types[0].dtype)]


def _matmul_cost(ins, outs, dts, a):
    k = ins[0][-1]
    return Cost(2.0 * _numel(outs[0]) * k, _nbytes(ins, dts[:2]), _nbytes(outs, dts[2:]))


register_op(OpDef("ik.matmul", "matrix product over the last two dims, batch dims broadcast", ("lhs", "rhs"),
                  _matmul_infer, _matmul_ref, _matmul_cost,
                  attrs={"tile": AttrSpec("ints", None), "dataflow": AttrSpec("str", None),
                         "layout": AttrSpec("str", None)},
                  traits=frozenset({"pure", "contraction", "reorders"})))


def _contract_dims(ts, a):
    x, y = ts
    lb, rb = a.get("lhs_batch", ()), a.get("rhs_batch", ())
    lc, rc = a.get("lhs_contract", ()), a.get("rhs_contract", ())
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise OpError("batch and contracting dimension lists must pair up")
    for dims, t, side in ((lb + lc, x, "lhs"), (rb + rc, y, "rhs")):
        if len(set(dims)) != len(dims) or any(not 0 <= d < t.rank for d in dims):
            raise OpError(f"{side} dimension numbers {list(dims)} invalid for rank {t.rank}")
    for i, j in zip(lb + lc, rb + rc):
        if x.shape[i] != y.shape[j]:
            raise OpError(f"paired dims differ: lhs dim {i} is {x.shape[i]}, rhs dim {j} is {y.shape[j]}")
    lf = [i for i in range(x.rank) if i not in lb and i not in lc]
    rf = [i for i in range(y.rank) if i not in rb and i not in rc]
    return lb, rb, lc, rc, lf, rf


def _contract_infer(ts, a):
    dt = _same_dtype(ts)
    lb, rb, lc, rc, lf, rf = _contract_dims(ts, a)
    x, y = ts
    shape = tuple(x.shape[i] for i in lb) + tuple(x.shape[i] for i in lf) + tuple(y.shape[i] for i in rf)
    return [TensorType(shape, dt)]


def _contract_ref(xs, a, ctx):
    x, y = xs
    lb, rb, lc, rc, lf, rf = _contract_dims([TensorType(x.shape, DType.f32), TensorType(y.shape, DType.f32)], a)
    letters = "abcdefghijklmnopqrstuvwxyz"
    lhs = [""] * x.ndim
    rhs = [""] * y.ndim
    k = 0
    for i, j in zip(lb, rb):
        lhs[i] = rhs[j] = letters[k]
        k += 1
    for i, j in zip(lc, rc):
        lhs[i] = rhs[j] = letters[k]
        k += 1
    for i in lf:
        lhs[i] = letters[k]
        k += 1
    for j in rf:
        rhs[j] = letters[k]
        k += 1
    out = "".join(lhs[i] for i in lb) + "".join(lhs[i] for i in lf) + "".join(rhs[j] for j in rf)
    acc = _acc_dtype(x)
    r = np.einsum(f"{''.join(lhs)},{''.join(rhs)}->{out}", x.astype(acc), y.astype(acc), optimize=True)
    return [_out(r, ctx.out_types[0].dtype)]


def _contract_cost(ins, outs, dts, a):
    k = 1
    for i in a.get("lhs_contract", ()):
        k *= ins[0][i]
    return Cost(2.0 * _numel(outs[0]) * k, _nbytes(ins, dts[:2]), _nbytes(outs, dts[2:]))


register_op(OpDef(
    "ik.contract", "general contraction (XLA dot_general): out = batch + lhs free + rhs free",
    ("lhs", "rhs"), _contract_infer, _contract_ref, _contract_cost,
    attrs={"lhs_batch": AttrSpec("ints", ()), "rhs_batch": AttrSpec("ints", ()),
           "lhs_contract": AttrSpec("ints"), "rhs_contract": AttrSpec("ints"),
           "tile": AttrSpec("ints", None), "dataflow": AttrSpec("str", None)},
    traits=frozenset({"pure", "contraction", "reorders"})))


# ---------------------------------------------------------------------------
# Shape ops


def _reshape_infer(ts, a):
    shape = a["shape"]
    src = dim_prod(ts[0].shape)
    dst = dim_prod(shape)
    if src != dst:
        raise OpError(f"cannot reshape {shape_str(ts[0].shape)} to {shape_str(shape)}: element counts differ")
    return [TensorType(tuple(shape), ts[0].dtype)]


register_op(OpDef("ik.reshape", "reshape to a shape with the same element count", ("x",),
                  _reshape_infer, lambda xs, a, ctx: [xs[0].reshape(ctx.out_shapes[0])], _view_cost,
                  attrs={"shape": AttrSpec("dims")}, traits=frozenset({"pure", "shape"})))


def _transpose_infer(ts, a):
    perm = a["perm"]
    if sorted(perm) != list(range(ts[0].rank)):
        raise OpError(f"perm {list(perm)} is not a permutation of {ts[0].rank} dims")
    return [TensorType(tuple(ts[0].shape[p] for p in perm), ts[0].dtype)]


register_op(OpDef("ik.transpose", "permute dims: out dim i is in dim perm[i]", ("x",), _transpose_infer,
                  lambda xs, a, ctx: [np.transpose(xs[0], a["perm"])], _move_cost,
                  attrs={"perm": AttrSpec("ints")}, traits=frozenset({"pure", "shape"})))


def _broadcast_infer(ts, a):
    shape = tuple(a["shape"])
    try:
        got = broadcast_shapes(ts[0].shape, shape)
    except ValueError as e:
        raise OpError(str(e)) from None
    if len(got) != len(shape) or any(g != s and s != 1 for g, s in zip(got, shape)):
        raise OpError(f"cannot broadcast {shape_str(ts[0].shape)} to {shape_str(shape)}")
    return [TensorType(shape, ts[0].dtype)]


register_op(OpDef("ik.broadcast", "broadcast to a shape (NumPy rules)", ("x",), _broadcast_infer,
                  lambda xs, a, ctx: [np.broadcast_to(xs[0], ctx.out_shapes[0])], _move_cost,
                  attrs={"shape": AttrSpec("dims")}, traits=frozenset({"pure", "shape", "elementwise"})))


def _slice_infer(ts, a):
    t = ts[0]
    start, limit, step = a["start"], a["limit"], a.get("step") or (1,) * t.rank
    if not (len(start) == len(limit) == len(step) == t.rank):
        raise OpError(f"start/limit/step need {t.rank} entries each")
    shape: list[Dim] = []
    for i, (s, lim, st, d) in enumerate(zip(start, limit, step, t.shape)):
        if st < 1:
            raise OpError(f"step {st} on dim {i} must be positive")
        if isinstance(s, int) and s < 0:
            raise OpError(f"start {s} on dim {i} is negative")
        if isinstance(lim, int) and isinstance(d, int) and (lim > d or (isinstance(s, int) and s > lim)):
            raise OpError(f"slice [{s}:{lim}] on dim {i} is out of range for size {d}")
        n = dim_sub(lim, s)
        if st != 1:
            if not isinstance(n, int):
                raise OpError(f"strided slice of a symbolic extent on dim {i}")
            n = max(0, -(-n // st))
        shape.append(n)
    return [TensorType(tuple(shape), t.dtype)]


def _slice_ref(xs, a, ctx):
    b = ctx.bindings
    idx = tuple(slice(eval_dim(s, b), eval_dim(lim, b), st) for s, lim, st in
                zip(a["start"], a["limit"], a.get("step") or (1,) * xs[0].ndim))
    return [xs[0][idx]]


register_op(OpDef("ik.slice", "static slice start:limit:step per dim", ("x",), _slice_infer, _slice_ref, _move_cost,
                  attrs={"start": AttrSpec("dims"), "limit": AttrSpec("dims"), "step": AttrSpec("ints", None)},
                  traits=frozenset({"pure", "shape"})))


def _concat_infer(ts, a):
    dt = _same_dtype(ts)
    r = ts[0].rank
    try:
        ax = normalize_axis(a["axis"], r)
    except ValueError as e:
        raise OpError(str(e)) from None
    total: Dim = 0
    for t in ts:
        if t.rank != r:
            raise OpError("operands must have equal rank")
        for i, (d0, d) in enumerate(zip(ts[0].shape, t.shape)):
            if i != ax and d0 != d:
                raise OpError(f"operand shapes differ on dim {i}: {shape_str(ts[0].shape)} vs {shape_str(t.shape)}")
        total = dim_add(total, t.shape[ax])
    shape = list(ts[0].shape)
    shape[ax] = total
    return [TensorType(tuple(shape), dt)]


register_op(OpDef("ik.concat", "concatenate along an axis", ("inputs*",), _concat_infer,
                  lambda xs, a, ctx: [np.concatenate(xs, axis=a["axis"])], _move_cost,
                  attrs={"axis": AttrSpec("int")}, traits=frozenset({"pure", "shape"})))


def _split_infer(ts, a):
    t = ts[0]
    try:
        ax = normalize_axis(a["axis"], t.rank)
    except ValueError as e:
        raise OpError(str(e)) from None
    sizes = a["sizes"]
    acc: Dim = 0
    for s in sizes:
        acc = dim_add(acc, s)
    if acc != t.shape[ax]:
        raise OpError(f"split sizes {list(map(str, sizes))} do not add up to dim {ax} of size {t.shape[ax]}")
    outs = []
    for s in sizes:
        shape = list(t.shape)
        shape[ax] = s
        outs.append(TensorType(tuple(shape), t.dtype))
    return outs


def _split_ref(xs, a, ctx):
    ax = normalize_axis(a["axis"], xs[0].ndim)
    bounds = np.cumsum([eval_dim(s, ctx.bindings) for s in a["sizes"]])[:-1]
    return list(np.split(xs[0], bounds, axis=ax))


register_op(OpDef("ik.split", "split along an axis into pieces of the given sizes", ("x",), _split_infer,
                  _split_ref, _move_cost, attrs={"axis": AttrSpec("int"), "sizes": AttrSpec("dims")},
                  traits=frozenset({"pure", "shape", "multi_result"})))


def _gather_infer(ts, a):
    data, idx = ts
    if not idx.dtype.is_int:
        raise OpError(f"indices must be integers, got {idx.dtype}")
    try:
        ax = normalize_axis(a.get("axis", 0), data.rank)
    except ValueError as e:
        raise OpError(str(e)) from None
    return [TensorType(data.shape[:ax] + idx.shape + data.shape[ax + 1:], data.dtype)]


def wrap_indices(idx: np.ndarray, n: int, what: str) -> np.ndarray:
    """Indices in ``[-n, n)`` as int64 in ``[0, n)`` (negative ones wrap, as in ONNX, NumPy and
    torch); IndexError naming the range otherwise, never clamping."""
    idx = np.asarray(idx).astype(np.int64)
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise IndexError(f"{what} index {bad} out of range [-{n}, {n})")
    return np.where(idx < 0, idx + n, idx)


def _gather_ref(xs, a, ctx):
    data, idx = xs
    ax = normalize_axis(a.get("axis", 0), data.ndim)
    return [np.take(data, wrap_indices(idx, data.shape[ax], "gather"), axis=ax)]


def _gather_cost(ins, outs, dts, a):
    return Cost(0.0, _nbytes(outs, dts[2:]) + _nbytes(ins[1:], dts[1:2]), _nbytes(outs, dts[2:]))


register_op(OpDef("ik.gather", "take slices of data along an axis (embedding lookup on axis 0)", ("data", "indices"),
                  _gather_infer, _gather_ref, _gather_cost, attrs={"axis": AttrSpec("int", 0)},
                  traits=frozenset({"pure"})))


def _iota_infer(ts, a):
    shape = a["shape"]
    try:
        normalize_axis(a.get("axis", 0), len(shape))
    except ValueError as e:
        raise OpError(str(e)) from None
    return [TensorType(tuple(shape), a.get("dtype", DType.i64))]


def _iota_ref(xs, a, ctx):
    shape = ctx.out_shapes[0]
    ax = normalize_axis(a.get("axis", 0), len(shape))
    r = np.arange(shape[ax]).reshape([-1 if i == ax else 1 for i in range(len(shape))])
    return [np.broadcast_to(r, shape).astype(ctx.out_types[0].dtype.np)]


register_op(OpDef("ik.iota", "0, 1, 2, ... along an axis, broadcast to a shape", (), _iota_infer, _iota_ref,
                  _io_cost(0), attrs={"shape": AttrSpec("dims"), "axis": AttrSpec("int", 0),
                                      "dtype": AttrSpec("dtype", DType.i64)},
                  traits=frozenset({"pure", "source"})))


def _const_infer(ts, a):
    v = a["value"]
    return [v.type]


register_op(OpDef("ik.constant", "a constant tensor", (), _const_infer, lambda xs, a, ctx: [a["value"].array],
                  _NO_COST, attrs={"value": AttrSpec("dense")}, traits=frozenset({"pure", "source", "constant"})))


def _pad_infer(ts, a):
    t = ts[0]
    pads = a["pads"]
    if len(pads) != 2 * t.rank or any(p < 0 for p in pads):
        raise OpError(f"pads needs {2 * t.rank} non-negative entries (all befores, then all afters)")
    shape = tuple(dim_add(d, pads[i] + pads[i + t.rank]) for i, d in enumerate(t.shape))
    return [TensorType(shape, t.dtype)]


def _pad_ref(xs, a, ctx):
    r = xs[0].ndim
    p = a["pads"]
    return [np.pad(xs[0], [(p[i], p[i + r]) for i in range(r)], constant_values=a.get("value", 0.0))]


register_op(OpDef("ik.pad", "constant padding (befores then afters)", ("x",), _pad_infer, _pad_ref, _move_cost,
                  attrs={"pads": AttrSpec("ints"), "value": AttrSpec("float", 0.0)},
                  traits=frozenset({"pure", "shape"})))


# ---------------------------------------------------------------------------
# Convolution


def _conv_infer(ts, a):
    x, w = ts[0], ts[1]
    _same_dtype(ts)
    if x.rank != 4 or w.rank != 4:
        raise OpError("conv2d wants NCHW input and OIHW weight")
    g = a.get("groups", 1)
    s = a.get("strides", (1, 1))
    p = a.get("padding", (0, 0, 0, 0))
    dl = a.get("dilations", (1, 1))
    cin, wc = x.shape[1], w.shape[1]
    if isinstance(cin, int) and isinstance(wc, int) and cin != wc * g:
        raise OpError(f"input channels {cin} != weight in-channels {wc} x groups {g}")
    if len(ts) > 2 and ts[2].shape != (w.shape[0],):
        raise OpError(f"bias must have shape [{w.shape[0]}]")
    out_hw = []
    for i in range(2):
        d = x.shape[2 + i]
        k = w.shape[2 + i]
        if not isinstance(d, int) or not isinstance(k, int):
            raise OpError("conv2d spatial dims must be static")
        out_hw.append((d + p[i] + p[i + 2] - dl[i] * (k - 1) - 1) // s[i] + 1)
    return [TensorType((x.shape[0], w.shape[0], out_hw[0], out_hw[1]), x.dtype)]


def _conv_ref(xs, a, ctx):
    x, w = _f(xs[0]), _f(xs[1])
    g = a.get("groups", 1)
    s = a.get("strides", (1, 1))
    p = a.get("padding", (0, 0, 0, 0))
    dl = a.get("dilations", (1, 1))
    acc = np.float64 if x.dtype == np.float64 else np.float32
    x = np.pad(x.astype(acc), [(0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])])
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = ctx.out_shapes[0][2:]
    out = np.zeros((n, o, oh, ow), dtype=acc)
    og = o // g
    for gi in range(g):
        xs_g = x[:, gi * cg:(gi + 1) * cg]
        w_g = w[gi * og:(gi + 1) * og].astype(acc)
        for i in range(kh):
            for j in range(kw):
                patch = xs_g[:, :, i * dl[0]: i * dl[0] + s[0] * (oh - 1) + 1: s[0],
                             j * dl[1]: j * dl[1] + s[1] * (ow - 1) + 1: s[1]]
                out[:, gi * og:(gi + 1) * og] += np.einsum("nchw,oc->nohw", patch, w_g[:, :, i, j])
    if len(xs) > 2:
        out += _f(xs[2]).astype(acc).reshape(1, -1, 1, 1)
    return [_out(out, ctx.out_types[0].dtype)]


def _conv_cost(ins, outs, dts, a):
    w = ins[1]
    return Cost(2.0 * _numel(outs[0]) * w[1] * w[2] * w[3], _nbytes(ins, dts[:len(ins)]), _nbytes(outs, dts[len(ins):]))


register_op(OpDef("ik.conv2d", "2-D convolution, NCHW input, OIHW weight", ("x", "weight", "bias?"),
                  _conv_infer, _conv_ref, _conv_cost,
                  attrs={"strides": AttrSpec("ints", (1, 1)), "padding": AttrSpec("ints", (0, 0, 0, 0)),
                         "dilations": AttrSpec("ints", (1, 1)), "groups": AttrSpec("int", 1)},
                  traits=frozenset({"pure", "contraction", "reorders"})))


# ---------------------------------------------------------------------------
# Attention


def _attention_infer(ts, a):
    q, k, v = ts[:3]
    for t in ts[:3]:
        _float_only(t, "q, k and v")
        if t.rank != 4:
            raise OpError(f"q, k, v must be [batch, heads, seq, head_dim], got rank {t.rank}")
    _same_dtype(ts[:3], "q, k and v")
    if q.shape[3] != k.shape[3]:
        raise OpError(f"q and k head dims differ: {q.shape[3]} vs {k.shape[3]}")
    if k.shape[2] != v.shape[2] or k.shape[1] != v.shape[1]:
        raise OpError(f"k and v disagree on heads or sequence: {shape_str(k.shape)} vs {shape_str(v.shape)}")
    hq, hk = q.shape[1], k.shape[1]
    if isinstance(hq, int) and isinstance(hk, int) and (hk == 0 or hq % hk):
        raise OpError(f"query heads {hq} are not a multiple of key/value heads {hk}")
    cap = a.get("softcap", 0.0)
    if not (math.isfinite(cap) and cap >= 0):
        raise OpError(f"softcap must be a finite number >= 0 (0 = no soft-capping), got {cap}")
    scores = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    for t, what in zip(ts[3:], ("mask/bias", "bias")):
        try:
            got = broadcast_shapes(t.shape, scores)
        except ValueError:
            raise OpError(f"{what} shape {shape_str(t.shape)} does not broadcast to scores "
                          f"{shape_str(scores)}") from None
        if len(got) != 4:
            raise OpError(f"{what} must broadcast to rank 4")
    return [TensorType((q.shape[0], q.shape[1], q.shape[2], v.shape[3]), q.dtype)]


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None,
                        bias: np.ndarray | None, scale: float, causal: bool, softcap: float = 0.0) -> np.ndarray:
    """Reference attention: softmax(cap(scale·QKᵀ) + bias, masked) V, grouped heads repeated.

    ``softcap`` > 0 soft-caps the scaled scores before the bias is added:
    ``cap(s) = softcap · tanh(s / softcap)`` (Gemma 2's logit soft-capping); 0 leaves them as is.

    ``mask`` is a boolean keep-mask; masked scores become -inf before softmax.  A
    row with every key masked yields zeros (the convention of FlashAttention and
    onnxruntime), never NaN.  ``causal`` keeps key j for query i when j <= i
    (top-left aligned, as torch's ``is_causal``).
    """
    hq, hk = q.shape[1], k.shape[1]
    if hk != hq:
        k = np.repeat(k, hq // hk, axis=1)
        v = np.repeat(v, hq // hk, axis=1)
    acc = np.float64 if q.dtype == np.float64 else np.float32
    s = np.matmul(q.astype(acc), np.swapaxes(k.astype(acc), -1, -2)) * acc(scale)
    if softcap:
        s = acc(softcap) * np.tanh(s / acc(softcap))
    if bias is not None:
        s = s + bias.astype(acc)
    keep = np.ones(s.shape, dtype=bool)
    if mask is not None:
        keep = keep & np.broadcast_to(mask, s.shape)
    if causal:
        sq, sk = s.shape[-2], s.shape[-1]
        keep = keep & np.tril(np.ones((sq, sk), dtype=bool))
    with np.errstate(all="ignore"):
        s = np.where(keep, s, -np.inf)
        m = np.max(s, axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        e = np.where(keep, np.exp(s - m), 0)
        den = np.sum(e, axis=-1, keepdims=True)
        # a row with no visible key (sum 0) is zeros; a NaN anywhere in the row stays NaN
        p = np.where(den == 0, 0, e / np.where(den == 0, 1, den))
    return np.matmul(p, v.astype(acc))


def _attention_ref(xs, a, ctx):
    n = named_operands(ctx.op) if ctx.op is not None else {}
    rest = list(xs[3:])
    mask = rest.pop(0) if n.get("mask") is not None else None
    bias = rest.pop(0) if n.get("bias") is not None else None
    q, k, v = (_f(x) for x in xs[:3])
    if mask is not None and mask.dtype != np.bool_:
        raise TypeError("attention mask must be i1")
    r = attention_reference(q, k, v, mask, None if bias is None else _f(bias), a["scale"], a.get("causal", False),
                            a.get("softcap", 0.0))
    return [_out(r, ctx.out_types[0].dtype)]


def _attention_cost(ins, outs, dts, a):
    b, h, sq, d = ins[0]
    sk = ins[1][2]
    dv = ins[2][3]
    flops = 2.0 * b * h * sq * sk * (d + dv) + (7.0 if a.get("softcap") else 5.0) * b * h * sq * sk
    return Cost(flops, _nbytes(ins, dts[:len(ins)]), _nbytes(outs, dts[len(ins):]))


register_op(OpDef(
    "ik.attention",
    "fused attention softmax(cap(scale*Q*K^T) + bias, mask, causal) V, cap(s) = softcap*tanh(s/softcap) "
    "when softcap > 0; K/V heads may divide Q heads (GQA)",
    ("q", "k", "v", "mask?", "bias?"), _attention_infer, _attention_ref, _attention_cost,
    attrs={"scale": AttrSpec("float"), "causal": AttrSpec("bool", False),
           "softcap": AttrSpec("float", 0.0, doc="logit soft-cap (Gemma 2): scores become "
                               "softcap*tanh(scores/softcap) before bias and mask; 0 = none")},
    traits=frozenset({"pure", "reorders", "fused"})))


# ---------------------------------------------------------------------------
# Dimension values (added for the JAX frontend): shape-polymorphic code uses a
# symbolic dim as data, e.g. jnp.mean over a dim of size S divides by S
# (jaxpr `dim_as_value`, StableHLO `get_dimension_size`).


def _dim_value_infer(ts, a):
    if len(a["dim"]) != 1:
        raise OpError(f"attribute 'dim' must hold exactly one dimension, got {len(a['dim'])}")
    dt: DType = a.get("dtype", DType.i64)
    if dt.is_bool:
        raise OpError("dtype must be numeric, got i1")
    return [TensorType((), dt)]


def _dim_value_ref(xs, a, ctx):
    return [np.array(eval_dim(a["dim"][0], ctx.bindings), dtype=ctx.out_types[0].dtype.np)]


register_op(OpDef("ik.dim_value", "the value of a (symbolic) dimension as a rank-0 tensor", (),
                  _dim_value_infer, _dim_value_ref, _NO_COST,
                  attrs={"dim": AttrSpec("dims"), "dtype": AttrSpec("dtype", DType.i64)},
                  traits=frozenset({"pure", "source"})))


# ---------------------------------------------------------------------------
# Regions and terminators


def _fused_infer(ts, a):
    # Result types come from the region's yield; checked by the verifier.
    raise OpError("ik.fused result types come from its region")


def _fused_ref(xs, a, ctx):
    assert ctx.run_region is not None and ctx.op is not None
    return ctx.run_region(ctx.op.regions[0], xs)


def _fused_cost(ins, outs, dts, a):
    # A fused region reads its inputs and writes its outputs once; the inner
    # FLOPs are summed by the cost model that walks the region.
    n = len(ins)
    return Cost(0.0, _nbytes(ins, dts[:n]), _nbytes(outs, dts[n:]))


register_op(OpDef("ik.fused", "a region of ops executed as one kernel", ("inputs*",), _fused_infer, _fused_ref,
                  _fused_cost, attrs={"kind": AttrSpec("str", "elementwise")},
                  traits=frozenset({"pure", "region"}), has_region=True))

register_op(OpDef("ik.yield", "terminator of a fused region", ("values*",), lambda ts, a: [],
                  lambda xs, a, ctx: [], _NO_COST, traits=frozenset({"terminator"})))
register_op(OpDef("func.return", "function return", ("values*",), lambda ts, a: [],
                  lambda xs, a, ctx: [], _NO_COST, traits=frozenset({"terminator"})))


# ---------------------------------------------------------------------------
# Entry points used by the verifier, the builder and the interpreter


_INFER_CACHE: dict[tuple, list[TensorType]] = {}


def infer_types(name: str, operand_types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    """Result types of op ``name``; raises :class:`OpError` with a reason.

    Results are memoised on (name, operand types, attributes): inference is a
    pure function of those, and Transformer layers repeat the same few shapes.
    """
    if name == "ik.constant" and not operand_types and len(attrs) == 1:
        # The one attribute-only op that every module is full of: its type is its value's.
        v = attrs.get("value")
        if type(v) is Dense:
            return [v.type]
    if name == "ik.constant" or not operand_types:
        return _infer_types(name, operand_types, attrs)
    try:
        key = (name, tuple(operand_types), tuple(attrs.items()))
        hit = _INFER_CACHE.get(key)
    except TypeError:  # an unhashable attribute value (bad input): no caching
        return _infer_types(name, operand_types, attrs)
    if hit is None:
        hit = _infer_types(name, operand_types, attrs)
        if len(_INFER_CACHE) < 100_000:
            _INFER_CACHE[key] = hit
    return list(hit)


def _infer_types(name: str, operand_types: Sequence[TensorType], attrs: Mapping[str, Any]) -> list[TensorType]:
    d = get_op(name)
    check_operand_count(d, len(operand_types), attrs)
    full = d.with_defaults(attrs)
    for k, spec in d.attrs.items():
        if k in full:
            spec.check(k, full[k])
        elif spec.default is REQUIRED:
            raise OpError(f"missing required attribute '{k}'")
    for k in attrs:
        if k not in d.attrs and k != SEGMENTS and not k.startswith("ik.") and not k.startswith("_"):
            raise OpError(f"unknown attribute '{k}' (known: {', '.join(d.attrs) or 'none'})")
    if d.verify is not None:
        d.verify(list(operand_types), full)
    return d.infer(list(operand_types), full)


def op_cost(op: Op, bindings: Mapping[str, int]) -> Cost:
    """FLOPs and bytes of one op under symbol bindings (nested regions included)."""
    d = OPS[op.name]
    ins = [tuple(eval_dim(x, bindings) for x in v.type.shape) for v in op.operands]
    outs = [tuple(eval_dim(x, bindings) for x in r.type.shape) for r in op.results]
    dts = [v.type.dtype for v in op.operands] + [r.type.dtype for r in op.results]
    c = d.cost(ins, outs, dts, d.with_defaults(op.attrs))
    if op.regions:
        inner = Cost()
        for r in op.regions:
            for o in r:
                inner = inner + op_cost(o, bindings)
        c = Cost(inner.flops, c.bytes_read, c.bytes_written)
    return c


__all__ = [
    "OPS", "OpDef", "AttrSpec", "Cost", "OpError", "RefContext", "register_op", "get_op", "infer_types",
    "op_cost", "named_operands", "segment_sizes", "SEGMENTS", "UNARY", "BINARY", "COMPARE", "LOGICAL",
    "attention_reference", "REQUIRED", "scan_identity", "wrap_indices", "bitcast_type", "to_float8",
]
