"""Hypothesis strategies for random valid IR modules.

``modules()`` draws Transformer-like functions over the op set: elementwise
chains with broadcasting, reductions, norms (decomposed and fused), matmuls
against random weights, reshapes and transposes, casts through half types,
where/compare masks, and whole attention blocks in several spellings (scale on
the scores or on Q, causal masks from a buffer or iota-compare, eager softmax or
the fused op, grouped K/V heads).  Shapes may carry symbolic dims.  Ops with a
restricted domain get a positive operand and ``exp`` sees only bounded inputs, so
non-finite values come only from where they are put on purpose:

With ``special=True`` (the default) graphs also carry the values every pass and
target must treat like the oracle: NaN, +Inf or -Inf written into one element
(row 0 of the second-to-last axis, one column) by an iota-compare ``where`` — at a
fixed position, never decided by a value, so a pass that rounds (``mixed-precision``)
cannot move it; gathers whose constant indices hold negative and boundary values
(``0``, ``n-1``, ``-1``, ``-n``); fused attention whose mask leaves query row 0
with no key at all (the fused op defines that row as zeros; the decomposed
spellings keep finite fills and no fully masked row, since ``fuse-attention``
documents that it defines those rows); and empty tensors where the ops allow
them (a zero-width slice concatenated back, a sum over an empty axis).  Each is
one step among many, so most elements of most graphs stay finite and the
comparison against the oracle keeps its power; NaN compares equal to NaN in
:func:`irkit.check.compare` only at the same positions.

Use them to test your own passes::

    from hypothesis import given
    from irkit.testing.strategies import modules

    @given(modules())
    def test_my_pass_keeps_numerics(m): ...
"""

from __future__ import annotations

import math
import weakref
from typing import Any

import numpy as np
from hypothesis import strategies as st

from irkit.ir.builder import Builder, new_function
from irkit.ir.core import Location, Module, Value
from irkit.ir.types import DType, SymDim, TensorType

_DIMS = (1, 2, 3, 4, 5, 8)

#: The special kinds :func:`drawn_kinds` reports, in the order reports list them.
SPECIAL_KINDS = ("nan", "+inf", "-inf", "negative index", "boundary index", "fully masked row", "empty dim")
_KINDS: weakref.WeakKeyDictionary[Module, frozenset[str]] = weakref.WeakKeyDictionary()


def drawn_kinds(m: Module) -> frozenset[str]:
    """The special kinds (of :data:`SPECIAL_KINDS`) the strategy put into ``m`` when it drew it:
    a NaN/±Inf element, a gather index that is negative or on the boundary (``n-1``, ``-1``, ``-n``),
    an attention query row with no key, a zero-size tensor. Empty for a module it did not draw."""
    return _KINDS.get(m, frozenset())


def _const(b: Builder, rng: np.random.Generator, shape: tuple[int, ...], scale: float = 0.5,
           dtype: DType = DType.f32) -> Value:
    return b.constant((rng.standard_normal(shape) * scale).astype(dtype.np))


def _positive(b: Builder, x: Value) -> Value:
    return b.add(b.abs(x), b.scalar(0.5, x.dtype))


