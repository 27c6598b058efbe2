"""The IR-scope codec: an IR op and its source location carried through a compiler's metadata.

A lowering traces each IR op under a named scope made by :func:`ir_scope`
(``ik.matmul#12[gpt2_block.py:30]``); the compiler copies the scope into the
metadata of every instruction it emits (XLA: ``metadata={op_name="jit(f)/ik.matmul#12[...]/dot_general"}``);
:func:`parse_ir_scopes` reads it back, so each compiled kernel names the IR ops and
source lines it came from. Do not put ``@`` in a scope: XLA's StableHLO-to-HLO
translation treats ``name@function`` as TensorFlow's naming convention and drops
everything from the ``@`` on (seen with jax 0.10.2), so characters that XLA or JAX
would mangle are %-escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["IrScope", "ir_scope", "parse_ir_scopes"]



@dataclass(frozen=True)
class IrScope:
    """An IR op named in a JAX named scope: ``ik.matmul#3[model.py:42]``."""

    op: str
    """The IR op name, e.g. ``ik.matmul``."""
    id: str | None = None
    """An optional identifier of the op instance (e.g. its result's number)."""
    loc: str | None = None
    """The op's source location, e.g. ``model.py:42``."""

    def __str__(self) -> str:
        # The readable form; ir_scope() gives the escaped form that goes into a named scope.
        return (
            self.op
            + (f"#{self.id}" if self.id is not None else "")
            + (f"[{self.loc}]" if self.loc is not None else "")
        )


# Characters the scope must not carry raw: '@' (XLA cuts the name there), '/' (JAX's scope
# separator), the brackets and '#' of our own syntax, and '%' (the escape itself).
_ESCAPES = {"%": "%25", "@": "%40", "/": "%2F", "[": "%5B", "]": "%5D", "#": "%23"}


def _escape(text: str) -> str:
    return "".join(_ESCAPES.get(c, c) for c in text)


def _unescape(text: str) -> str:
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def ir_scope(op: str, loc: str | None = None, id: str | None = None) -> str:
    """The ``jax.named_scope`` name that carries an IR op (and its location) into the HLO.

    ``ir_scope("ik.matmul", "model.py:42")`` is ``ik.matmul[model.py:42]``; with ``id="3"``,
    ``ik.matmul#3[model.py:42]``. Characters that XLA or JAX would mangle (``@``, ``/``) are
    %-escaped, so a path like ``models/gpt.py:42`` survives; :func:`parse_ir_scopes` undoes it.
    """
    if not re.fullmatch(r"[A-Za-z_]\w*\.[\w.]+", op):
        raise ValueError(f"IR op name {op!r} must be dialect-qualified, such as 'ik.matmul'")
    out = op
    if id is not None:
        out += "#" + _escape(str(id))
    if loc is not None:
        out += "[" + _escape(loc) + "]"
    return out


# A dialect-qualified op name (``ik.matmul``): the dot keeps JAX's own names out, which older
# versions printed with parameters in brackets (``transpose[permutation=(1, 0)]``).
_SCOPE_RE = re.compile(r"(?:^|/)([A-Za-z_]\w*\.[\w.]+)(?:#([^/\[\]#]*))?\[([^\[\]]*)\](?=/|$)")


def parse_ir_scopes(op_name: str) -> tuple[IrScope, ...]:
    """The IR scopes named in an HLO ``op_name`` such as ``jit(f)/ik.matmul[model.py:42]/dot_general``.

    Outer scopes come first. Only components written by :func:`ir_scope` with a location
    are recognised (a dialect-qualified name followed by ``[...]``); a scope without a
    location is indistinguishable from other named scopes.
    """
    return tuple(
        IrScope(
            op=m.group(1),
            id=_unescape(m.group(2)) if m.group(2) is not None else None,
            loc=_unescape(m.group(3)),
        )
        for m in _SCOPE_RE.finditer(op_name)
    )
