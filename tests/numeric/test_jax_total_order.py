"""XLA's float total order in the JAX importers, ``bitcast_convert_type`` and clamp on i1.

``lax.top_k`` (and a StableHLO sort whose comparator compares the raw operands with
``TOTALORDER``) rank floats by -NaN < -Inf < ... < -0.0 < 0.0 < ... < Inf < NaN, while
``ik.topk`` / ``ik.sort`` rank every NaN largest; the importers build the total-order key
with ``ik.bitcast``.  jax's own sort comparators canonicalise -0.0 and NaNs first, so
there the plain ``ik.sort`` order is the right one.  Every case is compared with
``jax.jit`` on the CPU, bit for bit (NaN signs included) and index for index, on the
interpreter in the module's dtypes and in float64.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
lax = jax.lax

from irkit.frontends.jax import import_hlo, import_jax, import_stablehlo  # noqa: E402
from irkit.interp import run  # noqa: E402
from irkit.ir import Module  # noqa: E402

NEG_NAN = np.frombuffer(np.uint32(0xFFC00000).tobytes(), np.float32)[0]
NEG_NAN_PAYLOAD = np.frombuffer(np.uint32(0xFFC00001).tobytes(), np.float32)[0]
# No subnormals: XLA's CPU sort compares them as zero (denormals-are-zero), an FPU mode, not the order.
SPECIAL = [np.nan, -np.inf, 1.0, np.inf, NEG_NAN, -0.0, 0.0, -1.0, 2.5, NEG_NAN_PAYLOAD, -3.0, np.float32(3e38)]


def special_matrix(seed: int, rows: int = 3) -> np.ndarray:
    """Rows of the special values in a different order each, mixed with random normals."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(rows):
        row = np.array(SPECIAL + list(rng.standard_normal(4)), np.float32)
        out.append(row[rng.permutation(row.size)])
    return np.stack(out)


def paths(f: Callable[..., Any], args: Sequence[Any]) -> list[tuple[str, Module]]:
    lowered = jax.jit(f).lower(*args)
    return [("jaxpr", import_jax(f, args)), ("stablehlo", import_stablehlo(lowered.as_text())),
            ("hlo", import_hlo(lowered.as_text(dialect="hlo")))]


def bits(a: Any) -> np.ndarray:
    """An array's exact bits (floats as unsigned integers of their width)."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return a.view(f"u{a.dtype.itemsize}")
    return a


def assert_bitwise(m: Module, f: Callable[..., Any], inputs: Sequence[np.ndarray], what: str) -> None:
    want = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.jit(f)(*inputs))]
    for float64 in (False, True):
        got = run(m, list(inputs), float64=float64)
        assert len(got) == len(want), what
        for i, (g, w) in enumerate(zip(got, want)):
            g = np.asarray(g)
            if float64 and g.dtype != w.dtype:
                with np.errstate(over="ignore"):  # 2 * 3e38 is Inf in float32, as in JAX
                    g = g.astype(w.dtype)
            assert g.shape == w.shape, f"{what} (float64={float64}) output {i}: shape {g.shape} != {w.shape}"
            np.testing.assert_array_equal(bits(g), bits(w), err_msg=f"{what} (float64={float64}) output {i}")


def total_order_rank(x: float) -> tuple[int, int]:
    """XLA's total order on one float32, from its bits: negatives by descending magnitude."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    return (0, -(u & 0x7FFFFFFF)) if u >> 31 else (1, u)


def test_top_k_ranks_floats_by_total_order() -> None:
    def f(x: Any) -> Any:
        return (*lax.top_k(x, x.shape[-1]), *lax.top_k(x, 5), *lax.top_k(-x, 3))

    x = special_matrix(0)
    for path, m in paths(f, (x,)):
        assert "ik.bitcast" in {op.name for op in m.walk()}, path
        for seed in range(3):
            assert_bitwise(m, f, [special_matrix(seed)], f"top_k via {path}, seed {seed}")
    # The reference order from the bits alone: -NaN last, NaN first, 0.0 before -0.0.
    row = special_matrix(1)[0]
    want = sorted(range(row.size), key=lambda i: (total_order_rank(float(row[i])), -i), reverse=True)
    got = run(import_jax(f, (row[None],)), [row[None]])[1][0]
    assert list(got) == want


def test_top_k_on_rows_without_specials_and_ints() -> None:
    def f(x: Any, k: Any) -> Any:
        return (*lax.top_k(x, 4), *lax.top_k(k, 4))

    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 9)).astype(np.float32)
    k = rng.integers(-4, 4, size=(5, 9)).astype(np.int32)  # ties: the lower index first
    for path, m in paths(f, (x, k)):
        assert_bitwise(m, f, [x, k], f"plain top_k via {path}")


def test_jax_sorts_canonicalise_zeros_and_nans() -> None:
    """jnp.sort / lax.sort treat -0.0 == 0.0 and every NaN as one largest NaN (stable), and keep
    the operands' bits; the plain ik.sort order, no total-order key."""
    def f(x: Any) -> Any:
        iota = lax.broadcasted_iota(jnp.int32, x.shape, 1)
        return (jnp.sort(x, axis=1), lax.sort((x, iota), num_keys=1, dimension=1)[1],
                lax.sort((-x, x, iota), num_keys=2, dimension=1)[2], jnp.argsort(x, axis=1, descending=True))

    x = special_matrix(4)
    for path, m in paths(f, (x,)):
        for seed in range(3):
            assert_bitwise(m, f, [special_matrix(seed + 4)], f"sort via {path}, seed {seed}")


