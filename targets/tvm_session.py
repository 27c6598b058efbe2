"""Sessions on ``tvm-llvm`` (and ``tvm-cuda`` where a GPU runs it): resident TVM tensors.

Design note. The session calls the artifact's Relax ``VirtualMachine`` with TVM
runtime tensors.  Bound arguments (weights) and aliased arguments (a KV cache)
are converted once and stay TVM tensors; an aliased output (a TVM tensor the VM
returned) becomes the argument of the next call as it is, so the cache never
travels through NumPy between steps.  Only the outputs asked for (``fetch``,
e.g. the logits) are copied out, through DLPack where the dtype allows.

In-place update: the Relax function the lowering builds is pure, so the
updated cache is a fresh tensor that the VM allocates each call (a cache-sized
copy per step on top of the write of the new rows).  Writing into the argument
needs ``R.call_tir_inplace`` on the update kernel and the argument donated;
the lowering in targets/tvm.py emits ``ik.dynamic_update_slice`` and scatters
through TOPI (out-of-place), so that is not done; docs/generate.md records the
measured cost.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from irkit.targets.base import Artifact, Session, Target


def _vm_of(artifact: Artifact) -> Any:
    """The VirtualMachine the artifact's runner calls (None when the artifact cannot run here)."""
    if artifact.runner is None:
        return None
    try:
        return inspect.getclosurevars(artifact.runner).nonlocals.get("vm")
    except TypeError:
        return None


_DLPACK_DTYPES = frozenset({"float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint64", "uint32",
                            "uint16", "uint8", "bool"})


def _aligned_copy(a: np.ndarray) -> Any:
    """A CPU TVM tensor holding a copy of ``a``: a 64-byte-aligned NumPy buffer handed over through
    DLPack (TVM requires the alignment), about a tenth of ``tvm.runtime.tensor(a)``'s cost.  A copy,
    not a view: the VM may update an argument in place, and the caller's array must not change."""
    import tvm

    raw = np.empty(a.nbytes + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    buf = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    np.copyto(buf, a)
    return tvm.runtime.from_dlpack(buf)


class TvmSession(Session):
    """Resident TVM tensors; aliased outputs fed back without a host round trip."""

    def __init__(self, target: Target, artifact: Artifact, vm: Any, aliases: Mapping[int, int] | None = None):
        super().__init__(target, artifact, aliases)
        import tvm

        self.vm = vm
        self.on_cpu = getattr(target, "kind", "llvm") == "llvm"
        self.device = tvm.cpu() if self.on_cpu else tvm.cuda(0)
        self._vals: dict[int, Any] = {}

    def _tensor(self, a: np.ndarray) -> Any:
        from irkit.targets.tvm_kernels.common import to_tvm

        a = np.asarray(a)
        if self.on_cpu and a.size and a.dtype.name in _DLPACK_DTYPES:
            return _aligned_copy(a)
        return to_tvm(a, self.device)

    def _has(self, index: int) -> bool:
        return index in self._vals

    def _bind(self, index: int, array: np.ndarray) -> None:
        self._vals[index] = self._tensor(array)

    def _read(self, index: int) -> np.ndarray:
        return self._vals[index].numpy()

    def _run(self, xs: list[np.ndarray | None], fetch: Sequence[int] | None) -> list[np.ndarray]:
        from irkit.targets.tvm import _host_array

        aliased = set(self.aliases.values())
        args = []
        for i, x in enumerate(xs):
            if x is None:
                args.append(self._vals[i])
            else:
                t = self._tensor(x)
                if i in aliased:
                    self._vals[i] = t
                args.append(t)
        out = self.vm["main"](*args)
        outs = list(out) if isinstance(out, (tuple, list)) or type(out).__name__ in ("Array", "ADT", "Tuple") \
            else [out]
        for o, a in self.aliases.items():
            self._vals[a] = outs[o]
        want = range(len(outs)) if fetch is None else fetch
        if self.on_cpu:  # CPU: zero-copy where DLPack carries the dtype
            return [np.array(_host_array(outs[o]), copy=True) for o in want]
        return [outs[o].numpy() for o in want]

    def close(self) -> None:
        self._vals.clear()


def open_tvm_session(target: Target, artifact: Artifact, aliases: Mapping[int, int] | None = None) -> Session:
    """A :class:`TvmSession` where the artifact runs here, else the functional base session (which
    reports why it cannot run on the first call)."""
    vm = _vm_of(artifact)
    if vm is None:
        return Session(target, artifact, aliases)
    return TvmSession(target, artifact, vm, aliases)


__all__ = ["TvmSession", "open_tvm_session"]
