"""Pass registry, textual pipelines and the instrumented pass manager.

Design note: a pass is a frozen dataclass registered by name with
``@register_pass("name")``; its fields are its options, typed, with a
docstring each.  That decorator is the only place a name lives.  Pipelines use
MLIR's textual syntax — ``canonicalize,fuse-attention,tile-matmul{target=tpu-v5e},cse``
— with ``builtin.module(...)`` / ``func.func(...)`` anchors accepted and
flattened, so the same string works in Python and on the command line.

The manager verifies after every pass (on by default), prints IR after all
passes, after the ones that changed something, or before/after named ones,
times every pass, gathers statistics from the rewrite driver, and can run the
interpreter after each pass to stop at the first pass that breaks numerics.
Third-party passes come from a Python file (``--load-pass-plugin``) or from the
``irkit.passes`` entry-point group.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import os
import pkgutil
import sys
import time
import traceback
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TextIO

from irkit.errors import InputError, IrkitError, NumericsError, PipelineError
from irkit.ir.core import Module
from irkit.ir.verify import VerifyError, verify
from irkit.rewrite.pattern import NearMiss, RewriteReport


class Pass:
    """Base class of passes: subclasses are frozen dataclasses whose fields are options."""

    name: ClassVar[str] = ""

    exact: ClassVar[bool] = False
    """True when the pass never changes a number: every output is bit-identical before and
    after (``cse``, ``dce``).  The property tests compare such passes bitwise, others against
    the float64 reference within tolerance."""

    rounds_ops: ClassVar[tuple[str, ...]] = ()
    """IR ops the pass computes in a narrower precision on purpose (``mixed-precision``): the
    numeric checks allow for that rounding, amplified by the program's own conditioning."""

    def run(self, module: Module, ctx: PassContext) -> bool:
        """Transform ``module`` in place; return True if anything changed."""
        raise NotImplementedError

    # -- introspection used by list-passes and the pipeline printer ---------------
    @classmethod
    def summary(cls) -> str:
        doc = inspect.getdoc(cls) or ""
        return doc.strip().splitlines()[0] if doc.strip() else ""

    @classmethod
    def description(cls) -> str:
        return inspect.getdoc(cls) or ""

    @classmethod
    def options(cls) -> list[PassOption]:
        if not dataclasses.is_dataclass(cls):
            return []
        hints = typing.get_type_hints(cls)
        docs = _field_docs(cls)
        out = []
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else None)  # type: ignore[misc]
            out.append(PassOption(f.name, hints.get(f.name, str), default, docs.get(f.name, "")))
        return out

    def check_options(self) -> None:
        """Check option values when the pipeline is parsed (before any input is read); raise
        ``ValueError`` naming the problem, e.g. ``"min-dim must be >= 1, got -5"``.  Subclasses
        that override it call ``super().check_options()``.  The default checks every string
        option documented as a hardware description (``target=tpu-v5e``) against the known specs."""
        docs = _field_docs(type(self))
        for o in self.options():
            v = getattr(self, o.name)
            if isinstance(v, str) and "hardware description" in docs.get(o.name, ""):
                from irkit.targets.hwspec import load_spec  # lazily: passes sit below targets

                try:
                    load_spec(v)
                except IrkitError as e:
                    raise _OptionError(o.name, v, str(e)) from None

    def pipeline_text(self) -> str:
        opts = []
        for o in self.options():
            v = getattr(self, o.name)
            if v != o.default:
                opts.append(f"{o.name.replace('_', '-')}={_format_option(v)}")
        return self.name + ("{" + " ".join(opts) + "}" if opts else "")


@dataclass(frozen=True)
class PassOption:
    name: str
    type: Any
    default: Any
    doc: str

    @property
    def type_name(self) -> str:
        return getattr(self.type, "__name__", str(self.type))


_FIELD_DOCS: dict[type, dict[str, str]] = {}


