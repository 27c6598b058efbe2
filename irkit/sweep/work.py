"""What a sweep worker does: build a model, run one measurement; and the content keys.

Everything here is a plain function of plain data (strings, dicts), so the same
call runs in-process, in a spawned local worker or as a Ray task.  A build
imports a model into irkit IR text (resources inlined, so the text is the whole
model and its hash identifies it); a measurement parses that text, runs the
pipeline and measures on the target.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
import time
import traceback
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

VERSIONED = {"irkit": "irkit", "tvm": "apache-tvm", "jax": "jax", "jaxlib": "jaxlib", "onnxruntime": "onnxruntime",
             "torch": "torch", "numpy": "numpy"}


def digest(obj: Any) -> str:
    """sha256 of ``obj`` as canonical JSON (or of a str/bytes as is)."""
    if isinstance(obj, bytes):
        data = obj
    elif isinstance(obj, str):
        data = obj.encode()
    else:
        data = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(data).hexdigest()


@lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    """Installed versions of irkit and the compilers whose output a result depends on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for k, dist in VERSIONED.items():
        try:
            out[k] = version(dist)
        except PackageNotFoundError:
            out[k] = "absent"
    # The checkout's commit is part of irkit's version: a sweep after a code change re-measures.
    out["irkit-commit"] = commit_id()
    return out


@lru_cache(maxsize=1)
def machine() -> dict[str, Any]:
    """The host as results depend on it: CPU model, logical cores, architecture, OS."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count() or 1, "arch": platform.machine(), "os": platform.system()}


def machine_resource(desc: Mapping[str, Any] | None = None) -> str:
    """The Ray custom resource that names a host CPU model (``cpu-intel-xeon-8481c``): a node that
    offers 1 of it takes one timing task at a time."""
    d = desc or machine()
    words = re.sub(r"\((r|tm)\)|cpu|@.*$|processor", " ", str(d["cpu"]).lower())
    slug = "-".join(w for w in re.split(r"[^a-z0-9.]+", words) if w)
    return f"cpu-{slug or 'unknown'}"


@lru_cache(maxsize=1)
def commit_id() -> str:
    """The git commit of the irkit checkout (read from .git, no git process), else irkit's version."""
    import irkit

    here = Path(irkit.__file__).resolve().parent.parent
    git = here / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: PATH"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref:"):
            ref = head.split(":", 1)[1].strip()
            f = git / ref
            if f.is_file():
                return f.read_text().strip()
            common = git / "commondir"
            base = (git / common.read_text().strip()).resolve() if common.is_file() else git
            if (base / ref).is_file():
                return (base / ref).read_text().strip()
            for line in (base / "packed-refs").read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0]
        elif re.fullmatch(r"[0-9a-f]{40}", head):
            return head
    except OSError:
        pass
    return f"irkit-{irkit.__version__}"


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


# ---------------------------------------------------------------------------
# keys


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    p = Path(path)
    for f in (p, p.with_suffix(".safetensors")):
        if f.is_file():
            h.update(f.read_bytes())
    return h.hexdigest()


def build_key(source: str, frontend: str, options: Mapping[str, Any] | None = None) -> str:
    """Key of a build: the source's content (the file, or a factory's .py file; a zoo model's
    name), the frontend, the build's options (a decode export's batch and cache length) and the
    versions that import it."""
    if source.startswith("zoo:"):
        content = source
    elif ":" in source and source.rsplit(":", 1)[0].endswith(".py"):
        f, fac = source.rsplit(":", 1)
        content = _file_digest(f) + ":" + fac
    else:
        content = _file_digest(source)
    key: dict[str, Any] = {"source": content, "frontend": frontend, "versions": versions()}
    if options:
        key["options"] = dict(options)
    return digest(key)


def task_key(ir_hash: str, pipeline: str, target: str, options: Mapping[str, Any], bindings: Mapping[str, int],
             measurement: str, params: Mapping[str, Any], vers: Mapping[str, str], mach: Mapping[str, Any]) -> str:
    """The content key of one result."""
    return digest({"ir": ir_hash, "pipeline": pipeline, "target": target, "options": dict(options),
                   "bindings": dict(bindings), "measurement": measurement, "params": dict(params),
                   "versions": dict(vers), "machine": dict(mach)})


