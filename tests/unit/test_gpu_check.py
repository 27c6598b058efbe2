"""benchmarks/gpu_check.py without a GPU: the dry run builds and reports, the decode step runs.

The GPU measurements themselves need an NVIDIA GPU; here the build path (``--dry-run``) and the
decode-step rows (with a CPU target standing in for tvm-cuda/xla-gpu and torch on the CPU) run for
real, so the script is known to work before a GPU machine is spent on it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_dry_run_writes_a_report_with_the_attention_builds(tmp_path, monkeypatch):
    pytest.importorskip("tvm")
    g = _gpu_check()
    monkeypatch.setattr(g, "ATTN_SHAPES", ((1, 2, 64, 32),))  # one small kernel: the path, not the size
    out = tmp_path / "gc.md"
    rc = g.main(["--dry-run", "--blocks", "", "--models", "none", "--artifacts", str(tmp_path / "art"),
                 "--out", str(out)])
    assert rc in (0, 1)  # 1: a row failed (no nvcc here, say); never a crash
    text = out.read_text()
    assert "# GPU check (dry run: build only)" in text
    doc = json.loads(out.with_suffix(".json").read_text())
    builds = [r for r in doc["rows"] if r["step"] == "build"]
    assert len(builds) == len(g.ATTN_SHAPES)
    assert all(r["target"] == "tvm-cuda kernel" for r in builds)
    assert set(doc["facts"]) >= {"cuda", "gpu", "tvm-cuda runtime", "jax gpu", "torch cuda", "nvcc"}


def test_dry_run_rejects_an_unknown_model(tmp_path, capsys):
    g = _gpu_check()
    assert g.main(["--dry-run", "--blocks", "", "--models", "no_such_model", "--out", str(tmp_path / "x.md")]) == 2
    assert "unknown example model 'no_such_model'" in capsys.readouterr().err


@pytest.mark.slow
def test_decode_rows_time_every_engine_on_the_cpu(monkeypatch):
    pytest.importorskip("transformers")
    pytest.importorskip("jax")
    g = _gpu_check()
    monkeypatch.setattr(g, "TARGETS", ("xla-cpu",))
    monkeypatch.setattr(g, "TORCH_DEVICE", "cpu")
    rows: list[dict] = []
    g.decode_rows("gpt2:toy:1", rows, time.perf_counter() + 600, steps=2)
    assert [r["target"] for r in rows] == ["xla-cpu", "torch eager (cpu)", "torch compile (cpu)"]
    for r in rows:
        assert r["ok"], r
        assert r["ms"] > 0 and "tok/s" in r["note"]


def test_decode_rows_past_the_deadline_are_rows_not_runs():
    g = _gpu_check()
    rows: list[dict] = []
    g.decode_rows("gpt2:full:1+8", rows, time.perf_counter() - 1)
    assert len(rows) == 2 and not any(r["ok"] for r in rows)
    assert all("past the deadline" in r["note"] for r in rows)
