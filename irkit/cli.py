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
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


def args_for(add: Callable[[argparse.ArgumentParser], object]) -> Callable:
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
              "StableHLO or HLO text, zoo:NAME[:SIZE] (a transformers architecture, see docs/zoo.md), "
              "zoo-flax:NAME[:SIZE] (its Flax NNX version)")


def read_input_module(path: str, need_function: bool = True) -> Any:
    """The module in ``path``: irkit IR text, or anything ``irkit import`` reads.

    Every command takes a model where it takes IR: ``FILE.py:FACTORY``, ``.onnx``,
    ``.pt2``, HLO text and StableHLO text are imported on the fly (the same as
    ``irkit import IN -o x.mlir`` and then the command on ``x.mlir``).  A module without
    functions is an error unless ``need_function`` is False (``irkit opt`` passes it through).
    """
    from irkit.text.io import read_module

    if path.startswith(("zoo:", "zoo-flax:")):
        return import_zoo(path)
    _check_plain_input(path)
    if _is_foreign(path):
        from irkit.frontends import import_source

        return import_source(path)
    m = read_module(path)
    if need_function and not m.functions:
        from irkit.errors import InputError

        raise InputError(f"{path}: the module has no functions; expected a \"func.func\" to run")
    return m


def _check_plain_input(path: str) -> None:
    """One clear line for inputs that would otherwise fail deep in a parser: a Python file
    without its factory, an empty IR file."""
    from irkit.errors import InputError

    p = Path(path)
    if path == "-" or not p.is_file():
        return
    if p.suffix == ".py":
        import ast

        try:
            tree = ast.parse(p.read_text(encoding="utf-8", errors="replace"))
            defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
        except SyntaxError:
            defs = []
        has = f" (it defines {', '.join(defs[:8])}{', ...' if len(defs) > 8 else ''})" if defs else ""
        eg = f"{path}:{defs[0] if defs else 'model'}"
        raise InputError(f"{path} is Python: name the factory, FILE.py:FACTORY, e.g. {eg}{has}")
    if p.suffix.lower() in (".mlir", ".ir", ".txt", "") and p.stat().st_size < 4096:
        text = p.read_text(encoding="utf-8", errors="replace")
        if not "".join(ln for ln in text.splitlines() if not ln.strip().startswith("//")).strip():
            raise InputError(f"{path}: empty file, expected a module (write one with `irkit import` or see docs/ir.md)")


def import_zoo(source: str) -> Any:
    """``zoo:NAME[:SIZE]``: a transformers architecture of :mod:`irkit.zoo` (random weights), through
    torch.export with its named dynamic dims.  ``zoo-flax:NAME[:SIZE]``: the Flax NNX version of
    the same model (weights copied from the transformers one), through the jaxpr importer."""
    kind, name, *rest = source.split(":")
    if len(rest) > 1:
        from irkit.errors import InputError

        raise InputError(f"{source}: expected {kind}:NAME or {kind}:NAME:SIZE (toy or full)")
    from irkit.zoo.build import as_size

    size = as_size(rest[0]) if rest else "toy"
    if kind == "zoo-flax":
        from irkit.frontends.jax import import_jax
        from irkit.targets.base import quiet_native_stderr
        from irkit.zoo.flax_models import as_function, build_pair

        with quiet_native_stderr():  # JAX's first array starts libtpu, which warns without a TPU
            _, nnx_model, inputs = build_pair(name, size)
            return import_jax(as_function(nnx_model), inputs, name="main")
    from irkit.frontends.torch_export import import_torch_factory
    from irkit.zoo import factory

    module, inputs, dyn = factory(name, size)
    if size == "full":  # batch 1: torch.export specialises B, so a full-size model exports static (as zoo run does)
        dyn = None
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
    """Inputs from an .npz, keyed by argument name or by position (``argN``, or ``arr_N`` as
    ``numpy.savez(path, x, y)`` writes them); missing ones drawn at random from ``seed`` at the
    shapes ``bind`` (``--bind``) and the given inputs imply, each drawn one named in a warning.

    An array whose dtype differs from the argument's is cast with a warning when nothing is lost
    (float64 data for an f32 argument, integral float ids for an i64 one) and refused otherwise.
    """
    from irkit.errors import InputError
    from irkit.interp import bind_symbols, default_bindings, random_inputs

    if not path:
        return random_inputs(fn, seed, default_bindings(fn, bind or {}))
    given = read_npz(path)
    names = fn.arg_names()
    by_arg: dict[int, tuple[str, np.ndarray]] = {}
    unknown = []
    for k, x in given.items():
        m = re.fullmatch(r"(?:arg|arr_)(\d+)", k)
        i = names.index(k) if k in names else (int(m.group(1)) if m and int(m.group(1)) < len(names) else None)
        if i is None:
            unknown.append(k)
        elif i in by_arg:
            raise InputError(f"{path}: '{by_arg[i][0]}' and '{k}' both give argument {i} ({names[i]}); keep one")
        else:
            by_arg[i] = (k, x)
    if unknown:
        raise InputError(f"{path}: unknown inputs {', '.join(sorted(unknown))}; the function takes "
                         f"{', '.join(names)} (or argN / arr_N by position, N < {len(names)})")
    for i, (k, x) in list(by_arg.items()):
        by_arg[i] = (k, _cast_input(path, k, names[i], x, fn.args[i].type.dtype))
    # Bind symbols from the inputs that are given, so random ones get matching shapes.
    partial: dict[str, int] = dict(bind or {})
    for i, a in enumerate(fn.args):
        if i in by_arg:
            from irkit.ir.types import SymDim

            for d, s in zip(a.type.shape, np.shape(by_arg[i][1])):
                if isinstance(d, SymDim) and d.is_symbol:
                    partial[d.name] = int(s)
    rnd = random_inputs(fn, seed, default_bindings(fn, partial))
    out = []
    drawn = []
    for i, (n, r) in enumerate(zip(names, rnd)):
        if i in by_arg:
            out.append(by_arg[i][1])
        else:
            drawn.append(n)
            out.append(r)
    if drawn:
        sys.stderr.write(f"irkit: warning: {path} has no {', '.join(drawn)}; drawn at random (seed {seed})\n")
    try:
        bind_symbols(fn, out)
    except ValueError as e:
        raise InputError(f"{path}: {e}") from None
    return out