def measures_hardware(measurement: str) -> bool:
    """Whether a measurement's result depends on the machine it runs on (estimates do not)."""
    return measurement != "estimate"


def is_timing(measurement: str) -> bool:
    """Timing tasks run one at a time per machine."""
    return measurement in ("bench", "generate")


# ---------------------------------------------------------------------------
# the work


DECODE = "decode"
"""The build "frontend" of a ``generate`` task's zoo or factory model: its decode function."""


def _decode_module(source: str, options: Mapping[str, Any]) -> Any:
    """The decode function (KV cache as aliased state) of a zoo decoder LM (``zoo:NAME[:toy|full]``) or
    of ``FILE.py:FACTORY`` returning an :class:`irkit.zoo.decode.DecodeModel`, a decode Module or a
    transformers decoder LM."""
    from irkit.errors import InputError
    from irkit.ir import Module
    from irkit.zoo.decode import DecodeModel

    batch = int(options.get("batch", 1))
    cache = int(options.get("max_cache_len", 0)) or None
    if source.startswith("zoo:"):
        from irkit.zoo.build import as_size
        from irkit.zoo.decode import decode_model

        _, name, *rest = source.split(":")
        dm = decode_model(name, as_size(rest[0]) if rest else "toy", batch=batch, max_cache_len=cache,
                          seed=int(options.get("seed", 0)))
        return dm.decode
    from irkit.frontends.torch_export import load_factory_spec

    result, _ = load_factory_spec(source)
    if isinstance(result, tuple) and result:
        result = result[0]
    if isinstance(result, DecodeModel):
        return result.decode
    if isinstance(result, Module):
        return result
    if hasattr(result, "generation_config") and hasattr(result, "config"):
        from irkit.zoo.decode import export_static, import_static

        model = result.eval()
        model.config.use_cache = True
        cfg = model.config
        limit = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 1024
        return import_static(export_static(model, batch, cache or min(limit, 1024), None), source)
    raise InputError(f"{source}: the factory returned a {type(result).__name__}; a generate task needs a "
                     "DecodeModel, a decode Module or a transformers decoder LM")


