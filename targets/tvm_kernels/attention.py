"""Fused attention as a tiled online-softmax kernel (FlashAttention-style), CPU and CUDA.

Design note
-----------
``out[b,h,i,:] = softmax_j(cap(scale · q[b,h,i,:]·k[b,g(h),j,:]) + bias[b,h,i,j]) · v[b,g(h),j,:]``
where ``cap(s) = softcap · tanh(s / softcap)`` when ``softcap > 0`` (Gemma 2's logit
soft-capping) and ``cap(s) = s`` otherwise, with ``g(h) = h // (H // Hkv)`` (grouped-query
attention; MHA when ``Hkv == H``, MQA when ``Hkv == 1``). The ``Sq × Skv`` score matrix never
exists in global memory: each query tile walks the key tiles once, keeping a running row
maximum ``m``, running denominator ``l`` and an unnormalised output accumulator, rescaled by
``exp(m_old − m_new)`` whenever the maximum grows. With ``causal`` the key-tile loop stops at
the diagonal, so masked tiles cost nothing.

The recurrence carries state across key tiles, which TE's ``compute``/reduction model cannot
express, so these kernels are written directly as TIR loop nests with TVM's IRBuilder: the
schedule (tiling, packing, vector loops, thread binding, shared-memory staging) is explicit
in the loop structure rather than applied by ``tvm.s_tir.Schedule``.

Masking semantics (defined here, tested against a NumPy float64/float32 reference):

* ``causal``: key ``j`` is visible to query ``i`` iff ``j <= i + causal_offset``. The default
  offset 0 is PyTorch's ``is_causal`` (top-left aligned); ``Skv - Sq`` gives the bottom-right
  alignment used with a KV cache.
* A row whose every score is ``-inf`` (all keys masked by causal/bias) produces zeros, the
  convention of FlashAttention, onnxruntime and the IR's reference (``attention_reference``),
  never the NaN of a naive ``exp(s - max(s)) / sum(...)`` (0/0). A row masked with a finite
  large negative (``finfo.min``) stays finite and matches the reference softmax computed in
  the kernel's float32 arithmetic (there the mask absorbs the scores, so the row is uniform).

CPU (x86 LLVM): one task per (batch, head, query tile), parallel over TVM's pool. K is packed
once, transposed (``[B·Hkv, D, Skv]``), so ``QKᵀ`` reads contiguous keys. Per key tile, three
passes: ``S = Q·Kᵀ`` and ``acc = α·acc + P·V`` are GEMM micro-kernels over register blocks of 4
query rows x 2 vectors (4 broadcasts and 2 loads feed 8 independent FMA chains, the shape of
MLAS's and torch's CPU flash-attention inner loops); between them one pass per score row applies
the cap, bias and masks with a lane-wise running max, and one computes the weights with a
lane-wise sum, so every pass over the tile is vector code. ``exp`` is the polynomial
:func:`~.common.fast_exp` (libm ``expf`` would be called per lane), and its NaN test is on the
bits: a ``Select`` over ``isnan`` next to the polynomial made LLVM scalarise the loop, which
cost 4x at D = 16. Key tiles are whole vectors (padded keys are masked) and query tiles whole
register blocks (rows past Sq read a clamped query and are never stored).

CUDA: one thread block per (batch, head, query tile of ``tile_q`` rows), one thread per query
row holding its query, accumulator and ``tile_k`` scores in registers; K and V tiles are
staged in shared memory by all threads (coalesced) between barriers. This is a CUDA-core
kernel (no tensor cores). Its loops over keys and head dims carry ``#pragma unroll`` rather
than being unrolled by TVM: nvcc unrolls them (so the per-thread arrays stay in registers)
while the emitted source stays small; unrolling in TIR produced 440 KB of CUDA and a 6-minute
nvcc run for one kernel.
"""

# ruff: noqa: SIM117 - one `with` per IRBuilder frame keeps the emitted loop nest readable

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tvm import tirx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.op import tvm_storage_sync
from tvm.tirx.script.builder import ir as T

