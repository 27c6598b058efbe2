"""``irkit list-targets``, ``lower``, ``check`` and ``bisect``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from irkit.cli import INPUT_HELP, add_pipeline_args, args_for, command, load_inputs, load_plugins, read_input_module
from irkit.errors import InputError


def parse_bindings(text: str | None) -> dict[str, int]:
    """``B=2,S=128`` -> {"B": 2, "S": 128}."""
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        k, sep, v = part.partition("=")
        if not sep or not k.strip() or not v.strip().isdigit():
            raise InputError(f"--bind: expected NAME=INT pairs like B=2,S=128, got '{part}'")
        if int(v) < 1:
            raise InputError(f"--bind: {k.strip()}={v.strip()}: a dim size must be a positive integer")
        out[k.strip()] = int(v)
    return out


def function_symbols(fn: Any) -> list[str]:
    """The plain symbols of a function's argument shapes, in order of first use."""
    from irkit.ir.types import SymDim

    seen: list[str] = []
    for a in fn.args:
        for d in a.type.shape:
            if isinstance(d, SymDim):
                for s in sorted(d.symbols):
                    if s not in seen:
                        seen.append(s)
    return seen


def checked_bindings(fn: Any, text: str | None) -> dict[str, int]:
    """``--bind`` parsed and checked against the symbols ``fn`` has (an unknown name is an error)."""
    b = parse_bindings(text)
    known = function_symbols(fn)
    unknown = [k for k in b if k not in known]
    if unknown:
        has = f"its symbolic dims are {', '.join(known)}" if known else "it has no symbolic dims"
        raise InputError(f"--bind: {', '.join(unknown)} is not a symbolic dim of the function; {has}")
    return b


def _prepare(args: argparse.Namespace) -> Any:
    from irkit.ir.verify import verify
    from irkit.passmanager import run_pipeline

    load_plugins(args)
    m = read_input_module(args.input)
    verify(m)
    original = m.clone()
    if args.pipeline:
        run_pipeline(m, args.pipeline)
    return original, m


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help=INPUT_HELP)
    add_pipeline_args(p)
    p.add_argument("--bind", help="values of symbolic dims, e.g. B=1,S=128 (default: the module's examples)")


def _list_targets_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")
    p.add_argument("--verbose", action="store_true",
                   help="keep what JAX, libtpu and CUDA print while probing devices (hidden by default)")


def gpu_status() -> dict[str, str]:
    """For ``tvm-cuda`` and ``xla-gpu``: ``run`` or why they cannot run on this machine."""
    from irkit.targets.cuda_env import cuda_status
    from irkit.targets.registry import TARGETS, get_target

    cuda = cuda_status()
    out: dict[str, str] = {}
    for name in ("tvm-cuda", "xla-gpu"):
        if name not in TARGETS:
            continue
        av = get_target(name).availability()
        if av.can_run:
            out[name] = "run"
            continue
        why = cuda.problem() if name == "tvm-cuda" or av.can_compile else (av.reason or cuda.problem())
        out[name] = f"cannot run: {why or av.reason}"
        if av.can_compile:
            out[name] += " (compiles here)"
    return out


