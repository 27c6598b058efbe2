"""``lax.custom_linear_solve`` imports as its solve function applied to b (matvec and the
transposed solve only define derivatives); a solve that needs an out-of-scope op is refused
naming that op."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from irkit.check import compare_all, module_tolerance  # noqa: E402
from irkit.frontends.common import UnsupportedOpsError  # noqa: E402
from irkit.frontends.jax import import_jax, import_stablehlo  # noqa: E402
from irkit.interp import run  # noqa: E402


def test_custom_linear_solve_with_a_closed_form_solve() -> None:
    def f(d: Any, b: Any) -> Any:
        def matvec(x: Any) -> Any:
            return d * x

        def solve(mv: Any, r: Any) -> Any:
            return r / d

        return jax.lax.custom_linear_solve(matvec, b, solve, symmetric=True) * 2.0 + b

    for seed in range(3):
        rng = np.random.default_rng(seed)
        d = (rng.uniform(0.5, 2.0, 5) * rng.choice([-1.0, 1.0], 5)).astype(np.float32)
        b = rng.standard_normal(5).astype(np.float32)
        want = [np.asarray(f(d, b))]
        for m in (import_jax(f, (d, b)), import_stablehlo(jax.jit(f).lower(d, b).as_text())):
            assert "ik.div" in {op.name for op in m.walk()}
            for float64 in (False, True):
                rep = compare_all(run(m, [d, b], float64=float64), want, module_tolerance(m))
                assert rep.ok, rep.first_failure()


def test_custom_linear_solve_through_lu_names_lu() -> None:
    def f(a: Any, b: Any) -> Any:
        return jax.lax.custom_linear_solve(lambda x: a @ x, b, lambda mv, r: jnp.linalg.solve(a, r))

    a = np.eye(3, dtype=np.float32) * 2.0
    with pytest.raises(UnsupportedOpsError) as ei:
        import_jax(f, (a, np.ones(3, np.float32)))
    assert any(k.startswith("lu (a linear-algebra decomposition; out of scope)") for k in ei.value.ops), ei.value.ops
