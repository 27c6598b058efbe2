"""The torch.export frontend: ``ExportedProgram`` -> irkit ``Module``.

Design note.  The importer walks the FX graph of an ``ExportedProgram`` once, in
order, and keeps one environment entry per FX node: an IR :class:`Value` for a
tensor, a dim (``int`` or :class:`SymDim`) for a SymInt, a plain Python value
for everything else, or a tuple for multi-output ops.  Three rules keep it
small and exact:

- **torch's metadata is the truth for shapes and dtypes.**  Every node carries
  ``meta["val"]`` (a FakeTensor or SymInt).  Target shapes of reshapes,
  expands, fills, aranges and splits are read from it rather than re-derived
  from the arguments (``-1``, clamped slice ends and symbolic sizes are already
  resolved there), and after each node the IR type is checked against it, so a
  converter bug is reported at the node, never as wrong numbers later.
- **Symbols are polynomials.**  torch's sympy sizes (``s18``, ``s18*s41``,
  ``2*s41``) become :class:`SymDim` polynomials over the user's ``Dim`` names
  (``B``, ``S``); anything else (``FloorDiv``, ``Mod``, unbacked ``u0``) is
  reported as unsupported at the node that needs it.
- **Report everything at once.**  A node torch emits that has no converter, or
  whose converter cannot express it, is recorded in an
  :class:`~irkit.frontends.common.UnsupportedOps` collector with its source
  location; nodes that depend on it are skipped silently, and one error lists
  every root cause with counts and locations.

The converters live in :mod:`irkit.frontends.torch_ops` (one table keyed by
ATen overload); the safe ``.pt2`` reader lives in
:mod:`irkit.frontends.torch_pt2`.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from irkit.frontends import (  # noqa: F401 - they register
    torch_cache,
    torch_ops,
    torch_ops_index,
    torch_ops_special,
    torch_ops_special2,
    torch_ops_special3,
    torch_ops_window,
)
from irkit.frontends.common import (
    FrontendError,
    UnsupportedOps,
    UnsupportedOpsError,
    record_symbol_examples,
    sanitize_name,
)
from irkit.frontends.torch_cx import (  # noqa: F401 - re-exported: the importer's public names
    ConvertContext,
    DataDependent,
    LazyResult,
    Unsupported,
    _result_dtype,
    ir_dtype_to_torch,
    lazy,
    result_dtype,
    tensor_to_numpy,
    torch_dtype_to_ir,
)
from irkit.ir.aliases import set_aliases
from irkit.ir.builder import Builder, BuildError
from irkit.ir.core import Function, Graph, Location, Module, Value
from irkit.ir.types import Dim, DType, SymDim, TensorType, dim_add, dim_floordiv, dim_mul

# torch is imported lazily (inside functions) so that `import irkit` never needs it.


class _Failed:
    """Environment entry of a node that could not be imported (its users are skipped)."""

    def __repr__(self) -> str:
        return "<failed>"


FAILED = _Failed()


# ---------------------------------------------------------------------------
# locations


@functools.lru_cache(maxsize=1)
def _torch_dir() -> str:
    import torch

    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


_FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')


@functools.lru_cache(maxsize=4096)
def _user_frame(stack_trace: str) -> tuple[str, int] | None:
    """The last frame of ``stack_trace`` outside torch itself: the user's model code."""
    best: tuple[str, int] | None = None
    tdir = _torch_dir()
    for m in _FRAME_RE.finditer(stack_trace):
        path, line = m.group(1), int(m.group(2))
        # torch records some frames of its own passes with paths relative to site-packages.
        if path.startswith(("torch/", "<")) or os.path.abspath(path).startswith(tdir):
            continue
        best = (path, line)
    if best is None:
        return None
    path, line = best
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:  # another drive on Windows
        pass
    return path, line


def node_location(node: Any) -> Location:
    """``file:line`` of the user's code that produced ``node``, named by the node."""
    st = node.meta.get("stack_trace") if hasattr(node, "meta") else None
    if st:
        fr = _user_frame(st)
        if fr is not None:
            return Location(file=fr[0], line=fr[1], name=node.name)
    return Location(name=node.name)


# ---------------------------------------------------------------------------
# dynamic dims


_FX_NODE: list[type] = []
_SYM_TYPES: tuple[type, ...] = ()


def _is_sym(x: Any) -> bool:
    global _SYM_TYPES
    if not _SYM_TYPES:
        import torch

        _SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
    return isinstance(x, _SYM_TYPES)


def dim_names_from_spec(ep: Any, dynamic_shapes: Any, module: Any = None,
                        example_inputs: Any = None) -> dict[str, str]:
    """Map torch's size symbols (``s18``) to the names of the ``Dim`` objects in ``dynamic_shapes``.

    ``dynamic_shapes`` is what was given to ``torch.export.export``: a dict keyed
    by ``forward``'s argument names or a tuple/list by position, each entry a
    dict ``{dim: Dim}`` or a tuple/list of per-dim specs.  ``Dim.AUTO`` and other
    unnamed specs are left out (they keep torch's symbol name).
    """
    if dynamic_shapes is None:
        return {}
    users = _user_input_nodes(ep)
    if isinstance(dynamic_shapes, Mapping) and any(n.name in dynamic_shapes for n in users):
        # torch names user-input placeholders after forward's parameters.
        flat = [dynamic_shapes.get(n.name) for n in users]
    else:
        flat = _flat_dim_specs(dynamic_shapes, module, example_inputs)
    out: dict[str, str] = {}
    for node, spec in zip(users, flat):
        if spec is None:
            continue
        val = node.meta.get("val")
        if val is None or not hasattr(val, "shape"):
            continue
        items = spec.items() if isinstance(spec, Mapping) else enumerate(spec)
        for j, d in items:
            name = _dim_spec_name(d)
            if name is None or not isinstance(j, int) or j >= len(val.shape):
                continue
            size = val.shape[j]
            if not _is_sym(size):
                continue
            expr = size.node.expr
            root = getattr(d, "root", None)
            if root is not None:
                # A derived dim (2*S): name the free symbol after the root Dim.
                rname = _dim_spec_name(root)
                syms = list(getattr(expr, "free_symbols", ()))
                if rname and len(syms) == 1:
                    out.setdefault(str(syms[0]), rname)
                continue
            if getattr(expr, "is_Symbol", False):
                out.setdefault(str(expr), name)
    return out


def _dim_spec_name(d: Any) -> str | None:
    name = getattr(d, "__name__", None)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return None
    return name


