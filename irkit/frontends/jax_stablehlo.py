"""StableHLO (text, bytecode, ``jax.export.Exported``, ``jax.jit(...).lower(...)``)
and XLA HLO text, imported as an irkit :class:`Module`.

Design note: the text is parsed by the MLIR Python bindings that ship in
jaxlib (the context from ``jax._src.interpreters.mlir.make_ir_context`` has
the stablehlo, chlo and func dialects registered), never by hand; a parse
error becomes one line with MLIR's ``file:line:col``.  The walk starts at the
public ``main`` and inlines every ``func.call`` (and ``stablehlo.composite``)
into one IR function.  Each op maps through the :class:`~irkit.frontends.
jax_emit.Emitter` shared with the jaxpr path.

Shape-polymorphic modules (``tensor<?x...>`` from ``jax.export`` with symbolic
shapes) compute their shapes at run time from ``get_dimension_size`` and the
``jax.global_constant`` dimension arguments.  Such small integer values are
tracked symbolically (a list of :class:`SymDim`) rather than emitted, so
``dynamic_broadcast_in_dim``, ``dynamic_reshape`` and ``dynamic_iota`` get
symbolic shapes, and a dim used as data (``jnp.mean`` dividing by ``S``)
becomes ``ik.dim_value``.  Symbol names come from the ``Exported`` avals, else
from the ``jax.global_constant`` names JAX attaches, else ``s<arg>_<dim>``.
Constants are emitted lazily, only when an op needs them as data.

HLO text (XLA's ``--xla_dump_to`` ``*.before_optimizations.txt``) is parsed by
XLA's own HLO parser in jaxlib (``hlo_module_from_text``) and converted to
StableHLO with ``xla_computation_to_mlir_module``; the rest is the StableHLO
path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from irkit.frontends import jax_emit_index as index
from irkit.frontends.common import ConverterTable, FrontendError, UnsupportedOps, sanitize_name
from irkit.frontends.jax_emit import (
    Emitter,
    Unsupported,
    ir_dtype_from_mlir,
    location_from_mlir,
    remove_dead_ops,
    sym_dim,
)
from irkit.ir.aliases import set_aliases
from irkit.ir.builder import Builder
from irkit.ir.core import Dense, Function, Graph, Location, Module, Value
from irkit.ir.types import (
    Dim,
    DType,
    SymDim,
    TensorType,
    dim_add,
    dim_floordiv,
    dim_mul,
    dim_sub,
    static_dim,
    static_shape,
)
from irkit.ir.verify import verify

_MAX_INLINE_DEPTH = 64
_MLIR_BYTECODE = b"ML\xefR"  # the magic number of MLIR bytecode
_KNOWN_LIMIT = 16  # longest integer vector tracked symbolically (a shape)


def _mlir() -> tuple[Any, Any, Any]:
    try:
        from jax._src.interpreters import mlir as jax_mlir
        from jaxlib.mlir import ir
        from jaxlib.mlir.dialects import stablehlo
    except ImportError as e:  # pragma: no cover - jax is an optional dependency
        raise FrontendError(f"the StableHLO frontend needs jax and jaxlib: {e} (pip install 'irkit[jax]')") from None
    return jax_mlir, ir, stablehlo


# ---------------------------------------------------------------------------
# Values during the walk


@dataclass
class _Slot:
    """What an MLIR value stands for: an IR value, a constant not yet emitted, or a shape.

    ``known`` holds the elements of a small integer tensor as dims (a shape
    computed at run time in shape-polymorphic code); ``const`` a constant's
    array.  :meth:`_Walker.ir` emits IR for either on first use.
    """

    type: TensorType
    ir: Value | None = None
    const: np.ndarray | None = None
    known: tuple[Dim, ...] | None = None
    items: list[_Slot] | None = None  # a tuple value (HLO's tuples)
    poisoned: bool = False  # stands in for the result of an op that could not be translated


# ---------------------------------------------------------------------------
# Attributes


def _ints(ir: Any, attr: Any) -> list[int]:
    for cls in ("DenseI64ArrayAttr", "DenseI32ArrayAttr", "DenseBoolArrayAttr"):
        c = getattr(ir, cls, None)
        if c is not None and isinstance(attr, c):
            return [int(v) for v in c(attr)]
    if isinstance(attr, ir.DenseIntElementsAttr):
        return [int(v) for v in np.array(ir.DenseIntElementsAttr(attr)).reshape(-1)]
    if isinstance(attr, ir.ArrayAttr):
        return [int(ir.IntegerAttr(a).value) for a in ir.ArrayAttr(attr)]
    raise Unsupported(f"attribute {attr} is not a list of integers")


def _int(ir: Any, attr: Any) -> int:
    return int(ir.IntegerAttr(attr).value)


_TOKEN = re.compile(r'0x[0-9A-Fa-f]+|[-+]?(?:inf|nan)|true|false|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?')


def _dense_array(ir: Any, attr: Any, t: TensorType) -> np.ndarray:
    """A DenseElementsAttr as a NumPy array of ``t``'s dtype and shape."""
    d = ir.DenseElementsAttr(attr)
    shape = static_shape(t.shape)  # constants are static
    npdt = t.dtype.np
    if d.is_splat:
        a = d.get_splat_value()
        if isinstance(a, ir.FloatAttr):
            v: Any = ir.FloatAttr(a).value
        elif isinstance(a, ir.BoolAttr):
            v = ir.BoolAttr(a).value
        else:
            v = ir.IntegerAttr(a).value
        if t.dtype == DType.bool:
            v = bool(v)
        return np.broadcast_to(np.array(v, dtype=npdt), shape)  # zero strides: a splat stays small
    try:
        arr = np.array(d)
        if arr.dtype != object:
            arr = arr.astype(npdt, copy=False).reshape(shape)
            arr.flags.writeable = False  # ours alone: Dense may keep it without another copy
            return arr
    except (TypeError, ValueError, RuntimeError):
        pass
    # bf16 (and any type the bindings cannot hand over as a buffer): read MLIR's printed form.
    text = str(d)
    body = text[text.index("<") + 1:text.rindex(" : ")].rstrip(">").strip()
    if body.startswith('"0x'):
        raw = bytes.fromhex(body.strip('"')[2:])
        flat = np.frombuffer(raw, dtype=npdt)
        return (np.full(shape, flat[0], dtype=npdt) if flat.size == 1 else flat.reshape(shape)).copy()
    toks = _TOKEN.findall(body)
    width = npdt.itemsize
    vals = []
    for tok in toks:
        if tok.startswith("0x"):
            bits = np.array(int(tok, 16), dtype=f"u{width}")
            vals.append(bits.view(npdt).item() if npdt.kind != "b" else bool(int(tok, 16)))
        elif tok in ("true", "false"):
            vals.append(tok == "true")
        else:
            vals.append(float(tok))
    return np.array(vals, dtype=np.float64 if t.dtype.is_float else None).astype(npdt).reshape(shape)


# ---------------------------------------------------------------------------
# The walker


_UNARY = {"stablehlo.negate": "neg", "stablehlo.abs": "abs", "stablehlo.exponential": "exp",
          "stablehlo.log": "log", "stablehlo.sqrt": "sqrt", "stablehlo.rsqrt": "rsqrt",
          "stablehlo.tanh": "tanh", "stablehlo.logistic": "sigmoid", "stablehlo.sine": "sin",
          "stablehlo.cosine": "cos", "stablehlo.floor": "floor", "stablehlo.ceil": "ceil",
          "stablehlo.sign": "sign", "chlo.erf": "erf", "stablehlo.tan": "tan", "chlo.tan": "tan",
          "chlo.asin": "asin", "chlo.acos": "acos", "chlo.atan": "atan", "chlo.sinh": "sinh", "chlo.cosh": "cosh",
          "chlo.asinh": "asinh", "chlo.acosh": "acosh", "chlo.atanh": "atanh", "stablehlo.log_plus_one": "log1p",
          "stablehlo.exponential_minus_one": "expm1", "chlo.erf_inv": "erfinv", "chlo.lgamma": "lgamma",
          "chlo.digamma": "digamma", "stablehlo.popcnt": "popcount", "stablehlo.count_leading_zeros": "clz",
          "stablehlo.round_nearest_even": "round", "chlo.is_inf": "isinf"}
