"""Run a sweep: build the models, key every task, run what the store lacks, store each attempt.

Design note: the driver is the only writer of results (workers return plain
dicts), so "each result exactly once" is the store's primary key, whatever the
executor does.  Builds (model imports) are cached in the store by the content
of their source, so a resumed sweep neither re-imports nor re-measures.  A job
that times out or loses its worker is retried up to the spec's ``retries``; a
job that raised is recorded failed and not retried in this run (the same code
on the same input fails the same way), but a later run tries it again.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import work
from .executors import Executor, Job
from .spec import SweepSpec, Task, is_factory
from .store import ResultRow, Store

DONE = ("ok", "unavailable")
DEFAULT_SECONDS = {"build": 10.0, "estimate": 1.0, "check": 4.0, "bench": 6.0, "generate": 15.0}
"""Per-kind time guesses for ``--dry-run`` when the store has no past durations."""


@dataclass
class Planned:
    """A task with its key and the job that runs it."""

    task: Task
    key: str
    ir_hash: str
    bindings: dict[str, int]
    job: Job


@dataclass
class Summary:
    """What a sweep did."""

    tasks: int = 0
    in_store: int = 0
    to_run: int = 0
    ok: int = 0
    failed: int = 0
    unavailable: int = 0
    retries: int = 0
    build_failures: list[str] = field(default_factory=list)
    blocked: int = 0
    """Tasks not run because their model failed to build."""
    wall_seconds: float = 0.0
    keys: list[str] = field(default_factory=list)
    estimate_seconds: float | None = None
    estimated_from_past: int = 0
    """Tasks whose time guess came from past durations in the store (the rest: per-kind defaults)."""
    estimated_by_default: int = 0


def target_hardware(target: str) -> str:
    """``cpu``, ``gpu`` or ``tpu``: what a target's runs need (an estimate needs only a CPU)."""
    from irkit.targets.hwspec import list_specs, load_spec

    if target in list_specs():
        return "cpu"
    from irkit.targets.registry import get_target

    spec = get_target(target).spec
    if not spec:
        return "cpu"
    kind = str(getattr(load_spec(spec), "kind", "cpu")).lower()
    return "gpu" if "gpu" in kind or "simt" in kind else "tpu" if "tpu" in kind or "systolic" in kind else "cpu"


BuildId = tuple[str, str, str]
"""(source, build frontend, build options as JSON) of a task's model."""


def build_of(t: Task) -> BuildId:
    """What a task's model is built from: a ``generate`` task of a zoo or factory model gets the
    model's decode function (exported for its ``[generate]`` batch and cache length), the others
    the import of the source with the task's frontend."""
    if t.measurement == "generate" and (t.source.startswith("zoo:") or is_factory(t.source)):
        p = dict(t.params)
        opts = {"batch": p.get("batch", 1), "max_cache_len": p.get("max_cache_len", 0), "seed": p.get("seed", 0)}
        return t.source, work.DECODE, json.dumps(opts, sort_keys=True)
    return t.source, t.frontend, ""


