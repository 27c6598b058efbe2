"""Sessions on ``ort``: resident OrtValues bound with onnxruntime's IOBinding.

Design note. Every resident argument (bound weights, an aliased KV cache) is an
``OrtValue`` that lives across calls; a call binds the resident values and the
call's own arrays as inputs, binds each aliased output to a preallocated buffer
of the same type, and runs with ``run_with_iobinding``.  Nothing resident goes
back through NumPy between calls: only the outputs asked for (``fetch``, e.g.
the logits) are copied out.

An aliased output is written into a second buffer of its argument (double
buffering, "ping-pong"): after the call the two swap, so the next call reads
the buffer the last one wrote.  Writing the output straight into its own input
buffer is not safe in general in onnxruntime: the exported graph ends in an
``Identity`` per output, and onnxruntime gives no guarantee that every reader of
the old value has run before a node writes the output buffer.  The cost is one
extra cache-sized buffer per aliased argument; no bytes are copied to the host.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from irkit.targets.base import Artifact, Session, Target, TargetUnavailable


def _ort_session(artifact: Artifact, threads: int) -> Any:
    """The artifact's own InferenceSession (held by its runner), or a new one from its model bytes."""
    if artifact.runner is not None:
        try:
            sess = inspect.getclosurevars(artifact.runner).nonlocals.get("sess")
        except TypeError:
            sess = None
        if sess is not None and hasattr(sess, "io_binding"):
            return sess
    import onnxruntime as ort

    data = artifact.files.get("model.onnx")
    if not isinstance(data, bytes):
        raise TargetUnavailable("ort session: the artifact has no model.onnx; lower the module with the ort target")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        so.intra_op_num_threads = threads
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def _host(x: np.ndarray) -> np.ndarray:
    """What onnxruntime accepts: contiguous, bf16 carried as float32 (see targets/ort.py)."""
    a = np.asarray(x)
    if a.dtype.name == "bfloat16":
        a = a.astype(np.float32)
    return np.ascontiguousarray(a)


class OrtSession(Session):
    """Resident OrtValues, aliased outputs double-buffered (see the module note)."""

    def __init__(self, target: Target, artifact: Artifact, aliases: Mapping[int, int] | None = None):
        super().__init__(target, artifact, aliases)
        import onnxruntime as ort

        self._ort = ort
        self.sess = _ort_session(artifact, getattr(target, "threads", 0))
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
            if a not in self._spare:
                buf = np.empty_like(self._keep[a])
                self._keep[-1 - a] = buf
                self._spare[a] = self._value(buf)
            b.bind_ortvalue_output(name, self._spare[a])
        self.sess.run_with_iobinding(b)
        outs = b.get_outputs()
        del held
        for a in arg_of.values():  # swap: the written buffer is the state now
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


__all__ = ["OrtSession", "open_ort_session"]
