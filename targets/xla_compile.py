"""XLA compile plumbing for the ``xla-cpu``, ``xla-gpu`` and ``xla-tpu-*`` targets.

Design note
-----------
A target lowers irkit IR to a JAX-traceable function; this module takes it from
there. ``compile_xla(fn, arg_specs, platform)`` lowers the function to StableHLO,
lets XLA compile it for one chip of the chosen platform, and keeps what the
compiler produced (StableHLO, optimised HLO with layouts and fusions, cost and
memory analyses, lower and compile times) in a frozen :class:`XlaArtifact`.

How each platform is reached:

- ``cpu``: the host backend; the artifact runs.
- ``tpu-v4``, ``tpu-v5e``, ``tpu-v5p``, ``tpu-v6e``: ahead of time, with no TPU
  attached. libtpu describes a TPU slice (``get_topology_desc``), we place every
  argument on its first chip with a single-device sharding and compile. The
  numbers are therefore per chip. v4 is asked for in megacore mode (one device
  spanning both TensorCores, as JAX runs it on a real v4), otherwise libtpu
  hands out one device per TensorCore and the numbers would be per half-chip.
- ``gpu``: a real CUDA device when JAX has one (the artifact runs); otherwise a
  deviceless compile through the CUDA PJRT plugin given a GPU target
  description (``h100``, ``h200``, ``a100``); otherwise :class:`XlaUnavailable`.

The optimised HLO is parsed by :func:`hlo_kernels` into one :class:`HloKernel`
per launched kernel (fusion, custom call, or a lone op), each with the ops it
contains, its operand and result shapes with the layouts XLA chose, and the
named scopes its ops were traced under. Name each IR op's scope with
:func:`ir_scope` (``ik.matmul[model.py:42]``) and :func:`parse_ir_scopes` maps
every kernel back to IR ops and source locations. Do not put ``@`` in a scope:
XLA's StableHLO-to-HLO translation treats ``name@function`` as TensorFlow's
naming convention and drops everything from the ``@`` on (seen with jax 0.10.2),
so ``ik.matmul@model.py:42`` reaches the HLO as plain ``ik.matmul``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# libtpu takes a machine-wide lockfile; without this, a second JAX process on the
# machine (a test worker, a benchmark) cannot compile for TPU at all.
import os as _os

_os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

__all__ = [
    "GPU_TARGETS",
    "TPU_DEFAULT_TOPOLOGY",
    "HloKernel",
    "HloShape",
    "IrScope",
    "XlaArtifact",
    "XlaCompileError",
    "XlaUnavailable",
    "canonical_platform",
    "compile_xla",
    "format_kernels",
    "hlo_kernels",
    "ir_scope",
    "parse_ir_scopes",
    "platform_status",
    "tpu_device",
]


class XlaUnavailable(RuntimeError):
    """This machine cannot reach the asked-for XLA platform; the message says why and what to install."""


class XlaCompileError(RuntimeError):
    """XLA (or Mosaic inside it) rejected the program, e.g. a kernel that overflows VMEM."""


# --------------------------------------------------------------------------------------------
# Platforms
# --------------------------------------------------------------------------------------------

PLATFORMS: tuple[str, ...] = ("cpu", "gpu", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e")
"""Canonical platform names; the target names are these with ``xla-`` in front."""

TPU_DEFAULT_TOPOLOGY: dict[str, str] = {
    "tpu-v4": "v4:1x1x1",
    "tpu-v5e": "v5e:1x1",
    "tpu-v5p": "v5p:1x1x1",
    "tpu-v6e": "v6e:1x1",
}
"""The single-chip slice each TPU version compiles for unless a topology is given."""

_TPU_DEVICE_KIND: dict[str, str] = {
    "tpu-v4": "TPU v4",
    "tpu-v5e": "TPU v5 lite",
    "tpu-v5p": "TPU v5",
    "tpu-v6e": "TPU v6 lite",
}

# libtpu's default hosts hold 2x2x1 chips; a smaller slice must say so, or libtpu answers
# 'Topology layout "v5e:1x1" is not divisible by the given (or default) chips_per_host_bounds'.
_DEFAULT_CHIPS_PER_HOST = (2, 2, 1)

_ALIASES: dict[str, str] = {
    "cpu": "cpu",
    "host": "cpu",
    "gpu": "gpu",
    "cuda": "gpu",
}
for _v in ("v4", "v5e", "v5p", "v6e"):
    _ALIASES[_v] = f"tpu-{_v}"
    _ALIASES[f"tpu-{_v}"] = f"tpu-{_v}"
# v5e is "v5litepod" on Cloud and "TPU v5 lite" to JAX; v6e is "TPU v6 lite".
_ALIASES["v5litepod"] = "tpu-v5e"
_ALIASES["v5lite"] = "tpu-v5e"
_ALIASES["v6lite"] = "tpu-v6e"


def canonical_platform(name: str) -> str:
    """Return the canonical platform for ``name``.

    Accepts ``cpu``, ``gpu``/``cuda``, ``v5e``, ``tpu-v5e`` and the target names
    ``xla-cpu``, ``xla-gpu``, ``xla-tpu-v5e`` (likewise for v4, v5p, v6e).
    """
    key = name.strip().lower()
    key = key.removeprefix("xla-")
    if key in _ALIASES:
        return _ALIASES[key]
    raise ValueError(
        f"unknown XLA platform {name!r}; use one of {', '.join(PLATFORMS)} "
        "(optionally prefixed 'xla-', TPU versions also bare: v4, v5e, v5p, v6e)"
    )


# GPU target descriptions for deviceless compiles (xla GpuTargetConfigProto, text format).
# H100 SXM and A100 SXM 80GB are the figures XLA itself ships for these parts
# (xla/tools/hlo_opt/gpu_specs); H200 is the H100 die with 141 GB HBM3e at 4.8 TB/s, so only
# the memory size, bandwidth and name differ.
_GPU_SPECS: dict[str, dict[str, Any]] = {
    "h100": {
        "device_description_str": "NVIDIA H100 80GB HBM3",
        "core_count": 132,
        "fpus_per_core": 128,
        "shared_memory_per_core": 233472,
        "shared_memory_per_block_optin": 232448,
        "memory_bandwidth": 3352320000000,
        "l2_cache_size": 52428800,
        "clock_rate_ghz": 1.98,
        "device_memory_size": 84978434048,
        "cc_major": 9,
    },
    "h200": {
        "device_description_str": "NVIDIA H200",
        "core_count": 132,
        "fpus_per_core": 128,
        "shared_memory_per_core": 233472,
        "shared_memory_per_block_optin": 232448,
        "memory_bandwidth": 4800000000000,
        "l2_cache_size": 52428800,
        "clock_rate_ghz": 1.98,
        "device_memory_size": 150754820096,
        "cc_major": 9,
    },
    "a100": {
        "device_description_str": "NVIDIA A100-SXM4-80GB",
        "core_count": 108,
        "fpus_per_core": 64,
        "shared_memory_per_core": 167936,
        "shared_memory_per_block_optin": 166912,
        "memory_bandwidth": 2039040000000,
        "l2_cache_size": 41943040,
        "clock_rate_ghz": 1.41,
        "device_memory_size": 85100068864,
        "cc_major": 8,
    },
}


def _gpu_target_config(spec: dict[str, Any]) -> str:
    """A GpuTargetConfigProto in text format; limits common to sm_80/sm_90 are fixed here."""
    fields = {k: v for k, v in spec.items() if k not in ("device_description_str", "cc_major")}
    fields |= {
        "threads_per_block_limit": 1024,
        "threads_per_warp": 32,
        "shared_memory_per_block": 49152,
        "threads_per_core_limit": 2048,
        "block_dim_limit_x": 2147483647,
        "block_dim_limit_y": 65535,
        "block_dim_limit_z": 65535,
        "registers_per_core_limit": 65536,
        "registers_per_block_limit": 65536,
    }
    body = "".join(f"  {k}: {v}\n" for k, v in fields.items())
    return (
        f"gpu_device_info {{\n{body}  cuda_compute_capability {{ major: {spec['cc_major']} }}\n}}\n"
        f'platform_name: "CUDA"\ndevice_description_str: "{spec["device_description_str"]}"\n'
    )


GPU_TARGETS: dict[str, str] = {name: _gpu_target_config(spec) for name, spec in _GPU_SPECS.items()}
"""Deviceless GPU targets by name; ``compile_xla(..., "gpu", topology="h200")`` picks one.

