"""Export zoo models to ``.pt2`` (torch.export) and ONNX (the dynamo exporter).

Design note. Both exports first try the entry's dynamic dims (``B``, ``S``...)
and fall back to static shapes when the exporter refuses them (a model that
specialises its sequence length, a position table sized exactly to the
example); the result says which one happened and why, so a status report can
tell "exported dynamic" from "exported static only".  ``strict=False`` is what
transformers documents for torch.export.  The ``.pt2`` is written with
:func:`irkit.frontends.torch_export.save_pt2`, which keeps the Dim names.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irkit.frontends.torch_export import _first_line, save_pt2
from irkit.zoo.build import Size, build, dynamic_shapes, entry


@dataclass
class ZooExport:
    """One export: where it went, and whether its dims are symbolic."""

    path: Path
    dynamic: bool
    """True when the entry's dynamic dims were kept; False when it fell back to static shapes."""
    seconds: float
    note: str = ""
    """Why the dynamic export was refused, when it was."""


class ZooExportError(RuntimeError):
    """The exporter refused the model even with static shapes (one line: which model, which error)."""


def _short(e: BaseException) -> str:
    return f"{type(e).__name__}: {_first_line(e)}"[:400]


def export_module_pt2(module: Any, inputs: tuple[Any, ...], dyn: Any, path: str | os.PathLike[str], *,
                      label: str = "model") -> ZooExport:
    """torch.export ``module`` (dynamic dims ``dyn``, else static) and save it to ``path``."""
    import torch

    t0 = time.perf_counter()
    note = ""
    ep = None
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if dyn is not None:
            try:
                ep = torch.export.export(module, tuple(inputs), dynamic_shapes=dyn, strict=False)
            except Exception as e:  # noqa: BLE001 - any refusal: try static shapes
                note = f"dynamic dims refused ({_short(e)})"
        if ep is None:
            try:
                ep = torch.export.export(module, tuple(inputs), strict=False)
            except Exception as e:  # noqa: BLE001
                raise ZooExportError(f"{label}: torch.export failed: {_short(e)}") from None
    dynamic = dyn is not None and not note
    save_pt2(ep, path, dynamic_shapes=dyn if dynamic else None)
    return ZooExport(Path(path), dynamic, time.perf_counter() - t0, note)


@contextlib.contextmanager
def _onnx_exportable_experts(module: Any) -> Iterator[None]:
    """Mixture-of-experts layers as batched matmuls while exporting to ONNX.

    transformers 5 runs MoE experts through ``grouped_mm`` by default, which torch.export keeps as
    the custom op ``transformers.grouped_mm_fallback`` (the torch frontend imports it) but the
    dynamo ONNX exporter has no translation for.  Its ``batched_mm`` implementation (gather each
    token's expert weights, then ``bmm``) computes the same function from standard ops, so the
    export switches to it and restores the model's own choice afterwards."""
    saved: list[tuple[Any, Any]] = []
    seen: set[int] = set()
    for m in module.modules():
        cfg = getattr(m, "config", None)
        if (type(m).__name__.endswith("Experts") and cfg is not None and id(cfg) not in seen
                and getattr(cfg, "_experts_implementation", "batched_mm") != "batched_mm"):
            seen.add(id(cfg))
            saved.append((cfg, cfg._experts_implementation))
            cfg._experts_implementation = "batched_mm"
    try:
        yield
    finally:
        for cfg, impl in saved:
            cfg._experts_implementation = impl


def export_module_onnx(module: Any, inputs: tuple[Any, ...], dyn: Any, path: str | os.PathLike[str], *,
                       label: str = "model") -> ZooExport:
    """``torch.onnx.export(dynamo=True)`` of ``module`` (dynamic dims ``dyn``, else static) to ``path``."""
    with _onnx_exportable_experts(module):
        return _export_module_onnx(module, inputs, dyn, path, label=label)


def _export_module_onnx(module: Any, inputs: tuple[Any, ...], dyn: Any, path: str | os.PathLike[str], *,
                        label: str) -> ZooExport:
    from irkit.testing.onnx_export import export_onnx

    t0 = time.perf_counter()
    note = ""
    if dyn is not None:
        try:
            export_onnx(module, tuple(inputs), dyn, path, exporter="dynamo")
            return ZooExport(Path(path), True, time.perf_counter() - t0)
        except Exception as e:  # noqa: BLE001 - any refusal: try static shapes
            note = f"dynamic dims refused ({_short(e)})"
    try:
        export_onnx(module, tuple(inputs), None, path, exporter="dynamo")
    except Exception as e:  # noqa: BLE001
        raise ZooExportError(f"{label}: torch.onnx.export(dynamo=True) failed: {_short(e)}") from None
    return ZooExport(Path(path), False, time.perf_counter() - t0, note)


def export_pt2(name: str, size: Size, path: str | os.PathLike[str], *, dynamic: bool = True,
               **build_kw: Any) -> ZooExport:
    """Build zoo model ``name`` at ``size`` and save its torch.export program to ``path``."""
    module, inputs = build(name, size, **build_kw)
    dyn = dynamic_shapes(entry(name), inputs) if dynamic else None
    return export_module_pt2(module, inputs, dyn, path, label=f"zoo:{name}:{size}")


def export_onnx(name: str, size: Size, path: str | os.PathLike[str], *, dynamic: bool = True,
                **build_kw: Any) -> ZooExport:
    """Build zoo model ``name`` at ``size`` and export it to ONNX at ``path`` (dynamo exporter)."""
    module, inputs = build(name, size, **build_kw)
    dyn = dynamic_shapes(entry(name), inputs) if dynamic else None
    return export_module_onnx(module, inputs, dyn, path, label=f"zoo:{name}:{size}")


__all__ = ["ZooExport", "ZooExportError", "export_module_onnx", "export_module_pt2", "export_onnx", "export_pt2"]
