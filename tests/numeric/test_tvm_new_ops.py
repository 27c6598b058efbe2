"""tvm-llvm lowers every op of the coverage issue (OPSPEC) and matches the float64 oracle.

Each rule of ``targets/tvm.py`` written for the new ops runs on every sample of
:mod:`irkit.testing.op_samples` (special values included: NaN/±Inf, halves for round,
ties for argmax/sort/topk, negative indices, duplicate scatter indices, out-of-range
dynamic_slice starts, shifts by the bit width, unsigned and narrow ints) and is compared
with ``irkit.interp.run(..., float64=True)`` under irkit's tolerance policy.  A sample the
rule refuses must say so clearly (TargetUnavailable naming the op); the only expected
refusal is none today (REFUSED lists them when a rule gains one).  The table-driven test over all targets lives with
the conformance suite; this file keeps to the TVM rules.
"""

from __future__ import annotations

import pytest

pytest.importorskip("tvm")

from irkit.targets.base import TargetUnavailable
from irkit.targets.registry import get_target

from irkit.check import compare_all, module_tolerance
from irkit.interp import run
from irkit.ir.core import Module
from irkit.testing.op_samples import one_op_module, sample_id, samples

NEW_OPS = ["tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log1p", "expm1",
           "round", "trunc", "erfinv", "lgamma", "digamma", "isnan", "isinf", "isfinite", "bitwise_not",
           "popcount", "clz", "atan2", "nextafter", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left",
           "shift_right_logical", "shift_right_arithmetic", "mod", "floor_div", "argmin", "argmax", "cumsum",
           "cumprod", "cummax", "cummin", "gather", "gather_elements", "gather_nd", "scatter_elements",
           "scatter_nd", "dynamic_slice", "dynamic_update_slice", "reverse", "sort", "topk", "reduce_window",
           "conv"]

# (op, sample note) pairs the TVM rules refuse on purpose, with the words the refusal must contain
REFUSED: dict[tuple[str, str], str] = {}


def _cases() -> list:
    out = []
    for name in NEW_OPS:
        for i, s in enumerate(samples(f"ik.{name}")):
            out.append(pytest.param(f"ik.{name}", i, id=sample_id(f"ik.{name}", i, s)))
    return out


def _check(m: Module, inputs: list, target: str = "tvm-llvm") -> None:
    t = get_target(target)
    got = t.run(t.lower(m), inputs)
    rep = compare_all(got, run(m, inputs, float64=True), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons if not c.ok]


@pytest.mark.parametrize("name, i", _cases())
def test_new_op_matches_float64_oracle(name: str, i: int) -> None:
    s = samples(name)[i]
    m = one_op_module(name, s)
    why = REFUSED.get((name, s.note))
    if why is not None:
        with pytest.raises(TargetUnavailable, match=why) as e:
            get_target("tvm-llvm").lower(m)
        assert name in str(e.value)
        return
    _check(m, s.inputs)


def test_every_new_op_has_a_rule() -> None:
    t = get_target("tvm-llvm")
    assert [n for n in NEW_OPS if not t.supports(f"ik.{n}")] == []


CUDA_BUILDS = ["ik.sort", "ik.topk", "ik.cumsum", "ik.cummax", "ik.argmax", "ik.gather_nd", "ik.reduce_window",
               "ik.conv", "ik.popcount", "ik.erfinv", "ik.lgamma", "ik.shift_right_arithmetic"]


@pytest.mark.parametrize("name", CUDA_BUILDS)
def test_new_op_builds_cuda_source(name: str, monkeypatch) -> None:
    """tvm-cuda compiles the new ops to CUDA source here without a GPU (PTX is left out:
    nvcc takes seconds per module and the kernels are DLight's or TOPI's GPU schedules)."""
    from irkit.targets.tvm_kernels import common

    monkeypatch.setattr(common, "find_nvcc", lambda: None)
    art = get_target("tvm-cuda").lower(one_op_module(name, samples(name)[0]))
    assert "__global__" in art.files["kernels.cu"]


def test_cuda_refuses_scatter_without_reduction_clearly() -> None:
    s = next(s for s in samples("ik.scatter_elements") if s.attrs.get("reduction", "none") == "none")
    with pytest.raises(TargetUnavailable, match=r"tvm-cuda: 'ik.scatter_elements' at .*duplicate indices"):
        get_target("tvm-cuda").lower(one_op_module("ik.scatter_elements", s))


@pytest.mark.parametrize("indices", ["extent-1", "iota-plus-1", "constant-distinct", "constant-duplicate"])
def test_cuda_scatter_with_provably_distinct_indices_builds(indices: str, monkeypatch) -> None:
    """A scatter whose indices cannot repeat (torch's select_scatter: extent 1 along the axis; its
    slice_scatter: an iota along the axis plus an offset; distinct constants) is deterministic on the
    GPU and builds; duplicate constants are still refused.  On tvm-llvm the same module matches the
    interpreter."""
    import numpy as np

    from irkit.ir.builder import new_function
    from irkit.ir.types import DType, TensorType
    from irkit.targets.tvm_kernels import common

    f, b = new_function("main", [TensorType((4, 5), DType.f32), TensorType((4, 3 if indices != "extent-1" else 1),
                                                                            DType.f32)], ["d", "u"])
    shape = (4, 3) if indices != "extent-1" else (4, 1)
    if indices == "extent-1":
        idx = b.constant(np.full(shape, 2, np.int64))
    elif indices == "iota-plus-1":
        idx = b.create("ik.add", [b.create("ik.iota", [], {"shape": shape, "axis": 1, "dtype": DType.i64}).results[0],
                                  b.constant(np.array(1, np.int64))], {}).results[0]
    else:
        row = [4, 0, -4] if indices == "constant-distinct" else [4, 0, -1]  # -1 is 4 again
        idx = b.constant(np.tile(np.array(row, np.int64), (4, 1)))
    b.ret(b.create("ik.scatter_elements", [f.args[0], idx, f.args[1]], {"axis": 1, "reduction": "none"}).results[0])
    m = Module([f])
    monkeypatch.setattr(common, "find_nvcc", lambda: None)
    if indices == "constant-duplicate":
        with pytest.raises(TargetUnavailable, match="not provably distinct"):
            get_target("tvm-cuda").lower(m)
        return
    assert "__global__" in get_target("tvm-cuda").lower(m).files["kernels.cu"]
    rng = np.random.default_rng(0)
    _check(m, [rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal(shape).astype(np.float32)])
