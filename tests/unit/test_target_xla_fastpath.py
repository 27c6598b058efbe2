"""``xla-cpu``'s ``Target.run`` fast path (NumPy inputs staged in zero-copy buffers, one direct
executable call) and inline CPU dispatch.

Every result is compared with the float64 interpreter (or with the ordinary JAX dispatch on the
same artifact), on non-zero inputs that change from call to call, so a stale staging buffer or an
output that aliases one would show.
"""

# ruff: noqa: E501  (IR text lines)
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")

from irkit.targets.base import TargetUnavailable
from irkit.targets.registry import get_target
from irkit.targets.xla import XlaExecutable

from irkit.check import compare_all, module_tolerance
from irkit.interp import random_inputs, run
from irkit.testing.blocks import gpt2_style_module
from irkit.text.parser import parse_module

ROOT = Path(__file__).resolve().parents[2]

# Output 0 is argument 0 itself, output 1 reads argument 0 twice; argument 2 is never read.
PASS = """"func.func"() ({
^bb0(%x: tensor<3x5xf32>, %y: tensor<5xf32>, %unused: tensor<2xf32>):
  %0 = "ik.add"(%x, %y) : (tensor<3x5xf32>, tensor<5xf32>) -> tensor<3x5xf32>
  %1 = "ik.mul"(%0, %x) : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
  "func.return"(%x, %1) : (tensor<3x5xf32>, tensor<3x5xf32>) -> ()
}) {function_type = (tensor<3x5xf32>, tensor<5xf32>, tensor<2xf32>) -> (tensor<3x5xf32>, tensor<3x5xf32>), sym_name = "pass"} : () -> ()
"""

# 64-bit arguments (JAX would canonicalise them to 32 bits outside x64 mode).
WIDE = """"func.func"() ({
^bb0(%a: tensor<4xf64>, %i: tensor<4xi64>):
  %0 = "ik.cast"(%i) {to = f64} : (tensor<4xi64>) -> tensor<4xf64>
  %1 = "ik.mul"(%a, %0) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  %2 = "ik.add"(%i, %i) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  "func.return"(%1, %2) : (tensor<4xf64>, tensor<4xi64>) -> ()
}) {function_type = (tensor<4xf64>, tensor<4xi64>) -> (tensor<4xf64>, tensor<4xi64>), sym_name = "wide"} : () -> ()
"""


@pytest.fixture(scope="module")
def xla():
    return get_target("xla-cpu")


@pytest.fixture(scope="module")
def passthrough(xla):
    m = parse_module(PASS, "pass.mlir")
    return m, xla.lower(m, {})


def _rand(shape, seed: int, dtype=np.float32) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) + 0.5).astype(dtype)


def test_gpt2_block_matches_the_interpreter_call_after_call(xla) -> None:
    m = gpt2_style_module(layers=1)
    art = xla.lower(m)
    assert isinstance(art.runner, XlaExecutable) and art.runner.staged is not None
    tol = module_tolerance(m)
    for seed in range(3):
        xs = random_inputs(m.entry, seed=seed)
        rep = compare_all(xla.run(art, xs), run(m, xs, float64=True), tol)
        assert rep.ok, rep


def test_outputs_do_not_alias_the_staging_buffers(xla, passthrough) -> None:
    m, art = passthrough
    x1, y1, u = _rand((3, 5), 1), _rand(5, 2), _rand(2, 3)
    x2, y2 = _rand((3, 5), 4), _rand(5, 5)
    first = xla.run(art, [x1, y1, u])
    second = xla.run(art, [x2, y2, u])
    # The first call's outputs are untouched by the second call's inputs.
    np.testing.assert_array_equal(first[0], x1)
    np.testing.assert_allclose(first[1], (x1 + y1) * x1, rtol=1e-6)
    np.testing.assert_array_equal(second[0], x2)
    ref = run(m, [x2, y2, u], float64=True)
    np.testing.assert_allclose(second[1], ref[1], rtol=1e-6)
    # The caller's arrays are not written either.
    np.testing.assert_array_equal(x1, _rand((3, 5), 1))


def test_inputs_are_cast_like_astype_and_lists_are_accepted(xla, passthrough) -> None:
    _, art = passthrough
    x = _rand((3, 5), 7, np.float64)
    y = [0.25, -1.5, 2.0, 3.5, -0.75]
    u = np.array([1, 2])
    fast = xla.run(art, [x, y, u])
    slow = [np.asarray(o) for o in art.runner.call([x.astype(np.float32), np.asarray(y, np.float32),
                                                   u.astype(np.float32)])]
    for a, b in zip(fast, slow):
        assert a.dtype == np.float32
        np.testing.assert_array_equal(a, b)


def test_wrong_inputs_get_the_targets_one_line_error_and_leave_it_working(xla, passthrough) -> None:
    m, art = passthrough
    x, y, u = _rand((3, 5), 8), _rand(5, 9), _rand(2, 10)
    with pytest.raises(TargetUnavailable, match=r"compiled for input shapes .*got \[\(3, 5\), \(5,\)\]"):
        xla.run(art, [x, y])
    with pytest.raises(TargetUnavailable, match=r"got \[\(3, 5\), \(5,\), \(3,\)\]; lower again"):
        xla.run(art, [x, y, np.ones(3, np.float32)])  # the unread argument is checked too
    with pytest.raises(TargetUnavailable) as e:
        xla.run(art, [x.T, y, u])
    assert "\n" not in str(e.value)
    np.testing.assert_allclose(xla.run(art, [x, y, u])[1], run(m, [x, y, u], float64=True)[1], rtol=1e-6)


