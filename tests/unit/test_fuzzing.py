"""In-suite slices of the fuzzers: parser mutations and malformed model files."""

from __future__ import annotations

from pathlib import Path

import pytest

from irkit.testing import parser_fuzz
from irkit.text import ParseError, parse_module


def test_parser_mutations_give_clean_errors() -> None:
    rep = parser_fuzz.run(1500, seed=11)
    assert not rep.failures, rep.failures[:5]
    assert rep.parse_errors > 500


def test_empty_dense_literal_regression() -> None:
    text = '''"func.func"() ({
^bb0():
  %0 = "ik.constant"() {value = dense<> : tensor<4xf32>} : () -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) {function_type = () -> tensor<4xf32>, sym_name = "f"} : () -> ()
'''
    with pytest.raises(ParseError, match="empty dense literal"):
        parse_module(text)


def test_malformed_models_get_clean_errors(tmp_path: Path) -> None:
    from irkit.testing import malformed

    cases = malformed.generate(tmp_path)
    assert len(cases) >= 200
    malformed.warm_up(tmp_path)
    outcomes = [malformed.check(p) for p in cases]
    bad = [f"{o.path.name}: {o.message} ({o.seconds:.2f}s)" for o in outcomes
           if not o.clean or o.peak_bytes > 256 << 20]
    assert not bad, bad[:10]
    slow = [o for o in outcomes if o.seconds > 1.0]  # CPU seconds: a loaded machine does not inflate them
    assert not slow, [(o.path.name, o.seconds) for o in slow]
