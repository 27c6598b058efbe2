"""House contracts of the passes: option checks, declared pass attributes, patterns that say why."""

from __future__ import annotations

import pytest

from irkit.errors import PipelineError
from irkit.passmanager import parse_pipeline


@pytest.mark.parametrize("text, message", [
    ("canonicalize{max-rewrites=-1}", "pass 'canonicalize': max-rewrites must be >= 0"),
    ("assign-layout{min-dim=-5}", "pass 'assign-layout': min-dim must be >= 1, got -5"),
    ("assign-layout{min-dim=0}", "min-dim must be >= 1, got 0"),
])
def test_negative_numeric_options_are_refused_when_parsed(text: str, message: str) -> None:
    with pytest.raises(PipelineError, match=message):
        parse_pipeline(text)


def test_valid_numeric_options_parse() -> None:
    canon, layout = parse_pipeline("canonicalize{max-rewrites=5},assign-layout{min-dim=8}")
    assert canon.max_rewrites == 5 and layout.min_dim == 8
