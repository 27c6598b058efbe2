"""The zoo matrix: every architecture through export, import, passes and targets, measured.

One *job* is one (model, size, frontend): build the model (random weights),
run it in eager torch for the expected output, export it (``torch`` frontend:
``torch.export`` to ``.pt2``; ``onnx`` frontend: ``torch.onnx.export(dynamo=True)``),
import the file, run the import on the interpreter (declared dtypes) against
torch, run the optimising pipeline, count the fused ``ik.attention`` ops
against the attention layers the model runs, check the optimised module on
the interpreter again, then lower it to each target, compile, and run it where
the target runs here (compile-only targets: the compile is the result).  Every
stage records its wall time and the process's peak resident memory during the
stage (the kernel's high-water mark, reset before each stage through
``/proc/self/clear_refs``), beside the model's weight bytes.

Design note.  Jobs run in worker processes (``jobs >= 1``) of
:class:`irkit.sweep.executors.LocalPool`, which kills a job past its timeout or
a worker that dies (a segfaulting compiler) and carries on; the only thing
this module adds is the worker's loop (:func:`_worker_main`), which calls
:func:`execute` instead of the sweep's job runner.  One job never stops the
matrix: an exception inside a stage is recorded on that stage and the job goes
on to the stages that do not depend on it.  ``jobs=0`` runs in this process
(for tests and debugging; peak memory then includes whatever ran before).

Results are plain dicts (JSON), one per job, keyed ``model:size:frontend``;
:func:`markdown` renders them as the ZOO.md table, :func:`merge` folds a run into
an existing JSON file so a matrix can be built up over several runs.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from irkit.errors import InputError

DEFAULT_PIPELINE = ("canonicalize,fuse-attention,fuse-cache-attention,fuse-norm,fuse-activation,fuse-elementwise,"
                    "cse,dce")
"""The optimising pipeline (``fuse-cache-attention`` fires only on functions with KV-cache state)."""
FRONTENDS = ("torch", "onnx")
COMPILE_ONLY = ("xla-tpu-v5e", "tvm-cuda")
"""Targets added to the runnable ones by default: compiled here, not run."""
DEFAULT_TIMEOUT = {"toy": 600.0, "full": 1800.0}


@dataclass
class Job:
    """One (model, size, frontend) of the matrix and how to treat it (picklable)."""

    model: str
    size: str = "toy"
    frontend: str = "torch"
    pipeline: str = DEFAULT_PIPELINE
    plugins: list[str] = field(default_factory=list)
    targets: list[str] | None = None
    """Target names; None: every target that runs here plus :data:`COMPILE_ONLY`."""
    out_dir: str = ""
    """Where the exported file goes (kept for inspection); empty: a temporary folder, removed."""
    interp: bool = True
    """Run the interpreter against torch (before and after the pipeline)."""
    verbose: bool = False
    partial: str = ""
    """Where to keep the row as it grows (JSON, rewritten after each stage), so a job killed at its
    timeout still reports the stages it finished; empty: nowhere."""

    @property
    def key(self) -> str:
        return f"{self.model}:{self.size}:{self.frontend}"


# --- memory ---------------------------------------------------------------------------------


def _status_mb(field_name: str) -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def rss_mb() -> float | None:
    """This process's resident memory now (MB), where the OS says."""
    return _status_mb("VmRSS")


