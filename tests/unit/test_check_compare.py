"""The comparison against the oracle: NaN positions, infinities, the declared dtype's range."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from irkit.check import compare, tolerance
from irkit.ir import DType


@pytest.mark.parametrize("dtype,np_dtype", [(DType.f32, np.float32), (DType.f16, np.float16),
                                            (DType.bf16, ml_dtypes.bfloat16)])
def test_an_overflow_of_the_declared_type_matches_the_oracle(dtype: DType, np_dtype) -> None:
    """An f32 exp(100) is inf on every target; the float64 oracle holds 2.7e43."""
    oracle = np.exp(np.array([100.0, -1.5, 1e4]))
    oracle[2] = -oracle[2]
    got = np.array([np.inf, np.exp(-1.5), -np.inf]).astype(np_dtype)
    assert compare(got, oracle, tolerance(dtype)).ok


def test_an_infinity_on_one_side_only_is_a_mismatch() -> None:
    tol = tolerance(DType.f32)
    assert not compare(np.array([3.0, 1.0], np.float32), np.array([1e39, 1.0]), tol).ok
    assert not compare(np.array([np.inf, 1.0], np.float32), np.array([1e30, 1.0]), tol).ok
    assert not compare(np.array([-np.inf], np.float32), np.array([np.inf]), tol).ok
    assert compare(np.array([-np.inf, 2.0], np.float32), np.array([-np.inf, 2.0]), tol).ok


def test_nans_must_sit_where_the_oracle_has_them() -> None:
    tol = tolerance(DType.f32)
    assert compare(np.array([np.nan, 1.0], np.float32), np.array([np.nan, 1.0]), tol).ok
    r = compare(np.array([np.nan, 1.0], np.float32), np.array([0.5, 1.0]), tol)
    assert not r.ok and "NaNs" in r.note


def test_float64_results_are_not_saturated() -> None:
    assert not compare(np.array([np.inf]), np.array([1e300]), tolerance(DType.f64)).ok