from .common import (
    LOWEST_F32,
    Kernel,
    TargetLike,
    TensorSig,
    as_target,
    f32,
    fast_exp,
    is_gpu,
    largest_divisor,
    simd_lanes,
    softmax_weight,
)

DTYPES = ("float32", "float16", "bfloat16")

ATTN_PARALLEL_MIN_FLOPS = 1 << 21
"""CPU attention below this many FLOPs (``4·B·H·Sq·Skv·D``) runs its tasks on one thread."""


def attention(
    q_shape: Sequence[int],
    kv_shape: Sequence[int],
    dtype: str = "float32",
    *,
    bias_shape: Sequence[int] | None = None,
    bias_dtype: str | None = None,
    scale: float | None = None,
    causal: bool = False,
    causal_offset: int = 0,
    softcap: float = 0.0,
    tile_q: int | None = None,
    tile_k: int | None = None,
    target: TargetLike | None = None,
    name: str = "attention",
) -> Kernel:
    """Build a fused attention kernel.

    Parameters
    ----------
    q_shape:
        ``[B, H, Sq, D]``.
    kv_shape:
        ``[B, Hkv, Skv, D]`` for both K and V; ``H % Hkv == 0``.
    dtype:
        float32, float16 or bfloat16 for q/k/v/out; arithmetic is float32.
    bias_shape:
        Optional additive bias/mask broadcastable to ``[B, H, Sq, Skv]`` (rank <= 4, right
        aligned, size-1 dims broadcast). ``-inf`` entries mask.
    bias_dtype:
        dtype of the bias (defaults to ``dtype``).
    scale:
        Score scale (default ``1/sqrt(D)``).
    causal, causal_offset:
        Key ``j`` visible to query ``i`` iff ``j <= i + causal_offset``.
    softcap:
        Logit soft-cap: the scaled scores become ``softcap * tanh(s / softcap)`` before the
        bias is added; 0 means none.
    tile_q, tile_k:
        Query rows per task/thread block and keys per inner tile.

    Returns a :class:`Kernel` with inputs ``(q, k, v[, bias])`` and output ``[B, H, Sq, D]``.
    """
    if dtype not in DTYPES:
        raise ValueError(f"attention dtype {dtype!r} not supported; expected one of {DTYPES}")
    if len(q_shape) != 4 or len(kv_shape) != 4:
        raise ValueError(
            f"attention wants q [B,H,Sq,D] and k/v [B,Hkv,Skv,D], got {list(q_shape)}, {list(kv_shape)}"
        )
    b, h, sq, d = (int(x) for x in q_shape)
    bk, hkv, skv, dk = (int(x) for x in kv_shape)
    if bk != b or dk != d:
        raise ValueError(
            f"q {list(q_shape)} and k/v {list(kv_shape)} disagree on batch or head dim"
        )
    if hkv <= 0 or h % hkv:
        raise ValueError(f"query heads H={h} must be a multiple of key/value heads Hkv={hkv}")
    if not (math.isfinite(softcap) and softcap >= 0):
        raise ValueError(f"softcap must be a finite number >= 0, got {softcap}")
    bias4: tuple[int, ...] | None = None
    if bias_shape is not None:
        if len(bias_shape) > 4:
            raise ValueError(f"bias rank {len(bias_shape)} > 4")
        bias4 = (1,) * (4 - len(bias_shape)) + tuple(int(x) for x in bias_shape)
        for got, full in zip(bias4, (b, h, sq, skv), strict=True):
            if got not in (1, full):
                raise ValueError(
                    f"bias {list(bias_shape)} does not broadcast to [B,H,Sq,Skv]={[b, h, sq, skv]}"
                )
    tgt = as_target(target)
    spec = _Spec(
        b=b,
        h=h,
        hkv=hkv,
        sq=sq,
        skv=skv,
        d=d,
        dtype=dtype,
        bias_shape=tuple(int(x) for x in bias_shape) if bias_shape is not None else None,
        bias4=bias4,
        bias_dtype=bias_dtype or dtype,
        scale=float(scale) if scale is not None else 1.0 / math.sqrt(d),
        causal=causal,
        causal_offset=int(causal_offset),
        softcap=float(softcap),
    )
    if is_gpu(tgt):
        tq = tile_q or 64
        # 16 keys per tile: the scores stay in registers next to q[D] and acc[D] (32 keys at
        # D=64 hit the 255-register cap)
        tk = tile_k or 16
        func = _build_cuda(spec, tq, tk, name)
    else:
        lanes = simd_lanes(tgt, "float32")
        tq, tk, ri = _cpu_tiles(spec, tile_q, tile_k, lanes)
        func = _build_cpu(spec, tq, tk, ri, lanes, name)
    inputs = [
        TensorSig((b, h, sq, d), dtype),
        TensorSig((b, hkv, skv, d), dtype),
        TensorSig((b, hkv, skv, d), dtype),
    ]
    if spec.bias_shape is not None:
        inputs.append(TensorSig(spec.bias_shape, spec.bias_dtype))
    visible = (
        sq * skv if not causal else sum(max(0, min(skv, i + causal_offset + 1)) for i in range(sq))
    )
    return Kernel(
        name=name,
        func=func,
        target=tgt,
        inputs=tuple(inputs),
        outputs=(TensorSig((b, h, sq, d), dtype),),
        flops=4 * b * h * visible * d,
        config={
            "tile_q": tq,
            "tile_k": tk,
            "scale": spec.scale,
            "causal": causal,
            "causal_offset": causal_offset,
            "softcap": float(softcap),
            "gqa_group": h // hkv,
        },
    )


