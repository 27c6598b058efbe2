"""ONNX converters for the signal ops ``DFT`` and ``STFT``, and for ``Det`` of small matrices.

Design note: both become one matrix product with a DFT matrix built at import,
so no IR op is needed and every target that has ``ik.matmul`` runs them.  The
transformed axis is moved last, its (length, real/imag) pair is flattened, and
a ``[L*C_in, m*C_out]`` real matrix maps it to the (frequency, real/imag)
pairs of the result; truncation and zero padding to ``dft_length`` are folded
into the matrix (rows past the length are zero, missing rows contribute
nothing).  The forward transform uses ``exp(-2 pi i j k / n)``, the inverse
``exp(+2 pi i j k / n) / n``; ``onesided`` keeps the first ``n // 2 + 1``
frequencies, and an inverse ``onesided`` transform is numpy's ``irfft``
(Hermitian extension of the half spectrum, real output).  Twiddles are computed
in float64 from ``(j * k) mod n``; the product runs in float64 (a float16/32
input is cast up, the result rounded once to the input's dtype).

STFT gathers its frames with a constant index matrix, multiplies by the window
(a runtime input is fine) and applies the same DFT.  Lengths must be static;
a matrix over :data:`MAX_DFT_ELEMENTS` elements is refused.
"""

from __future__ import annotations

import numpy as np

from irkit.frontends.common import FrontendError
from irkit.frontends.onnx_ops import (
    Emitter,
    Node,
    OnnxValue,
    Unsupported,
    converter,
)
from irkit.ir.core import Value
from irkit.ir.types import Dim, DType

MAX_DFT_ELEMENTS = 1 << 22
"""The largest DFT matrix (elements) built at import; longer transforms are refused."""


