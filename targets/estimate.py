"""Analytic cost of a whole module on a hardware description.

Every op's FLOPs and bytes come from the op registry (one definition per op);
the time comes from the hardware description's model: matmuls, contractions,
convolutions and fused attention through the systolic or SIMT GEMM model of
:mod:`irkit.targets.costmodel`, everything else through the roofline
(max of FLOPs over peak and bytes over bandwidth).  A fused region reads its
inputs and writes its outputs once; its FLOPs are the sum of its body.  Views
(reshape), constants and transposes / casts / broadcasts of constants (folded at
compile time) cost nothing: weights are counted as bytes read by the ops that use them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from irkit.targets.base import op_ids
from irkit.targets.costmodel.roofline import attention_cost, matmul_cost, roofline
from irkit.targets.hwspec import HardwareSpec, load_spec

from irkit.interp import default_bindings
from irkit.ir.core import Module, Op
from irkit.ir.ops import op_cost as ir_op_cost
from irkit.ir.types import DType, eval_dim

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
        return {
            "flops": self.flops,
            "bytes": self.bytes,
            "seconds": s,
            "intensity": self.flops / self.bytes if self.bytes else math.inf,
            "utilization": (self.flops / s / peak) if s and peak else 0.0,
            "compute_bound_seconds": compute,
            "memory_bound_seconds": s - compute,
        }

    def as_json(self, peak: float) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "bindings": self.bindings,
            "ops": [o.as_dict() for o in self.ops],
            "total": self.total(peak),
        }


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

_LAYOUT_OPS = frozenset({"ik.transpose", "ik.cast", "ik.broadcast"})


def _folded_constant(op: Op) -> bool:
    """A transpose, cast or broadcast of a constant (the LM head's transposed embedding, a
    weight stored in another dtype): compilers fold it at compile time (XLA constant folding,
    TVM's FoldConstant), so it costs nothing per call; its users read the folded weight."""
    if op.name not in _LAYOUT_OPS or not op.operands:
        return False
    p = op.operands[0].producer
    return p is not None and p.name == "ik.constant"


def _cast_into_contraction(op: Op) -> bool:
    """A cast whose every user is a matrix op: compilers convert operands as they load
    them (XLA fuses the convert into the dot; TVM inlines it), so it is no kernel of its
    own.  Its consumer is costed with the converted (narrower) operand."""
    if op.name != "ik.cast" or not op.results[0].uses:
        return False
    return all(u.name in _CONTRACTIONS for u in op.results[0].users)


def _cast_out_of_contraction(op: Op) -> bool:
    """A cast of a matrix op's result that is that result's only use (``matmul`` in bf16, then
    ``cast`` to f32): compilers convert in the matrix op's epilogue (cuBLAS/XLA output fusion,
    TVM's inlined cast), so it is no kernel of its own.  The producer is costed as writing the
    converted (wider) result instead, see :func:`_epilogue_cast_bytes`."""
    if op.name != "ik.cast":
        return False
    src = op.operands[0]
    p = src.producer
    return p is not None and p.name in _CONTRACTIONS and src.has_one_use


def _epilogue_cast_bytes(op: Op, b: Mapping[str, int]) -> float:
    """Extra bytes a matrix op writes when its only user is a cast folded into its epilogue:
    the cast's result bytes minus the op's own result bytes (0 when there is no such cast)."""
    if op.name not in _CONTRACTIONS or not op.results:
        return 0.0
    r = op.results[0]
    if not r.has_one_use or not _cast_out_of_contraction(r.users[0]):
        return 0.0
    n = _prod(eval_dim(d, b) for d in r.type.shape)
    out = r.users[0].results[0]
    return float(n * (out.type.dtype.itemsize - r.type.dtype.itemsize))


def _contraction_cost(op: Op, b: Mapping[str, int], hw: HardwareSpec, dt: str) -> Any | None:
    """The GEMM (or fused attention) model's cost of one matrix op, None for any other op."""
    shapes = [tuple(eval_dim(d, b) for d in v.type.shape) for v in op.operands]
    if op.name == "ik.matmul":
        a, w = shapes[0], shapes[1]
        batch = _prod(tuple(eval_dim(d, b) for d in op.results[0].type.shape[:-2]))
        return matmul_cost(a[-2], a[-1], w[-1], hw, dt, batch=max(batch, 1))
    if op.name == "ik.contract":
        a, w = shapes[0], shapes[1]
        at = op.attrs
        lb, lc = at.get("lhs_batch", ()), at["lhs_contract"]
        rb, rc = at.get("rhs_batch", ()), at["rhs_contract"]
        batch = _prod(a[i] for i in lb)
        k = _prod(a[i] for i in lc)
        m = _prod(a[i] for i in range(len(a)) if i not in lb and i not in lc)
        n = _prod(w[i] for i in range(len(w)) if i not in rb and i not in rc)
        return matmul_cost(m, k, n, hw, dt, batch=max(batch, 1))
    if op.name == "ik.conv2d":
        w = shapes[1]
        o = tuple(eval_dim(d, b) for d in op.results[0].type.shape)
        g = op.attrs.get("groups", 1)
        return matmul_cost(o[0] * o[2] * o[3], w[1] * w[2] * w[3], w[0] // g, hw, dt, batch=g)
    if op.name == "ik.attention":
        q, kv = shapes[0], shapes[1]
        return attention_cost(
            q[0],
            q[1],
            q[2],
            q[3],
            hw,
            dt,
            fused=True,
            kv_seq_len=kv[2],
            causal=bool(op.attrs.get("causal", False)),
        )
    return None


def _fused_region_cost(
    op: Op, b: Mapping[str, int], hw: HardwareSpec, dt: str, flops: float, nbytes: float
) -> tuple[float, str, str] | None:
    """A fused region holding matrix ops (a matmul with its bias and activation): its matrix
    ops on the GEMM model, the rest of its FLOPs at the vector peak, the region's own bytes
    (inputs read and outputs written once) over the bandwidth, whichever takes longer.
    None when the region has no matrix op (the plain roofline applies)."""
    gemm_s = gemm_flops = 0.0
    found = False
    for inner in op.regions[0].walk() if op.regions else ():
        if inner.name not in _CONTRACTIONS:
            continue
        c = _contraction_cost(inner, b, hw, _dtype_name(inner))
        if c is None:
            continue
        found = True
        gemm_s += c.seconds
        gemm_flops += c.flops
    if not found:
        return None
    rest = roofline(max(flops - gemm_flops, 0.0), 0.0, hw.peak_flops(dt), hw.bandwidth_bytes_per_s)
    compute = gemm_s + rest.seconds
    bw = hw.bandwidth_bytes_per_s
    memory = nbytes / bw if bw else 0.0
    return (max(compute, memory), "memory" if memory > compute else "compute", "gemm")


def estimate(
    module: Module, spec: str | HardwareSpec, bindings: Mapping[str, int] | None = None
) -> Estimate:
    """The modelled time of every op of ``module``'s entry function on ``spec``."""
    hw = load_spec(spec)
    fn = module.entry
    b = default_bindings(fn, bindings)
    ids = op_ids(module)
    out = Estimate(hw.name, dict(b))
    clock = hw.clock_hz
    for op in fn.body:
        if (
            op.name in _FREE
            or _folded_constant(op)
            or _cast_into_contraction(op)
            or _cast_out_of_contraction(op)
        ):
            continue
        c = ir_op_cost(op, b)
        dt = _dtype_name(op)
        model = "roofline"
        seconds: float
        bound: str
        flops, nbytes = c.flops, c.bytes
        done = False
        try:
            mc = _contraction_cost(op, b, hw, dt)
            if mc is not None:
                seconds, bound = mc.seconds, mc.bound
                if op.name == "ik.attention":
                    model = "attention"
                    flops, nbytes = max(flops, mc.flops), mc.bytes
                else:
                    model = "gemm"
                    if op.name == "ik.matmul":
                        nbytes = max(nbytes, mc.bytes)
                extra = _epilogue_cast_bytes(op, b)
                if extra:
                    nbytes += extra
                    bw = hw.bandwidth_bytes_per_s
                    if bw and nbytes / bw > seconds:
                        seconds, bound = nbytes / bw, "memory"
                done = True
            elif op.name == "ik.fused":
                fc = _fused_region_cost(op, b, hw, dt, flops, nbytes)
                if fc is not None:
                    seconds, bound, model = fc
                    done = True
        except ValueError:
            done = False
        if not done:
            rc_ = roofline(flops, nbytes, hw.peak_flops(dt), hw.bandwidth_bytes_per_s)
            seconds, bound, model = rc_.seconds, rc_.bound, "roofline"
        peak = hw.peak_flops(dt)
        util = flops / seconds / peak if seconds and peak else 0.0
        out.ops.append(
            OpEstimate(
                ids[id(op)],
                op.loc.short(),
                flops,
                nbytes,
                seconds,
                bound,
                util,
                seconds * clock if (clock and hw.systolic is not None) else None,
                flops / nbytes if nbytes else math.inf,
                model,
            )
        )
    return out


def peak_for(module: Module, spec: str | HardwareSpec) -> float:
    hw = load_spec(spec)
    dt = "f32"
    for op in module.entry.walk():
        for v in op.results:
            if v.type.dtype in (DType.bf16, DType.f16):
                dt = str(v.type.dtype)
    return hw.peak_flops(dt)


__all__ = ["Estimate", "OpEstimate", "estimate", "peak_for"]
