"""The ``irkit`` command.

Every subcommand reads its input, does its work through the library, and
writes output atomically.  A user's mistake (bad file, bad pipeline, bad
option) prints one line ``irkit: error: ...`` and exits with status 1 (2 for
command-line usage errors); a bug inside irkit prints one line too, and the
traceback only when ``IRKIT_TRACEBACK=1`` is set.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

import irkit

COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int], str]] = {}


def command(name: str, help: str) -> Callable:
    """Register a subcommand: decorate ``run(args) -> int``; ``add_args`` fills its parser."""

    def deco(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        add = getattr(fn, "_add_args", lambda p: None)
        COMMANDS[name] = (add, fn, help)
        return fn

    return deco


def args_for(add: Callable[[argparse.ArgumentParser], None]) -> Callable:
    def deco(fn: Callable) -> Callable:
        fn._add_args = add  # type: ignore[attr-defined]
        return fn

    return deco


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"irkit: error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(2)


# ---------------------------------------------------------------------------
# shared helpers


def add_pipeline_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-p", "--pipeline", "--pass-pipeline", dest="pipeline", default="",
                   help="pass pipeline, e.g. 'canonicalize,cse' or 'builtin.module(canonicalize)'")
    p.add_argument("--load-pass-plugin", action="append", default=[], metavar="FILE",
                   help="a Python file that registers passes with @register_pass (repeatable)")


def load_plugins(args: argparse.Namespace) -> None:
    from irkit.passmanager import load_pass_plugin

    for f in getattr(args, "load_pass_plugin", []) or []:
        load_pass_plugin(f)


IMPORTED_SUFFIXES = (".onnx", ".pt2", ".hlo")
INPUT_HELP = ("irkit IR (.mlir; - for stdin), or a model to import first: FILE.py:FACTORY, .onnx, .pt2, "
              "StableHLO or HLO text, zoo:NAME[:SIZE] (a transformers architecture, see docs/zoo.md)")


def read_input_module(path: str) -> Any:
    """The module in ``path``: irkit IR text, or anything ``irkit import`` reads.

    Every command takes a model where it takes IR: ``FILE.py:FACTORY``, ``.onnx``,
    ``.pt2``, HLO text and StableHLO text are imported on the fly (the same as
    ``irkit import IN -o x.mlir`` and then the command on ``x.mlir``).
    """
    from irkit.text.io import read_module

    if path.startswith("zoo:"):
        return import_zoo(path)
    if _is_foreign(path):
        from irkit.frontends import import_source

        return import_source(path)
    return read_module(path)


def import_zoo(source: str) -> Any:
    """``zoo:NAME[:SIZE]``: a transformers architecture of :mod:`irkit.zoo` (random weights), through
    torch.export with its named dynamic dims."""
    from irkit.frontends.torch_export import import_torch_factory
    from irkit.zoo import factory

    _, name, *rest = source.split(":")
    if len(rest) > 1:
        from irkit.errors import InputError

        raise InputError(f"{source}: expected zoo:NAME or zoo:NAME:SIZE (toy or full)")
    module, inputs, dyn = factory(name, rest[0] if rest else "toy")
    return import_torch_factory(module, inputs, dyn, name="main")


def _is_foreign(path: str) -> bool:
    """Whether ``path`` names a model for a frontend rather than irkit IR text."""
    from pathlib import Path

    if ":" in path and path.rsplit(":", 1)[0].endswith(".py"):
        return True
    p = Path(path)
    if p.suffix.lower() in IMPORTED_SUFFIXES:
        return True
    if not p.is_file():
        return False  # read_module reports it
    try:
        with p.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if head.startswith(b"PK"):
        return True  # a torch.export archive whatever its name
    text = head.decode("utf-8", errors="replace")
    return "HloModule" in text or ("stablehlo." in text and '"ik.' not in text)


def write_output_module(m: Any, path: str) -> None:
    from irkit.text.io import write_module

    write_module(m, path)


def load_inputs(path: str | None, fn: Any, seed: int, bind: dict[str, int] | None = None) -> list[np.ndarray]:
    """Inputs from an .npz (by name or argN), missing ones drawn at random from ``seed`` at the
    shapes ``bind`` (``--bind``) and the given inputs imply; each drawn one is named on stderr."""
    from irkit.errors import InputError
    from irkit.interp import bind_symbols, default_bindings, random_inputs

    if not path:
        return random_inputs(fn, seed, default_bindings(fn, bind or {}))
    try:
        with np.load(path, allow_pickle=False) as z:
            given = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (ValueError, OSError) as e:
        raise InputError(f"{path}: not a NumPy .npz archive ({e})") from None
    names = fn.arg_names()
    known = set(names) | {f"arg{i}" for i in range(len(names))}
    extra = sorted(set(given) - known)
    if extra:
        raise InputError(f"{path}: unknown inputs {', '.join(extra)}; the function takes {', '.join(names)}")
    # Bind symbols from the inputs that are given, so random ones get matching shapes.
    partial: dict[str, int] = dict(bind or {})
    for i, (a, n) in enumerate(zip(fn.args, names)):
        x = given.get(n, given.get(f"arg{i}"))
        if x is not None:
            from irkit.ir.types import SymDim

            for d, s in zip(a.type.shape, np.shape(x)):
                if isinstance(d, SymDim) and d.is_symbol:
                    partial[d.name] = int(s)
    rnd = random_inputs(fn, seed, default_bindings(fn, partial))
    out = []
    drawn = []
    for i, (n, r) in enumerate(zip(names, rnd)):
        x = given.get(n, given.get(f"arg{i}"))
        if x is None:
            drawn.append(n)
        out.append(np.asarray(x) if x is not None else r)
    if drawn:
        sys.stderr.write(f"irkit: note: {path} has no {', '.join(drawn)}; drawn at random (seed {seed})\n")
    try:
        bind_symbols(fn, out)
    except ValueError as e:
        raise InputError(f"{path}: {e}") from None
    return out


def save_npz(path: str, arrays: Sequence[np.ndarray], prefix: str = "output") -> None:
    from irkit.fileio import atomic_write

    buf = io.BytesIO()
    np.savez(buf, **{f"{prefix}{i}": np.asarray(a) for i, a in enumerate(arrays)})
    atomic_write(path, buf.getvalue())


def describe_array(a: np.ndarray) -> str:
    a = np.asarray(a)
    head = f"{a.dtype}{list(a.shape)}"
    if a.size == 0:
        return head + " (empty)"
    if a.dtype.kind in "fc" or a.dtype.name == "bfloat16":
        af = a.astype(np.float64)
        return f"{head} mean={af.mean():.6g} std={af.std():.6g} min={af.min():.6g} max={af.max():.6g}"
    return f"{head} min={a.min()} max={a.max()} first={a.reshape(-1)[:4].tolist()}"


# ---------------------------------------------------------------------------
# opt


def _opt_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help=INPUT_HELP)
    add_pipeline_args(p)
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument("--split-input-file", action="store_true", help="process each '// -----' chunk on its own")
    p.add_argument("--print-ir-after-all", action="store_true")
    p.add_argument("--print-ir-after-change", action="store_true")
    p.add_argument("--print-ir-before", action="append", default=[], metavar="PASS")
    p.add_argument("--print-ir-after", action="append", default=[], metavar="PASS")
    p.add_argument("--timing", action="store_true", help="per-pass wall-time table on stderr")
    p.add_argument("--statistics", action="store_true", help="pattern statistics on stderr")
    p.add_argument("--check-numerics", action="store_true",
                   help="run the interpreter after each pass; stop at the first that breaks numerics")
    p.add_argument("--check-rewrites", action="store_true",
                   help="check every single fusion rewrite numerically (slow; for pass development)")
    p.add_argument("--explain", action="store_true",
                   help="for each attention/softmax candidate not fused, say why (stderr)")
    p.add_argument("--seed", type=int, default=0, help="seed for --check-numerics inputs")
    p.add_argument("--no-verify", action="store_true", help="do not verify after each pass")


@command("opt", "run a pass pipeline over an IR file")
@args_for(_opt_args)
def cmd_opt(args: argparse.Namespace) -> int:
    from irkit.ir.verify import verify
    from irkit.passmanager import PassContext, PassManager, parse_pipeline
    from irkit.text.io import module_text, read_modules_split
    from irkit.text.parser import ParseError

    load_plugins(args)
    parse_pipeline(args.pipeline)  # fail early on a bad pipeline, before reading input

    def process(m: Any) -> tuple[Any, PassManager]:
        verify(m)
        ctx = PassContext(explain=args.explain, check_rewrites=args.check_rewrites, seed=args.seed)
        pm = PassManager(args.pipeline, verify_each=not args.no_verify,
                         print_after_all=args.print_ir_after_all, print_after_change=args.print_ir_after_change,
                         print_before=tuple(args.print_ir_before), print_after=tuple(args.print_ir_after),
                         timing=args.timing, statistics=args.statistics, check_numerics=args.check_numerics,
                         check_seed=args.seed, ctx=ctx)
        pm.run(m)
        return m, pm

    def report(pm: PassManager) -> None:
        if args.explain:
            for nm in pm.ctx.near_misses:
                sys.stderr.write(f"explain: {nm.describe()}\n")
            if not pm.ctx.near_misses:
                sys.stderr.write("explain: no near misses\n")
        if args.timing:
            sys.stderr.write(pm.timing_report())
        if args.statistics:
            sys.stderr.write(pm.statistics_report())

    if not args.split_input_file:
        m, pm = process(read_input_module(args.input))
        report(pm)
        write_output_module(m, args.output)
        return 0

    from irkit.errors import IrkitError
    from irkit.ir.verify import VerifyError

    chunks = read_modules_split(args.input)
    texts: list[str] = []
    status = 0
    for c in chunks:
        if isinstance(c, ParseError):
            sys.stderr.write(c.render() + "\n")
            status = 1
            continue
        try:
            m, pm = process(c)
            report(pm)
            texts.append(module_text(m, inline_resources=True)[0])
        except (IrkitError, VerifyError) as e:
            sys.stderr.write(f"irkit: error: {e}\n")
            status = 1
    out = "// -----\n".join(texts)
    if args.output == "-":
        sys.stdout.write(out)
    else:
        from irkit.fileio import atomic_write

        atomic_write(args.output, out)
    return status


# ---------------------------------------------------------------------------
# run


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help=INPUT_HELP)
    add_pipeline_args(p)
    p.add_argument("--target", default="reference", help="where to run (see `irkit list-targets`)")
    p.add_argument("--inputs", help=".npz with inputs keyed by argument name or arg0, arg1...")
    p.add_argument("--seed", type=int, default=0, help="seed for inputs not given in --inputs")
    p.add_argument("-o", "--output", help="write outputs to this .npz (output0, output1, ...)")
    p.add_argument("--float64", action="store_true", help="run the interpreter as the float64 oracle")
    p.add_argument("--bind", help="values of symbolic dims for inputs drawn at random, e.g. B=1,S=128")


@command("run", "run an IR file on a target (default: the reference interpreter)")
@args_for(_run_args)
def cmd_run(args: argparse.Namespace) -> int:
    from irkit.ir.verify import verify
    from irkit.passmanager import run_pipeline

    load_plugins(args)
    m = read_input_module(args.input)
    verify(m)
    if args.pipeline:
        run_pipeline(m, args.pipeline)
    fn = m.entry
    from irkit.commands.targets_cmd import checked_bindings

    xs = load_inputs(args.inputs, fn, args.seed, checked_bindings(fn, args.bind))
    if args.target == "reference":
        from irkit.interp import run

        outs = run(m, xs, float64=args.float64)
    else:
        from irkit.targets.registry import get_target

        t = get_target(args.target)
        outs = t.run_module(m, xs)  # lowered for the shapes of these inputs
    for i, o in enumerate(outs):
        print(f"output{i}: {describe_array(o)}")
    if args.output:
        save_npz(args.output, outs)
    return 0


# ---------------------------------------------------------------------------
# listings


@command("list-passes", "list registered passes with their options")
@args_for(lambda p: p.add_argument("--load-pass-plugin", action="append", default=[], metavar="FILE"))
def cmd_list_passes(args: argparse.Namespace) -> int:
    from irkit.passmanager import PASSES, load_builtin_passes, load_entry_point_passes

    load_builtin_passes()
    load_entry_point_passes()
    load_plugins(args)
    for name in sorted(PASSES):
        cls = PASSES[name]
        print(f"{name}  -  {cls.summary()}")
        for o in cls.options():
            doc = f"  {o.doc}" if o.doc else ""
            print(f"    --{o.name.replace('_', '-')}=<{o.type_name}> (default: {o.default}){doc}")
    return 0


@command("list-ops", "list the op set")
@args_for(lambda p: None)
def cmd_list_ops(args: argparse.Namespace) -> int:
    from irkit.ir.ops import OPS

    for name in sorted(OPS):
        d = OPS[name]
        attrs = ", ".join(d.attrs) if d.attrs else ""
        print(f"{name:18} ({', '.join(d.operands)})  {d.summary}" + (f"  [{attrs}]" if attrs else ""))
    return 0


# ---------------------------------------------------------------------------
# entry point


def _load_extra_commands() -> None:
    """Subcommands defined outside this module (frontends, targets, bench) register on import."""
    import importlib

    for mod in ("irkit.commands",):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise


def build_parser() -> argparse.ArgumentParser:
    _load_extra_commands()
    p = _Parser(prog="irkit", description="irkit: a compiler-IR workbench for Transformer graphs")
    p.add_argument("--version", action="version", version=f"irkit {irkit.__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (add, _, help) in COMMANDS.items():
        sp = sub.add_parser(name, help=help, description=help)
        add(sp)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from irkit.errors import IrkitError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    _, run, _ = COMMANDS[args.command]
    try:
        return int(run(args) or 0)
    except KeyboardInterrupt:
        sys.stderr.write("irkit: interrupted\n")
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except Exception as e:  # noqa: BLE001 - the one place that turns errors into one line
        return _report(e, IrkitError)


def _report(e: BaseException, user_error: type) -> int:
    from irkit.ir.builder import BuildError
    from irkit.ir.verify import VerifyError
    from irkit.text.parser import ParseError

    if os.environ.get("IRKIT_TRACEBACK"):
        import traceback

        traceback.print_exc()
    if isinstance(e, ParseError):
        sys.stderr.write(e.render() + "\n")
        return 1
    if isinstance(e, (user_error, VerifyError, BuildError)):
        sys.stderr.write(f"irkit: error: {_one_line(str(e))}\n")
        return 1
    extra = getattr(e, "user_error", False)
    if extra:
        sys.stderr.write(f"irkit: error: {_one_line(str(e))}\n")
        return 1
    sys.stderr.write(f"irkit: internal error: {type(e).__name__}: {_one_line(str(e))} "
                     "(this is a bug in irkit; rerun with IRKIT_TRACEBACK=1 and report it)\n")
    return 3


def _one_line(s: str) -> str:
    s = " ".join(s.split("\n")[:1]) if "\n" in s else s
    return s[:2000]


if __name__ == "__main__":
    raise SystemExit(main())
