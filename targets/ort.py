"""``ort``: export the IR to a standard ONNX model and run it in onnxruntime.

Design note: the export is static — symbolic dims are bound first (like every
target, ``lower`` compiles for concrete dim values), so shape arithmetic never
needs runtime Shape/Gather chains.  Each IR op becomes one ONNX node where ONNX
has the op (opset 23: ``Attention``, ``RMSNormalization``, ``Gelu``,
``LayerNormalization``) or a short decomposition otherwise; the node's name is
the IR op id, so every ONNX node (and so every ORT kernel) maps back to an IR
op and its source location.  ``ik.attention`` goes out (default
``attention="contrib"``) as onnxruntime's ``com.microsoft.MultiHeadAttention``
where that fused kernel is exact and faster (see ``_Exporter.attention_contrib``),
else as opset-23 Attention (``attention="onnx"`` keeps the model standard ONNX),
or decomposed (``attention="decomposed"``) where ORT's Attention kernel does
not cover a case (an additive bias together with a boolean mask).  A Transpose
of a Transpose and a Reshape of a Reshape are emitted as one (or none where
they cancel, as the head split/merge around MultiHeadAttention does), and nodes
left unused are dropped.

The lowering is one rule table, :data:`ORT_RULES` (a :class:`LoweringTable`): a
rule is ``(exporter, op, input names) -> output names``; the table is the
target's coverage (``supports``, ``irkit coverage``). Where onnxruntime's CPU
kernels lack a dtype (many have no 16-bit or unsigned kernels, several no f64)
a rule computes in a wider type and casts back, or refuses that instance in one
line naming the op (``ex.refuse``); where ONNX has no operator (cummax, popcount,
atan2 ...) it decomposes exactly, and ops with no exact decomposition (erfinv,
lgamma, digamma, nextafter) are refused. Semantics are the reference's: NaN
propagates through max/min reductions and is the extreme of arg-reductions
(onnxruntime skips it), a fully masked attention row is zeros (onnxruntime's
Attention gives NaN). See docs/target-ort.md.

bfloat16: onnxruntime's CPU kernels have almost no bf16 implementations (MatMul,
Mul, Softmax... are missing), so a bf16 value travels as float32 holding a
bf16-representable number: after every op whose IR result is bf16 the exporter
rounds with ``Cast(to=BFLOAT16)`` and back, which is what the interpreter does
(compute in float32, round the result). Constants become float32 initializers
(exact); at the boundary bf16 crosses as float32 (the Python API has no bf16).
The float8 types travel the same way (onnxruntime's Python API cannot feed them):
float32 holding a float8 value, rounded with ``Cast(saturate=0)`` after every op
whose result is float8; ``ik.cast`` to float8 is ONNX Cast with its ``saturate``.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from irkit.targets.base import (
    Artifact,
    Availability,
    Kernel,
    LoweringTable,
    Target,
    TargetUnavailable,
    op_ids,
    provenance,
)
from irkit.targets.registry import register_target

from irkit.interp import default_bindings
from irkit.ir.core import Function, Graph, Module, Op, Value
from irkit.ir.ops import OPS, named_operands
from irkit.ir.ops_window import conv_attrs, window_attrs
from irkit.ir.types import DType, TensorType, eval_dim, is_ml_float_np, normalize_axis

OPSET = 23
MS_DOMAIN = "com.microsoft"
"""onnxruntime's contrib operators (``attention="contrib"``: MultiHeadAttention)."""

_UNARY = {"neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "reciprocal": "Reciprocal",
          "tanh": "Tanh", "erf": "Erf", "sigmoid": "Sigmoid", "sin": "Sin", "cos": "Cos", "floor": "Floor",
          "ceil": "Ceil", "sign": "Sign", "relu": "Relu", "not": "Not"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "max": "Max", "min": "Min",
           "eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual",
           "and": "And", "or": "Or", "xor": "Xor"}
_REDUCE = {"reduce_sum": "ReduceSum", "reduce_mean": "ReduceMean", "reduce_max": "ReduceMax",
           "reduce_min": "ReduceMin", "reduce_prod": "ReduceProd"}


_ONNX_DTYPES: dict[str, int] = {"f64": 11, "f32": 1, "f16": 10, "bf16": 16, "i64": 7, "i32": 6, "i16": 5, "i8": 3,
                                 "ui8": 2, "ui16": 4, "ui32": 12, "ui64": 13, "i1": 9,
                                 "f8E4M3FN": 17, "f8E4M3FNUZ": 18, "f8E5M2": 19, "f8E5M2FNUZ": 20}
"""ONNX TensorProto element types by IR dtype name (MLIR spelling)."""


def _in_f32(dt: DType) -> bool:
    """bf16 and the float8 types travel as float32 in the graph (see the module note)."""
    return dt is DType.bf16 or dt.is_float8


def _to_feed(x: Any) -> np.ndarray:
    a = np.asarray(x)
    return a.astype(np.float32) if is_ml_float_np(a.dtype) else a


BITCAST_OPSET = 26
"""ONNX BitCast is opset 26: a model with an ``ik.bitcast`` is exported at this opset (IR version 13)."""


def _onnx_dtype(dt: DType) -> int:
    try:
        return _ONNX_DTYPES[dt.value]
    except KeyError:
        raise TargetUnavailable(f"ort: no ONNX element type for IR dtype {dt}") from None


