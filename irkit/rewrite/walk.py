"""Graph walks shared by the rewrites: producer cones, their leaves, users, escapes.

The walks live in :mod:`irkit.ir.walk` (its module note is the design note), one
floor down, so that the interpreter uses the same walks; this module re-exports
every public name of it under the name the rewrites and passes import.
"""

from __future__ import annotations

from irkit.ir.walk import *  # noqa: F403  (re-exported: the names of irkit.ir.walk.__all__)
from irkit.ir.walk import __all__  # noqa: F401