def _flat_dim_specs(dynamic_shapes: Any, module: Any, example_inputs: Any) -> list[Any]:
    """One per-tensor spec for each user input, in the order of the exported inputs."""
    if isinstance(dynamic_shapes, Mapping):
        names: list[str] = []
        if module is not None:
            try:
                sig = inspect.signature(module.forward)
                names = [p.name for p in sig.parameters.values()
                         if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            except (TypeError, ValueError):
                names = []
        if not names:
            names = list(dynamic_shapes.keys())
        n_args = len(example_inputs) if isinstance(example_inputs, (tuple, list)) else len(names)
        specs = [dynamic_shapes.get(n) for n in names[:n_args]]
        if isinstance(example_inputs, Mapping):
            specs = [dynamic_shapes.get(n) for n in example_inputs]
        return specs
    if isinstance(dynamic_shapes, (tuple, list)):
        return list(dynamic_shapes)
    return []


def _user_input_nodes(ep: Any) -> list[Any]:
    from torch.export.graph_signature import InputKind

    by_name = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    return [by_name[s.arg.name] for s in ep.graph_signature.input_specs
            if s.kind == InputKind.USER_INPUT and getattr(s.arg, "name", None) in by_name]


# ---------------------------------------------------------------------------
# the importer


@dataclass
class ImportOptions:
    """Knobs of :func:`import_exported_program`."""

    name: str = "main"
    """Name of the IR function."""
    dim_names: Mapping[str, str] = field(default_factory=dict)
    """torch symbol name (``s18``) -> IR symbol name (``B``)."""
    source: str = "torch.export"
    """How the source is named in error messages (a file name, a model class)."""
    auto_decompose: bool = True
    """Decompose ops without a converter with torch's own table (see :func:`_import`)."""
    borrow_weights: bool = False
    """Constants share the program's tensors instead of copying them (a program loaded from a
    file, which nothing else holds or writes)."""


class _Importer:
    """One import: the FX walk, the environment and the symbol table."""

    def __init__(self, ep: Any, opts: ImportOptions):
        self.ep = ep
        self.opts = opts
        self.converters = torch_ops.CONVERTERS
        self.env: dict[Any, Any] = {}
        self.sym_names: dict[str, str] = dict(opts.dim_names)
        self.sym_examples: dict[str, int] = {}
        self.unsupported = UnsupportedOps(opts.source)
        self.refused: set[Any] = set()
        self._dim_cache: dict[Any, Dim] = {}
        self._size_cache: dict[int, tuple[Any, Dim]] = {}
        self._type_cache: dict[int, tuple[Any, TensorType]] = {}
        self.graph: Graph | None = None
        self.b: Builder | None = None
        if not _FX_NODE:
            import torch.fx

            _FX_NODE.append(torch.fx.Node)

    # -- symbols -------------------------------------------------------------
    def expr_dim(self, expr: Any) -> Dim:
        """A sympy size expression as an IR dim (polynomial over named symbols)."""
        try:
            return self._dim_cache[expr]
        except (KeyError, TypeError):
            pass
        d = self._expr_dim(expr)
        try:
            self._dim_cache[expr] = d
        except TypeError:
            pass
        return d

    def _expr_dim(self, expr: Any) -> Dim:
        import sympy

        if isinstance(expr, (int, np.integer)) and not isinstance(expr, bool):
            return int(expr)
        if isinstance(expr, sympy.Integer):
            return int(expr)
        if isinstance(expr, sympy.Symbol):
            s = str(expr)
            if s.startswith("u"):
                raise Unsupported(f"size {s} is data-dependent (an unbacked symbol)")
            return SymDim.symbol(self.symbol_name(s))
        if isinstance(expr, sympy.Add):
            out: Dim = 0
            for a in expr.args:
                out = dim_add(out, self.expr_dim(a))
            return out
        if isinstance(expr, sympy.Mul):
            out = 1
            for a in expr.args:
                out = dim_mul(out, self.expr_dim(a))
            return out
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
            base = self.expr_dim(expr.base)
            out = 1
            for _ in range(int(expr.exp)):
                out = dim_mul(out, base)
            return out
        fname = type(expr).__name__
        if fname in ("FloorDiv", "CleanDiv", "IntTrueDiv") and len(expr.args) == 2:
            q = dim_floordiv(self.expr_dim(expr.args[0]), self.expr_dim(expr.args[1]))
            if q is not None:
                return q
        raise Unsupported(f"symbolic size {expr} is not a polynomial in the input dims")

    def float_expr(self, expr: Any) -> Value:
        """A symbolic float (``ToFloat(s0) * 2.0``) as a rank-0 f64 tensor computed from dims."""
        import sympy

        b = self.b
        assert b is not None
        fname = type(expr).__name__
        if getattr(expr, "is_number", False):
            return b.scalar(float(expr), DType.f64)
        if fname == "ToFloat" or isinstance(expr, sympy.Symbol):
            inner = expr.args[0] if fname == "ToFloat" else expr
            d = self.expr_dim(inner)
            cx = ConvertContext(self, None, b.loc)
            return b.cast(cx.dim_tensor(d), to=DType.f64)
        if isinstance(expr, sympy.Add):
            out = self.float_expr(expr.args[0])
            for a in expr.args[1:]:
                out = b.add(out, self.float_expr(a))
            return out
        if isinstance(expr, sympy.Mul):
            out = self.float_expr(expr.args[0])
            for a in expr.args[1:]:
                out = b.mul(out, self.float_expr(a))
            return out
        if fname in ("FloatTrueDiv", "IntTrueDiv") and len(expr.args) == 2:
            return b.div(self.float_expr(expr.args[0]), self.float_expr(expr.args[1]))
        if isinstance(expr, sympy.Pow) or fname in ("FloatPow", "PowByNatural"):
            return b.pow(self.float_expr(expr.args[0]), self.float_expr(expr.args[1]))
        raise Unsupported(f"symbolic float {expr}")

    def symbol_name(self, torch_sym: str) -> str:
        name = self.sym_names.get(torch_sym)
        if name is None:
            name = torch_sym
            self.sym_names[torch_sym] = name
        return name

    def size_dim(self, s: Any) -> Dim:
        """A size from torch metadata (int or SymInt) as an IR dim."""
        if isinstance(s, bool):
            raise Unsupported(f"boolean {s} where a size was expected")
        if isinstance(s, (int, np.integer)):
            return int(s)
        if _is_sym(s):
            # SymNode.expr re-applies the shape env's replacements on every call: cache it.
            key = id(s.node)
            hit = self._size_cache.get(key)
            if hit is not None and hit[0] is s.node:
                return hit[1]
            d = self.expr_dim(s.node.expr)
            self._size_cache[key] = (s.node, d)
            return d
        raise Unsupported(f"size {s!r} is not an integer")

    def shape_dims(self, shape: Iterable[Any]) -> tuple[Dim, ...]:
        return tuple(self.size_dim(s) for s in shape)

    def meta_type(self, val: Any) -> TensorType:
        """The IR type of a FakeTensor."""
        key = id(val)
        hit = self._type_cache.get(key)
        if hit is not None and hit[0] is val:
            return hit[1]
        t = TensorType(self.shape_dims(val.shape), torch_dtype_to_ir(val.dtype))
        self._type_cache[key] = (val, t)
        return t

    # -- the walk --------------------------------------------------------------
    def run(self) -> Module:
        from torch.export.graph_signature import InputKind, OutputKind

        ep = self.ep
        sig = ep.graph_signature
        specs = {s.arg.name: s for s in sig.input_specs if hasattr(s.arg, "name")}
        placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
        user_nodes = []
        for n in placeholders:
            s = specs.get(n.name)
            if s is None or s.kind == InputKind.USER_INPUT:
                user_nodes.append(n)
        # Mutated buffers (a static KV cache) are state: arguments after the user inputs.
        state = {sb.node_name: sb for sb in torch_cache.state_buffers(ep)}
        state_nodes = [n for n in placeholders if n.name in state]
        self.state = torch_cache.StateTracker(state_nodes)

        arg_types: list[TensorType] = []
        arg_names: list[str] = []
        for n in user_nodes + state_nodes:
            val = n.meta.get("val")
            if val is None or not hasattr(val, "shape"):
                raise FrontendError(f"{self.opts.source}: input '{n.name}' is not a tensor "
                                    f"({type(val).__name__}); only tensor inputs are supported")
            try:
                t = self.meta_type(val)
            except Unsupported as e:
                raise FrontendError(f"{self.opts.source}: input '{n.name}': {e}") from None
            arg_types.append(t)
            arg_names.append(state[n.name].arg_name if n.name in state else sanitize_name(n.name))
            for s in val.shape:
                if _is_sym(s) and getattr(s.node.expr, "is_Symbol", False):
                    hint = _hint(s)
                    if hint is not None:
                        self.sym_examples.setdefault(self.symbol_name(str(s.node.expr)), hint)
        self.graph = Graph(arg_types, arg_names)
        self.b = Builder.at_end(self.graph)
        for n, a in zip(user_nodes + state_nodes, self.graph.args):
            self.env[n] = a

        for n in placeholders:
            if n in self.env:
                continue
            s = specs[n.name]
            if not n.users:
                continue  # a tied or unused parameter: no constant for it
            self.env[n] = self._lifted(n, s)

        output_node = None
        for node in ep.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                output_node = node
                break
            self.visit(node)

        outputs: list[Value] = []
        mutations: dict[str, Any] = {}  # buffer FQN or user input name -> its new value's FX node
        if output_node is not None:
            flat = list(output_node.args[0]) if isinstance(output_node.args[0], (tuple, list)) \
                else [output_node.args[0]]
            out_specs = list(sig.output_specs)
            for i, o in enumerate(flat):
                kind = out_specs[i].kind if i < len(out_specs) else OutputKind.USER_OUTPUT
                if kind == OutputKind.TOKEN:
                    continue  # effect tokens order side effects; the IR has none
                if kind in (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION):
                    mutations[out_specs[i].target] = o
                    continue
                if kind != OutputKind.USER_OUTPUT:
                    self.unsupported.add(f"output kind {kind.name} (the program mutates "
                                         f"{out_specs[i].target})", node_location(output_node))
                    continue
                v = self.env.get(o) if o is not None and hasattr(o, "op") else o
                if v is FAILED:
                    continue
                if not isinstance(v, Value):
                    self.unsupported.add(f"non-tensor output ({type(v).__name__})",
                                         node_location(output_node))
                    continue
                outputs.append(v)
        aliases = torch_cache.state_outputs(self, user_nodes, state_nodes, state, mutations, outputs,
                                            node_location(output_node) if output_node is not None else None)
        self.unsupported.raise_if_any()
        self.b.loc = Location.unknown()
        self.b.ret(*outputs)
        fn = Function(self.opts.name, self.graph, Location(name=self.opts.source))
        if aliases:
            set_aliases(fn, aliases)
        record_symbol_examples(fn, self.sym_examples)
        return Module([fn])

    def _lifted(self, node: Any, spec: Any) -> Any:
        """A parameter, buffer or lifted constant as ``ik.constant`` named by its FQN."""
        from torch.export.graph_signature import InputKind

        ep = self.ep
        target = spec.target
        loc = Location(name=target or node.name)
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = ep.state_dict.get(target)
            if t is None:
                t = ep.constants.get(target)
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            t = ep.constants.get(target)
        elif spec.kind == InputKind.TOKEN:
            return None  # an effect token: only orders side effects
        else:
            self.unsupported.add(f"input kind {spec.kind.name} ({target})", loc)
            return FAILED
        import torch

        if not isinstance(t, torch.Tensor):
            self.unsupported.add(f"non-tensor constant {target} ({type(t).__name__})", loc)
            return FAILED
        try:
            arr = tensor_to_numpy(t, copy=not self.opts.borrow_weights)
        except Unsupported as e:
            self.unsupported.add(f"constant {target} ({e})", loc)
            return FAILED
        assert self.b is not None  # set by the import before any node is converted
        self.b.loc = loc
        return self.b.constant(arr, name=sanitize_name(target))

    def visit(self, node: Any) -> None:
        if node.op == "get_attr":
            self.env[node] = self._get_attr(node)
            return
        if node.op != "call_function":
            self.unsupported.add(f"FX {node.op} node '{node.target}'", node_location(node))
            self.env[node] = FAILED
            return
        self._saw_failed = False
        args = self._resolve(node.args)
        kwargs = self._resolve(node.kwargs)
        if self._saw_failed:
            self.env[node] = FAILED
            return
        loc = node_location(node)
        assert self.b is not None
        self.b.loc = loc
        target = node.target
        key = op_key(target)
        fn, twin = self._lookup(target)
        val = node.meta.get("val")
        mutated = None
        if twin is not None:
            mutated = node.args[0] if node.args else None
            target = twin
        elif node.args and torch_cache.writes_first_arg(target):
            mutated = node.args[0]  # an in-place op with its own converter (index_put_)
        try:
            if mutated is not None and not self.state.covers(node, mutated):
                _check_inplace(node, mutated)
            if fn is None:
                if _is_sym(val) or (isinstance(val, (int, float, bool)) and not _is_tensor_op(target)):
                    # Size arithmetic (sym_size, operator.mul on SymInts, sym_max...): the
                    # metadata already holds the resulting expression.
                    known = self._static_scalar(key, target, args)
                    self.env[node] = self._scalar_from_meta(val) if known is None else known
                    return
                if _is_noop(key):
                    self.env[node] = None
                    return
                raise _NoConverter()
            cx = ConvertContext(self, node, loc)
            bound = bind_args(target, args, kwargs)
            result = fn(cx, bound)
            self.env[node] = self._check(node, result, val)
            if mutated is not None:
                # SSA-rename the mutated tensor: later readers of it see the update.
                self.env[mutated] = self.env[node]
            self.state.after(node, mutated, self.env)
        except _NoConverter:
            self.unsupported.add(key, loc)
            self.env[node] = FAILED
            self._refused(node, mutated)
        except DataDependent as e:
            self.unsupported.add(f"{key} ({e})", loc)
            self.env[node] = FAILED
        except Unsupported as e:
            self.unsupported.add(f"{key} ({e})", loc)
            self.env[node] = FAILED
            self._refused(node, mutated)
        except BuildError as e:
            self.unsupported.add(f"{key} (irkit cannot express it: {e})", loc)
            self.env[node] = FAILED
            self._refused(node, mutated)

    def _refused(self, node: Any, mutated: Any) -> None:
        """Remember an ATen op this import could not convert: torch may decompose it."""
        if mutated is None and _is_tensor_op(node.target):
            self.refused.add(node.target)

    def _lookup(self, target: Any) -> tuple[Any, Any]:
        """(converter, functional twin of an in-place op or None) for an FX target, cached."""
        try:
            return _CONV_CACHE[target]
        except (KeyError, TypeError):
            pass
        fn = self.converters.get(op_key(target)) or self.converters.get(_packet_key(target))
        twin = None
        if fn is None:
            t = _functional_twin(target)
            if t is not None:
                fn = self.converters.get(op_key(t)) or self.converters.get(_packet_key(t))
                twin = t if fn is not None else None
        if fn is None and op_key(target).startswith("prims."):
            # A prim left by torch's reference decompositions (prims.hypot) has the
            # schema of the ATen op of its name: that op's converter reads it as well.
            fn = self.converters.get("aten." + op_key(target).split(".")[1])
        try:
            _CONV_CACHE[target] = (fn, twin)
        except TypeError:
            pass
        return fn, twin

    @staticmethod
    def _static_scalar(key: str, target: Any, args: Any) -> Any:
        """Size arithmetic on sizes a converter built statically where torch's metadata has a
        data-dependent one (``combinations``): ``aten.sym_size.int`` of such a tensor, and
        ``operator`` arithmetic or comparisons of plain numbers; None otherwise."""
        if key == "aten.sym_size.int" and len(args) >= 2 and isinstance(args[0], Value):
            d = args[0].shape[int(args[1])]
            return d if isinstance(d, int) else None
        if key.startswith("operator.") and args and all(
                isinstance(x, (int, float, bool)) and not isinstance(x, np.generic) for x in args):
            try:
                return target(*args)
            except (ArithmeticError, TypeError, ValueError):
                return None
        return None

    def _scalar_from_meta(self, val: Any) -> Any:
        import torch

        if isinstance(val, torch.SymInt):
            return self.size_dim(val)
        if isinstance(val, torch.SymFloat):
            e = val.node.expr
            if getattr(e, "is_number", False):
                return float(e)
            return self.float_expr(e)
        if isinstance(val, torch.SymBool):
            e = val.node.expr
            if e in (True, False) or getattr(e, "is_Boolean", False) and e.is_Boolean and str(e) in ("True", "False"):
                return str(e) == "True"
            raise Unsupported(f"symbolic condition {e}")
        return val

    def _check(self, node: Any, result: Any, val: Any) -> Any:
        """Check the IR result against torch's metadata (shape and dtype)."""
        import torch

        if isinstance(result, Value) and isinstance(val, torch.Tensor) and _data_dependent_size(val):
            # torch could not know a size its kernel computes from the data (combinations goes
            # through masked_select); the converter built it statically: check rank and dtype.
            if result.type.rank != val.dim() or result.dtype != torch_dtype_to_ir(val.dtype):
                raise Unsupported(f"irkit built {result.type} but torch says rank {val.dim()}, {val.dtype} "
                                  "(a frontend bug; please report it)")
        elif isinstance(result, Value) and isinstance(val, torch.Tensor):
            want = self.meta_type(val)
            if result.type != want:
                raise Unsupported(
                    f"irkit built {result.type} but torch says {want} (a frontend bug; please report it)")
        elif isinstance(result, (tuple, list)) and isinstance(val, (tuple, list)):
            for r, v in zip(result, val):
                if isinstance(r, Value) and isinstance(v, torch.Tensor):
                    want = self.meta_type(v)
                    if r.type != want:
                        raise Unsupported(f"irkit built {r.type} but torch says {want} "
                                          "(a frontend bug; please report it)")
        return result

    def _get_attr(self, node: Any) -> Any:
        import torch

        obj: Any = self.ep.graph_module
        for part in str(node.target).split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if isinstance(obj, torch.fx.GraphModule):
            return obj
        if isinstance(obj, torch.Tensor):
            assert self.b is not None
            self.b.loc = Location(name=str(node.target))
            return self.b.constant(tensor_to_numpy(obj), name=sanitize_name(str(node.target)))
        self.unsupported.add(f"get_attr of {type(obj).__name__} '{node.target}'", node_location(node))
        return FAILED

    def _resolve(self, a: Any) -> Any:
        """FX arguments with nodes replaced by their environment entries; sets
        ``self._saw_failed`` when one of them could not be imported."""
        if isinstance(a, _FX_NODE[0]):
            v = self.env.get(a, FAILED)
            if v is FAILED:
                self._saw_failed = True
            return LazyResult.force(v) if isinstance(v, LazyResult) else v
        if isinstance(a, (list, tuple)):
            items = [self._resolve(x) for x in a]
            return items if isinstance(a, list) else tuple(items)
        if isinstance(a, dict):
            return {k: self._resolve(v) for k, v in a.items()}
        return a

    _saw_failed = False
    state = torch_cache.StateTracker(())  # aliases of the mutated buffers (set by run)

    def inline(self, gm: Any, inputs: Sequence[Any]) -> Any:
        """Import the graph of a submodule (a higher-order op's body) in place."""
        sub_env_saved = self.env
        self.env = dict(sub_env_saved)
        try:
            ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
            if len(ph) != len(inputs):
                raise Unsupported(f"submodule takes {len(ph)} inputs, got {len(inputs)}")
            for n, v in zip(ph, inputs):
                self.env[n] = v
            out = None
            for n in gm.graph.nodes:
                if n.op == "placeholder":
                    continue
                if n.op == "output":
                    out = self._resolve(n.args[0])
                    break
                if n.op == "get_attr":
                    self.env[n] = _get_attr_of(gm, n, self)
                    continue
                self.visit(n)
            return out
        finally:
            self.env = sub_env_saved


def _get_attr_of(gm: Any, node: Any, imp: _Importer) -> Any:
    import torch

    obj: Any = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part, None)
    if isinstance(obj, torch.fx.GraphModule):
        return obj
    if isinstance(obj, torch.Tensor):
        assert imp.b is not None
        return imp.b.constant(tensor_to_numpy(obj), name=sanitize_name(str(node.target)))
    return FAILED


