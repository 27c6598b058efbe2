"""``irkit sweep``: run an experiment matrix into a results store."""

from __future__ import annotations

import argparse
import os

from irkit.cli import args_for, command
from irkit.errors import InputError


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="sweep spec (TOML; see docs/sweeps.md)")
    p.add_argument("--store", help="results store (SQLite; default: SPEC's name with .sqlite, beside the spec)")
    p.add_argument("--jobs", type=int, help="N local worker processes (default: run in this process)")
    p.add_argument("--ray", nargs="?", const=True, default=None, metavar="ADDRESS",
                   help="run on a Ray cluster (ADDRESS, else RAY_ADDRESS, else a local one)")
    p.add_argument("--dry-run", action="store_true", help="print the task count and a time estimate; run nothing")
    p.add_argument("--report", metavar="DIR", help="write report.md, results.csv and plots into DIR")
    p.add_argument("--timeout", type=float, help="seconds per task (overrides the spec's 'timeout')")
    p.add_argument("--retries", type=int,
                   help="retries of a task that timed out or lost its worker (overrides the spec)")


def default_store(spec_path: str) -> str:
    base, _ = os.path.splitext(spec_path)
    return base + ".sqlite"


@command("sweep", "run a sweep (models x pipelines x targets x shapes) into a results store; resumes")
@args_for(_args)
def cmd_sweep(args: argparse.Namespace) -> int:
    from irkit.sweep.executors import make_executor
    from irkit.sweep.report import write_report
    from irkit.sweep.runner import Sweep
    from irkit.sweep.spec import load_spec
    from irkit.sweep.store import Store

    if args.jobs is not None and args.jobs < 1:
        raise InputError(f"--jobs {args.jobs}: give at least 1 worker process")
    spec = load_spec(args.spec)
    if args.timeout is not None:
        if args.timeout <= 0:
            raise InputError("--timeout: give a positive number of seconds")
        spec.timeout = args.timeout
    if args.retries is not None:
        if args.retries < 0:
            raise InputError("--retries: give 0 or more")
        spec.retries = args.retries
    ray = args.ray
    store = Store(args.store or default_store(args.spec))
    ex = make_executor(args.jobs, ray)
    try:
        s = Sweep(spec, store, ex).run(dry_run=args.dry_run)
        if args.dry_run:
            est = s.estimate_seconds or 0.0
            basis = (f"{s.estimated_from_past} from past durations in the store, "
                     f"{s.estimated_by_default} from per-kind defaults") if s.to_run else "nothing to run"
            print(f"{spec.name}: {s.tasks} tasks; {s.in_store} in the store, {s.to_run} to run; estimated "
                  f"{est / 60:.1f} min with {ex.name} x{ex.workers} ({basis})")
            return 0
        print(f"{spec.name}: {s.ok} ok, {s.failed} failed, {s.unavailable} unavailable here, "
              f"{s.in_store} already in the store; {s.retries} retries; {s.wall_seconds:.1f} s "
              f"-> {store.path}")
        for b in s.build_failures:
            print(f"  build failed: {b}")
        if args.report:
            keys = set(s.keys)
            rows = [r for r in store.rows() if r.key in keys]
            for p in write_report(rows, args.report, spec.name):
                print(f"  {p}")
    finally:
        ex.close()
        store.close()
    return 0 if not s.failed and not s.build_failures else 1