@command("list-targets", "list targets and what each can do on this machine")
@args_for(_list_targets_args)
def cmd_list_targets(args: argparse.Namespace) -> int:
    import os

    from irkit.targets.registry import PLUGIN_ERRORS, TARGETS, load_targets

    if args.verbose:
        os.environ["IRKIT_VERBOSE"] = "1"
    load_targets()
    rows: list[dict[str, Any]] = []
    for name, make in TARGETS.items():
        try:
            t = make()
            av = t.availability()
        except Exception as e:  # noqa: BLE001 - a plugin's broken target is one row, not a crash
            first = (str(e).strip().splitlines() or [""])[0]
            rows.append({"name": name, "status": "broken", "reason": f"{type(e).__name__}: {first}",
                         "summary": "target plugin failed to start", "spec": None})
            continue
        rows.append({"name": t.name, "status": av.label, "reason": av.reason, "summary": t.summary,
                     "spec": t.spec})
    for err in PLUGIN_ERRORS:
        rows.append({"name": err.name, "status": "broken", "reason": err.line(),
                     "summary": f"target plugin from {err.distribution} ({err.module})", "spec": None})
    gpu = gpu_status()
    for r in rows:
        if r["name"] in gpu:
            r["gpu"] = gpu[r["name"]]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    w = max(len(r["name"]) for r in rows)
    for r in rows:
        why = f"  ({r['reason']})" if r["reason"] else ""
        print(f"{r['name']:<{w}}  {r['status']:<12} {r['summary']}{why}")
    if gpu:
        print("GPU here:")
        for name, st in gpu.items():
            print(f"  {name:<{w}}  {st}")
    return 0


