"""Text form of the IR: MLIR generic syntax printer and parser, file I/O with sidecars."""

from __future__ import annotations

from irkit.text.io import read_module, write_module
from irkit.text.parser import ParseError, parse_module
from irkit.text.printer import Printer, print_module

__all__ = ["read_module", "write_module", "ParseError", "parse_module", "Printer", "print_module"]
