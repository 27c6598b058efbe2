"""Values, ops, graphs, functions and modules.

Design note: the structure follows MLIR with one block per region.  A
:class:`Graph` is an intrusive doubly-linked list of :class:`Op` (so inserting
and erasing during rewrites is O(1)), ending in a terminator op
(``func.return`` in a function, ``ik.yield`` in a fused region).  Every
:class:`Value` knows its uses, so ``replace_all_uses_with`` is a walk over the
uses, never over the graph.  Attributes are immutable Python values (int,
float, bool, str, tuples, :class:`DType`, :class:`Dense`); an op's attribute
dict is a read-only mapping, and changing one means creating a new op through
the rewriter.  Nothing here imports the printer, parser, passes or targets.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from irkit.ir.types import DType, TensorType

# ---------------------------------------------------------------------------
# Locations


@dataclass(frozen=True)
class Location:
    """Where an op came from: ``file:line:col``, a node name, or several (fused).

    ``file``/``line``/``col`` form MLIR's FileLineColLoc; ``name`` alone is a
    NameLoc (an ONNX node name, a torch node name); ``name`` with a file is a
    NameLoc wrapping a FileLineColLoc; ``fused`` lists the locations of the ops a
    fused op replaced.
    """

    file: str | None = None
    line: int = 0
    col: int = 0
    name: str | None = None
    fused: tuple[Location, ...] = ()

    @staticmethod
    def unknown() -> Location:
        return _UNKNOWN

    @property
    def is_unknown(self) -> bool:
        return self is _UNKNOWN or self == _UNKNOWN

    @staticmethod
    def fuse(locs: Sequence[Location]) -> Location:
        """A fused location of ``locs`` (flattened, deduplicated, unknowns dropped)."""
        flat: list[Location] = []
        for loc in locs:
            for leaf in (loc.fused if loc.fused else (loc,)):
                if not leaf.is_unknown and leaf not in flat:
                    flat.append(leaf)
        if not flat:
            return _UNKNOWN
        if len(flat) == 1:
            return flat[0]
        return Location(fused=tuple(flat))

    def short(self) -> str:
        """One-line human form: ``model.py:42``, ``/attn/MatMul``, ``a.py:3 +2 more``."""
        if self.fused:
            head = self.fused[0].short()
            return head + (f" (+{len(self.fused) - 1} more)" if len(self.fused) > 1 else "")
        if self.file is not None:
            base = f"{self.file}:{self.line}" + (f":{self.col}" if self.col else "")
            return f"{self.name} at {base}" if self.name else base
        if self.name is not None:
            return self.name
        return "unknown location"

    def leaves(self) -> tuple[Location, ...]:
        return self.fused if self.fused else (() if self.is_unknown else (self,))


_UNKNOWN = Location()


# ---------------------------------------------------------------------------
# Attributes


_UNSET = object()


class Dense:
    """An immutable dense tensor attribute (a constant's value).

    The array is stored read-only.  A splat (every element equal) keeps only its
    scalar and shape: a declared huge shape costs nothing, and ``array`` gives a
    zero-stride view only when a kernel asks for it.  ``resource`` names the
    entry when the value lives in a safetensors sidecar (``dense_resource<name>``).
    """

    __slots__ = ("_array", "_scalar", "_shape", "dtype", "resource", "_digest", "_is_splat", "_type", "_hash",
                 "_splat_py")

    def __init__(self, array: np.ndarray, dtype: DType | None = None, resource: str | None = None):
        dt = dtype or DType.from_numpy(array.dtype)
        if array.dtype != dt.np:
            array = array.astype(dt.np)
        if array.flags.writeable:
            # Copy so that nobody holding the caller's array can change a constant.
            array = np.array(array, copy=True, order="C")
            array.flags.writeable = False
        self._array: np.ndarray | None = array
        self._scalar: np.ndarray | None = None
        self._shape = tuple(int(d) for d in array.shape)
        self.dtype = dt
        self.resource = resource
        self._digest: bytes | None = None
        self._is_splat: bool | None = None
        self._type: TensorType | None = None
        self._hash: int | None = None
        self._splat_py: Any = _UNSET

    @staticmethod
    def splat(value: Any, shape: Sequence[int], dtype: DType) -> Dense:
        d = Dense.__new__(Dense)
        d._array = None
        d._scalar = np.array(value, dtype=dtype.np)
        d._shape = tuple(int(s) for s in shape)
        d.dtype = dtype
        d.resource = None
        d._digest = None
        d._is_splat = True
        d._type = None
        d._hash = None
        d._splat_py = _UNSET
        return d

    @property
    def array(self) -> np.ndarray:
        if self._array is None:
            assert self._scalar is not None
            # A zero-stride read-only view; NumPy refuses shapes beyond its index range.
            self._array = np.broadcast_to(self._scalar, self._shape)
        return self._array

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def type(self) -> TensorType:
        t = self._type
        if t is None:
            t = self._type = TensorType(self._shape, self.dtype)
        return t

    @property
    def size(self) -> int:
        n = 1
        for s in self._shape:
            n *= s
        return n

    @property
    def is_splat(self) -> bool:
        if self._is_splat is None:
            self._is_splat = self._compute_is_splat()
        return self._is_splat

    def _compute_is_splat(self) -> bool:
        if self._scalar is not None or self.size <= 1:
            return True
        a = self.array
        if a.flags.c_contiguous:
            # Random weights differ in their first two elements: reject without NumPy scalars.
            x0, x1 = a.reshape(-1)[:2].tolist()
            if x0 != x1 and x0 == x0 and x1 == x1:
                return False
        if all(st == 0 for st in a.strides):
            return True
        flat = a.reshape(-1)
        first = flat[0]
        # Random weights differ in their first elements: reject without a full scan.
        if flat[1] != first and not (flat[1] != flat[1] and first != first):
            return False
        if a.dtype.kind == "f" or a.dtype == DType.bf16.np:
            f32 = flat.astype(np.float32)
            return bool(np.all((f32 == f32[0]) | (np.isnan(f32) & np.isnan(f32[0]))))
        return bool(np.all(flat == first))

    def splat_value(self) -> Any:
        v = self._splat_py
        if v is _UNSET:
            if self._scalar is not None:
                v = self._scalar.item()
            else:
                v = self.array.reshape(-1)[0].item() if self.size else None
            self._splat_py = v
        return v

    def with_resource(self, name: str | None) -> Dense:
        d = Dense.__new__(Dense)
        d._array, d._scalar, d._shape = self._array, self._scalar, self._shape
        d.dtype, d.resource, d._digest, d._is_splat = self.dtype, name, self._digest, self._is_splat
        d._type, d._hash, d._splat_py = self._type, self._hash, self._splat_py
        return d

    def digest(self) -> bytes:
        if self._digest is None:
            h = hashlib.blake2b(digest_size=16)
            h.update(str(self.dtype).encode())
            h.update(repr(self._shape).encode())
            if self._splat_stored():
                h.update(b"splat")
                v = self._scalar if self._scalar is not None else self.array.reshape(-1)[:1]
                h.update(np.ascontiguousarray(v).tobytes())
            else:
                h.update(np.ascontiguousarray(self.array).tobytes())
            self._digest = h.digest()
        return self._digest

    def _splat_stored(self) -> bool:
        """True when the digest treats this value as a splat (scalar or zero-stride storage)."""
        if self._scalar is not None:
            return True
        a = self.array
        if a.flags.c_contiguous and a.size > 1:
            return False  # the common case, a stored array: no zero strides
        return bool(a.size and all(st == 0 for st in a.strides))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Dense):
            return False
        if self._shape != other._shape or self.dtype is not other.dtype or hash(self) != hash(other):
            return False
        return self.digest() == other.digest()

    def __hash__(self) -> int:
        # Cheap and consistent with __eq__ (equal digests give equal hashes): the
        # type, the storage kind and the first few elements.  Hashing never reads a
        # whole weight; only values that agree on all of this compare digests.
        h = self._hash
        if h is None:
            # The dtype by name: an Enum's own __hash__ is a Python call.
            if self._splat_stored():
                head = np.ascontiguousarray(self._scalar if self._scalar is not None
                                            else self.array.flat[:1]).tobytes()
                h = hash((self.dtype._name_, self._shape, True, head))
            else:
                a = self.array
                head = (a.reshape(-1)[:8] if a.flags.c_contiguous else np.ascontiguousarray(a.flat[:8])).tobytes()
                h = hash((self.dtype._name_, self._shape, False, head))
            self._hash = h
        return h

    def __repr__(self) -> str:
        return f"Dense({self.type}{', resource=' + self.resource if self.resource else ''})"


AttrValue = Any  # int | float | bool | str | DType | Dense | tuple[AttrValue, ...] | None


_PLAIN_ATTR_TYPES = frozenset({bool, int, float, str, type(None)})


def freeze_attr(v: Any) -> AttrValue:
    """Turn a Python value into an immutable attribute value."""
    if type(v) in _PLAIN_ATTR_TYPES:
        return v
    if isinstance(v, (bool, int, float, str, DType, Dense, TensorType)) or v is None:
        return v
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, (list, tuple)):
        if type(v) is tuple and all(type(x) in _PLAIN_ATTR_TYPES for x in v):
            return v
        return tuple(freeze_attr(x) for x in v)
    if isinstance(v, np.ndarray):
        return Dense(v)
    from irkit.ir.types import SymDim

    if isinstance(v, SymDim):
        return v
    raise TypeError(f"unsupported attribute value {v!r} ({type(v).__name__})")


def freeze_attrs(attrs: Mapping[str, Any] | None) -> Mapping[str, AttrValue]:
    if not attrs:
        return _EMPTY_ATTRS
    return MappingProxyType({k: freeze_attr(v) for k, v in sorted(attrs.items()) if v is not None})


_EMPTY_ATTRS: Mapping[str, AttrValue] = MappingProxyType({})


# ---------------------------------------------------------------------------
# Values and ops


class Value:
    """An SSA value: an op result or a graph argument, with its uses."""

    __slots__ = ("type", "producer", "index", "uses", "name", "__weakref__")

    def __init__(self, type: TensorType, producer: Op | None = None, index: int = 0,
                 name: str | None = None):
        self.type = type
        self.producer = producer
        self.index = index
        self.uses: list[tuple[Op, int]] = []
        self.name = name  # argument name hint (graph arguments), printer only

    @property
    def is_arg(self) -> bool:
        return self.producer is None

    @property
    def users(self) -> list[Op]:
        uses = self.uses
        if len(uses) <= 1:
            return [uses[0][0]] if uses else []
        seen: dict[int, Op] = {}
        for op, _ in self.uses:
            seen.setdefault(id(op), op)
        return list(seen.values())

    @property
    def has_one_use(self) -> bool:
        return len(self.uses) == 1

    @property
    def shape(self) -> tuple:
        return self.type.shape

    @property
    def dtype(self) -> DType:
        return self.type.dtype

    def replace_all_uses_with(self, new: Value) -> None:
        """Point every user of this value at ``new``."""
        if new is self:
            return
        for op, i in list(self.uses):
            op._operands[i] = new
            new.uses.append((op, i))
        self.uses.clear()

    def replace_all_uses_except(self, new: Value, keep: Op) -> None:
        """Like :meth:`replace_all_uses_with`, but ``keep`` goes on using this value."""
        kept = []
        for op, i in list(self.uses):
            if op is keep:
                kept.append((op, i))
                continue
            op._operands[i] = new
            new.uses.append((op, i))
        self.uses = kept

    def __repr__(self) -> str:
        where = self.producer.name if self.producer else f"arg {self.name or self.index}"
        return f"<Value {self.type} from {where}>"


class Op:
    """An operation: a name, operands, results, attributes, regions and a location."""

    __slots__ = ("name", "_operands", "results", "attrs", "regions", "loc",
                 "parent", "_prev", "_next", "__weakref__")

    def __init__(self, name: str, operands: Sequence[Value], result_types: Sequence[TensorType],
                 attrs: Mapping[str, Any] | None = None, regions: Sequence[Graph] = (),
                 loc: Location | None = None):
        self.name = name
        self._operands: list[Value] = list(operands)
        for i, v in enumerate(self._operands):
            if type(v) is not Value and not isinstance(v, Value):
                raise TypeError(f"operand {i} of '{name}' is {type(v).__name__}, not a Value")
            v.uses.append((self, i))
        self.results = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attrs: Mapping[str, AttrValue] = freeze_attrs(attrs) if attrs else _EMPTY_ATTRS
        self.regions: list[Graph] = list(regions) if regions else []
        for r in self.regions:
            r.parent_op = self
        self.loc = loc or _UNKNOWN
        self.parent: Graph | None = None
        self._prev: Op | None = None
        self._next: Op | None = None

    @classmethod
    def _make(cls, name: str, operands: list[Value], result_types: Sequence[TensorType],
              attrs: Mapping[str, AttrValue], loc: Location) -> Op:
        """Fast construction for trusted callers (parser, clone): ``operands`` are Values
        (the list is taken over), ``attrs`` is already a frozen mapping, no regions."""
        op = cls.__new__(cls)
        op.name = name
        op._operands = operands
        for i, v in enumerate(operands):
            v.uses.append((op, i))
        if len(result_types) == 1:
            op.results = [Value(result_types[0], op, 0)]
        else:
            op.results = [Value(t, op, i) for i, t in enumerate(result_types)]
        op.attrs = attrs
        op.regions = []
        op.loc = loc
        op.parent = op._prev = op._next = None
        return op

    # -- operands ----------------------------------------------------------
    @property
    def operands(self) -> tuple[Value, ...]:
        return tuple(self._operands)

    def operand(self, i: int) -> Value:
        return self._operands[i]

    @property
    def num_operands(self) -> int:
        return len(self._operands)

    def set_operand(self, i: int, v: Value) -> None:
        old = self._operands[i]
        old.uses.remove((self, i))
        self._operands[i] = v
        v.uses.append((self, i))

    def drop_operands(self) -> None:
        """Remove this op's uses of its operands (before erasing it)."""
        for i, v in enumerate(self._operands):
            try:
                v.uses.remove((self, i))
            except ValueError:
                pass
        self._operands = []

    # -- results -----------------------------------------------------------
    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"'{self.name}' has {len(self.results)} results, not one")
        return self.results[0]

    @property
    def result_types(self) -> list[TensorType]:
        return [r.type for r in self.results]

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    @property
    def is_used(self) -> bool:
        for r in self.results:
            if r.uses:
                return True
        return False

    # -- position ----------------------------------------------------------
    @property
    def next(self) -> Op | None:
        return self._next

    @property
    def prev(self) -> Op | None:
        return self._prev

    def __repr__(self) -> str:
        return f"<Op {self.name} {self.loc.short()}>"


