"""ONNX op converters: one function per ONNX op (or family), registered in a table.

Design note: every ONNX value becomes an :class:`OnnxValue` that is either a runtime IR
value, or a tensor whose elements are *known at import* (initializers,
``Constant``, and everything computed from them and from ``Shape``).  Known
integer elements may be symbolic dims (:class:`~irkit.ir.types.SymDim`), so the
shape subgraphs exporters write — ``Shape → Gather → Unsqueeze → Concat →
Reshape``, ``Slice(Shape)``, ``Range(0, S)``, ``Where(Equal(shape, -1), ...)`` —
fold at import into attributes (``ik.reshape{shape = [B, S, 2, 32]}``) instead
of becoming integer tensors at run time.  A known value becomes an IR constant
only when a runtime op consumes it; a symbolic one (``S`` used as data) becomes a
small runtime computation, so folding can never change meaning.

Only integer and boolean tensors (and tiny float ones, for pure data movement)
are folded: float arithmetic on constants is left to the IR, so the float64
oracle sees the model's own operations.

A converter receives the :class:`Emitter` and a :class:`Node` and returns one
:class:`OnnxValue` (or None) per node output.  It raises :class:`Unsupported` for a
feature irkit does not translate (collected and reported with every other
unsupported op), or :class:`~irkit.frontends.common.FrontendError` for a broken
model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import ml_dtypes
import numpy as np

from irkit.errors import Unsupported
from irkit.frontends.common import ConverterTable, FrontendError
from irkit.frontends.onnx_load import (
    MAX_ELEMENTS,
    ONNX_DTYPES,
    LoadedModel,
    ir_dtype,
    tensor_to_numpy,
)
from irkit.ir.builder import Builder
from irkit.ir.core import Dense, Location, Value
from irkit.ir.ops import OPS
from irkit.ir.types import (
    Dim,
    DType,
    SymDim,
    broadcast_shapes,
    dim_add,
    dim_floordiv,
    dim_mul,
    dim_prod,
    dim_sub,
    shape_str,
)

# Integer/bool tensors up to this many elements fold at import.
FOLD_LIMIT = 1 << 16
# Float tensors up to this many elements may be moved (reshaped, sliced...) at import.
FLOAT_MOVE_LIMIT = 64
_INT64_MAX = 2**63 - 1


class _NoFold(Exception):
    """An import-time evaluation cannot decide the value; emit runtime ops instead."""


# ---------------------------------------------------------------------------
# Values


class OnnxValue:
    """An ONNX value during import: a runtime IR value and/or elements known at import."""

    __slots__ = ("dtype", "known", "resource", "shape", "value")

    def __init__(self, dtype: DType, shape: tuple[Dim, ...], value: Value | None = None,
                 known: np.ndarray | None = None, resource: str | None = None):
        self.dtype = dtype
        self.shape = tuple(shape)
        self.value = value
        self.known = known
        self.resource = resource

    @staticmethod
    def of(v: Value) -> OnnxValue:
        return OnnxValue(v.type.dtype, v.type.shape, value=v)

    @staticmethod
    def const(arr: np.ndarray, dtype: DType) -> OnnxValue:
        k = normalize_known(np.asarray(arr), dtype)
        return OnnxValue(dtype, k.shape, known=k)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_known(self) -> bool:
        return self.known is not None

    @property
    def is_symbolic(self) -> bool:
        return self.known is not None and self.known.dtype == object

    def __repr__(self) -> str:
        what = "known" if self.known is not None else "runtime"
        return f"<OnnxValue {self.dtype} {shape_str(self.shape)} {what}>"


def normalize_known(arr: np.ndarray, dtype: DType) -> np.ndarray:
    """Known elements in canonical form: an object array only while a SymDim remains."""
    if arr.dtype == object:
        flat = list(arr.flat)
        if any(isinstance(e, SymDim) for e in flat):
            if not (dtype.is_int):
                raise _NoFold()
            out = np.empty(arr.shape, dtype=object)
            for i, e in enumerate(flat):
                out.flat[i] = e if isinstance(e, SymDim) else int(e)
            return out
        if dtype.is_bool:
            return np.array([bool(e) for e in flat], dtype=np.bool_).reshape(arr.shape)
        return np.array([e for e in flat], dtype=dtype.np).reshape(arr.shape) if flat else \
            np.zeros(arr.shape, dtype=dtype.np)
    if arr.dtype != dtype.np:
        with np.errstate(all="ignore"):
            arr = arr.astype(dtype.np)
    return arr


def _as_object(arr: np.ndarray) -> np.ndarray:
    if arr.dtype == object:
        return arr
    out = np.empty(arr.shape, dtype=object)
    for i, e in enumerate(arr.flat):
        out.flat[i] = e.item() if hasattr(e, "item") else e
    return out


def _sign(d: Dim) -> int | None:
    """The sign of a dim expression when it is decidable (symbols are >= 1), else None."""
    if isinstance(d, int):
        return (d > 0) - (d < 0)
    coefs = [c for _, c in d.terms]
    if all(c >= 0 for c in coefs) and sum(coefs) > 0:
        return 1
    if all(c <= 0 for c in coefs) and sum(coefs) < 0:
        return -1
    return None


def _to_dim(e: Any) -> Dim:
    if isinstance(e, SymDim):
        return e
    if isinstance(e, (bool, np.bool_)):
        return int(e)
    if isinstance(e, (int, np.integer)):
        return int(e)
    if isinstance(e, (float, np.floating)) and float(e).is_integer():
        return int(e)
    raise _NoFold()


def _sym_div(a: Any, b: Any) -> Dim:
    a, b = _to_dim(a), _to_dim(b)
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise _NoFold()
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    qd = dim_floordiv(a, b)
    if qd is None:
        raise _NoFold()
    return qd


def _sym_mod(a: Any, b: Any) -> Dim:
    a, b = _to_dim(a), _to_dim(b)
    if isinstance(a, int) and isinstance(b, int) and b != 0:
        return a % b
    raise _NoFold()


def _sym_fmod(a: Any, b: Any) -> Dim:
    a, b = _to_dim(a), _to_dim(b)
    if isinstance(a, int) and isinstance(b, int) and b != 0:
        return int(math.fmod(a, b))
    raise _NoFold()


def _sym_cmp(a: Any, b: Any) -> int:
    s = _sign(dim_sub(_to_dim(a), _to_dim(b)))
    if s is None:
        raise _NoFold()
    return s


def _sym_order(a: Any, b: Any) -> int:
    """1 when ``a >= b`` for every value of the symbols (each >= 1), -1 when ``a <= b``, 0 when equal;
    enough for Max/Min, where a tie may go either way: ``max(0, 1 - S)`` is 0."""
    d = dim_sub(_to_dim(a), _to_dim(b))
    if isinstance(d, int):
        return (d > 0) - (d < 0)
    coefs = [c for m, c in d.terms if m]
    least = sum(c for _, c in d.terms)  # the value with every symbol at 1
    if all(c >= 0 for c in coefs) and least >= 0:
        return 1
    if all(c <= 0 for c in coefs) and least <= 0:
        return -1
    raise _NoFold()


def _sym_pow(a: Any, b: Any) -> Dim:
    a, b = _to_dim(a), _to_dim(b)
    if isinstance(a, int) and isinstance(b, int) and b >= 0:
        return a**b
    raise _NoFold()


def _sym_abs(a: Any) -> Dim:
    a = _to_dim(a)
    s = _sign(a)
    if s is None:
        raise _NoFold()
    return a if s >= 0 else dim_mul(-1, a)


# Integer ops on known elements: ONNX name -> scalar function over int | SymDim.
_INT_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "Add": lambda a, b: dim_add(_to_dim(a), _to_dim(b)),
    "Sub": lambda a, b: dim_sub(_to_dim(a), _to_dim(b)),
    "Mul": lambda a, b: dim_mul(_to_dim(a), _to_dim(b)),
    "Div": _sym_div,
    "Pow": _sym_pow,
    "Max": lambda a, b: a if _sym_order(a, b) >= 0 else b,
    "Min": lambda a, b: a if _sym_order(a, b) <= 0 else b,
    "Equal": lambda a, b: _sym_cmp(a, b) == 0,
    "Less": lambda a, b: _sym_cmp(a, b) < 0,
    "LessOrEqual": lambda a, b: _sym_cmp(a, b) <= 0,
    "Greater": lambda a, b: _sym_cmp(a, b) > 0,
    "GreaterOrEqual": lambda a, b: _sym_cmp(a, b) >= 0,
}


def _apply_known(fn: Callable, *arrays: np.ndarray) -> np.ndarray:
    """Apply a scalar function elementwise with broadcasting over object arrays."""
    uf = np.frompyfunc(fn, len(arrays), 1)
    try:
        out = uf(*(_as_object(a) for a in arrays))
    except (TypeError, ZeroDivisionError, OverflowError):
        raise _NoFold() from None
    return np.asarray(out, dtype=object).reshape(np.broadcast_shapes(*(a.shape for a in arrays)))


# ---------------------------------------------------------------------------
# Nodes and the emitter


@dataclass
class Node:
    """One ONNX node as a converter sees it."""

    proto: Any
    name: str
    op_type: str
    domain: str
    inputs: list[OnnxValue | None]
    outputs: list[str]
    attrs: dict[str, Any]
    used: list[bool]  # whether each output is consumed by a node or a graph output

    def input(self, i: int) -> OnnxValue | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def req(self, i: int, what: str = "") -> OnnxValue:
        t = self.input(i)
        if t is None:
            raise FrontendError(f"node '{self.name}' ({self.op_type}): required input {i}"
                                f"{' (' + what + ')' if what else ''} is missing")
        return t

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    @property
    def n_outputs(self) -> int:
        return len(self.outputs)


class Emitter:
    """Builds IR for converters: materialises known values, emits ops at the node's location."""

    def __init__(self, lm: LoadedModel, builder: Builder):
        self.lm = lm
        self.b = builder
        self.loc = Location.unknown()
        self.node: Node | None = None
        self._dim_cache: dict[SymDim, Value] = {}

    @property
    def source(self) -> str:
        return self.lm.source

    @property
    def opset(self) -> int:
        return self.lm.opset

    # -- emission -----------------------------------------------------------
    def emit(self, name: str, operands: Sequence[Value | None], **attrs: Any) -> list[Value]:
        op = self.b.create(name, list(operands), {k: v for k, v in attrs.items() if v is not None}, loc=self.loc)
        return list(op.results)

    def op(self, name: str, *operands: Value | None, **attrs: Any) -> Value:
        return self.emit(name, operands, **attrs)[0]

    def constant(self, arr: np.ndarray, dtype: DType, name: str | None = None) -> Value:
        arr = np.asarray(arr)
        if arr.size == 0 and arr.ndim:  # an empty tensor: a broadcast of a scalar (nothing to store)
            return self.op("ik.broadcast", self.op("ik.constant", value=Dense.splat(0, (), dtype)), shape=arr.shape)
        if arr.size > 1 and arr.strides and all(s == 0 for s in arr.strides):
            d = Dense.splat(arr.reshape(-1)[0], arr.shape, dtype).with_resource(name)
        else:
            d = Dense(arr, dtype, resource=name)
        return self.op("ik.constant", value=d)

    def scalar(self, v: float | bool, dtype: DType) -> Value:
        return self.op("ik.constant", value=Dense.splat(v, (), dtype))

    # -- values -------------------------------------------------------------
    def ir(self, t: OnnxValue) -> Value:
        """The runtime IR value of ``t``, creating a constant (or a dim computation) once."""
        if t.value is None:
            assert t.known is not None
            if t.known.dtype == object:
                t.value = self._materialise_symbolic(t.known, t.dtype)
            else:
                t.value = self.constant(t.known, t.dtype, t.resource)
        return t.value

    def dim_value(self, d: Dim) -> Value:
        """A rank-0 i64 runtime value equal to dim ``d`` (symbols bound from the input shapes)."""
        if isinstance(d, int):
            return self.constant(np.array(d, dtype=np.int64), DType.i64)
        if d not in self._dim_cache:
            if "ik.dim_value" in OPS:
                self._dim_cache[d] = self.op("ik.dim_value", dim=(d,), dtype=DType.i64)
            else:
                # Without ik.dim_value: each monomial is the size of a broadcast of ones.
                total: Value | None = None
                for mono, coef in d.terms:
                    term = self.constant(np.array(coef, dtype=np.int64), DType.i64)
                    if mono:
                        ones = self.op("ik.broadcast", self.scalar(1, DType.i64),
                                       shape=tuple(SymDim.symbol(s) for s in mono))
                        size = self.op("ik.reduce_sum", ones, axes=(), keepdims=False)
                        term = size if coef == 1 else self.op("ik.mul", size, term)
                    total = term if total is None else self.op("ik.add", total, term)
                assert total is not None
                self._dim_cache[d] = total
        return self._dim_cache[d]

    def _materialise_symbolic(self, k: np.ndarray, dtype: DType) -> Value:
        if k.size == 1:
            e = k.reshape(-1)[0]
            v = self.dim_value(e if isinstance(e, SymDim) else int(e))
            if k.shape != ():
                v = self.op("ik.reshape", v, shape=tuple(k.shape))
        else:
            parts = [self.op("ik.reshape", self.dim_value(e if isinstance(e, SymDim) else int(e)), shape=(1,))
                     for e in k.flat]
            v = self.op("ik.reshape", self.op("ik.concat", *parts, axis=0), shape=tuple(k.shape))
        return v if dtype is DType.i64 else self.op("ik.cast", v, to=dtype)

    def cast(self, t: OnnxValue, dtype: DType) -> OnnxValue:
        """``t`` converted to ``dtype`` (folded when known and exact)."""
        if t.dtype is dtype:
            return t
        if t.known is not None and t.known.dtype != object and t.known.size <= FOLD_LIMIT and \
                (not t.dtype.is_float or not dtype.is_float) and not (t.dtype.is_float8 or dtype.is_float8):
            return OnnxValue.const(_cast_array(t.known, dtype), dtype)
        return OnnxValue.of(self.op("ik.cast", self.ir(t), to=dtype))

    def same_dtype(self, node: Node, *ts: OnnxValue) -> DType:
        dts = {t.dtype for t in ts}
        if len(dts) != 1:
            raise FrontendError(f"node '{node.name}' ({node.op_type}): operands have different element types "
                                f"({', '.join(str(t.dtype) for t in ts)}); the model is not type-correct")
        return ts[0].dtype

    def fallback_shape(self, name: str) -> tuple[Dim, ...] | None:
        """The shape ONNX shape inference gives value ``name``, when every dim is known (importer overrides)."""
        return None

    # -- import-time values -----------------------------------------------------
    def dims(self, t: OnnxValue | None, node: Node, what: str) -> list[Dim]:
        """A known 0-D/1-D integer tensor as a list of dims (symbolic allowed)."""
        if t is None:
            raise FrontendError(f"node '{node.name}' ({node.op_type}): input '{what}' is missing")
        if t.known is None:
            raise Unsupported(f"{node.op_type} whose '{what}' is computed at run time from tensor data "
                              "(a data-dependent shape)")
        if not (t.dtype.is_int or t.dtype.is_bool) or t.known.ndim > 1:
            raise FrontendError(f"node '{node.name}' ({node.op_type}): '{what}' must be a 1-D integer tensor, "
                                f"got {t.dtype} of shape {shape_str(t.shape)}")
        return [e if isinstance(e, SymDim) else int(e) for e in t.known.reshape(-1).tolist()]

    def ints(self, t: OnnxValue | None, node: Node, what: str) -> list[int]:
        """A known integer tensor with no symbolic elements, as Python ints."""
        ds = self.dims(t, node, what)
        if any(isinstance(d, SymDim) for d in ds):
            raise Unsupported(f"{node.op_type} whose '{what}' depends on a dynamic dim ({', '.join(map(str, ds))})")
        return [d for d in ds if isinstance(d, int)]

    def scalar_value(self, t: OnnxValue | None, node: Node, what: str) -> Any:
        if t is None:
            return None
        if t.known is None:
            raise Unsupported(f"{node.op_type} whose '{what}' is computed at run time")
        if t.known.size != 1:
            raise FrontendError(f"node '{node.name}' ({node.op_type}): '{what}' must hold one element, "
                                f"got shape {shape_str(t.shape)}")
        e = t.known.reshape(-1)[0]
        return e if isinstance(e, SymDim) else e.item() if hasattr(e, "item") else e