_BINARY = {"stablehlo.add": "add", "stablehlo.subtract": "sub", "stablehlo.multiply": "mul",
           "stablehlo.divide": "div", "stablehlo.remainder": "rem", "stablehlo.power": "pow",
           "stablehlo.atan2": "atan2", "chlo.next_after": "nextafter", "stablehlo.shift_left": "shift_left",
           "stablehlo.shift_right_logical": "shift_right_logical",
           "stablehlo.shift_right_arithmetic": "shift_right_arithmetic"}
_MINMAX = {"stablehlo.maximum": "max", "stablehlo.minimum": "min"}
_LOGICAL = {"stablehlo.and": "and", "stablehlo.or": "or", "stablehlo.xor": "xor"}
_REFUSED = {
    **{f"stablehlo.{n}": "a linear-algebra decomposition; out of scope" for n in ("cholesky", "triangular_solve")},
    **{n: "a random-number op; out of scope" for n in ("stablehlo.rng", "stablehlo.rng_bit_generator")},
    **{f"chlo.{n}": "a special function with no IR op" for n in (
        "igamma", "igammac", "polygamma", "zeta", "regularized_incomplete_beta")},
    "stablehlo.fft": "complex numbers are out of scope",
    "stablehlo.select_and_scatter": "a gradient of max pooling; training is out of scope",
    "stablehlo.while": "loops are out of scope (jax writes igamma and friends as while loops)",
    "stablehlo.case": "control flow is out of scope",
    "stablehlo.if": "control flow is out of scope",
}
_COMPARE = {"EQ": "eq", "NE": "ne", "LT": "lt", "LE": "le", "GT": "gt", "GE": "ge"}
_REDUCER = {"stablehlo.add": "sum", "stablehlo.maximum": "max", "stablehlo.minimum": "min",
            "stablehlo.multiply": "prod", "stablehlo.and": "and", "stablehlo.or": "or"}
_WINDOW_KIND = {"sum": "sum", "max": "max", "min": "min", "prod": "prod", "or": "max", "and": "min"}
_COMBINE = {"sum": "add", "max": "max", "min": "min", "prod": "mul", "and": "and", "or": "or"}
_IDENTITY_CALLS = {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "annotate_device_placement",
                   "MoveToHost", "MoveToDevice"}


def _is_identity(kind: str, v: np.ndarray) -> bool:
    x = v.reshape(-1)[0]
    if kind == "sum":
        return bool(x == 0)
    if kind == "prod":
        return bool(x == 1)
    if kind == "and":
        return bool(x)
    if kind == "or":
        return not bool(x)
    if v.dtype == np.bool_:
        return bool(x) == (kind == "min")
    if v.dtype.kind in "iu":
        info = np.iinfo(v.dtype)
        return int(x) == (info.min if kind == "max" else info.max)
    xf = float(x)
    return xf == (-np.inf if kind == "max" else np.inf)


class _Walker:
    def __init__(self, ir: Any, stablehlo: Any, module: Any, graph: Graph | None, source: str):
        self.ir = ir
        self.shlo = stablehlo
        self.em = Emitter(Builder.at_end(graph if graph is not None else Graph()))
        self.source = source
        self.unsupported = UnsupportedOps(source)
        self.funcs: dict[str, Any] = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.funcs[ir.StringAttr(op.attributes["sym_name"]).value] = op
        self._n_const = 0
        self._n_unknown = 0
        # MLIR types are uniqued, so (static dims, dtype) is computed once per distinct type.
        self._type_info: dict[Any, tuple[list[int | None], DType]] = {}

    # -- types ------------------------------------------------------------------
    def mlir_type(self, t: Any, dims: Sequence[Dim] | None = None) -> TensorType:
        """The IR type of an MLIR ranked tensor; dynamic dims from ``dims`` or fresh symbols."""
        static, dtype = self.type_info(t)
        shape: list[Dim] = []
        for i, d in enumerate(static):
            if d is not None:
                shape.append(d)
            elif dims is not None:
                shape.append(dims[i])
            else:
                self._n_unknown += 1
                shape.append(SymDim.symbol(f"_unknown{self._n_unknown}"))
        return TensorType(tuple(shape), dtype)

    def type_info(self, t: Any) -> tuple[list[int | None], DType]:
        """(dims with None where dynamic, element type) of a ranked tensor type."""
        hit = self._type_info.get(t)
        if hit is None:
            if not isinstance(t, self.ir.RankedTensorType):
                raise Unsupported(f"type {t}")
            dims = [None if t.is_dynamic_dim(i) else int(t.get_dim_size(i)) for i in range(t.rank)]
            hit = (dims, ir_dtype_from_mlir(str(t.element_type)))
            self._type_info[t] = hit
        return hit

    def static_dims(self, t: Any) -> list[int | None]:
        return list(self.type_info(t)[0])

    # -- slots --------------------------------------------------------------------
    def value(self, s: _Slot) -> Value:
        """The IR value of a slot, emitting a pending constant or shape value first."""
        if s.ir is not None:
            return s.ir
        if s.items is not None:
            raise Unsupported("a tuple used as a tensor")
        em = self.em
        if s.const is not None:
            a = s.const
            if a.ndim == 0:
                s.ir = em.scalar(a.item(), s.type.dtype)
            elif a.size and all(st == 0 for st in a.strides):
                s.ir = em.b.constant(Dense.splat(a.reshape(-1)[0], a.shape, s.type.dtype), loc=em.loc)
            else:
                name = None
                if a.size > 16:
                    name = f"const_{self._n_const}"
                    self._n_const += 1
                s.ir = em.constant(a, s.type.dtype, name=name)
            return s.ir
        if s.known is not None:
            if all(isinstance(d, int) for d in s.known):
                arr = np.array(s.known, dtype=s.type.dtype.np).reshape(s.type.concrete_shape({}))
                s.ir = em.scalar(arr.item(), s.type.dtype) if arr.ndim == 0 else em.constant(arr, s.type.dtype)
                return s.ir
            parts = []
            for d in s.known:
                if isinstance(d, int):
                    parts.append(em.constant(np.array([d], dtype=s.type.dtype.np), s.type.dtype))
                else:
                    dv = em.op("dim_value", dim=(d,), dtype=s.type.dtype)
                    parts.append(dv if s.type.rank == 0 else em.reshape(dv, (1,)))
            s.ir = parts[0] if len(parts) == 1 and s.type.rank == 0 else em.concat(parts, 0)
            return s.ir
        raise Unsupported("a value with no definition")

    def known(self, s: _Slot) -> tuple[Dim, ...] | None:
        """The elements of a small integer slot as dims, when they are known."""
        if s.known is not None:
            return s.known
        if s.const is not None and s.type.dtype.is_int and s.const.size <= _KNOWN_LIMIT:
            return tuple(int(v) for v in s.const.reshape(-1))
        if s.ir is not None and s.type.dtype.is_int and s.type.is_static and s.type.num_elements() <= _KNOWN_LIMIT:
            c = self.em.const_value(s.ir)
            if c is not None:
                return tuple(int(v) for v in c.reshape(-1))
        return None

    def out(self, v: Value) -> _Slot:
        return _Slot(v.type, ir=v)

    # -- walking --------------------------------------------------------------------
    def run_func(self, fn: Any, args: Sequence[_Slot], depth: int = 0,
                 call_loc: Location | None = None) -> list[_Slot]:
        """Translate ``fn``'s body; ``call_loc`` (the call site) stands in for ops with no file location."""
        if depth > _MAX_INLINE_DEPTH:
            raise FrontendError(f"{self.source}: calls nest deeper than {_MAX_INLINE_DEPTH} (recursion?)")
        block = fn.regions[0].blocks[0]
        env: dict[Any, _Slot] = {}
        for a, s in zip(block.arguments, args):
            env[a] = s
        for op in block.operations:
            name = op.operation.name
            if name in ("func.return", "stablehlo.return", "mhlo.return"):
                return [env[v] for v in op.operands]
            loc = location_from_mlir(str(op.location))
            if loc.file == "-":
                # Text without locations: MLIR gives each op its place in the text ("-" is the buffer).
                loc = Location(self.source, loc.line, loc.col, loc.name)
            if loc.file is None and call_loc is not None and call_loc.file is not None:
                loc = Location(call_loc.file, call_loc.line, call_loc.col, loc.name)
            self.em.loc = loc
            ins = [env[v] for v in op.operands]
            if any(s.poisoned for s in ins):
                # Downstream of an op already reported: stay quiet rather than cascade.
                for r in op.results:
                    env[r] = self.placeholder(r.type)
                continue
            try:
                outs = self.op(op, name, ins, depth)
                for r, s in zip(op.results, outs):
                    self.check(r.type, s, name)
            except Unsupported as e:
                short = name.split(".", 1)[-1] if name.startswith("stablehlo.") else name
                self.unsupported.add(short if e.what == name else f"{short} ({e.what})", loc)
                outs = [self.placeholder(r.type) for r in op.results]
            for r, s in zip(op.results, outs):
                env[r] = s
        raise Unsupported("function without a return")

    def placeholder(self, t: Any) -> _Slot:
        try:
            tt = self.mlir_type(t)
        except Unsupported:
            tt = TensorType((), DType.f32)
        return _Slot(tt, ir=Value(tt), poisoned=True)

    def check(self, mt: Any, s: _Slot, what: str) -> None:
        """Raise when a translated value disagrees with the MLIR result type (an irkit bug)."""
        if s.items is not None or not isinstance(mt, self.ir.RankedTensorType):
            return
        want, dt = self.type_info(mt)
        got = s.type
        if got.rank != len(want) or got.dtype != dt or any(
                w is not None and isinstance(g, int) and g != w for g, w in zip(got.shape, want)):
            raise Unsupported(f"{what}: translation gives {got}, the module says {mt} (irkit bug)")

    # -- ops ----------------------------------------------------------------------------
    def op(self, op: Any, name: str, ins: list[_Slot], depth: int) -> list[_Slot]:
        handler = _HANDLERS.get(name)
        if handler is None:
            raise Unsupported(_REFUSED.get(name, name))  # a reason is printed after the op's name
        return handler(self, op, ins, depth)

    def _known_binary(self, name: str, ins: list[_Slot], op: Any) -> _Slot | None:
        a, b = self.known(ins[0]), self.known(ins[1])
        if a is None or b is None or not ins[0].type.dtype.is_int:
            return None
        if len(a) != len(b):
            if len(a) == 1:
                a = a * len(b)
            elif len(b) == 1:
                b = b * len(a)
            else:
                return None
        out: list[Dim] = []
        for x, y in zip(a, b):
            if name == "stablehlo.add":
                out.append(dim_add(x, y))
            elif name == "stablehlo.subtract":
                out.append(dim_sub(x, y))
            elif name == "stablehlo.multiply":
                out.append(dim_mul(x, y))
            elif name == "stablehlo.divide":
                q = dim_floordiv(x, y)
                if q is None:
                    return None
                out.append(q)
            elif name in ("stablehlo.maximum", "stablehlo.minimum") and isinstance(x, int) and isinstance(y, int):
                out.append(max(x, y) if name == "stablehlo.maximum" else min(x, y))
            else:
                return None
        t = self.mlir_type(op.results[0].type, [1] * len(out))
        return _Slot(t, known=tuple(out))


