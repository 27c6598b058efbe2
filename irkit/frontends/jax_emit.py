"""XLA operations expressed in irkit IR, shared by the jaxpr and StableHLO importers.

Design note: a jaxpr primitive and the StableHLO op it lowers to carry the same
semantics (XLA's), only spelled differently (``dot_general`` dimension numbers
are a tuple in a jaxpr and an attribute in MLIR).  Each importer reads its own
spelling into plain Python values and calls one :class:`Emitter` method, so
``dot_general``, ``broadcast_in_dim``, ``gather``, ``conv`` and the rest are
translated to IR once:

- ``dot_general`` becomes ``ik.matmul`` when it is plainly a (batched) matrix
  product, otherwise ``ik.contract`` with the same dimension numbers, so a
  transpose that JAX folded into the contraction stays folded.
- ``broadcast_in_dim`` becomes transpose (only when dims are permuted), reshape
  (to insert the 1s) and ``ik.broadcast``.
- ``pad`` with interior padding or a padding value that is not a constant is
  built from concatenations; ``reduce_window`` with base dilation pads the
  identity between elements first; a product window is a product of strided
  slices (no IR op reduces windows by multiplication).
- variadic ``sort`` sorts each key stably with ``ik.sort`` (last key first) and
  permutes every operand with ``ik.gather_elements``.
- ``gather``, ``scatter`` and the dynamic slices live in
  :mod:`irkit.frontends.jax_emit_index`.

Small integer values are folded (:meth:`Emitter.const_value`) with the op
registry's own reference kernels, so a start index computed by a few ops still
counts as a constant.  Nothing here imports jax.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from irkit.errors import Unsupported
from irkit.ir.builder import Builder, BuildError
from irkit.ir.core import Dense, Graph, Location, Value
from irkit.ir.ops import OPS, RefContext
from irkit.ir.types import Dim, DType, SymDim, TensorType, dim_add, dim_mul, dim_sub, static_shape

FOLD_LIMIT = 64
"""Largest element count :meth:`Emitter.const_value` folds."""


# ---------------------------------------------------------------------------
# Element types


_NP_TO_IR: dict[str, DType] = {
    "float64": DType.f64, "float32": DType.f32, "float16": DType.f16, "bfloat16": DType.bf16,
    "int64": DType.i64, "int32": DType.i32, "int16": DType.i16, "int8": DType.i8, "bool": DType.bool,
    "uint8": DType.ui8, "uint16": DType.ui16, "uint32": DType.ui32, "uint64": DType.ui64,
}


def ir_dtype(dt: Any) -> DType:
    """The IR dtype of a NumPy/JAX dtype; :class:`Unsupported` for others (complex, fp8)."""
    try:
        name = np.dtype(dt).name
    except TypeError:  # jax's extended dtypes (PRNG keys) are no NumPy dtypes
        raise Unsupported(f"dtype {dt}") from None
    try:
        return _NP_TO_IR[name]
    except KeyError:
        raise Unsupported(f"dtype {name}") from None


_MLIR_TO_IR: dict[str, DType] = {
    "f64": DType.f64, "f32": DType.f32, "f16": DType.f16, "bf16": DType.bf16,
    "i64": DType.i64, "i32": DType.i32, "i16": DType.i16, "i8": DType.i8, "i1": DType.bool,
    "ui8": DType.ui8, "ui16": DType.ui16, "ui32": DType.ui32, "ui64": DType.ui64,
}


def ir_dtype_from_mlir(name: str) -> DType:
    """The IR dtype of an MLIR element type name (``f32``, ``i1``, ``bf16``)."""
    try:
        return _MLIR_TO_IR[name]
    except KeyError:
        raise Unsupported(f"element type {name}") from None


# ---------------------------------------------------------------------------
# Symbolic dims


def sym_dim(d: Any) -> Dim:
    """An IR dim from a JAX dim: an int, or a shape-polymorphism ``_DimExpr`` polynomial.

    ``B*S`` and ``2*S - 1`` become :class:`SymDim` polynomials; ``floordiv``,
    ``mod``, ``max`` and ``min`` terms have no polynomial form and are refused.
    """
    if isinstance(d, (int, np.integer)):
        return int(d)
    terms = getattr(d, "_sorted_terms", None)
    if terms is None:
        raise Unsupported(f"dimension {d!r} ({type(d).__name__})")
    total: Dim = 0
    for term, coeff in terms:
        mono: Dim = int(coeff)
        for factor, power in term._factors:
            if factor.var is None:
                raise Unsupported(
                    f"dimension '{d}' (its {factor.operation} has no polynomial form; make the dim static "
                    "or a plain symbol)")
            for _ in range(int(power)):
                mono = dim_mul(mono, SymDim.symbol(factor.var))
        total = dim_add(total, mono)
    return total


# ---------------------------------------------------------------------------
# Locations


_FILE_LOC = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')
_NAME_LOC = re.compile(r'^loc\("((?:[^"\\]|\\.)*)"')


def location_from_mlir(text: str) -> Location:
    """A :class:`Location` from MLIR's printed location.

    ``loc("jit(f)/dot_general"(callsite("f"("model.py":7:8 to :43) at ...)))``
    gives name ``jit(f)/dot_general`` at ``model.py:7:8``: the outer NameLoc names
    the op, the first file location (the innermost frame of a call site) says
    where in the user's code it came from.  The MLIR Python bindings offer no
    accessors for location kinds, so the printed form is read.
    """
    if text in ("loc(unknown)", ""):
        return Location.unknown()
    name_m = _NAME_LOC.match(text)
    name = name_m.group(1) if name_m else None
    file_m = _FILE_LOC.search(text)
    if file_m is not None:
        # A bare file location prints as loc("f.py":1:2); that string is not a name.
        if name_m is not None and text.startswith(f'loc("{name}":'):
            name = None
        return Location(file=file_m.group(1), line=int(file_m.group(2)), col=int(file_m.group(3)), name=name)
    if name is not None:
        return Location(name=name)
    return Location.unknown()


# ---------------------------------------------------------------------------
# Dead code


def remove_dead_ops(g: Graph) -> int:
    """Erase ops whose results are unused (every op in the IR is pure); returns the count."""
    removed = 0
    changed = True
    while changed:
        changed = False
        for op in reversed(list(g)):
            d = OPS.get(op.name)
            if d is None or d.has("terminator") or op.is_used:
                continue
            g.erase(op)
            removed += 1
            changed = True
    return removed


# ---------------------------------------------------------------------------
# The emitter


def _identity_perm(perm: Sequence[int]) -> bool:
    return list(perm) == list(range(len(perm)))


class Emitter:
    """Builds IR for XLA-level operations at a builder's insertion point."""

    def __init__(self, builder: Builder):
        self.b = builder
        self._scalars: dict[tuple[str, DType], Value] = {}
        self._folded: dict[int, np.ndarray | None] = {}

    # -- locations ----------------------------------------------------------
    @property
    def loc(self) -> Location:
        return self.b.loc

    @loc.setter
    def loc(self, loc: Location) -> None:
        self.b.loc = loc

    # -- creation -----------------------------------------------------------
    def op(self, name: str, *operands: Value | None, **attrs: Any) -> Value:
        """Create ``ik.name`` and return its single result."""
        try:
            return self.b.create(f"ik.{name}", list(operands), attrs).results[0]
        except (BuildError, ValueError) as e:  # ValueError: a type inference that fails without an OpError
            raise Unsupported(f"{name}: {e}") from None

    def op_results(self, name: str, operands: Sequence[Value], **attrs: Any) -> list[Value]:
        """Create ``ik.name`` and return all its results."""
        try:
            return list(self.b.create(f"ik.{name}", list(operands), attrs).results)
        except BuildError as e:
            raise Unsupported(f"{name}: {e}") from None

    def constant(self, array: np.ndarray, dtype: DType | None = None, name: str | None = None) -> Value:
        arr = np.asarray(array)
        dt = dtype or ir_dtype(arr.dtype)
        return self.b.constant(Dense(arr, dt, resource=name), loc=self.loc)

    def scalar(self, value: Any, dtype: DType) -> Value:
        """A rank-0 constant; equal scalars in one function share one op."""
        v = np.array(value, dtype=dtype.np)
        key = (v.tobytes().hex(), dtype)
        hit = self._scalars.get(key)
        if hit is not None and hit.producer is not None and hit.producer.parent is not None:
            return hit
        out = self.b.create("ik.constant", [], {"value": Dense(v, dtype)}, loc=Location.unknown()).results[0]
        self._scalars[key] = out
        return out

    def _splat_value(self, v: Value) -> Any:
        """The element of a constant whose elements are all equal, else None."""
        op = v.producer
        if op is None or op.name != "ik.constant":
            return None
        d: Dense = op.attrs["value"]
        return d.splat_value() if d.size and d.is_splat else None

    # -- folding --------------------------------------------------------------
    def const_value(self, v: Value, depth: int = 0) -> np.ndarray | None:
        """The value of ``v`` when it is a small constant or computed from ones."""
        key = id(v)
        if key in self._folded:
            return self._folded[key]
        out = self._fold(v, depth)
        self._folded[key] = out
        return out

    def _fold(self, v: Value, depth: int) -> np.ndarray | None:
        op = v.producer
        if op is None or depth > 32 or not v.type.is_static:
            return None
        if op.name == "ik.constant":
            d: Dense = op.attrs["value"]
            return d.array if d.size <= FOLD_LIMIT or d.is_splat else None
        if v.type.num_elements() > FOLD_LIMIT or op.regions:
            return None
        d_ = OPS.get(op.name)
        if d_ is None or not d_.has("pure") or any(not o.type.is_static for o in op.operands):
            return None
        ins = []
        for o in op.operands:
            x = self.const_value(o, depth + 1)
            if x is None:
                return None
            ins.append(x)
        ctx = RefContext([r.type for r in op.results], [r.type.concrete_shape({}) for r in op.results], {}, None, op)
        try:
            outs = d_.ref(ins, d_.with_defaults(op.attrs), ctx)
        except Exception:  # noqa: BLE001 - a kernel that cannot fold leaves the value unknown
            return None
        return np.asarray(outs[v.index]).astype(v.dtype.np)

    # -- elementwise ----------------------------------------------------------
    def cast(self, x: Value, dtype: DType) -> Value:
        return x if x.dtype == dtype else self.op("cast", x, to=dtype)

    def unary(self, name: str, x: Value) -> Value:
        return self.op(name, x)

    def binary(self, name: str, x: Value, y: Value) -> Value:
        return self.op(name, x, y)

    def select(self, pred: Value, on_true: Value, on_false: Value) -> Value:
        if pred.dtype != DType.bool:
            pred = self.op("ne", pred, self.scalar(0, pred.dtype))
        return self.op("where", pred, on_true, on_false)

    def select_n(self, which: Value, cases: Sequence[Value]) -> Value:
        """XLA select_n: ``cases[which]`` (``which`` is bool for two cases)."""
        if len(cases) == 1:
            return cases[0]
        if which.dtype == DType.bool:
            if len(cases) != 2:
                raise Unsupported("select_n with a boolean selector and more than two cases")
            return self.op("where", which, cases[1], cases[0])
        out = cases[-1]
        for i in range(len(cases) - 2, -1, -1):
            out = self.op("where", self.op("eq", which, self.scalar(i, which.dtype)), cases[i], out)
        return out

    def clamp(self, lo: Value, x: Value, hi: Value) -> Value:
        """XLA clamp, ``min(max(x, lo), hi)``; on i1 that is ``(x or lo) and hi``."""
        return self.minmax("min", self.minmax("max", x, lo), hi)

    def integer_pow(self, x: Value, y: int) -> Value:
        """``x ** y`` for a Python int ``y`` as a chain of multiplies (square and multiply)."""
        if y == 0:
            return self.op("broadcast", self.scalar(1, x.dtype), shape=x.shape)
        n = abs(y)
        result: Value | None = None
        base = x
        while n:
            if n & 1:
                result = base if result is None else self.op("mul", result, base)
            n >>= 1
            if n:
                base = self.op("mul", base, base)
        assert result is not None
        if y < 0:
            if not x.dtype.is_float:
                raise Unsupported("integer_pow with a negative exponent on integers")
            result = self.op("reciprocal", result)
        return result

    def is_finite(self, x: Value) -> Value:
        if not x.dtype.is_float:
            raise Unsupported(f"is_finite on {x.dtype}")
        return self.op("isfinite", x)

    def bitwise_not(self, x: Value) -> Value:
        return self.op("not" if x.dtype == DType.bool else "bitwise_not", x)

    def logical(self, name: str, x: Value, y: Value) -> Value:
        """XLA and/or/xor: logical on i1, bitwise on integers."""
        if x.dtype == DType.bool and y.dtype == DType.bool:
            return self.op(name, x, y)
        if not x.dtype.is_int:
            raise Unsupported(f"bitwise {name} on {x.dtype}")
        return self.op(f"bitwise_{name}", x, y)

    def minmax(self, name: str, x: Value, y: Value) -> Value:
        """XLA max/min; on i1 they are or/and."""
        if x.dtype == DType.bool:
            return self.op("or" if name == "max" else "and", x, y)
        return self.op(name, x, y)

    def round(self, x: Value, away_from_zero: bool) -> Value:
        """XLA round: half to even (``ik.round``) or half away from zero.

        Away from zero is trunc(x) plus sign(x) where the dropped fraction is at least
        one half; ``floor(|x| + 0.5)`` would round 0.49999997 up in f32.
        """
        if not away_from_zero:
            return self.op("round", x)
        t = self.op("trunc", x)
        frac = self.op("abs", self.op("sub", x, t))
        up = self.op("ge", frac, self.scalar(0.5, x.dtype))
        return self.op("where", up, self.op("add", t, self.op("sign", x)), t)

    def cbrt(self, x: Value) -> Value:
        """Real cube root: sign(x) * |x| ** (1/3)."""
        mag = self.op("pow", self.op("abs", x), self.scalar(1.0 / 3.0, x.dtype))
        return self.op("mul", self.op("sign", x), mag)

    def identity_value(self, kind: str, dtype: DType) -> Any:
        """The identity of a reduction ``kind`` (sum, prod, max, min) in ``dtype``."""
        if kind == "sum":
            return 0
        if kind == "prod":
            return 1
        if dtype == DType.bool:
            return kind == "min"
        if dtype.is_float:
            return -np.inf if kind == "max" else np.inf
        info = np.iinfo(dtype.np)
        return int(info.min if kind == "max" else info.max)

    # -- special functions ---------------------------------------------------------
    def _chebyshev(self, x: Value, coeffs: Sequence[float]) -> Value:
        """Clenshaw's recurrence as Cephes' ``chbevl`` (and jax, XLA) evaluate it:
        ``b0 = x * b1 - b2 + c`` over the coefficients, then ``(b0 - b2) / 2``."""
        dt = x.dtype
        b0: Value | None = None
        b1: Value | None = None
        b2: Value | None = None
        for c in coeffs:
            b2, b1 = b1, b0
            t = None if b1 is None else self.op("mul", x, b1)
            if t is not None and b2 is not None:
                t = self.op("sub", t, b2)
            b0 = self.scalar(c, dt) if t is None else self.op("add", t, self.scalar(c, dt))
        assert b0 is not None and b2 is not None
        return self.op("mul", self.op("sub", b0, b2), self.scalar(0.5, dt))

    def bessel(self, order: int, x: Value) -> Value:
        """``exp(-|x|) * I_order(x)`` for order 0 (jax's ``bessel_i0e``) and 1 (XLA's ``bessel_i1e``):
        Cephes' Chebyshev expansions on ``|x| <= 8`` and ``32 / |x|`` beyond, as jax and XLA
        evaluate them (f16/bf16 through f32; i1e on f64 is refused, as only the f32 expansion is
        here)."""
        dt = x.dtype
        if dt in (DType.f16, DType.bf16):
            return self.cast(self.bessel(order, self.cast(x, DType.f32)), dt)
        if dt not in (DType.f32, DType.f64) or (order == 1 and dt == DType.f64):
            raise Unsupported(f"bessel_i{order}e on {dt}")
        a_coef, b_coef = (_I0E_F64 if dt == DType.f64 else _I0E_F32) if order == 0 else _I1E_F32
        z = self.op("abs", x)
        small = self._chebyshev(self.op("sub", self.op("mul", self.scalar(0.5, dt), z), self.scalar(2.0, dt)), a_coef)
        if order == 1:
            small = self.op("mul", small, z)
        big = self.op("div", self._chebyshev(self.op("sub", self.op("div", self.scalar(32.0, dt), z),
                                                     self.scalar(2.0, dt)), b_coef), self.op("sqrt", z))
        y = self.op("where", self.op("le", z, self.scalar(8.0, dt)), small, big)
        if order == 1:
            y = self.op("where", self.op("lt", x, self.scalar(0.0, dt)), self.op("neg", y), y)
        return y

    def reduce_precision(self, x: Value, exponent_bits: int, mantissa_bits: int) -> Value:
        widths = {DType.f64: (11, 52), DType.f32: (8, 23), DType.f16: (5, 10), DType.bf16: (8, 7)}
        if widths.get(x.dtype) == (exponent_bits, mantissa_bits):
            return x
        for dt, w in widths.items():
            if w == (exponent_bits, mantissa_bits):
                return self.cast(self.cast(x, dt), x.dtype)
        raise Unsupported(f"reduce_precision to e{exponent_bits}m{mantissa_bits}")

    # -- contractions -----------------------------------------------------------
    def dot_general(self, lhs: Value, rhs: Value, lhs_contract: Sequence[int], rhs_contract: Sequence[int],
                    lhs_batch: Sequence[int], rhs_batch: Sequence[int], out_dtype: DType) -> Value:
        """XLA dot_general; ``ik.matmul`` when it is plainly a matrix product."""
        lc, rc, lb, rb = (tuple(int(i) for i in d) for d in (lhs_contract, rhs_contract, lhs_batch, rhs_batch))
        if out_dtype == DType.bool:
            # A boolean dot is an or of ands: count the true products in i32.
            r = self.dot_general(self.cast(lhs, DType.i32), self.cast(rhs, DType.i32), lc, rc, lb, rb, DType.i32)
            return self.op("ne", r, self.scalar(0, DType.i32))
        if lhs.dtype != out_dtype:
            lhs = self.cast(lhs, out_dtype)
        if rhs.dtype != out_dtype:
            rhs = self.cast(rhs, out_dtype)
        lr, rr = lhs.type.rank, rhs.type.rank
        nb = len(lb)
        batched_mm = (nb >= 0 and lb == rb == tuple(range(nb)) and lr == nb + 2 and rr == nb + 2
                      and lc == (nb + 1,) and rc == (nb,))
        # x[..., K] @ W[K, N]: the free dims of x are kept in order, as ik.matmul broadcasts.
        weight_mm = nb == 0 and lr >= 2 and rr == 2 and lc == (lr - 1,) and rc == (0,)
        if batched_mm or weight_mm:
            return self.op("matmul", lhs, rhs)
        return self.op("contract", lhs, rhs, lhs_batch=lb, rhs_batch=rb, lhs_contract=lc, rhs_contract=rc)

    # -- shapes -----------------------------------------------------------------
    def reshape(self, x: Value, shape: Sequence[Dim]) -> Value:
        shape = tuple(shape)
        return x if x.shape == shape else self.op("reshape", x, shape=shape)

    def transpose(self, x: Value, perm: Sequence[int]) -> Value:
        perm = tuple(int(p) for p in perm)
        return x if _identity_perm(perm) else self.op("transpose", x, perm=perm)

    def broadcast_in_dim(self, x: Value, shape: Sequence[Dim], bdims: Sequence[int]) -> Value:
        """XLA broadcast_in_dim: operand dim i becomes result dim ``bdims[i]``."""
        shape = tuple(shape)
        bdims = [int(d) for d in bdims]
        if len(bdims) != x.type.rank:
            raise Unsupported("broadcast_in_dim with a dimension list not matching the operand rank")
        splat = self._splat_value(x)
        if splat is not None and all(isinstance(d, int) for d in shape):
            # A broadcast constant is a splat constant (what MLIR folds it to); it costs no memory.
            return self.b.constant(Dense.splat(splat, static_shape(shape), x.dtype), loc=self.loc)
        order = sorted(range(len(bdims)), key=lambda i: bdims[i])
        if order != list(range(len(bdims))):
            x = self.transpose(x, order)
            bdims = [bdims[i] for i in order]
        if bdims == list(range(len(shape) - len(bdims), len(shape))):
            # Trailing dims in order: NumPy's right-aligned broadcasting needs no reshape.
            return x if x.shape == shape else self.op("broadcast", x, shape=shape)
        inter: list[Dim] = [1] * len(shape)
        for i, d in enumerate(bdims):
            inter[d] = x.shape[i]
        x = self.reshape(x, inter)
        if tuple(inter) == shape:
            return x
        return self.op("broadcast", x, shape=shape)

    def concat(self, xs: Sequence[Value], axis: int) -> Value:
        if len(xs) == 1:
            return xs[0]
        return self.op("concat", *xs, axis=int(axis))

    def split(self, x: Value, sizes: Sequence[Dim], axis: int) -> list[Value]:
        if len(sizes) == 1:
            return [x]
        return self.op_results("split", [x], axis=int(axis), sizes=tuple(sizes))

    def iota(self, shape: Sequence[Dim], axis: int, dtype: DType) -> Value:
        return self.op("iota", shape=tuple(shape), axis=int(axis), dtype=dtype)

    def slice(self, x: Value, start: Sequence[Dim], limit: Sequence[Dim], strides: Sequence[int] | None) -> Value:
        start, limit = tuple(start), tuple(limit)
        step = tuple(int(s) for s in strides) if strides else (1,) * x.type.rank
        if all(s == 0 for s in start) and limit == x.shape and all(s == 1 for s in step):
            return x
        if all(s == 1 for s in step):
            return self.op("slice", x, start=start, limit=limit)
        return self.op("slice", x, start=start, limit=limit, step=step)

    def pad(self, x: Value, value: Value, low: Sequence[int], high: Sequence[int],
            interior: Sequence[int]) -> Value:
        """XLA pad: negative edge padding slices; interior padding and a padding value
        that is not a constant are built from concatenations (no IR op has either)."""
        low = [int(v) for v in low]
        high = [int(v) for v in high]
        interior = [int(v) for v in interior]
        pv = self.const_value(value)
        const_fill = pv is not None and pv.size == 1
        for axis, k in enumerate(interior):
            if k > 0:
                x = self.interior_pad(x, axis, k, value)
        if any(v < 0 for v in low + high):
            start = [max(0, -v) for v in low]
            limit = [dim_sub(d, max(0, -h)) for d, h in zip(x.shape, high)]
            x = self.slice(x, start, limit, None)
            low = [max(0, v) for v in low]
            high = [max(0, v) for v in high]
        if not any(low + high):
            return x
        if const_fill and x.dtype != DType.bool:
            assert pv is not None
            return self.op("pad", x, pads=tuple(low + high), value=float(pv.reshape(()).item()))
        for axis in range(x.type.rank):
            parts = []
            for n, at_end in ((low[axis], False), (high[axis], True)):
                if n:
                    shape = list(x.shape)
                    shape[axis] = n
                    parts.append((at_end, self.fill(value, shape)))
            if parts:
                x = self.concat([p for e, p in parts if not e] + [x] + [p for e, p in parts if e], axis)
        return x

    def fill(self, value: Value, shape: Sequence[Dim]) -> Value:
        """A tensor of ``shape`` holding the scalar ``value``."""
        v = self.reshape(value, ())
        c = self.const_value(v)
        if c is not None and all(isinstance(d, int) for d in shape):
            return self.b.constant(Dense.splat(c.reshape(()).item(), static_shape(shape), v.dtype),
                                   loc=self.loc)
        return self.op("broadcast", v, shape=tuple(shape))

    def interior_pad(self, x: Value, axis: int, k: int, value: Value) -> Value:
        """``k`` copies of ``value`` between neighbours along ``axis``: concatenate a block of
        fill after every element (as a new dim), flatten, drop the trailing block."""
        n = x.shape[axis]
        if not isinstance(n, int):
            raise Unsupported("interior padding of a symbolic dim")
        if n <= 1:
            return x
        shape = list(x.shape)
        expanded = shape[:axis + 1] + [1] + shape[axis + 1:]
        block = shape[:axis + 1] + [k] + shape[axis + 1:]
        y = self.concat([self.reshape(x, expanded), self.fill(value, block)], axis + 1)
        flat = shape[:axis] + [n * (k + 1)] + shape[axis + 1:]
        y = self.reshape(y, flat)
        limit = list(flat)
        limit[axis] = n + (n - 1) * k
        return self.slice(y, [0] * len(flat), limit, None)

    # -- reductions ------------------------------------------------------------
    def reduce(self, kind: str, x: Value, axes: Sequence[int]) -> Value:
        """``kind`` in sum, max, min, prod, and, or over ``axes`` (none: identity)."""
        axes = tuple(sorted(int(a) for a in axes))
        if not axes:
            return x
        if kind in ("and", "or"):
            if x.dtype != DType.bool:
                raise Unsupported(f"bitwise reduce_{kind} on {x.dtype}")
            r = self.op("reduce_min" if kind == "and" else "reduce_max", self.cast(x, DType.i32), axes=axes)
            return self.cast(r, DType.bool)
        if x.dtype == DType.bool:
            if kind in ("max", "min"):
                r = self.op(f"reduce_{kind}", self.cast(x, DType.i32), axes=axes)
                return self.cast(r, DType.bool)
            raise Unsupported(f"reduce_{kind} on i1")
        return self.op(f"reduce_{kind}", x, axes=axes)

    def argmax(self, x: Value, axis: int, index_dtype: DType, argmin: bool = False) -> Value:
        """XLA/JAX argmax (argmin): the first index of the extreme value; a NaN counts as extreme."""
        src = self.cast(x, DType.i32) if x.dtype == DType.bool else x
        r = self.op("argmin" if argmin else "argmax", src, axis=int(axis))
        return self.cast(r, index_dtype)

    # -- scans and windows -------------------------------------------------------
    def cumulative(self, kind: str, x: Value, axis: int, reverse: bool) -> Value:
        """jax cumsum/cumprod/cummax/cummin/cumlogsumexp along ``axis``."""
        axis = int(axis) % max(1, x.type.rank)
        if kind == "logsumexp":
            # log(cumsum(exp(x - m))) + m with m the max along the axis (finite, for stability).
            m = self.op("reduce_max", x, axes=(axis,), keepdims=True)
            m = self.op("where", self.op("isfinite", m), m, self.scalar(0, x.dtype))
            e = self.op("exp", self.op("sub", x, m))
            return self.op("add", self.op("log", self.op("cumsum", e, axis=axis, reverse=bool(reverse))), m)
        if x.dtype == DType.bool:
            if kind not in ("max", "min"):
                raise Unsupported(f"cum{kind} on i1")
            r = self.op(f"cum{kind}", self.cast(x, DType.i32), axis=axis, reverse=bool(reverse))
            return self.cast(r, DType.bool)
        return self.op(f"cum{kind}", x, axis=axis, reverse=bool(reverse))

    def reduce_window(self, kind: str, x: Value, window: Sequence[int], strides: Sequence[int],
                      padding: Sequence[tuple[int, int]], base_dilation: Sequence[int],
                      window_dilation: Sequence[int], init: Value | None = None) -> Value:
        """XLA reduce_window for sum, max, min (``ik.reduce_window``) and prod (a product of
        strided slices, one per window position).  Base dilation inserts the identity between
        elements (interior padding); a non-identity ``init`` is combined at the end."""
        rank = x.type.rank
        window = [int(v) for v in window]
        strides = [int(v) for v in strides] if strides else [1] * rank
        wdil = [int(v) for v in window_dilation] if window_dilation else [1] * rank
        bdil = [int(v) for v in base_dilation] if base_dilation else [1] * rank
        pads = [(int(lo), int(hi)) for lo, hi in padding] if padding else [(0, 0)] * rank
        if any(not isinstance(d, int) for d in x.shape):
            raise Unsupported("reduce_window over a symbolic dim")
        src = x
        if x.dtype == DType.bool:
            if kind not in ("max", "min"):
                raise Unsupported(f"reduce_window {kind} on i1")
            src = self.cast(x, DType.i32)
        ident = self.scalar(self.identity_value(kind, src.dtype), src.dtype)
        if any(b != 1 for b in bdil) or any(lo < 0 or hi < 0 for lo, hi in pads):
            src = self.pad(src, ident, [0] * rank, [0] * rank, [b - 1 for b in bdil])
            src = self.pad(src, ident, [min(0, lo) for lo, _ in pads], [min(0, hi) for _, hi in pads], [0] * rank)
            pads = [(max(0, lo), max(0, hi)) for lo, hi in pads]
        if kind in ("sum", "max", "min"):
            r = self.op("reduce_window", src, kind=kind, window=tuple(window), strides=tuple(strides),
                        pads=tuple(lo for lo, _ in pads) + tuple(hi for _, hi in pads), dilations=tuple(wdil))
        elif kind == "prod":
            r = self._window_by_slices("mul", src, ident, window, strides, pads, wdil)
        else:
            raise Unsupported(f"reduce_window with a {kind} reducer")
        if init is not None:
            iv = self.const_value(init)
            if iv is None or iv.reshape(-1)[0] != self.identity_value(kind, src.dtype):
                comb = {"sum": "add", "prod": "mul", "max": "max", "min": "min"}[kind]
                r = self.op(comb, r, self.cast(self.reshape(init, ()), src.dtype))
        return self.cast(r, x.dtype)

    def _window_by_slices(self, combine: str, x: Value, ident: Value, window: list[int], strides: list[int],
                          pads: list[tuple[int, int]], wdil: list[int]) -> Value:
        n_pos = int(np.prod(window)) if window else 1
        if n_pos > 256:
            raise Unsupported(f"reduce_window with a {combine} reducer over {n_pos} window positions")
        rank = x.type.rank
        xp = self.pad(x, ident, [lo for lo, _ in pads], [hi for _, hi in pads], [0] * rank)
        dims = [int(d) for d in xp.shape]
        out = [(d - wd * (w - 1) - 1) // s + 1 for d, w, s, wd in zip(dims, window, strides, wdil)]
        if any(o <= 0 for o in out):
            raise Unsupported("reduce_window with an empty result")
        acc: Value | None = None
        for pos in np.ndindex(*window):
            start = [p * wd for p, wd in zip(pos, wdil)]
            limit = [st + (o - 1) * s + 1 for st, o, s in zip(start, out, strides)]
            part = self.slice(xp, start, limit, strides)
            acc = part if acc is None else self.op(combine, acc, part)
        assert acc is not None
        return acc

    def reverse(self, x: Value, axes: Sequence[int]) -> Value:
        axes = tuple(int(a) for a in axes)
        return x if not axes else self.op("reverse", x, axes=axes)

    # -- sorting -------------------------------------------------------------------
    def sort_indices(self, key: Value, axis: int, descending: bool = False) -> Value:
        """The stable sorting permutation of ``key`` along ``axis`` (i64)."""
        if key.dtype == DType.bool:
            key = self.cast(key, DType.i32)
        return self.op_results("sort", [key], axis=int(axis), descending=bool(descending))[1]

    def sort(self, operands: Sequence[Value], axis: int, keys: Sequence[int], descending: bool = False,
             total_order: Sequence[int] = ()) -> list[Value]:
        """XLA's variadic sort, lexicographic on ``operands[k]`` for k in ``keys`` (most
        significant first): stable sorts from the least significant key to the most, then
        every operand is permuted with ``ik.gather_elements``.

        Keys listed in ``total_order`` compare by XLA's total order (a comparator that
        compares the raw floats with ``TOTALORDER``); the others as ``ik.sort`` does, NaN
        largest and -0.0 equal to 0.0, which is what jax's comparators (they canonicalise
        zeros and NaNs first) ask for."""
        axis = int(axis) % operands[0].type.rank
        key_vals = [self.total_order_key(operands[k]) if k in total_order else operands[k] for k in keys]
        if len(operands) == 1 and not total_order and key_vals[0].dtype != DType.bool:
            return [self.op_results("sort", [key_vals[0]], axis=axis, descending=bool(descending))[0]]
        perm = self.sort_indices(key_vals[-1], axis, descending)
        for k in reversed(key_vals[:-1]):
            idx = self.sort_indices(self.op("gather_elements", k, perm, axis=axis), axis, descending)
            perm = self.op("gather_elements", perm, idx, axis=axis)
        return [self.op("gather_elements", v, perm, axis=axis) for v in operands]

    def topk(self, x: Value, k: int, axis: int, largest: bool, index_dtype: DType,
             total_order: bool = False) -> list[Value]:
        """``ik.topk``.  With ``total_order`` (XLA's TopK) floats are ranked by XLA's total
        order, -NaN < -Inf < ... < -0.0 < 0.0 < ... < Inf < NaN: ``ik.topk`` of
        :meth:`total_order_key`, then the values are gathered at the indices."""
        if total_order and x.dtype.is_float:
            _, idx = self.op_results("topk", [self.total_order_key(x)], k=int(k), axis=int(axis),
                                     largest=bool(largest))
            return [self.op("gather_elements", x, idx, axis=int(axis)), self.cast(idx, index_dtype)]
        src = self.cast(x, DType.i32) if x.dtype == DType.bool else x
        vals, idx = self.op_results("topk", [src], k=int(k), axis=int(axis), largest=bool(largest))
        return [self.cast(vals, x.dtype), self.cast(idx, index_dtype)]

    def total_order_key(self, x: Value) -> Value:
        """A signed integer key whose order is XLA's total order on the floats ``x``
        (-NaN < -Inf < ... < -0.0 < 0.0 < ... < Inf < NaN): the bits as a signed integer,
        with the magnitude bits of negative values flipped (``i ^ ((i >> (w - 1)) & MAX)``).
        Non-floats are returned as they are."""
        if not x.dtype.is_float:
            return x
        it = _INT_OF_WIDTH[x.dtype.itemsize]
        i = self.bitcast(x, it)
        bits = 8 * it.itemsize
        sign = self.op("shift_right_arithmetic", i, self.scalar(bits - 1, it))
        mag = self.op("bitwise_and", sign, self.scalar((1 << (bits - 1)) - 1, it))
        return self.op("bitwise_xor", i, mag)

    def bitcast(self, x: Value, dtype: DType) -> Value:
        """XLA bitcast_convert_type (``ik.bitcast``): the same bits read as ``dtype``; with a
        narrower ``dtype`` a trailing dim is added, with a wider one the trailing dim is removed."""
        if x.dtype == dtype:
            return x
        if "ik.bitcast" not in OPS:
            raise Unsupported("reinterpreting bits needs ik.bitcast")
        return self.op("bitcast", x, dtype=dtype)

    # -- convolution -------------------------------------------------------------
    def conv(self, x: Value, w: Value, *, strides: Sequence[int], padding: Sequence[tuple[int, int]],
             lhs_dilation: Sequence[int], rhs_dilation: Sequence[int], lhs_spec: Sequence[int],
             rhs_spec: Sequence[int], out_spec: Sequence[int], feature_group_count: int,
             batch_group_count: int, out_dtype: DType) -> Value:
        """XLA convolution: ``ik.conv2d`` (NCHW/OIHW) for a plain 2-D one, else ``ik.conv`` (1 to 3
        spatial dims, input dilation, negative padding), with transposes for other layouts.

        ``*_spec`` list, for lhs/out, the (batch, feature, spatial...) dims and,
        for rhs, the (out feature, in feature, spatial...) dims, as jax's
        ConvDimensionNumbers do.  ``batch_group_count`` (weight gradients) splits the
        batch and the output features into that many groups, one convolution each.
        """
        n = len(lhs_spec) - 2
        if not 1 <= n <= 3:
            raise Unsupported(f"convolution with {n} spatial dims (1 to 3 are supported)")
        pads = [(int(lo), int(hi)) for lo, hi in padding]
        strides = [int(s_) for s_ in strides]
        ldil = [int(d) for d in lhs_dilation] if lhs_dilation else [1] * n
        rdil = [int(d) for d in rhs_dilation] if rhs_dilation else [1] * n
        if x.dtype != out_dtype:
            x = self.cast(x, out_dtype)
        if w.dtype != out_dtype:
            w = self.cast(w, out_dtype)
        xn = self.transpose(x, lhs_spec)
        wn = self.transpose(w, rhs_spec)
        bgc = int(batch_group_count)
        if bgc == 1:
            y = self._conv_nchw(xn, wn, strides, pads, ldil, rdil, int(feature_group_count))
        else:
            nb, o = xn.shape[0], wn.shape[0]
            if not isinstance(nb, int) or not isinstance(o, int) or nb % bgc or o % bgc:
                raise Unsupported("convolution with batch_group_count not dividing the batch and the features")
            parts = []
            for g in range(bgc):
                xg = self.slice(xn, [g * (nb // bgc)] + [0] * (n + 1),
                                [(g + 1) * (nb // bgc)] + list(xn.shape[1:]), None)
                wg = self.slice(wn, [g * (o // bgc)] + [0] * (n + 1), [(g + 1) * (o // bgc)] + list(wn.shape[1:]),
                                None)
                parts.append(self._conv_nchw(xg, wg, strides, pads, ldil, rdil, int(feature_group_count)))
            y = self.concat(parts, 1)
        inv = [0] * (n + 2)
        for i, d in enumerate(out_spec):
            inv[int(d)] = i
        return self.transpose(y, inv)

    def _conv_nchw(self, x: Value, w: Value, strides: list[int], pads: list[tuple[int, int]], ldil: list[int],
                   rdil: list[int], groups: int) -> Value:
        n = len(pads)
        empty = False
        for d, k, (lo, hi), dl, ld in zip(x.shape[2:], w.shape[2:], pads, rdil, ldil):
            if isinstance(d, int) and isinstance(k, int):
                empty |= ((d - 1) * ld + 1 if d else 0) + lo + hi - dl * (k - 1) < 1
        if empty:
            # A window larger than the (padded) input: XLA gives an empty result, and so do we.
            out: list[Dim] = [x.shape[0], w.shape[0]]
            for d, k, (lo, hi), st, dl, ld in zip(x.shape[2:], w.shape[2:], pads, strides, rdil, ldil):
                span = ((d - 1) * ld + 1 if d else 0) + lo + hi - dl * (k - 1)
                out.append(max(0, (span - 1) // st + 1) if span >= 1 else 0)
            return self.constant(np.zeros(static_shape(out), x.dtype.np), x.dtype)
        if n == 2 and all(d == 1 for d in ldil) and all(lo >= 0 and hi >= 0 for lo, hi in pads):
            return self.op("conv2d", x, w, None, strides=tuple(strides),
                           padding=(pads[0][0], pads[1][0], pads[0][1], pads[1][1]), dilations=tuple(rdil),
                           groups=groups)
        return self.op("conv", x, w, None, strides=tuple(strides),
                       padding=tuple(lo for lo, _ in pads) + tuple(hi for _, hi in pads), dilations=tuple(rdil),
                       lhs_dilation=tuple(ldil), groups=groups)


_INT_OF_WIDTH = {8: DType.i64, 4: DType.i32, 2: DType.i16, 1: DType.i8}

# Cephes' Chebyshev coefficients (public domain; the values jax's bessel_i0e and XLA's
# chlo.bessel_i1e use): (|x| <= 8 in 0.5 |x| - 2, |x| > 8 in 32 / |x| - 2).
_I0E_F32 = (
    (-1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7, 1.11738753912010371815e-6,
     -4.41673835845875056359e-6, 1.64484480707288970893e-5, -5.75419501008210370398e-5, 1.88502885095841655729e-4,
     -5.76375574538582365885e-4, 1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
     -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2, 1.71620901522208775349e-1,
     -3.04682672343198398683e-1, 6.76795274409476084995e-1),
    (3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7, 2.89137052083475648297e-6,
     6.88975834691682398426e-5, 3.36911647825569408990e-3, 8.04490411014108831608e-1))
_I0E_F64 = (
    (-4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
     1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
     -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
     9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9) + _I0E_F32[0],
    (-7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
     3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
     1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
     -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
     7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
     -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10) + _I0E_F32[1])
_I1E_F32 = (
    (9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7, -8.56872026469545225797e-7,
     3.47025130813767847674e-6, -1.32731636560394358279e-5, 4.78156510755005422638e-5, -1.61760815825896745588e-4,
     5.12285956168575772895e-4, -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
     2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1, -1.76416518357834055153e-1,
     2.52587186443633654823e-1),
    (-3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
     -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
     7.78576235018280120474e-1))


def check_result_type(got: TensorType, want: TensorType, what: str) -> None:
    """Raise :class:`Unsupported` when an emitted value disagrees with the source's type.

    A symbolic dim in either may stand for a static one in the other (the
    source may know less or more than IR type inference), so only two static
    dims that differ, or two different symbolic ones, count.
    """
    if got.rank != want.rank or got.dtype != want.dtype or any(
            isinstance(g, int) and isinstance(w, int) and g != w or
            isinstance(g, SymDim) and isinstance(w, SymDim) and g != w
            for g, w in zip(got.shape, want.shape)):
        raise Unsupported(f"{what}: translation gives {got}, the source says {want} (irkit bug)")


__all__ = [
    "FOLD_LIMIT",
    "Emitter",
    "Unsupported",
    "check_result_type",
    "ir_dtype",
    "ir_dtype_from_mlir",
    "location_from_mlir",
    "remove_dead_ops",
    "sym_dim",
]
