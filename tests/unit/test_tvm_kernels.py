"""Hand-scheduled TVM kernels: numerics against NumPy float64, CUDA source/PTX generation.

Every CPU kernel is built, run on random (non-zero) inputs and compared with a float64
reference under the dtype's tolerance. CUDA kernels are built and compiled to PTX with nvcc
(no GPU is needed; numerics on a GPU are the ``gpu``-marked follow-up). Shapes are small and
deliberately ragged (37, 50, 61 ...) so every tile edge and padding path runs; larger cases are
``slow``.
"""

from __future__ import annotations

import math
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")
ml_dtypes = pytest.importorskip("ml_dtypes")
scipy_special = pytest.importorskip("scipy.special")

from irkit.targets.tvm_kernels import attention as at
from irkit.targets.tvm_kernels import common as c
from irkit.targets.tvm_kernels import conv as cv
from irkit.targets.tvm_kernels import elementwise as ew
from irkit.targets.tvm_kernels import graph as g
from irkit.targets.tvm_kernels import matmul as mm
from irkit.targets.tvm_kernels import movement as mv
from irkit.targets.tvm_kernels import reduce as rd

NP_DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# (rtol, atol) relative to the float64 oracle, for values of magnitude ~1
TOL = {"float32": (2e-5, 2e-5), "float16": (4e-3, 4e-3), "bfloat16": (3e-2, 3e-2)}

needs_nvcc = pytest.mark.skipif(c.find_nvcc() is None, reason="nvcc not found (CUDA_HOME/PATH)")


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    # a fresh seed per test, stable across runs
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def rand(
    rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float32", scale: float = 1.0
) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(NP_DTYPES[dtype])


def close(got: np.ndarray, ref: np.ndarray, dtype: str, scale: float = 1.0) -> None:
    """Compare against the float64 oracle; ``scale`` widens atol for sums of many terms."""
    rtol, atol = TOL[dtype]
    np.testing.assert_allclose(
        got.astype(np.float64), ref, rtol=rtol, atol=atol * scale, equal_nan=True
    )


# --------------------------------------------------------------------------- target


def test_host_cpu_is_detected_not_assumed() -> None:
    cpu = c.host_cpu()
    target = c.cpu_target()
    assert target.attrs["mcpu"] == cpu
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text() if cpuinfo.exists() else ""
    if "flags" in flags:
        has512 = re.search(r"\bavx512f\b", flags) is not None
        assert c.simd_lanes(target) == (16 if has512 else 8)


# --------------------------------------------------------------------------- matmul


def matmul_ref(a, b, transpose_b=False, bias=None, act=None):
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    y = a @ b
    if bias is not None:
        y = y + bias.astype(np.float64)
    if act == "gelu_erf":
        y = 0.5 * y * (1 + scipy_special.erf(y / math.sqrt(2)))
    elif act == "gelu_tanh":
        y = 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3)))
    elif act == "silu":
        y = y * scipy_special.expit(y)
    elif act == "relu":
        y = np.maximum(y, 0)
    return y


