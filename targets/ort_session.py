"""Sessions on ``ort``: resident OrtValues bound with onnxruntime's IOBinding.

Design note. Every resident argument (bound weights, an aliased KV cache) is an
``OrtValue`` that lives across calls; a call binds the resident values and the
call's own arrays as inputs, binds each aliased output to a preallocated buffer
of the same type, and runs with ``run_with_iobinding``.  Nothing resident goes
back through NumPy between calls: only the outputs asked for (``fetch``, e.g.
the logits) are copied out.

In place, where the graph allows (the KV cache of a decoder): before the
session is created, :func:`inplace_updates` rewrites the exported model so
that an aliased output is computed by one ``ScatterElements`` straight from
its argument.  The torch frontend imports ``cache.index_copy_(2, pos, new)`` as
one scatter along the cache axis (earlier versions: ``transpose -> scatter_nd ->
transpose back``, also recognised) and the exporter ends each output with an
``Identity``; run as exported, each of those copies the whole cache
(GPT-2-124M at 1024 positions: 75 MB per copy, every step).  The rewrite makes
the scatter (for the transposed form: ``ScatterElements(cache, pos broadcast,
new, axis=2)``) the producer of the graph output itself (the readers of the old
chain read it), and the output is bound to the argument's own OrtValue.  onnxruntime's scatter kernels skip the copy
when input and output are the same buffer, so a step writes only the new rows.
This is safe because the rewrite checks that the scatter is the only reader of
the argument: nothing can read the old value after the write.

Elsewhere (an aliased output the rewrite does not recognise) the output is
written into a second buffer of its argument (double buffering, "ping-pong"):
after the call the two swap, so the next call reads the buffer the last one
wrote.  Writing such an output straight into its own input buffer is not safe
in general: onnxruntime gives no guarantee that every reader of the old value
has run before a node writes the output buffer.  The cost is one extra
cache-sized buffer per such argument; no bytes are copied to the host.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from irkit.targets.base import Artifact, Session, Target, TargetUnavailable


def _perm_of(node: Any) -> list[int] | None:
    for a in node.attribute:
        if a.name == "perm":
            return list(a.ints)
    return None


def inplace_updates(model: Any, aliases: Mapping[int, int]) -> set[int]:
    """Rewrite ``model`` (an ``onnx.ModelProto``, in place) so that each aliased output it can is one
    ``ScatterElements`` of its argument that is the argument's only reader; return those outputs.

    Recognised: ``[Identity...] <- Transpose(inv) <- ScatterND(Transpose(arg, perm), idx [S, 1], upd)``
    (``index_copy`` along the axis ``perm`` moves to the front) and ``[Identity...] <- ScatterND or
    ScatterElements(arg, ...)``.
    """
    from onnx import helper

    g = model.graph
    ins = [i.name for i in g.input]
    outs = [o.name for o in g.output]
    prod = {o: n for n in g.node for o in n.output}

    def readers(name: str) -> list[Any]:
        return [n for n in g.node if name in n.input]

    done: set[int] = set()
    for o, a in aliases.items():
        if o >= len(outs) or a >= len(ins):
            continue
        out, arg = outs[o], ins[a]
        chain = []  # Identity nodes between the update and the graph output
        n = prod.get(out)
        while n is not None and n.op_type == "Identity" and n.input[0] not in ins:
            chain.append(n)
            n = prod.get(n.input[0])
        if n is None:
            continue
        new_nodes: list[Any] = []
        inits: list[Any] = []
        drop: list[Any] = list(chain)
        if n.op_type == "Transpose":
            sc = prod.get(n.input[0])
            t0 = prod.get(sc.input[0]) if sc is not None and sc.op_type == "ScatterND" else None
            if sc is None or t0 is None or t0.op_type != "Transpose" or t0.input[0] != arg:
                continue
            perm, inv = _perm_of(t0), _perm_of(n)
            if perm is None or inv is None or [perm[i] for i in inv] != list(range(len(perm))):
                continue
            axis = perm[0]
            if perm[1:] != [i for i in range(len(perm)) if i != axis]:
                continue
            if len(readers(t0.output[0])) != 1 or len(readers(sc.output[0])) != 1:
                continue
            rank = len(perm)
            idx, upd = sc.input[1], sc.input[2]
            pre = f"{out}__inplace"
            shape_s = [1] * rank
            shape_s[axis] = -1
            inits = [helper.make_tensor(f"{pre}_ishape", 7, [rank], shape_s)]
            new_nodes = [
                helper.make_node("Transpose", [upd], [f"{pre}_upd"], perm=inv, name=f"{pre}_t"),
                helper.make_node("Reshape", [idx, f"{pre}_ishape"], [f"{pre}_idx1"], name=f"{pre}_r"),
                helper.make_node("Shape", [f"{pre}_upd"], [f"{pre}_ushape"], name=f"{pre}_s"),
                helper.make_node("Expand", [f"{pre}_idx1", f"{pre}_ushape"], [f"{pre}_idx"], name=f"{pre}_e"),
                helper.make_node("ScatterElements", [arg, f"{pre}_idx", f"{pre}_upd"], [out], axis=axis,
                                 name=f"{pre}_scatter"),
            ]
            drop += [t0, sc, n]
        elif n.op_type in ("ScatterND", "ScatterElements") and n.input[0] == arg:
            new_nodes = [helper.make_node(n.op_type, list(n.input), [out], name=f"{out}__inplace_scatter",
                                          **{x.name: helper.get_attribute_value(x) for x in n.attribute})]
            drop.append(n)
        else:
            continue
        # the only reader of the argument must be the new scatter (nothing reads the old value afterwards)
        others = [r for r in readers(arg) if not any(r is d for d in drop)]
        if others:
            continue
        renamed = {x for d in drop for x in d.output}
        g.initializer.extend(inits)
        for d in drop:
            g.node.remove(d)
        for m in g.node:  # readers of the old chain read the graph output now
            for i, x in enumerate(m.input):
                if x in renamed:
                    m.input[i] = out
        pos = min((i for i, m in enumerate(g.node) if out in m.input), default=len(g.node))
        for k, nn in enumerate(new_nodes):
            g.node.insert(pos + k, nn)
        prod = {x: m for m in g.node for x in m.output}
        done.add(o)
    return done


def _ort_session(artifact: Artifact, threads: int, aliases: Mapping[int, int] | None = None
                 ) -> tuple[Any, set[int]]:
    """An InferenceSession for ``artifact`` and the aliased outputs it updates in place: a new session
    from the rewritten model where :func:`inplace_updates` applies, else the artifact's own session
    (held by its runner)."""
    data = artifact.files.get("model.onnx")
    if aliases and isinstance(data, bytes):
        import onnx

        model = onnx.load_from_string(data)
        done = inplace_updates(model, aliases)
        if done:
            return _new_session(model.SerializeToString(), threads, _weights(artifact)), done
    return _artifact_session(artifact, threads), set()


def _weights(artifact: Artifact) -> Any:
    """(name, array) of the artifact's external-data weights: those its own session reads (held by its
    runner), else views of its ``model.onnx.data``; None for a self-contained model."""
    import onnx
    from irkit.targets.ort import EXTERNAL_DATA, external_values

    sess = None
    if artifact.runner is not None:
        try:
            sess = inspect.getclosurevars(artifact.runner).nonlocals.get("sess")
        except TypeError:
            sess = None
    held = getattr(sess, "_irkit_external", None)
    if held is not None:
        return held[0]
    data = artifact.files.get(EXTERNAL_DATA)
    model = artifact.files.get("model.onnx")
    if not isinstance(data, (bytes, bytearray)) or not isinstance(model, bytes):
        return None
    return external_values(onnx.load_from_string(model), data)


def _new_session(data: bytes, threads: int, weights: Any = None) -> Any:
    import onnxruntime as ort
    from irkit.targets.ort import ort_session

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        so.intra_op_num_threads = threads
    return ort_session(data, weights, so)  # external-data weights read in place from the artifact's buffer


def _artifact_session(artifact: Artifact, threads: int) -> Any:
    """The artifact's own InferenceSession (held by its runner), or a new one from its model bytes."""
    if artifact.runner is not None:
        try:
            sess = inspect.getclosurevars(artifact.runner).nonlocals.get("sess")
        except TypeError:
            sess = None
        if sess is not None and hasattr(sess, "io_binding"):
            return sess
    data = artifact.files.get("model.onnx")
    if not isinstance(data, bytes):
        raise TargetUnavailable("ort session: the artifact has no model.onnx; lower the module with the ort target")
    return _new_session(data, threads, _weights(artifact))