def known_array(t: OnnxValue) -> np.ndarray:
    """``t``'s elements known at import; callers have checked ``t.known`` (or :func:`foldable`) first."""
    assert t.known is not None, "the value is not known at import"
    return t.known


def int_shape(shape: Sequence[Dim]) -> tuple[int, ...]:
    """``shape`` as ints; callers have checked that every dim is static."""
    out = tuple(d for d in shape if isinstance(d, int))
    assert len(out) == len(shape), f"dynamic dims in {shape_str(shape)}"
    return out


def _cast_array(a: np.ndarray, dtype: DType) -> np.ndarray:
    with np.errstate(all="ignore"):
        if dtype.is_int and a.dtype.kind == "f":
            return np.trunc(a.astype(np.float64)).astype(dtype.np)
        if dtype.is_bool:
            return a != 0
        return a.astype(dtype.np)


def foldable(*ts: OnnxValue | None, move: bool = False) -> bool:
    """Whether all of ``ts`` are known and small enough to evaluate at import.

    Integer and boolean tensors fold up to :data:`FOLD_LIMIT` elements; float
    tensors only for pure data movement (``move``) and only when tiny.
    """
    for t in ts:
        if t is None:
            continue
        if t.known is None:
            return False
        if t.dtype.is_int or t.dtype.is_bool:
            if t.known.size > FOLD_LIMIT:
                return False
        elif not move or t.known.size > FLOAT_MOVE_LIMIT:
            return False
    return True


# ---------------------------------------------------------------------------
# Registry


Converter = Callable[[Emitter, Node], list[OnnxValue | None]]


def onnx_key(op_type: str, domain: str = "") -> tuple[str, str]:
    """The table key of an ONNX op: ``(domain, op_type)``, the default domain being ``""``."""
    return (domain, op_type)


CONVERTERS = ConverterTable("onnx", key=onnx_key)
converter = CONVERTERS.converter
"""Register a converter under ONNX op types (``@converter("Relu")``, ``domain=`` for others)."""


