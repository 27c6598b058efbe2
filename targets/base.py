"""The target contract: lower, run, estimate; artifacts with provenance.

Design note: a target is a hardware description (``targets/specs/*.toml``)
plus three abilities.  ``lower(module, bindings)`` compiles the IR for concrete
values of its symbolic dims and returns an :class:`Artifact` — everything the
target's compiler produced, kept as named text files (CUDA source, PTX, LLVM
IR, StableHLO, optimised HLO), a list of kernels each traced back to the IR ops
and source locations it came from, and the measured compile time.  ``run``
executes an artifact where this machine can; ``availability`` says whether it
can, and why not.  ``estimate`` is the analytic cost from the hardware
description (see :mod:`irkit.targets.estimate`).

Targets never import frontends; a target module registers itself with
``@register_target("name")``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

import numpy as np

from irkit.errors import IrkitError
from irkit.ir.core import Module, Op
from irkit.quiet import quiet_native_stderr


class TargetUnavailable(IrkitError):
    """The target cannot do this here (no GPU, missing package); the message says why."""


@dataclass(frozen=True)
class Availability:
    """What a target can do on this machine."""

    can_compile: bool
    can_run: bool
    reason: str = ""

    @property
    def label(self) -> str:
        if self.can_run:
            return "run"
        if self.can_compile:
            return "compile only"
        return "unavailable"


@dataclass
class Kernel:
    """One compiled kernel and where it came from."""

    name: str
    kind: str = ""
    ir_ops: list[str] = field(default_factory=list)
    """IR ops it implements, as ``ik.name#N`` (N = the op's position in the function)."""
    locations: list[str] = field(default_factory=list)
    """Source locations of those ops (file:line or node names)."""
    file: str | None = None
    """The artifact file holding its code."""
    flops: float | None = None
    bytes: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Artifact:
    """What a target's compiler produced for one module and one set of dim values."""

    target: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    kernels: list[Kernel] = field(default_factory=list)
    compile_seconds: float = 0.0
    bindings: dict[str, int] = field(default_factory=dict)
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    runner: Callable[[Sequence[np.ndarray]], list[np.ndarray]] | None = None
    profiler: Callable[[Sequence[np.ndarray]], list[tuple[str, float]]] | None = None
    """Runs with the target's own timing: each device-function call in order, as (the function's name,
    seconds).  A kernel's functions are ``extra["functions"]`` (equal kernels may share one), else its name."""
    aliases: dict[int, int] = field(default_factory=dict)
    """Output index -> argument index: outputs that overwrite an argument (the module's ``aliases``
    attribute; set by :func:`lower_for_session`, read by :meth:`Target.open_session`)."""
    arg_names: list[str] = field(default_factory=list)
    """The entry function's argument names (for messages), where known."""
    streamed: dict[str, Callable[[IO[bytes]], None]] = field(default_factory=dict)
    """Files too large to hold twice in memory: :meth:`write` calls each function with the open (temporary)
    binary file, which it fills (the ort target's external weights, written from the module's arrays)."""

    def manifest(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "compile_seconds": self.compile_seconds,
            "bindings": self.bindings,
            "input_shapes": [list(s) for s in self.input_shapes],
            "files": {k: len(v) for k, v in sorted(self.files.items())},
            **({"streamed_files": sorted(self.streamed)} if self.streamed else {}),
            "kernels": [asdict(k) for k in self.kernels],
            "info": self.info,
        }

    def write(self, folder: str | Path) -> Path:
        """Write every file and ``manifest.json`` into ``folder`` (each atomically)."""
        from irkit.fileio import atomic_write

        d = Path(folder)
        if d.exists() and not d.is_dir():
            raise IrkitError(f"{folder}: exists and is a file; an artifact is a folder, give a folder path "
                             "(a new one, or an existing folder to update)")
        d.mkdir(parents=True, exist_ok=True)
        for name, content in sorted(self.files.items()):
            atomic_write(d / name, content)
        if self.streamed:
            from irkit.fileio import atomic_open

            for name, fill in sorted(self.streamed.items()):
                with atomic_open(d / name, "wb") as fh:
                    fill(fh)
        atomic_write(d / "manifest.json", json.dumps(self.manifest(), indent=2, default=str) + "\n")
        return d


def op_ids(module: Module) -> dict[int, str]:
    """``id(op) -> "ik.name#N"``: N numbers ops of the entry function in order (regions included)."""
    out: dict[int, str] = {}
    for i, op in enumerate(module.entry.walk()):
        out[id(op)] = f"{op.name}#{i}"
    return out


