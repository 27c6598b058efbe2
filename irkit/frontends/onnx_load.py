"""Reading an ONNX file safely: parse, validate, and turn tensors into NumPy.

Design note: everything a hostile or broken file can do to us happens here, and
each problem becomes one :class:`~irkit.frontends.common.FrontendError` line that
names the file and what is wrong.

- The file is read and parsed by us (``ModelProto.ParseFromString``), never with
  ``onnx.load``'s external-data loader: a tensor stored as *external data* names
  a file, and that name must stay inside the model's own folder.  We reject
  absolute paths and ``..`` parts, resolve symlinks with ``os.path.realpath`` and
  require the result to lie under the folder's real path, then read exactly the
  declared byte range ourselves.
- A tensor's bytes are checked against its declared shape *before* anything is
  allocated; a declared shape is never used to allocate memory, so a file that
  claims a ``[10^12, 10^12]`` tensor costs nothing but an error message.
- Structure is checked once, up front: unique value names, every node input
  produced somewhere (no dangling inputs, no missing initializers), graph
  outputs defined, no cycles (an unsorted but acyclic graph is sorted).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from irkit.frontends.common import FrontendError
from irkit.ir.types import DType

# ONNX limits what one protobuf can hold; anything bigger must use external data.
PROTOBUF_LIMIT = 2**31 - 1
# A declared dim or element count beyond this is treated as a corrupt file.
MAX_ELEMENTS = 2**40
# Opsets of the default domain the importer translates (see docs/frontend-onnx.md).  Converters
# read each op's form (attribute or input) so every version from MIN_OPSET on imports directly;
# older models are first brought to MIN_OPSET by onnx.version_converter.
MIN_OPSET = 7
MAX_OPSET = 28


@dataclass(frozen=True)
class OnnxDType:
    """How an ONNX element type is stored and which IR dtype it becomes."""

    name: str
    ir: DType
    storage: np.dtype  # little-endian layout of raw_data / external data
    field: str  # the typed repeated field of TensorProto that may hold it


def _dt(name: str, ir: DType, storage: str, fld: str) -> OnnxDType:
    return OnnxDType(name, ir, np.dtype(storage), fld)


# TensorProto.DataType -> OnnxDType (every integer width has its own IR dtype);
# everything else (strings, complex, float8e8m0, float4, int4/2) is unsupported.
ONNX_DTYPES: dict[int, OnnxDType] = {
    1: _dt("float32", DType.f32, "<f4", "float_data"),
    2: _dt("uint8", DType.ui8, "u1", "int32_data"),
    3: _dt("int8", DType.i8, "i1", "int32_data"),
    4: _dt("uint16", DType.ui16, "<u2", "int32_data"),
    5: _dt("int16", DType.i16, "<i2", "int32_data"),
    6: _dt("int32", DType.i32, "<i4", "int32_data"),
    7: _dt("int64", DType.i64, "<i8", "int64_data"),
    9: _dt("bool", DType.bool, "u1", "int32_data"),
    10: _dt("float16", DType.f16, "<u2", "int32_data"),
    11: _dt("float64", DType.f64, "<f8", "double_data"),
    12: _dt("uint32", DType.ui32, "<u4", "uint64_data"),
    13: _dt("uint64", DType.ui64, "<u8", "uint64_data"),
    16: _dt("bfloat16", DType.bf16, "<u2", "int32_data"),
    17: _dt("float8e4m3fn", DType.f8e4m3fn, "u1", "int32_data"),
    18: _dt("float8e4m3fnuz", DType.f8e4m3fnuz, "u1", "int32_data"),
    19: _dt("float8e5m2", DType.f8e5m2, "u1", "int32_data"),
    20: _dt("float8e5m2fnuz", DType.f8e5m2fnuz, "u1", "int32_data"),
}

_TYPE_NAMES = {
    0: "undefined", 8: "string", 14: "complex64", 15: "complex128", 21: "uint4", 22: "int4",
    23: "float4e2m1", 24: "float8e8m0", 25: "uint2", 26: "int2",
}

IR_TO_ONNX: dict[DType, int] = {d.ir: code for code, d in ONNX_DTYPES.items()}


def onnx_type_name(code: int) -> str:
    """``float32``, ``string``, ... for a TensorProto.DataType code."""
    d = ONNX_DTYPES.get(code)
    return d.name if d else _TYPE_NAMES.get(code, f"type code {code}")


def ir_dtype(code: int, source: str, what: str) -> DType:
    """The IR dtype of an ONNX element type, or a FrontendError naming ``what``."""
    d = ONNX_DTYPES.get(code)
    if d is None:
        raise FrontendError(f"{source}: {what} has element type {onnx_type_name(code)}, which irkit does not "
                            f"support (supported: {', '.join(sorted({x.name for x in ONNX_DTYPES.values()}))})")
    return d.ir


# ---------------------------------------------------------------------------
# Reading the file


@dataclass
class LoadedModel:
    """A parsed, structurally checked ONNX model and where it came from."""

    proto: Any  # onnx.ModelProto
    source: str  # the name used in error messages (the path, or "<ModelProto>")
    base_dir: Path | None  # folder external data must stay in; None: no external data allowed
    opset: int  # version of the default ("ai.onnx") domain
    opsets: dict[str, int] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)  # node indices in topological order
    node_io: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (inputs, outputs) per node


def read_model(model_or_path: Any, base_dir: str | os.PathLike[str] | None = None) -> LoadedModel:
    """Parse a path, bytes or ``onnx.ModelProto`` and check its structure."""
    import onnx
    from google.protobuf.message import DecodeError

    if isinstance(model_or_path, onnx.ModelProto):
        proto = model_or_path
        source = "<ModelProto>"
        root = Path(base_dir) if base_dir is not None else None
    else:
        if isinstance(model_or_path, (bytes, bytearray, memoryview)):
            data = bytes(model_or_path)
            source = "<bytes>"
            root = Path(base_dir) if base_dir is not None else None
        elif isinstance(model_or_path, (str, os.PathLike)):
            p = Path(model_or_path)
            source = str(p)
            data = _read_file(p)
            root = Path(base_dir) if base_dir is not None else Path(os.path.abspath(p)).parent
        else:
            raise FrontendError(f"import_onnx expects a path, bytes or onnx.ModelProto, got "
                                f"{type(model_or_path).__name__}")
        proto = onnx.ModelProto()
        try:
            proto.ParseFromString(data)
        except (DecodeError, RuntimeError, ValueError) as e:
            why = str(e).split(":")[-1].strip() or "parse error"
            raise FrontendError(f"{source}: not a valid ONNX file: the protobuf does not parse ({why}); "
                                "the file is truncated, corrupt, or not an ONNX model") from None
    if not proto.HasField("graph"):
        raise FrontendError(f"{source}: not an ONNX model: it has no graph (is it another kind of protobuf, "
                            "or an empty file?)")
    if proto.ir_version < 3:
        raise FrontendError(f"{source}: not an ONNX model: ir_version is {proto.ir_version} (expected 3 or more)")
    opsets: dict[str, int] = {}
    for o in proto.opset_import:
        dom = "" if o.domain in ("", "ai.onnx") else o.domain
        opsets[dom] = int(o.version)
    if "" not in opsets:
        # No default-domain node can appear; the other domains' nodes are reported by the importer.
        opsets[""] = MAX_OPSET
    opset = opsets[""]
    if opset > MAX_OPSET:
        raise FrontendError(f"{source}: ONNX opset {opset} is not supported; irkit imports opsets up to "
                            f"{MAX_OPSET} (convert with onnx.version_converter.convert_version(model, {MAX_OPSET}))")
    if opset < MIN_OPSET:
        proto, opset = _upgrade(proto, source, opset), MIN_OPSET
        opsets[""] = opset
    if proto.functions:
        # Model-local functions (onnxscript, some exporters) are macros: inline them.
        try:
            import onnx.inliner

            proto = onnx.inliner.inline_local_functions(proto)
        except Exception as e:  # noqa: BLE001 - onnx raises many types here
            raise FrontendError(f"{source}: cannot inline the model's local functions ({_one_line(e)})") from None
    lm = LoadedModel(proto, source, root, opset, opsets)
    lm.order = check_graph(lm)
    return lm


def _upgrade(proto: Any, source: str, opset: int) -> Any:
    """An opset-1..6 model converted to MIN_OPSET by onnx.version_converter (or a one-line error)."""
    import onnx.version_converter

    try:
        return onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # noqa: BLE001 - the converter raises many types
        raise FrontendError(f"{source}: ONNX opset {opset} is older than irkit imports ({MIN_OPSET} to {MAX_OPSET}) "
                            f"and onnx.version_converter cannot upgrade it ({_one_line(e)})") from None


def _read_file(p: Path) -> bytes:
    try:
        st = p.stat()
    except FileNotFoundError:
        raise FrontendError(f"{p}: no such file") from None
    except OSError as e:
        raise FrontendError(f"{p}: cannot read ({e.strerror})") from None
    if p.is_dir():
        raise FrontendError(f"{p}: is a directory, expected an .onnx file")
    if st.st_size > PROTOBUF_LIMIT:
        raise FrontendError(f"{p}: {st.st_size} bytes is beyond protobuf's 2 GiB limit; store the weights as "
                            "external data (onnx.save(..., save_as_external_data=True))")
    try:
        return p.read_bytes()
    except OSError as e:
        raise FrontendError(f"{p}: cannot read ({e.strerror})") from None


def _one_line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0][:300] if s else type(e).__name__


# ---------------------------------------------------------------------------
# Structure


def check_graph(lm: LoadedModel) -> list[int]:
    """Check names, producers and acyclicity; return node indices in topological order."""
    g = lm.proto.graph
    src = lm.source
    defined: dict[str, str] = {}  # value name -> what defines it

    def define(name: str, what: str) -> None:
        if not name:
            raise FrontendError(f"{src}: {what} has an empty name")
        if name in defined:
            raise FrontendError(f"{src}: duplicate name '{name}': defined by {defined[name]} and by {what}")
        defined[name] = what

    init_names = set()
    for t in g.initializer:
        define(t.name, f"initializer '{t.name}'")
        init_names.add(t.name)
    for t in g.sparse_initializer:
        raise FrontendError(f"{src}: sparse initializer '{t.values.name}' is not supported")
    for v in g.input:
        if v.name in init_names:
            continue  # an initializer with a default-overridable input: treated as a constant
        define(v.name, f"graph input '{v.name}'")
    producer: dict[str, int] = {}
    # Reading repeated protobuf fields is slow: read each node's names once.
    lm.node_io = [(list(n.input), list(n.output)) for n in g.node]
    for i, n in enumerate(g.node):
        for o in lm.node_io[i][1]:
            if o:
                define(o, f"node {_node_desc(n, i)}")
                producer[o] = i
    # Dangling inputs: a name nobody defines.
    for i, n in enumerate(g.node):
        for k, x in enumerate(lm.node_io[i][0]):
            if x and x not in defined:
                raise FrontendError(f"{src}: node {_node_desc(n, i)} input {k} '{x}' is not produced by any node, "
                                    "graph input or initializer (a dangling input or a missing initializer)")
    for o in g.output:
        if o.name not in defined:
            raise FrontendError(f"{src}: graph output '{o.name}' is not produced by any node, input or initializer")
    if not g.output:
        raise FrontendError(f"{src}: the graph has no outputs")
    # Kahn's algorithm, stable in file order.
    n_nodes = len(g.node)
    deps = [0] * n_nodes
    users: list[list[int]] = [[] for _ in range(n_nodes)]
    for i in range(n_nodes):
        seen: set[int] = set()
        for x in lm.node_io[i][0]:
            j = producer.get(x) if x else None
            if j is not None and j not in seen:
                seen.add(j)
                deps[i] += 1
                users[j].append(i)
    import heapq

    ready = [i for i in range(n_nodes) if deps[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            deps[u] -= 1
            if deps[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != n_nodes:
        stuck = [i for i in range(n_nodes) if deps[i] > 0]
        names = ", ".join(_node_desc(g.node[i], i) for i in stuck[:4])
        more = f" and {len(stuck) - 4} more" if len(stuck) > 4 else ""
        raise FrontendError(f"{src}: the graph has a cycle through {len(stuck)} node(s): {names}{more}")
    return order


def _node_desc(n: Any, i: int) -> str:
    return f"'{n.name}' ({n.op_type})" if n.name else f"#{i} ({n.op_type})"


# ---------------------------------------------------------------------------
# Tensors


def check_dims(dims: Iterable[int], source: str, what: str) -> tuple[int, ...]:
    """Validate declared static dims: non-negative, and not absurdly many elements."""
    out = tuple(int(d) for d in dims)
    n = 1
    for d in out:
        if d < 0:
            raise FrontendError(f"{source}: {what} has a negative dim {d} in shape {list(out)}")
        n *= d
        if d > MAX_ELEMENTS or n > MAX_ELEMENTS:
            raise FrontendError(f"{source}: {what} declares shape {list(out)}, more than 2^40 elements; "
                                "the file is corrupt or the shape absurd")
    return out


def tensor_to_numpy(t: Any, lm: LoadedModel, what: str) -> tuple[np.ndarray, DType]:
    """A TensorProto's value as a read-only NumPy array, and its IR dtype.

    The data length is checked against the declared shape before anything is
    allocated; external data is read from inside the model's folder only.
    """
    src = lm.source
    if t.data_type not in ONNX_DTYPES:
        ir_dtype(t.data_type, src, what)  # raises with the type's name
    d = ONNX_DTYPES[t.data_type]
    dims = check_dims(t.dims, src, what)
    n = 1
    for x in dims:
        n *= x
    nbytes = n * d.storage.itemsize
    if t.data_location == 1:  # EXTERNAL
        raw = _read_external(t, lm, what, nbytes)
        arr = np.frombuffer(raw, dtype=d.storage)
    elif t.HasField("raw_data") or len(t.raw_data):
        if len(t.raw_data) != nbytes:
            raise FrontendError(f"{src}: {what} declares shape {list(dims)} ({n} x {d.name}, {nbytes} bytes) "
                                f"but holds {len(t.raw_data)} bytes")
        arr = np.frombuffer(t.raw_data, dtype=d.storage)
    else:
        data = getattr(t, d.field)
        if len(data) != n:
            raise FrontendError(f"{src}: {what} declares shape {list(dims)} ({n} elements) but holds {len(data)}")
        if d.field == "int32_data" and d.storage.itemsize == 2 and d.ir.is_float:
            arr = np.asarray(data, dtype=np.int64).astype(np.uint16)  # f16/bf16 bit patterns
        else:
            wide = np.float64 if d.field in ("float_data", "double_data") else \
                np.uint64 if d.field == "uint64_data" else np.int64
            arr = np.asarray(data, dtype=wide)
            arr = arr.astype(d.storage)
    if d.ir is DType.f16:
        arr = arr.view(np.float16)
    elif d.ir is DType.bf16:
        arr = arr.view(ml_dtypes.bfloat16)
    elif d.ir.is_float8:
        arr = arr.view(d.ir.np)  # float8 bit patterns, one per byte
    elif d.ir is DType.bool:
        arr = arr != 0
    elif arr.dtype != d.ir.np:
        arr = arr.astype(d.ir.np)
    arr = arr.reshape(dims)
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and not np.little_endian):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.flags.writeable:
        arr.flags.writeable = False
    return arr, d.ir


_WIN_DRIVE = re.compile(r"^[A-Za-z]:")


def resolve_external(location: str, lm: LoadedModel, what: str) -> Path:
    """The real path of an external data file, which must lie inside the model's folder."""
    src = lm.source
    if lm.base_dir is None:
        raise FrontendError(f"{src}: {what} is stored as external data ('{location}'), but the model was not "
                            "given as a path; pass the .onnx path (or base_dir=) so its folder is known")
    if not location:
        raise FrontendError(f"{src}: {what} is external data without a location")
    if "\x00" in location:
        raise FrontendError(f"{src}: {what}: external data location contains a NUL byte")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or _WIN_DRIVE.match(location):
        raise FrontendError(f"{src}: {what}: external data location '{location}' is an absolute path; "
                            "external data must lie in the model's own folder")
    if ".." in re.split(r"[\\/]+", location):
        raise FrontendError(f"{src}: {what}: external data location '{location}' contains '..'; "
                            "external data must lie in the model's own folder")
    root = os.path.realpath(lm.base_dir)
    full = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, full]) != root:
        raise FrontendError(f"{src}: {what}: external data location '{location}' resolves outside the model's "
                            "folder (through a symlink); refusing to read it")
    if not os.path.exists(full):
        raise FrontendError(f"{src}: {what}: external data file '{location}' is missing (looked in {root})")
    if not os.path.isfile(full):
        raise FrontendError(f"{src}: {what}: external data location '{location}' is not a regular file")
    return Path(full)