def supported_ops() -> list[str]:
    """Every ONNX op the importer translates, as ``domain::Op`` (default domain bare)."""
    from irkit.frontends import onnx_nn, onnx_rnn, onnx_signal, onnx_tensor, onnx_text  # noqa: F401 - their converters register on import

    keys = [cast("tuple[str, str]", k) for k in CONVERTERS]  # onnx_key: (domain, op type)
    return sorted(f"{d}::{t}" if d else t for d, t in keys)


def _axis(node: Node, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise FrontendError(f"node '{node.name}' ({node.op_type}): axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def _reshape(cx: Emitter, t: OnnxValue, shape: Sequence[Dim]) -> OnnxValue:
    shape = tuple(shape)
    if tuple(t.shape) == shape:
        return t
    if foldable(t, move=True) and all(isinstance(d, int) for d in shape):
        return OnnxValue(t.dtype, shape, known=known_array(t).reshape(int_shape(shape)))
    if 0 in shape and all(isinstance(d, int) for d in shape):
        # No elements: the result is its shape alone (and no target has to reshape an empty buffer).
        return OnnxValue.of(cx.constant(np.zeros(int_shape(shape), dtype=t.dtype.np), t.dtype))
    return OnnxValue.of(cx.op("ik.reshape", cx.ir(t), shape=shape))


# ---------------------------------------------------------------------------
# Sources: constants, shapes, ranges


@converter("Constant")
def _constant(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    a = node.attrs
    if "value" in a:
        arr, dt = tensor_to_numpy(a["value"], cx.lm, f"node '{node.name}' (Constant) value")
        return [OnnxValue(dt, arr.shape, known=arr)]
    if "value_float" in a:
        return [OnnxValue.const(np.array(a["value_float"], dtype=np.float32), DType.f32)]
    if "value_floats" in a:
        return [OnnxValue.const(np.array(list(a["value_floats"]), dtype=np.float32), DType.f32)]
    if "value_int" in a:
        return [OnnxValue.const(np.array(a["value_int"], dtype=np.int64), DType.i64)]
    if "value_ints" in a:
        return [OnnxValue.const(np.array(list(a["value_ints"]), dtype=np.int64), DType.i64)]
    raise Unsupported("Constant holding " + (", ".join(a) or "nothing") + " (only numeric tensors are supported)")


@converter("Shape")
def _shape(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    r = x.rank
    start = node.attr("start", 0)
    end = node.attr("end", r)
    dims = list(x.shape)[slice(start, end)]
    arr = np.empty((len(dims),), dtype=object)
    for i, d in enumerate(dims):
        arr[i] = d
    return [OnnxValue.const(arr, DType.i64)]


@converter("Size")
def _size(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    n = dim_prod(node.req(0).shape)
    arr = np.empty((), dtype=object)
    arr[()] = n
    return [OnnxValue.const(arr, DType.i64)]


@converter("ConstantOfShape")
def _constant_of_shape(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    shape = tuple(cx.dims(node.req(0), node, "shape"))
    v = node.attr("value")
    if v is not None:
        arr, dt = tensor_to_numpy(v, cx.lm, f"node '{node.name}' (ConstantOfShape) value")
        if arr.size != 1:
            raise FrontendError(f"node '{node.name}' (ConstantOfShape): value must hold one element")
        fill = arr.reshape(-1)[0]
    else:
        fill, dt = np.float32(0.0), DType.f32
    _check_shape(node, shape)
    if all(isinstance(d, int) for d in shape):
        ishape = int_shape(shape)
        n = int(np.prod(ishape, dtype=np.int64)) if ishape else 1
        if n <= FOLD_LIMIT and (dt.is_int or dt.is_bool or n <= FLOAT_MOVE_LIMIT):
            return [OnnxValue.const(np.full(ishape, fill, dtype=dt.np), dt)]
    s = cx.constant(np.array(fill, dtype=dt.np), dt)
    return [OnnxValue.of(cx.op("ik.broadcast", s, shape=shape))]


def _check_shape(node: Node, shape: Sequence[Dim]) -> None:
    n = 1
    for d in shape:
        if isinstance(d, int):
            if d < 0:
                raise FrontendError(f"node '{node.name}' ({node.op_type}): negative dim {d} in shape "
                                    f"{shape_str(shape)}")
            n *= d
            if n > MAX_ELEMENTS:
                raise FrontendError(f"node '{node.name}' ({node.op_type}): shape {shape_str(shape)} has more "
                                    "than 2^40 elements")


@converter("Range")
def _range(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    st, lim, de = node.req(0, "start"), node.req(1, "limit"), node.req(2, "delta")
    dt = cx.same_dtype(node, st, lim, de)
    start = cx.scalar_value(st, node, "start")
    limit = cx.scalar_value(lim, node, "limit")
    delta = cx.scalar_value(de, node, "delta")
    if isinstance(delta, SymDim) or delta == 0:
        raise Unsupported("Range with a zero or symbolic delta")
    symbolic = isinstance(start, SymDim) or isinstance(limit, SymDim)
    if not symbolic:
        n = max(math.ceil((limit - start) / delta), 0)
        if n > MAX_ELEMENTS:
            raise FrontendError(f"node '{node.name}' (Range): {n} elements is absurd")
        if n <= FOLD_LIMIT and (dt.is_int or n <= FLOAT_MOVE_LIMIT):
            vals = np.asarray(start, dtype=dt.np) + np.arange(n, dtype=dt.np) * np.asarray(delta, dtype=dt.np)
            return [OnnxValue.const(vals.astype(dt.np), dt)]
        count: Dim = n
    else:
        if not dt.is_int:
            raise Unsupported("float Range with dynamic bounds")
        diff = dim_sub(_to_dim(limit), _to_dim(start))
        q = dim_floordiv(diff, delta) if delta > 0 else dim_floordiv(dim_mul(-1, diff), -delta)
        if q is None:
            raise Unsupported(f"Range over {diff} with step {delta} (not provably exact)")
        count = q
    idx_dt = DType.i64
    v = cx.op("ik.iota", shape=(count,), axis=0, dtype=idx_dt)
    if dt is not idx_dt:
        v = cx.op("ik.cast", v, to=dt)
    if delta != 1:
        v = cx.op("ik.mul", v, cx.scalar(delta, dt))
    if not (isinstance(start, (int, float)) and start == 0):
        sv = cx.dim_value(start) if isinstance(start, SymDim) else cx.scalar(start, dt)
        if isinstance(start, SymDim) and dt is not DType.i64:
            sv = cx.op("ik.cast", sv, to=dt)
        v = cx.op("ik.add", v, sv)
    return [OnnxValue.of(v)]


# ---------------------------------------------------------------------------
# Elementwise


_NP_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Neg": np.negative, "Abs": np.abs, "Relu": lambda a: np.maximum(a, 0), "Sign": np.sign}
_UNARY = {
    "Neg": "ik.neg", "Abs": "ik.abs", "Exp": "ik.exp", "Log": "ik.log", "Sqrt": "ik.sqrt",
    "Reciprocal": "ik.reciprocal", "Tanh": "ik.tanh", "Erf": "ik.erf", "Sigmoid": "ik.sigmoid",
    "Sin": "ik.sin", "Cos": "ik.cos", "Floor": "ik.floor", "Ceil": "ik.ceil", "Relu": "ik.relu",
    "Sign": "ik.sign", "Tan": "ik.tan", "Asin": "ik.asin", "Acos": "ik.acos", "Atan": "ik.atan",
    "Sinh": "ik.sinh", "Cosh": "ik.cosh", "Asinh": "ik.asinh", "Acosh": "ik.acosh", "Atanh": "ik.atanh",
    "Round": "ik.round", "IsNaN": "ik.isnan",
}


@converter(*_UNARY)
def _unary(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    if node.op_type in ("Neg", "Abs", "Relu", "Sign") and foldable(x) and x.dtype.is_int:
        if known_array(x).dtype != object:  # plain integers: vectorised
            np_fn = _NP_UNARY[node.op_type]
            return [OnnxValue.const(np_fn(known_array(x)), x.dtype)]
        fn = {"Neg": lambda a: dim_mul(-1, _to_dim(a)), "Abs": _sym_abs,
              "Relu": lambda a: a if _sym_cmp(a, 0) >= 0 else 0,
              "Sign": lambda a: _sym_cmp(a, 0)}[node.op_type]
        try:
            return [OnnxValue.const(_apply_known(fn, known_array(x)), x.dtype)]
        except _NoFold:
            pass
    return [OnnxValue.of(cx.op(_UNARY[node.op_type], cx.ir(x)))]


_BINARY = {"Add": "ik.add", "Sub": "ik.sub", "Mul": "ik.mul", "Div": "ik.div", "Pow": "ik.pow",
           "Max": "ik.max", "Min": "ik.min"}
_COMPARE = {"Equal": "ik.eq", "Less": "ik.lt", "LessOrEqual": "ik.le", "Greater": "ik.gt",
            "GreaterOrEqual": "ik.ge"}


_NUMERIC_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Max": np.maximum, "Min": np.minimum,
    "Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal, "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal,
}


def _numeric_binary(op_type: str, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """Vectorised integer folding when neither side holds a symbolic dim (None: use the slow path)."""
    if a.dtype == object or b.dtype == object:
        return None
    if op_type == "Div":
        if np.any(b == 0):
            return None
        # ONNX integer division truncates toward zero.
        q = np.abs(a) // np.abs(b)
        return np.where((a < 0) != (b < 0), -q, q)
    fn = _NUMERIC_BINARY.get(op_type)
    return None if fn is None else fn(a, b)


def _binary(cx: Emitter, node: Node, op_type: str, a: OnnxValue, b: OnnxValue) -> OnnxValue:
    if op_type == "Pow" and a.dtype != b.dtype:
        b = cx.cast(b, a.dtype)  # ONNX Pow lets the exponent have its own type
    dt = cx.same_dtype(node, a, b)
    if foldable(a, b) and (dt.is_int or dt.is_bool):
        rdt = DType.bool if op_type in _COMPARE else dt
        fast = _numeric_binary(op_type, known_array(a), known_array(b))
        if fast is not None:
            return OnnxValue.const(fast, rdt)
        try:
            out = _apply_known(_INT_BINARY[op_type], known_array(a), known_array(b))
            return OnnxValue.const(out, rdt)
        except _NoFold:
            pass
    name = _BINARY.get(op_type) or _COMPARE[op_type]
    return OnnxValue.of(cx.op(name, cx.ir(a), cx.ir(b)))


@converter(*_BINARY, *_COMPARE)
def _binary_node(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    if node.op_type in ("Max", "Min"):
        return _variadic(cx, node)
    return [_binary(cx, node, node.op_type, node.req(0), node.req(1))]


@converter("Sum", "Mean")
def _variadic(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    xs = [t for t in node.inputs if t is not None]
    if not xs:
        raise FrontendError(f"node '{node.name}' ({node.op_type}): needs at least one input")
    kind = {"Sum": "Add", "Mean": "Add", "Max": "Max", "Min": "Min"}[node.op_type]
    acc = xs[0]
    for t in xs[1:]:
        acc = _binary(cx, node, kind, acc, t)
    if node.op_type == "Mean" and len(xs) > 1:
        acc = OnnxValue.of(cx.op("ik.div", cx.ir(acc), cx.scalar(len(xs), acc.dtype)))
    return [acc]


@converter("Mod")
def _mod(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    a, b = node.req(0), node.req(1)
    dt = cx.same_dtype(node, a, b)
    fmod = bool(node.attr("fmod", 0))
    if foldable(a, b) and dt.is_int:
        try:
            return [OnnxValue.const(_apply_known(_sym_fmod if fmod else _sym_mod, known_array(a), known_array(b)), dt)]
        except _NoFold:
            pass
    # fmod=0 is the floored remainder (sign of the divisor), fmod=1 C's fmod (sign of the dividend).
    return [OnnxValue.of(cx.op("ik.rem" if fmod else "ik.mod", cx.ir(a), cx.ir(b)))]


_LOGICAL = {"And": "ik.and", "Or": "ik.or", "Xor": "ik.xor"}


@converter(*_LOGICAL)
def _logical(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    a, b = node.req(0), node.req(1)
    if foldable(a, b) and a.dtype.is_bool and b.dtype.is_bool:
        fn = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}[node.op_type]
        return [OnnxValue.const(fn(known_array(a), known_array(b)), DType.bool)]
    return [OnnxValue.of(cx.op(_LOGICAL[node.op_type], cx.ir(a), cx.ir(b)))]


@converter("Not")
def _not(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    if foldable(x) and x.dtype.is_bool:
        return [OnnxValue.const(np.logical_not(known_array(x)), DType.bool)]
    return [OnnxValue.of(cx.op("ik.not", cx.ir(x)))]


@converter("Where")
def _where(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    c, x, y = node.req(0, "condition"), node.req(1), node.req(2)
    if not c.dtype.is_bool:
        raise FrontendError(f"node '{node.name}' (Where): condition must be bool, got {c.dtype}")
    dt = cx.same_dtype(node, x, y)
    if foldable(c, x, y, move=True):
        out = np.where(known_array(c), _as_object(known_array(x)), _as_object(known_array(y)))
        try:
            return [OnnxValue.const(out, dt)]
        except _NoFold:
            pass
    return [OnnxValue.of(cx.op("ik.where", cx.ir(c), cx.ir(x), cx.ir(y)))]


@converter("Cast", "CastLike")
def _cast(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    if node.op_type == "CastLike":
        to = node.req(1, "target_type").dtype
    else:
        to = ir_dtype(int(node.attr("to", 0)), cx.source, f"node '{node.name}' (Cast) target type")
    if x.dtype is to:
        return [x]
    if x.is_symbolic and to.is_int:
        return [OnnxValue(to, x.shape, known=x.known)]
    if to.is_float8 or x.dtype.is_float8:
        # ONNX Cast-19+: float8 destinations saturate (clamp to the largest finite value) unless saturate=0.
        sat = bool(node.attr("saturate", 1)) if to.is_float8 else False
        v = cx.ir(x)
        if sat and x.dtype.is_float and not x.dtype.is_float8:
            # The spec's saturate table sends +-Inf to +-max on every float8 type (FNUZ included):
            # clamp first (NaN passes through min/max), then round.
            top = float(ml_dtypes.finfo(to.np).max)
            v = cx.op("ik.min", cx.op("ik.max", v, cx.scalar(-top, x.dtype)), cx.scalar(top, x.dtype))
        return [OnnxValue.of(cx.op("ik.cast", v, to=to, saturate=True if sat else None))]
    return [cx.cast(x, to)]


@converter("Identity")
def _identity(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    return [node.req(0)]


@converter("Dropout")
def _dropout(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    training = node.input(2)
    if training is not None and (training.known is None or bool(np.any(training.known))):
        raise Unsupported("Dropout in training mode")
    mask = None
    if node.n_outputs > 1 and node.used[1]:
        mask = OnnxValue.of(cx.op("ik.broadcast", cx.scalar(True, DType.bool), shape=x.shape))
    return [x, mask]


@converter("Clip")
def _clip(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    v = cx.ir(x)
    for i, op, key in ((1, "ik.max", "min"), (2, "ik.min", "max")):
        b = node.input(i)
        if b is not None:
            v = cx.op(op, v, cx.ir(cx.cast(b, x.dtype)))
        elif key in node.attrs:  # Clip-6 and older: attributes
            v = cx.op(op, v, cx.scalar(float(node.attrs[key]), x.dtype))
    return [OnnxValue.of(v)]


@converter("LeakyRelu")
def _leaky_relu(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = cx.ir(node.req(0))
    alpha = cx.scalar(float(node.attr("alpha", 0.01)), x.type.dtype)
    zero = cx.scalar(0.0, x.type.dtype)
    return [OnnxValue.of(cx.op("ik.where", cx.op("ik.lt", x, zero), cx.op("ik.mul", x, alpha), x))]


@converter("Softplus")
def _softplus(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = cx.ir(node.req(0))
    one = cx.scalar(1.0, x.type.dtype)
    return [OnnxValue.of(cx.op("ik.log", cx.op("ik.add", cx.op("ik.exp", x), one)))]


@converter("HardSigmoid")
def _hard_sigmoid(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = cx.ir(node.req(0))
    dt = x.type.dtype
    y = cx.op("ik.add", cx.op("ik.mul", x, cx.scalar(float(node.attr("alpha", 0.2)), dt)),
              cx.scalar(float(node.attr("beta", 0.5)), dt))
    y = cx.op("ik.min", cx.op("ik.max", y, cx.scalar(0.0, dt)), cx.scalar(1.0, dt))
    return [OnnxValue.of(y)]


@converter("IsInf")
def _isinf(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = cx.ir(node.req(0))
    dt = x.type.dtype
    pos, neg = bool(node.attr("detect_positive", 1)), bool(node.attr("detect_negative", 1))
    if pos and neg:
        return [OnnxValue.of(cx.op("ik.eq", cx.op("ik.abs", x), cx.scalar(float("inf"), dt)))]
    if pos or neg:
        return [OnnxValue.of(cx.op("ik.eq", x, cx.scalar(float("inf") if pos else float("-inf"), dt)))]
    return [OnnxValue.of(cx.op("ik.broadcast", cx.scalar(False, DType.bool), shape=x.type.shape))]


@converter("Gelu")
def _gelu(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    approx = node.attr("approximate", "none")
    if approx not in ("none", "tanh"):
        raise FrontendError(f"node '{node.name}' (Gelu): approximate must be 'none' or 'tanh', got '{approx}'")
    return [OnnxValue.of(cx.op("ik.gelu", cx.ir(node.req(0)), approximate=approx))]


@converter("Gelu", domain="com.microsoft")
def _ms_gelu(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    return [OnnxValue.of(cx.op("ik.gelu", cx.ir(node.req(0)), approximate="none"))]


@converter("FastGelu", domain="com.microsoft")
def _ms_fast_gelu(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = cx.ir(node.req(0))
    b = node.input(1)
    if b is not None:
        x = cx.op("ik.add", x, cx.ir(b))
    return [OnnxValue.of(cx.op("ik.gelu", x, approximate="tanh"))]


@converter("Trilu")
def _trilu(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    k_t = node.input(1)
    k = int(cx.ints(k_t, node, "k")[0]) if k_t is not None else 0
    upper = bool(node.attr("upper", 1))
    if x.rank < 2:
        raise FrontendError(f"node '{node.name}' (Trilu): input must have rank >= 2")
    if foldable(x, move=True) and known_array(x).dtype != object:
        f = np.triu if upper else np.tril
        return [OnnxValue.const(f(known_array(x), k), x.dtype)]
    n, m = x.shape[-2], x.shape[-1]
    rows = cx.op("ik.iota", shape=(n, m), axis=0, dtype=DType.i64)
    cols = cx.op("ik.iota", shape=(n, m), axis=1, dtype=DType.i64)
    diff = cx.op("ik.sub", cols, rows)
    kv = cx.scalar(k, DType.i64)
    keep = cx.op("ik.ge" if upper else "ik.le", diff, kv)
    zero = cx.scalar(False if x.dtype.is_bool else 0, x.dtype)
    return [OnnxValue.of(cx.op("ik.where", keep, cx.ir(x), zero))]


# ---------------------------------------------------------------------------
# Shape ops


@converter("Reshape")
def _reshape_node(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    st = node.req(1, "shape")
    if st.known is None:
        fb = cx.fallback_shape(node.outputs[0])
        if fb is not None and dim_prod(fb) == dim_prod(x.shape):
            return [_reshape(cx, x, fb)]
        raise Unsupported("Reshape to a shape computed at run time from tensor data")
    target = cx.dims(st, node, "shape")
    allowzero = bool(node.attr("allowzero", 0))
    out: list[Dim | None] = []
    for i, s in enumerate(target):
        if isinstance(s, int) and s == 0 and not allowzero:
            if i >= x.rank:
                raise FrontendError(f"node '{node.name}' (Reshape): 0 at position {i} copies a dim the input "
                                    f"{shape_str(x.shape)} does not have")
            out.append(x.shape[i])
        elif isinstance(s, int) and s == -1:
            out.append(None)
        elif isinstance(s, int) and s < 0:
            raise FrontendError(f"node '{node.name}' (Reshape): invalid target dim {s}")
        else:
            out.append(s)
    if out.count(None) > 1:
        raise FrontendError(f"node '{node.name}' (Reshape): more than one -1 in the target shape")
    total = dim_prod(x.shape)
    if None in out:
        rest = dim_prod(d for d in out if d is not None)
        q = dim_floordiv(total, rest) if rest != 0 else None
        if q is None:
            fb = cx.fallback_shape(node.outputs[0])
            if fb is not None and len(fb) == len(out) and dim_prod(fb) == total:
                return [_reshape(cx, x, fb)]
            raise FrontendError(f"node '{node.name}' (Reshape): cannot infer -1 in {_dims_str(out)} from "
                                f"input {shape_str(x.shape)} ({total} is not provably divisible by {rest})")
        out[out.index(None)] = q
    shape = tuple(d for d in out if d is not None)
    _check_shape(node, shape)
    if dim_prod(shape) != total:
        raise FrontendError(f"node '{node.name}' (Reshape): cannot reshape {shape_str(x.shape)} to "
                            f"{shape_str(shape)}: element counts differ")
    return [_reshape(cx, x, shape)]


def _dims_str(ds: Sequence[Dim | None]) -> str:
    return "[" + ", ".join("-1" if d is None else str(d) for d in ds) + "]"


@converter("Flatten")
def _flatten(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    ax = node.attr("axis", 1)
    ax = ax + x.rank if ax < 0 else ax
    if not 0 <= ax <= x.rank:
        raise FrontendError(f"node '{node.name}' (Flatten): axis {node.attr('axis', 1)} out of range")
    return [_reshape(cx, x, (dim_prod(x.shape[:ax]), dim_prod(x.shape[ax:])))]


def _axes_arg(cx: Emitter, node: Node, idx: int) -> list[int] | None:
    """Axes from the attribute (old opsets) or from input ``idx`` (new ones)."""
    if "axes" in node.attrs:
        return [int(a) for a in node.attrs["axes"]]
    t = node.input(idx)
    if t is None:
        return None
    return cx.ints(t, node, "axes")


@converter("Unsqueeze")
def _unsqueeze(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    axes = _axes_arg(cx, node, 1)
    if not axes:
        raise FrontendError(f"node '{node.name}' (Unsqueeze): axes are required")
    r = x.rank + len(axes)
    norm = sorted(_axis(node, a, r) for a in axes)
    if len(set(norm)) != len(norm):
        raise FrontendError(f"node '{node.name}' (Unsqueeze): repeated axes {axes}")
    shape: list[Dim] = []
    it = iter(x.shape)
    for i in range(r):
        shape.append(1 if i in norm else next(it))
    if x.known is not None and (foldable(x, move=True) or x.is_symbolic):
        return [OnnxValue(x.dtype, tuple(shape), known=known_array(x).reshape(int_shape(shape)))]
    return [_reshape(cx, x, shape)]


@converter("Squeeze")
def _squeeze(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    axes = _axes_arg(cx, node, 1)
    if axes is None:
        if any(isinstance(d, SymDim) for d in x.shape):
            # Which dims are 1 is known only at run time (B may be 1): refuse rather than guess.
            raise Unsupported("Squeeze without axes on a tensor with dynamic dims")
        drop = [i for i, d in enumerate(x.shape) if d == 1]
    else:
        drop = sorted({_axis(node, a, x.rank) for a in axes})
        for i in drop:
            if x.shape[i] != 1:
                raise FrontendError(f"node '{node.name}' (Squeeze): dim {i} of {shape_str(x.shape)} is not 1")
    shape = tuple(d for i, d in enumerate(x.shape) if i not in drop)
    if x.known is not None and (foldable(x, move=True) or x.is_symbolic):
        return [OnnxValue(x.dtype, shape, known=known_array(x).reshape(int_shape(shape)))]
    return [_reshape(cx, x, shape)]


@converter("Transpose")
def _transpose(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    perm = tuple(int(p) for p in node.attr("perm", list(range(x.rank))[::-1]))
    if sorted(perm) != list(range(x.rank)):
        raise FrontendError(f"node '{node.name}' (Transpose): perm {list(perm)} is not a permutation of "
                            f"{x.rank} dims")
    if perm == tuple(range(x.rank)):
        return [x]
    if x.known is not None and (foldable(x, move=True) or x.is_symbolic):
        return [OnnxValue.const(np.transpose(x.known, perm), x.dtype)]
    return [OnnxValue.of(cx.op("ik.transpose", cx.ir(x), perm=perm))]


@converter("Concat")
def _concat(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    xs = [t for t in node.inputs if t is not None]
    if not xs:
        raise FrontendError(f"node '{node.name}' (Concat): no inputs")
    dt = cx.same_dtype(node, *xs)
    if "axis" not in node.attrs:
        raise FrontendError(f"node '{node.name}' (Concat): the axis attribute is required")
    ax = _axis(node, int(node.attr("axis")), xs[0].rank)
    if all(t.known is not None and (foldable(t, move=True) or t.is_symbolic) for t in xs):
        sym = any(t.is_symbolic for t in xs)
        k = np.concatenate([_as_object(known_array(t)) if sym else known_array(t) for t in xs], axis=ax)
        return [OnnxValue.const(k, dt)]
    # Zero-length static pieces add nothing.
    xs = [t for t in xs if not (isinstance(t.shape[ax], int) and t.shape[ax] == 0)] or xs[:1]
    if len(xs) == 1:
        return [xs[0]]
    return [OnnxValue.of(cx.op("ik.concat", *[cx.ir(t) for t in xs], axis=ax))]


@converter("Split")
def _split(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    ax = _axis(node, int(node.attr("axis", 0)), x.rank)
    d = x.shape[ax]
    n_out = node.n_outputs
    sizes: list[Dim]
    if "split" in node.attrs:
        sizes = [int(s) for s in node.attrs["split"]]
    elif node.input(1) is not None:
        sizes = cx.dims(node.input(1), node, "split")
    else:
        n = int(node.attr("num_outputs", n_out))
        if isinstance(d, int):
            chunk = -(-d // n)
            sizes = []
            sizes += [chunk] * (n - 1)
            sizes.append(d - chunk * (n - 1))
        else:
            q = dim_floordiv(d, n)
            if q is None:
                raise Unsupported(f"Split of dynamic dim {d} into {n} (not provably divisible)")
            sizes = [q] * n
    if len(sizes) != n_out:
        raise FrontendError(f"node '{node.name}' (Split): {len(sizes)} sizes for {n_out} outputs")
    acc: Dim = 0
    for s in sizes:
        acc = dim_add(acc, s)
    if acc != d:
        raise FrontendError(f"node '{node.name}' (Split): sizes {_dims_str(sizes)} do not add up to dim {ax} "
                            f"({d}) of {shape_str(x.shape)}")
    if n_out == 1:
        return [x]
    if foldable(x, move=True) and all(isinstance(s, int) for s in sizes):
        parts = np.split(known_array(x), np.cumsum(int_shape(sizes))[:-1], axis=ax)
        return [OnnxValue.const(p, x.dtype) for p in parts]
    return [OnnxValue.of(v) for v in cx.emit("ik.split", [cx.ir(x)], axis=ax, sizes=tuple(sizes))]


def _norm_index(v: Dim, d: Dim, is_end: bool) -> Dim:
    """ONNX Slice index normalisation for a positive step, with symbolic dims.

    Symbolic indices and dims cannot be clamped; they are assumed in range,
    which is what exporters write (``x[:, :S]`` on a buffer of ``max_positions``).
    """
    if isinstance(v, int):
        if v < 0:
            v = dim_add(d, v)
            return max(v, 0) if isinstance(v, int) else v
        if isinstance(d, int):
            return min(v, d)
        return d if v >= _INT64_MAX // 2 else v
    if _sign(v) == -1:
        return dim_add(d, v)
    return v


@converter("Slice")
def _slice(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    starts = cx.dims(node.req(1, "starts"), node, "starts")
    ends = cx.dims(node.req(2, "ends"), node, "ends")
    axes_t, steps_t = node.input(3), node.input(4)
    axes = cx.ints(axes_t, node, "axes") if axes_t is not None else list(range(len(starts)))
    steps = cx.ints(steps_t, node, "steps") if steps_t is not None else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise FrontendError(f"node '{node.name}' (Slice): starts, ends, axes and steps differ in length")
    start: list[Dim] = [0] * x.rank
    limit: list[Dim] = list(x.shape)
    step = [1] * x.rank
    reverse: list[tuple[int, list[int]]] = []
    seen = set()
    for s, e, a, st in zip(starts, ends, axes, steps):
        ax = _axis(node, a, x.rank)
        if ax in seen:
            raise FrontendError(f"node '{node.name}' (Slice): axis {a} repeated")
        seen.add(ax)
        d = x.shape[ax]
        if st == 0:
            raise FrontendError(f"node '{node.name}' (Slice): step 0 on axis {a}")
        if isinstance(d, int) and isinstance(s, int) and isinstance(e, int):
            r = range(*slice(s, e, st).indices(d))
            if st < 0:
                reverse.append((ax, list(r)))
                continue
            start[ax] = r.start if len(r) else 0
            limit[ax] = (r.start + (len(r) - 1) * st + 1) if len(r) else 0
            step[ax] = st
            continue
        if st < 0:
            raise Unsupported("Slice with a negative step over a dynamic dim")
        start[ax] = _norm_index(s, d, False)
        limit[ax] = _norm_index(e, d, True)
        step[ax] = st
    for i in range(x.rank):
        s0, l0 = start[i], limit[i]
        if isinstance(s0, int) and isinstance(l0, int) and l0 < s0:
            limit[i] = s0
    whole = all(s == 0 and lim == d and st == 1 for s, lim, st, d in zip(start, limit, step, x.shape))
    if x.known is not None and (foldable(x, move=True) or x.is_symbolic) and \
            all(isinstance(v, int) for v in start + limit):
        k = x.known
        if not whole:
            k = k[tuple(slice(s, lim, st) for s, lim, st in zip(start, limit, step))]
        for ax, idx in reverse:
            k = np.take(k, idx, axis=ax)
        return [OnnxValue.const(k, x.dtype)]
    v = cx.ir(x)
    if not whole:
        v = cx.op("ik.slice", v, start=tuple(start), limit=tuple(limit),
                  step=tuple(step) if any(s != 1 for s in step) else None)
    for ax, idx in reverse:
        v = cx.op("ik.gather", v, cx.constant(np.array(idx, dtype=np.int64), DType.i64), axis=ax)
    return [OnnxValue.of(v)]


@converter("Gather")
def _gather(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    data, idx = node.req(0, "data"), node.req(1, "indices")
    if not idx.dtype.is_int:
        raise FrontendError(f"node '{node.name}' (Gather): indices must be integers, got {idx.dtype}")
    ax = _axis(node, int(node.attr("axis", 0)), data.rank)
    if data.known is not None and (foldable(data, move=True) or data.is_symbolic) and foldable(idx):
        n = data.known.shape[ax]
        ii = known_array(idx).astype(np.int64)
        if ii.size and (ii.min() < -n or ii.max() >= n):
            raise FrontendError(f"node '{node.name}' (Gather): index out of range for dim of size {n}")
        k = np.take(data.known, ii, axis=ax)
        if not isinstance(k, np.ndarray) or k.dtype != data.known.dtype:
            k = np.array(k, dtype=data.known.dtype)  # a 0-d take returns a bare element
        return [OnnxValue.const(k, data.dtype)]
    return [OnnxValue.of(cx.op("ik.gather", cx.ir(data), cx.ir(idx), axis=ax))]


@converter("Expand")
def _expand(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    shape = cx.dims(node.req(1, "shape"), node, "shape")
    try:
        out = broadcast_shapes(x.shape, tuple(shape))
    except ValueError:
        raise FrontendError(f"node '{node.name}' (Expand): {shape_str(x.shape)} does not broadcast to "
                            f"{_dims_str(shape)}") from None
    _check_shape(node, out)
    if out == x.shape:
        return [x]
    if foldable(x, move=True) and all(isinstance(d, int) for d in out) and known_array(x).dtype != object and \
            int(np.prod(int_shape(out), dtype=np.int64)) <= FOLD_LIMIT:
        return [OnnxValue.const(np.broadcast_to(known_array(x), int_shape(out)).copy(), x.dtype)]
    return [OnnxValue.of(cx.op("ik.broadcast", cx.ir(x), shape=out))]


@converter("Tile")
def _tile(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    # Repeats may be symbolic (``x.repeat(B, 1, 1)`` exports as Tile(x, Concat(Shape(y)[0], 1, 1))).
    reps = cx.dims(node.req(1, "repeats"), node, "repeats")
    if len(reps) != x.rank or any(_sign(r) == -1 for r in reps):
        raise FrontendError(f"node '{node.name}' (Tile): repeats {_dims_str(reps)} do not fit rank {x.rank}")
    if any(_sign(r) is None for r in reps):
        raise Unsupported(f"Tile whose 'repeats' ({_dims_str(reps)}) has a dim expression of unknown sign")
    if all(isinstance(r, int) and r == 1 for r in reps):
        return [x]
    inter: list[Dim] = []
    for d in x.shape:
        inter += [1, d]
    v = cx.op("ik.reshape", cx.ir(x), shape=tuple(inter))
    bshape: list[Dim] = []
    for r, d in zip(reps, x.shape):
        bshape += [r, d]
    v = cx.op("ik.broadcast", v, shape=tuple(bshape))
    return [OnnxValue.of(cx.op("ik.reshape", v, shape=tuple(dim_mul(r, d) for r, d in zip(reps, x.shape))))]


_PAD_NP_MODES: dict[str, Literal["reflect", "edge", "wrap"]] = {"reflect": "reflect", "edge": "edge", "wrap": "wrap"}


@converter("Pad")
def _pad(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise FrontendError(f"node '{node.name}' (Pad): unknown mode '{mode}'")
    if "pads" in node.attrs:
        pads = [int(p) for p in node.attrs["pads"]]
    elif "paddings" in node.attrs:  # Pad-1
        pads = [int(p) for p in node.attrs["paddings"]]
    else:
        pads = cx.ints(node.req(1, "pads"), node, "pads")
    value = node.attrs.get("value", None)
    runtime_value: OnnxValue | None = None
    cv = node.input(2)
    if value is None and cv is not None:
        if cv.known is None:
            runtime_value = cv  # padded with 0, then the pad region is selected from the runtime value
        else:
            value = cx.scalar_value(cv, node, "constant_value")
    value = 0.0 if value is None else float(value)
    axes_t = node.input(3)
    axes = ([_axis(node, a, x.rank) for a in cx.ints(axes_t, node, "axes")] if axes_t is not None
            else list(range(x.rank)))
    if len(pads) != 2 * len(axes):
        raise FrontendError(f"node '{node.name}' (Pad): {len(pads)} pads for {len(axes)} axes")
    full = [0] * (2 * x.rank)
    for i, a in enumerate(axes):
        full[a], full[a + x.rank] = pads[i], pads[i + len(axes)]
    v = cx.ir(x)
    if mode != "constant":
        # reflect / edge / wrap: a gather with constant indices per padded axis.
        for a in range(x.rank):
            lo, hi = full[a], full[a + x.rank]
            if lo == 0 and hi == 0:
                continue
            d = x.shape[a]
            if not isinstance(d, int):
                raise Unsupported(f"Pad mode '{mode}' over a dynamic dim")
            np_mode = _PAD_NP_MODES[mode]
            base = np.arange(d)
            if lo < 0 or hi < 0:
                base = base[max(-lo, 0): d - max(-hi, 0)]
                lo, hi = max(lo, 0), max(hi, 0)
            idx = np.pad(base, (lo, hi), mode=np_mode) if (lo or hi) else base
            v = cx.op("ik.gather", v, cx.constant(idx.astype(np.int64), DType.i64), axis=a)
        return [OnnxValue.of(v)]
    if any(p < 0 for p in full):
        start = [max(-full[i], 0) for i in range(x.rank)]
        limit = [dim_sub(d, max(-full[i + x.rank], 0)) for i, d in enumerate(x.shape)]
        v = cx.op("ik.slice", v, start=tuple(start), limit=tuple(limit))
        full = [max(p, 0) for p in full]
    if any(full):
        inner = v
        v = cx.op("ik.pad", v, pads=tuple(full), value=value)
        if runtime_value is not None:
            ones = cx.op("ik.broadcast", cx.scalar(1, DType.i32), shape=inner.type.shape)
            keep = cx.op("ik.ne", cx.op("ik.pad", ones, pads=tuple(full), value=0.0), cx.scalar(0, DType.i32))
            fill = cx.op("ik.reshape", cx.ir(runtime_value), shape=())
            v = cx.op("ik.where", keep, v, fill)
    return [OnnxValue.of(v)]


# ---------------------------------------------------------------------------
# Reductions, softmax, normalisations


_REDUCE = {"ReduceMean": "ik.reduce_mean", "ReduceSum": "ik.reduce_sum", "ReduceMax": "ik.reduce_max",
           "ReduceMin": "ik.reduce_min", "ReduceProd": "ik.reduce_prod"}


@converter(*_REDUCE, "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
def _reduce(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    axes = _axes_arg(cx, node, 1)
    keep = bool(node.attr("keepdims", 1))
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(x.rank))
    norm = tuple(sorted({_axis(node, a, x.rank) for a in axes}))
    if foldable(x) and (x.dtype.is_int):
        fn = {"ReduceSum": np.add, "ReduceProd": np.multiply}.get(node.op_type)
        if fn is not None:
            try:
                obj = _as_object(known_array(x))
                k = fn.reduce(obj, axis=norm, keepdims=True) if keep else fn.reduce(obj, axis=norm, keepdims=False)
                return [OnnxValue.const(np.asarray(k, dtype=object), x.dtype)]
            except (TypeError, ValueError, _NoFold):
                pass
    v = cx.ir(x)
    kind = node.op_type
    if any(x.shape[a] == 0 for a in norm):
        return [_empty_reduction(cx, node, x, norm, keep)]
    if x.dtype.is_bool and kind in ("ReduceMax", "ReduceMin"):
        r = cx.op(_REDUCE[kind], cx.op("ik.cast", v, to=DType.i32), axes=norm, keepdims=keep) if x.rank else v
        return [OnnxValue.of(cx.op("ik.cast", r, to=DType.bool) if x.rank else r)]
    pre = {"ReduceL1": "ik.abs", "ReduceL2": "square", "ReduceSumSquare": "square", "ReduceLogSumExp": "exp"}
    if kind == "ReduceLogSumExp" and x.rank:
        # log(sum(exp(x - max))) + max: stable, as the ONNX reference computes it.
        m = cx.op("ik.reduce_max", v, axes=norm, keepdims=True)
        fin = cx.op("ik.isfinite", m) if x.dtype.is_float else None
        m = cx.op("ik.where", fin, m, cx.scalar(0.0, x.dtype)) if fin is not None else m
        s = cx.op("ik.reduce_sum", cx.op("ik.exp", cx.op("ik.sub", v, m)), axes=norm, keepdims=keep)
        mk = m if keep else cx.op("ik.reshape", m, shape=s.type.shape)
        return [OnnxValue.of(cx.op("ik.add", cx.op("ik.log", s), mk))]
    if kind in pre:
        v = cx.op("ik.mul", v, v) if pre[kind] == "square" else cx.op(pre[kind], v)
    red = _REDUCE.get(kind, "ik.reduce_sum")
    y = cx.op(red, v, axes=norm, keepdims=keep) if x.rank else v
    if kind == "ReduceL2":
        y = cx.op("ik.sqrt", y)
    elif kind in ("ReduceLogSum", "ReduceLogSumExp"):
        y = cx.op("ik.log", y)
    return [OnnxValue.of(y)]


def _empty_reduction(cx: Emitter, node: Node, x: OnnxValue, axes: tuple[int, ...], keep: bool) -> OnnxValue:
    """A reduction over an empty axis: the reduction's identity (ONNX: max of nothing is -inf...)."""
    kind = node.op_type
    dt = x.dtype
    if dt.is_float:
        fill = {"ReduceMax": -np.inf, "ReduceMin": np.inf, "ReduceProd": 1.0, "ReduceLogSum": -np.inf,
                "ReduceLogSumExp": -np.inf, "ReduceMean": np.nan}.get(kind, 0.0)
    elif dt.is_bool:
        fill = kind == "ReduceMin"
    else:
        info = np.iinfo(dt.np)
        fill = {"ReduceMax": info.min, "ReduceMin": info.max, "ReduceProd": 1}.get(kind, 0)
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes)
    return OnnxValue.of(cx.op("ik.broadcast", cx.scalar(fill, dt), shape=shape))


@converter("Softmax", "LogSoftmax")
def _softmax(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    name = "ik.softmax" if node.op_type == "Softmax" else "ik.log_softmax"
    if cx.opset < 13:
        # Softmax-1/11 work on the 2-D flattening of the input at axis (default 1).
        ax = _axis(node, int(node.attr("axis", 1)), x.rank)
        if ax == x.rank - 1:
            return [OnnxValue.of(cx.op(name, cx.ir(x), axis=ax))]
        v = cx.op("ik.reshape", cx.ir(x), shape=(dim_prod(x.shape[:ax]), dim_prod(x.shape[ax:])))
        return [OnnxValue.of(cx.op("ik.reshape", cx.op(name, v, axis=1), shape=x.shape))]
    ax = _axis(node, int(node.attr("axis", -1)), x.rank)
    return [OnnxValue.of(cx.op(name, cx.ir(x), axis=ax))]


@converter("LayerNormalization")
def _layer_norm(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, w, b = node.req(0), node.req(1, "scale"), node.input(2)
    if any(node.used[1:]):
        raise Unsupported("LayerNormalization whose Mean/InvStdDev outputs are used")
    ax = _axis(node, int(node.attr("axis", -1)), x.rank)
    eps = float(node.attr("epsilon", 1e-5))
    y = cx.op("ik.layer_norm", cx.ir(x), cx.ir(w), None if b is None else cx.ir(b), axis=ax, eps=eps)
    return [OnnxValue.of(y)] + [None] * (node.n_outputs - 1)


@converter("RMSNormalization")
@converter("SimplifiedLayerNormalization")
@converter("SimplifiedLayerNormalization", domain="com.microsoft")
def _rms_norm(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, w = node.req(0), node.req(1, "scale")
    if any(node.used[1:]):
        raise Unsupported(f"{node.op_type} whose extra outputs are used")
    ax = _axis(node, int(node.attr("axis", -1)), x.rank)
    eps = float(node.attr("epsilon", 1e-5))
    return [OnnxValue.of(cx.op("ik.rms_norm", cx.ir(x), cx.ir(w), axis=ax, eps=eps))] + [None] * (node.n_outputs - 1)


# ---------------------------------------------------------------------------
# Contractions


@converter("MatMul")
def _matmul(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    a, b = node.req(0), node.req(1)
    cx.same_dtype(node, a, b)
    va, vb = cx.ir(a), cx.ir(b)
    if a.rank == 0 or b.rank == 0:
        raise FrontendError(f"node '{node.name}' (MatMul): operands must have rank >= 1")
    if a.rank == 1:
        va = cx.op("ik.reshape", va, shape=(1, a.shape[0]))
    if b.rank == 1:
        vb = cx.op("ik.reshape", vb, shape=(b.shape[0], 1))
    y = cx.op("ik.matmul", va, vb)
    if a.rank == 1 or b.rank == 1:
        shape = list(y.type.shape)
        if b.rank == 1:
            shape.pop(-1)
        if a.rank == 1:
            shape.pop(-2 if b.rank != 1 else -1)
        y = cx.op("ik.reshape", y, shape=tuple(shape))
    return [OnnxValue.of(y)]


@converter("Gemm")
def _gemm(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    a, b, c = node.req(0), node.req(1), node.input(2)
    dt = cx.same_dtype(node, a, b)
    if a.rank != 2 or b.rank != 2:
        raise FrontendError(f"node '{node.name}' (Gemm): A and B must be 2-D, got {shape_str(a.shape)} and "
                            f"{shape_str(b.shape)}")
    va, vb = cx.ir(a), cx.ir(b)
    if node.attr("transA", 0):
        va = cx.op("ik.transpose", va, perm=(1, 0))
    if node.attr("transB", 0):
        vb = cx.op("ik.transpose", vb, perm=(1, 0))
    y = cx.op("ik.matmul", va, vb)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if alpha != 1.0:
        y = cx.op("ik.mul", y, cx.scalar(alpha, dt))
    if c is not None and beta != 0.0:
        vc = cx.ir(c)
        if beta != 1.0:
            vc = cx.op("ik.mul", vc, cx.scalar(beta, dt))
        y = cx.op("ik.add", y, vc)
    return [OnnxValue.of(y)]


# ---------------------------------------------------------------------------
# Attention and rotary embeddings (opset 23)


def _to_bhsd(cx: Emitter, node: Node, t: OnnxValue, heads: int | None, what: str) -> Value:
    """A 3-D [B, S, H*D] tensor as 4-D [B, H, S, D]; 4-D passes through."""
    v = cx.ir(t)
    if t.rank == 4:
        return v
    if t.rank != 3:
        raise FrontendError(f"node '{node.name}' ({node.op_type}): {what} must be 3-D or 4-D, got "
                            f"{shape_str(t.shape)}")
    if not heads:
        raise FrontendError(f"node '{node.name}' ({node.op_type}): 3-D {what} needs the num_heads attributes")
    hidden = t.shape[2]
    hd = dim_floordiv(hidden, heads)
    if hd is None:
        raise FrontendError(f"node '{node.name}' ({node.op_type}): {what} width {hidden} is not divisible by "
                            f"{heads} heads")
    v = cx.op("ik.reshape", v, shape=(t.shape[0], t.shape[1], heads, hd))
    return cx.op("ik.transpose", v, perm=(0, 2, 1, 3))


@converter("Attention")
def _attention(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    q, k, v = node.req(0, "Q"), node.req(1, "K"), node.req(2, "V")
    mask, past_k, past_v = node.input(3), node.input(4), node.input(5)
    if node.input(6) is not None:
        raise Unsupported("Attention with nonpad_kv_seqlen")
    if int(node.attr("left_window_size", -1)) >= 0 or int(node.attr("right_window_size", -1)) >= 0:
        raise Unsupported("Attention with a local window")
    softcap = float(node.attr("softcap", 0.0))
    if softcap != 0.0:
        raise Unsupported("Attention with softcap")
    if node.n_outputs > 3 and node.used[3]:
        raise Unsupported("Attention whose qk_matmul_output is used")
    if (past_k is None) != (past_v is None):
        raise FrontendError(f"node '{node.name}' (Attention): past_key and past_value must come together")
    dt = cx.same_dtype(node, q, k, v)
    if q.rank != k.rank or q.rank != v.rank:
        raise FrontendError(f"node '{node.name}' (Attention): Q, K and V must have the same rank")
    three_d = q.rank == 3
    qh = node.attr("q_num_heads")
    kvh = node.attr("kv_num_heads")
    vq = _to_bhsd(cx, node, q, qh, "Q")
    vk = _to_bhsd(cx, node, k, kvh, "K")
    vv = _to_bhsd(cx, node, v, kvh, "V")
    past_len: Dim = 0
    if past_k is not None and past_v is not None:
        if past_k.rank != 4 or past_v.rank != 4:
            raise FrontendError(f"node '{node.name}' (Attention): past_key/past_value must be 4-D")
        past_len = past_k.shape[2]
        vk = cx.op("ik.concat", cx.ir(past_k), vk, axis=2)
        vv = cx.op("ik.concat", cx.ir(past_v), vv, axis=2)
    head = vq.type.shape[3]
    scale = node.attr("scale")
    if scale is None:
        if not isinstance(head, int):
            raise Unsupported("Attention with a dynamic head size and no scale")
        scale = 1.0 / math.sqrt(head)
    sq, skv = vq.type.shape[2], vk.type.shape[2]
    causal = bool(node.attr("is_causal", 0))
    keep = bias = None
    if mask is not None:
        mv = cx.ir(mask)
        last = mask.shape[-1] if mask.rank else 1
        if last != skv and last != 1:
            if isinstance(last, int) and isinstance(skv, int) and last < skv:
                pads = [0] * (2 * mask.rank)
                pads[2 * mask.rank - 1] = skv - last
                if mask.dtype.is_bool:
                    mv = cx.op("ik.cast", cx.op("ik.pad", cx.op("ik.cast", mv, to=DType.i32), pads=tuple(pads),
                                                value=0.0), to=DType.bool)
                else:
                    mv = cx.op("ik.pad", mv, pads=tuple(pads), value=float("-inf"))
            else:
                raise Unsupported("Attention with an attn_mask shorter than the key sequence (dynamic)")
        if mask.dtype.is_bool:
            keep = mv
        else:
            bias = mv if mask.dtype is dt else cx.op("ik.cast", mv, to=dt)
    if causal and past_len != 0:
        # With a past, the causal frontier is bottom-right aligned: key j <= query i + past.
        rows = cx.op("ik.iota", shape=(sq, skv), axis=0, dtype=DType.i64)
        cols = cx.op("ik.iota", shape=(sq, skv), axis=1, dtype=DType.i64)
        frontier = cx.op("ik.add", rows, cx.dim_value(past_len))
        ckeep = cx.op("ik.le", cols, frontier)
        keep = ckeep if keep is None else cx.op("ik.and", keep, ckeep)
        causal = False
    y = cx.op("ik.attention", vq, vk, vv, keep, bias, scale=float(scale), causal=causal)
    if three_d:
        y = cx.op("ik.transpose", y, perm=(0, 2, 1, 3))
        s = y.type.shape
        y = cx.op("ik.reshape", y, shape=(s[0], s[1], dim_mul(s[2], s[3])))
    outs: list[OnnxValue | None] = [OnnxValue.of(y)]
    if node.n_outputs > 1:
        outs.append(OnnxValue.of(vk) if node.used[1] else None)
    if node.n_outputs > 2:
        outs.append(OnnxValue.of(vv) if node.used[2] else None)
    outs += [None] * (node.n_outputs - len(outs))
    return outs


@converter("RotaryEmbedding")
def _rotary(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x, cos_c, sin_c, pos = node.req(0), node.req(1, "cos_cache"), node.req(2, "sin_cache"), node.input(3)
    cx.same_dtype(node, x, cos_c, sin_c)
    interleaved = bool(node.attr("interleaved", 0))
    heads = int(node.attr("num_heads", 0))
    v = cx.ir(x)
    if x.rank == 4:  # [B, H, S, D] -> [B, S, H, D]
        v = cx.op("ik.transpose", v, perm=(0, 2, 1, 3))
    elif x.rank == 3:
        if not heads:
            raise FrontendError(f"node '{node.name}' (RotaryEmbedding): 3-D input needs num_heads")
        hd = dim_floordiv(x.shape[2], heads)
        if hd is None:
            raise FrontendError(f"node '{node.name}' (RotaryEmbedding): width {x.shape[2]} not divisible by "
                                f"{heads} heads")
        v = cx.op("ik.reshape", v, shape=(x.shape[0], x.shape[1], heads, hd))
    else:
        raise FrontendError(f"node '{node.name}' (RotaryEmbedding): input must be 3-D or 4-D")
    b_, s_, h_, d_ = v.type.shape
    if not isinstance(d_, int):
        raise Unsupported("RotaryEmbedding with a dynamic head size")
    rot = int(node.attr("rotary_embedding_dim", 0)) or d_
    if rot % 2 or rot > d_:
        raise FrontendError(f"node '{node.name}' (RotaryEmbedding): rotary_embedding_dim {rot} must be even and "
                            f"<= head size {d_}")
    half = rot // 2
    vc, vs = cx.ir(cos_c), cx.ir(sin_c)
    if pos is not None:
        vc = cx.op("ik.gather", vc, cx.ir(pos), axis=0)
        vs = cx.op("ik.gather", vs, cx.ir(pos), axis=0)
    if vc.type.shape[-1] != half:
        raise FrontendError(f"node '{node.name}' (RotaryEmbedding): cos_cache last dim {vc.type.shape[-1]} is "
                            f"not rotary_embedding_dim/2 = {half}")
    cs = vc.type.shape
    vc = cx.op("ik.reshape", vc, shape=(cs[0], cs[1], 1, half))
    vs = cx.op("ik.reshape", vs, shape=(cs[0], cs[1], 1, half))

    r = apply_rotary(cx, v, vc, vs, interleaved)
    if x.rank == 4:
        r = cx.op("ik.transpose", r, perm=(0, 2, 1, 3))
    else:
        r = cx.op("ik.reshape", r, shape=x.shape)
    return [OnnxValue.of(r)]


def apply_rotary(cx: Emitter, x: Value, cos: Value, sin: Value, interleaved: bool) -> Value:
    """Rotary embedding of ``x`` [B, S, H, D] with ``cos``/``sin`` [B, S, 1, R/2] on its first R channels
    (ONNX RotaryEmbedding and com.microsoft GroupQueryAttention)."""
    b_, s_, h_, dd = x.type.shape
    hh = cos.type.shape[3]
    assert isinstance(dd, int) and isinstance(hh, int)  # checked by the caller
    d_, half = dd, hh
    rot = 2 * half

    def sl(lo: int, hi: int, step: int = 1) -> Value:
        return cx.op("ik.slice", x, start=(0, 0, 0, lo), limit=(b_, s_, h_, hi), step=(1, 1, 1, step) if step != 1
                     else None)

    x1, x2 = (sl(0, rot - 1, 2), sl(1, rot, 2)) if interleaved else (sl(0, half), sl(half, rot))
    real = cx.op("ik.sub", cx.op("ik.mul", cos, x1), cx.op("ik.mul", sin, x2))
    imag = cx.op("ik.add", cx.op("ik.mul", sin, x1), cx.op("ik.mul", cos, x2))
    if interleaved:
        real = cx.op("ik.reshape", real, shape=(b_, s_, h_, half, 1))
        imag = cx.op("ik.reshape", imag, shape=(b_, s_, h_, half, 1))
        r = cx.op("ik.reshape", cx.op("ik.concat", real, imag, axis=4), shape=(b_, s_, h_, rot))
    else:
        r = cx.op("ik.concat", real, imag, axis=3)
    if rot < d_:
        r = cx.op("ik.concat", r, sl(rot, d_), axis=3)
    return r


__all__ = [
    "CONVERTERS",
    "apply_rotary",
    "FOLD_LIMIT",
    "ONNX_DTYPES",
    "Emitter",
    "Node",
    "OnnxValue",
    "Unsupported",
    "converter",
    "foldable",
    "normalize_known",
    "onnx_key",
    "supported_ops",
]
