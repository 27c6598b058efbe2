"""Property: every attention spelling fuses into exactly one ik.attention with the same numbers.

Hypothesis draws a spelling from layout × scale site × mask kind × GQA × softmax
form × dtype × static/symbolic shapes (see ``test_fusion_cases.build_attention``)
and checks, after ``canonicalize,fuse-attention,cse,dce`` with every rewrite
checked numerically: one ``ik.attention``, no softmax or matmul left, the right
``causal`` flag and scale, K/V un-repeated for GQA, and the interpreter's numbers
equal to the unfused module's on fresh seeds.
"""

from __future__ import annotations

import math

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fusion_cases import (
    GQAS,
    HKV,
    LAYOUTS,
    MASKS,
    SCALES,
    SOFTMAXES,
    Spelling,
    assert_same_numbers,
    build_attention,
    count_ops,
    fuse,
)

from irkit.ir import DType

spellings = st.builds(
    Spelling,
    layout=st.sampled_from(LAYOUTS),
    scale=st.sampled_from(SCALES),
    mask=st.sampled_from(MASKS),
    gqa=st.sampled_from(GQAS),
    softmax=st.sampled_from(SOFTMAXES),
    dtype=st.sampled_from((DType.f32, DType.f32, DType.f16)),
    symbolic=st.booleans(),
).filter(lambda sp: sp.valid)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sp=spellings, seed=st.integers(0, 2**16))
def test_any_spelling_fuses_to_one_attention_with_the_same_numbers(sp: Spelling, seed: int) -> None:
    before = build_attention(sp)
    after = build_attention(sp)
    fuse(after)
    assert count_ops(after, "ik.attention") == 1
    assert count_ops(after, "ik.softmax") == 0
    assert count_ops(after, "ik.matmul") == 0 and count_ops(after, "ik.contract") == 0
    att = next(op for op in after.walk() if op.name == "ik.attention")
    assert bool(att.attrs.get("causal", False)) == sp.causal
    want = 1.0 if sp.scale == "none" else 1.0 / math.sqrt(8)
    assert math.isclose(att.attrs["scale"], want, rel_tol=2e-3 if sp.dtype == DType.f16 else 1e-6)
    if sp.gqa != "none":
        assert att.operand(1).type.shape[1] == HKV
    assert_same_numbers(before, after, seeds=(seed, seed + 1))