def _field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (a string literal right after a field), as xDSL does."""
    # Parsing class sources costs ~50 ms per pass; pipelines ask on every run.
    if cls not in _FIELD_DOCS:
        _FIELD_DOCS[cls] = _parse_field_docs(cls)
    return _FIELD_DOCS[cls]


def _parse_field_docs(cls: type) -> dict[str, str]:
    import ast

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            src = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        try:
            tree = ast.parse(_dedent(src))
        except SyntaxError:
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for a, b in zip(body, body[1:]):
            if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr) \
                    and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
                docs[a.target.id] = " ".join(b.value.value.split())
    return docs


def _dedent(src: str) -> str:
    import textwrap

    return textwrap.dedent(src)


def _format_option(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    s = str(v)
    return s if s and all(c not in s for c in " {},\"") else '"' + s.replace('"', '\\"') + '"'


# ---------------------------------------------------------------------------
# Registry


PASSES: dict[str, type[Pass]] = {}
_builtins_loaded = False
_entry_points_loaded = False


def register_pass(name: str) -> Callable[[type], type]:
    """Class decorator: register a pass under ``name`` (the only place the name lives)."""

    def deco(cls: type) -> type:
        if not issubclass(cls, Pass):
            raise TypeError(f"{cls.__name__} must subclass irkit.passmanager.Pass")
        existing = PASSES.get(name)
        if existing is not None and existing is not cls and existing.__qualname__ != cls.__qualname__:
            raise ValueError(f"pass '{name}' is already registered by {_defined_where(existing)}; "
                             "pick another name")
        cls.name = name
        PASSES[name] = cls
        return cls

    return deco


def _defined_where(cls: type) -> str:
    """Where a pass class comes from, for people: its module, or its file for a plugin."""
    if cls.__module__.startswith("irkit."):
        return f"{cls.__module__}.{cls.__qualname__}"
    try:
        return f"{cls.__qualname__} in {inspect.getsourcefile(cls)}"
    except TypeError:
        return f"{cls.__module__}.{cls.__qualname__}"


def load_builtin_passes() -> None:
    """Import every module of ``irkit.passes`` (each registers its passes)."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    _builtins_loaded = True
    import irkit.passes as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"irkit.passes.{info.name}")


def load_entry_point_passes() -> None:
    """Import modules named by the ``irkit.passes`` entry-point group."""
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group="irkit.passes"):
        try:
            ep.load()
        except Exception as e:  # a broken third-party plugin must not take irkit down
            print(f"irkit: warning: pass plugin entry point '{ep.name}' failed to load: {e}", file=sys.stderr)