def _hint(s: Any) -> int | None:
    try:
        h = s.node.hint
        return int(h) if h is not None else None
    except Exception:  # noqa: BLE001 - a missing hint only loses an example size
        return None


class _NoConverter(Exception):
    pass


_SCHEMAS: dict[Any, tuple[tuple[str, bool, bool, Any], ...]] = {}
_CONV_CACHE: dict[Any, tuple[Any, Any]] = {}
_KEYS: dict[Any, str] = {}


def op_key(target: Any) -> str:
    """``aten.add.Tensor`` for an OpOverload, ``operator.getitem``, ``torch.sym_max``..."""
    try:
        return _KEYS[target]
    except (KeyError, TypeError):
        pass
    k = _op_key(target)
    try:
        _KEYS[target] = k
    except TypeError:
        pass
    return k


def _op_key(target: Any) -> str:
    import torch

    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"
    mod = getattr(target, "__module__", None) or ""
    name = getattr(target, "__name__", None) or str(target)
    if mod in ("_operator", "operator"):
        return f"operator.{name}"
    if mod.startswith("torch"):
        return f"torch.{name}"
    return f"{mod}.{name}" if mod else name


# ATen ops whose result may share memory with their input: an in-place update of
# such a result (or of a tensor such a result views) would change the other too,
# which SSA values cannot express.
_VIEW_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "slice", "select", "transpose", "permute", "expand",
    "unsqueeze", "squeeze", "t", "alias", "detach", "as_strided", "unflatten", "flatten", "narrow",
    "diagonal", "split", "split_with_sizes", "chunk", "unbind", "view_as", "reshape_as", "expand_as",
    "numpy_T", "mT", "adjoint", "swapaxes", "swapdims", "unfold", "_reshape_alias", "tensor_split",
    # These return their input itself when there is nothing to do (same dtype, already contiguous).
    "contiguous", "to", "type_as",
})


