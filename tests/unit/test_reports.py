"""estimate, bench, compare and show from the command line, on the synthetic GPT-2 block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irkit.cli import main
from irkit.testing.blocks import gpt2_style_module
from irkit.text import write_module


@pytest.fixture(scope="module")
def block(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("rep") / "g.mlir"
    write_module(gpt2_style_module(layers=1), str(p))
    return p


def test_estimate_json_and_user_spec(block: Path, tmp_path: Path, capsys) -> None:
    assert main(["estimate", str(block), "--target", "tpu-v5e", "--bind", "B=2,S=128", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {"op", "loc", "flops", "bytes", "cycles", "seconds", "bound", "utilization"} <= set(d["ops"][0])
    assert d["total"]["flops"] > 0 and d["total"]["seconds"] > 0
    spec = tmp_path / "mine.toml"
    spec.write_text('name = "tiny-array"\nkind = "systolic"\n[systolic]\nrows = 32\ncols = 32\ndataflow = "ws"\n'
                    'arrays = 1\nclock_ghz = 1.0\nweight_double_buffer = false\n[memory]\nhbm_gbps = 100\n')
    assert main(["estimate", str(block), "--target-spec", str(spec), "--bind", "B=2,S=128", "--json"]) == 0
    mine = json.loads(capsys.readouterr().out)
    assert mine["total"]["seconds"] > d["total"]["seconds"]  # a 32x32 array is slower than a v5e
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\nkind = "systolic"\n[systolic]\nrows = "many"\n')
    assert main(["estimate", str(block), "--target-spec", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.toml" in err and err.count("\n") == 1


def test_estimate_fused_attention_is_cheaper(block: Path, capsys) -> None:
    main(["estimate", str(block), "--target", "h100", "--bind", "B=8,S=1024", "--json"])
    unfused = json.loads(capsys.readouterr().out)["total"]
    main(["estimate", str(block), "-p", "canonicalize,fuse-attention", "--target", "h100", "--bind", "B=8,S=1024",
          "--json"])
    fused = json.loads(capsys.readouterr().out)["total"]
    assert fused["bytes"] < unfused["bytes"] and fused["seconds"] < unfused["seconds"]


def test_bench_outputs_and_plots(block: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "b"
    rc = main(["bench", str(block), "--targets", "reference,ort,xla-tpu-v5e", "--batch", "1", "--seq", "8,16",
               "--repeats", "3", "--warmup", "1", "--price", "ort=0.2,tpu-v5e=1.2", "--json", str(out) + ".json",
               "--csv", str(out) + ".csv", "--markdown", str(out) + ".md", "--plot", str(tmp_path / "plots")])
    assert rc == 0
    d = json.loads(Path(str(out) + ".json").read_text())
    kinds = {(r["target"], r["measured"]) for r in d["rows"]}
    assert ("ort", True) in kinds and ("xla-tpu-v5e", False) in kinds
    ort = [r for r in d["rows"] if r["target"] == "ort"][0]
    assert ort["latency_median"] > 0 and ort["latency_p99"] >= ort["latency_median"] and ort["cost_per_million"] > 0
    assert "estimated" in Path(str(out) + ".md").read_text()
    for name in ("latency_vs_seq.png", "roofline.png", "compile_vs_run.png"):
        data = (tmp_path / "plots" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_compare_links_artifacts(block: Path, tmp_path: Path, capsys) -> None:
    md = tmp_path / "cmp.md"
    rc = main(["compare", str(block), "-p", "canonicalize,fuse-attention", "--targets", "reference,ort,xla-tpu-v5e",
               "--bind", "B=1,S=16", "--artifacts", str(tmp_path / "art"), "--markdown", str(md)])
    assert rc == 0
    text = md.read_text()
    assert "ik.attention" in text and "measured" in text and "estimated" in text
    assert (tmp_path / "art" / "ort" / "model.onnx").exists()


def test_compare_measures_tvm_and_xla_kernels(block: Path, tmp_path: Path) -> None:
    md = tmp_path / "cmp.md"
    rc = main(["compare", str(block), "-p", "canonicalize,fuse-attention,fuse-norm,fuse-elementwise",
               "--targets", "tvm-llvm,xla-cpu", "--bind", "B=1,S=16", "--artifacts", str(tmp_path / "art"),
               "--markdown", str(md)])
    assert rc == 0
    rows = [r.strip("|").split("|") for r in md.read_text().splitlines() if r.startswith("| ik.")]
    for col, target in ((2, "tvm-llvm"), (3, "xla-cpu")):
        timed = {r[0].strip() for r in rows if "µs measured" in r[col]}
        # every kernel irkit scheduled has its time; TOPI ops too, unless TVM folded them at build time
        want = {r[0].strip() for r in rows if r[0].strip().startswith(("ik.fused", "ik.attention", "ik.matmul"))}
        assert want and want <= timed, (target, want - timed)
        assert any(t.startswith("ik.layer_norm") for t in timed), target


def test_per_op_assigns_calls_to_kernels() -> None:
    from irkit.commands.bench_cmd import _per_op
    from irkit.targets.base import Kernel

    ks = [Kernel("attention_4", "k", ["ik.attention#4"], []), Kernel("add_5", "k", ["ik.add#5"], []),
          Kernel("reshape_6", "k", ["ik.reshape#6"], []), Kernel("add_55", "k", ["ik.add#55"], []),
          Kernel("fused_7", "k", ["ik.fused#7", "ik.matmul#8"], []),
          Kernel("attention_9", "k", ["ik.attention#9"], [], extra={"functions": ["attention_4"]})]
    calls = [("attention_4", 3e-6), ("fused_add_5_reshape_6", 2e-6), ("fused_7", 4e-6), ("attention_4", 5e-6),
             ("vm_unknown", 1.0)]
    got = _per_op(calls, ks)
    assert got == {"ik.attention#4": 3e-6, "ik.add#5": 1e-6, "ik.reshape#6": 1e-6, "ik.fused#7": 4e-6,
                   "ik.matmul#8": 4e-6, "ik.attention#9": 5e-6}


@pytest.mark.parametrize("suffix", ["dot", "png", "svg"])
def test_show(block: Path, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"g.{suffix}"
    assert main(["show", str(block), "-p", "canonicalize,fuse-attention,fuse-elementwise", "-o", str(out)]) == 0
    data = out.read_bytes()
    if suffix == "dot":
        assert b"digraph" in data and b"attention" in data
    elif suffix == "png":
        assert data[:4] == b"\x89PNG"
    else:
        assert b"<svg" in data


# -- every example model, straight from its factory (commands import any model `irkit import` reads)

from examples.models.registry import MODELS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FUSE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"


def _example_params() -> list:
    tiny = [m for m in MODELS if m.size == "tiny"]
    return [pytest.param(m, id=m.name, marks=() if m.name == "gpt2_tiny" else pytest.mark.slow) for m in tiny]


@pytest.mark.parametrize("model", _example_params())
def test_bench_compare_show_on_example(model, tmp_path: Path, capsys) -> None:
    spec = str(ROOT / model.spec)
    js = tmp_path / "b.json"
    assert main(["bench", spec, "-p", FUSE, "--targets", "reference,ort,xla-tpu-v5e", "--repeats", "3",
                 "--warmup", "1", "--json", str(js), "--plot", str(tmp_path / "plots")]) == 0
    rows = json.loads(js.read_text())["rows"]
    assert {r["target"]: r["status"] for r in rows} == {"reference": "ok", "ort": "ok", "xla-tpu-v5e": "ok"}
    assert all(r["latency_median"] and r["latency_median"] > 0 for r in rows)
    assert (tmp_path / "plots" / "roofline.png").read_bytes()[:4] == b"\x89PNG"
    md = tmp_path / "cmp.md"
    assert main(["compare", spec, "-p", FUSE, "--targets", "reference,ort,xla-tpu-v5e", "--artifacts",
                 str(tmp_path / "art"), "--markdown", str(md)]) == 0
    text = md.read_text()
    assert "ik.attention" in text and "measured" in text and "estimated" in text
    png = tmp_path / "g.png"
    assert main(["show", spec, "-p", FUSE, "-o", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 5000
    capsys.readouterr()


def test_unknown_target_fails_before_the_import(capsys) -> None:
    import time

    t0 = time.perf_counter()
    assert main(["bench", str(ROOT / "examples/models/gpt2.py:gpt2_tiny"), "--targets", "reference,tpu-v9"]) == 1
    err = capsys.readouterr().err
    assert "unknown target 'tpu-v9'" in err and err.count("\n") == 1
    assert time.perf_counter() - t0 < 5  # the model was never exported