@pytest.mark.parametrize(
    "a_shape,b_shape,dtype,transpose_b,bias,act,tiles",
    [
        # odd sizes, one tile
        ((37, 50), (50, 61), "float32", False, False, None, {}),
        # odd sizes over several small tiles: padding on M, N and K tile edges
        (
            (37, 50),
            (50, 61),
            "float32",
            False,
            True,
            "relu",
            {"tile_m": 16, "tile_n": 32, "tile_k": 16},
        ),
        # batch broadcasting [2,3] x [3], transposed B, bias + erf GELU
        ((2, 3, 37, 50), (3, 61, 50), "float32", True, True, "gelu_erf", {}),
        # broadcasting size-1 batch dims on both sides
        ((4, 1, 20, 33), (1, 5, 33, 17), "float32", False, True, "silu", {}),
        ((2, 40, 96), (96, 72), "float16", False, True, "gelu_tanh", {}),
        ((2, 40, 96), (72, 96), "bfloat16", True, True, "relu", {}),
        # K = 1 (an outer product) and a one-wide k tile: padded to a k step of 2
        ((1, 16, 1), (1, 1, 40), "float32", False, False, None, {}),
        ((1, 16, 5), (1, 5, 40), "float32", False, True, None, {"tile_k": 1}),
        # batched M = N = 1 (a one-token attention's q @ k^T): no row or column loop in the tile, the
        # epilogue must not vectorise the tile loop (found by the 150-graph fuzz of tvm-llvm)
        ((2, 2, 1, 4), (2, 2, 4, 1), "float32", False, False, None, {}),
        ((2, 3, 1, 7), (2, 3, 1, 7), "float32", True, True, "relu", {}),
    ],
)
def test_matmul_cpu(rng, a_shape, b_shape, dtype, transpose_b, bias, act, tiles):
    a = rand(rng, a_shape, dtype)
    b = rand(rng, b_shape, dtype)
    n = b_shape[-2] if transpose_b else b_shape[-1]
    args = [a, b]
    bias_v = None
    if bias:
        bias_v = rand(rng, (n,), dtype)
        args.append(bias_v)
    k = mm.matmul(
        a_shape, b_shape, dtype, transpose_b=transpose_b, bias=bias, activation=act, **tiles
    )
    (out,) = c.run(k, *args)
    ref = matmul_ref(a, b, transpose_b, bias_v, act)
    assert out.shape == ref.shape and str(out.dtype) == dtype
    close(out, ref, dtype, scale=math.sqrt(a_shape[-1]))


@pytest.mark.parametrize(
    "a_shape,b_shape,dtype,transpose_b,act,tiles",
    [
        # a constant weight packed at build time: ragged M, N and K over several tiles
        ((37, 50), (50, 61), "float32", False, "gelu_tanh", {"tile_m": 16, "tile_n": 32, "tile_k": 16}),
        # batched activations against one 2-D weight, transposed, bf16
        ((2, 40, 96), (72, 96), "bfloat16", True, None, {}),
    ],
)
def test_matmul_cpu_prepacked_b(rng, a_shape, b_shape, dtype, transpose_b, act, tiles):
    a = rand(rng, a_shape, dtype)
    b = rand(rng, b_shape, dtype)
    n = b_shape[-2] if transpose_b else b_shape[-1]
    bias_v = rand(rng, (n,), dtype)
    k = mm.matmul(a_shape, b_shape, dtype, transpose_b=transpose_b, bias=True, activation=act,
                  b_packed=True, **tiles)
    assert "B_pad" not in c.inspect(k).scheduled_tir  # nothing is packed per call
    packed = mm.pack_b(b, k.config["padded"], k.config["micro"][1], transpose_b=transpose_b)
    (out,) = c.run(k, a, packed, bias_v)
    ref = matmul_ref(a, b, transpose_b, bias_v, act)
    close(out, ref, dtype, scale=math.sqrt(a_shape[-1]))


def test_matmul_prepacked_b_is_cpu_and_2d_only():
    with pytest.raises(ValueError, match="2-D"):
        mm.matmul((2, 4, 5), (2, 5, 7), b_packed=True)


def test_matmul_rejects_bad_shapes():
    with pytest.raises(ValueError, match="contraction"):
        mm.matmul((4, 5), (6, 7))
    with pytest.raises(ValueError, match="broadcast"):
        mm.matmul((2, 4, 5), (3, 5, 7))


def test_matmul_cpu_artifacts_show_simd_fma():
    k = mm.matmul((64, 64), (64, 64))
    art = c.inspect(k)
    assert "define" in art.llvm_ir and "vfmadd" in art.asm
    reg = "zmm" if c.simd_lanes(k.target) == 16 else "ymm"
    assert reg in art.asm
    assert "A_pad" in art.scheduled_tir and art.compile_s > 0


