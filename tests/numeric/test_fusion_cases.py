"""Attention spellings built by hand, the way each exporter writes them, and their numeric tests.

:func:`build_attention` composes one spelling from independent choices — the
layout (BHSD, BSHD with permutes, 3-D bmm over flattened heads, JAX
dot_general, and ``jax.nn.dot_product_attention``'s grouped form), where the scale sits, how the mask is written, how K/V heads are
repeated (GQA), and how softmax is written — so the property test can draw
from the whole product and the example tests below can name the cases that
matter.  Other fusion test modules import these builders.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from irkit.interp import run
from irkit.ir import Builder, DType, Module, SymDim, TensorType, Value, verify
from irkit.ir.builder import module_of, new_function
from irkit.passmanager import PassContext, PassManager

LAYOUTS = ("bhsd", "bshd", "bmm3d", "jax", "native3d", "jax-grouped")
"""``jax-grouped``: ``jax.nn.dot_product_attention``'s einsums, Q reshaped to ``[B, T, K, G, D]`` (K
key/value heads, G query heads each) and contracted with K into ``[B, K, G, T, S]`` scores; it is
grouped-query attention by construction, so K and V always have ``HKV`` heads and are never repeated."""
SCALES = ("scores-mul", "scores-div", "q-mul", "k-mul", "kt-mul", "split-sqrt", "none", "tensor-const",
          "rsqrt-expr", "q-div")
MASKS = ("none", "causal-where", "causal-buffer", "causal-iota", "masked-fill-inf", "padding-additive",
         "padding-bool", "bias", "causal+padding", "additive-inf", "padding-finfo")
GQAS = ("none", "expand", "gather")
SOFTMAXES = ("op", "decomposed", "upcast")


@dataclass(frozen=True)
class Spelling:
    """One way of writing attention; see the module docstring."""

    layout: str = "bhsd"
    scale: str = "scores-mul"
    mask: str = "none"
    gqa: str = "none"
    softmax: str = "op"
    dtype: DType = DType.f32
    symbolic: bool = False

    @property
    def valid(self) -> bool:
        """Combinations the builder can express (GQA needs separate head dims; 3-D has no heads)."""
        if self.layout in ("bmm3d", "native3d", "jax-grouped") and self.gqa != "none":
            return False
        padding = self.mask.startswith("padding") or self.mask == "causal+padding"
        return not (self.layout == "native3d" and padding)

    @property
    def causal(self) -> bool:
        return self.mask in ("causal-where", "causal-buffer", "causal-iota", "masked-fill-inf", "causal+padding",
                             "additive-inf")


B, H, HKV, S, D = 2, 4, 2, 6, 8
SCALE = 1.0 / math.sqrt(D)


def _c(b: Builder, x: float, dt: DType, shape: tuple = ()) -> Value:
    return b.scalar(x, dt, shape)


def build_attention(sp: Spelling) -> Module:
    """A function computing attention in spelling ``sp``; arguments q, k, v (+ mask/bias inputs)."""
    dt = sp.dtype
    hkv = HKV if sp.gqa != "none" or sp.layout == "jax-grouped" else H
    bd: object = SymDim.symbol("B") if sp.symbolic else B
    sd: object = SymDim.symbol("S") if sp.symbolic else S
    if sp.layout in ("bhsd", "bmm3d"):
        qs, ks = (bd, H, sd, D), (bd, hkv, sd, D)
    elif sp.layout == "native3d":
        qs = ks = (SymDim.symbol("BH") if sp.symbolic else B * H, sd, D)
    else:
        qs, ks = (bd, sd, H, D), (bd, sd, hkv, D)
    args = [TensorType(qs, dt), TensorType(ks, dt), TensorType(ks, dt)]
    names = ["q", "k", "v"]
    if sp.mask in ("padding-additive", "padding-bool", "causal+padding", "padding-finfo"):
        args.append(TensorType((bd, sd), DType.i64 if sp.mask != "padding-bool" else DType.bool))
        names.append("attention_mask")
    if sp.mask == "bias":
        bias_shape = {"native3d": (sd, sd), "jax-grouped": (1, HKV, H // HKV, sd, sd)}.get(sp.layout, (1, H, sd, sd))
        args.append(TensorType(bias_shape, dt))
        names.append("bias")
    f, b = new_function("main", args, names)
    q, k, v = f.args[:3]
    extra = f.args[3] if len(f.args) > 3 else None

    # -- GQA: repeat K/V heads (on the head axis of the input layout)
    if sp.gqa != "none":
        hax = 1 if sp.layout == "bhsd" else 2
        k, v = (_repeat_heads(b, t, hax, H // HKV, sp.gqa) for t in (k, v))

    # -- scale on Q / K
    if sp.scale == "q-mul":
        q = b.mul(q, _c(b, SCALE, dt))
    elif sp.scale == "q-div":
        q = b.div(q, _c(b, 1.0 / SCALE, dt))
    elif sp.scale == "k-mul":
        k = b.mul(k, _c(b, SCALE, dt))
    elif sp.scale == "split-sqrt":
        q = b.mul(q, _c(b, math.sqrt(SCALE), dt))

    # -- Q·Kᵀ in the layout
    if sp.layout == "bhsd":
        kt = b.transpose(k, perm=(0, 1, 3, 2))
        if sp.scale == "kt-mul":
            kt = b.mul(kt, _c(b, SCALE, dt))
        if sp.scale == "split-sqrt":
            kt = b.mul(kt, _c(b, math.sqrt(SCALE), dt))
        s = b.matmul(q, kt)
    elif sp.layout == "bshd":
        q4 = b.transpose(q, perm=(0, 2, 1, 3))
        kt = b.transpose(k, perm=(0, 2, 3, 1))
        if sp.scale == "kt-mul":
            kt = b.mul(kt, _c(b, SCALE, dt))
        if sp.scale == "split-sqrt":
            kt = b.mul(kt, _c(b, math.sqrt(SCALE), dt))
        v = b.transpose(v, perm=(0, 2, 1, 3))
        s = b.matmul(q4, kt)
    elif sp.layout == "bmm3d":
        kt = b.transpose(k, perm=(0, 1, 3, 2))
        if sp.scale == "kt-mul":
            kt = b.mul(kt, _c(b, SCALE, dt))
        if sp.scale == "split-sqrt":
            kt = b.mul(kt, _c(b, math.sqrt(SCALE), dt))
        bh = bd * H if sp.symbolic else B * H  # type: ignore[operator]
        s3 = b.matmul(b.reshape(q, shape=(bh, sd, D)), b.reshape(kt, shape=(bh, D, sd)))
        s = b.reshape(s3, shape=(bd, H, sd, sd))
    elif sp.layout == "native3d":
        kt = b.transpose(k, perm=(0, 2, 1))
        if sp.scale == "kt-mul":
            kt = b.mul(kt, _c(b, SCALE, dt))
        if sp.scale == "split-sqrt":
            kt = b.mul(kt, _c(b, math.sqrt(SCALE), dt))
        s = b.matmul(q, kt)
    else:  # jax, jax-grouped: dot_general on [B, S, H, D]
        if sp.scale == "kt-mul":
            k = b.mul(k, _c(b, SCALE, dt))
        if sp.scale == "split-sqrt":
            k = b.mul(k, _c(b, math.sqrt(SCALE), dt))
        if sp.layout == "jax-grouped":  # einsum('BTKGH,BSKH->BKGTS')
            q5 = b.reshape(q, shape=(bd, sd, HKV, H // HKV, D))
            s = b.contract(q5, k, lhs_batch=(0, 2), rhs_batch=(0, 2), lhs_contract=(4,), rhs_contract=(3,))
            s = b.transpose(s, perm=(0, 1, 3, 2, 4))
        else:  # einsum('bqhd,bkhd->bhqk')
            s = b.contract(q, k, lhs_batch=(0, 2), rhs_batch=(0, 2), lhs_contract=(3,), rhs_contract=(3,))

    # -- scale on the scores
    if sp.scale == "scores-mul":
        s = b.mul(s, _c(b, SCALE, dt))
    elif sp.scale == "scores-div":
        s = b.div(s, _c(b, math.sqrt(D), dt))
    elif sp.scale == "tensor-const":
        s = b.mul(s, _c(b, SCALE, dt, (1,) * s.type.rank))
    elif sp.scale == "rsqrt-expr":
        s = b.mul(s, b.rsqrt(_c(b, float(D), dt)))

    # -- upcast before the mask (half-precision models)
    if sp.softmax == "upcast":
        s = b.cast(s, to=DType.f32)
    sdt = s.type.dtype
    rank = s.type.rank

    # -- mask
    def causal_keep() -> Value:
        if sp.mask == "causal-buffer":
            n = 16
            if rank == 3:  # heads flattened: a 2-D buffer
                buf = b.constant(np.tril(np.ones((n, n), dtype=bool)))
                return b.slice(buf, start=(0, 0), limit=(sd, sd))
            buf = b.constant(np.tril(np.ones((n, n), dtype=bool)).reshape(1, 1, n, n))
            return b.slice(buf, start=(0, 0, 0, 0), limit=(1, 1, sd, sd))
        if sp.mask == "causal-iota" or sp.symbolic:
            row = b.iota(shape=(sd, sd), axis=0, dtype=DType.i64)
            col = b.iota(shape=(sd, sd), axis=1, dtype=DType.i64)
            return b.le(col, row)
        return b.constant(np.tril(np.ones((S, S), dtype=bool)))

    def padding_keep() -> Value:
        assert extra is not None
        m4 = b.reshape(extra, shape=padded)
        return m4 if m4.type.dtype.is_bool else b.ne(m4, b.scalar(0, DType.i64))

    padded = (bd,) + (1,) * (rank - 2) + (sd,)  # a [B, S] padding mask against the scores
    finfo_min = float(np.finfo(sdt.np).min) if sdt != DType.bf16 else -3.3895e38
    if sp.mask in ("causal-where", "causal-buffer", "causal-iota"):
        s = b.where(causal_keep(), s, _c(b, finfo_min, sdt))
    elif sp.mask == "masked-fill-inf":
        dropped = b.create("ik.not", [causal_keep()]).results[0]  # masked_fill(~causal, -inf)
        s = b.where(dropped, _c(b, -math.inf, sdt), s)
    elif sp.mask == "padding-additive":
        assert extra is not None
        m4 = b.cast(b.reshape(extra, shape=padded), to=sdt)
        add = b.mul(b.sub(_c(b, 1.0, sdt), m4), _c(b, -10000.0, sdt))
        s = b.add(s, add)
    elif sp.mask == "padding-finfo":
        assert extra is not None
        m4 = b.cast(b.reshape(extra, shape=padded), to=sdt)
        add = b.mul(b.sub(_c(b, 1.0, sdt), m4), _c(b, finfo_min, sdt))
        s = b.add(s, add)
    elif sp.mask == "padding-bool":
        s = b.where(padding_keep(), s, _c(b, -math.inf, sdt))
    elif sp.mask == "causal+padding":
        s = b.where(causal_keep(), s, _c(b, -1e9 if sdt == DType.f32 else finfo_min, sdt))
        assert extra is not None
        m4 = b.cast(b.reshape(extra, shape=padded), to=sdt)
        s = b.add(s, b.mul(b.sub(_c(b, 1.0, sdt), m4), _c(b, -10000.0, sdt)))
    elif sp.mask == "bias":
        assert extra is not None
        bias = extra if extra.type.dtype == sdt else b.cast(extra, to=sdt)
        s = b.add(s, bias)
    elif sp.mask == "additive-inf":
        keep = causal_keep()
        s = b.add(s, b.where(keep, _c(b, 0.0, sdt), _c(b, -math.inf, sdt)))

    # -- softmax
    if sp.softmax == "decomposed":
        mx = b.reduce_max(s, axes=(rank - 1,), keepdims=True)
        e = b.exp(b.sub(s, mx))
        p = b.div(e, b.reduce_sum(e, axes=(rank - 1,), keepdims=True))
    else:
        p = b.softmax(s, axis=-1)
    if sp.softmax == "upcast":
        p = b.cast(p, to=dt)

    # -- P·V and the output layout
    if sp.layout == "bmm3d":
        bh = bd * H if sp.symbolic else B * H  # type: ignore[operator]
        o3 = b.matmul(b.reshape(p, shape=(bh, sd, sd)), b.reshape(v, shape=(bh, sd, D)))
        o = b.reshape(o3, shape=(bd, H, sd, D))
    elif sp.layout == "jax":
        o = b.contract(p, v, lhs_batch=(0, 1), rhs_batch=(0, 2), lhs_contract=(3,), rhs_contract=(1,))
        o = b.transpose(o, perm=(0, 2, 1, 3))
    elif sp.layout == "jax-grouped":  # einsum('BKGTS,BSKH->BTKGH'), then heads merged back
        o = b.contract(p, v, lhs_batch=(0, 1), rhs_batch=(0, 2), lhs_contract=(4,), rhs_contract=(1,))
        o = b.reshape(b.transpose(o, perm=(0, 3, 1, 2, 4)), shape=(bd, sd, H, D))
    else:
        o = b.matmul(p, v)
        if sp.layout == "bshd":
            o = b.transpose(o, perm=(0, 2, 1, 3))
    b.ret(o)
    m = module_of(f)
    verify(m)
    return m


def _repeat_heads(b: Builder, t: Value, hax: int, n: int, how: str) -> Value:
    """Repeat each head n times in a row along ``hax`` (repeat_interleave semantics)."""
    shape = tuple(t.type.shape)
    if how == "gather":
        idx = b.constant(np.repeat(np.arange(shape[hax]), n).astype(np.int64))
        return b.gather(t, idx, axis=hax)
    un = shape[:hax + 1] + (1,) + shape[hax + 1:]
    ex = shape[:hax + 1] + (n,) + shape[hax + 1:]
    out = shape[:hax] + (shape[hax] * n,) + shape[hax + 1:]
    return b.reshape(b.broadcast(b.reshape(t, shape=un), shape=ex), shape=out)


def spelling_inputs(m: Module, seed: int) -> list[np.ndarray]:
    """Random inputs; masks keep at least one key in every row (so no row is fully masked)."""
    rng = np.random.default_rng(seed)
    fn = m.entry
    b = {"B": B, "S": S, "BH": B * H}
    out = []
    for a in fn.args:
        shape = a.type.concrete_shape(b)
        if a.type.dtype.is_float:
            out.append(rng.standard_normal(shape).astype(a.type.dtype.np))
        else:
            x = rng.random(shape) < 0.7
            x[..., 0] = True
            out.append(x.astype(a.type.dtype.np))
    return out


def count_ops(m: Module, name: str) -> int:
    return sum(1 for op in m.walk() if op.name == name)


def fuse(m: Module, pipeline: str = "canonicalize,fuse-attention,cse,dce", check_rewrites: bool = True,
         explain: bool = False) -> PassContext:
    ctx = PassContext(check_rewrites=check_rewrites, explain=explain)
    PassManager(pipeline, ctx=ctx).run(m)
    return ctx


def assert_same_numbers(before: Module, after: Module, seeds: tuple[int, ...] = (0, 1, 2)) -> None:
    from irkit.check import compare, module_tolerance

    for seed in seeds:
        xs = spelling_inputs(before, seed)
        want = run(before, xs, float64=True)
        got = run(after, xs)
        tol = module_tolerance(before)
        for w, g in zip(want, got):
            c = compare(g, w, tol)
            assert c.ok, c.describe()


# ---------------------------------------------------------------------------
# Tests: one case per choice along each axis, everything else at its default

_AXES = [("layout", LAYOUTS), ("scale", SCALES), ("mask", MASKS), ("gqa", GQAS), ("softmax", SOFTMAXES)]
_CASES = [Spelling(**{k: v}) for k, vals in _AXES for v in vals]
_CASES += [Spelling(layout="bshd", gqa="expand", mask="causal-iota", scale="split-sqrt"),
           Spelling(layout="jax", gqa="expand", mask="padding-additive", softmax="upcast", dtype=DType.f16),
           Spelling(layout="bhsd", mask="causal-buffer", softmax="upcast", dtype=DType.f16, scale="scores-div"),
           Spelling(layout="bmm3d", mask="causal+padding", scale="q-div", symbolic=True),
           Spelling(layout="bshd", mask="padding-bool", gqa="gather", symbolic=True),
           Spelling(layout="native3d", mask="bias", scale="split-sqrt"),
           Spelling(layout="jax-grouped", mask="causal-iota", scale="kt-mul", softmax="decomposed"),
           Spelling(layout="jax-grouped", mask="padding-bool", symbolic=True),
           Spelling(layout="jax-grouped", mask="bias", softmax="upcast", dtype=DType.f16)]
_CASES = [c for c in dict.fromkeys(_CASES) if c.valid]


def _id(sp: Spelling) -> str:
    return "-".join(str(x) for x in (sp.layout, sp.scale, sp.mask, sp.gqa, sp.softmax, sp.dtype,
                                      "sym" if sp.symbolic else "static"))


@pytest.mark.parametrize("sp", _CASES, ids=_id)
def test_spelling_fuses_to_one_attention(sp: Spelling) -> None:
    before = build_attention(sp)
    after = build_attention(sp)
    fuse(after)
    assert count_ops(after, "ik.attention") == 1, _id(sp)
    assert count_ops(after, "ik.softmax") == 0
    att = next(op for op in after.walk() if op.name == "ik.attention")
    assert att.attrs.get("causal", False) == sp.causal
    want_scale = 1.0 if sp.scale == "none" else SCALE
    assert att.attrs["scale"] == pytest.approx(want_scale, rel=1e-3 if sp.dtype != DType.f32 else 1e-6)
    if sp.gqa != "none":
        assert att.operand(1).type.shape[1] == HKV, "K/V should be passed un-repeated"
    assert_same_numbers(before, after)
