"""XLA platform discovery: which chips JAX can compile for here, and how each is reached.

Design note
-----------
Every question "can this machine compile (or run) for platform P?" is answered here,
and nowhere else: the canonical platform names, the TPU topologies libtpu is asked
for, the GPU target descriptions for deviceless compiles, the attached CUDA device,
the CUDA PJRT plugin (cuda13 first, then cuda12) and the libtpu environment.

- ``cpu``: JAX's host backend (:func:`cpu_device`).
- ``tpu-v4``, ``tpu-v5e``, ``tpu-v5p``, ``tpu-v6e``: ahead of time, with no TPU
  attached. libtpu describes a TPU slice (``get_topology_desc``); :func:`tpu_device`
  returns its first chip. v4 is asked for in megacore mode (one device spanning both
  TensorCores, as JAX runs it on a real v4), otherwise libtpu hands out one device
  per TensorCore and the numbers would be per half-chip.
- ``gpu``: the attached CUDA device when JAX has one; otherwise a deviceless compile
  through the CUDA PJRT plugin given a GPU target description (``h100``, ``h200``,
  ``a100``); otherwise :class:`XlaUnavailable` naming what to install.

libtpu environment: libtpu takes ``/tmp/libtpu_lockfile`` when it loads, and JAX loads
it on any backend initialisation, so while one JAX process runs on this machine (a
second pytest-xdist worker, another tool) every other process fails to compile for
TPU ("Internal error when accessing libtpu multi-process lockfile"). The lock guards a
TPU device; ahead-of-time compiles use none. :func:`configure_libtpu_env` (run when
this module is imported, before JAX loads libtpu) allows several processes; an explicit
setting in the environment wins.

Third-party output: initialising JAX's backends prints libtpu's TPU-discovery warnings
and, with a CUDA plugin but no driver, plugin tracebacks on file descriptor 2. Every
such call here runs under :func:`quiet_native_stderr`; ``IRKIT_VERBOSE=1`` (``irkit
--verbose``) keeps them.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
from pathlib import Path
from typing import Any

from irkit.targets.base import quiet_native_stderr

__all__ = [
    "CUDA_PLUGINS",
    "GPU_TARGETS",
    "PLATFORMS",
    "TPU_DEFAULT_TOPOLOGY",
    "XlaUnavailable",
    "attached_gpu",
    "canonical_platform",
    "configure_libtpu_env",
    "cpu_device",
    "cuda_plugin",
    "cuda_plugin_library",
    "dist_version",
    "gpu_device",
    "platform_status",
    "prefer_inline_cpu_dispatch",
    "quiet_native_stderr",
    "tpu_device",
]


def configure_libtpu_env() -> None:
    """Let several processes load libtpu at once (see the module docstring); idempotent."""
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")


configure_libtpu_env()


class XlaUnavailable(RuntimeError):
    """This machine cannot reach the asked-for XLA platform; the message says why and what to install."""




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



def dist_version(name: str) -> str | None:
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
    have = dist_version("libtpu")
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


def prefer_inline_cpu_dispatch() -> bool:
    """Run XLA:CPU executables inline in the calling thread (JAX's
    ``jax_cpu_enable_async_dispatch=False``) when JAX's backends are not initialised yet and
    nobody chose otherwise (the ``JAX_CPU_ENABLE_ASYNC_DISPATCH`` environment variable wins).

    With asynchronous dispatch (JAX's default) every call of a compiled executable is handed to
    a runtime thread and the caller waits for it: about four thread hand-offs per call of a small
    Transformer, each a trip through the OS scheduler. irkit always waits for the outputs, so
    the hand-offs buy nothing; on a loaded 2-core machine they made a ViT call 20x slower than
    the same kernels run inline. Multi-threaded executables (``--xla_cpu_multi_thread_eigen``)
    are unaffected. The option is read once, when JAX creates its CPU client, so it is set
    before anything initialises a backend; returns whether dispatch is inline."""
    import jax
    from jax._src import xla_bridge

    if "JAX_CPU_ENABLE_ASYNC_DISPATCH" not in os.environ and not xla_bridge.backends_are_initialized():
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    return not jax.config.read("jax_cpu_enable_async_dispatch")


def cpu_device() -> Any:
    """JAX's CPU device (dispatching inline, see :func:`prefer_inline_cpu_dispatch`). The first
    call initialises every backend JAX finds, libtpu's plugin too, which prints TPU-discovery
    warnings to file descriptor 2 on a machine without a TPU; they are kept out of irkit's
    output like the TPU compile's (``IRKIT_VERBOSE=1`` keeps them)."""
    import jax

    prefer_inline_cpu_dispatch()
    with quiet_native_stderr():
        return jax.devices("cpu")[0]


@functools.cache
def _tpu_topology_devices(canon: str, topology: str) -> tuple[Any, ...]:
    from jax.experimental import topologies

    try:
        with quiet_native_stderr():
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
    "pip install 'jax-cuda13-plugin=={v}' 'jax-cuda13-pjrt=={v}' (or the cuda12 pair; "
    "enough to compile for a GPU without one; pip install 'irkit[gpu]' to run on one)"
)