class _Gen:
    """Grows a function one random op at a time from a Hypothesis ``draw``."""

    def __init__(self, draw: Any, b: Builder, rng: np.random.Generator, sym: dict[str, int]):
        self.draw = draw
        self.b = b
        self.rng = rng
        self.sym = sym
        self.values: list[Value] = []
        self.kinds: set[str] = set()

    def pick(self, pred: Any = None) -> Value | None:
        cands = [v for v in self.values if v.dtype is DType.f32 and (pred is None or pred(v))]
        if not cands:
            return None
        return cands[self.draw(st.integers(0, len(cands) - 1))]

    def static_tail(self, v: Value) -> tuple[int, ...]:
        return tuple(d if isinstance(d, int) else -1 for d in v.shape)

    special = True

    def step(self) -> None:
        kinds = ["unary", "unary", "binary", "binary_const", "reduce", "softmax", "norm", "matmul", "transpose",
                 "reshape", "cast", "where", "attention", "concat_slice", "activation"]
        if self.special:
            kinds += ["special_value", "gather", "empty"]
        kind = self.draw(st.sampled_from(kinds))
        getattr(self, f"_{kind}")()

    # -- special values -----------------------------------------------------------
    def _special_value(self) -> None:
        """NaN or ±Inf in one element: column j of row 0 (of the second-to-last axis)."""
        x = self.pick(lambda v: v.type.rank >= 1 and isinstance(v.shape[-1], int) and v.shape[-1] >= 1)
        if x is None:
            return
        b = self.b
        r = x.type.rank
        j = self.draw(st.integers(0, x.shape[-1] - 1))  # type: ignore[operator]
        # From the seeded rng, not a draw: Hypothesis leans towards the first choice, and -Inf
        # (what a max-reduction or a masked fill meets) must come as often as NaN.
        value = (math.nan, math.inf, -math.inf)[int(self.rng.integers(3))]
        self.kinds.add("nan" if math.isnan(value) else "+inf" if value > 0 else "-inf")
        cond = b.eq(b.iota(shape=x.shape, axis=r - 1, dtype=DType.i64), b.scalar(j, DType.i64))
        if r >= 2:
            cond = b.create("ik.and", [cond, b.eq(b.iota(shape=x.shape, axis=r - 2, dtype=DType.i64),
                                                   b.scalar(0, DType.i64))]).results[0]
        self.values.append(b.where(cond, b.scalar(value, DType.f32), x))

    def _gather(self) -> None:
        """A gather along a static axis with constant indices, negative and boundary ones included."""
        x = self.pick(lambda v: any(isinstance(d, int) and d >= 1 for d in v.shape))
        if x is None:
            return
        axes = [i for i, d in enumerate(x.shape) if isinstance(d, int) and d >= 1]
        ax = axes[self.draw(st.integers(0, len(axes) - 1))]
        n = x.shape[ax]
        m = self.draw(st.integers(1, 4))
        edge = [0, n - 1, -1, -n]  # type: ignore[operator]
        idx = [edge[k] if k < len(edge) and self.draw(st.booleans()) else
               int(self.rng.integers(-n, n)) for k in range(m)]  # type: ignore[operator]
        dt = self.draw(st.sampled_from([np.int64, np.int32]))
        if any(i < 0 for i in idx):
            self.kinds.add("negative index")
        if any(i in (n - 1, -1, -n) for i in idx):  # type: ignore[operator]
            self.kinds.add("boundary index")
        self.values.append(self.b.gather(x, self.b.constant(np.array(idx, dtype=dt)), axis=ax))

    def _empty(self) -> None:
        """Zero-size tensors mid-graph: a zero-width slice concatenated back, or summed over (0)."""
        x = self.pick(lambda v: v.type.rank >= 1 and isinstance(v.shape[-1], int))
        if x is None:
            return
        b = self.b
        r = x.type.rank
        empty = b.slice(x, start=(0,) * r, limit=tuple(x.shape[:-1]) + (0,))
        self.kinds.add("empty dim")
        if self.draw(st.booleans()):
            y = b.concat(empty, x, axis=r - 1) if self.draw(st.booleans()) else b.concat(x, empty, axis=r - 1)
        else:
            y = b.add(x, b.reduce_sum(empty, axes=(-1,), keepdims=True))
        self.values.append(y)

    # -- op kinds ---------------------------------------------------------------
    def _unary(self) -> None:
        x = self.pick()
        if x is None:
            return
        b = self.b
        name = self.draw(st.sampled_from(["neg", "abs", "tanh", "sigmoid", "sin", "cos", "erf", "exp", "log",
                                          "sqrt", "rsqrt", "reciprocal", "relu"]))
        if name == "exp":
            x = b.tanh(x)
        if name in ("log", "sqrt", "rsqrt", "reciprocal"):
            x = _positive(b, x)
        self.values.append(getattr(b, name)(x))

    def _activation(self) -> None:
        x = self.pick()
        if x is None:
            return
        b = self.b
        name = self.draw(st.sampled_from(["gelu_erf", "gelu_tanh", "silu", "gelu_formula", "silu_formula"]))
        if name == "gelu_erf":
            y = b.gelu(x)
        elif name == "gelu_tanh":
            y = b.gelu(x, approximate="tanh")
        elif name == "silu":
            y = b.silu(x)
        elif name == "silu_formula":
            y = b.mul(x, b.sigmoid(x))
        else:
            y = b.mul(b.mul(x, b.scalar(0.5, DType.f32)),
                      b.add(b.scalar(1.0, DType.f32), b.erf(b.mul(x, b.scalar(1 / math.sqrt(2), DType.f32)))))
        self.values.append(y)

    def _binary(self) -> None:
        x = self.pick()
        if x is None:
            return
        y = self.pick(lambda v: v.shape == x.shape) or x
        name = self.draw(st.sampled_from(["add", "sub", "mul", "max", "min", "div"]))
        if name == "div":
            y = _positive(self.b, y)
        self.values.append(getattr(self.b, name)(x, y))

    def _binary_const(self) -> None:
        x = self.pick(lambda v: v.type.rank >= 1 and isinstance(v.shape[-1], int))
        if x is None:
            return
        shape = self.draw(st.sampled_from([(), (x.shape[-1],), (1,) * x.type.rank]))
        c = _const(self.b, self.rng, shape) if shape else self.b.scalar(
            float(self.draw(st.sampled_from([0.0, 1.0, 0.5, 2.0, -1.5]))), DType.f32)
        name = self.draw(st.sampled_from(["add", "mul", "sub"]))
        args = (x, c) if self.draw(st.booleans()) else (c, x)
        self.values.append(getattr(self.b, name)(*args))

    def _reduce(self) -> None:
        x = self.pick(lambda v: v.type.rank >= 1)
        if x is None:
            return
        name = self.draw(st.sampled_from(["sum", "mean", "max", "min"]))
        keep = self.draw(st.booleans())
        ax = self.draw(st.integers(-x.type.rank, x.type.rank - 1))
        self.values.append(getattr(self.b, f"reduce_{name}")(x, axes=(ax,), keepdims=keep))

    def _softmax(self) -> None:
        x = self.pick(lambda v: v.type.rank >= 1)
        if x is None:
            return
        b = self.b
        if self.draw(st.booleans()):
            self.values.append(b.softmax(x, axis=-1))
        else:
            m = b.reduce_max(x, axes=(-1,), keepdims=True)
            e = b.exp(b.sub(x, m))
            self.values.append(b.div(e, b.reduce_sum(e, axes=(-1,), keepdims=True)))

    def _norm(self) -> None:
        x = self.pick(lambda v: v.type.rank >= 1 and isinstance(v.shape[-1], int) and v.shape[-1] > 1)
        if x is None:
            return
        b = self.b
        n = x.shape[-1]
        w = _const(b, self.rng, (n,), scale=1.0)
        kind = self.draw(st.sampled_from(["layer_norm", "rms_norm", "ln_decomposed", "rms_decomposed"]))
        if kind == "layer_norm":
            y = b.layer_norm(x, w, _const(b, self.rng, (n,)), eps=1e-5)
        elif kind == "rms_norm":
            y = b.rms_norm(x, w, eps=1e-6)
        elif kind == "ln_decomposed":
            mu = b.reduce_mean(x, axes=(-1,), keepdims=True)
            xc = b.sub(x, mu)
            var = b.reduce_mean(b.mul(xc, xc), axes=(-1,), keepdims=True)
            y = b.mul(b.div(xc, b.sqrt(b.add(var, b.scalar(1e-5, DType.f32)))), w)
        else:
            ms = b.reduce_mean(b.mul(x, x), axes=(-1,), keepdims=True)
            y = b.mul(b.mul(x, b.rsqrt(b.add(ms, b.scalar(1e-6, DType.f32)))), w)
        self.values.append(y)

    def _matmul(self) -> None:
        x = self.pick(lambda v: v.type.rank >= 2 and isinstance(v.shape[-1], int))
        if x is None:
            return
        n = self.draw(st.sampled_from(_DIMS))
        w = _const(self.b, self.rng, (x.shape[-1], n), scale=1 / math.sqrt(max(1, x.shape[-1])))  # type: ignore[arg-type]
        self.values.append(self.b.matmul(x, w))

    def _transpose(self) -> None:
        x = self.pick(lambda v: v.type.rank >= 2)
        if x is None:
            return
        perm = tuple(self.draw(st.permutations(range(x.type.rank))))
        self.values.append(self.b.transpose(x, perm=perm))

    def _reshape(self) -> None:
        x = self.pick(lambda v: v.type.rank >= 2)
        if x is None:
            return
        b = self.b
        s = x.shape
        if self.draw(st.booleans()):
            from irkit.ir.types import dim_mul

            y = b.reshape(x, shape=s[:-2] + (dim_mul(s[-2], s[-1]),))
            if isinstance(s[-1], int) and self.draw(st.booleans()):
                y = b.reshape(y, shape=s)  # a reshape chain that canonicalize collapses
        else:
            y = b.reshape(x, shape=s + (1,))
        self.values.append(y)

    def _cast(self) -> None:
        x = self.pick()
        if x is None:
            return
        mid = self.draw(st.sampled_from([DType.f16, DType.bf16, DType.f64]))
        self.values.append(self.b.cast(self.b.cast(x, to=mid), to=DType.f32))

    def _where(self) -> None:
        x = self.pick()
        if x is None:
            return
        y = self.pick(lambda v: v.shape == x.shape) or x
        c = self.b.gt(x, y) if self.draw(st.booleans()) else self.b.lt(x, self.b.scalar(0.25, DType.f32))
        self.values.append(self.b.where(c, x, self.b.scalar(-1.0, DType.f32)))

    def _concat_slice(self) -> None:
        x = self.pick(lambda v: v.type.rank >= 1 and isinstance(v.shape[-1], int) and v.shape[-1] >= 2)
        if x is None:
            return
        b = self.b
        r = x.type.rank
        y = b.concat(x, x, axis=r - 1)
        n = x.shape[-1]
        start = tuple(0 for _ in range(r - 1)) + (1,)
        limit = tuple(x.shape[:-1]) + (1 + n,)  # type: ignore[operator]
        self.values.append(b.slice(y, start=start, limit=limit))

    def _attention(self) -> None:
        b = self.b
        x = self.pick(lambda v: v.type.rank == 3 and isinstance(v.shape[-1], int))
        if x is None:
            return
        B, S, D = x.shape
        heads = self.draw(st.sampled_from([1, 2]))
        dh = self.draw(st.sampled_from([2, 4]))
        kv_heads = self.draw(st.sampled_from([h for h in (1, heads) if heads % h == 0]))
        wq = _const(b, self.rng, (D, heads * dh), 1 / math.sqrt(D))  # type: ignore[arg-type]
        wk = _const(b, self.rng, (D, kv_heads * dh), 1 / math.sqrt(D))  # type: ignore[arg-type]
        wv = _const(b, self.rng, (D, kv_heads * dh), 1 / math.sqrt(D))  # type: ignore[arg-type]

        def split_heads(t: Value, h: int) -> Value:
            return b.transpose(b.reshape(t, shape=(B, S, h, dh)), perm=(0, 2, 1, 3))

        q = split_heads(b.matmul(x, wq), heads)
        k = split_heads(b.matmul(x, wk), kv_heads)
        v = split_heads(b.matmul(x, wv), kv_heads)
        scale = 1 / math.sqrt(dh)
        causal = self.draw(st.booleans())
        if self.draw(st.booleans()):
            mask = None
            if self.special and self.draw(st.booleans()):
                # Keys j <= i for query i, and none at all for query row 0: the fused op gives it zeros.
                qi = b.iota(shape=(S, S), axis=0, dtype=DType.i64)
                ki = b.iota(shape=(S, S), axis=1, dtype=DType.i64)
                mask = b.create("ik.and", [b.le(ki, qi), b.ne(qi, b.scalar(0, DType.i64))]).results[0]
                self.kinds.add("fully masked row")
            out = b.attention(q, k, v, mask, scale=scale, causal=causal)
        else:
            if kv_heads != heads:
                rep = heads // kv_heads
                k = b.reshape(b.broadcast(b.reshape(k, shape=(B, kv_heads, 1, S, dh)), shape=(B, kv_heads, rep, S, dh)),
                              shape=(B, heads, S, dh))
                v = b.reshape(b.broadcast(b.reshape(v, shape=(B, kv_heads, 1, S, dh)), shape=(B, kv_heads, rep, S, dh)),
                              shape=(B, heads, S, dh))
            if self.draw(st.booleans()):
                s = b.mul(b.matmul(q, b.transpose(k, perm=(0, 1, 3, 2))), b.scalar(scale, DType.f32))
            else:
                s = b.matmul(b.mul(q, b.scalar(scale, DType.f32)), b.transpose(k, perm=(0, 1, 3, 2)))
            if causal:
                qi = b.iota(shape=(S, S), axis=0, dtype=DType.i64)
                ki = b.iota(shape=(S, S), axis=1, dtype=DType.i64)
                s = b.where(b.le(ki, qi), s, b.scalar(float(np.finfo(np.float32).min), DType.f32))
            out = b.matmul(b.softmax(s, axis=-1), v)
        self.values.append(b.reshape(b.transpose(out, perm=(0, 2, 1, 3)), shape=(B, S, heads * dh)))


