"""The CUDA environment for ``tvm-cuda`` and ``xla-gpu``: find, preload and check.

Design note
-----------
``pip install 'irkit[gpu]'`` brings CUDA 13 as wheels: the runtime
(``nvidia-cuda-runtime``: ``nvidia/cu13/lib/libcudart.so.13``), NVRTC
(``nvidia-cuda-nvrtc``: ``libnvrtc.so.13``), the CCCL headers NVRTC needs for
``<cuda/std/...>`` (``nvidia-cuda-cccl``: ``nvidia/cu13/include/cccl``), the
Python NVRTC bindings TVM compiles through (``cuda-bindings``) and JAX's CUDA 13
plugin. Nothing puts those lib folders on the loader's path, and TVM's
``libtvm_runtime_cuda.so`` links ``libcudart.so.13`` by name, so
:func:`preload_cuda_libraries` loads them by full path (``RTLD_GLOBAL``) before
``import tvm``; the loader then resolves TVM's dependency to the library already
loaded. It also points TVM's NVRTC compile at the wheels' headers when no CUDA
toolkit is installed (``CUDA_PATH``, and the CCCL folder through
``TVM_CUDA_NVRTC_EXTRA_OPTS``); a setting already in the environment wins.

The driver (``libcuda.so.1``) is not a wheel: it comes with the NVIDIA kernel
driver. :func:`cuda_status` says what is there (driver and the CUDA version it
supports, devices, each library and where it was found) and :func:`require_cuda`
raises one line naming what is missing. CUDA 13 needs driver >= 580.

Tested with nvidia-cuda-runtime 13.5.37, nvidia-cuda-nvrtc 13.5.37,
nvidia-cuda-cccl 13.3.5 and a CUDA 13.0 toolkit in ``/usr/local/cuda``.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from irkit.errors import IrkitError

__all__ = ["CUDA_MAJOR", "MIN_DRIVER", "CudaStatus", "CudaUnavailable", "cuda_status", "preload_cuda_libraries",
           "require_cuda", "wheel_cuda_root"]

CUDA_MAJOR = 13
"""The CUDA major version TVM's wheel (``libcudart.so.13``) and the ``gpu`` extra are built for."""
MIN_DRIVER = 580
"""The oldest NVIDIA driver branch that runs CUDA 13."""

_LIBS = {"cudart": f"libcudart.so.{CUDA_MAJOR}", "nvrtc": f"libnvrtc.so.{CUDA_MAJOR}"}


class CudaUnavailable(IrkitError):
    """No usable CUDA here (no driver, too old a driver, no device, a missing library)."""


@dataclass
class CudaStatus:
    """What this machine has for CUDA; :meth:`problem` is the first thing missing, or ''."""

    driver: str | None = None
    """Where ``libcuda.so.1`` was loaded from, or None (no NVIDIA driver)."""
    driver_cuda: tuple[int, int] | None = None
    """The CUDA version the driver supports (``cuDriverGetVersion``)."""
    devices: int = 0
    device_error: str = ""
    libraries: dict[str, str | None] = field(default_factory=dict)
    """``cudart`` / ``nvrtc`` -> the file loaded (from the wheels or the system), or None."""
    cccl_include: str | None = None
    nvrtc_bindings: bool = False
    """Whether ``cuda.bindings.nvrtc`` (TVM's NVRTC path) imports."""

    def problem(self, need_device: bool = True) -> str:
        if self.libraries.get("cudart") is None:
            return (f"the CUDA {CUDA_MAJOR} runtime ({_LIBS['cudart']}) is not installed: "
                    "pip install 'irkit[gpu]'")
        if not need_device:
            return ""
        if self.driver is None:
            return (f"no NVIDIA driver (libcuda.so.1 not found); CUDA {CUDA_MAJOR} needs driver >= {MIN_DRIVER} "
                    "and an NVIDIA GPU")
        if self.driver_cuda is not None and self.driver_cuda[0] < CUDA_MAJOR:
            have = f"{self.driver_cuda[0]}.{self.driver_cuda[1]}"
            return (f"the NVIDIA driver supports CUDA {have} only; CUDA {CUDA_MAJOR} needs driver >= {MIN_DRIVER}: "
                    "update the driver")
        if self.devices == 0:
            why = f" ({self.device_error})" if self.device_error else ""
            return f"no CUDA device found{why}"
        return ""

    def summary(self) -> str:
        drv = "none"
        if self.driver:
            drv = f"CUDA {self.driver_cuda[0]}.{self.driver_cuda[1]}" if self.driver_cuda else "loaded"
        libs = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in self.libraries.items())
        return f"driver: {drv}; devices: {self.devices}; {libs}; cccl headers: {'yes' if self.cccl_include else 'no'}"


