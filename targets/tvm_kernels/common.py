"""Shared plumbing for the hand-scheduled TVM kernels: targets, the Kernel record, build and run.

Design note
-----------
Every kernel builder in this package returns a :class:`Kernel`: one scheduled TensorIR
``PrimFunc`` in destination-passing style (parameters are the inputs, then the outputs), the
target it was scheduled for, and the shapes/dtypes of its parameters. A kernel is scheduled by
hand for one target kind (``llvm`` or ``cuda``); nothing here falls back to TVM's default
unscheduled lowering or to MetaSchedule (the first is two orders of magnitude slow on CPU, the
second crashes in ``tvm.ir.save_json`` in the 0.27 wheel).

Kernels run alone through :func:`run` (CPU only) or together through
:mod:`irkit.targets.tvm_kernels.graph`, which wraps a sequence of them in one Relax module.

The CPU target is detected, never assumed: :func:`host_cpu` asks LLVM (the same library that will
generate the code) which CPU it is running on, so a kernel built on an AVX2-only host never
contains AVX-512 instructions.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np

THREAD_POOL_DEFAULTS = {"TVM_BIND_THREADS": "0", "TVM_THREAD_POOL_SPIN_COUNT": "0"}
"""Environment defaults for TVM's CPU thread pool, set (where the user has not) before the pool
starts: workers are not pinned to cores, and go to sleep as soon as their task is done instead of
spinning.  TVM's defaults (pinned workers, 300000 yield-spins after each task) assume a machine of
its own; on a shared or small one a pinned worker queued behind another process's thread, or the
spinning of one engine's pool against another's, stalls every fork/join — a toy GPT-2 at batch 8 on
2 loaded cores took 32 ms per call with 2 threads against 0.65 ms with 1 (docs/performance.md)."""
for _k, _v in THREAD_POOL_DEFAULTS.items():
    os.environ.setdefault(_k, _v)

import tvm  # noqa: E402 - after the thread-pool defaults above
from tvm import s_tir, te, tirx  # noqa: E402
from tvm.target import Target, codegen  # noqa: E402

Shape = tuple[int, ...]
TargetLike: TypeAlias = str | dict | Target


@dataclass(frozen=True)
class TensorSig:
    """Shape and dtype of one kernel parameter."""

    shape: Shape
    dtype: str

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass
class Kernel:
    """One hand-scheduled TensorIR kernel.

    ``func`` takes ``len(inputs) + len(outputs)`` buffers, inputs first (destination-passing
    style, which is what ``R.call_tir`` expects).
    """

    name: str
    func: tirx.PrimFunc
    target: Target
    inputs: tuple[TensorSig, ...]
    outputs: tuple[TensorSig, ...]
    flops: int = 0
    """Useful floating-point operations (for GF/s), not counting padding."""
    config: dict[str, Any] = field(default_factory=dict)
    """The schedule's knobs (tiles, vector width, threads), for reports."""

    @property
    def is_gpu(self) -> bool:
        """Whether the kernel was scheduled for a CUDA target."""
        return is_gpu(self.target)

    def module(self) -> tvm.IRModule:
        """An IRModule holding only this kernel, under its own name."""
        return tvm.IRModule({self.name: self.func})


@dataclass
class KernelArtifacts:
    """What TVM produced for one kernel, kept for inspection."""

    name: str
    target: str
    scheduled_tir: str
    lowered_tir: str
    llvm_ir: str | None = None
    asm: str | None = None
    cuda_source: str | None = None
    ptx: str | None = None
    ptxas_info: str | None = None
    compile_s: float = 0.0
    ptx_error: str | None = None


# --------------------------------------------------------------------------- targets


@functools.cache
def host_cpu() -> str:
    """The host CPU name as LLVM sees it (e.g. ``znver3``, ``znver4``, ``skylake-avx512``).

    Asking LLVM rather than hard-coding matters: a VM can expose fewer ISA extensions than the
    silicon has (an EPYC reported as Zen 4 may run as ``znver3`` without AVX-512), and code built
    for the wrong ``mcpu`` dies with SIGILL.
    """
    name = str(codegen.llvm_get_system_cpu())
    return name if name and name != "generic" else "x86-64-v3"


def cpu_target(mcpu: str | None = None) -> Target:
    """An LLVM target for this machine (``mcpu`` detected unless given)."""
    return Target({"kind": "llvm", "mcpu": mcpu or host_cpu()})


def cuda_target(arch: str = "sm_90") -> Target:
    """A CUDA target for ``arch``; building it needs no GPU (only running does)."""
    return Target({"kind": "cuda", "arch": arch})


