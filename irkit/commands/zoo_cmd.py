"""``irkit zoo run|table|list``: the architecture matrix of :mod:`irkit.zoo` in one command.

``irkit zoo run`` exports each (model, size, frontend), imports it, checks the
interpreter against torch, runs the optimising pipeline (``-p``, with
``--load-pass-plugin`` for a pass under development), counts the fused
attentions, lowers to each target (every one that runs here plus xla-tpu-v5e
and tvm-cuda, compile only) and checks the numbers, recording time and peak
memory of every stage (:mod:`irkit.zoo.run`).  Each job runs isolated in a
worker process with a timeout.  ``--json`` merges the rows into a results file;
``--markdown`` writes the table (ZOO.md) from it.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from irkit.cli import args_for, command
from irkit.errors import InputError


def _csv(s: str | None) -> list[str]:
    return [x.strip() for x in (s or "").split(",") if x.strip()]


def _args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    r = sub.add_parser("run", help="run the matrix: export, import, numerics, passes, fused attention, targets")
    r.add_argument("--models", help="comma-separated architecture names (default: every one; see `irkit zoo list`)")
    r.add_argument("--family", help="only this family: decoder, encoder, encoder-decoder, vision, audio, vision-text")
    r.add_argument("--sizes", default="toy", help="toy, full or toy,full (default toy)")
    r.add_argument("--frontends", default="torch,onnx", help="torch (torch.export .pt2), onnx (dynamo exporter), "
                   "or both (default)")
    r.add_argument("--targets", help="comma-separated targets (default: every target that runs here, plus "
                   "xla-tpu-v5e and tvm-cuda compiled only); 'none' for no target")
    r.add_argument("-p", "--pipeline", "--pass-pipeline", dest="pipeline", default="",
                   help="pass pipeline (default: the optimising pipeline, canonicalize,fuse-attention,"
                        "fuse-cache-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce)")
    r.add_argument("--load-pass-plugin", action="append", default=[], metavar="FILE",
                   help="a Python file that registers passes with @register_pass (repeatable)")
    r.add_argument("--jobs", type=int, default=1,
                   help="worker processes, each running one (model, size, frontend) at a time (default 1; "
                        "0 runs in this process, without isolation)")
    r.add_argument("--timeout", type=float, help="seconds per job before its worker is killed "
                   "(default 600 at toy size, 1800 at full)")
    r.add_argument("--no-interp", action="store_true",
                   help="skip the interpreter checks (the slowest stage at full size); targets are still "
                        "compared with torch")
    r.add_argument("--keep", metavar="DIR", help="keep the exported .pt2/.onnx files in DIR")
    r.add_argument("--json", metavar="OUT", help="merge the rows into this results file (by model:size:frontend)")
    r.add_argument("--markdown", metavar="FILE", help="write the table of the results (e.g. ZOO.md): of --json's "
                   "whole file when given, else of this run")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    t = sub.add_parser("table", help="print (or write) the Markdown table of a results file")
    t.add_argument("results", help="a results file written by `irkit zoo run --json`")
    t.add_argument("--markdown", metavar="FILE", help="write the table here (e.g. ZOO.md) instead of printing")
    sub.add_parser("list", help="list the architectures: name, family, full-size shape")


@command("zoo", help="the zoo of transformers architectures: run the matrix, print its table, list models")
@args_for(_args)
def cmd_zoo(args: argparse.Namespace) -> int:
    action = getattr(args, "action", None)
    if action == "list":
        from irkit import zoo

        for n in zoo.names():
            a = zoo.entry(n)
            print(f"{n:<16} {a.family:<16} {a.full_note}")
        return 0
    if action == "table":
        from irkit.zoo.run import markdown, read_results, write_markdown

        doc = read_results(args.results)
        if args.markdown:
            write_markdown(args.markdown, doc)
        else:
            print(markdown(doc))
        return 0
    if action == "run":
        return _run(args)
    raise InputError("irkit zoo: give an action: run, table or list (see `irkit zoo --help`)")


def _run(args: argparse.Namespace) -> int:
    from irkit import zoo
    from irkit.zoo import run as zr

    plugins = list(args.load_pass_plugin or [])
    if plugins or args.pipeline:
        # Check the pipeline here (plugins loaded) so a typo is one line, not one failure per job.
        from irkit.passmanager import PassManager, load_pass_plugin

        for f in plugins:
            load_pass_plugin(f)
        PassManager(args.pipeline or zr.DEFAULT_PIPELINE)
    plugins = [str(Path(f).resolve()) for f in plugins]
    models = _csv(args.models) or None
    if args.family:
        families = {zoo.entry(n).family for n in zoo.names()}
        if args.family not in families:
            raise InputError(f"--family {args.family}: unknown family (expected one of {', '.join(sorted(families))})")
        models = [n for n in (models or zoo.names()) if zoo.entry(n).family == args.family]
    if args.jobs < 0:
        raise InputError(f"--jobs {args.jobs}: give 0 (in this process) or a number of worker processes")
    targets: list[str] | None = None
    if args.targets:
        targets = [] if args.targets.strip() == "none" else _csv(args.targets)
        from irkit.targets.registry import TARGETS, load_targets

        load_targets()
        bad = [t for t in targets if t not in TARGETS]
        if bad:
            raise InputError(f"--targets: unknown target(s) {', '.join(bad)} (see `irkit list-targets`)")
    jobs = zr.plan(models, _csv(args.sizes) or ["toy"], _csv(args.frontends), pipeline=args.pipeline
                   or zr.DEFAULT_PIPELINE, plugins=plugins, targets=targets, out_dir=args.keep or "",
                   interp=not args.no_interp, verbose=not args.quiet and args.jobs <= 1)
    if not jobs:
        raise InputError("irkit zoo run: nothing to run (no model of that selection exports through those frontends)")
    if args.json and Path(args.json).exists():
        zr.read_results(args.json)  # a wrong file fails now, not after the run
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    done = [0]

    def on_row(row: dict[str, Any]) -> None:
        done[0] += 1
        if not args.quiet:
            cells = zr.status_cells(row)
            text = ", ".join(f"{k} {v}" for k, v in cells.items())
            print(f"[{done[0]}/{len(jobs)}] {row['key']} ({row.get('seconds', 0):.0f} s): {text}",
                  file=sys.stderr, flush=True)
        if args.json:
            zr.merge(args.json, [row])

    rows = zr.run_matrix(jobs, workers=args.jobs, timeout=args.timeout, on_row=on_row)
    meta = zr.run_meta(command_line(), args.pipeline or zr.DEFAULT_PIPELINE, time.perf_counter() - t0)
    if args.json:
        doc = zr.merge(args.json, [], meta)
    else:
        doc = zr.merge(None, rows, meta)
    if args.markdown:
        zr.write_markdown(args.markdown, doc)
    this = {"rows": rows, "runs": [meta]}
    print(zr.markdown(this).split("## Status", 1)[1].split("## Time", 1)[0].strip())
    return 0 if all(not r.get("error") for r in rows) else 1


def command_line() -> str:
    return "irkit " + " ".join(shlex.quote(a) for a in sys.argv[1:])