def build(source: str, frontend: str, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Import ``source`` with ``frontend`` into irkit IR text (resources inline); frontend
    :data:`DECODE` exports a decoder's decode function (``options``: batch, max_cache_len, seed)."""
    from irkit.ir.verify import verify
    from irkit.text.io import module_text

    t0 = time.perf_counter()
    if frontend == DECODE:
        m = _decode_module(source, options or {})
    elif source.startswith("zoo:"):
        from irkit.frontends.torch_export import import_torch_factory
        from irkit.zoo import factory
        from irkit.zoo.build import as_size

        _, name, *rest = source.split(":")
        module, inputs, dyn = factory(name, as_size(rest[0]) if rest else "toy")
        m = import_torch_factory(module, inputs, dyn, name="main")
    elif (":" in source and source.rsplit(":", 1)[0].endswith(".py")) or \
            Path(source).suffix.lower() in (".onnx", ".pt2", ".hlo"):
        from irkit.frontends import import_source

        m = import_source(source, None if frontend == "auto" else frontend)
    else:
        from irkit.text.io import read_module

        m = read_module(source)
    verify(m)
    text, _ = module_text(m, inline_resources=True)
    return {"ir_text": text, "ir_hash": digest(text), "seconds": time.perf_counter() - t0}


def _bindings_for(fn: Any, wanted: Mapping[str, int]) -> dict[str, int]:
    from irkit.interp import default_bindings

    syms = set(default_bindings(fn))
    return default_bindings(fn, {k: v for k, v in wanted.items() if k in syms})


def effective_bindings(ir_text: str, wanted: Mapping[str, int]) -> dict[str, int]:
    """The dim values a task really uses: the wanted ones the function has, its defaults for the rest."""
    from irkit.text.parser import parse_module

    return _bindings_for(parse_module(ir_text, "<sweep>").entry, wanted)


def _spec_for(target: str) -> str:
    from irkit.targets.hwspec import list_specs

    if target in list_specs():
        return target
    from irkit.targets.registry import get_target

    spec = get_target(target).spec
    if not spec:
        raise ValueError(f"target '{target}' has no hardware description to estimate with")
    return spec


class Unavailable(Exception):
    """The target cannot do this measurement on this machine; not a failure, not retried."""


def set_tiles(module: Any, tile: Any) -> int:
    """Set ``tile`` = (tile_m, tile_n, tile_k) on every float ``ik.matmul`` / ``ik.contract`` of
    ``module`` (in place), as ``tile-matmul`` would; returns how many.  The ``tvm-llvm`` kernel
    clamps a tile to its problem; targets without a tiled matmul ignore the attribute."""
    n = 0
    t = tuple(int(v) for v in tile)
    for f in module.functions:
        for op in f.walk():
            if op.name in ("ik.matmul", "ik.contract") and op.results and op.results[0].type.dtype.is_float:
                attrs = dict(op.attrs)
                attrs["tile"] = t
                attrs.pop("dataflow", None)
                op.attrs = attrs
                n += 1
    return n


def measure(ir_text: str, pipeline: str, target: str, measurement: str, bindings: Mapping[str, int],
            params: Mapping[str, Any], options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Run one measurement; returns its numbers (raises on failure, :class:`Unavailable` when
    the target cannot run here).  ``options``: ``tile`` = [m, n, k] set on every matmul after the
    pipeline (:func:`set_tiles`)."""
    from irkit.passmanager import run_pipeline
    from irkit.text.parser import parse_module

    original = parse_module(ir_text, "<sweep>")
    m = original.clone()
    if pipeline:
        run_pipeline(m, pipeline)
    tiled = set_tiles(m, options["tile"]) if options and options.get("tile") else None
    if measurement == "generate":
        res = _generate(m, target, params)
        if tiled is not None:
            res["matmuls_tiled"] = tiled
        return res
    b = _bindings_for(m.entry, bindings)
    if measurement == "estimate":
        from irkit.targets.estimate import estimate, peak_for

        spec = _spec_for(target)
        est = estimate(m, spec, b)
        tot = est.total(peak_for(m, spec))
        return {"spec": spec, "seconds": tot["seconds"], "flops": tot["flops"], "bytes": tot["bytes"],
                "utilization": tot["utilization"], "ops": len(est.ops)}

    from irkit.interp import random_inputs, run
    from irkit.targets.registry import get_target

    t = get_target(target)
    av = t.availability()
    if not av.can_run:
        raise Unavailable(f"target '{target}' cannot run here: {av.reason or av.label}")
    xs = random_inputs(original.entry, int(params.get("seed", 0)), _bindings_for(original.entry, bindings))
    art = t.lower(m, b)
    if measurement == "check":
        from irkit.check import compare_all, module_tolerance

        oracle = run(original, xs, float64=True)
        rep = compare_all(t.run(art, xs), oracle, module_tolerance(m))
        out = {"ok": rep.ok, "max_abs": rep.max_abs, "max_rel": rep.max_rel, "compile_seconds": art.compile_seconds,
               "outputs": len(rep.comparisons)}
        if tiled is not None:
            out["matmuls_tiled"] = tiled
        return out
    if measurement == "bench":
        from irkit.bench import measure as time_it

        tm = time_it(lambda: t.run(art, xs), warmup=int(params.get("warmup", 2)),
                     repeats=int(params.get("repeats", 10)), max_seconds=float(params.get("max_seconds", 5.0)))
        out = {"median": tm.median, "p90": tm.percentile(90), "spread": tm.spread, "samples": len(tm.samples),
               "compile_seconds": art.compile_seconds,
               # a pool worker's share of the cores (executors.thread_env); unset: the libraries' defaults
               "threads": int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or (os.cpu_count() or 1)}
        if tiled is not None:
            out["matmuls_tiled"] = tiled
        return out
    raise ValueError(f"unknown measurement '{measurement}'")


def _generate(m: Any, target: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Greedy generation with the KV cache, as ``irkit bench --generate`` measures it: lower the
    decode function (and, when its token count is symbolic, the same function as prefill for
    ``prompt_len`` tokens), generate ``warmup_tokens`` once, then time ``new_tokens`` after a random
    prompt.  Decode tokens/s is batch / the median step (robust on a busy machine)."""
    import numpy as np

    from irkit.generate import compile_decoder, decode_model_of, generate
    from irkit.targets.registry import get_target

    tg = get_target(target)
    av = tg.availability()
    if not av.can_run:
        raise Unavailable(f"target '{target}' cannot run here: {av.reason or av.label}")
    dm = decode_model_of(m, "sweep", "sweep model")
    batch = dm.batch
    plen, new = int(params.get("prompt_len", 8)), int(params.get("new_tokens", 16))
    prompt = np.random.default_rng(int(params.get("seed", 0))).integers(0, max(dm.vocab, 2), size=(batch, plen),
                                                                         dtype=np.int64)
    c = compile_decoder(dm, tg, plen)
    warm = int(params.get("warmup_tokens", 3))
    if warm:
        generate(dm, tg, prompt, min(warm, new), compiled=c)  # first-call allocations
    r = generate(dm, tg, prompt, new, compiled=c)
    steps = sorted(r.step_seconds)
    p50 = float(np.percentile(steps, 50)) if steps else float("nan")
    return {"ttft_seconds": r.ttft_seconds, "decode_tokens_per_second": batch / p50 if p50 > 0 else float("nan"),
            "prefill_tokens_per_second": batch * plen / r.ttft_seconds if r.ttft_seconds > 0 else float("nan"),
            "step_p50_seconds": p50, "step_p99_seconds": float(np.percentile(steps, 99)) if steps else float("nan"),
            "compile_seconds": c.compile_seconds, "batch": batch, "prompt_len": plen, "new_tokens": new,
            "prefill": str(r.info.get("prefill", "")),
            "tokens": [int(t) for t in r.tokens[0]],  # row 0, to compare targets (greedy: the same tokens)
            "kv_cache_bytes": dm.cache_bytes()}


def warm_modules(targets: Iterable[str], models: Iterable[str]) -> list[str]:
    """The libraries tasks on these targets and models will import (for :meth:`Executor.warm`):
    each is seconds to import (TVM about 4 s here, JAX and torch 1.5 s each)."""
    targets, models = set(targets), set(models)
    out = ["irkit.targets.registry"]
    if any(m.endswith((".pt2", ".py")) or ".py:" in m or m.startswith("zoo:") for m in models):
        out.append("torch")
    if any(t.startswith("tvm-") for t in targets):
        out += ["tvm", "tvm.relax", "irkit.targets.tvm"]
    if any(t.startswith("xla-") for t in targets) or any(".py:" in m for m in models):
        out += ["jax", "irkit.targets.xla"]
    if "ort" in targets or any(m.endswith(".onnx") for m in models):
        out += ["onnx", "onnxruntime", "irkit.targets.ort"]
    return out


def execute(job: Mapping[str, Any]) -> dict[str, Any]:
    """Run one job (``{"kind": "build"|"measure", ...}``) and never raise: the outcome says
    ``status`` ok / failed / unavailable, with ``result`` or ``error`` and the seconds taken."""
    t0 = time.perf_counter()
    try:
        if job["kind"] == "build":
            res = build(job["source"], job["frontend"], job.get("options"))
        else:
            res = measure(job["ir_text"], job["pipeline"], job["target"], job["measurement"], job["bindings"],
                          job["params"], job.get("options"))
        status, err = "ok", ""
    except Unavailable as e:
        res, status, err = {}, "unavailable", str(e)
    except Exception as e:  # noqa: BLE001 - a task's failure is its result; the sweep goes on
        msg = " ".join(str(e).split())[:500] or type(e).__name__
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" (at {Path(where.filename).name}:{where.lineno})" if where else ""
        res, status, err = {}, "failed", f"{type(e).__name__}: {msg}{at}"
    return {"status": status, "result": res, "error": err, "seconds": time.perf_counter() - t0,
            "worker": worker_name()}


__all__ = [
    "DECODE",
    "Unavailable",
    "build",
    "build_key",
    "commit_id",
    "digest",
    "effective_bindings",
    "execute",
    "is_timing",
    "machine",
    "machine_resource",
    "measure",
    "measures_hardware",
    "set_tiles",
    "task_key",
    "versions",
]
