"""``ort``: export the IR to a standard ONNX model and run it in onnxruntime.

Design note: the export is static — symbolic dims are bound first (like every
target, ``lower`` compiles for concrete dim values), so shape arithmetic never
needs runtime Shape/Gather chains.  Each IR op becomes one ONNX node where ONNX
has the op (opset 23: ``Attention``, ``RMSNormalization``, ``Gelu``,
``LayerNormalization``) or a short decomposition otherwise; the node's name is
the IR op id, so every ONNX node (and so every ORT kernel) maps back to an IR
op and its source location.  ``ik.attention`` goes out as opset-23 Attention,
or decomposed (``attention="decomposed"``) where ORT's Attention kernel does
not cover a case (an additive bias together with a boolean mask).

bfloat16: onnxruntime's CPU kernels have almost no bf16 implementations (MatMul,
Mul, Softmax... are missing), so a bf16 value travels as float32 holding a
bf16-representable number: after every op whose IR result is bf16 the exporter
rounds with ``Cast(to=BFLOAT16)`` and back, which is what the interpreter does
(compute in float32, round the result). Constants become float32 initializers
(exact); at the boundary bf16 crosses as float32 (the Python API has no bf16).
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np

from irkit.interp import default_bindings
from irkit.ir.core import Function, Graph, Module, Op, Value
from irkit.ir.ops import named_operands
from irkit.ir.types import DType, TensorType, eval_dim, normalize_axis
from irkit.targets.base import Artifact, Availability, Kernel, Target, TargetUnavailable, op_ids, provenance
from irkit.targets.registry import register_target

OPSET = 23

_UNARY = {"neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "reciprocal": "Reciprocal",
          "tanh": "Tanh", "erf": "Erf", "sigmoid": "Sigmoid", "sin": "Sin", "cos": "Cos", "floor": "Floor",
          "ceil": "Ceil", "sign": "Sign", "relu": "Relu", "not": "Not"}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "max": "Max", "min": "Min",
           "eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater", "ge": "GreaterOrEqual",
           "and": "And", "or": "Or", "xor": "Xor"}
_REDUCE = {"reduce_sum": "ReduceSum", "reduce_mean": "ReduceMean", "reduce_max": "ReduceMax",
           "reduce_min": "ReduceMin", "reduce_prod": "ReduceProd"}


def _onnx_dtype(dt: DType) -> int:
    from onnx import TensorProto

    return {DType.f64: TensorProto.DOUBLE, DType.f32: TensorProto.FLOAT, DType.f16: TensorProto.FLOAT16,
            DType.bf16: TensorProto.BFLOAT16, DType.i64: TensorProto.INT64, DType.i32: TensorProto.INT32,
            DType.i8: TensorProto.INT8, DType.bool: TensorProto.BOOL}[dt]


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

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}_{self.counter}"

    def shape(self, t: TensorType) -> list[int]:
        return [eval_dim(d, self.b) for d in t.shape]

    def const(self, arr: np.ndarray, base: str = "c") -> str:
        from onnx import numpy_helper

        name = self.fresh(base)
        a = np.asarray(arr)
        if a.dtype == DType.bf16.np:
            t = numpy_helper.from_array(a.astype(np.float32), name)  # exact; see the module note on bf16
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
            if a.dtype is DType.bf16:
                # bf16 travels as f32 (see the module note); the values fed are bf16-representable.
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
            if v.dtype is DType.bf16:
                self.nodes.append(oh.make_node("Identity", [src], [out], name=f"output{i}"))
                outputs.append(oh.make_tensor_value_info(out, _onnx_dtype(DType.f32), self.shape(v.type)))
                continue
            self.nodes.append(oh.make_node("Identity", [src], [out], name=f"output{i}"))
            outputs.append(oh.make_tensor_value_info(out, _onnx_dtype(v.dtype), self.shape(v.type)))
        g = oh.make_graph(self.nodes, fn.name, inputs, outputs, self.inits)
        model = oh.make_model(g, opset_imports=[oh.make_opsetid("", OPSET)], producer_name="irkit")
        model.ir_version = 10
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
        return outs

    def _op(self, op: Op) -> list[str]:
        short = op.name[3:] if op.name.startswith("ik.") else op.name
        ins = [self.names[id(v)] for v in op.operands]
        a = op.attrs
        nd = self.node
        if short in _UNARY:
            return nd(_UNARY[short], ins, owner=op)
        if short == "rsqrt":
            return nd("Reciprocal", nd("Sqrt", ins, owner=op), owner=op)
        if short == "silu":
            return nd("Mul", [ins[0], nd("Sigmoid", ins, owner=op)[0]], owner=op)
        if short == "gelu":
            return nd("Gelu", ins, owner=op, approximate=a.get("approximate", "none"))
        if short in _BINARY:
            return nd(_BINARY[short], ins, owner=op)
        if short == "ne":
            return nd("Not", nd("Equal", ins, owner=op), owner=op)
        if short == "rem":
            return nd("Mod", ins, owner=op, fmod=1)
        if short == "where":
            if op.results[0].dtype is DType.bool:  # ORT's CPU Where has no bool kernel: select as uint8
                from onnx import TensorProto

                u8 = [nd("Cast", [x], owner=op, to=TensorProto.UINT8)[0] for x in ins[1:]]
                return nd("Cast", nd("Where", [ins[0], *u8], owner=op), owner=op, to=_onnx_dtype(DType.bool))
            return nd("Where", ins, owner=op)
        if short == "cast":  # to bf16: to f32 here, op() rounds
            return nd("Cast", ins, owner=op, to=_onnx_dtype(DType.f32 if a["to"] is DType.bf16 else a["to"]))
        if short == "dropout":
            return nd("Identity", ins, owner=op)
        if short in _REDUCE:
            rank = op.operand(0).type.rank
            axes = [normalize_axis(x, rank) for x in a.get("axes", ())] or list(range(rank))
            return nd(_REDUCE[short], [ins[0], self.const(np.array(axes, np.int64), "axes")], owner=op,
                      keepdims=int(a.get("keepdims", False)))
        if short == "argmax":
            return nd("ArgMax", ins, owner=op, axis=a["axis"], keepdims=int(a.get("keepdims", False)))
        if short in ("softmax", "log_softmax"):
            return nd("Softmax" if short == "softmax" else "LogSoftmax", ins, owner=op, axis=a.get("axis", -1))
        if short in ("layer_norm", "rms_norm"):
            n = named_operands(op)
            x = op.operand(0)
            ax = normalize_axis(a.get("axis", -1), x.type.rank)
            norm_shape = self.shape(x.type)[ax:]
            w = self.names[id(n["weight"])] if n.get("weight") is not None else self.const(
                np.ones(norm_shape, x.dtype.np), "ones")
            if short == "rms_norm":
                return nd("RMSNormalization", [ins[0], w], owner=op, axis=ax, epsilon=float(a.get("eps", 1e-6)))
            args = [ins[0], w] + ([self.names[id(n["bias"])]] if n.get("bias") is not None else [])
            return nd("LayerNormalization", args, owner=op, axis=ax, epsilon=float(a.get("eps", 1e-5)))
        if short == "matmul":
            return nd("MatMul", ins, owner=op)
        if short == "contract":
            return nd("Einsum", ins, owner=op, equation=_einsum_equation(op))
        if short == "reshape":
            return nd("Reshape", [ins[0], self.const(np.array(self.shape(op.results[0].type), np.int64), "shape")],
                      owner=op)
        if short == "transpose":
            return nd("Transpose", ins, owner=op, perm=list(a["perm"]))
        if short == "broadcast":
            return nd("Expand", [ins[0], self.const(np.array(self.shape(op.results[0].type), np.int64), "shape")],
                      owner=op)
        if short == "slice":
            r = op.operand(0).type.rank
            st = [eval_dim(x, self.b) for x in a["start"]]
            lim = [eval_dim(x, self.b) for x in a["limit"]]
            step = list(a.get("step") or (1,) * r)
            return nd("Slice", [ins[0], self.const(np.array(st, np.int64)), self.const(np.array(lim, np.int64)),
                                self.const(np.arange(r, dtype=np.int64)), self.const(np.array(step, np.int64))],
                      owner=op)
        if short == "concat":
            return nd("Concat", ins, owner=op, axis=a["axis"])
        if short == "split":
            sizes = [eval_dim(s, self.b) for s in a["sizes"]]
            return nd("Split", [ins[0], self.const(np.array(sizes, np.int64), "split")], n_out=len(sizes), owner=op,
                      axis=a["axis"])
        if short == "gather":
            return nd("Gather", ins, owner=op, axis=a.get("axis", 0))
        if short == "iota":
            shape = self.shape(op.results[0].type)
            ax = normalize_axis(a.get("axis", 0), len(shape))
            r = np.arange(shape[ax]).reshape([-1 if i == ax else 1 for i in range(len(shape))])
            return nd("Identity", [self.const(np.broadcast_to(r, shape).astype(op.results[0].dtype.np), "iota")],
                      owner=op)
        if short == "constant":
            return nd("Identity", [self.const(a["value"].array, "const")], owner=op)
        if short == "dim_value":
            value = np.array(eval_dim(a["dim"][0], self.b), op.results[0].dtype.np)
            return nd("Identity", [self.const(value, "dim")], owner=op)
        if short == "pad":
            return nd("Pad", [ins[0], self.const(np.array(a["pads"], np.int64), "pads"),
                              self.const(np.array(a.get("value", 0.0), op.operand(0).dtype.np), "pad_value")],
                      owner=op, mode="constant")
        if short == "conv2d":
            return nd("Conv", ins, owner=op, strides=list(a.get("strides", (1, 1))), pads=list(a.get("padding", (0,) * 4)),
                      dilations=list(a.get("dilations", (1, 1))), group=a.get("groups", 1))
        if short == "attention":
            return self.attention_op(op, ins)
        if short == "fused":
            body = op.regions[0]
            for arg, name in zip(body.args, ins):
                self.names[id(arg)] = name
            outer, self.region_owner = self.region_owner, self.region_owner or op
            try:
                self.graph(body)
            finally:
                self.region_owner = outer
            return [self.names[id(v)] for v in body.outputs]
        raise TargetUnavailable(f"ort: no ONNX lowering for '{op.name}' at {op.loc.short()}")

    def attention_op(self, op: Op, ins: list[str]) -> list[str]:
        n = named_operands(op)
        a = op.attrs
        scale, causal = float(a["scale"]), bool(a.get("causal", False))
        mask = self.names[id(n["mask"])] if n.get("mask") is not None else None
        bias = self.names[id(n["bias"])] if n.get("bias") is not None else None
        if self.attention == "onnx" and not (mask is not None and bias is not None):
            extra = []
            if mask or bias:
                # ORT's Attention broadcasts the mask over batch and heads only.
                bq, hq, sq, _ = self.shape(op.operand(0).type)
                sk = self.shape(op.operand(1).type)[2]
                full = self.const(np.array([bq, hq, sq, sk], np.int64), "mask_shape")
                extra = self.node("Expand", [mask or bias, full], owner=op)  # type: ignore[list-item]
            return self.node("Attention", ins[:3] + extra, owner=op, scale=scale, is_causal=int(causal))
        return self.attention_decomposed(op, ins[:3], mask, bias, scale, causal)

    def attention_decomposed(self, op: Op, qkv: list[str], mask: str | None, bias: str | None, scale: float,
                             causal: bool) -> list[str]:
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
        if bias is not None:
            s = nd("Add", [s, bias], owner=op)[0]
        keep = None
        if mask is not None:
            keep = mask
        if causal:
            tri = self.const(np.tril(np.ones((sq, sk), dtype=bool)), "causal")
            keep = tri if keep is None else nd("And", [keep, tri], owner=op)[0]
        if keep is None:
            return nd("MatMul", [nd("Softmax", [s], owner=op, axis=-1)[0], v], owner=op)
        neg = self.const(np.array(-np.inf, dt), "neg_inf")
        s = nd("Where", [keep, s, neg], owner=op)[0]
        mx = nd("ReduceMax", [s, self.const(np.array([-1], np.int64))], owner=op, keepdims=1)[0]
        zero = self.const(np.array(0, dt), "zero")
        finite = nd("IsInf", [mx], owner=op)[0]
        mx = nd("Where", [finite, zero, mx], owner=op)[0]
        e = nd("Exp", [nd("Sub", [s, mx], owner=op)[0]], owner=op)[0]
        den = nd("ReduceSum", [e, self.const(np.array([-1], np.int64))], owner=op, keepdims=1)[0]
        pos = nd("Greater", [den, zero], owner=op)[0]
        one = self.const(np.array(1, dt), "one")
        p = nd("Div", [e, nd("Where", [pos, den, one], owner=op)[0]], owner=op)[0]
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


def export_onnx(module: Module, bindings: Mapping[str, int] | None = None, attention: str = "onnx") -> tuple[Any, dict[str, Op]]:
    """The ONNX ModelProto of ``module``'s entry function, and node name -> IR op."""
    fn = module.entry
    b = default_bindings(fn, bindings)
    ex = _Exporter(fn, b, op_ids(module), attention)
    model = ex.export()
    return model, ex.node_ops


