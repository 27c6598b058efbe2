"""The ONNX frontend: ``import_onnx(path_or_model) -> Module``.

Design note: the importer walks the graph once, in topological order, turning
each node into IR through a converter table (:mod:`irkit.frontends.onnx_ops`).

- **Loading** (:mod:`irkit.frontends.onnx_load`) parses the protobuf itself,
  checks structure (unique names, no dangling inputs, no cycles), and reads
  external data only from inside the model's folder.  Every problem is one
  :class:`~irkit.frontends.common.FrontendError` line naming the file.
- **Symbols.** An input dim with ``dim_param`` becomes a symbol of that name
  (sanitised to an identifier; the same name is the same symbol across inputs);
  a dynamic dim with no name gets a fresh symbol ``d0``, ``d1``...
- **Constants.** Initializers become ``ik.constant`` ops named after the
  initializer, created only where a runtime op uses them.
- **Shape computations** (``Shape``, ``Gather``, ``Concat``, ``Unsqueeze``,
  ``Slice``, integer arithmetic...) are evaluated at import with symbolic dims
  and land in attributes, never in runtime integer tensors.
- **Unsupported ops** are all collected, with counts and node names, and
  reported in one error; a node that depends on an unsupported one is skipped.
- Node names become op locations (``loc("/h.0/attn/MatMul")``).

The opset-23 ``Attention`` op becomes ``ik.attention``; ``RotaryEmbedding`` is
decomposed into slices, multiplies and a concat; ``RMSNormalization`` becomes
``ik.rms_norm``.  See docs/frontend-onnx.md for the full op list.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from irkit.errors import IrkitError
from irkit.frontends import onnx_contrib, onnx_nn, onnx_rnn, onnx_signal, onnx_tensor, onnx_text  # noqa: F401 - registers their converters
from irkit.frontends.common import FrontendError, UnsupportedOps, sanitize_name
from irkit.frontends.onnx_functions import function_body, out_of_scope
from irkit.frontends.onnx_load import (
    LoadedModel,
    check_dims,
    ir_dtype,
    read_model,
    tensor_to_numpy,
)
from irkit.frontends.onnx_ops import (
    CONVERTERS,
    Emitter,
    Node,
    OnnxValue,
    Unsupported,
    supported_ops,
)
from irkit.ir.aliases import set_cache_pairs
from irkit.ir.builder import Builder, BuildError
from irkit.ir.core import Function, Graph, Location, Module
from irkit.ir.ops import OpError
from irkit.ir.types import Dim, SymDim, TensorType, dim_str, parse_dim, shape_str
from irkit.ir.verify import verify

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def import_onnx(model_or_path: Any, name: str = "main", *,
                base_dir: str | os.PathLike[str] | None = None,
                constants: Mapping[str, Any] | None = None) -> Module:
    """Import an ONNX model (a path, the file's bytes, or an ``onnx.ModelProto``) as a Module.

    ``name`` names the entry function.  ``base_dir`` is the folder external
    data must lie in; it defaults to the model file's folder (a ModelProto or
    bytes with external data need it).  Raises
    :class:`~irkit.frontends.common.FrontendError` for a broken file and
    :class:`~irkit.frontends.common.UnsupportedOpsError` listing every
    unsupported op.

    ``constants`` binds graph inputs to fixed values (NumPy arrays): they stop
    being function arguments and fold like initializers.  This specialises a
    model whose shape operands (``axes``, ``pads``, ``k``, ``repeats``...) are
    graph inputs — irkit's shapes are static, so such a model imports only for
    the values given.
    """
    lm = read_model(model_or_path, base_dir)
    return OnnxImporter(lm, name, constants).run()


class OnnxImporter(Emitter):
    """Converts one loaded model; use :func:`import_onnx`."""

    def __init__(self, lm: LoadedModel, name: str = "main", constants: Mapping[str, Any] | None = None):
        self.fn_name = name
        self._constants = dict(constants or {})
        self._scans = 0
        self._symbols: dict[str, SymDim] = {}  # dim_param (raw) -> symbol
        self._fresh = 0
        self._vals: dict[str, OnnxValue] = {}
        self._poisoned: set[str] = set()
        self._inits: dict[str, Any] = {}
        self._shape_info: dict[str, Any] | None = None
        graph = Graph()
        super().__init__(lm, Builder.at_end(graph))
        self._graph = graph

    # -- symbols --------------------------------------------------------------
    def _symbol(self, param: str) -> SymDim:
        if param in self._symbols:
            return self._symbols[param]
        base = param if _IDENT.fullmatch(param) else sanitize_name(param).replace(".", "_").replace("$", "_")
        taken = {s.name for s in self._symbols.values()}
        nm, k = base, 1
        while nm in taken:
            nm, k = f"{base}_{k}", k + 1
        sym = SymDim.symbol(nm)
        self._symbols[param] = sym
        return sym

    def _fresh_symbol(self) -> SymDim:
        taken = {s.name for s in self._symbols.values()} | set(self._symbols)
        while f"d{self._fresh}" in taken:
            self._fresh += 1
        nm = f"d{self._fresh}"
        self._fresh += 1
        sym = SymDim.symbol(nm)
        self._symbols[f"\0{nm}"] = sym
        return sym

    def _value_type(self, vi: Any, what: str) -> TensorType:
        src = self.source
        tp = vi.type
        if tp.WhichOneof("value") != "tensor_type":
            kind = tp.WhichOneof("value") or "no type"
            raise FrontendError(f"{src}: {what} has {kind.replace('_', ' ')}, expected a tensor")
        tt = tp.tensor_type
        dt = ir_dtype(tt.elem_type, src, what)
        if not tt.HasField("shape"):
            raise FrontendError(f"{src}: {what} has no shape (unknown rank); irkit needs ranked inputs")
        dims: list[Dim] = []
        for i, d in enumerate(tt.shape.dim):
            which = d.WhichOneof("value")
            if which == "dim_value":
                check_dims([d.dim_value], src, f"{what} dim {i}")
                dims.append(int(d.dim_value))
            elif which == "dim_param" and d.dim_param:
                dims.append(self._symbol(d.dim_param))
            else:
                dims.append(self._fresh_symbol())
        check_dims([d for d in dims if isinstance(d, int)], src, what)
        return TensorType(tuple(dims), dt)

    # -- fallback shapes from ONNX shape inference ------------------------------
    def fallback_shape(self, name: str) -> tuple[Dim, ...] | None:
        if self._shape_info is None:
            self._shape_info = {}
            g = self.lm.proto.graph
            for vi in list(g.value_info) + list(g.output):
                self._shape_info[vi.name] = vi
            if name not in self._shape_info:
                try:
                    import onnx

                    inferred = onnx.shape_inference.infer_shapes(self.lm.proto, data_prop=True)
                    for vi in inferred.graph.value_info:
                        self._shape_info.setdefault(vi.name, vi)
                except Exception:  # noqa: BLE001, S110 - inference is only a hint; no answer is fine
                    pass
        vi = self._shape_info.get(name)
        if vi is None or vi.type.WhichOneof("value") != "tensor_type" or not vi.type.tensor_type.HasField("shape"):
            return None
        known = {s.name for s in self._symbols.values()}
        out: list[Dim] = []
        for d in vi.type.tensor_type.shape.dim:
            if d.WhichOneof("value") == "dim_value":
                out.append(int(d.dim_value))
            elif d.dim_param in self._symbols:
                out.append(self._symbols[d.dim_param])
            else:
                try:
                    e = parse_dim(d.dim_param)
                except ValueError:
                    return None
                if isinstance(e, SymDim) and not e.symbols <= known:
                    return None
                out.append(e)
        return tuple(out)

    # -- values ---------------------------------------------------------------
    def _get(self, name: str) -> OnnxValue:
        t = self._vals.get(name)
        if t is None:
            proto = self._inits[name]
            arr, dt = tensor_to_numpy(proto, self.lm, f"initializer '{name}'")
            t = OnnxValue(dt, arr.shape, known=arr, resource=sanitize_name(name))
            self._vals[name] = t
        return t

    # -- the walk ---------------------------------------------------------------
    def run(self) -> Module:
        import onnx

        g = self.lm.proto.graph
        src = self.source
        self._inits = {t.name: t for t in g.initializer}
        arg_types, arg_names, arg_keys = [], [], []
        used_names: set[str] = set()
        unknown = set(self._constants) - {vi.name for vi in g.input}
        if unknown:
            raise FrontendError(f"{src}: constants= names {', '.join(sorted(unknown))}, which are not graph inputs")
        for vi in g.input:
            if vi.name in self._inits:
                continue
            if vi.name in self._constants:
                t = self._value_type(vi, f"graph input '{vi.name}'")
                arr = np.asarray(self._constants[vi.name])
                if arr.shape != tuple(d if isinstance(d, int) else -1 for d in t.shape) and \
                        any(isinstance(d, int) for d in t.shape) and len(arr.shape) != len(t.shape):
                    raise FrontendError(f"{src}: constant for graph input '{vi.name}' has shape {list(arr.shape)}, "
                                        f"the input is declared {shape_str(t.shape)}")
                self._vals[vi.name] = OnnxValue.const(arr.astype(t.dtype.np), t.dtype)
                continue
            arg_types.append(self._value_type(vi, f"graph input '{vi.name}'"))
            nm = sanitize_name(vi.name)
            base, k = nm, 1
            while nm in used_names:
                nm, k = f"{base}_{k}", k + 1
            used_names.add(nm)
            arg_names.append(nm)
            arg_keys.append(vi.name)
        graph = Graph(arg_types, arg_names)
        self._graph = graph
        self.b = Builder.at_end(graph)
        for key, a in zip(arg_keys, graph.args):
            self._vals[key] = OnnxValue.of(a)

        node_io = self.lm.node_io
        consumed: set[str] = {o.name for o in g.output}
        for ins, _ in node_io:
            consumed.update(ins)
        unsupported = UnsupportedOps(src)
        nodes = g.node
        for idx in self.lm.order:
            n = nodes[idx]
            ins, outs_names = node_io[idx]
            loc = Location(name=n.name or f"{n.op_type}_{idx}")
            self._convert_node(n, ins, outs_names, loc, [o in consumed for o in outs_names], unsupported, onnx)
        unsupported.raise_if_any()

        results = []
        self.loc = Location.unknown()
        for vi in g.output:
            out = self._get(vi.name)
            self._check_output(vi, out)
            results.append(self.ir(out))
        self.b.ret(*results)
        _dce(graph)
        fn = Function(self.fn_name, graph, Location(name=g.name) if g.name else None)
        fn.attrs["ik.source"] = "onnx"
        fn.attrs["ik.onnx_opset"] = self.lm.opset
        pairs = cache_pairs(fn, [vi.name for vi in g.output])
        if pairs:
            set_cache_pairs(fn, pairs)
        m = Module([fn])
        verify(m)
        return m

    def _convert_node(self, n: Any, ins: list[str], outs_names: list[str], loc: Location, used: list[bool],
                      unsupported: UnsupportedOps, onnx: Any, depth: int = 0) -> None:
        """Convert one node; without a converter (or for a feature it refuses), convert ONNX's function body."""
        poisoned = self._poisoned
        op_type = n.op_type
        domain = n.domain if n.domain not in ("", "ai.onnx") else ""
        label = f"{domain}::{op_type}" if domain else op_type
        if poisoned and any(x in poisoned for x in ins if x):
            poisoned.update(o for o in outs_names if o)
            return
        if domain == "" and op_type == "If" and self._fold_if(n, ins, outs_names, loc, unsupported, onnx, depth):
            return
        if domain == "" and op_type == "Scan" and self._unroll_scan(n, ins, outs_names, loc, unsupported, onnx, depth):
            return
        why = out_of_scope(domain, op_type)
        conv = CONVERTERS.get((domain, op_type)) if why is None else None
        if conv is not None:
            node = Node(n, loc.name or "", op_type, domain, [self._get(x) if x else None for x in ins],
                        outs_names, _attrs(n, onnx) if len(n.attribute) else {}, used)
            self.loc = loc
            self.node = node
            try:
                outs = conv(self, node)
            except Unsupported as e:
                why = str(e)
            except FrontendError as e:
                msg = str(e)
                raise FrontendError(msg if msg.startswith(self.source) else f"{self.source}: {msg}") from None
            except (BuildError, OpError) as e:
                why = str(e).split(": ", 1)[-1] if isinstance(e, BuildError) else str(e)
                raise FrontendError(f"{self.source}: node '{node.name}' ({op_type}): {why}") from None
            else:
                if len(outs) < len(outs_names):
                    outs = list(outs) + [None] * (len(outs_names) - len(outs))
                for oname, ot, u in zip(outs_names, outs, used):
                    if not oname:
                        continue
                    if ot is None:
                        if u:
                            unsupported.add(f"{label} (output '{oname}')", loc)
                            poisoned.add(oname)
                        continue
                    self._vals[oname] = ot
                return
        if out_of_scope(domain, op_type) is None and depth < 16:
            types = []
            for x in ins:
                t = self._get(x) if x else None
                types.append((t.dtype, t.shape) if t is not None else None)
            body = function_body(n, self.lm.opset, types)
            before = {k: list(v) for k, v in unsupported.ops.items()}
            if body is not None:
                # The body's nodes, with the outer node's location as a scope.
                inner_used: set[str] = {o for o, u in zip(outs_names, used) if u}
                for bn in body:
                    inner_used.update(x for x in bn.input if x)
                for bn in body:
                    bouts = list(bn.output)
                    self._convert_node(bn, list(bn.input), bouts, Location(name=f"{loc.name}/{bn.op_type}"),
                                       [o in inner_used for o in bouts], unsupported, onnx, depth + 1)
                if why is None or before == unsupported.ops:
                    for o in outs_names:
                        if o and o not in self._vals:
                            poisoned.add(o)
                    return
                # The body needs something unsupported too: report the converter's own reason instead.
                unsupported.ops.clear()
                unsupported.ops.update(before)
        unsupported.add(f"{label} ({why})" if why else label, loc)
        poisoned.update(o for o in outs_names if o)

    def _fold_if(self, n: Any, ins: list[str], outs_names: list[str], loc: Location, unsupported: UnsupportedOps,
                 onnx: Any, depth: int) -> bool:
        """An If whose condition is known at import (shape checks in function bodies): inline the taken branch."""
        cond = self._get(ins[0]) if ins and ins[0] else None
        if cond is None or cond.known is None or cond.is_symbolic or cond.known.size != 1:
            return False
        key = "then_branch" if bool(cond.known.reshape(-1)[0]) else "else_branch"
        branch = next((a.g for a in n.attribute if a.name == key), None)
        if branch is None or len(branch.output) != len(outs_names):
            return False
        for t in branch.initializer:
            self._inits.setdefault(t.name, t)
        inner_used = {o.name for o in branch.output}
        for bn in branch.node:
            inner_used.update(x for x in bn.input if x)
        for bn in branch.node:
            bouts = list(bn.output)
            self._convert_node(bn, list(bn.input), bouts, Location(name=f"{loc.name}/{key}/{bn.op_type}"),
                               [o in inner_used for o in bouts], unsupported, onnx, depth + 1)
        for o, bo in zip(outs_names, branch.output):
            if not o:
                continue
            if bo.name in self._vals or bo.name in self._inits:
                self._vals[o] = self._get(bo.name)
            else:
                self._poisoned.add(o)
        return True

    def _unroll_scan(self, n: Any, ins: list[str], outs_names: list[str], loc: Location,
                     unsupported: UnsupportedOps, onnx: Any, depth: int) -> bool:
        """A Scan (opset 9+) over a static length, unrolled: the body converted once per step.

        Function bodies use Scan for recurrences (LinearAttention); with static
        shapes the unrolled graph is plain IR.  Anything else stays refused.
        """
        if self.lm.opset < 9 or any(not x for x in ins):
            return False
        a = _attrs(n, onnx)
        body = a.get("body")
        m = int(a.get("num_scan_inputs", 0))
        n_state = len(ins) - m
        if body is None or m < 1 or n_state < 0 or len(body.input) != len(ins):
            return False
        in_axes = [int(v) for v in a.get("scan_input_axes", [0] * m)]
        in_dirs = [int(v) for v in a.get("scan_input_directions", [0] * m)]
        k = len(body.output) - n_state
        out_axes = [int(v) for v in a.get("scan_output_axes", [0] * k)]
        out_dirs = [int(v) for v in a.get("scan_output_directions", [0] * k)]
        scans = [self._get(x) for x in ins[n_state:]]
        lengths = {t.shape[ax % t.rank] for t, ax in zip(scans, in_axes)}
        length = next(iter(lengths), None)
        if len(lengths) != 1 or not isinstance(length, int) or length > 4096:
            return False
        steps = length
        from irkit.frontends.onnx_functions import rename_nodes

        states = [self._get(x) for x in ins[:n_state]]
        slices: list[list[OnnxValue]] = [[] for _ in range(k)]
        self._scans += 1
        scan_id = self._scans
        self.loc = loc
        for it in range(steps):
            tag = f"__scan{scan_id}_{it}"
            nodes = [type(bn)() for bn in body.node]
            for dst, src in zip(nodes, body.node):
                dst.CopyFrom(src)
            mapping = {v.name: v.name + tag for v in body.input}
            mapping.update({o: o + tag for bn in body.node for o in bn.output if o})
            rename_nodes(nodes, mapping)
            for vi, st in zip(body.input, states):
                self._vals[mapping[vi.name]] = st
            for j, (vi, t) in enumerate(zip(body.input[n_state:], scans)):
                ax = in_axes[j] % t.rank
                i = it if not in_dirs[j] else steps - 1 - it
                start = [0] * t.rank
                limit = list(t.shape)
                start[ax], limit[ax] = i, i + 1
                v = self.op("ik.slice", self.ir(t), start=tuple(start), limit=tuple(limit))
                shape = tuple(d for q, d in enumerate(t.shape) if q != ax)
                self._vals[mapping[vi.name]] = OnnxValue.of(self.op("ik.reshape", v, shape=shape))
            for bn in nodes:
                bouts = list(bn.output)
                self._convert_node(bn, list(bn.input), bouts, Location(name=f"{loc.name}/step{it}/{bn.op_type}"),
                                   [True] * len(bouts), unsupported, onnx, depth + 1)
            outs = [mapping.get(o.name, o.name) for o in body.output]
            if any(o not in self._vals and o not in self._inits for o in outs):
                self._poisoned.update(o for o in outs_names if o)
                return True
            states = [self._get(o) for o in outs[:n_state]]
            for j, o in enumerate(outs[n_state:]):
                slices[j].append(self._get(o))
        self.loc = loc
        for o, st in zip(outs_names[:n_state], states):
            if o:
                self._vals[o] = st
        for j, o in enumerate(outs_names[n_state:]):
            if not o:
                continue
            parts = slices[j] if not out_dirs[j] else slices[j][::-1]
            r = parts[0].rank + 1
            ax = out_axes[j] % r
            vals = []
            for p in parts:
                dims = list(p.shape)
                dims.insert(ax, 1)
                vals.append(self.op("ik.reshape", self.ir(p), shape=tuple(dims)))
            self._vals[o] = OnnxValue.of(vals[0] if len(vals) == 1 else self.op("ik.concat", *vals, axis=ax))
        return True

    def _check_output(self, vi: Any, t: OnnxValue) -> None:
        tp = vi.type
        if tp.WhichOneof("value") != "tensor_type":
            return
        tt = tp.tensor_type
        what = f"graph output '{vi.name}'"
        if tt.elem_type:
            want = ir_dtype(tt.elem_type, self.source, what)
            if want is not t.dtype:
                raise FrontendError(f"{self.source}: {what} is declared {want}, but the graph computes {t.dtype}")
        if tt.HasField("shape"):
            decl = tt.shape.dim
            if len(decl) != t.rank:
                raise FrontendError(f"{self.source}: {what} is declared with rank {len(decl)}, but the graph "
                                    f"computes {shape_str(t.shape)}")
            for i, (d, got) in enumerate(zip(decl, t.shape)):
                if d.WhichOneof("value") == "dim_value" and isinstance(got, int) and d.dim_value != got:
                    raise FrontendError(f"{self.source}: {what} dim {i} is declared {d.dim_value}, but the graph "
                                        f"computes {dim_str(got)}")


