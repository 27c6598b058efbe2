"""What every frontend shares: converter tables, unsupported-op reports, symbol examples.

A frontend walks the source graph once, builds IR through :class:`~irkit.ir.Builder`
and, instead of stopping at the first op it cannot translate, records each one
in an :class:`UnsupportedOps` collector; at the end :meth:`UnsupportedOps.raise_if_any`
raises one error listing every unsupported op with its count and locations.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from irkit.errors import InputError, Unsupported, UnsupportedOpsError
from irkit.ir.core import Function, Location

_F = TypeVar("_F", bound=Callable[..., Any])


@dataclass
class UnsupportedOps:
    """Collects unsupported source ops with their locations."""

    source: str
    ops: OrderedDict[str, list[str]] = field(default_factory=OrderedDict)

    def add(self, name: str, loc: Location | str) -> None:
        where = loc.short() if isinstance(loc, Location) else str(loc)
        self.ops.setdefault(name, []).append(where)

    def __bool__(self) -> bool:
        return bool(self.ops)

    def raise_if_any(self) -> None:
        if self.ops:
            raise UnsupportedOpsError(self.source, self.ops)


class ConverterTable(Mapping[Hashable, Callable[..., Any]]):
    """One frontend's converters, keyed by source op: the table *is* the frontend's coverage.

    Every frontend registers its converters the same way (the analogue of a target's
    :class:`~irkit.targets.base.LoweringTable`)::

        CONVERTERS = ConverterTable("torch.export", key=aten_key)
        converter = CONVERTERS.converter

        @converter("add.Tensor", "aten.sub")
        def _add(cx, a): ...

        CONVERTERS.add("neg", _unary("neg"))  # a converter built in a loop

    ``key`` maps a registered name (and the decorator's keyword arguments, such as
    ONNX's ``domain=``) to the lookup key; by default the name itself.  A converter
    may still refuse one node (a dtype, an attribute value) by raising
    :class:`~irkit.errors.Unsupported` with the reason.  Registering the same key
    twice is an error: the second would silently replace the first.
    """

    def __init__(self, frontend: str, key: Callable[..., Hashable] | None = None):
        self.frontend = frontend
        self._key = key
        self._fns: dict[Hashable, Callable[..., Any]] = {}

    def key(self, name: str, **kw: Any) -> Hashable:
        """The lookup key of ``name`` (what :meth:`converter` registers it under)."""
        if self._key is None:
            if kw:
                raise TypeError(f"{self.frontend} converters take no options, got {sorted(kw)}")
            return name
        return self._key(name, **kw)

    def add(self, name: str, fn: Callable[..., Any], **kw: Any) -> None:
        """Register ``fn`` as the converter of ``name``."""
        k = self.key(name, **kw)
        if k in self._fns:
            raise ValueError(f"{self.frontend}: converter for {k!r} is defined twice")
        self._fns[k] = fn

    def converter(self, *names: str, **kw: Any) -> Callable[[_F], _F]:
        """Register the decorated function as the converter of source ops ``names``."""

        def deco(fn: _F) -> _F:
            for n in names:
                self.add(n, fn, **kw)
            return fn

        return deco

    def covers(self, key: Hashable) -> bool:
        return key in self._fns

    @property
    def names(self) -> frozenset[Hashable]:
        return frozenset(self._fns)

    def __getitem__(self, key: Hashable) -> Callable[..., Any]:
        return self._fns[key]

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._fns)

    def __len__(self) -> int:
        return len(self._fns)

    def __repr__(self) -> str:
        return f"<ConverterTable {self.frontend}: {len(self._fns)} converters>"


class FrontendError(InputError):
    """A source file or object cannot be imported (names the file and the problem)."""


def record_symbol_examples(fn: Function, examples: Mapping[str, int]) -> None:
    """Remember example sizes of symbolic dims (used for random inputs and estimates)."""
    if examples:
        fn.attrs["ik.sym_examples"] = tuple(f"{k}={int(v)}" for k, v in sorted(examples.items()))


def sanitize_name(name: str) -> str:
    """A resource/argument name safe to print as an MLIR identifier."""
    import re

    s = re.sub(r"[^A-Za-z0-9_.$]", "_", name)
    if not s or not (s[0].isalpha() or s[0] == "_"):
        s = "_" + s
    return s


__all__ = [
    "ConverterTable",
    "FrontendError",
    "Unsupported",
    "UnsupportedOps",
    "UnsupportedOpsError",
    "record_symbol_examples",
    "sanitize_name",
]
