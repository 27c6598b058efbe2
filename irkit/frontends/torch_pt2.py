"""Reading a ``.pt2`` file (``torch.export.save``) without running anything from it.

Design note.  ``torch.export.load`` in torch 2.13 is not safe on untrusted
files, in five places:

1. weights and constants saved with ``use_pickle`` are read with
   ``torch.load(..., weights_only=False)``: arbitrary unpickling;
2. TorchScript custom objects (``custom_obj_*``) go through
   ``torch._C._pickle_load_obj`` and opaque objects (``opaque_obj_*``) through
   ``pickle.loads``;
3. the example inputs (``data/sample_inputs/*.pt``) are read with
   ``torch.load(weights_only=True)`` and, if that fails, *again* with
   ``weights_only=False``;
4. every symbolic size (``expr_str`` in ``models/*.json``) is parsed with
   ``sympy.sympify``, which calls ``eval`` on the string;
5. node names and targets from the JSON become Python source when the
   ``GraphModule`` is generated and ``exec``-ed; and an archive holding
   AOTInductor artifacts makes ``load_pt2`` dlopen the shared libraries in it.

This reader never calls ``torch.export.load``.  It opens the archive with
:mod:`zipfile`, refuses anything that would need pickle or native code,
reads the weights and constants itself as raw little-endian bytes
(``torch.frombuffer`` + ``as_strided``, bounds-checked against the record),
checks every string in the program JSON that torch would evaluate or turn
into code (symbolic expressions against a small arithmetic grammar, names
against Python's identifier rule, targets against dotted identifiers), and
only then hands the parsed dataclasses to torch's ``ExportedProgramDeserializer``
with no example inputs.  Every failure is one :class:`FrontendError` line that
names the file and the problem.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from irkit.frontends.common import FrontendError

# Entries this reader never opens (torch pickles them, or they are native code).
_SKIPPED_PREFIXES = ("data/sample_inputs/", "data/aotinductor/", "extra/", "data/executorch/",
                     "data/mtia/", ".data/")

# What may appear in a serialized size expression.  torch writes them with
# ``sympy.srepr`` (``Mul(Integer(2), Symbol('s0', positive=True, integer=True))``):
# calls of sympy constructors and of the functions torch's deserializer defines.
_EXPR_FUNCTIONS = frozenset({
    # sympy constructors and relations
    "Symbol", "Integer", "Rational", "Float", "Add", "Mul", "Pow", "Max", "Min", "Abs", "Mod",
    "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "Equality", "Unequality", "StrictLessThan", "LessThan",
    "StrictGreaterThan", "GreaterThan", "And", "Or", "Not", "floor", "ceiling", "Piecewise",
    "ExprCondPair",
    # torch.utils._sympy.functions, as registered by the deserializer
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "CleanDiv", "CeilToInt", "FloorToInt",
    "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv", "IntTrueDiv",
    "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt", "RoundToInt", "RoundDecimal",
    "ToFloat", "Identity",
})
_EXPR_CONSTANTS = frozenset({"True", "False", "true", "false", "oo", "zoo", "nan", "Infinity",
                             "NegativeInfinity", "IntInfinity", "NegativeIntInfinity", "int_oo", "Zero",
                             "One", "NegativeOne", "Half", "S"})
_ASSUMPTIONS = frozenset({"positive", "negative", "nonnegative", "nonpositive", "integer", "real",
                          "finite", "infinite", "zero", "nonzero", "even", "odd", "rational",
                          "commutative", "extended_real", "extended_positive", "extended_negative",
                          "extended_nonnegative", "extended_nonpositive", "precision"})
_EXPR_TOKEN = re.compile(r"\s+|(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
                         r"|(?P<str>'[^'\\]*')|(?P<op>\*\*|<=|>=|==|!=|[-+*/%(),<>=])")
_SYMBOL = re.compile(r"[a-z]{1,4}\d{1,9}")
_TARGET = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*")
_MAX_EXPR = 5000
_MAX_DIGITS = 30
_MAX_DEPTH = 64
_MAX_EXPONENT = 16


class _ExprError(Exception):
    pass


def check_sym_expr(text: str) -> str | None:
    """Why ``text`` is not a safe serialized size expression, or None when it is.

    torch parses these strings with ``sympy.sympify``, that is with ``eval``.
    Accepted: ``srepr`` call trees of the sympy constructors and torch size
    functions above, integers (at most 30 digits), symbol names (``'s0'``) as
    the only string literals, assumption keywords, and the plain infix form of
    the same (``2*s0 + 1``).  No attribute access, subscripts, lambdas or other
    names can get through, and powers must have a small integer exponent, since
    sympy would happily evaluate ``10**10**10``.
    """
    if len(text) > _MAX_EXPR:
        return f"expression longer than {_MAX_EXPR} characters"
    toks: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _EXPR_TOKEN.match(text, pos)
        if m is None:
            return f"character {text[pos]!r} at offset {pos}"
        pos = m.end()
        if m.group(0).isspace():
            continue
        kind = next(k for k in ("num", "id", "str", "op") if m.group(k))
        toks.append((kind, m.group(0)))
    try:
        _Parser(toks).parse()
    except _ExprError as e:
        return str(e)
    return None


class _Parser:
    """expr := unary (binop unary)*; unary := '-'* atom; atom := num | name | call | '(' expr ')'."""

    def __init__(self, toks: list[tuple[str, str]]):
        self.toks = toks
        self.i = 0

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("", "")

    def take(self) -> tuple[str, str]:
        t = self.peek()
        self.i += 1
        return t

    def parse(self) -> None:
        self.expr(0)
        if self.i != len(self.toks):
            raise _ExprError(f"unexpected '{self.peek()[1]}'")

    def expr(self, depth: int) -> tuple[str, str]:
        if depth > _MAX_DEPTH:
            raise _ExprError("expression nested too deeply")
        first = self.unary(depth)
        while self.peek()[0] == "op" and self.peek()[1] not in ("(", ")", ",", "="):
            op = self.take()[1]
            rhs = self.unary(depth)
            if op == "**":
                self._exponent(rhs)
                if self.peek()[1] == "**":
                    raise _ExprError("chained powers")
        return first

    def unary(self, depth: int) -> tuple[str, str]:
        neg = False
        while self.peek()[1] in ("-", "+"):
            neg = self.take()[1] == "-" or neg
        kind, tok = self.take()
        if kind == "num":
            if len(tok) > _MAX_DIGITS:
                raise _ExprError(f"number {tok[:12]}... is too long")
            return ("num", ("-" if neg else "") + tok)
        if kind == "str":
            raise _ExprError(f"string {tok[:20]} outside Symbol(...)/Float(...)")
        if tok == "(":
            inner = self.expr(depth + 1)
            if self.take()[1] != ")":
                raise _ExprError("unbalanced parentheses")
            return inner
        if kind != "id":
            raise _ExprError(f"unexpected '{tok}'")
        if self.peek()[1] == "(":
            self.take()
            return self.call(tok, depth + 1)
        if tok in _EXPR_CONSTANTS or _SYMBOL.fullmatch(tok):
            return ("name", tok)
        raise _ExprError(f"name '{tok}'")

    def call(self, fn: str, depth: int) -> tuple[str, str]:
        if fn not in _EXPR_FUNCTIONS:
            raise _ExprError(f"call of '{fn}'")
        args: list[tuple[str, str]] = []
        while self.peek()[1] != ")":
            kind, tok = self.peek()
            if kind == "str":
                self.take()
                body = tok[1:-1]
                ok = (fn == "Symbol" and not args and _SYMBOL.fullmatch(body)) or \
                     (fn == "Float" and not args and re.fullmatch(r"-?\d+(\.\d*)?([eE][+-]?\d+)?", body)
                      and len(body) <= _MAX_DIGITS + 10)
                if not ok:
                    raise _ExprError(f"string {tok[:20]} in {fn}(...)")
                args.append(("str", body))
            elif kind == "id" and self.i + 1 < len(self.toks) and self.toks[self.i + 1][1] == "=":
                if tok not in _ASSUMPTIONS:
                    raise _ExprError(f"keyword '{tok}='")
                self.take()
                self.take()
                v = self.take()[1]
                if v not in ("True", "False") and not v.isdigit():
                    raise _ExprError(f"{tok}={v[:12]}")
            else:
                args.append(self.expr(depth))
            if self.peek()[1] == ",":
                self.take()
            elif self.peek()[1] != ")":
                raise _ExprError(f"unexpected '{self.peek()[1]}' in {fn}(...)")
        self.take()
        if fn in ("Pow", "PowByNatural", "FloatPow"):
            if len(args) != 2:
                raise _ExprError(f"{fn} with {len(args)} arguments")
            self._exponent(args[1])
        if fn == "Integer":
            if len(args) != 1 or args[0][0] != "num":
                raise _ExprError("Integer(...) of a non-literal")
            return args[0]
        return ("call", fn)

    @staticmethod
    def _exponent(e: tuple[str, str]) -> None:
        kind, tok = e
        if kind != "num" or not re.fullmatch(r"-?\d+", tok) or abs(int(tok)) > _MAX_EXPONENT:
            raise _ExprError("a power whose exponent is not a small integer literal")


def _walk(obj: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """Yield (path, key, value) for every dict entry in a JSON tree."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{path}.{k}" if path else str(k)
            yield p, str(k), v
            yield from _walk(v, p)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")


