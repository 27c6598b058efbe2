"""The JAX frontend: a JAX function (through its jaxpr), StableHLO text or an
``Exported`` artifact, or XLA's HLO text, imported as an irkit :class:`Module`.

Design note: :func:`import_jax` traces ``fn`` with :func:`jax.make_jaxpr` and
walks the equations once.  Call-like primitives (``jit``/``pjit``,
``closed_call``, ``custom_jvp_call``, ``custom_vjp_call``, ``remat``) are
inlined; every other primitive has one handler in :data:`PRIMITIVES` (registered
with ``@converter``; refused primitives say why) that maps it to IR through
:class:`~irkit.frontends.jax_emit.Emitter` and :mod:`~irkit.frontends.jax_emit_index`,
which the StableHLO importer shares, so both paths agree on XLA semantics.  Closed-over arrays
become ``ik.constant``, named after where they live in the function's closure (``h.0.attn.c_attn.weight`` for a params
dict), else ``const_N``.  Each op's location is the user's frame from the
equation's ``source_info`` (``model.py:42:8``), named by the JAX name stack.
Shape polymorphism (``polymorphic_shapes="B, S"`` strings, or
``jax.ShapeDtypeStruct`` arguments with ``jax.export.symbolic_shape`` dims)
gives symbolic dims; ``B*S`` and ``S - 1`` become :class:`SymDim` polynomials.
An equation that cannot be translated is recorded and the walk goes on, so
one :class:`UnsupportedOpsError` lists them all with counts and locations.

The StableHLO and HLO importers live in :mod:`irkit.frontends.jax_stablehlo`
and are re-exported here.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from irkit.frontends import jax_emit_index as index
from irkit.frontends.common import (
    ConverterTable,
    FrontendError,
    UnsupportedOps,
    record_symbol_examples,
    sanitize_name,
)
from irkit.frontends.jax_emit import (
    Emitter,
    Unsupported,
    check_result_type,
    ir_dtype,
    remove_dead_ops,
    sym_dim,
)
from irkit.frontends.jax_stablehlo import import_hlo, import_stablehlo
from irkit.ir.aliases import donation_aliases, set_aliases
from irkit.ir.builder import Builder
from irkit.ir.core import Function, Graph, Location, Module, Value
from irkit.ir.types import Dim, DType, SymDim, TensorType, static_dim
from irkit.ir.verify import verify


def _jax() -> Any:
    try:
        import jax
        import jax.extend.core
    except ImportError as e:  # pragma: no cover - jax is an optional dependency
        raise FrontendError(f"the JAX frontend needs jax: {e} (pip install 'irkit[jax]')") from None
    return jax


def _tensor_type(aval: Any) -> TensorType:
    return TensorType(tuple(sym_dim(d) for d in aval.shape), ir_dtype(aval.dtype))


# ---------------------------------------------------------------------------
# Names of arguments and constants


def _key_str(k: Any) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def _arg_names(fn: Callable[..., Any], paths: Sequence[tuple[Any, ...]]) -> list[str]:
    """``params.wte.weight``, ``input_ids``: the parameter name, then the pytree path."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    out = []
    for path in paths:
        idx = int(getattr(path[0], "idx", 0)) if path else 0
        head = params[idx].name if idx < len(params) else f"arg{idx}"
        rest = [_key_str(k) for k in path[1:]]
        out.append(sanitize_name(".".join([head] + rest)))
    seen: dict[str, int] = {}
    for i, n in enumerate(out):
        if n in seen:
            seen[n] += 1
            out[i] = f"{n}_{seen[n]}"
        else:
            seen[n] = 0
    return out


def _closure_leaves(fn: Any, jax: Any, depth: int = 0) -> list[tuple[str, Any]]:
    """(name, array) for arrays ``fn`` can see: closure cells, ``functools.partial``
    arguments, module globals it names, and the same in functions it calls from its
    own module (``apply`` in a closure, ``layer`` in the same file)."""
    out: list[tuple[str, Any]] = []
    if depth > 3 or fn is None:
        return out
    if isinstance(fn, functools.partial):
        for i, a in enumerate(fn.args):
            out += _pytree_leaves(f"arg{i}", a, jax)
        for k, a in fn.keywords.items():
            out += _pytree_leaves(k, a, jax)
        return out + _closure_leaves(fn.func, jax, depth + 1)
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return out
    seen: list[tuple[str, Any]] = []
    for name, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            seen.append((name, cell.cell_contents))
        except ValueError:  # an empty cell
            continue
    n_cells = len(seen)
    module_globals = getattr(fn, "__globals__", {})
    seen += [(name, module_globals[name]) for name in code.co_names if name in module_globals]
    for i, (name, v) in enumerate(seen):
        if _is_array(v) or isinstance(v, (dict, list, tuple)):
            out += _pytree_leaves(name, v, jax)
        elif callable(v) and (i < n_cells or getattr(v, "__module__", None) == getattr(fn, "__module__", None)):
            # Any function in the closure; of the globals only the module's own (not jnp.* and the like).
            out += _closure_leaves(v, jax, depth + 1)
    return out


