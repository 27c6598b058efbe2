"""Export example torch models to ONNX through both torch exporters (a test helper).

``export_example("gpt2_tiny", tmp_dir, exporter="dynamo")`` builds the example
model from ``examples/models`` (a factory returning ``(module, example_inputs,
dynamic_shapes)``), exports it with ``torch.onnx.export(..., dynamo=True)`` or
the TorchScript path (``dynamo=False``), marks the dims the factory declares
dynamic (named ``B``, ``S``... after the factory's ``torch.export.Dim``), and
returns where the file is, the input names and the example inputs as NumPy.

The two exporters spell the same model differently (the TorchScript path
writes every shape computation as ``Shape``/``Gather``/``Unsqueeze``/``Concat``
chains and decomposes SDPA; the dynamo path emits ``Attention`` at opset 23),
which is exactly what a frontend must survive.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import logging
import os
import pkgutil
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

Exporter = Literal["dynamo", "torchscript"]
EXPORTERS: tuple[Exporter, ...] = ("dynamo", "torchscript")
TORCHSCRIPT_DEFAULT_OPSET = 17
"""The TorchScript path exports at opset 17 (the low end irkit supports); dynamo uses torch's default."""


@dataclass
class OnnxExport:
    """One exported model: the .onnx path and what is needed to run it."""

    path: Path
    exporter: Exporter
    opset: int
    input_names: list[str]
    inputs: list[np.ndarray]
    dynamic_dims: dict[str, dict[int, str]]
    model: Any  # the torch module, in eval mode
    torch_inputs: tuple[Any, ...]

    def feeds(self, inputs: list[np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Inputs keyed by ONNX input name (for onnxruntime)."""
        return dict(zip(self.input_names, inputs if inputs is not None else self.inputs))


def _repo_root() -> Path:
    import irkit

    return Path(irkit.__file__).resolve().parents[1]


def find_factory(name: str) -> Callable[[], tuple[Any, tuple[Any, ...], Any]]:
    """The example factory ``name`` (``gpt2_tiny``, ``llama_tiny_sdpa``...) from examples/models."""
    root = _repo_root()
    if (root / "examples").is_dir() and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        reg = importlib.import_module("examples.models.registry")
    except ModuleNotFoundError:
        reg = None
    for attr in ("factory", "get", "get_factory"):
        fn = getattr(reg, attr, None) if reg is not None else None
        if callable(fn):
            try:
                f = fn(name)
            except (KeyError, LookupError, ValueError):
                f = None
            if callable(f):
                return f
    pkg = importlib.import_module("examples.models")
    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name.startswith("_") or info.name == "registry":
            continue
        mod = importlib.import_module(f"examples.models.{info.name}")
        f = getattr(mod, name, None)
        if callable(f):
            return f
    raise KeyError(f"no example model factory named '{name}' in examples/models")


def input_names_of(model: Any, n: int) -> list[str]:
    """The names of the first ``n`` parameters of ``model.forward``."""
    params = [p for p in inspect.signature(model.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in params[:n]]
    return names + [f"input_{i}" for i in range(len(names), n)]


def _dim_names(dynamic_shapes: Any, names: list[str]) -> dict[str, dict[int, str]]:
    if not dynamic_shapes:
        return {}
    items = dynamic_shapes.items() if isinstance(dynamic_shapes, dict) else zip(names, dynamic_shapes)
    out: dict[str, dict[int, str]] = {}
    for name, spec in items:
        if not spec:
            continue
        axes = spec.items() if isinstance(spec, dict) else enumerate(spec)
        out[name] = {int(ax): getattr(d, "__name__", None) or f"{name}_{ax}" for ax, d in axes if d is not None}
    return out


def export_onnx(model: Any, inputs: tuple[Any, ...], dynamic_shapes: Any, path: str | os.PathLike[str], *,
                exporter: Exporter = "dynamo", opset: int | None = None, reuse: bool = False) -> OnnxExport:
    """Export ``model`` to ``path`` with one of the torch exporters; dynamic dims keep their names.

    ``reuse`` keeps an existing file at ``path`` instead of exporting again
    (callers put a content hash in the name, see :func:`export_example`).
    """
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    names = input_names_of(model, len(inputs))
    dims = _dim_names(dynamic_shapes, names)
    if not (reuse and path.is_file()):
        tmp = path.with_name(f".{path.name}.tmp")
        quiet = io.StringIO()
        with warnings.catch_warnings(), contextlib.redirect_stdout(quiet), _quiet_logs(), torch.no_grad():
            warnings.simplefilter("ignore")
            if exporter == "dynamo":
                torch.onnx.export(model, tuple(inputs), str(tmp), dynamo=True, dynamic_shapes=dynamic_shapes,
                                  opset_version=opset, input_names=names, verbose=False, external_data=False)
            elif exporter == "torchscript":
                torch.onnx.export(model, tuple(inputs), str(tmp), dynamo=False,
                                  opset_version=opset or TORCHSCRIPT_DEFAULT_OPSET, input_names=names,
                                  dynamic_axes={k: dict(v) for k, v in dims.items()} or None)
            else:
                raise ValueError(f"unknown exporter '{exporter}' (expected one of {', '.join(EXPORTERS)})")
        tmp.replace(path)
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    got = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    onnx_names = [i.name for i in proto.graph.input if i.name not in {t.name for t in proto.graph.initializer}]
    np_inputs = [t.detach().cpu().numpy() for t in inputs]
    return OnnxExport(path, exporter, got, onnx_names, np_inputs, dims, model, tuple(inputs))


def export_example(name: str, out_dir: str | Path, *, exporter: Exporter = "dynamo",
                   opset: int | None = None, reuse: bool = False, dynamic: bool = True) -> OnnxExport:
    """Build example ``name`` and export it to ``out_dir/<name>.<exporter>[.opsetN].onnx``.

    With ``reuse`` the file name carries a hash of the torch and onnx versions
    and of the example's source, and an existing file is used as is: a
    persistent cache that can never serve a stale export.  ``dynamic=False``
    exports with the example's static shapes.
    """
    factory = find_factory(name)
    model, inputs, dyn = factory()
    if not dynamic:
        dyn = None
    suffix = (f".opset{opset}" if opset else "") + ("" if dynamic else ".static")
    if reuse:
        suffix += "." + _source_key(factory)
    return export_onnx(model, inputs, dyn, Path(out_dir) / f"{name}.{exporter}{suffix}.onnx",
                       exporter=exporter, opset=opset, reuse=reuse)


def _source_key(factory: Callable[..., Any]) -> str:
    import hashlib

    import onnx
    import torch

    h = hashlib.blake2b(digest_size=6)
    h.update(f"{torch.__version__}|{onnx.__version__}".encode())
    for obj in (sys.modules.get(factory.__module__), sys.modules[__name__]):
        try:
            h.update(Path(inspect.getfile(obj)).read_bytes())  # type: ignore[arg-type]
        except (TypeError, OSError):
            pass
    return h.hexdigest()


@contextlib.contextmanager
def _quiet_logs() -> Any:
    names = ["torch.onnx", "torch.export", "torch._dynamo", "torch.fx", "onnxscript", "torch._export"]
    loggers = [logging.getLogger(n) for n in names]
    old = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        yield
    finally:
        for lg, lv in zip(loggers, old):
            lg.setLevel(lv)


__all__ = [
    "EXPORTERS",
    "TORCHSCRIPT_DEFAULT_OPSET",
    "OnnxExport",
    "export_example",
    "export_onnx",
    "find_factory",
    "input_names_of",
]