# ---------------------------------------------------------------------------
# Graphs (single-block regions), functions, modules


class Graph:
    """A single-block region: arguments, then ops in order, ending in a terminator."""

    __slots__ = ("args", "_first", "_last", "_count", "parent_op", "__weakref__")

    def __init__(self, arg_types: Sequence[TensorType] = (), arg_names: Sequence[str | None] | None = None):
        names = list(arg_names) if arg_names is not None else [None] * len(arg_types)
        self.args: list[Value] = [Value(t, None, i, n) for i, (t, n) in enumerate(zip(arg_types, names))]
        self._first: Op | None = None
        self._last: Op | None = None
        self._count = 0
        self.parent_op: Op | None = None

    # -- iteration ---------------------------------------------------------
    def __iter__(self) -> Iterator[Op]:
        op = self._first
        while op is not None:
            nxt = op._next
            yield op
            op = nxt

    def __len__(self) -> int:
        return self._count

    @property
    def ops(self) -> list[Op]:
        return list(self)

    @property
    def first(self) -> Op | None:
        return self._first

    @property
    def terminator(self) -> Op | None:
        return self._last if self._last is not None and self._last.name in TERMINATORS else None

    @property
    def outputs(self) -> tuple[Value, ...]:
        t = self.terminator
        return t.operands if t is not None else ()

    def walk(self) -> Iterator[Op]:
        """Every op, nested regions included (pre-order)."""
        for op in self:
            yield op
            for r in op.regions:
                yield from r.walk()

    # -- editing -----------------------------------------------------------
    def append(self, op: Op) -> Op:
        if op.parent is not None:
            raise ValueError(f"'{op.name}' is already in a graph")
        last = self._last
        op.parent, op._prev, op._next = self, last, None
        if last is None:
            self._first = op
        else:
            last._next = op
        self._last = op
        self._count += 1
        return op

    def insert_before(self, anchor: Op, op: Op) -> Op:
        if anchor.parent is not self:
            raise ValueError("anchor op is not in this graph")
        return self._link(op, anchor._prev, anchor)

    def insert_after(self, anchor: Op, op: Op) -> Op:
        if anchor.parent is not self:
            raise ValueError("anchor op is not in this graph")
        return self._link(op, anchor, anchor._next)

    def _link(self, op: Op, prev: Op | None, nxt: Op | None) -> Op:
        if op.parent is not None:
            raise ValueError(f"'{op.name}' is already in a graph")
        op.parent, op._prev, op._next = self, prev, nxt
        if prev is None:
            self._first = op
        else:
            prev._next = op
        if nxt is None:
            self._last = op
        else:
            nxt._prev = op
        self._count += 1
        return op

    def unlink(self, op: Op) -> None:
        """Remove ``op`` from the list (its uses are untouched)."""
        if op.parent is not self:
            raise ValueError("op is not in this graph")
        if op._prev is None:
            self._first = op._next
        else:
            op._prev._next = op._next
        if op._next is None:
            self._last = op._prev
        else:
            op._next._prev = op._prev
        op.parent = op._prev = op._next = None
        self._count -= 1

    def erase(self, op: Op) -> None:
        """Unlink ``op`` and drop its operand uses; its results must be unused."""
        if op.is_used:
            raise ValueError(f"cannot erase '{op.name}' ({op.loc.short()}): its results are still used")
        self.unlink(op)
        op.drop_operands()
        for r in op.regions:
            for inner in list(r):
                inner.drop_operands()

    def order(self) -> dict[int, int]:
        """Map id(op) -> position, for dominance checks."""
        return {id(op): i for i, op in enumerate(self)}


