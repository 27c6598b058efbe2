"""Properties over random graphs, for every registered pass.

- the printed module parses back to the identical text, and verifies;
- every pass leaves a module that verifies and computes the same numbers as the
  float64 oracle of the input (bitwise the same for passes marked exact);
- canonicalize is idempotent.

Examples per property: IRKIT_FUZZ_EXAMPLES (default 500 per pass in CI; `make fuzz`
runs 10,000 and records the counts in RELIABILITY.md).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from irkit.check import compare_all, module_tolerance
from irkit.interp import random_inputs, run
from irkit.ir import verify
from irkit.passmanager import PASSES, PassContext, load_builtin_passes, make_pass
from irkit.testing.strategies import modules
from irkit.text import parse_module, print_module

N = int(os.environ.get("IRKIT_FUZZ_EXAMPLES", "500"))
SETTINGS = settings(max_examples=N, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

load_builtin_passes()
PASS_NAMES = sorted(PASSES)


@SETTINGS
@given(modules())
def test_print_parse_round_trip(m) -> None:
    verify(m)
    text = print_module(m)
    m2 = parse_module(text)
    verify(m2)
    assert print_module(m2) == text


@pytest.mark.parametrize("name", PASS_NAMES)
def test_pass_preserves_semantics(name: str) -> None:
    p = make_pass(name)
    exact = bool(getattr(p, "exact", False))

    @SETTINGS
    @given(modules())
    def prop(m) -> None:
        xs = random_inputs(m.entry, seed=1)
        before = run(m, xs)
        oracle = run(m, xs, float64=True)
        after_m = m.clone()
        p.run(after_m, PassContext())
        verify(after_m)
        after = run(after_m, xs)
        if exact:
            for a, b in zip(after, before):
                np.testing.assert_array_equal(a, b)
        rep = compare_all(after, oracle, module_tolerance(after_m))
        assert rep.ok, [c.describe() for c in rep.comparisons] + [print_module(m)]
        m2 = parse_module(print_module(after_m))
        assert print_module(m2) == print_module(after_m)

    prop()


@SETTINGS
@given(modules())
def test_canonicalize_idempotent(m) -> None:
    p = make_pass("canonicalize")
    p.run(m, PassContext())
    once = print_module(m)
    p.run(m, PassContext())
    assert print_module(m) == once
