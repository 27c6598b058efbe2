"""ATen -> irkit converters for the torch.export frontend.

Design note.  One table, :data:`CONVERTERS`, maps an ATen overload
(``aten.add.Tensor``) or a whole overload packet (``aten.add``) to a function
``fn(cx, a) -> result``: ``a`` holds the op's arguments by schema name with
defaults filled in (FX nodes already replaced by IR values, dims or Python
values) and ``cx`` is the :class:`~irkit.frontends.torch_export.ConvertContext` with the
builder and the node's torch metadata.  A converter returns a Value, a tuple
of them (multi-output ops), or raises :class:`Unsupported` with a reason.

Dtypes follow torch exactly: arithmetic computes in the node's result dtype
(read from its metadata), comparisons in the promoted dtype of their operands
(``torch.result_type``), and Python scalars take the tensor's dtype.  Both
torch's training IR (``linear``, ``layer_norm``, ``scaled_dot_product_attention``,
``dropout``...) and core ATen after ``run_decompositions()`` (``addmm``,
``native_layer_norm``, ``_softmax``, ``_to_copy``...) are covered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from irkit.frontends.common import ConverterTable
from irkit.frontends.torch_cx import (
    ConvertContext,
    LazyResult,
    Unsupported,
    ir_dtype_to_torch,
    lazy,
    result_dtype,
    torch_dtype_to_ir,
)
from irkit.ir.core import Value
from irkit.ir.types import Dim, DType, SymDim, dim_add, dim_mul, dim_prod, normalize_axis

Converter = Callable[[ConvertContext, dict], Any]


def aten_key(name: str) -> str:
    """The table key of an ATen overload or packet name: ``add.Tensor`` -> ``aten.add.Tensor``
    (names of the other namespaces, ``prims.``, ``operator.``..., are kept as they are)."""
    if "." in name and name.split(".")[0] in ("aten", "prims", "operator", "torch", "higher_order",
                                              "transformers", "torch_nn"):
        return name
    return f"aten.{name}"


CONVERTERS = ConverterTable("torch.export", key=aten_key)
converter = CONVERTERS.converter
"""Register a converter under ATen overload or packet names (``add.Tensor`` -> ``aten.add.Tensor``)."""

# int64 max: what torch records for an open slice end (`x[2:]`).
_INT_MAX = 2**63 - 1


# ---------------------------------------------------------------------------
# helpers


def _axis(d: Any, rank: int) -> int:
    try:
        return normalize_axis(int(d), rank)
    except ValueError as e:
        raise Unsupported(str(e)) from None


def _axes(dims: Any, rank: int) -> tuple[int, ...]:
    """A torch ``dim`` argument (None, int or list) as sorted axes; () means all."""
    if dims is None:
        return ()
    if isinstance(dims, (int, np.integer)):
        dims = [dims]
    if len(dims) == 0:
        return ()
    return tuple(sorted({_axis(d, rank) for d in dims}))


def _dtype_arg(dt: Any) -> DType | None:
    return None if dt is None else torch_dtype_to_ir(dt)


def _float_dtype(cx: ConvertContext) -> DType:
    dt = cx.out_dtype
    if not dt.is_float:
        raise Unsupported(f"result dtype {dt} where a float was expected")
    return dt


def _opname(cx: ConvertContext) -> str:
    """The ATen name of the node being converted, without namespace or overload (``baddbmm``)."""
    return cx.node.target._schema.name.split("::")[-1].rstrip("_") if hasattr(cx.node.target, "_schema") \
        else str(cx.node.target)


def _and(cx: ConvertContext, x: Value, y: Value) -> Value:
    # `and`/`not` are Python keywords, so these ops are built by name.
    return cx.b.create("ik.and", [x, y]).results[0]


def _not(cx: ConvertContext, x: Value) -> Value:
    return cx.b.create("ik.not", [x]).results[0]


def _force(v: Any) -> Any:
    return LazyResult.force(v)


def _require(x: Any, what: str) -> Value:
    if not isinstance(x, Value):
        raise Unsupported(f"{what} must be a tensor, got {type(x).__name__}")
    return x


def _static(d: Dim, what: str) -> int:
    if not isinstance(d, int):
        raise Unsupported(f"{what} is symbolic ({d}); only static sizes are supported here")
    return d


# ---------------------------------------------------------------------------
# identity-like ops


@converter("clone", "contiguous", "alias", "detach", "lift_fresh_copy", "lift_fresh", "alias_copy",
      "detach_copy", "view_as", "reshape_as", "_conj", "resolve_conj",
      "resolve_neg", "positive", "real", "conj", "conj_physical")
def _identity(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    out = cx.out_type()
    if out.shape != x.shape:
        return cx.reshape(x, out.shape)
    return x


@converter("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")
def _dropout(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["input"], "input")
    if a.get("train"):
        # Exported in training mode: the IR is an inference IR, dropout is the identity there.
        return cx.b.dropout(x, p=float(a.get("p") or 0.0))
    return x


@converter("native_dropout")
def _native_dropout(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["input"], "input")
    out = cx.b.dropout(x, p=float(a.get("p") or 0.0)) if a.get("train") else x
    return (out, lazy(lambda: cx.splat(True, DType.bool, x.shape)))


@converter("_to_copy", "to", "type_as", "_autocast_to_reduced_precision",
      "_autocast_to_full_precision")
def _to(cx: ConvertContext, a: dict) -> Any:
    x = _require(a.get("self"), "input")
    return cx.cast(x, cx.out_dtype)


@converter("copy")
def _copy(cx: ConvertContext, a: dict) -> Any:
    src = _require(a["src"], "src")
    return cx.broadcast(cx.cast(src, cx.out_dtype), cx.out_shape)


# ---------------------------------------------------------------------------
# elementwise arithmetic


def _binary_operands(cx: ConvertContext, x: Any, y: Any, dt: DType) -> tuple[Value, Value]:
    return cx.tensor(x, dt), cx.tensor(y, dt)


def _arith(ik: str, bool_op: str | None = None) -> Converter:
    def fn(cx: ConvertContext, a: dict) -> Any:
        x, y = a["self"], a["other"]
        dt = cx.out_dtype
        if dt.is_bool:
            if bool_op is None:
                raise Unsupported(f"{ik} on booleans")
            xv, yv = cx.tensor(x, DType.bool), cx.tensor(y, DType.bool)
            return cx.b.create(f"ik.{bool_op}", [xv, yv]).results[0]
        xv, yv = _binary_operands(cx, x, y, dt)
        alpha = a.get("alpha")
        if alpha is not None and alpha != 1:
            yv = cx.b.mul(yv, cx.tensor(alpha, dt))
        return cx.b.create(f"ik.{ik}", [xv, yv]).results[0]

    return fn


converter("add")(_arith("add", "or"))
converter("sub")(_arith("sub"))
converter("mul")(_arith("mul", "and"))


@converter("rsub")
def _rsub(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x, y = _binary_operands(cx, a["self"], a["other"], dt)
    alpha = a.get("alpha")
    if alpha is not None and alpha != 1:
        x = cx.b.mul(x, cx.tensor(alpha, dt))
    return cx.b.sub(y, x)


def _trunc(cx: ConvertContext, v: Value) -> Value:
    return cx.b.trunc(v)


def _floor_div(cx: ConvertContext, x: Value, y: Value) -> Value:
    # ik.floor_div is np.floor_divide: floored for integers, and for floats the
    # fmod-based quotient torch computes too (not floor(x / y), which rounds first).
    return cx.b.floor_div(x, y)


@converter("div", "true_divide")
def _div(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    mode = a.get("rounding_mode")
    x, y = _binary_operands(cx, a["self"], a["other"], dt)
    if mode is None:
        return cx.b.div(x, y)
    if mode == "trunc":
        return cx.b.div(x, y) if dt.is_int else _trunc(cx, cx.b.div(x, y))
    if mode == "floor":
        return _floor_div(cx, x, y)
    raise Unsupported(f"rounding_mode '{mode}'")


@converter("floor_divide")
def _floor_divide(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x, y = _binary_operands(cx, a["self"], a["other"], dt)
    return _floor_div(cx, x, y)


@converter("remainder")
def _remainder(cx: ConvertContext, a: dict) -> Any:
    # Python-style modulo: the result takes the divisor's sign (ik.mod).
    dt = cx.out_dtype
    x, y = _binary_operands(cx, a["self"], a["other"], dt)
    return cx.b.mod(x, y)


@converter("fmod")
def _fmod(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x, y = _binary_operands(cx, a["self"], a["other"], dt)
    return cx.b.rem(x, y)


@converter("pow")
def _pow(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x, e = _binary_operands(cx, a["self"], a["exponent"], dt)
    return cx.b.pow(x, e)


def _max_min(ik: str) -> Converter:
    def fn(cx: ConvertContext, a: dict) -> Any:
        dt = cx.out_dtype
        x, y = _binary_operands(cx, a["self"], a["other"], dt)
        if dt.is_bool:
            return cx.b.create("ik.or" if ik == "max" else "ik.and", [x, y]).results[0]
        r = cx.b.create(f"ik.{ik}", [x, y]).results[0]
        if _opname(cx) in ("fmax", "fmin") and dt.is_float:
            # fmax/fmin ignore a NaN operand (maximum/minimum propagate it).
            r = cx.b.where(cx.b.isnan(y), x, cx.b.where(cx.b.isnan(x), y, r))
        return r

    return fn


converter("maximum", "max.other", "fmax")(_max_min("max"))
converter("minimum", "min.other", "fmin")(_max_min("min"))


@converter("atan2", "arctan2")
def _atan2(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x, y = _binary_operands(cx, a["self"], a["other"], dt)
    return cx.b.atan2(x, y)


@converter("hypot")
def _hypot(cx: ConvertContext, a: dict) -> Any:
    # sqrt(x^2 + y^2) with the larger magnitude factored out, so squares neither
    # overflow nor underflow: m * sqrt(1 + (n/m)^2), 0 where both are 0.
    dt = _float_dtype(cx)
    x, y = _binary_operands(cx, a["self"], a["other"], dt)
    ax, ay = cx.b.abs(x), cx.b.abs(y)
    m, n = cx.b.max(ax, ay), cx.b.min(ax, ay)
    zero = cx.tensor(0.0, dt)
    safe = cx.b.where(cx.b.eq(m, zero), cx.tensor(1.0, dt), m)
    q = cx.b.div(n, safe)
    r = cx.b.mul(m, cx.b.sqrt(cx.b.add(cx.tensor(1.0, dt), cx.b.mul(q, q))))
    # An infinite operand gives inf even when the other is NaN (C99 hypot).
    inf = cx.b.create("ik.or", [cx.b.isinf(x), cx.b.isinf(y)]).results[0]
    return cx.b.where(inf, cx.tensor(float("inf"), dt), r)


@converter("nextafter")
def _nextafter(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x, y = _binary_operands(cx, a["self"], a["other"], dt)
    return cx.b.nextafter(x, y)


@converter("clamp", "clip", "clamp_min", "clamp_max", "hardtanh")
def _clamp(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.tensor(a.get("self", a.get("input")), dt)
    lo = a.get("min", a.get("min_val"))
    hi = a.get("max", a.get("max_val"))
    if lo is not None:
        x = cx.b.max(x, cx.tensor(lo, dt))
    if hi is not None:
        x = cx.b.min(x, cx.tensor(hi, dt))
    return cx.broadcast(x, cx.out_shape)


# unary: aten packet -> (ik op, float only)
_UNARY = {
    "neg": ("neg", False), "abs": ("abs", False), "exp": ("exp", True), "log": ("log", True),
    "sqrt": ("sqrt", True), "rsqrt": ("rsqrt", True), "reciprocal": ("reciprocal", True),
    "tanh": ("tanh", True), "erf": ("erf", True), "sigmoid": ("sigmoid", True), "sin": ("sin", True),
    "cos": ("cos", True), "sign": ("sign", False), "relu": ("relu", False), "silu": ("silu", True),
    "tan": ("tan", True), "asin": ("asin", True), "acos": ("acos", True), "atan": ("atan", True),
    "arcsin": ("asin", True), "arccos": ("acos", True), "arctan": ("atan", True),
    "sinh": ("sinh", True), "cosh": ("cosh", True), "asinh": ("asinh", True), "acosh": ("acosh", True),
    "atanh": ("atanh", True), "arcsinh": ("asinh", True), "arccosh": ("acosh", True),
    "arctanh": ("atanh", True), "log1p": ("log1p", True), "expm1": ("expm1", True),
    "erfinv": ("erfinv", True), "lgamma": ("lgamma", True), "digamma": ("digamma", True),
    "special_expm1": ("expm1", True), "special_log1p": ("log1p", True), "special_erfinv": ("erfinv", True),
    "special_digamma": ("digamma", True), "special_psi": ("digamma", True), "special_gammaln": ("lgamma", True),
    "negative": ("neg", False), "absolute": ("abs", False),
}


def _unary(ik: str, float_only: bool) -> Converter:
    def fn(cx: ConvertContext, a: dict) -> Any:
        x = _require(a["self"], "input")
        dt = cx.out_dtype
        x = cx.cast(x, dt)
        return cx.b.create(f"ik.{ik}", [x]).results[0]

    return fn


for _name, (_ik, _fo) in _UNARY.items():
    converter(_name)(_unary(_ik, _fo))


@converter("floor", "ceil", "trunc", "fix", "round")
def _rounding(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    if x.dtype.is_int or x.dtype.is_bool:
        return x
    name = _opname(cx)
    if name == "floor":
        return cx.b.floor(x)
    if name == "ceil":
        return cx.b.ceil(x)
    if name == "round":
        d = int(a.get("decimals") or 0)
        if d == 0:
            return cx.b.round(x)
        # torch: round(x * 10^d) / 10^d (for d < 0: round(x / 10^-d) * 10^-d), half to even.
        if d > 0:
            p = cx.tensor(10.0 ** d, x.dtype)
            return cx.b.div(cx.b.round(cx.b.mul(x, p)), p)
        p = cx.tensor(10.0 ** -d, x.dtype)
        return cx.b.mul(cx.b.round(cx.b.div(x, p)), p)
    return cx.b.trunc(x)


@converter("gelu")
def _gelu(cx: ConvertContext, a: dict) -> Any:
    x = cx.cast(_require(a["self"], "input"), _float_dtype(cx))
    approx = a.get("approximate") or "none"
    return cx.b.gelu(x, approximate="tanh" if approx == "tanh" else "none")


@converter("square")
def _square(cx: ConvertContext, a: dict) -> Any:
    x = cx.cast(_require(a["self"], "input"), cx.out_dtype)
    return cx.b.mul(x, x)


@converter("log2")
def _log2(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["self"], "input"), dt)
    return cx.b.mul(cx.b.log(x), cx.tensor(1.0 / math.log(2.0), dt))


@converter("exp2")
def _exp2(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["self"], "input"), dt)
    return cx.b.exp(cx.b.mul(x, cx.tensor(math.log(2.0), dt)))


@converter("leaky_relu")
def _leaky_relu(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.cast(_require(a["self"], "input"), dt)
    slope = a.get("negative_slope", 0.01)
    zero = cx.tensor(0.0, dt)
    return cx.b.where(cx.b.gt(x, zero), x, cx.b.mul(x, cx.tensor(slope, dt)))


@converter("hardsigmoid")
def _hardsigmoid(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["self"], "input"), dt)
    y = cx.b.add(x, cx.tensor(3.0, dt))
    y = cx.b.min(cx.b.max(y, cx.tensor(0.0, dt)), cx.tensor(6.0, dt))
    return cx.b.div(y, cx.tensor(6.0, dt))


@converter("hardswish")
def _hardswish(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["self"], "input"), dt)
    y = cx.b.add(x, cx.tensor(3.0, dt))
    y = cx.b.min(cx.b.max(y, cx.tensor(0.0, dt)), cx.tensor(6.0, dt))
    return cx.b.div(cx.b.mul(x, y), cx.tensor(6.0, dt))


@converter("softplus")
def _softplus(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["self"], "input"), dt)
    beta, thr = float(a.get("beta", 1.0)), float(a.get("threshold", 20.0))
    bx = cx.b.mul(x, cx.tensor(beta, dt))
    soft = cx.b.div(cx.b.log(cx.b.add(cx.b.exp(bx), cx.tensor(1.0, dt))), cx.tensor(beta, dt))
    return cx.b.where(cx.b.gt(bx, cx.tensor(thr, dt)), x, soft)


@converter("isnan", "isinf", "isfinite", "isposinf", "isneginf")
def _isnan(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    name = _opname(cx)
    if not x.dtype.is_float:
        return cx.splat(name == "isfinite", DType.bool, x.shape)
    if name in ("isposinf", "isneginf"):
        inf = float("inf") if name == "isposinf" else float("-inf")
        return cx.b.eq(x, cx.tensor(inf, x.dtype))
    return cx.b.create(f"ik.{name}", [x]).results[0]


# ---------------------------------------------------------------------------
# comparisons and logic


def _compare(ik: str) -> Converter:
    def fn(cx: ConvertContext, a: dict) -> Any:
        x, y = a["self"], a["other"]
        dt = result_dtype(x, y)
        if dt.is_bool:
            # The IR compares numbers; booleans compare as 0/1.
            dt = DType.i8
        xv, yv = cx.tensor(x, dt), cx.tensor(y, dt)
        return cx.b.create(f"ik.{ik}", [xv, yv]).results[0]

    return fn


for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    converter(_name)(_compare(_name))
converter("greater")(_compare("gt"))
converter("less")(_compare("lt"))
converter("greater_equal")(_compare("ge"))
converter("less_equal")(_compare("le"))
converter("not_equal")(_compare("ne"))


def _as_bool(cx: ConvertContext, x: Any) -> Value:
    if isinstance(x, Value):
        if x.dtype.is_bool:
            return x
        return cx.b.ne(x, cx.tensor(0, x.dtype))
    return cx.tensor(bool(x), DType.bool)


def _logical(ik: str) -> Converter:
    def fn(cx: ConvertContext, a: dict) -> Any:
        x, y = _as_bool(cx, a["self"]), _as_bool(cx, a["other"])
        r = cx.b.create(f"ik.{ik}", [x, y]).results[0]
        return cx.cast(r, cx.out_dtype)

    return fn


converter("logical_and")(_logical("and"))
converter("logical_or")(_logical("or"))
converter("logical_xor")(_logical("xor"))


@converter("logical_not")
def _logical_not(cx: ConvertContext, a: dict) -> Any:
    return cx.cast(_not(cx, _as_bool(cx, a["self"])), cx.out_dtype)


def _bitwise(ik: str) -> Converter:
    def fn(cx: ConvertContext, a: dict) -> Any:
        dt = cx.out_dtype
        if dt == DType.bool:
            return _logical(ik)(cx, a)
        if not dt.is_int:
            raise Unsupported(f"bitwise {ik} on {dt}")
        x, y = _binary_operands(cx, a["self"], a["other"], dt)
        return cx.b.create(f"ik.bitwise_{ik}", [x, y]).results[0]

    return fn


converter("bitwise_and", "__and__")(_bitwise("and"))
converter("bitwise_or", "__or__")(_bitwise("or"))
converter("bitwise_xor", "__xor__")(_bitwise("xor"))


@converter("bitwise_not")
def _bitwise_not(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    if cx.out_dtype == DType.bool:
        return _not(cx, x)
    return cx.b.bitwise_not(x)


def _shift(left: bool) -> Converter:
    def fn(cx: ConvertContext, a: dict) -> Any:
        dt = cx.out_dtype
        if not dt.is_int:
            raise Unsupported(f"bit shift on {dt}")
        x, y = _binary_operands(cx, a["self"], a["other"], dt)
        if left:
            return cx.b.shift_left(x, y)
        return cx.b.shift_right_arithmetic(x, y) if dt.is_signed else cx.b.shift_right_logical(x, y)

    return fn


converter("bitwise_left_shift", "__lshift__")(_shift(True))
converter("bitwise_right_shift", "__rshift__")(_shift(False))


@converter("where")
def _where(cx: ConvertContext, a: dict) -> Any:
    if a.get("self") is None and a.get("other") is None:
        raise Unsupported("where(condition) with one argument is data-dependent (nonzero)")
    dt = cx.out_dtype
    c = _as_bool(cx, a["condition"])
    return cx.b.where(c, cx.tensor(a["self"], dt), cx.tensor(a["other"], dt))


@converter("masked_fill")
def _masked_fill(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.tensor(a["self"], dt)
    out = cx.b.where(_as_bool(cx, a["mask"]), cx.tensor(a["value"], dt), x)
    return cx.broadcast(out, cx.out_shape)


# ---------------------------------------------------------------------------
# reductions


def _reduce(ik: str) -> Converter:
    def fn(cx: ConvertContext, a: dict) -> Any:
        x = _require(a["self"], "input")
        dt = cx.out_dtype
        axes = _axes(a.get("dim"), x.type.rank)
        keep = bool(a.get("keepdim") or False)
        if x.type.rank == 0:
            return cx.cast(x, dt)
        if dt.is_bool:
            # max/min of booleans: reduce 0/1 integers.
            y = cx.b.create(f"ik.reduce_{ik}", [cx.cast(x, DType.i8)], {"axes": axes, "keepdims": keep}).results[0]
            return cx.cast(y, DType.bool)
        return cx.b.create(f"ik.reduce_{ik}", [cx.cast(x, dt)], {"axes": axes, "keepdims": keep}).results[0]

    return fn


converter("sum")(_reduce("sum"))
converter("mean")(_reduce("mean"))
converter("amax")(_reduce("max"))
converter("amin")(_reduce("min"))
converter("prod")(_reduce("prod"))
converter("max.default")(_reduce("max"))
converter("min.default")(_reduce("min"))


def _max_min_dim(ik: str) -> Converter:
    def fn(cx: ConvertContext, a: dict) -> Any:
        x = _require(a["self"], "input")
        ax = _axis(a["dim"], x.type.rank)
        keep = bool(a.get("keepdim") or False)
        if x.type.rank == 0:
            return (x, lazy(lambda: cx.splat(0, DType.i64, ())))
        xv = cx.cast(x, DType.i8) if x.dtype.is_bool else x
        vals = cx.b.create(f"ik.reduce_{ik}", [xv], {"axes": (ax,), "keepdims": keep}).results[0]
        vals = cx.cast(vals, x.dtype)
        idx = lazy(lambda: cx.b.create(f"ik.arg{ik}", [xv], {"axis": ax, "keepdims": keep}).results[0])
        return (vals, idx)

    return fn


converter("max.dim")(_max_min_dim("max"))
converter("min.dim")(_max_min_dim("min"))


@converter("argmax", "argmin")
def _argmax(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    ik = "ik." + _opname(cx)
    if x.dtype.is_bool:
        x = cx.cast(x, DType.i8)
    dim = a.get("dim")
    keep = bool(a.get("keepdim") or False)
    if dim is None or x.type.rank == 0:
        flat = cx.reshape(x, (dim_prod(x.shape),))
        r = cx.b.create(ik, [flat], {"axis": 0, "keepdims": False}).results[0]
        return cx.reshape(r, cx.out_shape)
    return cx.b.create(ik, [x], {"axis": _axis(dim, x.type.rank), "keepdims": keep}).results[0]


@converter("any", "all")
def _any_all(cx: ConvertContext, a: dict) -> Any:
    x = _as_bool(cx, _require(a["self"], "input"))
    if x.type.rank == 0:
        return cx.cast(x, cx.out_dtype)
    which = _opname(cx)
    dims = a.get("dim")
    axes = _axes(dims, x.type.rank)
    keep = bool(a.get("keepdim") or False)
    xi = cx.cast(x, DType.i8)
    red = "max" if which == "any" else "min"
    y = cx.b.create(f"ik.reduce_{red}", [xi], {"axes": axes, "keepdims": keep}).results[0]
    return cx.cast(y, cx.out_dtype)


def _count(cx: ConvertContext, x: Value, axes: tuple[int, ...]) -> Dim:
    ax = axes or tuple(range(x.type.rank))
    return dim_prod(x.shape[i] for i in ax)


@converter("var", "std")
def _var(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    dt = _float_dtype(cx)
    x = cx.cast(x, dt)
    axes = _axes(a.get("dim"), x.type.rank)
    keep = bool(a.get("keepdim") or False)
    corr = a.get("correction")
    if corr is None:
        unbiased = a.get("unbiased")
        corr = 1 if unbiased is None or unbiased else 0
    mean = cx.b.reduce_mean(x, axes=axes, keepdims=True)
    d = cx.b.sub(x, mean)
    var = cx.b.reduce_mean(cx.b.mul(d, d), axes=axes, keepdims=keep)
    if corr:
        n = _count(cx, x, axes)
        nt = cx.tensor(n, dt) if isinstance(n, int) else cx.cast(cx.dim_tensor(n), dt)
        var = cx.b.mul(var, cx.b.div(nt, cx.b.sub(nt, cx.tensor(float(corr), dt))))
    if _opname(cx) == "std":
        return cx.b.sqrt(var)
    return var


@converter("logsumexp")
def _logsumexp(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["self"], "input"), dt)
    if x.type.rank == 0:
        return x
    axes = _axes(a.get("dim"), x.type.rank)
    keep = bool(a.get("keepdim") or False)
    m = cx.b.reduce_max(x, axes=axes, keepdims=True)
    # A row of -inf would give -inf - -inf = NaN; shift by 0 there instead.
    finite = cx.b.lt(cx.b.abs(m), cx.tensor(float("inf"), dt))
    m = cx.b.where(finite, m, cx.tensor(0.0, dt))
    s = cx.b.reduce_sum(cx.b.exp(cx.b.sub(x, m)), axes=axes, keepdims=True)
    r = cx.b.add(cx.b.log(s), m)
    return r if keep else cx.reshape(r, cx.out_shape)


@converter("linalg_vector_norm")
def _vector_norm(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["self"], "input"), dt)
    if float(a.get("ord", 2)) != 2.0:
        raise Unsupported(f"vector norm of order {a.get('ord')}")
    axes = _axes(a.get("dim"), x.type.rank)
    s = cx.b.reduce_sum(cx.b.mul(x, x), axes=axes, keepdims=bool(a.get("keepdim") or False))
    return cx.b.sqrt(s)


def _scan(ik: str) -> Converter:
    def fn(cx: ConvertContext, a: dict) -> Any:
        x = _require(a["self"], "input")
        multi = isinstance(cx.meta, (tuple, list))
        dt = cx.out_type(0).dtype if multi else cx.out_dtype
        x = cx.cast(x, dt)
        r = x.type.rank
        if r == 0:
            return (x, lazy(lambda: cx.splat(0, DType.i64, ()))) if multi else x
        ax = _axis(a["dim"], r)
        xs = cx.cast(x, DType.i8) if dt.is_bool else x
        y = cx.b.create(f"ik.{ik}", [xs], {"axis": ax}).results[0]
        y = cx.cast(y, dt)
        if not multi:
            return y

        def indices() -> Value:
            # The index of the running max/min is the last position where x reaches it
            # (torch takes the later one on ties, and a NaN once one is seen).
            hit = cx.b.eq(xs, cx.cast(y, xs.dtype))
            if xs.dtype.is_float:
                hit = cx.b.create("ik.or", [hit, cx.b.isnan(xs)]).results[0]
            pos = cx.b.iota(shape=x.shape, axis=ax, dtype=DType.i64)
            marks = cx.b.where(hit, pos, cx.tensor(0, DType.i64))
            return cx.b.cummax(marks, axis=ax)

        return (y, lazy(indices))

    return fn


converter("cumsum")(_scan("cumsum"))
converter("cumprod")(_scan("cumprod"))
converter("cummax")(_scan("cummax"))
converter("cummin")(_scan("cummin"))


@converter("logcumsumexp")
def _logcumsumexp(cx: ConvertContext, a: dict) -> Any:
    # log(cumsum(exp(x - m))) + m with m the max along the axis (0 where it is not finite).
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["self"], "input"), dt)
    if x.type.rank == 0:
        return x
    ax = _axis(a["dim"], x.type.rank)
    m = cx.b.reduce_max(x, axes=(ax,), keepdims=True)
    m = cx.b.where(cx.b.isfinite(m), m, cx.tensor(0.0, dt))
    s = cx.b.cumsum(cx.b.exp(cx.b.sub(x, m)), axis=ax)
    return cx.b.add(cx.b.log(s), m)


# prims that torch's reference decompositions (torch._refs) leave behind
@converter("log10")
def _log10(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["self"], "input"), dt)
    return cx.b.mul(cx.b.log(x), cx.tensor(1.0 / math.log(10.0), dt))


@converter("erfc", "special_erfc")
def _erfc(cx: ConvertContext, a: dict) -> Any:
    dt = _float_dtype(cx)
    x = cx.cast(_require(a["self"], "input"), dt)
    return cx.b.sub(cx.tensor(1.0, dt), cx.b.erf(x))


@converter("prelu", "_prelu_kernel")
def _prelu(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.cast(_require(a["self"], "input"), dt)
    w = cx.cast(_require(a["weight"], "weight"), dt)
    if w.type.rank == 1 and x.type.rank >= 2 and w.shape[0] != 1:
        w = cx.reshape(w, (w.shape[0],) + (1,) * (x.type.rank - 2))  # per channel (dim 1)
    elif w.type.rank == 1 and w.shape[0] == 1:
        w = cx.reshape(w, ())
    return cx.b.where(cx.b.gt(x, cx.tensor(0.0, dt)), x, cx.b.mul(x, w))


@converter("movedim.intlist", "movedim.int", "moveaxis.intlist", "moveaxis.int")
def _movedim(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    r = x.type.rank
    src, dst = a["source"], a["destination"]
    src = [src] if isinstance(src, int) else list(src)
    dst = [dst] if isinstance(dst, int) else list(dst)
    src, dst = [_axis(d, r) for d in src], [_axis(d, r) for d in dst]
    perm: list[int | None] = [None] * r
    for s_, d_ in zip(src, dst):
        perm[d_] = s_
    rest = iter(i for i in range(r) if i not in src)
    full = tuple(p if p is not None else next(rest) for p in perm)
    return x if full == tuple(range(r)) else cx.b.transpose(x, perm=full)


@converter("prims.convert_element_type.default")
def _prims_convert(cx: ConvertContext, a: dict) -> Any:
    return cx.cast(_require(a["a"], "input"), cx.out_dtype)


@converter("prims.sum.default", "prims.var.default")
def _prims_reduce(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["inp"], "input")
    dt = cx.out_dtype
    x = cx.cast(x, dt)
    # A prim reduces exactly the dims it lists (none listed: nothing to reduce).
    axes = _axes(a.get("dims"), x.type.rank)
    if not axes:
        if _opname(cx) == "sum":
            return x
        # The variance of each single element: 0 / (1 - correction).
        return cx.splat(float("nan") if float(a.get("correction") or 0) == 1 else 0.0, dt, x.shape)
    if _opname(cx) == "sum":
        return cx.b.reduce_sum(x, axes=axes, keepdims=False)
    corr = float(a.get("correction") or 0)
    mean = cx.b.reduce_mean(x, axes=axes, keepdims=True)
    d = cx.b.sub(x, mean)
    ss = cx.b.reduce_sum(cx.b.mul(d, d), axes=axes, keepdims=False)
    n = _count(cx, x, axes)
    nt = cx.tensor(n, dt) if isinstance(n, int) else cx.cast(cx.dim_tensor(n), dt)
    return cx.b.div(ss, cx.b.sub(nt, cx.tensor(corr, dt)))


@converter("prims.broadcast_in_dim.default")
def _prims_broadcast_in_dim(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["a"], "input")
    shape = cx.out_shape
    dims = [int(d) for d in a["broadcast_dimensions"]]
    inter = [1] * len(shape)
    for i, d in enumerate(dims):
        inter[d] = x.shape[i]
    return cx.broadcast(cx.reshape(x, tuple(inter)), shape)


@converter("prims.where.default")
def _prims_where(cx: ConvertContext, a: dict) -> Any:
    return _where(cx, {"condition": a["pred"], "self": a["a"], "other": a["b"]})


@converter("prims.abs.default")
def _prims_abs(cx: ConvertContext, a: dict) -> Any:
    return cx.b.abs(_require(a["self"], "input"))


@converter("prims.neg.default")
def _prims_neg(cx: ConvertContext, a: dict) -> Any:
    return cx.b.neg(_require(a["self"], "input"))


@converter("prims.signbit.default")
def _prims_signbit(cx: ConvertContext, a: dict) -> Any:
    # The sign bit, -0.0 and negative NaNs included: copysign(1, x) < 0 without copysign;
    # 1/x is -inf for -0.0.
    x = _require(a["self"], "input")
    if not x.dtype.is_float:
        return cx.b.lt(x, cx.tensor(0, x.dtype))
    zero = cx.tensor(0.0, x.dtype)
    neg = cx.b.lt(x, zero)
    negzero = _and(cx, cx.b.eq(x, zero), cx.b.lt(cx.b.reciprocal(x), zero))
    # torch's meta of this prim says the input's dtype (the refs only use it as a condition).
    return cx.cast(cx.b.create("ik.or", [neg, negzero]).results[0], cx.out_dtype)


# ---------------------------------------------------------------------------
# softmax and normalisation


@converter("_softmax", "softmax", "_safe_softmax", "special_softmax")
def _softmax(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.cast(_require(a["self"], "input"), dt)
    ax = int(a["dim"])
    y = cx.b.softmax(x, axis=ax)
    if _opname(cx) == "_safe_softmax":
        # _safe_softmax: a row where every score is -inf gives zeros, not NaN.
        live = cx.b.ne(x, cx.tensor(float("-inf"), dt))
        anyl = cx.cast(cx.b.reduce_max(cx.cast(live, DType.i8), axes=(_axis(ax, x.type.rank),),
                                       keepdims=True), DType.bool)
        y = cx.b.where(anyl, y, cx.tensor(0.0, dt))
    return y


@converter("_log_softmax", "log_softmax")
def _log_softmax(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.cast(_require(a["self"], "input"), dt)
    return cx.b.log_softmax(x, axis=int(a["dim"]))


def _norm_axis(x: Value, normalized_shape: Sequence[Any]) -> int:
    return x.type.rank - len(normalized_shape)


@converter("layer_norm")
def _layer_norm(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["input"], "input")
    ax = _norm_axis(x, a["normalized_shape"])
    return cx.b.layer_norm(x, a.get("weight"), a.get("bias"), axis=ax, eps=float(a.get("eps", 1e-5)))


def _mean_rstd(cx: ConvertContext, x: Value, ax: int, eps: float, out_dtype: DType) -> tuple[Value, Value]:
    axes = tuple(range(ax, x.type.rank))
    xf = cx.cast(x, out_dtype)
    mean = cx.b.reduce_mean(xf, axes=axes, keepdims=True)
    d = cx.b.sub(xf, mean)
    var = cx.b.reduce_mean(cx.b.mul(d, d), axes=axes, keepdims=True)
    return mean, cx.b.rsqrt(cx.b.add(var, cx.tensor(eps, out_dtype)))


@converter("native_layer_norm")
def _native_layer_norm(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["input"], "input")
    ax = _norm_axis(x, a["normalized_shape"])
    eps = float(a.get("eps", 1e-5))
    y = cx.b.layer_norm(x, a.get("weight"), a.get("bias"), axis=ax, eps=eps)
    stats_dt = cx.out_type(1).dtype
    stats = lazy(lambda: _mean_rstd(cx, x, ax, eps, stats_dt))
    return (y, lazy(lambda: _force(stats)[0]), lazy(lambda: _force(stats)[1]))


def _rms_eps(x: Value, eps: Any) -> float:
    if eps is not None:
        return float(eps)
    # torch's default: the machine epsilon of the input's dtype.
    import torch

    return float(torch.finfo(ir_dtype_to_torch(x.dtype)).eps)


@converter("rms_norm")
def _rms_norm(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["input"], "input")
    ax = _norm_axis(x, a["normalized_shape"])
    w = a.get("weight")
    y = cx.b.rms_norm(x, w if isinstance(w, Value) and w.dtype == x.dtype else None, axis=ax,
                      eps=_rms_eps(x, a.get("eps")))
    if isinstance(w, Value) and w.dtype != x.dtype:
        dt = cx.out_dtype
        y = cx.b.mul(cx.cast(y, dt), cx.cast(w, dt))
    return cx.cast(y, cx.out_dtype)


@converter("_fused_rms_norm")
def _fused_rms_norm(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["input"], "input")
    ax = _norm_axis(x, a["normalized_shape"])
    eps = _rms_eps(x, a.get("eps"))
    w = a.get("weight")
    y = cx.b.rms_norm(x, w, axis=ax, eps=eps)

    def rstd() -> Value:
        dt = cx.out_type(1).dtype
        xf = cx.cast(x, dt)
        ms = cx.b.reduce_mean(cx.b.mul(xf, xf), axes=tuple(range(ax, x.type.rank)), keepdims=True)
        return cx.b.rsqrt(cx.b.add(ms, cx.tensor(eps, dt)))

    return (y, lazy(rstd))


@converter("group_norm", "native_group_norm")
def _group_norm(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["input"], "input")
    g = int(a["group"] if "group" in a else a["num_groups"])
    eps = float(a.get("eps", 1e-5))
    n, c = x.shape[0], x.shape[1]
    c = _static(c, "channel count")
    rest = x.shape[2:]
    grouped = cx.reshape(x, (n, g, dim_mul(c // g, dim_prod(rest))))
    y = cx.b.layer_norm(grouped, None, None, axis=2, eps=eps)
    y = cx.reshape(y, x.shape)
    bshape = (c,) + (1,) * len(rest)
    w, b = a.get("weight"), a.get("bias")
    if isinstance(w, Value):
        y = cx.b.mul(y, cx.reshape(w, bshape))
    if isinstance(b, Value):
        y = cx.b.add(y, cx.reshape(b, bshape))
    if _opname(cx) == "native_group_norm":
        # mean and rstd per (sample, group): shape (N, G), in the statistics' dtype.
        stats_dt = cx.out_type(1).dtype
        stats = lazy(lambda: _mean_rstd(cx, grouped, 2, eps, stats_dt))
        return (y, lazy(lambda: cx.reshape(_force(stats)[0], (n, g))),
                lazy(lambda: cx.reshape(_force(stats)[1], (n, g))))
    return y


def _empty_stat(cx: ConvertContext, k: int) -> Value:
    """Batch norm's saved statistic ``k`` outside training: torch returns an empty tensor."""
    t = cx.out_type(k)
    if not any(d == 0 for d in t.shape):
        raise Unsupported("batch norm's saved statistics outside training mode are not empty tensors")
    shape = tuple(_static(d, "batch norm statistic size") for d in t.shape)
    return cx.b.constant(np.zeros(shape, dtype=t.dtype.np), t.dtype)