_NAME_TABLES = ("tensor_values", "sym_int_values", "sym_float_values", "sym_bool_values",
                "custom_obj_values")


def check_program_json(doc: Any) -> str | None:
    """Why the serialized program would make torch evaluate or execute text, or None."""
    if not isinstance(doc, dict) or "graph_module" not in doc:
        return "models JSON has no graph_module"
    for key in (doc.get("range_constraints") or {}):
        why = check_sym_expr(str(key))
        if why:
            return f"range constraint '{str(key)[:40]}': {why}"
    for path, key, v in _walk(doc["graph_module"]):
        if key in ("name", "as_name") and isinstance(v, str):
            if not v.isidentifier():
                return f"{path} = {v[:40]!r} is not an identifier"
        elif key == "target" and isinstance(v, str):
            if not _TARGET.fullmatch(v):
                return f"{path} = {v[:60]!r} is not a dotted name"
        elif key == "expr_str" and isinstance(v, str):
            why = check_sym_expr(v)
            if why:
                return f"{path} = {v[:40]!r}: {why}"
        elif key in ("as_custom_obj", "class_fqn", "custom_obj_values") and v:
            return f"{path}: TorchScript custom objects are loaded with pickle"
        elif key in _NAME_TABLES and isinstance(v, dict):
            for name in v:
                if not str(name).isidentifier():
                    return f"{path} key {str(name)[:40]!r} is not an identifier"
    return None


