"""scripts/fuzz.py, the long run behind `make fuzz`, on a few graphs: its report and --resume."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _fuzz(out: Path, *extra: str) -> str:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz.py"), "--only", "graphs", "--graphs", "7",
                        "--target-graphs", "2", "--graphs-filter", "[cse]", "--workers", "1", "--out", str(out),
                        *extra], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return out.read_text()


def test_report_counts_graphs_and_keeps_hand_written_sections(tmp_path: Path) -> None:
    out = tmp_path / "R.md"
    out.write_text("# Reliability runs\n\n## Failures found\n\n- one, fixed; regression test x.\n")
    text = _fuzz(out)
    assert "| test_pass_preserves_semantics[cse] | 7 | passed (7 drawn) |" in text
    assert "## Failures found\n\n- one, fixed; regression test x.\n" in text
    assert text.index("## Random graphs") < text.index("## Failures found")
    again = _fuzz(out, "--resume")  # the passed row is kept, with its count, not rerun
    assert "passed (7 drawn)" in again and "resumed: 1 rows kept" in again
