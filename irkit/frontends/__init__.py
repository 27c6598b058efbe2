"""Frontends: torch.export, ONNX and JAX (jaxpr, StableHLO, HLO) into the common IR.

:func:`import_source` is the one entry point the command line uses: it guesses
the format from the file (or the object a ``file.py:factory`` returns) and
hands it to the right frontend.  Each frontend is imported only when needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from irkit.frontends.common import FrontendError
from irkit.ir.core import Module

FORMATS = ("torch", "onnx", "jax", "stablehlo", "hlo")


def guess_format(source: str) -> str:
    """The frontend for ``source`` from its name and, for text files, its first bytes."""
    if ":" in source and source.rsplit(":", 1)[0].endswith(".py"):
        return "factory"
    p = Path(source)
    suffix = p.suffix.lower()
    if suffix == ".pt2":
        return "torch"
    if suffix == ".onnx":
        return "onnx"
    if suffix in (".hlo",):
        return "hlo"
    if not p.exists():
        raise FrontendError(f"{source}: no such file")
    if p.is_dir():
        raise FrontendError(f"{source}: is a directory; expected a .pt2, .onnx, StableHLO/HLO text or FILE.py:FACTORY")
    head = p.open("rb").read(4096)
    if head.startswith(b"PK"):
        return "torch"
    text = head.decode("utf-8", errors="replace")
    if "HloModule" in text:
        return "hlo"
    if "stablehlo." in text or "module @" in text or "func.func public" in text:
        return "stablehlo"
    if suffix in (".mlir", ".txt"):
        return "stablehlo"
    raise FrontendError(f"{source}: cannot tell its format; pass --format torch|onnx|jax|stablehlo|hlo")


def _check_dynamic_axes(inputs: Sequence[Any], dynamic: dict[str, int]) -> None:
    """Refuse a ``--dynamic NAME=AXIS`` that names no axis of any input (else it is a no-op)."""
    ranks = [len(x.shape) for x in inputs if hasattr(x, "shape")]
    for n, ax in dynamic.items():
        if not any(r > ax for r in ranks):
            shown = ", ".join(str(r) for r in ranks) if ranks else "none (no tensor inputs)"
            raise FrontendError(f"--dynamic {n}={ax}: axis {ax} is out of range; the inputs have ranks "
                                f"{shown}; pass an axis below the largest rank")


def _dynamic_shapes(inputs: Sequence[Any], dynamic: dict[str, int]) -> Any:
    """torch.export dynamic_shapes giving dim AXIS of every tensor input the name NAME."""
    import torch

    dims = {name: torch.export.Dim(name) for name in dynamic}
    spec = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            spec.append({ax: dims[n] for n, ax in dynamic.items() if ax < x.dim()} or None)
        else:
            spec.append(None)
    return tuple(spec)


def _polymorphic_shapes(args: Sequence[Any], dynamic: dict[str, int]) -> list[str | None]:
    """jax.export shape specs giving dim AXIS of every array argument the name NAME
    (``"_, S, ..."``: ``_`` keeps the example's size); None for arguments without such a dim."""
    specs: list[str | None] = []
    for x in args:
        rank = len(getattr(x, "shape", ()))
        parts = ["_"] * rank
        for n, ax in dynamic.items():
            if ax < rank:
                parts[ax] = n
        specs.append(", ".join(parts) if any(p != "_" for p in parts) else None)
    return specs


def import_source(source: str, format: str | None = None, dynamic: dict[str, int] | None = None,
                  name: str = "main") -> Module:
    """Import ``source`` (see :func:`_import_source`); a malformed file that trips an
    unexpected error inside a frontend still gets one line naming the file."""
    from irkit.errors import IrkitError

    try:
        return _import_source(source, format, dynamic, name)
    except (IrkitError, KeyboardInterrupt):
        raise
    except (TypeError, ValueError, KeyError, IndexError, NotImplementedError, AttributeError, OSError,
            RuntimeError, EOFError) as e:
        # Corrupt inputs reach code paths that assume well-formed protobufs/archives;
        # the user needs the file and the problem, not a traceback.
        msg = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
        raise FrontendError(f"{source}: cannot import ({type(e).__name__}: {msg}); the file looks corrupt or "
                            "uses a construct irkit does not handle") from None


def _mentions_jax(source: str) -> bool:
    """Whether a ``file.py:factory`` source file imports JAX (read as text, not run)."""
    try:
        text = Path(source.rsplit(":", 1)[0]).read_text(errors="replace")
    except OSError:
        return False
    return "import jax" in text or "from jax" in text or "import flax" in text or "from flax" in text


def _import_source(source: str, format: str | None = None, dynamic: dict[str, int] | None = None,
                   name: str = "main") -> Module:
    """Import ``source``: a ``.pt2``, an ``.onnx``, StableHLO or HLO text, or ``file.py:factory``.

    A factory returns ``(torch.nn.Module, example_inputs[, dynamic_shapes])`` or
    ``(jax_function, example_args[, polymorphic_shapes])``.  ``dynamic`` (NAME ->
    AXIS) makes that axis of every input a symbolic dim, for factories that do
    not say so themselves.
    """
    fmt = format or guess_format(source)
    if fmt not in FORMATS + ("factory",):
        raise FrontendError(f"unknown format '{fmt}' (expected one of {', '.join(FORMATS)})")
    is_factory = ":" in source and source.rsplit(":", 1)[0].endswith(".py")
    if is_factory:
        from irkit.frontends.torch_export import (
            import_torch_factory,
            is_torch_factory_result,
            load_factory_spec,
        )

        if _mentions_jax(source):
            from irkit.quiet import start_jax_quietly

            start_jax_quietly()  # before the factory's first JAX array starts libtpu, which warns without a TPU
        result, label = load_factory_spec(source)
        if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
            raise FrontendError(f"{label}: a factory must return (model, example_inputs[, dynamic_shapes])")
        if is_torch_factory_result(result) and fmt in ("factory", "torch"):
            dyn = result[2] if len(result) == 3 else None
            if dyn is None and dynamic:
                _check_dynamic_axes(result[1], dynamic)
                dyn = _dynamic_shapes(result[1], dynamic)
            return import_torch_factory(result[0], result[1], dyn, name=name)
        if callable(result[0]) and fmt in ("factory", "jax", "stablehlo"):
            from irkit.frontends.jax import import_jax

            poly = result[2] if len(result) == 3 else None
            if poly is None and dynamic:
                _check_dynamic_axes(result[1], dynamic)
                poly = _polymorphic_shapes(result[1], dynamic)
            if fmt == "stablehlo":
                import jax

                from irkit.frontends.jax_stablehlo import import_stablehlo

                if poly is not None:
                    # jax.export keeps the symbols; its module carries the source locations.
                    specs = jax.export.symbolic_args_specs(result[1], poly)
                    return import_stablehlo(jax.export.export(jax.jit(result[0]))(*specs), name=name)
                # The Lowered object, not its as_text(): the importer asks it for the debug
                # info, so op locations are the JAX source's file:line.
                return import_stablehlo(jax.jit(result[0]).lower(*result[1]), name=name)
            return import_jax(result[0], result[1], polymorphic_shapes=poly, name=name)
        raise FrontendError(f"{label}: the factory returned {type(result[0]).__name__}; expected a torch.nn.Module "
                            "or a JAX function as the first element")
    if dynamic:
        raise FrontendError("--dynamic applies to FILE.py:FACTORY sources; files carry their own dynamic dims")
    if fmt == "torch":
        from irkit.frontends.torch_export import load_pt2

        return load_pt2(source, name=name)
    if fmt == "onnx":
        from irkit.frontends.onnx import import_onnx

        return import_onnx(source, name=name)
    if fmt == "stablehlo":
        from irkit.frontends.jax_stablehlo import import_stablehlo

        return import_stablehlo(Path(source), name=name)
    if fmt == "hlo":
        from irkit.frontends.jax_stablehlo import import_hlo

        return import_hlo(Path(source), name=name)
    raise FrontendError(f"{source}: format '{fmt}' needs a FILE.py:FACTORY source")


__all__ = ["FORMATS", "FrontendError", "guess_format", "import_source"]
