"""State in torch.export programs: mutated buffers become aliased arguments.

Design note.  A decoder exported with a static KV cache
(``transformers.integrations.executorch.TorchExportableModuleWithStaticCache``,
``convert_and_export_with_cache``, ``Seq2SeqLMExportableModule``) keeps its cache
in module buffers and writes them every step.  torch.export records that in one
of two forms:

- **as exported** (``torch.export.export``): in-place ops on the buffer's
  placeholder (``aten.index_copy_``, ``aten.copy_``, ``aten.index_put_``,
  ``aten.add_``) and no output for the new value;
- **functionalized** (after ``ep.run_decompositions()``): out-of-place ops and
  one ``BUFFER_MUTATION`` output per mutated buffer.

Both import the same way: each mutated buffer becomes a function *argument*
after the user inputs (named after the buffer, in the program's input order),
its final value becomes an extra *output* after the user outputs, and the
function's ``aliases`` attribute pairs them (:mod:`irkit.ir.aliases`).  A
caller binds the buffer's initial value (:func:`initial_state`) once and feeds
each output back.  Buffers that are only read, and parameters, stay
``ik.constant`` as before.  A user input mutated in place
(``USER_INPUT_MUTATION``) aliases its own argument the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from irkit.frontends.common import sanitize_name


@dataclass(frozen=True)
class StateBuffer:
    """A buffer the program writes: its placeholder node, its FQN and its argument name."""

    node_name: str
    target: str
    arg_name: str


def writes_first_arg(target: Any) -> bool:
    """True when the ATen overload ``target`` writes its first argument in place (``index_put_``)."""
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.arguments:
        return False
    info = schema.arguments[0].alias_info
    return bool(info is not None and info.is_write and not schema.name.split("::")[-1].startswith("_foreach"))


def _placeholder_root(node: Any) -> Any:
    """The placeholder an in-place op's first argument is (views are not followed: the importer
    refuses in-place updates through views)."""
    return node if getattr(node, "op", None) == "placeholder" else None


def state_buffers(ep: Any) -> list[StateBuffer]:
    """The buffers ``ep`` mutates, in the order of its input specs.

    Functionalized programs name them in ``BUFFER_MUTATION`` output specs; programs
    as exported mutate the buffer placeholders with in-place ops.
    """
    from torch.export.graph_signature import InputKind, OutputKind

    sig = ep.graph_signature
    mutated_targets = {s.target for s in sig.output_specs if s.kind == OutputKind.BUFFER_MUTATION}
    buffer_nodes = {s.arg.name: s.target for s in sig.input_specs
                    if s.kind == InputKind.BUFFER and hasattr(s.arg, "name")}
    for node in ep.graph.nodes:
        if node.op != "call_function" or not node.args or not writes_first_arg(node.target):
            continue
        root = _placeholder_root(node.args[0])
        if root is not None and root.name in buffer_nodes:
            mutated_targets.add(buffer_nodes[root.name])
    out: list[StateBuffer] = []
    taken: set[str] = set()
    for s in sig.input_specs:
        if s.kind != InputKind.BUFFER or s.target not in mutated_targets or not hasattr(s.arg, "name"):
            continue
        name = sanitize_name(s.target)
        while name in taken:
            name += "_"
        taken.add(name)
        out.append(StateBuffer(s.arg.name, s.target, name))
    return out


# ATen ops that return their input itself when nothing changes (same dtype, shape, layout).
_IDENTITY_ALIASES = frozenset({"to", "_to_copy_alias", "contiguous", "alias", "detach", "type_as", "view_as",
                               "lift_fresh"})


class StateTracker:
    """Tracks which FX nodes are the same storage as a state buffer, in a program as exported.

    ``cache.copy_(x)`` returns the buffer itself and ``buffer.to(torch.int64)`` of an int64
    buffer is the buffer itself: an in-place update through any of them writes the buffer,
    so after it every such node reads the new value.
    """

    def __init__(self, state_nodes: Any):
        self.root: dict[Any, Any] = {n: n for n in state_nodes}

    def covers(self, node: Any, mutated: Any) -> bool:
        """True when the in-place ``node`` writes a state buffer (through ``mutated``); raises
        Unsupported when a view of the buffer taken earlier is still read afterwards."""
        root = self.root.get(mutated)
        if root is None:
            return False
        from irkit.frontends.torch_cx import Unsupported
        from irkit.frontends.torch_export import _view_name

        order = {n: i for i, n in enumerate(node.graph.nodes)}
        here = order[node]
        for m, r in self.root.items():
            if r is not root:
                continue
            for u in m.users:
                if u in self.root or order.get(u, here) > here or _view_name(u) is None:
                    continue
                if any(order.get(w, 0) > here for w in u.users):
                    raise Unsupported(f"in-place update of buffer '{root.name}' while its view '{u.name}' is "
                                      "still used")
        return True

    def after(self, node: Any, mutated: Any, env: dict[Any, Any]) -> None:
        """Record ``node`` (just converted): an in-place write renames every alias of the buffer;
        an identity alias of a tracked node joins its group."""
        if mutated is not None:
            root = self.root.get(mutated)
            if root is None:
                return
            self.root[node] = root
            new = env[node]
            for m, r in self.root.items():
                if r is root:
                    env[m] = new
            return
        if not self.root or not node.args or node.args[0] not in self.root:
            return
        name = getattr(getattr(node.target, "_schema", None), "name", "").split("::")[-1]
        if name not in _IDENTITY_ALIASES:
            return
        src, val = node.args[0].meta.get("val"), node.meta.get("val")
        if (src is not None and val is not None and getattr(src, "dtype", None) == getattr(val, "dtype", 0)
                and tuple(getattr(src, "shape", ())) == tuple(getattr(val, "shape", ()))):
            self.root[node] = self.root[node.args[0]]


def state_outputs(imp: Any, user_nodes: list[Any], state_nodes: list[Any], state: dict[str, StateBuffer],
                  mutations: dict[str, Any], outputs: list[Any], loc: Any) -> dict[int, int]:
    """Append the new value of every state buffer (then of every mutated user input) to
    ``outputs``; return ``{output: arg}`` aliases.  ``mutations`` maps a buffer FQN or user input
    name to the FX node of a ``*_MUTATION`` output (functionalized programs); a buffer without
    one was mutated in place, and the importer's environment holds its last value."""
    from irkit.frontends.torch_export import FAILED
    from irkit.ir.core import Value

    aliases: dict[int, int] = {}

    def add(v: Any, arg: int, what: str) -> None:
        if v is FAILED:
            return  # the op computing it was reported already
        if not isinstance(v, Value):
            imp.unsupported.add(f"new value of {what} is not a tensor ({type(v).__name__})", loc)
            return
        if v.type != imp.graph.args[arg].type:
            imp.unsupported.add(f"new value of {what} has type {v.type}, the buffer {imp.graph.args[arg].type}",
                                loc)
            return
        if any(v is w for w in outputs):
            imp.unsupported.add(f"new value of {what} is also returned as another output (an aliased "
                                "output must be its own buffer; return a clone)", loc)
            return
        aliases[len(outputs)] = arg
        outputs.append(v)

    for k, n in enumerate(state_nodes):
        sb = state[n.name]
        o = mutations.get(sb.target)
        v = imp.env.get(o, FAILED) if o is not None else imp.env.get(n, FAILED)
        add(v, len(user_nodes) + k, f"buffer '{sb.target}'")
    for k, n in enumerate(user_nodes):
        o = mutations.get(n.name)
        if o is not None:
            add(imp.env.get(o, FAILED), k, f"input '{n.name}'")
    return aliases


def mutated_user_inputs(ep: Any) -> dict[str, str]:
    """``{output node name: user input name}`` of a functionalized program's ``USER_INPUT_MUTATION``
    outputs."""
    from torch.export.graph_signature import OutputKind

    return {s.arg.name: s.target for s in ep.graph_signature.output_specs
            if s.kind == OutputKind.USER_INPUT_MUTATION and hasattr(s.arg, "name")}


def initial_state(ep: Any) -> dict[str, np.ndarray]:
    """The current value of each mutated buffer of ``ep``, keyed by its argument name (the
    inputs to bind before the first step: an all-zero cache, the cache length...)."""
    from irkit.frontends.torch_cx import tensor_to_numpy

    out: dict[str, np.ndarray] = {}
    for sb in state_buffers(ep):
        t = ep.state_dict.get(sb.target)
        if t is None:
            t = ep.constants.get(sb.target)
        if t is not None:
            out[sb.arg_name] = tensor_to_numpy(t)
    return out


__all__ = ["StateBuffer", "StateTracker", "initial_state", "mutated_user_inputs", "state_buffers", "state_outputs",
           "writes_first_arg"]
