"""Per-case results of a conformance run, their summary, and the shared comparison.

Design note: every case ends, on every runner (the interpreter, each target,
each peer), in exactly one of five statuses:

``pass``     the outputs match the suite's own expected outputs (or the framework's
             eager result) under the suite's tolerance, NaNs in the same places;
``wrong``    the runner produced outputs that do not match: a *silent* wrong
             answer, the one status that must stay at zero (``max_error`` says by how much);
``refused``  irkit (or the peer) declined with a clear one-line reason: an op the
             frontend or the target has no rule for, a dtype it cannot hold;
``crash``    anything else: an unexpected exception (summarised to one line with
             the irkit frame it came from), a timeout, a dead worker.  A bug;
``skip``     the case is out of scope (training ops, ai.onnx.ml, strings,
             sequences, optionals, control flow, linear-algebra decompositions,
             random numbers), or not exportable by the framework itself.

Percentages are over the *in-scope* cases of a runner: everything but ``skip``.
"""

from __future__ import annotations

import json
import math
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

STATUSES = ("pass", "wrong", "refused", "crash", "skip")
INTERP = "reference"
"""Runner name of the interpreter (the ``reference`` target), which every suite runs."""


@dataclass
class CaseResult:
    """One case on one runner."""

    case: str
    group: str
    """The op / primitive group (ONNX op type, OpInfo name, JAX harness group)."""
    runner: str
    status: str
    reason: str = ""
    max_error: float | None = None
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status '{self.status}'")


@dataclass
class SuiteResult:
    """All results of one suite run, plus what is needed to reproduce and report it."""

    suite: str
    runners: list[str]
    results: list[CaseResult] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def by_runner(self, runner: str) -> list[CaseResult]:
        return [r for r in self.results if r.runner == runner]

    def status_of(self, runner: str) -> dict[str, str]:
        """case id -> status on ``runner``."""
        return {r.case: r.status for r in self.results if r.runner == runner}

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per runner: counts per status, in-scope total, pass percentage over in-scope cases."""
        out: dict[str, dict[str, Any]] = {}
        for runner in self.runners:
            c = Counter(r.status for r in self.by_runner(runner))
            in_scope = sum(c[s] for s in STATUSES if s != "skip")
            out[runner] = {**{s: c[s] for s in STATUSES}, "in_scope": in_scope,
                           "pass_pct": round(100.0 * c["pass"] / in_scope, 2) if in_scope else None}
        return out

    def relative_to(self, runner: str, peer: str) -> tuple[int, int]:
        """(cases ``runner`` passes among those ``peer`` passes, cases ``peer`` passes)."""
        peer_ok = {c for c, s in self.status_of(peer).items() if s == "pass"}
        mine = self.status_of(runner)
        return sum(1 for c in peer_ok if mine.get(c) == "pass"), len(peer_ok)

    def reasons(self, runner: str, status: str, top: int = 20) -> list[tuple[str, int]]:
        """The most common reasons for ``status`` on ``runner`` (grouped by their leading text)."""
        c: Counter[str] = Counter(reason_key(r.reason) for r in self.by_runner(runner) if r.status == status)
        return c.most_common(top)

    def to_json(self) -> dict[str, Any]:
        return {"suite": self.suite, "runners": self.runners, "meta": self.meta, "summary": self.summary(),
                "results": [asdict(r) for r in self.results]}

    def write_json(self, path: str | Path) -> None:
        from irkit.fileio import atomic_write

        atomic_write(path, json.dumps(self.to_json(), indent=1, default=_json_default) + "\n")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SuiteResult:
        return cls(data["suite"], list(data["runners"]), [CaseResult(**r) for r in data["results"]],
                   dict(data.get("meta", {})))

    @classmethod
    def read_json(cls, path: str | Path, suite: str = "") -> SuiteResult:
        """A ``--json`` result; or the ``.partial.jsonl`` rows of a run that was stopped (``suite`` names it,
        else it is read from the file name)."""
        p = Path(path)
        if not p.name.endswith(".jsonl"):
            return cls.from_json(json.loads(p.read_text()))
        rows = [CaseResult(**json.loads(line)) for line in p.read_text().splitlines() if line.strip()]
        name = suite or next((s for s in ("onnx", "torch", "jax") if s in p.name), "?")
        runners = list(dict.fromkeys(r.runner for r in rows))
        return cls(name, runners, rows, {"cases": len({r.case for r in rows}), "partial": True,
                                         "command": f"(partial rows of a stopped run: {p.name})"})


def _json_default(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    return str(o)


def reason_key(reason: str) -> str:
    """A reason shortened to what groups equal failures: for an unsupported-ops refusal the ops (with
    their detail, without counts and locations); otherwise the text with numbers and shapes elided."""
    import re

    if " unsupported op(s) of " in reason:
        items = re.findall(r"([\w.:]+(?: \((?:[^()]|\([^()]*\))*\))?) x\d+ \(", reason)
        if items:
            return "unsupported: " + "; ".join(dict.fromkeys(items))
    s = reason.split(" (see `irkit coverage`")[0]
    s = re.sub(r"\[[^\]]*\]", "[..]", s)
    s = re.sub(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.])", "N", s)
    return s[:200]


# ---------------------------------------------------------------------------
# classifying what happened


def one_line(e: BaseException) -> str:
    """``Type: first line of the message`` plus, for an unexpected error, where in irkit it came from."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {msg}"[:400]


