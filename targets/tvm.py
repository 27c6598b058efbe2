"""``tvm-llvm`` and ``tvm-cuda``: lower the IR to TVM Relax + TensorIR.

Design note: the entry function becomes one Relax function built with a
``BlockBuilder``.  Matmuls (and matmul + bias + activation epilogue regions)
and fused attention become hand-scheduled TensorIR kernels from
:mod:`irkit.targets.tvm_kernels` — tiled from the ``tile`` attribute that
``tile-matmul`` chose; attention as a tiled online-softmax kernel that never
materialises the score matrix — called with ``R.call_tir``.  Every other op is
emitted as a TOPI/TE computation, which Relax's pipeline fuses (an elementwise
region becomes one kernel); on CUDA the DLight GPU rules bind its threads.
Symbolic dims are bound before lowering.  Kernel names carry the IR op ids, so
the artifact maps every kernel back to IR ops and source locations.

TVM 0.27 API notes: ``tvm.tirx`` (not ``tvm.tir``), ``tvm.s_tir`` schedules, dict
targets such as ``{"kind": "cuda", "arch": "sm_90"}``; MetaSchedule is not used
(its tuning crashes in this wheel) and neither is the unscheduled default CPU
path for matmuls.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
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
    quiet_native_stderr,
)
from irkit.targets.registry import register_target

from irkit.interp import default_bindings
from irkit.ir.core import Module, Op, Value
from irkit.ir.ops import named_operands
from irkit.ir.types import DType, eval_dim, normalize_axis

_TVM_DTYPE = {DType.f64: "float64", DType.f32: "float32", DType.f16: "float16", DType.bf16: "bfloat16",
              DType.i64: "int64", DType.i32: "int32", DType.i16: "int16", DType.i8: "int8",
              DType.ui64: "uint64", DType.ui32: "uint32", DType.ui16: "uint16", DType.ui8: "uint8",
              DType.bool: "bool",
              # float8 values travel as float32 (exact) and only ik.cast rounds to them: TVM 0.27's own
              # float8 casts on llvm do not round (a float32 -> float8 -> float32 pair comes back unchanged)
              **{d: "float32" for d in DType if d.is_float8}}


def _tvm_dtype(op: Op, dt: DType) -> str:
    """TVM's name of ``dt``, or a refusal naming the op (a dtype TVM has no type for)."""
    try:
        return _TVM_DTYPE[dt]
    except KeyError:
        raise TargetUnavailable(f"tvm: '{op.name}' at {op.loc.short()}: dtype {dt} has no TVM type") from None


_STRUCTURAL = frozenset({"func.return", "ik.yield"})
"""Ops the lowerer handles as structure (function and region ends), not through a rule."""

_OPAQUE = 8
"""``relax.OpPatternKind.kOpaque``: FuseOps never groups a function with this ``op_pattern``."""


def _tvm_available() -> str | None:
    try:
        from irkit.targets.cuda_env import preload_cuda_libraries

        preload_cuda_libraries()  # before the first `import tvm`: the CUDA 13 wheels' runtime and NVRTC
    except Exception:  # noqa: BLE001 - nothing CUDA installed: TVM's CPU runtime needs none of it
        pass
    try:
        import tvm  # noqa: F401
        from tvm import relax  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any import failure means the extra is missing
        return f"needs the tvm extra (pip install -e '.[tvm]'): {e}"
    return None