@pytest.mark.slow
def test_matmul_cpu_large_default_tiles(rng):
    a, b = rand(rng, (256, 320)), rand(rng, (320, 384))
    k = mm.matmul(a.shape, b.shape)
    (out,) = c.run(k, a, b)
    close(out, matmul_ref(a, b), "float32", scale=math.sqrt(320))


# --------------------------------------------------------------------------- attention


def attention_case(
    rng,
    q_shape,
    kv_shape,
    dtype="float32",
    bias_shape=None,
    causal=False,
    causal_offset=0,
    mask_rows=None,
    mask_value=-np.inf,
    **kw,
):
    q, k, v = rand(rng, q_shape, dtype), rand(rng, kv_shape, dtype), rand(rng, kv_shape, dtype)
    args = [q, k, v]
    bias = None
    if bias_shape is not None:
        bias = rand(rng, bias_shape, "float32")
        if mask_rows is not None:
            bias[..., mask_rows, :] = mask_value
        bias = bias.astype(NP_DTYPES[dtype])
        args.append(bias)
    ker = at.attention(
        q_shape,
        kv_shape,
        dtype,
        bias_shape=bias_shape,
        causal=causal,
        causal_offset=causal_offset,
        **kw,
    )
    (out,) = c.run(ker, *args)
    return out, (q, k, v, bias)


@pytest.mark.parametrize(
    "q_shape,kv_shape,dtype,bias_shape,causal,offset,tiles",
    [
        ((1, 2, 37, 16), (1, 2, 50, 16), "float32", None, False, 0, {}),
        # GQA (4 query heads share 2 kv heads), causal, several query/key tiles
        ((2, 4, 37, 16), (2, 2, 61, 16), "float32", None, True, 0, {"tile_q": 16, "tile_k": 16}),
        # MQA + bias broadcast over batch and heads
        ((1, 4, 20, 32), (1, 1, 20, 32), "float32", (1, 1, 20, 20), False, 0, {}),
        # bias broadcast over batch only, causal
        ((2, 2, 24, 16), (2, 2, 24, 16), "float32", (2, 24, 24), True, 0, {}),
        # bottom-right causal (KV cache): Sq < Skv
        ((1, 2, 7, 16), (1, 2, 30, 16), "float32", None, True, 23, {}),
        ((1, 2, 37, 32), (1, 1, 45, 32), "float16", None, True, 0, {}),
        ((1, 2, 37, 32), (1, 1, 45, 32), "bfloat16", (37, 45), False, 0, {}),
        # fewer query rows than a register block (decode-like), keys not a multiple of the lanes
        ((2, 2, 1, 16), (2, 2, 5, 16), "float32", (2, 1, 1, 5), False, 0, {}),
        ((1, 3, 3, 24), (1, 3, 13, 24), "float32", None, True, 10, {}),
        # head dim that is not a whole number of vectors; tiles that do not divide the sequence
        ((1, 2, 45, 20), (1, 2, 45, 20), "float32", None, True, 0, {"tile_q": 8, "tile_k": 24}),
    ],
)
def test_attention_cpu(rng, q_shape, kv_shape, dtype, bias_shape, causal, offset, tiles):
    out, (q, k, v, bias) = attention_case(
        rng, q_shape, kv_shape, dtype, bias_shape, causal, offset, **tiles
    )
    ref = at.reference(q, k, v, bias, causal=causal, causal_offset=offset)
    assert out.shape == q_shape
    close(out, ref, dtype)


