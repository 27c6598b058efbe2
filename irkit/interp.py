"""The reference interpreter: runs any module on NumPy inputs.

Design note: the interpreter knows only the op registry.  It binds symbolic
dims from the input shapes, concretises each op's result types under those
bindings and calls the op's reference kernel.  In ``float64`` mode every float
tensor (inputs, constants, results) is computed in f64: that run is the oracle
every pass and target is checked against.  An explicit float ``ik.cast`` to a
narrower type still rounds to that type (and back to f64): the conversion is
what the program says, not an artefact of its precision — ``x > cast(cast(x,
f16), f32)`` asks whether rounding to f16 went down, which an oracle that drops
the rounding answers "never".  Op results are not rounded to their declared
type (that is the precision the oracle is there to exceed).  A cast that only
undoes a widening (``cast(cast(x: f32, f64), f32)``) is exact in the program and
does not round in the oracle either: it rounds when its type cannot hold every
value of the narrowest type the value passed through.
Values are freed after their last use, so large models fit in memory.

One exception keeps the oracle an oracle of *this* program: the float ops
whose results reach a float-to-integer (or float-to-bool) ``ik.cast`` or an
``ik.bitcast`` of a float through
float values only (the cast's *cone*) run in their declared dtype, and their
float inputs from outside the cone are rounded to the declared dtype first.
A cast to an integer is discontinuous: T5's relative-position bucket is
``int(log(p / 8) / log(16) * 8)``, exactly 2.0 in real arithmetic for
``p = 16``; float32 lands on one side of 2 and float64 on the other, and the
bucket (and every logit after it) differs by a whole embedding row.  Computing
the cone at the precision the program asks for gives the buckets the framework
and every target compute; everything else stays in f64.  The cone follows
``ik.fused`` regions in both directions; other discontinuities (comparisons,
``floor``) are left in f64, where a difference is at most a tie.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from irkit.errors import InputError, IrkitError
from irkit.ir.core import Function, Graph, Module, Op, Value
from irkit.ir.ops import OPS, RefContext, to_float8
from irkit.ir.types import DType, SymDim, TensorType, eval_dim, is_float_np
from irkit.ir.walk import producer_cone


class InterpError(IrkitError):
    """An op failed at run time (out-of-range gather, shape mismatch); names the op."""


def _entry(m: Module | Function, fn: str | None) -> Function:
    if isinstance(m, Function):
        return m
    if fn is None:
        return m.entry
    try:
        return m.function(fn)
    except KeyError:
        raise InputError(f"no function @{fn} in the module") from None


def bind_symbols(fn: Function, inputs: Sequence[np.ndarray]) -> dict[str, int]:
    """Bind every symbol in the argument types from the input shapes; check the rest."""
    names = fn.arg_names()
    if len(inputs) != len(fn.args):
        raise InputError(f"@{fn.name} takes {len(fn.args)} inputs ({', '.join(names)}), got {len(inputs)}")
    b: dict[str, int] = {}
    for a, x, nm in zip(fn.args, inputs, names):
        if x.ndim != a.type.rank:
            raise InputError(f"input '{nm}' has rank {x.ndim}, expected {a.type} ")
        for d, n in zip(a.type.shape, x.shape):
            if isinstance(d, SymDim) and d.is_symbol and d.name not in b:
                b[d.name] = int(n)
    for a, x, nm in zip(fn.args, inputs, names):
        for i, (d, n) in enumerate(zip(a.type.shape, x.shape)):
            try:
                want = eval_dim(d, b)
            except KeyError as e:
                raise InputError(f"input '{nm}': symbol {e.args[0]} in dim {i} ({d}) is not bound by any "
                                 "input dim on its own") from None
            if want != n:
                raise InputError(f"input '{nm}' dim {i} is {n}, but {a.type} needs {d} = {want}")
    return b


def _f64_type(t: TensorType) -> TensorType:
    return t.with_dtype(DType.f64) if t.dtype.is_float else t


_HOLDS = {(DType.f16, DType.f32), (DType.bf16, DType.f32), (DType.f16, DType.f64), (DType.bf16, DType.f64),
          (DType.f32, DType.f64)} | {(f8, wide) for f8 in DType if f8.is_float8
                                     for wide in (DType.f16, DType.bf16, DType.f32, DType.f64)}


def _holds(to: DType, src: DType) -> bool:
    """Every value of float type ``src`` is exactly a value of ``to``."""
    return to is src or (src, to) in _HOLDS


def _precision(v: Any) -> DType:
    """The narrowest float type ``v``'s values passed through: its own, or, through widening casts,
    the type they widened (``cast(x: f32, f64)`` carries f32 values)."""
    t = v.type.dtype
    p = v.producer
    while p is not None and p.name == "ik.cast" and p.operands[0].type.dtype.is_float:
        src = p.operands[0].type.dtype
        if not _holds(t, src):
            break
        t = src
        p = p.operands[0].producer
    return t


@dataclass
class Interpreter:
    """Runs functions; ``float64`` makes it the oracle."""

    float64: bool = False

    def __post_init__(self) -> None:
        self._declared: frozenset[int] = frozenset()

    def run(self, m: Module | Function, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray],
            fn: str | None = None) -> list[np.ndarray]:
        f = _entry(m, fn)
        return self._run(f, self._inputs(f, inputs))

    def _run(self, f: Function, xs: list[np.ndarray]) -> list[np.ndarray]:
        """Run ``f`` on inputs already converted by :meth:`_inputs`."""
        b = bind_symbols(f, xs)
        self._declared = int_cast_cone(f) if self.float64 else frozenset()
        return self._graph(f.body, xs, b)

    def _inputs(self, f: Function, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if isinstance(inputs, Mapping):
            inputs = order_inputs(f, inputs)
        out = []
        for a, x, nm in zip(f.args, inputs, f.arg_names()):
            x = np.asarray(x)
            want = a.type.dtype
            if x.dtype != want.np:
                if not np.can_cast(x.dtype, want.np, "same_kind") and not (want.is_float or want.is_int):
                    raise InputError(f"input '{nm}' has dtype {x.dtype}, expected {want}")
                with np.errstate(invalid="ignore"):  # NaN into a float8 type: ml_dtypes warns
                    x = x.astype(want.np)
            if self.float64 and want.is_float:
                with np.errstate(invalid="ignore"):
                    x = x.astype(np.float64)
            out.append(x)
        if len(out) != len(f.args):
            raise InputError(f"@{f.name} takes {len(f.args)} inputs, got {len(out)}")
        return out

    def _graph(self, g: Graph, xs: Sequence[np.ndarray], b: Mapping[str, int]) -> list[np.ndarray]:
        env: dict[int, np.ndarray] = {id(a): x for a, x in zip(g.args, xs)}
        last_use: dict[int, int] = {}
        ops = list(g)
        for i, op in enumerate(ops):
            for v in op.operands:
                last_use[id(v)] = i
        for i, op in enumerate(ops):
            if op.name in ("func.return", "ik.yield"):
                return [env[id(v)] for v in op.operands]
            ins = [env[id(v)] for v in op.operands]
            outs = self._op(op, ins, b)
            for r, y in zip(op.results, outs):
                env[id(r)] = y
            for v in op.operands:
                if last_use.get(id(v)) == i and v not in g.outputs:
                    env.pop(id(v), None)
        raise InterpError("region has no terminator")

    def _op(self, op: Op, ins: list[np.ndarray], b: Mapping[str, int]) -> list[np.ndarray]:
        d = OPS.get(op.name)
        if d is None:
            raise InterpError(f"'{op.name}' at {op.loc.short()}: unknown op, cannot interpret")
        declared = self.float64 and id(op) in self._declared
        types = [_f64_type(t) if self.float64 and not declared else t for t in op.result_types]
        try:
            shapes = [tuple(eval_dim(x, b) for x in t.shape) for t in types]
        except KeyError as e:
            raise InterpError(f"'{op.name}' at {op.loc.short()}: symbol {e.args[0]} is unbound") from None
        if declared:
            # In the cone of a float-to-int cast: the program's own precision (see the design note).
            ins = [x.astype(v.type.dtype.np) if v.type.dtype.is_float and x.dtype != v.type.dtype.np else x
                   for x, v in zip(ins, op.operands)]
        elif self.float64:
            if op.name == "ik.cast" and op.attrs["to"].is_float and ins[0].dtype.kind == "f":
                to = op.attrs["to"]
                if to is DType.f64 or ins[0].dtype == to.np or _holds(to, _precision(op.operands[0])):
                    return [ins[0].astype(np.float64)]
                if to.is_float8:
                    return [to_float8(ins[0], to, op.attrs.get("saturate", False)).astype(np.float64)]
                # An explicit narrowing conversion is the program's meaning: round (see the note).
                return [ins[0].astype(to.np).astype(np.float64)]
            if op.name == "ik.constant" and op.attrs["value"].dtype.is_float:
                return [op.attrs["value"].array.astype(np.float64)]
            ins = [x.astype(np.float64) if is_float_np(x.dtype) else x for x in ins]
        # Regions see the enclosing bindings: a region argument may carry only
        # compound dims (B*S), which cannot bind B and S on their own.
        ctx = RefContext(types, shapes, b, lambda g, xs: self._region(g, xs, b), op)
        try:
            # NaN and Inf are values here (IEEE), not errors: no warnings from the kernels.
            with np.errstate(all="ignore"):
                outs = d.ref(ins, d.with_defaults(op.attrs), ctx)
        except (IndexError, ValueError, TypeError) as e:
            raise InterpError(f"'{op.name}' at {op.loc.short()}: {e}") from None
        res = []
        for k, (y, t, s) in enumerate(zip(outs, types, shapes)):
            y = np.asarray(y)
            if y.shape != s:
                raise InterpError(f"'{op.name}' at {op.loc.short()}: result {k} has shape {list(y.shape)}, "
                                  f"type says {list(s)}")
            if y.dtype != t.dtype.np:
                y = y.astype(t.dtype.np)
            res.append(y)
        return res

    def _region(self, g: Graph, xs: list[np.ndarray], outer: Mapping[str, int] | None = None) -> list[np.ndarray]:
        b: dict[str, int] = dict(outer or {})
        for a, x in zip(g.args, xs):
            for d, n in zip(a.type.shape, x.shape):
                if isinstance(d, SymDim) and d.is_symbol:
                    b[d.name] = int(n)
        return self._graph(g, xs, b)


def int_cast_cone(f: Function) -> frozenset[int]:
    """Ids of the ops whose float results reach a float-to-integer/bool ``ik.cast`` through
    float values only, across ``ik.fused`` region boundaries (the float64 oracle runs
    them in their declared dtype)."""
    region_arg: dict[int, tuple[Op, int]] = {}
    starts: list[Value] = []
    for op in f.walk():
        for r in op.regions:
            for i, a in enumerate(r.args):
                region_arg[id(a)] = (op, i)
        if (op.name == "ik.cast" and op.operands and op.operand(0).type.dtype.is_float
                and not op.attrs["to"].is_float):
            starts.append(op.operand(0))
        elif op.name == "ik.bitcast" and op.operands and op.operand(0).type.dtype.is_float:
            starts.append(op.operand(0))  # the bits are those of the declared type

    def across_regions(v: Value) -> list[Value]:
        """A region argument continues at the fused op's operand; a region op's result at its yield."""
        if v.producer is None:
            owner = region_arg.get(id(v))
            return [] if owner is None else [owner[0].operand(owner[1])]
        return [r.terminator.operand(v.index) for r in v.producer.regions
                if r.terminator is not None and v.index < len(r.terminator.operands)]

    cone = producer_cone(starts, skip=lambda v: not v.type.dtype.is_float, through=across_regions)
    assert cone is not None  # unbounded: the walk always ends
    return frozenset(id(op) for op in cone.ops)


def run(m: Module | Function, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray], *,
        float64: bool = False, fn: str | None = None) -> list[np.ndarray]:
    """Run the entry function (or ``fn``) of ``m`` on ``inputs``; ``float64=True`` is the
    oracle: floats in f64, except the cones of float-to-integer casts, which keep their
    declared dtype (see the module's design note)."""
    return Interpreter(float64).run(m, inputs, fn)


def run_function_stateful(m: Module | Function, inputs: Sequence[np.ndarray | None] | Mapping[str, np.ndarray],
                          state: dict[int, np.ndarray], *, float64: bool = False,
                          fn: str | None = None) -> list[np.ndarray]:
    """Run one step of a function with resident buffers, honouring its ``aliases``.

    ``state`` maps argument index -> the caller's buffer for that argument.  An input
    given as ``None`` (or left out of a mapping) is read from ``state``; a given input
    for an aliased argument replaces its buffer.  After the run, every aliased
    argument's buffer in ``state`` holds the value of its output (the function's
    ``aliases`` attribute, see :mod:`irkit.ir.aliases`), so calling again with
    ``None`` continues from the updated state.  Returns all outputs, the aliased ones
    included.  ``state`` is updated only when the run succeeds.  With ``float64=True``
    (the oracle) resident float buffers stay in f64 from one step to the next.
    """
    from irkit.ir.aliases import get_aliases

    f = _entry(m, fn)
    names = f.arg_names()
    if isinstance(inputs, Mapping):
        given = {}
        for i, n in enumerate(names):
            if n in inputs:
                given[i] = inputs[n]
            elif f"arg{i}" in inputs:
                given[i] = inputs[f"arg{i}"]
        known = set(names) | {f"arg{i}" for i in range(len(names))}
        extra = [k for k in inputs if k not in known]
        if extra:
            raise InputError(f"unknown inputs: {', '.join(extra)}; @{f.name} takes {', '.join(names)}")
        seq: list[np.ndarray | None] = [given.get(i) for i in range(len(names))]
    else:
        seq = list(inputs)
    if len(seq) != len(f.args):
        raise InputError(f"@{f.name} takes {len(f.args)} inputs ({', '.join(names)}), got {len(seq)}")
    xs: list[np.ndarray] = []
    for i, x in enumerate(seq):
        if x is None:
            if i not in state:
                raise InputError(f"input '{names[i]}' (argument {i}) is None but no resident buffer is bound "
                                 "for it; pass an array on the first call")
            x = state[i]
        xs.append(np.asarray(x))
    try:
        aliases = get_aliases(f)
    except ValueError as e:
        raise InputError(str(e)) from None
    interp = Interpreter(float64)
    conv = interp._inputs(f, xs)
    if float64:
        # The oracle keeps resident float state in f64 across steps (it is program state, like any
        # intermediate value); only arrays the caller passes are converted from their dtype.
        for i, x in enumerate(seq):
            if x is None and f.args[i].type.dtype.is_float and xs[i].dtype == np.float64:
                conv[i] = xs[i]
    outs = interp._run(f, conv)
    for o, a in aliases.items():
        state[a] = outs[o]
    return outs


def order_inputs(f: Function, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Inputs keyed by argument name or by position (``arg0``, ``arg1``...), in order."""
    names = f.arg_names()
    out: list[np.ndarray] = []
    missing = []
    for i, n in enumerate(names):
        if n in inputs:
            out.append(np.asarray(inputs[n]))
        elif f"arg{i}" in inputs:
            out.append(np.asarray(inputs[f"arg{i}"]))
        else:
            missing.append(n)
    if missing:
        raise InputError(f"missing inputs: {', '.join(missing)} (key them by name or as arg0, arg1, ...)")
    known = set(names) | {f"arg{i}" for i in range(len(names))}
    extra = [k for k in inputs if k not in known]
    if extra:
        raise InputError(f"unknown inputs: {', '.join(extra)}; @{f.name} takes {', '.join(names)}")
    return out


DEFAULT_SYMBOL_VALUE = 8


def default_bindings(fn: Function, given: Mapping[str, int] | None = None) -> dict[str, int]:
    """A value for every plain symbol in the arguments: ``given``, then the function's
    recorded examples (``ik.sym_examples``), then :data:`DEFAULT_SYMBOL_VALUE`."""
    b: dict[str, int] = {}
    examples = fn.attrs.get("ik.sym_examples") or ()
    ex = {}
    for item in examples:
        if isinstance(item, str) and "=" in item:
            k, v = item.split("=", 1)
            ex[k] = int(v)
    for a in fn.args:
        for d in a.type.shape:
            if isinstance(d, SymDim):
                for s in sorted(d.symbols):
                    if s not in b:
                        b[s] = int((given or {}).get(s, ex.get(s, DEFAULT_SYMBOL_VALUE)))
    if given:
        b.update(given)
    return b


def _index_bound(v: Value, depth: int = 0) -> int | None:
    """The exclusive upper bound an integer input must respect, if it feeds a gather."""
    if depth > 8:
        return None
    best: int | None = None
    for op, i in v.uses:
        bound: int | None = None
        if op.name == "ik.gather" and i == 1:
            data = op.operand(0).type
            ax = op.attrs.get("axis", 0) % max(data.rank, 1)
            d = data.shape[ax]
            bound = d if isinstance(d, int) else None
        elif op.name in ("ik.gather_elements", "ik.scatter_elements") and i == 1:
            data = op.operand(0).type
            d = data.shape[op.attrs["axis"] % max(data.rank, 1)]
            bound = d if isinstance(d, int) else None
        elif op.name in ("ik.gather_nd", "ik.scatter_nd") and i == 1:
            data, idx = op.operand(0).type, op.operand(1).type
            k = idx.shape[-1] if idx.rank else None
            b0 = op.attrs.get("batch_dims", 0)
            dims = data.shape[b0:b0 + k] if isinstance(k, int) else ()
            static = [d for d in dims if isinstance(d, int)]
            bound = min(static) if static and len(static) == len(dims) else None
        elif op.name in ("ik.cast", "ik.reshape", "ik.broadcast", "ik.slice", "ik.transpose"):
            bound = _index_bound(op.results[0], depth + 1)
        elif op.name == "ik.fused":
            bound = _index_bound(op.regions[0].args[i], depth + 1)
        if bound is not None:
            best = bound if best is None else min(best, bound)
    return best


def random_inputs(fn: Function, seed: int = 0, bindings: Mapping[str, int] | None = None,
                  float64: bool = False) -> list[np.ndarray]:
    """Random valid inputs: floats ~ N(0, 1), indices in range of the tables they index,
    masks mostly true; never all zeros."""
    rng = np.random.default_rng(seed)
    b = default_bindings(fn, bindings)
    out = []
    for a in fn.args:
        shape = a.type.concrete_shape(b)
        dt = a.type.dtype
        if dt.is_float:
            x = rng.standard_normal(shape)
            out.append(x if float64 else x.astype(dt.np))
        elif dt.is_bool:
            out.append(rng.random(shape) < 0.8)
        else:
            hi = _index_bound(a)
            hi = hi if hi is not None else 2
            out.append(rng.integers(0, max(hi, 1), size=shape).astype(dt.np))
    return out


__all__ = ["Interpreter", "InterpError", "int_cast_cone", "run", "run_function_stateful", "random_inputs",
           "bind_symbols", "order_inputs", "default_bindings"]
