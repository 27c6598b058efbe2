"""The error a user sees: one line, what was wrong, where, and what to do.

Library code raises subclasses of :class:`IrkitError` (or ValueError subclasses
that carry a position, like ParseError and VerifyError); the command line
prints them as one line and exits non-zero, never with a traceback.
"""

from __future__ import annotations


class IrkitError(Exception):
    """A user-facing error with a complete, one-line message."""


class InputError(IrkitError):
    """An input file or argument is invalid (names the file and what to do)."""


class PipelineError(IrkitError):
    """A pass pipeline string is malformed or names an unknown pass or option."""


class NumericsError(IrkitError):
    """A result left the numeric tolerance; names the pass, output and error."""


__all__ = ["IrkitError", "InputError", "PipelineError", "NumericsError"]