RAW_TOTAL_ORDER_SORT = """
func.func public @main(%arg0: tensor<2x16xf32>, %arg1: tensor<2x16xi32>) -> (tensor<2x16xf32>, tensor<2x16xi32>) {
  %0:2 = "stablehlo.sort"(%arg0, %arg1) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %1 = stablehlo.compare %DIR, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }) : (tensor<2x16xf32>, tensor<2x16xi32>) -> (tensor<2x16xf32>, tensor<2x16xi32>)
  return %0#0, %0#1 : tensor<2x16xf32>, tensor<2x16xi32>
}
"""


@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_stablehlo_sort_with_a_raw_total_order_comparator(direction: str) -> None:
    """A comparator that compares the operands themselves with TOTALORDER (not jax's
    canonicalised copies) sorts -NaN first and -0.0 before 0.0; checked against XLA."""
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import xla_client as xc

    text = RAW_TOTAL_ORDER_SORT.replace("%DIR", direction)
    m = import_stablehlo(text)
    x = special_matrix(7, rows=2)
    iota = np.broadcast_to(np.arange(16, dtype=np.int32), (2, 16)).copy()
    # XLA itself on the same module.
    with jax_mlir.make_ir_context():
        backend = jax.devices("cpu")[0].client
        exe = backend.compile_and_load(text, jax.devices("cpu"), xc.CompileOptions()) \
            if hasattr(backend, "compile_and_load") else backend.compile(text)
    want = [np.asarray(o) for o in exe.execute([jax.device_put(x), jax.device_put(iota)])]
    for float64 in (False, True):
        got = run(m, [x, iota], float64=float64)
        np.testing.assert_array_equal(bits(np.asarray(got[0], np.float32)), bits(want[0]))
        np.testing.assert_array_equal(got[1], want[1])
    ranks = [[total_order_rank(float(v)) for v in row] for row in want[0]]
    assert all(r == sorted(r, reverse=direction == "GT") for r in ranks)


def test_bitcast_convert_type_both_ways_and_widths() -> None:
    def f(x: Any, i: Any) -> Any:
        return (lax.bitcast_convert_type(x, jnp.int32), lax.bitcast_convert_type(x, jnp.uint32),
                lax.bitcast_convert_type(i, jnp.float32), lax.bitcast_convert_type(x, jnp.uint8),
                lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.uint16), jnp.float32),
                lax.bitcast_convert_type(x, jnp.float32) * 2.0)

    x = special_matrix(8)
    i = np.random.default_rng(8).integers(-2**31, 2**31 - 1, size=(3, 5), dtype=np.int64).astype(np.int32)
    for path, m in paths(f, (x, i)):
        assert "ik.bitcast" in {op.name for op in m.walk()}, path
        assert_bitwise(m, f, [x, i], f"bitcast via {path}")


def test_clamp_on_bool_operands() -> None:
    def f(lo: Any, x: Any, hi: Any) -> Any:
        return lax.clamp(lo, x, hi)

    rng = np.random.default_rng(9)
    args = [rng.random((4, 5)) < 0.5 for _ in range(3)]
    for path, m in paths(f, args):
        for seed in range(3):
            r = np.random.default_rng(seed)
            xs = [r.random((4, 5)) < 0.5 for _ in range(3)]
            assert_bitwise(m, f, xs, f"clamp on i1 via {path}, seed {seed}")


def test_hlo_text_spells_nextafter_with_bitcasts() -> None:
    """XLA's HLO (as lowered and as compiled) writes nextafter with bitcast-converts; both import."""
    def f(x: Any, y: Any) -> Any:
        return lax.nextafter(x, y)

    x = np.array([1.0, -0.0, 0.0, np.inf, np.nan, -1e-45, 3.0, NEG_NAN, -2.5], np.float32)
    y = np.array([2.0, 1.0, -1.0, 0.0, 1.0, 1.0, 3.0, 0.0, -np.inf], np.float32)
    lowered = jax.jit(f).lower(x, y)
    for what, text in (("lowered", lowered.as_text(dialect="hlo")), ("compiled", lowered.compile().as_text())):
        m = import_hlo(text)
        assert "ik.bitcast" in {op.name for op in m.walk()}, what
        got = np.asarray(run(m, [x, y])[0])
        np.testing.assert_array_equal(bits(got), bits(np.asarray(f(x, y))), err_msg=what)


@pytest.mark.parametrize("target", ["ort", "xla-cpu", pytest.param("tvm-llvm", marks=pytest.mark.slow)])
def test_total_order_top_k_on_targets(target: str) -> None:
    """The imported top_k (ik.bitcast, integer bit ops, ik.topk, ik.gather_elements) lowered to each
    runnable target gives JAX's values bit for bit and its indices."""
    from irkit.targets.registry import get_target

    tg = get_target(target)
    if not tg.availability().can_run:
        pytest.skip(f"{target} cannot run here")

    def f(x: Any) -> Any:
        return lax.top_k(x, 6)

    x = special_matrix(11)
    m = import_jax(f, (x,))
    art = tg.lower(m, {})
    for seed in (11, 12):
        xs = special_matrix(seed)
        got = tg.run(art, [xs])
        want = [np.asarray(w) for w in f(xs)]
        np.testing.assert_array_equal(bits(np.asarray(got[0])), bits(want[0]))
        np.testing.assert_array_equal(np.asarray(got[1]), want[1])