class _Lowerer:
    """Builds the Relax module for one function under concrete bindings."""

    def __init__(self, module: Module, bindings: Mapping[str, int], target: Any, ids: Mapping[int, str]):
        import tvm
        from tvm import relax, topi

        self.tvm, self.relax, self.topi = tvm, relax, topi
        self.module = module
        self.b = bindings
        self.target = target
        self.ids = ids
        self.bb = relax.BlockBuilder()
        self.env: dict[int, Any] = {}
        self.kernels: list[tuple[str, list[Op]]] = []
        self.reshape_source: dict[int, Any] = {}
        """Relax reshape results -> the tensor they reshape (a reshape of a reshape reads the source)."""
        self.function: dict[str, str] = {}
        self.inplace_args: set[int] = set()
        """Entry arguments some kernel updates in place (their outputs share the argument's buffer)."""
        self.aux_functions: dict[str, list[str]] = {}
        """Kernel name -> the TE stages lowered with it (a conv-as-GEMM's im2col and re-layout)."""
        """Kernel name -> the PrimFunc it calls (the BlockBuilder shares one among equal kernels)."""

    def shape(self, v: Value) -> list[int]:
        return [eval_dim(d, self.b) for d in v.type.shape]

    def kname(self, op: Op) -> str:
        return self.ids[id(op)].replace("ik.", "").replace("#", "_")

    # -- entry -------------------------------------------------------------------
    def build(self) -> Any:
        relax = self.relax
        fn = self.module.entry
        params = []
        for i, a in enumerate(fn.args):
            p = relax.Var(a.name or f"arg{i}", relax.TensorType(self.shape(a), _TVM_DTYPE[a.dtype]))
            params.append(p)
            self.env[id(a)] = p
        # TOPI's GPU scans and sorts read the current target while their TE is built
        with self.target, self.bb.function("main", params):
            with self.bb.dataflow():
                for op in fn.body:
                    if op.name == "func.return":
                        outs = [self.env[id(v)] for v in op.operands]
                        res = outs[0] if len(outs) == 1 else self.relax.Tuple(outs)
                        gv = self.bb.emit_output(res)
                        break
                    self.lower_op(op)
            self.bb.emit_func_output(gv)
        return self.bb.get()

    # -- ops ---------------------------------------------------------------------
    def lower_op(self, op: Op) -> None:
        """Lower one op through its rule in :data:`TVM_RULES` and bind its results."""
        rule = TVM_RULES.get(op.name)
        if rule is None:
            raise TargetUnavailable(f"tvm: no lowering rule for '{op.name}' at {op.loc.short()}")
        if op.name != "ik.cast" and any(v.dtype.is_float8 for v in (*op.operands, *op.results)):
            raise self.refuse(op, "float8 values are supported only by ik.cast here (they travel as float32, "
                                  "and only the cast rounds to them)")
        if op.results and not self.gpu and all(0 in self.shape(r) for r in op.results):
            # Only empty results: their values are nothing, so each is a fresh empty tensor.  Computed
            # from constants, FoldConstant would make it an empty constant, which TVM's executable
            # cannot load back ("Invalid DLTensor file format").
            for r in op.results:
                self.env[id(r)] = self.bb.emit(self.relax.op.builtin.alloc_tensor(
                    self.relax.ShapeExpr(self.shape(r)), _TVM_DTYPE[r.dtype], 0))
            return
        outs = rule(self, op, [self.env[id(v)] for v in op.operands])
        if outs is None:  # the rule bound the results itself (a scheduled kernel, a fused region)
            return
        for r, o in zip(op.results, outs):
            self.env[id(r)] = o

    def emit(self, op: Op, f: Any, *args: Any, **kw: Any) -> Any:
        """``f(*args)`` (a TE/TOPI computation) as a Relax call named after ``op``."""
        hint = self.kname(op)
        var = self.bb.emit_te(f, *args, primfunc_name_hint=hint, **kw)
        call = self.bb.lookup_binding(var)
        if call is not None and call.args and hasattr(call.args[0], "name_hint"):
            self.function.setdefault(hint, call.args[0].name_hint)
        return var

    @property
    def gpu(self) -> bool:
        return self.target.kind.name == "cuda"

    def refuse(self, op: Op, why: str) -> TargetUnavailable:
        """The error for one instance of an op this target has a rule for but cannot lower."""
        return TargetUnavailable(f"tvm-{self.target.kind.name}: '{op.name}' at {op.loc.short()}: {why}")

    def call_kernel(self, kernel: Any, args: list[Any], op: Op, ops: list[Op]) -> Any:
        relax = self.relax
        # Opaque to Relax FuseOps: a hand-scheduled kernel already holds its fused epilogue, and
        # FuseTIR cannot merge it with a TOPI neighbour anyway (our buffers have int32 shapes,
        # legalized TOPI's have int64, and FuseTIR rejects the pair as "inconsistent buffers").
        func = kernel.func.with_attr("tirx.is_scheduled", True).with_attr("op_pattern", _OPAQUE)
        name = self.kname(op)
        gv = self.bb.add_func(func, name)
        self.function[name] = gv.name_hint
        outs = [relax.TensorType(list(o.shape), o.dtype) for o in kernel.outputs]
        self.kernels.append((name, ops))
        return self.bb.emit(relax.call_tir(gv, args, outs[0] if len(outs) == 1 else outs))

    def try_matmul(self, op: Op, bias: Value | None = None, act: str | None = None, ops: list[Op] | None = None,
                   out: Op | None = None) -> bool:
        from irkit.targets.tvm_kernels import gemv as mm_gemv
        from irkit.targets.tvm_kernels import matmul as mm

        x, w = op.operands
        if not x.dtype.is_float or x.dtype is DType.f64:
            return False
        tile = op.attrs.get("tile") or (None, None, None)
        # A constant weight is packed into the kernel's panel layout here, once, instead of
        # by the kernel on every call (for the LM head that is a 2 MB copy per token batch).
        wconst = _const_array(w) if self.target.kind.name == "llvm" and len(self.shape(w)) == 2 else None
        if wconst is not None and mm_gemv.try_lower(self, op, wconst, bias, act, ops, out):  # tvm_kernels/gemv.py
            return True
        xs_, ws_ = self.shape(x), self.shape(w)
        try:
            flops = 2 * math.prod(np.broadcast_shapes(tuple(xs_[:-2]), tuple(ws_[:-2]))) * xs_[-2] * xs_[-1] * ws_[-1]
            k = mm.matmul(xs_, ws_, _TVM_DTYPE[x.dtype], bias=bias is not None, activation=act,
                          tile_m=tile[0], tile_n=tile[1], tile_k=tile[2], target=self.target,
                          name=self.kname(out or op), b_packed=wconst is not None,
                          parallel=self.gpu or _worth_parallel(flops))
        except (ValueError, IndexError, NotImplementedError):  # rank < 2, shapes that do not broadcast
            return False
        if wconst is not None:
            packed = mm.pack_b(wconst, k.config["padded"], k.config["micro"][1])
            wv = self.bb.emit(self.relax.const(packed, "float32"))
        else:
            wv = self.env[id(w)]
        args = [self.env[id(x)], wv] + ([self.env[id(bias)]] if bias is not None else [])
        res = self.call_kernel(k, args, out or op, ops or [op])
        self.env[id((out or op).results[0])] = res
        return True

    def try_conv_gemm(self, op: Op, ins: list[Any]) -> bool:
        """A convolution as one GEMM where that is what it is (CPU, float32, one group): a patchify
        conv (kernel == stride, no padding) or a 1x1 conv is a layout change of the input followed by
        ``[N·OH·OW, C·KH·KW] @ [C·KH·KW, O]``; other convs go through im2col while the column matrix is
        small (:func:`tvm_kernels.conv.gemm_plan`).  The GEMM is the scheduled matmul kernel (packed
        constant weight, bias in its epilogue); the im2col and the NCHW re-layout are TE stages that
        Relax may fuse with their neighbours.  ``ik.conv2d``, and ``ik.conv`` with 1 or 2 spatial dims,
        no input dilation and no negative padding (a 1-D conv is a 2-D one of height 1)."""
        from irkit.targets.tvm_kernels import conv as cv
        from irkit.targets.tvm_kernels import matmul as mm

        if self.gpu or op.operand(0).dtype is not DType.f32 or op.operand(1).dtype is not DType.f32:
            return False
        a = op.attrs
        xs, ws = self.shape(op.operand(0)), self.shape(op.operand(1))
        nsp = len(xs) - 2
        if op.name == "ik.conv2d":
            stride, pad, dil = a.get("strides", (1, 1)), a.get("padding", (0, 0, 0, 0)), a.get("dilations", (1, 1))
        else:
            from irkit.ir.ops_window import conv_attrs

            stride, pad, dil, lhs, _ = conv_attrs(a, nsp)
            if nsp not in (1, 2) or any(d != 1 for d in lhs) or any(p < 0 for p in pad):
                return False
            if nsp == 1:  # [N, C, L] as [N, C, 1, L]
                xs, ws = [xs[0], xs[1], 1, xs[2]], [ws[0], ws[1], 1, ws[2]]
                stride, pad, dil = (1, stride[0]), (0, pad[0], 0, pad[1]), (1, dil[0])
        plan = cv.gemm_plan(xs, ws, stride=stride, padding=pad, dilation=dil, groups=int(a.get("groups", 1)))
        if plan is None:
            return False
        relax = self.relax
        m, k, o = plan["m"], plan["k"], plan["o"]
        wconst = _const_array(op.operand(1))
        has_bias = len(op.operands) > 2 and op.operand(2) is not None
        name = self.kname(op)
        try:
            kern = mm.matmul([m, k], [k, o], "float32", bias=has_bias, target=self.target, name=name,
                             b_packed=wconst is not None, parallel=_worth_parallel(2 * m * k * o))
        except (ValueError, NotImplementedError):
            return False
        xin = ins[0] if nsp == 2 else self.bb.emit(relax.op.reshape(ins[0], xs))
        cols6 = self.bb.emit_te(cv.im2col, xin, plan, primfunc_name_hint=f"{name}_im2col")
        cols = self.bb.emit(relax.op.reshape(cols6, (m, k)))
        if wconst is not None:
            packed = mm.pack_b(cv.gemm_weight(wconst.astype(np.float32)), kern.config["padded"],
                               kern.config["micro"][1])
            wv = self.bb.emit(relax.const(packed, "float32"))
        else:
            wv = self.bb.emit_te(lambda t: self.topi.transpose(self.topi.reshape(t, (o, k)), (1, 0)), ins[1],
                                 primfunc_name_hint=f"{name}_weight")
            self.aux_functions.setdefault(name, []).append(f"{name}_weight")
        g = self.call_kernel(kern, [cols, wv] + ([ins[2]] if has_bias else []), op, [op])
        out = self.bb.emit_te(cv.gemm_to_nchw, g, plan, primfunc_name_hint=f"{name}_nchw")
        if nsp == 1:
            out = self.bb.emit(relax.op.reshape(out, self.shape(op.results[0])))
        self.aux_functions.setdefault(name, []).extend([f"{name}_im2col", f"{name}_nchw"])
        self.env[id(op.results[0])] = out
        return True

    def try_inplace_update(self, op: Op, ins: list[Any]) -> bool:
        """``ik.dynamic_update_slice`` into an entry argument that the function's ``aliases`` attribute
        aliases to this op's result as an output (a KV cache): written in place with
        ``R.call_tir_inplace`` (the row, not a copy of the cache), when no op reads the argument after
        the update.  CPU only."""
        if self.gpu:
            return False
        from irkit.ir.aliases import get_aliases

        fn = self.module.entry
        x = op.operand(0)
        arg = next((i for i, a in enumerate(fn.args) if a is x), None)
        if arg is None:
            return False
        outs = fn.outputs
        if not any(a == arg and o < len(outs) and outs[o] is op.results[0] for o, a in get_aliases(fn).items()):
            return False
        body = list(fn.body)
        top = next((i for i, t in enumerate(body) if t is op), None)
        if top is None:
            return False
        for i, t in enumerate(body):
            if t is op:
                continue
            nested = [t, *(o for r in t.regions for o in r.walk())]
            if any(v is x for o in nested for v in o.operands) and i > top:
                return False  # read after the update: it needs the old value
        from irkit.targets.tvm_kernels.movement import dynamic_update_slice_inplace

        relax = self.relax
        name = self.kname(op)
        xs_, us_ = self.shape(x), self.shape(op.operand(1))
        try:
            func = dynamic_update_slice_inplace(xs_, us_, len(xs_), _TVM_DTYPE[x.dtype],
                                                _TVM_DTYPE[op.operand(2).dtype], name=name)
        except Exception:  # noqa: BLE001 - the functional update below is always correct
            return False
        func = func.with_attr("tirx.is_scheduled", True).with_attr("op_pattern", _OPAQUE)
        gv = self.bb.add_func(func, name)
        self.function[name] = gv.name_hint
        self.kernels.append((name, [op]))
        self.inplace_args.add(arg)
        res = self.bb.emit(relax.call_tir_inplace(gv, ins, [0], relax.TensorType(xs_, _TVM_DTYPE[x.dtype])))
        self.env[id(op.results[0])] = res
        return True

    def try_epilogue(self, op: Op) -> bool:
        """``ik.fused{matmul_epilogue}``: matmul [+ bias] [+ activation] as one kernel."""
        body = [o for o in op.regions[0] if o.name != "ik.yield"]
        if not body or body[0].name != "ik.matmul" or len(op.results) != 1:
            return False
        mmop = body[0]
        args = {id(a): v for a, v in zip(op.regions[0].args, op.operands)}
        if any(id(v) not in args for v in mmop.operands):
            return False
        bias = None
        act = None
        cur = mmop.results[0]
        n = self.shape(cur)[-1]
        for o in body[1:]:
            if o.operands and o.operand(0) is not cur and not (o.name == "ik.add" and o.operand(1) is cur):
                return False
            if o.name == "ik.add" and bias is None and act is None:
                other = o.operand(1) if o.operand(0) is cur else o.operand(0)
                if id(other) not in args or len(other.type.shape) != 1:
                    return False
                bias = args[id(other)]
            elif o.name in ("ik.gelu", "ik.silu", "ik.relu") and act is None:
                act = {"ik.silu": "silu", "ik.relu": "relu"}.get(o.name) or (
                    "gelu_tanh" if o.attrs.get("approximate") == "tanh" else "gelu_erf")
            elif o.name == "ik.reshape" and self.shape(o.results[0])[-1] == n:
                pass  # rows regrouped (GPT-2's view to [B, S, N] before gelu): the same row-major data
            else:
                return False
            cur = o.results[0]
        from irkit.targets.tvm_kernels.matmul import ACTIVATIONS

        if act is not None and act not in ACTIVATIONS:
            return False
        x, w = (args[id(v)] for v in mmop.operands)
        if bias is not None and bias.dtype != x.dtype:
            return False
        if not self.try_matmul(_Proxy(mmop, x, w), bias, act, [op, *body], op):  # type: ignore[arg-type]
            return False
        want = self.shape(op.results[0])
        if self.shape(mmop.results[0]) != want:
            res = self.env[id(op.results[0])]
            out = self.bb.emit(self.relax.op.reshape(res, want))
            self.reshape_source[id(out)] = res
            self.env[id(op.results[0])] = out
        return True

    def try_row_kernel(self, op: Op) -> bool:
        """Layer norm, RMS norm and softmax over the last axis as scheduled row kernels
        (``tvm_kernels.reduce``: one task per row, SIMD partial sums); TOPI's are scalar."""
        from irkit.targets.tvm_kernels import reduce as rd

        x = op.operand(0)
        if x.dtype not in (DType.f32, DType.f16, DType.bf16) or x.type.rank == 0:
            return False
        if normalize_axis(op.attrs.get("axis", -1), x.type.rank) != x.type.rank - 1:
            return False
        shape = self.shape(x)
        n = named_operands(op)
        side = [n.get("weight"), n.get("bias")] if op.name == "ik.layer_norm" else \
            [n.get("weight")] if op.name == "ik.rms_norm" else []
        if any(v is not None and (v.dtype != x.dtype or self.shape(v) != shape[-1:]) for v in side):
            return False
        dt = _TVM_DTYPE[x.dtype]
        kw: dict[str, Any] = {"target": self.target, "name": self.kname(op)}
        try:
            if op.name == "ik.softmax":
                kern = rd.softmax(shape, dt, **kw)
            elif op.name == "ik.layer_norm":
                kern = rd.layer_norm(shape, dt, eps=float(op.attrs.get("eps", 1e-5)), weight=side[0] is not None,
                                     bias=side[1] is not None, **kw)
            else:
                kern = rd.rms_norm(shape, dt, eps=float(op.attrs.get("eps", 1e-6)), weight=side[0] is not None, **kw)
        except (ValueError, NotImplementedError):
            return False
        args = [self.env[id(x)]] + [self.env[id(v)] for v in side if v is not None]
        self.env[id(op.results[0])] = self.call_kernel(kern, args, op, [op])
        return True

    def try_attention(self, op: Op) -> bool:
        from irkit.targets.tvm_kernels.attention import attention

        n = named_operands(op)
        q, k, v = n["q"], n["k"], n["v"]
        assert q is not None and k is not None and v is not None
        if q.dtype is DType.f64 or self.shape(v)[3] != self.shape(q)[3]:
            return False
        bias_expr = None
        bias_shape = None
        mask, bias = n.get("mask"), n.get("bias")
        if mask is not None or bias is not None:
            topi = self.topi
            dt = "float32"

            def additive(*xs: Any) -> Any:
                it = iter(xs)
                mk = next(it) if mask is not None else None
                bs = next(it) if bias is not None else None
                val = topi.cast(bs, dt) if bs is not None else None
                if mk is not None:
                    base = val if val is not None else topi.full(mk.shape, dt, 0.0)
                    val = topi.where(mk, base, topi.full_like(base, -math.inf))
                return val

            ins = [self.env[id(x)] for x in (mask, bias) if x is not None]
            bias_expr = self.bb.emit_te(additive, *ins, primfunc_name_hint=self.kname(op) + "_mask")
            shapes = [self.shape(x) for x in (mask, bias) if x is not None]
            rank = max(len(s) for s in shapes)
            bias_shape = [max(s[i - (rank - len(s))] if i >= rank - len(s) else 1 for s in shapes) for i in range(rank)]
        try:
            kern = attention(self.shape(q), self.shape(k), _TVM_DTYPE[q.dtype], bias_shape=bias_shape,
                             bias_dtype="float32" if bias_shape else None, scale=float(op.attrs["scale"]),
                             causal=bool(op.attrs.get("causal", False)), target=self.target, name=self.kname(op),
                             softcap=float(op.attrs.get("softcap", 0.0) or 0.0))
        except (ValueError, NotImplementedError):
            return False
        args = [self.env[id(q)], self.env[id(k)], self.env[id(v)]] + ([bias_expr] if bias_expr is not None else [])
        self.env[id(op.results[0])] = self.call_kernel(kern, args, op, [op])
        return True

    def _generic_matmul(self, x: Any, y: Any) -> Any:
        """A TE batched matmul with broadcasting (used for f64 and int matmuls only)."""
        te = self.tvm.te
        xs, ys = list(x.shape), list(y.shape)
        batch = list(np.broadcast_shapes(tuple(int(d) for d in xs[:-2]), tuple(int(d) for d in ys[:-2])))
        m, kk, n = xs[-2], xs[-1], ys[-1]
        k = te.reduce_axis((0, kk), "k")
        nb = len(batch)

        def bidx(t: list[Any], idx: list[Any]) -> list[Any]:
            r = len(t) - 2
            return [idx[nb - r + i] if int(t[i]) != 1 else 0 for i in range(r)]

        return te.compute(batch + [m, n], lambda *i: te.sum(
            x[tuple(bidx(xs, list(i)) + [i[-2], k])] * y[tuple(bidx(ys, list(i)) + [k, i[-1]])], axis=k))

    def _norm_fn(self, op: Op) -> Any:
        topi = self.topi
        n = named_operands(op)
        rms = op.name == "ik.rms_norm"
        x_rank = op.operand(0).type.rank
        ax = normalize_axis(op.attrs.get("axis", -1), x_rank)
        axes = list(range(ax, x_rank))
        eps = float(op.attrs.get("eps", 1e-6 if rms else 1e-5))
        has_w = n.get("weight") is not None
        has_b = (not rms) and n.get("bias") is not None
        count = int(np.prod(self.shape(op.operand(0))[ax:]))

        def norm(x: Any, *wb: Any) -> Any:
            dt = x.dtype
            xf = topi.cast(x, "float32") if dt in ("float16", "bfloat16") else x
            c = lambda v: self.tvm.tirx.const(v, xf.dtype)
            if rms:
                ms = topi.divide(topi.sum(topi.multiply(xf, xf), axis=axes, keepdims=True), c(count))
                y = topi.multiply(xf, topi.rsqrt(topi.add(ms, c(eps))))
            else:
                mean = topi.divide(topi.sum(xf, axis=axes, keepdims=True), c(count))
                xc = topi.subtract(xf, mean)
                var = topi.divide(topi.sum(topi.multiply(xc, xc), axis=axes, keepdims=True), c(count))
                y = topi.multiply(xc, topi.rsqrt(topi.add(var, c(eps))))
            it = iter(wb)
            if has_w:
                y = topi.multiply(y, topi.cast(next(it), xf.dtype))
            if has_b:
                y = topi.add(y, topi.cast(next(it), xf.dtype))
            return topi.cast(y, dt) if dt != xf.dtype else y
        return norm