def load_pass_plugin(path: str) -> list[str]:
    """Run a Python file that registers passes; returns the names it added."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: pass plugin file not found")
    # Built-in and installed passes first, so a plugin that reuses one of their names is the
    # one told so (not the built-in, loaded later).
    load_builtin_passes()
    load_entry_point_passes()
    before = set(PASSES)
    mod_name = f"irkit_plugin_{abs(hash(str(p.resolve())))}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise InputError(f"{path}: cannot load as a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        raise InputError(f"{path}: pass plugin raised {type(e).__name__}: {e}") from None
    added = sorted(set(PASSES) - before)
    return added


def get_pass_class(name: str) -> type[Pass]:
    load_builtin_passes()
    if name not in PASSES:
        load_entry_point_passes()
    if name not in PASSES:
        import difflib

        close = difflib.get_close_matches(name, PASSES, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else "; see `irkit list-passes`"
        raise PipelineError(f"unknown pass '{name}'{hint}")
    return PASSES[name]


# ---------------------------------------------------------------------------
# Pipeline grammar


def parse_pipeline(text: str) -> list[Pass]:
    """Parse MLIR textual pipeline syntax into pass instances."""
    toks = _PipelineLexer(text)
    passes = _parse_list(toks, text)
    if not toks.done():
        raise PipelineError(f"pipeline: unexpected '{toks.peek()}' at column {toks.pos + 1} in '{text}'")
    return passes


class _PipelineLexer:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def done(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self, ch: str) -> bool:
        if self.peek() == ch:
            self.pos += 1
            return True
        return False

    def ident(self) -> str:
        self.skip()
        start = self.pos
        while self.pos < len(self.text) and (self.text[self.pos].isalnum() or self.text[self.pos] in "-_."):
            self.pos += 1
        if start == self.pos:
            got = self.text[self.pos] if self.pos < len(self.text) else "end of pipeline"
            raise PipelineError(f"pipeline: expected a pass name at column {start + 1}, found '{got}' in '{self.text}'")
        return self.text[start:self.pos]

    def value(self) -> str:
        self.skip()
        if self.peek() == '"':
            self.pos += 1
            out = []
            while self.pos < len(self.text) and self.text[self.pos] != '"':
                if self.text[self.pos] == "\\" and self.pos + 1 < len(self.text):
                    self.pos += 1
                out.append(self.text[self.pos])
                self.pos += 1
            if not self.take('"'):
                raise PipelineError(f"pipeline: unterminated quoted option value in '{self.text}'")
            return "".join(out)
        start = self.pos
        depth = 0
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == "{":
                depth += 1
            elif c == "}":
                if depth == 0:
                    break
                depth -= 1
            elif c.isspace() and depth == 0:
                break
            self.pos += 1
        return self.text[start:self.pos]


_ANCHORS = ("builtin.module", "func.func", "any")


def _parse_list(toks: _PipelineLexer, text: str) -> list[Pass]:
    out: list[Pass] = []
    if toks.done() or toks.peek() == ")":
        return out
    while True:
        name = toks.ident()
        if toks.peek() == "(":
            if name not in _ANCHORS:
                raise PipelineError(f"pipeline: '{name}(...)' is not an anchor; "
                                    "use builtin.module(...) or func.func(...)")
            toks.take("(")
            out.extend(_parse_list(toks, text))
            if not toks.take(")"):
                raise PipelineError(f"pipeline: missing ')' after '{name}(' in '{text}'")
        else:
            opts: dict[str, str] = {}
            if toks.take("{"):
                while not toks.take("}"):
                    if toks.done():
                        raise PipelineError(f"pipeline: missing '}}' in options of '{name}'")
                    key = toks.ident()
                    if not toks.take("="):
                        opts[key] = "true"
                        continue
                    opts[key] = toks.value()
            out.append(make_pass(name, opts))
        if not toks.take(","):
            break
    return out


def make_pass(name: str, options: dict[str, str] | None = None) -> Pass:
    """Instantiate pass ``name`` with string options converted to their declared types."""
    cls = get_pass_class(name)
    fields = {o.name: o for o in cls.options()}
    kwargs: dict[str, Any] = {}
    for raw_key, raw in (options or {}).items():
        key = raw_key.replace("-", "_")
        if key not in fields:
            known = ", ".join(f.replace("_", "-") for f in fields) or "none"
            raise PipelineError(f"pass '{name}' has no option '{raw_key}' (options: {known})")
        kwargs[key] = _convert(name, raw_key, raw, fields[key].type)
    try:
        p = cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise PipelineError(f"pass '{name}': {e}") from None
    try:
        p.check_options()
    except _OptionError as e:
        raw = (options or {}).get(e.option.replace("_", "-"), (options or {}).get(e.option, e.value))
        raise PipelineError(f"pass '{name}': option '{e.option.replace('_', '-')}={raw}': {e.message}") from None
    except (ValueError, IrkitError) as e:
        raise PipelineError(f"pass '{name}': {e}") from None
    return p


class _OptionError(ValueError):
    """A pass option's value is not usable (raised by :meth:`Pass.check_options`)."""

    def __init__(self, option: str, value: Any, message: str):
        super().__init__(f"{option}={value}: {message}")
        self.option, self.value, self.message = option, value, message


def _convert(pname: str, key: str, raw: str, ty: Any) -> Any:
    origin = typing.get_origin(ty)
    args = typing.get_args(ty)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        non_none = [a for a in args if a is not type(None)]
        if raw in ("none", "None", ""):
            return None
        ty = non_none[0] if non_none else str
        origin = typing.get_origin(ty)
        args = typing.get_args(ty)
    try:
        if ty is bool:
            if raw.lower() in ("true", "1", "yes", "on"):
                return True
            if raw.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError
        if ty is int:
            return int(raw, 0)
        if ty is float:
            return float(raw)
        if origin in (tuple, list):
            inner = args[0] if args else str
            items = [x for x in raw.strip("{}[]").split(",") if x.strip()]
            return tuple(_convert(pname, key, x.strip(), inner) for x in items)
        return raw
    except ValueError:
        tn = getattr(ty, "__name__", str(ty))
        raise PipelineError(f"pass '{pname}': option '{key}' wants {tn}, got '{raw}'") from None


def pipeline_text(passes: list[Pass]) -> str:
    return ",".join(p.pipeline_text() for p in passes)


# ---------------------------------------------------------------------------
# Running


