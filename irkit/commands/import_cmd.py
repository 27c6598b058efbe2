"""``irkit import`` and ``irkit coverage``."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from irkit.cli import args_for, command, import_zoo, write_output_module
from irkit.errors import InputError


def _dynamic(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k or not v.isdigit():
            raise InputError(f"--dynamic: expected NAME=AXIS like S=1, got '{it}'")
        out[k] = int(v)
    return out


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help=".pt2, .onnx, StableHLO/HLO text, or FILE.py:FACTORY")
    p.add_argument("-o", "--output", required=True, help="output IR file (.mlir; weights go to .safetensors beside it)")
    p.add_argument("--format", choices=["torch", "onnx", "jax", "stablehlo", "hlo"])
    p.add_argument("--dynamic", action="append", default=[], metavar="NAME=AXIS",
                   help="make AXIS of every input a symbolic dim NAME (factories only; repeatable)")
    p.add_argument("--name", default="main", help="name of the entry function")


@command("import", "import a model from torch.export, ONNX or JAX into irkit IR")
@args_for(_import_args)
def cmd_import(args: argparse.Namespace) -> int:
    from irkit.frontends import import_source
    from irkit.ir.verify import verify

    if args.source.startswith(("zoo:", "zoo-flax:")):
        m = import_zoo(args.source)
    else:
        m = import_source(args.source, args.format, _dynamic(args.dynamic), args.name)
    verify(m)
    write_output_module(m, args.output)
    ops = Counter(op.name for op in m.walk())
    top = ", ".join(f"{n} x{c}" for n, c in ops.most_common(6))
    if args.output != "-":
        print(f"{args.source}: {sum(ops.values())} ops ({top}) -> {args.output}")
    return 0


def source_ops(source: str, fmt: str | None) -> tuple[str, Counter[str]]:
    """The frontend name and the source-level op counts of ``source`` (.onnx, .pt2, FILE.py:FACTORY)."""
    from irkit.frontends import guess_format

    fmt = fmt or guess_format(source)
    if fmt == "onnx":
        import onnx

        try:
            model = onnx.load(source, load_external_data=False)
        except Exception as e:  # noqa: BLE001 - a broken file is reported by import; here one line
            raise InputError(f"{source}: not a readable ONNX model ({e})") from None
        return "onnx", Counter(n.op_type if not n.domain else f"{n.domain}.{n.op_type}" for n in model.graph.node)
    if fmt in ("torch", "factory"):
        from irkit.frontends.torch_export import is_torch_factory_result, load_factory_spec, op_key

        if fmt == "factory":
            result, _ = load_factory_spec(source)
            if is_torch_factory_result(result):
                import torch

                dyn = result[2] if len(result) == 3 else None
                ep = torch.export.export(result[0], tuple(result[1]), dynamic_shapes=dyn)
            else:
                import jax

                jaxpr = jax.make_jaxpr(result[0])(*result[1])
                return "jax", _jaxpr_prims(jaxpr.jaxpr)
        else:
            # The same safe reader `irkit import` uses: nothing in the archive is unpickled or executed.
            from irkit.frontends.torch_pt2 import load_exported_program_safely

            ep = load_exported_program_safely(source)
        return "torch", Counter(op_key(n.target) for n in ep.graph.nodes if n.op == "call_function")
    raise InputError(f"{source}: coverage reads ONNX files, .pt2 archives and FILE.py:FACTORY sources "
                     f"(this looks like {fmt}); `irkit coverage --ops` shows what each target lowers")


def _jaxpr_prims(jaxpr: Any) -> Counter[str]:
    c: Counter[str] = Counter()
    for eqn in jaxpr.eqns:
        c[eqn.primitive.name] += 1
        for v in eqn.params.values():
            inner = getattr(v, "jaxpr", None)
            if inner is not None:
                c.update(_jaxpr_prims(getattr(inner, "jaxpr", inner)))
    return c


def frontend_supported(frontend: str) -> set[str] | None:
    try:
        if frontend == "onnx":
            from irkit.frontends.onnx_ops import supported_ops
        elif frontend == "torch":
            from irkit.frontends.torch_export import supported_ops
        else:
            from irkit.frontends.jax import supported_ops  # type: ignore[attr-defined,no-redef]
    except ImportError:
        return None
    return set(supported_ops())


def _coverage_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", nargs="?", help=".onnx, .pt2 or FILE.py:FACTORY (omit with --ops)")
    p.add_argument("--format", choices=["torch", "onnx", "jax"])
    p.add_argument("--ops", action="store_true",
                   help="no model: the full IR op x target matrix, from the targets' lowering tables")
    p.add_argument("--targets", default="", metavar="T,...", help="only these targets' columns")


def _targets(names: str) -> list[Any]:
    from irkit.targets.registry import get_target, list_targets

    wanted = [n.strip() for n in names.split(",") if n.strip()]
    return [get_target(n) for n in wanted] if wanted else list_targets()


def _console() -> Any:
    import sys

    from rich.console import Console

    return Console(width=None if sys.stdout.isatty() else 200)


def _op_matrix(targets: list[Any]) -> int:
    from rich.table import Table

    from irkit.conformance.coverage import op_matrix, table_ops
    from irkit.ir.ops import OPS

    matrix = op_matrix(targets)
    t = Table(title=f"IR ops x targets ({len(matrix)} ops; from each target's lowering table)")
    t.add_column("IR op")
    t.add_column("summary")
    for tg in targets:
        t.add_column(tg.name)
    for op, row in matrix.items():
        t.add_row(op, OPS[op].summary[:48], *("yes" if row[tg.name] else "NO" for tg in targets))
    t.add_row("total", "", *(f"{len(table_ops(tg))}/{len(matrix)}" for tg in targets), end_section=True)
    _console().print(t)
    return 0


@command("coverage", "which of a model's ops each frontend and each target supports (--ops: every op x target)")
@args_for(_coverage_args)
def cmd_coverage(args: argparse.Namespace) -> int:
    from rich.table import Table

    from irkit.conformance.coverage import STRUCTURAL
    from irkit.frontends import import_source
    from irkit.frontends.common import UnsupportedOpsError

    targets = _targets(args.targets)
    if args.ops:
        if args.source:
            raise InputError("--ops shows every op and takes no model; drop the source or --ops")
        return _op_matrix(targets)
    if not args.source:
        raise InputError("give a model (.onnx, .pt2 or FILE.py:FACTORY), or --ops for the op x target matrix")
    frontend, ops = source_ops(args.source, args.format)
    sup = frontend_supported(frontend)
    console = _console()
    t1 = Table(title=f"{Path(args.source).name}: source ops ({frontend} frontend)")
    t1.add_column("op")
    t1.add_column("count", justify="right")
    t1.add_column(f"{frontend} frontend")
    for name, n in sorted(ops.items()):
        packet = ".".join(name.split(".")[:2])
        ok = "?" if sup is None else ("yes" if name in sup or packet in sup or name.split(".")[-1] in sup else "NO")
        t1.add_row(name, str(n), ok)
    console.print(t1)
    try:
        m = import_source(args.source, args.format)
    except UnsupportedOpsError as e:
        console.print(f"import fails: {e}")
        return 1
    ir_ops = Counter(op.name for op in m.walk() if op.name not in STRUCTURAL)
    t2 = Table(title="IR ops after import, by target (from each target's lowering table)")
    t2.add_column("IR op")
    t2.add_column("count", justify="right")
    for t in targets:
        t2.add_column(t.name)
    for name, n in sorted(ir_ops.items()):
        t2.add_row(name, str(n), *("yes" if t.supports(name) else "NO" for t in targets))
    console.print(t2)
    return 0
