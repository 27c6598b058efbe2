"""XLA compile plumbing for the ``xla-cpu``, ``xla-gpu`` and ``xla-tpu-*`` targets.

Design note
-----------
A target lowers irkit IR to a JAX-traceable function; this module takes it from
there. ``compile_xla(fn, arg_specs, platform)`` lowers the function to StableHLO,
lets XLA compile it for one chip of the chosen platform, and keeps what the
compiler produced (StableHLO, optimised HLO with layouts and fusions, cost and
memory analyses, lower and compile times) in a frozen :class:`XlaArtifact`.
``donate`` marks arguments whose buffers the outputs may reuse (buffer donation:
the HLO module's ``input_output_alias``).

The job is split by concern:

- :mod:`irkit.targets.xla_platform`: which chip each platform name reaches here
  (CPU, attached or deviceless GPU, libtpu topologies) and the libtpu environment;
- :mod:`irkit.targets.hlo_text`: the optimised-HLO reader (kernels, shapes, attributes);
- :mod:`irkit.targets.ir_scope`: the IR-op scope names that map kernels back to IR ops.

The names those modules define are re-exported here for callers of the single-module API.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from irkit.targets.hlo_text import (
    HloKernel,
    HloShape,
    format_kernels,
    hlo_kernels,
    parse_shapes,
)
from irkit.targets.ir_scope import IrScope, ir_scope, parse_ir_scopes
from irkit.targets.xla_platform import (
    GPU_TARGETS,
    PLATFORMS,
    TPU_DEFAULT_TOPOLOGY,
    XlaUnavailable,
    canonical_platform,
    cpu_device,
    cuda_plugin,
    dist_version,
    gpu_device,
    platform_status,
    tpu_device,
)

# The older private name, kept for callers that import it from here.
_parse_shapes = parse_shapes

__all__ = [
    "GPU_TARGETS",
    "PLATFORMS",
    "TPU_DEFAULT_TOPOLOGY",
    "HloKernel",
    "HloShape",
    "IrScope",
    "XlaArtifact",
    "XlaCompileError",
    "XlaUnavailable",
    "canonical_platform",
    "compile_xla",
    "cpu_device",
    "format_kernels",
    "hlo_kernels",
    "ir_scope",
    "parse_ir_scopes",
    "platform_status",
    "tpu_device",
]


class XlaCompileError(RuntimeError):
    """XLA (or Mosaic inside it) rejected the program, e.g. a kernel that overflows VMEM."""


# --------------------------------------------------------------------------------------------
# The artifact
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class XlaArtifact:
    """What XLA produced for one function on one chip of one platform.

    ``cost`` is ``compiled.cost_analysis()`` as floats: ``flops``, ``bytes accessed``,
    ``transcendentals`` and, on TPU and CPU, per-operand ``bytes accessedN{}`` and
    ``utilizationN{}`` entries (TPU also gives ``optimal_seconds``). It is empty where the
    compiler gives none (the deviceless CUDA compiler). ``memory`` holds
    ``compiled.memory_analysis()`` in bytes, keyed ``argument``, ``output``, ``alias``,
    ``temp``, ``generated_code`` and the same with a ``host_`` prefix.
    """

    platform: str
    """Canonical platform: ``cpu``, ``gpu``, ``tpu-v4``, ``tpu-v5e``, ``tpu-v5p``, ``tpu-v6e``."""
    topology: str
    """What was compiled for: a TPU topology (``v5e:1x1``), a GPU target (``h100``) or ``host``."""
    device_kind: str
    """The device's own name, e.g. ``TPU v5 lite``, ``NVIDIA H100 80GB HBM3``, ``cpu``."""
    deviceless: bool
    """True when compiled ahead of time without the device being present."""
    stablehlo: str = field(repr=False)
    """``lowered.as_text()``: the StableHLO module handed to XLA."""
    hlo: str = field(repr=False)
    """``compiled.as_text()``: the HLO after XLA's passes, with layouts, fusions, custom calls."""
    cost: dict[str, float] = field(repr=False)
    memory: dict[str, int] = field(repr=False)
    lower_seconds: float
    """Trace plus lowering to StableHLO."""
    compile_seconds: float
    """XLA compilation of the lowered module (``Lowered.compile``)."""
    arg_specs: tuple[Any, ...] = field(repr=False)
    """The argument specs compiled for (pytrees of ``jax.ShapeDtypeStruct``)."""
    versions: dict[str, str] = field(default_factory=dict, repr=False)
    """jax, jaxlib and, where used, libtpu or the CUDA plugin versions."""
    runner: Callable[..., Any] | None = field(default=None, repr=False, compare=False)
    """The compiled executable where this machine can run it, else None. Prefer :meth:`run`."""

    @property
    def target(self) -> str:
        """The irkit target name: ``xla-`` + platform."""
        return f"xla-{self.platform}"

    @property
    def runnable(self) -> bool:
        """Whether :meth:`run` can execute here."""
        return self.runner is not None

    @property
    def flops(self) -> float | None:
        """XLA's FLOP count for the compiled module, or None where the compiler gives none."""
        return self.cost.get("flops")

    @property
    def bytes_accessed(self) -> float | None:
        """XLA's count of bytes read and written, or None where the compiler gives none."""
        return self.cost.get("bytes accessed")

    def kernels(self) -> list[HloKernel]:
        """The kernels in the optimised HLO (see :func:`hlo_kernels`)."""
        return hlo_kernels(self.hlo)

    def run(self, *inputs: Any) -> Any:
        """Run on NumPy inputs (one per arg spec) and return NumPy outputs in the function's pytree."""
        if self.runner is None:
            raise XlaUnavailable(
                f"{self.target} was compiled ahead of time for {self.topology} "
                f"({self.device_kind}); no such device is attached here, so it cannot run"
            )
        import jax

        if len(inputs) != len(self.arg_specs):
            raise TypeError(
                f"{self.target}: expected {len(self.arg_specs)} inputs, got {len(inputs)}"
            )
        arrays = []
        for i, (x, spec) in enumerate(zip(inputs, self.arg_specs)):
            leaves, spec_leaves = jax.tree.leaves(x), jax.tree.leaves(spec)
            for leaf, want in zip(leaves, spec_leaves):
                a = np.asarray(leaf)
                if a.shape != tuple(want.shape) or a.dtype != np.dtype(want.dtype):
                    raise TypeError(
                        f"{self.target}: input {i} is {a.dtype}{list(a.shape)}, "
                        f"compiled for {np.dtype(want.dtype)}{list(want.shape)}"
                    )
            arrays.append(jax.tree.map(np.asarray, x))
        out = self.runner(*arrays)
        return jax.tree.map(np.asarray, out)


