"""irkit against its peers on the example Transformer models, single-threaded, in one run.

For each example model (GPT-2, Llama, T5, ViT families; ``tiny`` and ``small``
from ``examples/models/registry.py``, eager-attention spelling), at batch 1 and
the model's own sequence length (row 0 of the factory's example inputs), this
script builds, in one process and on the same inputs:

- ``torch-eager``: the torch module under ``torch.inference_mode``;
- ``torch-compile``: ``torch.compile(module)`` (default inductor); the first call
  is the compile time;
- ``ort``: the module exported by the torch.onnx dynamo exporter (static shapes,
  batch 1) and run by onnxruntime with ``ORT_ENABLE_ALL``;
- ``ort-transformers``: that ONNX file through
  ``onnxruntime.transformers.optimizer.optimize_model`` (``model_type`` gpt2 /
  gpt2 for Llama, as onnxruntime's own Llama scripts do / t5 / vit), then
  onnxruntime; the number of attention nodes it fused is reported;
- ``tvm``: ``torch.export`` -> ``tvm.relax.frontend.torch.from_exported_program``
  -> ``tvm.compile(mod, target={"kind": "llvm"})`` (TVM's default pipeline) ->
  relax VM, under a time limit;
- ``jax-jit``: ``jax.jit`` of the model's JAX twin (same weights; the twin closes
  over them, so XLA sees them as constants);
- ``irkit/<target>``: ``import_torch_factory`` (the factory's own example inputs
  and dynamic dims), the optimising pipeline, then ``lower`` at batch 1 on every
  runnable irkit target (``ort``, ``xla-cpu``, ``tvm-llvm`` when it is
  registered); each result is checked against the float64 interpreter run on the
  module as imported (before the pipeline).

Every engine runs on one thread (``torch.set_num_threads(1)``, ORT
``intra_op_num_threads=1``, XLA ``--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1`` and ``jax_cpu_enable_async_dispatch=False`` so
XLA runs in the calling thread like the others, ``TVM_NUM_THREADS=1``).  Timing is
interleaved: after warm-up, each round runs every engine once (in a rotating
order), so load on the machine hits them alike; medians and spreads come from
:class:`irkit.bench.Timing` (spread = inter-quartile range / median), and the
minimum is shown too (on a loaded machine it is the least disturbed figure).
Ratios are against torch eager and against the best non-irkit peer, both from
the same run.

torch.compile uses torch's default on-disk inductor cache, so a second run on
the same machine reports a warm compile; the table says which it was.
``--cold-compile`` gives it a fresh cache for cold compile times.

Writes markdown to stdout and to ``benchmarks/results/peers.md`` (the command
that produced it at the top).

Run: python benchmarks/peers.py [--quick] [--models gpt2,llama_small,...] [--repeats 20]
     [--tile] [--cold-compile] [--skip tvm,torch-compile] [--tvm-timeout 240] [--lower-timeout 240]
     [--out FILE]
"""

from __future__ import annotations

import os

# Threading must be fixed before torch, jax and tvm load their runtimes.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("TVM_NUM_THREADS", "1")
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if "--cold-compile" in __import__("sys").argv:
    # A fresh inductor cache: torch.compile's time is a cold compile, not a cache hit.
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = __import__("tempfile").mkdtemp(prefix="irkit-peers-inductor-")
    __import__("atexit").register(__import__("shutil").rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], True)
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import logging  # noqa: E402
import platform  # noqa: E402
import shlex  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PIPELINE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"
TILE = "tile-matmul{target=host-cpu}"
FAMILIES = ("gpt2", "llama", "t5", "vit")
ORT_MODEL_TYPE = {"gpt2": "gpt2", "llama": "gpt2", "t5": "t5", "vit": "vit", "bert": "bert"}
PEER_ORDER = ("torch-eager", "torch-compile", "ort", "ort-transformers", "tvm", "jax-jit")


# ---------------------------------------------------------------------------------------------
# helpers