@dataclass
class PassContext:
    """Shared state of one pipeline run: options for passes and what they report."""

    explain: bool = False
    check_rewrites: bool = False
    seed: int = 0
    stats: dict[str, dict[str, int]] = field(default_factory=dict)
    near_misses: list[NearMiss] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    current_pass: str = ""

    def count(self, key: str, n: int = 1) -> None:
        d = self.stats.setdefault(self.current_pass, {})
        d[key] = d.get(key, 0) + n

    def absorb(self, rep: RewriteReport) -> None:
        """Add a rewrite driver's statistics under the current pass."""
        for pname, st in rep.stats.items():
            self.count(f"{pname}.tried", st.tried)
            self.count(f"{pname}.matched", st.matched)
            self.count(f"{pname}.applied", st.applied)
        if rep.erased_dead:
            self.count("dead-ops-erased", rep.erased_dead)
        self.near_misses.extend(rep.near_misses)


@dataclass
class PassTiming:
    name: str
    seconds: float
    changed: bool


class PassManager:
    """Runs a list of passes with instrumentation."""

    def __init__(self, passes: list[Pass] | str, *, verify_each: bool = True,
                 print_after_all: bool = False, print_after_change: bool = False,
                 print_before: tuple[str, ...] = (), print_after: tuple[str, ...] = (),
                 timing: bool = False, statistics: bool = False, check_numerics: bool = False,
                 check_seed: int = 0, ctx: PassContext | None = None, out: TextIO | None = None):
        self.passes = parse_pipeline(passes) if isinstance(passes, str) else list(passes)
        self.verify_each = verify_each
        self.print_after_all = print_after_all
        self.print_after_change = print_after_change
        self.print_before = set(print_before)
        self.print_after = set(print_after)
        self.timing = timing
        self.statistics = statistics
        self.check_numerics = check_numerics
        self.check_seed = check_seed
        self.ctx = ctx or PassContext()
        self.out = out or sys.stderr
        self.timings: list[PassTiming] = []

    def _dump(self, m: Module, header: str) -> None:
        from irkit.text.printer import Printer

        self.out.write(f"// -----// {header} //----- //\n")
        self.out.write(Printer(elide_resources=True, inline_resources=False).module(m))
        self.out.flush()

    def run(self, m: Module) -> Module:
        """Run every pass on ``m`` in place; raises on verification or numeric failure."""
        oracle = None
        inputs = None
        if self.check_numerics:
            from irkit.interp import random_inputs, run

            fn = m.entry
            inputs = random_inputs(fn, self.check_seed)
            try:
                oracle = run(m, inputs, float64=True)
            except Exception as e:
                raise NumericsError(f"--check-numerics: the input module cannot be interpreted: {e}") from None
        for p in self.passes:
            label = p.pipeline_text()
            if p.name in self.print_before:
                self._dump(m, f"IR Dump Before {label}")
            self.ctx.current_pass = p.name
            t0 = time.perf_counter()
            changed = self._run_pass(p, m)
            dt = time.perf_counter() - t0
            self.timings.append(PassTiming(label, dt, changed))
            if self.verify_each:
                try:
                    verify(m)
                except VerifyError as e:
                    raise _after_pass(e, label) from None
            if self.print_after_all or (self.print_after_change and changed) or p.name in self.print_after:
                self._dump(m, f"IR Dump After {label}" + ("" if changed else " (no change)"))
            if self.check_numerics and oracle is not None and inputs is not None:
                self._check(m, label, oracle, inputs)
        return m

    def _run_pass(self, p: Pass, m: Module) -> bool:
        """One pass, with ``--check-rewrites`` hooked into every rewrite it makes; a plugin pass
        that raises is the plugin's error (named with its file and line), not irkit's."""
        from irkit.rewrite.driver import default_on_rewrite

        hook = None
        if self.ctx.check_rewrites:
            from irkit.rewrite.numeric_check import rewrite_checker

            hook = rewrite_checker(self.ctx)
        try:
            with default_on_rewrite(hook):
                return bool(p.run(m, self.ctx))
        except IrkitError:
            raise
        except Exception as e:
            where = _plugin_frame(type(p), e)
            if where is None:
                raise
            raise PluginError(f"pass '{p.name}' ({where}) raised {type(e).__name__}: {e}; "
                              "the pass plugin is at fault, not the input") from None

    def _check(self, m: Module, label: str, oracle: list, inputs: list) -> None:
        from irkit.check import compare_all, module_tolerance
        from irkit.interp import run

        try:
            got = run(m, inputs)
        except Exception as e:
            raise NumericsError(f"--check-numerics: after pass '{label}' the module fails to run: {e}") from None
        rep = compare_all(got, oracle, module_tolerance(m), _output_names(m))
        self.ctx.notes.append(f"check-numerics after {label}: max_abs={rep.max_abs:.3g} max_rel={rep.max_rel:.3g}")
        bad = rep.first_failure()
        if bad is not None:
            raise NumericsError(
                f"--check-numerics: pass '{label}' broke numerics: {bad.name} max_abs={bad.max_abs:.3g} "
                f"max_rel={bad.max_rel:.3g} (tolerance rtol={bad.tol.rtol:g} atol={bad.tol.atol:g})"
                + (f" {bad.note}" if bad.note else ""))

    def timing_report(self) -> str:
        total = sum(t.seconds for t in self.timings) or 1e-12
        lines = ["===-------------------------------------------------------------------------===",
                 "                         ... Pass execution timing report ...",
                 "===-------------------------------------------------------------------------===",
                 f"  Total Execution Time: {total:.4f} seconds", "",
                 "  ----Wall Time----  ----Name----"]
        for t in self.timings:
            lines.append(f"  {t.seconds:8.4f} ({100 * t.seconds / total:5.1f}%)  {t.name}"
                         + ("" if t.changed else "  (no change)"))
        lines.append(f"  {total:8.4f} (100.0%)  Total")
        return "\n".join(lines) + "\n"

    @property
    def stats(self) -> dict[str, dict[str, int]]:
        """What the passes counted, by pass name: each rewrite pattern's ``NAME.tried``,
        ``NAME.matched`` and ``NAME.applied``, and the passes' own counters
        (``fused-attentions``, ``dead-ops-erased``, ...).  The same numbers as ``--statistics``."""
        return self.ctx.stats

    def statistics_report(self) -> str:
        """``--statistics``: per pass, a tried/matched/applied row for every pattern that was
        tried, then the pass's other counters."""
        lines = ["===-------------------------------------------------------------------------===",
                 "                         ... Statistics Collected ...",
                 "===-------------------------------------------------------------------------==="]
        for pname, d in self.ctx.stats.items():
            patterns: dict[str, dict[str, int]] = {}
            other: list[tuple[str, int]] = []
            for k, v in d.items():
                base, _, kind = k.rpartition(".")
                if kind in ("tried", "matched", "applied") and base:
                    patterns.setdefault(base, {})[kind] = v
                elif v:
                    other.append((k, v))
            rows = sorted((p, c) for p, c in patterns.items() if any(c.values()))
            if not rows and not other:
                continue
            lines.append(f"{pname}")
            if rows:
                lines.append(f"  {'tried':>8} {'matched':>8} {'applied':>8}  pattern")
                for p, c in rows:
                    lines.append(f"  {c.get('tried', 0):>8} {c.get('matched', 0):>8} {c.get('applied', 0):>8}  {p}")
            for k, v in sorted(other):
                lines.append(f"  {v:>8}  {k}")
        if len(lines) == 3:
            lines.append("  (no statistics)")
        return "\n".join(lines) + "\n"


