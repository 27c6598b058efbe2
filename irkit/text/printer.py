"""Printing modules as MLIR generic syntax.

The output is valid MLIR generic form, so ``mlir-opt --allow-unregistered-dialect``
reads it: ``"builtin.module"`` holding ``"func.func"`` ops, every op as
``%r = "ik.name"(%a, %b) ({regions}) {attrs} : (types) -> types loc(...)``.
Symbolic dims print as ``?`` with their names in the tensor encoding.  Printing
is deterministic: values are numbered in order, attributes sorted by name.

Constants with more than ``inline_limit`` elements (and not splats) print as
``dense_resource<name>``; their bytes are collected in ``resources`` for the
caller to store in a safetensors sidecar, or are appended as MLIR's own
``{-# dialect_resources ... #-}`` section when ``inline_resources`` is set
(used when printing to a terminal or a pipe, so the text stands alone).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from irkit.ir.core import Dense, Function, Graph, Location, Module, Op, Value, gc_paused
from irkit.ir.types import DType, SymDim, TensorType

INLINE_LIMIT = 16
_LOC_STR: dict[Location, str] = {}
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_SSA = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


_PLAIN = re.compile(r'[ !#-\[\]-~]*\Z')


def escape_string(s: str) -> str:
    if _PLAIN.match(s):
        return '"' + s + '"'
    out = []
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        else:
            for b in ch.encode("utf-8"):
                out.append(f"\\{b:02X}")
    return '"' + "".join(out) + '"'


def format_float(v: float, dtype: DType = DType.f64) -> str:
    """An MLIR float literal that parses back to exactly ``v`` in ``dtype``."""
    if not math.isfinite(v):
        return _hex_bits(v, dtype)
    if dtype is DType.f32:
        s = str(np.float32(v))
    elif dtype is DType.f16:
        s = str(np.float16(v))
    else:
        s = repr(float(v))
    if "e" in s or "E" in s:
        mant, _, exp = s.lower().partition("e")
        if "." not in mant:
            mant += ".0"
        return f"{mant}e{exp}"
    return s if "." in s else s + ".0"


def _hex_bits(v: float, dtype: DType) -> str:
    if dtype is DType.bf16:
        bits = np.array(v, dtype=np.float32).view(np.uint32) >> 16
        return f"0x{int(bits):04X}"
    npdt = dtype.np if dtype.is_float8 else {DType.f16: np.float16, DType.f32: np.float32}.get(dtype, np.float64)
    raw = np.array(v, dtype=np.float64).astype(npdt)
    width = raw.dtype.itemsize * 2
    return f"0x{int(raw.view(f'u{raw.dtype.itemsize}')):0{width}X}"


def type_str(t: TensorType) -> str:
    return str(t)


def location_str(loc: Location, top: bool = True) -> str:
    if loc.fused:
        body = "fused[" + ", ".join(location_str(x, False) for x in loc.fused) + "]"
    elif loc.file is not None:
        flc = f"{escape_string(loc.file)}:{loc.line}:{loc.col}"
        body = f"{escape_string(loc.name)}({flc})" if loc.name is not None else flc
    elif loc.name is not None:
        body = escape_string(loc.name)
    else:
        body = "unknown"
    return f"loc({body})" if top else body


class Printer:
    """Prints one module; reusable options, fresh state per call."""

    def __init__(self, inline_limit: int = INLINE_LIMIT, print_locations: bool = True,
                 inline_resources: bool = False, elide_resources: bool = False):
        self.inline_limit = inline_limit
        self.print_locations = print_locations
        self.inline_resources = inline_resources
        self.elide_resources = elide_resources
        self.resources: dict[str, Dense] = {}
        self._names: dict[int, str] = {}
        self._counter = 0
        self._used_resource_names: dict[str, Dense] = {}
        # Identity caches for one print call (entries hold their key object, so an id
        # is never mistaken for a later object's): type -> text, attribute dict -> text.
        self._type_text: dict[int, tuple[TensorType, str]] = {}
        self._attr_text: dict[int, tuple[Any, str]] = {}
        self._loc_text: dict[int, tuple[Location, str]] = {}

    # -- entry points --------------------------------------------------------
    def module(self, m: Module) -> str:
        with gc_paused():  # printing frees what it allocates; no collector scans needed
            return self._module(m)

    def _module(self, m: Module) -> str:
        self.resources = {}
        self._used_resource_names = {}
        self._type_text = {}
        self._attr_text = {}
        self._loc_text = {}
        lines: list[str] = ['"builtin.module"() ({']
        for f in m.functions:
            self._function(f, lines, "  ")
        attrs = self._attr_dict(m.attrs)
        lines.append("})" + (f" {attrs}" if attrs else "") + " : () -> ()")
        text = "\n".join(lines) + "\n"
        if self.inline_resources and self.resources:
            text += resource_section(self.resources)
        return text

    def function(self, f: Function) -> str:
        lines: list[str] = []
        self._function(f, lines, "")
        return "\n".join(lines) + "\n"

    # -- structure -------------------------------------------------------------
    def _function(self, f: Function, lines: list[str], ind: str) -> None:
        self._names = {}
        self._counter = 0
        lines.append(f'{ind}"func.func"() ({{')
        self._block_header(f.body, lines, ind, use_arg_names=True)
        self._ops(f.body, lines, ind + "  ")
        ftype = "(" + ", ".join(map(str, f.arg_types)) + ") -> " + _results_type(f.result_types)
        attrs: dict[str, Any] = {k: v for k, v in f.attrs.items()}
        body = ", ".join([f"function_type = {ftype}", f"sym_name = {escape_string(f.name)}"] +
                         [f"{k} = {_pairs_attr(v, self) if k in _PAIR_ATTRS else self.attr(v)}"
                          for k, v in sorted(attrs.items())])
        loc = self._loc(f.loc)
        lines.append(f"{ind}}}) {{{body}}} : () -> (){loc}")

    def _block_header(self, g: Graph, lines: list[str], ind: str, use_arg_names: bool) -> None:
        parts = []
        taken = set(self._names.values())
        for a in g.args:
            name = a.name if use_arg_names and a.name and _SSA.fullmatch(a.name) and not a.name.isdigit() else None
            if name is None or f"%{name}" in taken:
                name = f"arg{self._counter}"
                self._counter += 1
            self._names[id(a)] = f"%{name}"
            taken.add(f"%{name}")
            parts.append(f"%{name}: {a.type}")
        lines.append(f"{ind}^bb0({', '.join(parts)}):")

    def _ops(self, g: Graph, lines: list[str], ind: str) -> None:
        for op in g:
            self._op(op, lines, ind)

    def _value(self, v: Value) -> str:
        n = self._names.get(id(v))
        if n is not None:
            return n
        return "%<<undefined>>"

    def _type(self, t: TensorType) -> str:
        hit = self._type_text.get(id(t))
        if hit is not None and hit[0] is t:
            return hit[1]
        text = str(t)
        self._type_text[id(t)] = (t, text)
        return text

    def _op(self, op: Op, lines: list[str], ind: str) -> None:
        res = ""
        results = op.results
        names = self._names
        if results:
            base = f"%{self._counter}"
            self._counter += 1
            if len(results) == 1:
                names[id(results[0])] = base
                res = base + " = "
            else:
                for i, r in enumerate(results):
                    names[id(r)] = f"{base}#{i}"
                res = f"{base}:{len(results)} = "
        tstr = self._type
        operands = op._operands
        head = f'{ind}{res}"{op.name}"(' + ", ".join([names.get(id(v)) or "%<<undefined>>" for v in operands]) + ")"
        attrs = self._attr_dict(op.attrs)
        if len(results) == 1:
            outs = tstr(results[0].type)
        else:
            outs = "(" + ", ".join([tstr(r.type) for r in results]) + ")"
        sig = "(" + ", ".join([tstr(v.type) for v in operands]) + ") -> " + outs
        loc = self._loc(op.loc)
        if op.regions:
            lines.append(head + " ({")
            for k, region in enumerate(op.regions):
                if k:
                    lines.append(f"{ind}}}, {{")
                self._block_header(region, lines, ind, use_arg_names=False)
                self._ops(region, lines, ind + "  ")
            lines.append(f"{ind}}})" + (f" {attrs}" if attrs else "") + f" : {sig}{loc}")
        else:
            lines.append(head + (f" {attrs}" if attrs else "") + f" : {sig}{loc}")

    def _loc(self, loc: Location) -> str:
        hit = self._loc_text.get(id(loc))
        if hit is not None and hit[0] is loc:
            return hit[1]
        if not self.print_locations or loc.is_unknown:
            s = ""
        else:
            s = _LOC_STR.get(loc)  # type: ignore[assignment]
            if s is None:
                s = " " + location_str(loc)
                if len(_LOC_STR) < 100_000:
                    _LOC_STR[loc] = s
        self._loc_text[id(loc)] = (loc, s)
        return s

    # -- attributes --------------------------------------------------------------
    def _attr_dict(self, attrs: Any) -> str:
        if not attrs:
            return ""
        hit = self._attr_text.get(id(attrs))
        if hit is not None and hit[0] is attrs:
            return hit[1]
        cacheable = True
        parts = []
        for k, v in sorted(attrs.items()):
            if type(v) is Dense:
                cacheable = False  # resource naming depends on what was printed before
            parts.append(f"{_key(k)} = {self.attr(v)}")
        text = "{" + ", ".join(parts) + "}"
        if cacheable:
            self._attr_text[id(attrs)] = (attrs, text)
        return text

    def attr(self, v: Any) -> str:
        t = type(v)
        if t is tuple:
            if v and all(type(x) is int for x in v):
                return "array<i64: " + ", ".join(map(str, v)) + ">"
        elif t is Dense:
            return self.dense(v)
        elif t is int:
            return f"{v} : i64"
        elif t is bool:
            return "true" if v else "false"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return f"{v} : i64"
        if isinstance(v, float):
            return f"{format_float(v)} : f64"
        if isinstance(v, str):
            return escape_string(v)
        if isinstance(v, DType):
            return str(v)
        if isinstance(v, TensorType):
            return str(v)
        if isinstance(v, SymDim):
            return escape_string(str(v))
        if isinstance(v, Dense):
            return self.dense(v)
        if isinstance(v, tuple):
            if v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                return "array<i64: " + ", ".join(map(str, v)) + ">"
            if not v:
                return "array<i64>"
            if all(isinstance(x, float) for x in v):
                return "array<f64: " + ", ".join(format_float(x) for x in v) + ">"
            return "[" + ", ".join(self.attr(x) for x in v) + "]"
        raise TypeError(f"cannot print attribute {v!r}")

    def dense(self, d: Dense) -> str:
        t = d.type
        if d.size <= self.inline_limit or d.is_splat:
            return f"dense<{dense_literal(d)}> : {t}"
        name = self._resource_name(d)
        self.resources[name] = d
        return f"dense_resource<{name}> : {t}"

    def _resource_name(self, d: Dense) -> str:
        base = _resource_base(d.resource or "__ik_const")
        name, k = base, 0
        used = self._used_resource_names
        # Digests are compared only when two constants want the same name.
        while name in used and used[name] is not d and used[name].digest() != d.digest():
            k += 1
            name = f"{base}_{k}"
        used[name] = d
        return name


_RESOURCE_BASE: dict[str, str] = {}


def _resource_base(name: str) -> str:
    """A resource name usable bare in MLIR text (cached: models reuse few names)."""
    base = _RESOURCE_BASE.get(name)
    if base is None:
        base = re.sub(r"[^A-Za-z0-9_$.]", "_", name)
        if not _BARE.fullmatch(base):
            base = "_" + base
        if len(_RESOURCE_BASE) < 100_000:
            _RESOURCE_BASE[name] = base
    return base


_KEY_TEXT: dict[str, str] = {}


# Function attributes holding [output, arg] pairs (irkit.ir.aliases), printed as ``[[0, 3], [1, 4]]``.
_PAIR_ATTRS = frozenset({"aliases", "cache_pairs"})


def _pairs_attr(v: Any, printer: Printer) -> str:
    if isinstance(v, tuple) and all(isinstance(p, tuple) and all(type(x) is int for x in p) for p in v):
        return "[" + ", ".join("[" + ", ".join(map(str, p)) + "]" for p in v) + "]"
    return printer.attr(v)


def _key(k: str) -> str:
    text = _KEY_TEXT.get(k)
    if text is None:
        text = k if _BARE.fullmatch(k) else escape_string(k)
        if len(_KEY_TEXT) < 10_000:
            _KEY_TEXT[k] = text
    return text


def _results_type(types: Iterable[TensorType]) -> str:
    ts = list(types)
    if len(ts) == 1:
        return str(ts[0])
    return "(" + ", ".join(map(str, ts)) + ")"


def _elem(x: Any, dt: DType) -> str:
    if dt.is_bool:
        return "true" if bool(x) else "false"
    if dt.is_int:
        return str(int(x))
    return format_float(float(x), dt)


def dense_literal(d: Dense) -> str:
    """The body of ``dense<...>``: a splat scalar or nested lists."""
    dt = d.dtype
    if d.is_splat and d.size >= 1:
        return _elem(d.splat_value(), dt)
    a = d.array
    if a.ndim == 0:
        return _elem(a.item(), dt)

    def rec(x: np.ndarray) -> str:
        if x.ndim == 1:
            return "[" + ", ".join(_elem(e, dt) for e in x.tolist()) + "]"
        return "[" + ", ".join(rec(s) for s in x) + "]"

    if a.size == 0:
        return "[]"
    vals = a.astype(np.float32) if dt is DType.bf16 or dt.is_float8 else a
    return rec(vals)


def resource_section(resources: dict[str, Dense]) -> str:
    """MLIR's ``dialect_resources`` section: hex blobs prefixed by their alignment."""
    lines = ["", "{-#", "  dialect_resources: {", "    builtin: {"]
    items = sorted(resources.items())
    for i, (name, d) in enumerate(items):
        align = max(d.dtype.itemsize, 1)
        blob = align.to_bytes(4, "little") + np.ascontiguousarray(d.array).tobytes()
        sep = "," if i < len(items) - 1 else ""
        lines.append(f'      {name}: "0x{blob.hex().upper()}"{sep}')
    lines += ["    }", "  }", "#-}", ""]
    return "\n".join(lines)


def print_module(m: Module, *, elide_weights: bool = False, **options: Any) -> str:
    """The text of ``m`` (large constants inlined as a resource section).

    ``elide_weights=True`` leaves their bytes out: large constants stay ``dense_resource<name>``
    references and one closing comment counts what was elided, so a real model prints in a
    few kilobytes instead of megabytes (the text then does not parse back on its own; use
    :func:`irkit.text.write_module` to save a module).  :func:`irkit.show.summary` is shorter still.
    """
    if not elide_weights:
        options.setdefault("inline_resources", True)
        return Printer(**options).module(m)
    options["inline_resources"] = False
    pr = Printer(**options)
    text = pr.module(m)
    if pr.resources:
        nbytes = sum(int(d.size) * d.dtype.itemsize for d in pr.resources.values())
        text += (f"// {len(pr.resources)} dense_resource constants elided ({nbytes / 1e6:.3g} MB); "
                 "print_module(m) prints them\n")
    return text


__all__ = ["Printer", "print_module", "format_float", "escape_string", "type_str", "location_str",
           "dense_literal", "resource_section", "INLINE_LIMIT"]