def test_attention_fully_masked_rows_are_zero_like_the_reference(rng):
    """A row with every key masked gives zeros (FlashAttention's, onnxruntime's and the IR
    reference's convention), never the 0/0 NaN of a naive softmax."""
    # rows 2 and 5 masked by -inf bias; causal with a negative offset also masks rows 0..2
    out, (q, k, v, bias) = attention_case(
        rng, (1, 2, 9, 16), (1, 2, 30, 16), bias_shape=(1, 1, 9, 30), mask_rows=[5]
    )
    ref = at.reference(q, k, v, bias)
    assert (out[:, :, 5] == 0).all() and (ref[:, :, 5] == 0).all()
    assert np.isfinite(out).all() and np.abs(out[:, :, :5]).max() > 0
    close(out, ref, "float32")
    q, k, v = rand(rng, (1, 1, 9, 16)), rand(rng, (1, 1, 6, 16)), rand(rng, (1, 1, 6, 16))
    ker = at.attention(q.shape, k.shape, causal=True, causal_offset=-3)
    (out,) = c.run(ker, q, k, v)
    ref = at.reference(q, k, v, causal=True, causal_offset=-3)
    assert (out[0, 0, :3] == 0).all() and np.isfinite(out[0, 0, 3:]).all() and np.abs(out[0, 0, 3:]).max() > 0
    close(out, ref, "float32")


def test_attention_finfo_min_mask_stays_finite(rng):
    out, (q, k, v, bias) = attention_case(
        rng,
        (1, 2, 9, 16),
        (1, 2, 30, 16),
        bias_shape=(1, 1, 9, 30),
        mask_rows=[3],
        mask_value=np.finfo(np.float32).min,
    )
    assert np.isfinite(out).all()
    # the mask absorbs the scores in float32: the row is the mean of v, as the reference says
    np.testing.assert_allclose(out[:, :, 3], v.mean(axis=2), rtol=1e-5, atol=1e-5)
    close(out, at.reference(q, k, v, bias, dtype=np.float32).astype(np.float64), "float32")


def test_attention_cpu_nan_and_inf_rows_follow_the_reference(rng):
    """A NaN score makes its row NaN and a row without keys stays 0, as the reference says; the
    CPU kernel tests NaN with a comparison that vectorises, so check it still sees NaN."""
    q, k, v = rand(rng, (1, 1, 6, 16)), rand(rng, (1, 1, 40, 16)), rand(rng, (1, 1, 40, 16))
    bias = rand(rng, (1, 1, 6, 40))
    bias[0, 0, 1, 7] = np.nan
    bias[0, 0, 4, :] = -np.inf
    ker = at.attention(q.shape, k.shape, bias_shape=bias.shape)
    (out,) = c.run(ker, q, k, v, bias)
    ref = at.reference(q, k, v, bias)
    assert np.isnan(out[0, 0, 1]).all() and np.isnan(ref[0, 0, 1]).all()
    assert (out[0, 0, 4] == 0).all()
    keep = [0, 2, 3, 4, 5]
    close(out[:, :, keep], ref[:, :, keep], "float32")


def test_attention_cpu_softmax_is_vector_code():
    """The online softmax's exp polynomial is packed SIMD code, not one scalar exp per score (a
    ``Select`` over ``isnan`` once made LLVM scalarise the whole loop, 4x slower)."""
    k = at.attention((2, 2, 64, 16), (2, 2, 64, 16), bias_shape=(2, 1, 1, 64))
    asm = c.inspect(k).asm
    packed = len(re.findall(r"\tvfmadd\d+ps\b", asm))
    scalar = len(re.findall(r"\tvfmadd\d+ss\b", asm))
    # the one scalar polynomial is the per-row rescale exp(m_old - m_new)
    assert packed > 50 and scalar <= 12, (packed, scalar)


@pytest.mark.slow
def test_attention_cpu_gpt2_shape(rng):
    out, (q, k, v, _) = attention_case(rng, (1, 12, 256, 64), (1, 12, 256, 64), causal=True)
    close(out, at.reference(q, k, v, causal=True), "float32")


# --------------------------------------------------------------------------- elementwise


