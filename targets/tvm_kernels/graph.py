"""Run a sequence of hand-scheduled kernels as one TVM Relax module.

Design note
-----------
A graph here is what the IR lowering produces after fusion and tiling: named values and a
list of :class:`Step` s, each a :class:`~.common.Kernel` with the names of the values it reads
and writes. :func:`build_module` turns that into a Relax ``IRModule`` whose ``main`` calls
every kernel with ``R.call_tir`` in order (the kernels are added as PrimFuncs under their own
names, marked ``tirx.is_scheduled`` so nothing re-schedules them).

:func:`compile_graph` builds it with ``tvm.compile`` for the kernels' target. The Relax
pipeline is the tail of TVM's default build pipeline (call_tir lowering, static memory
planning, VM shape lowering) *without* ``LegalizeOps``/``FuseOps``/``FuseTIR``: the module has
no high-level ops to legalise, and TIR fusion would merge and re-derive the scheduled PrimFuncs,
dropping their schedules. The result runs on the Relax VM with numpy in and numpy out (CPU),
or, for CUDA, yields the CUDA source and the PTX nvcc makes from it (no GPU needed).

Per-kernel artifacts (scheduled and lowered TIR, LLVM IR and assembly, or CUDA source and PTX,
each with its compile time) come from :func:`~.common.inspect`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.target import Target

from .common import (
    Kernel,
    KernelArtifacts,
    TensorSig,
    cuda_arch,
    cuda_source_of,
    cuda_to_ptx,
    inspect,
    is_gpu,
    to_tvm,
)


@dataclass(frozen=True)
class Step:
    """One kernel call: reads ``inputs`` (value names, in the kernel's parameter order) and
    defines ``outputs``."""

    kernel: Kernel
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def __init__(self, kernel: Kernel, inputs: Sequence[str], outputs: Sequence[str]) -> None:
        object.__setattr__(self, "kernel", kernel)
        object.__setattr__(self, "inputs", tuple(inputs))
        object.__setattr__(self, "outputs", tuple(outputs))


def _as_steps(steps: Sequence[Step | tuple[Kernel, Sequence[str], Sequence[str]]]) -> list[Step]:
    return [s if isinstance(s, Step) else Step(*s) for s in steps]


def value_types(
    steps: Sequence[Step], graph_inputs: Sequence[str], graph_outputs: Sequence[str]
) -> dict[str, TensorSig]:
    """Shape/dtype of every value, checked: each value defined once, used after definition,
    with the same type at every use."""
    types: dict[str, TensorSig] = {}
    defined = set()
    for step in steps:
        k = step.kernel
        if len(step.inputs) != len(k.inputs) or len(step.outputs) != len(k.outputs):
            raise ValueError(
                f"step {k.name}: kernel takes {len(k.inputs)} inputs / {len(k.outputs)} outputs, "
                f"step names {len(step.inputs)} / {len(step.outputs)}"
            )
        for name, sig in zip(step.inputs, k.inputs, strict=True):
            if name not in graph_inputs and name not in defined:
                raise ValueError(f"step {k.name} reads {name!r} before any step defines it")
            if name in types and types[name] != sig:
                raise ValueError(
                    f"value {name!r} is {types[name].dtype}{list(types[name].shape)} but "
                    f"{k.name} expects {sig.dtype}{list(sig.shape)}"
                )
            types[name] = sig
        for name, sig in zip(step.outputs, k.outputs, strict=True):
            if name in defined or name in graph_inputs:
                raise ValueError(f"value {name!r} is defined twice (second time by {k.name})")
            defined.add(name)
            types[name] = sig
    for name in graph_inputs:
        if name not in types:
            raise ValueError(f"graph input {name!r} is not used by any step")
    for name in graph_outputs:
        if name not in types:
            raise ValueError(f"graph output {name!r} is neither an input nor defined by a step")
    return types


def build_module(
    steps: Sequence[Step | tuple[Kernel, Sequence[str], Sequence[str]]],
    graph_inputs: Sequence[str],
    graph_outputs: Sequence[str],
) -> tvm.IRModule:
    """The Relax module: ``main(*graph_inputs)`` calls each kernel with ``R.call_tir``."""
    steps = _as_steps(steps)
    types = value_types(steps, graph_inputs, graph_outputs)
    seen: dict[str, int] = {}
    bb = relax.BlockBuilder()
    params = [
        relax.Var(name, relax.TensorType(list(types[name].shape), types[name].dtype))
        for name in graph_inputs
    ]
    with bb.function("main", params):
        with bb.dataflow():
            env: dict[str, Any] = dict(zip(graph_inputs, params, strict=True))
            for step in steps:
                k = step.kernel
                # unique symbol per kernel instance (two layers may use the same builder name)
                count = seen.get(k.name, 0)
                seen[k.name] = count + 1
                fname = k.name if count == 0 else f"{k.name}_{count}"
                func = k.func.with_attr("global_symbol", fname).with_attr("tirx.is_scheduled", True)
                gv = bb.add_func(func, fname)
                out_types = [relax.TensorType(list(o.shape), o.dtype) for o in k.outputs]
                call = relax.call_tir(gv, [env[n] for n in step.inputs], out_types)
                res = bb.emit(call, name_hint=step.outputs[0] if len(step.outputs) == 1 else fname)
                if len(step.outputs) == 1:
                    env[step.outputs[0]] = res
                else:
                    for i, name in enumerate(step.outputs):
                        env[name] = bb.emit(relax.TupleGetItem(res, i), name_hint=name)
            outs = [env[n] for n in graph_outputs]
            ret = bb.emit_output(relax.Tuple(outs) if len(outs) > 1 else outs[0])
        bb.emit_func_output(ret)
    return bb.get()


def relax_pipeline() -> tvm.transform.Pass:
    """TVM's default Relax build pipeline minus legalisation and fusion (see module note)."""
    t = relax.transform
    return tvm.transform.Sequential(
        [
            t.ToNonDataflow(),
            t.RemovePurityChecking(),
            t.CallTIRRewrite(),
            t.StaticPlanBlockMemory(),
            t.LowerAllocTensor(),
            t.KillAfterLastUse(),
            t.LowerRuntimeBuiltin(),
            t.ComputePrimValue(),
            t.VMShapeLower(),
            t.AttachGlobalSymbol(),
        ]
    )


@dataclass
class CompiledGraph:
    """A compiled graph: run it (CPU) or read what was generated."""

    module: tvm.IRModule
    executable: Any
    target: Target
    graph_inputs: tuple[str, ...]
    graph_outputs: tuple[str, ...]
    input_types: dict[str, TensorSig]
    compile_s: float
    steps: list[Step] = field(default_factory=list)
    _vm: Any = None

    def run(self, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Execute on the Relax VM (CPU targets); inputs by position or by name."""
        if is_gpu(self.target):
            raise RuntimeError(
                "this graph was built for CUDA; running it needs a GPU and a CUDA runtime"
            )
        arrays = (
            [inputs[n] for n in self.graph_inputs] if isinstance(inputs, Mapping) else list(inputs)
        )
        if len(arrays) != len(self.graph_inputs):
            raise ValueError(f"graph takes {len(self.graph_inputs)} inputs, got {len(arrays)}")
        for name, a in zip(self.graph_inputs, arrays, strict=True):
            sig = self.input_types[name]
            if tuple(a.shape) != sig.shape or str(a.dtype) != sig.dtype:
                raise ValueError(
                    f"graph input {name!r}: expected {sig.dtype}{list(sig.shape)}, got {a.dtype}{list(a.shape)}"
                )
        dev = tvm.cpu()
        if self._vm is None:
            self._vm = relax.VirtualMachine(self.executable, dev)
        res = self._vm["main"](*[to_tvm(a, dev) for a in arrays])
        if len(self.graph_outputs) == 1:
            return [res.numpy()]
        return [r.numpy() for r in res]

    def time(
        self, inputs: Sequence[np.ndarray], *, number: int = 5, repeat: int = 5
    ) -> list[float]:
        """Seconds per graph execution, one figure per repeat."""
        self.run(inputs)
        dev = tvm.cpu()
        args = [to_tvm(a, dev) for a in inputs]
        out = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                self._vm["main"](*args)
            out.append((time.perf_counter() - start) / number)
        return out

    def cuda_source(self) -> str:
        """CUDA C++ of every kernel in the module (CUDA targets)."""
        return cuda_source_of(self.executable)

    def ptx(self) -> str:
        """PTX compiled from :meth:`cuda_source` by nvcc (raises if nvcc is missing)."""
        return cuda_to_ptx(self.cuda_source(), cuda_arch(self.target))[0]


def compile_graph(
    steps: Sequence[Step | tuple[Kernel, Sequence[str], Sequence[str]]],
    graph_inputs: Sequence[str],
    graph_outputs: Sequence[str],
) -> CompiledGraph:
    """Build the Relax module and compile it for the kernels' (common) target."""
    steps = _as_steps(steps)
    if not steps:
        raise ValueError("a graph needs at least one step")
    target = steps[0].kernel.target
    for s in steps[1:]:
        if s.kernel.target.kind.name != target.kind.name:
            raise ValueError(
                f"all kernels must share a target kind; {s.kernel.name} is {s.kernel.target.kind.name}, "
                f"{steps[0].kernel.name} is {target.kind.name}"
            )
    mod = build_module(steps, graph_inputs, graph_outputs)
    types = value_types(steps, graph_inputs, graph_outputs)
    build_target = target.with_host(Target("llvm")) if is_gpu(target) else target
    start = time.perf_counter()
    exe = tvm.compile(mod, target=build_target, relax_pipeline=relax_pipeline())
    seconds = time.perf_counter() - start
    return CompiledGraph(
        module=mod,
        executable=exe,
        target=target,
        graph_inputs=tuple(graph_inputs),
        graph_outputs=tuple(graph_outputs),
        input_types={n: types[n] for n in graph_inputs},
        compile_s=seconds,
        steps=steps,
    )


def run_graph(
    steps: Sequence[Step | tuple[Kernel, Sequence[str], Sequence[str]]],
    graph_inputs: Sequence[str],
    graph_outputs: Sequence[str],
    inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray],
) -> list[np.ndarray]:
    """Compile and run on CPU in one call."""
    return compile_graph(steps, graph_inputs, graph_outputs).run(inputs)


@dataclass
class CudaGraphArtifacts:
    """What a CUDA build of a graph produced (nothing is run)."""

    cuda_source: str
    ptx: str | None
    ptxas_info: str | None
    ptx_error: str | None
    compile_s: float
    relax_module: str


def cuda_artifacts(
    steps: Sequence[Step | tuple[Kernel, Sequence[str], Sequence[str]]],
    graph_inputs: Sequence[str],
    graph_outputs: Sequence[str],
    *,
    ptx: bool = True,
) -> CudaGraphArtifacts:
    """Build a graph of CUDA kernels and return its CUDA source and PTX (no GPU needed)."""
    g = compile_graph(steps, graph_inputs, graph_outputs)
    if not is_gpu(g.target):
        raise ValueError("cuda_artifacts wants kernels built for a CUDA target")
    src = g.cuda_source()
    text = info = err = None
    if ptx:
        try:
            text, info = cuda_to_ptx(src, cuda_arch(g.target))
        except (RuntimeError, FileNotFoundError) as e:
            err = str(e)
    return CudaGraphArtifacts(src, text, info, err, g.compile_s, g.module.script())


def kernel_artifacts(
    steps: Sequence[Step | tuple[Kernel, Sequence[str], Sequence[str]]], *, ptx: bool = True
) -> list[KernelArtifacts]:
    """Per-kernel TIR / LLVM IR / assembly / CUDA / PTX, each kernel compiled alone and timed."""
    return [inspect(s.kernel, ptx=ptx) for s in _as_steps(steps)]