# --------------------------------------------------------------------------------------------
# compile_xla
# --------------------------------------------------------------------------------------------


def compile_xla(
    fn: Callable[..., Any],
    arg_specs: Sequence[Any],
    platform: str,
    *,
    topology: str | None = None,
    donate: Sequence[int] = (),
) -> XlaArtifact:
    """Lower and compile ``fn`` for one chip of ``platform``.

    Args:
        fn: a JAX-traceable function of positional arguments.
        arg_specs: one entry per positional argument: a ``jax.ShapeDtypeStruct`` (or a pytree
            of them); anything with ``.shape`` and ``.dtype`` (a NumPy array) is accepted too.
        platform: ``cpu``, ``gpu``, ``tpu-v4``, ``tpu-v5e``, ``tpu-v5p``, ``tpu-v6e`` (or the
            aliases :func:`canonical_platform` takes, e.g. ``xla-tpu-v5e`` or ``v5e``).
        topology: TPU: a libtpu topology string of the same version (``v5e:2x2``); the first
            chip of it is compiled for. Default: the single-chip slice in
            :data:`TPU_DEFAULT_TOPOLOGY`. GPU: a name in :data:`GPU_TARGETS` or a
            GpuTargetConfigProto text; forces a deviceless compile for that GPU. Default: the
            attached GPU if JAX has one, else a deviceless ``h100`` compile. CPU: must be None.
        donate: positions of arguments whose buffers the outputs may reuse (``jax.jit``'s
            ``donate_argnums``); XLA pairs each with an output of the same shape and dtype and
            records it in the HLO module's ``input_output_alias``. A donated argument's buffer
            is consumed by a call.

    Raises:
        XlaUnavailable: the platform cannot be reached here (no libtpu, wrong libtpu, no CUDA
            plugin); the message names the package and version to install.
        ValueError: unknown platform, or a topology that does not fit it.
        XlaCompileError: XLA (or Mosaic) rejected the program, e.g. a kernel over VMEM.
    """
    import jax

    canon = canonical_platform(platform)
    specs = tuple(_as_spec_tree(s) for s in arg_specs)
    versions = {"jax": jax.__version__, "jaxlib": dist_version("jaxlib") or "?"}

    deviceless = True
    if canon == "cpu":
        if topology not in (None, "host"):
            raise ValueError(f"xla-cpu takes no topology (got {topology!r})")
        device = cpu_device()
        topo_name, deviceless = "host", False
    elif canon == "gpu":
        device, topo_name, deviceless, plugin_version = gpu_device(topology)
        found = cuda_plugin()
        if plugin_version and found:
            versions[found[1]] = plugin_version
    else:
        device, topo_name = tpu_device(canon, topology)
        versions["libtpu"] = dist_version("libtpu") or "?"

    compiled, lowered, lower_s, compile_s = _lower_and_compile(
        fn, specs, device, f"xla-{canon} ({topo_name})", tuple(donate)
    )

    try:
        cost_raw = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - a backend without cost analysis raises its own error types
        cost_raw = None
    return XlaArtifact(
        platform=canon,
        topology=topo_name,
        device_kind=str(device.device_kind),
        deviceless=deviceless,
        stablehlo=lowered.as_text(),
        hlo=compiled.as_text(),
        cost=_cost_dict(cost_raw),
        memory=_memory_dict(compiled.memory_analysis()),
        lower_seconds=lower_s,
        compile_seconds=compile_s,
        arg_specs=specs,
        versions=versions,
        runner=None if deviceless else compiled,
    )


