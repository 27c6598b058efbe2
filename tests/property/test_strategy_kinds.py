"""The special-value counts RELIABILITY.md reports come from `drawn_kinds`: each kind it names is
really in the drawn graph (a NaN/Inf constant, a gather index, a zero-size tensor, a masked
attention), and the strategy draws every kind."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings

from irkit.testing.strategies import SPECIAL_KINDS, drawn_kinds, modules

_SEEN: Counter[str] = Counter()


def _constants(m) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    return [np.asarray(op.attrs["value"].array) for op in m.walk() if op.name == "ik.constant"]


@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(modules())
def test_each_recorded_kind_is_in_the_graph(m) -> None:  # type: ignore[no-untyped-def]
    kinds = drawn_kinds(m)
    assert kinds <= set(SPECIAL_KINDS)
    _SEEN.update(kinds)
    floats = [c for c in _constants(m) if c.dtype.kind == "f"]
    for kind, pred in (("nan", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        if kind in kinds:
            assert any(pred(c).any() for c in floats), kind
    gathers = [op for op in m.walk() if op.name == "ik.gather"]
    if "negative index" in kinds:
        assert any((np.asarray(g.operand(1).producer.attrs["value"].array) < 0).any() for g in gathers)
    if "empty dim" in kinds:
        assert any(0 in v.type.shape for op in m.walk() for v in op.results if hasattr(v.type, "shape"))
    if "fully masked row" in kinds:
        assert any(op.name == "ik.attention" and len(op.operands) > 3 for op in m.walk())


def test_every_kind_is_drawn() -> None:
    """Run after the property above (same module): 300 graphs hold every kind at least once."""
    if not _SEEN:
        test_each_recorded_kind_is_in_the_graph()
    missing = [k for k in SPECIAL_KINDS if _SEEN[k] == 0]
    assert not missing, (missing, dict(_SEEN))
