"""IR → JAX: one lowering rule per op, each traced under the op's own named scope.

Design note
-----------
:func:`lower_to_jax` turns the entry function of a module, at concrete values of
its symbolic dims, into a JAX-traceable Python function that ``compile_xla``
hands to XLA. The function walks the IR graph once per trace and calls one
rule per op from :data:`XLA_RULES`, a :class:`~irkit.targets.base.LoweringTable`
(``op name -> rule(ctx, op, inputs) -> outputs``);
every op of the registry has a rule, and ``tests/unit/test_xla_target.py``
fails when one is added without.

Choices that matter:

- **Semantics are the reference kernels'.** Each rule computes what the op's
  NumPy ``ref`` computes: half types (f16, bf16) go through f32 and are rounded
  once at the end; softmax and attention treat fully masked rows as the
  reference does (zeros for attention, the reference's NaNs for softmax);
  integer ``div`` truncates toward zero; ``cast`` from float to int truncates;
  contractions of half types accumulate in f32. The result of every rule is
  checked against the op's IR type (dtype and concrete shape), so a wrong rule
  fails at trace time, naming the op and its location.
- **Named scopes.** Each op is traced inside
  ``jax.named_scope(ir_scope(op.name, loc, id))`` with ``id`` its position in
  :func:`irkit.targets.base.op_ids`; the scope reaches every HLO instruction's
  ``metadata.op_name``, so each optimised-HLO kernel maps back to IR ops and
  source locations. Ops inside an ``ik.fused`` region get their own scopes,
  nested in the fused op's.
- **Weights are arguments.** A constant larger than ``inline_limit`` elements
  becomes a trailing parameter of the lowered function (the runner binds it
  once, on the device), as in ``jax.jit(apply)(params, x)``: the StableHLO stays
  small (weights inlined as literals would be printed in full) and tracing stays
  fast. Splats and small constants are inlined so XLA can fold them.
- **64-bit types.** The IR's i64 (token ids, positions, argmax) and f64 are
  real 64-bit types in the HLO: lowering, compiling and running happen under
  ``jax.enable_x64(True)`` (a context, not a global switch).
- **Pallas matmuls.** With ``pallas=True``, an ``ik.matmul`` carrying a
  ``tile = [tm, tn, tk]`` attribute (set by the tiling pass) lowers to
  :func:`irkit.targets.xla_pallas.pallas_matmul` with those blocks: Mosaic on
  TPU, Pallas' interpreter on CPU. Blocks that do not fit the problem (see
  ``check_blocks``) keep the plain dot, and the reason is recorded in
  ``LoweredFunction.notes``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from irkit.targets.base import LoweringTable, op_ids
from irkit.targets.ir_scope import ir_scope

from irkit.errors import IrkitError
from irkit.ir.core import Dense, Function, Graph, Module, Op
from irkit.ir.ops import OPS, named_operands
from irkit.ir.types import DType, TensorType, eval_dim, normalize_axis

__all__ = ["RULES", "XLA_RULES", "LowerOptions", "LoweredFunction", "LoweringError", "RuleContext", "jax_dtype",
           "lower_to_jax"]


class LoweringError(IrkitError):
    """An op could not be lowered to JAX (or its rule produced the wrong type); names the op."""


@dataclass(frozen=True)
class LowerOptions:
    """How the IR becomes JAX."""

    platform: str = "cpu"
    """Canonical XLA platform (``cpu``, ``gpu``, ``tpu-v5e`` ...): decides how Pallas runs."""
    precision: str = "default"
    """Precision of dots and convolutions: ``default`` (on TPU, f32 dots run as bf16 passes),
    ``high`` (bf16_3x) or ``highest`` (full f32)."""
    pallas: bool = False
    """Lower tiled ``ik.matmul`` ops (``tile`` attribute) to the Pallas blocked matmul."""
    inline_limit: int = 64
    """Constants with more elements than this become parameters of the lowered function."""


@dataclass
class LoweredFunction:
    """A JAX-traceable function for one IR function at one set of dim values."""

    fn: Callable[..., Any]
    """Positional arguments: the IR function's inputs, then the lifted weights."""
    input_specs: list[Any]
    """``jax.ShapeDtypeStruct`` per IR input."""
    weight_specs: list[Any]
    weights: list[np.ndarray]
    """Values of the lifted constants, in parameter order."""
    weight_names: list[str]
    bindings: dict[str, int]
    ids: dict[int, str]
    """``id(op) -> "ik.name#N"`` (see :func:`irkit.targets.base.op_ids`)."""
    ops_by_id: dict[str, Op]
    weight_ops: list[list[str]] = field(default_factory=list)
    """For each lifted weight, the ids of the ``ik.constant`` ops it stands for."""
    notes: list[str] = field(default_factory=list)
    """Decisions worth reporting, e.g. a tiled matmul that kept the plain dot, and why."""

    @property
    def arg_specs(self) -> list[Any]:
        return self.input_specs + self.weight_specs


def jax_dtype(dt: DType) -> Any:
    """The JAX/NumPy dtype of an IR element type."""
    return np.dtype(dt.np)


# --------------------------------------------------------------------------------------------
# Lowering context
# --------------------------------------------------------------------------------------------


Rule = Callable[["RuleContext", Op, list[Any]], list[Any]]
XLA_RULES = LoweringTable("xla")
"""The lowering rules, keyed by IR op name: the XLA targets' coverage (``irkit coverage`` reads it)."""
RULES = XLA_RULES  # the older name, kept for callers that import it
rule = XLA_RULES.rule