def read_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz archive; a missing or foreign file is one clear :class:`InputError`."""
    import zipfile

    from irkit.errors import InputError

    if not Path(path).is_file():
        raise InputError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        raise InputError(f"{path} is not an .npz archive (write inputs with numpy.savez)")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError, zipfile.BadZipFile) as e:
        why = "it holds Python objects, not plain arrays" if "pickle" in str(e) else str(e).splitlines()[0]
        raise InputError(f"{path}: cannot read the .npz archive ({why}); write inputs with numpy.savez") from None


def _cast_input(path: str, key: str, name: str, x: np.ndarray, dt: Any) -> np.ndarray:
    """``x`` as the argument's dtype ``dt``: a cast that keeps every value is a warning, a lossy one an error."""
    from irkit.errors import InputError

    x = np.asarray(x)
    want = dt.np
    if x.dtype == want:
        return x
    label = f"{path}: {key}" + (f" ({name})" if key != name else "")
    if x.dtype.kind not in "biuf" and x.dtype.name != "bfloat16":
        raise InputError(f"{label} is {x.dtype}; the argument is {dt}")
    with np.errstate(all="ignore"):
        y = x.astype(want)
    if dt.is_float:
        # Rounding float64 to a narrower float is the intended use; overflow to inf is not.
        if x.dtype.kind in "f" and np.isfinite(x).all() and not np.isfinite(y.astype(np.float64)).all():
            raise InputError(f"{label}: {x.dtype} values overflow {dt}; the argument is {dt}")
    else:
        with np.errstate(all="ignore"):
            same = np.array_equal(y.astype(np.float64) if x.dtype.kind == "f" else y, x)
        if not same:
            bad = "fractional or out-of-range" if x.dtype.kind == "f" else "out-of-range"
            raise InputError(f"{label} is {x.dtype} with {bad} values; the argument is {dt}: "
                             f"write it as {want} (e.g. x.astype(numpy.{want}))")
    sys.stderr.write(f"irkit: warning: {label} is {x.dtype}; cast to {want} for the {dt} argument\n")
    return y


def save_npz(path: str, arrays: Sequence[np.ndarray], prefix: str = "output") -> None:
    from irkit.fileio import atomic_write

    buf = io.BytesIO()
    named: dict[str, Any] = {f"{prefix}{i}": np.asarray(a) for i, a in enumerate(arrays)}
    np.savez(buf, **named)
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
    passes = parse_pipeline(args.pipeline)  # fail early on a bad pipeline, before reading input
    _check_print_ir_names(args, [p.name for p in passes])

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
        m, pm = process(read_input_module(args.input, need_function=False))
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


def _check_print_ir_names(args: argparse.Namespace, in_pipeline: list[str]) -> None:
    """``--print-ir-before/after=NAME``: an unknown pass is an error (with a did-you-mean), a
    known one that the pipeline does not run is a warning (nothing would be printed)."""
    from irkit.errors import PipelineError
    from irkit.passmanager import get_pass_class

    for flag, names in (("--print-ir-before", args.print_ir_before), ("--print-ir-after", args.print_ir_after)):
        for n in names:
            try:
                get_pass_class(n)
            except PipelineError as e:
                raise PipelineError(f"{flag}={n}: {e}") from None
            if n not in in_pipeline:
                sys.stderr.write(f"irkit: warning: {flag}={n}: '{n}' is not in the pipeline "
                                 f"({', '.join(in_pipeline) or 'empty'}); nothing will be printed for it\n")


# ---------------------------------------------------------------------------
# run


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", help=INPUT_HELP)
    add_pipeline_args(p)
    p.add_argument("--target", default="reference", help="where to run (see `irkit list-targets`)")
    p.add_argument("--inputs", help=".npz with inputs keyed by argument name, or by position as arg0, arg1... "
                   "or arr_0, arr_1... (what numpy.savez(FILE, x, y) writes); missing ones are drawn at random")
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
    p.add_argument("--verbose", dest="global_verbose", action="store_true",
                   help="keep the native libraries' own output (JAX, libtpu, CUDA plugins) on stderr")
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
    if args.global_verbose:
        os.environ["IRKIT_VERBOSE"] = "1"
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
    # Run as ``python -m irkit.cli``: this module is ``__main__``, while irkit/commands/* register
    # into ``irkit.cli.COMMANDS``; dispatch through that module so every command is known.
    from irkit.cli import main as _main

    raise SystemExit(_main())
