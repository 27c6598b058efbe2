"""Failures the random-graph reliability run (`make fuzz`, RELIABILITY.md) found, each as the
smallest graph that showed it, checked against the float64 oracle."""

from __future__ import annotations

import numpy as np
import pytest

from irkit.check import compare_all, module_tolerance
from irkit.interp import run
from irkit.ir.builder import new_function
from irkit.ir.core import Location, Module
from irkit.ir.types import DType, TensorType

# Every value class a cast must round like the oracle: normals over the whole f32 range, halfway
# cases, subnormals, values that overflow bf16, NaN, +-Inf, +-0.
_EDGE = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.3961776e38, 3.4e38, -3.4e38, 1e-45, -1e-45, 1.00390625,
                  1.01171875, 9.18e-39, -5.9e-39, 65504.0, 3.3895314e38, 1.17549435e-38, 2.0**-133, 1.5 * 2.0**-133,
                  -1.5 * 2.0**-133, 2.5 * 2.0**-133], np.float32)


def _round_trip_module(mid: DType, n: int) -> Module:
    """``r = f32(mid(x))`` and ``x > r``: the comparison is true exactly where the round trip rounded down."""
    f, b = new_function("main", [TensorType((n,), DType.f32)], ["x0"], Location("regression.py", 1, 0))
    x = f.args[0]
    r = b.cast(b.cast(x, to=mid), to=DType.f32)
    b.ret(r, b.gt(x, r))
    return Module([f])


def _runnable(name: str) -> bool:
    from irkit.targets.registry import get_target, load_targets

    load_targets()
    try:
        return get_target(name).availability().can_run
    except KeyError:
        return False


def _inputs(n: int, subnormals: bool = True) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    edge = _EDGE if subnormals else _EDGE[(_EDGE == 0) | ~(np.abs(_EDGE) < np.finfo(np.float32).tiny)]
    k = n - len(edge)
    wide = (rng.standard_normal(k) * 10.0 ** rng.integers(-40 if subnormals else -36, 38, k)).astype(np.float32)
    return [np.concatenate([wide, edge])]


def _bitwise_as_oracle(target: str, m: Module, xs: list[np.ndarray]) -> None:
    from irkit.targets.registry import get_target

    t = get_target(target)
    got = t.run(t.lower(m.clone(), {}), xs)
    want = run(m, xs, float64=True)
    rep = compare_all(got, want, module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]
    for g, w in zip(got, want):  # a cast rounds exactly: the same bits as the interpreter's
        g32, w32 = np.asarray(g).astype(np.float32), np.asarray(w).astype(np.float32)
        same = (g32 == w32) | (np.isnan(g32) & np.isnan(w32))
        assert same.all(), (xs[0][~same][:8], g32[~same][:8], w32[~same][:8])


@pytest.mark.parametrize("target, mid", [
    (t, d) for t in ("reference", "ort", "xla-cpu", "tvm-llvm") for d in (DType.bf16, DType.f16)])
def test_half_round_trip_rounds(target: str, mid: DType) -> None:
    """2026-12-04, tvm-llvm: ``x > f32(bf16(x))`` (a random graph's cast step, then a where on it) was
    false everywhere: the unstored round trip was not rounded. Every target must round like the oracle."""
    if not _runnable(target):
        pytest.skip(f"{target} does not run here")
    # XLA:CPU treats float32 subnormals as zero (x > 0 is false for x = 1e-45; jax.jit does the same),
    # the CPU mode XLA compiles for (denormals-are-zero, as RELIABILITY.md notes); it gets normal values.
    _bitwise_as_oracle(target, _round_trip_module(mid, 64), _inputs(64, subnormals=target != "xla-cpu"))


def _softmax_row_module(value: float) -> Module:
    """A random graph's special-value step (``value`` at column 4 of row 0, by an iota-compare
    ``where``) feeding the fused softmax and log-softmax, as ``fuse-elementwise`` leaves them."""
    shape = (2, 3, 8)
    f, b = new_function("main", [TensorType(shape, DType.f32)], ["x0"], Location("regression.py", 1, 0))
    x = f.args[0]
    cond = b.create("ik.and", [b.eq(b.iota(shape=shape, axis=2, dtype=DType.i64), b.scalar(4, DType.i64)),
                               b.eq(b.iota(shape=shape, axis=1, dtype=DType.i64), b.scalar(0, DType.i64))]).results[0]
    x = b.where(cond, b.scalar(value, DType.f32), x)
    b.ret(b.softmax(x, axis=-1), b.log_softmax(x, axis=-1))
    return Module([f])


