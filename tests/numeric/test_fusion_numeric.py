"""Every norm, activation and elementwise fusion gives the numbers of the unfused module.

Each case is built by hand in one exporter's spelling, run through its fusion
pass with ``--check-rewrites`` on (every single rewrite is checked on its own
subgraph), and then the whole module is compared with the unfused one in the
interpreter on several seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from irkit.check import compare, module_tolerance
from irkit.interp import random_inputs, run
from irkit.ir import Builder, DType, Module, TensorType, Value, verify
from irkit.ir.builder import module_of, new_function
from irkit.passmanager import PassContext, PassManager

X = (2, 5, 16)


def T(*shape: int, dt: DType = DType.f32) -> TensorType:
    return TensorType(tuple(shape), dt)


def _w(b: Builder, dt: DType, seed: int, n: int = 16, base: float = 1.0) -> Value:
    rng = np.random.default_rng(seed)
    return b.constant((base + 0.1 * rng.standard_normal(n)).astype(dt.np))


# ---------------------------------------------------------------------------
# norms


def _layer_norm(form: str, dt: DType = DType.f32, upcast: bool = False) -> Module:
    f, b = new_function("main", [T(*X, dt=dt)], ["x"])
    x = b.cast(f.args[0], to=DType.f32) if upcast else f.args[0]
    c = x.type.dtype

    def mean(t: Value) -> Value:
        if form == "jax":
            s = b.reshape(b.reduce_sum(t, axes=(2,)), shape=(X[0], X[1], 1))
            return b.div(s, b.scalar(float(X[2]), c))
        return b.reduce_mean(t, axes=(2,), keepdims=True)

    mu = mean(x)
    d = b.sub(x, mu)
    if form == "fast":
        var = b.sub(mean(b.mul(x, x)), b.mul(mu, mu))
    elif form == "jax":
        d2 = b.sub(x, mu)
        var = mean(b.mul(d2, d2))
    else:
        var = mean(b.pow(d, b.scalar(2.0, c)))
    ve = b.add(var, b.scalar(1e-5, c))
    y = b.div(d, b.sqrt(ve)) if form == "torch" else b.mul(d, b.rsqrt(ve))
    y = b.add(b.mul(y, _w(b, c, 1)), _w(b, c, 2, base=0.0))
    if upcast:
        y = b.cast(y, to=dt)
    b.ret(y)
    return module_of(f)


def _rms_norm(form: str, dt: DType = DType.f32) -> Module:
    f, b = new_function("main", [T(*X, dt=dt)], ["x"])
    x = f.args[0]
    h = b.cast(x, to=DType.f32) if dt != DType.f32 else x
    v = b.add(b.reduce_mean(b.mul(h, h), axes=(2,), keepdims=True), b.scalar(1e-6, h.type.dtype))
    y = b.mul(h, b.rsqrt(v)) if form == "llama" else b.div(h, b.sqrt(v))
    if dt != DType.f32:
        y = b.cast(y, to=dt)
    b.ret(b.mul(_w(b, dt, 3), y))
    return module_of(f)


# ---------------------------------------------------------------------------
# activations


def _activation(form: str, dt: DType = DType.f32) -> Module:
    f, b = new_function("main", [T(*X, dt=dt), T(16, dt=dt)], ["x", "bias"])
    x = b.add(f.args[0], f.args[1])

    def s(v: float) -> Value:
        return b.scalar(v, dt)

    if form == "gelu_erf":
        y = b.mul(b.mul(s(0.5), x), b.add(s(1.0), b.erf(b.div(x, s(math.sqrt(2.0))))))
    elif form == "gelu_tanh_pow":
        inner = b.mul(s(math.sqrt(2 / math.pi)), b.add(x, b.mul(s(0.044715), b.pow(x, s(3.0)))))
        y = b.mul(b.mul(s(0.5), x), b.add(s(1.0), b.tanh(inner)))
    elif form == "gelu_tanh_cube":
        inner = b.mul(b.add(x, b.mul(b.mul(b.mul(x, x), x), s(0.044715))), s(0.7978845608028654))
        y = b.mul(x, b.mul(b.add(b.tanh(inner), s(1.0)), s(0.5)))
    elif form == "silu":
        y = b.mul(x, b.sigmoid(x))
    elif form == "silu_exp":
        y = b.div(x, b.add(s(1.0), b.exp(b.neg(x))))
    else:
        raise ValueError(form)
    b.ret(y)
    return module_of(f)


# ---------------------------------------------------------------------------
# elementwise regions


def _regions(form: str) -> Module:
    rng = np.random.default_rng(4)
    if form == "epilogue":
        f, b = new_function("main", [T(2, 5, 16)], ["x"])
        w = b.constant(rng.standard_normal((16, 32)).astype(np.float32))
        bias = b.constant(rng.standard_normal(32).astype(np.float32))
        h = b.add(b.matmul(b.reshape(f.args[0], shape=(10, 16)), w), bias)
        y = b.gelu(b.reshape(h, shape=(2, 5, 32)), approximate="tanh")
        b.ret(y)
    elif form == "chains":
        f, b = new_function("main", [T(4, 16), T(4, 16), T(16)], ["x", "y", "z"])
        x, y, z = f.args
        t = b.mul(x, y)
        a = b.exp(b.neg(b.add(t, z)))
        c = b.tanh(b.sub(t, b.scalar(1.0, DType.f32)))
        b.ret(b.add(a, b.broadcast(b.scalar(2.0, DType.f32), shape=(4, 16))), b.where(b.gt(c, x), c, y))
    else:
        raise ValueError(form)
    return module_of(f)


CASES: list[tuple[str, Callable[[], Module], str, str]] = [
    ("layer_norm-torch", lambda: _layer_norm("torch"), "fuse-norm", "ik.layer_norm"),
    ("layer_norm-rsqrt", lambda: _layer_norm("rsqrt"), "fuse-norm", "ik.layer_norm"),
    ("layer_norm-jax", lambda: _layer_norm("jax"), "fuse-norm", "ik.layer_norm"),
    ("layer_norm-fast-var", lambda: _layer_norm("fast"), "fuse-norm", "ik.layer_norm"),
    ("layer_norm-f16-upcast", lambda: _layer_norm("torch", DType.f16, upcast=True), "fuse-norm", "ik.layer_norm"),
    ("rms_norm-llama-bf16", lambda: _rms_norm("llama", DType.bf16), "fuse-norm", "ik.rms_norm"),
    ("rms_norm-t5", lambda: _rms_norm("t5"), "fuse-norm", "ik.rms_norm"),
    ("gelu-erf", lambda: _activation("gelu_erf"), "fuse-activation", "ik.gelu"),
    ("gelu-tanh-pow", lambda: _activation("gelu_tanh_pow"), "fuse-activation", "ik.gelu"),
    ("gelu-tanh-cube", lambda: _activation("gelu_tanh_cube"), "fuse-activation", "ik.gelu"),
    ("gelu-tanh-f16", lambda: _activation("gelu_tanh_pow", DType.f16), "fuse-activation", "ik.gelu"),
    ("silu", lambda: _activation("silu"), "fuse-activation", "ik.silu"),
    ("silu-exp", lambda: _activation("silu_exp"), "fuse-activation", "ik.silu"),
    ("epilogue", lambda: _regions("epilogue"), "fuse-elementwise", "ik.fused"),
    ("chains", lambda: _regions("chains"), "fuse-elementwise", "ik.fused"),
]


@pytest.mark.parametrize("name, build, pass_name, fused_op", CASES, ids=[c[0] for c in CASES])
def test_fusion_keeps_numbers(name: str, build: Callable[[], Module], pass_name: str, fused_op: str) -> None:
    before, after = build(), build()
    verify(before)
    ctx = PassContext(check_rewrites=True)
    PassManager(f"canonicalize,{pass_name},cse,dce", ctx=ctx).run(after)
    assert any(op.name == fused_op for op in after.walk()), f"{name}: no {fused_op}"
    assert ctx.stats[pass_name].get("rewrites-checked", 0) >= 1
    tol = module_tolerance(before)
    for seed in (0, 1, 2, 3):
        xs = random_inputs(before.entry, seed)
        want = run(before, xs, float64=True)
        got = run(after, xs)
        for w, g in zip(want, got):
            c = compare(g, w, tol)
            assert c.ok, f"{name} seed {seed}: {c.describe()}"


def test_elementwise_regions_do_not_duplicate_shared_values() -> None:
    m = _regions("chains")
    PassManager("fuse-elementwise", ctx=PassContext()).run(m)
    top = [op.name for op in m.entry.body]
    assert top.count("ik.mul") == 1, "x * y has two users and must stay outside the regions"
    assert top.count("ik.fused") == 3
