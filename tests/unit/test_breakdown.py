"""``irkit.breakdown`` and ``irkit bench --breakdown``: the parts sum to the end-to-end time and
every kernel is named (an artifact kernel, never an anonymous engine function)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from irkit.breakdown import Breakdown, breakdown, kernel_of, render
from irkit.cli import main
from irkit.ir.builder import new_function
from irkit.ir.core import Module
from irkit.ir.types import DType, TensorType
from irkit.ir.verify import verify
from irkit.targets.registry import get_target


def _block() -> tuple[Module, list[np.ndarray]]:
    """matmul + bias + gelu, then layer norm: a few kernels, milliseconds of work."""
    rng = np.random.default_rng(3)
    f, b = new_function("main", [TensorType((32, 128), DType.f32)], ["x"])
    w = b.constant((rng.standard_normal((128, 256)) * 0.05).astype(np.float32))
    bias = b.constant(rng.standard_normal(256).astype(np.float32))
    h = b.create("ik.matmul", [f.args[0], w], {}).results[0]
    h = b.create("ik.add", [h, bias], {}).results[0]
    h = b.create("ik.gelu", [h], {}).results[0]
    b.ret(b.create("ik.layer_norm", [h], {"axis": -1, "eps": 1e-5}).results[0])
    m = Module([f])
    verify(m)
    return m, [rng.standard_normal((32, 128)).astype(np.float32)]


@pytest.mark.parametrize("target", ["tvm-llvm", "ort"])
def test_parts_sum_to_total_and_kernels_are_named(target: str) -> None:
    pytest.importorskip("tvm" if target == "tvm-llvm" else "onnxruntime")
    m, xs = _block()
    t = get_target(target)
    art = t.lower(m)
    bd = breakdown(t, art, xs, rounds=8)
    assert bd.engine_measured
    assert bd.total > 0 and bd.overhead >= 0 and bd.kernel_total > 0
    assert sum(bd.parts().values()) == pytest.approx(bd.total, rel=1e-9, abs=1e-12)
    names = {k.name for k in art.kernels}
    assert bd.kernels and all(n in names for n, _ in bd.kernels), (bd.kernels, names)
    # the kernels are timed by the engine's profiler in other runs: same order of magnitude as the total
    assert 0.05 * bd.total < bd.kernel_total < 5 * bd.total
    text = render(bd)
    assert "kernels" in text and "per-call overhead" in text and bd.kernels[0][0] in text
    d = bd.as_dict()
    assert d["total_s"] == pytest.approx(d["kernels_s"] + d["overhead_s"] + d["other_s"])


def test_kernel_of_maps_fused_functions() -> None:
    from irkit.targets.base import Kernel

    ks = [Kernel("conv2d_2", "scheduled TensorIR", [], [], "relax.py",
                 extra={"functions": ["conv2d_2", "conv2d_2_im2col", "conv2d_2_nchw"]}),
          Kernel("add_7", "TOPI", [], [], "relax.py", extra={"functions": ["add_7"]})]
    assert kernel_of("conv2d_2_nchw", ks) == "conv2d_2"
    assert kernel_of("fused_conv2d_2_im2col_reshape", ks) == "conv2d_2"
    assert kernel_of("fused_add_7_relu", ks) == "add_7"
    assert kernel_of("add_77", ks) == "add_77"  # not add_7: a function no kernel claims keeps its name


def test_other_is_the_remainder() -> None:
    bd = Breakdown("x", total=1.0, overhead=0.25, kernels=[("a", 0.5), ("b", 0.125)])
    assert bd.other == pytest.approx(0.125)


def test_bench_breakdown_flag(tmp_path: Path, capsys) -> None:
    pytest.importorskip("onnxruntime")
    from irkit.text import write_module

    m, _ = _block()
    p = tmp_path / "block.mlir"
    write_module(m, str(p))
    out = tmp_path / "r.json"
    assert main(["bench", str(p), "--targets", "ort", "--breakdown", "--repeats", "5", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "breakdown" in text and "per-call overhead" in text and "engine other" in text
    rows = json.loads(out.read_text())["breakdown"]
    assert rows and rows[0]["target"] == "ort"
    r = rows[0]
    assert r["total_s"] == pytest.approx(r["kernels_s"] + r["overhead_s"] + r["other_s"])
    assert all(k["kernel"] for k in r["per_kernel"])


def test_render_says_when_the_profiler_inflated_the_kernels() -> None:
    """Kernels the engine's profiler timed at more than the bare call leave a negative remainder;
    the report says why instead of leaving a bare negative share."""
    slow = Breakdown("ort", total=1.0e-3, overhead=0.1e-3, kernels=[("a", 0.8e-3), ("b", 0.5e-3)], rounds=5)
    assert slow.other < 0
    assert "1.44x the bare call" in render(slow)
    fine = Breakdown("ort", total=1.0e-3, overhead=0.1e-3, kernels=[("a", 0.5e-3), ("b", 0.3e-3)], rounds=5)
    assert "profiler" not in render(fine)
