"""Sweeps: spec expansion, the results store, resume after a kill, executors agree, faults."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from irkit.cli import main
from irkit.sweep.spec import load_spec
from irkit.sweep.store import ResultRow, Store

ROOT = Path(__file__).resolve().parents[2]
BLOCK = ROOT / "examples" / "sweeps" / "gpt2_block.mlir"
IRKIT = [sys.executable, "-c", "import sys; from irkit.cli import main; sys.exit(main(sys.argv[1:]))"]


def _spec(tmp_path: Path, body: str, name: str = "t.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


SMALL = f"""
name = "small"
models = ["{BLOCK}"]
pipelines = ["", "canonicalize,fuse-attention,cse"]
targets = ["reference", "ort"]
measurements = ["estimate", "check"]
hardware = ["tpu-v5e"]
shapes = [{{B = 1, S = 4}}, {{B = 2, S = 8}}]
timeout = 120

[[exclude]]
measurement = "estimate"
target = "ort"
"""


def _results(store: Path) -> dict[str, tuple[str, object]]:
    with Store(store, create=False) as st:
        return {r.key: (r.status, r.result.get("ok")) for r in st.rows()}


def test_spec_expands_cartesian_minus_exclusions(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, SMALL))
    tasks = spec.tasks()
    # per pipeline and shape: estimate on reference + tpu-v5e, check on reference + ort
    assert len(tasks) == 2 * 2 * 4
    assert not any(t.measurement == "estimate" and t.target == "ort" for t in tasks)
    assert {t.target for t in tasks if t.measurement == "estimate"} == {"reference", "tpu-v5e"}
    assert {dict(t.bindings)["S"] for t in tasks} == {4, 8}


@pytest.mark.parametrize("body, words", [
    ('models = ["a.mlir"]\ntargets = ["ort"]\nmeasurement = ["check"]\n', "unknown key 'measurement'"),
    ('models = ["a.mlir"]\ntargets = ["ort"]\nmeasurements = ["time"]\n', "unknown measurement 'time'"),
    ('models = ["a.mlir"]\ntargets = ["ort"]\nshapes = [{B = 0}]\n', "positive integers"),
    ('models = ["a.mlir"]\ntargets = ["ort"]\n[bench]\nrepeat = 3\n', "[bench] unknown option 'repeat'"),
    ('models = "a.mlir"\ntargets = [\n', "invalid TOML"),
    ('models = ["a.mlir"]\ntargets = ["tvm-lvm"]\n', "unknown target 'tvm-lvm'"),
    ('models = ["a.mlir"]\ntargets = ["ort"]\npipelines = ["canonicalise"]\n', "pipeline 'canonicalise'"),
])
def test_spec_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str,
                                  words: str) -> None:
    p = _spec(tmp_path, body)
    assert main(["sweep", str(p), "--store", str(tmp_path / "s.sqlite"), "--dry-run"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("irkit: error: ") and words in err and "\n" not in err and str(p) in err


def _writer(path: str, tag: str, n: int) -> None:
    with Store(path) as st:
        for i in range(n):
            st.put(ResultRow(key=f"{tag}-{i}", status="ok", model="m", frontend="auto", ir_hash="h", pipeline="",
                             target="ort", options={}, bindings={"B": i}, measurement="check", params={},
                             versions={}, machine={}, commit_id="c", sweep="s", result={"ok": True},
                             duration=0.01, worker=tag, finished=time.time()))


def test_store_is_safe_under_concurrent_writers(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    Store(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, f"w{k}", 150)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with Store(path, create=False) as st:
        assert st.count() == 450
        assert len(st.attempts()) == 450
        assert st.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_failed_attempt_never_replaces_an_ok_result(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as st:
        ok = ResultRow(key="k", status="ok", model="m", frontend="auto", ir_hash="h", pipeline="", target="ort",
                       options={}, bindings={}, measurement="check", params={}, versions={}, machine={},
                       commit_id="c", sweep="s", result={"ok": True}, finished=1.0)
        st.put(ok)
        bad = ResultRow(**{**ok.as_dict(), "status": "failed", "error": "lost", "result": {}})
        st.put(bad, attempt_status="lost")
        (row,) = st.rows()
        assert row.status == "ok" and row.result == {"ok": True} and row.attempts == 2
        assert [a["status"] for a in st.attempts("k")] == ["ok", "lost"]


def test_sweep_runs_resumes_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path, SMALL)
    store = tmp_path / "s.sqlite"
    assert main(["sweep", str(spec), "--store", str(store), "--report", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr()
    assert "16 ok, 0 failed" in out.out
    res = _results(store)
    assert len(res) == 16 and all(s == "ok" for s, _ in res.values())
    # every check passes against the float64 oracle (real numerics, random inputs)
    assert all(ok for s, ok in res.values() if ok is not None)
    assert "## check" in (tmp_path / "rep" / "report.md").read_text()
    assert len((tmp_path / "rep" / "results.csv").read_text().splitlines()) == 17
    # a second run finds everything and runs nothing; the dry run says so too
    assert main(["sweep", str(spec), "--store", str(store)]) == 0
    assert "16 already in the store, 0 to run" in capsys.readouterr().err
    assert main(["sweep", str(spec), "--store", str(store), "--dry-run"]) == 0
    assert "16 in the store, 0 to run" in capsys.readouterr().out
    # group and filter without re-running
    assert main(["results", "query", str(store), "--where", "measurement=check", "--group-by", "target",
                 "--json"]) == 0
    import json

    groups = json.loads(capsys.readouterr().out)
    assert {g["target"]: (g["count"], g["check_pass"]) for g in groups} == {"ort": (4, 4), "reference": (4, 4)}


@pytest.mark.slow
def test_killed_sweep_resumes_only_unfinished(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SMALL.replace('targets = ["reference", "ort"]', 'targets = ["reference", "ort", "xla-cpu"]'))
    store = tmp_path / "s.sqlite"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(IRKIT + ["sweep", str(spec), "--store", str(store)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 240
    done_before = 0
    while time.time() < deadline:
        if store.exists():
            try:
                with Store(store, create=False) as st:
                    done_before = st.count()
            except Exception:  # noqa: BLE001 - the store may be mid-creation
                done_before = 0
        if done_before >= 5:
            break
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the sweep finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    with Store(store, create=False) as st:
        finished = {r.key for r in st.rows()}
    total = len(load_spec(spec).tasks())
    assert 5 <= len(finished) < total
    r = subprocess.run(IRKIT + ["sweep", str(spec), "--store", str(store)], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(finished)} already in the store, {total - len(finished)} to run" in r.stderr
    with Store(store, create=False) as st:
        assert st.count() == total
        # the results stored before the kill were not run again: one attempt each
        for a in st.attempts():
            if a["key"] in finished:
                assert a["attempt"] == 1


FAULTS = '''
"""Factories that misbehave, for the fault tests."""
import os, signal, time


def crash():
    os.kill(os.getpid(), signal.SIGKILL)


def hang():
    time.sleep(600)
'''


@pytest.mark.slow
def test_crash_and_hang_are_recorded_and_retried(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "faults.py").write_text(FAULTS)
    spec = _spec(tmp_path, f"""
        models = ["{BLOCK}", "faults.py:crash", "faults.py:hang"]
        targets = ["reference"]
        measurements = ["check"]
        timeout = 5
        retries = 1
        """)
    store = tmp_path / "s.sqlite"
    assert main(["sweep", str(spec), "--store", str(store), "--jobs", "2"]) == 1
    out = capsys.readouterr().out
    assert "1 ok, 0 failed" in out
    assert "build failed: faults.py:crash [auto]: worker process" in out and "died (signal 9)" in out
    assert "build failed: faults.py:hang [auto]: timed out after 5 s" in out
    with Store(store, create=False) as st:
        att = st.attempts()
        assert sorted(a["status"] for a in att if a["key"].startswith("build:")) == ["lost", "lost", "timeout",
                                                                                     "timeout"]
        assert [r.status for r in st.rows()] == ["ok"]


def test_merge_and_compare_commits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _spec(tmp_path, SMALL.replace('targets = ["reference", "ort"]', 'targets = ["reference"]'), "a.toml")
    b = _spec(tmp_path, SMALL.replace('targets = ["reference", "ort"]', 'targets = ["ort", "reference"]'), "b.toml")
    assert main(["sweep", str(a), "--store", str(tmp_path / "a.sqlite")]) == 0
    # the second store is another machine's copy of the first plus the ort results
    import shutil

    with Store(tmp_path / "a.sqlite", create=False) as st:
        st.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(tmp_path / "a.sqlite", tmp_path / "b.sqlite")
    assert main(["sweep", str(b), "--store", str(tmp_path / "b.sqlite")]) == 0
    capsys.readouterr()
    ra, rb = _results(tmp_path / "a.sqlite"), _results(tmp_path / "b.sqlite")
    assert len(ra) == 12 and len(rb) == 16
    out = tmp_path / "m" / "c.sqlite"
    assert main(["results", "merge", str(tmp_path / "a.sqlite"), str(tmp_path / "b.sqlite"), "-o", str(out)]) == 0
    assert "16 results" in capsys.readouterr().out
    assert _results(out) == {**ra, **rb}
    # yesterday's commit: the same results under another commit, one check now failing
    with Store(out, create=False) as st:
        rows = st.rows()
        for r in rows:
            old = ResultRow(**{**r.as_dict(), "commit_id": "0" * 40,
                               "versions": {**r.versions, "irkit-commit": "0" * 40}, "key": "old-" + r.key})
            if r.measurement == "check" and r.target == "ort" and r.bindings == {"B": 2, "S": 8} \
                    and not r.pipeline:
                old.result = {**old.result, "ok": False}
            st.put(old)
    now = rows[0].commit_id
    assert main(["results", "query", str(out), "--compare", "0000", now[:12], "--json"]) == 0
    import json

    rep = json.loads(capsys.readouterr().out)
    assert rep["matched"] == 16 and rep["only_a"] == rep["only_b"] == 0
    assert [c["change"] for c in rep["changes"]] == ["check MISMATCH -> OK"]
    assert main(["results", "query", str(out), "--where", "colour=red"]) == 1
    assert "'colour': no such column" in capsys.readouterr().err


def test_ray_missing_says_how_to_install(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    spec = _spec(tmp_path, SMALL)
    assert main(["sweep", str(spec), "--store", str(tmp_path / "s.sqlite"), "--ray"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "irkit: error: --ray needs Ray: pip install 'irkit[ray]' (ray 2.60.0)"


def test_pool_workers_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """N workers get cores // N library threads each; a variable the user set is kept."""
    from irkit.targets.ort import OrtTarget

    from irkit.sweep import executors

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    assert executors.worker_threads(1) == 0
    assert executors.worker_threads(2) == max(1, cores // 2)
    assert executors.LocalPool(2).worker_args == (max(1, cores // 2),)
    for k in executors.thread_env(1):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")
    executors._limit_threads(1)
    assert os.environ["OMP_NUM_THREADS"] == "3"
    assert os.environ["TVM_NUM_THREADS"] == "1"
    assert os.environ["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads=1"
    assert OrtTarget().threads == 1
    monkeypatch.delenv("IRKIT_ORT_THREADS")
    assert OrtTarget().threads == 0