def attached_gpu() -> Any | None:
    """The attached CUDA GPU, or None. Asking JAX initialises every backend (libtpu's too, with its
    TPU-discovery warnings on fd 2), so the question is asked with that output kept quiet."""
    import jax

    for name in ("cuda", "gpu"):
        try:
            with quiet_native_stderr():
                devices = jax.devices(name)
        except RuntimeError:
            continue
        if devices:
            return devices[0]
    return None


CUDA_PLUGINS: tuple[tuple[str, str], ...] = (
    ("jax_plugins.xla_cuda13", "jax-cuda13-pjrt"),
    ("jax_plugins.xla_cuda12", "jax-cuda12-pjrt"),
)
"""JAX's CUDA PJRT plugins, newest CUDA first: (import name, distribution holding the .so)."""


def cuda_plugin() -> tuple[Path, str] | None:
    """(path of the CUDA PJRT plugin library, its distribution name), or None when none is installed."""
    for module, dist in CUDA_PLUGINS:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        if spec is None or spec.origin is None:
            continue
        lib = Path(spec.origin).parent / "xla_cuda_plugin.so"
        if lib.exists():
            return lib, dist
    return None


def cuda_plugin_library() -> Path | None:
    """The CUDA PJRT plugin library JAX would load (cuda13 before cuda12), or None."""
    found = cuda_plugin()
    return found[0] if found else None


@functools.cache
def _deviceless_gpu(target_config: str) -> Any:
    from jax._src.lib import _jax, xla_client

    # Load the plugin ourselves rather than through JAX's plugin discovery: on a machine without
    # the CUDA runtime, discovery fails its CUDA version check and registers nothing, yet the
    # plugin's compiler needs no device once it is given a target description.
    if not xla_client.pjrt_plugin_loaded("cuda"):
        lib = cuda_plugin_library()
        assert lib is not None
        xla_client.load_pjrt_plugin_dynamically("cuda", str(lib))
    if not xla_client.pjrt_plugin_initialized("cuda"):
        xla_client.initialize_pjrt_plugin("cuda")
    topo = _jax.get_default_c_api_topology(
        "cuda", "", {"target_config": target_config, "topology": "1x1x1"}
    )
    return topo._make_compile_only_devices()[0]


def gpu_device(topology: str | None) -> tuple[Any, str, bool, str | None]:
    """(device, topology name, deviceless, plugin version) for the gpu platform."""
    import jax

    if topology is None:
        attached = attached_gpu()
        if attached is not None:
            found = cuda_plugin()
            return attached, "attached", False, dist_version(found[1]) if found else None
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
    jaxlib_version = dist_version("jaxlib") or jax.__version__
    hint = _CUDA_PLUGIN_HINT.format(v=jaxlib_version)
    found = cuda_plugin()
    if found is None:
        raise XlaUnavailable(
            "xla-gpu: JAX has no GPU backend here (no CUDA device or no CUDA jaxlib plugin), "
            f"and the CUDA PJRT plugin that compiles without a device is not installed: {hint}"
        )
    plugin_version = dist_version(found[1])
    if plugin_version is not None and plugin_version != jaxlib_version:
        raise XlaUnavailable(
            f"xla-gpu: {found[1]} {plugin_version} does not match jaxlib {jaxlib_version}: {hint}"
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
        if attached_gpu() is not None:
            status["gpu"] = "runs"
        else:
            gpu_device("h100")
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