class _Exporter:
    """Builds one ONNX graph from one IR function under concrete bindings."""

    def __init__(self, fn: Function, bindings: Mapping[str, int], ids: Mapping[int, str], attention: str):
        import onnx.helper as oh

        self.oh = oh
        self.fn = fn
        self.b = bindings
        self.ids = ids
        self.attention = attention
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.names: dict[int, str] = {}
        self.counter = 0
        self.node_ops: dict[str, Op] = {}
        self.region_owner: Op | None = None
        self.opset = OPSET  # raised to BITCAST_OPSET by an ik.bitcast
        self.layout: dict[str, tuple[str, str, list[int]]] = {}
        """Name -> ("Transpose" or "Reshape", its input, perm or input shape): lets a Transpose of a
        Transpose, or a Reshape of a Reshape, read the first one's input (see :meth:`transpose`)."""
        self.external: list[tuple[str, int, np.ndarray]] | None = None
        """Set to a list by :func:`export_onnx_external`: (name, offset, array) of each initializer of at
        least ``external_min`` bytes, whose bytes stay out of the proto."""
        self.external_min = EXTERNAL_MIN_BYTES
        self.external_size = 0

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}_{self.counter}"

    def shape(self, t: TensorType) -> list[int]:
        return [eval_dim(d, self.b) for d in t.shape]

    def const(self, arr: np.ndarray, base: str = "c") -> str:
        from onnx import numpy_helper

        name = self.fresh(base)
        a = np.asarray(arr)
        if is_ml_float_np(a.dtype):  # bf16, float8: exact in f32 (see the module note)
            a = a.astype(np.float32)
        if self.external is not None and a.nbytes >= self.external_min and a.dtype != object:
            from onnx import TensorProto, helper

            t = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(a.dtype), dims=list(a.shape),
                            data_location=TensorProto.EXTERNAL)
            off = self.external_size
            for k, v in (("location", EXTERNAL_DATA), ("offset", str(off)), ("length", str(a.nbytes))):
                t.external_data.add(key=k, value=v)
            self.external.append((name, off, a))  # its bytes: export_onnx_external (no copy into the proto)
            self.external_size = off + -(-a.nbytes // _ALIGN) * _ALIGN
        else:
            t = numpy_helper.from_array(np.ascontiguousarray(a).reshape(a.shape), name)
        self.inits.append(t)
        return name

    def node(self, op_type: str, inputs: list[str], n_out: int = 1, owner: Op | None = None, **attrs: Any) -> list[str]:
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        if self.region_owner is not None and owner is not None:
            owner = self.region_owner  # nodes of an inlined fused region belong to the fused op
        name = self.fresh(self.ids.get(id(owner), op_type) if owner is not None else op_type)
        self.nodes.append(self.oh.make_node(op_type, inputs, outs, name=name, **attrs))
        if owner is not None:
            self.node_ops[name] = owner
        return outs

    def export(self) -> Any:
        oh = self.oh
        fn = self.fn
        inputs = []
        for i, a in enumerate(fn.args):
            nm = a.name or f"arg{i}"
            if _in_f32(a.dtype):
                # bf16/float8 travel as f32 (see the module note); the values fed are representable.
                inputs.append(oh.make_tensor_value_info(nm, _onnx_dtype(DType.f32), self.shape(a.type)))
                self.names[id(a)] = nm
                continue
            self.names[id(a)] = nm
            inputs.append(oh.make_tensor_value_info(nm, _onnx_dtype(a.dtype), self.shape(a.type)))
        self.graph(fn.body)
        outputs = []
        for i, v in enumerate(fn.outputs):
            src = self.names[id(v)]
            out = f"output{i}"
            if _in_f32(v.dtype):
                self.nodes.append(oh.make_node("Identity", [src], [out], name=f"output{i}"))
                outputs.append(oh.make_tensor_value_info(out, _onnx_dtype(DType.f32), self.shape(v.type)))
                continue
            self.nodes.append(oh.make_node("Identity", [src], [out], name=f"output{i}"))
            outputs.append(oh.make_tensor_value_info(out, _onnx_dtype(v.dtype), self.shape(v.type)))
        self.prune({o.name for o in outputs})
        g = oh.make_graph(self.nodes, fn.name, inputs, outputs, self.inits)
        opsets = [oh.make_opsetid("", self.opset)]
        if any(n.domain == MS_DOMAIN for n in self.nodes):  # attention="contrib": MultiHeadAttention
            opsets.append(oh.make_opsetid(MS_DOMAIN, 1))
        model = oh.make_model(g, opset_imports=opsets, producer_name="irkit")
        model.ir_version = 10 if self.opset <= OPSET else 13
        return model

    def graph(self, g: Graph) -> None:
        for op in g:
            if op.name in ("func.return", "ik.yield"):
                continue
            outs = self.op(op)
            for r, n in zip(op.results, outs):
                self.names[id(r)] = n

    def op(self, op: Op) -> list[str]:
        outs = self._op(op)
        if op.name == "ik.fused":
            return outs  # the region's own ops rounded their results
        for i, r in enumerate(op.results):
            if r.dtype is DType.bf16:  # bf16 lives in f32: round to bf16 here (see the module note)
                rounded = self.node("Cast", [outs[i]], owner=op, to=_onnx_dtype(DType.bf16))[0]
                outs[i] = self.node("Cast", [rounded], owner=op, to=_onnx_dtype(DType.f32))[0]
            elif r.dtype.is_float8 and op.name not in ("ik.cast", "ik.bitcast"):
                # float8 lives in f32 too; round as the reference does (nearest even, IEEE overflow)
                outs[i] = _round_float8(self, op, outs[i], r.dtype, False)
        return outs

    def _op(self, op: Op) -> list[str]:
        rule = ORT_RULES.get(op.name)
        if rule is None:
            why = NO_ONNX_OP.get(op.name, "no lowering rule in targets/ort.py")
            raise TargetUnavailable(f"ort: cannot lower '{op.name}' at {op.loc.short()}: {why}; use the xla-cpu, "
                                    "tvm-llvm or reference target for this model")
        return rule(self, op, [self.names[id(v)] for v in op.operands])

    # -- helpers for rules -----------------------------------------------------------------------
    def refuse(self, op: Op, why: str) -> None:
        """Refuse one instance of an op: a clear one-line reason naming the op and where it is."""
        raise TargetUnavailable(f"ort: cannot lower '{op.name}' at {op.loc.short()}: {why}")

    def cast(self, x: str, dt: str, op: Op) -> str:
        """``x`` cast to IR element type ``dt`` (its MLIR name: f32, i64, ui8, i1 ...)."""
        return self.node("Cast", [x], owner=op, to=_ONNX_DTYPES[dt])[0]

    def scalar_like(self, v: Value) -> Any:
        """A maker of scalar constants of ``v``'s graph type: ``c = ex.scalar_like(v); c(0.5)``."""
        npt = _np_of(_gdt(v))
        return lambda x: self.const(np.array(x, npt), "k")

    def flip(self, x: str, axes: list[int], op: Op) -> str:
        """``x`` reversed along ``axes`` (a Slice with step -1)."""
        if not axes:
            return self.node("Identity", [x], owner=op)[0]
        n = len(axes)
        return self.node("Slice", [x, self.const(np.full(n, -1, np.int64)),
                                   self.const(np.full(n, np.iinfo(np.int64).min, np.int64)),
                                   self.const(np.array(axes, np.int64)), self.const(np.full(n, -1, np.int64))],
                         owner=op)[0]

    def transpose(self, x: str, perm: list[int], op: Op) -> str:
        """``x`` transposed by ``perm``; a Transpose of a Transpose is one Transpose of the first one's input,
        or that input itself where the two cancel (the head split/merge around attention)."""
        prev = self.layout.get(x)
        if prev is not None and prev[0] == "Transpose":
            x, perm = prev[1], [prev[2][p] for p in perm]
        if perm == list(range(len(perm))):
            return x
        out = self.node("Transpose", [x], owner=op, perm=perm)[0]
        self.layout[out] = ("Transpose", x, perm)
        return out

    def reshape(self, x: str, src: list[int], dst: list[int], op: Op) -> str:
        """``x`` (of shape ``src``) reshaped to ``dst``; a Reshape of a Reshape reads the first one's input,
        and a reshape back to that input's shape is the input itself."""
        prev = self.layout.get(x)
        if prev is not None and prev[0] == "Reshape":
            x, src = prev[1], prev[2]
        if list(src) == list(dst):
            return x
        out = self.node("Reshape", [x, self.const(np.array(dst, np.int64), "shape")], owner=op)[0]
        self.layout[out] = ("Reshape", x, list(src))
        return out

    def prune(self, keep: set[str]) -> None:
        """Drop the nodes none of whose outputs reach ``keep`` (the graph outputs) and the initializers no
        node reads: what :meth:`transpose` and :meth:`reshape` bypassed."""
        used, kept = set(keep), []
        for nd in reversed(self.nodes):
            if any(o in used for o in nd.output if o):
                kept.append(nd)
                used.update(nd.input)
        self.nodes = kept[::-1]
        self.inits = [t for t in self.inits if t.name in used]

    def attention_contrib(self, op: Op) -> list[str] | None:
        """``ik.attention`` as onnxruntime's ``com.microsoft.MultiHeadAttention`` (its fused CPU kernel on
        [B, S, heads x dim] inputs), where that kernel is exact for the op and faster than opset-23
        Attention: float32; as many key/value heads as query heads; no soft-capping; a boolean mask or an
        additive bias (not both) broadcast over heads; q, k and v each the head split (reshape to
        [B, S, H, D], transpose to [B, H, S, D]) of a [B, S, H*D] value, so that no transpose is left on
        either side. Not causal: the kernel's causal path is no faster than opset-23 Attention's (measured
        with onnxruntime 1.32); and a rotary embedding between the split and attention (no head split to
        cancel) keeps opset-23 Attention, which takes [B, H, S, D] as it is. None where it does not
        apply. A padding mask [B|1, 1, 1, Sk] goes in as ``key_padding_mask`` with
        ``mask_filter_value=-inf``, any other mask as an additive bias of 0/-inf; rows with no live key
        are zeros (the kernel gives NaN)."""
        n = named_operands(op)
        a = op.attrs
        qv, kv, vv = op.operand(0), op.operand(1), op.operand(2)
        if float(a.get("softcap", 0.0) or 0.0) or any(x.type.rank != 4 for x in (qv, kv, vv)):
            return None
        if any(x.dtype is not DType.f32 for x in (qv, kv, vv, op.results[0])):
            return None
        bq, hq, sq, d = self.shape(qv.type)
        bk, hk, sk, dk = self.shape(kv.type)
        bv, hv, sv, dv = self.shape(vv.type)
        if (bk, hk, dk) != (bq, hq, d) or (bv, hv, sv) != (bq, hq, sk) or 0 in (bq, hq, sq, sk, d, dv):
            return None
        mask_v, bias_v = n.get("mask"), n.get("bias")
        if bool(a.get("causal", False)) or (mask_v is not None and bias_v is not None):
            return None
        extra_v = mask_v if mask_v is not None else bias_v
        ms = None
        if extra_v is not None:
            if extra_v.type.rank > 4:
                return None
            ms = [1] * (4 - extra_v.type.rank) + self.shape(extra_v.type)
            if ms[0] not in (1, bq) or ms[1] != 1 or ms[2] not in (1, sq) or ms[3] not in (1, sk):
                return None
        nd = self.node

        def split_of(x: str, s: int, dd: int) -> str | None:  # the [B, S, H*D] value x splits, if any
            t = self.layout.get(x)
            r = self.layout.get(t[1]) if t is not None and t[0] == "Transpose" and t[2] == [0, 2, 1, 3] else None
            return r[1] if r is not None and r[0] == "Reshape" and r[2] == [bq, s, hq * dd] else None

        qkv = [split_of(self.names[id(qv)], sq, d), split_of(self.names[id(kv)], sk, d),
               split_of(self.names[id(vv)], sk, dv)]
        ins = [x for x in qkv if x is not None]
        if len(ins) < 3:
            return None
        attrs: dict[str, Any] = {"num_heads": hq, "scale": float(a["scale"])}
        live = None
        guard = extra_v is not None and not self.rows_all_live(extra_v, mask_v is not None)
        if ms is not None and extra_v is not None:
            x = self.names[id(extra_v)]
            last = self.const(np.array([-1], np.int64))
            if mask_v is not None and ms[2] == 1:  # a padding mask: key_padding_mask [B, Sk] (1 = keep)
                x = self.reshape(x, self.shape(extra_v.type), [ms[0], ms[3]], op)
                if [ms[0], ms[3]] != [bq, sk]:
                    x = nd("Expand", [x, self.const(np.array([bq, sk], np.int64), "mask_shape")], owner=op)[0]
                x = nd("Cast", [x], owner=op, to=_ONNX_DTYPES["i32"])[0]
                ins += ["", x]
                attrs["mask_filter_value"] = float("-inf")
                live = nd("ReduceMax", [x, last], owner=op, keepdims=1)[0]  # [B, 1]: any live key
                live = nd("Cast", [live], owner=op, to=_ONNX_DTYPES["i1"])[0]
                live = self.reshape(live, [bq, 1], [bq, 1, 1], op)
            else:  # an additive attention_bias [B|1, 1, Sq, Sk]
                if mask_v is not None:
                    live = nd("ReduceMax", [nd("Cast", [x], owner=op, to=_ONNX_DTYPES["ui8"])[0], last], owner=op,
                              keepdims=1)[0]
                    live = nd("Cast", [live], owner=op, to=_ONNX_DTYPES["i1"])[0]
                    x = nd("Where", [x, self.const(np.zeros((), np.float32), "zero"),
                                     self.const(np.array(-np.inf, np.float32), "neg_inf")], owner=op)[0]
                else:
                    top = nd("ReduceMax", [x, last], owner=op, keepdims=1)[0]
                    live = nd("Greater", [top, self.const(np.array(-np.inf, np.float32), "neg_inf")], owner=op)[0]
                live = self.reshape(live, self.shape(extra_v.type)[:-1] + [1], [ms[0], ms[2], 1], op)  # [B, Sq, H*Dv]
                x = self.reshape(x, self.shape(extra_v.type), ms, op)
                if ms != [ms[0], 1, sq, sk]:
                    x = nd("Expand", [x, self.const(np.array([ms[0], 1, sq, sk], np.int64), "mask_shape")],
                           owner=op)[0]
                ins += ["", "", x]
        out = nd("MultiHeadAttention", ins, owner=op, domain=MS_DOMAIN, **attrs)[0]
        if live is not None and guard:  # (the live-row nodes go unused otherwise, and are pruned)
            out = nd("Where", [live, out, self.const(np.zeros((), np.float32), "zero")], owner=op)[0]
        out = self.reshape(out, [bq, sq, hq * dv], [bq, sq, hq, dv], op)
        return [self.transpose(out, [0, 2, 1, 3], op)]  # cancels against the head merge that follows

    def unlowest(self, v: Value, x: str, op: Op) -> str:
        """An additive attention bias ``x`` (of value ``v``) with its dtype's lowest finite value moved one
        step up.  onnxruntime's opset-23 Attention kernel takes a bias equal to the lowest finite value
        as a masked key (its MultiHeadAttention does not), so a row biased to it throughout comes back
        zeros; ``ik.attention`` (like torch and the ONNX reference) adds it like any other number, which
        leaves a uniform row (what masking with ``finfo.min``, as DeBERTa does, gives on padded query
        rows).  One step up is never read as masked and rounds the same way when added to a score.  A
        constant bias without that value is left as it is."""
        dt = v.type.dtype
        if dt is DType.bf16 or not dt.is_float or dt.is_float8:
            return x
        low = np.finfo(dt.np).min
        p = v.producer
        if p is not None and p.name == "ik.constant" and not (np.asarray(p.attrs["value"].array) == low).any():
            return x
        at = self.const(np.array(low, dt.np), "lowest")
        up = self.const(np.nextafter(np.array(low, dt.np), np.array(0, dt.np)), "above_lowest")
        eq = self.node("Equal", [x, at], owner=op)[0]
        return self.node("Where", [eq, up, x], owner=op)[0]

    @staticmethod
    def rows_all_live(v: Value, is_mask: bool) -> bool:
        """Whether ``v``, an attention mask or bias, is a constant that leaves every query row a live key
        (some True, or some bias above -inf; no NaN): the guard that zeroes dead rows is then not needed."""
        p = v.producer
        if p is None or p.name != "ik.constant":
            return False
        arr = np.asarray(p.attrs["value"].array)
        if arr.size == 0 or (not is_mask and np.isnan(arr.astype(np.float64)).any()):
            return False
        live = arr.astype(bool).any(-1) if is_mask else (arr.astype(np.float64) > -np.inf).any(-1)
        return bool(np.all(live))

    def attention_op(self, op: Op, ins: list[str]) -> list[str]:
        if self.attention == "contrib":
            got = self.attention_contrib(op)
            if got is not None:
                return got
        n = named_operands(op)
        a = op.attrs
        scale, causal = float(a["scale"]), bool(a.get("causal", False))
        softcap = float(a.get("softcap", 0.0) or 0.0)
        mask = self.names[id(n["mask"])] if n.get("mask") is not None else None
        bias = self.names[id(n["bias"])] if n.get("bias") is not None else None
        # Soft-capping runs decomposed: opset-23 Attention caps after adding its mask (a -inf key would
        # come back as -softcap), ik.attention caps the scaled scores before the bias and mask.
        if self.attention in ("onnx", "contrib") and not (mask is not None and bias is not None) and not softcap:
            extra = []
            small = None
            if mask or bias:
                # ORT's Attention broadcasts the mask over batch and heads only: expand the query and
                # key dims, keep the mask's own batch and head dims (a [B,1,1,Sk] padding mask becomes
                # [B,1,Sq,Sk], not [B,H,Sq,Sk]).
                bq, hq, sq, _ = self.shape(op.operand(0).type)
                sk = self.shape(op.operand(1).type)[2]
                mv = n["mask"] if mask is not None else n["bias"]
                assert mv is not None
                ms = [1] * max(0, 4 - mv.type.rank) + self.shape(mv.type)
                full = self.const(np.array([ms[0], ms[1], sq, sk], np.int64), "mask_shape")
                small = mask or self.unlowest(mv, bias, op)  # type: ignore[arg-type]
                extra = self.node("Expand", [small, full], owner=op)  # type: ignore[list-item]
            out = self.node("Attention", ins[:3] + extra, owner=op, scale=scale, is_causal=int(causal))
            mv = n.get("mask") if mask is not None else n.get("bias")
            if not extra or (mv is not None and self.rows_all_live(mv, mask is not None)):
                return out
            # A row whose keys are all masked (or all biased to -inf) is zeros in the reference
            # (attention_reference); onnxruntime's Attention gives NaN there.  Whether a row has a
            # live key is read off the mask before its expansion (broadcast by Where).
            last = self.const(np.array([-1], np.int64))
            assert small is not None  # set with extra
            if mask is not None:
                live = self.node("ReduceMax", [self.node("Cast", [small], owner=op, to=_ONNX_DTYPES["ui8"])[0], last],
                                 owner=op, keepdims=1)[0]
                live = self.node("Cast", [live], owner=op, to=_ONNX_DTYPES["i1"])[0]
            else:
                top = self.node("ReduceMax", [small, last], owner=op, keepdims=1)[0]
                dt = op.operand(0).type.dtype
                neg = self.const(np.array(-np.inf, np.float32 if dt is DType.bf16 else dt.np), "neg_inf")
                live = self.node("Greater", [top, neg], owner=op)[0]
            zero = self.const(np.zeros((), np.float32 if op.results[0].dtype is DType.bf16 else op.results[0].dtype.np))
            return self.node("Where", [live, out[0], zero], owner=op)
        return self.attention_decomposed(op, ins[:3], mask, bias, scale, causal, softcap)

    def attention_decomposed(self, op: Op, qkv: list[str], mask: str | None, bias: str | None, scale: float,
                             causal: bool, softcap: float = 0.0) -> list[str]:
        nd = self.node
        q, k, v = qkv
        qt, kt = op.operand(0).type, op.operand(1).type
        bq, hq, sq, d = self.shape(qt)
        hk, sk = self.shape(kt)[1], self.shape(kt)[2]
        dt = qt.dtype.np
        if hk != hq:
            rep = hq // hk
            for name in ("k", "v"):
                src = k if name == "k" else v
                vt = op.operand(1 if name == "k" else 2).type
                dd = self.shape(vt)[3]
                x = nd("Unsqueeze", [src, self.const(np.array([2], np.int64))], owner=op)[0]
                x = nd("Expand", [x, self.const(np.array([bq, hk, rep, sk, dd], np.int64))], owner=op)[0]
                x = nd("Reshape", [x, self.const(np.array([bq, hq, sk, dd], np.int64))], owner=op)[0]
                if name == "k":
                    k = x
                else:
                    v = x
        s = nd("MatMul", [q, nd("Transpose", [k], owner=op, perm=[0, 1, 3, 2])[0]], owner=op)[0]
        s = nd("Mul", [s, self.const(np.array(scale, dt), "scale")], owner=op)[0]
        if softcap:
            s = nd("Div", [s, self.const(np.array(softcap, dt), "softcap")], owner=op)[0]
            s = nd("Mul", [nd("Tanh", [s], owner=op)[0], self.const(np.array(softcap, dt), "softcap")], owner=op)[0]
        if bias is not None:
            s = nd("Add", [s, bias], owner=op)[0]
        keep = None
        if mask is not None:
            keep = mask
        if causal:
            tri = self.const(np.tril(np.ones((sq, sk), dtype=bool)), "causal")
            keep = tri if keep is None else nd("And", [keep, tri], owner=op)[0]
        if keep is None and bias is None:
            return nd("MatMul", [nd("Softmax", [s], owner=op, axis=-1)[0], v], owner=op)
        if keep is not None:  # (a bias alone may still put -inf on every key of a row: same guards below)
            neg = self.const(np.array(-np.inf, dt), "neg_inf")
            s = nd("Where", [keep, s, neg], owner=op)[0]
        mx = nd("ReduceMax", [s, self.const(np.array([-1], np.int64))], owner=op, keepdims=1)[0]
        zero = self.const(np.array(0, dt), "zero")
        finite = nd("IsInf", [mx], owner=op)[0]
        mx = nd("Where", [finite, zero, mx], owner=op)[0]
        e = nd("Exp", [nd("Sub", [s, mx], owner=op)[0]], owner=op)[0]
        den = nd("ReduceSum", [e, self.const(np.array([-1], np.int64))], owner=op, keepdims=1)[0]
        none = nd("Equal", [den, zero], owner=op)[0]  # no visible key: zeros (a NaN sum stays NaN)
        one = self.const(np.array(1, dt), "one")
        p = nd("Div", [e, nd("Where", [none, one, den], owner=op)[0]], owner=op)[0]
        return nd("MatMul", [p, v], owner=op)


def _einsum_equation(op: Op) -> str:
    a = op.attrs
    x, y = op.operand(0).type, op.operand(1).type
    lb, rb, lc, rc = a.get("lhs_batch", ()), a.get("rhs_batch", ()), a["lhs_contract"], a["rhs_contract"]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lhs = [""] * x.rank
    rhs = [""] * y.rank
    for i, j in list(zip(lb, rb)) + list(zip(lc, rc)):
        lhs[i] = rhs[j] = next(letters)
    lf = [i for i in range(x.rank) if not lhs[i]]
    rf = [j for j in range(y.rank) if not rhs[j]]
    for i in lf:
        lhs[i] = next(letters)
    for j in rf:
        rhs[j] = next(letters)
    out = "".join(lhs[i] for i in lb) + "".join(lhs[i] for i in lf) + "".join(rhs[j] for j in rf)
    return f"{''.join(lhs)},{''.join(rhs)}->{out}"




# --------------------------------------------------------------------------------------------
# Lowering rules: ``(exporter, op, input names) -> output names``, one table (ORT_RULES).
# --------------------------------------------------------------------------------------------

ORT_RULES = LoweringTable("ort")


def _attrs(op: Op) -> dict[str, Any]:
    d = OPS.get(op.name)
    return d.with_defaults(op.attrs) if d is not None else dict(op.attrs)


def _gdt(v: Value) -> str:
    """The element type a value has *in the ONNX graph* (bf16 and float8 travel as f32)."""
    return "f32" if _in_f32(v.dtype) else v.dtype.value


def _bits(dt: str) -> int:
    return {"i8": 8, "ui8": 8, "i16": 16, "ui16": 16, "i32": 32, "ui32": 32, "i64": 64, "ui64": 64}[dt]


def _unsigned(dt: str) -> str:
    return dt if dt.startswith("ui") else f"ui{_bits(dt)}"


def _np_of(dt: str) -> np.dtype:
    return np.dtype({"f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64, "i32": np.int32,
                     "i16": np.int16, "i8": np.int8, "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32,
                     "ui64": np.uint64, "i1": np.bool_}[dt])


def _is_float(dt: str) -> bool:
    return dt in ("f64", "f32", "f16")


def _wide(dt: str) -> str:
    """A type onnxruntime has kernels for that holds every value of ``dt`` (small ints widen)."""
    return {"i8": "i32", "ui8": "i32", "i16": "i32", "ui16": "i32", "ui32": "i64"}.get(dt, dt)


# -- the ops every Transformer graph has -------------------------------------------------------

@ORT_RULES.rule("ik.rsqrt")
def _rsqrt(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Reciprocal", ex.node("Sqrt", ins, owner=op), owner=op)


@ORT_RULES.rule("ik.silu")
def _silu(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Mul", [ins[0], ex.node("Sigmoid", ins, owner=op)[0]], owner=op)


@ORT_RULES.rule("ik.gelu")
def _gelu(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Gelu", ins, owner=op, approximate=op.attrs.get("approximate", "none"))


_INT_KERNELS: dict[str, tuple[str, ...]] = {
    "Max": ("i8", "ui8", "i32", "i64", "ui32", "ui64"), "Min": ("i8", "ui8", "i32", "i64", "ui32", "ui64"),
    "Pow": ("i32", "i64"), "Neg": ("i8", "i16", "i32", "i64"),
    "MatMul": ("i32", "i64", "ui32", "ui64"), "Pad": ("i8", "ui8", "i32", "i64", "ui32", "ui64"),
}
"""Integer types onnxruntime's CPU kernels have, for the ONNX ops that lack some (the rest have all)."""


def _int_kernel(ex: _Exporter, op: Op, onnx_op: str, ins: list[str], dt: str, **attrs: Any) -> list[str]:
    """``onnx_op`` on integer inputs of type ``dt``, through a wider type where onnxruntime has no
    kernel: the result is cast back, which keeps the bits a wrapping operation gives in ``dt``."""
    have = _INT_KERNELS.get(onnx_op)
    if _is_float(dt) or dt == "i1" or have is None or dt in have:
        return ex.node(onnx_op, ins, owner=op, **attrs)
    via = "i32" if _bits(dt) <= 16 and "i32" in have else "i64"
    out = ex.node(onnx_op, [ex.cast(x, via, op) for x in ins], owner=op, **attrs)
    return [ex.cast(o, dt, op) for o in out]


@ORT_RULES.rule(*(f"ik.{n}" for n in _BINARY))
def _binary(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return _int_kernel(ex, op, _BINARY[op.name[3:]], ins, _gdt(op.results[0]))


@ORT_RULES.rule("ik.ne")
def _ne(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Not", ex.node("Equal", ins, owner=op), owner=op)


@ORT_RULES.rule("ik.rem")
def _rem(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Mod", ins, owner=op, fmod=1)


@ORT_RULES.rule("ik.where")
def _where(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    dt = _gdt(op.results[0])
    if dt == "i1":  # ORT's CPU Where has no bool kernel: select as uint8
        u8 = [ex.cast(x, "ui8", op) for x in ins[1:]]
        return [ex.cast(ex.node("Where", [ins[0], *u8], owner=op)[0], "i1", op)]
    if dt in ("i16", "ui16", "ui64"):
        return [_select(ex, op, ins[0], ins[1], ins[2], dt)]
    return ex.node("Where", ins, owner=op)


@ORT_RULES.rule("ik.cast")
def _cast(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    to: DType = op.attrs["to"]  # to bf16: to f32 here, op() rounds
    if to.is_float8:
        # ONNX Cast to float8 is the IR's: nearest even; saturate=1 clamps (the IR default is 0).
        if op.operand(0).dtype is DType.f64:
            ex.refuse(op, f"converting f64 to {to}: onnxruntime's double-to-float8 Cast is not checked to "
                          "round once; cast to f32 first if double rounding is acceptable")
        sat = bool(_attrs(op).get("saturate", False))
        x = ins[0] if _gdt(op.operand(0)) in ("f32", "f64") else ex.cast(ins[0], "f32", op)
        return [_round_float8(ex, op, x, to, sat)]
    return ex.node("Cast", ins, owner=op, to=_onnx_dtype(DType.f32 if to is DType.bf16 else to))


def _round_float8(ex: _Exporter, op: Op, x: str, to: DType, saturate: bool) -> str:
    """``x`` (f32, or f64) rounded to the float8 type ``to``, as a float32 value (how float8 travels)."""
    if to in (DType.f8e5m2, DType.f8e4m3fn) and not saturate:
        # onnxruntime 1.32 rounds some overflows wrongly without saturation: f8E5M2 gives NaN for the
        # tie 61440 (nearest even is inf), f8E4M3FN gives 448 for [480, 512) (NaN).  Saturate, then
        # put the overflow value back where |x| rounds beyond the largest finite value.
        f8 = ex.node("Cast", [x], owner=op, to=_onnx_dtype(to), saturate=1)[0]
        y = ex.node("Cast", [f8], owner=op, to=_onnx_dtype(DType.f32))[0]
        x32 = ex.node("Cast", [x], owner=op, to=_onnx_dtype(DType.f32))[0]
        ax = ex.node("Abs", [x32], owner=op)[0]
        if to is DType.f8e5m2:
            big = ex.node("GreaterOrEqual", [ax, ex.const(np.array(61440.0, np.float32))], owner=op)[0]
            neg = ex.node("Less", [x32, ex.const(np.array(0.0, np.float32))], owner=op)[0]
            over = ex.node("Where", [neg, ex.const(np.array(-np.inf, np.float32)),
                                     ex.const(np.array(np.inf, np.float32))], owner=op)[0]
        else:
            big = ex.node("Greater", [ax, ex.const(np.array(464.0, np.float32))], owner=op)[0]
            over = ex.const(np.array(np.nan, np.float32))
        return ex.node("Where", [big, over, y], owner=op)[0]
    f8 = ex.node("Cast", [x], owner=op, to=_onnx_dtype(to), saturate=int(saturate))[0]
    return ex.node("Cast", [f8], owner=op, to=_onnx_dtype(DType.f32))[0]


@ORT_RULES.rule("ik.bitcast")
def _bitcast(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    src, to = op.operand(0).dtype, op.results[0].dtype
    if src.bits != to.bits:
        ex.refuse(op, f"bitcast {src} -> {to} changes the element width; ONNX BitCast needs equal widths")
    if src.is_float8 or to.is_float8:
        ex.refuse(op, f"bitcast {src} -> {to}: onnxruntime 1.32 has no BitCast kernel for float8 types")
    ex.opset = max(ex.opset, BITCAST_OPSET)
    x = ins[0]
    if src is DType.bf16:  # lives in f32, holding a bf16 value: exact
        x = ex.node("Cast", [x], owner=op, to=_onnx_dtype(DType.bf16))[0]
    y = ex.node("BitCast", [x], owner=op, to=_onnx_dtype(to))[0]
    if to is DType.bf16:
        y = ex.node("Cast", [y], owner=op, to=_onnx_dtype(DType.f32))[0]
    return [y]


@ORT_RULES.rule("ik.dropout")
def _dropout(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Identity", ins, owner=op)


@ORT_RULES.rule("ik.softmax", "ik.log_softmax")
def _softmax(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Softmax" if op.name == "ik.softmax" else "LogSoftmax", ins, owner=op,
                   axis=op.attrs.get("axis", -1))


@ORT_RULES.rule("ik.layer_norm", "ik.rms_norm")
def _norm(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    a = op.attrs
    n = named_operands(op)
    x = op.operand(0)
    ax = normalize_axis(a.get("axis", -1), x.type.rank)
    norm_shape = ex.shape(x.type)[ax:]
    w = ex.names[id(n["weight"])] if n.get("weight") is not None else ex.const(np.ones(norm_shape, x.dtype.np), "ones")
    if op.name == "ik.rms_norm":
        return ex.node("RMSNormalization", [ins[0], w], owner=op, axis=ax, epsilon=float(a.get("eps", 1e-6)))
    args = [ins[0], w] + ([ex.names[id(n["bias"])]] if n.get("bias") is not None else [])
    return ex.node("LayerNormalization", args, owner=op, axis=ax, epsilon=float(a.get("eps", 1e-5)))


@ORT_RULES.rule("ik.matmul")
def _matmul(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return _int_kernel(ex, op, "MatMul", ins, _gdt(op.results[0]))  # i8/i16 products wrap the same via i32/i64


@ORT_RULES.rule("ik.contract")
def _contract(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Einsum", ins, owner=op, equation=_einsum_equation(op))


@ORT_RULES.rule("ik.reshape", "ik.broadcast")
def _reshape(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    if op.name == "ik.reshape":
        return [ex.reshape(ins[0], ex.shape(op.operand(0).type), ex.shape(op.results[0].type), op)]
    shape = ex.const(np.array(ex.shape(op.results[0].type), np.int64), "shape")
    return ex.node("Reshape" if op.name == "ik.reshape" else "Expand", [ins[0], shape], owner=op)


@ORT_RULES.rule("ik.transpose")
def _transpose(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return [ex.transpose(ins[0], [int(p) for p in op.attrs["perm"]], op)]


@ORT_RULES.rule("ik.slice")
def _slice(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    a = op.attrs
    r = op.operand(0).type.rank
    st = [eval_dim(x, ex.b) for x in a["start"]]
    lim = [eval_dim(x, ex.b) for x in a["limit"]]
    step = list(a.get("step") or (1,) * r)
    return ex.node("Slice", [ins[0], ex.const(np.array(st, np.int64)), ex.const(np.array(lim, np.int64)),
                             ex.const(np.arange(r, dtype=np.int64)), ex.const(np.array(step, np.int64))], owner=op)


@ORT_RULES.rule("ik.concat")
def _concat(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Concat", ins, owner=op, axis=op.attrs["axis"])


@ORT_RULES.rule("ik.split")
def _split(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    sizes = [eval_dim(s, ex.b) for s in op.attrs["sizes"]]
    return ex.node("Split", [ins[0], ex.const(np.array(sizes, np.int64), "split")], n_out=len(sizes), owner=op,
                   axis=op.attrs["axis"])


@ORT_RULES.rule("ik.gather")
def _gather(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Gather", ins, owner=op, axis=op.attrs.get("axis", 0))


@ORT_RULES.rule("ik.iota")
def _iota(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    shape = ex.shape(op.results[0].type)
    ax = normalize_axis(op.attrs.get("axis", 0), len(shape))
    r = np.arange(shape[ax]).reshape([-1 if i == ax else 1 for i in range(len(shape))])
    return ex.node("Identity", [ex.const(np.broadcast_to(r, shape).astype(op.results[0].dtype.np), "iota")], owner=op)


@ORT_RULES.rule("ik.constant")
def _constant(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Identity", [ex.const(op.attrs["value"].array, "const")], owner=op)


@ORT_RULES.rule("ik.dim_value")
def _dim_value(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    value = np.array(eval_dim(op.attrs["dim"][0], ex.b), op.results[0].dtype.np)
    return ex.node("Identity", [ex.const(value, "dim")], owner=op)


@ORT_RULES.rule("ik.pad")
def _pad(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    a = op.attrs
    dt = _gdt(op.operand(0))
    x = ins[0]
    via = dt if dt not in ("i16", "ui16") else "i32"  # no 16-bit Pad kernel
    value = np.array(a.get("value", 0.0)).astype(op.operand(0).dtype.np)  # np.pad casts the fill the same way
    out = ex.node("Pad", [x if via == dt else ex.cast(x, via, op), ex.const(np.array(a["pads"], np.int64), "pads"),
                          ex.const(value if via == dt else value.astype(_np_of(via)), "pad_value")],
                  owner=op, mode="constant")
    return out if via == dt else [ex.cast(out[0], dt, op)]


@ORT_RULES.rule("ik.attention")
def _attention(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.attention_op(op, ins)


@ORT_RULES.rule("ik.fused")
def _fused(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    body = op.regions[0]
    for arg, name in zip(body.args, ins):
        ex.names[id(arg)] = name
    outer, ex.region_owner = ex.region_owner, ex.region_owner or op
    try:
        ex.graph(body)
    finally:
        ex.region_owner = outer
    return [ex.names[id(v)] for v in body.outputs]


# -- elementwise ---------------------------------------------------------------------------------

_F32_ONLY = {"tan": "Tan", "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
             "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh"}
"""ONNX ops whose onnxruntime CPU kernels exist for float and float16 only (not double)."""


@ORT_RULES.rule(*(f"ik.{n}" for n in _UNARY))
def _unary(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    short = op.name[3:]
    dt = _gdt(op.operand(0))
    if short == "erf" and dt == "f64":
        ex.refuse(op, "onnxruntime has no double kernel for Erf")
    if dt.startswith("ui") and short in ("neg", "relu"):  # no unsigned kernels: 0 - x wraps; relu is x
        if short == "relu":
            return ex.node("Identity", ins, owner=op)
        return ex.node("Sub", [ex.const(np.array(0, _np_of(dt))), ins[0]], owner=op)
    if short == "relu" and not _is_float(dt):  # Relu has few integer kernels; Max(x, 0) is the same
        return _int_kernel(ex, op, "Max", [ins[0], ex.const(np.array(0, _np_of(dt)))], dt)
    return _int_kernel(ex, op, _UNARY[short], ins, dt)


@ORT_RULES.rule(*(f"ik.{n}" for n in _F32_ONLY))
def _float32_unary(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    short = op.name[3:]
    if _gdt(op.operand(0)) != "f64":
        return ex.node(_F32_ONLY[short], ins, owner=op)
    # onnxruntime has no double kernel: the identities below keep f64 precision (absolute error ~1 ulp).
    nd, x = ex.node, ins[0]
    c = ex.scalar_like(op.operand(0))
    if short == "tan":
        return nd("Div", [nd("Sin", [x], owner=op)[0], nd("Cos", [x], owner=op)[0]], owner=op)
    if short in ("sinh", "cosh"):
        e, en = nd("Exp", [x], owner=op)[0], nd("Exp", [nd("Neg", [x], owner=op)[0]], owner=op)[0]
        s = nd("Sub" if short == "sinh" else "Add", [e, en], owner=op)[0]
        return nd("Mul", [s, c(0.5)], owner=op)
    if short == "asinh":  # sign(x) * log(|x| + sqrt(x^2 + 1)), no cancellation for negative x
        ax = nd("Abs", [x], owner=op)[0]
        r = nd("Sqrt", [nd("Add", [nd("Mul", [ax, ax], owner=op)[0], c(1)], owner=op)[0]], owner=op)[0]
        lg = nd("Log", [nd("Add", [ax, r], owner=op)[0]], owner=op)[0]
        return nd("Mul", [nd("Sign", [x], owner=op)[0], lg], owner=op)
    if short == "acosh":
        r = nd("Sqrt", [nd("Sub", [nd("Mul", [x, x], owner=op)[0], c(1)], owner=op)[0]], owner=op)[0]
        return nd("Log", [nd("Add", [x, r], owner=op)[0]], owner=op)
    if short == "atanh":
        q = nd("Div", [nd("Add", [c(1), x], owner=op)[0], nd("Sub", [c(1), x], owner=op)[0]], owner=op)[0]
        return nd("Mul", [nd("Log", [q], owner=op)[0], c(0.5)], owner=op)
    ex.refuse(op, f"onnxruntime has no double kernel for {_F32_ONLY[short]} (computing it in f32 would lose "
                  "f64 precision); cast to f32 first")
    raise AssertionError  # unreachable


@ORT_RULES.rule("ik.log1p")
def _log1p(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    # Kahan: log1p(x) = x * log(u) / (u - 1) with u = 1 + x, exact where u rounds to 1.
    nd, x, c = ex.node, ins[0], ex.scalar_like(op.operand(0))
    u = nd("Add", [x, c(1)], owner=op)[0]
    d = nd("Sub", [u, c(1)], owner=op)[0]
    q = nd("Div", [nd("Mul", [x, nd("Log", [u], owner=op)[0]], owner=op)[0], d], owner=op)[0]
    q = nd("Where", [nd("IsInf", [u], owner=op, detect_negative=0)[0], u, q], owner=op)[0]  # log1p(+inf)
    return nd("Where", [nd("Equal", [d, c(0)], owner=op)[0], x, q], owner=op)


@ORT_RULES.rule("ik.expm1")
def _expm1(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    # Kahan: expm1(x) = (u - 1) * x / log(u) with u = exp(x); exact where u rounds to 1 or underflows.
    nd, x, c = ex.node, ins[0], ex.scalar_like(op.operand(0))
    u = nd("Exp", [x], owner=op)[0]
    um1 = nd("Sub", [u, c(1)], owner=op)[0]
    q = nd("Div", [nd("Mul", [um1, x], owner=op)[0], nd("Log", [u], owner=op)[0]], owner=op)[0]
    q = nd("Where", [nd("IsInf", [u], owner=op, detect_negative=0)[0], u, q], owner=op)[0]  # expm1(+inf)
    q = nd("Where", [nd("Equal", [um1, c(-1)], owner=op)[0], um1, q], owner=op)[0]
    return nd("Where", [nd("Equal", [u, c(1)], owner=op)[0], x, q], owner=op)


@ORT_RULES.rule("ik.round")
def _round(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    return ex.node("Round", ins, owner=op)  # half to even, as np.round


@ORT_RULES.rule("ik.trunc")
def _trunc(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    nd, x, c = ex.node, ins[0], ex.scalar_like(op.operand(0))
    neg = nd("Less", [x, c(0)], owner=op)[0]
    return nd("Where", [neg, nd("Ceil", [x], owner=op)[0], nd("Floor", [x], owner=op)[0]], owner=op)


@ORT_RULES.rule("ik.isnan", "ik.isinf", "ik.isfinite")
def _classify(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    nd = ex.node
    if op.name == "ik.isnan":
        return nd("IsNaN", ins, owner=op)
    if op.name == "ik.isinf":
        return nd("IsInf", ins, owner=op)
    bad = nd("Or", [nd("IsNaN", ins, owner=op)[0], nd("IsInf", ins, owner=op)[0]], owner=op)[0]
    return nd("Not", [bad], owner=op)


NO_ONNX_OP: dict[str, str] = {
    "ik.erfinv": "ONNX has no erfinv op and no exact decomposition",
    "ik.lgamma": "ONNX has no lgamma op and no exact decomposition",
    "ik.digamma": "ONNX has no digamma op and no exact decomposition",
    "ik.nextafter": "ONNX has no nextafter and no bit reinterpretation to build it from",
}
"""Registry ops ``ort`` does not lower (so they have no rule, and ``irkit coverage`` says no), and why."""


@ORT_RULES.rule("ik.atan2")
def _atan2(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    """atan2 from Atan with the quadrant, signed-zero and infinity cases of C's atan2."""
    if _gdt(op.operand(0)) == "f64":
        ex.refuse(op, "onnxruntime has no double kernel for Atan (computing it in f32 would lose f64 precision)")
    nd, (y, x), c = ex.node, ins, ex.scalar_like(op.operand(0))
    pi = math.pi

    def neg(v: str) -> str:  # sign bit set: v < 0, or v is -0 (1/v = -inf)
        lt = nd("Less", [v, c(0)], owner=op)[0]
        negzero = nd("And", [nd("Equal", [v, c(0)], owner=op)[0],
                             nd("Less", [nd("Reciprocal", [v], owner=op)[0], c(0)], owner=op)[0]], owner=op)[0]
        return nd("Or", [lt, negzero], owner=op)[0]

    ysgn = nd("Where", [neg(y), c(-1), c(1)], owner=op)[0]  # copysign(1, y)
    base = nd("Atan", [nd("Div", [y, x], owner=op)[0]], owner=op)[0]
    xneg = neg(x)
    r = nd("Where", [xneg, nd("Add", [base, nd("Mul", [ysgn, c(pi)], owner=op)[0]], owner=op)[0], base], owner=op)[0]
    # x == 0 (y != 0): ±pi/2; y == 0: ±0 or ±pi by the sign of x
    xzero = nd("Equal", [x, c(0)], owner=op)[0]
    r = nd("Where", [xzero, nd("Mul", [ysgn, c(pi / 2)], owner=op)[0], r], owner=op)[0]
    yzero = nd("Equal", [y, c(0)], owner=op)[0]
    r = nd("Where", [yzero, nd("Where", [xneg, nd("Mul", [ysgn, c(pi)], owner=op)[0],
                                         nd("Mul", [ysgn, c(0)], owner=op)[0]], owner=op)[0], r], owner=op)[0]
    # both infinite: ±pi/4 or ±3pi/4
    both = nd("And", [nd("IsInf", [y], owner=op)[0], nd("IsInf", [x], owner=op)[0]], owner=op)[0]
    q = nd("Where", [xneg, c(3 * pi / 4), c(pi / 4)], owner=op)[0]
    r = nd("Where", [both, nd("Mul", [ysgn, q], owner=op)[0], r], owner=op)[0]
    nan = nd("Or", [nd("IsNaN", [y], owner=op)[0], nd("IsNaN", [x], owner=op)[0]], owner=op)[0]
    return nd("Where", [nan, nd("Add", [y, x], owner=op)[0], r], owner=op)


@ORT_RULES.rule("ik.bitwise_not", "ik.bitwise_and", "ik.bitwise_or", "ik.bitwise_xor")
def _bitwise(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    onnx_op = {"ik.bitwise_not": "BitwiseNot", "ik.bitwise_and": "BitwiseAnd", "ik.bitwise_or": "BitwiseOr",
               "ik.bitwise_xor": "BitwiseXor"}[op.name]
    return ex.node(onnx_op, ins, owner=op)


def _popcount_u(ex: _Exporter, op: Op, x: str, udt: str) -> str:
    """SWAR population count of an unsigned value (Hacker's Delight 5-1), same type out."""
    nd, w = ex.node, _bits(udt)
    t = _np_of(udt)

    def k(v: int) -> str:
        return ex.const(np.array(v & ((1 << w) - 1), t), "popc")

    def shr(v: str, n: int) -> str:
        return nd("BitShift", [v, k(n)], owner=op, direction="RIGHT")[0]

    def band(v: str, m: int) -> str:
        return nd("BitwiseAnd", [v, k(m)], owner=op)[0]

    m1, m2, m4 = (int("55" * 8, 16), int("33" * 8, 16), int("0f" * 8, 16))
    x = nd("Sub", [x, band(shr(x, 1), m1)], owner=op)[0]
    x = nd("Add", [band(x, m2), band(shr(x, 2), m2)], owner=op)[0]
    x = band(nd("Add", [x, shr(x, 4)], owner=op)[0], m4)
    if w == 8:
        return x
    return shr(nd("Mul", [x, k(int("01" * 8, 16))], owner=op)[0], w - 8)


@ORT_RULES.rule("ik.popcount", "ik.clz")
def _popcount_clz(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    nd = ex.node
    dt = _gdt(op.operand(0))
    udt = _unsigned(dt)
    x = ins[0] if dt == udt else ex.cast(ins[0], udt, op)  # same width: ONNX Cast keeps the bits
    if op.name == "ik.clz":
        w = _bits(udt)
        s = 1
        while s < w:  # smear the highest set bit down; clz = w - popcount
            x = nd("BitwiseOr", [x, nd("BitShift", [x, ex.const(np.array(s, _np_of(udt)))], owner=op,
                                      direction="RIGHT")[0]], owner=op)[0]
            s *= 2
        r = nd("Sub", [ex.const(np.array(w, _np_of(udt))), _popcount_u(ex, op, x, udt)], owner=op)[0]
    else:
        r = _popcount_u(ex, op, x, udt)
    return [r if dt == udt else ex.cast(r, dt, op)]


@ORT_RULES.rule("ik.shift_left", "ik.shift_right_logical", "ik.shift_right_arithmetic")
def _shift(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    """XLA shifts from ONNX BitShift (unsigned only): signed values shift as their unsigned bits, the
    amount is read as unsigned, and an amount >= the bit width gives 0 (or the sign fill)."""
    nd = ex.node
    dt = _gdt(op.results[0])
    udt = _unsigned(dt)
    w = _bits(udt)
    ut = _np_of(udt)
    x, n = ins
    xu = x if dt == udt else ex.cast(x, udt, op)
    nu = n if dt == udt else ex.cast(n, udt, op)
    big = nd("GreaterOrEqual", [nu, ex.const(np.array(w, ut))], owner=op)[0]
    if op.name == "ik.shift_right_arithmetic":
        if dt == udt:
            sign = None
        else:
            sign = nd("Less", [x, ex.const(np.array(0, _np_of(dt)))], owner=op)[0]
        amount = _select(ex, op, big, ex.const(np.array(w - 1, ut)), nu, udt)
        if sign is None:  # an unsigned type: the top bit is the sign, as XLA reads it
            sign = nd("GreaterOrEqual", [xu, ex.const(np.array(1 << (w - 1), ut))], owner=op)[0]
        flipped = _select(ex, op, sign, nd("BitwiseNot", [xu], owner=op)[0], xu, udt)
        r = nd("BitShift", [flipped, amount], owner=op, direction="RIGHT")[0]
        r = _select(ex, op, sign, nd("BitwiseNot", [r], owner=op)[0], r, udt)
    else:
        amount = _select(ex, op, big, ex.const(np.array(0, ut)), nu, udt)
        r = nd("BitShift", [xu, amount], owner=op, direction="LEFT" if op.name == "ik.shift_left" else "RIGHT")[0]
        r = _select(ex, op, big, ex.const(np.array(0, ut)), r, udt)
    return [r if dt == udt else ex.cast(r, dt, op)]


def _select(ex: _Exporter, op: Op, cond: str, a: str, b: str, dt: str) -> str:
    """``Where`` for any integer type: onnxruntime's Where has no 16-bit or u64 kernel, so those go through
    a type that keeps their bits."""
    via = {"i16": "i32", "ui16": "i32", "ui64": "i64"}.get(dt)
    if via is None:
        return ex.node("Where", [cond, a, b], owner=op)[0]
    r = ex.node("Where", [cond, ex.cast(a, via, op), ex.cast(b, via, op)], owner=op)[0]
    return ex.cast(r, dt, op)


@ORT_RULES.rule("ik.mod", "ik.floor_div")
def _floored(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    """Floored remainder / division (sign of the divisor) from ONNX's truncated Mod(fmod=1) and Div."""
    nd = ex.node
    dt = _gdt(op.results[0])
    x, y = ins
    zero = ex.const(np.array(0, _np_of(dt)))
    if not _is_float(dt):
        # An integer division by zero would kill the process (SIGFPE); NumPy gives 0, as the reference does.
        yz = nd("Equal", [y, zero], owner=op)[0]
        y = _select(ex, op, yz, ex.const(np.array(1, _np_of(dt))), y, dt)
    r = nd("Mod", [x, y], owner=op, fmod=1)[0]
    rnz = nd("Not", [nd("Equal", [r, zero], owner=op)[0]], owner=op)[0]
    if dt.startswith("ui"):
        fix = None  # unsigned: truncated and floored agree
    else:
        fix = nd("And", [rnz, nd("Xor", [nd("Less", [r, zero], owner=op)[0], nd("Less", [y, zero], owner=op)[0]],
                                 owner=op)[0]], owner=op)[0]
    if op.name == "ik.mod":
        out = r if fix is None else _select_any(ex, op, fix, nd("Add", [r, y], owner=op)[0], r, dt)
    elif _is_float(dt):
        # NumPy's floor_divide (npy_divmod), not floor(x / y): (x - fmod(x, y)) / y is exact, then a
        # step down where the remainder's sign differs from the divisor's; x / 0 stays IEEE.
        assert fix is not None  # a float type is signed
        q = nd("Div", [nd("Sub", [x, r], owner=op)[0], y], owner=op)[0]
        q = nd("Where", [fix, nd("Sub", [q, ex.const(np.array(1, _np_of(dt)))], owner=op)[0], q], owner=op)[0]
        q = nd("Round", [q], owner=op)[0]
        out = nd("Where", [nd("Equal", [y, zero], owner=op)[0], nd("Div", [x, y], owner=op)[0], q], owner=op)[0]
    else:
        q = nd("Div", [nd("Sub", [x, r], owner=op)[0], y], owner=op)[0]  # exact: x - r is a multiple of y
        out = q if fix is None else _select_any(
            ex, op, fix, nd("Sub", [q, ex.const(np.array(1, _np_of(dt)))], owner=op)[0], q, dt)
    if not _is_float(dt):
        out = _select_any(ex, op, yz, zero, out, dt)
    return [out]


def _select_any(ex: _Exporter, op: Op, cond: str, a: str, b: str, dt: str) -> str:
    return ex.node("Where", [cond, a, b], owner=op)[0] if _is_float(dt) else _select(ex, op, cond, a, b, dt)


def _ordered(ex: _Exporter, op: Op, x: str, dt: str) -> tuple[str, str]:
    """``x`` in a type onnxruntime's Max/Min/ArgMax/TopK kernels have, order kept, and that type.
    ui64 maps to i64 with the top bit flipped (order-preserving, exact); small ints widen."""
    if dt == "ui64":
        flip = ex.const(np.array(np.iinfo(np.int64).min, np.int64), "top_bit")
        return ex.node("BitwiseXor", [ex.cast(x, "i64", op), flip], owner=op)[0], "i64"
    via = _wide(dt)
    return (x if via == dt else ex.cast(x, via, op)), via


def _unordered(ex: _Exporter, op: Op, y: str, via: str, dt: str) -> str:
    """The inverse of :func:`_ordered`."""
    if dt == "ui64":
        flip = ex.const(np.array(np.iinfo(np.int64).min, np.int64), "top_bit")
        return ex.cast(ex.node("BitwiseXor", [y, flip], owner=op)[0], dt, op)
    return y if via == dt else ex.cast(y, dt, op)


# -- reductions, scans ---------------------------------------------------------------------------------

_REDUCE_KERNELS = {"ReduceSum": ("f64", "f32", "f16", "i64", "i32"), "ReduceProd": ("f64", "f32", "f16", "i64", "i32"),
                   "ReduceMean": ("f64", "f32", "f16", "i64", "i32"),
                   "ReduceMax": ("f64", "f32", "f16", "i64", "i32", "i8", "ui8"),
                   "ReduceMin": ("f64", "f32", "f16", "i64", "i32", "i8", "ui8")}


@ORT_RULES.rule(*(f"ik.{n}" for n in _REDUCE))
def _reduce(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    a = _attrs(op)
    short = op.name[3:]
    onnx_op = _REDUCE[short]
    dt = _gdt(op.operand(0))
    rank = op.operand(0).type.rank
    axes = [normalize_axis(x, rank) for x in a.get("axes", ())] or list(range(rank))
    keep = int(a.get("keepdims", False))
    x, via = ins[0], dt
    if dt not in _REDUCE_KERNELS[onnx_op]:
        if short == "reduce_mean" and dt == "ui64":
            ex.refuse(op, "onnxruntime has no ui64 kernel for ReduceMean (i64 would misread values >= 2^63)")
        if onnx_op in ("ReduceMax", "ReduceMin"):
            x, via = _ordered(ex, op, x, dt)
        else:
            x, via = ex.cast(x, "i64", op), "i64"  # sums and products wrap to the same low bits
    out = ex.node(onnx_op, [x, ex.const(np.array(axes, np.int64), "axes")], owner=op, keepdims=keep)[0]
    if onnx_op in ("ReduceMax", "ReduceMin") and _is_float(dt):
        # onnxruntime's ReduceMax/Min skip NaN; NumPy's (the reference's) propagate it.
        nan = ex.node("IsNaN", [x], owner=op)[0]
        anynan = ex.node("ReduceMax", [ex.cast(nan, "ui8", op), ex.const(np.array(axes, np.int64), "axes")],
                         owner=op, keepdims=keep)[0]
        anynan = ex.cast(anynan, "i1", op)
        out = ex.node("Where", [anynan, ex.const(np.array(np.nan, _np_of(dt))), out], owner=op)[0]
    if via != dt:
        out = _unordered(ex, op, out, via, dt) if onnx_op in ("ReduceMax", "ReduceMin") else ex.cast(out, dt, op)
    return [out]


_ARG_KERNELS = ("f64", "f32", "f16", "i64", "i32", "i8", "ui8")


@ORT_RULES.rule("ik.argmax", "ik.argmin")
def _argminmax(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    a = _attrs(op)
    dt = _gdt(op.operand(0))
    axis = normalize_axis(a["axis"], op.operand(0).type.rank)
    keep, last = int(a.get("keepdims", False)), int(a.get("select_last_index", False))
    x = ins[0]
    if dt not in _ARG_KERNELS:
        x, _ = _ordered(ex, op, x, dt)
    onnx_op = "ArgMax" if op.name == "ik.argmax" else "ArgMin"
    out = ex.node(onnx_op, [x], owner=op, axis=axis, keepdims=keep, select_last_index=last)[0]
    if _is_float(dt):
        # onnxruntime skips NaN; NumPy (the reference) returns the first NaN's index (the last with
        # select_last_index).
        nan = ex.cast(ex.node("IsNaN", [x], owner=op)[0], "i32", op)
        at = ex.node("ArgMax", [nan], owner=op, axis=axis, keepdims=keep, select_last_index=last)[0]
        has = ex.node("ReduceMax", [nan, ex.const(np.array([axis], np.int64))], owner=op, keepdims=keep)[0]
        out = ex.node("Where", [ex.cast(has, "i1", op), at, out], owner=op)[0]
    return [out]


@ORT_RULES.rule("ik.cumsum", "ik.cumprod", "ik.cummax", "ik.cummin")
def _scan(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    a = _attrs(op)
    dt = _gdt(op.operand(0))
    shape = ex.shape(op.operand(0).type)
    axis = normalize_axis(a["axis"], len(shape))
    rev, excl = bool(a.get("reverse", False)), bool(a.get("exclusive", False))
    x = ins[0]
    if op.name == "ik.cumsum":
        via = dt if dt in ("f64", "f32", "f16", "i64", "i32") else "i64"  # ints wrap to the same low bits
        xs = x if via == dt else ex.cast(x, via, op)
        r = ex.node("CumSum", [xs, ex.const(np.array(axis, np.int64), "axis")], owner=op, exclusive=int(excl),
                    reverse=int(rev))[0]
        return [r if via == dt else ex.cast(r, dt, op)]
    # No ONNX op: a Hillis-Steele scan, log2(n) steps of (shift by 2^k, combine), in a type with kernels.
    kind = op.name[len("ik.cum"):]
    combine = {"prod": "Mul", "max": "Max", "min": "Min"}[kind]
    if _is_float(dt):
        y, via = x, dt
    elif kind == "prod":
        y, via = (x if dt == "i64" else ex.cast(x, "i64", op)), "i64"  # Mul wraps to the same low bits in i64
    else:
        y, via = _ordered(ex, op, x, dt)  # Max/Min need the order
    npt = _np_of(via)
    if kind == "prod":
        ident = np.array(1, npt)
    elif _is_float(via):
        ident = np.array(-np.inf if kind == "max" else np.inf, npt)
    else:  # the extreme of the *ordered* type (ui64's flipped view included)
        info = np.iinfo(npt if dt == "ui64" else _np_of(dt))
        ident = np.array(info.min if kind == "max" else info.max, npt)
    if rev:
        y = ex.flip(y, [axis], op)
    n = shape[axis]
    rank = len(shape)

    def shifted(v: str, s: int) -> str:
        """``v`` moved s places along the axis, the identity filling the front."""
        pads = [0] * (2 * rank)
        pads[axis] = s
        padded = ex.node("Pad", [v, ex.const(np.array(pads, np.int64), "pads"), ex.const(ident, "ident")],
                         owner=op, mode="constant")[0]
        return ex.node("Slice", [padded, ex.const(np.array([0], np.int64)), ex.const(np.array([n], np.int64)),
                                 ex.const(np.array([axis], np.int64))], owner=op)[0]

    if excl and n > 0:
        y = shifted(y, 1)
    s = 1
    while s < n:
        y = ex.node(combine, [y, shifted(y, s)], owner=op)[0]
        s *= 2
    if rev:
        y = ex.flip(y, [axis], op)
    if kind == "prod" or _is_float(dt):
        return [y if via == dt else ex.cast(y, dt, op)]
    return [_unordered(ex, op, y, via, dt)]


# -- indexing --------------------------------------------------------------------------------------------


@ORT_RULES.rule("ik.gather_elements")
def _gather_elements(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    # ONNX GatherElements wraps negative indices and rejects out-of-range ones, as the reference does.
    axis = normalize_axis(_attrs(op)["axis"], op.operand(0).type.rank)
    return ex.node("GatherElements", ins, owner=op, axis=axis)


@ORT_RULES.rule("ik.scatter_elements")
def _scatter_elements(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    a = _attrs(op)
    axis = normalize_axis(a["axis"], op.operand(0).type.rank)
    return ex.node("ScatterElements", ins, owner=op, axis=axis, reduction=a.get("reduction", "none"))


def _wrap_nd_indices(ex: _Exporter, op: Op, idx: str, idx_v: Value, dims: list[int]) -> str:
    """Indices of GatherND/ScatterND with negative entries wrapped (index + dim) along the last axis."""
    it = _gdt(idx_v)
    idx = idx if it == "i64" else ex.cast(idx, "i64", op)
    d = ex.const(np.array(dims, np.int64), "dims")
    neg = ex.node("Less", [idx, ex.const(np.array(0, np.int64))], owner=op)[0]
    return ex.node("Where", [neg, ex.node("Add", [idx, d], owner=op)[0], idx], owner=op)[0]


@ORT_RULES.rule("ik.gather_nd")
def _gather_nd(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    b = int(_attrs(op).get("batch_dims", 0))
    dshape = ex.shape(op.operand(0).type)
    k = ex.shape(op.operand(1).type)[-1]
    idx = _wrap_nd_indices(ex, op, ins[1], op.operand(1), dshape[b:b + k])
    return ex.node("GatherND", [ins[0], idx], owner=op, batch_dims=b)


@ORT_RULES.rule("ik.scatter_nd")
def _scatter_nd(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    dshape = ex.shape(op.operand(0).type)
    k = ex.shape(op.operand(1).type)[-1]
    idx = _wrap_nd_indices(ex, op, ins[1], op.operand(1), dshape[:k])
    return ex.node("ScatterND", [ins[0], idx, ins[2]], owner=op, reduction=_attrs(op).get("reduction", "none"))


def _clamped_starts(ex: _Exporter, op: Op, starts: str, starts_v: Value, dims: list[int], sizes: list[int]) -> str:
    """XLA's dynamic-slice starts: each clamped to [0, dim - size], as i64."""
    st = starts if _gdt(starts_v) == "i64" else ex.cast(starts, "i64", op)
    hi = ex.const(np.array([d - s for d, s in zip(dims, sizes)], np.int64), "hi")
    st = ex.node("Min", [st, hi], owner=op)[0]
    return ex.node("Max", [st, ex.const(np.array(0, np.int64))], owner=op)[0]


@ORT_RULES.rule("ik.dynamic_slice")
def _dynamic_slice(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    dims = ex.shape(op.operand(0).type)
    sizes = [eval_dim(s, ex.b) for s in _attrs(op)["sizes"]]
    st = _clamped_starts(ex, op, ins[1], op.operand(1), dims, sizes)
    end = ex.node("Add", [st, ex.const(np.array(sizes, np.int64), "sizes")], owner=op)[0]
    return ex.node("Slice", [ins[0], st, end, ex.const(np.arange(len(dims), dtype=np.int64))], owner=op)


@ORT_RULES.rule("ik.dynamic_update_slice")
def _dynamic_update_slice(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    dims = ex.shape(op.operand(0).type)
    ushape = ex.shape(op.operand(1).type)
    st = _clamped_starts(ex, op, ins[2], op.operand(2), dims, ushape)
    # ScatterND at start + every index of the update (the grid is a constant; the start is not)
    grid = np.stack(np.meshgrid(*[np.arange(u, dtype=np.int64) for u in ushape], indexing="ij"), axis=-1)
    idx = ex.node("Add", [ex.const(grid.reshape(*ushape, len(ushape)), "grid"), st], owner=op)[0]
    return ex.node("ScatterND", [ins[0], idx, ins[1]], owner=op)


@ORT_RULES.rule("ik.reverse")
def _reverse(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    rank = op.operand(0).type.rank
    axes = sorted({normalize_axis(x, rank) for x in _attrs(op)["axes"]})
    return [ex.flip(ins[0], axes, op)]


# -- sorting ---------------------------------------------------------------------------------------------

_TOPK_KERNELS = ("f64", "f32", "i64", "i32")


@ORT_RULES.rule("ik.sort", "ik.topk")
def _sort_topk(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    """Stable sort / top-k from TopK, whose ties take the lower index first (the ONNX rule).

    onnxruntime's TopK orders NaN as the largest value, the reference's order (NaN last ascending,
    first descending, and first for largest-k); half types sort as f32 (exact), small ints as i32.
    """
    a = _attrs(op)
    shape = ex.shape(op.operand(0).type)
    axis = normalize_axis(a.get("axis", -1), len(shape))
    if op.name == "ik.sort":
        k, largest = shape[axis], bool(a.get("descending", False))
    else:
        k, largest = int(a["k"]), bool(a.get("largest", True))
    dt = _gdt(op.operand(0))
    x = ins[0]
    if dt in _TOPK_KERNELS:
        xs, via = x, dt
    elif dt in ("f16", "i1"):
        via = "f32" if dt == "f16" else "i32"
        xs = ex.cast(x, via, op)
    else:
        xs, via = _ordered(ex, op, x, dt)
    kk = ex.const(np.array([k], np.int64), "k")
    vals, idx = ex.node("TopK", [xs, kk], n_out=2, owner=op, axis=axis, largest=int(largest), sorted=1)
    return [ex.node("GatherElements", [x, idx], owner=op, axis=axis)[0] if via != dt else vals, idx]


# -- windows and convolution -----------------------------------------------------------------------------

_WINDOW_TERMS = 256
"""Most window positions ``reduce_window`` unrolls into strided slices."""


@ORT_RULES.rule("ik.reduce_window")
def _reduce_window(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    """Pad with the kind's identity, then combine one strided Slice per window position."""
    a = _attrs(op)
    shape = ex.shape(op.operand(0).type)
    out = ex.shape(op.results[0].type)
    r = len(shape)
    win, strides, pads, dil = (list(v) for v in window_attrs(a, r))
    kind = a["kind"]
    terms = int(np.prod(win)) if win else 1
    if terms > _WINDOW_TERMS:
        ex.refuse(op, f"window of {terms} positions is more than the {_WINDOW_TERMS} this lowering unrolls")
    dt = _gdt(op.operand(0))
    combine = {"sum": "Add", "max": "Max", "min": "Min"}[kind]
    if _is_float(dt):
        x, via = ins[0], dt
    elif kind == "sum":
        x, via = (ins[0] if dt == "i64" else ex.cast(ins[0], "i64", op)), "i64"  # wraps to the same low bits
    else:
        x, via = _ordered(ex, op, ins[0], dt)
    npt = _np_of(via)
    if kind == "sum":
        ident = np.array(0, npt)
    elif _is_float(via):
        ident = np.array(-np.inf if kind == "max" else np.inf, npt)
    else:
        info = np.iinfo(npt if dt == "ui64" else _np_of(dt))
        ident = np.array(info.min if kind == "max" else info.max, npt)
    if any(pads):
        x = ex.node("Pad", [x, ex.const(np.array(pads, np.int64), "pads"), ex.const(ident, "ident")], owner=op,
                    mode="constant")[0]
    acc = None
    for pos in np.ndindex(*win):
        st = [p * d for p, d in zip(pos, dil)]
        en = [s + (o - 1) * k + 1 for s, o, k in zip(st, out, strides)]
        sl = ex.node("Slice", [x, ex.const(np.array(st, np.int64)), ex.const(np.array(en, np.int64)),
                               ex.const(np.arange(r, dtype=np.int64)), ex.const(np.array(strides, np.int64))],
                     owner=op)[0]
        acc = sl if acc is None else ex.node(combine, [acc, sl], owner=op)[0]
    assert acc is not None
    if kind == "sum" or _is_float(dt):
        return [acc if via == dt else ex.cast(acc, dt, op)]
    return [_unordered(ex, op, acc, via, dt)]


@ORT_RULES.rule("ik.conv2d", "ik.conv")
def _conv(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    """ONNX Conv; input (lhs) dilation first spreads the input with zeros (Unsqueeze, Pad, Reshape),
    negative padding crops it. onnxruntime's Conv is float32/float16 only: integer ``conv2d`` runs in
    float32, as its reference does; integer ``conv`` (exact i64 in the reference) and f64 are refused."""
    a = _attrs(op)
    dt = _gdt(op.operand(0))
    xshape = ex.shape(op.operand(0).type)
    ns = len(xshape) - 2
    if op.name == "ik.conv":
        st, pd, dl, ld, _ = conv_attrs(a, ns)
        strides, padding, dil, lhs_dil = list(st), list(pd), list(dl), list(ld)
    else:
        strides, padding, dil, lhs_dil = list(a["strides"]), list(a["padding"]), list(a["dilations"]), [1] * ns
    if dt == "f64":
        ex.refuse(op, "onnxruntime has no double kernel for Conv (float32 would lose f64 precision)")
    if op.name == "ik.conv" and not _is_float(dt):
        ex.refuse(op, f"the reference accumulates {dt} convolutions exactly in i64; onnxruntime's Conv is "
                      "float-only (ConvInteger covers only 8-bit inputs with i32 sums)")
    nd = ex.node
    args = list(ins)
    if not _is_float(dt):
        args = [ex.cast(v, "f32", op) for v in args]
    x = args[0]
    shape = list(xshape)
    for i, d in enumerate(lhs_dil):
        if d == 1:
            continue
        ax = 2 + i
        n = shape[ax]
        x = nd("Unsqueeze", [x, ex.const(np.array([ax + 1], np.int64))], owner=op)[0]
        p = [0] * (2 * (len(shape) + 1))
        p[len(shape) + 1 + ax + 1] = d - 1
        x = nd("Pad", [x, ex.const(np.array(p, np.int64), "pads")], owner=op, mode="constant")[0]
        spread = shape[:ax] + [n * d] + shape[ax + 1:]
        x = nd("Reshape", [x, ex.const(np.array(spread, np.int64), "shape")], owner=op)[0]
        shape[ax] = (n - 1) * d + 1 if n else 0
        x = nd("Slice", [x, ex.const(np.array([0], np.int64)), ex.const(np.array([shape[ax]], np.int64)),
                         ex.const(np.array([ax], np.int64))], owner=op)[0]
    if any(p < 0 for p in padding):  # crop what negative padding removes, pad the rest in Conv
        lo = [max(0, -padding[i]) for i in range(ns)]
        en = [shape[2 + i] - max(0, -padding[ns + i]) for i in range(ns)]
        x = nd("Slice", [x, ex.const(np.array(lo, np.int64)), ex.const(np.array(en, np.int64)),
                         ex.const(np.arange(2, 2 + ns, dtype=np.int64))], owner=op)[0]
        padding = [max(0, p) for p in padding]
    y = nd("Conv", [x, *args[1:]], owner=op, strides=strides, pads=padding, dilations=dil,
           group=int(a.get("groups", 1)))[0]
    return [y if _is_float(dt) else ex.cast(y, dt, op)]


def export_onnx(module: Module, bindings: Mapping[str, int] | None = None,
                attention: str = "onnx") -> tuple[Any, dict[str, Op]]:
    """The ONNX ModelProto of ``module``'s entry function, and node name -> IR op."""
    fn = module.entry
    b = default_bindings(fn, bindings)
    ex = _Exporter(fn, b, op_ids(module), attention)
    model = ex.export()
    return model, ex.node_ops


EXTERNAL_MIN_BYTES = 1 << 20
"""Initializers of at least this many bytes (1 MiB: the weight matrices of a real model) travel as
external data (:func:`export_onnx_external`); smaller ones (biases, norms, shapes, masks) stay in the
proto, where ONNX shape inference reads them.  A module with no such tensor gives a self-contained
``model.onnx``."""
EXTERNAL_DATA = "model.onnx.data"
"""The external data file's name beside ``model.onnx`` (the artifact's file of that name)."""
EXTERNAL_FILE_MAX_BYTES = 1 << 28
"""The ort artifact carries ``model.onnx.data`` (a concatenated copy of the weights, for writing the
artifact out) up to this many bytes (256 MiB); a larger model's artifact writes it only when saved
(``Artifact.streamed``: one tensor at a time from the module's arrays, never a second copy in memory)."""
_ALIGN = 64


def export_onnx_external(module: Module, bindings: Mapping[str, int] | None = None, attention: str = "onnx",
                         min_bytes: int = EXTERNAL_MIN_BYTES
                         ) -> tuple[Any, dict[str, Op], list[tuple[str, int, np.ndarray]]]:
    """:func:`export_onnx` with every initializer of at least ``min_bytes`` as ONNX external data: the
    proto holds its name, type, shape and ``location`` / ``offset`` / ``length`` in
    :data:`EXTERNAL_DATA` (each tensor 64-byte aligned); the third result is ``(name, offset, array)``
    of each, the arrays being the module's own constants (no copy).  :func:`ort_session` hands them to
    onnxruntime in place; :func:`external_data_bytes` concatenates them into the file's bytes.  The
    proto stays small (no 2 GB protobuf limit)."""
    fn = module.entry
    b = default_bindings(fn, bindings)
    ex = _Exporter(fn, b, op_ids(module), attention)
    ex.external = []
    ex.external_min = min_bytes
    model = ex.export()
    return model, ex.node_ops, [(n, off, np.ascontiguousarray(a)) for n, off, a in ex.external]


def external_data_bytes(external: Sequence[tuple[str, int, np.ndarray]]) -> bytearray:
    """The ``model.onnx.data`` file of :func:`export_onnx_external`'s tensors (a copy of the weights)."""
    size = max((off + -(-a.nbytes // _ALIGN) * _ALIGN for _, off, a in external), default=0)
    buf = bytearray(size)
    for _, off, a in external:
        if a.nbytes:
            np.frombuffer(buf, np.uint8, a.nbytes, off)[:] = a.reshape(-1).view(np.uint8)
    return buf


def write_external_data(fh: Any, external: Sequence[tuple[str, int, np.ndarray]]) -> None:
    """Write :func:`external_data_bytes`'s file to the binary file ``fh`` one tensor at a time (no second
    copy of the weights in memory)."""
    pos = 0
    for _, off, a in sorted(external, key=lambda t: t[1]):
        if off > pos:
            fh.write(b"\0" * (off - pos))
        raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        fh.write(raw.data)
        pos = off + a.nbytes
    end = max((off + -(-a.nbytes // _ALIGN) * _ALIGN for _, off, a in external), default=0)
    if end > pos:
        fh.write(b"\0" * (end - pos))


def check_model(model: Any) -> None:
    """``onnx.checker.check_model(full_check=True)`` of ``model``, whose external-data initializers are
    checked as graph inputs of the same type and shape (the checker would look for the data file)."""
    import onnx

    ext = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if ext:
        m = onnx.ModelProto()
        m.CopyFrom(model)  # small: the external tensors hold no bytes
        keep = [t for t in m.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL]
        del m.graph.initializer[:]
        m.graph.initializer.extend(keep)
        m.graph.input.extend(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in ext)
        model = m
    onnx.checker.check_model(model, full_check=True)


def external_values(model: Any, data: bytes | bytearray | memoryview | None) -> list[tuple[str, np.ndarray]]:
    """(name, array view into ``data``) for each external-data initializer of ``model`` (a ModelProto)."""
    from onnx import helper

    out = []
    for t in model.graph.initializer:
        if t.data_location != 1:  # TensorProto.EXTERNAL
            continue
        kv = {e.key: e.value for e in t.external_data}
        if data is None:
            raise TargetUnavailable(f"ort: initializer '{t.name}' is external data ({kv.get('location')}) and the "
                                    "artifact has no such file; lower the module again")
        dt = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
        count = int(np.prod(list(t.dims), dtype=np.int64))
        arr = np.frombuffer(data, dt, count, int(kv.get("offset", 0))).reshape(tuple(t.dims))
        out.append((t.name, arr))
    return out


def ort_session(model_bytes: bytes, external: Sequence[tuple[str, np.ndarray]] | None, so: Any) -> Any:
    """An onnxruntime CPU ``InferenceSession`` of ``model_bytes`` whose external-data initializers are
    the arrays of ``external`` (name, array) (``SessionOptions.add_external_initializers`` on zero-copy
    ``OrtValue`` views: onnxruntime reads them in place); the session keeps them alive."""
    import onnxruntime as ort

    ext = list(external or [])
    values = [ort.OrtValue.ortvalue_from_numpy(a) for _, a in ext]
    if ext:
        so.add_external_initializers([n for n, _ in ext], values)
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    sess._irkit_external = (ext, values)  # the buffers onnxruntime reads must outlive the session
    return sess


class _OrtEngine:
    """The engine-call protocol of :mod:`irkit.breakdown`: a feed dict made once, then the bare
    ``InferenceSession.run``."""

    def __init__(self, sess: Any, in_names: Sequence[str]):
        self.sess, self.in_names = sess, list(in_names)

    def prepare(self, xs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        return {n: _to_feed(x) for n, x in zip(self.in_names, xs)}

    def call(self, feeds: dict[str, np.ndarray]) -> Any:
        return self.sess.run(None, feeds)


@register_target("ort")
class OrtTarget(Target):
    """Export to ONNX (opset 23) and run in onnxruntime with every graph optimisation on."""

    summary = "ONNX export (opset 23, checker-clean) run by onnxruntime, all graph optimisations on"
    spec = "host-cpu"
    lowering_table = ORT_RULES

    def __init__(self, attention: str = "contrib", threads: int | None = None):
        """``threads``: onnxruntime's intra-op threads (0: its default, one per core); when not
        given, ``IRKIT_ORT_THREADS`` if set (a sweep's workers set it to their share of the cores)."""
        self.attention = attention
        if threads is None:
            env = os.environ.get("IRKIT_ORT_THREADS", "")
            threads = int(env) if env.isdigit() else 0
        self.threads = threads

    def open_session(self, artifact, aliases=None):  # resident OrtValues via IOBinding (targets/ort_session.py)
        from irkit.targets.ort_session import open_ort_session

        return open_ort_session(self, artifact, aliases)

    def availability(self) -> Availability:
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError:
            return Availability(False, False, "needs the onnx extra: pip install -e '.[onnx]'")
        return Availability(True, True)

    def lower(self, module: Module, bindings: Mapping[str, int] | None = None) -> Artifact:
        import onnxruntime as ort

        av = self.availability()
        if not av.can_compile:
            raise TargetUnavailable(f"target 'ort': {av.reason}")
        t0 = time.perf_counter()
        fn = module.entry
        b = default_bindings(fn, bindings)
        # weights as external data: the module's own arrays, which the session reads in place
        model, node_ops, ext = export_onnx_external(module, b, self.attention)
        external = [(n, a) for n, _, a in ext]
        check_model(model)
        data = model.SerializeToString()
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if self.threads:
            so.intra_op_num_threads = self.threads
        try:
            sess = ort_session(data, external, so)
        except Exception as e:  # ORT reports unsupported node configurations here
            if self.attention in ("contrib", "onnx"):
                nxt = "onnx" if self.attention == "contrib" else "decomposed"
                return OrtTarget(nxt, self.threads).lower(module, bindings)
            raise TargetUnavailable(f"ort: onnxruntime rejected the exported model: {e}") from None
        dt = time.perf_counter() - t0
        ids = op_ids(module)
        kernels = []
        for node in model.graph.node:
            owner = node_ops.get(node.name)
            names, locs = provenance([owner], ids) if owner is not None else ([], [])
            kernels.append(Kernel(node.name, node.op_type, names, locs, "model.onnx"))
        in_names = [i.name for i in sess.get_inputs()]

        out_types = [v.dtype for v in fn.outputs]

        def runner(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
            feeds = {n: _to_feed(x) for n, x in zip(in_names, xs)}
            outs = sess.run(None, feeds)
            return [o.astype(t.np) if _in_f32(t) else o for o, t in zip(outs, out_types)]

        runner.engine = _OrtEngine(sess, in_names)  # type: ignore[attr-defined]  # for irkit.breakdown

        def profiler(xs: Sequence[np.ndarray], runs: int = 3) -> list[tuple[str, float]]:
            """Seconds per node from onnxruntime's own profiler (mean of ``runs`` after a warm-up);
            the nodes are the kernels, by name."""
            import json
            from pathlib import Path

            po = ort.SessionOptions()
            po.enable_profiling = True
            po.graph_optimization_level = so.graph_optimization_level
            if self.threads:
                po.intra_op_num_threads = self.threads
            ps = ort_session(data, external, po)
            feeds = {n: _to_feed(x) for n, x in zip(in_names, xs)}
            for _ in range(runs + 1):
                ps.run(None, feeds)
            trace = Path(ps.end_profiling())
            events = json.loads(trace.read_text())
            trace.unlink(missing_ok=True)
            durs: dict[str, list[float]] = {}
            for e in events:
                if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
                    durs.setdefault(e["name"][: -len("_kernel_time")], []).append(e.get("dur", 0) * 1e-6)
            # the first run is the warm-up (weight prepacking, first allocations): each node's median
            # over the other runs (a node that runs k times per call counts k times)
            out = []
            for n, d in durs.items():
                per_run = max(1, len(d) // (runs + 1))
                out.append((n, float(np.median(d[per_run:] or d)) * per_run))
            return out

        files: dict[str, str | bytes] = {"model.onnx": data}
        info: dict[str, Any] = {"opset": OPSET, "attention": self.attention, "onnxruntime": ort.__version__}
        ext_bytes = sum(a.nbytes for _, a in external)
        if ext and ext_bytes <= EXTERNAL_FILE_MAX_BYTES:
            files[EXTERNAL_DATA] = external_data_bytes(ext)  # type: ignore[assignment]  # a bytearray
        elif ext:
            info["external_data"] = (f"{len(ext)} weights ({ext_bytes / 2**20:.0f} MiB) are external data read in "
                                     f"place from the module's constants; {EXTERNAL_DATA} is written from them "
                                     f"only when the artifact is saved")
        art = Artifact(self.name, files, kernels, dt, b, [a.type.concrete_shape(b) for a in fn.args], info,
                       runner, profiler)
        if ext and EXTERNAL_DATA not in files:
            art.streamed[EXTERNAL_DATA] = lambda fh: write_external_data(fh, ext)
        from irkit.targets.base import module_aliases

        art.aliases = module_aliases(module)  # the function's `aliases` attribute, for sessions
        return art


__all__ = ["EXTERNAL_DATA", "NO_ONNX_OP", "OPSET", "ORT_RULES", "OrtTarget", "export_onnx", "export_onnx_external",
           "external_data_bytes", "external_values", "ort_session", "write_external_data"]


# ---------------------------------------------------------------------------------------------------------------
# KV-cache attention (irkit/ir/ops_cache.py)


@ORT_RULES.rule("ik.cache_attention")
def _cache_attention(ex: _Exporter, op: Op, ins: list[str]) -> list[str]:
    """The decomposition of :func:`irkit.ir.ops_cache.decompose`, node by node: the cache rows written at
    the clamped position, the prefix keep-mask, and Attention over the updated cache (the nodes belong to
    the fused op)."""
    from irkit.ir.ops_cache import decompose

    try:
        g = decompose(op, ex.b)
    except ValueError as e:
        ex.refuse(op, str(e))
    for a, n in zip(g.args, ins):
        ex.names[id(a)] = n
    saved, ex.region_owner = ex.region_owner, op
    try:
        for o in g:
            if o.name == "func.return":
                return [ex.names[id(v)] for v in o.operands]
            for r, n in zip(o.results, ex.op(o)):
                ex.names[id(r)] = n
    finally:
        ex.region_owner = saved
    ex.refuse(op, "internal: the decomposition has no return")
    return []
