"""A Pallas TPU matmul with explicit (bm, bn, bk) blocks, for the XLA TPU targets.

Design note
-----------
XLA picks its own tiles for a ``dot``; a tiling pass in irkit picks tiles from the
hardware description. This kernel lets the two be compared: it is a plain
blocked matmul whose block shapes are arguments. The grid is
``(M/bm, N/bn, K/bk)``; each step multiplies an ``a[bm, bk]`` block by a
``b[bk, bn]`` block on the MXU and accumulates in a float32 VMEM scratch; the
last K step writes the output block. M and N grid axes are "parallel" (megacore
may split them), K is "arbitrary" (sequential, it carries the accumulator).

Compiled with :func:`irkit.targets.xla_compile.compile_xla` for a TPU platform,
Mosaic lowers the kernel and it appears in the optimised HLO as one
``custom-call`` with ``custom_call_target="tpu_custom_call"``. On CPU it runs in
Pallas' interpreter (``interpret=True``), which checks the blocking logic
against NumPy without a TPU.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["check_blocks", "pallas_matmul"]


def check_blocks(m: int, n: int, k: int, bm: int, bn: int, bk: int, *, sublane: int = 8) -> None:
    """Raise ValueError unless (bm, bn, bk) tile an (m, k) @ (k, n) matmul the way Mosaic needs.

    Blocks must divide the problem, and the last two dims of every block must be multiples of
    the TPU tile (``sublane`` x 128; use 16 sublanes for bf16), or span the whole dimension.
    """
    for name, size, block in (("M", m, bm), ("N", n, bn), ("K", k, bk)):
        if block <= 0 or size % block:
            raise ValueError(f"block {name}={block} does not divide {name}={size}")
    # a-block is (bm, bk), b-block (bk, bn), out-block (bm, bn): bm and bk are sublane dims of
    # some block, bk and bn lane dims of some block.
    for name, size, block, unit in (("bm", m, bm, sublane), ("bk", k, bk, 128), ("bn", n, bn, 128)):
        if block != size and block % unit:
            raise ValueError(
                f"{name}={block} must be a multiple of {unit} (the TPU tile) or the whole dimension {size}"
            )


def _matmul_kernel(a_ref: Any, b_ref: Any, o_ref: Any, acc_ref: Any, *, k_steps: int) -> None:
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    k = pl.program_id(2)

    @pl.when(k == 0)
    def _zero() -> None:
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] += jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    @pl.when(k == k_steps - 1)
    def _store() -> None:
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)


def pallas_matmul(
    a: Any,
    b: Any,
    *,
    bm: int = 128,
    bn: int = 128,
    bk: int = 128,
    interpret: bool = False,
    out_dtype: Any = None,
) -> Any:
    """``a @ b`` as a Pallas TPU kernel with (bm, bn, bk) blocks; traceable under ``jax.jit``.

    Args:
        a: ``[M, K]`` array (or tracer).
        b: ``[K, N]`` array.
        bm, bn, bk: block sizes; see :func:`check_blocks` for what Mosaic accepts.
        interpret: run in Pallas' interpreter (any backend, e.g. CPU) instead of Mosaic.
        out_dtype: result dtype; default ``a.dtype``. Accumulation is always float32.
    """
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    (m, k), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(f"pallas_matmul: a is {list(a.shape)}, b is {list(b.shape)}; K differs")
    sublane = 16 if jnp.dtype(a.dtype).itemsize == 2 else 8
    check_blocks(m, n, k, bm, bn, bk, sublane=sublane)
    out_dtype = jnp.dtype(out_dtype or a.dtype)
    k_steps = k // bk
    # XLA cannot see into a Mosaic kernel, so without an estimate cost_analysis() counts 0 FLOPs.
    # Bytes: each a-block is read once per N-block column, each b-block once per M-block row.
    itemsize = jnp.dtype(a.dtype).itemsize
    cost = pl.CostEstimate(
        flops=2 * m * n * k,
        transcendentals=0,
        bytes_accessed=itemsize * (m * k * (n // bn) + k * n * (m // bm))
        + out_dtype.itemsize * m * n,
    )
    call = pl.pallas_call(
        functools.partial(_matmul_kernel, k_steps=k_steps),
        out_shape=jax.ShapeDtypeStruct((m, n), out_dtype),
        grid=(m // bm, n // bn, k_steps),
        in_specs=[
            pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
            pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
        scratch_shapes=[pltpu.VMEM((bm, bn), jnp.float32)],
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")
        ),
        interpret=interpret,
        cost_estimate=cost,
        name=f"ik_matmul_{bm}x{bn}x{bk}",
    )
    return call(a, b)
