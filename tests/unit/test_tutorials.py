"""The tutorials' code runs as written."""

from __future__ import annotations

import re
from pathlib import Path

from irkit.cli import main
from irkit.text import write_module

DOCS = Path(__file__).parents[2] / "docs"


def _python_blocks(md: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", md.read_text(), re.S)


def test_pass_plugin_tutorial(tmp_path: Path, capsys) -> None:
    plugin = tmp_path / "my_passes.py"
    plugin.write_text(_python_blocks(DOCS / "tutorial-pass-plugin.md")[0])
    from irkit.ir import DType, Module, TensorType, new_function

    f, b = new_function("main", [TensorType((4, 8), DType.f32)], ["x"])
    x = f.args[0]
    b.ret(b.mul(x, b.sigmoid(x)))
    src = tmp_path / "m.mlir"
    write_module(Module([f]), str(src))
    assert main(["list-passes", "--load-pass-plugin", str(plugin)]) == 0
    assert "my-silu  -  Fuse x * sigmoid(x) into ik.silu." in capsys.readouterr().out
    assert main(["opt", str(src), "--load-pass-plugin", str(plugin), "-p", "canonicalize,my-silu,dce",
                 "--check-numerics"]) == 0
    out = capsys.readouterr().out
    assert '"ik.silu"(%x)' in out and "ik.sigmoid" not in out



def test_tour_runs(tmp_path: Path) -> None:
    """The README tour (examples/tour.py) end to end, smallest model."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(DOCS.parent / "examples" / "tour.py"), "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "ik.attention" in (tmp_path / "compare.md").read_text()
    assert (tmp_path / "artifacts" / "xla-tpu-v5e" / "hlo.txt").exists()


def test_tpu_vs_gpu_tutorial_commands(tmp_path: Path, capsys) -> None:
    """The tutorial's passes and estimates on the tiny GPT-2 (smallest sizes)."""
    src = tmp_path / "gpt2.mlir"
    assert main(["import", "examples/models/gpt2.py:gpt2_tiny", "-o", str(src)]) == 0
    for hw in ("tpu-v5e", "h100"):
        assert main(["opt", str(src), "-p", f"canonicalize,fuse-attention,tile-matmul{{target={hw}}},"
                     f"assign-layout{{target={hw}}}", "--check-numerics", "-o", str(tmp_path / f"{hw}.mlir")]) == 0
        assert main(["estimate", str(tmp_path / f"{hw}.mlir"), "--target", hw, "--bind", "B=2,S=32", "--json"]) == 0
    tpu = (tmp_path / "tpu-v5e.mlir").read_text()
    gpu = (tmp_path / "h100.mlir").read_text()
    assert 'dataflow = "ws"' in tpu and "dataflow" not in gpu
    assert 'layout = "kn"' in tpu and 'layout = "nk"' in gpu
