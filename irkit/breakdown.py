"""Where one call's time goes: kernels, per-call overhead, and the rest.

Design note: ``breakdown(target, artifact, inputs)`` splits the end-to-end latency of
``target.run(artifact, inputs)`` (the median over interleaved rounds) into three parts that
sum to it:

- **kernels**: each kernel's time from the engine's own profiler (``Artifact.profiler``:
  onnxruntime's ``enable_profiling`` JSON, the TVM VM's call instrument around every PrimFunc
  call, XLA CPU's thunk events), the engine's function names mapped back to the artifact's
  kernels (a TVM-fused ``fused_conv2d_2_im2col_reshape`` belongs to kernel ``conv2d_2``); a
  function no kernel claims keeps its own name.
- **per-call overhead**: end-to-end time minus the bare engine call on arguments already
  marshalled (``runner.engine``: ``prepare(inputs)`` then ``call(prepared)``; for TVM the VM's
  ``main`` on resident tensors, for onnxruntime ``InferenceSession.run`` on a ready feed dict):
  the Python on irkit's side, argument marshalling (copies into staging tensors, dtype handling)
  and turning the results into NumPy arrays.  Zero where a target exposes no engine call.
- **engine other**: the bare engine call minus the kernels — VM dispatch between kernels,
  allocation of intermediates and outputs, the thread pool waking up and idling at the joins,
  and the profiler's own skew (it times kernels in separate runs, so this part can be slightly
  negative on a tiny graph; it is reported as measured, not clamped).
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Breakdown:
    """One target's end-to-end latency split into parts (seconds)."""

    target: str
    total: float
    overhead: float
    kernels: list[tuple[str, float]] = field(default_factory=list)
    engine_measured: bool = True
    rounds: int = 0
    kernel_calls: dict[str, int] = field(default_factory=dict)

    @property
    def kernel_total(self) -> float:
        return sum(s for _, s in self.kernels)

    @property
    def other(self) -> float:
        return self.total - self.overhead - self.kernel_total

    def parts(self) -> dict[str, float]:
        return {"kernels": self.kernel_total, "per-call overhead": self.overhead, "engine other": self.other}

    def as_dict(self) -> dict[str, Any]:
        return {"target": self.target, "total_s": self.total, "kernels_s": self.kernel_total,
                "overhead_s": self.overhead, "other_s": self.other, "engine_measured": self.engine_measured,
                "rounds": self.rounds,
                "per_kernel": [{"kernel": n, "seconds": s, "calls": self.kernel_calls.get(n, 1)}
                               for n, s in self.kernels]}


def kernel_of(function: str, kernels: Sequence[Any]) -> str:
    """The artifact kernel an engine function belongs to (by the kernel's ``extra["functions"]`` or
    name, exactly, or onnxruntime's ``NODE/FusionName``, else as a ``_``-delimited part of a fused
    function's name); else the function's own name (a node the engine made, e.g. a layout reorder)."""
    def fns(k: Any) -> list[str]:
        return [k.name, *k.extra.get("functions", [])]

    for k in kernels:
        if function in fns(k):
            return k.name
    head = function.split("/", 1)[0]  # onnxruntime names a fused node "<first node>/<fusion>"
    for k in kernels:
        if head in fns(k):
            return k.name
    for k in kernels:
        if any(re.search(rf"(?:^|_){re.escape(f)}(?:_|$)", function) for f in fns(k) if f):
            return k.name
    return function


def breakdown(target: Any, artifact: Any, inputs: Sequence[np.ndarray], *, rounds: int = 20,
              warmup: int = 3) -> Breakdown:
    """Measure ``target.run(artifact, inputs)`` and split it (see the module note)."""
    xs = list(inputs)
    engine = getattr(artifact.runner, "engine", None)
    prepared = engine.prepare(xs) if engine is not None else None
    for _ in range(warmup):
        target.run(artifact, xs)
        if engine is not None:
            engine.call(prepared)
    tot: list[float] = []
    eng: list[float] = []
    for _ in range(rounds):  # interleaved, so machine noise hits both alike
        t0 = time.perf_counter()
        target.run(artifact, xs)
        t1 = time.perf_counter()
        tot.append(t1 - t0)
        if engine is not None:
            t2 = time.perf_counter()
            engine.call(prepared)
            eng.append(time.perf_counter() - t2)
    total = statistics.median(tot)
    overhead = max(0.0, total - statistics.median(eng)) if eng else 0.0
    per: dict[str, float] = {}
    calls: dict[str, int] = {}
    if artifact.profiler is not None:
        import inspect

        try:
            takes_runs = "runs" in inspect.signature(artifact.profiler).parameters
        except (TypeError, ValueError):
            takes_runs = False
        prof = artifact.profiler(xs, runs=max(3, rounds // 2)) if takes_runs else artifact.profiler(xs)
        for fn_name, sec in prof:
            k = kernel_of(str(fn_name), artifact.kernels)
            per[k] = per.get(k, 0.0) + float(sec)
            calls[k] = calls.get(k, 0) + 1
    return Breakdown(artifact.target, total, overhead, sorted(per.items(), key=lambda kv: -kv[1]),
                     engine is not None, rounds, calls)


def render(bd: Breakdown, top: int = 12) -> str:
    """A plain-text report: the three parts with shares, then the slowest kernels."""
    def ms(s: float) -> str:
        return f"{s * 1e3:9.3f} ms"

    lines = [f"{bd.target}: {ms(bd.total).strip()} end to end (median of {bd.rounds})"]
    for name, s in bd.parts().items():
        share = 100 * s / bd.total if bd.total else 0.0
        note = "" if bd.engine_measured or name != "per-call overhead" else "  (no bare engine call: not split out)"
        lines.append(f"  {name:<18}{ms(s)} {share:6.1f}%{note}")
    engine = bd.total - bd.overhead
    if bd.kernels and bd.kernel_total > 1.05 * engine:
        lines.append(f"  (the engine's profiler timed its kernels at {bd.kernel_total / engine:.2f}x the bare call: "
                     "profiling slows every kernel, so read kernel times as shares of their sum)")
    for name, s in bd.kernels[:top]:
        n = bd.kernel_calls.get(name, 1)
        lines.append(f"    {name:<40}{ms(s)}" + (f"  ({n} calls)" if n > 1 else ""))
    if len(bd.kernels) > top:
        rest = sum(s for _, s in bd.kernels[top:])
        lines.append(f"    {'(' + str(len(bd.kernels) - top) + ' more kernels)':<40}{ms(rest)}")
    return "\n".join(lines)


__all__ = ["Breakdown", "breakdown", "kernel_of", "render"]
