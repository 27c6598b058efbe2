"""Tolerance policy and differential comparison.

Design note: the oracle is the interpreter in float64.  How far a result may
stray from it depends on the lowest-precision float type the computation runs
in, and on whether the code path reorders arithmetic (a fused or tiled
reduction sums in another order than the oracle).  That policy lives here and
only here: :func:`tolerance`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from irkit.ir.core import Function, Module
from irkit.ir.types import DType, is_float_np


@dataclass(frozen=True)
class Tolerance:
    """|actual - expected| <= atol + rtol * |expected|, elementwise."""

    rtol: float
    atol: float


# (exact order, reordered arithmetic)
_POLICY: dict[DType, tuple[Tolerance, Tolerance]] = {
    DType.f64: (Tolerance(1e-10, 1e-12), Tolerance(1e-7, 1e-9)),
    DType.f32: (Tolerance(1e-5, 1e-6), Tolerance(2e-4, 2e-5)),
    DType.f16: (Tolerance(5e-3, 5e-3), Tolerance(2e-2, 2e-2)),
    DType.bf16: (Tolerance(3e-2, 3e-2), Tolerance(8e-2, 8e-2)),
    # float8: 3 mantissa bits (E4M3, half an ulp 2**-4) and 2 (E5M2, 2**-3)
    **{d: (Tolerance(0.125, 1e-2), Tolerance(0.25, 5e-2)) for d in (DType.f8e4m3fn, DType.f8e4m3fnuz)},
    **{d: (Tolerance(0.25, 2e-2), Tolerance(0.5, 1e-1)) for d in (DType.f8e5m2, DType.f8e5m2fnuz)},
}
_EXACT = Tolerance(0.0, 0.0)


def tolerance(dtype: DType, reorders: bool = True) -> Tolerance:
    """The tolerance for results computed in ``dtype`` against the f64 oracle."""
    if not dtype.is_float:
        return _EXACT
    exact, reordered = _POLICY[dtype]
    return reordered if reorders else exact


_PRECISION_ORDER = [DType.f8e5m2fnuz, DType.f8e5m2, DType.f8e4m3fnuz, DType.f8e4m3fn,
                    DType.bf16, DType.f16, DType.f32, DType.f64]


def compute_dtype(fn: Function) -> DType:
    """The lowest-precision float type any op of ``fn`` computes in (f64 if none)."""
    low = DType.f64
    for op in fn.walk():
        for v in list(op.operands) + list(op.results):
            dt = v.type.dtype
            if dt.is_float and _PRECISION_ORDER.index(dt) < _PRECISION_ORDER.index(low):
                low = dt
    return low


def module_tolerance(m: Module | Function, reorders: bool = True) -> Tolerance:
    fn = m if isinstance(m, Function) else m.entry
    return tolerance(compute_dtype(fn), reorders)


@dataclass
class Comparison:
    """The result of comparing one output."""

    name: str
    ok: bool
    max_abs: float
    max_rel: float
    tol: Tolerance
    worst_index: tuple[int, ...] = ()
    note: str = ""

    def describe(self) -> str:
        status = "ok" if self.ok else "MISMATCH"
        at = f" at {list(self.worst_index)}" if self.worst_index and not self.ok else ""
        extra = f" ({self.note})" if self.note else ""
        return (f"{self.name}: {status} max_abs={self.max_abs:.3g} max_rel={self.max_rel:.3g}{at} "
                f"(rtol={self.tol.rtol:g}, atol={self.tol.atol:g}){extra}")


def _saturate(ef: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Oracle values beyond the range of the program's float type, rounded as that type rounds them
    (to ±inf): an f32 ``exp(100)`` is inf on every target, while the float64 oracle holds 2.7e43."""
    if not is_float_np(dtype) or dtype.itemsize >= 8:
        return ef
    import ml_dtypes

    big = float(ml_dtypes.finfo(dtype).max)
    with np.errstate(all="ignore"):
        out_of_range = np.abs(ef) > big
        if not out_of_range.any():
            return ef
        ef = ef.copy()
        ef[out_of_range] = ef[out_of_range].astype(dtype).astype(np.float64)
    return ef