def test_elementwise_tree_with_broadcast(rng):
    x, y, z = rand(rng, (3, 1, 17)), rand(rng, (5, 1)), rand(rng, (17,))
    i0, i1, i2 = ew.input(0), ew.input(1), ew.input(2)
    silu = ew.binary("mul", i0, ew.unary("sigmoid", i0))
    expr = ew.binary(
        "add",
        ew.where(ew.binary("gt", i0, ew.const(0.0)), silu, ew.unary("tanh", i0)),
        ew.binary(
            "div",
            ew.binary(
                "sub", ew.unary("erf", i1), ew.unary("exp", ew.binary("min", i2, ew.const(1.0)))
            ),
            ew.unary("sqrt", ew.binary("add", ew.unary("abs", i2), ew.const(1.0))),
        ),
    )
    k = ew.elementwise(expr, [x.shape, y.shape, z.shape], ["float32"] * 3)
    (out,) = c.run(k, x, y, z)
    assert out.shape == (3, 5, 17)
    close(out, ew.evaluate_reference(expr, [x, y, z]), "float32")


def test_elementwise_more_ops_and_multiple_outputs(rng):
    x = np.abs(rand(rng, (4, 33))) + 0.1
    y = rand(rng, (33,))
    i0, i1 = ew.input(0), ew.input(1)
    exprs = [
        ew.binary("pow", i0, ew.const(1.5)),
        ew.binary("max", ew.unary("log", i0), ew.unary("rsqrt", i0)),
        ew.binary("le", i0, ew.unary("relu", i1)),  # bool output
        ew.cast(ew.binary("mul", i0, i1), "float16"),
    ]
    k = ew.elementwise(exprs, [x.shape, y.shape], ["float32", "float32"])
    outs = c.run(k, x, y)
    for out, e in zip(outs, exprs, strict=True):
        ref = ew.evaluate_reference(e, [x, y])
        if out.dtype == np.bool_:
            np.testing.assert_array_equal(out, ref)
        else:
            close(out, ref, "float16" if out.dtype == np.float16 else "float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_elementwise_half_inputs(rng, dtype):
    x = rand(rng, (6, 40), dtype)
    i0 = ew.input(0)
    gelu = ew.binary(
        "mul",
        ew.binary("mul", i0, ew.const(0.5, dtype)),
        ew.binary(
            "add",
            ew.const(1.0, dtype),
            ew.unary("erf", ew.binary("mul", i0, ew.const(1 / math.sqrt(2), dtype))),
        ),
    )
    k = ew.elementwise(gelu, [x.shape], [dtype])
    (out,) = c.run(k, x)
    assert str(out.dtype) == dtype
    close(out, ew.evaluate_reference(gelu, [x]), dtype)


def test_elementwise_fast_math_edge_values():
    x = np.array(
        [-np.inf, -100.0, -1e-8, 0.0, 3e-6, 2.5, 50.0, np.inf, np.nan] * 2, dtype=np.float32
    )
    for op in ("exp", "tanh", "erf", "sigmoid"):
        k = ew.elementwise(ew.unary(op, ew.input(0)), [x.shape], ["float32"])
        (out,) = c.run(k, x)
        ref = ew.evaluate_reference(ew.unary(op, ew.input(0)), [x])
        np.testing.assert_allclose(out, ref, rtol=2e-6, atol=1e-7, equal_nan=True, err_msg=op)


@pytest.mark.parametrize("op", ["exp", "tanh", "erf", "sigmoid"])
def test_elementwise_transcendentals_are_vector_code(op):
    """exp/tanh/erf/sigmoid stay packed SIMD code (their NaN test is on the bits: a ``Select`` over
    ``isnan`` next to a polynomial is what scalarised the softmax and attention loops)."""
    k = ew.elementwise(ew.unary(op, ew.input(0)), [(256,)], ["float32"])
    asm = c.inspect(k).asm
    packed = len(re.findall(r"\tv\w+ps\b", asm))
    scalar = len(re.findall(r"\tv(?:fmadd|fmsub|fnmadd|mul|add|sub|round)\w*ss\b", asm))
    assert packed > 20 and scalar <= packed // 4, (op, packed, scalar)


def test_softmax_is_vector_code():
    """The row softmax's exp is packed code (with ``isnan`` it was one scalar exp per element)."""
    asm = c.inspect(rd.softmax((8, 64))).asm
    packed = len(re.findall(r"\tvfmadd\w+ps\b", asm))
    scalar = len(re.findall(r"\tvfmadd\w+ss\b", asm))
    assert packed > 10 and scalar <= packed // 4, (packed, scalar)


def test_elementwise_rejects_mixed_dtypes():
    with pytest.raises(ValueError, match="explicit cast"):
        ew.elementwise(
            ew.binary("add", ew.input(0), ew.input(1)), [(4,), (4,)], ["float32", "float16"]
        )


# --------------------------------------------------------------------------- reductions / norms


def test_softmax_with_masked_rows(rng):
    x = rand(rng, (3, 5, 37), scale=3.0)
    x[1, 2, :] = -np.inf
    x[0, 0, 3] = -np.inf
    (out,) = c.run(rd.softmax(x.shape), x)
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x64 - x64.max(-1, keepdims=True))
        ref = e / e.sum(-1, keepdims=True)
    assert np.isnan(out[1, 2]).all()
    close(out, ref, "float32")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_layer_norm_and_rms_norm(rng, dtype):
    x = rand(rng, (3, 7, 45), dtype, scale=2.0) + NP_DTYPES[dtype](1.0)
    w, b = rand(rng, (45,), dtype), rand(rng, (45,), dtype)
    x64, w64, b64 = (t.astype(np.float64) for t in (x, w, b))
    (out,) = c.run(rd.layer_norm(x.shape, dtype), x, w, b)
    mu = x64.mean(-1, keepdims=True)
    ref = (x64 - mu) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5) * w64 + b64
    close(out, ref, dtype, scale=4)
    (out,) = c.run(rd.rms_norm(x.shape, dtype), x, w)
    ref = x64 / np.sqrt((x64**2).mean(-1, keepdims=True) + 1e-6) * w64
    close(out, ref, dtype, scale=4)