def _is_array(v: Any) -> bool:
    # Not hasattr(v, "shape"): the numpy and jax.numpy modules have shape() and dtype() functions.
    return isinstance(getattr(v, "shape", None), tuple) and hasattr(v, "dtype")


def _pytree_leaves(name: str, v: Any, jax: Any) -> list[tuple[str, Any]]:
    """(path, array) for the arrays in ``v``, a closure variable called ``name``.

    Inside a container the path names the array (``wte.weight``); the
    variable's name adds nothing.
    """
    if _is_array(v):
        return [(name, v)]
    return [(".".join(parts), leaf) for parts, leaf in _walk(v, jax, 0)]


def _walk(v: Any, jax: Any, depth: int) -> list[tuple[list[str], Any]]:
    """Leaves of a pytree with their key paths; dicts keep their insertion order.

    Insertion order matters for tied weights: a state dict lists ``wte.weight``
    before the ``lm_head.weight`` that shares its values, and the first wins.
    """
    if _is_array(v):
        return [([], v)]
    if depth > 8:
        return []
    if isinstance(v, dict):
        items = [(str(k), x) for k, x in v.items()]
    elif isinstance(v, (list, tuple)):
        items = [(str(i), x) for i, x in enumerate(v)]
    else:
        try:
            flat = jax.tree_util.tree_flatten_with_path(v)[0]
        except Exception:  # noqa: BLE001 - an odd object is not worth failing the import for
            return []
        return [([_key_str(k) for k in path], leaf) for path, leaf in flat if _is_array(leaf)]
    out: list[tuple[list[str], Any]] = []
    for key, x in items:
        for parts, leaf in _walk(x, jax, depth + 1):
            out.append(([key] + parts, leaf))
    return out


class _ConstNamer:
    """Names jaxpr constants by matching them to arrays found in the function's closure.

    A constant matches an array that is the same object, or that has the same
    shape and, cast to the constant's dtype, the same bytes (``jnp.asarray(w,
    dtype)`` inside the function makes a new array with the old values).
    """

    def __init__(self, candidates: Iterable[tuple[str, Any]]):
        self._by_id: dict[int, str] = {}
        self._by_shape: dict[tuple[int, ...], list[tuple[str, Any]]] = {}
        for name, arr in candidates:
            self._by_id.setdefault(id(arr), name)
            self._by_shape.setdefault(tuple(int(d) for d in arr.shape), []).append((name, arr))
        self._digests: dict[tuple[int, str], bytes] = {}
        self._used: dict[str, int] = {}
        self._counter = 0

    @staticmethod
    def _digest(a: np.ndarray) -> bytes:
        return hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).digest()

    def name(self, const: Any, arr: np.ndarray) -> str | None:
        found = self._by_id.get(id(const))
        if found is None and arr.size > 1:
            want = None
            for cand_name, cand in self._by_shape.get(tuple(arr.shape), []):
                key = (id(cand), arr.dtype.str)
                d = self._digests.get(key)
                if d is None:
                    try:
                        d = self._digest(np.asarray(cand).astype(arr.dtype))
                    except (TypeError, ValueError):
                        continue
                    self._digests[key] = d
                want = want or self._digest(arr)
                if d == want:
                    found = cand_name
                    break
        if found is None:
            if arr.size <= 1:
                return None
            self._counter += 1
            found = f"const_{self._counter - 1}"
        found = sanitize_name(found)
        n = self._used.get(found, 0)
        self._used[found] = n + 1
        return found if n == 0 else f"{found}_{n}"


# ---------------------------------------------------------------------------
# Locations


def _location(eqn: Any, scope: str) -> Location:
    si = eqn.source_info
    frame = None
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(si.traceback)
    except Exception:  # noqa: BLE001 - a location is a nicety; never fail an import for it
        frame = None
    stack = str(getattr(si, "name_stack", "") or "")
    name = "/".join(p for p in (scope, stack, eqn.primitive.name) if p)
    if frame is None:
        return Location(name=name)
    return Location(file=frame.file_name, line=int(frame.start_line), col=int(frame.start_column), name=name)


# ---------------------------------------------------------------------------
# The jaxpr walker


_CALLS = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
          "custom_vjp_call_jaxpr": "fun_jaxpr", "remat": "jaxpr", "checkpoint": "jaxpr",
          "remat2": "jaxpr", "named_call": "call_jaxpr"}


_Out = Value | list[Value]