def reset_peak() -> bool:
    """Reset the kernel's resident high-water mark to the current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_mb() -> float | None:
    """Peak resident memory (MB) since the last :func:`reset_peak` (since start where it cannot reset)."""
    v = _status_mb("VmHWM")
    if v is not None:
        return v
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / 1024.0 if sys.platform != "darwin" else r / 2**20


def _short(e: BaseException) -> str:
    text = " ".join(str(e).split())
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" (at {Path(where.filename).name}:{where.lineno})" if where else ""
    return f"{type(e).__name__}: {text[:400]}{at}"


class _Stages:
    """Times and peak memory of the stages of one job, and their errors."""

    def __init__(self, row: dict[str, Any], label: str, verbose: bool, partial: str = ""):
        self.row = row
        self.label = label
        self.verbose = verbose
        self.partial = partial
        row.setdefault("stages", {})

    def save(self, running: str = "") -> None:
        if not self.partial:
            return
        from irkit.fileio import atomic_write

        doc = dict(self.row, running=running) if running else self.row
        try:
            atomic_write(self.partial, json.dumps(doc, default=str))
        except OSError:
            pass

    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, Any]]:
        gc.collect()
        reset_peak()
        rec: dict[str, Any] = {"rss_before_mb": _r(rss_mb())}
        self.row["stages"][name] = rec
        if self.verbose:
            print(f"[{self.label}] {name}...", file=sys.stderr, flush=True)
        self.save(running=name)
        t0 = time.perf_counter()
        c0 = time.process_time()
        try:
            yield rec
            rec["ok"] = True
        except Exception as e:  # noqa: BLE001 - a stage's failure is its result; the job goes on
            rec["ok"] = False
            rec["error"] = _short(e)
            from irkit.frontends.common import UnsupportedOpsError

            if isinstance(e, UnsupportedOpsError):
                rec["missing_ops"] = {k: len(v) for k, v in e.ops.items()}
        finally:
            rec["seconds"] = round(time.perf_counter() - t0, 2)
            rec["cpu_s"] = round(time.process_time() - c0, 2)
            rec["peak_mb"] = _r(peak_mb())
            if self.verbose:
                state = "ok" if rec.get("ok") else f"FAILED: {rec.get('error', '')[:120]}"
                print(f"[{self.label}] {name}: {rec['seconds']:.1f} s, peak {rec['peak_mb']} MB, {state}",
                      file=sys.stderr, flush=True)
            self.save()

    def ok(self, name: str) -> bool:
        return bool(self.row["stages"].get(name, {}).get("ok"))


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


# --- one job --------------------------------------------------------------------------------


def weight_bytes(module: Any) -> int:
    """Bytes of the module's parameters and buffers, each storage counted once (tied weights)."""
    seen: set[int] = set()
    n = 0
    for t in list(module.parameters()) + list(module.buffers()):
        try:
            key = t.untyped_storage().data_ptr()
        except Exception:  # noqa: BLE001 - a tensor without storage (meta): count it
            key = id(t)
        if key in seen:
            continue
        seen.add(key)
        n += t.numel() * t.element_size()
    return n


def default_targets() -> list[str]:
    """Every target that compiles and runs here (not ``reference``: the interpreter stages cover
    it), then :data:`COMPILE_ONLY`."""
    from irkit.targets.registry import list_targets

    out = []
    for t in list_targets():
        if t.name == "reference" or t.name in COMPILE_ONLY:
            continue
        try:
            if t.availability().can_run:
                out.append(t.name)
        except Exception:  # noqa: BLE001 - a target that cannot say is not runnable here
            continue
    return out + list(COMPILE_ONLY)


def _compare(got: Any, want: Any, m: Any) -> tuple[bool, str]:
    from irkit.check import compare, module_tolerance

    c = compare(got, want, module_tolerance(m))
    return c.ok, c.describe()


def _count(m: Any, name: str) -> int:
    return sum(1 for op in m.walk() if op.name == name)