def provenance(ops: Sequence[Op], ids: Mapping[int, str]) -> tuple[list[str], list[str]]:
    """IR op ids and source locations for a kernel made of ``ops``."""
    names = [ids.get(id(o), o.name) for o in ops]
    locs: list[str] = []
    for o in ops:
        for leaf in o.loc.leaves():
            s = leaf.short()
            if s not in locs:
                locs.append(s)
    return names, locs


class LoweringTable:
    """One target's lowering rules, keyed by IR op name: the table *is* the target's coverage.

    Every target registers its rules the same way::

        TVM_RULES = LoweringTable("tvm")

        @TVM_RULES.rule("ik.add", "ik.sub")
        def _binary(lw, op, ins): ...

    ``irkit coverage`` and the coverage test read :meth:`covers` / :attr:`names`;
    a rule may still refuse one instance of an op (a dtype or attribute the
    target has no kernel for) by raising :class:`TargetUnavailable` with a reason.
    """

    def __init__(self, target: str):
        self.target = target
        self.rules: dict[str, Callable[..., Any]] = {}

    def rule(self, *names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register the decorated function as the lowering of ops ``names``."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            for n in names:
                if n in self.rules:
                    raise ValueError(f"{self.target}: lowering rule for '{n}' is defined twice")
                self.rules[n] = fn
            return fn

        return deco

    def get(self, name: str) -> Callable[..., Any] | None:
        return self.rules.get(name)

    def covers(self, name: str) -> bool:
        return name in self.rules

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.rules)

    def __contains__(self, name: object) -> bool:
        return name in self.rules

    def __len__(self) -> int:
        return len(self.rules)