class _JaxprImporter:
    """Walks a jaxpr, building IR; each primitive translates through its handler in :data:`PRIMITIVES`."""

    def __init__(self, jax: Any, builder: Builder, namer: _ConstNamer):
        self.jax = jax
        self.em = Emitter(builder)
        self.namer = namer
        self.unsupported = UnsupportedOps("jax")
        # id -> (the constant, its value): holding the constant keeps its id from being reused.
        self._consts: dict[int, tuple[Any, Value]] = {}
        self._core = jax.extend.core
        self._poison: set[int] = set()
        self._stand_ins: list[Value] = []  # keeps poisoned ids from being reused

    # -- values ----------------------------------------------------------------
    def constant(self, c: Any) -> Value:
        hit = self._consts.get(id(c))
        if hit is not None:
            return hit[1]
        arr = np.asarray(c)
        dt = ir_dtype(arr.dtype)
        v = self.em.constant(arr, dt, name=self.namer.name(c, arr))
        self._consts[id(c)] = (c, v)
        return v

    def read(self, env: Mapping[Any, Value], v: Any) -> Value:
        if isinstance(v, self._core.Literal):
            dt = ir_dtype(v.aval.dtype)
            val = np.asarray(v.val)
            if val.ndim == 0:
                return self.em.scalar(val.item(), dt)
            return self.em.constant(val, dt)
        return env[v]

    # -- walking -----------------------------------------------------------------
    def run(self, jaxpr: Any, consts: Sequence[Value], args: Sequence[Value], scope: str,
            call_loc: Location | None = None) -> list[Value]:
        """Translate ``jaxpr``; ``call_loc`` (where it was called) stands in for ops with no user frame."""
        env: dict[Any, Value] = {}
        for var, val in zip(jaxpr.constvars, consts):
            env[var] = val
        for var, val in zip(jaxpr.invars, args):
            env[var] = val
        for eqn in jaxpr.eqns:
            loc = _location(eqn, scope)
            if loc.file is None and call_loc is not None and call_loc.file is not None:
                # Library code inlined from a call (jnp.cumsum is a jit): point at the call.
                loc = Location(call_loc.file, call_loc.line, call_loc.col, loc.name)
            self.em.loc = loc
            prim = eqn.primitive.name
            try:
                ins = [self.read(env, v) for v in eqn.invars]
                if any(id(v) in self._poison for v in ins):
                    # Downstream of an equation already reported: stay quiet rather than cascade.
                    for var in eqn.outvars:
                        env[var] = self.stand_in(var.aval)
                    continue
                outs = self.eqn(eqn, ins, scope)
                for var, val in zip(eqn.outvars, outs):
                    check_result_type(val.type, _tensor_type(var.aval), prim)
            except Unsupported as e:
                self.unsupported.add(prim if e.what == prim else f"{prim} ({e.what})", loc)
                # Stand-ins keep the walk going so that every unsupported op is reported.
                outs = [self.stand_in(var.aval) for var in eqn.outvars]
            for var, val in zip(eqn.outvars, outs):
                if not isinstance(var, self._core.DropVar):
                    env[var] = val
        return [self.read(env, v) for v in jaxpr.outvars]

    def stand_in(self, aval: Any) -> Value:
        """A free value standing in for the result of an equation that was not translated."""
        try:
            v = Value(_tensor_type(aval))
        except Unsupported:
            v = Value(TensorType((), ir_dtype(np.float32)))
        self._poison.add(id(v))
        self._stand_ins.append(v)
        return v

    def call(self, sub: Any, ins: Sequence[Value], scope: str) -> list[Value]:
        loc = self.em.loc
        if isinstance(sub, self._core.ClosedJaxpr):
            consts = [self.constant(c) for c in sub.consts]
            return self.run(sub.jaxpr, consts, ins, scope, loc)
        if isinstance(sub, self._core.Jaxpr):
            if sub.constvars:
                raise Unsupported("open jaxpr with constants")
            return self.run(sub, [], ins, scope, loc)
        raise Unsupported(f"call of a {type(sub).__name__}")

    def eqn(self, eqn: Any, ins: list[Value], scope: str) -> list[Value]:
        prim = eqn.primitive.name
        p = eqn.params
        if prim in _REFUSED:
            raise Unsupported(_REFUSED[prim])  # a reason is printed after the primitive's name
        out_types = [_tensor_type(v.aval) for v in eqn.outvars]
        if prim in _CALLS and _CALLS[prim] in p:
            inner = scope
            if prim in ("pjit", "jit") and p.get("name"):
                inner = "/".join(x for x in (scope, f"jit({p['name']})") if x)
            return self.call(p[_CALLS[prim]], ins, inner)
        if prim == "custom_linear_solve":
            # Its value is the user's solve function applied to b; matvec and the transposed solve
            # only define derivatives.  Operands: the consts of matvec, vecmat, solve and
            # transpose_solve, in that order, then b.
            n = p["const_lengths"]
            start = n.matvec + n.vecmat
            b = ins[start + n.solve + n.transpose_solve:]
            return self.call(p["jaxprs"].solve, list(ins[start:start + n.solve]) + list(b), scope)
        handler = PRIMITIVES.get(prim)
        if handler is None:
            raise Unsupported(prim)
        out = handler(self, eqn, ins, p, out_types)
        return out if isinstance(out, list) else [out]