def run_job(job: Job) -> dict[str, Any]:
    """Run one job, never raising: a dict with the model's facts and one record per stage."""
    import tempfile

    from irkit import zoo

    arch = zoo.entry(job.model)
    row: dict[str, Any] = {"key": job.key, "model": job.model, "size": job.size, "frontend": job.frontend,
                           "family": arch.family, "attention": arch.attention, "pipeline": job.pipeline,
                           "targets": {}}
    st = _Stages(row, job.key, job.verbose, job.partial)
    tmp = None
    out_dir = Path(job.out_dir) if job.out_dir else None
    if out_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="irkit-zoo-")
        out_dir = Path(tmp.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        _run_job(job, arch, row, st, out_dir)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return row


def _run_job(job: Job, arch: Any, row: dict[str, Any], st: _Stages, out_dir: Path) -> None:
    import numpy as np
    import torch

    from irkit import zoo

    for p in job.plugins:
        _load_plugin(p)
    module = inputs = want = None
    with st.stage("build") as rec:
        from irkit.zoo.build import as_size

        module, inputs = zoo.build(job.model, as_size(job.size))
        with torch.no_grad():
            want = module(*inputs).detach().numpy()
        row["weight_mb"] = round(weight_bytes(module) / 2**20, 1)
        row["params"] = sum(p.numel() for p in module.parameters())
        row["attn_impl"] = getattr(getattr(getattr(module, "model", None), "config", None),
                                   "_attn_implementation", None)
        row["layers"] = zoo.attention_layers(module, inputs)
        rec["inputs"] = [list(x.shape) for x in inputs]
    if not st.ok("build"):
        return
    # Full size: static shapes (the example's sequence is past the dynamic dims' bound, and a refused
    # dynamic export would only double the export time).
    dyn = zoo.dynamic_shapes(arch, inputs) if job.size == "toy" else None
    suffix = "pt2" if job.frontend == "torch" else "onnx"
    path = out_dir / f"{job.model}-{job.size}.{suffix}"
    with st.stage("export") as rec:
        from irkit.zoo.export import export_module_onnx, export_module_pt2

        fn = export_module_pt2 if job.frontend == "torch" else export_module_onnx
        ex = fn(module, inputs, dyn, path, label=f"zoo:{job.key}")
        rec["dynamic"] = ex.dynamic
        if ex.note:
            rec["note"] = ex.note
        rec["file_mb"] = round(_file_bytes(path) / 2**20, 1)
    xs = [x.detach().numpy() for x in inputs]
    del module, inputs
    gc.collect()
    if not st.ok("export"):
        return
    if job.frontend == "onnx":
        with st.stage("ort-session") as rec:
            # onnxruntime on the same file, for scale: its own session creation (all graph optimisations).
            import onnxruntime as ort

            so = ort.SessionOptions()
            so.log_severity_level = 3
            sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
            got = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), xs)})[0]
            rec["numerics"], rec["detail"] = _compare_plain(got, want)
            del sess
    m = None
    with st.stage("import") as rec:
        if job.frontend == "torch":
            from irkit.frontends.torch_export import load_pt2

            m = load_pt2(path)
        else:
            from irkit.frontends.onnx import import_onnx

            m = import_onnx(str(path))
        rec["ops"] = sum(1 for _ in m.walk())
        row["attention_at_import"] = _count(m, "ik.attention")
    if m is None:
        return
    if job.interp:
        with st.stage("interp") as rec:
            from irkit.interp import run

            rec["numerics"], rec["detail"] = _compare(run(m, xs)[0], want, m)
    with st.stage("optimise") as rec:
        from irkit.passmanager import PassManager

        PassManager(job.pipeline).run(m)
        rec["ops"] = sum(1 for _ in m.walk())
        row["fused"] = _count(m, "ik.attention")
        row["softmax_left"] = _count(m, "ik.softmax")
    if not st.ok("optimise"):
        return
    if job.interp:
        with st.stage("interp-optimised") as rec:
            from irkit.interp import run

            rec["numerics"], rec["detail"] = _compare(run(m, xs)[0], want, m)
    from irkit.interp import bind_symbols
    from irkit.targets.registry import get_target

    targets = job.targets if job.targets is not None else default_targets()
    for name in targets:
        tr: dict[str, Any] = {}
        row["targets"][name] = tr
        try:
            t = get_target(name)
            av = t.availability()
        except Exception as e:  # noqa: BLE001
            tr.update(status="unavailable", error=_short(e))
            continue
        if not av.can_compile:
            tr.update(status="unavailable", error=av.reason or "cannot compile here")
            continue
        art = None
        with st.stage(f"compile:{name}") as rec:
            b = bind_symbols(m.entry, xs)
            art = t.lower(m, b)
            rec["compile_seconds"] = round(art.compile_seconds, 2)
        srec = row["stages"][f"compile:{name}"]
        tr.update(compile_s=srec["seconds"], compile_peak_mb=srec["peak_mb"])
        if not srec["ok"]:
            tr.update(status="compile failed", error=srec.get("error", ""))
            continue
        if not av.can_run or art is None or art.runner is None:
            tr["status"] = "compiled"
            continue
        with st.stage(f"run:{name}") as rec:
            got = t.run(art, xs)[0]
            rec["numerics"], rec["detail"] = _compare(np.asarray(got), want, m)
        rrec = row["stages"][f"run:{name}"]
        tr["run_s"] = rrec["seconds"]
        if not rrec["ok"]:
            tr.update(status="run failed", error=rrec.get("error", ""))
        else:
            tr.update(status="ok" if rrec["numerics"] else "MISMATCH", detail=rrec["detail"])
        del art
        gc.collect()


