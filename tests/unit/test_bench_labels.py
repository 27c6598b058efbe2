"""``irkit bench`` labels every number: units, measured or estimated from which spec, and estimated prices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irkit.bench import BenchRow, break_even
from irkit.cli import main
from irkit.commands.bench_cmd import _COLUMNS, _break_even_line
from irkit.testing.blocks import gpt2_style_module
from irkit.text import write_module


@pytest.fixture(scope="module")
def block(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("labels") / "g.mlir"
    write_module(gpt2_style_module(layers=1), str(p))
    return p


def test_every_cost_column_has_a_unit() -> None:
    for c in _COLUMNS[4:]:
        assert "(" in c and c.endswith(")"), c
    assert "cost (USD per 1M seq)" in _COLUMNS and "price (USD/hour)" in _COLUMNS


def test_rows_say_measured_or_estimated_from_which_spec(block: Path, tmp_path: Path, capsys) -> None:
    js, md = tmp_path / "b.json", tmp_path / "b.md"
    rc = main(["bench", str(block), "--targets", "reference,xla-gpu", "--batch", "1", "--seq", "8",
               "--repeats", "2", "--warmup", "1", "--price", "reference=0.1,h100=3.0",
               "--json", str(js), "--markdown", str(md)])
    assert rc == 0
    out = capsys.readouterr().out
    d = json.loads(js.read_text())
    labels = {lab["target"]: lab for lab in d["labels"]}
    assert labels["reference"]["kind"] == "measured" and labels["reference"]["basis"] == "measured on reference here"
    gpu = labels["xla-gpu"]
    assert gpu["kind"] == "estimated" and gpu["spec"] == "h100" and gpu["basis"] == "estimated from spec h100"
    assert gpu["price_usd_per_hour"] == 3.0 and gpu["price_source"] == "--price h100"
    assert "estimate from spec h100" in gpu["price_note"] and "USD per 1M seq" in gpu["price_note"]
    assert d["units"]["cost_per_million"] == "USD per 1M sequences" and d["units"]["latency_median"] == "s"
    row = next(r for r in d["rows"] if r["target"] == "xla-gpu")
    assert row["cost_per_million"] > 0 and row["latency_median"] > 0
    text = md.read_text()
    assert "estimated (spec h100)" in text and "measured here" in text and "(est.)" in text
    assert "cost (USD per 1M seq)" in text and "estimate from spec h100" in text
    assert "estimate from spec h100" in out


def test_break_even_says_which_side_is_estimated() -> None:
    fast = BenchRow("xla-tpu-v5e", 8, 64, False, 12.0, 0.0005)
    slow = BenchRow("ort", 8, 64, True, 0.2, 0.010)
    be = break_even([fast, slow])
    assert len(be) == 1 and be[0]["faster"] == "xla-tpu-v5e"
    # 11.8 s more compile, (0.010 - 0.0005) / 8 s saved per inference
    assert be[0]["inferences_to_break_even"] == 9937
    by_key = {("xla-tpu-v5e", 8, 64): {"kind": "estimated", "spec": "tpu-v5e"},
              ("ort", 8, 64): {"kind": "measured", "spec": "host-cpu"}}
    be[0]["estimated"] = ["xla-tpu-v5e"]
    line = _break_even_line(be[0], by_key)
    assert "wins after 9937 inferences" in line and "xla-tpu-v5e's latency is estimated from spec tpu-v5e" in line
    be[0]["estimated"] = []
    assert _break_even_line(be[0], by_key).endswith("(both measured here)")
