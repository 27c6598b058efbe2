"""Reading and writing IR files with their safetensors sidecar.

``model.mlir`` keeps large constants as ``dense_resource<name>``; their bytes
live in ``model.safetensors`` beside it.  Text written to a pipe or terminal
carries them inline as MLIR's ``dialect_resources`` section instead, so it
stands alone.  Both files are written atomically (sidecar first, then the IR),
so a kill never leaves an IR file that points at a missing or partial sidecar.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from irkit.errors import InputError
from irkit.fileio import atomic_write
from irkit.ir.core import Module
from irkit.text.parser import ParseError, parse_module
from irkit.text.printer import Printer

SPLIT_MARKER = re.compile(r"^// -----\s*$", re.M)


def sidecar_path(path: str | Path) -> Path:
    """``model.mlir`` -> ``model.safetensors``."""
    p = Path(path)
    return p.with_suffix(".safetensors")


def load_sidecar(path: str | Path) -> Mapping[str, np.ndarray]:
    """The tensors of a safetensors sidecar (no pickle is ever involved)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    p = Path(path)
    try:
        return load_file(str(p))
    except FileNotFoundError:
        raise InputError(f"{p}: sidecar not found; it holds the IR's dense_resource constants "
                         "and must sit beside the .mlir file") from None
    except (SafetensorError, OSError, ValueError) as e:
        raise InputError(f"{p}: not a valid safetensors file ({e})") from None


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected an IR file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}); is this an IR file?") from None


def parse_text(text: str, filename: str, sidecar: Path | None) -> Module:
    loader = (lambda: load_sidecar(sidecar)) if sidecar is not None else None
    return parse_module(text, filename, resource_loader=loader)


def read_module(path: str) -> Module:
    """Read an IR file (``-`` for stdin) and its sidecar; ParseError/InputError on bad input."""
    text = read_text(path)
    sidecar = None if path == "-" else sidecar_path(path)
    return parse_text(text, "<stdin>" if path == "-" else path, sidecar)


def split_chunks(text: str) -> list[str]:
    """Split on ``// -----`` lines, padding each chunk so line numbers stay true."""
    chunks: list[str] = []
    start = 0
    line = 0
    for m in SPLIT_MARKER.finditer(text):
        body = text[start:m.start()]
        chunks.append("\n" * line + body)
        line += body.count("\n") + 1
        start = m.end()
    chunks.append("\n" * line + text[start:])
    return chunks


def read_modules_split(path: str) -> list[Module | ParseError]:
    """Each ``// -----`` chunk parsed on its own; parse errors are returned, not raised."""
    text = read_text(path)
    name = "<stdin>" if path == "-" else path
    sidecar = None if path == "-" else sidecar_path(path)
    out: list[Module | ParseError] = []
    for chunk in split_chunks(text):
        try:
            out.append(parse_text(chunk, name, sidecar if sidecar is not None and sidecar.exists() else None))
        except ParseError as e:
            out.append(e)
    return out


def module_text(m: Module, inline_resources: bool = True) -> tuple[str, dict]:
    pr = Printer(inline_resources=inline_resources)
    text = pr.module(m)
    return text, pr.resources


def write_module(m: Module, path: str) -> None:
    """Write ``m`` to ``path`` (``-`` for stdout): sidecar first, both atomically."""
    if path == "-":
        text, _ = module_text(m, inline_resources=True)
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    text, resources = module_text(m, inline_resources=False)
    if resources:
        from safetensors.numpy import save

        blob = save({k: np.ascontiguousarray(d.array) for k, d in sorted(resources.items())})
        atomic_write(sidecar_path(path), blob)
    atomic_write(path, text)


__all__ = ["read_module", "write_module", "read_modules_split", "sidecar_path", "split_chunks",
           "module_text", "read_text", "load_sidecar", "parse_text"]
