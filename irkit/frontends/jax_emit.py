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
- ``gather`` is recognised in the two forms Transformers produce: a take along
  one axis (embedding lookup, ``x[ids]``) becomes ``ik.gather`` plus a transpose
  into XLA's output layout; a gather at constant start indices (a slice that
  JAX spelled as a gather, e.g. with symbolic bounds) becomes ``ik.slice``.
  Anything else raises :class:`Unsupported`, which the importers collect.

Small integer values are folded (:meth:`Emitter.const_value`) with the op
registry's own reference kernels, so a start index computed by a few ops still
counts as a constant.  Nothing here imports jax.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from irkit.ir.builder import Builder, BuildError
from irkit.ir.core import Dense, Graph, Location, Value
from irkit.ir.ops import OPS, RefContext
from irkit.ir.types import Dim, DType, SymDim, TensorType, dim_add, dim_mul, dim_sub

FOLD_LIMIT = 64
"""Largest element count :meth:`Emitter.const_value` folds."""


class Unsupported(Exception):
    """An operation (or one form of it) has no IR translation; ``what`` names it."""

    def __init__(self, what: str):
        super().__init__(what)
        self.what = what


# ---------------------------------------------------------------------------
# Element types


_NP_TO_IR: dict[str, DType] = {
    "float64": DType.f64, "float32": DType.f32, "float16": DType.f16, "bfloat16": DType.bf16,
    "int64": DType.i64, "int32": DType.i32, "int8": DType.i8, "bool": DType.bool,
    # Narrow integer types widen to i32 (as DType.from_numpy does); values fit.
    "int16": DType.i32, "uint8": DType.i32, "uint16": DType.i32,
}


def ir_dtype(dt: Any) -> DType:
    """The IR dtype of a NumPy/JAX dtype; :class:`Unsupported` for others (complex, uint32, fp8)."""
    name = np.dtype(dt).name
    try:
        return _NP_TO_IR[name]
    except KeyError:
        raise Unsupported(f"dtype {name}") from None