def test_layer_norm_without_affine(rng):
    x = rand(rng, (4, 19))
    (out,) = c.run(rd.layer_norm(x.shape, weight=False, bias=False), x)
    x64 = x.astype(np.float64)
    close(
        out,
        (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5),
        "float32",
    )


@pytest.mark.parametrize(
    "op,axes,keepdims",
    [("sum", (1,), False), ("mean", (2,), True), ("max", (0, 2), False), ("min", None, False)],
)
def test_reduce(rng, op, axes, keepdims):
    x = rand(rng, (3, 5, 37))
    (out,) = c.run(rd.reduce(x.shape, "float32", op, axes, keepdims=keepdims), x)
    ref = getattr(np, op)(x.astype(np.float64), axis=axes, keepdims=keepdims)
    assert out.shape == ref.shape
    close(out, ref, "float32", scale=10)


# --------------------------------------------------------------------------- data movement, conv


def test_movement_ops(rng):
    x = rand(rng, (2, 3, 5, 7))
    (o,) = c.run(mv.reshape(x.shape, (6, -1)), x)
    np.testing.assert_array_equal(o, x.reshape(6, -1))
    (o,) = c.run(mv.transpose(x.shape, (0, 2, 3, 1)), x)
    np.testing.assert_array_equal(o, x.transpose(0, 2, 3, 1))
    (o,) = c.run(mv.slice_(x.shape, (0, 1, -4, 6), (2, 3, 5, 0), (1, 1, 2, -2)), x)
    np.testing.assert_array_equal(o, x[0:2, 1:3, -4:5:2, 6:0:-2])
    y = rand(rng, (2, 4, 5, 7))
    (o,) = c.run(mv.concat([x.shape, y.shape], 1), x, y)
    np.testing.assert_array_equal(o, np.concatenate([x, y], 1))
    (o,) = c.run(mv.pad(x.shape, (0, 1, 2, 0), (1, 0, 1, 3), value=1.5), x)
    np.testing.assert_array_equal(
        o, np.pad(x, ((0, 1), (1, 0), (2, 1), (0, 3)), constant_values=1.5)
    )