def as_target(target: TargetLike | None) -> Target:
    """Normalise ``None``/``"llvm"``/``"cpu"``/``"cuda"``/dict/Target to a Target.

    ``"llvm"`` without an ``mcpu`` gets the detected host CPU, because a bare ``llvm`` target
    generates baseline x86-64 (SSE2) code and loses most of the SIMD width.
    """
    if target is None or target in ("llvm", "cpu"):
        return cpu_target()
    if target == "cuda":
        return cuda_target()
    if isinstance(target, dict):
        if target.get("kind") == "llvm" and "mcpu" not in target:
            target = {**target, "mcpu": host_cpu()}
        return Target(target)
    if isinstance(target, str):
        return Target(target)
    return target


def is_gpu(target: Target) -> bool:
    """Whether ``target`` is a CUDA target (the only GPU kind scheduled here)."""
    return target.kind.name == "cuda"


def cuda_arch(target: Target) -> str:
    """The ``sm_XX`` of a CUDA target (``sm_90`` if unset)."""
    arch = target.attrs.get("arch", None)
    return str(arch) if arch else "sm_90"


def has_avx512(target: Target) -> bool:
    """Whether the LLVM target can use 512-bit vectors."""
    try:
        return bool(codegen.llvm_cpu_has_features(["avx512f"], target))
    except Exception:  # noqa: BLE001 - non-x86 LLVM targets raise assorted TVM errors: no AVX-512
        return False


