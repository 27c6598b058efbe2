"""``bessel_i0e`` / ``bessel_i1e`` (Cephes' Chebyshev expansions, as jax and XLA evaluate them)
through the jaxpr, StableHLO (``chlo.bessel_i1e``) and HLO paths, against ``jax.jit`` on the CPU
and against SciPy in float64."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")

from irkit.check import compare_all, module_tolerance  # noqa: E402
from irkit.frontends.jax import import_hlo, import_jax, import_stablehlo  # noqa: E402
from irkit.interp import run  # noqa: E402


def f(x: Any) -> Any:
    return jax.lax.bessel_i0e(x), jax.lax.bessel_i1e(x), jax.lax.bessel_i1e(x * 0.25) * 3.0


def inputs(seed: int) -> np.ndarray:
    """Both sides of the |x| = 8 switch, tiny and huge magnitudes, zeros, infinities, NaN."""
    rng = np.random.default_rng(seed)
    special = [0.0, -0.0, 8.0, -8.0, 7.999999, 8.000001, 1e-30, -1e-30, 1e30, -1e30, np.inf, -np.inf, np.nan]
    return np.concatenate([special, rng.standard_normal(40) * 12, rng.uniform(-60, 60, 40)]).astype(np.float32)


def test_bessel_functions_match_jax_on_every_path() -> None:
    x = inputs(0)
    lowered = jax.jit(f).lower(x)
    mods = {"jaxpr": import_jax(f, (x,)), "stablehlo": import_stablehlo(lowered.as_text()),
            "hlo": import_hlo(lowered.as_text(dialect="hlo"))}
    for seed in range(3):
        xs = inputs(seed)
        want = [np.asarray(w) for w in f(xs)]
        for path, m in mods.items():
            for float64 in (False, True):
                rep = compare_all(run(m, [xs], float64=float64), want, module_tolerance(m))
                assert rep.ok, f"{path} (float64={float64}): {rep.first_failure()}"


def test_bessel_functions_are_accurate_in_float64() -> None:
    special = pytest.importorskip("scipy.special")
    x = np.linspace(-40, 40, 2001).astype(np.float32)
    got = run(import_jax(f, (x,)), [x], float64=True)
    xd = x.astype(np.float64)
    for g, want in zip(got, (special.i0e(xd), special.i1e(xd), 3.0 * special.i1e(xd * 0.25))):
        # the single-precision expansion, its coefficients f32 constants: about 6e-7 relative at worst
        np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=1e-6, atol=1e-12)
