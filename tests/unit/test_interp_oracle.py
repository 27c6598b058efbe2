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


# Found by the 10,000-graph run of the `fuse`, `gpu` and `tpu` pipelines: `y > f32(f64(y))` for a
# computed f32 value y.  The program compares y with itself; the oracle held y in f64 and rounded the
# other side to f32, so it answered "y" where the program (and canonicalize's folded form) says -1.
COMPUTED_ROUND_TRIP = ROUND_TRIP_COMPARE.replace(
    '%2 = "ik.cast"(%x0) {to = f16} : (tensor<?x?x2xf32, ["B", "S"]>) -> tensor<?x?x2xf16, ["B", "S"]>',
    '%1 = "ik.exp"(%x0) : (tensor<?x?x2xf32, ["B", "S"]>) -> tensor<?x?x2xf32, ["B", "S"]>\n'
    '    %2 = "ik.cast"(%1) {to = f64} : (tensor<?x?x2xf32, ["B", "S"]>) -> tensor<?x?x2xf64, ["B", "S"]>',
).replace('%3 = "ik.cast"(%2) {to = f32} : (tensor<?x?x2xf16', '%3 = "ik.cast"(%2) {to = f32} : (tensor<?x?x2xf64').replace(
    '"ik.gt"(%x0, %3)', '"ik.gt"(%1, %3)')


def test_undoing_a_widening_cast_does_not_round_in_the_oracle() -> None:
    from irkit.check import compare_all, module_tolerance
    from irkit.passmanager import run_pipeline

    m = parse_module(COMPUTED_ROUND_TRIP)
    xs = random_inputs(m.entry, seed=3)
    assert (run(m, xs, float64=True)[0] == -1.0).all()
    assert (run(m, xs)[0] == -1.0).all()
    after = m.clone()
    run_pipeline(after, "canonicalize,fuse-elementwise,cse,dce")
    assert compare_all(run(after, xs), run(m, xs, float64=True), module_tolerance(after)).ok


def test_a_narrowing_cast_after_a_widening_one_still_rounds_below_the_source() -> None:
    """f32 -> f64 -> f16 rounds to f16: f16 cannot hold every f32 the value carried."""
    text = COMPUTED_ROUND_TRIP.replace('%3 = "ik.cast"(%2) {to = f32} : (tensor<?x?x2xf64, ["B", "S"]>) -> '
                                       'tensor<?x?x2xf32, ["B", "S"]>',
                                       '%7 = "ik.cast"(%2) {to = f16} : (tensor<?x?x2xf64, ["B", "S"]>) -> '
                                       'tensor<?x?x2xf16, ["B", "S"]>\n    %3 = "ik.cast"(%7) {to = f32} : '
                                       '(tensor<?x?x2xf16, ["B", "S"]>) -> tensor<?x?x2xf32, ["B", "S"]>')
    m = parse_module(text)
    xs = random_inputs(m.entry, seed=1)
    got32, got64 = run(m, xs)[0], run(m, xs, float64=True)[0]
    kept = got64 != -1.0
    assert kept.any() and not kept.all()
    np.testing.assert_array_equal(got32 != -1.0, kept)
