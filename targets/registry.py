"""The target registry: one decorator, one lookup; built-in targets and plugins.

Target modules in this package register themselves with ``@register_target``;
:func:`load_targets` imports them all (a module whose heavy dependency is not
installed still registers: its ``availability`` says what is missing), then
loads the ``irkit.targets`` entry-point group, so an installed distribution adds
a target without editing irkit::

    [project.entry-points."irkit.targets"]
    my-npu = "my_npu_irkit"                # a module that uses @register_target
    my-npu2 = "my_npu_irkit:MyNpuTarget"   # or a Target subclass (or a factory), named by the entry point

A plugin that fails to load (an import error, a name already taken) does not stop
the others: it is kept in :data:`PLUGIN_ERRORS` as one line naming the
distribution and module, ``irkit list-targets`` shows it, and asking for a target
of that entry point's name raises that line.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from irkit.targets.base import Target

from irkit.errors import IrkitError

TARGETS: dict[str, Callable[[], Target]] = {}
_loaded = False

ENTRY_POINT_GROUP = "irkit.targets"


@dataclass(frozen=True)
class PluginError:
    """A target plugin that could not be loaded."""

    name: str
    """The entry point's name."""
    distribution: str
    module: str
    reason: str

    def line(self) -> str:
        return (f"target plugin '{self.name}' (distribution {self.distribution}, module {self.module}) "
                f"failed to load: {self.reason}")


PLUGIN_ERRORS: list[PluginError] = []
"""Target plugins that failed to load, in entry-point order."""


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
    """Register the built-in targets, then the ``irkit.targets`` entry points (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import irkit.targets as pkg

    names = {i.name for i in pkgutil.iter_modules(pkg.__path__)}
    for mod in _TARGET_MODULES:
        if mod in names:
            importlib.import_module(f"irkit.targets.{mod}")
    load_entry_point_targets()


def _entry_points() -> list[Any]:
    from importlib.metadata import entry_points

    return list(entry_points(group=ENTRY_POINT_GROUP))


def load_entry_point_targets(eps: list[Any] | None = None) -> list[PluginError]:
    """Load target plugins (default: the installed ``irkit.targets`` entry points); returns the
    ones that failed, also appended to :data:`PLUGIN_ERRORS`."""
    failed: list[PluginError] = []
    for ep in _entry_points() if eps is None else eps:
        dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
        module = ep.value.split(":", 1)[0].strip()
        try:
            obj = ep.load()
            if inspect.ismodule(obj):
                continue  # registered itself with @register_target on import
            if ep.name in TARGETS:
                raise ValueError(f"target '{ep.name}' is already registered")
            if inspect.isclass(obj) and issubclass(obj, Target):
                register_target(ep.name)(obj)
            elif callable(obj):
                TARGETS[ep.name] = _checked_factory(ep.name, obj)
            else:
                raise TypeError(f"'{ep.value}' is a {type(obj).__name__}, not a module, Target subclass or "
                                "factory")
        except Exception as e:  # noqa: BLE001 - a broken third-party plugin must not take irkit down
            first = (str(e).strip().splitlines() or [""])[0]
            failed.append(PluginError(ep.name, dist, module, f"{type(e).__name__}: {first}".rstrip(": ")))
    PLUGIN_ERRORS.extend(failed)
    return failed


def _checked_factory(name: str, factory: Callable[[], Any]) -> Callable[[], Target]:
    def make() -> Target:
        t = factory()
        if not isinstance(t, Target):
            raise IrkitError(f"target plugin '{name}': its factory returned {type(t).__name__}, not a Target")
        t.name = name  # type: ignore[misc]
        return t

    return make


def get_target(name: str) -> Target:
    load_targets()
    if name not in TARGETS:
        for err in PLUGIN_ERRORS:
            if err.name == name:
                raise IrkitError(err.line())
        import difflib

        close = difflib.get_close_matches(name, TARGETS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; known: {', '.join(sorted(TARGETS))}"
        raise IrkitError(f"unknown target '{name}'{hint}")
    return TARGETS[name]()


def list_targets() -> list[Target]:
    load_targets()
    return [TARGETS[n]() for n in TARGETS]


__all__ = [
    "ENTRY_POINT_GROUP",
    "PLUGIN_ERRORS",
    "TARGETS",
    "PluginError",
    "get_target",
    "list_targets",
    "load_entry_point_targets",
    "load_targets",
    "register_target",
]
