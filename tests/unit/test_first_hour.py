"""What a researcher meets in the first hour: silent acceptance and confusing messages turned
into one clear line, `irkit compare` that fits a terminal, the Python API's summaries and
statistics."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from irkit.cli import main
from irkit.testing.blocks import gpt2_style_module
from irkit.text import read_module, write_module

ROOT = Path(__file__).resolve().parents[2]

F32_MODULE = '''"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<2x3xf32>):
    %0 = "ik.add"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> RESULT loc("f.py":3:0)
    "func.return"(%0) : (tensor<2x3xf32>) -> ()
  }) {sym_name = "main", function_type = (tensor<2x3xf32>) -> FNRESULT} : () -> ()
}) : () -> ()
'''


def _f32(tmp_path: Path, result: str = "tensor<2x3xf32>", fnresult: str = "tensor<2x3xf32>") -> Path:
    p = tmp_path / "f.mlir"
    p.write_text(F32_MODULE.replace("FNRESULT", fnresult).replace("RESULT", result))
    return p


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("fh") / "m.mlir"
    write_module(gpt2_style_module(layers=1), str(p))
    return p


def _irkit(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("IRKIT_TRACEBACK", None)
    return subprocess.run([sys.executable, "-m", "irkit.cli", *args], check=False, capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


def _one_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("irkit: error: "), err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


# -- a subprocess: the exit status and exactly one line ---------------------------------------------


def test_pass_option_is_a_user_error_naming_the_option_and_specs(model: Path) -> None:
    r = _irkit("opt", str(model), "-p", "tile-matmul{target=tpu-v9}")
    assert r.returncode == 1 and r.stdout == ""
    line = _one_error(r.stderr)
    assert "tile-matmul" in line and "target=tpu-v9" in line and "tpu-v5e" in line and "h100" in line


@pytest.mark.parametrize("pipeline, want", [
    ("assign-layout{target=nowhere}", "pass 'assign-layout': option 'target=nowhere': unknown hardware 'nowhere'"),
    ("canonicalize{max-rewrites=-1}", "pass 'canonicalize': max-rewrites must be >= 0"),
    ("assign-layout{min-dim=-5}", "pass 'assign-layout': min-dim must be >= 1, got -5"),
    ("canonicalize{max-rewrites=lots}", "pass 'canonicalize': option 'max-rewrites' wants int, got 'lots'"),
])
def test_other_pass_option_errors(tmp_path: Path, capsys, pipeline: str, want: str) -> None:
    # checked when the pipeline is parsed: the input file is never read
    assert main(["opt", str(tmp_path / "never-read.mlir"), "-p", pipeline]) == 1
    assert want in _one_error(capsys.readouterr().err)


# -- in process (the same main(), without a Python start per case) ---------------------------------


def test_python_file_without_factory(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "mymodels.py").write_text("def tiny():\n    pass\n\n\ndef _helper():\n    pass\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "mymodels.py"]) == 1
    line = _one_error(capsys.readouterr().err)
    assert "mymodels.py is Python: name the factory, FILE.py:FACTORY" in line and "mymodels.py:tiny" in line
    assert "_helper" not in line


def test_empty_mlir_file(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "e.mlir").write_text("// nothing here yet\n\n")
    monkeypatch.chdir(tmp_path)
    assert main(["opt", "e.mlir", "-p", "canonicalize"]) == 1
    assert "e.mlir: empty file, expected a module" in _one_error(capsys.readouterr().err)
    (tmp_path / "nofn.mlir").write_text('"builtin.module"() ({\n}) : () -> ()\n')
    assert main(["run", "nofn.mlir"]) == 1
    assert "nofn.mlir: the module has no functions" in _one_error(capsys.readouterr().err)


def test_print_ir_after_unknown_pass_is_an_error_with_did_you_mean(model: Path, capsys) -> None:
    assert main(["opt", str(model), "-p", "canonicalize", "--print-ir-after=canonicalise"]) == 1
    line = _one_error(capsys.readouterr().err)
    assert "--print-ir-after=canonicalise" in line and "did you mean 'canonicalize'" in line
    assert main(["opt", str(model), "-p", "canonicalize", "--print-ir-before=nonexistent-pass"]) == 1
    assert "unknown pass 'nonexistent-pass'" in _one_error(capsys.readouterr().err)


def test_print_ir_after_pass_not_in_pipeline_warns(model: Path, capsys) -> None:
    assert main(["opt", str(model), "-p", "canonicalize", "--print-ir-after=cse", "-o", os.devnull]) == 0
    err = capsys.readouterr().err
    assert "irkit: warning: --print-ir-after=cse: 'cse' is not in the pipeline (canonicalize)" in err


@pytest.mark.parametrize("bind, want", [("B=0", "B=0: a dim size must be a positive integer"),
                                        ("Q=3", "Q is not a symbolic dim of the function; its symbolic dims are B, S")])
def test_bad_bind(model: Path, capsys, bind: str, want: str) -> None:
    assert main(["run", str(model), "--bind", bind]) == 1
    assert want in _one_error(capsys.readouterr().err)


def test_check_uses_bind(model: Path, tmp_path: Path, capsys) -> None:
    assert main(["check", str(model), "--targets", "reference", "--bind", "Q=3"]) == 1
    assert "--bind: Q is not a symbolic dim" in _one_error(capsys.readouterr().err)
    np.savez(tmp_path / "e.npz")
    assert main(["check", str(model), "--targets", "reference", "--bind", "B=1,S=5", "--inputs",
                 str(tmp_path / "e.npz")]) == 0
    assert "has no input_ids; drawn at random (seed 0)" in capsys.readouterr().err


def test_savez_positional_arr_n_is_accepted(model: Path, tmp_path: Path, capsys) -> None:
    ids = np.array([[5, 7, 11]], dtype=np.int64)
    np.savez(tmp_path / "pos.npz", ids)  # key arr_0
    np.savez(tmp_path / "named.npz", input_ids=ids)
    assert main(["run", str(model), "--inputs", str(tmp_path / "pos.npz"), "-o", str(tmp_path / "a.npz")]) == 0
    assert main(["run", str(model), "--inputs", str(tmp_path / "named.npz"), "-o", str(tmp_path / "b.npz")]) == 0
    a, b = np.load(tmp_path / "a.npz")["output0"], np.load(tmp_path / "b.npz")["output0"]
    assert a.shape == (1, 3, 128) and np.abs(a).max() > 0
    np.testing.assert_array_equal(a, b)
    assert "warning" not in capsys.readouterr().err
    np.savez(tmp_path / "both.npz", ids, input_ids=ids)
    assert main(["run", str(model), "--inputs", str(tmp_path / "both.npz")]) == 1
    assert "'input_ids' and 'arr_0' both give argument 0" in _one_error(capsys.readouterr().err)


def test_run_help_mentions_arr_n(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "arr_0" in " ".join(capsys.readouterr().out.split())


def test_not_an_npz_archive(model: Path, tmp_path: Path, capsys) -> None:
    np.save(tmp_path / "x.npy", np.arange(3))
    bad = tmp_path / "x.npz"
    bad.write_bytes((tmp_path / "x.npy").read_bytes())
    assert main(["run", str(model), "--inputs", str(bad)]) == 1
    line = _one_error(capsys.readouterr().err)
    assert line == f"irkit: error: {bad} is not an .npz archive (write inputs with numpy.savez)"
    assert "allow_pickle" not in line


def test_float64_input_for_f32_arg_warns_with_the_cast(tmp_path: Path, capsys) -> None:
    f = _f32(tmp_path)
    x = np.linspace(-2.0, 3.0, 6).reshape(2, 3)
    np.savez(tmp_path / "x.npz", x=x)
    assert main(["run", str(f), "--inputs", str(tmp_path / "x.npz"), "-o", str(tmp_path / "o.npz")]) == 0
    err = capsys.readouterr().err
    assert "irkit: warning: " in err and "x is float64; cast to float32 for the f32 argument" in err
    got = np.load(tmp_path / "o.npz")["output0"]
    np.testing.assert_allclose(got, 2 * x.astype(np.float32), rtol=0, atol=0)
    np.savez(tmp_path / "big.npz", x=np.full((2, 3), 1e300))
    assert main(["run", str(f), "--inputs", str(tmp_path / "big.npz")]) == 1
    assert "float64 values overflow f32" in _one_error(capsys.readouterr().err)


def test_float_ids_for_i64_arg(model: Path, tmp_path: Path, capsys) -> None:
    np.savez(tmp_path / "ok.npz", input_ids=np.array([[5.0, 7.0, 11.0]]))
    np.savez(tmp_path / "int.npz", input_ids=np.array([[5, 7, 11]]))
    assert main(["run", str(model), "--inputs", str(tmp_path / "ok.npz"), "-o", str(tmp_path / "a.npz")]) == 0
    assert "input_ids is float64; cast to int64 for the i64 argument" in capsys.readouterr().err
    assert main(["run", str(model), "--inputs", str(tmp_path / "int.npz"), "-o", str(tmp_path / "b.npz")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "a.npz")["output0"], np.load(tmp_path / "b.npz")["output0"])
    np.savez(tmp_path / "frac.npz", input_ids=np.array([[5.5, 7.0, 11.0]]))
    assert main(["run", str(model), "--inputs", str(tmp_path / "frac.npz")]) == 1
    assert "fractional or out-of-range values; the argument is i64" in _one_error(capsys.readouterr().err)


def test_missing_inputs_warn_with_names_and_seed(tmp_path: Path, capsys) -> None:
    p = tmp_path / "two.mlir"
    p.write_text(F32_MODULE.replace("FNRESULT", "tensor<2x3xf32>").replace("RESULT", "tensor<2x3xf32>")
                 .replace("^bb0(%x: tensor<2x3xf32>)", "^bb0(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>)")
                 .replace('"ik.add"(%x, %x)', '"ik.add"(%x, %y)')
                 .replace("function_type = (tensor<2x3xf32>)", "function_type = (tensor<2x3xf32>, tensor<2x3xf32>)"))
    np.savez(tmp_path / "x.npz", x=np.ones((2, 3), np.float32))
    assert main(["run", str(p), "--inputs", str(tmp_path / "x.npz"), "--seed", "7"]) == 0
    err = capsys.readouterr().err
    assert "irkit: warning: " in err and "has no y; drawn at random (seed 7)" in err


def test_wrong_function_result_type_is_reported_at_the_producer(tmp_path: Path, capsys) -> None:
    f = _f32(tmp_path, fnresult="tensor<2x3xf16>")
    assert main(["run", str(f)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{f}:4:10: 'ik.add' produces tensor<2x3xf32>, but @main declares result 0 as "
                          "tensor<2x3xf16>"), err
    g = _f32(tmp_path, result="tensor<2x3xf16>")
    assert main(["run", str(g)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{g}:4:10: 'ik.add' produces tensor<2x3xf16>, but 'func.return' returns it as"), err


def test_verifier_names_the_op_location_or_position() -> None:
    from irkit.ir.core import Location
    from irkit.ir.types import DType, TensorType
    from irkit.ir.verify import VerifyError, verify
    from irkit.text.parser import parse_module

    m = parse_module(F32_MODULE.replace("FNRESULT", "tensor<2x3xf32>").replace("RESULT", "tensor<2x3xf32>"))
    add = next(op for op in m.entry.walk() if op.name == "ik.add")
    add.results[0].type = TensorType((2, 3), DType.f16)  # what a buggy pass might do
    with pytest.raises(VerifyError) as e:
        verify(m)
    assert "'ik.add' at f.py:3" in str(e.value) and "type inference gives tensor<2x3xf32>" in str(e.value)
    add.loc = Location.unknown()
    with pytest.raises(VerifyError) as e:
        verify(m)
    assert "op ik.add#0 of @main" in str(e.value)


def test_statistics_show_tried_matched_applied(model: Path, capsys) -> None:
    assert main(["opt", str(model), "-p", "canonicalize,fuse-attention", "--statistics", "-o", os.devnull]) == 0
    err = capsys.readouterr().err
    lines = err.splitlines()
    i = lines.index("fuse-attention")
    assert lines[i + 1].split() == ["tried", "matched", "applied", "pattern"]
    tried, matched, applied, name = lines[i + 2].split()
    assert name == "fuse-attention" and int(tried) >= int(matched) >= int(applied) == 1


def test_python_stats_summary_and_elided_print(model: Path) -> None:
    from irkit.passmanager import PassManager
    from irkit.show import summary
    from irkit.text import print_module

    m = read_module(str(model))
    pm = PassManager("canonicalize,fuse-attention,cse")
    pm.run(m)
    st = pm.stats["fuse-attention"]
    assert st["fuse-attention.applied"] == 1 and st["fused-attentions"] == 1
    assert st["fuse-attention.tried"] >= st["fuse-attention.matched"] >= 1
    s = summary(m)
    assert s.startswith("@main(%input_ids: tensor<?x?xi64") and "ik.attention x1" in s and "parameters" in s
    assert len(s) < 1000
    full = print_module(m)
    short = print_module(m, elide_weights=True)
    assert "dialect_resources" in full and "dialect_resources" not in short
    assert "dense_resource constants elided" in short and len(short) * 10 < len(full)
    # the op lines are the same; only the weight bytes are left out
    assert [ln for ln in short.splitlines() if '"ik.' in ln] == [ln for ln in full.splitlines() if '"ik.' in ln]


# -- irkit compare ------------------------------------------------------------------------------

FIVE = "reference,ort,xla-tpu-v5e,xla-tpu-v4,xla-gpu"


def test_compare_five_targets_fits_120_columns(model: Path, tmp_path: Path, capsys) -> None:
    md = tmp_path / "c.md"
    assert main(["compare", str(model), "-p", "canonicalize,fuse-attention,fuse-norm,fuse-elementwise",
                 "--targets", FIVE, "--bind", "B=1,S=16", "--artifacts", str(tmp_path / "art"),
                 "--markdown", str(md), "--width", "120"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 120, [ln for ln in lines if len(ln) > 120]
    head = next(ln for ln in lines if ln.startswith("IR op"))
    for t in FIVE.split(","):
        assert t in out
    assert "ik.attention#" in out
    # a totals row, measured here and estimated for the TPU, with kernel counts
    total = next(ln for ln in lines if ln.startswith("total (all ops)"))
    assert " m ×" in total and " e ×" in total
    # the reason an entry is estimated, the full locations and the artifact folders
    assert "estimated: tpu-v5e spec, no device" in out
    assert "estimated: h100 spec, target unavailable here" in out
    locs = out[out.index("\nlocations:"):]
    assert "h.0.attn.out at gpt2_block.py:50; h.0.attn.scores at gpt2_block.py:40" in locs
    arts = out[out.index("\nartifacts:"):out.index("\nlocations:")]
    assert str(tmp_path / "art" / "ort") in arts and "model.onnx" in arts and "not compiled here" in arts
    assert (tmp_path / "art" / "ort" / "model.onnx").is_file()
    # the attention op on ort is timed by ort's profiler
    att = next(ln for ln in lines[lines.index(head):] if ln.startswith("ik.attention#"))
    assert "m" in att.split()
    text = md.read_text()
    assert "| total (all ops) |" in text and "µs measured" in text and "tpu-v5e spec, no device" in text
    # narrower terminals get the targets in groups, still every line within the width
    assert main(["compare", str(model), "--targets", "reference,xla-gpu", "--bind", "B=1,S=16",
                 "--artifacts", str(tmp_path / "art2"), "--width", "40"]) == 0
    out = capsys.readouterr().out
    assert max(len(ln) for ln in out.splitlines()) <= 40
    assert sum(ln.startswith("IR op") for ln in out.splitlines()) == 2


def test_compare_long_and_csv(model: Path, tmp_path: Path, capsys) -> None:
    args = ["compare", str(model), "-p", "canonicalize,fuse-attention", "--targets", "reference,xla-gpu",
            "--bind", "B=1,S=16", "--artifacts", str(tmp_path / "art")]
    assert main([*args, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    att = [r for r in rows if r["op"].startswith("ik.attention#")]
    assert {r["target"] for r in att} == {"reference", "xla-gpu"}
    ref = next(r for r in att if r["target"] == "reference")
    gpu = next(r for r in att if r["target"] == "xla-gpu")
    assert ref["source"] == "measured" and float(ref["seconds"]) > 0 and int(ref["kernels"]) >= 1
    assert gpu["source"] == "estimated" and "h100 spec" in gpu["reason"] and float(gpu["seconds"]) > 0
    assert any(r["op"] == "total" and r["target"] == "reference" for r in rows)
    assert main([*args, "--format", "long"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("ik.attention#"):]
    assert "measured" in block.splitlines()[1] and "kernel" in block
    with pytest.raises(SystemExit) as e:
        main([*args, "--format", "bogus"])
    assert e.value.code == 2
    assert "invalid choice: 'bogus'" in capsys.readouterr().err
