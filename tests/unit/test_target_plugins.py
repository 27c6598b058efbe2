"""Target plugins through the ``irkit.targets`` entry-point group, and quiet ``list-targets``.

The subprocess test installs two distributions the way pip leaves them (a ``*.dist-info`` with
``entry_points.txt`` on the path): one good plugin target and one whose module fails to import.
``irkit list-targets`` must list the good one, report the broken one as one line naming its
distribution and module, and print nothing at all on stderr (no libtpu / JAX / CUDA noise).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from irkit.targets import registry
from irkit.targets.base import Target

from irkit.errors import IrkitError

GOOD = '''
from irkit.targets.reference import ReferenceTarget


class TwinTarget(ReferenceTarget):
    summary = "the reference interpreter again, from a plugin"
'''


def _dist(site: Path, name: str, entry_points: str, module: str | None = None, code: str = "") -> None:
    d = site / f"{name.replace('-', '_')}-1.0.dist-info"
    d.mkdir(parents=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (d / "entry_points.txt").write_text("[irkit.targets]\n" + entry_points)
    if module:
        (site / f"{module}.py").write_text(code)


@pytest.fixture()
def clean_registry(monkeypatch):
    monkeypatch.setattr(registry, "PLUGIN_ERRORS", [])
    monkeypatch.setattr(registry, "TARGETS", dict(registry.TARGETS))
    registry.load_targets()
    return registry


def test_entry_point_kinds_and_broken_ones(clean_registry, tmp_path, monkeypatch) -> None:
    (tmp_path / "twin_target.py").write_text(GOOD + "\ndef make():\n    return TwinTarget()\n\nNOT_A_TARGET = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    eps = [EntryPoint("twin", "twin_target:TwinTarget", "irkit.targets"),
           EntryPoint("twin-made", "twin_target:make", "irkit.targets"),
           EntryPoint("twin-bad", "twin_target:NOT_A_TARGET", "irkit.targets"),
           EntryPoint("missing", "no_such_module_here:T", "irkit.targets"),
           EntryPoint("reference", "twin_target:TwinTarget", "irkit.targets")]
    failed = clean_registry.load_entry_point_targets(eps)
    assert [f.name for f in failed] == ["twin-bad", "missing", "reference"]
    t = clean_registry.get_target("twin")
    assert isinstance(t, Target) and t.name == "twin" and t.availability().can_run
    assert clean_registry.get_target("twin-made").summary.endswith("from a plugin")
    line = failed[1].line()
    assert "\n" not in line and "module no_such_module_here" in line and "ModuleNotFoundError" in line
    assert "already registered" in failed[2].line()
    with pytest.raises(IrkitError, match=r"target plugin 'missing' \(distribution \?, module no_such_module_here\)"):
        clean_registry.get_target("missing")


def test_list_targets_shows_plugins_and_prints_nothing_on_stderr(tmp_path) -> None:
    _dist(tmp_path, "twin-target", "twin = twin_target:TwinTarget\n", "twin_target", GOOD)
    _dist(tmp_path, "broken-target", "broken = broken_target:Target\n", "broken_target",
          "raise ImportError('this plugin needs libfoo')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("IRKIT_VERBOSE", "IRKIT_TRACEBACK")}
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-m", "irkit.cli", "list-targets", "--json"], env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stderr == ""
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["twin"]["status"] == "run"
    assert rows["broken"]["status"] == "broken"
    assert "distribution broken-target, module broken_target" in rows["broken"]["reason"]
    assert "this plugin needs libfoo" in rows["broken"]["reason"]
    assert {"xla-cpu", "tvm-cuda", "xla-gpu"} <= set(rows)
    for name in ("tvm-cuda", "xla-gpu"):
        assert rows[name]["gpu"] == "run" or rows[name]["gpu"].startswith("cannot run: ")
