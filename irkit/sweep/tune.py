"""Tile tuning for the scheduled TVM CPU matmul: rank by a cost model, time the best few, store.

Design note: the ``tvm-llvm`` matmul kernel (``targets/tvm_kernels/matmul.py``)
takes ``tile_m × tile_n × tile_k`` cache tiles from the op's ``tile`` attribute
(what ``tile-matmul`` sets), with ``default_tiles`` when absent.  For each
matmul of a model the tuner

1. enumerates the tiles of a power-of-two space, clamped to the problem
   (duplicates after clamping dropped);
2. ranks them with an analytic CPU model built on the host's hardware
   description (``targets/specs/host-cpu.toml``): padded FLOPs at the measured
   single-thread GEMM rate times the cores a tile grid can keep busy, against the
   traffic of A re-read once per column of tiles and B once per row of tiles at
   the spec's memory bandwidth, with a penalty when a task's working set
   (``tile_m×tile_k`` of A plus ``tile_k×tile_n`` of B) leaves L2, and a fixed cost
   per tile step;
3. times only the top K (and the default tiles) as ordinary ``bench`` tasks of a
   one-matmul module through the sweep executors, so they are stored, resumable
   and parallel, one timing at a time per machine;
4. stores the fastest in the store's ``tuning`` table, keyed by the matmul's
   shapes, dtype, whether B is a constant (the kernel packs constant weights),
   the target, the versions and the machine.

:func:`apply_tuning` sets those tiles on a module's matmuls before lowering;
matmuls without a stored choice keep the defaults.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import work
from .executors import Executor, Job
from .store import ResultRow, Store

TILE_M = (8, 16, 32, 64, 128, 256)
TILE_N = (16, 32, 64, 128, 256, 512)
TILE_K = (16, 32, 64, 128, 256, 512)
STEP_SECONDS = 2e-7
"""Modelled fixed cost of one (tile, k-step): loop control, packing setup, a task hand-off share."""


@dataclass(frozen=True)
class MatmulSite:
    """One matmul of a module at concrete shapes."""

    index: int
    """Position of the op in the entry function's walk order."""
    a_shape: tuple[int, ...]
    b_shape: tuple[int, ...]
    dtype: str
    b_const: bool

    @property
    def mnk(self) -> tuple[int, int, int, int]:
        """(batch, m, n, k)."""
        batch = math.prod(self.a_shape[:-2]) if len(self.a_shape) > 2 else 1
        return batch, self.a_shape[-2], self.b_shape[-1], self.a_shape[-1]

    def signature(self) -> dict[str, Any]:
        return {"a": list(self.a_shape), "b": list(self.b_shape), "dtype": self.dtype, "b_const": self.b_const}


def matmul_sites(module: Any, bindings: Mapping[str, int]) -> list[MatmulSite]:
    """The float matmuls of ``module``'s entry function that the TVM kernel takes."""
    from irkit.ir.types import DType, eval_dim

    out = []
    for i, op in enumerate(module.entry.walk()):
        if op.name != "ik.matmul" or len(op.operands) != 2:
            continue
        a, b = op.operands
        if not a.type.dtype.is_float or a.type.dtype is DType.f64:
            continue
        try:
            sa = tuple(int(eval_dim(d, bindings)) for d in a.type.shape)
            sb = tuple(int(eval_dim(d, bindings)) for d in b.type.shape)
        except (KeyError, ValueError, TypeError):  # a dim the bindings do not fix: not tunable here
            continue
        if len(sa) < 2 or len(sb) < 2:
            continue
        prod = b.producer if hasattr(b, "producer") else None
        b_const = bool(prod is not None and getattr(prod, "name", "") == "ik.constant" and len(sb) == 2)
        out.append(MatmulSite(i, sa, sb, str(a.type.dtype), b_const))
    return out


def candidates(site: MatmulSite) -> list[tuple[int, int, int]]:
    """The tile space clamped to the problem, without duplicates (defaults first)."""
    _, m, n, k = site.mnk

    def clamp(v: int, extent: int) -> int:
        return min(v, 1 << max(0, (extent - 1).bit_length()))

    seen: list[tuple[int, int, int]] = [(clamp(64, m), clamp(256, n), clamp(256, k))]
    for tm, tn, tk in itertools.product(TILE_M, TILE_N, TILE_K):
        c = (clamp(tm, m), clamp(tn, n), clamp(tk, k))
        if c not in seen:
            seen.append(c)
    return seen