@st.composite
def modules(draw: Any, max_ops: int = 10, symbolic: bool = True, special: bool = True) -> Module:
    """A random valid module: 1-2 f32 inputs (maybe with symbols B, S) and 1..max_ops steps;
    ``special`` adds the NaN/Inf, edge-index, fully-masked-row and empty-tensor steps."""
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    use_sym = symbolic and draw(st.booleans())
    Bd: Any = SymDim.symbol("B") if use_sym else draw(st.sampled_from([1, 2]))
    Sd: Any = SymDim.symbol("S") if use_sym else draw(st.sampled_from(_DIMS))
    D = draw(st.sampled_from([2, 4, 8]))
    shapes = [(Bd, Sd, D)]
    if draw(st.booleans()):
        shapes.append(draw(st.sampled_from([(Bd, Sd, D), (D,), (Sd, D)])))
    f, b = new_function("main", [TensorType(s, DType.f32) for s in shapes], [f"x{i}" for i in range(len(shapes))],
                        Location("random.py", 1, 0))
    if use_sym:
        f.attrs["ik.sym_examples"] = ("B=2", "S=3")
    g = _Gen(draw, b, rng, {"B": 2, "S": 3})
    g.special = special
    g.values.extend(f.args)
    n = draw(st.integers(1, max_ops))
    for i in range(n):
        b.loc = Location("random.py", 10 + i, 0)
        g.step()
    outs = [g.values[-1]]
    if draw(st.booleans()) and len(g.values) > 2:
        outs.append(g.values[len(g.values) // 2])
    b.ret(*outs)
    m = Module([f])
    _KINDS[m] = frozenset(g.kinds)
    return m


__all__ = ["SPECIAL_KINDS", "drawn_kinds", "modules"]
