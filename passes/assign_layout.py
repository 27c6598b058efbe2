"""``assign-layout``: pad and align dims to the hardware's native tiles; pick weight layouts.

Design note: every rewrite here is exact.  Padding a contraction dim with zeros
adds zero products; padding an output dim adds columns that are sliced away;
padding the head dim of Q and K with zeros leaves QKᵀ unchanged (the attention
scale is an explicit attribute, so it does not move), and padding V's head dim
adds output columns that are sliced away.  Constant weights are padded at
compile time, activations with ``ik.pad``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from irkit.ir.builder import Builder
from irkit.ir.core import Dense, Module, Op, Value
from irkit.ir.ops import named_operands
from irkit.passmanager import Pass, PassContext, register_pass


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _pad_last(b: Builder, v: Value, axis: int, new: int) -> Value:
    """``v`` zero-padded along ``axis`` to size ``new`` (constants padded at compile time)."""
    t = v.type
    ax = axis % t.rank
    old = t.shape[ax]
    assert isinstance(old, int)
    p = v.producer
    if p is not None and p.name == "ik.constant" and not p.attrs["value"].is_splat:
        arr = np.asarray(p.attrs["value"].array)
        widths = [(0, 0)] * arr.ndim
        widths[ax] = (0, new - old)
        d: Dense = p.attrs["value"]
        padded = Dense(np.pad(arr, widths), d.dtype, d.resource)
        return Builder.before_op(p).create("ik.constant", [], {"value": padded}, p.loc).results[0]
    pads = [0] * (2 * t.rank)
    pads[t.rank + ax] = new - old
    return b.pad(v, pads=tuple(pads), value=0.0)


def _slice_last(b: Builder, v: Value, axis: int, size: int) -> Value:
    t = v.type
    ax = axis % t.rank
    start = (0,) * t.rank
    limit = tuple(size if i == ax else d for i, d in enumerate(t.shape))
    return b.slice(v, start=start, limit=limit)


@register_pass("assign-layout")
@dataclass(frozen=True)
class AssignLayout(Pass):
    """Pad matmul and attention dims to the target's native tiles and record weight layouts.

    On a TPU the minor dim of a tile is 128 lanes (256-wide MXU on v6e wants
    its K and N in multiples of 128 too), the second-minor 8 sublanes of 32-bit
    words (16 for bf16); on an NVIDIA GPU the tensor-core fragments want K and N
    in multiples of 8 (16-byte vectors); on a CPU a SIMD register.  Dims that
    are not multiples are zero-padded (weights at compile time), the result
    sliced back: numerics are exactly unchanged.  The chosen weight layout is
    recorded (``layout = "kn"``: weights [K, N] with N in lanes, what the MXU
    streams; ``"nk"``: K-major, what ``mma``'s col-major B operand loads).
    Transposes that meet are cancelled by canonicalize afterwards.

    before: %y = "ik.matmul"(%x, %w) : (tensor<8x100xf32>, tensor<100x200xf32>) -> tensor<8x200xf32>
    after:  %xp = "ik.pad"(%x) {pads = array<i64: 0, 0, 0, 28>} ...
            %yp = "ik.matmul"(%xp, %wp) {layout = "kn"} : (tensor<8x128xf32>, tensor<128x256xf32>) -> tensor<8x256xf32>
            %y = "ik.slice"(%yp) {limit = array<i64: 8, 200>, ...} ...
    """

    target: str = "tpu-v5e"
    """Name of a hardware description in targets/specs (or a path to your own TOML)."""

    min_dim: int = 16
    """Leave dims smaller than this alone (padding a tiny dim to 128 wastes more than it saves)."""

    def check_options(self) -> None:
        super().check_options()
        if self.min_dim < 1:
            raise ValueError(f"min-dim must be >= 1, got {self.min_dim}")

    def run(self, module: Module, ctx: PassContext) -> bool:
        from irkit.targets.costmodel.tiling import layout_tile
        from irkit.targets.hwspec import load_spec

        hw = load_spec(self.target)
        layout = "kn" if hw.systolic is not None else ("nk" if hw.simt is not None else "kn")
        changed = False
        for f in module.functions:
            for op in list(f.body):
                if op.parent is None:
                    continue
                if op.name == "ik.matmul":
                    lane = layout_tile(hw, str(op.results[0].dtype))[1]
                    changed |= self._matmul(op, lane, layout, ctx)
                elif op.name == "ik.attention":
                    lane = layout_tile(hw, str(op.results[0].dtype))[1]
                    changed |= self._attention(op, lane, ctx)
        if changed:
            from irkit.passmanager import make_pass

            make_pass("canonicalize").run(module, PassContext())
        return changed

    def _matmul(self, op: Op, lane: int, layout: str, ctx: PassContext) -> bool:
        x, w = op.operands
        k, n = w.type.shape[-2], w.type.shape[-1]
        if not isinstance(k, int) or not isinstance(n, int) or x.type.shape[-1] != k:
            return False
        kp = _round_up(k, lane) if k >= self.min_dim else k
        np_ = _round_up(n, lane) if n >= self.min_dim else n
        attrs: dict[str, Any] = dict(op.attrs)
        attrs["layout"] = layout
        if kp == k and np_ == n:
            if op.attrs.get("layout") == layout:
                return False
            b = Builder.before_op(op)
            new = b.create(op.name, [x, w], attrs, op.loc)
            op.results[0].replace_all_uses_with(new.results[0])
            op.parent.erase(op)  # type: ignore[union-attr]
            return True
        b = Builder.before_op(op)
        xp = _pad_last(b, x, -1, kp) if kp != k else x
        wp = _pad_last(b, w, -2, kp) if kp != k else w
        wp = _pad_last(b, wp, -1, np_) if np_ != n else wp
        y = b.create(op.name, [xp, wp], attrs, op.loc).results[0]
        if np_ != n:
            y = _slice_last(b, y, -1, n)
        op.results[0].replace_all_uses_with(y)
        op.parent.erase(op)  # type: ignore[union-attr]
        ctx.count("matmul-dims-padded")
        return True

    def _attention(self, op: Op, lane: int, ctx: PassContext) -> bool:
        n = named_operands(op)
        q, k, v = n["q"], n["k"], n["v"]
        assert q is not None and k is not None and v is not None
        d, dv = q.type.shape[3], v.type.shape[3]
        if not isinstance(d, int) or not isinstance(dv, int):
            return False
        dp = _round_up(d, lane) if d >= self.min_dim else d
        dvp = _round_up(dv, lane) if dv >= self.min_dim else dv
        if dp == d and dvp == dv:
            return False
        b = Builder.before_op(op)
        qp = _pad_last(b, q, 3, dp) if dp != d else q
        kp = _pad_last(b, k, 3, dp) if dp != d else k
        vp = _pad_last(b, v, 3, dvp) if dvp != dv else v
        attrs = {kk: vv for kk, vv in op.attrs.items() if kk != "operandSegmentSizes"}
        y = b.create("ik.attention", [qp, kp, vp, n["mask"], n["bias"]], attrs, op.loc).results[0]
        if dvp != dv:
            y = _slice_last(b, y, 3, dv)
        op.results[0].replace_all_uses_with(y)
        op.parent.erase(op)  # type: ignore[union-attr]
        ctx.count("attention-head-dims-padded")
        return True



