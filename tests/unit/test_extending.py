"""Run exactly the examples of docs/extending.md (extracted from the page, so they cannot drift).

Blocks marked ``<!-- file: NAME -->`` are written to a folder as NAME; the ``<!-- entry-points -->``
block becomes the ``entry_points.txt`` of a distribution installed in that folder (what ``pip install``
of the plugin would leave); then every ``<!-- run -->`` block runs, in order, in one fresh Python
process with that folder on its path.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "extending.md"
_BLOCK = re.compile(r"<!-- (file: [\w./-]+|run|entry-points) -->\n```(\w+)\n(.*?)\n```", re.DOTALL)


def blocks() -> list[tuple[str, str, str]]:
    return [(m.group(1), m.group(2), m.group(3) + "\n") for m in _BLOCK.finditer(DOC.read_text())]


def test_the_page_has_every_layer() -> None:
    kinds = [k for k, _, _ in blocks()]
    files = [k.split(": ", 1)[1] for k in kinds if k.startswith("file: ")]
    assert files == ["softsign_op.py", "softsign_onnx.py", "softsign_pass.py", "softsign_xla.py",
                     "eager_numpy_target.py"]
    assert kinds.count("run") == 5 and kinds.count("entry-points") == 1
    # every fenced python block of the page is one the test runs
    assert DOC.read_text().count("```python") == len(files) + kinds.count("run")


def _install(folder: Path) -> None:
    runs = []
    for kind, lang, code in blocks():
        if kind.startswith("file: "):
            (folder / kind.split(": ", 1)[1]).write_text(code)
        elif kind == "entry-points":
            eps = tomllib.loads(code)["project"]["entry-points"]
            dist = folder / "eager_numpy_target-1.0.dist-info"
            dist.mkdir()
            (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: eager-numpy-target\nVersion: 1.0\n")
            text = "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in table.items())
                           for group, table in eps.items())
            (dist / "entry_points.txt").write_text(text)
        else:
            runs.append(code)
    script = ["import runpy"]
    for i, code in enumerate(runs):
        (folder / f"run_{i}.py").write_text(code)
        script.append(f"runpy.run_path('run_{i}.py', run_name='__main__'); print('ran {i}', flush=True)")
    (folder / "run_all.py").write_text("\n".join(script) + "\n")


@pytest.mark.filterwarnings("ignore")
def test_documented_examples_run(tmp_path: Path) -> None:
    pytest.importorskip("jax")
    pytest.importorskip("onnx")
    _install(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "run_all.py"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                       timeout=600)
    assert p.returncode == 0, textwrap.shorten(p.stderr[-3000:], 3000)
    assert p.stdout.split() == [w for i in range(5) for w in ("ran", str(i))]
