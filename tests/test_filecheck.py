"""Runs every lit/FileCheck test under tests/filecheck as one pytest case each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent / "filecheck"
FILES = sorted(p for p in ROOT.rglob("*.mlir") if "Output" not in p.parts and "Inputs" not in p.parts)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_lit(path: Path) -> None:
    lit = str(Path(sys.executable).parent / "lit")
    r = subprocess.run([lit, "-q", "-v", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