# Handlers: (walker, op, slots, depth) -> result slots.  One per StableHLO op.
_HANDLERS = ConverterTable("stablehlo")
converter = _HANDLERS.converter
"""Register a handler under StableHLO/CHLO op names (``@converter("stablehlo.add")``)."""


def _unary(name: str) -> Callable[[_Walker, Any, list[_Slot], int], list[_Slot]]:
    return lambda w, op, ins, depth: [w.out(w.em.unary(name, w.value(ins[0])))]


def _binary(opname: str, name: str) -> Callable[[_Walker, Any, list[_Slot], int], list[_Slot]]:
    def h(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
        k = w._known_binary(opname, ins, op)
        if k is not None:
            return [k]
        x, y = w.value(ins[0]), w.value(ins[1])
        if name in ("max", "min"):
            return [w.out(w.em.minmax(name, x, y))]
        if name in ("and", "or", "xor"):
            return [w.out(w.em.logical(name, x, y))]
        return [w.out(w.em.binary(name, x, y))]
    return h


for _n, _ir in _UNARY.items():
    _HANDLERS.add(_n, _unary(_ir))
for _n, _ir in {**_BINARY, **_MINMAX, **_LOGICAL}.items():
    _HANDLERS.add(_n, _binary(_n, _ir))


def _attr(op: Any, key: str) -> Any:
    """The attribute ``key`` of ``op``, or None."""
    attrs = op.operation.attributes
    return attrs[key] if key in attrs else None  # noqa: SIM401 - MLIR's attribute map has no .get


@converter("stablehlo.constant")
def _constant(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    t = w.mlir_type(op.results[0].type)
    return [_Slot(t, const=_dense_array(w.ir, _attr(op, "value"), t))]


@converter("stablehlo.get_dimension_size")
def _dim_size(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    d = ins[0].type.shape[_int(w.ir, _attr(op, "dimension"))]
    return [_Slot(w.mlir_type(op.results[0].type), known=(d,))]


@converter("stablehlo.convert")
def _convert(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    t = w.mlir_type(op.results[0].type, ins[0].type.shape)
    k = w.known(ins[0])
    if k is not None and t.dtype.is_int:
        return [_Slot(t, known=k)]
    return [w.out(w.em.cast(w.value(ins[0]), t.dtype))]


@converter("stablehlo.reshape")
def _reshape(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    rt = op.results[0].type
    if None in w.static_dims(rt):
        raise Unsupported("reshape to a dynamic shape")
    t = w.mlir_type(rt)
    k = w.known(ins[0])
    if k is not None and t.dtype.is_int and t.rank <= 1 and ins[0].const is None:
        return [_Slot(t, known=k)]
    if ins[0].const is not None:
        a, shape = ins[0].const, t.concrete_shape({})
        if a.size and all(st == 0 for st in a.strides):  # keep a splat a zero-stride view
            return [_Slot(t, const=np.broadcast_to(a.reshape(-1)[:1].reshape(()), shape))]
        return [_Slot(t, const=a.reshape(shape))]
    return [w.out(w.em.reshape(w.value(ins[0]), t.shape))]


@converter("stablehlo.dynamic_reshape")
def _dyn_reshape(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    shape = w.known(ins[1])
    if shape is None:
        raise Unsupported("dynamic_reshape to a shape computed from data")
    return [w.out(w.em.reshape(w.value(ins[0]), shape))]


@converter("stablehlo.concatenate")
def _concat(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    axis = _int(w.ir, _attr(op, "dimension"))
    ks = [w.known(s) for s in ins]
    if all(k is not None for k in ks) and ins[0].type.rank == 1 and ins[0].type.dtype.is_int:
        flat: tuple[Dim, ...] = tuple(d for k in ks for d in k)  # type: ignore[union-attr]
        if len(flat) <= _KNOWN_LIMIT:
            return [_Slot(TensorType((len(flat),), ins[0].type.dtype), known=flat)]
    return [w.out(w.em.concat([w.value(s) for s in ins], axis))]


@converter("stablehlo.broadcast_in_dim", "stablehlo.dynamic_broadcast_in_dim")
def _broadcast(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    bdims = _ints(w.ir, _attr(op, "broadcast_dimensions"))
    x = ins[0]
    if len(ins) > 1:
        shape = w.known(ins[1])
        if shape is None:
            raise Unsupported("dynamic_broadcast_in_dim to a shape computed from data")
    else:
        static = w.static_dims(op.results[0].type)
        shape_l: list[Dim] = []
        for i, d in enumerate(static):
            if d is None:
                if i not in bdims:
                    raise Unsupported("broadcast_in_dim to a dynamic dim not taken from the operand")
                shape_l.append(x.type.shape[bdims.index(i)])
            else:
                shape_l.append(d)
        shape = tuple(shape_l)
    k = w.known(x)
    if k is not None and len(k) == 1 and len(shape) <= 1 and all(isinstance(d, int) for d in shape) \
            and x.type.dtype.is_int:
        n = shape[0] if shape else 1
        return [_Slot(TensorType(tuple(shape), x.type.dtype), known=k * static_dim(n))]
    if x.const is not None and x.const.size == 1 and all(isinstance(d, int) for d in shape) and \
            int(np.prod(static_shape(shape), dtype=np.int64)) <= 16:
        return [_Slot(TensorType(tuple(shape), x.type.dtype),
                      const=np.broadcast_to(x.const.reshape(()), static_shape(shape)).copy())]
    return [w.out(w.em.broadcast_in_dim(w.value(x), shape, bdims))]


@converter("stablehlo.transpose")
def _transpose(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.transpose(w.value(ins[0]), _ints(w.ir, _attr(op, "permutation"))))]


@converter("stablehlo.iota", "stablehlo.dynamic_iota")
def _iota(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    axis = _int(w.ir, _attr(op, "iota_dimension"))
    if ins:
        shape = w.known(ins[0])
        if shape is None:
            raise Unsupported("dynamic_iota of a shape computed from data")
        t = w.mlir_type(op.results[0].type, shape)
    else:
        t = w.mlir_type(op.results[0].type)
    return [w.out(w.em.iota(t.shape, axis, t.dtype))]


@converter("stablehlo.slice")
def _slice(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    start = _ints(w.ir, _attr(op, "start_indices"))
    limit = _ints(w.ir, _attr(op, "limit_indices"))
    strides = _ints(w.ir, _attr(op, "strides"))
    x = ins[0]
    k = w.known(x)
    if k is not None and x.type.rank == 1 and x.type.dtype.is_int:
        sub = k[start[0]:limit[0]:strides[0]]
        return [_Slot(TensorType((len(sub),), x.type.dtype), known=tuple(sub))]
    lim: list[Dim] = []
    for d, s, li, st in zip(x.type.shape, start, limit, strides):
        if isinstance(d, SymDim):
            if s != 0 or st != 1:
                raise Unsupported("slice of a symbolic dim at a static offset")
            lim.append(d)
        else:
            lim.append(li)
    return [w.out(w.em.slice(w.value(x), start, lim, strides))]


@converter("stablehlo.real_dynamic_slice")
def _real_dyn_slice(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    start, limit, strides = (w.known(s) for s in ins[1:4])
    if start is None or limit is None or strides is None or not all(isinstance(s, int) for s in strides):
        raise Unsupported("real_dynamic_slice with bounds computed from data")
    return [w.out(w.em.slice(w.value(ins[0]), start, limit, [static_dim(s) for s in strides]))]  # type: ignore[misc]


@converter("stablehlo.dynamic_slice")
def _dyn_slice(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    sizes = _ints(w.ir, _attr(op, "slice_sizes"))
    starts = [w.value(s) for s in ins[1:]]
    return [w.out(index.dynamic_slice(w.em, w.value(ins[0]), starts, sizes))]


@converter("stablehlo.dynamic_update_slice")
def _dyn_update_slice(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    starts = [w.value(s) for s in ins[2:]]
    return [w.out(index.dynamic_update_slice(w.em, w.value(ins[0]), w.value(ins[1]), starts))]


@converter("stablehlo.reverse")
def _reverse(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.reverse(w.value(ins[0]), _ints(w.ir, _attr(op, "dimensions"))))]


@converter("stablehlo.round_nearest_afz")
def _round_afz(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.round(w.value(ins[0]), away_from_zero=True))]


@converter("stablehlo.cbrt")
def _cbrt(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.cbrt(w.value(ins[0])))]


@converter("stablehlo.pad")
def _pad(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.pad(w.value(ins[0]), w.value(ins[1]), _ints(w.ir, _attr(op, "edge_padding_low")),
                           _ints(w.ir, _attr(op, "edge_padding_high")),
                           _ints(w.ir, _attr(op, "interior_padding"))))]


@converter("stablehlo.compare")
def _compare(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    direction = w.shlo.ComparisonDirectionAttr(_attr(op, "comparison_direction")).value
    return [w.out(w.em.binary(_COMPARE[direction], w.value(ins[0]), w.value(ins[1])))]


@converter("stablehlo.select")
def _select(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.select(*(w.value(s) for s in ins)))]


@converter("stablehlo.clamp")
def _clamp(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.clamp(*(w.value(s) for s in ins)))]


@converter("stablehlo.not")
def _not(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.bitwise_not(w.value(ins[0])))]


@converter("stablehlo.is_finite")
def _is_finite(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.is_finite(w.value(ins[0])))]


@converter("chlo.erfc")
def _erfc(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    x = w.value(ins[0])
    return [w.out(w.em.binary("sub", w.em.scalar(1, x.dtype), w.em.unary("erf", x)))]


@converter("chlo.square")
def _square(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    x = w.value(ins[0])
    return [w.out(w.em.binary("mul", x, x))]


@converter("stablehlo.reduce_precision")
def _reduce_precision(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.reduce_precision(w.value(ins[0]), _int(w.ir, _attr(op, "exponent_bits")),
                                        _int(w.ir, _attr(op, "mantissa_bits"))))]


@converter("stablehlo.optimization_barrier")
def _barrier(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return list(ins)


@converter("stablehlo.tuple")
def _tuple(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [_Slot(TensorType((), DType.f32), items=list(ins))]


@converter("stablehlo.get_tuple_element")
def _gte(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    items = ins[0].items
    if items is None:
        raise Unsupported("get_tuple_element of a non-tuple")
    return [items[_int(w.ir, _attr(op, "index"))]]


@converter("stablehlo.dot_general", "stablehlo.dot")
def _dot(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    lhs, rhs = w.value(ins[0]), w.value(ins[1])
    out_dt = w.mlir_type(op.results[0].type, [1] * w.ir.RankedTensorType(op.results[0].type).rank).dtype
    if op.operation.name == "stablehlo.dot":
        return [w.out(w.em.dot_general(lhs, rhs, [lhs.type.rank - 1], [0], [], [], out_dt))]
    dn = w.shlo.DotDimensionNumbers(_attr(op, "dot_dimension_numbers"))
    return [w.out(w.em.dot_general(lhs, rhs, list(dn.lhs_contracting_dimensions),
                                   list(dn.rhs_contracting_dimensions), list(dn.lhs_batching_dimensions),
                                   list(dn.rhs_batching_dimensions), out_dt))]


@converter("stablehlo.gather", "stablehlo.dynamic_gather")
def _gather(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    dn = w.shlo.GatherDimensionNumbers(_attr(op, "dimension_numbers"))
    x, idx = w.value(ins[0]), w.value(ins[1])
    if len(ins) > 2:  # dynamic_gather: the slice sizes are an operand (symbolic in polymorphic code)
        known = w.known(ins[2])
        if known is None:
            raise Unsupported("dynamic_gather with slice sizes computed from data")
        sizes: list[Dim] = list(known)
    else:
        sizes = list(_ints(w.ir, _attr(op, "slice_sizes")))
    return [w.out(index.gather(
        w.em, x, idx, offset_dims=list(dn.offset_dims), collapsed_slice_dims=list(dn.collapsed_slice_dims),
        start_index_map=list(dn.start_index_map), operand_batching_dims=list(dn.operand_batching_dims),
        start_indices_batching_dims=list(dn.start_indices_batching_dims), index_vector_dim=int(dn.index_vector_dim),
        slice_sizes=sizes))]


@converter("stablehlo.convolution")
def _conv(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    ir = w.ir
    dn = w.shlo.ConvDimensionNumbers(_attr(op, "dimension_numbers"))
    lhs_spec = [dn.input_batch_dimension, dn.input_feature_dimension] + list(dn.input_spatial_dimensions)
    rhs_spec = [dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension] + \
        list(dn.kernel_spatial_dimensions)
    out_spec = [dn.output_batch_dimension, dn.output_feature_dimension] + list(dn.output_spatial_dimensions)
    n = len(lhs_spec) - 2
    strides = _ints(ir, _attr(op, "window_strides")) if _attr(op, "window_strides") is not None else [1] * n
    pad_attr = _attr(op, "padding")
    pads_flat = _ints(ir, pad_attr) if pad_attr is not None else [0] * (2 * n)
    padding = [(pads_flat[2 * i], pads_flat[2 * i + 1]) for i in range(n)]
    lhs_dil = _ints(ir, _attr(op, "lhs_dilation")) if _attr(op, "lhs_dilation") is not None else [1] * n
    rhs_dil = _ints(ir, _attr(op, "rhs_dilation")) if _attr(op, "rhs_dilation") is not None else [1] * n
    wrev = _attr(op, "window_reversal")
    if wrev is not None and any(_ints(ir, wrev)):
        raise Unsupported("convolution with window reversal")
    out_dt = w.mlir_type(op.results[0].type).dtype
    return [w.out(w.em.conv(
        w.value(ins[0]), w.value(ins[1]), strides=strides, padding=padding, lhs_dilation=lhs_dil,
        rhs_dilation=rhs_dil, lhs_spec=lhs_spec, rhs_spec=rhs_spec, out_spec=out_spec,
        feature_group_count=_int(ir, _attr(op, "feature_group_count")),
        batch_group_count=_int(ir, _attr(op, "batch_group_count")), out_dtype=out_dt))]


def _reducer_kind(w: _Walker, block: Any, acc: Any, cur: Any) -> str | None:
    """``sum``/``max``/... when the reducer body is one such op on (acc, cur)."""
    ops = list(block.operations)
    if len(ops) != 2 or ops[1].operation.name != "stablehlo.return":
        return None
    body = ops[0]
    kind = _REDUCER.get(body.operation.name)
    operands = list(body.operands)
    if kind is None or len(operands) != 2:
        return None
    if not ((operands[0] == acc and operands[1] == cur) or (operands[0] == cur and operands[1] == acc)):
        return None
    if next(iter(ops[1].operands)) != body.results[0]:
        return None
    return kind


def _reducer_kind_of(w: _Walker, block: Any, i: int, n: int) -> str | None:
    """The kind of result ``i`` of an ``n``-operand reducer when it is one op on (acc_i, x_i)."""
    args = list(block.arguments)
    ret = list(block.operations)[-1]
    r = list(ret.operands)[i]
    if isinstance(r, w.ir.BlockArgument):
        return None
    body = r.owner
    kind = _REDUCER.get(body.name)
    operands = list(body.operands)
    if kind is None or len(operands) != 2:
        return None
    acc, cur = args[i], args[n + i]
    if (operands[0] == acc and operands[1] == cur) or (operands[0] == cur and operands[1] == acc):
        return kind
    return None


@converter("stablehlo.reduce")
def _reduce(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    em = w.em
    n = len(op.results)
    axes = _ints(w.ir, _attr(op, "dimensions"))
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    if n == 1:
        kind = _reducer_kind(w, block, args[0], args[1])
        if kind is None:
            raise Unsupported("reduce with a reducer other than add/max/min/mul/and/or")
        x = w.value(ins[0])
        r = em.reduce(kind, x, axes)
        init = ins[1]
        iv = init.const if init.const is not None else (em.const_value(init.ir) if init.ir is not None else None)
        if iv is None or not _is_identity(kind, np.asarray(iv)):
            comb = _COMBINE[kind]
            iv_ = w.value(init)
            r = em.logical(comb, r, iv_) if comb in ("and", "or") else em.minmax(comb, r, iv_) \
                if comb in ("max", "min") else em.binary(comb, r, iv_)
        return [w.out(r)]
    kinds = [_reducer_kind_of(w, block, i, n) for i in range(n)]
    if all(k is not None for k in kinds):
        # Independent reductions sharing one op (jax's lax.reduce of a tuple).
        outs = []
        for i, kind in enumerate(kinds):
            assert kind is not None
            r = em.reduce(kind, w.value(ins[i]), axes)
            iv = em.const_value(w.value(ins[n + i]))
            if iv is None or not _is_identity(kind, np.asarray(iv)):
                comb = _COMBINE[kind]
                init_v = w.value(ins[n + i])
                r = em.logical(comb, r, init_v) if comb in ("and", "or") else em.minmax(comb, r, init_v) \
                    if comb in ("max", "min") else em.binary(comb, r, init_v)
            outs.append(w.out(r))
        return outs
    if n == 2:
        return _reduce_argmax(w, op, ins, axes, block)
    raise Unsupported(f"reduce of {n} operands")


def _reduce_argmax(w: _Walker, op: Any, ins: list[_Slot], axes: list[int], block: Any) -> list[_Slot]:
    """The variadic reduce JAX emits for argmax/argmin: (values, iota) with a compare-select body."""
    em = w.em
    if len(axes) != 1:
        raise Unsupported("variadic reduce over several axes")
    idx_op = op.operands[1].owner
    if not hasattr(idx_op, "name") or idx_op.name != "stablehlo.iota" or \
            _int(w.ir, idx_op.attributes["iota_dimension"]) != axes[0]:
        raise Unsupported("variadic reduce that is not argmax/argmin (second operand is not an iota)")
    args = list(block.arguments)
    direction = None
    for body_op in block.operations:
        if body_op.operation.name == "stablehlo.compare":
            a, b = list(body_op.operands)
            if a == args[0] and b == args[2]:
                direction = w.shlo.ComparisonDirectionAttr(body_op.attributes["comparison_direction"]).value
                break
    if direction not in ("GT", "LT"):
        raise Unsupported("variadic reduce that is not argmax/argmin")
    x = w.value(ins[0])
    idx_dt = w.mlir_type(op.results[1].type, [1] * w.ir.RankedTensorType(op.results[1].type).rank).dtype
    values = em.reduce("max" if direction == "GT" else "min", x, axes)
    index = em.argmax(x, axes[0], idx_dt, argmin=direction == "LT")
    return [w.out(values), w.out(index)]


def _window_pairs(ir: Any, attr: Any, rank: int) -> list[tuple[int, int]]:
    if attr is None:
        return [(0, 0)] * rank
    flat = _ints(ir, attr)
    return [(flat[2 * i], flat[2 * i + 1]) for i in range(rank)]


def _opt_ints(ir: Any, op: Any, key: str, default: list[int]) -> list[int]:
    a = _attr(op, key)
    return _ints(ir, a) if a is not None else default


@converter("stablehlo.reduce_window")
def _reduce_window(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    if len(op.results) != 1:
        raise Unsupported(f"reduce_window of {len(op.results)} operands (how jax writes select_and_gather_add, "
                          "a gradient of max pooling; training is out of scope)")
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    kind = _WINDOW_KIND.get(_reducer_kind(w, block, args[0], args[1]) or "")
    x, init = w.value(ins[0]), w.value(ins[1])
    rank = x.type.rank
    window = _ints(w.ir, _attr(op, "window_dimensions"))
    strides = _opt_ints(w.ir, op, "window_strides", [1] * rank)
    base = _opt_ints(w.ir, op, "base_dilations", [1] * rank)
    wdil = _opt_ints(w.ir, op, "window_dilations", [1] * rank)
    pads = _window_pairs(w.ir, _attr(op, "padding"), rank)
    scan = _as_scan(x, window, strides, base, wdil, pads)
    if kind is None and scan is not None and _is_logaddexp(block):
        # jax's cumlogsumexp: a scan whose reducer is log(exp(a) + exp(b)), written stably.
        return [w.out(w.em.cumulative("logsumexp", x, scan[0], scan[1]))]
    if kind is None:
        raise Unsupported("reduce_window with a reducer other than add/mul/max/min/and/or")
    iv = w.em.const_value(init)
    if scan is not None and iv is not None and iv.reshape(-1)[0] == w.em.identity_value(kind, x.dtype) and \
            x.dtype != DType.bool:
        # jax's cumsum/cumprod/cummax/cummin lower to a window as long as the axis.
        return [w.out(w.em.cumulative(kind, x, scan[0], scan[1]))]
    return [w.out(w.em.reduce_window(kind, x, window, strides, pads, base, wdil, init=init))]


def _is_logaddexp(block: Any) -> bool:
    """Whether a two-argument reducer is jax's logaddexp: max(a, b) + log1p(exp(-|a - b|))."""
    names = {o.operation.name for o in block.operations}
    return {"stablehlo.maximum", "stablehlo.subtract", "stablehlo.abs", "stablehlo.negate", "stablehlo.exponential",
            "stablehlo.log_plus_one"} <= names


def _as_scan(x: Value, window: list[int], strides: list[int], base: list[int], wdil: list[int],
             pads: list[tuple[int, int]]) -> tuple[int, bool] | None:
    """(axis, reverse) when a window is a cumulative scan: as long as one axis, padded by its
    length - 1 on one side, stride and dilations 1."""
    if any(s != 1 for s in strides + base + wdil):
        return None
    axes = [i for i, k in enumerate(window) if k != 1]
    if len(axes) != 1:
        return None
    a = axes[0]
    n = x.shape[a]
    if not isinstance(n, int) or window[a] != n or n < 2 or any(p != (0, 0) for i, p in enumerate(pads) if i != a):
        return None
    if pads[a] == (n - 1, 0):
        return a, False
    if pads[a] == (0, n - 1):
        return a, True
    return None


def _block_arg_root(w: _Walker, v: Any, depth: int = 0) -> int | str | None:
    """The block argument a comparator value is a canonicalised copy of (jax maps -0.0 to 0.0
    and every NaN to one NaN with selects before comparing), "const" for a constant, else None."""
    if isinstance(v, w.ir.BlockArgument):
        return int(v.arg_number)
    if depth > 16:
        return None
    owner = v.owner
    name = owner.name
    if name == "stablehlo.constant":
        return "const"
    if name == "stablehlo.select":
        roots = {_block_arg_root(w, o, depth + 1) for o in list(owner.operands)[1:]} - {"const"}
        return roots.pop() if len(roots) == 1 else None
    if name == "stablehlo.convert":
        return _block_arg_root(w, owner.operands[0], depth + 1)
    return None


_COMPARATOR_OPS = {"stablehlo.compare", "stablehlo.select", "stablehlo.constant", "stablehlo.and", "stablehlo.or",
                   "stablehlo.convert", "stablehlo.return"}


def _comparator(w: _Walker, block: Any) -> tuple[list[int], bool, set[int]]:
    """(key operand indices, most significant first; descending; the keys compared by XLA's
    total order) of a sort comparator that is a lexicographic less-than (or greater-than) on
    some operands, as jax writes them.  A ``TOTALORDER`` compare of the raw operands ranks a
    NaN with the sign bit set first; jax canonicalises zeros and NaNs before comparing, so
    its keys are plain ``ik.sort`` keys (NaN largest, -0.0 equal to 0.0)."""
    keys: list[int] = []
    total: set[int] = set()
    directions: set[bool] = set()
    ret = None
    for body_op in block.operations:
        name = body_op.operation.name
        if name not in _COMPARATOR_OPS:
            raise Unsupported(f"sort with a comparator using {name}")
        if name == "stablehlo.return":
            ret = body_op
        if name != "stablehlo.compare":
            continue
        direction = w.shlo.ComparisonDirectionAttr(body_op.attributes["comparison_direction"]).value
        if direction not in ("LT", "GT"):
            continue
        a, b = (_block_arg_root(w, o) for o in body_op.operands)
        if not isinstance(a, int) or not isinstance(b, int) or a // 2 != b // 2 or a == b:
            raise Unsupported("sort with a comparator that is not an order on the operands")
        directions.add((direction == "LT") != (a % 2 == 0))
        if a // 2 not in keys:
            keys.append(a // 2)
        ctype = body_op.attributes["compare_type"] if "compare_type" in body_op.attributes else None
        if (ctype is not None and w.shlo.ComparisonTypeAttr(ctype).value == "TOTALORDER"
                and all(isinstance(o, w.ir.BlockArgument) for o in body_op.operands)):
            total.add(a // 2)
    if not keys or len(directions) != 1:
        raise Unsupported("sort with a comparator that is not a lexicographic order")
    keys = sorted(keys)
    if len(keys) == 1 and ret is not None:
        r = next(iter(ret.operands))
        if isinstance(r, w.ir.BlockArgument) or r.owner.name != "stablehlo.compare":
            raise Unsupported("sort with a comparator that is not an order on the operands")
    return keys, directions.pop(), total


@converter("stablehlo.sort")
def _sort(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    keys, descending, total = _comparator(w, op.regions[0].blocks[0])
    if len(keys) > 1 and descending:
        raise Unsupported("sort with a descending lexicographic comparator")
    xs = [w.value(s) for s in ins]
    return [w.out(v) for v in w.em.sort(xs, _int(w.ir, _attr(op, "dimension")), keys, descending,
                                        total_order=sorted(total))]


@converter("chlo.top_k", "mhlo.topk")
def _top_k(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    """Top k along the last dim (HLO text converts to ``mhlo.topk``, which may ask for the smallest)."""
    idx_dt = w.mlir_type(op.results[1].type, [1] * w.ir.RankedTensorType(op.results[1].type).rank).dtype
    largest = _attr(op, "largest")
    big = True if largest is None else bool(w.ir.BoolAttr(largest).value)
    # chlo.top_k ranks floats by XLA's total order (a NaN with the sign bit set comes last).
    return [w.out(v) for v in w.em.topk(w.value(ins[0]), _int(w.ir, _attr(op, "k")), -1, big, idx_dt,
                                        total_order=True)]


@converter("chlo.bessel_i1e")
def _bessel_i1e(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    return [w.out(w.em.bessel(1, w.value(ins[0])))]


@converter("stablehlo.bitcast_convert")
def _bitcast_convert(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    t = w.mlir_type(op.results[0].type)
    return [w.out(w.em.bitcast(w.value(ins[0]), t.dtype))]


@converter("stablehlo.scatter")
def _scatter(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    if len(op.results) != 1:
        raise Unsupported(f"scatter of {len(op.results)} operands")
    block = op.regions[0].blocks[0]
    args = list(block.arguments)
    body = list(block.operations)
    if len(body) == 1 and next(iter(body[0].operands)) == args[1]:
        kind: str | None = "none"
    else:
        kind = {"sum": "add", "prod": "mul", "max": "max", "min": "min", "or": "max", "and": "min"}.get(
            _reducer_kind(w, block, args[0], args[1]) or "")
    if kind is None:
        raise Unsupported("scatter with a combiner other than overwrite/add/mul/max/min")
    dn = w.shlo.ScatterDimensionNumbers(_attr(op, "scatter_dimension_numbers"))
    return [w.out(index.scatter(
        w.em, w.value(ins[0]), w.value(ins[1]), w.value(ins[2]), update_window_dims=list(dn.update_window_dims),
        inserted_window_dims=list(dn.inserted_window_dims),
        scatter_dims_to_operand_dims=list(dn.scattered_dims_to_operand_dims),
        operand_batching_dims=list(dn.input_batching_dims),
        scatter_indices_batching_dims=list(dn.scatter_indices_batching_dims),
        index_vector_dim=int(dn.index_vector_dim), reduction=kind, clip=False))]


@converter("func.call")
def _call(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    callee = w.ir.FlatSymbolRefAttr(_attr(op, "callee")).value
    fn = w.funcs.get(callee)
    if fn is None:
        raise Unsupported(f"call of unknown function @{callee}")
    return w.run_func(fn, ins, depth + 1, w.em.loc)


@converter("stablehlo.composite")
def _composite(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    callee = w.ir.FlatSymbolRefAttr(_attr(op, "decomposition")).value
    fn = w.funcs.get(callee)
    if fn is None:
        raise Unsupported(f"composite with unknown decomposition @{callee}")
    return w.run_func(fn, ins, depth + 1, w.em.loc)


@converter("mhlo.fusion")
def _fusion(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    """XLA's fusions (optimised HLO): the body's block arguments are the operands; inline it."""
    return w.run_func(op, ins, depth + 1, w.em.loc)


@converter("mhlo.copy")
def _copy(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    """A copy changes the physical layout only (optimised HLO); the values are the same."""
    return list(ins)


@converter("mhlo.bitcast")
def _bitcast(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    """A bitcast reinterprets the bytes: under layouts ``source_layout``/``result_layout``
    (minor-to-major, as XLA prints them) that is transpose to physical order, reshape,
    transpose back; with row-major layouts it is a reshape."""
    x = w.value(ins[0])
    t = w.mlir_type(op.results[0].type)
    if t.dtype != x.dtype:
        raise Unsupported("bitcast between element types")
    src_attr, res_attr = _attr(op, "source_layout"), _attr(op, "result_layout")
    src = list(reversed(_ints(w.ir, src_attr))) if src_attr is not None else list(range(x.type.rank))
    res = list(reversed(_ints(w.ir, res_attr))) if res_attr is not None else list(range(t.rank))
    phys = w.em.transpose(x, src)
    y = w.em.reshape(phys, [t.shape[d] for d in res])
    back = sorted(range(len(res)), key=lambda i: res[i])
    return [w.out(w.em.transpose(y, back))]


def _approx_top_k(w: _Walker, op: Any, ins: list[_Slot]) -> list[_Slot]:
    """jax's approx_max_k/approx_min_k; outside TPUs XLA computes them exactly (a top-k)."""
    cfg = _attr(op, "mhlo.backend_config")
    if cfg is None or len(ins) != 4:
        raise Unsupported("custom_call @ApproxTopK without its configuration")
    d = w.ir.DictAttr(cfg)
    k, axis = _int(w.ir, d["top_k"]), _int(w.ir, d["reduction_dim"])
    comparators = [w.funcs.get(w.ir.FlatSymbolRefAttr(c).value)
                   for c in w.ir.ArrayAttr(_attr(op, "called_computations"))]
    direction = None
    if comparators and comparators[0] is not None:
        for body_op in comparators[0].regions[0].blocks[0].operations:
            if body_op.operation.name == "stablehlo.compare":
                direction = w.shlo.ComparisonDirectionAttr(body_op.attributes["comparison_direction"]).value
    if direction not in ("GT", "LT"):
        raise Unsupported("custom_call @ApproxTopK with an unrecognised comparator")
    idx_dt = w.mlir_type(op.results[1].type, [1] * w.ir.RankedTensorType(op.results[1].type).rank).dtype
    return [w.out(v) for v in w.em.topk(w.value(ins[0]), k, axis, direction == "GT", idx_dt)]


@converter("stablehlo.custom_call")
def _custom_call(w: _Walker, op: Any, ins: list[_Slot], depth: int) -> list[_Slot]:
    target = w.ir.StringAttr(_attr(op, "call_target_name")).value
    if target == "shape_assertion":
        return []  # jax.export's checks of the symbolic shapes; the interpreter checks bindings itself
    if target in _IDENTITY_CALLS and len(ins) == len(op.results):
        return list(ins)
    if target == "ApproxTopK":
        return _approx_top_k(w, op, ins)
    raise Unsupported(f"custom_call @{target}")


def supported_ops() -> list[str]:
    """The StableHLO/CHLO ops :func:`import_stablehlo` translates (some only in common forms)."""
    return sorted(str(k) for k in _HANDLERS)


# ---------------------------------------------------------------------------
# Entry points


def _parse_module(ir: Any, jax_mlir: Any, data: str | bytes, source: str,
                  stablehlo: Any = None) -> tuple[Any, Any]:
    """Parse text or bytecode; a StableHLO portable artifact (VHLO bytecode, what
    ``Exported.mlir_module_serialized`` holds) is upgraded to StableHLO first."""
    ctx = jax_mlir.make_ir_context()
    with ctx:
        if isinstance(data, bytes) and stablehlo is not None:
            try:
                return ctx, stablehlo.deserialize_portable_artifact(ctx, data)
            except Exception:  # noqa: BLE001, S110 - not a portable artifact: plain MLIR bytecode
                pass
        try:
            return ctx, ir.Module.parse(data)
        except ir.MLIRError as e:
            diags = getattr(e, "error_diagnostics", None) or []
            if diags:
                d = diags[0]
                loc = location_from_mlir(str(d.location))
                where = f"{source}:{loc.line}:{loc.col}" if loc.file is not None else source
                raise FrontendError(f"{where}: {d.message} (StableHLO parse error)") from None
            first = str(e).strip().splitlines()
            raise FrontendError(f"{source}: {first[-1] if first else 'cannot parse'} (StableHLO parse error)") from None
    raise AssertionError("unreachable")


def _read_source(source: Any) -> tuple[str | bytes, str, list[list[Dim]] | None]:
    """(text or bytecode, a name for messages, arg dims from an Exported's avals)."""
    if hasattr(source, "mlir_module") and hasattr(source, "in_avals"):  # jax.export.Exported
        dims = [[sym_dim(d) for d in a.shape] for a in source.in_avals]
        return source.mlir_module(), f"<exported {getattr(source, 'fun_name', 'fn')}>", dims
    if hasattr(source, "as_text") and hasattr(source, "compile"):  # jax.jit(f).lower(...)
        try:
            text = source.as_text(debug_info=True)
        except TypeError:
            text = source.as_text()
        return text, "<lowered>", None
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and len(source) < 4096
                                    and os.path.exists(source)):
        p = Path(source)
        data = p.read_bytes()
        if data.startswith(_MLIR_BYTECODE):
            return data, str(p), None
        return data.decode("utf-8"), str(p), None
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
        if not data.startswith(_MLIR_BYTECODE):
            # Exported.serialize() (a flatbuffer around the portable artifact)
            try:
                import jax

                return _read_source(jax.export.deserialize(bytearray(data)))
            except Exception:  # noqa: BLE001, S110 - not that either; MLIR says what it is below
                pass
        return data, "<bytecode>", None
    if isinstance(source, str):
        return source, "<stablehlo>", None
    raise FrontendError(f"import_stablehlo takes StableHLO text, bytecode, a path, a jax.export.Exported or a "
                        f"jax Lowered object, not {type(source).__name__}")


def _entry(w: _Walker, source: str) -> Any:
    if "main" in w.funcs:
        return w.funcs["main"]
    for fn in w.funcs.values():
        vis = _attr(fn, "sym_visibility")
        if vis is None or w.ir.StringAttr(vis).value == "public":
            return fn
    raise FrontendError(f"{source}: the module has no public function to import")


def _global_constant_names(w: _Walker, fn: Any) -> dict[tuple[int, int], str]:
    """(arg index, dim) -> symbol, from calls passing get_dimension_size to jax.global_constant args."""
    ir = w.ir
    out: dict[tuple[int, int], str] = {}
    block = fn.regions[0].blocks[0]
    for op in block.operations:
        if op.operation.name != "func.call":
            continue
        callee = w.funcs.get(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
        if callee is None or "arg_attrs" not in callee.attributes:
            continue
        arg_attrs = ir.ArrayAttr(callee.attributes["arg_attrs"])
        for i, operand in enumerate(op.operands):
            if i >= len(arg_attrs):
                break
            d = ir.DictAttr(arg_attrs[i])
            if "jax.global_constant" not in d:
                continue
            sym = ir.StringAttr(d["jax.global_constant"]).value
            owner = operand.owner
            if getattr(owner, "name", None) != "stablehlo.get_dimension_size":
                continue
            src = owner.operands[0]
            if isinstance(src, ir.BlockArgument):
                out.setdefault((src.arg_number, _int(ir, owner.attributes["dimension"])), sym)
    return out


def _arg_names(w: _Walker, fn: Any) -> list[str]:
    """Argument names from the args' NameLocs, else from the callee they are passed to."""
    block = fn.regions[0].blocks[0]
    names: list[str | None] = []
    for a in block.arguments:
        loc = location_from_mlir(str(a.location))
        names.append(loc.name if loc.file is None and loc.name else None)
    if any(n is None for n in names):
        for op in block.operations:
            if op.operation.name != "func.call":
                continue
            callee = w.funcs.get(w.ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
            if callee is None:
                continue
            cargs = list(callee.regions[0].blocks[0].arguments)
            for operand, carg in zip(op.operands, cargs):
                if not isinstance(operand, w.ir.BlockArgument):
                    continue
                i = operand.arg_number
                if names[i] is None:
                    loc = location_from_mlir(str(carg.location))
                    if loc.file is None and loc.name:
                        names[i] = loc.name
    out = []
    seen: set[str] = set()
    for i, n in enumerate(names):
        s = sanitize_name(n) if n else f"arg{i}"
        if s in seen:
            s = f"{s}_{i}"
        seen.add(s)
        out.append(s)
    return out


def import_stablehlo(source: Any, name: str = "main", *, source_name: str | None = None) -> Module:
    """Import StableHLO as an irkit module.

    ``source`` is StableHLO text (``jax.jit(f).lower(x).as_text()``), MLIR
    bytecode, a path to a ``.mlir`` file, a ``jax.export.Exported`` (its symbolic
    shapes name the dynamic dims) or a ``Lowered`` object.  Raises
    :class:`FrontendError` for text MLIR cannot parse (``file:line:col: message``)
    and :class:`~irkit.frontends.common.UnsupportedOpsError` listing every op
    irkit cannot translate.
    """
    jax_mlir, ir, stablehlo = _mlir()
    data, src, avals_dims = _read_source(source)
    src = source_name or src
    ctx, module = _parse_module(ir, jax_mlir, data, src, stablehlo)
    with ctx:
        return _import_parsed(ir, stablehlo, module, name, src, avals_dims)


def _import_parsed(ir: Any, stablehlo: Any, module: Any, name: str, src: str,
                   avals_dims: list[list[Dim]] | None) -> Module:
    w = _Walker(ir, stablehlo, module, None, src)
    fn = _entry(w, src)
    block = fn.regions[0].blocks[0]
    sym_names = _global_constant_names(w, fn)
    arg_types: list[TensorType] = []
    for i, a in enumerate(block.arguments):
        rt = a.type
        if not isinstance(rt, ir.RankedTensorType):
            raise FrontendError(f"{src}: argument {i} has type {rt}; only ranked tensors are supported")
        try:
            static = w.static_dims(rt)
        except Unsupported as e:
            raise FrontendError(f"{src}: argument {i} has an unsupported {e.what}") from None
        dims: list[Dim] = []
        for j, d in enumerate(static):
            if d is not None:
                dims.append(d)
            elif avals_dims is not None and i < len(avals_dims):
                dims.append(avals_dims[i][j])
            else:
                dims.append(SymDim.symbol(sym_names.get((i, j), f"s{i}_{j}")))
        try:
            arg_types.append(TensorType(tuple(dims), ir_dtype_from_mlir(str(ir.RankedTensorType(rt).element_type))))
        except Unsupported as e:
            raise FrontendError(f"{src}: argument {i} has an unsupported {e.what}") from None
    g = Graph(arg_types, _arg_names(w, fn))
    w.em = Emitter(Builder.at_end(g))
    outs = w.run_func(fn, [_Slot(t, ir=v) for t, v in zip(arg_types, g.args)])
    w.unsupported.raise_if_any()
    results: list[Value] = []
    flat_index: list[int | None] = []  # the main function's result index -> flat output index
    for s in outs:
        if s.items is not None:
            flat_index.append(None)
            results.extend(w.value(x) for x in s.items)
        else:
            flat_index.append(len(results))
            results.append(w.value(s))
    w.em.loc = Location.unknown()
    w.em.b.ret(*results)
    remove_dead_ops(g)
    f = Function(name, g, location_from_mlir(str(fn.location)))
    aliases = _donation_aliases(ir, fn, flat_index, f, src)
    if aliases:
        set_aliases(f, aliases)
    m = Module([f])
    verify(m)
    return m


def _donation_aliases(ir: Any, fn: Any, flat_index: list[int | None], f: Function, src: str) -> dict[int, int]:
    """``{output: arg}`` from the arguments' ``tf.aliasing_output`` attributes (``jax.jit`` with
    ``donate_argnums`` when jax matched the donated buffer to an output).  A ``jax.buffer_donor``
    argument has no output to alias (XLA may reuse its memory); it imports as a plain argument."""
    if "arg_attrs" not in fn.attributes:
        return {}
    arg_attrs = ir.ArrayAttr(fn.attributes["arg_attrs"])
    out: dict[int, int] = {}
    names = f.arg_names()
    for i in range(min(len(arg_attrs), len(f.args))):
        d = ir.DictAttr(arg_attrs[i])
        if "tf.aliasing_output" not in d:
            continue
        r = ir.IntegerAttr(d["tf.aliasing_output"]).value
        o = flat_index[r] if 0 <= r < len(flat_index) else None
        if o is None:
            raise FrontendError(f"{src}: argument {i} ('{names[i]}') has tf.aliasing_output = {r}, which is not "
                                "a tensor result of the entry function")
        if f.outputs[o].type != f.args[i].type:
            raise FrontendError(f"{src}: argument {i} ('{names[i]}') of type {f.args[i].type} is aliased to "
                                f"result {r} of type {f.outputs[o].type}; an alias needs the same type")
        if o in out:
            raise FrontendError(f"{src}: result {r} is the tf.aliasing_output of arguments {out[o]} and {i}")
        out[o] = i
    return out


def import_hlo(source: str | Path, name: str = "main") -> Module:
    """Import XLA HLO text (an ``HloModule`` as ``--xla_dump_to`` writes it).

    jaxlib's HLO parser reads the text (``hlo_module_from_text``); XLA converts
    the module to StableHLO (``xla_computation_to_mlir_module``), which
    :func:`import_stablehlo` walks.  ``source`` is the text or a path to it.
    """
    src = "<hlo>"
    text = source
    if isinstance(source, Path) or ("\n" not in source and os.path.exists(source)):
        src = str(source)
        text = Path(source).read_text()
    assert isinstance(text, str)
    try:
        from jax._src.lib import _jax
        from jax._src.lib import xla_client as xc
    except ImportError as e:  # pragma: no cover - jax is an optional dependency
        raise FrontendError(f"the HLO frontend needs jaxlib: {e} (pip install 'irkit[jax]')") from None
    hlo = getattr(xc, "hlo", None) or xc._xla
    try:
        hm = hlo.hlo_module_from_text(text)
    except Exception as e:  # noqa: BLE001 - jaxlib raises JaxRuntimeError (its class moves between versions)
        raise FrontendError(f"{src}:{_hlo_error(str(e))} (HLO parse error)") from None
    comp = hlo.XlaComputation(hm.as_serialized_hlo_module_proto())
    mlir_text = _jax.mlir.xla_computation_to_mlir_module(comp)
    m = import_stablehlo(mlir_text, name, source_name=src)
    aliases = _hlo_aliases(text, src)
    if aliases:
        f = m.entry
        for o, a in aliases.items():
            if o >= len(f.outputs) or a >= len(f.args) or f.outputs[o].type != f.args[a].type:
                raise FrontendError(f"{src}: input_output_alias pairs output {o} with parameter {a}, "
                                    "which the entry computation does not have with one type")
        set_aliases(f, aliases)
        verify(m)
    return m


_HLO_ALIAS = re.compile(r"\{\s*([0-9, ]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{\s*([0-9, ]*)\}\s*(?:,\s*[a-z-]+\s*)?\)")


def _hlo_aliases(text: str, src: str) -> dict[int, int]:
    """``{output: parameter}`` from the ``HloModule`` header's ``input_output_alias={ {1}: (1, {}, may-alias) }``
    (XLA's record of donated buffers; StableHLO conversion drops it).  Only whole parameters aliased to
    top-level outputs are state; a nested tuple index is refused."""
    header = text.lstrip().split("\n", 1)[0]
    at = header.find("input_output_alias={")
    if at < 0:
        return {}
    body, depth = "", 0
    for ch in header[at + len("input_output_alias="):]:
        depth += ch == "{"
        depth -= ch == "}"
        body += ch
        if depth == 0:
            break
    out: dict[int, int] = {}
    for mt in _HLO_ALIAS.finditer(body[1:-1]):
        out_index = [int(x) for x in mt.group(1).replace(" ", "").split(",") if x]
        if len(out_index) > 1 or mt.group(3).strip():
            raise FrontendError(f"{src}: input_output_alias {mt.group(0)} names a nested tuple element; only "
                                "whole parameters aliased to top-level outputs are supported")
        out[out_index[0] if out_index else 0] = int(mt.group(2))
    return out


def _hlo_error(msg: str) -> str:
    """The first ``line:col: error: ...`` of XLA's HLO parser message."""
    m = re.search(r"(\d+):(\d+): error: ([^\n]*)", msg)
    if m:
        return f"{m.group(1)}:{m.group(2)}: {m.group(3)}"
    lines = [ln for ln in msg.strip().splitlines() if ln.strip()]
    return " " + (lines[0] if lines else "cannot parse")


__all__ = ["import_hlo", "import_stablehlo", "supported_ops"]