def test_gather_embedding(rng):
    table = rand(rng, (50, 24))
    idx = rng.integers(-50, 50, (3, 4)).astype(np.int64)  # negatives wrap like ONNX Gather
    (o,) = c.run(mv.gather(table.shape, idx.shape), table, idx)
    np.testing.assert_array_equal(o, np.take(table, idx, axis=0))


@pytest.mark.parametrize(
    "x_shape,w_shape,kw",
    [
        ((1, 3, 13, 17), (8, 3, 3, 3), {"padding": 1}),
        (
            (2, 4, 12, 12),
            (6, 2, 3, 3),
            {"stride": 2, "padding": (1, 0), "groups": 2, "bias": True, "dilation": 1},
        ),
    ],
)
def test_conv2d(rng, x_shape, w_shape, kw):
    torch = pytest.importorskip("torch")
    x, w = rand(rng, x_shape), rand(rng, w_shape)
    args = [x, w]
    b = None
    if kw.get("bias"):
        b = rand(rng, (w_shape[0],))
        args.append(b)
    (out,) = c.run(cv.conv2d(x_shape, w_shape, **kw), *args)
    tkw = {k: v for k, v in kw.items() if k != "bias"}
    ref = torch.nn.functional.conv2d(
        torch.from_numpy(x).double(),
        torch.from_numpy(w).double(),
        None if b is None else torch.from_numpy(b).double(),
        **tkw,
    ).numpy()
    close(out, ref, "float32", scale=5)


# --------------------------------------------------------------------------- graph (Relax)


def test_graph_runs_a_block_on_the_relax_vm(rng):
    s, d, f = 12, 32, 48
    steps = [
        g.Step(rd.layer_norm((s, d)), ["x", "ln_w", "ln_b"], ["h"]),
        g.Step(
            mm.matmul((s, d), (d, f), bias=True, activation="gelu_tanh"), ["h", "w1", "b1"], ["u"]
        ),
        g.Step(mm.matmul((s, f), (d, f), transpose_b=True, name="proj"), ["u", "w2"], ["p"]),
        g.Step(
            ew.elementwise(
                ew.binary("add", ew.input(0), ew.input(1)),
                [(s, d), (s, d)],
                ["float32", "float32"],
                name="residual",
            ),
            ["x", "p"],
            ["y"],
        ),
    ]
    cg = g.compile_graph(steps, ["x", "ln_w", "ln_b", "w1", "b1", "w2"], ["y", "h"])
    assert cg.compile_s > 0 and "R.call_tir" in cg.module.script()
    x, lw, lb = rand(rng, (s, d)), rand(rng, (d,)), rand(rng, (d,))
    w1, b1, w2 = rand(rng, (d, f)), rand(rng, (f,)), rand(rng, (d, f))
    y, h = cg.run({"x": x, "ln_w": lw, "ln_b": lb, "w1": w1, "b1": b1, "w2": w2})
    x64 = x.astype(np.float64)
    h_ref = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(
        x64.var(-1, keepdims=True) + 1e-5
    ) * lw + lb
    u = matmul_ref(h_ref, w1, bias=b1, act="gelu_tanh")
    close(h, h_ref, "float32")
    close(y, x64 + u @ w2.astype(np.float64).T, "float32", scale=10)


def test_graph_rejects_undefined_values():
    k = rd.softmax((4, 8))
    with pytest.raises(ValueError, match="before any step defines it"):
        g.build_module([g.Step(k, ["nope"], ["y"])], ["x"], ["y"])


# --------------------------------------------------------------------------- CUDA (no GPU needed)


