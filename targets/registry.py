"""The target registry: one decorator, one lookup.

Target modules in this package register themselves with ``@register_target``;
:func:`load_targets` imports them all (a module whose heavy dependency is not
installed still registers: its ``availability`` says what is missing).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

from irkit.errors import IrkitError
from irkit.targets.base import Target

TARGETS: dict[str, Callable[[], Target]] = {}
_loaded = False


def register_target(name: str, **params: object) -> Callable[[type], type]:
    """Register ``cls(**params)`` as target ``name`` (one class may serve several names)."""

    def deco(cls: type) -> type:
        def make() -> Target:
            t = cls(**params)
            t.name = name  # type: ignore[misc]
            return t

        if name in TARGETS:
            raise ValueError(f"target '{name}' is already registered")
        TARGETS[name] = make
        return cls

    return deco


_TARGET_MODULES = ("reference", "xla", "ort", "tvm")


def load_targets() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import irkit.targets as pkg

    names = {i.name for i in pkgutil.iter_modules(pkg.__path__)}
    for mod in _TARGET_MODULES:
        if mod in names:
            importlib.import_module(f"irkit.targets.{mod}")


def get_target(name: str) -> Target:
    load_targets()
    if name not in TARGETS:
        import difflib

        close = difflib.get_close_matches(name, TARGETS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; known: {', '.join(sorted(TARGETS))}"
        raise IrkitError(f"unknown target '{name}'{hint}")
    return TARGETS[name]()


def list_targets() -> list[Target]:
    load_targets()
    return [TARGETS[n]() for n in TARGETS]


__all__ = ["register_target", "get_target", "list_targets", "load_targets", "TARGETS"]
