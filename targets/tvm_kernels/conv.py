"""2-D convolution, NCHW activations and OIHW weights, with groups and an optional bias.

Our own TE compute rather than ``topi.nn.conv2d``: the topi op works in 0.27 but brings its own
padding stage and tags meant for its schedule registry; here the padding is a separate stage
that the schedule places explicitly.

CPU schedule: the padded input is materialised once (parallel), so the inner loops carry no
bounds checks; each task owns (n, output-channel block, output row); inside it a
``oc_block × lanes`` register tile of outputs accumulates over (ic, kh, kw) with the output
width vectorised. CUDA: one thread per output element, 256-thread blocks, reduction in
registers (a correct baseline, not a tuned one).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tvm import s_tir, te, tirx

from .common import (
    Kernel,
    TargetLike,
    as_target,
    is_gpu,
    largest_divisor,
    make_kernel,
    simd_lanes,
)


def _pair(v: int | Sequence[int]) -> tuple[int, int]:
    return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))


def conv2d(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    dtype: str = "float32",
    *,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
    bias: bool = False,
    target: TargetLike | None = None,
    name: str = "conv2d",
) -> Kernel:
    """``out[n, o, y, x] = Σ_{c,i,j} xpad[n, g·C/G + c, y·sh + i·dh, x·sw + j·dw] · w[o, c, i, j]``.

    ``x_shape`` is ``[N, C, H, W]``, ``w_shape`` ``[O, C/groups, KH, KW]``; ``padding`` is
    symmetric per spatial dim (``int`` or ``(ph, pw)``). Accumulates in float32.
    """
    tgt = as_target(target)
    n, c, h, w = (int(d) for d in x_shape)
    o, cg, kh, kw = (int(d) for d in w_shape)
    if c % groups or o % groups or cg != c // groups:
        raise ValueError(
            f"conv2d: x {list(x_shape)} / w {list(w_shape)} inconsistent with groups={groups}"
        )
    sh, sw = _pair(stride)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"conv2d: empty output {oh}x{ow}")
    x = te.placeholder((n, c, h, w), dtype, name="x")
    wt = te.placeholder((o, cg, kh, kw), dtype, name="w")
    acc_dt = "float32"
    xp = te.compute(
        (n, c, h + 2 * ph, w + 2 * pw),
        lambda b, ci, yi, xi: tirx.Select(
            tirx.all(yi >= ph, yi < h + ph, xi >= pw, xi < w + pw),
            x[b, ci, tirx.max(tirx.min(yi - ph, h - 1), 0), tirx.max(tirx.min(xi - pw, w - 1), 0)],
            tirx.const(0, dtype),
        ).astype(acc_dt),
        name="x_pad",
    )
    rc = te.reduce_axis((0, cg), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    opg = o // groups
    acc = te.compute(
        (n, o, oh, ow),
        lambda b, oc, yy, xx: te.sum(
            xp[b, oc // opg * cg + rc, yy * sh + ry * dh, xx * sw + rx * dw]
            * wt[oc, rc, ry, rx].astype(acc_dt),
            axis=[rc, ry, rx],
        ),
        name="acc",
    )
    inputs = [x, wt]
    bias_t = None
    if bias:
        bias_t = te.placeholder((o,), dtype, name="bias")
        inputs.append(bias_t)
    out = te.compute(
        (n, o, oh, ow),
        lambda b, oc, yy, xx: (
            acc[b, oc, yy, xx]
            + (bias_t[oc].astype(acc_dt) if bias_t is not None else tirx.const(0, acc_dt))
        ).astype(dtype),
        name="out",
    )
    lanes = simd_lanes(tgt, "float32")
    ocb = largest_divisor(o, 4)
    vec = largest_divisor(ow, lanes)

    def schedule(sch: s_tir.Schedule) -> None:
        blk = sch.get_sblock("acc")
        pad_blk = sch.get_sblock("x_pad")
        ob = sch.get_sblock("out")
        b, oc, yy, xx, rci, ryi, rxi = sch.get_loops(blk)
        if is_gpu(tgt):
            sch.compute_inline(pad_blk)
            fused = sch.fuse(b, oc, yy, xx)
            bx, tx = sch.split(fused, [None, 256])
            sch.bind(bx, "blockIdx.x")
            sch.bind(tx, "threadIdx.x")
            sch.set_scope(blk, 0, "local")
            sch.reverse_compute_at(ob, tx)
            return
        pl = sch.get_loops(pad_blk)
        sch.parallel(sch.fuse(*pl[:3]))
        oco, oci = sch.split(oc, [None, ocb])
        xo, xi = sch.split(xx, [None, vec])
        sch.reorder(b, oco, yy, xo, rci, ryi, rxi, oci, xi)
        task = sch.fuse(b, oco, yy)
        sch.parallel(task)
        sch.unroll(oci)
        sch.vectorize(xi)
        sch.decompose_reduction(blk, rci)
        sch.reverse_compute_at(ob, task)
        last = sch.get_loops(ob)[-1]
        _, ov = sch.split(last, [None, vec])
        sch.vectorize(ov)

    return make_kernel(
        name,
        inputs,
        [out],
        tgt,
        schedule,
        flops=2 * n * o * oh * ow * cg * kh * kw,
        config={
            "stride": (sh, sw),
            "padding": (ph, pw),
            "dilation": (dh, dw),
            "groups": groups,
            "oc_block": ocb,
            "vector": vec,
        },
    )


# --------------------------------------------------------------------------- convolution as GEMM

IM2COL_MAX_BYTES = 32 << 20
"""Largest im2col matrix (bytes) the GEMM path materialises; a bigger one keeps the direct conv."""

IM2COL_MAX_BLOWUP = 9
"""Largest ratio of im2col elements to input elements (a 3x3 stride-1 conv copies each input 9 times)."""


def gemm_plan(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    *,
    stride: Sequence[int] = (1, 1),
    padding: Sequence[int] = (0, 0, 0, 0),
    dilation: Sequence[int] = (1, 1),
    groups: int = 1,
) -> dict | None:
    """How a 2-D convolution runs as one GEMM ``cols[M, K] @ W[K, O]``, or None when it should not.

    ``padding`` is ``(top, left, bottom, right)``. ``M = N·OH·OW`` output pixels, ``K = C·KH·KW``.
    ``kind`` is ``patchify`` (kernel == stride, no padding: im2col is a pure permutation of the
    input, nothing is duplicated), ``pointwise`` (1x1, stride 1: a layout change) or ``im2col``
    (anything else, taken only while the column matrix stays small, :data:`IM2COL_MAX_BYTES`, and
    duplicates each input element at most :data:`IM2COL_MAX_BLOWUP` times). Grouped convs refuse.
    """
    n, c, h, w = (int(d) for d in x_shape)
    o, cg, kh, kw = (int(d) for d in w_shape)
    if groups != 1 or cg != c:
        return None
    sh, sw = (int(s) for s in stride)
    pt, pl, pb, pr = (int(p) for p in padding)
    dh, dw = (int(d) for d in dilation)
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        return None
    m, k = n * oh * ow, c * kh * kw
    no_pad = pt == pl == pb == pr == 0
    if no_pad and (kh, kw) == (sh, sw) and dh == dw == 1:
        kind = "patchify"
    elif no_pad and kh == kw == 1 and sh == sw == 1:
        kind = "pointwise"
    else:
        kind = "im2col"
        if m * k * 4 > IM2COL_MAX_BYTES or m * k > IM2COL_MAX_BLOWUP * n * c * h * w:
            return None
    return {"kind": kind, "n": n, "c": c, "o": o, "kh": kh, "kw": kw, "oh": oh, "ow": ow, "m": m, "k": k,
            "stride": (sh, sw), "padding": (pt, pl, pb, pr), "dilation": (dh, dw)}


def im2col(x: te.Tensor, plan: dict) -> te.Tensor:
    """``cols[n, oy, ox, c, i, j] = xpad[n, c, oy·sh + i·dh, ox·sw + j·dw]`` (zeros in the padding);
    reshaped to ``[M, K]`` it is the GEMM's left operand (row = output pixel, column = (c, i, j))."""
    sh, sw = plan["stride"]
    pt, pl, _, _ = plan["padding"]
    dh, dw = plan["dilation"]
    h, w = (int(d) for d in x.shape[2:])
    shape = (plan["n"], plan["oh"], plan["ow"], plan["c"], plan["kh"], plan["kw"])
    if plan["kind"] != "im2col":
        return te.compute(shape, lambda b, oy, ox, ci, i, j: x[b, ci, oy * sh + i, ox * sw + j], name="im2col")

    def f(b, oy, ox, ci, i, j):  # noqa: ANN001, ANN202 - TE index lambdas
        yy = oy * sh + i * dh - pt
        xx = ox * sw + j * dw - pl
        inside = tirx.all(yy >= 0, yy < h, xx >= 0, xx < w)
        return tirx.Select(inside, x[b, ci, tirx.max(tirx.min(yy, h - 1), 0), tirx.max(tirx.min(xx, w - 1), 0)],
                           tirx.const(0, x.dtype))
    return te.compute(shape, f, name="im2col")


def gemm_to_nchw(g: te.Tensor, plan: dict) -> te.Tensor:
    """The GEMM's ``[N·OH·OW, O]`` result back in the conv's ``[N, O, OH, OW]`` layout."""
    oh, ow = plan["oh"], plan["ow"]
    return te.compute((plan["n"], plan["o"], oh, ow),
                      lambda b, oc, y, xx: g[(b * oh + y) * ow + xx, oc], name="nchw")


def gemm_weight(w: np.ndarray) -> np.ndarray:
    """``OIHW`` weights as the GEMM's right operand ``[C·KH·KW, O]``."""
    return w.reshape(w.shape[0], -1).T.copy()
