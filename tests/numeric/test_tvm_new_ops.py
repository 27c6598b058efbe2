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


@pytest.mark.parametrize("name", ["ik.scatter_elements", "ik.scatter_nd"])
def test_cuda_scatter_without_reduction_builds_as_a_gather(name: str, monkeypatch) -> None:
    """Run-time indices may repeat: tvm-cuda builds the race-free gather form (each output element
    takes the last update landing on it), and that TE, built for the CPU, matches the interpreter
    on indices with duplicates and negatives."""
    import numpy as np
    import tvm
    from tvm import te

    from irkit.targets.tvm_kernels import common, te_ops

    s = next(s for s in samples(name) if s.attrs.get("reduction", "none") == "none")
    monkeypatch.setattr(common, "find_nvcc", lambda: None)
    assert "scatter_winner" in get_target("tvm-cuda").lower(one_op_module(name, s)).files["kernels.cu"]

    rng = np.random.default_rng(1)
    if name == "ik.scatter_nd":
        data = rng.standard_normal((6, 5, 3)).astype(np.float32)
        idx = rng.integers(-3, 3, size=(4, 2, 2)).astype(np.int64)  # 8 index pairs over 30 rows: repeats
        upd = rng.standard_normal((4, 2, 3)).astype(np.float32)
        attrs: dict = {}
        fn = te_ops.scatter_nd_last_wins
    else:
        data = rng.standard_normal((4, 6, 5)).astype(np.float32)
        idx = rng.integers(-6, 6, size=(3, 7, 4)).astype(np.int64)  # 7 updates per lane of 6: repeats
        upd = rng.standard_normal((3, 7, 4)).astype(np.float32)
        attrs = {"axis": 1}

        def fn(d, i, u):
            return te_ops.scatter_elements_last_wins(d, i, u, 1)
    phs = [te.placeholder(a.shape, str(a.dtype), name=f"x{k}") for k, a in enumerate((data, idx, upd))]
    out = fn(*phs)
    ex = tvm.compile(tvm.IRModule({"main": te.create_prim_func([*phs, out])}), target="llvm")
    got = tvm.runtime.tensor(np.zeros(data.shape, np.float32), tvm.cpu())
    ex["main"](*(tvm.runtime.tensor(a, tvm.cpu()) for a in (data, idx, upd)), got)
    from irkit.ir.builder import new_function
    from irkit.ir.types import DType, TensorType

    dt = {np.dtype(np.float32): DType.f32, np.dtype(np.int64): DType.i64}
    f, b = new_function("main", [TensorType(a.shape, dt[a.dtype]) for a in (data, idx, upd)], ["d", "i", "u"])
    b.ret(b.create(name, list(f.args), {**attrs, "reduction": "none"}).results[0])
    ref = run(Module([f]), [data, idx, upd])[0]
    np.testing.assert_array_equal(got.numpy(), ref)


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
    cu = get_target("tvm-cuda").lower(m).files["kernels.cu"]
    assert "__global__" in cu
    # duplicates take the gather form; distinct indices keep TOPI's parallel scatter
    assert ("scatter_winner" in cu) == (indices == "constant-duplicate")
    rng = np.random.default_rng(0)
    _check(m, [rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal(shape).astype(np.float32)])