def _compare_plain(got: Any, want: Any) -> tuple[bool, str]:
    import numpy as np

    from irkit.check import compare, tolerance
    from irkit.ir.types import DType

    c = compare(np.asarray(got), want, tolerance(DType.from_numpy(np.asarray(want).dtype)))
    return c.ok, c.describe()


def _file_bytes(path: Path) -> int:
    """The export's size with its external-data or sidecar files."""
    n = path.stat().st_size if path.exists() else 0
    for p in path.parent.glob(path.name + "*"):
        if p != path and p.is_file():
            n += p.stat().st_size
    for p in path.parent.glob(path.stem + ".data"):
        n += p.stat().st_size
    return n


_LOADED: set[str] = set()


def _load_plugin(path: str) -> None:
    if path in _LOADED:
        return
    from irkit.passmanager import load_pass_plugin

    load_pass_plugin(path)
    _LOADED.add(path)


def execute(payload: dict[str, Any]) -> dict[str, Any]:
    """A worker's outcome for one job payload (:class:`Job` as a dict), in the shape of
    :func:`irkit.sweep.work.execute`'s: ``status`` ok / failed, ``result``, ``error``, ``seconds``."""
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = run_job(Job(**payload))
        status, err = "ok", ""
    except Exception as e:  # noqa: BLE001 - a job's failure is its result
        res, status, err = {}, "failed", _short(e)
    return {"status": status, "result": res, "error": err, "seconds": time.perf_counter() - t0,
            "worker": f"pid {os.getpid()}"}


# --- running many ---------------------------------------------------------------------------


