"""tvm-llvm's per-call runner (``_CpuRunner``) and thread-pool settings.

The runner stages inputs into resident aligned buffers and hands outputs back through DLPack
without a copy; these tests check that the fast paths keep the results right (against the
float64 interpreter) and independent of later calls, and that the thread-pool defaults and the
parallel threshold are what the docs say.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("tvm")

from irkit.targets.registry import get_target

from irkit.interp import run
from irkit.ir.builder import new_function
from irkit.ir.core import Module
from irkit.ir.types import DType, TensorType


def _module(op: str | None, n_args: int = 2, dtype: DType = DType.f32) -> Module:
    f, b = new_function("main", [TensorType((3, 8), dtype)] * n_args, [f"x{i}" for i in range(n_args)])
    if op is None:  # identity: the output is the argument itself
        b.ret(f.args[0])
    else:
        b.ret(b.create(op, list(f.args), {}).results[0])
    return Module([f])


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


@pytest.fixture(scope="module")
def add_artifact():
    t = get_target("tvm-llvm")
    if not t.availability().can_run:
        pytest.skip("tvm-llvm cannot run here")
    m = _module("ik.add")
    return t, m, t.lower(m)


def test_results_match_interpreter_and_survive_next_call(add_artifact, rng) -> None:
    t, m, art = add_artifact
    x1 = [rng.standard_normal((3, 8)).astype(np.float32) for _ in range(2)]
    x2 = [rng.standard_normal((3, 8)).astype(np.float32) for _ in range(2)]
    (r1,) = t.run(art, x1)
    (r2,) = t.run(art, x2)
    # the first result is its own buffer: the second call did not overwrite it
    np.testing.assert_allclose(r1, run(m, x1, float64=True)[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(r2, run(m, x2, float64=True)[0], rtol=1e-6, atol=1e-6)
    assert not np.shares_memory(r1, r2)
    # the caller's inputs are staged, never aliased
    assert not any(np.shares_memory(r1, x) for x in x1)


def test_runner_converts_lists_and_other_dtypes(add_artifact, rng) -> None:
    t, m, art = add_artifact
    a = rng.standard_normal((3, 8))  # float64: cast into the float32 staging buffer
    b = rng.standard_normal((3, 8)).astype(np.float32).tolist()  # not an ndarray
    (got,) = art.runner([a, b])
    want = run(m, [a.astype(np.float32), np.asarray(b, np.float32)], float64=True)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_runner_rejects_wrong_shape(add_artifact) -> None:
    _, _, art = add_artifact
    with pytest.raises(ValueError, match=r"input of shape \(8, 3\)"):
        art.runner([np.ones((8, 3), np.float32), np.ones((3, 8), np.float32)])


def test_identity_output_is_copied_out_of_staging(rng) -> None:
    t = get_target("tvm-llvm")
    if not t.availability().can_run:
        pytest.skip("tvm-llvm cannot run here")
    m = _module(None, n_args=1)
    art = t.lower(m)
    x1, x2 = (rng.standard_normal((3, 8)).astype(np.float32) for _ in range(2))
    (r1,) = t.run(art, [x1])
    (r2,) = t.run(art, [x2])
    np.testing.assert_array_equal(r1, x1)
    np.testing.assert_array_equal(r2, x2)


def test_thread_pool_defaults_are_set_unless_given() -> None:
    from irkit.targets.tvm_kernels import common as c

    for key in c.THREAD_POOL_DEFAULTS:
        assert key in os.environ  # set by the import, or by the user before it
    assert c.THREAD_POOL_DEFAULTS == {"TVM_BIND_THREADS": "0", "TVM_THREAD_POOL_SPIN_COUNT": "0"}


def test_small_matmuls_stay_on_one_thread() -> None:
    from irkit.targets import tvm as tt

    assert not tt._worth_parallel(2 * 128 * 64 * 256)  # a toy model's 4-MFLOP projection
    assert tt._worth_parallel(2 * 512**3)


def test_session_state_and_inputs_are_copies(rng) -> None:
    """A session keeps an aliased accumulator resident (None = use it); the caller's arrays never change."""
    from irkit.targets.base import lower_for_session

    from irkit.ir.aliases import set_aliases

    t = get_target("tvm-llvm")
    if not t.availability().can_run:
        pytest.skip("tvm-llvm cannot run here")
    m = _module("ik.add")
    set_aliases(m.entry, {0: 0})
    sess = t.open_session(lower_for_session(t, m))
    acc0 = rng.standard_normal((3, 8)).astype(np.float32)
    steps = [rng.standard_normal((3, 8)).astype(np.float32) for _ in range(3)]
    keep = acc0.copy()
    want = acc0.astype(np.float64)
    for i, x in enumerate(steps):
        (got,) = sess.run([acc0 if i == 0 else None, x])
        want = want + x
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(acc0, keep)
    np.testing.assert_allclose(sess.read(0), want, rtol=1e-5, atol=1e-5)
    sess.close()