class Target:
    """Base class of targets."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    spec: ClassVar[str | None] = None
    """Name of the hardware description in targets/specs used for estimates."""

    unsupported_ops: ClassVar[frozenset[str]] = frozenset()
    """Registry ops this target cannot lower (for targets without a :class:`LoweringTable`)."""

    lowering_table: ClassVar[LoweringTable | None] = None
    """The target's rule table; when set, :meth:`supports` reads it."""

    def availability(self) -> Availability:
        return Availability(True, True)

    def supports(self, op_name: str) -> bool:
        """Whether this target lowers op ``op_name`` (from its rule table where it has one)."""
        if self.lowering_table is not None:
            return self.lowering_table.covers(op_name) and op_name not in self.unsupported_ops
        return op_name not in self.unsupported_ops

    def lower(self, module: Module, bindings: Mapping[str, int] | None = None) -> Artifact:
        raise NotImplementedError

    def run(self, artifact: Artifact, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if artifact.runner is None:
            av = self.availability()
            raise TargetUnavailable(f"target '{self.name}' cannot run here: {av.reason or 'compile-only target'}")
        shapes = [tuple(np.shape(x)) for x in inputs]
        if artifact.input_shapes and shapes != [tuple(s) for s in artifact.input_shapes]:
            raise TargetUnavailable(f"target '{self.name}': artifact was compiled for input shapes "
                                    f"{artifact.input_shapes}, got {shapes}; lower again for these shapes")
        return [np.asarray(o) for o in artifact.runner(list(inputs))]

    def open_session(self, artifact: Artifact, aliases: Mapping[int, int] | None = None) -> Session:
        """A stateful runner of ``artifact``: aliased arguments (``aliases``: output -> argument; default
        ``artifact.aliases``) stay resident between calls and are updated by their outputs.  This default
        keeps the state as NumPy arrays and calls :meth:`run`; targets override it to keep buffers on
        the device."""
        return Session(self, artifact, aliases)

    def run_module(self, module: Module, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Lower for the shapes of ``inputs`` and run."""
        from irkit.interp import bind_symbols

        b = bind_symbols(module.entry, [np.asarray(x) for x in inputs])
        return self.run(self.lower(module, b), inputs)


def module_aliases(module: Module) -> dict[int, int]:
    """The entry function's ``aliases`` attribute as ``{output: argument}`` (empty when it has none)."""
    try:
        from irkit.ir.aliases import get_aliases
    except ImportError:  # an irkit without the alias helpers: read the attribute as documented
        return {int(o): int(a) for o, a in module.entry.attrs.get("aliases", ())}
    return dict(get_aliases(module.entry))


def lower_for_session(target: Target, module: Module, bindings: Mapping[str, int] | None = None) -> Artifact:
    """``target.lower(module, bindings)`` with the module's aliases and argument names recorded on the
    artifact, ready for :meth:`Target.open_session`."""
    art = target.lower(module, bindings)
    art.aliases = module_aliases(module)
    art.arg_names = [a.name or f"arg{i}" for i, a in enumerate(module.entry.args)]
    return art


class Session:
    """Runs one artifact again and again with resident (bound or aliased) arguments.

    ``run(inputs)`` takes one entry per argument; ``None`` means "the resident value": what
    :meth:`bind` set, or for an aliased argument the output that overwrote it on the previous call.
    An array passed for an argument is used for that call (and, for an aliased argument, becomes its
    state until the call's output replaces it).  ``fetch`` picks the outputs to return (indices; default
    all): a device session leaves the others where they are.  This base class is functional: the state
    is NumPy arrays and each call is :meth:`Target.run`.
    """

    def __init__(self, target: Target, artifact: Artifact, aliases: Mapping[int, int] | None = None):
        self.target = target
        self.artifact = artifact
        self.aliases: dict[int, int] = dict(artifact.aliases if aliases is None else aliases)
        self.n_args = len(artifact.input_shapes)
        for o, a in self.aliases.items():
            if not 0 <= a < self.n_args:
                raise IrkitError(f"session on '{target.name}': alias output {o} -> argument {a} is out of range "
                                 f"(the function has {self.n_args} arguments)")
        self.calls = 0
        self._state: dict[int, np.ndarray] = {}

    def arg_name(self, i: int) -> str:
        names = self.artifact.arg_names
        return f"argument {i} ('{names[i]}')" if i < len(names) else f"argument {i}"

    def _check_index(self, index: int) -> None:
        if not 0 <= index < self.n_args:
            raise IrkitError(f"session on '{self.target.name}': no argument {index} (the function has "
                             f"{self.n_args} arguments)")

    def _check_shape(self, index: int, array: np.ndarray) -> None:
        if self.artifact.input_shapes:
            want = tuple(self.artifact.input_shapes[index])
            if tuple(array.shape) != want:
                raise IrkitError(f"session on '{self.target.name}': {self.arg_name(index)} has shape "
                                 f"{tuple(array.shape)}, the artifact was compiled for {want}")

    def bind(self, index: int, array: np.ndarray) -> None:
        """Make ``array`` the resident value of argument ``index``."""
        self._check_index(index)
        a = np.asarray(array)
        self._check_shape(index, a)
        self._bind(index, a)

    def read(self, index: int) -> np.ndarray:
        """The current resident value of argument ``index`` (as NumPy)."""
        self._check_index(index)
        if not self._has(index):
            raise IrkitError(f"session on '{self.target.name}': {self.arg_name(index)} has no resident value; "
                             "bind it or pass it to run first")
        return self._read(index)

    def _inputs(self, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray | None]:
        if len(inputs) > self.n_args:
            raise IrkitError(f"session on '{self.target.name}': {len(inputs)} inputs given, the function has "
                             f"{self.n_args} arguments")
        xs: list[np.ndarray | None] = list(inputs) + [None] * (self.n_args - len(inputs))
        for i, x in enumerate(xs):
            if x is None:
                if not self._has(i):
                    raise IrkitError(f"session on '{self.target.name}': {self.arg_name(i)} is None but has no "
                                     "resident value; pass an array or bind it first")
            else:
                arr = np.asarray(x)
                xs[i] = arr
                self._check_shape(i, arr)
        return xs

    def run(self, inputs: Sequence[np.ndarray | None], fetch: Sequence[int] | None = None) -> list[np.ndarray]:
        """One call; returns the outputs ``fetch`` names (default: all), as NumPy."""
        xs = self._inputs(inputs)
        outs = self._run(xs, fetch)
        self.calls += 1
        return outs

    # -- the state; device sessions override these four ------------------------------------------------
    def _has(self, index: int) -> bool:
        return index in self._state

    def _bind(self, index: int, array: np.ndarray) -> None:
        self._state[index] = array

    def _read(self, index: int) -> np.ndarray:
        return np.asarray(self._state[index])

    def _run(self, xs: list[np.ndarray | None], fetch: Sequence[int] | None) -> list[np.ndarray]:
        full = [self._state[i] if x is None else x for i, x in enumerate(xs)]
        outs = self.target.run(self.artifact, full)
        for o, a in self.aliases.items():
            self._state[a] = outs[o]
        return outs if fetch is None else [outs[i] for i in fetch]

    def close(self) -> None:
        """Release resident buffers."""
        self._state.clear()


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t0


__all__ = ["Artifact", "Availability", "Kernel", "Session", "Target", "TargetUnavailable", "lower_for_session",
           "quiet_native_stderr",
           "module_aliases", "op_ids", "provenance", "timed"]
