"""Executors: where a sweep's jobs run.

Design note: an executor takes jobs (plain dicts for :func:`irkit.sweep.work.execute`)
and reports one outcome per attempt through a callback; the callback may hand
back the job to try again (the driver decides retries), or a list of new jobs (the
measurements of a model whose build just finished: a sweep streams, with no barrier
between its builds and its measurements).  Outcomes have a
``status``: ``ok``, ``failed`` (the job raised), ``unavailable``, ``timeout``
(killed past its deadline) or ``lost`` (its worker died).  Three executors:

- :class:`InProcess`: one job after another in this process; a timeout is a
  SIGALRM (it interrupts Python code, not a hung C call).
- :class:`LocalPool`: N spawned worker processes, each kept warm across jobs.
  ``concurrent.futures.ProcessPoolExecutor`` cannot kill one hung task and a
  dead worker breaks the whole pool, so the pool is a small loop over
  ``multiprocessing`` pipes: a job past its deadline has its worker killed and
  replaced, a worker that dies is replaced, the others carry on.
- :class:`RayExecutor`: the same jobs as Ray tasks.  Builds need a CPU;
  measurements run on nodes with the target's hardware (``GPU``, ``TPU``, or
  the custom resource naming the host CPU model), and a timing job takes that
  resource's single unit, so one timing job runs per machine at a time.

In every executor at most one timing job (``bench``, ``generate``) runs per machine at a time.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from irkit.errors import IrkitError

from . import work


@dataclass
class Job:
    """One unit of work and how it must be scheduled."""

    id: str
    payload: dict[str, Any]
    timing: bool = False
    hardware: str = "cpu"
    """``cpu``, ``gpu`` or ``tpu``: what the target runs on."""
    tries: int = 0
    info: dict[str, Any] = field(default_factory=dict)


OnResult = Callable[[Job, dict[str, Any]], "Job | list[Job] | None"]


def _requeue(queue: deque[Job], again: Job | list[Job] | None) -> None:
    if isinstance(again, Job):
        queue.append(again)
    elif again:
        queue.extend(again)


class Executor:
    """Runs jobs; :meth:`run` returns when every job (and every retry) has an outcome."""

    name = "executor"
    workers = 1

    def run(self, jobs: list[Job], timeout: float, on_result: OnResult) -> None:
        raise NotImplementedError

    def warm(self, modules: Sequence[str]) -> None:
        """The libraries the coming jobs import (``tvm``, ``jax``...): pool workers import them in
        the background from their start, so that the imports fill the time a worker would
        otherwise wait (the driver planning, the builds) instead of delaying its first job
        of each kind.  Call before :meth:`run`; the in-process executor ignores it."""

    def close(self) -> None:
        pass


class _Timeout(Exception):
    pass


class InProcess(Executor):
    """One job after another in this process."""

    name = "in-process"

    def run(self, jobs: list[Job], timeout: float, on_result: OnResult) -> None:
        queue = deque(jobs)
        use_alarm = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGALRM")
        while queue:
            job = queue.popleft()
            job.tries += 1
            if use_alarm:
                def _alarm(signum: int, frame: Any) -> None:
                    raise _Timeout()

                old = signal.signal(signal.SIGALRM, _alarm)
                signal.setitimer(signal.ITIMER_REAL, timeout)
            t0 = time.perf_counter()
            try:
                out = work.execute(job.payload)
            except _Timeout:
                out = {"status": "timeout", "result": {}, "error": f"timed out after {timeout:g} s",
                       "seconds": time.perf_counter() - t0, "worker": work.worker_name()}
            finally:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                    signal.signal(signal.SIGALRM, old)
            _requeue(queue, on_result(job, out))


def thread_env(threads: int) -> dict[str, str]:
    """The environment that holds every library a job uses to ``threads`` threads.

    N workers on a C-core machine each get C // N threads: left at their defaults, the
    BLAS, TVM, XLA and onnxruntime thread pools of every worker would each start one
    thread per core, and two workers on two cores then spend their time descheduling each
    other.  torch reads ``OMP_NUM_THREADS``; irkit's ort target reads ``IRKIT_ORT_THREADS``.
    """
    n = str(threads)
    eigen = "false" if threads == 1 else "true"
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n, "TVM_NUM_THREADS": n,
            "IRKIT_ORT_THREADS": n,
            "XLA_FLAGS": f"--xla_cpu_multi_thread_eigen={eigen} intra_op_parallelism_threads={n}"}


def _limit_threads(threads: int) -> None:
    """Apply :func:`thread_env` to this process before any library starts its pool; a
    variable the user set is kept (an ``XLA_FLAGS`` of theirs gets ours appended only
    for the flags it does not name)."""
    for k, v in thread_env(threads).items():
        have = os.environ.get(k)
        if have is None:
            os.environ[k] = v
        elif k == "XLA_FLAGS":
            extra = [f for f in v.split() if f.split("=")[0] not in have]
            os.environ[k] = " ".join([have, *extra])


def worker_threads(workers: int) -> int:
    """Threads per worker when ``workers`` share this machine (0: leave the libraries' defaults)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 0 if workers <= 1 else max(1, cores // workers)


def _import_all(modules: Sequence[str]) -> None:
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing library is the job's to report, not the warm-up's
            pass


def _worker_main(conn: Any, threads: int = 0, warm: Sequence[str] = ()) -> None:
    """A pool worker: receive a job, send its outcome, until told to stop (None)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver handles ^C and stops us
    if threads:
        _limit_threads(threads)
    if warm:  # a job that needs a module being imported waits on Python's import lock for it
        threading.Thread(target=_import_all, args=(tuple(warm),), name="warm-imports", daemon=True).start()
    # Deadlines start once the worker is up: import what every job needs first (seconds on a
    # loaded machine), so a task's timeout is not spent on the interpreter's start.
    import irkit.interp
    import irkit.passmanager
    import irkit.text.io  # noqa: F401

    serve_jobs(conn, work.execute)


def serve_jobs(conn: Any, execute: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """A pool worker's loop: say ready, then run each payload received and send its outcome, until None.

    Every worker of a :class:`LocalPool` ends its set-up with this loop (the sweep's
    and the zoo's, each with its own ``execute``).
    """
    conn.send("ready")
    while True:
        try:
            payload = conn.recv()
        except (EOFError, OSError):
            return
        if payload is None:
            return
        conn.send(execute(payload))


class _Worker:
    def __init__(self, ctx: Any, main: Callable[..., None] | None = None, args: tuple = ()):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=main or _worker_main, args=(child, *args), daemon=True)
        self.proc.start()
        child.close()
        self.job: Job | None = None
        self.ready = False
        self.deadline = 0.0
        self.started = 0.0

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()


class LocalPool(Executor):
    """``n`` spawned worker processes on this machine."""

    name = "local-pool"

    def __init__(self, n: int, worker_main: Callable[..., None] | None = None, worker_args: tuple = ()):
        """``worker_main(conn, *worker_args)`` runs in each worker (picklable: a module-level function;
        default: the sweep's worker); it ends with :func:`serve_jobs`."""
        if n < 1:
            raise IrkitError(f"--jobs {n}: the number of worker processes must be at least 1")
        self.workers = n
        self.ctx = mp.get_context("spawn")
        self.pool: list[_Worker] = []
        self.worker_main = worker_main
        # the sweep's own workers share the cores (see thread_env); a caller's worker_main does its own
        self.worker_args = worker_args if worker_main is not None else (worker_threads(n),)

    def warm(self, modules: Sequence[str]) -> None:
        # one worker has no idle time to fill: its imports would only compete with its first job
        if self.worker_main is None and self.workers > 1:
            self.worker_args = (self.worker_args[0], tuple(modules))

    def _start(self) -> _Worker:
        return _Worker(self.ctx, self.worker_main, self.worker_args)

    def run(self, jobs: list[Job], timeout: float, on_result: OnResult) -> None:
        from multiprocessing.connection import wait

        queue: deque[Job] = deque(jobs)
        while len(self.pool) < self.workers:
            self.pool.append(self._start())
        early_deaths = 0

        def finish(job: Job, out: dict[str, Any]) -> None:
            _requeue(queue, on_result(job, out))

        while queue or any(w.job for w in self.pool):
            timing_busy = any(w.job is not None and w.job.timing for w in self.pool)
            for w in self.pool:
                if w.job is not None or not w.ready or not queue:
                    continue
                # Hand out the first job that may run now: one timing job per machine at a time.
                pick = next((j for j in queue if not (j.timing and timing_busy)), None)
                if pick is None:
                    break
                queue.remove(pick)
                pick.tries += 1
                w.job, w.started, w.deadline = pick, time.monotonic(), time.monotonic() + timeout
                timing_busy = timing_busy or pick.timing
                w.conn.send(pick.payload)
            watched = [w for w in self.pool if w.job is not None or not w.ready]
            busy = [w for w in watched if w.job is not None]
            wait_for = max(0.0, min(w.deadline for w in busy) - time.monotonic()) if busy else 1.0
            ready = wait([x for w in watched for x in (w.conn, w.proc.sentinel)], timeout=min(wait_for, 1.0) + 0.01)
            now = time.monotonic()
            for i, w in enumerate(list(self.pool)):
                out = None
                if w.conn in ready:
                    try:
                        msg = w.conn.recv()
                    except (EOFError, OSError):
                        msg = None
                    if msg == "ready":
                        w.ready = True
                        continue
                    if msg is not None and w.job is not None:
                        job, w.job = w.job, None
                        finish(job, msg)
                        continue
                dead = w.conn in ready or w.proc.sentinel in ready or not w.proc.is_alive()
                if dead:
                    w.proc.join(5)
                    code = w.proc.exitcode
                    why = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                    if w.job is None:
                        early_deaths += 1
                        if early_deaths > 3 * self.workers:
                            raise IrkitError(f"sweep worker processes die as they start ({why}); run with "
                                             "IRKIT_TRACEBACK=1 and without --jobs to see why")
                    else:
                        out = {"status": "lost", "result": {}, "error": f"worker process {w.proc.pid} died ({why})",
                               "seconds": now - w.started, "worker": f"pid {w.proc.pid}"}
                elif w.job is not None and now > w.deadline:
                    out = {"status": "timeout", "result": {}, "error": f"timed out after {timeout:g} s; worker "
                           f"{w.proc.pid} killed", "seconds": now - w.started, "worker": f"pid {w.proc.pid}"}
                else:
                    continue
                stopped = w.job
                w.kill()
                self.pool[i] = self._start()
                if stopped is not None and out is not None:
                    finish(stopped, out)

    def close(self) -> None:
        for w in self.pool:
            try:
                w.conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        for w in self.pool:
            w.proc.join(5)
            w.kill()
        self.pool = []


RAY_INSTALL = "--ray needs Ray: pip install 'irkit[ray]' (ray 2.60.0)"


def ray_resources() -> dict[str, float]:
    """The custom resources a node of this machine offers: one unit naming its CPU model
    (``ray start --resources='{"cpu-...": 1}'``, or ``ray.init(resources=ray_resources())``)."""
    return {work.machine_resource(): 1.0}


class RayExecutor(Executor):
    """Jobs as Ray tasks on a local or remote cluster."""

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise IrkitError(RAY_INSTALL) from None
        self.ray = ray
        address = address or os.environ.get("RAY_ADDRESS") or None
        if not ray.is_initialized():
            # every task asks for one CPU: its libraries get one thread (see thread_env)
            env: dict[str, Any] = {"env_vars": {k: v for k, v in thread_env(1).items() if k not in os.environ}}
            if address:
                ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False, runtime_env=env)
            else:
                ray.init(num_cpus=num_cpus or os.cpu_count(), resources=ray_resources(), include_dashboard=False,
                         logging_level=logging.ERROR, log_to_driver=False, runtime_env=env)
            self.owns = True
        else:
            self.owns = False
        self.resource = work.machine_resource()
        total = ray.cluster_resources()
        self.workers = int(total.get("CPU", 1))
        self.available = {k for k, v in total.items() if v > 0}
        self.remote = ray.remote(max_retries=0)(work.execute)

    def _options(self, job: Job) -> dict[str, Any]:
        opts: dict[str, Any] = {"num_cpus": 1}
        res: dict[str, float] = {}
        if job.hardware == "gpu":
            opts["num_gpus"] = 1
        elif job.hardware == "tpu":
            res["TPU"] = 1
        elif job.payload.get("kind") == "measure" and job.timing:
            res[self.resource] = 1  # one timing task per machine of this CPU model
        for r in res:
            if r not in self.available:
                raise IrkitError(f"no node of the Ray cluster offers resource '{r}' (needed by {job.id}); start the "
                                 f"nodes that should run it with `ray start --resources='{{\"{r}\": 1}}'`")
        if job.hardware == "gpu" and "GPU" not in self.available:
            raise IrkitError(f"no node of the Ray cluster has a GPU (needed by {job.id})")
        if res:
            opts["resources"] = res
        return opts

    def run(self, jobs: list[Job], timeout: float, on_result: OnResult) -> None:
        ray = self.ray
        queue: deque[Job] = deque(jobs)
        pending: dict[Any, tuple[Job, float]] = {}
        # Only as many tasks in flight as the cluster can run at once (timing tasks: as many as
        # machines offer the timing resource), so a deadline counted from submission is one
        # counted from the start, not from a wait in Ray's queue.
        timing_slots = max(1, int(ray.cluster_resources().get(self.resource, 1)))

        def fill() -> None:
            while queue and len(pending) < self.workers:
                timing = sum(1 for j, _ in pending.values() if j.timing)
                pick = next((j for j in queue if not (j.timing and timing >= timing_slots)), None)
                if pick is None:
                    return
                queue.remove(pick)
                pick.tries += 1
                ref = self.remote.options(**self._options(pick)).remote(pick.payload)
                pending[ref] = (pick, time.monotonic())

        def done(job: Job, out: dict[str, Any]) -> None:
            _requeue(queue, on_result(job, out))

        fill()
        while pending or queue:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            now = time.monotonic()
            for ref in ready:
                job, t0 = pending.pop(ref)
                try:
                    out = ray.get(ref)
                except ray.exceptions.TaskCancelledError:
                    out = {"status": "timeout", "result": {}, "error": f"timed out after {timeout:g} s; task cancelled",
                           "seconds": now - t0, "worker": "ray"}
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                        ray.exceptions.RayTaskError, ray.exceptions.RaySystemError,
                        ray.exceptions.ObjectLostError) as e:
                    first = " ".join(str(e).split())[:300]
                    out = {"status": "lost", "result": {}, "error": f"Ray worker lost ({type(e).__name__}: {first})",
                           "seconds": now - t0, "worker": "ray"}
                done(job, out)
            for ref, (job, t0) in list(pending.items()):
                if now - t0 > timeout:
                    ray.cancel(ref, force=True)
                    pending.pop(ref)
                    done(job, {"status": "timeout", "result": {}, "error": f"timed out after {timeout:g} s; task "
                               "cancelled", "seconds": now - t0, "worker": "ray"})
            fill()

    def close(self) -> None:
        if self.owns:
            self.ray.shutdown()


def make_executor(jobs: int | None, ray: str | bool | None) -> Executor:
    """The executor for ``--jobs N`` / ``--ray [ADDRESS]`` (in-process when neither)."""
    if ray:
        return RayExecutor(ray if isinstance(ray, str) else None, num_cpus=jobs)
    if jobs and jobs > 1:
        return LocalPool(jobs)
    if jobs == 1:
        return LocalPool(1)
    return InProcess()


__all__ = [
    "RAY_INSTALL",
    "Executor",
    "InProcess",
    "Job",
    "LocalPool",
    "RayExecutor",
    "make_executor",
    "ray_resources",
]