def compare(actual: np.ndarray, expected: np.ndarray, tol: Tolerance, name: str = "output",
            slack: np.ndarray | None = None) -> Comparison:
    """Compare one array against the oracle; NaNs must sit in the same places.

    ``slack`` (elementwise, broadcastable) widens the bound where the program
    itself is ill-conditioned: see :func:`rounding_slack`."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape:
        return Comparison(name, False, float("inf"), float("inf"), tol,
                          note=f"shape {list(a.shape)} vs expected {list(e.shape)}")
    if a.dtype == np.bool_ or e.dtype == np.bool_ or a.dtype.kind in "iu" and e.dtype.kind in "iu":
        diff = a.astype(np.int64) != e.astype(np.int64)
        n = int(diff.sum())
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), a.shape)) if n and a.ndim else ()
        return Comparison(name, n == 0, float(n), float(n) / max(a.size, 1), _EXACT, idx,
                          note=f"{n} elements differ" if n else "")
    af = a.astype(np.float64)
    ef = _saturate(e.astype(np.float64), a.dtype)
    nan_a, nan_e = np.isnan(af), np.isnan(ef)
    if np.any(nan_a != nan_e):
        k = int(np.sum(nan_a != nan_e))
        idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(nan_a != nan_e)), a.shape)) if a.ndim else ()
        return Comparison(name, False, float("nan"), float("nan"), tol, idx,
                          note=f"{k} NaNs where the oracle has none or vice versa")
    same_inf = (af == ef)
    with np.errstate(all="ignore"):
        err = np.where(nan_a | same_inf, 0.0, np.abs(af - ef))
        rel = err / np.maximum(np.abs(ef), 1e-30)
        bound = tol.atol + tol.rtol * np.abs(ef)
        if slack is not None:
            bound = bound + np.nan_to_num(np.asarray(slack, dtype=np.float64), nan=0.0, posinf=0.0)
    # an infinity on one side only is never within tolerance (the bound at an infinite oracle is infinite)
    over = (err > bound) | ((np.isinf(af) | np.isinf(ef)) & ~same_inf & ~nan_a)
    max_abs = float(err.max()) if err.size else 0.0
    max_rel = float(np.where(np.abs(ef) > tol.atol, rel, 0).max()) if err.size else 0.0
    idx = ()
    if err.size and a.ndim:
        with np.errstate(all="ignore"):
            excess = np.nan_to_num(np.where(over, err - bound, -np.inf), nan=np.inf, neginf=-np.inf)
        k = int(np.argmax(excess)) if over.any() else int(np.argmax(err))
        idx = tuple(int(i) for i in np.unravel_index(k, a.shape))
    note = "bound widened by the rounding slack" if slack is not None else ""
    return Comparison(name, not bool(over.any()), max_abs, max_rel, tol, idx, note=note)


@dataclass
class CheckReport:
    """All outputs of one run compared with the oracle."""

    comparisons: list[Comparison] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.comparisons)

    @property
    def max_abs(self) -> float:
        return max((c.max_abs for c in self.comparisons), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((c.max_rel for c in self.comparisons), default=0.0)

    def first_failure(self) -> Comparison | None:
        for c in self.comparisons:
            if not c.ok:
                return c
        return None


def compare_all(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], tol: Tolerance,
                names: Sequence[str] | None = None,
                slack: Sequence[np.ndarray | None] | None = None) -> CheckReport:
    rep = CheckReport()
    if len(actual) != len(expected):
        rep.comparisons.append(Comparison("outputs", False, float("inf"), float("inf"), tol,
                                          note=f"{len(actual)} outputs vs {len(expected)} expected"))
        return rep
    for i, (a, e) in enumerate(zip(actual, expected)):
        nm = names[i] if names else f"output {i}"
        rep.comparisons.append(compare(a, e, tol, nm, slack[i] if slack is not None else None))
    return rep


UNIT_ROUNDOFF: dict[DType, float] = {DType.f8e4m3fn: 2.0**-4, DType.f8e4m3fnuz: 2.0**-4,
                                     DType.f8e5m2: 2.0**-3, DType.f8e5m2fnuz: 2.0**-3,
                                     DType.bf16: 2.0**-8, DType.f16: 2.0**-11, DType.f32: 2.0**-24,
                                     DType.f64: 2.0**-53}
"""Round-to-nearest relative error bound of each float type."""


def rounding_slack(m: Module | Function, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray],
                   ops: Sequence[str], dtype: DType, *, samples: int = 4, factor: float = 4.0,
                   seed: int = 0) -> list[np.ndarray | None]:
    """How far rounding the operands and results of the ``ops`` of ``m`` to ``dtype``
    can move each output of ``m``, elementwise: the conditioning of the program
    after those ops, measured.

    A pass that lowers precision (``mixed-precision``) is right when its result
    is what the program gives with those values rounded; how far that lands from
    the f64 oracle is not the pass's to choose.  A layer norm over two nearly
    equal features turns a bf16 rounding of 2**-8 into an O(1) change, although
    every op is within its tolerance.  So the float64 oracle of ``m`` runs
    ``samples`` more times with every float operand and result of those ops
    scaled by random factors in [1 - u, 1 + u] (u the unit roundoff of
    ``dtype``); the slack is ``factor`` times the largest deviation from the
    unperturbed oracle (None for outputs that are not float).  One more run rounds
    them to ``dtype`` itself, as the pass does: a comparison that asks whether a
    rounding went down (``y > f32(f16(y))``) flips only when ``y`` sits on the
    coarser grid, which random scaling almost never reproduces.  A
    well-conditioned output gets a slack of about u times its size, so a wrong
    rewrite still fails.
    """
    from irkit.interp import Interpreter, run

    base = run(m, inputs, float64=True)
    u = UNIT_ROUNDOFF[dtype]
    names = frozenset(ops)
    rng = np.random.default_rng(seed)

    rounding = [True]  # the first run rounds to ``dtype``; the others scale at random

    def scale(x: np.ndarray) -> np.ndarray:
        if x.dtype.kind != "f" or x.size == 0:
            return x
        with np.errstate(all="ignore"):
            if rounding[0]:
                return x.astype(dtype.np).astype(np.float64)
            return x * (1.0 + u * rng.uniform(-1.0, 1.0, size=x.shape))

    class _Perturbed(Interpreter):
        def _op(self, op, ins, b):  # type: ignore[no-untyped-def]
            if op.name not in names:
                return super()._op(op, ins, b)
            outs = super()._op(op, [scale(np.asarray(x, dtype=np.float64)) if np.asarray(x).dtype.kind == "f"
                                    else x for x in ins], b)
            return [scale(y) for y in outs]

    worst: list[np.ndarray | None] = [np.zeros(np.shape(y)) if np.asarray(y).dtype.kind == "f" else None
                                      for y in base]
    for k in range(samples + 1):
        rounding[0] = k == 0
        got = _Perturbed(True).run(m, inputs)
        for i, (g, y) in enumerate(zip(got, base)):
            w = worst[i]
            if w is None:
                continue
            with np.errstate(all="ignore"):
                d = np.abs(np.asarray(g, dtype=np.float64) - np.asarray(y, dtype=np.float64))
            worst[i] = np.maximum(w, np.where(np.isfinite(d), d, 0.0))
    return [None if w is None else factor * w for w in worst]


def check_against_oracle(m: Module, actual: Sequence[np.ndarray], inputs: Sequence[np.ndarray],
                         reorders: bool = True, oracle: Module | None = None,
                         bindings: Mapping[str, int] | None = None) -> CheckReport:
    """Compare ``actual`` with the float64 interpreter on ``oracle`` (default ``m``)."""
    from irkit.interp import run

    expected = run(oracle or m, list(inputs), float64=True)
    return compare_all(actual, expected, module_tolerance(m, reorders))


__all__ = ["Tolerance", "tolerance", "compute_dtype", "module_tolerance", "Comparison", "compare",
           "CheckReport", "compare_all", "check_against_oracle", "UNIT_ROUNDOFF", "rounding_slack"]