_PAST = re.compile(r"(?:past_key_values|past_key_value|past)(?![a-z0-9])[._/]?(.*)", re.IGNORECASE)
_PRESENT = re.compile(r"(?:present_key_values|present)(?![a-z0-9])[._/]?(.*)", re.IGNORECASE)


def _cache_key(rest: str) -> str:
    return ".".join(t for t in re.split(r"[^a-z0-9]+", rest.lower()) if t)


def cache_pairs(fn: Function, output_names: Sequence[str]) -> dict[int, int]:
    """``{output: arg}`` pairing each ``present.*`` output with its ``past_key_values.*`` argument.

    Names match after the prefixes (``past_key_values.0.key`` and ``present.0.key``;
    ``past.1.value``/``present.1.value``; ``past_key_values_key_cache_0`` and
    ``present_key_cache_0``); the pair must agree on dtype and rank (the sequence
    dim of ``present`` is longer: it is the concat of ``past`` and the new tokens, so
    this is a pairing for a generation loop, not an alias).
    """
    pasts: dict[str, int] = {}
    for i, nm in enumerate(fn.arg_names()):
        mt = _PAST.fullmatch(nm)
        if mt:
            pasts.setdefault(_cache_key(mt.group(1)), i)
    if not pasts:
        return {}
    out: dict[int, int] = {}
    used: set[int] = set()
    for o, nm in enumerate(output_names):
        mt = _PRESENT.fullmatch(nm)
        if not mt or o >= len(fn.outputs):
            continue
        a = pasts.get(_cache_key(mt.group(1)))
        if a is None or a in used:
            continue
        ot, at = fn.outputs[o].type, fn.args[a].type
        if ot.dtype != at.dtype or ot.rank != at.rank:
            continue
        out[o] = a
        used.add(a)
    return out