def model_seconds(site: MatmulSite, tile: tuple[int, int, int], hw: Any) -> float:
    """Analytic time of ``site`` with ``tile`` on a CPU hardware description (see the module note)."""
    cpu = hw.cpu
    batch, m, n, k = site.mnk
    tm, tn, tk = tile
    item = 2 if site.dtype in ("bf16", "f16") else 4
    mp, np_, kp = math.ceil(m / tm) * tm, math.ceil(n / tn) * tn, math.ceil(k / tk) * tk
    tiles = batch * (mp // tm) * (np_ // tn)
    cores = max(1, cpu.cores)
    waves = math.ceil(tiles / cores)
    busy = tiles / (waves * cores)  # load balance of the tile grid over the cores
    rate = cpu.gemm_f32_gflops_1t * 1e9 * cores * busy
    working = (tm * tk + tk * tn) * item
    if working > cpu.l2_kib * 1024:
        rate *= 0.5  # the packed blocks no longer stay in L2
    compute = 2 * batch * mp * np_ * kp / rate
    traffic = batch * (m * k * (np_ // tn) + k * n * (mp // tm) + m * n) * item
    bw = hw.bandwidth_bytes_per_s or 20e9
    steps = tiles * (kp // tk)
    return max(compute, traffic / bw) + steps * STEP_SECONDS / cores


def single_matmul_text(site: MatmulSite, tile: tuple[int, int, int] | None) -> str:
    """IR text of a module holding just this matmul (B a constant when the site's B is), with ``tile``."""
    import numpy as np

    from irkit.ir.builder import module_of, new_function
    from irkit.ir.types import DType, TensorType
    from irkit.text.io import module_text

    dt = DType(site.dtype) if not isinstance(site.dtype, DType) else site.dtype
    args = [TensorType(site.a_shape, dt)] + ([] if site.b_const else [TensorType(site.b_shape, dt)])
    f, b = new_function("main", args, ["a"] + ([] if site.b_const else ["b"]))
    if site.b_const:
        rng = np.random.default_rng(0)
        w = b.constant(rng.standard_normal(site.b_shape).astype(dt.np), dt)
    else:
        w = f.args[1]
    attrs = {"tile": tuple(tile)} if tile else {}
    y = b.matmul(f.args[0], w, **attrs)
    b.ret(y)
    text, _ = module_text(module_of(f), inline_resources=True)
    return text


def tuning_key(target: str, site: MatmulSite) -> str:
    return work.digest({"target": target, "kernel": "matmul", "site": site.signature(), "versions": work.versions(),
                        "machine": work.machine()})


@dataclass
class TuneReport:
    """What a tuning run did, per matmul and in total."""

    sites: list[dict[str, Any]]
    ranked: int
    measured: int
    wall_seconds: float


def tune(module: Any, bindings: Mapping[str, int], store: Store, executor: Executor, *, target: str = "tvm-llvm",
         top_k: int = 4, budget: int | None = None, timeout: float = 300.0,
         params: Mapping[str, Any] | None = None, log: Any = None) -> TuneReport:
    """Tune every distinct matmul of ``module`` (see the module note); returns what was ranked and timed."""
    from irkit.targets.hwspec import load_spec

    t0 = time.perf_counter()
    log = log or (lambda s: None)
    hw = load_spec("host-cpu")
    bench = {"warmup": 2, "repeats": 10, "max_seconds": 2.0, **(params or {})}
    vers, mach, commit = work.versions(), work.machine(), work.commit_id()
    sites: dict[str, MatmulSite] = {}
    for s in matmul_sites(module, bindings):
        sites.setdefault(work.digest(s.signature()), s)
    jobs: list[Job] = []
    plan: dict[str, list[tuple[tuple[int, int, int], str, bool]]] = {}
    ranked_total = 0
    for sig, s in sites.items():
        cands = candidates(s)
        ranked = sorted(cands, key=lambda c: model_seconds(s, c, hw))
        if budget:
            ranked = ranked[:budget]
        ranked_total += len(cands) if not budget else min(budget, len(cands))
        chosen = ranked[:top_k]
        default = cands[0]
        entries = [(c, "", c == default) for c in chosen]
        if default not in chosen:
            entries.append((default, "", True))
        plan[sig] = []
        for tile, _, is_default in entries:
            text = single_matmul_text(s, tile)
            ir_hash = work.digest(text)
            key = work.task_key(ir_hash, "", target, {"tile": list(tile)}, {}, "bench", bench, vers, mach)
            plan[sig].append((tile, key, is_default))
            jobs.append(Job(f"tune {s.a_shape}x{s.b_shape} tile={list(tile)}",
                            {"kind": "measure", "ir_text": text, "pipeline": "", "target": target,
                             "measurement": "bench", "bindings": {}, "params": bench},
                            timing=True, info={"key": key, "ir_hash": ir_hash, "tile": tile}))
    done = store.status_of(j.info["key"] for j in jobs)
    todo = [j for j in jobs if done.get(j.info["key"]) != "ok"]
    log(f"tune: {len(sites)} distinct matmul(s); {ranked_total} candidates ranked by the cost model, "
        f"{len(jobs)} to time ({len(jobs) - len(todo)} already in the store)")

    def on_result(job: Job, out: dict[str, Any]) -> Job | None:
        st = out["status"]
        row = ResultRow(key=job.info["key"], status="ok" if st == "ok" else "failed", model="(tuning)",
                        frontend="auto", ir_hash=job.info["ir_hash"], pipeline="", target=target,
                        options={"tile": list(job.info["tile"])}, bindings={}, measurement="bench",
                        params=dict(bench), versions=vers, machine=mach, commit_id=commit, sweep="tune",
                        result=out["result"], error=out["error"], duration=out["seconds"], worker=out["worker"],
                        finished=time.time())
        store.put(row, attempt_status=st)
        log(f"  {st:<8} {out['result'].get('median', float('nan')) * 1e3:8.3f} ms  {job.id}")
        return job if st in ("timeout", "lost") and job.tries <= 1 else None

    if todo:
        executor.run(todo, timeout, on_result)
    times = {r.key: r.result.get("median") for r in store.rows() if r.status == "ok" and r.sweep == "tune"}
    report = []
    measured_total = 0
    for sig, entries in plan.items():
        s = sites[sig]
        timed = [(t, tile, d) for tile, k, d in entries if (t := times.get(k)) is not None]
        measured_total += len(entries)
        if not timed:
            continue
        best = min(timed)
        default_s = next((t for t, _, d in timed if d), None)
        store.put_tuning(tuning_key(target, s), target, "matmul", list(s.a_shape) + list(s.b_shape),
                         {"tile": list(best[1]), "site": s.signature()}, best[0], default_s,
                         len(candidates(s)) if not budget else min(budget, len(candidates(s))), len(entries))
        report.append({"a": list(s.a_shape), "b": list(s.b_shape), "best_tile": list(best[1]), "best_ms": best[0] * 1e3,
                       "default_ms": None if default_s is None else default_s * 1e3,
                       "speedup": None if not default_s else default_s / best[0],
                       "model_rank_of_best": sorted(candidates(s), key=lambda c: model_seconds(s, c, hw)).index(best[1])
                       + 1})
    return TuneReport(report, ranked_total, measured_total, time.perf_counter() - t0)


def apply_tuning(module: Any, store: Store, target: str = "tvm-llvm",
                 bindings: Mapping[str, int] | None = None) -> int:
    """Set the stored tiles on ``module``'s matmuls (in place); returns how many got one.
    Matmuls with no stored choice (other shapes, versions or machine) keep the default tiles."""
    from irkit.interp import default_bindings

    b = default_bindings(module.entry, bindings or {})
    ops = list(module.entry.walk())
    n = 0
    for s in matmul_sites(module, b):
        rows = [t for t in store.tuning(target) if t["key"] == tuning_key(target, s)]
        if not rows:
            continue
        op = ops[s.index]
        attrs = dict(op.attrs)
        attrs["tile"] = tuple(int(x) for x in rows[0]["config"]["tile"])
        op.attrs = attrs
        n += 1
    return n


__all__ = [
    "MatmulSite",
    "TuneReport",
    "apply_tuning",
    "candidates",
    "matmul_sites",
    "model_seconds",
    "single_matmul_text",
    "tune",
    "tuning_key",
]

