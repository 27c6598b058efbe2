"""Hand-scheduled TVM kernels and the glue to run a sequence of them as one Relax module.

The ``tvm-llvm`` and ``tvm-cuda`` targets lower IR ops to these builders; each returns a
:class:`Kernel` (a scheduled TensorIR PrimFunc plus its signature and target).

Modules (the builder functions live in them, e.g. ``tvm_kernels.matmul.matmul``; they are not
re-exported here because several share their module's name):

- :mod:`.matmul` -- batched, broadcasting matmul with fused bias + activation; CPU
  BLIS-style packing and register tiling, CUDA shared-memory tiling and WMMA tensor cores.
- :mod:`.attention` -- fused online-softmax attention (GQA, causal, additive bias).
- :mod:`.elementwise` -- one kernel from an expression tree of elementwise/broadcast ops.
- :mod:`.reduce` -- softmax, layer_norm, rms_norm and sum/mean/max/min reductions.
- :mod:`.movement` -- reshape, transpose, slice, concat, gather, pad.
- :mod:`.conv` -- conv2d (NCHW/OIHW, groups).
- :mod:`.graph` -- Relax module assembly, compile, run (CPU), CUDA source/PTX.
- :mod:`.common` -- targets, the Kernel record, build/run/inspect helpers.
- :mod:`.tensorize` -- WMMA tensorization that works around ``Schedule.tensorize``
  crashing in TVM 0.27.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .common import (
        Kernel,
        KernelArtifacts,
        TensorSig,
        compile_kernel,
        cpu_target,
        cuda_target,
        cuda_to_ptx,
        find_nvcc,
        host_cpu,
        inspect,
        run,
        time_kernel,
    )
    from .graph import (
        CompiledGraph,
        CudaGraphArtifacts,
        Step,
        build_module,
        compile_graph,
        cuda_artifacts,
        kernel_artifacts,
        run_graph,
    )

# The names above load on first use (PEP 562): importing this package, and so the tvm target's
# rules, does not import TVM until a kernel is built, so commands that only name targets
# (sweep planning, list-targets) start without TVM's seconds of import time.
_LAZY = {
    "Kernel": "common",
    "KernelArtifacts": "common",
    "TensorSig": "common",
    "compile_kernel": "common",
    "cpu_target": "common",
    "cuda_target": "common",
    "cuda_to_ptx": "common",
    "find_nvcc": "common",
    "host_cpu": "common",
    "inspect": "common",
    "run": "common",
    "time_kernel": "common",
    "CompiledGraph": "graph",
    "CudaGraphArtifacts": "graph",
    "Step": "graph",
    "build_module": "graph",
    "compile_graph": "graph",
    "cuda_artifacts": "graph",
    "kernel_artifacts": "graph",
    "run_graph": "graph",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


__all__ = [
    "CompiledGraph",
    "CudaGraphArtifacts",
    "Kernel",
    "KernelArtifacts",
    "Step",
    "TensorSig",
    "build_module",
    "compile_graph",
    "compile_kernel",
    "cpu_target",
    "cuda_artifacts",
    "cuda_target",
    "cuda_to_ptx",
    "find_nvcc",
    "host_cpu",
    "inspect",
    "kernel_artifacts",
    "run",
    "run_graph",
    "time_kernel",
]