class _Archive:
    """The records of a .pt2 zip, relative to its single top folder."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.zip = zipfile.ZipFile(path)
        except FileNotFoundError:
            raise FrontendError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise FrontendError(f"{path}: is a directory, expected a .pt2 file") from None
        except zipfile.BadZipFile:
            raise FrontendError(f"{path}: not a .pt2 archive (no zip directory found: not a zip "
                                "file, or a truncated one)") from None
        except OSError as e:
            raise FrontendError(f"{path}: cannot read ({e.strerror or e})") from None
        names = self.zip.namelist()
        roots = {n.split("/", 1)[0] for n in names}
        if len(roots) != 1 or not names:
            self.zip.close()
            raise FrontendError(f"{path}: not a .pt2 archive (expected every record under one "
                                "top folder, as torch.export.save writes)")
        self.root = roots.pop() + "/"
        self.records = {n[len(self.root):]: n for n in names if n.startswith(self.root)}

    def has(self, name: str) -> bool:
        return name in self.records

    def read(self, name: str, limit: int | None = None) -> bytes:
        full = self.records.get(name)
        if full is None:
            raise FrontendError(f"{self.path}: record '{name}' is missing (a corrupt or incomplete .pt2)")
        info = self.zip.getinfo(full)
        if info.compress_type != zipfile.ZIP_STORED and info.compress_size and \
                info.file_size > 1000 * info.compress_size:
            raise FrontendError(f"{self.path}: record '{name}' expands {info.file_size} bytes from "
                                f"{info.compress_size}; refusing a likely zip bomb")
        if limit is not None and info.file_size > limit:
            raise FrontendError(f"{self.path}: record '{name}' is {info.file_size} bytes, over the "
                                f"limit of {limit}")
        try:
            return self.zip.read(full)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
            raise FrontendError(f"{self.path}: record '{name}' is corrupt ({e})") from None

    def close(self) -> None:
        self.zip.close()


def _read_json(ar: _Archive, name: str) -> Any:
    raw = ar.read(name)
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FrontendError(f"{ar.path}: record '{name}' is not valid JSON ({e})") from None


def _tensors(ar: _Archive, config_name: str, base: str, kind: str, model: str) -> dict[str, Any]:
    """Weights or constants of one model from raw records, never from pickles."""
    import torch
    from torch._export.serde.serialize import deserialize_scalar_type

    if not ar.has(config_name):
        legacy = f"{base}{model}.pt"
        if ar.has(legacy):
            raise FrontendError(f"{ar.path}: {kind} are stored in the legacy pickled format "
                                f"('{legacy}'); refusing to unpickle. Re-save with a current torch.export.save")
        raise FrontendError(f"{ar.path}: record '{config_name}' is missing (a corrupt or incomplete .pt2)")
    cfg = _read_json(ar, config_name)
    entries = cfg.get("config") if isinstance(cfg, dict) else None
    if not isinstance(entries, dict):
        raise FrontendError(f"{ar.path}: '{config_name}' has no 'config' table")
    out: dict[str, Any] = {}
    storages: dict[str, Any] = {}
    for fqn, meta in entries.items():
        if not isinstance(meta, dict):
            raise FrontendError(f"{ar.path}: '{config_name}': entry '{fqn}' is malformed")
        path_name = str(meta.get("path_name", ""))
        if meta.get("use_pickle"):
            raise FrontendError(f"{ar.path}: {kind[:-1]} '{fqn}' is stored as a pickle "
                                "(a tensor subclass); refusing to unpickle")
        if not path_name.startswith(("weight_", "tensor_")):
            raise FrontendError(f"{ar.path}: {kind[:-1]} '{fqn}' is a '{path_name.split('_')[0]}' "
                                "object, which torch loads with pickle; refusing it")
        tm = meta.get("tensor_meta")
        if not isinstance(tm, dict):
            raise FrontendError(f"{ar.path}: {kind[:-1]} '{fqn}' has no tensor metadata")
        try:
            dtype = deserialize_scalar_type(tm["dtype"])
            sizes = [_as_int(s) for s in tm["sizes"]]
            strides = [_as_int(s) for s in tm["strides"]]
            offset = _as_int(tm.get("storage_offset", {"as_int": 0}))
        except (KeyError, TypeError, ValueError) as e:
            raise FrontendError(f"{ar.path}: {kind[:-1]} '{fqn}' has malformed metadata ({e})") from None
        if len(sizes) != len(strides) or any(s < 0 for s in sizes) or offset < 0:
            raise FrontendError(f"{ar.path}: {kind[:-1]} '{fqn}' has inconsistent sizes/strides")
        if path_name not in storages:
            raw = ar.read(base + path_name)
            esize = torch.empty((), dtype=dtype).element_size()
            if len(raw) % esize:
                raise FrontendError(f"{ar.path}: record '{base + path_name}' holds {len(raw)} bytes, "
                                    f"not a whole number of {dtype} elements")
            storages[path_name] = (torch.frombuffer(bytearray(raw), dtype=dtype) if raw
                                   else torch.empty(0, dtype=dtype))
        flat = storages[path_name]
        if flat.dtype != dtype:
            flat = flat.view(torch.uint8).view(dtype) if flat.numel() else torch.empty(0, dtype=dtype)
        numel = 1
        for s in sizes:
            numel *= s
        if numel:
            last = offset + sum((s - 1) * st for s, st in zip(sizes, strides))
            if any(st < 0 for st in strides) or last >= flat.numel():
                raise FrontendError(f"{ar.path}: {kind[:-1]} '{fqn}' reaches past the end of its "
                                    f"record (truncated or corrupt data)")
            t = torch.as_strided(flat, sizes, strides, offset)
        else:
            t = torch.empty(sizes, dtype=dtype)
        if meta.get("is_param"):
            t = torch.nn.Parameter(t, requires_grad=bool(tm.get("requires_grad", False)))
        out[fqn] = t
    return out


def _as_int(s: Any) -> int:
    if isinstance(s, dict) and "as_int" in s and isinstance(s["as_int"], int):
        return int(s["as_int"])
    raise ValueError(f"expected a static integer, got {str(s)[:40]}")


DIM_NAMES_RECORD = "irkit_dim_names.json"
"""Extra file (``torch.export.save(..., extra_files=...)``) mapping torch's size
symbols to Dim names, written by :func:`irkit.frontends.torch_export.save_pt2`."""


def read_dim_names(path: str | os.PathLike[str]) -> dict[str, str]:
    """The symbol names stored by ``save_pt2`` in a .pt2 (empty when absent or malformed)."""
    ar = _Archive(Path(path))
    try:
        name = "extra/" + DIM_NAMES_RECORD
        if not ar.has(name):
            return {}
        try:
            doc = json.loads(ar.read(name, limit=1 << 20).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return {}
        if not isinstance(doc, dict):
            return {}
        return {str(k): str(v) for k, v in doc.items()
                if isinstance(v, str) and v.isidentifier() and _SYMBOL.fullmatch(str(k))}
    finally:
        ar.close()


def load_exported_program_safely(path: str | os.PathLike[str], model: str = "model") -> Any:
    """An ``ExportedProgram`` from a ``.pt2`` file; nothing is unpickled, eval-ed or exec-ed
    from the file's text before it is checked (see the module docstring)."""
    try:
        import torch  # noqa: F401
        from torch._export.serde import schema
        from torch._export.serde.serialize import ExportedProgramDeserializer, _dict_to_dataclass
        from torch.export.pt2_archive.constants import ARCHIVE_VERSION_VALUE
    except ImportError:
        raise FrontendError("loading .pt2 files needs PyTorch (pip install 'irkit[torch]')") from None

    p = Path(path)
    if p.is_dir():
        raise FrontendError(f"{p}: is a directory, expected a .pt2 file")
    ar = _Archive(p)
    try:
        if not ar.has("archive_format"):
            raise FrontendError(f"{p}: a zip archive, but not a torch.export .pt2 (no 'archive_format' "
                                "record); a .pt file from torch.save is not an exported program")
        fmt = ar.read("archive_format", limit=64).decode("utf-8", "replace").strip()
        if fmt != "pt2":
            raise FrontendError(f"{p}: archive format is '{fmt[:20]}', expected 'pt2'")
        if ar.has("archive_version"):
            ver = ar.read("archive_version", limit=64).decode("utf-8", "replace").strip()
            if ver != ARCHIVE_VERSION_VALUE:
                raise FrontendError(f"{p}: archive version {ver[:20]} (this torch reads version "
                                    f"{ARCHIVE_VERSION_VALUE})")
        if ar.has("byteorder"):
            order = ar.read("byteorder", limit=64).decode("utf-8", "replace").strip()
            if order != "little":
                raise FrontendError(f"{p}: {order[:20]}-endian tensor data is not supported")
        models = sorted(n[len("models/"):-len(".json")] for n in ar.records
                        if n.startswith("models/") and n.endswith(".json"))
        if not models:
            raise FrontendError(f"{p}: no exported program inside (no 'models/*.json'; an "
                                "AOTInductor-only package cannot be imported)")
        if model not in models:
            raise FrontendError(f"{p}: no program named '{model}' (it holds: {', '.join(models)})")
        doc = _read_json(ar, f"models/{model}.json")
        why = check_program_json(doc)
        if why:
            raise FrontendError(f"{p}: refusing a program that torch would evaluate or execute: {why}")
        state_dict = _tensors(ar, f"data/weights/{model}_weights_config.json", "data/weights/",
                              "weights", model)
        constants = _tensors(ar, f"data/constants/{model}_constants_config.json", "data/constants/",
                             "constants", model)
    finally:
        ar.close()

    try:
        serialized = _dict_to_dataclass(schema.ExportedProgram, doc)
    except Exception as e:  # noqa: BLE001 - any schema mismatch is one line for the user
        raise FrontendError(f"{p}: the program does not match torch's export schema "
                            f"({type(e).__name__}: {_short(e)})") from None
    try:
        # No example inputs: torch would unpickle them (with a weights_only=False fallback).
        return ExportedProgramDeserializer().deserialize(serialized, state_dict, constants, None)
    except Exception as e:  # noqa: BLE001
        raise FrontendError(f"{p}: torch could not rebuild the program ({type(e).__name__}: "
                            f"{_short(e)})") from None


def _short(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0][:300] if s else type(e).__name__


__all__ = ["check_program_json", "check_sym_expr", "load_exported_program_safely"]