def _attrs(n: Any, onnx: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in n.attribute:
        if a.ref_attr_name:
            raise FrontendError(f"node '{n.name}' ({n.op_type}): attribute '{a.name}' refers to a function "
                                "attribute outside a function")
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        out[a.name] = v
    return out


def _dce(g: Graph) -> None:
    """Erase ops whose results nobody uses (all IR ops are pure)."""
    op = g._last
    while op is not None:
        prev = op._prev
        if op.name != "func.return" and not op.is_used:
            g.erase(op)
        op = prev


# ---------------------------------------------------------------------------
# Command line: python -m irkit.frontends.onnx model.onnx [-o out.mlir]


def main(argv: Sequence[str] | None = None) -> int:
    """Import an ONNX file and print (or write) its IR; errors are one line, exit 1."""
    p = argparse.ArgumentParser(prog="python -m irkit.frontends.onnx",
                                description="Import an ONNX model into irkit IR.")
    p.add_argument("model", nargs="?", help="path of the .onnx file")
    p.add_argument("-o", "--output", default="-",
                   help="write IR here (.mlir, with a .safetensors sidecar); default: stdout")
    p.add_argument("--name", default="main", help="entry function name (default: main)")
    p.add_argument("--list-ops", action="store_true", help="list the supported ONNX ops and exit")
    args = p.parse_args(argv)
    if args.list_ops:
        print("\n".join(supported_ops()))
        return 0
    if not args.model:
        p.error("the model path is required")
    try:
        m = import_onnx(args.model, args.name)
        from irkit.text import write_module

        write_module(m, args.output)
    except (IrkitError, ValueError) as e:
        msg = " ".join(str(e).split())
        sys.stderr.write(f"irkit: error: {msg}\n")
        return 1
    return 0


__all__ = ["OnnxImporter", "cache_pairs", "import_onnx", "main", "supported_ops"]


if __name__ == "__main__":
    raise SystemExit(main())