A string holding ``gpu_device_info`` is also accepted as ``topology`` and used as is."""


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

    Raises:
        XlaUnavailable: the platform cannot be reached here (no libtpu, wrong libtpu, no CUDA
            plugin); the message names the package and version to install.
        ValueError: unknown platform, or a topology that does not fit it.
        XlaCompileError: XLA (or Mosaic) rejected the program, e.g. a kernel over VMEM.
    """
    import jax

    canon = canonical_platform(platform)
    specs = tuple(_as_spec_tree(s) for s in arg_specs)
    versions = {"jax": jax.__version__, "jaxlib": _dist_version("jaxlib") or "?"}

    deviceless = True
    if canon == "cpu":
        if topology not in (None, "host"):
            raise ValueError(f"xla-cpu takes no topology (got {topology!r})")
        device = cpu_device()
        topo_name, deviceless = "host", False
    elif canon == "gpu":
        device, topo_name, deviceless, plugin_version = _gpu_device(topology)
        if plugin_version:
            versions["jax-cuda12-pjrt"] = plugin_version
    else:
        device, topo_name = tpu_device(canon, topology)
        versions["libtpu"] = _dist_version("libtpu") or "?"

    compiled, lowered, lower_s, compile_s = _lower_and_compile(
        fn, specs, device, f"xla-{canon} ({topo_name})"
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
    fn: Callable[..., Any], specs: tuple[Any, ...], device: Any, where: str
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
    jitted = jax.jit(traced, in_shardings=(sharding,) * len(specs), out_shardings=sharding)
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


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


# --------------------------------------------------------------------------------------------
# TPU
# --------------------------------------------------------------------------------------------


def _libtpu_requirement() -> str:
    """The libtpu version the installed jax asks for (its ``tpu`` extra), e.g. ``==0.0.42.*``."""
    for req in importlib.metadata.requires("jax") or []:
        m = re.match(r"\s*libtpu\s*([=<>!~][^;]*)", req)
        if m:
            return m.group(1).strip()
    return ""


def _check_libtpu(target: str) -> None:
    import jax

    want = _libtpu_requirement()
    pin = f"libtpu{want}" if want else "libtpu"
    have = _dist_version("libtpu")
    if have is None or importlib.util.find_spec("libtpu") is None:
        raise XlaUnavailable(
            f"{target} compiles through libtpu, which is not installed: "
            f"pip install '{pin}' (the version jax {jax.__version__} pins)"
        )
    m = re.fullmatch(r"==\s*([\w.]+?)(\.\*)?", want)
    if m:
        base, wildcard = m.group(1), bool(m.group(2))
        ok = have.startswith(base + ".") or have == base if wildcard else have == base
        if not ok:
            raise XlaUnavailable(
                f"{target}: libtpu {have} does not match jax {jax.__version__}, "
                f"which needs {pin}: pip install '{pin}'"
            )


def _topology_kwargs(canon: str, topology: str) -> dict[str, Any]:
    m = re.fullmatch(r"([A-Za-z0-9_ ]+)[:=_]([0-9x]+)(_twisted|_untwisted)?", topology)
    if not m:
        raise ValueError(
            f"{topology!r} is not a TPU topology string; write VERSION:SHAPE, e.g. "
            f"{TPU_DEFAULT_TOPOLOGY[canon]!r} or {TPU_DEFAULT_TOPOLOGY[canon].split(':')[0]}:2x2"
        )
    dims = [int(d) for d in m.group(2).split("x")] + [1, 1]
    chips_per_host = [min(d, h) for d, h in zip(dims[:3], _DEFAULT_CHIPS_PER_HOST)]
    kwargs: dict[str, Any] = {}
    if tuple(chips_per_host) != _DEFAULT_CHIPS_PER_HOST:
        kwargs["chips_per_host_bounds"] = chips_per_host
    if canon == "tpu-v4":
        # Without it libtpu gives one device per TensorCore (two per v4 chip), so one device
        # would be half a chip; JAX runs v4 in megacore mode, one device per chip.
        kwargs["chip_config_name"] = "megacore"
    return kwargs


@contextlib.contextmanager
def _quiet_native_stderr() -> Any:
    """Silence what libtpu prints on file descriptor 2 while it loads without a TPU
    (warnings about TPU_ACCELERATOR_TYPE, worker hostnames and host bounds that do not
    apply to a deviceless compile). ``IRKIT_VERBOSE=1`` keeps them; errors still raise."""
    if _os.environ.get("IRKIT_VERBOSE"):
        yield
        return
    import sys
    import tempfile

    sys.stderr.flush()
    saved = _os.dup(2)
    with tempfile.TemporaryFile() as sink:
        _os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            _os.dup2(saved, 2)
            _os.close(saved)


def cpu_device() -> Any:
    """JAX's CPU device. The first call initialises every backend JAX finds, libtpu's plugin
    too, which prints TPU-discovery warnings to file descriptor 2 on a machine without a TPU;
    they are kept out of irkit's output like the TPU compile's (``IRKIT_VERBOSE=1`` keeps them)."""
    import jax

    with _quiet_native_stderr():
        return jax.devices("cpu")[0]


@functools.cache
def _tpu_topology_devices(canon: str, topology: str) -> tuple[Any, ...]:
    from jax.experimental import topologies

    try:
        with _quiet_native_stderr():
            desc = topologies.get_topology_desc(
                platform="tpu", topology_name=topology, **_topology_kwargs(canon, topology)
            )
    except RuntimeError as e:  # JaxRuntimeError derives from RuntimeError
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "not installed" in first or "TPU support" in first:
            raise XlaUnavailable(f"xla-{canon}: {first}") from e
        raise ValueError(
            f"libtpu rejected TPU topology {topology!r}: {first} "
            f"(working strings, e.g.: {', '.join(TPU_DEFAULT_TOPOLOGY.values())}, v5e:2x2, v5p:2x2x1)"
        ) from e
    return tuple(desc.devices)


def tpu_device(platform: str, topology: str | None = None) -> tuple[Any, str]:
    """Return (compile-only device of the first chip, topology string) for a TPU version.

    ``platform`` is ``tpu-v5e`` or an alias; ``topology`` defaults to the single-chip slice in
    :data:`TPU_DEFAULT_TOPOLOGY`. The device can be used in a ``SingleDeviceSharding`` to
    compile anything ahead of time for that chip.
    """
    canon = canonical_platform(platform)
    if not canon.startswith("tpu-"):
        raise ValueError(f"{platform!r} is not a TPU platform")
    _check_libtpu(f"xla-{canon}")
    topo = topology or TPU_DEFAULT_TOPOLOGY[canon]
    devices = _tpu_topology_devices(canon, topo)
    kind = devices[0].device_kind
    if kind != _TPU_DEVICE_KIND[canon]:
        raise ValueError(
            f"topology {topo!r} describes {kind!r} chips, not {canon} ({_TPU_DEVICE_KIND[canon]!r}); "
            f"use e.g. {TPU_DEFAULT_TOPOLOGY[canon]!r}"
        )
    return devices[0], topo


# --------------------------------------------------------------------------------------------
# GPU
# --------------------------------------------------------------------------------------------

_CUDA_PLUGIN_HINT = (
    "pip install 'jax-cuda12-plugin=={v}' 'jax-cuda12-pjrt=={v}' "
    "(enough to compile for a GPU without one; add the [with-cuda] extra to run on one)"
)


def _attached_gpu() -> Any | None:
    """The attached CUDA GPU, or None. Asking JAX initialises every backend (libtpu's too, with its
    TPU-discovery warnings on fd 2), so the question is asked with that output kept quiet."""
    import jax

    for name in ("cuda", "gpu"):
        try:
            with _quiet_native_stderr():
                devices = jax.devices(name)
        except RuntimeError:
            continue
        if devices:
            return devices[0]
    return None


def _cuda_plugin_library() -> Path | None:
    try:
        spec = importlib.util.find_spec("jax_plugins.xla_cuda12")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    lib = Path(spec.origin).parent / "xla_cuda_plugin.so"
    return lib if lib.exists() else None


@functools.cache
def _deviceless_gpu(target_config: str) -> Any:
    from jax._src.lib import _jax, xla_client

    # Load the plugin ourselves rather than through JAX's plugin discovery: on a machine without
    # the CUDA runtime, discovery fails its CUDA version check and registers nothing, yet the
    # plugin's compiler needs no device once it is given a target description.
    if not xla_client.pjrt_plugin_loaded("cuda"):
        lib = _cuda_plugin_library()
        assert lib is not None
        xla_client.load_pjrt_plugin_dynamically("cuda", str(lib))
    if not xla_client.pjrt_plugin_initialized("cuda"):
        xla_client.initialize_pjrt_plugin("cuda")
    topo = _jax.get_default_c_api_topology(
        "cuda", "", {"target_config": target_config, "topology": "1x1x1"}
    )
    return topo._make_compile_only_devices()[0]


def _gpu_device(topology: str | None) -> tuple[Any, str, bool, str | None]:
    """(device, topology name, deviceless, plugin version) for the gpu platform."""
    import jax

    if topology is None:
        attached = _attached_gpu()
        if attached is not None:
            return attached, "attached", False, _dist_version("jax-cuda12-pjrt")
        topology = "h100"
    if "gpu_device_info" in topology:
        config, name = topology, "custom"
    elif topology.lower() in GPU_TARGETS:
        config, name = GPU_TARGETS[topology.lower()], topology.lower()
    else:
        raise ValueError(
            f"unknown GPU target {topology!r}; use one of {', '.join(GPU_TARGETS)} "
            "or a GpuTargetConfigProto text"
        )
    jaxlib_version = _dist_version("jaxlib") or jax.__version__
    hint = _CUDA_PLUGIN_HINT.format(v=jaxlib_version)
    if _cuda_plugin_library() is None:
        raise XlaUnavailable(
            "xla-gpu: JAX has no GPU backend here (no CUDA device or no CUDA jaxlib plugin), "
            f"and the CUDA PJRT plugin that compiles without a device is not installed: {hint}"
        )
    plugin_version = _dist_version("jax-cuda12-pjrt")
    if plugin_version is not None and plugin_version != jaxlib_version:
        raise XlaUnavailable(
            f"xla-gpu: jax-cuda12-pjrt {plugin_version} does not match jaxlib {jaxlib_version}: {hint}"
        )
    try:
        device = _deviceless_gpu(config)
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise XlaUnavailable(
            f"xla-gpu: the CUDA plugin could not make a {name} target: {first}"
        ) from e
    return device, name, True, plugin_version


def platform_status() -> dict[str, str]:
    """For each canonical platform, how it is reached here: ``runs``, ``compiles`` or why not.

    Cheap where it can be: TPU versions are checked by building their topology, GPU by looking
    for a device and then for the CUDA plugin.
    """
    status: dict[str, str] = {"cpu": "runs"}
    try:
        if _attached_gpu() is not None:
            status["gpu"] = "runs"
        else:
            _gpu_device("h100")
            status["gpu"] = "compiles (deviceless)"
    except XlaUnavailable as e:
        status["gpu"] = f"unavailable: {e}"
    for canon in TPU_DEFAULT_TOPOLOGY:
        try:
            tpu_device(canon)
            status[canon] = "compiles (deviceless)"
        except (XlaUnavailable, ValueError) as e:
            status[canon] = f"unavailable: {e}"
    return status


# --------------------------------------------------------------------------------------------
# Named scopes: IR op -> HLO metadata -> IR op
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IrScope:
    """An IR op named in a JAX named scope: ``ik.matmul#3[model.py:42]``."""

    op: str
    """The IR op name, e.g. ``ik.matmul``."""
    id: str | None = None
    """An optional identifier of the op instance (e.g. its result's number)."""
    loc: str | None = None
    """The op's source location, e.g. ``model.py:42``."""

    def __str__(self) -> str:
        # The readable form; ir_scope() gives the escaped form that goes into a named scope.
        return (
            self.op
            + (f"#{self.id}" if self.id is not None else "")
            + (f"[{self.loc}]" if self.loc is not None else "")
        )


# Characters the scope must not carry raw: '@' (XLA cuts the name there), '/' (JAX's scope
# separator), the brackets and '#' of our own syntax, and '%' (the escape itself).
_ESCAPES = {"%": "%25", "@": "%40", "/": "%2F", "[": "%5B", "]": "%5D", "#": "%23"}


def _escape(text: str) -> str:
    return "".join(_ESCAPES.get(c, c) for c in text)


def _unescape(text: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def ir_scope(op: str, loc: str | None = None, id: str | None = None) -> str:
    """The ``jax.named_scope`` name that carries an IR op (and its location) into the HLO.

    ``ir_scope("ik.matmul", "model.py:42")`` is ``ik.matmul[model.py:42]``; with ``id="3"``,
    ``ik.matmul#3[model.py:42]``. Characters that XLA or JAX would mangle (``@``, ``/``) are
    %-escaped, so a path like ``models/gpt.py:42`` survives; :func:`parse_ir_scopes` undoes it.
    """
    if not re.fullmatch(r"[A-Za-z_]\w*\.[\w.]+", op):
        raise ValueError(f"IR op name {op!r} must be dialect-qualified, such as 'ik.matmul'")
    out = op
    if id is not None:
        out += "#" + _escape(str(id))
    if loc is not None:
        out += "[" + _escape(loc) + "]"
    return out


# A dialect-qualified op name (``ik.matmul``): the dot keeps JAX's own names out, which older
# versions printed with parameters in brackets (``transpose[permutation=(1, 0)]``).
_SCOPE_RE = re.compile(r"(?:^|/)([A-Za-z_]\w*\.[\w.]+)(?:#([^/\[\]#]*))?\[([^\[\]]*)\](?=/|$)")


def parse_ir_scopes(op_name: str) -> tuple[IrScope, ...]:
    """The IR scopes named in an HLO ``op_name`` such as ``jit(f)/ik.matmul[model.py:42]/dot_general``.

    Outer scopes come first. Only components written by :func:`ir_scope` with a location
    are recognised (a dialect-qualified name followed by ``[...]``); a scope without a
    location is indistinguishable from other named scopes.
    """
    return tuple(
        IrScope(
            op=m.group(1),
            id=_unescape(m.group(2)) if m.group(2) is not None else None,
            loc=_unescape(m.group(3)),
        )
        for m in _SCOPE_RE.finditer(op_name)
    )


# --------------------------------------------------------------------------------------------
# Optimised-HLO reader
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HloShape:
    """One array shape as printed in HLO, e.g. ``bf16[128,512]{1,0:T(8,128)(2,1)S(1)}``."""

    text: str
    dtype: str
    dims: tuple[int, ...]
    minor_to_major: tuple[int, ...] | None
    """The layout's dimension order, minor first; None when no layout is printed."""
    tiles: tuple[tuple[int, ...], ...]
    """The tiling, outer tile first: ``T(8,128)(2,1)`` is ((8, 128), (2, 1))."""
    memory_space: int | None
    """``S(n)``: a memory space other than the default (device HBM), e.g. on-chip VMEM."""

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class HloKernel:
    """One kernel of the optimised HLO: a fusion, a custom call, or an op XLA left on its own."""

    name: str
    """The instruction name, e.g. ``fusion.3`` or ``gemm_fusion_dot``."""
    kind: str
    """``kLoop``, ``kInput``, ``kOutput``, ``kCustom`` for fusions; ``custom-call``; else the opcode."""
    backend_kind: str | None
    """What the backend calls it: a custom-call target (``tpu_custom_call``, ``__cublas$gemm``)
    or a kCustom fusion kind (``__triton_nested_gemm_fusion``, ``__ynn_fusion``)."""
    computation: str | None
    """The fused computation it calls, if any."""
    ops: tuple[str, ...]
    """Opcodes inside, in program order, nested fusions expanded; parameters, constants and
    tuple plumbing left out. A lone op lists itself."""
    outputs: tuple[HloShape, ...]
    operands: tuple[HloShape, ...]
    op_names: tuple[str, ...]
    """Distinct ``metadata.op_name`` values of the kernel and everything inside it."""
    ir_ops: tuple[IrScope, ...]
    """Distinct IR scopes found in ``op_names`` (innermost IR scope of each op name)."""
    source: tuple[str, ...]
    """Distinct ``file:line`` of the Python lines that emitted its ops, from the HLO's stack
    frame tables (or ``source_file``/``source_line`` metadata where a compiler prints those)."""
    estimated_cycles: int | None
    """The TPU compiler's own cycle estimate for this kernel, where it prints one."""


_TRIVIAL_OPS = frozenset(
    {
        "parameter",
        "constant",
        "tuple",
        "get-tuple-element",
        "after-all",
        "opt-barrier",
        "partition-id",
        "replica-id",
        "copy-done",
        "add-dependency",
    }
)
_SHAPE_RE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\](?:\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\})?")