def test_64_bit_arguments_keep_their_width(xla) -> None:
    m = parse_module(WIDE, "wide.mlir")
    art = xla.lower(m, {})
    assert art.runner.staged is not None
    a = np.random.default_rng(11).standard_normal(4)
    i = np.array([3, -2**40, 7, 2**41], np.int64)
    out = xla.run(art, [a, i])
    ref = run(m, [a, i], float64=True)
    assert out[0].dtype == np.float64 and out[1].dtype == np.int64
    np.testing.assert_allclose(out[0], ref[0], rtol=1e-12)
    np.testing.assert_array_equal(out[1], ref[1])


def test_two_threads_each_get_their_own_results(xla, passthrough) -> None:
    _, art = passthrough
    errors: list[str] = []

    def worker(seed: int) -> None:
        for k in range(150):
            x, y = _rand((3, 5), seed * 1000 + k), _rand(5, seed * 1000 + k + 500)
            out = xla.run(art, [x, y, y[:2]])
            if not (np.array_equal(out[0], x) and np.allclose(out[1], (x + y) * x, rtol=1e-6)):
                errors.append(f"thread {seed} call {k}")

    threads = [threading.Thread(target=worker, args=(s,)) for s in (1, 2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_donating_artifacts_take_the_ordinary_path(xla) -> None:
    src = PASS.replace('sym_name = "pass"', 'sym_name = "pass", aliases = [[1, 0]]')
    m = parse_module(src, "donate.mlir")
    art = xla.lower(m, {})
    assert art.runner.donate and art.runner.staged is None
    x, y, u = _rand((3, 5), 12), _rand(5, 13), _rand(2, 14)
    out = xla.run(art, [x, y, u])
    np.testing.assert_allclose(out[1], (x + y) * x, rtol=1e-6)
    np.testing.assert_array_equal(x, _rand((3, 5), 12))


_PROBE = """
import sys
sys.path.insert(0, {root!r})
import jax
from irkit.targets import xla_platform
xla_platform.cpu_device()  # what XlaTarget.lower and the runner call first
print("async", jax.config.read("jax_cpu_enable_async_dispatch"))
"""


@pytest.mark.parametrize("env,expected", [(None, "async False"),
                                          pytest.param("true", "async True", marks=pytest.mark.slow)])
def test_cpu_dispatch_is_inline_unless_the_environment_says_otherwise(env, expected) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "JAX_CPU_ENABLE_ASYNC_DISPATCH"}
    if env is not None:
        environ["JAX_CPU_ENABLE_ASYNC_DISPATCH"] = env
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(root=str(ROOT))], env=environ,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == expected


# Few updates into many rows (a KV-cache write): the lowering finds each position's last update by
# sorting the updates' targets. Duplicate targets (the last update wins) and a negative index.
SCATTER = """"func.func"() ({
^bb0(%d: tensor<64x8xf32>, %i: tensor<3x8xi64>, %u: tensor<3x8xf32>):
  %0 = "ik.scatter_elements"(%d, %i, %u) {axis = 0} : (tensor<64x8xf32>, tensor<3x8xi64>, tensor<3x8xf32>) -> tensor<64x8xf32>
  "func.return"(%0) : (tensor<64x8xf32>) -> ()
}) {function_type = (tensor<64x8xf32>, tensor<3x8xi64>, tensor<3x8xf32>) -> tensor<64x8xf32>, sym_name = "write"} : () -> ()
"""


def test_sparse_scatter_keeps_the_last_duplicate_update(xla) -> None:
    m = parse_module(SCATTER, "write.mlir")
    art = xla.lower(m, {})
    assert " sort(" in art.files["hlo.txt"]  # the sort-based path, not a 512-long winner table
    rng = np.random.default_rng(21)
    d = rng.standard_normal((64, 8)).astype(np.float32)
    idx = rng.integers(0, 64, size=(3, 8))
    idx[2, :4] = idx[0, :4]  # duplicates: row 2 must win
    idx[1, 5] = -1  # the last row
    idx[2, 5] = 63  # ... and the same row again through a positive index
    u = rng.standard_normal((3, 8)).astype(np.float32)
    out = xla.run(art, [d, idx, u])[0]
    ref = run(m, [d, idx, u], float64=True)[0]
    np.testing.assert_array_equal(out, ref.astype(np.float32))
    assert out[63, 5] == u[2, 5] and not np.array_equal(out, d)


def test_breakdown_splits_out_the_per_call_overhead(xla, passthrough) -> None:
    from irkit.breakdown import breakdown

    m, art = passthrough
    x, y, u = _rand((3, 5), 30), _rand(5, 31), _rand(2, 32)
    eng = art.runner.engine
    outs = eng.call(eng.prepare([x, y, u]))
    np.testing.assert_allclose(np.asarray(outs[1]), run(m, [x, y, u], float64=True)[1], rtol=1e-6)
    bd = breakdown(xla, art, [x, y, u], rounds=5, warmup=1)
    assert bd.engine_measured and bd.total > 0 and bd.overhead >= 0
