"""What every frontend shares: unsupported-op reports, locations, symbol examples.

A frontend walks the source graph once, builds IR through :class:`~irkit.ir.Builder`
and, instead of stopping at the first op it cannot translate, records each one
in an :class:`UnsupportedOps` collector; at the end :meth:`UnsupportedOps.raise_if_any`
raises one error listing every unsupported op with its count and locations.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Mapping

from irkit.errors import InputError, IrkitError
from irkit.ir.core import Function, Location


class UnsupportedOpsError(IrkitError):
    """The source uses ops irkit cannot import; the message lists all of them."""

    def __init__(self, source: str, ops: Mapping[str, list[str]]):
        self.source = source
        self.ops = dict(ops)
        parts = []
        for name, locs in self.ops.items():
            shown = ", ".join(locs[:3]) + (f", +{len(locs) - 3} more" if len(locs) > 3 else "")
            parts.append(f"{name} x{len(locs)} ({shown})")
        total = sum(len(v) for v in self.ops.values())
        super().__init__(f"{source}: {total} unsupported op(s) of {len(self.ops)} kind(s): " + "; ".join(parts)
                         + " (see `irkit coverage` for what each frontend supports)")


@dataclass
class UnsupportedOps:
    """Collects unsupported source ops with their locations."""

    source: str
    ops: "OrderedDict[str, list[str]]" = field(default_factory=OrderedDict)

    def add(self, name: str, loc: Location | str) -> None:
        where = loc.short() if isinstance(loc, Location) else str(loc)
        self.ops.setdefault(name, []).append(where)

    def __bool__(self) -> bool:
        return bool(self.ops)

    def raise_if_any(self) -> None:
        if self.ops:
            raise UnsupportedOpsError(self.source, self.ops)


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


__all__ = ["UnsupportedOps", "UnsupportedOpsError", "FrontendError", "record_symbol_examples", "sanitize_name"]