TERMINATORS = frozenset({"func.return", "ik.yield"})


class Function:
    """A named function: a graph whose terminator is ``func.return``."""

    def __init__(self, name: str, body: Graph, loc: Location | None = None,
                 attrs: Mapping[str, Any] | None = None):
        self.name = name
        self.body = body
        self.loc = loc or _UNKNOWN
        self.attrs: dict[str, Any] = dict(attrs or {})

    @property
    def args(self) -> list[Value]:
        return self.body.args

    @property
    def outputs(self) -> tuple[Value, ...]:
        return self.body.outputs

    @property
    def arg_types(self) -> list[TensorType]:
        return [a.type for a in self.body.args]

    @property
    def result_types(self) -> list[TensorType]:
        return [v.type for v in self.outputs]

    def arg_names(self) -> list[str]:
        return [a.name or f"arg{i}" for i, a in enumerate(self.body.args)]

    def walk(self) -> Iterator[Op]:
        return self.body.walk()

    def __repr__(self) -> str:
        return f"<Function @{self.name} {len(self.body)} ops>"


class Module:
    """A list of functions; the first (or the one named ``main``) is the entry."""

    def __init__(self, functions: Sequence[Function] = (), attrs: Mapping[str, Any] | None = None):
        self.functions: list[Function] = list(functions)
        self.attrs: dict[str, Any] = dict(attrs or {})

    @property
    def entry(self) -> Function:
        if not self.functions:
            raise ValueError("module has no functions")
        for f in self.functions:
            if f.name == "main":
                return f
        return self.functions[0]

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)

    def walk(self) -> Iterator[Op]:
        for f in self.functions:
            yield from f.walk()

    def num_ops(self) -> int:
        return sum(1 for _ in self.walk())

    def clone(self) -> Module:
        """A deep copy: new values and ops, shared immutable attributes."""
        return Module([clone_function(f) for f in self.functions], self.attrs)

    def __repr__(self) -> str:
        return f"<Module {[f.name for f in self.functions]}>"


