"""``irkit conformance``: the frameworks' own conformance suites through irkit and its targets."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import asdict
from typing import Any

from irkit.cli import args_for, command
from irkit.errors import InputError


def _conformance_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", choices=["onnx", "torch", "jax", "all"],
                   help="which suite: ONNX node tests, PyTorch OpInfo, JAX primitive harnesses (or all three)")
    p.add_argument("--targets", default="", metavar="T,...",
                   help="targets to run besides the interpreter, e.g. ort,tvm-llvm,xla-cpu")
    p.add_argument("--peers", action="store_true",
                   help="also run the peer importers on the same cases (TVM Relax's ONNX and torch.export frontends)")
    p.add_argument("--filter", metavar="TERMS", help="only cases whose id contains a term or whose op group equals "
                   "it (comma-separated; =TERM: only an equal id or group)")
    p.add_argument("--sample", type=int, metavar="N", help="N cases spread evenly over the suite (deterministic)")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N cases")
    p.add_argument("--jobs", type=int, default=0, metavar="N",
                   help="run cases isolated in N worker processes with a per-case timeout (0: in this process)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="S", help="per-case timeout with --jobs (s)")
    p.add_argument("--json", metavar="OUT", help="write per-case results and the summary as JSON "
                   "(with --suite all: OUT gets the suite name inserted before .json)")
    p.add_argument("--report", metavar="MD", help="write a Markdown report (CONFORMANCE.md)")
    p.add_argument("--from-json", default="", metavar="A.json,...",
                   help="do not run: read earlier --json results (e.g. to write --report from them)")
    p.add_argument("--show", type=int, default=15, metavar="N", help="list up to N non-passing cases per status")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


def _json_path(out: str, suite: str, many: bool) -> str:
    if not many:
        return out
    return out[:-5] + f".{suite}.json" if out.endswith(".json") else f"{out}.{suite}.json"


def _print_summary(res: Any, show: int) -> None:
    from irkit.conformance.report import goal_rows

    print(f"{res.suite}: {res.meta.get('cases')} cases in {res.meta.get('seconds')} s")
    width = max(len(r) for r in res.runners) + 2
    print(f"  {'runner':{width}} {'pass':>6} {'wrong':>6} {'refused':>8} {'crash':>6} {'skip':>6} {'in-scope':>9} "
          f"{'pass%':>7}")
    for runner, s in res.summary().items():
        pct = "n/a" if s["pass_pct"] is None else f"{s['pass_pct']:.1f}"
        print(f"  {runner:{width}} {s['pass']:>6} {s['wrong']:>6} {s['refused']:>8} {s['crash']:>6} {s['skip']:>6} "
              f"{s['in_scope']:>9} {pct:>7}")
    for goal, runner, measured, met in goal_rows(res):
        mark = "n/a" if met is None else ("met" if met else "NOT met")
        print(f"  goal: {runner}: {goal}: {measured} ({mark})")
    for status in ("crash", "wrong"):
        bad = [r for r in res.results if r.status == status]
        for r in bad[:show]:
            err = f" (max error {r.max_error:.3g})" if status == "wrong" and r.max_error is not None else ""
            print(f"  {status}: {r.case} on {r.runner}{err}: {r.reason}")
        if len(bad) > show:
            print(f"  ... {len(bad) - show} more {status} rows (see --json)")


@command("conformance", "run the ONNX node tests, PyTorch OpInfo or JAX harnesses through irkit and its targets")
@args_for(_conformance_args)
def cmd_conformance(args: argparse.Namespace) -> int:
    from irkit.conformance.report import write_report
    from irkit.conformance.results import SuiteResult
    from irkit.conformance.runner import run_suite

    cmdline = "irkit " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv and sys.argv[0].endswith(
        "irkit") else "irkit conformance " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    results: list[SuiteResult] = []
    if args.from_json:
        for path in [p for p in args.from_json.split(",") if p]:
            try:
                results.append(SuiteResult.read_json(path))
            except (OSError, ValueError, KeyError) as e:
                raise InputError(f"{path}: not a conformance JSON result ({e})") from None
        if results and results[0].meta.get("command"):
            cmdline = " && ".join(dict.fromkeys(r.meta.get("command", "") for r in results))
    else:
        if not args.suite:
            raise InputError("give --suite onnx|torch|jax|all (or --from-json to report earlier results)")
        if args.sample is not None and args.sample <= 0:
            raise InputError("--sample must be a positive number of cases")
        suites = ["onnx", "torch", "jax"] if args.suite == "all" else [args.suite]
        targets = [t.strip() for t in args.targets.split(",") if t.strip()]
        if targets:
            from irkit.targets.registry import get_target

            for t in targets:
                get_target(t)  # unknown names fail here, with a suggestion
        for suite in suites:
            progress = None
            if not args.quiet:
                step = [0]

                def progress(done: int, total: int, suite: str = suite, step: list[int] = step) -> None:
                    if done == total or done - step[0] >= max(1, total // 20):
                        step[0] = done
                        sys.stderr.write(f"{suite}: {done}/{total} cases\n")
                        sys.stderr.flush()
            on_rows = None
            partial = None
            if args.json:
                # Rows as they come, one JSON object a line: a long run that is stopped still has its results.
                partial = open(_json_path(args.json, suite, len(suites) > 1) + ".partial.jsonl", "w")  # noqa: SIM115

                def on_rows(rows: list[Any], f: Any = partial) -> None:
                    for r in rows:
                        f.write(json.dumps(asdict(r), default=str) + "\n")
                    f.flush()
            try:
                res = run_suite(suite, targets, filter=args.filter, limit=args.limit, sample=args.sample,
                                peers=args.peers, jobs=args.jobs, timeout=args.timeout, progress=progress,
                                on_rows=on_rows)
            finally:
                if partial is not None:
                    partial.close()
            res.meta["command"] = cmdline
            results.append(res)
            if args.json:
                out = _json_path(args.json, suite, len(suites) > 1)
                res.write_json(out)
                os.remove(out + ".partial.jsonl")
    for res in results:
        _print_summary(res, args.show)
    if args.report:
        write_report(results, args.report, cmdline)
        print(f"report -> {args.report}")
    return 0
