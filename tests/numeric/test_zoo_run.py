"""The zoo matrix (`irkit zoo run`): a rotating sample of the zoo in CI, isolation, the pipeline option.

``test_rotating_sample`` runs two architectures chosen by the day of the year
(toy size, torch frontend, the interpreter and onnxruntime; the second one with
``IRKIT_SLOW=1``), so consecutive days walk the whole zoo; a cell that ZOO.md records as ``ok`` for that model must
still be ``ok`` (a regression), and every stage records its time and peak memory.
"""

from __future__ import annotations

import datetime
import os
import re
from pathlib import Path

import pytest

from irkit.zoo import run as zr

ROOT = Path(__file__).resolve().parents[2]


def _zoo_md_cells(model: str, size: str, frontend: str) -> dict[str, str]:
    """The status cells ZOO.md records for one row ({} where it has none)."""
    path = ROOT / "ZOO.md"
    if not path.exists():
        return {}
    text = path.read_text().split("## Status", 1)[-1].split("## Time", 1)[0]
    rows = [ln for ln in text.splitlines() if ln.startswith("| ")]
    if not rows:
        return {}
    head = [c.strip() for c in rows[0].strip("|").split("|")]
    for ln in rows[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if cells[:3] == [model, size, frontend]:
            return dict(zip(head, cells))
    return {}


def _day() -> int:
    env = os.environ.get("IRKIT_ZOO_DAY")
    return int(env) if env else datetime.date.today().timetuple().tm_yday


@pytest.mark.parametrize("slot", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_rotating_sample(slot: int) -> None:
    """Architecture ``slot`` of the day's two (the second with IRKIT_SLOW=1: one is ~25 s of CPU)."""
    names = zr.rotating_sample(_day(), 2)[slot:slot + 1]
    jobs = zr.plan(names, ["toy"], ["torch"], targets=["ort"])
    rows = zr.run_matrix(jobs, workers=0)
    assert [r["key"] for r in rows] == [j.key for j in jobs]
    for r in rows:
        assert not r.get("error"), r
        st = r["stages"]
        assert st["build"]["ok"] and r["weight_mb"] > 0 and r["layers"] > 0
        for name, rec in st.items():
            assert rec["seconds"] >= 0 and rec["peak_mb"] > 0, name
        now = zr.status_cells(r)
        was = _zoo_md_cells(r["model"], "toy", "torch")
        regressions = {k: (was[k], now.get(k)) for k in ("export", "import", "interp vs torch", "ort")
                       if was.get(k) in ("ok", "dyn") and now.get({"interp vs torch": "interp"}.get(k, k)) != was[k]}
        assert not regressions, f"{r['key']}: was -> now {regressions}; {st}"
        if st.get("import", {}).get("ok"):
            # what ran agrees with torch, or the failure is recorded with its detail
            assert st["interp"]["ok"] and isinstance(st["interp"]["numerics"], bool)
            assert re.search(r"max_abs=", st["interp"]["detail"])
            fused = was.get("fused attn", "")
            if re.fullmatch(r"(\d+)/\1", fused):  # every attention fused in ZOO.md: still so
                assert r["fused"] == r["layers"], (r["key"], r["fused"], r["layers"])


@pytest.mark.slow
def test_pipeline_option_decides_fusion() -> None:
    """``-p``: without fuse-attention nothing is fused; the default pipeline fuses every layer of BLOOM
    (eager attention with ALiBi: no attention op comes out of the import itself)."""
    plain = zr.run_job(zr.Job("bloom", targets=[], interp=False, pipeline="canonicalize,cse,dce"))
    assert plain["attention_at_import"] == 0
    assert plain["stages"]["optimise"]["ok"] and plain["fused"] == 0 and plain["softmax_left"] == plain["layers"]
    fused = zr.run_job(zr.Job("bloom", targets=[], interp=False))
    assert fused["fused"] == fused["layers"] == 2 and fused["softmax_left"] == 0


@pytest.mark.slow
def test_pass_plugin_runs_in_the_matrix(tmp_path: Path) -> None:
    """A pass from --load-pass-plugin runs inside the worker, on every model of the run."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "from irkit.passmanager import register_pass\n"
        "from irkit.passes.canonicalize import Canonicalize\n"
        "@register_pass('zoo-test-canon')\n"
        "class ZooTestCanon(Canonicalize):\n"
        "    '''canonicalize, under another name (a plugin for the zoo matrix test)'''\n")
    jobs = zr.plan(["bloom"], ["toy"], ["torch"], targets=[], interp=True, plugins=[str(plugin)],
                   pipeline="zoo-test-canon,fuse-attention,dce")
    (row,) = zr.run_matrix(jobs, workers=0)
    assert row["stages"]["optimise"]["ok"], row["stages"]["optimise"]
    assert row["attention_at_import"] == 0 and row["fused"] == row["layers"] == 2
    assert row["stages"]["interp-optimised"]["numerics"], row["stages"]["interp-optimised"]


def test_worker_timeout_is_a_row_and_the_matrix_goes_on() -> None:
    jobs = zr.plan(["gpt2", "bert"], ["toy"], ["torch"], targets=[], interp=False)
    rows = zr.run_matrix(jobs, workers=1, timeout=1.0)
    assert [r["key"] for r in rows] == ["gpt2:toy:torch", "bert:toy:torch"]
    for r in rows:
        assert r["error"].startswith("timeout: timed out after 1 s"), r


def _has(mod: str) -> bool:
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


@pytest.mark.slow
def test_matrix_row_in_a_worker_process(tmp_path: Path) -> None:
    """One job isolated in a worker process: the onnx frontend, onnxruntime's own session on the same
    file, the irkit import on the interpreter and on the ort target, all against torch."""
    if not _has("onnxruntime"):
        pytest.skip("onnxruntime not installed")
    jobs = zr.plan(["bert"], ["toy"], ["onnx"], targets=["ort"], interp=True, out_dir=str(tmp_path))
    (row,) = zr.run_matrix(jobs, workers=1)
    assert not row.get("error"), row
    st = row["stages"]
    assert st["ort-session"]["ok"] and st["ort-session"]["numerics"], st["ort-session"]
    assert st["import"]["ok"] and st["interp"]["numerics"] and st["interp-optimised"]["numerics"]
    assert row["targets"]["ort"]["status"] == "ok", row["targets"]
    assert (tmp_path / "bert-toy.onnx").exists()
