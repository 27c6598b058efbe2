"""Subcommands defined outside irkit/cli.py; each module registers with ``@command``.

Importing this package imports every module in it.
"""

from __future__ import annotations

import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
