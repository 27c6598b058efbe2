"""A reader for XLA's optimised HLO text (``compiled.as_text()``).

:func:`hlo_kernels` parses the optimised HLO into one :class:`HloKernel` per
launched kernel (fusion, custom call, or a lone op), each with the ops it
contains, its operand and result shapes with the layouts XLA chose, and the
named scopes its ops were traced under (:mod:`irkit.targets.ir_scope`).
The lower-level pieces are public for analyses over the same text (per-kernel
cost, memory traffic): :func:`parse_hlo_module` (computations, entry, stack
frames), :func:`parse_instr`, :func:`parse_shapes`, :func:`attr_value`,
:func:`attr_block`, :func:`called_computations`.

Tested with the HLO printed by jaxlib 0.10.2 (CPU, deviceless CUDA, libtpu 0.0.42.1).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from irkit.targets.ir_scope import IrScope, parse_ir_scopes

__all__ = [
    "HloInstr",
    "HloKernel",
    "HloShape",
    "ParsedHlo",
    "attr_block",
    "attr_value",
    "called_computations",
    "format_kernels",
    "hlo_kernels",
    "parse_hlo_module",
    "parse_instr",
    "parse_shapes",
]



@dataclass(frozen=True)
class HloShape:
    """One array shape as printed in HLO, e.g. ``bf16[128,512]{1,0:T(8,128)(2,1)S(1)}``."""

    text: str
    dtype: str
    dims: tuple[int, ...]
    minor_to_major: tuple[int, ...] | None
    """The layout's dimension order, minor first; None when no layout is printed."""
    tiles: tuple[tuple[int, ...], ...]
    """The tiling, outer tile first: ``T(8,128)(2,1)`` is ((8, 128), (2, 1))."""
    memory_space: int | None
    """``S(n)``: a memory space other than the default (device HBM), e.g. on-chip VMEM."""

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class HloKernel:
    """One kernel of the optimised HLO: a fusion, a custom call, or an op XLA left on its own."""

    name: str
    """The instruction name, e.g. ``fusion.3`` or ``gemm_fusion_dot``."""
    kind: str
    """``kLoop``, ``kInput``, ``kOutput``, ``kCustom`` for fusions; ``custom-call``; else the opcode."""
    backend_kind: str | None
    """What the backend calls it: a custom-call target (``tpu_custom_call``, ``__cublas$gemm``)
    or a kCustom fusion kind (``__triton_nested_gemm_fusion``, ``__ynn_fusion``)."""
    computation: str | None
    """The fused computation it calls, if any."""
    ops: tuple[str, ...]
    """Opcodes inside, in program order, nested fusions expanded; parameters, constants and
    tuple plumbing left out. A lone op lists itself."""
    outputs: tuple[HloShape, ...]
    operands: tuple[HloShape, ...]
    op_names: tuple[str, ...]
    """Distinct ``metadata.op_name`` values of the kernel and everything inside it."""
    ir_ops: tuple[IrScope, ...]
    """Distinct IR scopes found in ``op_names`` (innermost IR scope of each op name)."""
    source: tuple[str, ...]
    """Distinct ``file:line`` of the Python lines that emitted its ops, from the HLO's stack
    frame tables (or ``source_file``/``source_line`` metadata where a compiler prints those)."""
    estimated_cycles: int | None
    """The TPU compiler's own cycle estimate for this kernel, where it prints one."""


_TRIVIAL_OPS = frozenset(
    {
        "parameter",
        "constant",
        "tuple",
        "get-tuple-element",
        "after-all",
        "opt-barrier",
        "partition-id",
        "replica-id",
        "copy-done",
        "add-dependency",
    }
)
_SHAPE_RE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\](?:\{([^{}]*(?:\{[^{}]*\}[^{}]*)*)\})?")


def parse_shapes(text: str) -> tuple[HloShape, ...]:
    shapes = []
    for m in _SHAPE_RE.finditer(text):
        dtype, dims_s, layout = m.group(1), m.group(2), m.group(3)
        dims = tuple(int(d) for d in re.findall(r"\d+", dims_s))
        minor: tuple[int, ...] | None = None
        tiles: list[tuple[int, ...]] = []
        space: int | None = None
        if layout is not None:
            order, _, rest = layout.partition(":")
            minor = tuple(int(d) for d in order.split(",") if d.strip())
            t = re.search(r"T((?:\([\d,]*\))+)", rest)
            if t:
                tiles = [
                    tuple(int(x) for x in g.split(",") if x)
                    for g in re.findall(r"\(([\d,]*)\)", t.group(1))
                ]
            s = re.search(r"S\((\d+)\)", rest)
            space = int(s.group(1)) if s else None
        shapes.append(HloShape(m.group(0), dtype, dims, minor, tuple(tiles), space))
    return tuple(shapes)


