"""Regression tests for the float64 oracle's semantics (bugs found by fuzzing)."""

from __future__ import annotations

import numpy as np

from irkit.interp import random_inputs, run
from irkit.text import parse_module

# Found by the 10,000-graph run of `make fuzz` (canonicalize and assign-layout "broke" it):
# the oracle dropped the f16 rounding, so `x > f16(x)` was always false there.
ROUND_TRIP_COMPARE = '''
"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x0: tensor<?x?x2xf32, ["B", "S"]>):
    %2 = "ik.cast"(%x0) {to = f16} : (tensor<?x?x2xf32, ["B", "S"]>) -> tensor<?x?x2xf16, ["B", "S"]>
    %3 = "ik.cast"(%2) {to = f32} : (tensor<?x?x2xf16, ["B", "S"]>) -> tensor<?x?x2xf32, ["B", "S"]>
    %4 = "ik.gt"(%x0, %3) : (tensor<?x?x2xf32, ["B", "S"]>, tensor<?x?x2xf32, ["B", "S"]>) -> tensor<?x?x2xi1, ["B", "S"]>
    %5 = "ik.constant"() {value = dense<-1.0> : tensor<f32>} : () -> tensor<f32>
    %6 = "ik.where"(%4, %x0, %5) : (tensor<?x?x2xi1, ["B", "S"]>, tensor<?x?x2xf32, ["B", "S"]>, tensor<f32>) -> tensor<?x?x2xf32, ["B", "S"]>
    "func.return"(%6) : (tensor<?x?x2xf32, ["B", "S"]>) -> ()
  }) {function_type = (tensor<?x?x2xf32, ["B", "S"]>) -> tensor<?x?x2xf32, ["B", "S"]>, sym_name = "main", ik.sym_examples = ["B=2", "S=3"]} : () -> ()
}) : () -> ()
'''


def test_oracle_rounds_at_an_explicit_narrowing_cast() -> None:
    m = parse_module(ROUND_TRIP_COMPARE)
    xs = random_inputs(m.entry, seed=1)
    got32, got64 = run(m, xs)[0], run(m, xs, float64=True)[0]
    assert got64.dtype == np.float64
    np.testing.assert_array_equal(got32.astype(np.float64), got64)
    kept = got64 != -1.0
    assert kept.any() and not kept.all()  # rounding to f16 goes down for some inputs, not all


def test_a_round_trip_through_float64_is_exact() -> None:
    """A cast to a wider type does not round: the comparison is x > x, false everywhere."""
    text = ROUND_TRIP_COMPARE.replace('{to = f16}', '{to = f64}').replace('xf16', 'xf64')
    m = parse_module(text)
    xs = random_inputs(m.entry, seed=1)
    assert (run(m, xs, float64=True)[0] == -1.0).all()
