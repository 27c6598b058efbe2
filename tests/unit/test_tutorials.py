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