def _const_array(v: Value, depth: int = 4) -> np.ndarray | None:
    """The value of ``v`` when it is a constant, possibly through transposes, reshapes and
    casts (an exporter's ``weight.T``), else None."""
    op = v.producer
    if op is None or depth < 0:
        return None
    if op.name == "ik.constant":
        return np.asarray(op.attrs["value"].array)
    if op.name not in ("ik.transpose", "ik.reshape", "ik.cast"):
        return None
    x = _const_array(op.operand(0), depth - 1)
    if x is None:
        return None
    if op.name == "ik.transpose":
        return np.transpose(x, op.attrs["perm"])
    if op.name == "ik.reshape":
        return x.reshape(v.type.concrete_shape({})) if v.type.is_static else None
    return x.astype(op.attrs["to"].np)


PARALLEL_MIN_FLOPS = 1 << 23
"""A GEMM below this many FLOPs (~0.1 ms on one core) runs on one thread.  Waking TVM's pool costs
tens of microseconds once its workers sleep between tasks (``THREAD_POOL_DEFAULTS`` in
tvm_kernels/common.py), and on a loaded machine every fork/join waits for the slowest worker; a
toy model's 4-MFLOP matmuls were slower on 2 threads than on 1."""


def _worth_parallel(flops: int) -> bool:
    return flops >= PARALLEL_MIN_FLOPS


def _scalar_constant(v: Value) -> float | None:
    """The value of ``v`` when it is a one-element ``ik.constant``, else None."""
    op = v.producer
    if op is None or op.name != "ik.constant":
        return None
    arr = np.asarray(op.attrs["value"].array)
    return float(arr.reshape(-1)[0]) if arr.size == 1 else None


def _fast_unary(name: str, x: Any) -> Any:
    """float32 tanh/erf/exp/sigmoid as the kernel library's vectorisable polynomials."""
    from irkit.targets.tvm_kernels.elementwise import unary_expr

    return unary_expr(name, x, "float32", True)


def _te_unary(topi: Any, name: str, t: Any) -> Any:
    """``topi.<name>(t)``, or the polynomial form for float32 tensors."""
    if str(t.dtype) != "float32":
        return getattr(topi, name)(t)
    from tvm import te

    return te.compute(t.shape, lambda *i: _fast_unary(name, t(*i)), name=f"fast_{name}")


class _Proxy:
    """A matmul view of an epilogue region: the region's matmul with outer operands."""

    def __init__(self, op: Op, x: Value, w: Value):
        self.name = "ik.matmul"
        self.attrs = op.attrs
        self.operands = (x, w)
        self.results = op.results
        self.loc = op.loc


def _einsum(op: Op) -> str:
    from irkit.targets.ort import _einsum_equation

    return _einsum_equation(op)


# ---------------------------------------------------------------------------------------------
# The rule table: one rule per IR op (or family), ``(lowerer, op, ins) -> outputs``.  A rule
# returns the Relax values of the op's results, or None when it bound them itself; it may refuse
# one instance (a dtype, an attribute) with ``lw.refuse(op, why)``.  The table is the target's
# coverage: ``TvmTarget.supports`` and ``irkit coverage`` read it.

TVM_RULES = LoweringTable("tvm")
rule = TVM_RULES.rule

_HALF = ("float16", "bfloat16")


def _half_via_f32(fn: Any) -> Any:
    """``fn`` on a float32 copy of a half-precision tensor, rounded back once (like the reference)."""
    from tvm import topi

    def wrapped(*xs: Any) -> Any:
        dt = str(xs[0].dtype)
        if dt not in _HALF:
            return fn(*xs)
        return topi.cast(fn(*[topi.cast(x, "float32") if str(x.dtype) == dt else x for x in xs]), dt)
    return wrapped


def _map(fn: Any, name: str) -> Any:
    """A TE function applying the scalar ``fn`` elementwise (broadcasting when binary)."""
    from irkit.targets.tvm_kernels import te_ops

    def f(*xs: Any) -> Any:
        return te_ops.broadcast_map(fn, *xs, name=name)
    return f


# -- structural ---------------------------------------------------------------------------------