def crash_line(e: BaseException) -> str:
    """A traceback summarised to one line: the exception and the innermost irkit frame (file:line in func)."""
    where = ""
    for fr in traceback.extract_tb(e.__traceback__):
        fn = fr.filename.replace("\\", "/")
        if "/irkit/" in fn or "/targets/" in fn or "/passes/" in fn:
            where = f"{'/'.join(fn.split('/')[-2:])}:{fr.lineno} in {fr.name}"
    return one_line(e) + (f" [at {where}]" if where else "")


def is_refusal(e: BaseException) -> bool:
    """Whether ``e`` is irkit declining with a reason (as opposed to a bug)."""
    from irkit.errors import IrkitError

    return isinstance(e, IrkitError)


def classify_error(e: BaseException) -> tuple[str, str]:
    """(status, reason) for an exception raised while importing or running a case on irkit."""
    if is_refusal(e):
        return "refused", " ".join(str(e).split())[:600]
    return "crash", crash_line(e)


# ---------------------------------------------------------------------------
# comparing outputs


@dataclass(frozen=True)
class Tol:
    rtol: float
    atol: float


_TWO_ULPS = {"bfloat16": 2.0**-6, "float16": 2.0**-9}
"""The least rtol for a half-precision output: two ulps of its type.  The ONNX backend runner widens
bfloat16 this way; float16 gets the same rule (a tolerance finer than the type's spacing compares
rounding, not answers)."""


def compare_outputs(actual: Sequence[Any], expected: Sequence[Any], tol: Tol,
                    ok_within: Callable[[int, np.ndarray, np.ndarray], bool] | None = None,
                    check_dtype: bool = True) -> tuple[bool, float, str]:
    """(ok, max error, note): every output within ``tol`` of the expected one, equal NaN.

    Integers and booleans must match exactly (the error is the largest absolute
    difference); with ``check_dtype`` the dtypes must be equal too (as ONNX's
    backend runner and ``torch.testing`` require).  A bfloat16 or float16 output
    gets rtol of at least two ulps of its type (see ``_TWO_ULPS``).  ``ok_within(i, actual, expected)``
    may accept an output that fails the plain test (a suite's second opinion, e.g. a float64
    reference)."""
    from irkit.check import Tolerance, compare

    if len(actual) != len(expected):
        return False, math.inf, f"{len(actual)} outputs, expected {len(expected)}"
    worst = 0.0
    for i, (a, e) in enumerate(zip(actual, expected)):
        a = np.asarray(a)
        e = np.asarray(e)
        if a.shape != e.shape:  # strict, as the frameworks' own runners: a wrong rank is a wrong answer
            return False, math.inf, f"output {i}: shape {list(a.shape)}, expected {list(e.shape)}"
        if check_dtype and a.dtype != e.dtype:
            return False, math.inf, f"output {i}: dtype {a.dtype}, expected {e.dtype}"
        if e.dtype.kind in "biu" or e.dtype == np.bool_:
            if a.dtype.kind == "f":
                ok_int = np.array_equal(a, e)
                err = float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64)))) if a.size else 0.0
            else:
                ok_int = np.array_equal(a.astype(np.int64) if a.dtype != np.uint64 else a,
                                        e.astype(np.int64) if e.dtype != np.uint64 else e)
                err = 0.0 if ok_int else float(np.max(np.abs(a.astype(np.float64) - e.astype(np.float64))))
            worst = max(worst, err)
            if not ok_int and not (ok_within and ok_within(i, a, e)):
                return False, worst, f"output {i}: integer values differ (max |diff| {err:g})"
            continue
        if e.dtype.kind == "c" or a.dtype.kind == "c":
            return False, math.inf, f"output {i}: complex outputs are not compared"
        if a.dtype.kind not in "biuf" and not type(a.dtype).__module__.startswith("ml_dtypes"):
            return False, math.inf, f"output {i}: dtype {a.dtype}, expected {e.dtype}"
        rtol = max(tol.rtol, _TWO_ULPS.get(e.dtype.name, 0.0))
        c = compare(a.astype(np.float64), e.astype(np.float64), Tolerance(rtol, tol.atol), f"output {i}")
        err = c.max_abs if not math.isnan(c.max_abs) else math.inf
        worst = max(worst, err)
        if not c.ok and not (ok_within and ok_within(i, a, e)):
            return False, worst, c.describe()
    return True, worst, ""


