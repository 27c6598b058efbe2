"""Analytic cost of a whole module on a hardware description.

Every op's FLOPs and bytes come from the op registry (one definition per op);
the time comes from the hardware description's model: matmuls, contractions,
convolutions and fused attention through the systolic or SIMT GEMM model of
:mod:`irkit.targets.costmodel`, everything else through the roofline
(max of FLOPs over peak and bytes over bandwidth).  A fused region reads its
inputs and writes its outputs once; its FLOPs are the sum of its body.  Views
(reshape) and constants cost nothing: weights are counted as bytes read by the
ops that use them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from irkit.interp import default_bindings
from irkit.ir.core import Module, Op
from irkit.ir.ops import op_cost as ir_op_cost
from irkit.ir.types import DType, eval_dim
from irkit.targets.base import op_ids
from irkit.targets.costmodel.roofline import attention_cost, matmul_cost, roofline
from irkit.targets.hwspec import HardwareSpec, load_spec

_FREE = frozenset({"ik.reshape", "ik.constant", "func.return", "ik.yield", "ik.dropout"})


@dataclass
class OpEstimate:
    """One op's modelled cost."""

    op: str
    loc: str
    flops: float
    bytes: float
    seconds: float
    bound: str
    utilization: float
    cycles: float | None = None
    intensity: float = 0.0
    model: str = "roofline"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Estimate:
    """Per-op rows and totals for one module on one spec."""

    spec: str
    bindings: dict[str, int]
    ops: list[OpEstimate] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(o.seconds for o in self.ops)

    @property
    def flops(self) -> float:
        return sum(o.flops for o in self.ops)

    @property
    def bytes(self) -> float:
        return sum(o.bytes for o in self.ops)

    def total(self, peak: float) -> dict[str, Any]:
        s = self.seconds
        compute = sum(o.seconds for o in self.ops if o.bound == "compute")
        return {"flops": self.flops, "bytes": self.bytes, "seconds": s,
                "intensity": self.flops / self.bytes if self.bytes else math.inf,
                "utilization": (self.flops / s / peak) if s and peak else 0.0,
                "compute_bound_seconds": compute, "memory_bound_seconds": s - compute}

    def as_json(self, peak: float) -> dict[str, Any]:
        return {"spec": self.spec, "bindings": self.bindings, "ops": [o.as_dict() for o in self.ops],
                "total": self.total(peak)}


def _dtype_name(op: Op) -> str:
    for v in list(op.operands) + list(op.results):
        if v.type.dtype.is_float:
            return str(v.type.dtype)
    return "f32"


def _prod(xs: Any) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


_CONTRACTIONS = frozenset({"ik.matmul", "ik.contract", "ik.conv2d", "ik.attention"})


def _cast_into_contraction(op: Op) -> bool:
    """A cast whose every user is a matrix op: compilers convert operands as they load
    them (XLA fuses the convert into the dot; TVM inlines it), so it is no kernel of its
    own.  Its consumer is costed with the converted (narrower) operand."""
    if op.name != "ik.cast" or not op.results[0].uses:
        return False
    return all(u.name in _CONTRACTIONS for u in op.results[0].users)


def estimate(module: Module, spec: str | HardwareSpec, bindings: Mapping[str, int] | None = None) -> Estimate:
    """The modelled time of every op of ``module``'s entry function on ``spec``."""
    hw = load_spec(spec)
    fn = module.entry
    b = default_bindings(fn, bindings)
    ids = op_ids(module)
    out = Estimate(hw.name, dict(b))
    clock = hw.clock_hz
    for op in fn.body:
        if op.name in _FREE or _cast_into_contraction(op):
            continue
        c = ir_op_cost(op, b)
        dt = _dtype_name(op)
        shapes = [tuple(eval_dim(d, b) for d in v.type.shape) for v in op.operands]
        model = "roofline"
        seconds: float
        bound: str
        flops, nbytes = c.flops, c.bytes
        try:
            if op.name == "ik.matmul":
                a, w = shapes
                batch = _prod(tuple(eval_dim(d, b) for d in op.results[0].type.shape[:-2]))
                mc = matmul_cost(a[-2], a[-1], w[-1], hw, dt, batch=max(batch, 1))
                seconds, bound, model = mc.seconds, mc.bound, "gemm"
                nbytes = max(nbytes, mc.bytes)
            elif op.name == "ik.contract":
                a, w = shapes
                at = op.attrs
                lb, lc = at.get("lhs_batch", ()), at["lhs_contract"]
                rb, rc = at.get("rhs_batch", ()), at["rhs_contract"]
                batch = _prod(a[i] for i in lb)
                k = _prod(a[i] for i in lc)
                m = _prod(a[i] for i in range(len(a)) if i not in lb and i not in lc)
                n = _prod(w[i] for i in range(len(w)) if i not in rb and i not in rc)
                mc = matmul_cost(m, k, n, hw, dt, batch=max(batch, 1))
                seconds, bound, model = mc.seconds, mc.bound, "gemm"
            elif op.name == "ik.conv2d":
                x, w = shapes[0], shapes[1]
                o = tuple(eval_dim(d, b) for d in op.results[0].type.shape)
                g = op.attrs.get("groups", 1)
                mc = matmul_cost(o[0] * o[2] * o[3], w[1] * w[2] * w[3], w[0] // g, hw, dt, batch=g)
                seconds, bound, model = mc.seconds, mc.bound, "gemm"
            elif op.name == "ik.attention":
                q, k = shapes[0], shapes[1]
                ac = attention_cost(q[0], q[1], q[2], q[3], hw, dt, fused=True, kv_seq_len=k[2],
                                    causal=bool(op.attrs.get("causal", False)))
                seconds, bound, model = ac.seconds, ac.bound, "attention"
                flops, nbytes = max(flops, ac.flops), ac.bytes
            else:
                rc_ = roofline(flops, nbytes, hw.peak_flops(dt), hw.bandwidth_bytes_per_s)
                seconds, bound = rc_.seconds, rc_.bound
        except ValueError:
            rc_ = roofline(flops, nbytes, hw.peak_flops(dt), hw.bandwidth_bytes_per_s)
            seconds, bound = rc_.seconds, rc_.bound
        peak = hw.peak_flops(dt)
        util = flops / seconds / peak if seconds and peak else 0.0
        out.ops.append(OpEstimate(ids[id(op)], op.loc.short(), flops, nbytes, seconds, bound, util,
                                  seconds * clock if (clock and hw.systolic is not None) else None,
                                  flops / nbytes if nbytes else math.inf, model))
    return out


def peak_for(module: Module, spec: str | HardwareSpec) -> float:
    hw = load_spec(spec)
    dt = "f32"
    for op in module.entry.walk():
        for v in op.results:
            if v.type.dtype in (DType.bf16, DType.f16):
                dt = str(v.type.dtype)
    return hw.peak_flops(dt)


__all__ = ["estimate", "Estimate", "OpEstimate", "peak_for"]