class PluginError(IrkitError):
    """A third-party pass failed; names the pass and the plugin's file and line."""


def _plugin_frame(cls: type, e: BaseException) -> str | None:
    """``file:line`` of the deepest frame of ``e`` inside the plugin that defines ``cls``, or
    None when ``cls`` is one of irkit's own passes (then a failure is irkit's bug)."""
    if cls.__module__.startswith("irkit."):
        return None
    try:
        src = inspect.getsourcefile(cls)
    except TypeError:
        src = None
    where = None
    for fs in traceback.extract_tb(e.__traceback__):
        if src is not None and os.path.abspath(fs.filename) == os.path.abspath(src):
            where = f"{fs.filename}:{fs.lineno}"
    return where or (src or cls.__module__)


def _output_names(m: Module) -> list[str]:
    return [f"output {i}" for i in range(len(m.entry.outputs))]


def _after_pass(e: VerifyError, label: str) -> VerifyError:
    err = VerifyError(e.diagnostics)
    err.args = (f"after pass '{label}': {e}",)
    return err


def run_pipeline(m: Module, pipeline: str | list[Pass], **options: Any) -> Module:
    """Convenience: run ``pipeline`` on ``m`` with the given PassManager options."""
    return PassManager(pipeline, **options).run(m)


__all__ = ["Pass", "PassOption", "register_pass", "PASSES", "load_builtin_passes", "load_pass_plugin",
           "load_entry_point_passes", "get_pass_class", "parse_pipeline", "make_pass", "pipeline_text",
           "PassContext", "PassManager", "PassTiming", "run_pipeline"]