NORMWISE_ULPS = 64
"""A float32 output within this many ulps of its largest magnitude of the expected one is rounding, not a wrong
answer: accumulations (conv, matmul, reductions) round relative to the summands, not to each element."""


def close_to_float64(a: np.ndarray, e: np.ndarray, x: np.ndarray, tol: Tol) -> bool:
    """Whether ``a`` is as close to the framework's float64 result ``x`` as the framework's own float32
    result ``e`` is: within ``tol`` of ``x`` plus four times the largest ``|e - x|`` (normwise, since
    two correct float32 results round on different elements).  NaNs must sit where ``e`` has them."""
    if np.shape(x) != e.shape or a.shape != e.shape:
        return False
    x = np.asarray(x, dtype=np.float64)
    ea, aa = e.astype(np.float64), a.astype(np.float64)
    with np.errstate(all="ignore"):
        d = np.abs(ea - x)
        own = float(d[np.isfinite(d)].max()) if np.isfinite(d).any() else 0.0
        bound = tol.atol + tol.rtol * np.abs(x) + 4.0 * own
        same = (np.isnan(aa) == np.isnan(ea)) & ((np.abs(aa - x) <= bound) | (aa == x) | np.isnan(aa))
    return bool(same.all())


def rounding_judge(float64_outputs: Callable[[], Sequence[Any]],
                   tol: Tol) -> Callable[[int, np.ndarray, np.ndarray], bool]:
    """The second opinion on a float mismatch: rounding, not a wrong answer, when the result is
    normwise close, or as close to the framework's own float64 result (``float64_outputs()``,
    computed once, on first need) as the framework's float32 result is."""
    f64: list[Any] = []

    def judge(i: int, a: np.ndarray, e: np.ndarray) -> bool:
        if a.dtype.kind != "f" or e.dtype.kind != "f":
            return False
        if normwise_close(a, e):
            return True
        if not f64:
            try:
                f64.extend(float64_outputs())
            except Exception:  # noqa: BLE001 - no float64 form: no second opinion
                f64.append(None)
        return len(f64) > i and f64[i] is not None and close_to_float64(a, e, f64[i], tol)

    return judge


class InexactDataJudge:
    """The second opinion for a suite whose stored outputs may themselves be inexact: when a float
    output misses the stored one, and the stored one misses the float64 answer (``float64_outputs()``,
    computed once, on first need, by an independent evaluator) by more than the case's own tolerance,
    the output is checked against the float64 answer with that tolerance instead.  Where the stored
    output is within tolerance of the float64 answer, a mismatch stays a mismatch.  ``inexact`` lists
    (output index, largest |stored - float64|) for each output found inexact, for the case's note."""

    def __init__(self, float64_outputs: Callable[[], Sequence[Any]], tol: Tol) -> None:
        self.float64_outputs = float64_outputs
        self.tol = tol
        self.f64: list[Any] | None = None
        self.inexact: dict[int, float] = {}

    def reference(self, i: int) -> np.ndarray | None:
        if self.f64 is None:
            try:
                self.f64 = [np.asarray(x) for x in self.float64_outputs()]
            except Exception:  # noqa: BLE001 - no float64 form: no second opinion
                self.f64 = []
        return self.f64[i] if i < len(self.f64) else None

    def __call__(self, i: int, a: np.ndarray, e: np.ndarray) -> bool:
        from irkit.check import Tolerance, compare

        if a.dtype.kind != "f" or e.dtype.kind != "f":
            return False
        x = self.reference(i)
        if x is None or x.dtype.kind != "f" or x.shape != e.shape or a.shape != e.shape:
            return False
        tol = Tolerance(max(self.tol.rtol, _TWO_ULPS.get(e.dtype.name, 0.0)), self.tol.atol)
        x64 = x.astype(np.float64)
        stored = compare(e.astype(np.float64), x64, tol, f"output {i}")
        if stored.ok:
            return False
        self.inexact[i] = float(stored.max_abs)
        return compare(a.astype(np.float64), x64, tol, f"output {i}").ok

    def note(self) -> str:
        """The reason attached to a case whose stored data was found inexact ('' when none was)."""
        if not self.inexact:
            return ""
        parts = ", ".join(f"output {i} off by {err:.3g}" for i, err in sorted(self.inexact.items()))
        return (f"checked against the float64 answer: the suite's stored output misses it beyond the case's "
                f"own tolerance ({parts})")