def _functional_twin(target: Any) -> Any:
    """``aten.add.Tensor`` for ``aten.add_.Tensor``: the out-of-place form of an in-place op."""
    import torch

    if not isinstance(target, torch._ops.OpOverload):
        return None
    args = target._schema.arguments
    if not args or args[0].alias_info is None or not args[0].alias_info.is_write:
        return None
    name = target._schema.name.split("::")[-1]
    if not name.endswith("_") or name.startswith("_"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    return getattr(packet, target._overloadname, None) if packet is not None else None


def _view_name(n: Any) -> str | None:
    import torch

    if getattr(n, "op", None) != "call_function":
        return None
    t = n.target
    if isinstance(t, torch._ops.OpOverload):
        base = t._schema.name.split("::")[-1]
        return base if base in _VIEW_OPS else None
    if op_key(t) == "operator.getitem":
        src = n.args[0]
        return _view_name(src) if hasattr(src, "op") else None
    return None


def _check_inplace(node: Any, mutated: Any) -> None:
    """Refuse in-place updates whose effect would reach other aliases of the tensor."""
    if not hasattr(mutated, "op"):
        raise Unsupported("in-place update of a non-tensor")
    if mutated.op in ("placeholder", "get_attr"):
        raise Unsupported(f"in-place update of the program input or weight '{mutated.name}'")
    v = _view_name(mutated)
    order = {n: i for i, n in enumerate(node.graph.nodes)}
    here = order[node]
    if v is not None:
        _check_view_update(node, mutated, v, order, here)
        return
    for u in mutated.users:
        if u is node or order.get(u, here) > here or _view_name(u) is None:
            continue
        if any(order.get(w, 0) > here for w in u.users):
            raise Unsupported(f"in-place update of '{mutated.name}' while its view '{u.name}' is "
                              "still used")


def _check_view_update(node: Any, mutated: Any, v: str, order: dict[Any, int], here: int) -> None:
    """An in-place update of a view reaches its base and every other view of that storage: it
    reads as an update of ``mutated`` alone only when none of those is read after it (the base
    is a temporary, as in ``x[..., :n] *= mask`` on a fresh product)."""
    root = mutated
    while _view_name(root) is not None and root.args and hasattr(root.args[0], "op"):
        root = root.args[0]
    if root.op in ("placeholder", "get_attr"):
        raise Unsupported(f"in-place update of '{mutated.name}', a view ({v}) of the program input or weight "
                          f"'{root.name}'")
    family: set[Any] = set()
    stack = [root]
    while stack:  # the base and the views of it taken before the update
        n = stack.pop()
        if n in family:
            continue
        family.add(n)
        stack.extend(u for u in n.users if order.get(u, here) < here and _view_name(u) is not None)
    for n in family:
        if n is mutated:
            continue
        late = [u for u in n.users if u is not node and order.get(u, 0) > here]
        if late:
            raise Unsupported(f"in-place update of '{mutated.name}', a view ({v}) of another tensor that "
                              f"'{late[0].name}' reads afterwards")


def _data_dependent_size(val: Any) -> bool:
    """True when a tensor's metadata has a size torch left as an unbacked symbol (``u0``)."""
    for d in val.shape:
        node = getattr(d, "node", None)
        if node is not None and any(str(s).startswith("u") for s in getattr(node.expr, "free_symbols", ())):
            return True
    return False


def _packet_key(target: Any) -> str:
    import torch

    if isinstance(target, torch._ops.OpOverload):
        return str(target.overloadpacket)
    return ""


def _is_tensor_op(target: Any) -> bool:
    import torch

    return isinstance(target, torch._ops.OpOverload) and not str(target).startswith("aten.sym_")


_NOOPS = re.compile(r"aten\._assert_\w+|aten\.sym_constrain_range\w*|aten\._functional_assert\w*|"
                    r"aten\._functional_sym_constrain\w*|torch\._check\w*|aten\._print\.\w+")


def _is_noop(key: str) -> bool:
    return bool(_NOOPS.match(key))


def bind_args(target: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments by schema name, defaults filled in (OpOverloads); ``argN`` otherwise."""
    import torch

    if isinstance(target, torch._ops.OpOverload):
        schema = _SCHEMAS.get(target)
        if schema is None:
            schema = tuple((a.name, a.kwarg_only, a.has_default_value(),
                            a.default_value if a.has_default_value() else None)
                           for a in target._schema.arguments)
            _SCHEMAS[target] = schema
        out: dict[str, Any] = {}
        for i, (name, kwarg_only, _has_default, default) in enumerate(schema):
            if i < len(args) and not kwarg_only:
                out[name] = args[i]
            elif name in kwargs:
                out[name] = kwargs[name]
            else:
                out[name] = default
        return out
    out = {f"arg{i}": a for i, a in enumerate(args)}
    out.update(kwargs)
    return out


# ---------------------------------------------------------------------------
# public API


def import_exported_program(ep: Any, name: str = "main", *, dim_names: Mapping[str, str] | None = None,
                            dynamic_shapes: Any = None, source: str | None = None,
                            auto_decompose: bool = True, borrow_weights: bool = False) -> Module:
    """Import a ``torch.export.ExportedProgram`` (before or after ``run_decompositions()``).

    ``dim_names`` maps torch's size symbols (``s18``) to IR symbol names; or give
    the ``dynamic_shapes`` that were passed to ``torch.export.export`` and the
    names of its ``Dim`` objects are used.  Symbols left unnamed keep torch's
    name.  Ops without a converter that torch can decompose are decomposed
    first (``auto_decompose``; see :func:`_import`).  ``borrow_weights`` makes the
    constants share ``ep``'s tensors instead of copying them (only when nothing will
    write them afterwards: :func:`load_pt2` does it).  Raises
    :class:`UnsupportedOpsError` listing every op irkit cannot import, with
    counts and locations.
    """
    try:
        from torch.export import ExportedProgram
    except ImportError:
        raise FrontendError("the torch frontend needs PyTorch (pip install 'irkit[torch]')") from None
    if not isinstance(ep, ExportedProgram):
        raise FrontendError(f"expected a torch.export.ExportedProgram, got {type(ep).__name__}")
    names = dict(dim_names or {})
    if dynamic_shapes is not None:
        for k, v in dim_names_from_spec(ep, dynamic_shapes).items():
            names.setdefault(k, v)
    src = source or _program_source(ep)
    return _import(ep, ImportOptions(name=name, dim_names=names, source=src, auto_decompose=auto_decompose,
                                     borrow_weights=borrow_weights))


def _import(ep: Any, opts: ImportOptions) -> Module:
    """Import ``ep``; what it cannot convert, torch's own decomposition table may.

    An ATen op that has no converter, or whose converter refuses the node
    (``aten.diff``, ``aten.max_unpool2d``, an adaptive pool of uneven windows), is
    decomposed by ``ep.run_decompositions`` with a table holding exactly those
    ops, and the import runs again; every other op stays as exported (``linear``,
    SDPA...).  Rounds repeat while they decompose something new; what is still
    missing at the end is reported in one error, which names the ops that were
    decomposed on the way.
    """
    done: list[str] = []
    seen: set[Any] = set()
    while True:
        imp = _Importer(ep, opts)
        try:
            return imp.run()
        except UnsupportedOpsError as err:
            table = _decompositions_for(imp.refused - seen) if opts.auto_decompose else {}
            if not table:
                if done:
                    raise UnsupportedOpsError(f"{err.source} (after torch decomposed "
                                              f"{', '.join(done)})", err.ops) from None
                raise
            seen.update(table)
            try:
                new_ep = ep.run_decompositions(table)
            except Exception:  # noqa: BLE001 - the decomposition failed: report the ops as they were
                raise err from None
            names = _carry_dim_names(ep, new_ep, opts.dim_names)
            opts = ImportOptions(name=opts.name, dim_names=names, source=opts.source, auto_decompose=True,
                                 borrow_weights=opts.borrow_weights)
            done.extend(sorted(str(k) for k in table))
            ep = new_ep


_REDUCTIONS = ("none", "mean", "sum")  # ATen's int reduction enum, in order


def _nll_loss(self: Any, target: Any, weight: Any = None, reduction: int = 1, ignore_index: int = -100) -> Any:
    """``aten.nll_loss`` through torch's Python reference, with ATen's arguments.

    torch's table maps ``aten.nll_loss`` (``weight, int reduction, ignore_index``)
    to ``torch._refs.nn.functional.nll_loss`` (``weight, size_average,
    ignore_index, reduce, str reduction``): called with the ATen arguments, the
    int reduction lands on ``size_average`` and ``reduction='none'`` becomes a sum."""
    from torch._refs.nn.functional import nll_loss

    return nll_loss(self, target, weight, ignore_index=ignore_index, reduction=_REDUCTIONS[reduction])


# ATen overloads whose entry in torch's decomposition table takes other arguments
# than the op's schema (torch 2.13): called through an adapter instead.
_SCHEMA_ADAPTED: dict[str, Any] = {"aten.nll_loss.default": _nll_loss}


def _decompositions_for(targets: Iterable[Any]) -> dict[Any, Any]:
    """torch's decomposition of each ATen overload in ``targets`` that has one: the
    ``torch._decomp`` table, else export's default table (CompositeImplicitAutograd ops)."""
    import torch
    from torch._decomp import decomposition_table

    out: dict[Any, Any] = {}
    cia = None
    for t in targets:
        if not isinstance(t, torch._ops.OpOverload) or _is_noop(str(t)):
            continue
        fn = _SCHEMA_ADAPTED.get(str(t)) or decomposition_table.get(t)
        if fn is None:
            if cia is None:
                from torch.export import default_decompositions

                cia = default_decompositions()
            if t in cia:
                fn = cia[t]
            elif torch._C._dispatch_has_kernel_for_dispatch_key(t.name(), "CompositeImplicitAutograd"):
                fn = t.decompose  # its CompositeImplicitAutograd kernel (aten.hsplit)
        if fn is not None:
            out[t] = fn
    return out


def _carry_dim_names(old: Any, new: Any, names: Mapping[str, str]) -> dict[str, str]:
    """The Dim names of ``old``'s size symbols, for the symbols ``new`` (a re-trace) uses."""
    out = dict(names)
    for a, b in zip(_user_input_nodes(old), _user_input_nodes(new)):
        va, vb = a.meta.get("val"), b.meta.get("val")
        if not hasattr(va, "shape") or not hasattr(vb, "shape"):
            continue
        for sa, sb in zip(va.shape, vb.shape):
            if _is_sym(sa) and _is_sym(sb):
                ea, eb = str(sa.node.expr), str(sb.node.expr)
                out.setdefault(eb, names.get(ea, ea))
    return out


def _program_source(ep: Any) -> str:
    try:
        for n in ep.graph.nodes:
            stack = n.meta.get("nn_module_stack")
            if stack:
                first = next(iter(stack.values()))
                cls = first[1] if isinstance(first, tuple) else str(first)
                return f"torch.export of {str(cls).rsplit('.', 1)[-1]}"
    except Exception:  # noqa: BLE001, S110 - the name is cosmetic
        pass
    return "torch.export program"


def export_module(module: Any, example_inputs: Any, dynamic_shapes: Any = None, *,
                  strict: bool = False, source: str | None = None) -> Any:
    """``torch.export.export`` with errors turned into one-line :class:`FrontendError`."""
    import torch

    src = source or f"torch.export of {type(module).__name__}"
    if not isinstance(module, torch.nn.Module):
        if callable(module):
            module = _FunctionModule(module)
        else:
            raise FrontendError(f"{src}: expected a torch.nn.Module, got {type(module).__name__}")
    args: tuple[Any, ...]
    if isinstance(example_inputs, Mapping):
        args, kwargs = (), dict(example_inputs)
    elif isinstance(example_inputs, (tuple, list)):
        args, kwargs = tuple(example_inputs), {}
    elif isinstance(example_inputs, torch.Tensor):
        args, kwargs = (example_inputs,), {}
    else:
        raise FrontendError(f"{src}: example inputs must be a tuple of tensors or a dict, "
                            f"got {type(example_inputs).__name__}")
    try:
        return torch.export.export(module, args, kwargs or None, dynamic_shapes=dynamic_shapes,
                                   strict=strict)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds; the user needs one line
        raise FrontendError(f"{src}: torch.export failed: {type(e).__name__}: {_first_line(e)}") from None


class _FunctionModule:
    """Wraps a plain function of tensors as an nn.Module for torch.export."""

    def __new__(cls, fn: Callable[..., Any]) -> Any:
        import torch

        class Fn(torch.nn.Module):
            def forward(self, *args: Any, **kwargs: Any) -> Any:
                return fn(*args, **kwargs)

        m = Fn()
        m.__class__.__name__ = getattr(fn, "__name__", "function")
        return m


def _first_line(e: BaseException) -> str:
    """The gist of an exception in one line: its first line, plus the first detail
    line when the first only points elsewhere (torch's "Constraints violated (N)!")."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    out = lines[0]
    if len(lines) > 1 and ("For more information" in out or out.endswith(":")):
        detail = next((ln for ln in lines[1:] if ln.startswith("-")), lines[1])
        out = f"{out} {detail.lstrip('- ')}"
    return out[:600]


def keep_attention_decompositions() -> dict[Any, Any]:
    """torch's default core-ATen decomposition table, minus SDPA (kept whole as ``ik.attention``)."""
    import torch
    from torch.export import default_decompositions

    table = default_decompositions()
    table.pop(torch.ops.aten.scaled_dot_product_attention.default, None)
    return table


def decompose(ep: Any, *, keep_attention: bool = False) -> Any:
    """``ep.run_decompositions()`` to core ATen; ``keep_attention`` keeps SDPA whole."""
    try:
        if keep_attention:
            return ep.run_decompositions(keep_attention_decompositions())
        return ep.run_decompositions()
    except Exception as e:  # noqa: BLE001
        raise FrontendError(f"run_decompositions failed: {type(e).__name__}: {_first_line(e)}") from None


def import_torch_factory(module: Any, example_inputs: Any, dynamic_shapes: Any = None, *,
                         name: str = "main", decompositions: str = "none",
                         strict: bool = False, source: str | None = None) -> Module:
    """Export ``module`` on ``example_inputs`` with torch.export, then import it.

    ``dynamic_shapes`` is passed to ``torch.export.export``; the names of its
    ``Dim`` objects become the IR's symbol names.  ``decompositions`` is
    ``"none"`` (import torch's training IR as exported), ``"core"``
    (``run_decompositions()``: core ATen, SDPA becomes math) or
    ``"core-keep-attention"`` (core ATen but SDPA kept whole).  ``source``
    names the model in error messages (default: its class).
    """
    if decompositions not in ("none", "core", "core-keep-attention"):
        raise FrontendError(f"unknown decompositions '{decompositions}' "
                            "(expected none, core or core-keep-attention)")
    src = source or f"torch.export of {type(module).__name__}"
    ep = export_module(module, example_inputs, dynamic_shapes, strict=strict, source=src)
    names = dim_names_from_spec(ep, dynamic_shapes, module, example_inputs)
    if decompositions != "none":
        ep = decompose(ep, keep_attention=decompositions == "core-keep-attention")
        # Decomposition re-traces: map the new symbols through the input shapes again.
        names = dim_names_from_spec(ep, dynamic_shapes, module, example_inputs)
    return _import(ep, ImportOptions(name=name, dim_names=names, source=src))


def load_pt2(path: str | os.PathLike[str], name: str = "main", *,
             dim_names: Mapping[str, str] | None = None) -> Module:
    """Import a ``.pt2`` file saved by ``torch.export.save`` without unpickling anything.

    See :mod:`irkit.frontends.torch_pt2` (and docs/frontend-torch.md) for what
    is checked before torch's deserializer sees the file.
    """
    from irkit.frontends.torch_pt2 import load_exported_program_safely, read_dim_names

    ep = load_exported_program_safely(path)
    names = read_dim_names(path)
    names.update(dim_names or {})
    # The program is private to this call: its weights become the IR's without a copy.
    return import_exported_program(ep, name, dim_names=names, source=str(path), borrow_weights=True)


def save_pt2(ep: Any, path: str | os.PathLike[str], *, dynamic_shapes: Any = None,
             dim_names: Mapping[str, str] | None = None) -> None:
    """``torch.export.save`` plus the Dim names, so :func:`load_pt2` keeps ``B``/``S``.

    The names ride in an extra JSON file of the archive (torch ignores it);
    give either the ``dynamic_shapes`` used for export or ``dim_names``.
    """
    import json

    import torch

    from irkit.frontends.torch_pt2 import DIM_NAMES_RECORD

    names = dict(dim_names or {})
    if dynamic_shapes is not None:
        for k, v in dim_names_from_spec(ep, dynamic_shapes).items():
            names.setdefault(k, v)
    try:
        torch.export.save(ep, os.fspath(path), extra_files={DIM_NAMES_RECORD: json.dumps(names)})
    except Exception as e:  # noqa: BLE001
        raise FrontendError(f"{path}: torch.export.save failed: {type(e).__name__}: {_first_line(e)}") from None


# ---------------------------------------------------------------------------
# file.py:factory


def load_factory_spec(spec: str) -> tuple[Any, str]:
    """Call the factory named by ``path/to/file.py:factory``; returns (its result, a label)."""
    path, sep, fname = spec.rpartition(":")
    if not sep or not path or not fname:
        raise FrontendError(f"{spec}: expected FILE.py:FACTORY (a Python file and a function in it)")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", fname):
        raise FrontendError(f"{spec}: '{fname}' is not a Python function name")
    p = Path(path)
    if p.suffix == ".py" or os.sep in path or "/" in path:
        if not p.exists():
            raise FrontendError(f"{path}: no such file")
        if not p.is_file():
            raise FrontendError(f"{path}: is not a file")
        mod_name = "_irkit_factory_" + re.sub(r"\W", "_", str(p.resolve()))
        try:
            ms = importlib.util.spec_from_file_location(mod_name, p)
            if ms is None or ms.loader is None:
                raise FrontendError(f"{path}: cannot be loaded as a Python module")
            mod = importlib.util.module_from_spec(ms)
            # Registered so that dataclasses and pickling inside the file can find it.
            sys.modules[mod_name] = mod
            ms.loader.exec_module(mod)
        except FrontendError:
            raise
        except SyntaxError as e:
            sys.modules.pop(mod_name, None)
            raise FrontendError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
        except Exception as e:  # noqa: BLE001 - running user code: any error becomes one line
            sys.modules.pop(mod_name, None)
            raise FrontendError(f"{path}: importing the file failed: {type(e).__name__}: "
                                f"{_first_line(e)}") from None
    else:
        try:
            mod = importlib.import_module(path)
        except Exception as e:  # noqa: BLE001
            raise FrontendError(f"{spec}: cannot import module '{path}': {type(e).__name__}: "
                                f"{_first_line(e)}") from None
    fn = getattr(mod, fname, None)
    if fn is None:
        avail = sorted(n for n, v in vars(mod).items() if callable(v) and not n.startswith("_")
                       and getattr(v, "__module__", None) == mod.__name__)
        hint = f" (it defines: {', '.join(avail[:12])})" if avail else ""
        raise FrontendError(f"{path}: no function '{fname}'{hint}")
    if not callable(fn):
        raise FrontendError(f"{spec}: '{fname}' is a {type(fn).__name__}, not a function")
    try:
        result = fn()
    except Exception as e:  # noqa: BLE001 - the factory is user code
        raise FrontendError(f"{spec}: the factory raised {type(e).__name__}: {_first_line(e)}") from None
    return result, spec


def is_torch_factory_result(result: Any) -> bool:
    """True when ``result`` looks like ``(nn.Module, inputs[, dynamic_shapes])``."""
    try:
        import torch
    except ImportError:
        return False
    return (isinstance(result, (tuple, list)) and len(result) in (2, 3)
            and isinstance(result[0], torch.nn.Module))


def import_factory_spec(spec: str, *, name: str = "main", decompositions: str = "none") -> Module:
    """Import ``path/to/file.py:factory``: the factory returns ``(module, inputs[, dynamic_shapes])``."""
    result, label = load_factory_spec(spec)
    if not is_torch_factory_result(result):
        what = type(result).__name__
        if isinstance(result, (tuple, list)) and result:
            what = f"{what} of ({', '.join(type(x).__name__ for x in result)})"
        raise FrontendError(f"{label}: the factory returned {what}; the torch frontend expects "
                            "(torch.nn.Module, example_inputs) or (module, inputs, dynamic_shapes)")
    module, inputs = result[0], result[1]
    dyn = result[2] if len(result) == 3 else None
    return import_torch_factory(module, inputs, dyn, name=name, decompositions=decompositions,
                                source=label)


# Python-level size arithmetic torch.export records on SymInts/SymFloats/SymBools; the
# importer takes their result from the node's metadata (an expression in the symbols).
_SIZE_ARITHMETIC = tuple(f"operator.{n}" for n in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "abs", "eq", "ne", "lt",
    "le", "gt", "ge", "and_", "or_", "xor", "not_", "invert")) + tuple(f"torch.{n}" for n in (
    "sym_float", "sym_int", "sym_ite", "sym_max", "sym_min", "sym_not", "sym_sqrt", "sym_sum"))


