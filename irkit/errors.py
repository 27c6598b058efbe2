"""The error a user sees: one line, what was wrong, where, and what to do.

Library code raises subclasses of :class:`IrkitError` (or ValueError subclasses
that carry a position, like ParseError and VerifyError); the command line
prints them as one line and exits non-zero, never with a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping


class IrkitError(Exception):
    """A user-facing error with a complete, one-line message."""


class InputError(IrkitError):
    """An input file or argument is invalid (names the file and what to do)."""


class PipelineError(IrkitError):
    """A pass pipeline string is malformed or names an unknown pass or option."""


class NumericsError(IrkitError):
    """A result left the numeric tolerance; names the pass, output and error."""


class UnsupportedOpsError(IrkitError):
    """The source uses ops irkit cannot import; the message lists all of them.

    The one error every frontend (torch.export, ONNX, jaxpr, StableHLO/HLO) raises
    for an unsupported model: ``ops`` maps each unsupported op (with the reason,
    when there is one) to the locations it occurs at, and the message shows every
    op with its count and up to three locations.  It is also the base of
    :class:`Unsupported`, so ``except UnsupportedOpsError`` catches the whole family.
    """

    def __init__(self, source: str, ops: Mapping[str, list[str]]):
        self.source = source
        self.ops = dict(ops)
        parts = []
        for name, locs in self.ops.items():
            shown = ", ".join(locs[:3]) + (f", +{len(locs) - 3} more" if len(locs) > 3 else "")
            parts.append(f"{name} x{len(locs)} ({shown})")
        total = sum(len(v) for v in self.ops.values())
        super().__init__(f"{source}: {total} unsupported op(s) of {len(self.ops)} kind(s): "
                         + "; ".join(parts)
                         + " (see `irkit coverage` for what each frontend supports)")


class Unsupported(UnsupportedOpsError):
    """One node, or one form of an op, has no IR translation; ``what`` says why.

    Frontend converters raise it with the reason only; the frontend's graph walk
    catches it, records the op name, reason and location in an
    :class:`~irkit.frontends.common.UnsupportedOps` collector and goes on, so the
    user gets one :class:`UnsupportedOpsError` listing every problem.  Raised
    outside a walk (an argument of an unsupported dtype), it is still a one-line
    :class:`IrkitError`.
    """

    def __init__(self, what: str):
        IrkitError.__init__(self, what)
        self.what = what
        self.source = ""
        self.ops = {what: []}


__all__ = ["InputError", "IrkitError", "NumericsError", "PipelineError", "Unsupported",
           "UnsupportedOpsError"]