_MLIR_TO_IR: dict[str, DType] = {
    "f64": DType.f64, "f32": DType.f32, "f16": DType.f16, "bf16": DType.bf16,
    "i64": DType.i64, "i32": DType.i32, "i8": DType.i8, "i1": DType.bool,
    "i16": DType.i32, "ui8": DType.i32, "ui16": DType.i32,
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
        return self.op("min", self.op("max", x, lo), hi)

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
        # x - x is 0 for finite x and NaN for +-inf and NaN.
        return self.op("eq", self.op("sub", x, x), self.scalar(0, x.dtype))

    def bitwise_not(self, x: Value) -> Value:
        if x.dtype == DType.bool:
            return self.op("not", x)
        # Two's complement: ~x == -x - 1.
        return self.op("sub", self.op("neg", x), self.scalar(1, x.dtype))

    def logical(self, name: str, x: Value, y: Value) -> Value:
        if x.dtype != DType.bool or y.dtype != DType.bool:
            raise Unsupported(f"bitwise {name} on {x.dtype}")
        return self.op(name, x, y)

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
            return self.b.constant(Dense.splat(splat, tuple(int(d) for d in shape), x.dtype), loc=self.loc)
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
        op = self.b.create("ik.split", [x], {"axis": int(axis), "sizes": tuple(sizes)})
        return list(op.results)

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
        """XLA pad with a constant padding value; negative padding slices."""
        if any(int(i) != 0 for i in interior):
            raise Unsupported("pad with interior padding")
        pv = self.const_value(value)
        if pv is None or pv.size != 1:
            raise Unsupported("pad with a non-constant padding value")
        low = [int(v) for v in low]
        high = [int(v) for v in high]
        if any(v < 0 for v in low + high):
            start = [max(0, -v) for v in low]
            limit = [dim_sub(d, max(0, -h)) for d, h in zip(x.shape, high)]
            x = self.slice(x, start, limit, None)
            low = [max(0, v) for v in low]
            high = [max(0, v) for v in high]
        if not any(low + high):
            return x
        fill = pv.reshape(()).item()
        return self.op("pad", x, pads=tuple(low + high), value=float(fill))

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
        src = x
        if argmin:
            if x.dtype == DType.bool:
                src = self.op("not", x)
            else:
                src = self.op("neg", x)
        if src.dtype == DType.bool:
            src = self.cast(src, DType.i32)
        r = self.op("argmax", src, axis=int(axis))
        return self.cast(r, index_dtype)

    # -- gather ----------------------------------------------------------------
    def gather(self, operand: Value, indices: Value, *, offset_dims: Sequence[int],
               collapsed_slice_dims: Sequence[int], start_index_map: Sequence[int],
               operand_batching_dims: Sequence[int], start_indices_batching_dims: Sequence[int],
               index_vector_dim: int, slice_sizes: Sequence[Dim], out_shape: Sequence[Dim] | None,
               clamp: bool) -> Value:
        """XLA gather in its Transformer forms: take along one axis, or a constant-start slice.

        ``clamp`` applies XLA's clamping of start indices (StableHLO, and jax's
        ``mode=clip``); without it indices are promised in bounds.
        """
        offset_dims = [int(d) for d in offset_dims]
        collapsed = [int(d) for d in collapsed_slice_dims]
        smap = [int(d) for d in start_index_map]
        sizes = list(slice_sizes)
        if operand_batching_dims or start_indices_batching_dims:
            raise Unsupported("gather with batching dims")
        # Move the index vector dim last (an implicit trailing 1 when it equals the rank).
        irank = indices.type.rank
        if index_vector_dim == irank:
            indices = self.reshape(indices, tuple(indices.shape) + (1,))
        elif index_vector_dim != irank - 1:
            perm = [i for i in range(irank) if i != index_vector_dim] + [index_vector_dim]
            indices = self.transpose(indices, perm)
        batch_shape = tuple(indices.shape[:-1])
        rank = operand.type.rank
        starts = self.const_value(indices) if indices.type.is_static else None
        n_batch = 1
        for d in batch_shape:
            n_batch = n_batch * d if isinstance(d, int) and isinstance(n_batch, int) else -1
        if starts is not None and n_batch == 1:
            return self._gather_as_slice(operand, starts.reshape(-1), smap, sizes, collapsed, out_shape)
        if len(smap) == 1 and collapsed in ([], smap):
            # A take along axis k; XLA may keep k as a size-1 offset dim instead of collapsing it.
            k = smap[0]
            for d in range(rank):
                want = 1 if d == k else operand.shape[d]
                if sizes[d] != want:
                    raise Unsupported("gather of partial slices along a dynamic index")
            idx = self.reshape(indices, batch_shape)
            if clamp:
                n = operand.shape[k]
                hi = self.scalar(n - 1, idx.dtype) if isinstance(n, int) else self.op(
                    "sub", self.op("dim_value", dim=(n,), dtype=idx.dtype), self.scalar(1, idx.dtype))
                idx = self.clamp(self.scalar(0, idx.dtype), idx, hi)
            g = self.op("gather", operand, idx, axis=k)
            labels = [("o", d) for d in range(k)] + [("b", j) for j in range(len(batch_shape))] + \
                [("o", d) for d in range(k + 1, rank)]
            offset_operand_dims = iter([d for d in range(rank) if d not in collapsed])
            batch_iter = iter(range(len(batch_shape)))
            target = []
            for p in range(len(offset_dims) + len(batch_shape)):
                target.append(("o", next(offset_operand_dims)) if p in offset_dims else ("b", next(batch_iter)))
            kept = [t for t in target if t != ("o", k)]
            y = self.transpose(g, [labels.index(t) for t in kept])
            if len(kept) != len(target):
                y = self.reshape(y, [1 if t == ("o", k) else y.shape[kept.index(t)] for t in target])
            return y
        raise Unsupported("gather (neither a take along one axis nor a slice at constant starts)")

    def _gather_as_slice(self, operand: Value, starts: np.ndarray, smap: list[int], sizes: list[Dim],
                         collapsed: list[int], out_shape: Sequence[Dim] | None) -> Value:
        rank = operand.type.rank
        start: list[Dim] = [0] * rank
        for pos, d in enumerate(smap):
            s = int(starts[pos])
            dim, size = operand.shape[d], sizes[d]
            if isinstance(dim, int) and isinstance(size, int):
                s = min(max(s, 0), dim - size)  # XLA clamps so the slice fits
            elif s < 0:
                raise Unsupported("gather at a negative start on a symbolic dim")
            start[d] = s
        limit = [dim_add(st, sz) for st, sz in zip(start, sizes)]
        x = self.slice(operand, start, limit, None)
        if out_shape is None:
            out_shape = tuple(sz for d, sz in enumerate(sizes) if d not in collapsed)
        return self.reshape(x, tuple(out_shape))

    def dynamic_slice(self, x: Value, starts: Sequence[Value], sizes: Sequence[Dim]) -> Value:
        """XLA dynamic_slice at starts that fold to constants (clamped as XLA does)."""
        start: list[Dim] = []
        for i, (sv, size) in enumerate(zip(starts, sizes)):
            c = self.const_value(sv)
            if c is None:
                raise Unsupported("dynamic_slice at a start index that is not constant")
            s = int(c.reshape(()))
            dim = x.shape[i]
            if isinstance(dim, int) and isinstance(size, int):
                s = min(max(s, 0), dim - size)
            elif s != 0:
                raise Unsupported("dynamic_slice at a non-zero start on a symbolic dim")
            start.append(s)
        limit = [dim_add(s, z) for s, z in zip(start, sizes)]
        return self.slice(x, start, limit, None)

    # -- convolution -------------------------------------------------------------
    def conv(self, x: Value, w: Value, *, strides: Sequence[int], padding: Sequence[tuple[int, int]],
             lhs_dilation: Sequence[int], rhs_dilation: Sequence[int], lhs_spec: Sequence[int],
             rhs_spec: Sequence[int], out_spec: Sequence[int], feature_group_count: int,
             batch_group_count: int, out_dtype: DType) -> Value:
        """XLA convolution with 2 spatial dims as ``ik.conv2d`` (NCHW/OIHW) plus transposes.

        ``*_spec`` list, for lhs/out, the (batch, feature, spatial...) dims and,
        for rhs, the (out feature, in feature, spatial...) dims, as jax's
        ConvDimensionNumbers do.
        """
        if len(lhs_spec) != 4:
            raise Unsupported(f"convolution with {len(lhs_spec) - 2} spatial dims (only 2-D)")
        if any(int(d) != 1 for d in lhs_dilation):
            raise Unsupported("convolution with lhs (input) dilation (transposed convolution)")
        if batch_group_count != 1:
            raise Unsupported("convolution with batch_group_count != 1")
        pads = [(int(lo), int(hi)) for lo, hi in padding]
        if any(lo < 0 or hi < 0 for lo, hi in pads):
            raise Unsupported("convolution with negative padding")
        if x.dtype != out_dtype:
            x = self.cast(x, out_dtype)
        if w.dtype != out_dtype:
            w = self.cast(w, out_dtype)
        xn = self.transpose(x, lhs_spec)
        wn = self.transpose(w, rhs_spec)
        y = self.op("conv2d", xn, wn, None, strides=tuple(int(s) for s in strides),
                    padding=(pads[0][0], pads[1][0], pads[0][1], pads[1][1]),
                    dilations=tuple(int(d) for d in rhs_dilation), groups=int(feature_group_count))
        inv = [0] * 4
        for i, d in enumerate(out_spec):
            inv[int(d)] = i
        return self.transpose(y, inv)


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