def wheel_cuda_root() -> Path | None:
    """``site-packages/nvidia/cu13`` where the CUDA 13 wheels put lib/ and include/, or None."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        root = Path(base) / f"cu{CUDA_MAJOR}"
        if (root / "lib").is_dir() or (root / "include").is_dir():
            return root
    return None


def _system_dirs() -> list[Path]:
    out = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            out += [Path(os.environ[var]) / "lib64", Path(os.environ[var]) / "lib"]
    out += [Path("/usr/local/cuda/lib64"), Path("/usr/local/cuda/lib")]
    return out


def _load(soname: str, dirs: list[Path]) -> str | None:
    """Load ``soname`` globally from the first of ``dirs`` holding it, else by name; its path or None."""
    for d in dirs:
        f = d / soname
        if f.exists():
            try:
                ctypes.CDLL(str(f), mode=ctypes.RTLD_GLOBAL)
                return str(f)
            except OSError:
                continue
    try:
        ctypes.CDLL(soname, mode=ctypes.RTLD_GLOBAL)
        return soname
    except OSError:
        return None


@functools.cache
def preload_cuda_libraries() -> dict[str, str | None]:
    """Load the CUDA 13 runtime and NVRTC (wheels first, then a CUDA toolkit, then the loader's path)
    so that ``import tvm`` finds them; set up TVM's NVRTC include paths for the wheel layout.
    Idempotent; returns ``{library: file loaded or None}``. Call it before ``import tvm``."""
    root = wheel_cuda_root()
    dirs = ([root / "lib"] if root else []) + _system_dirs()
    found = {name: _load(soname, dirs) for name, soname in _LIBS.items()}
    if root is not None and (root / "include" / "cuda_runtime.h").exists():
        has_toolkit = bool(os.environ.get("CUDA_PATH")) or any(
            (Path(p) / "nvcc").exists() for p in os.environ.get("PATH", "").split(os.pathsep) if p)
        if not has_toolkit:
            os.environ["CUDA_PATH"] = str(root)
        cccl = root / "include" / "cccl"
        if cccl.is_dir() and "TVM_CUDA_NVRTC_EXTRA_OPTS" not in os.environ:
            os.environ["TVM_CUDA_NVRTC_EXTRA_OPTS"] = f"-I{cccl}"
    return found


def _driver() -> tuple[str | None, tuple[int, int] | None, int, str]:
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None, None, 0, ""
    v = ctypes.c_int(0)
    version = None
    if lib.cuDriverGetVersion(ctypes.byref(v)) == 0 and v.value:
        version = (v.value // 1000, (v.value % 1000) // 10)
    rc = lib.cuInit(0)
    if rc != 0:
        return "libcuda.so.1", version, 0, f"cuInit failed with CUDA error {rc}"
    n = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(n))
    return "libcuda.so.1", version, n.value if rc == 0 else 0, "" if rc == 0 else f"CUDA error {rc}"


def cuda_status() -> CudaStatus:
    """Preload the libraries and report what is there (cheap: no CUDA context is created)."""
    libs = preload_cuda_libraries()
    driver, version, devices, err = _driver()
    root = wheel_cuda_root()
    cccl = None
    system = [Path(p) / "include" / "cccl" for p in (os.environ.get("CUDA_PATH"), "/usr/local/cuda") if p]
    for cand in ([root / "include" / "cccl"] if root else []) + system:
        if (cand / "cuda" / "std").is_dir():
            cccl = str(cand)
            break
    try:
        bindings = importlib.util.find_spec("cuda.bindings") is not None
    except (ImportError, ValueError):
        bindings = False
    return CudaStatus(driver, version, devices, err, dict(libs), cccl, bindings)


def require_cuda(what: str, *, need_device: bool = True) -> CudaStatus:
    """The status, or :class:`CudaUnavailable` with one line ``{what} cannot run here: <what is missing>``."""
    st = cuda_status()
    why = st.problem(need_device)
    if why:
        raise CudaUnavailable(f"{what} cannot run here: {why}")
    return st


if __name__ == "__main__":  # python -m irkit.targets.cuda_env: what this machine has
    s = cuda_status()
    print(s.summary())
    print(s.problem() or "CUDA ready", file=sys.stdout)