@register_target("ort")
class OrtTarget(Target):
    """Export to ONNX (opset 23) and run in onnxruntime with every graph optimisation on."""

    summary = "ONNX export (opset 23, checker-clean) run by onnxruntime, all graph optimisations on"
    spec = "host-cpu"

    def __init__(self, attention: str = "onnx", threads: int = 0):
        self.attention = attention
        self.threads = threads

    def availability(self) -> Availability:
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except ImportError:
            return Availability(False, False, "needs the onnx extra: pip install -e '.[onnx]'")
        return Availability(True, True)

    def lower(self, module: Module, bindings: Mapping[str, int] | None = None) -> Artifact:
        import onnx
        import onnxruntime as ort

        av = self.availability()
        if not av.can_compile:
            raise TargetUnavailable(f"target 'ort': {av.reason}")
        t0 = time.perf_counter()
        fn = module.entry
        b = default_bindings(fn, bindings)
        model, node_ops = export_onnx(module, b, self.attention)
        onnx.checker.check_model(model, full_check=True)
        data = model.SerializeToString()
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if self.threads:
            so.intra_op_num_threads = self.threads
        try:
            sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        except Exception as e:  # ORT reports unsupported node configurations here
            if self.attention == "onnx":
                return OrtTarget("decomposed", self.threads).lower(module, bindings)
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
            feeds = {n: (np.asarray(x).astype(np.float32) if np.asarray(x).dtype == DType.bf16.np else np.asarray(x))
                     for n, x in zip(in_names, xs)}
            outs = sess.run(None, feeds)
            return [o.astype(t.np) if t is DType.bf16 else o for o, t in zip(outs, out_types)]

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
            ps = ort.InferenceSession(data, po, providers=["CPUExecutionProvider"])
            feeds = {n: (np.asarray(x).astype(np.float32) if np.asarray(x).dtype == DType.bf16.np else np.asarray(x))
                     for n, x in zip(in_names, xs)}
            for _ in range(runs):
                ps.run(None, feeds)
            trace = Path(ps.end_profiling())
            events = json.loads(trace.read_text())
            trace.unlink(missing_ok=True)
            total: dict[str, float] = {}
            for e in events:
                if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
                    node = e["name"][: -len("_kernel_time")]
                    total[node] = total.get(node, 0.0) + e.get("dur", 0) * 1e-6
            return [(n, t / runs) for n, t in total.items()]

        return Artifact(self.name, {"model.onnx": data}, kernels, dt, b,
                        [a.type.concrete_shape(b) for a in fn.args],
                        {"opset": OPSET, "attention": self.attention, "onnxruntime": ort.__version__},
                        runner, profiler)


__all__ = ["export_onnx", "OrtTarget", "OPSET"]