def _lower_and_compile(
    fn: Callable[..., Any], specs: tuple[Any, ...], device: Any, where: str, donate: tuple[int, ...] = ()
) -> tuple[Any, Any, float, float]:
    import jax
    from jax.sharding import SingleDeviceSharding

    # JAX caches traces per function object and compilations per traced module, so a second
    # compile of the same fn would report ~0 s. A fresh wrapper (same name, so the HLO's
    # op_name prefix stays jit(<fn name>)) makes every call trace and compile for real.
    def traced(*args: Any) -> Any:
        return fn(*args)

    # functools.partial objects have no __name__; name the jit after the function they wrap.
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "fn")
    traced.__name__ = traced.__qualname__ = str(name)

    sharding = SingleDeviceSharding(device)
    jitted = jax.jit(traced, in_shardings=(sharding,) * len(specs), out_shardings=sharding,
                     donate_argnums=donate)
    t0 = time.perf_counter()
    lowered = jitted.lower(*specs)
    t1 = time.perf_counter()
    try:
        compiled = lowered.compile()
    except RuntimeError as e:  # JaxRuntimeError: the compiler's own diagnosis, kept in full below
        # XLA's diagnosis is a code line ("RESOURCE_EXHAUSTED: E1001: ...") and then the
        # reason; keep both on one line, the full text stays on the chained exception.
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()][:2]
        reason = " ".join(lines)[:400] or type(e).__name__
        raise XlaCompileError(f"{where}: XLA rejected the program: {reason}") from e
    t2 = time.perf_counter()
    return compiled, lowered, t1 - t0, t2 - t1


def _as_spec_tree(spec: Any) -> Any:
    import jax

    def one(x: Any) -> Any:
        if isinstance(x, jax.ShapeDtypeStruct):
            return x
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return jax.ShapeDtypeStruct(tuple(x.shape), x.dtype)
        raise TypeError(f"argument spec {x!r} has no shape and dtype; pass jax.ShapeDtypeStruct")

    return jax.tree.map(one, spec)


def _cost_dict(raw: Any) -> dict[str, float]:
    # jax returns a dict, or (older versions, some backends) a one-element list of dicts, or None.
    if raw is None:
        return {}
    if isinstance(raw, (list, tuple)):
        raw = raw[0] if raw else {}
    return {str(k): float(v) for k, v in dict(raw).items()}


def _memory_dict(stats: Any) -> dict[str, int]:
    if stats is None:
        return {}
    out: dict[str, int] = {}
    for attr in dir(stats):
        if attr.endswith("_size_in_bytes"):
            out[attr.removesuffix("_size_in_bytes")] = int(getattr(stats, attr))
    return out