class TimeLimit(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise :class:`TimeLimit` in the main thread after ``seconds`` (a soft limit: it fires
    when control returns to Python, e.g. between compiler passes)."""
    if not seconds:
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise TimeLimit(f"exceeded the {seconds:.0f} s time limit")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def quiet():
    """Silence chatty exporters and optimisers (stdout, warnings, logging)."""
    buf = io.StringIO()
    names = ["torch.onnx", "torch.export", "torch._dynamo", "torch._inductor", "torch.fx", "onnxscript",
             "onnxruntime", "onnx_ir", "tvm"]
    loggers = [logging.getLogger(n) for n in names]
    old = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        with warnings.catch_warnings(), contextlib.redirect_stdout(buf):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, lv in zip(loggers, old):
            lg.setLevel(lv)


def first_line(e: BaseException) -> str:
    msg = f"{type(e).__name__}: {e}".strip()
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
    text = lines[0] if lines else type(e).__name__
    # Keep the table readable; the full traceback goes to stderr.
    text = text.replace("|", "\\|")
    return text[:300] + ("..." if len(text) > 300 else "")


def flat_outputs(out: Any) -> list[np.ndarray]:
    """Model outputs (tensor, tuple, list, dict, TVM array, JAX array) as NumPy arrays."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out.detach().cpu().numpy()]
    if isinstance(out, dict):
        return [a for v in out.values() for a in flat_outputs(v)]
    if isinstance(out, (tuple, list)):
        return [a for v in out for a in flat_outputs(v)]
    if isinstance(out, np.ndarray):
        return [out]
    if hasattr(out, "numpy"):  # TVM tensor
        return [np.asarray(out.numpy())]
    if hasattr(out, "__array__"):  # JAX array
        return [np.asarray(out)]
    try:
        items = list(out)  # tvm_ffi Array
    except TypeError:
        return [np.asarray(out)]
    if items and not isinstance(out, np.ndarray):
        return [a for v in items for a in flat_outputs(v)]
    return [np.asarray(out)]


def max_abs_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    if not a or not b:
        return float("nan")
    x, y = np.asarray(a[0], dtype=np.float64), np.asarray(b[0], dtype=np.float64)
    if x.shape != y.shape:
        return float("inf")
    return float(np.max(np.abs(x - y))) if x.size else 0.0


@dataclass
class Engine:
    """One way of running one model."""

    name: str
    kind: str  # "peer" or "irkit"
    fn: Callable[[], Any] | None = None
    compile_s: float | None = None
    compile_note: str = ""
    error: str | None = None
    check: str = ""
    diff: float | None = None
    samples: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def timing(self) -> Any:
        from irkit.bench import Timing

        return Timing(self.samples) if self.samples else None


# ---------------------------------------------------------------------------------------------
# engines


def build_torch_eager(model: Any, inputs: tuple[Any, ...]) -> Engine:
    import torch

    def fn() -> Any:
        with torch.inference_mode():
            return model(*inputs)

    e = Engine("torch-eager", "peer", fn, compile_s=0.0)
    return e


def build_torch_compile(model: Any, inputs: tuple[Any, ...], limit: float) -> Engine:
    import torch

    e = Engine("torch-compile", "peer")
    try:
        import torch._dynamo

        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        before = dict(counters["inductor"])
        cm = torch.compile(model)
        t0 = time.perf_counter()
        with quiet(), time_limit(limit), torch.inference_mode():
            cm(*inputs)
        e.compile_s = time.perf_counter() - t0
        after = counters["inductor"]
        hits = after.get("fxgraph_cache_hit", 0) - before.get("fxgraph_cache_hit", 0)
        misses = after.get("fxgraph_cache_miss", 0) - before.get("fxgraph_cache_miss", 0)
        cache = ("cold: inductor FX-graph cache missed" if misses and not hits else
                 "warm: inductor FX-graph cache hit (code generated by an earlier run)" if hits and not misses else
                 f"FX-graph cache {hits} hit(s), {misses} miss(es)")
        graphs = counters["stats"].get("unique_graphs", 0)
        breaks = sum(counters["graph_break"].values())
        e.compile_note = (f"first call (dynamo trace + inductor codegen + C++ build); {cache}; "
                          f"{graphs} graph(s), {breaks} graph break(s)")

        def fn() -> Any:
            with torch.inference_mode():
                return cm(*inputs)

        e.fn = fn
    except BaseException as ex:  # noqa: BLE001 - any compiler failure is a table entry
        if isinstance(ex, KeyboardInterrupt):
            raise
        traceback.print_exc()
        e.error = first_line(ex)
    return e


def _ort_session(path_or_bytes: Any) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    return ort.InferenceSession(path_or_bytes, so, providers=["CPUExecutionProvider"])


def _ort_fn(sess: Any, feeds_np: list[np.ndarray]) -> Callable[[], Any]:
    names = [i.name for i in sess.get_inputs()]
    feeds = dict(zip(names, feeds_np))

    def fn() -> Any:
        return sess.run(None, feeds)

    return fn


def build_ort(model: Any, inputs: tuple[Any, ...], np_inputs: list[np.ndarray], tmp: Path,
              name: str) -> tuple[Engine, Path | None]:
    from irkit.testing.onnx_export import export_onnx

    e = Engine("ort", "peer")
    path = None
    try:
        t0 = time.perf_counter()
        with quiet():
            ex = export_onnx(model, inputs, None, tmp / f"{name}.dynamo.onnx", exporter="dynamo")
        t_export = time.perf_counter() - t0
        path = ex.path
        t0 = time.perf_counter()
        sess = _ort_session(str(path))
        t_sess = time.perf_counter() - t0
        e.compile_s = t_export + t_sess
        e.compile_note = f"dynamo export {t_export:.1f} s (opset {ex.opset}) + session {t_sess:.2f} s"
        e.fn = _ort_fn(sess, np_inputs)
    except Exception as ex:  # noqa: BLE001
        traceback.print_exc()
        e.error = first_line(ex)
    return e, path


def build_ort_transformers(path: Path | None, family: str, cfg: Any, np_inputs: list[np.ndarray],
                           tmp: Path, name: str) -> Engine:
    e = Engine("ort-transformers", "peer")
    if path is None:
        e.error = "needs the dynamo ONNX export, which failed"
        return e
    try:
        from onnxruntime.transformers.optimizer import optimize_model

        heads = getattr(cfg, "heads", None) or getattr(cfg, "num_heads", 0)
        hidden = getattr(cfg, "hidden", None) or getattr(cfg, "d_model", 0)
        mtype = ORT_MODEL_TYPE[family]
        t0 = time.perf_counter()
        with quiet():
            om = optimize_model(str(path), model_type=mtype, num_heads=int(heads), hidden_size=int(hidden))
            stats = om.get_fused_operator_statistics()
            out = tmp / f"{name}.ort-opt.onnx"
            om.save_model_to_file(str(out))
        t_opt = time.perf_counter() - t0
        op_types: dict[str, int] = {}
        for n in om.model.graph.node:
            op_types[n.op_type] = op_types.get(n.op_type, 0) + 1
        attn = {k: v for k, v in op_types.items() if "Attention" in k}
        fused = {k: v for k, v in stats.items() if v}
        t0 = time.perf_counter()
        sess = _ort_session(str(out))
        t_sess = time.perf_counter() - t0
        e.compile_s = t_opt + t_sess
        n_attn = sum(attn.values())
        e.compile_note = (f"model_type={mtype}; optimize_model {t_opt:.1f} s + session {t_sess:.2f} s "
                          "(after the dynamo export above)")
        e.check = f"{n_attn} attention node(s) fused" + (f" ({', '.join(f'{k}×{v}' for k, v in attn.items())})"
                                                        if attn else "")
        others = {k: v for k, v in fused.items() if "Attention" not in k}
        if others:
            e.notes.append("other fusions: " + ", ".join(f"{k}×{v}" for k, v in sorted(others.items())))
        e.fn = _ort_fn(sess, np_inputs)
    except Exception as ex:  # noqa: BLE001
        traceback.print_exc()
        e.error = first_line(ex)
    return e


def build_tvm(model: Any, inputs: tuple[Any, ...], np_inputs: list[np.ndarray], limit: float) -> Engine:
    e = Engine("tvm", "peer")
    try:
        import torch

        t0 = time.perf_counter()
        with time_limit(limit):
            with quiet():
                ep = torch.export.export(model, inputs)
            t_export = time.perf_counter() - t0
            import tvm
            from tvm import relax
            from tvm.relax.frontend.torch import from_exported_program

            t1 = time.perf_counter()
            with quiet():
                mod = from_exported_program(ep)
            t_import = time.perf_counter() - t1
            t1 = time.perf_counter()
            target_note = ""
            try:
                ex = tvm.compile(mod, target={"kind": "llvm"})
            except TypeError as te:
                # TVM 0.27's relax.build reads target.keys without converting a dict target.
                target_note = f"; target dict rejected ({first_line(te)}), passed tvm.target.Target(dict)"
                ex = tvm.compile(mod, target=tvm.target.Target({"kind": "llvm"}))
            t_compile = time.perf_counter() - t1
        vm = relax.VirtualMachine(ex, tvm.cpu())
        to_dev = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
        args = [to_dev(x) for x in np_inputs]
        main = vm["main"]
        e.compile_s = t_export + t_import + t_compile
        e.compile_note = (f"torch.export {t_export:.1f} s + from_exported_program {t_import:.1f} s "
                          f"+ tvm.compile {t_compile:.1f} s{target_note}")

        def fn() -> Any:
            return main(*args)

        e.fn = fn
    except BaseException as ex:  # noqa: BLE001 - any compiler failure is a table entry
        if isinstance(ex, KeyboardInterrupt):
            raise
        traceback.print_exc()
        e.error = first_line(ex)
    return e


def jax_inline_dispatch() -> None:
    """Run XLA:CPU computations in the calling thread, as torch, ORT and TVM do: with JAX's
    default async dispatch every call hands off to another thread, which on a loaded machine
    waits for a scheduler slot and so is charged the machine's load, not XLA's work."""
    import jax

    try:
        jax.config.update("jax_cpu_enable_async_dispatch", False)
    except (AttributeError, KeyError, ValueError):
        pass


def build_jax(entry: Any) -> Engine:
    e = Engine("jax-jit", "peer")
    try:
        import jax

        jax_fn, args = entry.jax_factory()
        args = tuple(a[:1] for a in args)
        t0 = time.perf_counter()
        compiled = jax.jit(jax_fn).lower(*args).compile()
        e.compile_s = time.perf_counter() - t0
        e.compile_note = "jit(...).lower(...).compile() (weights are traced constants)"

        def fn() -> Any:
            return jax.block_until_ready(compiled(*args))

        e.fn = fn
    except Exception as ex:  # noqa: BLE001
        traceback.print_exc()
        e.error = first_line(ex)
    return e


def irkit_targets() -> list[str]:
    from irkit.targets.registry import TARGETS, load_targets

    load_targets()
    names = ["ort", "xla-cpu"]
    if "tvm-llvm" in TARGETS:  # registered only once its module exists
        from irkit.targets.registry import get_target

        try:
            if get_target("tvm-llvm").availability().can_run:
                names.append("tvm-llvm")
        except Exception as ex:  # noqa: BLE001
            print(f"tvm-llvm is registered but unusable here: {first_line(ex)}", file=sys.stderr)
    return [n for n in names if n in TARGETS]


def _single_thread(t: Any) -> None:
    """Ask an irkit target for one thread where it has a knob."""
    for attr in ("threads", "num_threads"):
        if hasattr(t, attr):
            setattr(t, attr, 1)


def build_irkit(model: Any, full_inputs: tuple[Any, ...], dyn: Any, np_inputs: list[np.ndarray],
                pipelines: list[tuple[str, str]], targets: list[str],
                lower_limit: float | None = None) -> tuple[list[Engine], dict[str, Any]]:
    """Import once, run each pipeline, lower on each target; return engines and import facts."""
    from irkit.check import compare_all, module_tolerance
    from irkit.frontends.torch_export import import_torch_factory
    from irkit.interp import bind_symbols
    from irkit.interp import run as interp_run
    from irkit.passmanager import PassManager
    from irkit.targets.registry import get_target

    facts: dict[str, Any] = {}
    engines: list[Engine] = []
    t0 = time.perf_counter()
    try:
        with quiet():
            try:
                mod = import_torch_factory(model, full_inputs, dyn)
                facts["import_mode"] = "factory inputs, dynamic dims"
            except Exception as ex:  # noqa: BLE001 - fall back to a static batch-1 import
                facts["import_note"] = f"dynamic import failed ({first_line(ex)}); imported static"
                mod = import_torch_factory(model, tuple(t[:1] for t in full_inputs), None)
                facts["import_mode"] = "static batch 1"
    except Exception as ex:  # noqa: BLE001
        traceback.print_exc()
        err = first_line(ex)
        return [Engine(f"irkit/{t}", "irkit", error=f"import: {err}") for t in targets], facts
    facts["import_s"] = time.perf_counter() - t0
    facts["ops_imported"] = sum(1 for _ in mod.entry.walk())
    oracle = mod
    try:
        bindings = bind_symbols(mod.entry, np_inputs)
    except Exception as ex:  # noqa: BLE001
        return [Engine(f"irkit/{t}", "irkit", error=f"bind: {first_line(ex)}") for t in targets], facts
    expected: list[np.ndarray] | None = None
    for label, pipe in pipelines:
        m = oracle.clone()
        pm = PassManager(pipe, timing=True)
        t0 = time.perf_counter()
        try:
            pm.run(m)
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            engines += [Engine(f"irkit{label}/{t}", "irkit", error=f"pipeline: {first_line(ex)}") for t in targets]
            continue
        facts[f"pipeline{label}_s"] = time.perf_counter() - t0
        facts[f"ops{label}"] = sum(1 for _ in m.entry.walk())
        facts[f"attention{label}"] = sum(1 for op in m.entry.walk() if op.name == "ik.attention")
        for tname in targets:
            e = Engine(f"irkit{label}/{tname}", "irkit")
            try:
                t = get_target(tname)
                _single_thread(t)
                t1 = time.perf_counter()
                with quiet(), time_limit(lower_limit):
                    art = t.lower(m, bindings)
                e.compile_s = time.perf_counter() - t1
                extra = art.info.get("attention")
                e.compile_note = f"lower {e.compile_s:.1f} s (target-reported {art.compile_seconds:.1f} s)" + (
                    f"; attention={extra}" if extra else "")
                outs = t.run(art, np_inputs)
                if expected is None:
                    # The float64 interpreter on the module as imported (before the pipeline),
                    # run once and shared by every pipeline and target: same check as
                    # irkit.check.check_against_oracle(m, outs, inputs, oracle=imported).
                    t2 = time.perf_counter()
                    expected = interp_run(oracle, list(np_inputs), float64=True)
                    facts["oracle_s"] = time.perf_counter() - t2
                rep = compare_all(outs, expected, module_tolerance(m))
                e.check = (f"oracle {'ok' if rep.ok else 'MISMATCH'} (max_abs {rep.max_abs:.1e}, "
                           f"max_rel {rep.max_rel:.1e})")
                e.notes.append(f"outputs {len(outs)}")

                def fn(t: Any = t, art: Any = art) -> Any:
                    return t.run(art, np_inputs)

                e.fn = fn
            except BaseException as ex:  # noqa: BLE001 - TimeLimit included
                if isinstance(ex, KeyboardInterrupt):
                    raise
                traceback.print_exc()
                e.error = first_line(ex)
            engines.append(e)
    return engines, facts


# ---------------------------------------------------------------------------------------------
# timing


def time_interleaved(engines: list[Engine], warmup: int, repeats: int, max_seconds: float,
                     min_repeats: int = 5) -> None:
    """Warm up every engine, then rounds of one call each in a rotating order.

    An engine whose call takes longer than ``max_seconds / (4 * min_repeats)`` (an untuned
    compiler at seconds per call) is "slow": one warm-up, and only ``min_repeats`` rounds,
    so it cannot eat the time budget of the others; ``max_seconds`` counts only the time of
    the other engines, which keep going until ``repeats`` rounds or the budget.
    """
    live = [e for e in engines if e.fn is not None and e.error is None]
    slow_call = max_seconds / (4 * min_repeats)
    slow: set[str] = set()
    for e in list(live):
        try:
            for i in range(warmup):
                t0 = time.perf_counter()
                e.fn()  # type: ignore[misc]
                if time.perf_counter() - t0 > slow_call:
                    slow.add(e.name)
                    break
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            e.error = f"run: {first_line(ex)}"
            live.remove(e)
    fast_time = 0.0
    for r in range(repeats):
        k = r % max(len(live), 1)
        for e in live[k:] + live[:k]:
            if e.name in slow and len(e.samples) >= min_repeats:
                continue
            t0 = time.perf_counter()
            e.fn()  # type: ignore[misc]
            dt = time.perf_counter() - t0
            e.samples.append(dt)
            if e.name not in slow:
                fast_time += dt
        if r + 1 >= min_repeats and fast_time > max_seconds:
            break


# ---------------------------------------------------------------------------------------------
# main


def select_models(spec: str | None, quick: bool) -> list[str]:
    from examples.models.registry import get, names

    sizes = ("tiny",) if quick else ("tiny", "small")
    if not spec:
        return [f"{f}_{s}" for f in FAMILIES for s in sizes]
    out: list[str] = []
    for item in (x.strip() for x in spec.split(",") if x.strip()):
        if item in FAMILIES or item == "bert":
            out += [f"{item}_{s}" for s in sizes]
        else:
            get(item)  # raises with the list of known names
            out.append(item)
    return [n for n in out if n in names()]


@dataclass
class ModelResult:
    name: str
    family: str
    shapes: str
    engines: list[Engine]
    facts: dict[str, Any]
    build_s: float


def run_model(name: str, args: argparse.Namespace, tmp: Path, targets: list[str]) -> ModelResult:
    import torch

    from examples.models.registry import get

    t_model = time.perf_counter()
    entry = get(name)
    model, inputs, dyn = entry()
    model = model.eval()
    inputs_b1 = tuple(t[:1].contiguous() for t in inputs)
    np_inputs = [t.numpy() for t in inputs_b1]
    shapes = ", ".join("x".join(str(d) for d in x.shape) for x in np_inputs)
    cfg = getattr(model, "config", None)
    skip = set(args.skip)
    print(f"\n== {name} ({shapes})", file=sys.stderr, flush=True)

    engines: list[Engine] = [build_torch_eager(model, inputs_b1)]
    if "torch-compile" not in skip:
        print("  torch.compile ...", file=sys.stderr, flush=True)
        engines.append(build_torch_compile(model, inputs_b1, args.compile_timeout))
    path = None
    if "ort" not in skip:
        print("  onnx export + ort ...", file=sys.stderr, flush=True)
        e, path = build_ort(model, inputs_b1, np_inputs, tmp, name)
        engines.append(e)
    if "ort-transformers" not in skip:
        print("  ort transformers optimizer ...", file=sys.stderr, flush=True)
        engines.append(build_ort_transformers(path, entry.family, cfg, np_inputs, tmp, name))
    if "tvm" not in skip:
        print("  tvm ...", file=sys.stderr, flush=True)
        engines.append(build_tvm(model, inputs_b1, np_inputs, args.tvm_timeout))
    if "jax-jit" not in skip:
        print("  jax.jit ...", file=sys.stderr, flush=True)
        engines.append(build_jax(entry))
    facts: dict[str, Any] = {}
    if "irkit" not in skip:
        print("  irkit ...", file=sys.stderr, flush=True)
        pipelines = [("", PIPELINE)] + ([("+tile", f"{PIPELINE},{TILE}")] if args.tile else [])
        irk, facts = build_irkit(model, inputs, dyn, np_inputs, pipelines, targets, args.lower_timeout)
        engines += irk

    # Output agreement with torch eager (first output), before timing.
    ref = flat_outputs(engines[0].fn())  # type: ignore[misc]
    for e in engines[1:]:
        if e.fn is None or e.error:
            continue
        try:
            e.diff = max_abs_diff(flat_outputs(e.fn()), ref)
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            e.error = f"run: {first_line(ex)}"
    print("  timing ...", file=sys.stderr, flush=True)
    torch.set_num_threads(1)
    time_interleaved(engines, args.warmup, args.repeats, args.max_seconds)
    return ModelResult(name, entry.family, shapes, engines, facts, time.perf_counter() - t_model)


def fmt_ms(s: float | None) -> str:
    return "—" if s is None else f"{s * 1e3:.2f}"


def fmt_ratio(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def report(results: list[ModelResult], args: argparse.Namespace, command: str, versions: dict[str, str],
           load: str, wall: float, targets: list[str], cpu: float) -> str:
    L: list[str] = []
    L.append("# irkit against peers (CPU, one thread)")
    L.append("")
    L.append(f"Command: `{command}`")
    L.append("")
    L.append(f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average at start {load} "
             "(heavily shared; every engine on one thread, timed interleaved in the same run; XLA with "
             "async dispatch off, so it runs in the calling thread like the others). "
             f"Run took {wall / 60:.1f} min of wall time, {cpu / 60:.1f} min of CPU time (this process and its "
             "children, e.g. inductor's C++ builds).")
    L.append("Versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ".")
    L.append(f"irkit pipeline: `{PIPELINE}`" + (f" (and `+tile` = `,{TILE}`)" if args.tile else "")
             + f"; irkit targets run: {', '.join(targets)}"
             + ("" if "tvm-llvm" in targets else " (`tvm-llvm` was not registered when this ran)") + ".")
    L.append(f"Batch 1, each model's own sequence length (row 0 of its example inputs). Warm-up {args.warmup}, "
             f"up to {args.repeats} interleaved rounds (fewer once the model's fast engines have run "
             f"{args.max_seconds:.0f} s; an engine slower than {args.max_seconds / 20:.2f} s a call gets one warm-up and "
             "5 rounds). "
             "Median latency in ms; spread = inter-quartile range / median. "
             "`vs eager` = median / torch eager median (lower is faster); `vs best peer` = median / the "
             "fastest non-irkit engine's median for that model.")
    L.append("")
    L.append("## Summary")
    L.append("")
    L.append("| model | inputs | torch eager ms | best peer | best peer ms | best irkit | irkit ms | irkit vs eager "
             "| irkit vs best peer | irkit numerics |")
    L.append("|---|---|---:|---|---:|---|---:|---:|---:|---|")
    for r in results:
        eager = next((e for e in r.engines if e.name == "torch-eager"), None)
        em = eager.timing.median if eager and eager.timing else None
        peers = [e for e in r.engines if e.kind == "peer" and e.timing]
        irk = [e for e in r.engines if e.kind == "irkit" and e.timing]
        bp = min(peers, key=lambda e: e.timing.median) if peers else None
        bi = min(irk, key=lambda e: e.timing.median) if irk else None
        L.append(f"| {r.name} | {r.shapes} | {fmt_ms(em)} | {bp.name if bp else '—'} | "
                 f"{fmt_ms(bp.timing.median if bp else None)} | {bi.name if bi else '—'} | "
                 f"{fmt_ms(bi.timing.median if bi else None)} | "
                 f"{fmt_ratio(bi.timing.median / em if bi and em else None)} | "
                 f"{fmt_ratio(bi.timing.median / bp.timing.median if bi and bp else None)} | "
                 f"{(bi.check + (f'; max abs diff vs torch eager {bi.diff:.1e}' if bi.diff is not None else '')) if bi else '—'} |")
    L.append("")
    L.append("## Latency")
    L.append("")
    L.append("| model | engine | median ms | spread | min ms | rounds | vs eager | vs best peer "
             "| max abs diff vs eager | check / notes |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        eager = next((e for e in r.engines if e.name == "torch-eager"), None)
        em = eager.timing.median if eager and eager.timing else None
        peers = [e for e in r.engines if e.kind == "peer" and e.timing]
        bpm = min(e.timing.median for e in peers) if peers else None
        for e in r.engines:
            tm = e.timing
            if e.error or tm is None:
                L.append(f"| {r.name} | {e.name} | failed | | | | | | | {e.error or 'not run'} |")
                continue
            diff = "—" if e.diff is None else f"{e.diff:.1e}"
            note = "; ".join(x for x in [e.check] if x)
            L.append(f"| {r.name} | {e.name} | {tm.median * 1e3:.2f} | {100 * tm.spread:.0f}% | "
                     f"{min(tm.samples) * 1e3:.2f} | {len(tm.samples)} | "
                     f"{fmt_ratio(tm.median / em if em else None)} | {fmt_ratio(tm.median / bpm if bpm else None)} | "
                     f"{diff} | {note} |")
    L.append("")
    L.append("## Compile and import times")
    L.append("")
    L.append("Seconds of wall time on the loaded machine (compare within a row of engines, not across runs). "
             "irkit's import (torch.export + IR import) and pipeline are per model and shared by its targets; "
             "`lower` is per target.")
    L.append("")
    L.append("| model | engine | compile s | what it covers |")
    L.append("|---|---|---:|---|")
    for r in results:
        f = r.facts
        if "import_s" in f:
            L.append(f"| {r.name} | irkit import | {f['import_s']:.1f} | import_torch_factory ({f.get('import_mode')}), "
                     f"{f.get('ops_imported')} ops{'; ' + f['import_note'] if f.get('import_note') else ''} |")
            for label in ("", "+tile"):
                if f"pipeline{label}_s" in f:
                    L.append(f"| {r.name} | irkit pipeline{label} | {f[f'pipeline{label}_s']:.2f} | "
                             f"{f.get('ops' + label)} ops after, {f.get('attention' + label)} ik.attention |")
            if "oracle_s" in f:
                L.append(f"| {r.name} | (float64 oracle) | {f['oracle_s']:.1f} | interpreter, for the numeric check |")
        for e in r.engines:
            if e.name == "torch-eager":
                continue
            if e.error:
                L.append(f"| {r.name} | {e.name} | failed | {e.error} |")
            else:
                extra = "; ".join([e.compile_note] + ([e.check] if e.kind == "peer" and e.check else []) + e.notes)
                L.append(f"| {r.name} | {e.name} | {e.compile_s:.1f} | {extra} |")
    suspects = [(r.name, e) for r in results for e in r.engines
                if e.kind == "irkit" and "MISMATCH" in e.check and e.diff is not None and e.diff < 1e-3]
    if suspects:
        L.append("")
        L.append("## Oracle disagreements where the output matches torch")
        L.append("")
        for name, e in suspects:
            L.append(f"- {name} / {e.name}: {e.check}, yet its output is within {e.diff:.1e} of torch eager (float32). "
                     "The float64 interpreter disagrees with torch, not only with this target: suspect the oracle "
                     "(float64 evaluation of a float32 program, e.g. a float-to-int cast fed by float math), not "
                     "the pipeline or the target.")
    failures = [(r.name, e) for r in results for e in r.engines if e.error]
    L.append("")
    L.append("## Failures")
    L.append("")
    if not failures:
        L.append("None: every engine built and ran on every model.")
    else:
        for name, e in failures:
            L.append(f"- {name} / {e.name}: {e.error}")
    L.append("")
    return "\n".join(L)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None,
                    help="comma list of registry names (gpt2_tiny, llama_small_sdpa...) or families (gpt2, llama, "
                         "t5, vit, bert); default: the four families, tiny and small")
    ap.add_argument("--quick", action="store_true", help="tiny models only")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved timing rounds (default 50, quick 30)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="stop a model's timing rounds after this long (default 25, quick 10)")
    ap.add_argument("--tile", action="store_true", help=f"also run the pipeline with {TILE} appended")
    ap.add_argument("--skip", default="", help="engines to leave out: torch-compile,ort,ort-transformers,tvm,"
                                               "jax-jit,irkit")
    ap.add_argument("--tvm-timeout", type=float, default=240.0, help="time limit of the TVM build, seconds")
    ap.add_argument("--lower-timeout", type=float, default=240.0,
                    help="time limit of one irkit target's lower, seconds")
    ap.add_argument("--compile-timeout", type=float, default=300.0, help="time limit of torch.compile, seconds")
    ap.add_argument("--cold-compile", action="store_true",
                    help="give torch.compile a fresh inductor cache, so its compile time is cold (slower run)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "peers.md"))
    args = ap.parse_args()
    args.skip = [s.strip() for s in args.skip.split(",") if s.strip()]
    if args.repeats is None:
        args.repeats = 30 if args.quick else 50
    if args.max_seconds is None:
        args.max_seconds = 10.0 if args.quick else 25.0

    t_start = time.perf_counter()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    import torch

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    models = select_models(args.models, args.quick)
    jax_inline_dispatch()
    targets = irkit_targets()
    versions = {"torch": torch.__version__}
    for mod in ("onnxruntime", "jax", "tvm", "onnx"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception as ex:  # noqa: BLE001
            versions[mod] = f"unavailable ({first_line(ex)})"
    results = []
    with tempfile.TemporaryDirectory(prefix="irkit-peers-") as d:
        for name in models:
            results.append(run_model(name, args, Path(d), targets))
            print(f"  done in {results[-1].build_s:.0f} s", file=sys.stderr, flush=True)
    command = "python benchmarks/peers.py" + "".join(" " + shlex.quote(a) for a in sys.argv[1:])
    import resource

    ru = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(r.ru_utime + r.ru_stime for r in ru)
    text = report(results, args, command, versions, load, time.perf_counter() - t_start, targets, cpu)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    from irkit.fileio import atomic_write

    atomic_write(out, text)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