def _lower_args(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--target", required=True)
    p.add_argument("-o", "--output", required=True, help="folder for the artifact files and manifest.json")
    p.add_argument("--tuning-db", metavar="STORE",
                   help="use the tiles `irkit tune` stored in STORE; matmuls without a stored choice keep the defaults")


@command("lower", "compile an IR file for a target and write what its compiler produced")
@args_for(_lower_args)
def cmd_lower(args: argparse.Namespace) -> int:
    from irkit.fileio import atomic_write
    from irkit.interp import default_bindings
    from irkit.targets.registry import get_target
    from irkit.text.printer import Printer

    t = get_target(args.target)  # before a slow import
    _, m = _prepare(args)
    b = default_bindings(m.entry, checked_bindings(m.entry, args.bind))
    if args.tuning_db:
        from irkit.sweep.store import Store
        from irkit.sweep.tune import apply_tuning

        with Store(args.tuning_db, create=False) as st:
            n = apply_tuning(m, st, t.name, b)
        print(f"{n} matmul(s) tiled from {args.tuning_db}", file=sys.stderr)
    art = t.lower(m, b)
    d = art.write(args.output)
    atomic_write(d / "module.mlir", Printer(inline_resources=True).module(m))
    print(f"{t.name}: {len(art.kernels)} kernels, compiled in {art.compile_seconds:.3f} s -> {d}")
    for name in sorted(art.files):
        print(f"  {d / name}")
    print(f"  {d / 'manifest.json'}")
    return 0


def _check_args(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--targets", required=True, help="comma-separated target names")
    p.add_argument("--inputs", help=".npz inputs by argument name, argN or arr_N (missing ones drawn at random)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print a JSON report")


def check_targets(original: Any, m: Any, targets: list[str], xs: list[np.ndarray]) -> dict[str, Any]:
    """Each target's outputs vs the float64 interpreter on the original module."""
    from irkit.check import compare_all, module_tolerance
    from irkit.interp import bind_symbols, run
    from irkit.targets.registry import get_target

    oracle = run(original, xs, float64=True)
    b = bind_symbols(m.entry, xs)
    report: dict[str, Any] = {}
    for name in targets:
        t = get_target(name)
        av = t.availability()
        entry: dict[str, Any] = {"status": av.label}
        if not av.can_compile:
            entry.update(ok=False, ran=False, reason=av.reason)
            report[name] = entry
            continue
        try:
            art = t.lower(m, b)
        except Exception as e:  # noqa: BLE001 - reported per target, the others still run
            entry.update(ok=False, ran=False, reason=f"lowering failed: {e}")
            report[name] = entry
            continue
        entry["compile_seconds"] = art.compile_seconds
        entry["kernels"] = len(art.kernels)
        if not av.can_run:
            entry.update(ok=True, ran=False, reason=f"compiled only: {av.reason}")
            report[name] = entry
            continue
        got = t.run(art, xs)
        rep = compare_all(got, oracle, module_tolerance(m))
        entry.update(ok=rep.ok, ran=True, max_abs=rep.max_abs, max_rel=rep.max_rel,
                     outputs=[{"name": c.name, "ok": c.ok, "max_abs": c.max_abs, "max_rel": c.max_rel,
                               "rtol": c.tol.rtol, "atol": c.tol.atol} for c in rep.comparisons])
        report[name] = entry
    return report


@command("check", "compare each target's outputs with the float64 interpreter")
@args_for(_check_args)
def cmd_check(args: argparse.Namespace) -> int:
    from irkit.targets.registry import get_target

    names = [t.strip() for t in args.targets.split(",") if t.strip()]
    for name in names:
        get_target(name)  # an unknown name fails before a slow import
    original, m = _prepare(args)
    xs = load_inputs(args.inputs, m.entry, args.seed, checked_bindings(m.entry, args.bind))
    report = check_targets(original, m, names, xs)
    if args.json:
        print(json.dumps({"targets": report}, indent=2, default=float))
    else:
        for name, e in report.items():
            if e.get("ran"):
                verdict = "OK  " if e["ok"] else "FAIL"
                print(f"{name:14} {verdict} max_abs={e['max_abs']:.3g} max_rel={e['max_rel']:.3g}")
            else:
                print(f"{name:14} {'OK  ' if e['ok'] else 'FAIL'} {e.get('reason', '')}")
    return 0 if all(e["ok"] for e in report.values()) else 1


def _bisect_args(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--target", required=True)
    p.add_argument("--inputs")
    p.add_argument("--seed", type=int, default=0)


def _all_values_module(m: Any) -> tuple[Any, list[Any]]:
    """A clone of ``m`` that also returns every intermediate value; and the ops watched."""
    from irkit.ir.builder import Builder

    probe = m.clone()
    fn = probe.entry
    ret = fn.body.terminator
    watched = [op for op in fn.body if op.name not in ("func.return", "ik.constant") and op.results]
    values = [r for op in watched for r in op.results]
    Builder.before_op(ret).ret(*fn.outputs, *values)
    fn.body.erase(ret)
    return probe, watched


def first_changed_op(before: Any, after: Any, target: Any, xs: list[np.ndarray]) -> dict[str, Any] | None:
    """When a pass changed a module's meaning: the first op of ``after`` (run on the
    target) whose value differs from the op of ``before`` at the same source location
    with the same type, and the kernel that computed it."""
    from irkit.check import compare, module_tolerance
    from irkit.interp import bind_symbols, run
    from irkit.targets.base import op_ids

    pb, wb = _all_values_module(before)
    pa, wa = _all_values_module(after)
    ref = run(pb, xs, float64=True)[len(before.entry.outputs):]
    # Match values by (location, type, op name, occurrence); fall back to
    # (location, type) where that alone is unambiguous.
    by_name: dict[tuple, list[np.ndarray]] = {}
    by_loc: dict[tuple, list[np.ndarray]] = {}
    k = 0
    for op in wb:
        for r in op.results:
            by_name.setdefault((op.loc, r.type, op.name), []).append(ref[k])
            by_loc.setdefault((op.loc, r.type), []).append(ref[k])
            k += 1
    seen: dict[tuple, int] = {}
    art = target.lower(pa, bind_symbols(pa.entry, xs))
    got = target.run(art, xs)[len(after.entry.outputs):]
    ids = op_ids(pa)
    tol = module_tolerance(pa)
    k = 0
    for op in wa:
        for r in op.results:
            key = (op.loc, r.type, op.name)
            n = seen.get(key, 0)
            seen[key] = n + 1
            cands = by_name.get(key, [])
            if n < len(cands):
                want = cands[n]
            elif len(by_loc.get((op.loc, r.type), [])) == 1:
                want = by_loc[(op.loc, r.type)][0]
            else:
                want = None
            value = got[k]
            k += 1
            if want is None:
                continue
            c = compare(value, want, tol, ids[id(op)])
            if not c.ok:
                kernel = next((kn.name for kn in art.kernels if ids[id(op)] in kn.ir_ops), None)
                return {"op": ids[id(op)], "loc": op.loc.short(), "kernel": kernel, "max_abs": c.max_abs,
                        "max_rel": c.max_rel}
    return None


def first_bad_op(m: Any, target: Any, xs: list[np.ndarray]) -> dict[str, Any] | None:
    """Run ``m`` on the target with every intermediate value as an output; the first op
    whose value leaves tolerance against the float64 interpreter, and its kernel."""
    from irkit.check import compare, module_tolerance
    from irkit.interp import bind_symbols, run
    from irkit.targets.base import op_ids

    probe, watched = _all_values_module(m)
    fn = probe.entry
    ids = op_ids(probe)
    art = target.lower(probe, bind_symbols(fn, xs))
    got = target.run(art, xs)[len(m.entry.outputs):]
    want = run(probe, xs, float64=True)[len(m.entry.outputs):]
    tol = module_tolerance(probe)
    k = 0
    for op in watched:
        for _ in op.results:
            c = compare(got[k], want[k], tol, ids[id(op)])
            k += 1
            if not c.ok:
                kernel = next((kn.name for kn in art.kernels if ids[id(op)] in kn.ir_ops), None)
                return {"op": ids[id(op)], "loc": op.loc.short(), "kernel": kernel, "max_abs": c.max_abs,
                        "max_rel": c.max_rel}
    return None


@command("bisect", "find the first pass, then the first kernel, after which a target leaves tolerance")
@args_for(_bisect_args)
def cmd_bisect(args: argparse.Namespace) -> int:
    from irkit.check import compare_all, module_tolerance
    from irkit.interp import bind_symbols, run
    from irkit.ir.verify import verify
    from irkit.passmanager import PassContext, parse_pipeline
    from irkit.targets.registry import get_target

    load_plugins(args)
    t = get_target(args.target)
    if not t.availability().can_run:
        raise InputError(f"bisect needs a target that runs here; '{t.name}': {t.availability().reason}")
    m = read_input_module(args.input)
    verify(m)
    xs = load_inputs(args.inputs, m.entry, args.seed, checked_bindings(m.entry, args.bind))
    oracle = run(m, xs, float64=True)
    passes = parse_pipeline(args.pipeline)
    ctx = PassContext()

    def on_target(mod: Any) -> Any:
        return compare_all(t.run(t.lower(mod, bind_symbols(mod.entry, xs)), xs), oracle, module_tolerance(mod))

    rep = on_target(m)
    if not rep.ok:
        print(f"{t.name} already leaves tolerance before any pass: {rep.first_failure().describe()}")  # type: ignore[union-attr]
        bad = first_bad_op(m, t, xs)
        if bad:
            print(f"first bad kernel: {bad['kernel'] or '?'} (op {bad['op']} at {bad['loc']}, "
                  f"max_abs={bad['max_abs']:.3g})")
        return 1
    for p in passes:
        before = m.clone()
        p.run(m, ctx)
        verify(m)
        rep = on_target(m)
        status = "ok" if rep.ok else "LEAVES TOLERANCE"
        print(f"after {p.pipeline_text():30} {t.name}: {status} max_abs={rep.max_abs:.3g}")
        if not rep.ok:
            print(f"first bad pass: {p.pipeline_text()}")
            meaning = compare_all(run(m, xs, float64=True), oracle, module_tolerance(m))
            if not meaning.ok:
                print("the pass changed the module's meaning: the reference interpreter leaves tolerance too")
                bad = first_changed_op(before, m, t, xs)
            else:
                bad = first_bad_op(m, t, xs)
            if bad:
                print(f"first bad kernel: {bad['kernel'] or '?'} (op {bad['op']} at {bad['loc']}, "
                      f"max_abs={bad['max_abs']:.3g}, max_rel={bad['max_rel']:.3g})")
            return 1
    print(f"{t.name} stays within tolerance after every pass")
    return 0


__all__ = ["parse_bindings", "checked_bindings", "function_symbols", "check_targets", "first_bad_op"]