class RuleContext:
    """What a lowering rule is given besides the op and its JAX inputs: dim values, options,
    op attributes with defaults, lifted weights, and how to lower nested regions."""

    def __init__(
        self,
        bindings: Mapping[str, int],
        options: LowerOptions,
        ids: Mapping[int, str],
        weights: Mapping[int, int],
        weight_args: Sequence[Any],
        notes: list[str],
    ):
        self.bindings = bindings
        self.options = options
        self.ids = ids
        self.weights = weights
        self.weight_args = weight_args
        self.notes = notes

    # -- helpers for rules --------------------------------------------------------------------
    def attrs(self, op: Op) -> dict[str, Any]:
        return OPS[op.name].with_defaults(op.attrs)

    def dim(self, d: Any) -> int:
        return eval_dim(d, self.bindings)

    def shape(self, dims: Sequence[Any]) -> tuple[int, ...]:
        return tuple(eval_dim(d, self.bindings) for d in dims)

    def out_type(self, op: Op, i: int = 0) -> TensorType:
        return op.results[i].type

    def out_dtype(self, op: Op, i: int = 0) -> Any:
        return jax_dtype(op.results[i].type.dtype)

    def precision(self) -> Any:
        from jax import lax

        return {"default": None, "high": lax.Precision.HIGH, "highest": lax.Precision.HIGHEST}[
            self.options.precision
        ]

    # -- graphs -------------------------------------------------------------------------------
    def run_graph(self, g: Graph, xs: Sequence[Any]) -> list[Any]:
        import jax

        env: dict[int, Any] = {id(a): x for a, x in zip(g.args, xs)}
        for op in g:
            if op.name in ("func.return", "ik.yield"):
                return [env[id(v)] for v in op.operands]
            ins = [env[id(v)] for v in op.operands]
            oid = self.ids.get(id(op), op.name)
            n = oid.rpartition("#")[2] if "#" in oid else None
            with jax.named_scope(ir_scope(op.name, op.loc.short(), id=n)):
                outs = self.lower_op(op, ins)
            for r, y in zip(op.results, outs):
                env[id(r)] = y
        raise LoweringError("region has no terminator")

    def lower_op(self, op: Op, ins: list[Any]) -> list[Any]:
        fn = RULES.get(op.name)
        where = f"'{op.name}' at {op.loc.short()}"
        if fn is None:
            raise LoweringError(
                f"{where}: no XLA lowering rule for this op; add one to XLA_RULES in "
                "irkit/targets/xla_lower.py"
            )
        try:
            outs = fn(self, op, ins)
        except LoweringError:
            raise
        except (TypeError, ValueError) as e:  # JAX's shape and dtype errors, said for the op
            raise LoweringError(f"{where}: {e}") from e
        if len(outs) != len(op.results):
            raise LoweringError(f"{where}: rule gave {len(outs)} results, op has {len(op.results)}")
        for k, (y, r) in enumerate(zip(outs, op.results)):
            want_shape = self.shape(r.type.shape)
            want_dt = jax_dtype(r.type.dtype)
            if tuple(y.shape) != want_shape or np.dtype(y.dtype) != want_dt:
                raise LoweringError(
                    f"{where}: result {k} lowered to {np.dtype(y.dtype)}{list(y.shape)}, "
                    f"the IR type {r.type} means {want_dt}{list(want_shape)}"
                )
        return outs


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------

_HALF = (np.dtype(np.float16), np.dtype(DType.bf16.np))


def _is_half(x: Any) -> bool:
    return np.dtype(x.dtype) in _HALF


def _compute(x: Any) -> Any:
    """The dtype a reference kernel computes in: half types go through f32."""
    import jax.numpy as jnp

    return x.astype(jnp.float32) if _is_half(x) else x


def _acc_dtype(dt: Any) -> Any:
    """A contraction's accumulator, as the reference's ``_acc_dtype``: f64, f32, or i64 for ints."""
    dt = np.dtype(dt)
    if dt == np.float64:
        return np.dtype(np.float64)
    if dt.kind == "f" or dt in _HALF:
        return np.dtype(np.float32)
    return np.dtype(np.int64)


def _axes(a: Mapping[str, Any], rank: int) -> tuple[int, ...]:
    ax = a.get("axes")
    if not ax:
        return tuple(range(rank))
    return tuple(sorted({normalize_axis(x, rank) for x in ax}))


def _scalar(value: Any, dtype: Any) -> Any:
    import jax.numpy as jnp

    return jnp.asarray(value, dtype=dtype)


# --------------------------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------------------------


@functools.cache
def _unary_fns() -> dict[str, Callable[[Any], Any]]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    return {
        "neg": jnp.negative,
        "abs": jnp.abs,
        "exp": jnp.exp,
        "log": jnp.log,
        "sqrt": jnp.sqrt,
        "rsqrt": lax.rsqrt,
        "reciprocal": lambda x: _scalar(1, x.dtype) / x,
        "tanh": jnp.tanh,
        "erf": lax.erf,
        "sigmoid": jax.nn.sigmoid,
        "sin": jnp.sin,
        "cos": jnp.cos,
        "floor": jnp.floor,
        "ceil": jnp.ceil,
        "sign": jnp.sign,
        "relu": lambda x: jnp.maximum(x, _scalar(0, x.dtype)),
        "silu": lambda x: x * jax.nn.sigmoid(x),
    }


_UNARY_NAMES = (
    "neg",
    "abs",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "reciprocal",
    "tanh",
    "erf",
    "sigmoid",
    "sin",
    "cos",
    "floor",
    "ceil",
    "sign",
    "relu",
    "silu",
)


