"""ONNX DFT/STFT precision: each output is the float32 rounding of the float64 answer, on every target.

The inverse DFT of a real signal has imaginary parts that are exactly zero (frequency 0 and the
Nyquist frequency); a float32 matrix product leaves them at ~1e-6, which ONNX's suite tolerance
(atol 1e-7) cannot absorb.  The import computes the product in float64 and rounds once.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from irkit.frontends.onnx import import_onnx  # noqa: E402
from irkit.interp import run as interp_run  # noqa: E402

TARGETS = ["reference", "ort", "tvm-llvm", "xla-cpu"]


def _dft_model(in_shape: list[int], out_shape: list[int], opset: int, **attrs: int) -> onnx.ModelProto:
    node = helper.make_node("DFT", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "dft", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _stft_model(n: int, frame: int, step: int) -> onnx.ModelProto:
    frames = (n - frame) // step + 1
    step_t = helper.make_tensor("step", TensorProto.INT64, [], [step])
    len_t = helper.make_tensor("frame_length", TensorProto.INT64, [], [frame])
    node = helper.make_node("STFT", ["x", "step", "", "frame_length"], ["y"], onesided=1)
    graph = helper.make_graph([node], "stft", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, n, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, frames, frame // 2 + 1, 2])],
                              initializer=[step_t, len_t])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _run(target: str, model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    m = import_onnx(model)
    if target == "reference":
        return np.asarray(interp_run(m, [x])[0])
    from irkit.targets.registry import get_target

    t = get_target(target)
    av = t.availability()
    if not av.can_run:
        pytest.skip(f"{target} cannot run here: {av.reason}")
    return np.asarray(t.run_module(m, [x])[0])


def _assert_float32_rounding_of(got: np.ndarray, exact: np.ndarray) -> None:
    """``got`` is float32 and within one float32 ulp of the float64 ``exact`` (plus float64 noise)."""
    assert got.dtype == np.float32 and got.shape == exact.shape
    noise = 1e-12 * float(np.abs(exact).max())
    bound = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64) + noise
    err = np.abs(got.astype(np.float64) - exact)
    assert np.all(err <= bound), f"max error {err.max():.3g} (worst excess {(err - bound).max():.3g})"


def _complex_last(z: np.ndarray) -> np.ndarray:
    return np.stack([z.real, z.imag], axis=-1)


@pytest.mark.parametrize("target", TARGETS)
def test_inverse_dft_exact_zeros(target: str) -> None:
    # The ONNX suite's test_dft_inverse signal: 0..99 as complex, inverse DFT along axis 1 (length 10).
    sig = np.arange(100, dtype=np.float64).reshape(1, 10, 10)
    x = _complex_last(sig + 0j).astype(np.float32)  # [1, 10, 10, 2], exact in float32
    exact = _complex_last(np.fft.ifft(x[..., 0].astype(np.float64) + 1j * x[..., 1], axis=1))
    got = _run(target, _dft_model([1, 10, 10, 2], [1, 10, 10, 2], 19, axis=1, inverse=1), x)
    _assert_float32_rounding_of(got, exact)
    # Frequencies 0 and 5 (Nyquist) of a real signal have exactly zero imaginary parts.
    zeros = got[0, [0, 5], :, 1]
    assert np.abs(zeros).max() < 1e-12, np.abs(zeros).max()


@pytest.mark.parametrize("target", TARGETS)
def test_forward_and_onesided_dft_match_float64(target: str) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 12, 3, 2)).astype(np.float32)
    z = x[..., 0].astype(np.float64) + 1j * x[..., 1]
    got = _run(target, _dft_model([2, 12, 3, 2], [2, 12, 3, 2], 19, axis=1), x)
    _assert_float32_rounding_of(got, _complex_last(np.fft.fft(z, axis=1)))
    half = rng.standard_normal((2, 7, 3, 2)).astype(np.float32)  # irfft of a half spectrum, length 12
    hz = half[..., 0].astype(np.float64) + 1j * half[..., 1]
    got = _run(target, _dft_model([2, 7, 3, 2], [2, 12, 3, 1], 19, axis=1, inverse=1, onesided=1), half)
    _assert_float32_rounding_of(got, np.fft.irfft(hz, n=12, axis=1)[..., None])


@pytest.mark.parametrize("target", ["reference", "ort"])
def test_stft_matches_float64(target: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 64, 1)).astype(np.float32)
    frame, step = 16, 8
    frames = (64 - frame) // step + 1
    idx = np.arange(frames)[:, None] * step + np.arange(frame)[None, :]
    exact = _complex_last(np.fft.rfft(x[:, idx, 0].astype(np.float64), axis=-1))
    _assert_float32_rounding_of(_run(target, _stft_model(64, frame, step), x), exact)


def test_inexact_suite_data_judge() -> None:
    from irkit.conformance.results import InexactDataJudge, Tol, compare_outputs

    tol = Tol(1e-3, 1e-7)
    exact = np.array([0.0, 1.5, -2.25, 1e-3])
    stored_bad = np.array([2e-7, 1.5, -2.25, 1e-3], dtype=np.float32)  # misses exact 0 beyond atol
    stored_ok = exact.astype(np.float32)
    right = exact.astype(np.float32)
    wrong = np.array([0.0, 1.6, -2.25, 1e-3], dtype=np.float32)
    # Inexact stored data: the float64 answer decides, and the note says so.
    j = InexactDataJudge(lambda: [exact], tol)
    assert compare_outputs([right], [stored_bad], tol, j)[0]
    assert not compare_outputs([wrong], [stored_bad], tol, j)[0]
    assert "float64 answer" in j.note()
    # Exact stored data: a mismatch stays a mismatch, and no note.
    j = InexactDataJudge(lambda: [exact], tol)
    assert not compare_outputs([wrong], [stored_ok], tol, j)[0]
    assert j.note() == ""
    # No float64 form: no second opinion.
    j = InexactDataJudge(lambda: (_ for _ in ()).throw(RuntimeError("no float64 form")), tol)
    assert not compare_outputs([right], [stored_bad], tol, j)[0]


def test_suite_case_dft_inverse_passes_against_the_float64_answer() -> None:
    from irkit.conformance.onnx_suite import run_case
    from irkit.conformance.runner import Case

    # ONNX's own test_dft_inverse_opset19, built as its generator builds it: the stored output is
    # NumPy's complex64 FFT, which holds 1.9e-7 where the answer is exactly 0 (atol 1e-7).
    sig = np.arange(0, 100, dtype=np.complex64).reshape(10, 10)
    want = np.fft.ifft(sig, axis=0)
    x = np.stack((sig.real, sig.imag), axis=2).astype(np.float32).reshape(1, 10, 10, 2)
    y = np.stack((want.real, want.imag), axis=2).astype(np.float32).reshape(1, 10, 10, 2)
    model = _dft_model([1, 10, 10, 2], [1, 10, 10, 2], 19, axis=1, inverse=1)
    case = Case("test_dft_inverse_opset19", "DFT", (model.SerializeToString(), [x], [y], 1e-3, 1e-7))
    rows = {r.runner: r for r in run_case(case, [], peers=False)}
    assert rows["reference"].status == "pass", rows["reference"].reason
    assert "float64 answer" in rows["reference"].reason
    # onnxruntime's float32 FFT misses the float64 answer as well as the stored data.
    assert rows["onnxruntime"].status in ("wrong", "refused")