@pytest.mark.parametrize("target, value", [
    (t, v) for t in ("reference", "ort", "xla-cpu", "tvm-llvm") for v in (np.nan, -np.inf, np.inf)])
def test_softmax_row_with_a_special_value(target: str, value: float) -> None:
    """2026-12-04, xla-cpu (fuse pipeline): a softmax row holding one NaN came out finite (XLA:CPU
    compiled the row's exp so that exp(NaN) was finite); the oracle's row is all NaN. A row holding
    +Inf is all NaN too (Inf - Inf), as in torch, JAX and onnxruntime: the oracle used to give zeros
    and one NaN there."""
    if not _runnable(target):
        pytest.skip(f"{target} does not run here")
    from irkit.targets.registry import get_target

    m = _softmax_row_module(value)
    xs = [np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)]
    t = get_target(target)
    got = t.run(t.lower(m.clone(), {}), xs)
    want = run(m, xs, float64=True)
    assert np.isnan(want[0][0, 0]).any() or np.isinf(value)  # the row really holds the special value
    rep = compare_all(got, want, module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]


def _attention_module(where: str, value: float, causal: bool) -> tuple[Module, list[np.ndarray]]:
    """The fused attention op with ``value`` put into one element of q, k or v (by the input)."""
    shape = (1, 2, 3, 4)
    f, b = new_function("main", [TensorType(shape, DType.f32)] * 3, ["q", "k", "v"],
                        Location("regression.py", 1, 0))
    b.ret(b.attention(*f.args, None, scale=0.5, causal=causal))
    rng = np.random.default_rng(2)
    xs = [np.abs(rng.standard_normal(shape)).astype(np.float32) + 0.25 for _ in range(3)]
    xs["qkv".index(where)][0, 0, 0, 0] = value  # key 0 / query 0 / value row 0, head 0
    return Module([f]), xs


# onnxruntime 1.32's opset-23 Attention (what the ort target emits for a causal attention without a
# mask) gives a query row whose only visible score is -Inf the value row of that key (as if the score
# were finite); ik.attention's row is zeros (no key with a weight). Measured, not worked around: a
# guard would need the scores computed a second time.
_ORT_CAUSAL_NEG_INF_ROW = pytest.mark.xfail(
    reason="onnxruntime Attention(is_causal=1): a row whose visible scores are all -Inf is not zeros",
    strict=True)


@pytest.mark.parametrize("target", ["reference", "ort", "xla-cpu", "tvm-llvm"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("where, value", [("k", np.inf), ("v", -np.inf), ("q", np.nan), ("k", -np.inf)],
                         ids=["k+inf", "v-inf", "q-nan", "k-inf"])
def test_attention_with_a_special_value(target: str, where: str, value: float, causal: bool,
                                        request: pytest.FixtureRequest) -> None:
    """2026-12-04, tvm-llvm (fuse pipeline): a random graph's -Inf reached K and V of an attention that
    ``fuse-attention`` fused; a score of +Inf gave the key's value row (+-Inf) where the oracle has NaN:
    the kernel's polynomial exp clamped the NaN of +Inf - +Inf (``common.softmax_weight`` keeps it)."""
    if not _runnable(target):
        pytest.skip(f"{target} does not run here")
    if target == "ort" and causal and where == "k" and value < 0:
        request.applymarker(_ORT_CAUSAL_NEG_INF_ROW)
    from irkit.targets.registry import get_target

    m, xs = _attention_module(where, value, causal)
    t = get_target(target)
    got = t.run(t.lower(m.clone(), {}), xs)
    want = run(m, xs, float64=True)
    if where != "k" or value > 0:  # a key of -Inf only masks that key (q > 0 here): finite rows
        assert not np.isfinite(want[0]).all()  # the special value reaches the output
    rep = compare_all(got, want, module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]
