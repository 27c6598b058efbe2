"""A sample of JAX's own primitive harnesses through both JAX import paths.

``jax._src.internal_test_util.test_harnesses.all_harnesses`` is JAX's conformance
material: one small function per primitive form with argument makers.  This fast
sample takes, in float32/int32/bool, the first CPU case of every primitive group
(three of the groups with many forms: gather, scatter, convolution, pad, windows,
dynamic slices), imports it through the jaxpr and through StableHLO text, runs the
interpreter and compares with ``jax.jit`` (NaNs equal, irkit.check's tolerance).
Groups irkit refuses on purpose must fail with an error that says why.  The full
sweep is the conformance command's job.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("absl")  # test_harnesses imports absl.testing

from jax._src.internal_test_util import test_harnesses as th

from irkit.check import compare_all, module_tolerance
from irkit.frontends.common import UnsupportedOpsError
from irkit.frontends.jax import import_jax, import_stablehlo
from irkit.interp import run

OUT_OF_SCOPE = {"cholesky", "eig", "eigh", "lu", "qr", "svd", "triangular_solve", "tridiagonal_solve",
                "custom_linear_solve", "random_categorical", "random_gamma", "random_randint", "random_uniform",
                "fft", "complex", "conj", "select_and_scatter_add", "select_and_gather_add"}
"""Linear algebra, random numbers, complex numbers and training-only primitives."""

REFUSED = {"igamma": "special function", "igammac": "special function",
           "regularized_incomplete_beta": "special function"}
"""In-scope groups irkit refuses, with a word of the reason the error must give (for the
StableHLO path, jax writes igamma and friends as while loops, refused as loops; where
one imports, it must match)."""

MORE = {"gather", "scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max", "conv_general_dilated",
        "pad", "reduce_window_add", "reduce_window_max", "dynamic_slice", "dynamic_update_slice", "argmax"}
PER_GROUP_MORE = 3


def _sample() -> list[Any]:
    by_group: dict[str, list[Any]] = collections.defaultdict(list)
    for h in th.all_harnesses:
        if h.dtype is None or np.dtype(h.dtype).name not in ("float32", "int32", "bool"):
            continue
        if h.group_name in OUT_OF_SCOPE or not h.filter(device_under_test="cpu", include_jax_unimpl=False):
            continue
        by_group[h.group_name].append(h)
    # all_harnesses is built partly from set iteration, so its order changes with the hash
    # seed (each pytest-xdist worker has its own): pick by name, never by position.
    picked = []
    for g in sorted(by_group):
        cases = sorted(by_group[g], key=lambda h: h.fullname)
        picked += cases[: PER_GROUP_MORE if g in MORE else 1]
    return [pytest.param(h, id=h.fullname[:90]) for h in picked]


def _import(h: Any, path: str, args: list[np.ndarray]) -> Any:
    if path == "jaxpr":
        return import_jax(h.dyn_fun, args)
    return import_stablehlo(jax.jit(h.dyn_fun).lower(*args).as_text())


@pytest.mark.parametrize("harness", _sample())
@pytest.mark.parametrize("path", ["jaxpr", "stablehlo"])
def test_harness(harness: Any, path: str) -> None:
    args = [np.asarray(a) for a in harness.dyn_args_maker(np.random.RandomState(0))]
    want = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.jit(harness.dyn_fun)(*args))]
    if harness.group_name in REFUSED:
        try:
            m = _import(harness, path, args)
        except UnsupportedOpsError as e:
            msg = str(e)
            assert REFUSED[harness.group_name] in msg or (path == "stablehlo" and "loops are out of scope" in msg), msg
            return
        # Some lower to plain arithmetic in StableHLO (bessel_i0e is a polynomial there): then it must match.
    else:
        m = _import(harness, path, args)
    got = run(m, args)
    assert [g.dtype for g in got] == [w.dtype for w in want]
    rep = compare_all(got, want, module_tolerance(m))
    bad = rep.first_failure()
    assert rep.ok, f"{harness.fullname} via {path}: {bad.describe() if bad else ''}"
