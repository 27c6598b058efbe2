"""Every unseen transformers architecture (tests/slow/hf_unseen_archs.py) through both exporters.

Build (random weights), export with torch.export (.pt2) and with torch.onnx.export(dynamo=True),
import, run on the float64 interpreter and compare with eager torch.  The cases in ``KNOWN``
fail outside irkit (the exporter refuses the model) or on a construct irkit does not express
yet; they are expected failures with the reason, and a case that starts passing is reported.
About 40 minutes on 2 cores: run with IRKIT_SLOW=1.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hf_unseen_archs import KNOWN, UNSEEN, check  # noqa: E402


def _cases() -> list:
    out = []
    for a in UNSEEN:
        for ex in ("torch", "onnx"):
            out.append(pytest.param(a.name, ex, marks=pytest.mark.slow, id=f"{a.name}-{ex}"))
    return out


@pytest.mark.parametrize("name,exporter", _cases())
def test_unseen_architecture(name: str, exporter: str) -> None:
    row = check(name, exporter)
    why = KNOWN.get((name, exporter))
    if why is not None and row["stage"] != "ok":
        pytest.xfail(f"{why} (failed at {row['stage']}: {row.get('error', row.get('numerics', ''))[:200]})")
    assert row["stage"] == "ok", row
