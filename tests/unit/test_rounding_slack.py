"""The conditioning-aware check for precision-lowering passes (irkit.check.rounding_slack).

The 10,000-graph fuzz found a module where ``mixed-precision`` leaves the bf16
tolerance although it does exactly what it promises: bf16 Q/K/V projections of a
one-token attention feed a layer norm over 2 nearly equal features, which turns
the bf16 rounding into an O(1) change.  The slack measures that sensitivity; it
must also stay small where the program is well conditioned, so a wrong rewrite
still fails.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from irkit.check import compare_all, module_tolerance, rounding_slack
from irkit.interp import random_inputs, run
from irkit.ir.types import DType
from irkit.passmanager import PassContext, load_builtin_passes, make_pass
from irkit.testing.blocks import gpt2_style_module
from irkit.text import parse_module

load_builtin_passes()
CASE = Path(__file__).parent / "inputs" / "mixed_precision_ill_conditioned.mlir"


def _lowered(m):  # type: ignore[no-untyped-def]
    p = make_pass("mixed-precision")
    a = m.clone()
    p.run(a, PassContext())
    return p, a


def test_ill_conditioned_layer_norm_is_within_the_slack() -> None:
    m = parse_module(CASE.read_text())
    xs = random_inputs(m.entry, seed=1)
    oracle = run(m, xs, float64=True)
    p, a = _lowered(m)
    after = run(a, xs)
    tol = module_tolerance(a)
    assert not compare_all(after, oracle, tol).ok  # the plain bf16 tolerance cannot hold here
    slack = rounding_slack(m, xs, p.rounds_ops, DType.bf16)
    rep = compare_all(after, oracle, tol, slack=slack)
    assert rep.ok, [c.describe() for c in rep.comparisons]
    assert "slack" in rep.comparisons[0].describe()


def test_slack_is_small_where_the_program_is_well_conditioned() -> None:
    m = gpt2_style_module(layers=1, hidden=32, heads=2, vocab=64)
    xs = random_inputs(m.entry, seed=0, bindings={"B": 1, "S": 8})
    oracle = run(m, xs, float64=True)
    p, _ = _lowered(m)
    slack = rounding_slack(m, xs, p.rounds_ops, DType.bf16)
    # Logits of a random GPT-2 block are O(1): the slack stays a few bf16 roundings.
    scale = float(np.abs(oracle[0]).max())
    assert 0 < float(slack[0].max()) < 0.2 * scale


def test_a_wrong_rewrite_still_fails_with_the_slack() -> None:
    m = gpt2_style_module(layers=1, hidden=32, heads=2, vocab=64)
    xs = random_inputs(m.entry, seed=0, bindings={"B": 1, "S": 8})
    oracle = run(m, xs, float64=True)
    p, a = _lowered(m)
    # Break the lowered module the way a buggy pass would: one matmul reads its
    # weight transposed-and-flipped (same type, wrong numbers).
    mm = next(op for op in a.entry.walk() if op.name == "ik.matmul" and op.operand(1).producer is not None
              and op.operand(1).producer.name == "ik.constant" and op.operand(1).type.shape[0] == 32)
    w = mm.operand(1).producer
    from irkit.ir.builder import Builder
    from irkit.ir.core import Dense

    d = w.attrs["value"]
    bad = Builder.before_op(mm).create("ik.constant", [], {"value": Dense(np.asarray(d.array)[::-1].copy(), d.dtype)},
                                       w.loc).results[0]
    mm.set_operand(1, bad)
    after = run(a, xs)
    slack = rounding_slack(m, xs, p.rounds_ops, DType.bf16)
    assert not compare_all(after, oracle, module_tolerance(a), slack=slack).ok


# Found by the 10,000-graph run after the oracle fix for widening casts: `y > f32(f16(y))` asks whether
# rounding y to f16 went down.  mixed-precision computes y = x @ W in bf16, which f16 holds exactly, so
# the pass's program says "never" while the oracle says "about half the time".  Random scaling of y by
# 1 +- 2**-8 almost never lands on the bf16 grid; the slack's rounded run does.
ROUNDING_PROBE = '''
"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x0: tensor<1x3x4xf32>):
    %0 = "ik.constant"() {value = dense<[[0.06286511, -0.06605243, 0.32021132, 0.052450057], [-0.2678347, 0.18079753, 0.652, 0.47354048], [-0.35186762, -0.63271075, -0.31163722, 0.02066299], [-1.1625154, -0.10939583, -0.6229555, -0.3661337]]> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
    %1 = "ik.matmul"(%x0, %0) : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
    %2 = "ik.cast"(%1) {to = f16} : (tensor<1x3x4xf32>) -> tensor<1x3x4xf16>
    %3 = "ik.cast"(%2) {to = f32} : (tensor<1x3x4xf16>) -> tensor<1x3x4xf32>
    %5 = "ik.gt"(%1, %3) : (tensor<1x3x4xf32>, tensor<1x3x4xf32>) -> tensor<1x3x4xi1>
    %6 = "ik.constant"() {value = dense<-1.0> : tensor<f32>} : () -> tensor<f32>
    %7 = "ik.where"(%5, %1, %6) : (tensor<1x3x4xi1>, tensor<1x3x4xf32>, tensor<f32>) -> tensor<1x3x4xf32>
    "func.return"(%7) : (tensor<1x3x4xf32>) -> ()
  }) {function_type = (tensor<1x3x4xf32>) -> tensor<1x3x4xf32>, sym_name = "main"} : () -> ()
}) : () -> ()
'''


def test_a_rounding_probe_is_within_the_slack() -> None:
    m = parse_module(ROUNDING_PROBE)
    xs = random_inputs(m.entry, seed=1)
    oracle = run(m, xs, float64=True)
    p, a = _lowered(m)
    after = run(a, xs)
    assert (after[0] == -1.0).all() and (oracle[0] != -1.0).any()  # the probe flips under bf16 compute
    slack = rounding_slack(m, xs, p.rounds_ops, DType.bf16)
    rep = compare_all(after, oracle, module_tolerance(a), slack=slack)
    assert rep.ok, [c.describe() for c in rep.comparisons]