class Sweep:
    """One sweep over one store with one executor."""

    def __init__(self, spec: SweepSpec, store: Store, executor: Executor,
                 log: Callable[[str], None] | None = None):
        self.spec = spec
        self.store = store
        self.executor = executor
        self.log = log or (lambda s: print(s, file=sys.stderr, flush=True))
        self.versions = work.versions()
        self.machine = work.machine()
        self.commit = work.commit_id()
        self._hw: dict[str, str] = {}
        self._bind_cache: dict[tuple[str, tuple[tuple[str, int], ...]], dict[str, int]] = {}

    # -- builds ----------------------------------------------------------------

    def _build_jobs(self, tasks: list[Task]) -> tuple[dict[BuildId, tuple[str, str]], list[Job]]:
        """The builds in the store (:func:`build_of` -> ``(ir_hash, ir_text)``) and a job for each missing one."""
        pairs: dict[BuildId, str] = {}
        for t in tasks:
            pairs.setdefault(build_of(t), t.model)
        have: dict[BuildId, tuple[str, str]] = {}
        missing: list[Job] = []
        for (src, fe, opts), model in pairs.items():
            options = json.loads(opts) if opts else None
            bkey = work.build_key(src, fe, options)
            got = self.store.get_build(bkey)
            if got:
                have[(src, fe, opts)] = got
            else:
                missing.append(Job(f"build {model} [{fe}]", {"kind": "build", "source": src, "frontend": fe,
                                                            "options": options},
                                   info={"bkey": bkey, "model": model, "pair": (src, fe, opts)}))
        return have, missing

    def _on_build(self, job: Job, out: dict[str, Any], have: dict[BuildId, tuple[str, str]],
                  summary: Summary) -> str:
        """Store a build's outcome; ``ok``, ``retry`` or ``failed``."""
        info = job.info
        if out["status"] == "ok":
            r = out["result"]
            self.store.put_build(info["bkey"], info["model"], job.payload["frontend"], r["ir_hash"], r["ir_text"],
                                 r["seconds"])
            have[info["pair"]] = (r["ir_hash"], r["ir_text"])
            self.log(f"  built {info['model']} [{job.payload['frontend']}] in {out['seconds']:.1f} s")
            return "ok"
        self.store.record_attempt("build:" + info["bkey"], out["status"], out["error"], out["seconds"],
                                  out["worker"])
        if out["status"] in ("timeout", "lost") and job.tries <= self.spec.retries:
            summary.retries += 1
            return "retry"
        summary.build_failures.append(f"{info['model']} [{job.payload['frontend']}]: {out['error']}")
        self.log(f"  build FAILED {info['model']} [{job.payload['frontend']}]: {out['error']}")
        return "failed"

    # -- planning --------------------------------------------------------------

    def _hardware(self, target: str, measurement: str) -> str:
        if measurement == "estimate":
            return "cpu"
        if target not in self._hw:
            try:
                self._hw[target] = target_hardware(target)
            except Exception:  # noqa: BLE001 - an unknown target fails in its task, with its message
                self._hw[target] = "cpu"
        return self._hw[target]

    def _bindings(self, ir_hash: str, ir_text: str, shape: tuple[tuple[str, int], ...]) -> dict[str, int]:
        k = (ir_hash, shape)
        if k not in self._bind_cache:
            self._bind_cache[k] = work.effective_bindings(ir_text, dict(shape))
        return self._bind_cache[k]

    def plan(self, tasks: list[Task], builds: dict[BuildId, tuple[str, str]]) -> tuple[list[Planned], int]:
        """Keyed tasks (duplicates by key dropped) and the count of tasks whose build is missing."""
        out: dict[str, Planned] = {}
        blocked = 0
        for t in tasks:
            b = builds.get(build_of(t))
            if b is None:
                blocked += 1
                continue
            ir_hash, ir_text = b
            # Generation binds the token count itself (1 per decode step, the prompt for prefill).
            bind = {} if t.measurement == "generate" else self._bindings(ir_hash, ir_text, t.bindings)
            params = dict(t.params)
            mach = self.machine if work.measures_hardware(t.measurement) else {}
            key = work.task_key(ir_hash, t.full_pipeline, t.target, t.options, bind, t.measurement, params,
                                self.versions, mach)
            if key in out:
                continue
            job = Job(t.label(), {"kind": "measure", "ir_text": ir_text, "pipeline": t.full_pipeline,
                                  "target": t.target, "measurement": t.measurement, "bindings": bind,
                                  "params": params, "options": t.options},
                      timing=work.is_timing(t.measurement), hardware=self._hardware(t.target, t.measurement),
                      info={"key": key})
            out[key] = Planned(t, key, ir_hash, bind, job)
        return list(out.values()), blocked

    # -- estimates -------------------------------------------------------------

    def estimate_seconds(self, planned: list[Planned], unbuilt: list[Task], n_builds: int) -> tuple[float, int, int]:
        """Wall-time guess for running ``planned`` and the tasks whose model is not built yet:
        (seconds, tasks estimated from past durations, tasks from defaults)."""
        past: dict[tuple[str, str], list[float]] = {}
        by_kind: dict[str, list[float]] = {}
        for meas, tgt, sec in self.store.durations():
            past.setdefault((meas, tgt), []).append(sec)
            by_kind.setdefault(meas, []).append(sec)
        total = n_builds * DEFAULT_SECONDS["build"]
        timing = 0.0
        from_past = from_default = 0
        for meas, tgt in [(p.task.measurement, p.task.target) for p in planned] + \
                         [(t.measurement, t.target) for t in unbuilt]:
            if (meas, tgt) in past:
                s = statistics.median(past[(meas, tgt)])
                from_past += 1
            elif meas in by_kind:
                s = statistics.median(by_kind[meas])
                from_past += 1
            else:
                s = DEFAULT_SECONDS[meas]
                from_default += 1
            total += s
            if work.is_timing(meas):
                timing += s
        workers = max(1, self.executor.workers)
        # Timing tasks run one at a time per machine; the rest spread over the workers.
        return max(total / workers, timing), from_past, from_default

    # -- run -------------------------------------------------------------------

    def validate(self) -> None:
        """Every target and pipeline of the spec exists (one line naming the spec otherwise)."""
        from irkit.errors import InputError, IrkitError
        from irkit.passmanager import PassManager
        from irkit.targets.hwspec import list_specs
        from irkit.targets.registry import TARGETS, load_targets

        load_targets()
        specs = list_specs()
        for t in self.spec.targets + self.spec.hardware:
            if t not in TARGETS and t not in specs:
                raise InputError(f"{self.spec.path}: unknown target '{t}'; targets: {', '.join(sorted(TARGETS))}; "
                                 f"hardware (estimate only): {', '.join(specs)}")
        for p in {t.full_pipeline for t in self.spec.tasks()}:
            if p:
                try:
                    PassManager(p)
                except (IrkitError, ValueError) as e:
                    raise InputError(f"{self.spec.path}: pipeline '{p}': {e}") from None

    def run(self, dry_run: bool = False) -> Summary:
        """Build what the store lacks and run every task it lacks.  The two stream: a model's
        measurements join the queue as soon as its build is stored, so the workers never
        wait for the slowest build (a torch.export) before measuring the models that are ready."""
        t0 = time.perf_counter()
        s = Summary()
        self.validate()
        tasks = self.spec.tasks()
        s.tasks = len(tasks)
        have, missing = self._build_jobs(tasks)
        if dry_run:
            planned, blocked = self.plan(tasks, have)
            s.keys = [p.key for p in planned]
            status = self.store.status_of(s.keys)
            todo = [p for p in planned if status.get(p.key) not in DONE]
            s.in_store = len(planned) - len(todo)
            unbuilt = [t for t in tasks if build_of(t) not in have]
            n_builds = len({build_of(t) for t in unbuilt})
            s.to_run = len(todo) + len(unbuilt)
            s.estimate_seconds, s.estimated_from_past, s.estimated_by_default = self.estimate_seconds(
                todo, unbuilt, n_builds)
            return s
        self.executor.warm(work.warm_modules({t.target for t in tasks}, {t.model for t in tasks}))
        by_build: dict[BuildId, list[Task]] = {}
        for t in tasks:
            by_build.setdefault(build_of(t), []).append(t)
        seen: set[str] = set()
        by_job: dict[int, Planned] = {}
        counts = {"prev_failed": 0, "done": 0}

        def admit(ts: list[Task]) -> list[Job]:
            """Key the tasks of built models; the jobs of those the store lacks."""
            planned, _ = self.plan(ts, have)
            planned = [p for p in planned if p.key not in seen]
            seen.update(p.key for p in planned)
            s.keys.extend(p.key for p in planned)
            status = self.store.status_of([p.key for p in planned])
            todo = [p for p in planned if status.get(p.key) not in DONE]
            s.in_store += len(planned) - len(todo)
            s.to_run += len(todo)
            counts["prev_failed"] += sum(1 for p in todo if status.get(p.key) == "failed")
            for p in todo:
                by_job[id(p.job)] = p
            return [p.job for p in todo]

        first = admit([t for b, ts in by_build.items() if b in have for t in ts])
        waiting = sum(len(by_build[j.info["pair"]]) for j in missing)
        if missing:
            self.log(f"building {len(missing)} model(s) ({len(by_build) - len(missing)} cached in the store); "
                     "their tasks join the queue as each build is stored")
        self.log(f"{self.spec.name}: {s.tasks} tasks; {s.in_store} already in the store, {s.to_run} to run"
                 + (f" ({counts['prev_failed']} failed before)" if counts["prev_failed"] else "")
                 + (f", {waiting} waiting for their builds" if waiting else "")
                 + f"; executor {self.executor.name} x{self.executor.workers}")

        def on_result(job: Job, out: dict[str, Any]) -> Job | list[Job] | None:
            if job.payload.get("kind") == "build":
                verdict = self._on_build(job, out, have, s)
                if verdict == "retry":
                    return job
                if verdict == "failed":
                    s.blocked += len(by_build[job.info["pair"]])
                    return None
                return admit(by_build[job.info["pair"]])
            p = by_job[id(job)]
            st = out["status"]
            row_status = "ok" if st == "ok" else "unavailable" if st == "unavailable" else "failed"
            t = p.task
            row = ResultRow(key=p.key, status=row_status, model=t.model, frontend=t.frontend, ir_hash=p.ir_hash,
                            pipeline=t.full_pipeline, target=t.target, options=t.options, bindings=p.bindings,
                            measurement=t.measurement, params=dict(t.params), versions=self.versions,
                            machine=self.machine if work.measures_hardware(t.measurement) else {},
                            commit_id=self.commit, sweep=self.spec.name, result=out["result"], error=out["error"],
                            duration=out["seconds"], worker=out["worker"], finished=time.time())
            self.store.put(row, attempt_status=st)
            retry = st in ("timeout", "lost") and job.tries <= self.spec.retries
            if retry:
                s.retries += 1
                self.log(f"  {st.upper()} (attempt {job.tries}, retrying) {job.id}: {out['error']}")
                return job
            counts["done"] += 1
            if row_status == "ok":
                s.ok += 1
            elif row_status == "unavailable":
                s.unavailable += 1
            else:
                s.failed += 1
            note = "" if st == "ok" else f": {out['error']}"
            self.log(f"  [{counts['done']}/{s.to_run}] {row_status:<11} {out['seconds']:6.2f} s  {job.id}{note}")
            return None

        if missing or first:
            self.executor.run(missing + first, self.spec.timeout, on_result)
        dupes = len(tasks) - len(s.keys) - s.blocked
        if dupes > 0:
            self.log(f"  ({dupes} duplicate task(s) by content key ran once)")
        s.wall_seconds = time.perf_counter() - t0
        return s

__all__ = ["DEFAULT_SECONDS", "BuildId", "Planned", "Summary", "Sweep", "build_of", "target_hardware"]