def _host(x: np.ndarray) -> np.ndarray:
    """What onnxruntime accepts: contiguous, bf16 carried as float32 (see targets/ort.py)."""
    a = np.asarray(x)
    if a.dtype.name == "bfloat16":
        a = a.astype(np.float32)
    return np.ascontiguousarray(a)


class OrtSession(Session):
    """Resident OrtValues; aliased outputs updated in place or double-buffered (see the module note)."""

    def __init__(self, target: Target, artifact: Artifact, aliases: Mapping[int, int] | None = None):
        super().__init__(target, artifact, aliases)
        import onnxruntime as ort

        self._ort = ort
        self.sess, self.inplace = _ort_session(artifact, getattr(target, "threads", 0), self.aliases)
        self.in_names = [i.name for i in self.sess.get_inputs()]
        self.out_names = [o.name for o in self.sess.get_outputs()]
        self._vals: dict[int, Any] = {}      # argument -> resident OrtValue
        self._spare: dict[int, Any] = {}     # aliased argument -> the buffer its output is written into
        self._keep: dict[int, Any] = {}      # NumPy arrays that back OrtValues (kept alive)
        self.binding = self.sess.io_binding()

    def _value(self, a: np.ndarray) -> Any:
        return self._ort.OrtValue.ortvalue_from_numpy(a)

    def _has(self, index: int) -> bool:
        return index in self._vals

    def _bind(self, index: int, array: np.ndarray) -> None:
        a = _host(array).copy()
        self._keep[index] = a
        self._vals[index] = self._value(a)

    def _read(self, index: int) -> np.ndarray:
        return np.array(self._vals[index].numpy(), copy=True)

    def _run(self, xs: list[np.ndarray | None], fetch: Sequence[int] | None) -> list[np.ndarray]:
        b = self.binding
        b.clear_binding_inputs()
        b.clear_binding_outputs()
        arg_of = self.aliases
        held = []  # the arrays behind this call's inputs live until the run is over
        for i, x in enumerate(xs):
            if x is not None and i in arg_of.values():
                self._bind(i, x)  # an explicit array for an aliased argument becomes its state
                x = None
            if x is None:
                b.bind_ortvalue_input(self.in_names[i], self._vals[i])
            else:
                held.append(_host(x))
                b.bind_cpu_input(self.in_names[i], held[-1])
        for o, name in enumerate(self.out_names):  # in output order: get_outputs() follows binding order
            a = arg_of.get(o)
            if a is None:
                b.bind_output(name, "cpu")
                continue
            if o in self.inplace:  # the scatter writes the new rows into the argument's own buffer
                b.bind_ortvalue_output(name, self._vals[a])
                continue
            if a not in self._spare:
                buf = np.empty_like(self._keep[a])
                self._keep[-1 - a] = buf
                self._spare[a] = self._value(buf)
            b.bind_ortvalue_output(name, self._spare[a])
        self.sess.run_with_iobinding(b)
        outs = b.get_outputs()
        del held
        for o, a in arg_of.items():  # swap: the written buffer is the state now
            if o in self.inplace:
                continue
            self._vals[a], self._spare[a] = self._spare[a], self._vals[a]
            self._keep[a], self._keep[-1 - a] = self._keep.get(-1 - a), self._keep.get(a)
        want = range(len(self.out_names)) if fetch is None else fetch
        return [np.array(outs[o].numpy(), copy=True) for o in want]

    def close(self) -> None:
        self._vals.clear()
        self._spare.clear()
        self._keep.clear()


def open_ort_session(target: Target, artifact: Artifact, aliases: Mapping[int, int] | None = None) -> Session:
    return OrtSession(target, artifact, aliases)


__all__ = ["OrtSession", "inplace_updates", "open_ort_session"]