@rule(*(f"ik.{n}" for n in _UNARY_NAMES))
def _unary(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    fn = _unary_fns()[op.name[3:]]
    return [fn(_compute(xs[0])).astype(ctx.out_dtype(op))]


@rule("ik.gelu")
def _gelu(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp
    from jax import lax

    x = _compute(xs[0])
    if ctx.attrs(op).get("approximate", "none") == "tanh":
        c = _scalar(math.sqrt(2.0 / math.pi), x.dtype)
        y = 0.5 * x * (1.0 + jnp.tanh(c * (x + _scalar(0.044715, x.dtype) * x * x * x)))
    else:
        y = 0.5 * x * (1.0 + lax.erf(x * _scalar(1.0 / math.sqrt(2.0), x.dtype)))
    return [y.astype(ctx.out_dtype(op))]


def _int_div(x: Any, y: Any) -> Any:
    import jax.numpy as jnp
    from jax import lax

    # lax.div truncates toward zero on integers (C semantics), as the reference does.
    return lax.div(*jnp.broadcast_arrays(x, y))


def _rem(x: Any, y: Any) -> Any:
    import jax.numpy as jnp
    from jax import lax

    # lax.rem is C's fmod: the result takes the dividend's sign (np.fmod), for floats and ints.
    return lax.rem(*jnp.broadcast_arrays(x, y))


@functools.cache
def _binary_fns() -> dict[str, Callable[[Any, Any], Any]]:
    import jax.numpy as jnp

    return {
        "add": jnp.add,
        "sub": jnp.subtract,
        "mul": jnp.multiply,
        "div": jnp.divide,
        "pow": jnp.power,
        "max": jnp.maximum,
        "min": jnp.minimum,
        "rem": _rem,
    }


@rule("ik.add", "ik.sub", "ik.mul", "ik.div", "ik.pow", "ik.max", "ik.min", "ik.rem")
def _binary(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    name = op.name[3:]
    out = ctx.out_dtype(op)
    x, y = xs
    if out.kind in "iu":
        if name == "div":
            return [_int_div(x, y).astype(out)]
        if name == "pow":
            import jax.numpy as jnp

            return [jnp.power(x.astype(jnp.int64), y.astype(jnp.int64)).astype(out)]
    return [_binary_fns()[name](_compute(x), _compute(y)).astype(out)]


@rule("ik.eq", "ik.ne", "ik.lt", "ik.le", "ik.gt", "ik.ge")
def _compare(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    fn = {
        "eq": jnp.equal,
        "ne": jnp.not_equal,
        "lt": jnp.less,
        "le": jnp.less_equal,
        "gt": jnp.greater,
        "ge": jnp.greater_equal,
    }[op.name[3:]]
    return [fn(_compute(xs[0]), _compute(xs[1]))]


@rule("ik.and", "ik.or", "ik.xor")
def _logical(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    fn = {"and": jnp.logical_and, "or": jnp.logical_or, "xor": jnp.logical_xor}[op.name[3:]]
    return [fn(xs[0], xs[1])]


@rule("ik.not")
def _not(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    return [jnp.logical_not(xs[0])]


@rule("ik.where")
def _where(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    return [jnp.where(xs[0], xs[1], xs[2]).astype(ctx.out_dtype(op))]


@rule("ik.cast")
def _cast(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    x = xs[0]
    to: DType = ctx.attrs(op)["to"]
    if to.is_bool:
        return [x != _scalar(0, x.dtype)]
    if to.is_float8 and ctx.attrs(op).get("saturate", False):
        x = _saturate_for_float8(x, to)
    # XLA's float -> int convert rounds toward zero, the reference's np.trunc; a convert to float8
    # rounds to nearest even with IEEE overflow (inf on f8E5M2, NaN on the others), as ml_dtypes.
    return [lax.convert_element_type(x, jax_dtype(to))]


def _saturate_for_float8(x: Any, to: DType) -> Any:
    """ONNX Cast saturate=1: clamp to the float8 type's largest finite value (infinities too) before
    converting, in f32 (f64 for f64 and integer sources), where the clamp bound is exact."""
    import jax.numpy as jnp
    import ml_dtypes

    src = np.dtype(x.dtype)
    wide = jnp.float64 if src == np.float64 or src.kind in "iub" else jnp.float32
    y = x.astype(wide)
    big = float(ml_dtypes.finfo(to.np).max)
    return jnp.clip(y, _scalar(-big, wide), _scalar(big, wide))


@rule("ik.bitcast")
def _bitcast(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    # XLA BitcastConvertType has the IR op's shape rule (a trailing dim for a narrower type).
    return [lax.bitcast_convert_type(xs[0], jax_dtype(ctx.attrs(op)["dtype"]))]


@rule("ik.dropout")
def _dropout(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    return [xs[0]]


# --------------------------------------------------------------------------------------------
# Reductions, softmax, normalisations
# --------------------------------------------------------------------------------------------


@rule("ik.reduce_sum", "ik.reduce_mean", "ik.reduce_max", "ik.reduce_min", "ik.reduce_prod")
def _reduce(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    a = ctx.attrs(op)
    x = _compute(xs[0])
    fns: dict[str, Callable[..., Any]] = {
        "sum": jnp.sum,
        "mean": jnp.mean,
        "max": jnp.max,
        "min": jnp.min,
        "prod": jnp.prod,
    }
    fn = fns[op.name[len("ik.reduce_") :]]
    axes = _axes(a, x.ndim)
    kw: dict[str, Any] = {}
    if op.name in ("ik.reduce_sum", "ik.reduce_prod") and np.dtype(x.dtype).kind in "iu":
        kw["dtype"] = x.dtype  # jnp widens small ints; the reference wraps in the input type
    return [fn(x, axis=axes, keepdims=a.get("keepdims", False), **kw).astype(ctx.out_dtype(op))]


@rule("ik.argmax", "ik.argmin")
def _argmax(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    """First index of the extreme (NaN counts as the extreme, as NumPy); the last with
    ``select_last_index`` (the first of the reversed axis)."""
    import jax.numpy as jnp
    from jax import lax

    a = ctx.attrs(op)
    x = _compute(xs[0])
    ax = normalize_axis(a["axis"], x.ndim)
    keep = a.get("keepdims", False)
    fn = jnp.argmax if op.name == "ik.argmax" else jnp.argmin
    if a.get("select_last_index", False):
        r = fn(lax.rev(x, (ax,)), axis=ax, keepdims=keep)
        r = (x.shape[ax] - 1) - r
    else:
        r = fn(x, axis=ax, keepdims=keep)
    return [r.astype(jnp.int64)]


def _finite_max(x: Any, axis: int) -> Any:
    """Row max with non-finite maxima replaced by 0, as the reference's attention does (a fully
    masked row is zeros)."""
    import jax.numpy as jnp

    m = jnp.max(x, axis=axis, keepdims=True)
    return jnp.where(jnp.isfinite(m), m, _scalar(0, m.dtype))


def _exp_keeping_nan(z: Any) -> Any:
    """``exp(z)`` with NaN kept NaN: XLA:CPU (jax 0.10) compiles the exp of a softmax row
    (max, subtract, exp, sum, scale) so that a NaN element comes out finite, which hides the
    NaN from the row; exp never sees a NaN here."""
    import jax.numpy as jnp

    nan = jnp.isnan(z)
    return jnp.where(nan, z, jnp.exp(jnp.where(nan, _scalar(0, z.dtype), z)))


@rule("ik.softmax")
def _softmax(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    x = _compute(xs[0])
    ax = normalize_axis(ctx.attrs(op).get("axis", -1), x.ndim)
    # the plain row max, as the op's definition: a row holding +Inf is all NaN (Inf - Inf)
    e = _exp_keeping_nan(x - jnp.max(x, axis=ax, keepdims=True))
    return [(e / jnp.sum(e, axis=ax, keepdims=True)).astype(ctx.out_dtype(op))]


@rule("ik.log_softmax")
def _log_softmax(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    x = _compute(xs[0])
    ax = normalize_axis(ctx.attrs(op).get("axis", -1), x.ndim)
    z = x - jnp.max(x, axis=ax, keepdims=True)
    return [(z - jnp.log(jnp.sum(_exp_keeping_nan(z), axis=ax, keepdims=True))).astype(ctx.out_dtype(op))]


def _by_name(op: Op, xs: list[Any]) -> dict[str, Any]:
    """Present operands keyed by their registry names (optional ones may be missing)."""
    names = [k for k, v in named_operands(op).items() if v is not None]
    return dict(zip(names, xs))


@rule("ik.layer_norm")
def _layer_norm(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp
    from jax import lax

    a = ctx.attrs(op)
    n = _by_name(op, xs)
    x = _compute(n["x"])
    axes = tuple(range(normalize_axis(a.get("axis", -1), x.ndim), x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    xc = x - mean
    var = jnp.mean(xc * xc, axis=axes, keepdims=True)
    y = xc * lax.rsqrt(var + _scalar(a.get("eps", 1e-5), x.dtype))
    if "weight" in n:
        y = y * _compute(n["weight"])
    if "bias" in n:
        y = y + _compute(n["bias"])
    return [y.astype(ctx.out_dtype(op))]


@rule("ik.rms_norm")
def _rms_norm(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp
    from jax import lax

    a = ctx.attrs(op)
    n = _by_name(op, xs)
    x = _compute(n["x"])
    axes = tuple(range(normalize_axis(a.get("axis", -1), x.ndim), x.ndim))
    y = x * lax.rsqrt(
        jnp.mean(x * x, axis=axes, keepdims=True) + _scalar(a.get("eps", 1e-6), x.dtype)
    )
    if "weight" in n:
        y = y * _compute(n["weight"])
    return [y.astype(ctx.out_dtype(op))]


# --------------------------------------------------------------------------------------------
# Contractions
# --------------------------------------------------------------------------------------------


def _dot_types(x: Any) -> tuple[Any, Any]:
    """(operand dtype, preferred element type) of a dot on ``x``'s dtype, as the reference
    accumulates: halves in f32, f32 in f32, f64 in f64, ints in i64 (i8/i32 wrap the same)."""
    dt = np.dtype(x.dtype)
    if dt.kind in "iu":
        # i32 accumulation wraps to the same low bits as the reference's i64 then astype.
        if dt.itemsize == 8:
            return dt, dt
        return dt, np.dtype(np.uint32) if dt.kind == "u" else np.dtype(np.int32)
    return dt, _acc_dtype(dt)


@rule("ik.matmul")
def _matmul(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    x, y = xs
    out = ctx.out_dtype(op)
    tile = op.attrs.get("tile")
    if ctx.options.pallas and tile is not None:
        r = _pallas_matmul(ctx, op, x, y, tuple(tile))
        if r is not None:
            return [r.astype(out)]
    _, pref = _dot_types(x)
    r = jnp.matmul(x, y, precision=ctx.precision(), preferred_element_type=pref)
    return [r.astype(out)]


def _pallas_matmul(ctx: RuleContext, op: Op, x: Any, y: Any, tile: tuple[int, ...]) -> Any | None:
    """``x @ y`` through the Pallas blocked kernel, or None (with a note) where it does not fit."""
    import jax
    import jax.numpy as jnp
    from irkit.targets.xla_pallas import check_blocks, pallas_matmul

    oid = ctx.ids.get(id(op), op.name)

    def keep_dot(why: str) -> None:
        ctx.notes.append(f"{oid} at {op.loc.short()}: tile {list(tile)} kept the plain dot: {why}")

    if len(tile) != 3:
        keep_dot("tile needs three entries [tm, tn, tk]")
        return None
    if np.dtype(x.dtype).kind != "f" and not _is_half(x):
        keep_dot(f"{np.dtype(x.dtype)} operands (the kernel is for floats)")
        return None
    tm, tn, tk = tile
    interpret = ctx.options.platform == "cpu"
    if not interpret and not ctx.options.platform.startswith("tpu"):
        keep_dot(f"Pallas TPU kernels do not run on {ctx.options.platform}")
        return None
    sublane = 16 if np.dtype(x.dtype).itemsize == 2 else 8
    k = x.shape[-1]
    n = y.shape[-1]
    if y.ndim == 2:
        # [..., M, K] @ [K, N]: the leading dims are rows of one GEMM.
        lead = x.shape[:-1]
        m = int(np.prod(lead)) if lead else 1
        try:
            check_blocks(m, n, k, tm, tn, tk, sublane=sublane)
        except ValueError as e:
            keep_dot(str(e))
            return None
        r = pallas_matmul(
            x.reshape(m, k),
            y,
            bm=tm,
            bn=tn,
            bk=tk,
            interpret=interpret,
            out_dtype=_acc_dtype(x.dtype) if _is_half(x) else x.dtype,
        )
        return r.reshape(*lead, n)
    # Batched: broadcast the batch dims, then one kernel with the batch as an extra grid axis.
    batch = jnp.broadcast_shapes(x.shape[:-2], y.shape[:-2])
    m = x.shape[-2]
    try:
        check_blocks(m, n, k, tm, tn, tk, sublane=sublane)
    except ValueError as e:
        keep_dot(str(e))
        return None
    nb = int(np.prod(batch))
    xb = jnp.broadcast_to(x, (*batch, m, k)).reshape(nb, m, k)
    yb = jnp.broadcast_to(y, (*batch, k, n)).reshape(nb, k, n)
    fn = jax.vmap(
        lambda a, b: pallas_matmul(
            a,
            b,
            bm=tm,
            bn=tn,
            bk=tk,
            interpret=interpret,
            out_dtype=_acc_dtype(x.dtype) if _is_half(x) else x.dtype,
        )
    )
    return fn(xb, yb).reshape(*batch, m, n)


@rule("ik.contract")
def _contract(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    a = ctx.attrs(op)
    x, y = xs
    _, pref = _dot_types(x)
    dims = (
        (tuple(a["lhs_contract"]), tuple(a["rhs_contract"])),
        (tuple(a.get("lhs_batch", ())), tuple(a.get("rhs_batch", ()))),
    )
    r = lax.dot_general(x, y, dims, precision=ctx.precision(), preferred_element_type=pref)
    return [r.astype(ctx.out_dtype(op))]


@rule("ik.conv2d")
def _conv2d(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    a = ctx.attrs(op)
    n = _by_name(op, xs)
    x, w = n["x"], n["weight"]
    # The reference convolves in f64 for f64 and in f32 for everything else (ints included).
    acc = np.dtype(np.float64) if np.dtype(x.dtype) == np.float64 else np.dtype(np.float32)
    s = tuple(a.get("strides", (1, 1)))
    p = tuple(a.get("padding", (0, 0, 0, 0)))
    dl = tuple(a.get("dilations", (1, 1)))
    xin, win = x, w
    if np.dtype(x.dtype).kind in "iu":
        xin, win = x.astype(acc), w.astype(acc)
    r = lax.conv_general_dilated(
        xin,
        win,
        window_strides=s,
        padding=[(p[0], p[2]), (p[1], p[3])],
        rhs_dilation=dl,
        dimension_numbers=("NCHW", "OIHW", "NCHW"),
        feature_group_count=a.get("groups", 1),
        precision=ctx.precision(),
        preferred_element_type=acc,
    )
    if "bias" in n:
        r = r + n["bias"].astype(acc).reshape(1, -1, 1, 1)
    return [r.astype(ctx.out_dtype(op))]


# --------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------


@rule("ik.attention")
def _attention(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    """softmax(cap(scale·QKᵀ) + bias, masked) V with grouped K/V heads, as ``attention_reference``
    (``cap(s) = softcap·tanh(s/softcap)`` when the ``softcap`` attribute is > 0).

    Grouped heads are not repeated: Q is viewed as [B, Hk, G, Sq, D] and contracted with
    K [B, Hk, Sk, D]. A row whose keys are all masked gives zeros.
    """
    import jax.numpy as jnp

    a = ctx.attrs(op)
    n = _by_name(op, xs)
    q, k, v = n["q"], n["k"], n["v"]
    mask, bias = n.get("mask"), n.get("bias")
    if mask is not None and np.dtype(mask.dtype) != np.bool_:
        raise LoweringError(
            f"'ik.attention' at {op.loc.short()}: mask must be i1, got {mask.dtype}"
        )
    acc = _acc_dtype(q.dtype)
    b, hq, sq, d = q.shape
    hk, sk = k.shape[1], k.shape[2]
    g = hq // hk
    prec = ctx.precision()
    qg = q.astype(acc).reshape(b, hk, g, sq, d)
    s = jnp.einsum(
        "bhgqd,bhkd->bhgqk", qg, k.astype(acc), precision=prec, preferred_element_type=acc
    )
    s = s * _scalar(a["scale"], acc)
    softcap = float(a.get("softcap", 0.0) or 0.0)
    if softcap:
        s = _scalar(softcap, acc) * jnp.tanh(s / _scalar(softcap, acc))

    def grouped(t: Any) -> Any:
        """A tensor broadcastable to [B, Hq, Sq, Sk] as one broadcastable to [B, Hk, G, Sq, Sk]."""
        t = jnp.reshape(t, (1,) * (4 - t.ndim) + tuple(t.shape))
        if t.shape[1] == 1:
            return t[:, :, None]
        return t.reshape(t.shape[0], hk, g, t.shape[2], t.shape[3])

    if bias is not None:
        s = s + grouped(bias.astype(acc))
    keep = None
    if mask is not None:
        keep = grouped(mask)
    if a.get("causal", False):
        # Top-left aligned, as torch's is_causal: key j is kept for query i when j <= i.
        tri = jnp.arange(sk)[None, :] <= jnp.arange(sq)[:, None]
        keep = tri if keep is None else keep & tri
    if keep is None and bias is None:
        e = _exp_keeping_nan(s - _finite_max(s, -1))
        p = e / jnp.sum(e, axis=-1, keepdims=True)
    else:  # a bias alone may put -inf on every key of a row: that row is zeros too
        if keep is not None:
            s = jnp.where(keep, s, _scalar(-np.inf, acc))
        e = _exp_keeping_nan(s - _finite_max(s, -1))
        if keep is not None:
            e = jnp.where(keep, e, _scalar(0, acc))
        den = jnp.sum(e, axis=-1, keepdims=True)
        pos = den != 0  # a NaN sum stays NaN
        p = jnp.where(pos, e / jnp.where(pos, den, _scalar(1, acc)), _scalar(0, acc))
    o = jnp.einsum(
        "bhgqk,bhkd->bhgqd", p, v.astype(acc), precision=prec, preferred_element_type=acc
    )
    return [o.reshape(b, hq, sq, v.shape[3]).astype(ctx.out_dtype(op))]


# --------------------------------------------------------------------------------------------
# Shapes and data movement
# --------------------------------------------------------------------------------------------


@rule("ik.reshape")
def _reshape(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    return [xs[0].reshape(ctx.shape(ctx.attrs(op)["shape"]))]


@rule("ik.transpose")
def _transpose(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    return [jnp.transpose(xs[0], tuple(ctx.attrs(op)["perm"]))]


@rule("ik.broadcast")
def _broadcast(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    return [jnp.broadcast_to(xs[0], ctx.shape(ctx.attrs(op)["shape"]))]


@rule("ik.slice")
def _slice(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    a = ctx.attrs(op)
    x = xs[0]
    step = a.get("step") or (1,) * x.ndim
    return [lax.slice(x, ctx.shape(a["start"]), ctx.shape(a["limit"]), tuple(step))]


@rule("ik.concat")
def _concat(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    return [jnp.concatenate(xs, axis=normalize_axis(ctx.attrs(op)["axis"], xs[0].ndim))]


@rule("ik.split")
def _split(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    a = ctx.attrs(op)
    x = xs[0]
    ax = normalize_axis(a["axis"], x.ndim)
    outs, start = [], 0
    for s in ctx.shape(a["sizes"]):
        outs.append(lax.slice_in_dim(x, start, start + s, axis=ax))
        start += s
    return outs


@rule("ik.gather")
def _gather(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    data, idx = xs
    ax = normalize_axis(ctx.attrs(op).get("axis", 0), data.ndim)
    n = data.shape[ax]
    # Negative indices count from the end (np.take); an index out of range, which the
    # reference rejects, reads NaN / the type's extreme (mode="fill"), never a clamped neighbour.
    return [jnp.take(data, _wrap(idx, n), axis=ax, mode="fill")]


@rule("ik.iota")
def _iota(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    t = ctx.out_type(op)
    shape = ctx.shape(t.shape)
    ax = normalize_axis(ctx.attrs(op).get("axis", 0), len(shape))
    return [lax.broadcasted_iota(jax_dtype(t.dtype), shape, ax)]


@rule("ik.constant")
def _constant(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    value: Dense = op.attrs["value"]
    k = ctx.weights.get(id(op))
    if k is not None:
        return [ctx.weight_args[k]]
    dt = jax_dtype(value.dtype)
    if value.is_splat:
        return [jnp.full(value.shape, value.splat_value(), dtype=dt)]
    return [jnp.asarray(np.asarray(value.array), dtype=dt)]


@rule("ik.dim_value")
def _dim_value(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    a = ctx.attrs(op)
    return [_scalar(ctx.dim(a["dim"][0]), ctx.out_dtype(op))]


@rule("ik.pad")
def _pad(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    a = ctx.attrs(op)
    x = xs[0]
    r = x.ndim
    p = a["pads"]
    # np.pad casts the fill value to the array's type (0.5 pads an int tensor with 0).
    fill = np.asarray(a.get("value", 0.0)).astype(np.dtype(x.dtype))
    return [lax.pad(x, _scalar(fill, x.dtype), [(p[i], p[i + r], 0) for i in range(r)])]


@rule("ik.fused")
def _fused(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    return ctx.run_graph(op.regions[0], xs)


# --------------------------------------------------------------------------------------------
# Coverage ops (issue 14): math, bits, scans, indexing, sorting, windows, N-d convolution
# --------------------------------------------------------------------------------------------


@functools.cache
def _math_fns() -> dict[str, Callable[[Any], Any]]:
    import jax.numpy as jnp
    from jax import lax

    return {
        "tan": jnp.tan,
        "asin": jnp.arcsin,
        "acos": jnp.arccos,
        "atan": jnp.arctan,
        "sinh": jnp.sinh,
        "cosh": jnp.cosh,
        "asinh": jnp.arcsinh,
        "acosh": jnp.arccosh,
        "atanh": jnp.arctanh,
        "log1p": jnp.log1p,
        "expm1": jnp.expm1,
        "round": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
        "trunc": jnp.trunc,
        "erfinv": lax.erf_inv,
        "lgamma": lax.lgamma,  # log |Gamma(x)|, as scipy's gammaln
        "digamma": lax.digamma,
    }


@rule(*(f"ik.{n}" for n in ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh",
                            "log1p", "expm1", "round", "trunc", "erfinv", "lgamma", "digamma")))
def _math(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    x = _compute(xs[0])
    y = _math_fns()[op.name[3:]](x)
    if op.name == "ik.lgamma":
        y = jnp.where(x == _scalar(-np.inf, x.dtype), x, y)  # scipy's gammaln(-inf) is -inf; XLA's is +inf
    if op.name == "ik.digamma":
        # XLA gives NaN at ±0; scipy's psi (the reference) gives -inf at +0 and +inf at -0.
        y = jnp.where(x == _scalar(0, x.dtype), -jnp.copysign(_scalar(np.inf, x.dtype), x), y)
    return [y.astype(ctx.out_dtype(op))]


@rule("ik.isnan", "ik.isinf", "ik.isfinite")
def _classify(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    fn = {"ik.isnan": jnp.isnan, "ik.isinf": jnp.isinf, "ik.isfinite": jnp.isfinite}[op.name]
    return [fn(xs[0])]


@rule("ik.bitwise_not", "ik.popcount", "ik.clz")
def _bits_unary(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    fn = {"ik.bitwise_not": lax.bitwise_not, "ik.popcount": lax.population_count, "ik.clz": lax.clz}[op.name]
    return [fn(xs[0])]


def _signed_twin(dt: Any) -> Any:
    return np.dtype(f"i{np.dtype(dt).itemsize}")


@rule("ik.bitwise_and", "ik.bitwise_or", "ik.bitwise_xor", "ik.shift_left", "ik.shift_right_logical",
      "ik.shift_right_arithmetic")
def _bits_binary(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    """XLA's own bit ops; their shift semantics are the reference's (amount read as unsigned,
    an amount >= the width gives 0 or the sign fill)."""
    import jax.numpy as jnp
    from jax import lax

    x, y = jnp.broadcast_arrays(*xs)
    name = op.name[3:]
    if name == "shift_right_arithmetic" and np.dtype(x.dtype).kind == "u":
        # An unsigned value shifts arithmetically as its two's-complement twin (the reference's view).
        st = _signed_twin(x.dtype)
        r = lax.shift_right_arithmetic(lax.bitcast_convert_type(x, st), lax.bitcast_convert_type(y, st))
        return [lax.bitcast_convert_type(r, x.dtype)]
    fn = {
        "bitwise_and": lax.bitwise_and,
        "bitwise_or": lax.bitwise_or,
        "bitwise_xor": lax.bitwise_xor,
        "shift_left": lax.shift_left,
        "shift_right_logical": lax.shift_right_logical,
        "shift_right_arithmetic": lax.shift_right_arithmetic,
    }[name]
    return [fn(x, y)]


@rule("ik.atan2")
def _atan2(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    return [jnp.arctan2(_compute(xs[0]), _compute(xs[1])).astype(ctx.out_dtype(op))]


@rule("ik.nextafter")
def _nextafter(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp
    from jax import lax

    # The step is the declared type's (no trip through f32 for half types).
    return [lax.nextafter(*jnp.broadcast_arrays(xs[0], xs[1]))]


@rule("ik.mod", "ik.floor_div")
def _floored(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    """NumPy's floored mod / floor_divide (jnp's follow npy_divmod); an integer division by zero
    gives 0, as the reference (XLA's own answer would be -1 or x)."""
    import jax.numpy as jnp

    out = ctx.out_dtype(op)
    x, y = jnp.broadcast_arrays(_compute(xs[0]), _compute(xs[1]))
    fn = jnp.remainder if op.name == "ik.mod" else jnp.floor_divide
    if out.kind in "iu":
        zero = y == _scalar(0, y.dtype)
        r = fn(x, jnp.where(zero, _scalar(1, y.dtype), y))
        return [jnp.where(zero, _scalar(0, out), r.astype(out))]
    r = fn(x, y)
    if op.name == "ik.floor_div":
        r = jnp.where(y == _scalar(0, y.dtype), x / y, r)  # x // 0.0 is x / 0.0 in NumPy
    return [r.astype(out)]


# -- scans ----------------------------------------------------------------------------------------


def _identity(kind: str, dt: Any) -> Any:
    """What an exclusive scan starts from and window padding holds (the reference's scan_identity)."""
    dt = np.dtype(dt)
    if kind == "sum":
        return 0
    if kind == "prod":
        return 1
    if dt.kind == "f" or dt in _HALF:
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dt)
    return info.min if kind == "max" else info.max


@rule("ik.cumsum", "ik.cumprod", "ik.cummax", "ik.cummin")
def _scan(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp
    from jax import lax

    a = ctx.attrs(op)
    x = _compute(xs[0])
    ax = normalize_axis(a["axis"], x.ndim)
    rev = bool(a.get("reverse", False))
    kind = op.name[len("ik.cum") :]
    fn = {"sum": lax.cumsum, "prod": lax.cumprod, "max": lax.cummax, "min": lax.cummin}[kind]
    y = fn(x, axis=ax, reverse=rev)
    n = x.shape[ax]
    if a.get("exclusive", False) and n:
        # Shift one place in scan order, the identity entering first.
        ident = jnp.full_like(lax.slice_in_dim(y, 0, 1, axis=ax), _identity(kind, x.dtype))
        if rev:
            y = jnp.concatenate([lax.slice_in_dim(y, 1, n, axis=ax), ident], axis=ax)
        else:
            y = jnp.concatenate([ident, lax.slice_in_dim(y, 0, n - 1, axis=ax)], axis=ax)
    return [y.astype(ctx.out_dtype(op))]


# -- indexing ---------------------------------------------------------------------------------------


def _wrap(idx: Any, n: int) -> Any:
    """Negative indices count from the end (as the reference), as i64; an index still outside
    [0, n) becomes n, out of range for the gather's fill or the scatter's drop (JAX would wrap a
    negative one again)."""
    import jax.numpy as jnp

    idx = idx.astype(jnp.int64)
    idx = jnp.where(idx < 0, idx + n, idx)
    return jnp.where((idx < 0) | (idx >= n), n, idx)


def _elements_targets(data_shape: Sequence[int], idx: Any, ax: int) -> Any:
    """Row-major flat positions in ``data_shape`` addressed by an ``*_elements`` index array."""
    import jax.numpy as jnp
    from jax import lax

    along = _wrap(idx, data_shape[ax])
    flat = jnp.zeros(idx.shape, jnp.int64)
    for i, d in enumerate(data_shape):
        coord = along if i == ax else lax.broadcasted_iota(jnp.int64, idx.shape, i)
        flat = flat * d + coord
    flat = jnp.where(along == data_shape[ax], math.prod(data_shape), flat)  # out of range stays out of range
    return flat.reshape(-1)


def _scatter_rows(rows: Any, target: Any, upd: Any, reduction: str) -> Any:
    """``rows[target[i]] (reduction)= upd[i]`` with NumPy's order: for "none" the last i wins.

    XLA applies duplicate scatter indices in no set order, so for "none" each position keeps
    only its last update: a max-scatter of the update numbers picks the winner, and the losers
    are sent out of range (dropped)."""
    import jax.numpy as jnp

    n = rows.shape[0]
    if reduction == "none":
        k = target.shape[0]
        num = jnp.arange(k, dtype=jnp.int64)
        if k * max(k.bit_length(), 1) < n:
            # Few updates into many rows (a KV-cache write: B*H*D updates into B*H*T*D
            # elements): find each position's last update by a stable sort of the k targets,
            # not through an n-long table of update numbers, which cost as much as the cache.
            order = jnp.argsort(target, stable=True)
            st = target[order]
            last = jnp.concatenate([st[1:] != st[:-1], jnp.ones((1,), jnp.bool_)])
            keep = jnp.zeros((k,), jnp.bool_).at[order].set(last)
            return rows.at[jnp.where(keep, target, n)].set(upd, mode="drop")
        winner = jnp.full((n,), -1, jnp.int64).at[target].max(num, mode="drop")
        keep = winner[jnp.clip(target, 0, max(n - 1, 0))] == num
        return rows.at[jnp.where(keep, target, n)].set(upd, mode="drop")
    at = rows.at[target]
    fn = {"add": at.add, "mul": at.multiply, "max": at.max, "min": at.min}[reduction]
    return fn(upd, mode="drop")


@rule("ik.gather_elements")
def _gather_elements(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    data, idx = xs
    ax = normalize_axis(ctx.attrs(op)["axis"], data.ndim)
    target = _elements_targets(data.shape, idx, ax)
    # mode="fill": an out-of-range index (an error in the reference) reads NaN / the type's extreme.
    return [data.reshape(-1).at[target].get(mode="fill").reshape(idx.shape)]


@rule("ik.scatter_elements")
def _scatter_elements(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    a = ctx.attrs(op)
    data, idx, upd = xs
    ax = normalize_axis(a["axis"], data.ndim)
    out = ctx.out_dtype(op)
    work = _compute(data)
    if np.dtype(work.dtype) == np.bool_:
        work = work.astype(jnp.uint8)
    target = _elements_targets(data.shape, idx, ax)
    r = _scatter_rows(work.reshape(-1), target, upd.reshape(-1).astype(work.dtype), a.get("reduction", "none"))
    return [r.reshape(data.shape).astype(out)]


def _nd_targets(idx: Any, dims: Sequence[int]) -> Any:
    """Row-major positions in ``dims`` of the index tuples in ``idx`` ([..., k]), flattened."""
    import jax.numpy as jnp

    k = idx.shape[-1]
    rows = idx.reshape(-1, k)
    flat = jnp.zeros(rows.shape[0], jnp.int64)
    bad = jnp.zeros(rows.shape[0], jnp.bool_)
    for j in range(k):
        col = _wrap(rows[:, j], dims[j])
        bad = bad | (col == dims[j])
        flat = flat * dims[j] + col
    return jnp.where(bad, math.prod(dims), flat)  # out of range stays out of range


@rule("ik.gather_nd")
def _gather_nd(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    data, idx = xs
    b = int(ctx.attrs(op).get("batch_dims", 0))
    k = idx.shape[-1]
    nb = math.prod(data.shape[:b])
    inner = data.shape[b:]
    m = math.prod(idx.shape[b:-1])
    flat = data.reshape((nb, math.prod(inner[:k])) + tuple(inner[k:]))
    tgt = _nd_targets(idx.reshape((nb * m, k)), inner[:k]).reshape(nb, m)
    out = flat[jnp.arange(nb)[:, None], tgt]
    return [out.reshape(ctx.shape(ctx.out_type(op).shape))]


@rule("ik.scatter_nd")
def _scatter_nd(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    import jax.numpy as jnp

    a = ctx.attrs(op)
    data, idx, upd = xs
    k = idx.shape[-1]
    work = _compute(data)
    if np.dtype(work.dtype) == np.bool_:
        work = work.astype(jnp.uint8)
    rows = work.reshape((math.prod(data.shape[:k]),) + tuple(data.shape[k:]))
    target = _nd_targets(idx, data.shape[:k])
    u = upd.reshape((target.shape[0],) + tuple(data.shape[k:])).astype(work.dtype)
    r = _scatter_rows(rows, target, u, a.get("reduction", "none"))
    return [r.reshape(data.shape).astype(ctx.out_dtype(op))]


def _starts(starts: Any, dims: Sequence[int], sizes: Sequence[int]) -> list[Any]:
    """Scalar starts clamped to [0, dim - size] here: XLA would clamp too, but JAX's dynamic_slice
    first wraps negative starts Python-style, which the reference (XLA's rule) does not."""
    import jax.numpy as jnp

    s = starts.astype(jnp.int64)  # the reference reads them as int64
    return [jnp.clip(s[i], 0, d - n) for i, (d, n) in enumerate(zip(dims, sizes))]


@rule("ik.dynamic_slice")
def _dynamic_slice(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    x, starts = xs
    sizes = tuple(ctx.attrs(op)["sizes"])
    return [lax.dynamic_slice(x, _starts(starts, x.shape, sizes), sizes)]


@rule("ik.dynamic_update_slice")
def _dynamic_update_slice(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    x, upd, starts = xs
    return [lax.dynamic_update_slice(x, upd, _starts(starts, x.shape, upd.shape))]


@rule("ik.reverse")
def _reverse(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    x = xs[0]
    axes = tuple(sorted({normalize_axis(v, x.ndim) for v in ctx.attrs(op)["axes"]}))
    return [lax.rev(x, axes)]


# -- sorting ----------------------------------------------------------------------------------------


def _sort_order(x: Any, ax: int, descending: bool) -> Any:
    """The reference's ``sort_order``: a stable permutation, NaN the largest key, -0 equal to 0.

    XLA's float comparator is a total order (-NaN < -inf ... < -0 < 0 ... < inf < NaN), so the keys
    are canonicalised first: every NaN positive, -0 as 0."""
    import jax.numpy as jnp
    from jax import lax

    iota = lax.broadcasted_iota(jnp.int64, x.shape, ax)
    dt = np.dtype(x.dtype)
    if dt == np.bool_:
        x = x.astype(jnp.uint8)
        dt = np.dtype(np.uint8)
    if dt.kind == "f" or dt in _HALF:
        nan = jnp.isnan(x)
        key = jnp.where(x == _scalar(0, x.dtype), _scalar(0, x.dtype), x)
        if not descending:
            key = jnp.where(nan, _scalar(np.inf, x.dtype), key)
            keys = [nan.astype(jnp.uint8), key]  # NaN last, in index order
        else:
            keys = [(~nan).astype(jnp.uint8), jnp.where(nan, _scalar(0, x.dtype), -key)]
    else:
        keys = [lax.bitwise_not(x) if descending else x]  # ~x reverses integer order without overflow
    out = lax.sort((*keys, iota), dimension=ax, is_stable=True, num_keys=len(keys))
    return out[-1]


@rule("ik.sort", "ik.topk")
def _sort(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    """Sort as the reference does; top-k is the first k of that order (ties to the lower index)."""
    import jax.numpy as jnp
    from jax import lax

    a = ctx.attrs(op)
    x = xs[0]
    ax = normalize_axis(a.get("axis", -1), x.ndim)
    desc = bool(a.get("descending", False)) if op.name == "ik.sort" else bool(a.get("largest", True))
    order = _sort_order(x, ax, desc)
    if op.name == "ik.topk":
        order = lax.slice_in_dim(order, 0, int(a["k"]), axis=ax)
    return [jnp.take_along_axis(x, order, axis=ax), order]


# -- windows and convolution --------------------------------------------------------------------------


@rule("ik.reduce_window")
def _reduce_window(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    from jax import lax

    from irkit.ir.ops_window import window_attrs

    a = ctx.attrs(op)
    x = _compute(xs[0])
    r = x.ndim
    w, s, p, dl = window_attrs(a, r)
    kind = a["kind"]
    comb = {"sum": lax.add, "max": lax.max, "min": lax.min}[kind]
    init = _scalar(_identity(kind, x.dtype), x.dtype)
    y = lax.reduce_window(x, init, comb, w, s, [(p[i], p[i + r]) for i in range(r)], window_dilation=dl)
    return [y.astype(ctx.out_dtype(op))]


_CONV_LAYOUTS = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"), 3: ("NCDHW", "OIDHW", "NCDHW")}


@rule("ik.conv")
def _conv(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    """``conv_general_dilated`` with input (lhs) dilation; negative padding crops, as in XLA.
    Accumulates as the reference: f64 for f64, f32 for other floats, i64 for integers."""
    from jax import lax

    from irkit.ir.ops_window import conv_attrs

    a = ctx.attrs(op)
    n = _by_name(op, xs)
    x, w = n["x"], n["weight"]
    ns = x.ndim - 2
    s, p, dl, ld, g = conv_attrs(a, ns)
    dt = np.dtype(x.dtype)
    acc = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32) if (dt.kind == "f" or dt in _HALF) \
        else np.dtype(np.int64)
    xin, win = (x, w) if dt.kind == "f" else (x.astype(acc), w.astype(acc))
    pads = [(p[i], p[i + ns]) for i in range(ns)]
    if any(v < 0 for v in p):
        # XLA:CPU reads out of bounds for some negative conv paddings (jax 0.10.2: garbage values), so
        # dilate, pad and crop the input with one lax.pad (interior = lhs_dilation - 1) instead.
        xin = lax.pad(xin, _scalar(0, xin.dtype), [(0, 0, 0), (0, 0, 0)] + [(lo, hi, f - 1) for (lo, hi), f in
                                                                          zip(pads, ld)])
        pads, ld = [(0, 0)] * ns, (1,) * ns
    r = lax.conv_general_dilated(
        xin,
        win,
        window_strides=s,
        padding=pads,
        lhs_dilation=ld,
        rhs_dilation=dl,
        dimension_numbers=_CONV_LAYOUTS[ns],
        feature_group_count=g,
        precision=ctx.precision(),
        preferred_element_type=acc,
    )
    if "bias" in n:
        r = r + n["bias"].astype(acc).reshape((1, -1) + (1,) * ns)
    return [r.astype(ctx.out_dtype(op))]


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def _lift_weights(fn: Function, limit: int) -> tuple[dict[int, int], list[np.ndarray], list[str]]:
    """Which constants become parameters: id(op) -> parameter index; equal values share one."""
    where: dict[int, int] = {}
    values: list[np.ndarray] = []
    names: list[str] = []
    seen: dict[bytes, int] = {}
    for op in fn.walk():
        if op.name != "ik.constant":
            continue
        d: Dense = op.attrs["value"]
        if d.is_splat or d.size <= limit:
            continue
        key = d.digest()
        if key not in seen:
            seen[key] = len(values)
            values.append(np.ascontiguousarray(d.array))
            names.append(d.resource or f"const{len(values) - 1}")
        where[id(op)] = seen[key]
    return where, values, names


def lower_to_jax(
    module: Module | Function, bindings: Mapping[str, int], options: LowerOptions | None = None
) -> LoweredFunction:
    """The entry function of ``module`` at dim values ``bindings`` as a JAX-traceable function.

    ``bindings`` must give every symbol of the argument types (see
    :func:`irkit.interp.default_bindings`). Tracing happens when the returned function is
    called (or lowered by ``jax.jit``), which must happen under ``jax.enable_x64(True)`` for
    the IR's 64-bit types to stay 64-bit; errors name the op that failed.
    """
    import jax

    opts = options or LowerOptions()
    fn = module if isinstance(module, Function) else module.entry
    m = module if isinstance(module, Module) else Module([module])
    ids = op_ids(m)
    ops_by_id = {ids[id(op)]: op for op in fn.walk()}
    missing = sorted(
        {
            op.name
            for op in fn.walk()
            if op.name not in RULES and op.name != "func.return" and op.name != "ik.yield"
        }
    )
    if missing:
        raise LoweringError(
            f"no XLA lowering for {', '.join(missing)}; add rules to XLA_RULES in "
            "irkit/targets/xla_lower.py"
        )
    b = dict(bindings)
    try:
        in_specs = [
            jax.ShapeDtypeStruct(a.type.concrete_shape(b), jax_dtype(a.type.dtype)) for a in fn.args
        ]
    except KeyError as e:
        raise LoweringError(
            f"@{fn.name}: symbol {e.args[0]} has no value; pass it in bindings"
        ) from None
    where, values, names = _lift_weights(fn, opts.inline_limit)
    w_specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in values]
    notes: list[str] = []
    n_in = len(in_specs)

    def irkit_fn(*args: Any) -> Any:
        notes.clear()
        ctx = RuleContext(b, opts, ids, where, args[n_in:], notes)
        outs = ctx.run_graph(fn.body, list(args[:n_in]))
        return tuple(outs)

    irkit_fn.__name__ = irkit_fn.__qualname__ = fn.name
    weight_ops: list[list[str]] = [[] for _ in values]
    for op in fn.walk():
        if id(op) in where:
            weight_ops[where[id(op)]].append(ids[id(op)])
    return LoweredFunction(
        irkit_fn, in_specs, w_specs, values, names, b, ids, ops_by_id, weight_ops, notes
    )


# --------------------------------------------------------------------------------------------
# KV-cache attention (irkit/ir/ops_cache.py)
# --------------------------------------------------------------------------------------------


@rule("ik.cache_attention")
def _cache_attention(ctx: RuleContext, op: Op, xs: list[Any]) -> list[Any]:
    """The cache written with ``dynamic_update_slice`` at the clamped position, then masked attention over
    the updated cache (the prefix keep-mask).  With the cache arguments donated (aliases), XLA updates
    the cache buffers in place; the attention reads the whole cache with the prefix masked."""
    from irkit.ir.ops_cache import decompose

    return ctx.run_graph(decompose(op, ctx.bindings), xs)