def _parse_shapes(text: str) -> tuple[HloShape, ...]:
    shapes = []
    for m in _SHAPE_RE.finditer(text):
        dtype, dims_s, layout = m.group(1), m.group(2), m.group(3)
        dims = tuple(int(d) for d in re.findall(r"\d+", dims_s))
        minor: tuple[int, ...] | None = None
        tiles: list[tuple[int, ...]] = []
        space: int | None = None
        if layout is not None:
            order, _, rest = layout.partition(":")
            minor = tuple(int(d) for d in order.split(",") if d.strip())
            t = re.search(r"T((?:\([\d,]*\))+)", rest)
            if t:
                tiles = [
                    tuple(int(x) for x in g.split(",") if x)
                    for g in re.findall(r"\(([\d,]*)\)", t.group(1))
                ]
            s = re.search(r"S\((\d+)\)", rest)
            space = int(s.group(1)) if s else None
        shapes.append(HloShape(m.group(0), dtype, dims, minor, tuple(tiles), space))
    return tuple(shapes)


def _balanced(text: str, start: int) -> int:
    """Index just past the bracket group opening at ``text[start]``; quotes are skipped."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack: list[str] = []
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    return n


@dataclass
class _Instr:
    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str
    is_root: bool


_INSTR_HEAD = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*")


def _parse_instr(line: str) -> _Instr | None:
    m = _INSTR_HEAD.match(line)
    if not m:
        return None
    i = m.end()
    if i < len(line) and line[i] == "(":
        j = _balanced(line, i)
    else:
        j = i
        while j < len(line) and line[j] != " ":
            if line[j] in "({[":
                j = _balanced(line, j)
            else:
                j += 1
    shape = line[i:j]
    k = j
    while k < len(line) and line[k] == " ":
        k += 1
    om = re.match(r"[\w\-$]+", line[k:])
    if not om:
        return None
    opcode = om.group(0)
    p = k + om.end()
    operands: list[str] = []
    if p < len(line) and line[p] == "(":
        q = _balanced(line, p)
        operands = re.findall(r"%([\w.\-]+)", line[p:q])
        p = q
    return _Instr(m.group(2), shape, opcode, operands, line[p:], bool(m.group(1)))


def _attr_block(attrs: str, key: str) -> str | None:
    """The text inside ``key={...}``; the key must start an attribute (``kernel_metadata={}``
    in a Pallas call's frontend_attributes is not ``metadata``)."""
    m = re.search(r"(?:^|[ ,])" + re.escape(key) + r"=\{", attrs)
    if not m:
        return None
    start = m.end() - 1
    return attrs[start + 1 : _balanced(attrs, start) - 1]


def _attr_value(attrs: str, key: str) -> str | None:
    m = re.search(r"(?:^|[ ,])" + re.escape(key) + r'=("(?:[^"\\]|\\.)*"|\{[^}]*\}|[^,\s]+)', attrs)
    if not m:
        return None
    return m.group(1).strip('"')


@dataclass
class _Module:
    computations: dict[str, list[_Instr]]
    entry: str | None
    frames: dict[int, str]


def _parse_module(text: str) -> _Module:
    comps: dict[str, list[_Instr]] = {}
    entry: str | None = None
    current: list[_Instr] | None = None
    section: str | None = None
    tables: dict[str, dict[int, str]] = {
        "FileNames": {},
        "FunctionNames": {},
        "FileLocations": {},
        "StackFrames": {},
    }
    for line in text.splitlines():
        if current is not None:
            if line.startswith("}"):
                current = None
                continue
            instr = _parse_instr(line)
            if instr is not None:
                current.append(instr)
            continue
        stripped = line.strip()
        if stripped in tables:
            section = stripped
            continue
        if (
            line
            and not line[0].isspace()
            and line.rstrip().endswith("{")
            and not line.startswith("HloModule")
        ):
            head = line.split("(", 1)[0].split()
            is_entry = bool(head) and head[0] == "ENTRY"
            name = (head[1] if is_entry and len(head) > 1 else head[0] if head else "").lstrip("%")
            current = comps.setdefault(name, [])
            if is_entry:
                entry = name
            section = None
            continue
        if section and stripped:
            num, _, rest = stripped.partition(" ")
            if num.isdigit():
                tables[section][int(num)] = rest
    frames: dict[int, str] = {}
    for fid, body in tables["StackFrames"].items():
        loc_id = re.search(r"file_location_id=(\d+)", body)
        loc = tables["FileLocations"].get(int(loc_id.group(1))) if loc_id else None
        if not loc:
            continue
        fn = re.search(r"file_name_id=(\d+)", loc)
        line_no = re.search(r"\bline=(\d+)", loc)
        file_name = tables["FileNames"].get(int(fn.group(1)), "?").strip('"') if fn else "?"
        frames[fid] = f"{file_name}:{line_no.group(1) if line_no else '?'}"
    return _Module(comps, entry, frames)


def _called(instr: _Instr) -> list[str]:
    names = []
    for key in (
        "calls",
        "to_apply",
        "body",
        "condition",
        "branch_computations",
        "called_computations",
    ):
        v = _attr_value(instr.attrs, key)
        if v:
            names += re.findall(r"%?([\w.\-]+)", v.strip("{}"))
    return names


def hlo_kernels(hlo_text: str) -> list[HloKernel]:
    """The kernels of an optimised HLO module, in the entry computation's program order.

    A kernel is a fusion, a custom call or any other op that does work (parameters,
    constants, tuples, bitcasts-free plumbing are skipped) in the entry computation or in a
    computation it runs as control flow (while bodies, conditionals, calls). For each, the
    ops inside, the shapes with layouts, and the names its ops were traced under.
    """
    mod = _parse_module(hlo_text)
    if mod.entry is None:
        raise ValueError("no ENTRY computation in this HLO text; pass compiled.as_text()")

    def body_instrs(comp: str, seen: set[str]) -> list[_Instr]:
        """Every instruction of a fused computation, nested fusions expanded in place.

        Reducer regions (``to_apply`` of a reduce) are not followed: their scalar adds are
        part of the reduce, and the reduce itself carries the same metadata.
        """
        if comp in seen or comp not in mod.computations:
            return []
        seen.add(comp)
        out: list[_Instr] = []
        for ins in mod.computations[comp]:
            out.append(ins)
            if ins.opcode == "fusion":
                callee = _attr_value(ins.attrs, "calls")
                if callee:
                    out += body_instrs(callee.lstrip("%"), seen)
        return out

    kernels: list[HloKernel] = []
    visited: set[str] = set()

    def walk(comp: str) -> None:
        if comp in visited or comp not in mod.computations:
            return
        visited.add(comp)
        table = {ins.name: ins for ins in mod.computations[comp]}
        for ins in mod.computations[comp]:
            if ins.opcode in ("while", "conditional", "call", "async-start", "async-done"):
                for callee in _called(ins):
                    walk(callee)
                continue
            if ins.opcode in _TRIVIAL_OPS or ins.opcode == "bitcast":
                continue
            kernels.append(_kernel(ins, table, body_instrs, mod.frames))

    walk(mod.entry)
    return kernels


def _kernel(
    ins: _Instr,
    table: dict[str, _Instr],
    body_instrs: Callable[[str, set[str]], list[_Instr]],
    frames: dict[int, str],
) -> HloKernel:
    comp = None
    inner: list[_Instr] = []
    if ins.opcode == "fusion":
        comp = _attr_value(ins.attrs, "calls")
        comp = comp.lstrip("%") if comp else None
        inner = body_instrs(comp, set()) if comp else []
        kind = _attr_value(ins.attrs, "kind") or "fusion"
    elif ins.opcode == "custom-call":
        kind = "custom-call"
    else:
        kind = ins.opcode
    backend_kind = _attr_value(ins.attrs, "custom_call_target")
    estimated: int | None = None
    config_text = _attr_block(ins.attrs, "backend_config")
    if config_text is not None:
        try:
            config = json.loads("{" + config_text + "}")
        except ValueError:
            config = {}
        fusion_kind = (
            config.get("fusion_backend_config") or config.get("fusion_config") or {}
        ).get("kind")
        backend_kind = backend_kind or fusion_kind
        cycles = (config.get("window_config") or {}).get("estimated_cycles")
        estimated = int(cycles) if cycles is not None else None
    ops = tuple(
        i.opcode for i in (inner or [ins]) if i.opcode not in _TRIVIAL_OPS and i.opcode != "fusion"
    ) or (ins.opcode,)
    names: list[str] = []
    srcs: list[str] = []
    for i in [ins, *inner]:
        md = _attr_block(i.attrs, "metadata")
        if md is None:
            continue
        on = re.search(r'op_name="((?:[^"\\]|\\.)*)"', md)
        if on and "/" in on.group(1) and on.group(1) not in names:
            names.append(on.group(1))
        sf = re.search(r"stack_frame_id=(\d+)", md)
        src = frames.get(int(sf.group(1))) if sf else None
        if src is None:
            file_m = re.search(r'source_file="([^"]*)"', md)
            line_m = re.search(r"source_line=(\d+)", md)
            src = f"{file_m.group(1)}:{line_m.group(1)}" if file_m and line_m else None
        if src and src not in srcs:
            srcs.append(src)
    scopes: list[IrScope] = []
    for n in names:
        found = parse_ir_scopes(n)
        if found and found[-1] not in scopes:
            scopes.append(found[-1])
    operand_shapes: list[HloShape] = []
    for o in ins.operands:
        if o in table:
            operand_shapes += _parse_shapes(table[o].shape)
    return HloKernel(
        name=ins.name,
        kind=kind,
        backend_kind=backend_kind,
        computation=comp,
        ops=ops,
        outputs=_parse_shapes(ins.shape),
        operands=tuple(operand_shapes),
        op_names=tuple(names),
        ir_ops=tuple(scopes),
        source=tuple(srcs),
        estimated_cycles=estimated,
    )


def format_kernels(kernels: Iterable[HloKernel], *, max_ops: int = 6) -> str:
    """A plain-text table of kernels: name, kind, ops, result shapes with layouts, IR ops."""
    rows = [("kernel", "kind", "ops", "result (layout)", "IR ops")]
    for k in kernels:
        ops = list(dict.fromkeys(k.ops))
        ops_s = ",".join(ops[:max_ops]) + (",…" if len(ops) > max_ops else "")
        kind = k.kind + (f" {k.backend_kind}" if k.backend_kind else "")
        irs = ", ".join(str(s) for s in k.ir_ops) or "-"
        rows.append((k.name, kind, ops_s, " ".join(str(s) for s in k.outputs), irs))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    return "\n".join("  ".join(r[c].ljust(widths[c]) for c in range(4)) + "  " + r[4] for r in rows)