def _empty_stat_lazy(cx: ConvertContext, k: int) -> Any:
    return lazy(lambda: _empty_stat(cx, k))


@converter("_native_batch_norm_legit_no_training", "batch_norm", "_native_batch_norm_legit_functional",
      "native_batch_norm", "_native_batch_norm_legit.default")
def _batch_norm(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["input"], "input")
    if a.get("training"):
        raise Unsupported("batch norm in training mode (uses batch statistics)")
    mean, var = a.get("running_mean"), a.get("running_var")
    if not isinstance(mean, Value) or not isinstance(var, Value):
        raise Unsupported("batch norm without running statistics")
    eps = float(a.get("eps", 1e-5))
    dt = x.dtype
    bshape = (x.shape[1],) + (1,) * (x.type.rank - 2)
    y = cx.b.sub(x, cx.reshape(cx.cast(mean, dt), bshape))
    y = cx.b.mul(y, cx.reshape(cx.b.rsqrt(cx.b.add(cx.cast(var, dt), cx.tensor(eps, dt))), bshape))
    w, b = a.get("weight"), a.get("bias")
    if isinstance(w, Value):
        y = cx.b.mul(y, cx.reshape(cx.cast(w, dt), bshape))
    if isinstance(b, Value):
        y = cx.b.add(y, cx.reshape(cx.cast(b, dt), bshape))
    if _opname(cx) == "batch_norm":
        return y
    return (y,) + tuple(_empty_stat_lazy(cx, k) for k in range(1, len(cx.meta)))