def simd_lanes(target: Target, dtype: str = "float32") -> int:
    """Vector lanes of ``dtype`` in one SIMD register of ``target``.

    ``llvm_get_vector_width`` answers 512 even on an AVX2-only Zen 3 in this wheel, so ask for
    the feature itself.
    """
    bits = 512 if has_avx512(target) else 256
    return max(1, bits // tvm.DataType(dtype).bits)


def simd_registers(target: Target) -> int:
    """Architectural vector registers (32 with AVX-512, 16 with AVX2)."""
    return 32 if has_avx512(target) else 16


# --------------------------------------------------------------------------- building kernels


def make_kernel(
    name: str,
    inputs: Sequence[te.Tensor],
    outputs: Sequence[te.Tensor],
    target: Target,
    schedule: Callable[[s_tir.Schedule], None],
    *,
    flops: int = 0,
    config: dict[str, Any] | None = None,
) -> Kernel:
    """Turn a TE definition into a scheduled :class:`Kernel`.

    ``schedule`` mutates a ``tvm.s_tir.Schedule`` of the PrimFunc made from ``inputs + outputs``.
    """
    func = te.create_prim_func([*inputs, *outputs])
    sch = s_tir.Schedule(func)
    schedule(sch)
    from .tensorize import apply_marked  # late import: tensorize imports nothing from here

    scheduled = apply_marked(sch.mod["main"]).with_attr("global_symbol", name)
    return Kernel(
        name=name,
        func=scheduled,
        target=target,
        inputs=tuple(TensorSig(tuple(int(d) for d in t.shape), str(t.dtype)) for t in inputs),
        outputs=tuple(TensorSig(tuple(int(d) for d in t.shape), str(t.dtype)) for t in outputs),
        flops=flops,
        config=dict(config or {}),
    )


def compile_kernel(kernel: Kernel) -> tuple[tvm.runtime.Executable, float]:
    """Compile one kernel alone; returns the executable and the compile time in seconds."""
    start = time.perf_counter()
    lib = tvm.compile(kernel.module(), target=kernel.target)
    return lib, time.perf_counter() - start


def to_tvm(array: np.ndarray, device: Any = None) -> Any:
    """A numpy array as a TVM runtime tensor (bf16 through ml_dtypes)."""
    # np.ascontiguousarray makes a 0-d array 1-d; the reshape keeps scalars scalars
    return tvm.runtime.tensor(np.ascontiguousarray(array).reshape(np.shape(array)), device or tvm.cpu())


def run(
    kernel: Kernel, *arrays: np.ndarray, lib: tvm.runtime.Executable | None = None
) -> list[np.ndarray]:
    """Run a CPU kernel on numpy inputs; returns its outputs as numpy arrays."""
    if kernel.is_gpu:
        raise RuntimeError(f"kernel {kernel.name} targets CUDA; this runner executes CPU kernels")
    check_inputs(kernel, arrays)
    lib = lib or compile_kernel(kernel)[0]
    dev = tvm.cpu()
    args = [to_tvm(a, dev) for a in arrays]
    outs = [tvm.runtime.empty(o.shape, o.dtype, dev) for o in kernel.outputs]
    lib[kernel.name](*args, *outs)
    return [o.numpy() for o in outs]


def check_inputs(kernel: Kernel, arrays: Sequence[np.ndarray]) -> None:
    """Raise a readable error when ``arrays`` do not match the kernel's inputs."""
    if len(arrays) != len(kernel.inputs):
        raise ValueError(
            f"kernel {kernel.name} takes {len(kernel.inputs)} inputs, got {len(arrays)}"
        )
    for i, (a, sig) in enumerate(zip(arrays, kernel.inputs, strict=True)):
        if tuple(a.shape) != sig.shape or str(a.dtype) != sig.dtype:
            raise ValueError(
                f"kernel {kernel.name} input {i}: expected {sig.dtype}{list(sig.shape)}, "
                f"got {a.dtype}{list(a.shape)}"
            )


def time_kernel(
    kernel: Kernel,
    *arrays: np.ndarray,
    lib: tvm.runtime.Executable | None = None,
    number: int = 5,
    repeat: int = 7,
) -> list[float]:
    """Per-call seconds of a CPU kernel, one figure per repeat (each the mean of ``number``)."""
    lib = lib or compile_kernel(kernel)[0]
    dev = tvm.cpu()
    args = [to_tvm(a, dev) for a in arrays]
    outs = [tvm.runtime.empty(o.shape, o.dtype, dev) for o in kernel.outputs]
    evaluator = lib.mod.time_evaluator(kernel.name, dev, number=number, repeat=repeat)
    return list(evaluator(*args, *outs).results)


# --------------------------------------------------------------------------- inspection


def lower_tir(mod: tvm.IRModule, target: Target) -> tvm.IRModule:
    """Apply TVM's default TIR lowering pipeline (what ``tvm.compile`` runs before codegen)."""
    host = target if not is_gpu(target) else Target("llvm")
    mod = tirx.transform.BindTarget(target.with_host(host))(mod)
    pipeline, _, _ = tirx.get_tir_pipeline("default")
    with tvm.transform.PassContext(opt_level=3):
        return pipeline(mod)


def inspect(kernel: Kernel, *, ptx: bool = True, ptxas: bool = True) -> KernelArtifacts:
    """Compile one kernel and collect its TIR, LLVM IR and assembly (CPU) or CUDA source and PTX."""
    lib, seconds = compile_kernel(kernel)
    art = KernelArtifacts(
        name=kernel.name,
        target=str(kernel.target),
        scheduled_tir=kernel.func.script(),
        lowered_tir=lower_tir(kernel.module(), kernel.target).script(),
        compile_s=seconds,
    )
    if kernel.is_gpu:
        art.cuda_source = cuda_source_of(lib)
        if ptx:
            _attach_ptx(art, cuda_arch(kernel.target), ptxas)
    else:
        art.llvm_ir = lib.mod.inspect_source("ll")
        art.asm = lib.mod.inspect_source("asm")
    return art


def cuda_source_of(lib: tvm.runtime.Executable | tvm.runtime.Module) -> str:
    """The CUDA C++ text of every device module inside a built library."""
    mod = lib.mod if hasattr(lib, "mod") else lib
    texts: list[str] = []

    def visit(m: Any) -> None:
        if m.kind == "cuda":
            texts.append(m.inspect_source("cuda"))
        for sub in m.imports:
            visit(sub)

    visit(mod)
    return "\n".join(texts)


def _attach_ptx(art: KernelArtifacts, arch: str, ptxas: bool = True) -> None:
    try:
        art.ptx, art.ptxas_info = cuda_to_ptx(art.cuda_source or "", arch, ptxas=ptxas)
    except (RuntimeError, FileNotFoundError) as err:
        art.ptx_error = str(err)


def find_nvcc() -> str | None:
    """Path of ``nvcc`` (``$CUDA_HOME/bin`` first, then ``PATH``), or None."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
        return os.path.join(home, "bin", "nvcc")
    return shutil.which("nvcc")


def cuda_to_ptx(
    source: str, arch: str = "sm_90", *, ptxas: bool = True, timeout_s: float = 300
) -> tuple[str, str]:
    """Compile CUDA source to PTX with nvcc (no GPU needed) and run ptxas on it.

    Returns ``(ptx_text, ptxas_verbose)``; the ptxas report (``ptxas=True``) gives registers,
    spills and shared memory per kernel, which is how a schedule is checked against the SM limits
    without a GPU. The CUDA source goes through nvcc's front end once: ptxas assembles the PTX
    just written (compiling the ``.cu`` again to a cubin parsed and optimised it a second time,
    half of the whole run).
    TVM's own build path compiles through NVRTC to a cubin and does not keep the PTX, hence the
    separate nvcc run.
    """
    nvcc = find_nvcc()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found: set CUDA_HOME or put nvcc on PATH")
    with tempfile.TemporaryDirectory(prefix="irkit_cuda_") as tmp:
        cu = os.path.join(tmp, "kernel.cu")
        out = os.path.join(tmp, "kernel.ptx")
        with open(cu, "w") as f:
            f.write(source)
        gen = f"compute_{arch.removeprefix('sm_')}"
        cmd = [nvcc, "-ptx", f"-arch={gen}", "-O3", "-std=c++17", cu, "-o", out]
        proc = _run_nvcc(cmd, timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc -ptx failed ({' '.join(cmd[1:4])}):\n{proc.stderr[-4000:]}")
        with open(out) as f:
            ptx_text = f.read()
        if not ptxas:
            return ptx_text, ""
        cubin = os.path.join(tmp, "kernel.cubin")
        cmd = [
            nvcc,
            "-cubin",
            f"-arch={arch}",
            "-Xptxas",
            "-v",
            out,
            "-o",
            cubin,
        ]
        proc = _run_nvcc(cmd, timeout_s)
        info = proc.stderr if proc.returncode == 0 else f"ptxas failed:\n{proc.stderr[-4000:]}"
    return ptx_text, info


def _run_nvcc(cmd: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run nvcc; a timeout or a kill by a signal becomes a RuntimeError that says so.

    A killed nvcc (the OOM killer on a loaded machine) returns a negative status and an empty
    stderr; say which signal instead of reporting "nvcc failed" with nothing after it.
    """
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise RuntimeError(
            f"nvcc {cmd[1]} did not finish in {timeout_s:.0f} s (machine overloaded?); "
            "pass a larger timeout_s"
        ) from None
    if proc.returncode < 0:
        proc.stderr = f"nvcc killed by signal {-proc.returncode}\n{proc.stderr}"
    return proc


# --------------------------------------------------------------------------- small helpers


def dtype_of(expr: tirx.PrimExpr) -> str:
    """The dtype of a TIR expression (0.27 exposes it as ``expr.ty``, a PrimType); a
    ``TensorSlice`` (``C[i, j]`` in a te.compute body) has its tensor's dtype."""
    if isinstance(expr, te.TensorSlice):
        return str(expr.tensor.dtype)
    return str(expr.ty)


def f32(value: float) -> tirx.PrimExpr:
    """A float32 constant."""
    return tirx.const(value, "float32")


LOWEST_F32 = float(np.finfo(np.float32).min)


def softmax_weight(s: tirx.PrimExpr, m: tirx.PrimExpr, *, cpu: bool = False) -> tirx.PrimExpr:
    """An online softmax's ``exp(s - m)`` for score ``s`` against the running row max ``m``, with
    the float64 reference's edges (``ik.attention``: the max of a row is taken as 0 where it is not
    finite, and a row whose sum is 0 is zeros): exactly 0 for a masked key (``s == -inf``, which
    :func:`fast_exp` would clamp to ~0); +Inf for a score of +Inf (``exp(inf - 0)``; the row then
    comes out NaN, Inf/Inf); NaN for a NaN score (the row is NaN). ``fast_exp`` alone clamps both
    of the last two to finite weights.

    ``cpu``: test NaN on the bits (:func:`is_nan_bits`). TVM's LLVM vectoriser gives up on a
    ``Select`` over ``isnan`` next to the exp polynomial and scalarises the whole loop (eight
    times the instructions, seen in the assembly); integer compares vectorise. (``z != z`` would
    too, but TVM's simplifier folds it to false.) GPU kernels keep ``isnan``."""
    inf = tirx.const(math.inf, "float32")
    z = s - m
    nan = is_nan_bits(z) if cpu else tirx.isnan(z)
    return tirx.Select(s == -inf, f32(0.0), tirx.Select(s == inf, inf, tirx.Select(nan, z, fast_exp(z))))


def is_nan_bits(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """``isnan(x)`` for float32 from its bits: exponent all ones and a non-zero mantissa."""
    bits = tirx.reinterpret("int32", x) & tirx.const(0x7FFFFFFF, "int32")
    return bits > tirx.const(0x7F800000, "int32")


def fast_exp(x: tirx.PrimExpr) -> tirx.PrimExpr:
    """exp(x) for float32 as straight-line arithmetic that LLVM and NVCC vectorise.

    ``tirx.exp`` lowers to a scalar ``expf`` libm call per lane on x86 (seen in the assembly),
    which dominates a softmax. This is the Cephes ``expf`` scheme: range reduction by
    ``n = round(x / ln 2)``, a degree-6 polynomial on the remainder, and ``2^n`` built from the
    exponent bits; relative error about 1e-7 on [-87, 88]. Inputs below -87.7 return 0 (no
    denormals), so ``fast_exp(-inf) == 0``. NaN inputs are clamped (the min/max lose NaN),
    so callers that must propagate NaN test for it themselves.
    """
    x = tirx.max(tirx.min(x, f32(88.3762626647949)), f32(-88.0))
    fx = tirx.floor(x * f32(1.44269504088896341) + f32(0.5))
    r = x - fx * f32(0.693359375) + fx * f32(2.12194440e-4)
    z = r * r
    y = f32(1.9875691500e-4)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        y = y * r + f32(c)
    y = y * z + r + f32(1.0)
    bits = tirx.shift_left(fx.astype("int32") + tirx.const(127, "int32"), tirx.const(23, "int32"))
    return y * tirx.reinterpret("float32", bits)


def round_up(x: int, m: int) -> int:
    """Smallest multiple of ``m`` that is >= ``x``."""
    return (x + m - 1) // m * m


def prod(xs: Sequence[int]) -> int:
    """Product of ints (1 for an empty sequence)."""
    out = 1
    for x in xs:
        out *= int(x)
    return out


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """NumPy broadcasting of static shapes, with a readable error."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError as err:
        raise ValueError(f"shapes {[list(s) for s in shapes]} do not broadcast") from err


def broadcast_index(shape: Sequence[int], out_index: Sequence[Any]) -> list[Any]:
    """Index into a tensor of ``shape`` broadcast to an output indexed by ``out_index``.

    Leading output dims the tensor lacks are dropped; size-1 dims read index 0.
    """
    offset = len(out_index) - len(shape)
    return [0 if int(d) == 1 else out_index[offset + i] for i, d in enumerate(shape)]


def split_vector(sch: s_tir.Schedule, loop: Any, extent: int, lanes: int) -> Any:
    """Vectorise the innermost ``loop`` by the largest divisor of ``extent`` up to ``lanes``.

    Splitting by a non-divisor would add a bounds predicate, which LLVM cannot vectorise, so
    the vector length backs off to a divisor (scalar when the extent is odd).
    """
    vec = largest_divisor(extent, lanes)
    if vec <= 1:
        return loop
    outer, inner = sch.split(loop, [None, vec])
    sch.vectorize(inner)
    return outer


def largest_divisor(n: int, at_most: int) -> int:
    """Largest divisor of ``n`` that is <= ``at_most``."""
    for d in range(min(n, at_most), 0, -1):
        if n % d == 0:
            return d
    return 1


def loop_extent(sch: s_tir.Schedule, loop: Any) -> int:
    """Static extent of a schedule loop."""
    return int(sch.get(loop).extent)


def schedule_elementwise_cpu(
    sch: s_tir.Schedule, block: Any, lanes: int, *, parallel_min: int = 1 << 17
) -> None:
    """Flatten, vectorise and parallelise one spatial block on CPU.

    The loops are fused into one, the inner part vectorised, and the outer part parallelised
    only when the block is large enough that fork/join costs less than it saves.
    """
    loops = sch.get_loops(block)
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    extent = loop_extent(sch, fused)
    outer = split_vector(sch, fused, extent, lanes)
    if extent >= parallel_min and outer is not fused:
        chunk = loop_extent(sch, outer)
        if chunk > 1:
            sch.parallel(outer)
    elif extent >= parallel_min:
        sch.parallel(fused)


def schedule_elementwise_gpu(
    sch: s_tir.Schedule, block: Any, threads: int = 256, *, vec: int = 1
) -> None:
    """Bind one spatial block to a 1-D grid of ``threads``-wide CUDA blocks.

    ``vec`` elements per thread are vectorised when the extent allows, so f16/bf16 tensors move
    as wider loads.
    """
    loops = sch.get_loops(block)
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    extent = loop_extent(sch, fused)
    vec = largest_divisor(extent, vec)
    if vec > 1:
        fused, inner = sch.split(fused, [None, vec])
        sch.vectorize(inner)
        extent //= vec
    tx = min(threads, extent)
    bx, tx_loop = sch.split(fused, [None, tx])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx_loop, "threadIdx.x")
