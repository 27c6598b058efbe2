"""The irkit command: opt, run, listings, errors as one line, atomic output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from irkit.cli import main
from irkit.testing.blocks import gpt2_style_module
from irkit.text import read_module, write_module


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    p = tmp_path / "m.mlir"
    write_module(gpt2_style_module(layers=1), str(p))
    return p


def test_opt_in_place_keeps_file_valid(model: Path, capsys) -> None:
    before = read_module(str(model)).num_ops()
    assert main(["opt", str(model), "-p", "canonicalize,cse,dce", "-o", str(model)]) == 0
    after = read_module(str(model))
    assert after.num_ops() < before


def test_opt_flags(model: Path, capsys) -> None:
    rc = main(["opt", str(model), "-p", "canonicalize,cse", "--print-ir-after-all", "--timing", "--statistics",
               "--check-numerics", "--print-ir-before", "cse"])
    assert rc == 0
    cap = capsys.readouterr()
    assert '"builtin.module"' in cap.out
    for s in ("IR Dump Before cse", "IR Dump After canonicalize", "Pass execution timing report",
              "Statistics Collected"):
        assert s in cap.err


def test_run_with_inputs(model: Path, tmp_path: Path, capsys) -> None:
    ids = np.array([[1, 2, 3, 4, 5]], dtype=np.int64)
    np.savez(tmp_path / "in.npz", input_ids=ids)
    out = tmp_path / "out.npz"
    assert main(["run", str(model), "--inputs", str(tmp_path / "in.npz"), "-o", str(out)]) == 0
    with np.load(out) as z:
        assert z["output0"].shape == (1, 5, 128)
    np.savez(tmp_path / "pos.npz", arg0=ids)
    assert main(["run", str(model), "--inputs", str(tmp_path / "pos.npz")]) == 0
    assert "output0: float32[1, 5, 128]" in capsys.readouterr().out


@pytest.mark.parametrize("argv,msg", [
    (["opt", "nope.mlir"], "nope.mlir: no such file"),
    (["opt", "{model}", "-p", "fuse-everything"], "unknown pass 'fuse-everything'"),
    (["run", "{model}", "--inputs", "{model}"], "is not an .npz archive (write inputs with numpy.savez)"),
    (["run", "{model}", "--inputs", "{bad_npz}"], "unknown inputs wrong_name"),
    (["run", "{model}", "--bind", "B=0"], "B=0: a dim size must be a positive integer"),
    (["run", "{model}", "--bind", "Q=3"], "Q is not a symbolic dim of the function; its symbolic dims are B, S"),
    (["lower", "{model}", "--target", "reference", "--bind", "T=2", "-o", "{tmp}/out"], "T is not a symbolic dim"),
    (["bench", "{model}", "--targets", "reference", "--bind", "Q=3"],
     "Q is not a symbolic dim of the function; its symbolic dims are B, S"),
    (["opt", "{model}", "-p", "tile-matmul{{target=tpu-v9}}"], "unknown hardware 'tpu-v9'"),
    (["bench", "{model}", "--targets", "reference", "--price", "reference=abc"],
     "reference=abc: the price must be a number of dollars per hour"),
    (["bench", "{model}", "--targets", "reference", "--price", "tpu-v5=1.2"],
     "'tpu-v5' names no target or hardware spec; did you mean 'tpu-v5p'?"),
    (["lower", "{model}", "--target", "reference", "-o", "{bad_npz}"], "exists and is a file"),
])
def test_user_errors_are_one_line(argv: list[str], msg: str, model: Path, tmp_path: Path, capsys) -> None:
    np.savez(tmp_path / "bad.npz", wrong_name=np.ones(3))
    argv = [a.format(model=model, bad_npz=tmp_path / "bad.npz", tmp=tmp_path) for a in argv]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 1
    assert err.count("\n") == 1 and msg in err and "Traceback" not in err


def test_run_on_a_target_at_the_inputs_shapes(model: Path, tmp_path: Path, capsys) -> None:
    """`run --target` lowers for the shapes of the given inputs, not only the example shapes."""
    ids = np.array([[3, 1, 4]], dtype=np.int64)
    np.savez(tmp_path / "in.npz", input_ids=ids)
    assert main(["run", str(model), "--inputs", str(tmp_path / "in.npz"), "--target", "ort", "-o",
                 str(tmp_path / "ort.npz")]) == 0
    assert main(["run", str(model), "--inputs", str(tmp_path / "in.npz"), "-o", str(tmp_path / "ref.npz")]) == 0
    with np.load(tmp_path / "ort.npz") as a, np.load(tmp_path / "ref.npz") as b:
        assert a["output0"].shape == (1, 3, 128)
        np.testing.assert_allclose(a["output0"], b["output0"], rtol=1e-4, atol=1e-4)
    assert main(["run", str(model), "--target", "ort", "--bind", "B=2,S=6"]) == 0
    assert "output0: float32[2, 6, 128]" in capsys.readouterr().out


def test_inputs_drawn_at_random_are_named(model: Path, tmp_path: Path, capsys) -> None:
    np.savez(tmp_path / "empty.npz")
    assert main(["run", str(model), "--inputs", str(tmp_path / "empty.npz"), "--bind", "B=1,S=3"]) == 0
    cap = capsys.readouterr()
    assert "has no input_ids; drawn at random (seed 0)" in cap.err
    assert "output0: float32[1, 3, 128]" in cap.out


def test_zoo_architectures_are_model_sources(tmp_path: Path, capsys) -> None:
    """`zoo:NAME` imports a transformers architecture (random weights) wherever a model is taken."""
    out = tmp_path / "bert.mlir"
    assert main(["import", "zoo:bert", "-o", str(out)]) == 0
    m = read_module(str(out))
    assert [a.name for a in m.entry.args][:1] == ["input_ids"]
    assert main(["run", "zoo:bert", "--bind", "B=1,S=5"]) == 0
    assert "output0: float32[1, 5, " in capsys.readouterr().out
    assert main(["import", "zoo:no-such-model", "-o", str(out)]) == 1
    assert "no zoo architecture 'no-such-model'" in capsys.readouterr().err


def test_list_passes_and_version(capsys) -> None:
    assert main(["list-passes"]) == 0
    out = capsys.readouterr().out
    assert "canonicalize  -  " in out and "--max-rewrites=<int>" in out
    with pytest.raises(SystemExit):
        main(["--version"])
    assert "irkit 0.1.0" in capsys.readouterr().out


def test_kill_mid_write_never_leaves_half_a_file(tmp_path: Path) -> None:
    """Kill `irkit opt -o` at random moments: the output is the old file or the complete new one."""
    src = tmp_path / "src.mlir"
    write_module(gpt2_style_module(layers=2), str(src))
    out = tmp_path / "out.mlir"
    old = "// an old file that must survive or be replaced whole\n"
    out.write_text(old)
    rng = np.random.default_rng(0)
    complete = None
    for i in range(6):
        p = subprocess.Popen([sys.executable, "-m", "irkit.cli", "opt", str(src), "-p", "canonicalize,cse",
                              "-o", str(out)], stderr=subprocess.DEVNULL)
        time.sleep(float(rng.uniform(0.2, 2.0)))
        p.send_signal(signal.SIGKILL)
        p.wait()
        text = out.read_text()
        if text != old:
            assert text.rstrip().endswith("}) : () -> ()")
            read_module(str(out))  # parses, sidecar consistent
            complete = text
    leftovers = [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    # a killed writer may leave its temp file; never a partial destination
    assert all(f.startswith(".") for f in leftovers)
    del complete


def test_kill_lower_mid_write(tmp_path: Path) -> None:
    """`irkit lower -o DIR` killed at random moments: each file is the old one or a complete new one."""
    import onnx

    src = tmp_path / "src.mlir"
    write_module(gpt2_style_module(layers=2), str(src))
    out = tmp_path / "art"
    out.mkdir()
    (out / "model.onnx").write_bytes(b"old")
    rng = np.random.default_rng(1)
    for _ in range(4):
        p = subprocess.Popen([sys.executable, "-m", "irkit.cli", "lower", str(src), "--target", "ort", "-o", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(float(rng.uniform(0.5, 4.0)))
        p.send_signal(signal.SIGKILL)
        p.wait()
        data = (out / "model.onnx").read_bytes()
        if data != b"old":
            onnx.checker.check_model(onnx.load_from_string(data))
        man = out / "manifest.json"
        if man.exists():
            import json

            json.loads(man.read_text())


def test_importing_a_jax_factory_prints_no_libtpu_noise(tmp_path: Path) -> None:
    """A JAX factory's first array starts JAX's backends; with libtpu installed and no TPU,
    libtpu's discovery block must not reach irkit's stderr."""
    pytest.importorskip("jax")
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "m.mlir"
    env = {k: v for k, v in os.environ.items() if k != "IRKIT_VERBOSE"}
    p = subprocess.run([sys.executable, "-m", "irkit.cli", "import", str(root / "examples/sweeps/models.py") +
                        ":jax_mlp", "-o", str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stderr.strip().splitlines() == [ln for ln in p.stderr.strip().splitlines() if "ik.matmul" in ln]
    assert "TPU" not in p.stderr and "Source Location Trace" not in p.stderr
    assert read_module(out).entry is not None