def dft_matrix(length_in: int, c_in: int, n: int, *, inverse: bool, onesided: bool) -> np.ndarray:
    """The real ``[length_in * c_in, m * c_out]`` float64 matrix of a DFT of length ``n`` (see the module doc).

    Input rows are ``(j, c)`` pairs (``c`` 0 = real, 1 = imaginary when ``c_in == 2``); output columns
    are ``(k, c)`` pairs.  Forward: ``m = n // 2 + 1`` when ``onesided`` else ``n``, ``c_out = 2``.
    Inverse one-sided (irfft): input ``j`` runs over the half spectrum, ``m = n``, ``c_out = 1``.
    """
    if inverse and onesided:
        half = n // 2 + 1
        j = np.arange(min(length_in, half))[:, None]
        t = np.arange(n)[None, :]
        theta = 2.0 * np.pi * ((j * t) % n) / n
        coef = np.full((j.shape[0], 1), 2.0)
        coef[0] = 1.0
        if n % 2 == 0 and j.shape[0] > n // 2:
            coef[n // 2] = 1.0
        w = np.zeros((length_in, c_in, n, 1))
        w[: j.shape[0], 0, :, 0] = coef * np.cos(theta) / n
        if c_in == 2:
            w[: j.shape[0], 1, :, 0] = -coef * np.sin(theta) / n
        return w.reshape(length_in * c_in, n)
    m = n // 2 + 1 if onesided else n
    rows = min(length_in, n)
    j = np.arange(rows)[:, None]
    k = np.arange(m)[None, :]
    theta = 2.0 * np.pi * ((j * k) % n) / n
    cos, sin = np.cos(theta), np.sin(theta)
    sign, scale = (1.0, 1.0 / n) if inverse else (-1.0, 1.0)
    # (a + ib) * (cos + i*sign*sin) = (a cos - sign b sin) + i (sign a sin + b cos)
    w = np.zeros((length_in, c_in, m, 2))
    w[:rows, 0, :, 0] = cos * scale
    w[:rows, 0, :, 1] = sign * sin * scale
    if c_in == 2:
        w[:rows, 1, :, 0] = -sign * sin * scale
        w[:rows, 1, :, 1] = cos * scale
    return w.reshape(length_in * c_in, m * 2)


def apply_dft(cx: Emitter, node: Node, v: Value, shape: tuple[Dim, ...], dtype: DType, axis: int,
              n: int, *, inverse: bool, onesided: bool) -> Value:
    """The DFT of ``v`` (shape ``shape``, last dim 1 or 2 = real/complex) along ``axis`` (< rank - 1)."""
    rank = len(shape)
    length, c_in = shape[axis], shape[-1]
    if not isinstance(length, int) or not isinstance(c_in, int):
        raise Unsupported(f"{node.op_type} over a dynamic length ({length}) or complex dim ({c_in})")
    if c_in not in (1, 2):
        raise FrontendError(f"node '{node.name}' ({node.op_type}): the last dim must be 1 (real) or 2 (complex), "
                            f"got {c_in}")
    if n < 1:
        raise FrontendError(f"node '{node.name}' ({node.op_type}): dft_length must be positive, got {n}")
    out_len = n if inverse and onesided else (n // 2 + 1 if onesided else n)
    c_out = 1 if inverse and onesided else 2
    if length * c_in * out_len * c_out > MAX_DFT_ELEMENTS:
        raise Unsupported(f"{node.op_type} of length {n} over {length} elements (its DFT matrix would exceed "
                          f"{MAX_DFT_ELEMENTS} elements)")
    w = dft_matrix(length, c_in, n, inverse=inverse, onesided=onesided)
    # [pre, L, post, C] -> [pre, post, L, C] -> [pre, post, L*C] @ W -> [pre, post, m, C'] -> [pre, m, post, C']
    perm = [i for i in range(rank - 1) if i != axis] + [axis, rank - 1]
    moved = [shape[p] for p in perm[:-2]]
    x = v if perm == list(range(rank)) else cx.op("ik.transpose", v, perm=tuple(perm))
    x = cx.op("ik.reshape", x, shape=(*moved, length * c_in))
    # The product runs in float64 for narrower floats (cast up, one f64 matmul, cast down), so every
    # output is the input-dtype rounding of the float64 answer: a float32 product carries both the
    # matrix's rounding and the float32 accumulation (about 1e-6 relative to the row's magnitude, which
    # outputs whose exact value is 0 cannot absorb).  A hi/lo split of the input and the matrix would
    # fix only the products, not the float32 accumulation, so it is not float64-accurate; float64 is
    # lowered by every CPU target (reference, ort, tvm-llvm, xla-cpu under ``jax.enable_x64``).
    acc = DType.f64 if dtype.is_float else dtype
    if acc is not dtype:
        x = cx.op("ik.cast", x, to=acc)
    y = cx.op("ik.matmul", x, cx.constant(w.astype(acc.np), acc))
    if acc is not dtype:
        y = cx.op("ik.cast", y, to=dtype)
    y = cx.op("ik.reshape", y, shape=(*moved, out_len, c_out))
    back = list(range(rank - 2))
    back.insert(axis, rank - 2)
    back.append(rank - 1)
    return y if back == list(range(rank)) else cx.op("ik.transpose", y, perm=tuple(back))


def _float_input(node: Node, t: OnnxValue) -> None:
    if not t.dtype.is_float:
        raise FrontendError(f"node '{node.name}' ({node.op_type}): input must be a float tensor, got {t.dtype}")


@converter("DFT")
def _dft(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0, "input")
    _float_input(node, x)
    if x.rank < 2:
        raise FrontendError(f"node '{node.name}' (DFT): input needs rank >= 2 (signal dims, then real/imag), "
                            f"got rank {x.rank}")
    inverse = bool(node.attr("inverse", 0))
    onesided = bool(node.attr("onesided", 0))
    if cx.opset >= 20:
        at = node.input(2)
        axis = -2 if at is None else int(cx.ints(at, node, "axis")[0])
    else:
        axis = int(node.attr("axis", 1))
    r = x.rank
    if not (-r <= axis <= -2 or 0 <= axis <= r - 2):
        raise FrontendError(f"node '{node.name}' (DFT): axis {axis} is out of range for rank {r} "
                            f"(the last dim holds real/imag)")
    axis %= r
    length = x.shape[axis]
    lt = node.input(1)
    if lt is not None:
        n = int(cx.ints(lt, node, "dft_length")[0])
    elif not isinstance(length, int):
        raise Unsupported(f"DFT over a dynamic length ({length})")
    else:
        n = 2 * (length - 1) if inverse and onesided else length
    if onesided and not inverse and x.shape[-1] == 2:
        raise FrontendError(f"node '{node.name}' (DFT): onesided needs a real input (last dim 1), got a complex one")
    return [OnnxValue.of(apply_dft(cx, node, cx.ir(x), x.shape, x.dtype, axis, n,
                                   inverse=inverse, onesided=onesided))]


@converter("STFT")
def _stft(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0, "signal")
    _float_input(node, x)
    if x.rank != 3:
        raise FrontendError(f"node '{node.name}' (STFT): signal must be [batch, length, 1 or 2], got rank {x.rank}")
    step = int(cx.ints(node.req(1, "frame_step"), node, "frame_step")[0])
    window = node.input(2)
    fl_t = node.input(3)
    total = x.shape[1]
    if not isinstance(total, int):
        raise Unsupported(f"STFT over a dynamic signal length ({total})")
    if fl_t is not None:
        frame = int(cx.ints(fl_t, node, "frame_length")[0])
    elif window is not None:
        if window.rank != 1 or not isinstance(window.shape[0], int):
            raise FrontendError(f"node '{node.name}' (STFT): window must be a 1-D tensor of static length")
        frame = window.shape[0]
    else:
        frame = total
    if window is not None and (window.rank != 1 or window.shape[0] != frame):
        raise FrontendError(f"node '{node.name}' (STFT): window has shape {list(window.shape)}, "
                            f"expected [{frame}] (frame_length)")
    if step < 1 or frame < 1 or frame > total:
        raise FrontendError(f"node '{node.name}' (STFT): frame_step {step} / frame_length {frame} do not fit "
                            f"a signal of length {total}")
    onesided = bool(node.attr("onesided", 1))
    if onesided and x.shape[-1] == 2:
        raise FrontendError(f"node '{node.name}' (STFT): onesided needs a real signal (last dim 1), "
                            f"got a complex one")
    frames = (total - frame) // step + 1
    idx = (np.arange(frames)[:, None] * step + np.arange(frame)[None, :]).astype(np.int64)
    v = cx.op("ik.gather", cx.ir(x), cx.constant(idx, DType.i64), axis=1)  # [B, F, W, C]
    if window is not None:
        w = window if window.dtype is x.dtype else cx.cast(window, x.dtype)
        v = cx.op("ik.mul", v, cx.op("ik.reshape", cx.ir(w), shape=(1, 1, frame, 1)))
    shape = (x.shape[0], frames, frame, x.shape[2])
    return [OnnxValue.of(apply_dft(cx, node, v, shape, x.dtype, 2, frame, inverse=False, onesided=onesided))]


# ---------------------------------------------------------------------------
# Det: the closed-form (Leibniz) determinant of a small static matrix

MAX_DET_N = 3
"""Det is translated for matrices up to this size (a closed form; larger ones need an LU decomposition)."""


@converter("Det")
def _det(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    x = node.req(0)
    _float_input(node, x)
    if x.rank < 2:
        raise FrontendError(f"node '{node.name}' (Det): input needs rank >= 2 ([..., M, M]), got rank {x.rank}")
    n, n2 = x.shape[-2], x.shape[-1]
    if not isinstance(n, int) or n != n2:
        raise FrontendError(f"node '{node.name}' (Det): the last two dims must be equal and static, "
                            f"got {list(x.shape[-2:])}")
    if n > MAX_DET_N:
        raise Unsupported(f"Det of {n}x{n} matrices (irkit has the closed form up to "
                          f"{MAX_DET_N}x{MAX_DET_N}; larger ones need an LU decomposition)")
    batch = tuple(x.shape[:-2])
    v = cx.op("ik.reshape", cx.ir(x), shape=(*batch, n * n))
    r = len(batch) + 1

    def el(i: int, j: int) -> Value:
        k = i * n + j
        part = cx.op("ik.slice", v, start=(0,) * (r - 1) + (k,), limit=(*batch, k + 1))
        return cx.op("ik.reshape", part, shape=batch)

    if n == 0:
        return [OnnxValue.of(cx.op("ik.broadcast", cx.scalar(1.0, x.dtype), shape=batch))]
    if n == 1:
        return [OnnxValue.of(el(0, 0))]

    def det2(a: Value, b: Value, c: Value, d: Value) -> Value:
        return cx.op("ik.sub", cx.op("ik.mul", a, d), cx.op("ik.mul", b, c))

    if n == 2:
        return [OnnxValue.of(det2(el(0, 0), el(0, 1), el(1, 0), el(1, 1)))]
    e = [[el(i, j) for j in range(3)] for i in range(3)]
    t0 = cx.op("ik.mul", e[0][0], det2(e[1][1], e[1][2], e[2][1], e[2][2]))
    t1 = cx.op("ik.mul", e[0][1], det2(e[1][0], e[1][2], e[2][0], e[2][2]))
    t2 = cx.op("ik.mul", e[0][2], det2(e[1][0], e[1][1], e[2][0], e[2][1]))
    return [OnnxValue.of(cx.op("ik.add", cx.op("ik.sub", t0, t1), t2))]


# ---------------------------------------------------------------------------
# MelWeightMatrix: every operand is a shape-like scalar, so the matrix is built at import


@converter("MelWeightMatrix")
def _mel_weight_matrix(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    vals = []
    for i, what in enumerate(names):
        t = node.req(i, what)
        if t.known is None or t.is_symbolic:
            raise Unsupported(f"MelWeightMatrix whose '{what}' is computed at run time")
        if t.known.size != 1:
            raise FrontendError(f"node '{node.name}' (MelWeightMatrix): '{what}' must be a scalar")
        vals.append(t.known.reshape(()))
    bins, dft_length, rate = (int(v) for v in vals[:3])
    lo, hi = vals[3], vals[4]
    if bins < 1 or dft_length < 1 or rate < 1:
        raise FrontendError(f"node '{node.name}' (MelWeightMatrix): num_mel_bins, dft_length and sample_rate "
                            f"must be positive, got {bins}, {dft_length}, {rate}")
    if bins * (dft_length // 2 + 1) > MAX_DFT_ELEMENTS:
        raise Unsupported(f"MelWeightMatrix of {bins} x {dft_length // 2 + 1} (over {MAX_DFT_ELEMENTS} elements)")
    out_code = int(node.attr("output_datatype", 1))
    from irkit.frontends.onnx_load import ir_dtype

    out_dt = ir_dtype(out_code, cx.source, f"node '{node.name}' (MelWeightMatrix) output_datatype")
    # The spec's formulas, in the edges' own precision (the bin edges are floored, so it matters).
    with np.errstate(all="ignore"):
        freq = np.arange(0, bins + 2)
        low_mel = 2595 * np.log1p(lo / 700) / np.log(10)
        high_mel = 2595 * np.log1p(hi / 700) / np.log(10)
        step = (high_mel - low_mel) / freq.shape[0]
        freq = 700 * np.expm1((freq * step + low_mel) / 2595 * np.log(10))
        edges = (((dft_length + 1) * freq) // rate).astype(np.int64)
    n_spec = dft_length // 2 + 1
    if edges.min() < 0 or edges[:-1].max() >= n_spec or edges[-1] > n_spec:
        raise FrontendError(f"node '{node.name}' (MelWeightMatrix): the edges {float(lo)}..{float(hi)} Hz fall "
                            f"outside the {n_spec} spectrogram bins")
    out = np.zeros((n_spec, bins))
    for i in range(bins):
        left, center, right = int(edges[i]), int(edges[i + 1]), int(edges[i + 2])
        if center == left:
            out[center, i] = 1.0
        else:
            for j in range(left, center + 1):
                out[j, i] = (j - left) / (center - left)
        for j in range(center, right):
            out[j, i] = (right - j) / (right - center)
    return [OnnxValue.const(out.astype(out_dt.np), out_dt)]
