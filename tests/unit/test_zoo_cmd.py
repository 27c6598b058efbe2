"""`irkit zoo run|table|list`: argument errors as one line, results files, the Markdown table.

Nothing here builds a model (tests/numeric/test_zoo_run.py runs the matrix)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from irkit import zoo
from irkit.cli import main
from irkit.zoo import run as zr


@pytest.mark.parametrize("argv, msg", [
    (["zoo", "run", "--models", "gpt2,nosuch"], "nosuch"),
    (["zoo", "run", "--models", "gpt2", "--sizes", "huge"], "huge"),
    (["zoo", "run", "--models", "gpt2", "--frontends", "tflite"], "unknown frontend 'tflite'"),
    (["zoo", "run", "--models", "gpt2", "-p", "canonicalize,no-such-pass"], "no-such-pass"),
    (["zoo", "run", "--models", "gpt2", "--load-pass-plugin", "{tmp}/missing.py"], "pass plugin file not found"),
    (["zoo", "run", "--family", "robots"], "--family robots: unknown family"),
    (["zoo", "run", "--models", "gpt2", "--jobs", "-2"], "--jobs -2"),
    (["zoo", "run", "--models", "gpt2", "--json", "{tmp}/bad.json"], "not a zoo results file"),
    (["zoo", "table", "{tmp}/none.json"], "no such results file"),
    (["zoo", "table", "{tmp}/bad.json"], "not a zoo results file"),
    (["zoo"], "give an action: run, table or list"),
])
def test_user_errors_are_one_line(argv: list[str], msg: str, tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "bad.json").write_text('{"not": "rows"}')
    rc = main([a.format(tmp=tmp_path) for a in argv])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith("irkit: error:") and err.count("\n") == 1 and msg in err, err
    assert "Traceback" not in err


def test_list_names_every_architecture(capsys: Any) -> None:
    assert main(["zoo", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == zoo.names()
    assert any(ln.startswith("llama") and "Llama-3.2-1B" in ln for ln in lines)


def test_plan_follows_the_frontends_each_entry_exports() -> None:
    jobs = zr.plan(["gpt2", "bert"], ["toy", "full"], ["torch", "onnx"], targets=["ort"])
    assert [j.key for j in jobs] == ["gpt2:toy:torch", "gpt2:toy:onnx", "gpt2:full:torch", "gpt2:full:onnx",
                                     "bert:toy:torch", "bert:toy:onnx", "bert:full:torch", "bert:full:onnx"]
    assert all(j.targets == ["ort"] and j.pipeline == zr.DEFAULT_PIPELINE for j in jobs)
    only_pt2 = [n for n in zoo.names() if "onnx" not in zoo.entry(n).exports]
    if only_pt2:
        assert [j.frontend for j in zr.plan(only_pt2[:1], ["toy"], ["torch", "onnx"])] == ["torch"]


def test_rotating_sample_walks_the_whole_zoo() -> None:
    names = zoo.names()
    days = (len(names) + 1) // 2
    seen = [n for d in range(days) for n in zr.rotating_sample(d, 2)]
    assert set(seen) == set(names)
    assert zr.rotating_sample(41, 2) == zr.rotating_sample(41, 2)
    assert zr.rotating_sample(41, 2) != zr.rotating_sample(42, 2)
    assert len(set(zr.rotating_sample(7, 2))) == 2


def _row(model: str, frontend: str, *, fused: int, layers: int, ort: str = "ok",
         missing: dict[str, int] | None = None) -> dict[str, Any]:
    stages: dict[str, Any] = {
        "build": {"ok": True, "seconds": 0.5, "peak_mb": 400.0},
        "export": {"ok": True, "dynamic": True, "seconds": 3.0, "peak_mb": 420.0},
    }
    if missing:
        stages["import"] = {"ok": False, "error": "UnsupportedOpsError: ...", "missing_ops": missing,
                            "seconds": 1.0, "peak_mb": 430.0}
        return {"key": f"{model}:toy:{frontend}", "model": model, "size": "toy", "frontend": frontend,
                "weight_mb": 0.5, "layers": layers, "stages": stages, "targets": {}}
    stages["import"] = {"ok": True, "seconds": 1.5, "peak_mb": 431.0}
    stages["interp"] = {"ok": True, "numerics": True, "seconds": 0.2, "peak_mb": 432.0}
    stages["optimise"] = {"ok": True, "seconds": 0.7, "peak_mb": 433.0}
    stages["interp-optimised"] = {"ok": True, "numerics": fused == layers, "seconds": 0.1, "peak_mb": 433.0}
    stages["compile:ort"] = {"ok": True, "seconds": 0.3, "peak_mb": 450.0}
    return {"key": f"{model}:toy:{frontend}", "model": model, "size": "toy", "frontend": frontend,
            "weight_mb": 0.5, "layers": layers, "fused": fused, "stages": stages,
            "targets": {"ort": {"status": ort}, "tvm-cuda": {"status": "compiled"}}}


def test_merge_replaces_rows_by_key_and_keeps_zoo_order(tmp_path: Path) -> None:
    out = tmp_path / "zoo.json"
    zr.merge(out, [_row("bert", "torch", fused=2, layers=2)], {"command": "irkit zoo run --models bert"})
    zr.merge(out, [_row("gpt2", "onnx", fused=1, layers=2), _row("gpt2", "torch", fused=2, layers=2)],
             {"command": "irkit zoo run --models gpt2"})
    doc = zr.merge(out, [_row("bert", "torch", fused=0, layers=2, ort="MISMATCH")], None)
    on_disk = json.loads(out.read_text())
    assert on_disk == json.loads(json.dumps(doc))
    assert [r["key"] for r in on_disk["rows"]] == ["gpt2:toy:torch", "gpt2:toy:onnx", "bert:toy:torch"]
    assert on_disk["rows"][2]["fused"] == 0
    assert [r["command"] for r in on_disk["runs"]] == ["irkit zoo run --models bert", "irkit zoo run --models gpt2"]
    assert not list(tmp_path.glob("*.tmp*"))


def test_markdown_table_cells(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "zoo.json"
    rows = [_row("gpt2", "torch", fused=2, layers=2), _row("gpt2", "onnx", fused=1, layers=2, ort="MISMATCH"),
            _row("t5", "onnx", fused=0, layers=6, missing={"aten.foo": 2, "aten.bar": 1})]
    zr.merge(out, rows, {"command": "irkit zoo run --models gpt2,t5 --targets ort,tvm-cuda", "seconds": 9.0,
                         "pipeline": zr.DEFAULT_PIPELINE, "versions": {"torch": "2.13.0"}})
    md = tmp_path / "ZOO.md"
    assert main(["zoo", "table", str(out), "--markdown", str(md)]) == 0
    text = md.read_text()
    assert "    irkit zoo run --models gpt2,t5 --targets ort,tvm-cuda" in text
    status = [ln for ln in text.split("## Status")[1].split("## Time")[0].splitlines() if ln.startswith("| ")]
    assert status[0] == ("| model | size | frontend | export | import | interp vs torch | fused attn | ort | "
                         "tvm-cuda | note |")
    assert status[1] == "| gpt2 | toy | torch | dyn | ok | ok | 2/2 | ok | compiles |  |"
    assert status[2] == "| gpt2 | toy | onnx | dyn | ok | ok | 1/2 (numerics MISMATCH) | MISMATCH | compiles |  |"
    assert status[3] == "| t5 | toy | onnx | dyn | missing: aten.bar, aten.foo | - | - | - | - |  |"
    assert "- torch: exported 1/1, imported 1/1, interpreter matches torch 1/1, every attention fused" in text
    assert "- onnx: exported 2/2, imported 1/2, interpreter matches torch 1/2, every attention fused " \
           "(numbers kept) 0/2" in text
    timing = text.split("## Time and peak memory")[1]
    assert "| gpt2 | toy | torch | 0.5 | 3.0 | 1.5 s, 431 MB | 0.7 s, 433 MB | 0.3 s, 450 MB | - | - |" in timing
    rows[0]["stages"]["import"].update(cpu_s=1.2, rss_before_mb=420.0)
    zr.merge(out, rows[:1])
    assert main(["zoo", "table", str(out), "--markdown", str(md)]) == 0
    assert "| gpt2 | toy | torch | 0.5 | 3.0 | 1.5 s (1.2 cpu), 431 MB (+11) | 0.7 s, 433 MB |" in md.read_text()
    assert main(["zoo", "table", str(out)]) == 0
    assert capsys.readouterr().out.strip() == md.read_text().strip()


def test_peak_memory_resets_per_stage() -> None:
    import mmap

    if not zr.reset_peak():
        pytest.skip("this kernel cannot reset the resident high-water mark")
    base = zr.peak_mb()
    # 40 MB of fresh anonymous pages, each touched (an allocator could hand back pages it
    # already holds, which would not raise the high-water mark)
    a = mmap.mmap(-1, 40 * 2**20)
    for off in range(0, len(a), mmap.PAGESIZE):
        a[off] = 1
    high = zr.peak_mb()
    a.close()
    assert high is not None and base is not None and high - base > 30
    zr.reset_peak()
    after = zr.peak_mb()
    assert after is not None and after < high - 30


@pytest.mark.slow
def test_import_zoo_flax_is_accepted_and_quiet(tmp_path) -> None:
    """``irkit import zoo-flax:NAME`` (listed in every command's input help) imports the Flax NNX
    model through the jaxpr importer, and libtpu's TPU-discovery warnings stay off stderr."""
    pytest.importorskip("flax")
    import os
    import subprocess
    import sys

    out = tmp_path / "gpt2.mlir"
    env = {k: v for k, v in os.environ.items() if k not in ("IRKIT_VERBOSE", "IRKIT_TRACEBACK")}
    p = subprocess.run([sys.executable, "-m", "irkit.cli", "import", "zoo-flax:gpt2", "-o", str(out)], env=env,
                       capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stderr == ""
    assert "ik.matmul" in out.read_text()
