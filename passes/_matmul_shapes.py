"""Shared helpers for passes that reason about matmul-like ops: (batch, M, K, N) under bindings."""

from __future__ import annotations

from collections.abc import Mapping

from irkit.ir.core import Op
from irkit.ir.types import eval_dim


def _prod(xs) -> int:  # type: ignore[no-untyped-def]
    n = 1
    for x in xs:
        n *= int(x)
    return n


def gemm_dims(op: Op, b: Mapping[str, int]) -> tuple[int, int, int, int] | None:
    """(batch, M, K, N) of an ``ik.matmul`` or ``ik.contract`` at the example dim values."""
    try:
        x = [eval_dim(d, b) for d in op.operand(0).type.shape]
        w = [eval_dim(d, b) for d in op.operand(1).type.shape]
        out = [eval_dim(d, b) for d in op.results[0].type.shape]
    except KeyError:
        return None
    if op.name == "ik.matmul":
        return max(_prod(out[:-2]), 1), x[-2], x[-1], w[-1]
    if op.name == "ik.contract":
        a = op.attrs
        lb, lc, rb, rc = a.get("lhs_batch", ()), a["lhs_contract"], a.get("rhs_batch", ()), a["rhs_contract"]
        m = _prod(x[i] for i in range(len(x)) if i not in lb and i not in lc)
        n = _prod(w[i] for i in range(len(w)) if i not in rb and i not in rc)
        return max(_prod(x[i] for i in lb), 1), m, _prod(x[i] for i in lc), n
    return None
