"""The GPU path without a GPU: CUDA libraries load when installed, CUDA modules build, and a
missing driver or device is one clear line.

On a machine with the ``gpu`` extra (or a CUDA 13 toolkit) the runtime and NVRTC are loaded
by :func:`irkit.targets.cuda_env.preload_cuda_libraries` and called for real (their version,
an NVRTC compile to PTX); ``tvm-cuda`` builds CUDA source and PTX compile-only. Where the
driver is missing, the messages must name it and the driver CUDA 13 needs.
"""

from __future__ import annotations

import ctypes
import importlib.util
import tomllib
from pathlib import Path

import pytest
from irkit.targets import cuda_env
from irkit.targets.cuda_env import (
    CudaStatus,
    CudaUnavailable,
    cuda_status,
    preload_cuda_libraries,
    require_cuda,
)

ROOT = Path(__file__).resolve().parents[2]

KERNEL = b"""
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_gpu_extra_is_declared_and_not_in_all() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = meta["optional-dependencies"]
    names = {r.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip() for r in extras["gpu"]}
    assert {"nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cuda-cccl", "cuda-bindings",
            "jax-cuda13-plugin", "jax-cuda13-pjrt"} <= names
    assert "gpu" not in extras["all"][0]
    assert "irkit.targets" in meta["entry-points"]


def test_cuda_runtime_loads_when_installed() -> None:
    libs = preload_cuda_libraries()
    assert set(libs) == {"cudart", "nvrtc"}
    if libs["cudart"] is None:
        pytest.skip("no CUDA 13 runtime here (pip install 'irkit[gpu]')")
    rt = ctypes.CDLL(libs["cudart"])
    v = ctypes.c_int(0)
    assert rt.cudaRuntimeGetVersion(ctypes.byref(v)) == 0  # needs no driver
    assert v.value // 1000 == cuda_env.CUDA_MAJOR
    assert preload_cuda_libraries() is libs  # once per process


def test_nvrtc_compiles_a_kernel_to_ptx_when_installed() -> None:
    path = preload_cuda_libraries()["nvrtc"]
    if path is None:
        pytest.skip("no NVRTC here (pip install 'irkit[gpu]')")
    nv = ctypes.CDLL(path)
    major, minor = ctypes.c_int(), ctypes.c_int()
    assert nv.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0 and major.value == cuda_env.CUDA_MAJOR
    prog = ctypes.c_void_p()
    assert nv.nvrtcCreateProgram(ctypes.byref(prog), KERNEL, b"axpy.cu", 0, None, None) == 0
    opts = (ctypes.c_char_p * 1)(b"--gpu-architecture=compute_90")
    rc = nv.nvrtcCompileProgram(prog, 1, opts)
    size = ctypes.c_size_t()
    if rc != 0:
        nv.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        nv.nvrtcGetProgramLog(prog, log)
        pytest.fail(log.value.decode())
    assert nv.nvrtcGetPTXSize(prog, ctypes.byref(size)) == 0
    ptx = ctypes.create_string_buffer(size.value)
    assert nv.nvrtcGetPTX(prog, ptx) == 0
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    text = ptx.value.decode()
    assert ".target sm_90" in text and ".entry axpy" in text


@pytest.mark.slow  # ~30 s here; tests/unit/test_target_tvm.py::test_tvm_cuda_source_and_ptx covers it by default
def test_tvm_cuda_builds_compile_only() -> None:
    if importlib.util.find_spec("tvm") is None:
        pytest.skip("TVM not installed")
    import numpy as np
    from irkit.targets.registry import get_target

    from irkit.text.parser import parse_module

    t = get_target("tvm-cuda")
    if not t.availability().can_compile:
        pytest.skip(t.availability().reason)
    m = parse_module('''"func.func"() ({
^bb0(%x: tensor<4x64xf32>, %y: tensor<4x64xf32>):
  %0 = "ik.add"(%x, %y) : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>
  %1 = "ik.exp"(%0) : (tensor<4x64xf32>) -> tensor<4x64xf32>
  "func.return"(%1) : (tensor<4x64xf32>) -> ()
}) {function_type = (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<4x64xf32>, sym_name = "main"} : () -> ()
''')
    art = t.lower(m, {})
    src = art.files["kernels.cu"]
    assert src.count("__global__") >= 2 and "cuda/std/cstdint" in src  # the NVRTC preamble
    assert [k.ir_ops for k in art.kernels] == [["ik.add#0"], ["ik.exp#1"]]
    if "kernels.ptx" in art.files:
        assert ".target sm_90" in art.files["kernels.ptx"]
    if t.availability().can_run:
        x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
        np.testing.assert_allclose(t.run(art, [x, x])[0], np.exp(2 * x), rtol=1e-5)


def test_problems_are_one_line_naming_what_is_missing() -> None:
    libs = {"cudart": "libcudart.so.13", "nvrtc": "libnvrtc.so.13"}
    assert "pip install 'irkit[gpu]'" in CudaStatus(libraries={"cudart": None, "nvrtc": None}).problem()
    no_driver = CudaStatus(libraries=libs).problem()
    assert "libcuda.so.1 not found" in no_driver and "driver >= 580" in no_driver
    old = CudaStatus(driver="libcuda.so.1", driver_cuda=(12, 4), devices=1, libraries=libs).problem()
    assert "supports CUDA 12.4 only" in old and "driver >= 580" in old
    none = CudaStatus(driver="libcuda.so.1", driver_cuda=(13, 0), devices=0, libraries=libs).problem()
    assert none.startswith("no CUDA device")
    assert CudaStatus(driver="libcuda.so.1", driver_cuda=(13, 0), devices=1, libraries=libs).problem() == ""
    assert CudaStatus(libraries=libs).problem(need_device=False) == ""


def test_this_machine_is_reported_right() -> None:
    st = cuda_status()
    if st.problem():
        with pytest.raises(CudaUnavailable) as e:
            require_cuda("tvm-cuda")
        msg = str(e.value)
        assert msg.startswith("tvm-cuda cannot run here: ") and "\n" not in msg
        if st.driver is None:
            assert "CUDA 13 needs driver >= 580" in msg
    else:
        assert require_cuda("tvm-cuda").devices >= 1


def test_xla_gpu_says_why_it_cannot_run() -> None:
    pytest.importorskip("jax")
    from irkit.targets.registry import get_target

    av = get_target("xla-gpu").availability()
    if av.can_run:
        return
    assert av.reason and "\n" not in av.reason
    if not av.can_compile:
        assert "jax-cuda13-plugin==" in av.reason and "irkit[gpu]" in av.reason