def clone_graph(g: Graph, mapping: dict[int, Value] | None = None) -> Graph:
    """Copy a graph; ``mapping`` (id(old value) -> new value) is filled in."""
    m = mapping if mapping is not None else {}
    new = Graph([a.type for a in g.args], [a.name for a in g.args])
    for old, nv in zip(g.args, new.args):
        m[id(old)] = nv
    for op in g:
        new.append(clone_op(op, m))
    return new


def clone_op(op: Op, mapping: dict[int, Value]) -> Op:
    """Copy one op, mapping its operands through ``mapping`` (outer values stay)."""
    operands = [mapping.get(id(v), v) for v in op._operands]
    if op.regions:
        regions = [clone_graph(r, {}) for r in op.regions]
        new = Op(op.name, operands, op.result_types, None, regions, op.loc)
        new.attrs = op.attrs
    else:
        new = Op._make(op.name, operands, [r.type for r in op.results], op.attrs, op.loc)
    for o, n in zip(op.results, new.results):
        mapping[id(o)] = n
    return new


def clone_function(f: Function) -> Function:
    return Function(f.name, clone_graph(f.body), f.loc, f.attrs)


_counter = itertools.count()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk IR job (parse, a rewrite pass).

    Such jobs allocate many small objects and free nearly all of them by
    reference counting; the collector's full scans would only re-walk the whole
    module again and again.  Cycles made meanwhile (erased ops) are collected
    once the collector runs again.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def fresh_name(prefix: str) -> str:
    """A process-unique name (for generated resources and functions)."""
    return f"{prefix}{next(_counter)}"


@dataclass
class Diagnostic:
    """A message tied to an op (used by the verifier and explain mode)."""

    message: str
    op: Op | None = None
    loc: Location = field(default_factory=Location.unknown)

    def __str__(self) -> str:
        where = self.loc.short() if not self.loc.is_unknown else (self.op.loc.short() if self.op else "")
        opname = f"'{self.op.name}'" if self.op is not None else ""
        head = " ".join(x for x in (opname, f"at {where}" if where and where != "unknown location" else "") if x)
        return f"{head}: {self.message}" if head else self.message
