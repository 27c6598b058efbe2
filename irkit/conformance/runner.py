"""Running a suite's cases: in this process, or isolated in a pool of worker processes.

Design note: a case must never stop the run.  In-process (``jobs=0``) every case
runs under a catch-all, so an exception becomes a ``crash`` row for that case.
With ``jobs=N`` each case runs in one of N worker processes (``spawn``, so no
torch/JAX/TVM state is forked); the parent gives each case ``timeout`` seconds,
kills a worker that overruns or dies (a segfault in a compiler) and records the
case as ``crash`` with the reason, then starts a fresh worker.  Workers are
recycled every ``RECYCLE_AFTER`` cases, or when their resident memory passes
``RSS_LIMIT_MB``, so peak memory stays small however long the run.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from irkit.conformance.results import CaseResult, SuiteResult, all_rows, crash_line

SUITES = {"onnx": "irkit.conformance.onnx_suite", "torch": "irkit.conformance.torch_suite",
          "jax": "irkit.conformance.jax_suite"}
RECYCLE_AFTER = 150
RSS_LIMIT_MB = 3000


@dataclass
class Case:
    """One conformance case: a stable id, its op group, and what a worker needs to rebuild it (picklable)."""

    id: str
    group: str
    payload: Any = None
    skip: str = ""
    """Non-empty: the case is out of scope, and why (decided while collecting)."""


@dataclass
class Plan:
    suite: str
    targets: list[str]
    peers: bool
    runners: list[str] = field(default_factory=list)


def suite_module(name: str) -> Any:
    if name not in SUITES:
        from irkit.errors import InputError

        raise InputError(f"unknown conformance suite '{name}' (expected one of {', '.join(SUITES)})")
    return importlib.import_module(SUITES[name])


def matches(filter: str, case_id: str, group: str) -> bool:
    """Whether a case passes ``filter``: comma-separated terms, any of which may match; a term matches
    a case id containing it or a group equal to it; ``=TERM`` only an equal id or group."""
    for term in (t.strip() for t in filter.split(",")):
        if not term:
            continue
        if term.startswith("="):
            if term[1:] in (case_id, group):
                return True
        elif term in case_id or term == group:
            return True
    return False


def select(cases: list[Case], filter: str | None, limit: int | None, sample: int | None) -> list[Case]:
    """``filter``: see :func:`matches`; ``sample``: N cases spread evenly over
    the (sorted) rest, deterministic; ``limit``: the first N."""
    out = cases
    if filter:
        out = [c for c in out if matches(filter, c.id, c.group)]
    if sample is not None and 0 < sample < len(out):
        step = len(out) / sample
        out = [out[int(i * step)] for i in range(sample)]
    if limit is not None:
        out = out[:max(limit, 0)]
    return out


def run_one(mod: Any, case: Case, plan: Plan) -> list[CaseResult]:
    """One case on every runner, never raising: an escaped exception is a crash row per runner."""
    if case.skip:
        return all_rows(case.id, case.group, plan.runners, "skip", case.skip)
    try:
        rows = mod.run_case(case, plan.targets, plan.peers)
    except Exception as e:  # noqa: BLE001 - isolation: one case never stops the run
        return all_rows(case.id, case.group, plan.runners, "crash", crash_line(e))
    have = {r.runner for r in rows}
    for r in plan.runners:  # a runner the case forgot is a bug in the suite, not a silent gap
        if r not in have:
            rows.append(CaseResult(case.id, case.group, r, "crash", "the suite produced no result for this runner"))
    return rows


def _rss_mb() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024.0 if sys.platform != "darwin" else r / 2**20


def _worker_env() -> None:
    # N workers share the machine: one thread each, and JAX on the CPU only.
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TVM_NUM_THREADS"):
        os.environ.setdefault(k, "1")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")


def _worker_main(conn: Any, plan: Plan) -> None:
    """A worker: receive a case, send back (rows, peak RSS MB), until told to stop (None).

    The compilers' own chatter (TVM's C++ warnings, ONNX Runtime's logs) goes to
    ``IRKIT_CONFORMANCE_LOG`` if set, else nowhere: what matters comes back as rows."""
    _worker_env()
    log = os.environ.get("IRKIT_CONFORMANCE_LOG") or os.devnull
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    import warnings

    warnings.simplefilter("ignore")
    mod = suite_module(plan.suite)
    prepare = getattr(mod, "prepare_worker", None)
    if prepare is not None:
        prepare()
    while True:
        try:
            case = conn.recv()
        except EOFError:
            return
        if case is None:
            return
        rows = run_one(mod, case, plan)
        conn.send((rows, _rss_mb()))


class _Worker:
    def __init__(self, ctx: Any, plan: Plan):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, plan), daemon=True)
        self.proc.start()
        child.close()
        self.case: Case | None = None
        self.started = 0.0
        self.done = 0

    def give(self, case: Case) -> None:
        self.case = case
        self.started = time.monotonic()
        self.conn.send(case)

    def stop(self, kill: bool = False) -> None:
        try:
            if kill:
                self.proc.kill()
            else:
                self.conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        self.conn.close()


def run_pool(cases: Sequence[Case], plan: Plan, jobs: int, timeout: float,
             progress: Callable[[int, int], None] | None = None,
             on_rows: Callable[[list[CaseResult]], None] | None = None) -> tuple[list[CaseResult], float]:
    """Run ``cases`` in ``jobs`` worker processes with a per-case ``timeout``; (rows, peak worker RSS MB)."""
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx = mp.get_context("spawn")
    todo = list(reversed(cases))
    rows: list[CaseResult] = []
    peak = 0.0
    n_done = 0
    # A worker's first case also pays for importing the framework (torch's OpInfo takes ~20 s).
    startup_grace = 120.0
    workers = [_Worker(ctx, plan) for _ in range(min(jobs, len(cases)) or 1)]
    try:
        for w in workers:
            if todo:
                w.give(todo.pop())
        while any(w.case is not None for w in workers):
            now = time.monotonic()
            busy = [w for w in workers if w.case is not None]
            limit = [w.started + timeout + (startup_grace if w.done == 0 else 0) - now for w in busy]
            ready = wait([w.conn for w in busy], timeout=max(0.05, min(limit)))
            for w in list(busy):
                case = w.case
                assert case is not None
                got: list[CaseResult] | None = None
                if w.conn in ready:
                    try:
                        got, rss = w.conn.recv()
                        peak = max(peak, rss)
                        w.done += 1
                        recycle = w.done >= RECYCLE_AFTER or rss > RSS_LIMIT_MB
                    except (EOFError, OSError):
                        code = w.proc.exitcode
                        w.proc.join(1)
                        code = w.proc.exitcode if code is None else code
                        got = all_rows(case.id, case.group, plan.runners, "crash",
                                       f"worker process died (exit code {code}) while running this case")
                        recycle = True
                elif time.monotonic() - w.started > timeout + (startup_grace if w.done == 0 else 0):
                    got = all_rows(case.id, case.group, plan.runners, "crash",
                                   f"timed out after {timeout:g} s (worker killed)")
                    recycle = True
                    w.stop(kill=True)
                if got is not None:
                    w.case = None
                    rows.extend(got)
                    if on_rows:
                        on_rows(got)
                    n_done += 1
                    if progress:
                        progress(n_done, len(cases))
                    if recycle:
                        w.stop()
                        i = workers.index(w)
                        workers[i] = w = _Worker(ctx, plan)
                    if todo:
                        w.give(todo.pop())
    finally:
        for w in workers:
            w.stop(kill=w.case is not None)
    return rows, peak


def versions() -> dict[str, str]:
    """Versions of the frameworks and compilers the suites touch (absent ones say so)."""
    out: dict[str, str] = {"python": platform.python_version()}
    import irkit

    out["irkit"] = irkit.__version__
    from importlib.metadata import PackageNotFoundError, version

    for dist, key in (("onnx", "onnx"), ("onnxruntime", "onnxruntime"), ("torch", "torch"), ("jax", "jax"),
                      ("jaxlib", "jaxlib"), ("apache-tvm", "tvm"), ("numpy", "numpy")):
        try:
            out[key] = version(dist)
        except PackageNotFoundError:
            out[key] = "not installed"
    return out


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} logical CPUs)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} logical CPUs)"


def run_suite(suite: str, targets: Sequence[str] = (), *, filter: str | None = None, limit: int | None = None,
              sample: int | None = None, peers: bool = False, jobs: int = 0, timeout: float = 300.0,
              progress: Callable[[int, int], None] | None = None,
              on_rows: Callable[[list[CaseResult]], None] | None = None) -> SuiteResult:
    """Run conformance suite ``suite`` (onnx, torch or jax) on the interpreter and ``targets``.

    ``filter`` keeps cases whose id contains one of the comma-separated
    substrings (or whose group equals one); ``sample`` keeps N cases spread
    evenly over them; ``limit`` the first N.  ``peers`` also runs the peer
    importers (TVM Relax's frontends).  ``jobs`` > 0 isolates every case in a
    pool of that many worker processes with a per-case ``timeout``; 0 runs in
    this process.  ``on_rows`` sees each case's rows as soon as they exist (to
    keep partial results of a long run).  Returns a :class:`SuiteResult` with one
    row per case and runner.
    """
    mod = suite_module(suite)
    t_start = time.time()
    tlist = [t for t in dict.fromkeys(targets) if t and t != "reference"]
    plan = Plan(suite, tlist, peers)
    plan.runners = list(mod.runner_names(tlist, peers))
    cases = select(mod.collect(filter), filter, limit, sample)
    if jobs and jobs > 0 and len(cases) > 1:
        rows, peak = run_pool(cases, plan, jobs, timeout, progress, on_rows)
    else:
        rows = []
        for i, c in enumerate(cases):
            got = run_one(mod, c, plan)
            rows.extend(got)
            if on_rows:
                on_rows(got)
            if progress:
                progress(i + 1, len(cases))
        peak = _rss_mb()
    order = {c.id: i for i, c in enumerate(cases)}
    rank = {r: i for i, r in enumerate(plan.runners)}
    rows.sort(key=lambda r: (order.get(r.case, 1 << 30), rank.get(r.runner, 1 << 30)))
    meta = {"cases": len(cases), "targets": tlist, "peers": peers, "filter": filter, "limit": limit,
            "sample": sample, "jobs": jobs, "timeout_s": timeout, "seconds": round(time.time() - t_start, 1),
            "peak_rss_mb": round(peak, 1), "versions": versions(), "cpu": cpu_name(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    meta.update(getattr(mod, "SCOPE_NOTE", None) and {"scope": mod.SCOPE_NOTE} or {})
    return SuiteResult(suite, plan.runners, rows, meta)


__all__ = [
    "SUITES",
    "Case",
    "Plan",
    "cpu_name",
    "run_one",
    "run_pool",
    "run_suite",
    "select",
    "suite_module",
    "versions",
]