@needs_nvcc
def test_cuda_matmul_tensor_cores_f16_source_and_ptx():
    k = mm.matmul(
        (2, 20, 24),
        (24, 40),
        "float16",
        bias=True,
        activation="gelu_erf",
        target="cuda",
        tile_m=32,
        tile_n=64,
        tile_k=16,
    )
    assert k.config["tensor_core"] == "wmma.m16n16k16"
    art = c.inspect(k, ptxas=True)
    assert "nvcuda::wmma::mma_sync" in art.cuda_source and "__syncthreads" in art.cuda_source
    assert art.ptx_error is None, art.ptx_error
    assert ".entry" in art.ptx and "wmma.mma.sync" in art.ptx
    assert "spill" in art.ptxas_info


@needs_nvcc
def test_cuda_matmul_bf16_wmma_ptx():
    k = mm.matmul(
        (37, 50),
        (61, 50),
        "bfloat16",
        transpose_b=True,
        target="cuda",
        tile_m=32,
        tile_n=64,
        tile_k=16,
    )
    art = c.inspect(k, ptxas=False)
    assert "matrix_a, 16, 16, 16, nv_bfloat16" in art.cuda_source and "mma_sync" in art.cuda_source
    assert art.ptx_error is None, art.ptx_error
    assert "wmma.mma.sync" in art.ptx


@needs_nvcc
def test_cuda_matmul_f32_simt_ptx():
    k = mm.matmul((2, 37, 50), (50, 61), "float32", target="cuda")
    art = c.inspect(k, ptxas=False)
    assert "__shared__" in art.cuda_source and "threadIdx" in art.cuda_source
    assert art.ptx_error is None, art.ptx_error
    assert ".entry" in art.ptx


@pytest.mark.parametrize("tile_k", [None, 1])
def test_matmul_k1_outer_product_builds_for_cuda(tile_k):
    # K = 1 (rotary inv_freq x positions) used to die in the schedule with an extent-1 k loop
    k = mm.matmul((1, 16, 1), (1, 1, 128), target="cuda", tile_k=tile_k)
    assert k.config["tile_k"] >= mm.MIN_TILE_K


@needs_nvcc
def test_nvcc_timeout_is_a_clear_error():
    # a real nvcc given 1 ms: the timeout is reported, not raised as subprocess.TimeoutExpired
    with pytest.raises(RuntimeError, match="did not finish in .* pass a larger timeout_s"):
        c.cuda_to_ptx("__global__ void f() {}", timeout_s=0.001)


@needs_nvcc
def test_cuda_attention_and_graph_ptx():
    k = at.attention(
        (1, 2, 20, 16),
        (1, 1, 24, 16),
        "float16",
        bias_shape=(20, 24),
        causal=True,
        tile_q=32,
        tile_k=8,
        target="cuda",
    )
    art = c.inspect(k, ptxas=False)
    assert "__shared__" in art.cuda_source and art.ptx_error is None and ".entry" in art.ptx
    steps = [
        g.Step(rd.layer_norm((16, 32), "float16", target="cuda"), ["x", "w", "b"], ["h"]),
        g.Step(rd.softmax((16, 32), "float16", target="cuda"), ["h"], ["p"]),
        g.Step(mv.transpose((16, 32), (1, 0), "float16", target="cuda"), ["p"], ["pt"]),
    ]
    ga = g.cuda_artifacts(steps, ["x", "w", "b"], ["pt"], ptx=True)
    assert ga.ptx_error is None, ga.ptx_error
    for name in ("layer_norm_kernel", "softmax_kernel", "transpose_kernel"):
        assert name in ga.cuda_source and name in ga.ptx


@pytest.mark.slow
@needs_nvcc
def test_cuda_attention_default_tiles_ptx():
    k = at.attention((1, 4, 128, 64), (1, 2, 128, 64), "bfloat16", causal=True, target="cuda")
    art = c.inspect(k)
    assert art.ptx_error is None and ".entry" in art.ptx