def _worker_main(conn: Any, threads: int) -> None:
    """A pool worker (the loop of :mod:`irkit.sweep.executors`, running :func:`execute`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TVM_NUM_THREADS"):
        os.environ.setdefault(k, str(threads))
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import torch

    torch.set_num_threads(threads)
    from irkit.sweep.executors import serve_jobs

    serve_jobs(conn, execute)


def _pool(jobs: int) -> Any:
    from irkit.sweep import executors

    threads = max(1, (os.cpu_count() or 1) // jobs)
    return executors.LocalPool(jobs, worker_main=_worker_main, worker_args=(threads,))


def plan(models: Sequence[str] | None, sizes: Sequence[str], frontends: Sequence[str], **kw: Any) -> list[Job]:
    """The jobs of a matrix, in zoo order; unknown names fail here, before any work."""
    from irkit import zoo
    from irkit.zoo.build import as_size

    names = list(models) if models else zoo.names()
    for n in names:
        zoo.entry(n)
    for s in sizes:
        as_size(s)
    for fe in frontends:
        if fe not in FRONTENDS:
            raise InputError(f"unknown frontend '{fe}' for the zoo matrix (expected {' or '.join(FRONTENDS)})")
    out = []
    for n in names:
        exports = zoo.entry(n).exports
        for s in sizes:
            for fe in frontends:
                if ("pt2" if fe == "torch" else "onnx") in exports:
                    out.append(Job(n, s, fe, **kw))
    return out


def run_matrix(jobs: Sequence[Job], *, workers: int = 1, timeout: float | None = None,
               on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``jobs`` (each isolated in one of ``workers`` processes; 0: in this process) and return one
    row per job in order; a job past ``timeout`` seconds (default by size) or whose worker dies is a
    row with ``error``."""
    rows: dict[str, dict[str, Any]] = {}

    import tempfile

    scratch = tempfile.TemporaryDirectory(prefix="irkit-zoo-rows-")
    jobs = [Job(**dict(asdict(j), partial=j.partial or str(Path(scratch.name) / f"{i}.json")))
            for i, j in enumerate(jobs)]

    def finish(job: Job, out: dict[str, Any]) -> None:
        row = out.get("result")
        if not row and job.partial and Path(job.partial).exists():
            try:  # the stages a killed job finished
                row = json.loads(Path(job.partial).read_text())
            except (OSError, json.JSONDecodeError):
                row = None
        row = row or {"key": job.key, "model": job.model, "size": job.size, "frontend": job.frontend,
                      "stages": {}, "targets": {}}
        if out.get("status") != "ok":
            running = row.pop("running", "")
            row["error"] = f"{out.get('status')}: {out.get('error', '')}" + (f" (in stage {running})"
                                                                              if running else "")
        row["seconds"] = round(float(out.get("seconds") or 0.0), 1)
        rows[job.key] = row
        if on_row:
            on_row(row)

    if workers <= 0:
        for j in jobs:
            finish(j, execute(asdict(j)))
    else:
        from irkit.sweep.executors import Job as SweepJob

        by_id = {j.key: j for j in jobs}
        limit = timeout or max(DEFAULT_TIMEOUT.get(j.size, 600.0) for j in jobs) if jobs else 600.0
        pool = _pool(workers)
        try:
            pool.run([SweepJob(j.key, asdict(j)) for j in jobs], limit,
                     lambda sj, out: finish(by_id[sj.id], out))
        finally:
            pool.close()
    scratch.cleanup()
    return [rows[j.key] for j in jobs if j.key in rows]


# --- results --------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    from irkit.conformance.runner import versions as v

    out = v()
    from importlib.metadata import PackageNotFoundError, version

    try:
        out["transformers"] = version("transformers")
    except PackageNotFoundError:
        out["transformers"] = "not installed"
    return out