def _handled_without_converter(converters: Mapping[Any, Any]) -> set[str]:
    """Op keys the importer handles without a converter of their own: the size queries and
    size arithmetic (``aten.sym_size.int``...: a dim or an expression of dims), the run-time
    assertions and constraints (``aten._assert_tensor_metadata``...: dropped) and the
    in-place forms of converted ops (``aten.add_.Tensor``: SSA-renamed, see ``_check_inplace``)."""
    import torch

    keys: set[str] = set(_SIZE_ARITHMETIC)
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        op, _, overload = name.split("::", 1)[1].partition(".")
        packet = f"aten.{op}"
        full = f"{packet}.{overload or 'default'}"
        if _is_noop(full) or op.startswith("sym_") or op.endswith("_") and not op.startswith("_") and (
                f"aten.{op[:-1]}.{overload or 'default'}" in converters or f"aten.{op[:-1]}" in converters):
            keys.update((full, packet))
    keys.update(f"torch.{n}" for n in dir(torch) if _is_noop(f"torch.{n}"))
    return keys


def supported_ops() -> list[str]:
    """What the torch frontend handles (for ``irkit coverage``): the ATen overloads and packets
    it converts, their in-place forms, the size queries and size arithmetic it answers from
    the graph's metadata, and the assertions it drops."""
    return sorted({str(k) for k in torch_ops.CONVERTERS} | _handled_without_converter(torch_ops.CONVERTERS))


