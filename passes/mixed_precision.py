"""``mixed-precision``: matrix-unit ops in bf16/f16, everything else kept in f32."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from irkit.ir.builder import Builder
from irkit.ir.core import Dense, Module, Op, Value
from irkit.ir.ops import named_operands
from irkit.ir.types import DType
from irkit.passmanager import Pass, PassContext, register_pass

_MATRIX_OPS = ("ik.matmul", "ik.contract", "ik.conv2d", "ik.attention")


def _to(b: Builder, v: Value, dt: DType, cache: dict[int, Value]) -> Value:
    """``v`` in ``dt``: constants are converted once at compile time, others get a cast."""
    if v.dtype == dt or not v.dtype.is_float:
        return v
    hit = cache.get(id(v))
    if hit is not None:
        return hit
    p = v.producer
    if p is not None and p.name == "ik.constant":
        d: Dense = p.attrs["value"]
        if d.is_splat:
            nd = Dense.splat(d.splat_value(), d.shape, dt)
        else:
            nd = Dense(np.asarray(d.array).astype(dt.np), dt, resource=d.resource)
        out = Builder.before_op(p).create("ik.constant", [], {"value": nd}, p.loc).results[0]
    else:
        out = b.cast(v, to=dt)
    cache[id(v)] = out
    return out


@register_pass("mixed-precision")
@dataclass(frozen=True)
class MixedPrecision(Pass):
    """Run matmuls, contractions, convolutions and attention in bf16 or f16; keep the rest in f32.

    Operands are cast to the low-precision type the matrix units want (weights
    are converted once, at compile time); the result is cast back to f32, so
    norms, softmax and residual adds stay in f32.  The matrix units accumulate in
    f32 (the reference kernels do too).  Casts that cancel are removed by
    canonicalize.

    before: %2 = "ik.matmul"(%x, %w) : (tensor<8x768xf32>, tensor<768x768xf32>) -> tensor<8x768xf32>
    after:  %0 = "ik.cast"(%x) {to = bf16} ...
            %1 = "ik.matmul"(%0, %w_bf16) : (tensor<8x768xbf16>, tensor<768x768xbf16>) -> tensor<8x768xbf16>
            %2 = "ik.cast"(%1) {to = f32} ...
    """

    compute: str = "bf16"
    """Low-precision type for the matrix ops: bf16 or f16."""

    rounds_ops: ClassVar[tuple[str, ...]] = _MATRIX_OPS
    """The ops whose operands and results this pass rounds to ``compute``.  Checks of
    this pass widen the tolerance by the program's own sensitivity to that rounding
    (:func:`irkit.check.rounding_slack`): an ill-conditioned op after a matmul (a
    layer norm over nearly equal features) amplifies any bf16 rounding."""

    def __post_init__(self) -> None:
        if self.compute not in ("bf16", "f16"):
            raise ValueError(f"compute must be bf16 or f16, got '{self.compute}'")

    def run(self, module: Module, ctx: PassContext) -> bool:
        dt = DType.parse(self.compute)
        changed = False
        for f in module.functions:
            cache: dict[int, Value] = {}
            for op in list(f.body):
                if op.name not in _MATRIX_OPS or not op.results or op.results[0].dtype != DType.f32:
                    continue
                self._convert(op, dt, cache)
                ctx.count("ops-lowered-precision")
                changed = True
        if changed:
            from irkit.passmanager import make_pass

            make_pass("canonicalize").run(module, PassContext())
        return changed

    def _convert(self, op: Op, dt: DType, cache: dict[int, Value]) -> None:
        b = Builder.before_op(op)
        if op.name == "ik.attention":
            n = named_operands(op)
            operands = [_to(b, n["q"], dt, cache), _to(b, n["k"], dt, cache), _to(b, n["v"], dt, cache),  # type: ignore[arg-type]
                        n["mask"], _to(b, n["bias"], dt, cache) if n["bias"] is not None else None]
        else:
            operands = [_to(b, v, dt, cache) for v in op.operands]
        attrs = {k: v for k, v in op.attrs.items() if k != "operandSegmentSizes"}
        new = b.create(op.name, operands, attrs, op.loc)
        back = b.cast(new.results[0], to=DType.f32)
        op.results[0].replace_all_uses_with(back)
        op.parent.erase(op)  # type: ignore[union-attr]