def merge(path: str | os.PathLike[str] | None, rows: list[dict[str, Any]],
          meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Fold ``rows`` into the JSON document at ``path`` (replacing rows with the same key) and ``meta``
    (the command that made them) into its ``runs``, write it atomically where ``path`` is given, and
    return the document."""
    doc: dict[str, Any] = {"rows": []}
    if path and Path(path).exists():
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"{path}: not a zoo results file ({e}); give a new path or remove it") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
            raise InputError(f"{path}: not a zoo results file (no 'rows' list); give a new path or remove it")
    keep = {r.get("key"): r for r in doc["rows"]}
    for r in rows:
        keep[r["key"]] = r
    from irkit import zoo

    order = {n: i for i, n in enumerate(zoo.names())}
    sizes = {"toy": 0, "full": 1}
    doc["rows"] = sorted(keep.values(), key=lambda r: (order.get(r.get("model"), 1 << 30),
                                                       sizes.get(r.get("size", ""), 2),
                                                       FRONTENDS.index(r["frontend"]) if r.get("frontend")
                                                       in FRONTENDS else 9))
    runs = doc.setdefault("runs", [])
    if meta:
        runs.append(meta)
    doc["runs"] = runs[-20:]
    if path:
        from irkit.fileio import atomic_write

        atomic_write(path, json.dumps(doc, indent=1, default=str))
    return doc


def run_meta(command: str, pipeline: str, seconds: float) -> dict[str, Any]:
    from irkit.conformance.runner import cpu_name

    return {"command": command, "pipeline": pipeline, "seconds": round(seconds, 1),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_name(),
            "python": platform.python_version(), "versions": versions()}


def _stage(row: dict[str, Any], name: str) -> dict[str, Any]:
    return (row.get("stages") or {}).get(name) or {}


def _num(rec: dict[str, Any]) -> str:
    if not rec:
        return "-"
    if not rec.get("ok"):
        return "error"
    return "ok" if rec.get("numerics") else "MISMATCH"


def status_cells(row: dict[str, Any]) -> dict[str, str]:
    """The table's cells for one row."""
    exp = _stage(row, "export")
    imp = _stage(row, "import")
    c: dict[str, str] = {}
    if row.get("error") and not row.get("stages"):
        c["export"] = row["error"][:80]
        return c
    if _stage(row, "build") and not _stage(row, "build").get("ok"):
        c["export"] = "build failed: " + _stage(row, "build").get("error", "")[:60]
        return c
    c["export"] = ("-" if not exp else ("dyn" if exp.get("dynamic") else "static") if exp.get("ok")
                   else "FAIL: " + exp.get("error", "")[:60])
    if imp.get("ok"):
        c["import"] = "ok"
    elif imp.get("missing_ops"):
        c["import"] = "missing: " + ", ".join(sorted(imp["missing_ops"]))
    elif imp:
        c["import"] = "FAIL: " + imp.get("error", "")[:60]
    else:
        c["import"] = "-"
    c["interp"] = _num(_stage(row, "interp"))
    if row.get("fused") is not None:
        f = f"{row['fused']}/{row.get('layers')}"
        if _stage(row, "interp-optimised") and _num(_stage(row, "interp-optimised")) != "ok":
            f += " (numerics " + _num(_stage(row, "interp-optimised")) + ")"
        c["fused"] = f
    elif _stage(row, "optimise"):
        c["fused"] = "pipeline error"
    else:
        c["fused"] = "-"
    for name, tr in (row.get("targets") or {}).items():
        s = tr.get("status", "-")
        c[name] = {"ok": "ok", "compiled": "compiles"}.get(s, s)
    if row.get("error"):
        c["note"] = row["error"][:80]
    return c


def _esc(s: str) -> str:
    return s.replace("|", "/").replace("\n", " ")


def _fmt_s(x: Any) -> str:
    return "-" if x is None else f"{x:.1f}"


def markdown(doc: dict[str, Any]) -> str:
    """ZOO.md: the status table, the timing/memory table, the command that made it, the versions."""
    rows = doc.get("rows", [])
    targets: list[str] = []
    for r in rows:
        for t in r.get("targets") or {}:
            if t not in targets:
                targets.append(t)
    head = ["model", "size", "frontend", "export", "import", "interp vs torch", "fused attn"] + targets + ["note"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        c = status_cells(r)
        cells = [r.get("model", "?"), r.get("size", "?"), r.get("frontend", "?")]
        cells += [c.get(k, "-") for k in ("export", "import", "interp", "fused")]
        cells += [c.get(t, "-") for t in targets] + [c.get("note", "")]
        out.append("| " + " | ".join(_esc(x) for x in cells) + " |")
    timing = ["| model | size | frontend | weights MB | export s | import | optimise | "
              + " | ".join(f"{t} compile" for t in targets) + " | ort session |",
              "|" + "---|" * (8 + len(targets))]
    for r in rows:
        def sp(name: str, r: dict[str, Any] = r) -> str:
            s = _stage(r, name)
            if not s:
                return "-"
            out = f"{_fmt_s(s.get('seconds'))} s"
            if s.get("cpu_s") is not None:
                out += f" ({_fmt_s(s.get('cpu_s'))} cpu)"
            peak, before = s.get("peak_mb"), s.get("rss_before_mb")
            if peak is not None:
                out += f", {peak:.0f} MB" + (f" (+{max(peak - before, 0.0):.0f})" if before is not None else "")
            return out + ("" if s.get("ok") else ", failed")
        cells = [r.get("model", "?"), r.get("size", "?"), r.get("frontend", "?"), _fmt_s(r.get("weight_mb")),
                 _fmt_s(_stage(r, "export").get("seconds")), sp("import"), sp("optimise")]
        cells += [sp(f"compile:{t}") for t in targets] + [sp("ort-session")]
        timing.append("| " + " | ".join(_esc(x) for x in cells) + " |")
    runs = doc.get("runs") or []
    last = runs[-1] if runs else {}
    vers = last.get("versions") or {}
    lines = ["# The zoo matrix", "",
             "Every architecture of `irkit.zoo` (random weights, nothing downloaded) through export, import, "
             "the optimising pipeline and the targets; made by `irkit zoo run` (docs/zoo.md).  "
             "Cells: `interp vs torch` is the interpreter (declared dtypes) against eager torch; `fused attn` "
             "counts `ik.attention` after the pipeline against the attention layers the model runs; a target "
             "cell is `ok` (ran, numbers within tolerance of torch), `compiles` (compile-only target), "
             "`MISMATCH`, or the stage that failed.", ""]
    lines += ["Commands that made this file (latest last):", ""]
    lines += [f"    {r.get('command', '?')}    # {r.get('date', '?')}, {r.get('seconds', '?')} s"
              + (f"; {r['partial']}" if r.get("partial") else "") for r in runs]
    lines += ["", f"Pipeline: `{last.get('pipeline', DEFAULT_PIPELINE)}`.  Machine: {last.get('cpu', '?')}.  "
              "Versions: " + ", ".join(f"{k} {v}" for k, v in sorted(vers.items())) + ".", ""]
    lines += ["## Status", ""] + out + ["", summary(rows), ""]
    lines += ["## Time and peak memory", "",
              "Each stage: wall seconds (CPU seconds of the worker process, where recorded: on a shared "
              "machine the steadier number), then the process's peak resident memory during the stage (MB) "
              "and, in brackets, how far it rose above the resident memory at the stage's start.  "
              "`weights MB` is the bytes of the model's parameters and buffers.", ""] + timing + [""]
    notes = doc.get("notes")
    if notes:
        lines += ["## Notes", "", notes.strip(), ""]
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> str:
    """One line per frontend: how many rows got through each stage."""
    out = []
    for fe in FRONTENDS:
        rs = [r for r in rows if r.get("frontend") == fe]
        if not rs:
            continue
        n = len(rs)
        c = [status_cells(r) for r in rs]
        full = sum(r.get("fused") is not None and r.get("fused") == r.get("layers")
                   and _num(_stage(r, "interp-optimised")) in ("ok", "-") for r in rs)
        out.append(f"- {fe}: exported {sum(x.get('export', '').startswith(('dyn', 'static')) for x in c)}/{n}, "
                   f"imported {sum(x.get('import') == 'ok' for x in c)}/{n}, "
                   f"interpreter matches torch {sum(x.get('interp') == 'ok' for x in c)}/{n}, "
                   f"every attention fused (numbers kept) {full}/{n}")
    return "\n".join(out)


def write_markdown(path: str | os.PathLike[str], doc: dict[str, Any]) -> None:
    from irkit.fileio import atomic_write

    atomic_write(path, markdown(doc))


def read_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such results file; make one with `irkit zoo run --json {path}`") from None
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not a zoo results file ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise InputError(f"{path}: not a zoo results file (no 'rows' list)")
    return doc


def rotating_sample(day: int, n: int = 2, names: Sequence[str] | None = None) -> list[str]:
    """``n`` architectures chosen by ``day`` (e.g. the day of the year): consecutive days walk the
    zoo ``n`` at a time, so every architecture comes round every ``len(zoo) / n`` days."""
    from irkit import zoo

    all_names = list(names) if names is not None else zoo.names()
    k = len(all_names)
    return [all_names[(day * n + i) % k] for i in range(min(n, k))]


__all__ = [
    "COMPILE_ONLY",
    "DEFAULT_PIPELINE",
    "FRONTENDS",
    "Job",
    "default_targets",
    "execute",
    "markdown",
    "merge",
    "peak_mb",
    "plan",
    "read_results",
    "reset_peak",
    "rotating_sample",
    "rss_mb",
    "run_job",
    "run_matrix",
    "run_meta",
    "status_cells",
    "summary",
    "versions",
    "weight_bytes",
    "write_markdown",
]