def main(argv: Sequence[str] | None = None) -> int:
    """Import a .pt2 file or a ``file.py:factory`` and print (or write) its IR; errors are one line."""
    import argparse

    from irkit.errors import IrkitError

    p = argparse.ArgumentParser(prog="python -m irkit.frontends.torch_export",
                                description="Import a torch.export program into irkit IR.")
    p.add_argument("source", nargs="?", help="a .pt2 file, or FILE.py:FACTORY")
    p.add_argument("-o", "--output", default="-",
                   help="write IR here (.mlir, with a .safetensors sidecar); default: stdout")
    p.add_argument("--name", default="main", help="entry function name (default: main)")
    p.add_argument("--decompositions", default="none", choices=("none", "core", "core-keep-attention"),
                   help="for a factory: import torch's training IR as exported (none), after "
                        "run_decompositions() (core), or core with SDPA kept whole")
    p.add_argument("--list-ops", action="store_true", help="list the supported ATen ops and exit")
    args = p.parse_args(argv)
    if args.list_ops:
        print("\n".join(supported_ops()))
        return 0
    if not args.source:
        p.error("a .pt2 file or FILE.py:FACTORY is required")
    try:
        if ":" in args.source and not Path(args.source).exists():
            m = import_factory_spec(args.source, name=args.name, decompositions=args.decompositions)
        else:
            m = load_pt2(args.source, args.name)
        from irkit.text.io import write_module

        write_module(m, args.output)
    except (IrkitError, ValueError) as e:
        msg = " ".join(str(e).split())
        sys.stderr.write(f"irkit: error: {msg}\n")
        return 1
    return 0


__all__ = [
    "ConvertContext",
    "LazyResult",
    "Unsupported",
    "decompose",
    "dim_names_from_spec",
    "export_module",
    "import_exported_program",
    "import_factory_spec",
    "import_torch_factory",
    "is_torch_factory_result",
    "keep_attention_decompositions",
    "lazy",
    "load_factory_spec",
    "load_pt2",
    "main",
    "node_location",
    "save_pt2",
    "supported_ops",
    "tensor_to_numpy",
    "torch_dtype_to_ir",
]


if __name__ == "__main__":
    raise SystemExit(main())