@rule("ik.constant")
def _constant(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    d = op.attrs["value"]
    arr = np.asarray(d.array)
    # np.ascontiguousarray makes a 0-d array 1-d; a scalar constant must stay rank 0
    return [lw.bb.emit(lw.relax.const(np.ascontiguousarray(arr).reshape(arr.shape), _tvm_dtype(op, d.dtype)))]


@rule("ik.dim_value")
def _dim_value(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    dt = op.results[0].dtype
    value = np.array(eval_dim(op.attrs["dim"][0], lw.b), dt.np)
    return [lw.bb.emit(lw.relax.const(value, _tvm_dtype(op, dt)))]


@rule("ik.iota")
def _iota(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    shape = lw.shape(op.results[0])
    dt = op.results[0].dtype
    ax = normalize_axis(op.attrs.get("axis", 0), len(shape))
    r = np.arange(shape[ax]).reshape([-1 if i == ax else 1 for i in range(len(shape))])
    arr = np.broadcast_to(r, shape).astype(dt.np)
    return [lw.bb.emit(lw.relax.const(np.ascontiguousarray(arr), _tvm_dtype(op, dt)))]


@rule("ik.fused")
def _fused(lw: _Lowerer, op: Op, ins: list[Any]) -> None:
    """A matmul epilogue region as one scheduled kernel, else its body op by op (Relax fuses it)."""
    if lw.try_epilogue(op):
        return
    body = op.regions[0]
    for a, v in zip(body.args, ins):
        lw.env[id(a)] = v
    for inner in body:
        if inner.name == "ik.yield":
            for r, y in zip(op.results, inner.operands):
                lw.env[id(r)] = lw.env[id(y)]
            break
        lw.lower_op(inner)
    return


@rule("ik.dropout")
def _dropout(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    return [ins[0]]


# -- elementwise ---------------------------------------------------------------------------------

_TOPI_UNARY = {"neg": "negative", "abs": "abs", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "sin": "sin",
               "cos": "cos", "floor": "floor", "ceil": "ceil", "not": "logical_not",
               "trunc": "trunc", "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite",
               "bitwise_not": "bitwise_not"}
_TOPI_UNARY_VIA_F32 = {"tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
                       "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh"}


@rule(*(f"ik.{n}" for n in _TOPI_UNARY))
def _topi_unary(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    fn = getattr(lw.topi, _TOPI_UNARY[op.name[3:]])
    if op.name in ("ik.isnan", "ik.isinf", "ik.isfinite") and op.operand(0).dtype == DType.bf16:
        # TVM has no bf16 isnan/isinf/isfinite; widening to f32 is exact
        return [lw.emit(op, lambda x: fn(lw.topi.cast(x, "float32")), ins[0])]
    return [lw.emit(op, fn, ins[0])]


@rule(*(f"ik.{n}" for n in _TOPI_UNARY_VIA_F32))
def _topi_unary_f32(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    return [lw.emit(op, _half_via_f32(getattr(lw.topi, _TOPI_UNARY_VIA_F32[op.name[3:]])), ins[0])]


@rule("ik.tanh", "ik.erf", "ik.exp", "ik.sigmoid")
def _poly_unary(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    # the polynomial forms of the kernel library: TOPI's are one scalar libm call per element
    name = op.name[3:]
    return [lw.emit(op, lambda x: _te_unary(lw.topi, name, x), ins[0])]


@rule("ik.log1p", "ik.expm1", "ik.erfinv", "ik.lgamma", "ik.digamma", "ik.round", "ik.popcount", "ik.clz", "ik.sign")
def _te_ops_unary(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    fn = {"log1p": te_ops.log1p, "expm1": te_ops.expm1, "erfinv": te_ops.erfinv, "lgamma": te_ops.lgamma,
          "digamma": te_ops.digamma, "round": te_ops.round_half_even, "popcount": te_ops.popcount,
          "clz": te_ops.clz, "sign": te_ops.sign}[op.name[3:]]
    return [lw.emit(op, _map(fn, op.name[3:]), ins[0])]


@rule("ik.reciprocal")
def _reciprocal(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    return [lw.emit(op, lambda x: lw.topi.divide(lw.tvm.tirx.const(1.0, x.dtype), x), ins[0])]


@rule("ik.relu")
def _relu(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    # max(x, 0) keeping NaN (topi.nn.relu is LLVM's maxnum, which turns NaN into 0)
    return [lw.emit(op, _map(lambda v: te_ops.nan_max(v, lw.tvm.tirx.const(0, te_ops.dtype_of(v))), "relu"), ins[0])]


@rule("ik.silu")
def _silu(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    topi = lw.topi
    return [lw.emit(op, lambda x: topi.multiply(x, topi.sigmoid(x)), ins[0])]


@rule("ik.gelu")
def _gelu(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    topi, tirx = lw.topi, lw.tvm.tirx
    if op.attrs.get("approximate") == "tanh":
        def gelu(x: Any) -> Any:
            c = tirx.const(math.sqrt(2.0 / math.pi), x.dtype)
            k3 = tirx.const(0.044715, x.dtype)
            inner = topi.multiply(c, topi.add(x, topi.multiply(k3, topi.multiply(x, topi.multiply(x, x)))))
            return topi.multiply(topi.multiply(tirx.const(0.5, x.dtype), x),
                                 topi.add(tirx.const(1.0, x.dtype), _te_unary(topi, "tanh", inner)))
    else:
        def gelu(x: Any) -> Any:
            half = tirx.const(0.5, x.dtype)
            return topi.multiply(topi.multiply(half, x), topi.add(tirx.const(1.0, x.dtype), _te_unary(
                topi, "erf", topi.multiply(x, tirx.const(1 / math.sqrt(2), x.dtype)))))
    return [lw.emit(op, gelu, ins[0])]


_TOPI_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "pow": "power", "lt": "less",
                "gt": "greater", "and": "logical_and", "or": "logical_or", "xor": "logical_xor",
                "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor"}


@rule(*(f"ik.{n}" for n in _TOPI_BINARY))
def _topi_binary(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    topi = lw.topi
    name = op.name[3:]
    if name == "pow" and not op.results[0].dtype.is_float:
        from irkit.targets.tvm_kernels import te_ops

        if lw.gpu:
            raise lw.refuse(op, "integer pow (one TE stage per exponent bit) does not build in reasonable time "
                                "with DLight; use tvm-llvm or a float pow")

        return [lw.emit(op, te_ops.int_pow, *ins)]
    if name == "pow":
        e = _scalar_constant(op.operand(1))
        if e in (1.0, 2.0, 3.0):  # x*x*x instead of a libm powf per element
            def ipow(x: Any, _y: Any) -> Any:
                y = x
                for _ in range(int(e) - 1):
                    y = topi.multiply(y, x)
                return topi.broadcast_to(y, lw.shape(op.results[0]))
            return [lw.emit(op, ipow, *ins)]
    return [lw.emit(op, getattr(topi, _TOPI_BINARY[name]), *ins)]


@rule("ik.div", "ik.rem", "ik.mod", "ik.floor_div")
def _division(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    """Float and integer division and remainders; integer ones never trap (see te_ops)."""
    from irkit.targets.tvm_kernels import te_ops

    name = op.name[3:]
    if op.results[0].dtype.is_float:
        if name == "div":
            return [lw.emit(op, lw.topi.divide, *ins)]
        fn = {"rem": te_ops.float_fmod, "mod": te_ops.float_mod, "floor_div": te_ops.float_floor_div}[name]
        return [lw.emit(op, _half_via_f32(_map(fn, name)), *ins)]
    fn = {"div": lambda x, y: te_ops.int_div(x, y, False), "floor_div": lambda x, y: te_ops.int_div(x, y, True),
          "rem": lambda x, y: te_ops.int_mod(x, y, False), "mod": lambda x, y: te_ops.int_mod(x, y, True)}[name]
    return [lw.emit(op, _map(fn, name), *ins)]


@rule("ik.max", "ik.min")
def _max_min(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    if not op.results[0].dtype.is_float:
        return [lw.emit(op, lw.topi.maximum if op.name == "ik.max" else lw.topi.minimum, *ins)]
    fn = te_ops.nan_max if op.name == "ik.max" else te_ops.nan_min
    return [lw.emit(op, _map(fn, op.name[3:]), *ins)]


@rule("ik.eq", "ik.ne", "ik.le", "ik.ge")
def _compare(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    """Comparisons that may see the same value on both sides.  TVM's simplifier folds ``x != x``
    to false and ``x == x`` to true, which is wrong for NaN (``ne(x, x)`` is how the frontends
    spell isnan); the explicit NaN terms keep the answer right either way."""
    topi = lw.topi
    name = op.name[3:]
    if not op.operand(0).dtype.is_float:
        return [lw.emit(op, {"eq": topi.equal, "ne": topi.not_equal, "le": topi.less_equal,
                             "ge": topi.greater_equal}[name], *ins)]
    tirx = lw.tvm.tirx

    from irkit.targets.tvm_kernels.te_ops import isnan

    def fn(a: Any, b: Any) -> Any:
        if name == "ne":
            return (a != b) | isnan(a) | isnan(b)
        ordered = tirx.Not(isnan(a)) & tirx.Not(isnan(b))
        return ordered & {"eq": a == b, "le": a <= b, "ge": a >= b}[name]
    return [lw.emit(op, _map(fn, name), *ins)]


@rule("ik.atan2", "ik.nextafter")
def _float_binary(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    tirx = lw.tvm.tirx
    if op.name == "ik.nextafter":
        from irkit.targets.tvm_kernels import te_ops

        return [lw.emit(op, _map(te_ops.nextafter, "nextafter"), *ins)]
    return [lw.emit(op, _half_via_f32(_map(tirx.atan2, "atan2")), *ins)]


@rule("ik.shift_left", "ik.shift_right_logical", "ik.shift_right_arithmetic")
def _shift(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    kind = op.name[len("ik.shift_"):]
    return [lw.emit(op, _map(lambda x, y: te_ops.shift(x, y, kind), kind), *ins)]


@rule("ik.where")
def _where(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    return [lw.emit(op, lw.topi.where, *ins)]


@rule("ik.cast")
def _cast(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    to = op.attrs["to"]
    if to.is_bool:
        return [lw.emit(op, lambda x: lw.topi.not_equal(x, lw.tvm.tirx.const(0, x.dtype)), ins[0])]
    if to.is_float8:
        return [lw.emit(op, lambda x: _to_float8(lw, x, to, bool(op.attrs.get("saturate", False))), ins[0])]
    if to is DType.bf16 and op.operand(0).dtype in (DType.f32, DType.f16):
        # TVM's bf16 legalization may keep an f32 -> bf16 -> f32 round trip in f32 without rounding
        # (when the bf16 value is not stored): round to nearest even here, so the narrowing cast is exact.
        return [lw.emit(op, lambda x: lw.topi.cast(_round_to_bf16(x), "bfloat16"), ins[0])]
    return [lw.emit(op, lambda x: lw.topi.cast(x, _tvm_dtype(op, to)), ins[0])]


def _round_to_bf16(x: Any) -> Any:
    """``x`` (f32 or f16) rounded to nearest even at bf16 precision, as float32 (NaN stays NaN; f16 widens
    to f32 exactly, so one rounding)."""
    from tvm import te, tirx

    def u(v: int) -> Any:
        return tirx.const(v, "uint32")

    def rnd(*i: Any) -> Any:
        v = x(*i) if str(x.dtype) == "float32" else tirx.Cast("float32", x(*i))
        bits = tirx.reinterpret("uint32", v)
        even = tirx.bitwise_and(tirx.shift_right(bits, u(16)), u(1))
        r = tirx.reinterpret("float32", tirx.bitwise_and(bits + u(0x7FFF) + even, u(0xFFFF0000)))
        return tirx.Select(tirx.isnan(v), v, r)

    return te.compute(x.shape, rnd, name="round_to_bf16")


def _to_float8(lw: _Lowerer, x: Any, to: DType, saturate: bool) -> Any:
    """Round to the float8 type ``to`` in TE (the value as float32; see te_ops.round_to_float8)."""
    import ml_dtypes
    from irkit.targets.tvm_kernels import te_ops

    fi = ml_dtypes.finfo(to.np)
    src = str(x.dtype)
    wide = lw.topi.cast(x, "float32") if src != "float64" else x
    fn = functools.partial(te_ops.round_to_float8, nmant=int(fi.nmant), minexp=int(fi.minexp), maxval=float(fi.max),
                           overflow="inf" if to is DType.f8e5m2 else "nan",
                           negzero=to in (DType.f8e4m3fn, DType.f8e5m2), saturate=saturate)
    from tvm import te

    y = te.compute(wide.shape, lambda *i: fn(wide(*i)), name="to_float8")
    return lw.topi.cast(y, "float32") if src == "float64" else y


@rule("ik.bitcast")
def _bitcast(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    to = op.results[0].dtype
    shape = lw.shape(op.results[0])
    return [lw.emit(op, lambda x: te_ops.bitcast(x, _tvm_dtype(op, to), shape), ins[0])]


# -- reductions, scans, norms ----------------------------------------------------------------------

@rule("ik.reduce_sum", "ik.reduce_max", "ik.reduce_min", "ik.reduce_prod", "ik.reduce_mean")
def _reduce(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    a = op.attrs
    rank = op.operand(0).type.rank
    axes = [normalize_axis(x, rank) for x in a.get("axes", ())] or list(range(rank))
    keep = bool(a.get("keepdims", False))
    kind = op.name[len("ik.reduce_"):]
    if any(lw.shape(op.operand(0))[i] == 0 for i in axes):
        # An empty reduction: TE's init sits inside the zero-extent loop and never runs (the result
        # was uninitialised memory); the answer is the identity, as the reference computes it.
        dt = op.results[0].dtype
        with np.errstate(all="ignore"):
            empty = np.zeros([lw.shape(op.operand(0))[i] if i not in axes else 0 for i in range(rank)], dt.np)
            refs: dict[str, Callable[..., Any]] = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "max": np.max,
                                                   "min": np.min}
            ref = refs[kind]
            try:
                value = np.asarray(ref(empty, axis=tuple(axes), keepdims=keep)).astype(dt.np)
            except ValueError:
                raise TargetUnavailable(f"tvm: {op.name} at {op.loc.short()} reduces an empty axis, which has "
                                        "no identity for max/min") from None
        return [lw.bb.emit(lw.relax.const(np.ascontiguousarray(value), _TVM_DTYPE[dt]))]
    if kind == "mean":
        n = int(np.prod([lw.shape(op.operand(0))[i] for i in axes]))
        return [lw.emit(op, lambda x: lw.topi.divide(te_ops.reduce(x, "sum", axes, keep),
                                                     lw.tvm.tirx.const(n, x.dtype)), ins[0])]
    return [lw.emit(op, lambda x: te_ops.reduce(x, kind, axes, keep), ins[0])]


@rule("ik.argmax", "ik.argmin")
def _arg_reduce(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    a = op.attrs
    ax = normalize_axis(a["axis"], op.operand(0).type.rank)
    return [lw.emit(op, lambda x: te_ops.arg_reduce(x, ax, bool(a.get("keepdims", False)), op.name == "ik.argmax",
                                                    bool(a.get("select_last_index", False))), ins[0])]


@rule("ik.cumsum", "ik.cumprod", "ik.cummax", "ik.cummin")
def _scan(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    a = op.attrs
    ax = normalize_axis(a["axis"], op.operand(0).type.rank)
    kind = op.name[len("ik.cum"):]
    return [lw.emit(op, lambda x: te_ops.scan(x, kind, ax, bool(a.get("reverse", False)),
                                              bool(a.get("exclusive", False)), lw.gpu), ins[0])]


@rule("ik.softmax", "ik.log_softmax")
def _softmax(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any] | None:
    if op.name == "ik.softmax" and lw.try_row_kernel(op):
        return None
    fn = lw.topi.nn.softmax if op.name == "ik.softmax" else lw.topi.nn.log_softmax
    return [lw.emit(op, lambda x: fn(x, axis=op.attrs.get("axis", -1)), ins[0])]


@rule("ik.layer_norm", "ik.rms_norm")
def _norm(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any] | None:
    if lw.try_row_kernel(op):
        return None
    return [lw.emit(op, lw._norm_fn(op), *ins)]


# -- contractions ---------------------------------------------------------------------------------

@rule("ik.matmul")
def _matmul(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any] | None:
    if lw.try_matmul(op):
        return None
    return [lw.emit(op, lw._generic_matmul, *ins)]


@rule("ik.contract")
def _contract(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    return [lw.emit(op, lambda x, y: lw.topi.einsum(_einsum(op), x, y), *ins)]


@rule("ik.attention")
def _attention(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any] | None:
    """The online-softmax kernel where it applies, else the unfused TE attention (float64, Dv != D);
    both give zeros for a row whose every key is masked, like the reference."""
    from irkit.targets.tvm_kernels import te_ops

    if lw.try_attention(op):
        return None
    n = named_operands(op)
    has_mask, has_bias = n.get("mask") is not None, n.get("bias") is not None
    scale, causal = float(op.attrs["scale"]), bool(op.attrs.get("causal", False))
    softcap = float(op.attrs.get("softcap", 0.0) or 0.0)

    def attn(q: Any, k: Any, v: Any, *rest: Any) -> Any:
        it = iter(rest)
        mask = next(it) if has_mask else None
        bias = next(it) if has_bias else None
        return te_ops.attention(q, k, v, mask, bias, scale, causal, softcap)
    return [lw.emit(op, attn, *ins)]


@rule("ik.conv2d")
def _conv2d(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any] | None:
    if lw.try_conv_gemm(op, ins):
        return None
    a = op.attrs
    topi = lw.topi
    pads = list(a.get("padding", (0, 0, 0, 0)))

    def conv(x: Any, w: Any, *bias: Any) -> Any:
        y = topi.nn.conv2d(x, w, list(a.get("strides", (1, 1))), pads, list(a.get("dilations", (1, 1))),
                           data_layout="NCHW", kernel_layout="OIHW", out_dtype=x.dtype) \
            if a.get("groups", 1) == 1 else topi.nn.group_conv2d_nchw(
                x, w, list(a.get("strides", (1, 1))), pads, list(a.get("dilations", (1, 1))),
                a.get("groups", 1), out_dtype=x.dtype)
        if bias:
            y = topi.add(y, topi.reshape(bias[0], (1, int(bias[0].shape[0]), 1, 1)))
        return y
    return [lw.emit(op, conv, *ins)]


@rule("ik.conv")
def _conv(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any] | None:
    from irkit.targets.tvm_kernels import te_ops

    a = op.attrs
    if lw.try_conv_gemm(op, ins):
        return None
    nsp = op.operand(0).type.rank - 2
    ones, zeros = (1,) * nsp, (0,) * (2 * nsp)

    def conv(x: Any, w: Any, *bias: Any) -> Any:
        return te_ops.conv(x, w, bias[0] if bias else None, list(a.get("strides") or ones),
                           list(a.get("padding") or zeros), list(a.get("dilations") or ones),
                           list(a.get("lhs_dilation") or ones), int(a.get("groups", 1)))
    return [lw.emit(op, conv, *ins)]


@rule("ik.reduce_window")
def _reduce_window(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    a = op.attrs
    r = op.operand(0).type.rank
    window = list(a["window"])
    strides = list(a.get("strides") or (1,) * r)
    pads = list(a.get("pads") or (0,) * (2 * r))
    dil = list(a.get("dilations") or (1,) * r)
    return [lw.emit(op, lambda x: te_ops.reduce_window(x, a["kind"], window, strides, pads, dil), ins[0])]


# -- data movement ---------------------------------------------------------------------------------

@rule("ik.reshape")
def _reshape(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    # A Relax reshape, not a TOPI copy: standalone, the VM makes it a view of the same buffer
    # (RewriteDataflowReshape); a chain of them is one reshape of the chain's source, so two
    # in a row never fuse into a copy kernel.
    src = lw.reshape_source.get(id(ins[0]), ins[0])
    out = lw.bb.emit(lw.relax.op.reshape(src, lw.shape(op.results[0])))
    lw.reshape_source[id(out)] = src
    return [out]


@rule("ik.transpose")
def _transpose(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    return [lw.emit(op, lambda x: lw.topi.transpose(x, list(op.attrs["perm"])), ins[0])]


@rule("ik.broadcast")
def _broadcast(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    return [lw.emit(op, lambda x: lw.topi.broadcast_to(x, lw.shape(op.results[0])), ins[0])]


@rule("ik.slice")
def _slice(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    a = op.attrs
    r = op.operand(0).type.rank
    st = [eval_dim(x, lw.b) for x in a["start"]]
    lim = [eval_dim(x, lw.b) for x in a["limit"]]
    step = list(a.get("step") or (1,) * r)
    return [lw.emit(op, lambda x: lw.topi.strided_slice(x, st, lim, step), ins[0])]


@rule("ik.concat")
def _concat(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    return [lw.emit(op, lambda *xs: lw.topi.concatenate(xs, axis=op.attrs["axis"]), *ins)]


@rule("ik.split")
def _split(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    a = op.attrs
    sizes = [eval_dim(s, lw.b) for s in a["sizes"]]
    r = op.operand(0).type.rank
    ax = normalize_axis(a["axis"], r)
    full = lw.shape(op.operand(0))
    outs = []
    start = 0
    for s in sizes:
        b0 = [0] * r
        e0 = list(full)
        b0[ax], e0[ax] = start, start + s
        outs.append(lw.emit(op, lambda x, b0=b0, e0=e0: lw.topi.strided_slice(x, b0, e0, [1] * r), ins[0]))
        start += s
    return outs


@rule("ik.pad")
def _pad(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    r = op.operand(0).type.rank
    p = op.attrs["pads"]
    value = op.attrs.get("value", 0.0)
    return [lw.emit(op, lambda x: lw.topi.nn.pad(x, list(p[:r]), list(p[r:]), pad_value=value), ins[0])]


@rule("ik.reverse")
def _reverse(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    r = op.operand(0).type.rank
    axes = [normalize_axis(x, r) for x in op.attrs["axes"]]

    def flip(x: Any) -> Any:
        for ax in axes:
            x = lw.topi.flip(x, ax)
        return x
    return [lw.emit(op, flip, ins[0])]


@rule("ik.gather")
def _gather(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    """``np.take``; negative indices wrap (TOPI's take mode="clip" clamped them to 0: a silent
    wrong answer on ONNX's gather_negative_indices)."""
    from irkit.targets.tvm_kernels import te_ops

    ax = normalize_axis(op.attrs.get("axis", 0), op.operand(0).type.rank)
    return [lw.emit(op, lambda d, i: te_ops.take(d, i, ax), *ins)]


@rule("ik.gather_elements")
def _gather_elements(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    ax = normalize_axis(op.attrs["axis"], op.operand(0).type.rank)
    return [lw.emit(op, lambda d, i: te_ops.take_along_axis(d, i, ax), *ins)]


@rule("ik.gather_nd")
def _gather_nd(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    bd = int(op.attrs.get("batch_dims", 0))
    return [lw.emit(op, lambda d, i: te_ops.gather_nd(d, i, bd), *ins)]


def _scatter_indices_distinct(op: Op) -> bool:
    """Whether no two updates of a scatter can land on one element, so that a parallel GPU scatter
    with ``reduction = "none"`` is deterministic.  ``ik.scatter_elements``: its indices have extent
    1 along the axis (each lane of the output gets one update: torch's ``select_scatter``), or they
    are an ``ik.iota`` along the axis plus a scalar constant (``slice_scatter``), or a constant with
    distinct values in every lane.  ``ik.scatter_nd``: constant indices whose tuples are distinct."""
    idx = op.operand(1)
    shape = idx.type.shape
    p = idx.producer
    if op.name == "ik.scatter_elements":
        ax = normalize_axis(op.attrs["axis"], idx.type.rank)
        if shape[ax] == 1:
            return True
        while p is not None and p.name == "ik.add" and len(p.operands) == 2:  # iota + c (a scalar constant)
            a, c = p.operand(0), p.operand(1)
            cp = c.producer
            if (cp is None or cp.name != "ik.constant" or np.asarray(cp.attrs["value"].array).size != 1
                    or a.type.shape != idx.type.shape):
                return False
            p = a.producer
        if p is not None and p.name == "ik.iota":
            return normalize_axis(int(p.attrs.get("axis", 0)), idx.type.rank) == ax
        if p is not None and p.name == "ik.constant":
            arr = np.moveaxis(np.asarray(p.attrs["value"].array), ax, -1)
            n = op.operand(0).type.shape[ax]
            if not isinstance(n, int):
                return False
            arr = np.sort(np.where(arr < 0, arr + n, arr), axis=-1)
            return bool(np.all(np.diff(arr, axis=-1) != 0))
        return False
    if p is not None and p.name == "ik.constant":
        arr = np.asarray(p.attrs["value"].array)
        k = arr.shape[-1]
        if not all(isinstance(d, int) for d in op.operand(0).type.shape[:k]):
            return False
        dims = np.asarray(op.operand(0).type.shape[:k])
        rows = arr.reshape(-1, k)
        rows = np.where(rows < 0, rows + dims, rows)
        return len(np.unique(rows, axis=0)) == len(rows)
    return False


@rule("ik.scatter_elements", "ik.scatter_nd")
def _scatter(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    red = op.attrs.get("reduction", "none")
    if lw.gpu and red == "none" and not _scatter_indices_distinct(op):
        # TOPI's GPU scatters update in parallel: with duplicate indices the winner is unspecified.
        # As a gather, every output element picks the last update landing on it (the IR's rule).
        if op.name == "ik.scatter_nd":
            return [lw.emit(op, te_ops.scatter_nd_last_wins, *ins)]
        ax = normalize_axis(op.attrs["axis"], op.operand(0).type.rank)
        return [lw.emit(op, lambda d, i, u: te_ops.scatter_elements_last_wins(d, i, u, ax), *ins)]
    if op.name == "ik.scatter_nd":
        return [lw.emit(op, lambda d, i, u: te_ops.scatter_nd(d, i, u, red, lw.gpu), *ins)]
    ax = normalize_axis(op.attrs["axis"], op.operand(0).type.rank)
    return [lw.emit(op, lambda d, i, u: te_ops.scatter_elements(d, i, u, ax, red, lw.gpu), *ins)]


@rule("ik.dynamic_slice")
def _dynamic_slice(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    from irkit.targets.tvm_kernels import te_ops

    sizes = [int(s) for s in op.attrs["sizes"]]
    return [lw.emit(op, lambda x, s: te_ops.dynamic_slice(x, s, sizes), *ins)]


@rule("ik.dynamic_update_slice")
def _dynamic_update_slice(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any] | None:
    from irkit.targets.tvm_kernels import te_ops

    if lw.try_inplace_update(op, ins):
        return None
    return [lw.emit(op, te_ops.dynamic_update_slice, *ins)]


@rule("ik.sort", "ik.topk")
def _sort(lw: _Lowerer, op: Op, ins: list[Any]) -> list[Any]:
    """Stable argsort (or top-k) on a NumPy-ordered integer key, then the values gathered back."""
    from irkit.targets.tvm_kernels import te_ops

    a = op.attrs
    ax = normalize_axis(a.get("axis", -1), op.operand(0).type.rank)
    if op.name == "ik.sort":
        idx = lw.emit(op, lambda x: te_ops.argsort(x, ax, bool(a.get("descending", False)), lw.gpu), ins[0])
    else:
        k = int(a["k"])
        idx = lw.emit(op, lambda x: te_ops.topk_indices(x, k, ax, bool(a.get("largest", True)), lw.gpu), ins[0])
    vals = lw.emit(op, lambda x, i: te_ops.take_along_axis(x, i, ax), ins[0], idx)
    return [vals, idx]


def _unfused_pipeline(target: Any) -> Any:
    """The default Relax pipeline minus FuseOps/FuseTIR (GPU kernels still get DLight schedules)."""
    import tvm
    from tvm import relax

    @tvm.transform.module_pass(opt_level=0)
    def pipeline(mod: Any, _ctx: Any) -> Any:
        passes = [relax.transform.LegalizeOps(), relax.transform.AnnotateTIROpPattern(),
                  relax.transform.FoldConstant()]
        if target.kind.name == "cuda":
            from tvm.s_tir import dlight as dl

            passes.append(dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                                  dl.gpu.GeneralReduction(), dl.gpu.Fallback()))
        passes += [relax.transform.RewriteDataflowReshape(), relax.transform.ToNonDataflow(),
                   relax.transform.RemovePurityChecking(), relax.transform.CallTIRRewrite(),
                   relax.transform.StaticPlanBlockMemory(), relax.transform.LowerAllocTensor(),
                   relax.transform.KillAfterLastUse(), relax.transform.LowerRuntimeBuiltin(),
                   relax.transform.ComputePrimValue(), relax.transform.VMShapeLower(),
                   relax.transform.AttachGlobalSymbol()]
        with target:
            return tvm.transform.Sequential(passes)(mod)

    return pipeline


def _schedule_topi_cpu(func: Any, lanes: int) -> Any:
    """Flatten, vectorise and parallelise every spatial block of a Relax-fused TOPI PrimFunc.

    TVM's default CPU pipeline leaves these loop nests unscheduled: one thread, scalar code.
    Reduction blocks (norms, reductions outside the kernel library) keep their loops. Any
    schedule error leaves the function as it was.
    """
    from irkit.targets.tvm_kernels.common import schedule_elementwise_cpu
    from tvm import s_tir

    try:
        sch = s_tir.Schedule(func)
        for blk in sch.get_child_blocks(sch.get_sblock("root")):
            if any(int(iv.iter_type) != 0 for iv in sch.get(blk).iter_vars) or not sch.get_loops(blk):
                continue
            schedule_elementwise_cpu(sch, blk, lanes)
        return sch.mod["main"]
    except Exception:  # noqa: BLE001 - scheduling is an optimisation; keep the plain loops
        return func


WEIGHT_PARAM_MIN_BYTES = 1 << 20
"""Constants of at least this many bytes (weights) become parameters of ``main`` (:func:`_lift_weights`)."""


def _lift_weights(mod: Any, min_bytes: int = WEIGHT_PARAM_MIN_BYTES) -> tuple[Any, list[Any]]:
    """``mod`` with each large constant of ``main`` turned into a trailing parameter, and the TVM
    tensors to pass for them (the constants' own tensors: no copy).

    Weights baked in as constants are copied into the executable's constant pool when it is linked
    and again into the VM's device memory when it starts (for GPT-2 124M, half a gigabyte each
    time); as parameters they are bound once by the runner.  A constant is lifted only where every
    call that reads it also reads a runtime value, so that FoldConstant still evaluates what depends
    on constants alone (and dead constants go first).
    """
    import tvm
    from tvm import relax

    mod = relax.transform.DeadCodeElimination(["main"])(mod)
    gv = mod.get_global_var("main")
    fn = mod[gv]
    body = fn.body
    if len(body.blocks) != 1:
        return mod, []
    block = body.blocks[0]

    def var_refs(e: Any) -> list[Any]:
        if isinstance(e, relax.Var):
            return [e]
        if isinstance(e, relax.Tuple):
            return [v for f in e.fields for v in var_refs(f)]
        if isinstance(e, relax.Call):
            return [v for a in e.args for v in var_refs(a)]
        if isinstance(e, relax.TupleGetItem):
            return var_refs(e.tuple_value)
        return []

    dynamic = {p.name for p in fn.params}
    if dynamic & {bnd.var.name for bnd in block.bindings}:
        return mod, []  # names are how the bindings are told apart here
    candidates: dict[str, Any] = {}
    refused: set[str] = set()
    for bnd in block.bindings:
        name = bnd.var.name
        if not isinstance(bnd, relax.VarBinding):
            dynamic.add(name)
            continue
        if isinstance(bnd.value, tvm.ir.expr.Constant):
            data = bnd.value.value
            if int(np.prod(data.shape, dtype=np.int64)) * np.dtype(str(data.dtype)).itemsize >= min_bytes:
                candidates[name] = bnd
            continue
        refs = [v.name for v in var_refs(bnd.value)]
        if any(r in dynamic for r in refs):
            dynamic.add(name)
            if not isinstance(bnd.value, relax.Call):
                refused.update(r for r in refs if r in candidates)
        else:
            refused.update(r for r in refs if r in candidates)
    for r in [v.name for v in var_refs(body.body)]:
        refused.add(r)
    lift = [b for n, b in candidates.items() if n not in refused]
    if not lift:
        return mod, []
    new_params = [relax.Var(f"w_{b.var.name}", b.value.ty) for b in lift]
    by_name = {b.var.name: p for b, p in zip(lift, new_params)}
    bindings = [relax.VarBinding(b.var, by_name[b.var.name]) if b.var.name in by_name else b
                for b in block.bindings]
    new_body = relax.SeqExpr([relax.DataflowBlock(bindings)], body.body)
    new_fn = relax.Function(list(fn.params) + new_params, new_body, fn.ret_ty, fn.is_pure, fn.attrs)
    out = mod.clone()
    out[gv] = new_fn
    out = relax.transform.CanonicalizeBindings()(relax.transform.Normalize()(out))
    return out, [b.value.value for b in lift]


class _WeightsBound:
    """A Relax VM whose ``main`` takes the lifted weights (:func:`_lift_weights`) after the caller's
    arguments: ``vm["main"](*args)`` calls the compiled ``main(*args, *weights)``."""

    def __init__(self, vm: Any, weights: Sequence[Any]):
        self._vm = vm
        self._weights = tuple(weights)

    def __getitem__(self, name: str) -> Any:
        f = self._vm[name]
        if name != "main":
            return f
        weights = self._weights

        def main(*args: Any) -> Any:
            return f(*args, *weights)
        return main

    def __getattr__(self, name: str) -> Any:  # set_instrument, ...
        return getattr(self._vm, name)


def _dedup_primfuncs(mod: Any, renamed: dict[str, str] | None = None) -> Any:
    """``mod`` with structurally identical PrimFuncs merged into one (the first by name), every Relax
    call of a duplicate pointed at it, and the duplicates dropped.

    Twelve identical transformer layers lower to twelve copies of each kernel that differ only in
    their names (the kernel library names a PrimFunc after its op); LLVM would compile each copy.
    ``renamed`` (when given) receives ``duplicate name -> kept name``.
    """
    import tvm
    from tvm import relax
    from tvm.relax.expr_functor import PyExprMutator, mutator
    from tvm_ffi import structural_equal, structural_hash

    kept: dict[int, list[tuple[Any, Any]]] = {}
    remap: dict[str, Any] = {}
    for gv, f in sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint):
        if not isinstance(f, tvm.tirx.PrimFunc):
            continue
        key = f.without_attr("global_symbol") if f.attrs is not None and "global_symbol" in f.attrs else f
        bucket = kept.setdefault(structural_hash(key), [])
        for gv0, key0 in bucket:
            if structural_equal(key0, key):
                remap[gv.name_hint] = gv0
                break
        else:
            bucket.append((gv, key))
    if not remap:
        return mod

    @mutator
    class _Redirect(PyExprMutator):  # type: ignore[misc]
        def visit_global_var_(self, op: Any) -> Any:
            return remap.get(op.name_hint, op)

    out = mod.clone()
    for gv, f in mod.functions.items():
        if isinstance(f, relax.Function):
            out[gv] = _Redirect(mod).visit_expr(f)
    entries = [gv.name_hint for gv, f in mod.functions.items()
               if isinstance(f, relax.Function) and f.attrs is not None and "global_symbol" in f.attrs]
    out = relax.transform.DeadCodeElimination(entries or ["main"])(out)
    # Relax's DCE keeps a PrimFunc that has a global_symbol (every scheduled kernel has one): drop
    # the merged copies here, nothing calls them any more, or LLVM would still compile each
    names = {gv.name_hint for gv in out.get_global_vars()}
    for name in remap:
        if name in names:
            del out[out.get_global_var(name)]
    if renamed is not None:
        renamed.update({k: v.name_hint for k, v in remap.items()})
    return out


def _cpu_pipeline(target: Any, renamed: dict[str, str] | None = None) -> Any:
    """TVM's default CPU Relax pipeline plus a CPU schedule for the Relax-fused TOPI functions.

    Around it: dead bindings go first (a constant weight the matmul kernel took pre-packed, and
    anything computed only from it, would otherwise be evaluated by FoldConstant), and after
    fusion and scheduling identical PrimFuncs are merged (:func:`_dedup_primfuncs`; ``renamed``
    receives the merges), so each distinct kernel is compiled by LLVM once."""
    import tvm
    from irkit.targets.tvm_kernels.common import simd_lanes
    from tvm import relax
    from tvm.relax.backend.cpu_generic import pipeline as cpu

    lanes = simd_lanes(target)

    @tvm.transform.module_pass(opt_level=0)
    def schedule_topi(mod: Any, _ctx: Any) -> Any:
        out = {}
        for gv, f in mod.functions.items():
            if isinstance(f, tvm.tirx.PrimFunc) and not f.attrs.get("tirx.is_scheduled", False):
                out[gv] = _schedule_topi_cpu(f, lanes).with_attr("tirx.is_scheduled", True)
        for gv, f in out.items():
            mod[gv] = f
        return mod

    @tvm.transform.module_pass(opt_level=0)
    def dedup(mod: Any, _ctx: Any) -> Any:
        try:
            return _dedup_primfuncs(mod, renamed)
        except Exception:  # noqa: BLE001 - merging is a compile-time saving; a failure compiles every copy
            if renamed is not None:
                renamed.clear()
            return mod

    @tvm.transform.module_pass(opt_level=0)
    def pipeline(mod: Any, _ctx: Any) -> Any:
        with target:
            seq = tvm.transform.Sequential(
                [relax.transform.DeadCodeElimination(["main"])]
                + cpu.library_dispatch_passes(target) + cpu.legalize_passes(target) + [schedule_topi, dedup]
                + cpu.dataflow_lower_passes(target) + cpu.finalize_passes(target))
            return seq(mod)

    return pipeline


def _cuda_pipeline(target: Any, renamed: dict[str, str] | None = None) -> Any:
    """TVM's default CUDA Relax pipeline with identical PrimFuncs merged after fusion and the
    DLight schedules (:func:`_dedup_primfuncs`; ``renamed`` receives the merges): the CUDA
    source then holds each distinct kernel once, and nvcc compiles it once (a 2-layer toy
    model's two layers lowered to two copies of every kernel).  Dead bindings go first, as in
    :func:`_cpu_pipeline`, so FoldConstant does not build and run kernels whose results
    nothing reads."""
    import tvm
    from tvm import relax
    from tvm.relax.backend.cuda import pipeline as cuda

    @tvm.transform.module_pass(opt_level=0)
    def dedup(mod: Any, _ctx: Any) -> Any:
        merged: dict[str, str] = {}
        try:
            out = _dedup_primfuncs(mod, merged)
            # Relax DCE keeps a PrimFunc that has a global_symbol (every scheduled kernel has one):
            # drop the merged copies here; nothing calls them any more
            for name in merged:
                if any(gv.name_hint == name for gv in out.get_global_vars()):
                    del out[out.get_global_var(name)]
        except Exception:  # noqa: BLE001 - merging is a compile-time saving; a failure compiles every copy
            return mod
        if renamed is not None:
            renamed.update(merged)
        return out

    @tvm.transform.module_pass(opt_level=0)
    def pipeline(mod: Any, _ctx: Any) -> Any:
        with target:
            seq = tvm.transform.Sequential(
                [relax.transform.DeadCodeElimination(["main"])]
                + cuda.library_dispatch_passes(target) + cuda.legalize_passes(target) + [dedup]
                + cuda.dataflow_lower_passes(target) + cuda.finalize_passes(target))
            return seq(mod)

    return pipeline


class TvmTarget(Target):
    """TVM Relax + hand-scheduled TensorIR."""

    lowering_table = TVM_RULES

    def __init__(self, kind: str = "llvm", arch: str = "sm_90"):
        self.kind = kind
        self.arch = arch

    @property
    def summary(self) -> str:  # type: ignore[override]
        if self.kind == "llvm":
            return "TVM Relax + scheduled TensorIR for this CPU (LLVM, mcpu detected)"
        return f"TVM Relax + scheduled TensorIR for CUDA {self.arch} (CUDA source and PTX here; runs on a GPU)"

    def tvm_target(self) -> Any:
        _tvm_available()  # loads the CUDA libraries before tvm is first imported, where they exist
        from irkit.targets.tvm_kernels.common import cpu_target, cuda_target

        return cpu_target() if self.kind == "llvm" else cuda_target(self.arch)

    def open_session(self, artifact, aliases=None):  # resident TVM tensors (targets/tvm_session.py)
        from irkit.targets.tvm_session import open_tvm_session

        return open_tvm_session(self, artifact, aliases)

    def availability(self) -> Availability:
        why = _tvm_available()
        if why:
            return Availability(False, False, why)
        if self.kind == "llvm":
            return Availability(True, True)
        import tvm

        if tvm.cuda(0).exist:
            return Availability(True, True)
        return Availability(True, False, "needs an NVIDIA GPU to run; CUDA source and PTX are produced here")

    def lower(self, module: Module, bindings: Mapping[str, int] | None = None) -> Artifact:
        av = self.availability()
        if not av.can_compile:
            raise TargetUnavailable(f"target '{self.name}': {av.reason}")
        import tvm
        from tvm import relax

        fn = module.entry
        missing: dict[str, list[str]] = {}
        for op in fn.walk():
            if op.name not in _STRUCTURAL and op.name not in TVM_RULES:
                missing.setdefault(op.name, []).append(op.loc.short())
        if missing:
            where = [f"'{n}' at {', '.join(locs[:3])}{' ...' if len(locs) > 3 else ''}"
                     for n, locs in sorted(missing.items())]
            raise TargetUnavailable(f"target '{self.name}' has no lowering rule for " + "; ".join(where))
        b = default_bindings(fn, bindings)
        ids = op_ids(module)
        t0 = time.perf_counter()
        target = self.tvm_target()
        low = _Lowerer(module, b, target, ids)
        mod = low.build()
        weights: list[Any] = []
        if self.kind == "llvm":  # weights as parameters, bound by the runner (not in the executable)
            mod, weights = _lift_weights(mod)
        files: dict[str, str | bytes] = {"relax.py": mod.script()}
        info: dict[str, Any] = {}
        renamed: dict[str, str] = {}  # PrimFuncs merged into an identical one (_dedup_primfuncs)
        try:
            with quiet_native_stderr():  # TVM's code generator warns on fd 2 (unknown pragmas...)
                ex = tvm.compile(mod, target=target,
                                 relax_pipeline=_cpu_pipeline(target, renamed) if self.kind == "llvm"
                                 else _cuda_pipeline(target, renamed))
        except Exception as e:  # noqa: BLE001 - TVM's FuseTIR rejects some graphs; build unfused
            renamed.clear()
            info["fusion"] = ("Relax FuseOps/FuseTIR failed here (" + str(e).strip().splitlines()[-1][:200]
                              + "); built without Relax operator fusion")
            try:
                with quiet_native_stderr():
                    ex = tvm.compile(mod, target=target, relax_pipeline=_unfused_pipeline(target))
            except Exception as e2:  # noqa: BLE001 - TVM's own build failure: one clear line, not its traceback
                ops = ", ".join(sorted({o.name for o in fn.walk() if o.name not in _STRUCTURAL}))
                last = (str(e2).strip().splitlines() or [type(e2).__name__])[-1][:200]
                raise TargetUnavailable(f"target '{self.name}': TVM could not build this module (ops: {ops}): "
                                        f"{last}") from None
        dt = time.perf_counter() - t0
        kernels = []
        for name, kernel_ops in low.kernels:
            names, locs = provenance(kernel_ops, ids)
            fns = [low.function.get(name, name), *low.aux_functions.get(name, [])]
            kernels.append(Kernel(name, "scheduled TensorIR", names, locs, "relax.py",
                                  extra={"functions": list(dict.fromkeys(renamed.get(f, f) for f in fns))}))
        for op in fn.body:
            if op.name in ("func.return", "ik.constant") or any(ids[id(op)] in k.ir_ops for k in kernels):
                continue
            names, locs = provenance([op], ids)
            inner = [op, *(i for r in op.regions for i in r.walk())]
            fns = list(dict.fromkeys(renamed.get(f, f) for f in (low.function[low.kname(o)] for o in inner
                                                                   if low.kname(o) in low.function)))
            kernels.append(Kernel(low.kname(op), "TOPI (Relax-fused)", names, locs, "relax.py",
                                  extra={"functions": fns or [low.kname(op)]}))
        info.update({"tvm": tvm.__version__, "target": str(target), "scheduled_kernels": len(low.kernels)})
        if renamed:
            info["merged_functions"] = len(renamed)
        if low.inplace_args:
            info["inplace_args"] = sorted(low.inplace_args)
        runner = profiler = None
        if self.kind == "llvm":
            vm = relax.VirtualMachine(ex, tvm.cpu())
            if weights:
                info["weight_params"] = len(weights)
                vm = _WeightsBound(vm, weights)

            def profiler(xs: Sequence[np.ndarray], runs: int = 3) -> list[tuple[str, float]]:
                from irkit.targets.tvm_kernels.common import to_tvm

                pvm = relax.VirtualMachine(ex, tvm.cpu())
                return _profile_calls(_WeightsBound(pvm, weights) if weights else pvm,
                                      [to_tvm(np.asarray(x)) for x in xs], runs)

            # an output that is an argument, or shares its buffer (an in-place update), is copied out
            # of the staging array that the next call overwrites
            fast = _CpuRunner(vm, [a.type.concrete_shape(b) for a in fn.args], [_TVM_DTYPE[a.dtype] for a in fn.args],
                              any(any(v is a for a in fn.args) for v in fn.outputs) or bool(low.inplace_args),
                              len(fn.outputs) != 1)

            f8_outs = [(k, v.dtype.np) for k, v in enumerate(fn.outputs) if v.dtype.is_float8]

            def runner(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
                # names ``vm`` so that sessions (targets/tvm_session.py) find the VM in the closure
                outs = fast(xs) if vm is not None else []
                for k, npdt in f8_outs:  # float8 results travel as float32 (exact)
                    outs[k] = np.asarray(outs[k]).astype(npdt)
                return outs
            runner.engine = fast  # type: ignore[attr-defined]  # irkit.breakdown times the bare VM call
            try:
                files["kernels.ll"] = ex.mod.imports[0].inspect_source("ll") if ex.mod.imports else ""
            except Exception:  # noqa: BLE001 - the LLVM text is for inspection only
                pass
        else:
            from irkit.targets.tvm_kernels.common import cuda_source_of, cuda_to_ptx, find_nvcc

            src = cuda_source_of(ex)
            files["kernels.cu"] = src
            if find_nvcc():
                ptx, log = cuda_to_ptx(src, self.arch)
                files["kernels.ptx"] = ptx
                info["ptxas"] = log
            if tvm.cuda(0).exist:
                vm = relax.VirtualMachine(ex, tvm.cuda(0))

                def runner(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
                    dev = tvm.cuda(0)
                    out = vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(
                        np.asarray(x, np.float32) if np.asarray(x).dtype.itemsize == 1 and
                        np.asarray(x).dtype.kind in "fV" else x), dev) for x in xs])
                    if isinstance(out, (tuple, list)) or type(out).__name__ in ("Array", "ADT", "Tuple"):
                        return [o.numpy() for o in out]
                    return [out.numpy()]
        art = Artifact(self.name, files, kernels, dt, b, [a.type.concrete_shape(b) for a in fn.args], info, runner,
                        profiler)
        from irkit.targets.base import module_aliases

        art.aliases = module_aliases(module)  # the function's `aliases` attribute, for sessions
        return art


class _CpuRunner:
    """One call of the VM's ``main`` with as little per-call work as the VM allows.

    Each input slot owns a 64-byte-aligned staging array and the TVM tensor that views it (made
    once, through DLPack): a call copies the caller's array into it (a ``memcpy``; TVM's own
    ``tvm.runtime.tensor(x)`` costs ~40 µs per argument) and passes the resident tensors; results
    come back through DLPack without a copy.  The VM function is looked up once.  Staging keeps the
    caller's arrays out of the VM (nothing can alias or retain them); an output that *is* an input
    (an identity function) is copied out of its staging array so the next call cannot change it.
    """

    def __init__(self, vm: Any, shapes: Sequence[Sequence[int]], dtypes: Sequence[str], output_is_arg: bool,
                 multi: bool):
        import threading

        import tvm

        self.vm = vm
        self.main = vm["main"]
        self.lock = threading.Lock()
        self.copy_out = output_is_arg
        self.multi = multi
        self.staging: list[np.ndarray | None] = []
        self.tensors: list[Any] = []
        for shape, dt in zip(shapes, dtypes):
            arr = tensor = None
            if dt in ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint64", "uint32",
                      "uint16", "uint8", "bool"):
                npdt = np.dtype(dt)
                count = int(np.prod(shape, dtype=np.int64))
                if count == 0:
                    # An empty input: nothing to copy, but NumPy gives an empty view non-compact strides,
                    # which the VM rejects ("expected to be compact array"); TVM's own tensor is compact.
                    arr = np.empty(tuple(shape), npdt)
                    tensor = tvm.runtime.empty(tuple(shape), dt, tvm.cpu())
                    self.staging.append(arr)
                    self.tensors.append(tensor)
                    continue
                nbytes = count * npdt.itemsize
                raw = np.empty(nbytes + 64, np.uint8)
                off = (-raw.ctypes.data) % 64
                arr = raw[off:off + nbytes].view(npdt)[:count].reshape(tuple(shape))
                try:
                    tensor = tvm.runtime.from_dlpack(arr)
                except Exception:  # noqa: BLE001 - a layout DLPack refuses: this slot converts per call
                    arr = tensor = None
            self.staging.append(arr)
            self.tensors.append(tensor)

    def args(self, xs: Sequence[np.ndarray]) -> list[Any]:
        """The VM arguments for ``xs`` (copied into the staging arrays)."""
        out = []
        for x, arr, t in zip(xs, self.staging, self.tensors):
            if arr is None:
                from irkit.targets.tvm_kernels.common import to_tvm

                out.append(to_tvm(np.asarray(x)))
                continue
            if x.__class__ is not np.ndarray:
                x = np.asarray(x)
            if x.shape != arr.shape:
                raise ValueError(f"tvm: input of shape {x.shape} where the artifact takes {arr.shape}")
            # same dtype: a plain memcpy (``copyto`` with casting="unsafe" takes the slower cast path)
            np.copyto(arr, x) if x.dtype is arr.dtype else np.copyto(arr, x, casting="unsafe")
            out.append(t)
        return out

    def prepare(self, xs: Sequence[np.ndarray]) -> list[Any]:
        """The engine-call protocol of :mod:`irkit.breakdown`: arguments marshalled once ..."""
        return self.args(xs)

    def call(self, args: Sequence[Any]) -> Any:
        """... and the bare VM call on them."""
        return self.main(*args)

    def outputs(self, out: Any) -> list[np.ndarray]:
        res = [_host_array(o) for o in out] if self.multi else [_host_array(out)]
        return [r.copy() for r in res] if self.copy_out else res

    def __call__(self, xs: Sequence[np.ndarray]) -> list[np.ndarray]:
        with self.lock:  # the staging arrays are shared: one call at a time
            out = self.main(*self.args(xs))
            if self.copy_out:  # an output in a staging array: copied before the next call writes it
                return self.outputs(out)
        if self.multi:
            return self.outputs(out)
        try:  # the common case inline: one fresh output, through DLPack without a copy
            return [np.from_dlpack(out)]
        except (TypeError, BufferError, RuntimeError, ValueError):
            return [out.numpy()]


def _host_array(t: Any) -> np.ndarray:
    """A CPU result as NumPy without a copy (the VM allocates each call's outputs afresh, and the
    array keeps the tensor alive); a copy where DLPack cannot carry the dtype (bfloat16)."""
    try:
        return np.from_dlpack(t)
    except (TypeError, BufferError, RuntimeError, ValueError):
        return t.numpy()


def _profile_calls(vm: Any, args: Sequence[Any], runs: int = 3) -> list[tuple[str, float]]:
    """Each PrimFunc call of ``main`` in order, with its seconds, timed around the VM's call instructions
    (the 0.27 VM has no profiler, but calls an instrument before and after every call).  One warm-up
    run, then the median over ``runs`` of each call; VM builtins are left out.

    The instrument is a Python callback, so each timed interval holds about one callback's worth
    of C++/Python transition (~1 µs, as much as a toy-sized kernel): it is calibrated — the
    instrumented run's extra wall time over a plain run, per callback — and subtracted."""
    per_run: list[list[tuple[str, float]]] = []
    started: list[float] = []
    ncb = [0]

    def instrument(_func: Any, symbol: str, before: bool, _ret: Any, *_args: Any) -> int:
        now = time.perf_counter()
        ncb[0] += 1
        if before:
            started.append(now)
        else:
            t0 = started.pop()
            if not str(symbol).startswith("vm.builtin."):
                per_run[-1].append((str(symbol), now - t0))
        return 0  # VMInstrumentReturnKind.NO_OP

    main = vm["main"]
    main(*args)
    plain = []
    for _ in range(max(runs, 5)):
        t0 = time.perf_counter()
        main(*args)
        plain.append(time.perf_counter() - t0)
    runs = max(runs, 3)
    vm.set_instrument(instrument)
    timed = []
    for _ in range(runs):
        per_run.append([])
        ncb[0] = 0
        t0 = time.perf_counter()
        main(*args)
        timed.append(time.perf_counter() - t0)
    callbacks = max(ncb[0], 1)
    # fastest against fastest: the least disturbed runs of each kind (machine noise only adds time)
    per_callback = max(0.0, (min(timed) - min(plain)) / callbacks)
    first = per_run[0]
    if any([n for n, _ in r] != [n for n, _ in first] for r in per_run):
        return [(n, max(0.0, t - per_callback)) for n, t in first]
    return [(n, max(0.0, float(np.median([r[i][1] for r in per_run])) - per_callback))
            for i, (n, _) in enumerate(first)]


register_target("tvm-llvm", kind="llvm")(TvmTarget)
register_target("tvm-cuda", kind="cuda", arch="sm_90")(TvmTarget)

from irkit.targets.tvm_kernels import cache_attention as _cache_attention  # noqa: E402,F401  (registers its rule)

__all__ = ["TvmTarget"]