def normwise_close(a: np.ndarray, e: np.ndarray) -> bool:
    """Whether float32 ``a`` is within :data:`NORMWISE_ULPS` ulps of the largest finite ``|e|`` of ``e``
    everywhere, with NaNs and infinities in the same places."""
    if a.shape != e.shape or e.dtype != np.float32 or a.dtype.kind != "f":
        return False
    aa, ea = a.astype(np.float64), e.astype(np.float64)
    if np.any(np.isnan(aa) != np.isnan(ea)):
        return False
    inf = np.isinf(ea) | np.isinf(aa)
    if np.any(aa[inf] != ea[inf]):
        return False
    fin = np.isfinite(ea) & np.isfinite(aa)
    if not fin.any():
        return True
    scale = float(np.abs(ea[fin]).max())
    return bool(np.abs(aa[fin] - ea[fin]).max() <= NORMWISE_ULPS * float(np.finfo(np.float32).eps) * scale)


def timed_call(fn: Callable[[], Any]) -> tuple[Any, float]:
    import time

    t0 = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t0


def run_on_targets(case: str, group: str, module: Any, inputs: Sequence[np.ndarray], expected: Sequence[Any],
                   tol: Tol, runners: Iterable[tuple[str, str]],
                   ok_within: Callable[[int, np.ndarray, np.ndarray], bool] | None = None) -> list[CaseResult]:
    """Run an imported ``module`` on each (runner name, target name) and compare with ``expected``.

    The interpreter is target ``reference``; a target's refusal (``IrkitError``)
    is ``refused``, anything else a ``crash``."""
    out: list[CaseResult] = []
    for runner, target in runners:
        try:
            if target == INTERP:
                from irkit.interp import run

                got, dt = timed_call(lambda: run(module, [np.asarray(x) for x in inputs]))
            else:
                from irkit.targets.registry import get_target

                t = get_target(target)
                av = t.availability()
                if not av.can_run:
                    out.append(CaseResult(case, group, runner, "refused", f"target '{target}' cannot run here: "
                                          f"{av.reason}"))
                    continue
                def on_target(t: Any = t) -> Any:
                    return t.run_module(module, [np.asarray(x) for x in inputs])

                got, dt = timed_call(on_target)
        except Exception as e:  # noqa: BLE001 - one case never stops the run
            status, reason = classify_error(e)
            out.append(CaseResult(case, group, runner, status, reason))
            continue
        out.append(judge(case, group, runner, got, expected, tol, dt, ok_within))
    return out


def judge(case: str, group: str, runner: str, got: Sequence[Any], expected: Sequence[Any], tol: Tol,
          seconds: float = 0.0,
          ok_within: Callable[[int, np.ndarray, np.ndarray], bool] | None = None) -> CaseResult:
    try:
        ok, err, note = compare_outputs(got, expected, tol, ok_within)
    except Exception as e:  # noqa: BLE001 - a comparison problem is this case's, not the run's
        return CaseResult(case, group, runner, "crash", "comparing outputs: " + crash_line(e), None, seconds)
    if ok:
        return CaseResult(case, group, runner, "pass", "", err, seconds)
    return CaseResult(case, group, runner, "wrong", note[:400], err, seconds)


def all_rows(case: str, group: str, runners: Iterable[str], status: str, reason: str) -> list[CaseResult]:
    """The same status on every runner (a skip, an import refusal)."""
    return [CaseResult(case, group, r, status, reason) for r in runners]


__all__ = [
    "INTERP",
    "InexactDataJudge",
    "STATUSES",
    "CaseResult",
    "SuiteResult",
    "Tol",
    "all_rows",
    "classify_error",
    "compare_outputs",
    "crash_line",
    "judge",
    "one_line",
    "reason_key",
    "rounding_judge",
    "run_on_targets",
]