def _read_external(t: Any, lm: LoadedModel, what: str, nbytes: int) -> bytes:
    src = lm.source
    info = {e.key: e.value for e in t.external_data}
    path = resolve_external(info.get("location", ""), lm, what)
    try:
        offset = int(info.get("offset", "0") or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        raise FrontendError(f"{src}: {what}: external data offset/length are not integers") from None
    size = path.stat().st_size
    if offset < 0 or offset > size:
        raise FrontendError(f"{src}: {what}: external data offset {offset} is outside '{path.name}' "
                            f"({size} bytes)")
    if length is None:
        length = size - offset
    if length != nbytes:
        raise FrontendError(f"{src}: {what}: external data holds {length} bytes, its shape needs {nbytes}")
    if offset + length > size:
        raise FrontendError(f"{src}: {what}: external data range [{offset}, {offset + length}) runs past the end "
                            f"of '{path.name}' ({size} bytes); the file is truncated")
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise FrontendError(f"{src}: {what}: short read from '{path.name}'")
    return data


__all__ = [
    "IR_TO_ONNX",
    "MAX_ELEMENTS",
    "MAX_OPSET",
    "MIN_OPSET",
    "ONNX_DTYPES",
    "LoadedModel",
    "check_dims",
    "check_graph",
    "ir_dtype",
    "onnx_type_name",
    "read_model",
    "resolve_external",
    "tensor_to_numpy",
]
