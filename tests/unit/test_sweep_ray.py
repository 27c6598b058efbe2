"""Sweeps on a local Ray cluster: a worker killed mid-sweep, and the same store as local executors."""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from irkit.sweep.executors import LocalPool, RayExecutor, ray_resources
from irkit.sweep.runner import Sweep
from irkit.sweep.spec import load_spec
from irkit.sweep.store import Store

ROOT = Path(__file__).resolve().parents[2]
BLOCK = ROOT / "examples" / "sweeps" / "gpt2_block.mlir"

SPEC = f"""
name = "ray"
models = ["{BLOCK}"]
pipelines = ["", "canonicalize,fuse-attention,cse"]
targets = ["reference", "ort"]
measurements = ["estimate", "check"]
shapes = [{{B = 1, S = 4}}, {{B = 2, S = 8}}]
timeout = 120
retries = 2
"""


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, resources=ray_resources(), include_dashboard=False, logging_level="ERROR",
             log_to_driver=False)
    yield
    ray.shutdown()


def _executing_pids() -> list[int]:
    """Ray worker processes running a sweep job now (Ray titles them ``ray::execute``)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
        except OSError:
            continue
        if cmd.startswith(b"ray::execute"):
            out.append(int(d))
    return out


def _results(store: Path) -> dict[str, tuple[str, object]]:
    with Store(store, create=False) as st:
        return {r.key: (r.status, r.result.get("ok")) for r in st.rows()}


def test_worker_killed_mid_sweep_every_result_once(tmp_path: Path, cluster: None) -> None:
    # one pipeline, one shape: 4 tasks, so the default suite stays quick
    (tmp_path / "s.toml").write_text(textwrap.dedent(SPEC).replace(', "canonicalize,fuse-attention,cse"', "")
                                     .replace(", {B = 2, S = 8}", ""))
    spec = load_spec(tmp_path / "s.toml")
    killed: list[int] = []

    def killer() -> None:
        deadline = time.time() + 120
        while time.time() < deadline and not killed:
            pids = _executing_pids()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
                return
            time.sleep(0.05)

    th = threading.Thread(target=killer, daemon=True)
    th.start()
    with Store(tmp_path / "s.sqlite") as st:
        summary = Sweep(spec, st, RayExecutor(), log=lambda s: None).run()
        th.join(5)
        assert killed, "no Ray worker was seen running a job"
        rows = st.rows()
        attempts = st.attempts()
    keys = [r.key for r in rows]
    assert len(keys) == len(set(keys)) == len(spec.tasks()) == 4
    assert all(r.status == "ok" for r in rows), [(r.target, r.error) for r in rows if r.status != "ok"]
    assert all(r.result["ok"] for r in rows if r.measurement == "check")
    lost = [a for a in attempts if a["status"] == "lost"]
    assert len(lost) == 1 and "Ray worker lost" in lost[0]["reason"]
    assert summary.retries == 1 and summary.ok == 4


@pytest.mark.slow
def test_jobs_1_jobs_2_and_ray_store_the_same(tmp_path: Path, cluster: None) -> None:
    (tmp_path / "s.toml").write_text(textwrap.dedent(SPEC))
    spec = load_spec(tmp_path / "s.toml")
    got = {}
    for name, ex in (("jobs1", LocalPool(1)), ("jobs2", LocalPool(2)), ("ray", RayExecutor())):
        try:
            with Store(tmp_path / f"{name}.sqlite") as st:
                Sweep(spec, st, ex, log=lambda s: None).run()
        finally:
            if not isinstance(ex, RayExecutor):
                ex.close()
        got[name] = _results(tmp_path / f"{name}.sqlite")
    assert got["jobs1"] == got["jobs2"] == got["ray"]
    assert len(got["ray"]) == 16 and all(s == "ok" and ok is not False for s, ok in got["ray"].values())
