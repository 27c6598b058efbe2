"""Parsing the MLIR generic syntax that the printer writes.

Design note: a regex tokenizer feeds a recursive-descent parser over the
subset of MLIR generic syntax that irkit prints, plus the common variants MLIR
tools write back (properties ``<{...}>``, an implicit top-level module, location
aliases ``#loc3`` defined at the end of the file).  Every error is a
:class:`ParseError` carrying ``file:line:col``, the line and a caret; the parser
never lets a Python exception escape for malformed text, and never allocates
for a declared shape (splats stay zero-stride views, and a literal's element
count must match its type before any array is built).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import numpy as np

from irkit.ir.core import Dense, Function, Graph, Location, Module, Op, Value, freeze_attrs
from irkit.ir.ops import OPS, SEGMENTS, AttrSpec
from irkit.ir.types import DType, TensorType, parse_dim


class ParseError(ValueError):
    """A syntax or semantic error at a position in the input text."""

    def __init__(self, message: str, filename: str, text: str, offset: int):
        message = message.replace("\n", "\\n")
        self.message = message
        self.filename = filename
        line = text.count("\n", 0, offset) + 1
        start = text.rfind("\n", 0, offset) + 1
        end = text.find("\n", offset)
        if end < 0:
            end = len(text)
        self.line = line
        self.col = offset - start + 1
        self.line_text = text[start:end]
        super().__init__(f"{filename}:{self.line}:{self.col}: {message}")

    def render(self) -> str:
        """``file:line:col: message``, then the line and a caret under the column."""
        shown = self.line_text.replace("\t", " ")
        if len(shown) > 200:
            lo = max(0, self.col - 100)
            shown = shown[lo:lo + 200]
            caret_col = self.col - lo
        else:
            caret_col = self.col
        return f"{self}\n{shown}\n{' ' * (caret_col - 1)}^"


_TOKEN = re.compile(
    r"""
    (?P<ws>(?:\s+|//[^\n]*)+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<tensor>tensor<[^<>"\n]*(?:"[^"\n]*"[^<>"\n]*)*>)
  | (?P<value>%[A-Za-z0-9_$.\-]+(?:\#[0-9]+)?)
  | (?P<block>\^[A-Za-z0-9_$.\-]+)
  | (?P<pragma>\{-\#|\#-\})
  | (?P<hash>\#[A-Za-z0-9_$.\-]+)
  | (?P<hex>0x[0-9A-Fa-f]+)
  | (?P<float>[-+]?[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?)
  | (?P<int>[-+]?[0-9]+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_$.]*)
  | (?P<punct>->|<\{|\}>|[(){}\[\]<>,:=*?])
    """,
    re.VERBOSE,
)

_MAX_ELEMENTS = 1 << 27  # literal dense bodies beyond this are refused, not allocated


class _Tok:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind: str, text: str, pos: int):
        self.kind, self.text, self.pos = kind, text, pos

    def __repr__(self) -> str:
        return f"{self.kind}:{self.text!r}"


def _tokenize(text: str, filename: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    n = len(text)
    match = _TOKEN.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            raise ParseError(f"unexpected character {text[pos]!r}", filename, text, pos)
        kind = m.lastgroup
        if kind == "pragma":
            kind = "punct"
        if kind != "ws":
            toks.append(_Tok(kind, m.group(), pos))  # type: ignore[arg-type]
        pos = m.end()
    toks.append(_Tok("eof", "", n))
    return toks


def unescape_string(s: str) -> str:
    """Decode an MLIR string literal body (``\\"``, ``\\\\``, ``\\n``, ``\\XX`` hex bytes)."""
    if "\\" not in s:
        return s
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt in '"\\':
                out += nxt.encode()
                i += 2
                continue
            if nxt == "n":
                out += b"\n"
                i += 2
                continue
            if nxt == "t":
                out += b"\t"
                i += 2
                continue
            h = s[i + 1:i + 3]
            if len(h) == 2 and all(ch in "0123456789abcdefABCDEF" for ch in h):
                out.append(int(h, 16))
                i += 3
                continue
            raise ValueError(f"invalid escape '\\{nxt}'")
        out += c.encode("utf-8")
        i += 1
    return out.decode("utf-8", errors="replace")


class _LocRef:
    """A location alias (``#loc3``) resolved once the file's alias table is read."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class Parser:
    """Parses one text buffer into a :class:`Module`."""

    def __init__(self, text: str, filename: str = "<input>",
                 resources: Mapping[str, np.ndarray] | None = None,
                 resource_loader: Callable[[], Mapping[str, np.ndarray]] | None = None):
        self.text = text
        self.filename = filename
        self.toks: list[_Tok] = []
        self.i = 0
        self._lexpos = 0
        self._eof = False
        self._external_resources = resources
        self._resource_loader = resource_loader
        self._pending_resources: list[tuple[Op, str, str, TensorType, int]] = []
        self._loc_aliases: dict[str, Location] = {}
        self._pending_locs: list[tuple[Any, str, int]] = []
        self._op_pos: dict[int, int] = {}  # id(op) -> offset of its name, to report at the producer

    # -- token helpers -----------------------------------------------------------
    def _fill(self, k: int) -> None:
        """Lex lazily until ``toks[i + k]`` exists (the fast op path skips lexing)."""
        toks, text = self.toks, self.text
        n = len(text)
        while len(toks) <= self.i + k:
            if self._eof:
                toks.append(_Tok("eof", "", n))
                continue
            pos = self._lexpos
            while True:
                if pos >= n:
                    toks.append(_Tok("eof", "", n))
                    self._eof = True
                    break
                m = _TOKEN.match(text, pos)
                if m is None:
                    raise ParseError(f"unexpected character {text[pos]!r}", self.filename, text, pos)
                kind = m.lastgroup
                pos = m.end()
                if kind == "ws":
                    continue
                toks.append(_Tok("punct" if kind == "pragma" else kind, m.group(), m.start()))  # type: ignore[arg-type]
                break
            self._lexpos = pos

    def _peek(self, k: int) -> _Tok:
        self._fill(k)
        return self.toks[self.i + k]

    def error(self, msg: str, tok: _Tok | None = None) -> ParseError:
        t = tok or self.tok
        return ParseError(msg, self.filename, self.text, t.pos)

    @property
    def tok(self) -> _Tok:
        if self.i >= len(self.toks):
            self._fill(0)
        return self.toks[self.i]

    def next(self) -> _Tok:
        t = self.tok
        if t.kind != "eof":
            self.i += 1
        return t

    def at(self, text: str) -> bool:
        t = self.tok
        return t.text == text and t.kind in ("punct", "ident")

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str = "") -> _Tok:
        t = self.tok
        if t.text != text or t.kind not in ("punct", "ident"):
            shown = t.text if t.kind != "eof" else "end of input"
            raise self.error(f"expected '{text}'{' ' + what if what else ''}, found '{shown}'")
        self.i += 1
        return t

    def expect_kind(self, kind: str, what: str) -> _Tok:
        t = self.tok
        if t.kind != kind:
            shown = t.text if t.kind != "eof" else "end of input"
            raise self.error(f"expected {what}, found '{shown}'")
        self.i += 1
        return t

    # -- top level ------------------------------------------------------------------
    def parse_module(self) -> Module:
        functions: list[Function] = []
        attrs: dict[str, Any] = {}
        if self.tok.kind == "string" and self._string_value(self.tok) == "builtin.module":
            self.next()
            self.expect("(")
            self.expect(")")
            if self.accept("<{"):
                attrs.update(self._attr_entries("}>"))
            self.expect("(")
            self.expect("{", "to open the module's region")
            if self.tok.kind == "block":
                self.next()
                self.expect(":")
            while not self.at("}"):
                functions.append(self._function())
            self.expect("}")
            self.expect(")")
            if self.at("{"):
                self.next()
                attrs.update(self._attr_entries("}"))
            self.expect(":")
            self._fn_type_void()
            self._opt_loc()
        else:
            while self.tok.kind == "string":
                functions.append(self._function())
        self._trailer()
        if self.tok.kind != "eof":
            raise self.error(f"unexpected '{self.tok.text}' after the module")
        self._resolve_resources()
        self._resolve_locs()
        return Module(functions, attrs)

    def _trailer(self) -> None:
        # Location aliases (#loc1 = loc(...)) and the dialect_resources section.
        while True:
            if self.tok.kind == "hash":
                name = self.next().text
                self.expect("=")
                self._loc_aliases[name] = self._location_body_after_loc()
                continue
            if self.at("{-#"):
                self.next()
                self._resource_section()
                continue
            return

    def _location_body_after_loc(self) -> Location:
        self.expect("loc")
        self.expect("(")
        loc = self._location_inner()
        self.expect(")")
        return loc if isinstance(loc, Location) else Location.unknown()

    def _resource_section(self) -> None:
        blobs: dict[str, bytes] = {}
        while not self.at("#-}"):
            self.expect_kind("ident", "a resource section name")
            self.expect(":")
            self.expect("{")
            while not self.at("}"):
                dialect = self.expect_kind("ident", "a dialect name").text
                self.expect(":")
                self.expect("{")
                while not self.at("}"):
                    key_tok = self.next()
                    if key_tok.kind not in ("ident", "string"):
                        raise self.error("expected a resource name", key_tok)
                    key = key_tok.text if key_tok.kind == "ident" else self._string_value(key_tok)
                    self.expect(":")
                    val = self.expect_kind("string", "a hex blob string")
                    body = self._string_value(val)
                    if dialect == "builtin":
                        if not body.startswith("0x") or len(body) % 2:
                            raise self.error("resource blob must be a hex string \"0x...\"", val)
                        try:
                            blobs[key] = bytes.fromhex(body[2:])
                        except ValueError:
                            raise self.error("resource blob is not valid hex", val) from None
                    if not self.accept(","):
                        break
                self.expect("}")
                if not self.accept(","):
                    break
            self.expect("}")
            if not self.accept(","):
                break
        self.expect("#-}")
        self._inline_blobs = blobs

    _inline_blobs: dict[str, bytes] = {}

    def _resolve_resources(self) -> None:
        if not self._pending_resources:
            return
        ext = self._external_resources
        if ext is None and self._resource_loader is not None and any(
                name not in self._inline_blobs for _, name, *_ in self._pending_resources):
            ext = self._resource_loader()
        for op, key, name, t, pos in self._pending_resources:
            n = _static_numel(t)
            if n is None:
                raise self.error(f"dense_resource<{name}> needs a static shape", _Tok("ident", name, pos))
            if name in self._inline_blobs:
                blob = self._inline_blobs[name]
                payload = blob[4:]
                if len(payload) != n * t.dtype.itemsize:
                    raise self.error(f"resource '{name}' holds {len(payload)} bytes, "
                                     f"type {t} needs {n * t.dtype.itemsize}", _Tok("ident", name, pos))
                arr = np.frombuffer(payload, dtype=t.dtype.np).reshape(t.shape)  # type: ignore[arg-type]
            elif ext is not None and name in ext:
                arr = np.asarray(ext[name])
                if tuple(arr.shape) != t.shape:
                    raise self.error(f"resource '{name}' in the sidecar has shape {list(arr.shape)}, "
                                     f"the IR declares {t}", _Tok("ident", name, pos))
                if arr.dtype != t.dtype.np:
                    raise self.error(f"resource '{name}' in the sidecar has dtype {arr.dtype}, "
                                     f"the IR declares {t.dtype}", _Tok("ident", name, pos))
            else:
                where = "the file's dialect_resources section or its .safetensors sidecar"
                raise self.error(f"resource '{name}' is not defined in {where}", _Tok("ident", name, pos))
            d = Dense(arr, t.dtype, resource=name)
            if not op.attrs:
                op.attrs = MappingProxyType({key: d})
            else:
                attrs = dict(op.attrs)
                attrs[key] = d
                op.attrs = freeze_attrs(attrs)

    def _resolve_locs(self) -> None:
        for target, name, pos in self._pending_locs:
            if name not in self._loc_aliases:
                raise self.error(f"undefined location alias '{name}'", _Tok("hash", name, pos))
            target.loc = self._loc_aliases[name]

    # -- functions ----------------------------------------------------------------------
    def _function(self) -> Function:
        start = self.tok
        name = self._string_value(self.expect_kind("string", "an op name"))
        if name != "func.func":
            raise self.error(f"expected a \"func.func\" op at module level, found \"{name}\"", start)
        self.expect("(")
        self.expect(")")
        props: dict[str, Any] = {}
        if self.accept("<{"):
            props.update(self._attr_entries("}>"))
        self.expect("(")
        self.expect("{", "to open the function body")
        scope: dict[str, Value] = {}
        body = self._block(scope, "func.return")
        self.expect("}")
        self.expect(")")
        if self.accept("{"):
            props.update(self._attr_entries("}"))
        self.expect(":")
        self._fn_type_void()
        fn_name = props.pop("sym_name", None)
        if not isinstance(fn_name, str):
            raise self.error("func.func needs a string 'sym_name' attribute", start)
        ftype = props.pop("function_type", None)
        f = Function(fn_name, body, None, props)
        self._opt_loc(f)
        if isinstance(ftype, tuple) and len(ftype) == 3 and ftype[0] == "__fn__":
            if list(ftype[1]) != f.arg_types:
                raise self.error(f"@{fn_name}: function_type arguments differ from the block arguments", start)
            if list(ftype[2]) != f.result_types:
                raise self._result_type_error(fn_name, list(ftype[2]), f, start)
        return f

    def _result_type_error(self, fn_name: str, declared: list[Any], f: Function, start: _Tok) -> ParseError:
        """function_type's results differ from what func.return returns: reported at the op
        that produced the first differing value (the declaration is at func.func)."""
        for k, (d, v) in enumerate(zip(declared, f.outputs)):
            if d != v.type and v.producer is not None and id(v.producer) in self._op_pos:
                return ParseError(f"'{v.producer.name}' produces {v.type}, but @{fn_name} declares result {k} "
                                  f"as {d} in its function_type", self.filename, self.text,
                                  self._op_pos[id(v.producer)])
        n = len(f.outputs)
        return self.error(f"@{fn_name}: function_type results differ from the returned values "
                          f"({len(declared)} declared, {n} returned)", start)

    def _fn_type_void(self) -> None:
        self.expect("(")
        self.expect(")")
        self.expect("->")
        self.expect("(")
        self.expect(")")

    def _block(self, outer: dict[str, Value], terminator: str) -> Graph:
        scope = outer
        if self.tok.kind == "block":
            self.next()
            names: list[str] = []
            types: list[TensorType] = []
            toks: list[_Tok] = []
            self.expect("(")
            if not self.at(")"):
                while True:
                    vt = self.expect_kind("value", "a block argument name")
                    self.expect(":")
                    types.append(self._type())
                    names.append(vt.text)
                    toks.append(vt)
                    if not self.accept(","):
                        break
            self.expect(")")
            self.expect(":")
            g = Graph(types, [n[1:] if not re.fullmatch(r"%arg\d+", n) else None for n in names])
            for n, v, t in zip(names, g.args, toks):
                if n in scope:
                    raise self.error(f"redefinition of SSA value '{n}'", t)
                scope[n] = v
        else:
            g = Graph()
        while True:
            if self.i == len(self.toks) and not self._eof and self._fast_op(g, scope):
                continue
            if self.at("}"):
                break
            if self.tok.kind == "eof":
                raise self.error("unexpected end of input: missing '}' to close a region")
            self._op(g, scope)
        last = g.terminator
        if last is None or last.name != terminator:
            raise self.error(f"region must end with a \"{terminator}\" op")
        return g

    # -- ops ----------------------------------------------------------------------------
    def _fast_op(self, g: Graph, scope: dict[str, Value]) -> bool:
        """Parse one single-line op in the printer's own layout without the tokenizer.

        Returns False (consuming nothing) whenever the line is not in that exact
        layout or anything about it is unusual; the general parser then takes
        the line and reports any error with its position.
        """
        m = _FAST_OP.match(self.text, self._lexpos)
        if m is None:
            return False
        res, count, name, ops_txt, attr_txt, ins_txt, outs_txt, loc_txt = m.groups()
        if name == "ik.fused" or (count is not None and res is None):
            return False
        try:
            operands = [scope[o] for o in ops_txt.split(", ")] if ops_txt else []
            in_types = _sig_types(ins_txt) if ins_txt else ()
            out_types = _sig_types(outs_txt[1:-1]) if outs_txt[0] == "(" else (_cached_type(outs_txt),)
        except (KeyError, ValueError):
            return False
        if in_types is None or out_types is None or len(in_types) != len(operands):
            return False
        for v, t in zip(operands, in_types):
            if v.type is not t and v.type != t:
                return False
        n = int(count) if count else (1 if res else 0)
        if n != len(out_types) or (res is not None and (res in scope or f"{res}#0" in scope)):
            return False
        loc = _UNKNOWN_LOC
        if loc_txt is not None:
            cached = _LOC_CACHE.get(loc_txt)
            if cached is None:
                cached = _simple_loc(loc_txt)
                if cached is None:
                    return False
                _LOC_CACHE[loc_txt] = cached
            loc = cached
        pend: tuple[str, str, TensorType, int] | None = None
        if attr_txt is None:
            attrs: Mapping[str, Any] = _NO_ATTRS
        else:
            key = (name, attr_txt)
            attrs = _ATTR_CACHE.get(key)  # type: ignore[assignment]
            if attrs is None:
                rm = _RESOURCE_ATTR.match(attr_txt) if name == "ik.constant" else None
                if rm is not None:
                    # The common large-constant line: {value = dense_resource<name> : tensor<...>}
                    try:
                        rtype = _cached_type(rm.group(2))
                    except ValueError:
                        return False
                    pend = ("value", rm.group(1), rtype, m.start("attrs") + rm.start(1))
                    attrs = _NO_ATTRS
                else:
                    parsed = self._fast_attrs(m, name)
                    if parsed is None:
                        return False
                    attrs, pend = parsed
                    if pend is None and len(attr_txt) < 400 and len(_ATTR_CACHE) < 50_000:
                        _ATTR_CACHE[key] = attrs
        op = Op._make(name, operands, out_types, attrs, loc)
        self._op_pos[id(op)] = m.start(3) - 1
        if pend is not None:
            self._pending_resources.append((op, *pend))
        g.append(op)
        if res is not None:
            if n == 1:
                scope[res] = op.results[0]
            else:
                for j in range(n):
                    scope[f"{res}#{j}"] = op.results[j]
        self._lexpos = m.end()
        return True

    def _fast_attrs(self, m: re.Match, name: str) -> tuple[Mapping[str, Any], tuple | None] | None:
        """The attribute dictionary of a fast-path line, frozen; None to fall back."""
        saved = (self.toks, self.i, self._lexpos, self._eof)
        self.toks, self.i, self._lexpos, self._eof = [], 0, m.start("attrs") + 1, False
        try:
            attrs = self._attr_entries("}")
            ok = self._lexpos == m.end("attrs") and self.i == len(self.toks)
        except ParseError:
            ok = False
        finally:
            self.toks, self.i, self._lexpos, self._eof = saved
        if not ok:
            return None
        try:
            attrs = self._coerce_attrs(name, attrs, _Tok("string", name, m.start(3)))
        except ParseError:
            return None
        pend = [(k, v) for k, v in attrs.items() if isinstance(v, tuple) and v[:1] == ("__resource__",)]
        if len(pend) > 1:
            return None
        pending = None
        if pend:
            k, v = pend[0]
            attrs[k] = None
            pending = (k, v[1], v[2], v[3])
        return freeze_attrs({k: v for k, v in attrs.items() if v is not None}), pending

    def _op(self, g: Graph, scope: dict[str, Value]) -> None:
        results: list[tuple[str, int, _Tok]] = []
        if self.tok.kind == "value":
            while True:
                vt = self.expect_kind("value", "a result name")
                if "#" in vt.text:
                    raise self.error("a result name cannot carry '#N'", vt)
                count = 1
                if self.accept(":"):
                    ct = self.expect_kind("int", "a result count")
                    count = int(ct.text)
                    if not 1 <= count <= 4096:
                        raise self.error("result count out of range", ct)
                results.append((vt.text, count, vt))
                if not self.accept(","):
                    break
            self.expect("=")
        name_tok = self.expect_kind("string", "an op name in quotes, like \"ik.add\"")
        name = self._string_value(name_tok)
        self.expect("(")
        operands: list[Value] = []
        if not self.at(")"):
            while True:
                vt = self.expect_kind("value", "an operand")
                v = scope.get(vt.text)
                if v is None:
                    raise self.error(f"use of undefined value '{vt.text}'", vt)
                operands.append(v)
                if not self.accept(","):
                    break
        self.expect(")")
        attrs: dict[str, Any] = {}
        if self.accept("<{"):
            attrs.update(self._attr_entries("}>"))
        regions: list[Graph] = []
        if self.at("(") and self._peek(1).text == "{":
            self.next()
            while True:
                self.expect("{")
                # Fused regions are isolated from above: a fresh scope.
                regions.append(self._block({}, "ik.yield"))
                self.expect("}")
                if not self.accept(","):
                    break
            self.expect(")")
        if self.accept("{"):
            attrs.update(self._attr_entries("}"))
        self.expect(":", "before the op's type signature")
        sig_tok = self.tok
        in_types, out_types = self._fn_type()
        if len(in_types) != len(operands):
            raise self.error(f"'{name}' has {len(operands)} operands but its type lists {len(in_types)}", sig_tok)
        for k, (v, t) in enumerate(zip(operands, in_types)):
            if v.type != t:
                ppos = self._op_pos.get(id(v.producer)) if name in ("func.return", "ik.yield") else None
                if ppos is not None and v.producer is not None:
                    raise ParseError(f"'{v.producer.name}' produces {v.type}, but '{name}' returns it as {t} "
                                     f"(operand {k})", self.filename, self.text, ppos)
                raise self.error(f"operand {k} of '{name}' has type {v.type}, the signature says {t}", sig_tok)
        n_res = sum(c for _, c, _ in results)
        if n_res != len(out_types):
            raise self.error(f"'{name}' names {n_res} results but its type lists {len(out_types)}", sig_tok)
        attrs = self._coerce_attrs(name, attrs, name_tok)
        op = Op(name, operands, out_types, None, regions)
        self._op_pos[id(op)] = name_tok.pos
        pend = [(k, v) for k, v in attrs.items() if isinstance(v, tuple) and v[:1] == ("__resource__",)]
        for key, _ in pend:
            attrs[key] = None
        op.attrs = freeze_attrs({k: v for k, v in attrs.items() if v is not None})
        for key, res in pend:
            self._pending_resources.append((op, key, res[1], res[2], res[3]))
        self._opt_loc(op)
        g.append(op)
        idx = 0
        for rname, count, rtok in results:
            if rname in scope:
                raise self.error(f"redefinition of SSA value '{rname}'", rtok)
            if count == 1:
                scope[rname] = op.results[idx]
            else:
                for j in range(count):
                    scope[f"{rname}#{j}"] = op.results[idx + j]
            idx += count

    def _coerce_attrs(self, opname: str, attrs: dict[str, Any], tok: _Tok) -> dict[str, Any]:
        d = OPS.get(opname)
        if d is None:
            return attrs
        out: dict[str, Any] = {}
        for k, v in attrs.items():
            spec = d.attrs.get(k)
            try:
                out[k] = _coerce(spec, v) if spec is not None else (
                    tuple(v) if k == SEGMENTS and isinstance(v, tuple) else v)
            except ValueError as e:
                raise self.error(f"'{opname}' attribute '{k}': {e}", tok) from None
        return out

    def _opt_loc(self, target: Any = None) -> None:
        if not self.at("loc"):
            return
        self.next()
        self.expect("(")
        loc = self._location_inner()
        self.expect(")")
        if target is not None:
            if isinstance(loc, _LocRef):
                self._pending_locs.append((target, loc.name, self.toks[self.i - 2].pos))
            else:
                target.loc = loc

    def _location_inner(self) -> Location | _LocRef:
        t = self.tok
        if t.kind == "hash":
            self.next()
            return _LocRef(t.text)
        if self.accept("unknown"):
            return Location.unknown()
        if self.at("fused"):
            self.next()
            if self.accept("<"):  # fused<metadata>[...]: metadata ignored
                self._attr_value()
                self.expect(">")
            self.expect("[")
            parts: list[Location] = []
            if not self.at("]"):
                while True:
                    p = self._location_inner()
                    if isinstance(p, Location):
                        parts.append(p)
                    if not self.accept(","):
                        break
            self.expect("]")
            return Location.fuse(parts) if parts else Location.unknown()
        if self.at("callsite"):
            self.next()
            self.expect("(")
            callee = self._location_inner()
            self.expect("at")
            self._location_inner()
            self.expect(")")
            return callee
        if t.kind == "string":
            s = self._string_value(self.next())
            if self.accept(":"):
                line = int(self.expect_kind("int", "a line number").text)
                col = 0
                if self.accept(":"):
                    col = int(self.expect_kind("int", "a column number").text)
                return Location(file=s, line=line, col=col)
            if self.accept("("):
                child = self._location_inner()
                self.expect(")")
                if isinstance(child, Location) and child.file is not None:
                    return Location(file=child.file, line=child.line, col=child.col, name=s)
                return Location(name=s)
            return Location(name=s)
        raise self.error("expected a location")

    # -- types ----------------------------------------------------------------------------
    def _type(self) -> TensorType:
        t = self.tok
        if t.kind != "tensor":
            shown = t.text if t.kind != "eof" else "end of input"
            raise self.error(f"expected a tensor type like tensor<4x?xf32, [\"S\"]>, found '{shown}'")
        self.next()
        try:
            return _cached_type(t.text)
        except ValueError as e:
            raise self.error(str(e), t) from None

    def _fn_type(self) -> tuple[list[TensorType], list[TensorType]]:
        self.expect("(")
        ins: list[TensorType] = []
        if not self.at(")"):
            while True:
                ins.append(self._type())
                if not self.accept(","):
                    break
        self.expect(")")
        self.expect("->")
        outs: list[TensorType] = []
        if self.accept("("):
            if not self.at(")"):
                while True:
                    outs.append(self._type())
                    if not self.accept(","):
                        break
            self.expect(")")
        else:
            outs.append(self._type())
        return ins, outs

    # -- attributes ---------------------------------------------------------------------------
    def _string_value(self, t: _Tok) -> str:
        try:
            return unescape_string(t.text[1:-1])
        except ValueError as e:
            raise self.error(str(e), t) from None

    def _attr_entries(self, close: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.accept(close):
            return out
        while True:
            kt = self.next()
            if kt.kind == "ident":
                key = kt.text
            elif kt.kind == "string":
                key = self._string_value(kt)
            else:
                raise self.error("expected an attribute name", kt)
            if key in out:
                raise self.error(f"duplicate attribute '{key}'", kt)
            if self.accept("="):
                out[key] = self._attr_value()
            else:
                out[key] = True  # unit attribute
            if not self.accept(","):
                break
        self.expect(close, "to close the attribute dictionary")
        return out

    def _attr_value(self) -> Any:
        t = self.tok
        k = t.kind
        if k == "string":
            self.next()
            return self._string_value(t)
        if k == "int" or k == "float" or k == "hex":
            self.next()
            if self.accept(":"):
                ty = self.expect_kind("ident", "an element type").text
                try:
                    dt = DType.parse(ty)
                except ValueError as e:
                    raise self.error(str(e)) from None
                if dt.is_float:
                    return _float_literal(t.text, dt, self, t)
                if dt.is_bool:
                    return bool(int(t.text, 0))
                return _int_literal(t.text, self, t)
            if k == "float":
                return float(t.text)
            return _int_literal(t.text, self, t)
        if k == "tensor":
            return self._type()
        if k == "ident":
            word = t.text
            if word in ("true", "false"):
                self.next()
                return word == "true"
            if word == "unit":
                self.next()
                return True
            if word == "array":
                return self._array_attr()
            if word == "dense":
                return self._dense_attr()
            if word == "dense_resource":
                return self._dense_resource_attr()
            try:
                dt = DType.parse(word)
                self.next()
                return dt
            except ValueError:
                pass
            raise self.error(f"unknown attribute value '{word}'")
        if k == "punct" and t.text == "[":
            self.next()
            items: list[Any] = []
            if not self.at("]"):
                while True:
                    items.append(self._attr_value())
                    if not self.accept(","):
                        break
            self.expect("]")
            return tuple(items)
        if k == "punct" and t.text == "(":
            ins, outs = self._fn_type()
            return ("__fn__", tuple(ins), tuple(outs))
        shown = t.text if k != "eof" else "end of input"
        raise self.error(f"expected an attribute value, found '{shown}'")

    def _array_attr(self) -> tuple[Any, ...]:
        self.next()
        self.expect("<")
        ty = self.expect_kind("ident", "an element type").text
        try:
            dt = DType.parse(ty)
        except ValueError as e:
            raise self.error(str(e)) from None
        items: list[Any] = []
        if self.accept(":"):
            while True:
                t = self.tok
                if t.kind not in ("int", "float", "hex") and t.text not in ("true", "false"):
                    raise self.error("expected a number in the array")
                self.next()
                if dt.is_float:
                    items.append(_float_literal(t.text, dt, self, t))
                elif dt.is_bool:
                    items.append(t.text == "true")
                else:
                    items.append(_int_literal(t.text, self, t))
                if not self.accept(","):
                    break
        self.expect(">")
        return tuple(items)

    def _dense_resource_attr(self) -> tuple[Any, ...]:
        self.next()
        self.expect("<")
        nt = self.next()
        if nt.kind not in ("ident", "string"):
            raise self.error("expected a resource name", nt)
        name = nt.text if nt.kind == "ident" else self._string_value(nt)
        self.expect(">")
        self.expect(":")
        t = self._type()
        return ("__resource__", name, t, nt.pos)

    def _dense_attr(self) -> Dense:
        self.next()
        self.expect("<")
        body_start = self.i
        # Skip the body to read the type first: the element type decides how to parse it.
        depth = 0
        while True:
            t = self.tok
            if t.kind == "eof":
                raise self.error("unterminated dense<...> literal")
            if t.text == "[":
                depth += 1
            elif t.text == "]":
                depth -= 1
                if depth < 0:
                    raise self.error("unbalanced ']' in dense literal")
            elif t.text == ">" and depth == 0:
                break
            self.next()
        body_end = self.i
        self.expect(">")
        self.expect(":")
        ty_tok = self.tok
        ty = self._type()
        n = _static_numel(ty)
        if n is None:
            raise self.error("dense<...> needs a static shape", ty_tok)
        body = self.toks[body_start:body_end]
        dt = ty.dtype
        if not body:
            if n == 0:
                return Dense(np.zeros(ty.shape, dt.np), dt)  # type: ignore[arg-type]
            raise self.error(f"empty dense literal for {ty}, which has {n} elements", ty_tok)
        if len(body) == 1:
            v = _scalar(body[0], dt, self)
            return Dense.splat(v, ty.shape, dt)  # type: ignore[arg-type]
        if body[0].kind == "string":  # MLIR hex form dense<"0x...">
            raw = self._string_value(body[0])
            if not raw.startswith("0x"):
                raise self.error("dense string body must be hex \"0x...\"", body[0])
            try:
                data = bytes.fromhex(raw[2:])
            except ValueError:
                raise self.error("dense hex body is not valid hex", body[0]) from None
            if len(data) == dt.itemsize:
                return Dense.splat(np.frombuffer(data, dt.np)[0], ty.shape, dt)  # type: ignore[arg-type]
            if len(data) != n * dt.itemsize:
                raise self.error(f"dense hex body has {len(data)} bytes, type {ty} needs {n * dt.itemsize}", body[0])
            return Dense(np.frombuffer(data, dt.np).reshape(ty.shape), dt)  # type: ignore[arg-type]
        if n > _MAX_ELEMENTS:
            raise self.error(f"dense literal of {n} elements is too large; use dense_resource", ty_tok)
        # Nested list: check the structure matches the shape, collect scalars.
        vals: list[Any] = []
        pos = 0

        def rec(dim: int) -> None:
            nonlocal pos
            if dim == len(ty.shape):
                vals.append(_scalar(body[pos], dt, self))
                pos += 1
                return
            if pos >= len(body) or body[pos].text != "[":
                raise self.error(f"dense literal does not match shape {ty}", body[min(pos, len(body) - 1)])
            pos += 1
            count = 0
            while pos < len(body) and body[pos].text != "]":
                rec(dim + 1)
                count += 1
                if pos < len(body) and body[pos].text == ",":
                    pos += 1
            if pos >= len(body):
                raise self.error("unterminated '[' in dense literal", body[-1])
            if count != ty.shape[dim]:
                raise self.error(f"dense literal has {count} entries on dim {dim}, type {ty} needs "
                                 f"{ty.shape[dim]}", body[pos])
            pos += 1

        rec(0)
        if pos != len(body):
            raise self.error("trailing tokens in dense literal", body[pos])
        if dt is DType.bf16 or dt.is_float8:
            arr = np.array(vals, dtype=np.float64).astype(dt.np)
        else:
            arr = np.array(vals, dtype=dt.np)
        return Dense(arr.reshape(ty.shape), dt)  # type: ignore[arg-type]


_T = r"tensor<[^<>\n]*>"
_TLIST = r"(?:" + _T + r"(?:, " + _T + r")*+)?"
_FAST_OP = re.compile(
    r"[ \t]*(?:\n[ \t]*)*(?:(%[A-Za-z0-9_$.\-]+)(?::(\d+))? = )?\"([A-Za-z0-9_.]+)\""
    r"\(((?:%[A-Za-z0-9_$.\-]+(?:#\d+)?(?:, )?)*)\)"
    r"(?: (?P<attrs>\{(?:[^}\n]++|\}(?! : \())*+\}))? : \((" + _TLIST + r")\) -> (\(" + _TLIST + r"\)|" + _T + r")"
    r"(?: loc\(([^\n]*)\))?[ \t]*(?=\n|\Z)")
_TYPE_RE = re.compile(r"tensor<[^<>]*>")
_RESOURCE_ATTR = re.compile(r"\{value = dense_resource<([A-Za-z_][A-Za-z0-9_$.]*)> : (tensor<[^<>]*>)\}\Z")
_TYPE_CACHE: dict[str, TensorType] = {}
_SIG_CACHE: dict[str, tuple[TensorType, ...] | None] = {}
_NO_ATTRS: Mapping[str, Any] = freeze_attrs(None)
_UNKNOWN_LOC = Location.unknown()
_LOC_CACHE: dict[str, Location] = {}
_ATTR_CACHE: dict[tuple[str, str], dict[str, Any]] = {}
_SIMPLE_LOC = re.compile(r'"([^"\\]*)"(?::(\d+):(\d+))?(?:\("([^"\\]*)":(\d+):(\d+)\))?\Z')


def _cached_type(text: str) -> TensorType:
    t = _TYPE_CACHE.get(text)
    if t is None:
        t = parse_tensor_type(text)
        if len(_TYPE_CACHE) < 100_000:
            _TYPE_CACHE[text] = t
    return t


def _sig_types(text: str) -> tuple[TensorType, ...] | None:
    """The types of ``tensor<...>, tensor<...>`` (a signature list); None unless the
    text is exactly that list.  Raises ValueError for a malformed type."""
    hit = _SIG_CACHE.get(text)
    if hit is None and text not in _SIG_CACHE:
        found = _TYPE_RE.findall(text)
        hit = tuple(_cached_type(t) for t in found) if ", ".join(found) == text else None
        if len(_SIG_CACHE) < 100_000:
            _SIG_CACHE[text] = hit
    return hit


def _simple_loc(text: str) -> Location | None:
    """``"f":1:2``, ``"name"`` or ``"name"("f":1:2)``; None for anything else."""
    if text == "unknown":
        return Location.unknown()
    m = _SIMPLE_LOC.match(text)
    if m is None:
        return None
    a, line, col, f2, l2, c2 = m.groups()
    if line is not None and f2 is None:
        return Location(file=a, line=int(line), col=int(col))
    if line is None and f2 is not None:
        return Location(file=f2, line=int(l2), col=int(c2), name=a)
    if line is None and f2 is None:
        return Location(name=a)
    return None


def _static_numel(t: TensorType) -> int | None:
    n = 1
    for d in t.shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def _int_literal(text: str, p: Parser, tok: _Tok) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise p.error(f"invalid integer '{text}'", tok) from None
    if not -(1 << 63) <= v < (1 << 64):
        raise p.error(f"integer {text} out of range", tok)
    return v


def _float_literal(text: str, dt: DType, p: Parser, tok: _Tok) -> float:
    if text.startswith("0x") or text.startswith("0X"):
        bits = int(text, 16)
        try:
            if dt is DType.bf16:
                return float(np.array(bits << 16, dtype=np.uint32).view(np.float32))
            if dt.is_float8:
                if bits > 0xFF:
                    raise OverflowError
                return float(np.array(bits, dtype=np.uint8).view(dt.np).astype(np.float64))
            width = {DType.f16: np.uint16, DType.f32: np.uint32, DType.f64: np.uint64}[dt]
            fl = {DType.f16: np.float16, DType.f32: np.float32, DType.f64: np.float64}[dt]
            return float(np.array(bits, dtype=width).view(fl))
        except OverflowError:
            raise p.error(f"hex float {text} does not fit {dt}", tok) from None
    try:
        return float(text)
    except ValueError:
        raise p.error(f"invalid number '{text}'", tok) from None


def _scalar(t: _Tok, dt: DType, p: Parser) -> Any:
    if dt.is_bool:
        if t.text in ("true", "false"):
            return t.text == "true"
        if t.kind == "int" and t.text in ("0", "1"):
            return t.text == "1"
        raise p.error(f"expected true or false in an i1 literal, found '{t.text}'", t)
    if t.kind not in ("int", "float", "hex"):
        raise p.error(f"expected a number in dense literal, found '{t.text}'", t)
    if dt.is_float:
        v = _float_literal(t.text, dt, p, t)
        return v
    v = _int_literal(t.text, p, t)
    info = np.iinfo(dt.np)
    if not info.min <= v <= info.max:
        raise p.error(f"{v} does not fit {dt}", t)
    return v


_TENSOR_BODY = re.compile(r"tensor<\s*((?:[0-9?]+\s*x\s*)*)([A-Za-z0-9]+)\s*(?:,\s*\[(.*)\])?\s*>\Z", re.S)


def parse_tensor_type(text: str) -> TensorType:
    """Parse ``tensor<2x?x64xf32, ["S"]>``; ValueError with a reason otherwise."""
    m = _TENSOR_BODY.match(text)
    if m is None:
        raise ValueError(f"malformed tensor type '{text}'")
    dims_txt, dt_txt, enc = m.group(1), m.group(2), m.group(3)
    dtype = DType.parse(dt_txt)
    raw = [d.strip() for d in dims_txt.split("x") if d.strip()]
    names: list[str] = []
    if enc is not None and enc.strip():
        for item in enc.split(","):
            item = item.strip()
            if len(item) < 2 or item[0] != '"' or item[-1] != '"':
                raise ValueError(f"tensor encoding must list dim names as strings, got {item}")
            names.append(item[1:-1])
    if sum(1 for d in raw if d == "?") != len(names):
        raise ValueError(f"tensor type '{text}' has {sum(1 for d in raw if d == '?')} dynamic dims "
                         f"but names {len(names)}")
    shape: list[Any] = []
    it = iter(names)
    for d in raw:
        if d == "?":
            sd = parse_dim(next(it))
            if isinstance(sd, int):
                raise ValueError(f"dynamic dim name '{sd}' is a number; write the number instead of '?'")
            shape.append(sd)
        else:
            if len(d) > 18:
                raise ValueError(f"dim {d} is too large")
            shape.append(int(d))
    return TensorType(tuple(shape), dtype)


def _coerce(spec: AttrSpec, v: Any) -> Any:
    """Bring a parsed attribute to the kind its op definition declares."""
    k = spec.kind
    if k == "float" and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    if k == "dims":
        if not isinstance(v, tuple):
            raise ValueError("expected a list of dims")
        out = []
        for x in v:
            if isinstance(x, str):
                out.append(parse_dim(x))
            elif isinstance(x, int) and not isinstance(x, bool):
                out.append(x)
            else:
                raise ValueError(f"invalid dim {x!r}")
        return tuple(out)
    if k == "ints" and isinstance(v, tuple):
        return v
    if k == "floats" and isinstance(v, tuple):
        return tuple(float(x) for x in v)
    return v


def parse_module(text: str, filename: str = "<input>",
                 resources: Mapping[str, np.ndarray] | None = None,
                 resource_loader: Callable[[], Mapping[str, np.ndarray]] | None = None) -> Module:
    """Parse MLIR generic text into a Module; raises :class:`ParseError`."""
    import gc

    # The parser allocates many long-lived objects and no cycles that need
    # collecting mid-parse; the cyclic GC's full scans would make parsing
    # superlinear in the module size.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return Parser(text, filename, resources, resource_loader).parse_module()
    except RecursionError:
        raise ParseError("input nests too deeply", filename, text, 0) from None
    finally:
        if was_enabled:
            gc.enable()


__all__ = ["Parser", "ParseError", "parse_module", "parse_tensor_type", "unescape_string"]
