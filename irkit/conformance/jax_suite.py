"""JAX's primitive harnesses on irkit: ``jax._src.internal_test_util.test_harnesses.all_harnesses``.

Every harness whose dtype is float32, int32 or bool is a case.  Its arguments
come from ``harness.dyn_args_maker`` with a fixed seed; the function is
imported twice, through the jaxpr (:func:`irkit.frontends.jax.import_jax`) and
through StableHLO text (``jax.jit(f, keep_unused=True).lower(*args).as_text()``
into :func:`irkit.frontends.jax_stablehlo.import_stablehlo`), and each import
runs on the interpreter and the requested targets.  Runner names say the path:
``jaxpr:reference``, ``stablehlo:xla-cpu``.

The expected result is JAX's own (``jax.jit`` on the CPU), compared with JAX's
test tolerance for the dtype (float32: rtol = atol = 1e-6), NaNs equal, dtypes
equal.  An output that misses it gets a second opinion (rounding is not a wrong
answer): it passes when it is within 64 float32 ulps of the output's largest
magnitude everywhere, or as close to JAX in float64 (``jax.enable_x64``) as JAX
in float32 is (within the tolerance plus four times JAX's largest float32 error).

Out of scope (skip): the linear-algebra decompositions (cholesky, qr, svd,
eig, eigh, lu, triangular_solve), random-number primitives (random_*,
rng_bit_generator, threefry's iota_2x32_shape), harnesses with complex
outputs, and harnesses JAX itself cannot run on this CPU.  Not comparable
(skip): unstable multi-array sorts, where equal keys may come out in any order.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from irkit.conformance.results import (
    INTERP,
    CaseResult,
    Tol,
    all_rows,
    classify_error,
    rounding_judge,
    run_on_targets,
)
from irkit.conformance.runner import Case

SCOPE_NOTE = ("jax: f32/i32/bool harnesses; skipped: linear-algebra decompositions (cholesky, qr, svd, eig, eigh, "
              "lu, triangular_solve), random-number primitives, complex outputs, harnesses JAX cannot run on CPU")
PATHS = ("jaxpr", "stablehlo")
DTYPES = ("float32", "int32", "bool")
LINALG = frozenset({"cholesky", "qr", "svd", "eig", "eigh", "lu", "triangular_solve"})
RANDOM = frozenset({"rng_bit_generator", "iota_2x32_shape", "rng_uniform"})
_HARNESSES: dict[str, Any] | None = None

# The expected results are JAX's on the CPU; without this JAX also probes for TPUs (libtpu's warnings).
os.environ.setdefault("JAX_PLATFORMS", "cpu")


def runner_names(targets: Sequence[str], peers: bool) -> list[str]:
    return [f"{p}:{t}" for p in PATHS for t in (INTERP, *targets)]


def _harnesses() -> dict[str, Any]:
    global _HARNESSES
    if _HARNESSES is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from jax._src.internal_test_util import test_harnesses as th

        out: dict[str, Any] = {}
        for h in th.all_harnesses:
            try:
                dt = np.dtype(h.dtype).name if h.dtype is not None else ""
            except TypeError:
                dt = str(h.dtype)
            if dt in DTYPES:
                out.setdefault(h.fullname, h)
        _HARNESSES = out
    return _HARNESSES


def group_scope(group: str) -> str:
    if group in LINALG:
        return f"out of scope: linear-algebra decomposition ({group})"
    if group.startswith("random_") or group in RANDOM:
        return f"out of scope: random-number primitive ({group})"
    return ""


def harness_scope(h: Any) -> str:
    """'' when harness ``h`` is in scope and comparable, else why not."""
    why = group_scope(h.group_name)
    if why:
        return why
    if h.group_name == "sort" and h.params.get("is_stable") is False and h.params.get("num_arrays", 1) > 1:
        # Equal keys may come out in any order, and the other arrays with them: JAX's order is one right answer.
        return "not comparable: unstable multi-array sort (is_stable=False), the order of equal keys is unspecified"
    return ""


def collect(filter: str | None = None) -> list[Case]:
    cases = [Case(name, h.group_name, name, harness_scope(h)) for name, h in _harnesses().items()]
    cases.sort(key=lambda c: c.id)
    return cases


def _leaves(x: Any) -> list[np.ndarray]:
    import jax

    return [np.asarray(v) for v in jax.tree_util.tree_leaves(x)]


def run_case(case: Case, targets: Sequence[str], peers: bool) -> list[CaseResult]:
    import jax

    h = _harnesses()[case.payload]
    runners = runner_names(targets, peers)
    args = list(h.dyn_args_maker(np.random.RandomState(0)))
    fn = jax.jit(h.dyn_fun, keep_unused=True)
    try:
        expected = _leaves(fn(*args))
    except Exception as e:  # noqa: BLE001 - JAX itself cannot run it here: not a case
        return all_rows(case.id, case.group, runners, "skip", f"JAX cannot run this harness on CPU ({e!s:.160})")
    if any(e.dtype.kind == "c" for e in expected):
        return all_rows(case.id, case.group, runners, "skip", "out of scope: complex outputs")
    inputs = [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]
    tol = Tol(1e-6, 1e-6)
    def float64_outputs() -> list[Any]:
        with jax.enable_x64(True):
            wide = [x.astype(np.float64) if np.asarray(x).dtype == np.float32 else x for x in args]
            return _leaves(jax.jit(h.dyn_fun, keep_unused=True)(*wide))

    second_opinion = rounding_judge(float64_outputs, tol)

    rows: list[CaseResult] = []
    for path in PATHS:
        mine = [(f"{path}:{t}", t) for t in (INTERP, *targets)]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if path == "jaxpr":
                    from irkit.frontends.jax import import_jax

                    m = import_jax(h.dyn_fun, args)
                else:
                    from irkit.frontends.jax_stablehlo import import_stablehlo

                    m = import_stablehlo(fn.lower(*args).as_text(), source_name=case.id)
        except Exception as e:  # noqa: BLE001 - one case never stops the run
            status, reason = classify_error(e)
            rows.extend(all_rows(case.id, case.group, [r for r, _ in mine], status, reason))
            continue
        with np.errstate(all="ignore"):
            rows.extend(run_on_targets(case.id, case.group, m, inputs, expected, tol, mine, second_opinion))
    return rows


def prepare_worker() -> None:
    _harnesses()
    import irkit.frontends.jax
    import irkit.frontends.jax_stablehlo  # noqa: F401


__all__ = ["SCOPE_NOTE", "collect", "group_scope", "run_case", "runner_names"]