# ---------------------------------------------------------------------------
# The primitive table: one handler per jaxpr primitive, registered with @converter.
#
# A handler gets the importer, the equation, its operands as IR values, its
# parameters and its result types (from the avals, symbolic dims included).

_Handler = Callable[[_JaxprImporter, Any, list[Value], Mapping[str, Any], list[TensorType]], _Out]
PRIMITIVES = ConverterTable("jax")
converter = PRIMITIVES.converter
"""Register a handler under jaxpr primitive names (``@converter("max", "min")``)."""


_UNARY = {"neg": "neg", "abs": "abs", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt",
          "tanh": "tanh", "logistic": "sigmoid", "erf": "erf", "sin": "sin", "cos": "cos",
          "floor": "floor", "ceil": "ceil", "sign": "sign", "tan": "tan", "asin": "asin", "acos": "acos",
          "atan": "atan", "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
          "log1p": "log1p", "expm1": "expm1", "erf_inv": "erfinv", "lgamma": "lgamma", "digamma": "digamma",
          "population_count": "popcount", "clz": "clz"}
_BINARY = {"add": "add", "add_any": "add", "sub": "sub", "mul": "mul", "div": "div", "rem": "rem",
           "pow": "pow", "atan2": "atan2", "nextafter": "nextafter", "shift_left": "shift_left",
           "shift_right_logical": "shift_right_logical", "shift_right_arithmetic": "shift_right_arithmetic"}
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
_IDENTITY = ("copy", "copy_p", "stop_gradient", "sharding_constraint", "optimization_barrier",
             "pvary", "mesh_cast", "reshard", "device_put")
_REDUCE = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min", "reduce_prod": "prod",
           "reduce_and": "and", "reduce_or": "or"}
_OUT_OF_SCOPE = ("cholesky", "eig", "eigh", "lu", "lu_pivots_to_permutation", "qr", "householder_product", "svd",
                 "triangular_solve", "tridiagonal", "tridiagonal_solve", "schur", "hessenberg")
_RANDOM = ("random_bits", "random_seed", "random_split", "random_fold_in", "random_wrap", "random_unwrap",
           "threefry2x32", "rng_bit_generator", "rng_uniform", "random_gamma_grad")
_REFUSED = {**{n: "a linear-algebra decomposition; out of scope" for n in _OUT_OF_SCOPE},
            **{n: "a random-number primitive; out of scope" for n in _RANDOM},
            **{n: "a special function with no IR op" for n in
               ("igamma", "igammac", "igamma_grad_a", "regularized_incomplete_beta", "polygamma", "zeta",
                "random_gamma_grad")},
            "fft": "complex numbers are out of scope",
            "select_and_scatter_add": "a gradient of max pooling; training is out of scope",
            "select_and_gather_add": "a gradient of max pooling; training is out of scope"}


def _unary(name: str) -> _Handler:
    return lambda imp, eqn, ins, p, ot: imp.em.unary(name, ins[0])