# ---------------------------------------------------------------------------
# contractions


def _matmul_general(cx: ConvertContext, x: Value, y: Value) -> Value:
    rx, ry = x.type.rank, y.type.rank
    if rx == 1 and ry == 1:
        return cx.b.reduce_sum(cx.b.mul(x, y), axes=(0,), keepdims=False)
    xs = cx.reshape(x, (1,) + x.shape) if rx == 1 else x
    ys = cx.reshape(y, y.shape + (1,)) if ry == 1 else y
    out = cx.b.matmul(xs, ys)
    if rx == 1 or ry == 1:
        out = cx.reshape(out, cx.out_shape)
    return out


@converter("matmul", "mm", "bmm")
def _matmul(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.cast(_require(a["self"], "input"), dt)
    y = cx.cast(_require(a.get("other", a.get("mat2")), "other"), dt)
    return _matmul_general(cx, x, y)


@converter("linear")
def _linear(cx: ConvertContext, a: dict) -> Any:
    # Under autocast torch records the reduced dtype as the result: compute in it.
    dt = cx.out_dtype
    x = cx.cast(_require(a["input"], "input"), dt)
    w = cx.cast(_require(a["weight"], "weight"), dt)
    wt = cx.b.transpose(w, perm=(1, 0)) if w.type.rank == 2 else w
    y = _matmul_general(cx, x, wt)
    bias = a.get("bias")
    if isinstance(bias, Value):
        y = cx.b.add(y, cx.cast(bias, dt))
    return y


def _scaled(cx: ConvertContext, v: Value, s: Any) -> Value:
    if s is None or s == 1:
        return v
    return cx.b.mul(v, cx.tensor(s, v.dtype))


@converter("addmm", "baddbmm", "addbmm")
def _addmm(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    x = cx.cast(_require(a.get("mat1", a.get("batch1")), "mat1"), dt)
    y = cx.cast(_require(a.get("mat2", a.get("batch2")), "mat2"), dt)
    p = cx.b.matmul(x, y)
    if _opname(cx) == "addbmm":
        p = cx.b.reduce_sum(p, axes=(0,), keepdims=False)
    p = _scaled(cx, p, a.get("alpha"))
    beta = a.get("beta")
    if beta == 0:
        return p
    bias = _scaled(cx, cx.tensor(a["self"], dt), beta)
    return cx.b.add(bias, p)


@converter("addmv")
def _addmv(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    p = _matmul_general(cx, cx.cast(_require(a["mat"], "mat"), dt), cx.cast(_require(a["vec"], "vec"), dt))
    p = _scaled(cx, p, a.get("alpha"))
    if a.get("beta") == 0:
        return p
    return cx.b.add(_scaled(cx, cx.tensor(a["self"], dt), a.get("beta")), p)


@converter("einsum")
def _einsum(cx: ConvertContext, a: dict) -> Any:
    eq = str(a["equation"]).replace(" ", "")
    ops = list(a["tensors"])
    dt = cx.out_dtype
    ops = [cx.cast(_require(o, "operand"), dt) for o in ops]
    if "..." in eq:
        raise Unsupported("einsum with '...'")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs = eq
        letters = lhs.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    ins = lhs.split(",")
    if len(ins) != len(ops) or len(ops) not in (1, 2):
        raise Unsupported(f"einsum '{eq}' with {len(ops)} operands (one or two are supported)")
    for s, o in zip(ins, ops):
        if len(s) != o.type.rank or len(set(s)) != len(s):
            raise Unsupported(f"einsum '{eq}': subscripts do not match operand ranks or repeat")

    def reduce_only(v: Value, sub: str, keep: str) -> tuple[Value, str]:
        drop = tuple(i for i, c in enumerate(sub) if c not in keep)
        if drop:
            v = cx.b.reduce_sum(v, axes=drop, keepdims=False)
            sub = "".join(c for c in sub if c in keep)
        return v, sub

    if len(ops) == 1:
        v, sub = reduce_only(ops[0], ins[0], out)
    else:
        (va, vb), (ls, rs) = ops, ins
        va, ls = reduce_only(va, ls, rs + out)
        vb, rs = reduce_only(vb, rs, ls + out)
        batch = [c for c in ls if c in rs and c in out]
        contract = [c for c in ls if c in rs and c not in out]
        v = cx.b.contract(va, vb, lhs_batch=tuple(ls.index(c) for c in batch),
                          rhs_batch=tuple(rs.index(c) for c in batch),
                          lhs_contract=tuple(ls.index(c) for c in contract),
                          rhs_contract=tuple(rs.index(c) for c in contract))
        sub = "".join(batch) + "".join(c for c in ls if c not in rs) + "".join(c for c in rs if c not in ls)
    if set(sub) != set(out):
        raise Unsupported(f"einsum '{eq}'")
    perm = tuple(sub.index(c) for c in out)
    if perm != tuple(range(len(perm))):
        v = cx.b.transpose(v, perm=perm)
    return v


# ---------------------------------------------------------------------------
# convolution


def _pair(v: Any, n: int) -> tuple[int, ...]:
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    t = tuple(int(x) for x in v)
    return t * n if len(t) == 1 else t


# ---------------------------------------------------------------------------
# attention


def _sdpa(cx: ConvertContext, q: Value, k: Value, v: Value, mask: Any, is_causal: bool, scale: Any,
          enable_gqa: bool) -> Value:
    r = q.type.rank
    if r not in (3, 4) or k.type.rank != r or v.type.rank != r:
        raise Unsupported(f"attention on rank-{r} tensors (rank 3 or 4 [batch, heads, seq, dim] supported)")
    if scale is None:
        e = q.shape[-1]
        scale = 1.0 / math.sqrt(_static(e, "head dim"))
    if not isinstance(scale, (int, float)):
        raise Unsupported("a symbolic attention scale")
    if r == 3:
        q, k, v = (cx.reshape(t, (1,) + t.shape) for t in (q, k, v))
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk and not enable_gqa:
        raise Unsupported(f"query heads {hq} != key heads {hk} without enable_gqa")
    m = b = None
    if isinstance(mask, Value):
        mask4 = mask
        if mask.type.rank < 4:
            mask4 = cx.reshape(mask, (1,) * (4 - mask.type.rank) + mask.shape)
        if mask.dtype.is_bool:
            m = mask4
        else:
            b = cx.cast(mask4, q.dtype)
    elif mask is not None:
        raise Unsupported(f"attention mask of type {type(mask).__name__}")
    out = cx.b.attention(q, k, v, m, b, scale=float(scale), causal=bool(is_causal))
    if r == 3:
        out = cx.reshape(out, out.shape[1:])
    return out


@converter("scaled_dot_product_attention")
def _sdpa_conv(cx: ConvertContext, a: dict) -> Any:
    return _sdpa(cx, _require(a["query"], "query"), _require(a["key"], "key"), _require(a["value"], "value"),
                 a.get("attn_mask"), bool(a.get("is_causal")), a.get("scale"), bool(a.get("enable_gqa")))


@converter("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
      "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
      "_scaled_dot_product_attention_math")
def _sdpa_internal(cx: ConvertContext, a: dict) -> Any:
    mask = a.get("attn_mask", a.get("attn_bias"))
    out = _sdpa(cx, _require(a["query"], "query"), _require(a["key"], "key"), _require(a["value"], "value"),
                mask, bool(a.get("is_causal")), a.get("scale"), bool(a.get("enable_gqa")))
    n = len(cx.meta) if isinstance(cx.meta, (tuple, list)) else 1
    return (out,) + tuple(lazy(lambda: _unsupported_lse()) for _ in range(n - 1))


def _unsupported_lse() -> Any:
    raise Unsupported("attention's auxiliary outputs (logsumexp, seeds) are not importable")


# ---------------------------------------------------------------------------
# embedding and indexing


@converter("embedding")
def _embedding(cx: ConvertContext, a: dict) -> Any:
    w = _require(a["weight"], "weight")
    idx = _require(a["indices"], "indices")
    return cx.b.gather(w, idx, axis=0)


@converter("index_select")
def _index_select(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    idx = _require(a["index"], "index")
    ax = _axis(a["dim"], x.type.rank)
    if idx.type.rank == 0:
        idx = cx.reshape(idx, (1,))
    return cx.b.gather(x, idx, axis=ax)


@converter("index.Tensor", "_unsafe_index.Tensor")
def _index(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    indices = list(a["indices"])
    pos = [i for i, t in enumerate(indices) if t is not None]
    if not pos:
        return x
    for i in pos:
        t = indices[i]
        if not isinstance(t, Value):
            raise Unsupported("index with a non-tensor index")
        if t.dtype.is_bool:
            raise Unsupported("boolean-mask indexing (the result size depends on the data)")
    if pos != list(range(pos[0], pos[0] + len(pos))):
        raise Unsupported("advanced indices separated by slices")
    first = pos[0]
    if len(pos) == 1:
        return cx.b.gather(x, indices[first], axis=first)
    # Several adjacent index tensors: flatten those dims and index them with one linear index.
    sizes = [x.shape[i] for i in pos]
    idx = []
    for i, n in zip(pos, sizes):
        t = cx.cast(indices[i], DType.i64)
        # Negative indices count from the end; wrap them before combining.
        nt = cx.tensor(n, DType.i64)
        idx.append(cx.b.where(cx.b.lt(t, cx.tensor(0, DType.i64)), cx.b.add(t, nt), t))
    lin: Value | None = None
    for t, n in zip(idx, sizes):
        lin = t if lin is None else cx.b.add(cx.b.mul(lin, cx.tensor(n, DType.i64)), t)
    merged = dim_prod(sizes)
    xs = cx.reshape(x, x.shape[:first] + (merged,) + x.shape[first + len(pos):])
    assert lin is not None
    return cx.b.gather(xs, lin, axis=first)


# ---------------------------------------------------------------------------
# shapes


@converter("view.default", "reshape", "_unsafe_view", "_reshape_alias", "flatten", "unflatten", "unsqueeze", "ravel",
      "atleast_1d.default", "atleast_2d.default", "atleast_3d.default",
      "squeeze", "view_copy.default", "_reshape_copy", "unsqueeze_copy", "squeeze_copy")
def _reshape(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    return cx.reshape(x, cx.out_shape)


@converter("permute", "permute_copy")
def _permute(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    r = x.type.rank
    perm = tuple(_axis(d, r) for d in a["dims"])
    if perm == tuple(range(r)):
        return x
    return cx.b.transpose(x, perm=perm)


@converter("transpose", "swapaxes", "swapdims", "transpose_copy")
def _transpose(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    r = x.type.rank
    d0 = _axis(a.get("dim0", a.get("axis0")), r)
    d1 = _axis(a.get("dim1", a.get("axis1")), r)
    if d0 == d1:
        return x
    perm = list(range(r))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return cx.b.transpose(x, perm=tuple(perm))


@converter("t", "numpy_T", "mT", "mH", "adjoint", "t_copy", "matrix_H")
def _t(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    r = x.type.rank
    if r < 2:
        return x
    if _opname(cx) == "numpy_T":
        perm = tuple(reversed(range(r)))
    else:
        perm = tuple(range(r - 2)) + (r - 1, r - 2)
    return cx.b.transpose(x, perm=perm)


@converter("expand", "expand_as", "broadcast_to", "expand_copy")
def _expand(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    return cx.broadcast(x, cx.out_shape)


def _norm_index(i: Any, size: Dim) -> Dim:
    """A possibly negative start index against ``size``."""
    if isinstance(i, (int, np.integer)):
        i = int(i)
        if i < 0:
            return dim_add(size, i) if isinstance(size, SymDim) else max(0, size + i)
        if isinstance(size, int):
            return min(i, size)
        return i
    if isinstance(i, SymDim):
        return i
    raise Unsupported(f"index {i!r}")


@converter("slice", "slice_copy")
def _slice(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    r = x.type.rank
    ax = _axis(a.get("dim", 0), r)
    step = int(a.get("step") or 1)
    if step < 1:
        raise Unsupported(f"slice step {step}")
    size = x.shape[ax]
    start = a.get("start")
    start = 0 if start is None else _norm_index(start, size)
    length = cx.out_shape[ax]
    if length == size and start == 0:
        return x
    if step == 1:
        limit = dim_add(start, length)
    else:
        if not isinstance(length, int):
            raise Unsupported("a strided slice of a symbolic length")
        limit = dim_add(start, (length - 1) * step + 1) if length > 0 else start
    starts: list[Dim] = [0] * r
    limits: list[Dim] = list(x.shape)
    steps = [1] * r
    starts[ax], limits[ax], steps[ax] = start, limit, step
    return cx.b.slice(x, start=tuple(starts), limit=tuple(limits), step=tuple(steps))


@converter("narrow", "narrow_copy")
def _narrow(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    r = x.type.rank
    ax = _axis(a["dim"], r)
    start = _norm_index(a["start"], x.shape[ax])
    length = cx.out_shape[ax]
    starts: list[Dim] = [0] * r
    limits: list[Dim] = list(x.shape)
    starts[ax], limits[ax] = start, dim_add(start, length)
    return cx.b.slice(x, start=tuple(starts), limit=tuple(limits))


@converter("select", "select_copy")
def _select(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    r = x.type.rank
    ax = _axis(a["dim"], r)
    idx = a["index"]
    if isinstance(idx, (int, np.integer)) and int(idx) < 0:
        start: Dim = dim_add(x.shape[ax], int(idx))
    elif isinstance(idx, (int, np.integer, SymDim)):
        start = int(idx) if isinstance(idx, (int, np.integer)) else idx
    else:
        raise Unsupported(f"select index {idx!r}")
    starts: list[Dim] = [0] * r
    limits: list[Dim] = list(x.shape)
    starts[ax], limits[ax] = start, dim_add(start, 1)
    s = cx.b.slice(x, start=tuple(starts), limit=tuple(limits))
    return cx.reshape(s, cx.out_shape)


def _split_out(cx: ConvertContext, x: Value, ax: int) -> list[Value]:
    metas = cx.meta
    sizes = tuple(cx.imp.size_dim(m.shape[ax]) for m in metas)
    if len(sizes) == 1:
        return [x]
    return list(cx.b.split(x, axis=ax, sizes=sizes))


@converter("split", "split_with_sizes", "chunk", "tensor_split", "split_copy", "split_with_sizes_copy", "unsafe_chunk",
      "unsafe_split", "unsafe_split_with_sizes")
def _split(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    ax = _axis(a.get("dim", 0), x.type.rank)
    return tuple(_split_out(cx, x, ax))


@converter("unbind", "unbind_copy")
def _unbind(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    ax = _axis(a.get("dim", 0), x.type.rank)
    n = _static(x.shape[ax], "unbind size")
    parts = list(cx.b.split(x, axis=ax, sizes=(1,) * n)) if n > 1 else [x]
    return tuple(cx.reshape(p, cx.imp.meta_type(m).shape) for p, m in zip(parts, cx.meta))


@converter("cat", "concat", "concatenate")
def _cat(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    out = cx.out_type()
    ts = [t for t in a["tensors"] if isinstance(t, Value)]
    # Legacy torch lets a 1-D empty tensor join anything; it contributes nothing.
    ts = [t for t in ts if not (t.type.rank == 1 and t.shape[0] == 0 and out.rank != 1)]
    ts = [cx.cast(t, dt) for t in ts]
    if len(ts) == 1:
        return ts[0]
    return cx.b.concat(*ts, axis=_axis(a.get("dim", 0), out.rank))


@converter("stack")
def _stack(cx: ConvertContext, a: dict) -> Any:
    dt = cx.out_dtype
    out = cx.out_type()
    ax = _axis(a.get("dim", 0), out.rank)
    ts = [cx.cast(_require(t, "tensor"), dt) for t in a["tensors"]]
    ts = [cx.reshape(t, t.shape[:ax] + (1,) + t.shape[ax:]) for t in ts]
    if len(ts) == 1:
        return ts[0]
    return cx.b.concat(*ts, axis=ax)


def _tri(cx: ConvertContext, a: dict, lower: bool) -> Value:
    x = _require(a["self"], "input")
    d = int(a.get("diagonal") or 0)
    r, c = x.shape[-2], x.shape[-1]
    rows = cx.b.iota(shape=(r, c), axis=0, dtype=DType.i64)
    cols = cx.b.iota(shape=(r, c), axis=1, dtype=DType.i64)
    diff = cx.b.sub(cols, rows)
    keep = cx.b.le(diff, cx.tensor(d, DType.i64)) if lower else cx.b.ge(diff, cx.tensor(d, DType.i64))
    zero = cx.tensor(False if x.dtype.is_bool else 0, x.dtype)
    return cx.b.where(keep, x, zero)


@converter("tril")
def _tril(cx: ConvertContext, a: dict) -> Any:
    return _tri(cx, a, True)


@converter("triu")
def _triu(cx: ConvertContext, a: dict) -> Any:
    return _tri(cx, a, False)


@converter("repeat")
def _repeat(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    reps = [cx.dim(r) for r in a["repeats"]]
    shape = (1,) * (len(reps) - x.type.rank) + x.shape
    x = cx.reshape(x, shape)
    for i, rep in enumerate(reps):
        if rep == 1:
            continue
        cur = x.shape
        expanded = cur[:i] + (1,) + cur[i:]
        y = cx.reshape(x, expanded)
        y = cx.broadcast(y, cur[:i] + (rep,) + cur[i:])
        x = cx.reshape(y, cur[:i] + (dim_mul(rep, cur[i]),) + cur[i + 1:])
    return x


@converter("repeat_interleave.self_int")
def _repeat_interleave(cx: ConvertContext, a: dict) -> Any:
    x = _require(a["self"], "input")
    rep = cx.dim(a["repeats"])
    dim = a.get("dim")
    if dim is None:
        x = cx.reshape(x, (dim_prod(x.shape),))
        dim = 0
    ax = _axis(dim, x.type.rank)
    cur = x.shape
    y = cx.reshape(x, cur[:ax + 1] + (1,) + cur[ax + 1:])
    y = cx.broadcast(y, cur[:ax + 1] + (rep,) + cur[ax + 1:])
    return cx.reshape(y, cx.out_shape)


@converter("tile")
def _tile(cx: ConvertContext, a: dict) -> Any:
    return _repeat(cx, {"self": a["self"], "repeats": list(a["dims"])})


# ---------------------------------------------------------------------------
# creation


def _fill_value(cx: ConvertContext, a: dict, default: Any) -> Any:
    v = a.get("fill_value", default)
    return default if v is None else v


@converter("full", "new_full", "full_like")
def _full(cx: ConvertContext, a: dict) -> Any:
    out = cx.out_type()
    return cx.splat(_fill_value(cx, a, 0), out.dtype, out.shape)


@converter("zeros", "new_zeros", "zeros_like", "empty", "new_empty", "empty_like", "empty_strided",
      "new_empty_strided", "empty_permuted")
def _zeros(cx: ConvertContext, a: dict) -> Any:
    # `empty` is uninitialised in torch; functional graphs overwrite it before use, zeros are safe.
    out = cx.out_type()
    return cx.splat(0, out.dtype, out.shape)


@converter("ones", "new_ones", "ones_like")
def _ones(cx: ConvertContext, a: dict) -> Any:
    out = cx.out_type()
    return cx.splat(1, out.dtype, out.shape)


@converter("fill")
def _fill(cx: ConvertContext, a: dict) -> Any:
    out = cx.out_type()
    return cx.splat(a["value"], out.dtype, out.shape)


@converter("scalar_tensor")
def _scalar_tensor(cx: ConvertContext, a: dict) -> Any:
    return cx.tensor(a["s"], cx.out_dtype)


@converter("eye", "eye.m")
def _eye(cx: ConvertContext, a: dict) -> Any:
    out = cx.out_type()
    rows = cx.b.iota(shape=out.shape, axis=0, dtype=DType.i64)
    cols = cx.b.iota(shape=out.shape, axis=1, dtype=DType.i64)
    return cx.cast(cx.b.eq(rows, cols), out.dtype)


@converter("arange")
def _arange(cx: ConvertContext, a: dict) -> Any:
    out = cx.out_type()
    if "start" in a and a.get("start") is not None:
        start, step = a["start"], a.get("step", 1)
    else:
        start, step = 0, 1
    step = 1 if step is None else step
    n = out.shape[0]
    dt = out.dtype
    if dt.is_float:
        # torch computes start + i*step in double, then rounds once.
        i = cx.b.iota(shape=(n,), axis=0, dtype=DType.f64)
        v = i
        if step != 1:
            v = cx.b.mul(v, cx.tensor(step, DType.f64))
        if not (isinstance(start, (int, float)) and start == 0):
            v = cx.b.add(v, cx.tensor(start, DType.f64))
        return cx.cast(v, dt)
    v = cx.b.iota(shape=(n,), axis=0, dtype=DType.i64)
    if step != 1:
        v = cx.b.mul(v, cx.tensor(step, DType.i64))
    if not (isinstance(start, (int,)) and start == 0):
        v = cx.b.add(v, cx.tensor(start, DType.i64))
    return cx.cast(v, dt)


# ---------------------------------------------------------------------------
# higher-order ops: regions whose body is inlined


@converter("higher_order.wrap_with_set_grad_enabled")
def _wrap_grad(cx: ConvertContext, a: dict) -> Any:
    gm = a["arg1"]
    inputs = [a[f"arg{i}"] for i in range(2, len([k for k in a if k.startswith("arg")]))]
    out = cx.imp.inline(gm, inputs)
    return tuple(out) if isinstance(out, (list, tuple)) else out


@converter("higher_order.wrap_with_autocast")
def _wrap_autocast(cx: ConvertContext, a: dict) -> Any:
    # args: device_type, dtype, enabled, cache_enabled, body, *inputs.  torch recorded
    # each inner op's dtype under autocast in its metadata; the converters follow it.
    gm = a["arg4"]
    inputs = [a[f"arg{i}"] for i in range(5, len([k for k in a if k.startswith("arg")]))]
    out = cx.imp.inline(gm, inputs)
    return tuple(out) if isinstance(out, (list, tuple)) else out


@converter("operator.getitem")
def _getitem(cx: ConvertContext, a: dict) -> Any:
    seq, i = a["arg0"], a["arg1"]
    if isinstance(seq, (list, tuple)):
        return _force(seq[i])
    raise Unsupported(f"indexing a {type(seq).__name__}")


__all__ = ["CONVERTERS", "aten_key", "converter"]