class _Spec:
    """Static description of one attention problem (plain attributes, built once)."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)

    b: int
    h: int
    hkv: int
    sq: int
    skv: int
    d: int
    dtype: str
    bias_shape: tuple[int, ...] | None
    bias4: tuple[int, ...] | None
    bias_dtype: str
    scale: float
    causal: bool
    causal_offset: int
    softcap: float


def _capped(spec: _Spec, s: Any) -> Any:
    """The scaled score ``s`` soft-capped (``softcap * tanh(s / softcap)``), or ``s`` when there is no cap."""
    if not spec.softcap:
        return s
    return f32(spec.softcap) * tirx.tanh(s * f32(1.0 / spec.softcap))


def _bias_value(spec: _Spec, bias: Any, bi: Any, hi: Any, qi: Any, kj: Any) -> tirx.PrimExpr:
    """bias[b, h, i, j] under broadcasting, as float32."""
    full = (bi, hi, qi, kj)
    assert spec.bias4 is not None and spec.bias_shape is not None  # called for a kernel with a bias
    idx4 = [0 if n == 1 else full[a] for a, n in enumerate(spec.bias4)]
    idx = idx4[4 - len(spec.bias_shape) :]
    return bias[tuple(idx)].astype("float32")


def _visible(spec: _Spec, qi: Any, kj: Any) -> tirx.PrimExpr:
    """Whether key ``kj`` exists and is not causally masked for query ``qi``."""
    ok = kj < spec.skv
    if spec.causal:
        ok = tirx.all(ok, kj <= qi + spec.causal_offset)
    return ok


def _num_key_tiles(spec: _Spec, q_last: Any, tk: int) -> Any:
    """Key tiles a query tile must visit (stops at the causal diagonal)."""
    full = (spec.skv + tk - 1) // tk
    if not spec.causal:
        return full
    # keys 0 .. q_last + offset are visible; ceil((q_last + offset + 1) / tk) tiles, in [0, full]
    need = tirx.floordiv(q_last + spec.causal_offset + tk, tk)
    return tirx.max(tirx.min(need, full), 0)


def _args(spec: _Spec) -> tuple[Any, Any, Any, Any, Any]:
    q = T.arg("q", T.buffer((spec.b, spec.h, spec.sq, spec.d), spec.dtype))
    k = T.arg("k", T.buffer((spec.b, spec.hkv, spec.skv, spec.d), spec.dtype))
    v = T.arg("v", T.buffer((spec.b, spec.hkv, spec.skv, spec.d), spec.dtype))
    bias = None
    if spec.bias_shape is not None:
        bias = T.arg("bias", T.buffer(spec.bias_shape, spec.bias_dtype))
    out = T.arg("out", T.buffer((spec.b, spec.h, spec.sq, spec.d), spec.dtype))
    return q, k, v, bias, out


def _store(buf: Any, value: Any, *idx: Any) -> None:
    T.buffer_store(buf, value, list(idx))


# --------------------------------------------------------------------------- CPU


def _cpu_tiles(spec: _Spec, tile_q: int | None, tile_k: int | None, lanes: int) -> tuple[int, int, int]:
    """(query tile, key tile, register rows) for the CPU kernel.

    The key tile is a whole number of SIMD vectors (padded keys are masked), so every pass over a
    score row is vector code; the query tile is a whole number of register rows (rows past Sq read
    a clamped query and are never stored). Four register rows: the 4 x 2-vector accumulator of both
    micro-kernels plus its operands fit AVX2's 16 registers.
    """
    ri = max(1, min(4, spec.sq))
    tq = min(tile_q or 32, spec.sq)
    tq = (tq + ri - 1) // ri * ri
    tk = min(tile_k or 64, max(spec.skv, 1))
    tk = (tk + lanes - 1) // lanes * lanes
    return tq, tk, ri


def _build_cpu(spec: _Spec, tq: int, tk: int, ri: int, lanes: int, name: str) -> tirx.PrimFunc:
    d = spec.d
    nqt = (spec.sq + tq - 1) // tq
    group = spec.h // spec.hkv
    # keys per QKᵀ register block and head dims per PV register block: two vectors where they divide
    kb = 2 * lanes if tk % (2 * lanes) == 0 else lanes
    db = 2 * lanes if d % (2 * lanes) == 0 else largest_divisor(d, lanes)
    neg_inf = tirx.const(-math.inf, "float32")
    with IRBuilder() as ib:
        with T.prim_func():
            T.func_name(name)
            q, k, v, bias, out = _args(spec)
            T.func_attr({"tirx.noalias": True, "global_symbol": name})
            # K packed once per call as Kᵀ [B*Hkv, D, Skv_pad] (zero past Skv): every query
            # tile of every head reads contiguous keys, and no tile pays for a transpose.
            skv_pad = (spec.skv + tk - 1) // tk * tk
            kt = T.alloc_buffer((spec.b * spec.hkv, d, skv_pad), "float32")
            # one thread for a small problem (toy shapes: microseconds of work; the pool's wake-up
            # and join would cost more)
            ploop = T.parallel if 4 * spec.b * spec.h * spec.sq * spec.skv * d >= ATTN_PARALLEL_MIN_FLOPS else T.serial
            with ploop(0, spec.b * spec.hkv * d) as row:
                bh = row // d
                dd = row % d
                with T.serial(0, skv_pad) as j:
                    _store(
                        kt,
                        tirx.Select(
                            j < spec.skv,
                            k[bh // spec.hkv, bh % spec.hkv, tirx.min(j, spec.skv - 1), dd].astype(
                                "float32"
                            ),
                            f32(0.0),
                        ),
                        bh,
                        dd,
                        j,
                    )
            with ploop(0, spec.b * spec.h * nqt) as task:
                bi = task // (spec.h * nqt)
                hi = task // nqt % spec.h
                q0 = task % nqt * tq
                hk = hi // group
                bk = bi * spec.hkv + hk
                # Tile state. These exceed the stack limit and live in the workspace (L1-resident);
                # only the register blocks below are promoted to registers.
                qs = T.alloc_buffer((tq, d), "float32", scope="local")
                acc = T.alloc_buffer((tq, d), "float32", scope="local")
                st = T.alloc_buffer((tq, tk), "float32", scope="local")  # scores, then weights
                m = T.alloc_buffer((tq,), "float32", scope="local")
                lsum = T.alloc_buffer((tq,), "float32", scope="local")
                alpha = T.alloc_buffer((tq,), "float32", scope="local")
                # query tile, pre-scaled; rows past Sq read a clamped row (never stored)
                with T.serial(0, tq) as i:
                    qi = tirx.min(q0 + i, spec.sq - 1)
                    with T.vectorized(0, d) as dd:
                        _store(qs, q[bi, hi, qi, dd].astype("float32") * f32(spec.scale), i, dd)
                        _store(acc, f32(0.0), i, dd)
                    # Start from the lowest finite float, not -inf, so exp(m_old - m_new) is
                    # never exp(-inf + inf) = NaN on rows whose first tiles are all masked.
                    _store(m, f32(LOWEST_F32), i)
                    _store(lsum, f32(0.0), i)
                ntiles = _num_key_tiles(spec, tirx.min(q0 + tq - 1, spec.sq - 1), tk)
                with T.serial(0, ntiles) as t:
                    k0 = t * tk
                    # S = Qs · Kᵀ[:, k0:k0+tk] by ri x kb register blocks (a GEMM micro-kernel:
                    # ri broadcasts and kb/lanes loads feed ri·kb/lanes independent FMA chains)
                    with T.serial(0, tq // ri) as io:
                        with T.serial(0, tk // kb) as jo:
                            c = T.alloc_buffer((ri, kb), "float32", scope="local")
                            with T.unroll(0, ri) as ii:
                                with T.vectorized(0, kb) as jv:
                                    _store(c, f32(0.0), ii, jv)
                            with T.serial(0, d) as dd:
                                with T.unroll(0, ri) as ii:
                                    with T.vectorized(0, kb) as jv:
                                        _store(
                                            c,
                                            c[ii, jv] + qs[io * ri + ii, dd] * kt[bk, dd, k0 + jo * kb + jv],
                                            ii,
                                            jv,
                                        )
                            with T.unroll(0, ri) as ii:
                                with T.vectorized(0, kb) as jv:
                                    _store(st, c[ii, jv], io * ri + ii, jo * kb + jv)
                    # online softmax over each row of the tile, lane-wise then across lanes
                    with T.serial(0, tq) as i:
                        qi = q0 + i
                        lane = T.alloc_buffer((lanes,), "float32", scope="local")
                        red = T.alloc_buffer((1,), "float32", scope="local")
                        with T.vectorized(0, lanes) as jv:
                            _store(lane, neg_inf, jv)
                        with T.serial(0, tk // lanes) as jo:
                            with T.vectorized(0, lanes) as jv:
                                j = jo * lanes + jv
                                val = _capped(spec, st[i, j])
                                if bias is not None:
                                    val = val + _bias_value(
                                        spec,
                                        bias,
                                        bi,
                                        hi,
                                        tirx.min(qi, spec.sq - 1),
                                        tirx.min(k0 + j, spec.skv - 1),
                                    )
                                val = tirx.Select(_visible(spec, qi, k0 + j), val, neg_inf)
                                _store(st, val, i, j)
                                _store(lane, tirx.max(lane[jv], st[i, j]), jv)
                        _store(red, lane[0], 0)
                        with T.serial(1, lanes) as jv:
                            _store(red, tirx.max(red[0], lane[jv]), 0)
                        m_new = tirx.max(m[i], red[0])
                        _store(alpha, fast_exp(m[i] - m_new), i)  # rescale of the old state
                        _store(m, m_new, i)
                        with T.vectorized(0, lanes) as jv:
                            _store(lane, f32(0.0), jv)
                        with T.serial(0, tk // lanes) as jo:
                            with T.vectorized(0, lanes) as jv:
                                j = jo * lanes + jv
                                # exactly 0 for masked keys, NaN for +Inf - +Inf
                                _store(st, softmax_weight(st[i, j], m[i], cpu=True), i, j)
                                _store(lane, lane[jv] + st[i, j], jv)
                        _store(red, lane[0], 0)
                        with T.serial(1, lanes) as jv:
                            _store(red, red[0] + lane[jv], 0)
                        _store(lsum, lsum[i] * alpha[i] + red[0], i)
                    # acc = alpha · acc + P · V[k0:k0+tk] by ri x db register blocks
                    with T.serial(0, tq // ri) as io:
                        with T.serial(0, d // db) as do:
                            c = T.alloc_buffer((ri, db), "float32", scope="local")
                            with T.unroll(0, ri) as ii:
                                with T.vectorized(0, db) as dv:
                                    _store(c, acc[io * ri + ii, do * db + dv] * alpha[io * ri + ii], ii, dv)
                            with T.serial(0, tk) as j:
                                kj = tirx.min(k0 + j, spec.skv - 1)
                                with T.unroll(0, ri) as ii:
                                    with T.vectorized(0, db) as dv:
                                        vj = v[bi, hk, kj, do * db + dv].astype("float32")
                                        _store(
                                            c,
                                            c[ii, dv] + st[io * ri + ii, j] * vj,
                                            ii,
                                            dv,
                                        )
                            with T.unroll(0, ri) as ii:
                                with T.vectorized(0, db) as dv:
                                    _store(acc, c[ii, dv], io * ri + ii, do * db + dv)
                with T.serial(0, tq) as i:
                    with T.If(q0 + i < spec.sq):
                        with T.Then():
                            with T.vectorized(0, d) as dd:
                                _store(
                                    out,
                                    _normalise(acc[i, dd], lsum[i], spec.dtype),
                                    bi,
                                    hi,
                                    q0 + i,
                                    dd,
                                )
    return ib.get()


# --------------------------------------------------------------------------- CUDA


def _build_cuda(spec: _Spec, tq: int, tk: int, name: str) -> tirx.PrimFunc:
    d = spec.d
    nqt = (spec.sq + tq - 1) // tq
    group = spec.h // spec.hkv
    neg_inf = tirx.const(-math.inf, "float32")
    with IRBuilder() as ib:
        with T.prim_func():
            T.func_name(name)
            q, k, v, bias, out = _args(spec)
            T.func_attr({"tirx.noalias": True, "global_symbol": name})
            with T.thread_binding(0, spec.b * spec.h * nqt, thread="blockIdx.x") as blk:
                with T.thread_binding(0, tq, thread="threadIdx.x") as tx:
                    bi = blk // (spec.h * nqt)
                    hi = blk // nqt % spec.h
                    q0 = blk % nqt * tq
                    hk = hi // group
                    qi = q0 + tx
                    ks = T.alloc_buffer((tk, d), "float32", scope="shared")
                    vs = T.alloc_buffer((tk, d), "float32", scope="shared")
                    qr = T.alloc_buffer((d,), "float32", scope="local")
                    acc = T.alloc_buffer((d,), "float32", scope="local")
                    s = T.alloc_buffer((tk,), "float32", scope="local")
                    st = T.alloc_buffer((4,), "float32", scope="local")  # m, l, max, sum
                    with T.serial(0, d, unroll=True) as dd:
                        _store(
                            qr,
                            q[bi, hi, tirx.min(qi, spec.sq - 1), dd].astype("float32")
                            * f32(spec.scale),
                            dd,
                        )
                        _store(acc, f32(0.0), dd)
                    _store(st, f32(LOWEST_F32), 0)
                    _store(st, f32(0.0), 1)
                    ntiles = _num_key_tiles(spec, tirx.min(q0 + tq - 1, spec.sq - 1), tk)
                    with T.serial(0, ntiles) as t:
                        k0 = t * tk
                        T.evaluate(tvm_storage_sync("shared"))
                        # all threads copy the K/V tile: consecutive threads, consecutive elements
                        with T.serial(0, (tk * d + tq - 1) // tq) as it:
                            e = it * tq + tx
                            with T.If(e < tk * d), T.Then():
                                kj = tirx.min(k0 + e // d, spec.skv - 1)
                                _store(ks, k[bi, hk, kj, e % d].astype("float32"), e // d, e % d)
                                _store(vs, v[bi, hk, kj, e % d].astype("float32"), e // d, e % d)
                        T.evaluate(tvm_storage_sync("shared"))
                        _store(st, neg_inf, 2)
                        with T.serial(0, tk, unroll=True) as j:
                            _store(s, f32(0.0), j)
                            with T.serial(0, d, unroll=True) as dd:
                                _store(s, s[j] + qr[dd] * ks[j, dd], j)
                            val = _capped(spec, s[j])
                            if bias is not None:
                                val = val + _bias_value(
                                    spec,
                                    bias,
                                    bi,
                                    hi,
                                    tirx.min(qi, spec.sq - 1),
                                    tirx.min(k0 + j, spec.skv - 1),
                                )
                            _store(s, tirx.Select(_visible(spec, qi, k0 + j), val, neg_inf), j)
                            _store(st, tirx.max(st[2], s[j]), 2)
                        m_new = tirx.max(st[0], st[2])
                        _store(st, fast_exp(st[0] - m_new), 2)  # alpha
                        _store(st, m_new, 0)
                        _store(st, st[1] * st[2], 1)
                        with T.serial(0, d, unroll=True) as dd:
                            _store(acc, acc[dd] * st[2], dd)
                        with T.serial(0, tk, unroll=True) as j:
                            _store(s, softmax_weight(s[j], st[0]), j)
                            _store(st, st[1] + s[j], 1)
                            with T.serial(0, d, unroll=True) as dd:
                                _store(acc, acc[dd] + s[j] * vs[j, dd], dd)
                    with T.If(qi < spec.sq), T.Then():
                        with T.serial(0, d, unroll=True) as dd:
                            _store(out, _normalise(acc[dd], st[1], spec.dtype), bi, hi, qi, dd)
    return ib.get()


def _normalise(acc: Any, lsum: Any, dtype: str) -> Any:
    """``acc / lsum`` as ``dtype``; 0 where no key was visible (``lsum == 0``), not 0/0 = NaN (a NaN
    sum stays NaN)."""
    return tirx.Select(lsum == f32(0.0), f32(0.0), acc / lsum).astype(dtype)


def reference(
    q: Any,
    k: Any,
    v: Any,
    bias: Any = None,
    *,
    scale: float | None = None,
    causal: bool = False,
    causal_offset: int = 0,
    softcap: float = 0.0,
    dtype: Any = None,
) -> Any:
    """NumPy attention (materialised scores, max-subtracted softmax), for tests and benchmarks.

    ``dtype`` is the arithmetic type (float64 for an oracle, float32 to mirror the kernel's
    rounding where that matters, e.g. rows masked with ``finfo.min``).
    """
    import numpy as np

    dt = dtype or np.float64
    q, k, v = (np.asarray(x).astype(dt) for x in (q, k, v))
    _, h, sq, d = q.shape
    group = h // k.shape[1]
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    sc = scale if scale is not None else 1.0 / math.sqrt(d)
    s = np.einsum("bhid,bhjd->bhij", q * dt(sc), k)
    if softcap:
        s = dt(softcap) * np.tanh(s / dt(softcap))
    if bias is not None:
        s = s + np.asarray(bias).astype(dt)
    if causal:
        skv = k.shape[2]
        vis = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + causal_offset
        s = np.where(vis, s, -np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = s.max(axis=-1, keepdims=True)
        mx = np.where(np.isneginf(mx), 0, mx)
        e = np.exp(s - mx)
        den = e.sum(axis=-1, keepdims=True)
        p = np.where(den == 0, 0, e / np.where(den == 0, 1, den))  # a fully masked row gives zeros
    return np.einsum("bhij,bhjd->bhid", p, v)