def _balanced(text: str, start: int) -> int:
    """Index just past the bracket group opening at ``text[start]``; quotes are skipped."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack: list[str] = []
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in pairs:
            stack.append(pairs[c])
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    return n


@dataclass
class HloInstr:
    name: str
    shape: str
    opcode: str
    operands: list[str]
    attrs: str
    is_root: bool


_INSTR_HEAD = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*")


def parse_instr(line: str) -> HloInstr | None:
    m = _INSTR_HEAD.match(line)
    if not m:
        return None
    i = m.end()
    if i < len(line) and line[i] == "(":
        j = _balanced(line, i)
    else:
        j = i
        while j < len(line) and line[j] != " ":
            if line[j] in "({[":
                j = _balanced(line, j)
            else:
                j += 1
    shape = line[i:j]
    k = j
    while k < len(line) and line[k] == " ":
        k += 1
    om = re.match(r"[\w\-$]+", line[k:])
    if not om:
        return None
    opcode = om.group(0)
    p = k + om.end()
    operands: list[str] = []
    if p < len(line) and line[p] == "(":
        q = _balanced(line, p)
        operands = re.findall(r"%([\w.\-]+)", line[p:q])
        p = q
    return HloInstr(m.group(2), shape, opcode, operands, line[p:], bool(m.group(1)))


def attr_block(attrs: str, key: str) -> str | None:
    """The text inside ``key={...}``; the key must start an attribute (``kernel_metadata={}``
    in a Pallas call's frontend_attributes is not ``metadata``)."""
    m = re.search(r"(?:^|[ ,])" + re.escape(key) + r"=\{", attrs)
    if not m:
        return None
    start = m.end() - 1
    return attrs[start + 1 : _balanced(attrs, start) - 1]


def attr_value(attrs: str, key: str) -> str | None:
    m = re.search(r"(?:^|[ ,])" + re.escape(key) + r'=("(?:[^"\\]|\\.)*"|\{[^}]*\}|[^,\s]+)', attrs)
    if not m:
        return None
    return m.group(1).strip('"')


@dataclass
class ParsedHlo:
    computations: dict[str, list[HloInstr]]
    entry: str | None
    frames: dict[int, str]


def parse_hlo_module(text: str) -> ParsedHlo:
    comps: dict[str, list[HloInstr]] = {}
    entry: str | None = None
    current: list[HloInstr] | None = None
    section: str | None = None
    tables: dict[str, dict[int, str]] = {
        "FileNames": {},
        "FunctionNames": {},
        "FileLocations": {},
        "StackFrames": {},
    }
    for line in text.splitlines():
        if current is not None:
            if line.startswith("}"):
                current = None
                continue
            instr = parse_instr(line)
            if instr is not None:
                current.append(instr)
            continue
        stripped = line.strip()
        if stripped in tables:
            section = stripped
            continue
        if (
            line
            and not line[0].isspace()
            and line.rstrip().endswith("{")
            and not line.startswith("HloModule")
        ):
            head = line.split("(", 1)[0].split()
            is_entry = bool(head) and head[0] == "ENTRY"
            name = (head[1] if is_entry and len(head) > 1 else head[0] if head else "").lstrip("%")
            current = comps.setdefault(name, [])
            if is_entry:
                entry = name
            section = None
            continue
        if section and stripped:
            num, _, rest = stripped.partition(" ")
            if num.isdigit():
                tables[section][int(num)] = rest
    frames: dict[int, str] = {}
    for fid, body in tables["StackFrames"].items():
        loc_id = re.search(r"file_location_id=(\d+)", body)
        loc = tables["FileLocations"].get(int(loc_id.group(1))) if loc_id else None
        if not loc:
            continue
        fn = re.search(r"file_name_id=(\d+)", loc)
        line_no = re.search(r"\bline=(\d+)", loc)
        file_name = tables["FileNames"].get(int(fn.group(1)), "?").strip('"') if fn else "?"
        frames[fid] = f"{file_name}:{line_no.group(1) if line_no else '?'}"
    return ParsedHlo(comps, entry, frames)


def called_computations(instr: HloInstr) -> list[str]:
    names = []
    for key in (
        "calls",
        "to_apply",
        "body",
        "condition",
        "branch_computations",
        "called_computations",
    ):
        v = attr_value(instr.attrs, key)
        if v:
            names += re.findall(r"%?([\w.\-]+)", v.strip("{}"))
    return names


def hlo_kernels(hlo_text: str) -> list[HloKernel]:
    """The kernels of an optimised HLO module, in the entry computation's program order.

    A kernel is a fusion, a custom call or any other op that does work (parameters,
    constants, tuples, bitcasts-free plumbing are skipped) in the entry computation or in a
    computation it runs as control flow (while bodies, conditionals, calls). For each, the
    ops inside, the shapes with layouts, and the names its ops were traced under.
    """
    mod = parse_hlo_module(hlo_text)
    if mod.entry is None:
        raise ValueError("no ENTRY computation in this HLO text; pass compiled.as_text()")

    def body_instrs(comp: str, seen: set[str]) -> list[HloInstr]:
        """Every instruction of a fused computation, nested fusions expanded in place.

        Reducer regions (``to_apply`` of a reduce) are not followed: their scalar adds are
        part of the reduce, and the reduce itself carries the same metadata.
        """
        if comp in seen or comp not in mod.computations:
            return []
        seen.add(comp)
        out: list[HloInstr] = []
        for ins in mod.computations[comp]:
            out.append(ins)
            if ins.opcode == "fusion":
                callee = attr_value(ins.attrs, "calls")
                if callee:
                    out += body_instrs(callee.lstrip("%"), seen)
        return out

    kernels: list[HloKernel] = []
    visited: set[str] = set()

    def walk(comp: str) -> None:
        if comp in visited or comp not in mod.computations:
            return
        visited.add(comp)
        table = {ins.name: ins for ins in mod.computations[comp]}
        for ins in mod.computations[comp]:
            if ins.opcode in ("while", "conditional", "call", "async-start", "async-done"):
                for callee in called_computations(ins):
                    walk(callee)
                continue
            if ins.opcode in _TRIVIAL_OPS or ins.opcode == "bitcast":
                continue
            kernels.append(_kernel(ins, table, body_instrs, mod.frames))

    walk(mod.entry)
    return kernels


def _kernel(
    ins: HloInstr,
    table: dict[str, HloInstr],
    body_instrs: Callable[[str, set[str]], list[HloInstr]],
    frames: dict[int, str],
) -> HloKernel:
    comp = None
    inner: list[HloInstr] = []
    if ins.opcode == "fusion":
        comp = attr_value(ins.attrs, "calls")
        comp = comp.lstrip("%") if comp else None
        inner = body_instrs(comp, set()) if comp else []
        kind = attr_value(ins.attrs, "kind") or "fusion"
    elif ins.opcode == "custom-call":
        kind = "custom-call"
    else:
        kind = ins.opcode
    backend_kind = attr_value(ins.attrs, "custom_call_target")
    estimated: int | None = None
    config_text = attr_block(ins.attrs, "backend_config")
    if config_text is not None:
        try:
            config = json.loads("{" + config_text + "}")
        except ValueError:
            config = {}
        fusion_kind = (
            config.get("fusion_backend_config") or config.get("fusion_config") or {}
        ).get("kind")
        backend_kind = backend_kind or fusion_kind
        cycles = (config.get("window_config") or {}).get("estimated_cycles")
        estimated = int(cycles) if cycles is not None else None
    ops = tuple(
        i.opcode for i in (inner or [ins]) if i.opcode not in _TRIVIAL_OPS and i.opcode != "fusion"
    ) or (ins.opcode,)
    names: list[str] = []
    srcs: list[str] = []
    for i in [ins, *inner]:
        md = attr_block(i.attrs, "metadata")
        if md is None:
            continue
        on = re.search(r'op_name="((?:[^"\\]|\\.)*)"', md)
        if on and "/" in on.group(1) and on.group(1) not in names:
            names.append(on.group(1))
        sf = re.search(r"stack_frame_id=(\d+)", md)
        src = frames.get(int(sf.group(1))) if sf else None
        if src is None:
            file_m = re.search(r'source_file="([^"]*)"', md)
            line_m = re.search(r"source_line=(\d+)", md)
            src = f"{file_m.group(1)}:{line_m.group(1)}" if file_m and line_m else None
        if src and src not in srcs:
            srcs.append(src)
    scopes: list[IrScope] = []
    for n in names:
        found = parse_ir_scopes(n)
        if found and found[-1] not in scopes:
            scopes.append(found[-1])
    operand_shapes: list[HloShape] = []
    for o in ins.operands:
        if o in table:
            operand_shapes += parse_shapes(table[o].shape)
    return HloKernel(
        name=ins.name,
        kind=kind,
        backend_kind=backend_kind,
        computation=comp,
        ops=ops,
        outputs=parse_shapes(ins.shape),
        operands=tuple(operand_shapes),
        op_names=tuple(names),
        ir_ops=tuple(scopes),
        source=tuple(srcs),
        estimated_cycles=estimated,
    )


def format_kernels(kernels: Iterable[HloKernel], *, max_ops: int = 6) -> str:
    """A plain-text table of kernels: name, kind, ops, result shapes with layouts, IR ops."""
    rows = [("kernel", "kind", "ops", "result (layout)", "IR ops")]
    for k in kernels:
        ops = list(dict.fromkeys(k.ops))
        ops_s = ",".join(ops[:max_ops]) + (",…" if len(ops) > max_ops else "")
        kind = k.kind + (f" {k.backend_kind}" if k.backend_kind else "")
        irs = ", ".join(str(s) for s in k.ir_ops) or "-"
        rows.append((k.name, kind, ops_s, " ".join(str(s) for s in k.outputs), irs))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    return "\n".join("  ".join(r[c].ljust(widths[c]) for c in range(4)) + "  " + r[4] for r in rows)
