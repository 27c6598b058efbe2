"""``fuse-activation``: GELU (erf and tanh forms) and SiLU written out as math → ``ik.gelu`` / ``ik.silu``.

Design note.  GELU has many spellings — ``0.5*x*(1+erf(x/sqrt(2)))``,
``x*0.5*(1.0+erf(x*0.70710678))``, ``0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))``
with ``x*x*x`` or ``pow(x, 3)``, the constant folded or not, the halving as a
``div`` by 2 — and one matcher per spelling is the Inductor trap.  This pass
matches the *function* instead:

1. From a root op it collects the elementwise expression above it: ops from
   {add, sub, mul, div, neg, pow, erf, tanh, exp, sigmoid, sqrt, rsqrt,
   reciprocal, float casts, reshapes of leading 1s} whose other operands are scalar constants, down to
   one variable ``x`` (the deepest value the whole expression depends on alone).
2. It evaluates that expression in float64 on 170 points in [-20, 20] — with
   the constants exactly as stored — and compares it with GELU (erf), GELU
   (tanh) and SiLU.  The expression is analytic (no piecewise ops are
   admitted), so agreement on that many points means the same function.  The
   tolerance follows the constants' precision: 1e-6 for float32 constants,
   2e-3 for float16/bfloat16 ones.  A wrong constant (0.044 for 0.044715)
   fails, and ``--explain`` says by how much and where.

Intermediate values must have no user outside the expression.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from irkit.passes.canon_attention import emit_op, is_float_cast
from scipy import special

from irkit.ir.core import Location, Op, Value
from irkit.ir.ops import BINARY, UNARY
from irkit.ir.types import DType
from irkit.passmanager import Pass, PassContext, register_pass
from irkit.rewrite import Fail, Match, NearMiss, Pattern, Rewriter, splat_constant
from irkit.rewrite.fusion import run_fusion
from irkit.rewrite.walk import Cone, escaping_user, producer_cone, user_rings

_UNARY_OPS = frozenset({"ik.neg", "ik.erf", "ik.tanh", "ik.exp", "ik.sigmoid", "ik.sqrt", "ik.rsqrt",
                        "ik.reciprocal"})
_BINARY_OPS = frozenset({"ik.add", "ik.sub", "ik.mul", "ik.div", "ik.pow"})
_SIGNATURE = frozenset({"ik.erf", "ik.tanh", "ik.sigmoid", "ik.exp"})
MAX_EXPR_OPS = 24
NEAR_MISS = 0.1
"""An expression within this relative error of a target is reported by --explain as a near miss."""

POINTS = np.concatenate([np.linspace(-8.0, 8.0, 161), [-20.0, -14.0, -11.0, 11.0, 14.0, 20.0, 0.3, -0.7, 2.5]])


def _gelu_erf(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + special.erf(x / math.sqrt(2.0)))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def _silu(x: np.ndarray) -> np.ndarray:
    return x * special.expit(x)


TARGETS: dict[str, tuple[str, dict, object]] = {
    "gelu(erf)": ("ik.gelu", {"approximate": "none"}, _gelu_erf),
    "gelu(tanh)": ("ik.gelu", {"approximate": "tanh"}, _gelu_tanh),
    "silu": ("ik.silu", {}, _silu),
}


def _scalar(v: Value) -> float | None:
    if not v.type.dtype.is_float:
        return None
    if any(d != 1 for d in v.type.shape):
        return None
    c = splat_constant(v)
    return None if c is None else float(c)


def _is_unit_reshape(op: Op) -> bool:
    """A reshape that only adds or drops leading 1s: the same elements in the same order.

    Canonicalize drops such a reshape where an elementwise op broadcasts anyway, so
    one GELU can read ``x`` as ``[128, 1024]`` in one place and ``[1, 128, 1024]``
    in another; the expression still has one variable."""
    if op.name != "ik.reshape":
        return False

    def core(shape: tuple) -> tuple:
        i = 0
        while i < len(shape) and shape[i] == 1:
            i += 1
        return tuple(shape[i:])

    return core(tuple(op.operand(0).type.shape)) == core(tuple(op.results[0].type.shape))


def _in_expr(op: Op) -> bool:
    if op.name in _UNARY_OPS:
        return op.results[0].type.dtype.is_float
    if op.name in _BINARY_OPS:
        return op.results[0].type.dtype.is_float
    return is_float_cast(op) or (_is_unit_reshape(op) and op.results[0].type.dtype.is_float)


def _folded_scalar(v: Value) -> bool:
    p = v.producer
    return p is not None and p.name == "ik.constant" and _scalar(v) is not None


def _enters(p: Op) -> bool:
    return p.name != "ik.constant" and _in_expr(p)


def _expression(root: Op, x: Value) -> Cone:
    """The expression at ``root`` down to ``x``: its ops (``root`` first) and non-constant leaves."""
    cone = producer_cone(root, stop=x, enter=_enters, skip=_folded_scalar, limit=MAX_EXPR_OPS)
    assert cone is not None  # only max_ops, refuse or closed make a walk give up
    return cone


_MANTISSA = {DType.f64: 52, DType.f32: 23, DType.f16: 10, DType.bf16: 7}


def _rounds_narrower(ops: list[Op], root: Op) -> Op | None:
    """An op inside the expression whose float result is less precise than the root's.

    Upcasting around the math (f16 in, f32 math, f16 out) is what one fused op in
    the result type computes; rounding to a narrower type in between (f32 math,
    cast to f16 and back) is a rounding the fused op cannot represent.
    """
    want = root.results[0].type.dtype
    for o in ops:
        dt = o.results[0].type.dtype
        if o is root or not dt.is_float or dt == want:
            continue
        if dt not in (DType.f32, DType.f64) or _MANTISSA[dt] <= _MANTISSA.get(want, 52):
            return o
    return None


def _evaluate(root: Op, x: Value, pts: np.ndarray) -> np.ndarray | None:
    memo: dict[int, np.ndarray] = {id(x): pts}

    def val(v: Value) -> np.ndarray:
        if id(v) in memo:
            return memo[id(v)]
        c = _scalar(v)
        if c is not None and v.producer is not None and v.producer.name == "ik.constant":
            return np.float64(c)  # type: ignore[return-value]
        p = v.producer
        assert p is not None
        ins = [val(a) for a in p.operands]
        name = p.name[3:]
        if p.name in ("ik.cast", "ik.reshape"):  # pointwise, the value is unchanged
            out = ins[0]
        elif name in UNARY:
            out = UNARY[name][0](np.asarray(ins[0], dtype=np.float64))
        else:
            out = BINARY[name][0](np.asarray(ins[0], dtype=np.float64), np.asarray(ins[1], dtype=np.float64))
        memo[id(v)] = out
        return out

    with np.errstate(all="ignore"):
        try:
            return np.broadcast_to(val(root.results[0]), pts.shape).astype(np.float64)
        except (KeyError, AssertionError, ValueError):
            return None


def _const_tolerance(ops: list[Op]) -> float:
    tol = 1e-6
    for o in ops:
        for v in o.operands:
            p = v.producer
            if p is not None and p.name == "ik.constant" and v.type.dtype in (DType.f16, DType.bf16):
                tol = 2e-3 if v.type.dtype == DType.f16 else 1e-2
    return tol


def _describe_error(f: np.ndarray, g: np.ndarray) -> tuple[float, float]:
    err = np.abs(f - g) / (1.0 + np.abs(g))
    err = np.where(np.isnan(err), np.inf, err)
    i = int(np.argmax(err))
    return float(err[i]), float(POINTS[i])


class FuseActivationPattern(Pattern):
    """Identify an elementwise expression of one variable as GELU or SiLU by its values.

    The pattern starts at the transcendental op every spelling contains (erf,
    tanh, sigmoid or exp): the expression's root is one of its users a few
    elementwise ops further on (the furthest that works), its variable one of
    its ancestors (the deepest that works).
    """

    name = "fuse-activation"
    roots = tuple(sorted(_SIGNATURE))
    explain = True

    def match(self, sig: Op) -> Match | Fail:
        if not sig.results[0].type.dtype.is_float:
            return Fail("the result is not a float", sig, near_miss=False)
        roots = _roots_from(sig)
        xs = _variables_of(sig)
        best: tuple[float, float, str, Op] | None = None
        rounding: Fail | None = None
        for root in roots:
            for x in xs:
                expr = _expression(root, x)
                if set(expr.leaves) != {id(x)}:  # x alone: the expression is a function of x
                    continue
                ops = expr.ops
                f = _evaluate(root, x, POINTS)
                if f is None:
                    continue
                tol = _const_tolerance(ops)
                err, at, label = min((_describe_error(f, g(POINTS)) + (lab,)  # type: ignore[operator]
                                      for lab, (_, _, g) in TARGETS.items()), key=lambda t: t[0])
                if err <= tol:
                    opname, attrs, _ = TARGETS[label]
                    lossy = _rounds_narrower(ops, root)
                    if lossy is not None:  # a smaller root (before the rounding) may still fuse
                        rounding = rounding or Fail(
                            f"the {label} expression rounds to {lossy.results[0].type.dtype} inside (at "
                            f"'{lossy.name}'), narrower than its {root.results[0].type.dtype} result: one fused "
                            "op would drop that rounding", lossy)
                        continue
                    escape = escaping_user(ops, outputs=[root])
                    if escape is not None:
                        o, u = escape
                        return Fail(f"the {label} expression's '{o.name}' has a user outside it "
                                    f"('{u.name}' at {u.loc.short()})", o)
                    return Match(x=x, root=root, opname=opname, attrs=attrs, ops=ops, label=label)
                if best is None or err < best[0]:
                    best = (err, at, label, root)
        if rounding is not None:
            return rounding
        if best is None or best[0] > NEAR_MISS:
            return Fail("no expression around it computes GELU or SiLU, nor nearly", sig, near_miss=False)
        err, at, label, root = best
        return Fail(f"the expression uses {sig.name[3:]} but is not {label} (the closest): it differs by "
                    f"{err:.2g} (relative) at x={at:g}; check its constants "
                    "(0.5, 1/sqrt(2)=0.70711, sqrt(2/pi)=0.79788, 0.044715)", root)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        root: Op = m["root"]
        x: Value = m["x"]
        out_t = root.results[0].type
        loc = Location.fuse([o.loc for o in m["ops"]])
        xd, od = x.type.dtype, out_t.dtype
        wider_in = xd != od and xd.is_float and _MANTISSA.get(xd, 0) > _MANTISSA.get(od, 0)
        if xd != od and not wider_in:
            x = emit_op(rw, root, "ik.cast", x, to=od)  # f16 in, math upcast: compute in the result type
        y = rw.create(root, m["opname"], [x], dict(m["attrs"]), loc=loc).results[0]
        if wider_in:  # f32 math rounded to f16 at the end: compute wide, round once, as written
            y = emit_op(rw, root, "ik.cast", y, to=od)
        if y.type.shape != out_t.shape:  # x read through a reshape of leading 1s: the root's shape
            y = emit_op(rw, root, "ik.reshape", y, shape=tuple(out_t.shape))
        if y.type != out_t:
            return
        rw.replace_op(root, [y])


MAX_ROOT_DISTANCE = 8


def _roots_from(sig: Op) -> list[Op]:
    """Expression ops reachable from ``sig`` through chains of users, furthest first."""
    rings = user_rings(sig, MAX_ROOT_DISTANCE,
                       lambda u: _in_expr(u) and bool(u.results) and u.results[0].type.dtype.is_float)
    return [o for _, o in sorted(rings, key=lambda t: -t[0])]


def _variables_of(sig: Op) -> list[Value]:
    """Values ``sig`` is computed from through expression ops, deepest first."""
    depth: dict[int, tuple[int, Value]] = {}
    stack = [(v, 1) for v in sig.operands]
    while stack:
        v, d = stack.pop()
        p = v.producer
        if p is not None and p.name == "ik.constant" and _scalar(v) is not None:
            continue
        if depth.get(id(v), (-1,))[0] >= d or d > MAX_EXPR_OPS:
            continue
        depth[id(v)] = (d, v)
        if p is not None and _in_expr(p):
            stack.extend((a, d + 1) for a in p.operands)
    return [v for _, v in sorted(depth.values(), key=lambda t: -t[0])]


@register_pass("fuse-activation")
@dataclass(frozen=True)
class FuseActivation(Pass):
    """Fuse GELU (erf or tanh form) and SiLU written as elementwise math into ``ik.gelu`` / ``ik.silu``.

    before: %3 = "ik.mul"(%x, %c0_7071) ...  %4 = "ik.erf"(%3) ...  %5 = "ik.add"(%4, %one) ...
            %6 = "ik.mul"(%x, %half) ...     %7 = "ik.mul"(%6, %5) ...
    after:  %7 = "ik.gelu"(%x) {approximate = "none"} ...
    """

    def run(self, module, ctx: PassContext) -> bool:
        notes: list[NearMiss] = []
        return run_fusion(module, ctx, [FuseActivationPattern()], "fused-activations", notes)