def _binary(name: str) -> _Handler:
    def h(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
        x, y = ins
        if x.dtype != y.dtype:
            x, y = imp.em.cast(x, ot[0].dtype), imp.em.cast(y, ot[0].dtype)
        return imp.em.binary(name, x, y)
    return h


def _reduce(kind: str) -> _Handler:
    return lambda imp, eqn, ins, p, ot: imp.em.reduce(kind, ins[0], p["axes"])


for _n, _ir in _UNARY.items():
    PRIMITIVES.add(_n, _unary(_ir))
for _n, _ir in _BINARY.items():
    PRIMITIVES.add(_n, _binary(_ir))
for _n in _COMPARE:
    PRIMITIVES.add(_n, _binary(_n))
for _n, _k in _REDUCE.items():
    PRIMITIVES.add(_n, _reduce(_k))
for _n in _IDENTITY:
    PRIMITIVES.add(_n, lambda imp, eqn, ins, p, ot: list(ins))


def _dims(shape: Iterable[Any]) -> tuple[Dim, ...]:
    return tuple(sym_dim(d) for d in shape)


@converter("max", "min")
def _p_max(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.minmax(eqn.primitive.name, ins[0], ins[1])


@converter("square")
def _p_square(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.binary("mul", ins[0], ins[0])


@converter("integer_pow")
def _p_integer_pow(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                   ot: list[TensorType]) -> _Out:
    return imp.em.integer_pow(ins[0], int(p["y"]))


@converter("exp2")
def _p_exp2(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    em = imp.em
    return em.unary("exp", em.binary("mul", ins[0], em.scalar(np.log(2.0), ins[0].dtype)))


@converter("erfc")
def _p_erfc(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.binary("sub", imp.em.scalar(1, ins[0].dtype), imp.em.unary("erf", ins[0]))


@converter("cbrt")
def _p_cbrt(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.cbrt(ins[0])


@converter("round")
def _p_round(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    # RoundingMethod.AWAY_FROM_ZERO is 0, TO_NEAREST_EVEN is 1.
    return imp.em.round(ins[0], away_from_zero=int(p["rounding_method"]) == 0)


@converter("is_finite")
def _p_is_finite(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                 ot: list[TensorType]) -> _Out:
    return imp.em.is_finite(ins[0])


@converter("not")
def _p_not(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.bitwise_not(ins[0])


@converter("and", "or", "xor")
def _p_logical(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.logical(eqn.primitive.name, *ins)


@converter("select_n")
def _p_select_n(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.select_n(ins[0], ins[1:])


@converter("clamp")
def _p_clamp(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.clamp(*ins)


@converter("convert_element_type")
def _p_convert(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.cast(ins[0], ot[0].dtype)


@converter("bitcast_convert_type")
def _p_bitcast_convert_type(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                            ot: list[TensorType]) -> _Out:
    return imp.em.bitcast(ins[0], ot[0].dtype)


@converter("bessel_i0e", "bessel_i1e")
def _p_bessel(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.bessel(int(eqn.primitive.name[len("bessel_i")]), ins[0])


@converter("reduce_precision")
def _p_reduce_precision(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                        ot: list[TensorType]) -> _Out:
    return imp.em.reduce_precision(ins[0], int(p["exponent_bits"]), int(p["mantissa_bits"]))


@converter("dim_as_value")
def _p_dim_as_value(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                    ot: list[TensorType]) -> _Out:
    return imp.em.op("dim_value", dim=(sym_dim(p["dim"]),), dtype=ot[0].dtype)


@converter("broadcast_in_dim")
def _p_broadcast_in_dim(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                        ot: list[TensorType]) -> _Out:
    return imp.em.broadcast_in_dim(ins[0], _dims(p["shape"]), p["broadcast_dimensions"])


@converter("reshape")
def _p_reshape(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    x = ins[0]
    if p.get("dimensions") is not None:
        x = imp.em.transpose(x, p["dimensions"])
    return imp.em.reshape(x, ot[0].shape)


@converter("squeeze", "expand_dims")
def _p_squeeze(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.reshape(ins[0], ot[0].shape)


@converter("transpose")
def _p_transpose(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                 ot: list[TensorType]) -> _Out:
    return imp.em.transpose(ins[0], p["permutation"])


@converter("rev")
def _p_rev(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.reverse(ins[0], p["dimensions"])


@converter("argmax", "argmin")
def _p_argmax(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.argmax(ins[0], int(p["axes"][0]), ot[0].dtype, argmin=eqn.primitive.name == "argmin")


@converter("iota")
def _p_iota(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.iota(_dims(p["shape"]), int(p["dimension"]), ot[0].dtype)


@converter("concatenate")
def _p_concatenate(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                   ot: list[TensorType]) -> _Out:
    return imp.em.concat(ins, int(p["dimension"]))


@converter("split")
def _p_split(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.split(ins[0], _dims(p["sizes"]), int(p["axis"]))


@converter("pad")
def _p_pad(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    cfg = p["padding_config"]
    return imp.em.pad(ins[0], ins[1], [c[0] for c in cfg], [c[1] for c in cfg], [c[2] for c in cfg])


@converter("slice")
def _p_slice(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.slice(ins[0], _dims(p["start_indices"]), _dims(p["limit_indices"]), p.get("strides"))


@converter("dynamic_slice")
def _p_dynamic_slice(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                     ot: list[TensorType]) -> _Out:
    return index.dynamic_slice(imp.em, ins[0], ins[1:], _dims(p["slice_sizes"]))


@converter("dynamic_update_slice")
def _p_dynamic_update_slice(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                            ot: list[TensorType]) -> _Out:
    return index.dynamic_update_slice(imp.em, ins[0], ins[1], ins[2:])


@converter("gather")
def _p_gather(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    dn = p["dimension_numbers"]
    fill = None
    if "FILL" in str(p.get("mode", "")):
        fv = p.get("fill_value")
        dt = ins[0].dtype
        if fv is None:
            fv = np.nan if dt.is_float else (True if dt == DType.bool else
                                             (np.iinfo(dt.np).max if dt.is_unsigned else np.iinfo(dt.np).min))
        fill = imp.em.scalar(fv, dt)
    return index.gather(
        imp.em, ins[0], ins[1], offset_dims=dn.offset_dims, collapsed_slice_dims=dn.collapsed_slice_dims,
        start_index_map=dn.start_index_map, operand_batching_dims=dn.operand_batching_dims,
        start_indices_batching_dims=dn.start_indices_batching_dims, index_vector_dim=ins[1].type.rank - 1,
        slice_sizes=_dims(p["slice_sizes"]), fill=fill)


_SCATTER_KIND = {"scatter": None, "scatter-add": "add", "scatter_add": "add", "scatter-mul": "mul",
                 "scatter_mul": "mul", "scatter-min": "min", "scatter_min": "min", "scatter-max": "max",
                 "scatter_max": "max", "scatter-sub": "sub", "scatter_sub": "sub"}


def _combiner(jaxpr: Any) -> str | None:
    """none/add/mul/max/min when a reducer jaxpr (x, y) -> r is y or one such op on x and y."""
    if jaxpr is None:
        return None
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    a, b = inner.invars[:2] if len(inner.invars) >= 2 else (None, None)
    if not inner.eqns and list(inner.outvars) == [b]:
        return "none"
    if len(inner.eqns) != 1:
        return None
    e = inner.eqns[0]
    kinds = {"add": "add", "mul": "mul", "max": "max", "min": "min", "or": "max", "and": "min"}
    if e.primitive.name in kinds and set(e.invars) == {a, b} and list(inner.outvars) == list(e.outvars):
        return kinds[e.primitive.name]
    return None


@converter(*_SCATTER_KIND)
def _p_scatter(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    kind = _SCATTER_KIND[eqn.primitive.name]
    operand, indices, updates = ins
    if kind is None:
        kind = "none" if p.get("update_jaxpr") is None else _combiner(p["update_jaxpr"])
        if kind is None:
            raise Unsupported("scatter with a combiner other than overwrite/add/mul/min/max")
    if kind == "sub":
        kind, updates = "add", imp.em.unary("neg", updates)
    dn = p["dimension_numbers"]
    return index.scatter(
        imp.em, operand, indices, updates, update_window_dims=dn.update_window_dims,
        inserted_window_dims=dn.inserted_window_dims, scatter_dims_to_operand_dims=dn.scatter_dims_to_operand_dims,
        operand_batching_dims=dn.operand_batching_dims,
        scatter_indices_batching_dims=dn.scatter_indices_batching_dims, index_vector_dim=indices.type.rank - 1,
        reduction=kind, clip="CLIP" in str(p.get("mode", "")))


@converter("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp")
def _p_cumulative(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                  ot: list[TensorType]) -> _Out:
    return imp.em.cumulative(eqn.primitive.name[3:], ins[0], int(p["axis"]), bool(p["reverse"]))


def _window_args(p: Mapping[str, Any]) -> dict[str, Any]:
    return {"window": p["window_dimensions"], "strides": p["window_strides"], "padding": p["padding"],
            "base_dilation": p["base_dilation"], "window_dilation": p["window_dilation"]}


@converter("reduce_window_sum", "reduce_window_max", "reduce_window_min")
def _p_reduce_window_kind(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                          ot: list[TensorType]) -> _Out:
    return imp.em.reduce_window(eqn.primitive.name[len("reduce_window_"):], ins[0], **_window_args(p))


@converter("reduce_window")
def _p_reduce_window(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                     ot: list[TensorType]) -> _Out:
    if len(ins) != 2:
        raise Unsupported(f"reduce_window of {len(ins) // 2} operands")
    kind = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}.get(_combiner(p["jaxpr"]) or "")
    if kind is None or p.get("consts"):
        raise Unsupported("reduce_window with a reducer other than add/mul/max/min")
    return imp.em.reduce_window(kind, ins[0], init=ins[1], **_window_args(p))


def _combiners(jaxpr: Any, n: int) -> list[str] | None:
    """For a reducer of ``n`` operands ((accs..., xs...) -> outs), the kind (add, mul, max, min)
    of each output when each is one such op on its own accumulator and element."""
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    if len(inner.invars) != 2 * n or len(inner.eqns) != n:
        return None
    kinds = {"add": "add", "mul": "mul", "max": "max", "min": "min", "or": "max", "and": "min"}
    out = []
    for i, var in enumerate(inner.outvars):
        e = next((e for e in inner.eqns if var in e.outvars), None)
        if e is None or e.primitive.name not in kinds or set(e.invars) != {inner.invars[i], inner.invars[n + i]}:
            return None
        out.append(kinds[e.primitive.name])
    return out


@converter("reduce")
def _p_reduce(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    n = len(ins) // 2
    combs = _combiners(p["jaxpr"], n)
    if combs is None or p.get("consts"):
        raise Unsupported("reduce with a reducer other than add/mul/max/min on each operand")
    em = imp.em
    outs = []
    for x, init, comb in zip(ins[:n], ins[n:], combs):
        kind = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}[comb]
        if x.dtype == DType.bool and kind in ("sum", "prod"):
            kind, comb = ("max", "max") if kind == "sum" else ("min", "min")  # or / and
        r = em.reduce(kind, x, p["dimensions"])
        iv = em.const_value(init)
        if iv is None or iv.reshape(-1)[0] != em.identity_value(kind, x.dtype):
            r = em.minmax(comb, r, init) if comb in ("max", "min") else em.binary(comb, r, init)
        outs.append(r)
    return outs


@converter("sort")
def _p_sort(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    return imp.em.sort(ins, int(p["dimension"]), range(int(p["num_keys"])))


@converter("top_k")
def _p_top_k(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any], ot: list[TensorType]) -> _Out:
    # XLA's TopK ranks floats by the total order (a NaN with the sign bit set comes last).
    return imp.em.topk(ins[0], int(p["k"]), int(p.get("axis", -1)), True, ot[1].dtype, total_order=True)


@converter("approx_top_k")
def _p_approx_top_k(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                    ot: list[TensorType]) -> _Out:
    # On CPU and GPU XLA computes approx_top_k exactly; the result is an exact top-k.
    axis = int(p["reduction_dimension"])
    k = ot[0].shape[axis]
    return imp.em.topk(ins[0], static_dim(k), axis, bool(p["is_max_k"]), ot[1].dtype)


@converter("dot_general")
def _p_dot_general(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                   ot: list[TensorType]) -> _Out:
    (lc, rc), (lb, rb) = p["dimension_numbers"]
    return imp.em.dot_general(ins[0], ins[1], lc, rc, lb, rb, ot[0].dtype)


@converter("conv_general_dilated")
def _p_conv_general_dilated(imp: _JaxprImporter, eqn: Any, ins: list[Value], p: Mapping[str, Any],
                            ot: list[TensorType]) -> _Out:
    dn = p["dimension_numbers"]
    return imp.em.conv(
        ins[0], ins[1], strides=p["window_strides"], padding=p["padding"], lhs_dilation=p["lhs_dilation"],
        rhs_dilation=p["rhs_dilation"], lhs_spec=dn.lhs_spec, rhs_spec=dn.rhs_spec, out_spec=dn.out_spec,
        feature_group_count=int(p["feature_group_count"]), batch_group_count=int(p["batch_group_count"]),
        out_dtype=ot[0].dtype)


def supported_ops() -> list[str]:
    """The jaxpr primitives :func:`import_jax` translates (a few only in common forms, e.g.
    ``reduce`` with one operand and an add/mul/max/min reducer)."""
    return sorted({str(k) for k in PRIMITIVES} | set(_CALLS) | {"custom_linear_solve"})


# ---------------------------------------------------------------------------
# Entry point


def _user_frame_of(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of the user's code in ``exc``'s traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        f = fr.filename.replace(os.sep, "/")
        if "/jax/" not in f and "/jaxlib/" not in f and "/irkit/frontends/" not in f and "/numpy/" not in f:
            return f"{fr.filename}:{fr.lineno}"
    return ""


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(getattr(fn, "func", None), "__qualname__", None) \
        or type(fn).__name__


def _symbol_examples(specs: Any, args: Any, jax: Any) -> dict[str, int]:
    ex: dict[str, int] = {}
    for s, a in zip(jax.tree_util.tree_leaves(specs), jax.tree_util.tree_leaves(args)):
        shape = getattr(a, "shape", None)
        if shape is None:
            continue
        for d, n in zip(s.shape, shape):
            sd = sym_dim(d)
            if isinstance(sd, SymDim) and sd.is_symbol and isinstance(n, (int, np.integer)):
                ex.setdefault(sd.name, int(n))
    return ex


def _check_spec_ranks(specs: Any, args: Any, poly: Any, what: str, jax: Any) -> None:
    """jax.export accepts a spec with more dims than the example; say so instead of tracing nonsense."""
    paths = jax.tree_util.tree_flatten_with_path(args)[0]
    for (path, a), s in zip(paths, jax.tree_util.tree_leaves(specs)):
        shape = getattr(a, "shape", None)
        if shape is not None and len(shape) != len(s.shape):
            where = "args" + jax.tree_util.keystr(path)
            raise FrontendError(f"bad polymorphic_shapes {poly!r} for {what}: it gives {where} "
                                f"{len(s.shape)} dims ({', '.join(map(str, s.shape))}), but the example has shape "
                                f"{tuple(shape)}")


def _donated_leaves(jaxpr: Any, specs: Sequence[Any], donate_argnums: Sequence[int] | int | None,
                    what: str, jax: Any) -> set[int]:
    """Indices of the flat arguments (pytree leaves) that are donated: those of the positional
    arguments in ``donate_argnums``, else those a top-level ``jax.jit(..., donate_argnums=...)``
    call in the jaxpr donates."""
    out: set[int] = set()
    if donate_argnums is not None:
        nums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
        offsets = [0]
        for a in specs:
            offsets.append(offsets[-1] + len(jax.tree_util.tree_leaves(a)))
        for k in nums:
            if not isinstance(k, int) or not -len(specs) <= k < len(specs):
                raise FrontendError(f"donate_argnums {nums!r} for {what}: {k!r} is not a position of its "
                                    f"{len(specs)} arguments")
            k %= len(specs)
            out.update(range(offsets[k], offsets[k + 1]))
        return out
    index = {id(v): i for i, v in enumerate(jaxpr.invars)}
    for eqn in jaxpr.eqns:
        flags = eqn.params.get("donated_invars") if eqn.primitive.name in _CALLS else None
        for v, d in zip(eqn.invars, flags or ()):
            if d and id(v) in index:
                out.add(index[id(v)])
    return out


def import_jax(fn: Callable[..., Any], example_args: Sequence[Any] | Any, *,
               polymorphic_shapes: Sequence[str | None] | str | None = None,
               constraints: Sequence[str] = (), name: str = "main",
               donate_argnums: Sequence[int] | int | None = None) -> Module:
    """Import a JAX function by tracing it to a jaxpr.

    ``example_args`` are the positional arguments (arrays, ``jax.ShapeDtypeStruct``
    or pytrees of them); their leaves become the function's arguments, named
    from the parameter names and pytree paths.  ``polymorphic_shapes`` gives,
    per argument, a ``jax.export`` shape spec such as ``"B, S"`` (or ``None`` for
    a static argument); the symbols become symbolic dims.  ``constraints`` are
    ``jax.export`` symbolic constraints such as ``"S <= 64"`` (needed when the
    function slices a fixed-size buffer by a symbolic length).  Raises
    :class:`FrontendError` when ``fn`` does not trace and
    :class:`~irkit.frontends.common.UnsupportedOpsError` listing every primitive
    irkit cannot translate.

    ``donate_argnums`` (positional indices, as for ``jax.jit``) marks arguments whose
    buffers the caller donates; when it is not given, the donations of a ``jax.jit``
    ``fn`` are read from its traced call.  Donated arguments become state: the
    function's ``aliases`` attribute pairs each with the output that is an
    in-place update of it (``lax.dynamic_update_slice``/scatter), then, as
    ``jax.jit`` does, with the next output of the same type
    (:func:`irkit.ir.aliases.donation_aliases`).
    """
    jax = _jax()
    args = tuple(example_args) if isinstance(example_args, (tuple, list)) else (example_args,)
    what = _fn_name(fn)
    specs: Any = args
    if polymorphic_shapes is not None:
        try:
            specs = jax.export.symbolic_args_specs(args, polymorphic_shapes, constraints=tuple(constraints))
        except Exception as e:  # noqa: BLE001 - jax raises several kinds for a bad spec
            raise FrontendError(f"bad polymorphic_shapes {polymorphic_shapes!r} for {what}: "
                                f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        _check_spec_ranks(specs, args, polymorphic_shapes, what, jax)
    try:
        closed = jax.make_jaxpr(fn)(*specs)
    except Exception as e:  # noqa: BLE001 - any tracing failure is the user's function's
        where = _user_frame_of(e)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise FrontendError(f"could not trace {what}{' at ' + where if where else ''}: "
                            f"{type(e).__name__}: {msg}") from None
    leaves_with_paths = jax.tree_util.tree_flatten_with_path(specs)[0]
    names = _arg_names(fn, [path for path, _ in leaves_with_paths])
    jaxpr = closed.jaxpr
    try:
        arg_types = [_tensor_type(v.aval) for v in jaxpr.invars]
    except Unsupported as e:
        raise FrontendError(f"{what}: an argument has an unsupported {e.what}") from None
    if len(names) != len(arg_types):
        names = [f"arg{i}" for i in range(len(arg_types))]
    g = Graph(arg_types, names)
    builder = Builder.at_end(g)
    imp = _JaxprImporter(jax, builder, _ConstNamer(_closure_leaves(fn, jax)))
    try:
        consts = [imp.constant(c) for c in closed.consts]
    except Unsupported as e:
        raise FrontendError(f"{what}: a closed-over constant has an unsupported {e.what}") from None
    outs = imp.run(jaxpr, consts, g.args, "")
    imp.unsupported.raise_if_any()
    builder.loc = Location.unknown()
    builder.ret(*outs)
    remove_dead_ops(g)
    f = Function(name, g)
    donated = _donated_leaves(jaxpr, specs, donate_argnums, what, jax)
    if donated:
        set_aliases(f, donation_aliases(f, donated))
    if polymorphic_shapes is not None:
        record_symbol_examples(f, _symbol_examples(specs, args, jax))
    m = Module([f])
    verify(m)
    return m


__all__ = ["import_hlo", "import_jax", "import_stablehlo", "supported_ops", "sym_dim"]

