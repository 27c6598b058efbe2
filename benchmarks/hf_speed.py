"""Hugging Face models on CPU: irkit's targets against onnxruntime on the original ONNX file.

Every model is an ``irkit.zoo`` architecture at its toy size (random weights, no download),
exported once to ONNX (``torch.onnx.export(dynamo=True)``, static shapes).  Engines, all on the
same inputs and the same number of threads:

- ``ort-file``: onnxruntime on that ONNX file, ``ORT_ENABLE_ALL`` (the baseline of every ratio);
- ``irkit/tvm-llvm``, ``irkit/xla-cpu``, ``irkit/ort``: the file imported into irkit
  (``irkit.frontends.onnx.import_onnx``), the optimising pipeline (``PIPELINE``), then the target;
- ``torch-eager``: the torch module under ``torch.inference_mode``;
- ``torch-compile``: ``torch.compile(module)`` (Inductor's default mode, C++ kernels on CPU), compiled
  on the first call (its compile time is recorded, not timed).

The last column, ``irkit best / peer best``, is the fastest irkit target over the fastest peer
(ort-file, torch-eager, torch-compile) in the same cell.

Threads: each thread count runs in its own process, because TVM and XLA read theirs once at start
(``TVM_NUM_THREADS``, ``XLA_FLAGS``); onnxruntime gets ``intra_op_num_threads``, torch
``set_num_threads``.  Timing is interleaved (each round calls every engine once, in turn, so
machine noise hits all alike); each call includes copying the inputs in and the outputs back to
NumPy.  Reported: the median and the spread (interquartile range / median) of the rounds, and the
ratio to ``ort-file`` at the same shape and thread count (below 1 = faster than onnxruntime).
Every engine's output is checked against ``ort-file`` (max |difference| column).

Usage::

    python benchmarks/hf_speed.py --quick               # a small subset, a few minutes on 2 cores
    python benchmarks/hf_speed.py --out results/hf_speed.md
    python benchmarks/hf_speed.py --models vit,bert --batches 1 --seqs 16 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]

PIPELINE = ("canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce,"
            "tile-matmul{target=host-cpu}")
MODELS = ("gpt2", "llama", "qwen2", "mistral", "bert", "distilbert", "t5_encoder", "vit", "clip", "whisper_encoder")
QUICK_MODELS = ("gpt2", "bert", "vit", "whisper_encoder")
ENGINES = ("ort-file", "irkit/tvm-llvm", "irkit/xla-cpu", "irkit/ort", "torch-eager", "torch-compile")
PEERS = ("ort-file", "torch-eager", "torch-compile")
FIXED_INPUT = ("vision", "audio")
"""Families whose inputs keep the model's own size (images, mel frames): only the batch varies."""


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _time_rounds(engines: dict[str, Callable[[], Any]], rounds: int, budget_s: float) -> dict[str, list[float]]:
    """Interleaved rounds; in each, every engine runs a block of calls (about 5 ms of them) and every
    call is a sample.  Blocks rather than single calls: an engine's thread pool spins for a while
    after its last call, and on a small machine that would be charged to the next engine."""
    samples: dict[str, list[float]] = {k: [] for k in engines}
    block: dict[str, int] = {}
    for name, fn in engines.items():  # warm-up, and the block size
        fn()
        t0 = time.perf_counter()
        fn()
        block[name] = max(1, min(50, int(0.005 / max(time.perf_counter() - t0, 1e-6))))
    start = time.perf_counter()
    for r in range(rounds):
        for name, fn in engines.items():
            fn()  # the first call after another engine's block is not a sample
            for _ in range(block[name]):
                t0 = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - t0)
        if r >= 4 and time.perf_counter() - start > budget_s:
            break
    return samples


def worker(args: argparse.Namespace) -> None:
    """One thread count: every model and shape; JSON lines to ``args.worker_out``."""
    import numpy as np
    import onnxruntime as ort
    import torch

    import irkit.zoo as zoo
    from irkit.frontends.onnx import import_onnx
    from irkit.passmanager import run_pipeline
    from irkit.targets.ort import OrtTarget
    from irkit.targets.registry import get_target
    from irkit.zoo.export import export_module_onnx

    threads = args.threads
    torch.set_num_threads(threads)
    engines_wanted = [e for e in args.engines.split(",") if e]
    out = open(args.worker_out, "a")
    tmp = Path(tempfile.mkdtemp(prefix="hf_speed_"))
    for name in args.models.split(","):
        arch = zoo.entry(name)
        fixed = arch.family in FIXED_INPUT
        shapes = [(b, None) for b in args.batches] if fixed else [(b, s) for b in args.batches for s in args.seqs]
        for b, s in shapes:
            rec: dict[str, Any] = {"model": name, "family": arch.family, "batch": b, "seq": s, "threads": threads,
                                   "engines": {}}
            try:
                module, inputs = zoo.build(name, "toy", batch=b, seq=s, positions=s)  # toy tables hold 64
                path = tmp / f"{name}_{b}_{s}.onnx"
                export_module_onnx(module, inputs, None, path, label=name)
                so = ort.SessionOptions()
                so.intra_op_num_threads = threads
                sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
                names = [i.name for i in sess.get_inputs()]
                import inspect

                params = list(inspect.signature(module.forward).parameters)
                np_in = [t.numpy() for t in inputs]
                by_name = dict(zip(params, np_in))
                feeds = {n: by_name[n] if n in by_name else np_in[i] for i, n in enumerate(names)}
                ref = sess.run(None, feeds)[0]
                fns: dict[str, Callable[[], Any]] = {}
                outs: dict[str, Any] = {}
                if "ort-file" in engines_wanted:
                    fns["ort-file"] = lambda sess=sess, feeds=feeds: sess.run(None, feeds)
                m = None
                for eng in engines_wanted:
                    if not eng.startswith("irkit/"):
                        continue
                    try:
                        if m is None:
                            m = import_onnx(str(path))
                            run_pipeline(m, PIPELINE)
                        tname = eng.split("/", 1)[1]
                        t = OrtTarget(threads=threads) if tname == "ort" else get_target(tname)
                        t0 = time.perf_counter()
                        art = t.lower(m)
                        rec["engines"].setdefault(eng, {})["compile_s"] = time.perf_counter() - t0
                        xs = [feeds[a.name] if a.name in feeds else np_in[i] for i, a in enumerate(m.entry.args)]
                        fns[eng] = lambda t=t, art=art, xs=xs: t.run(art, xs)
                    except Exception as e:  # noqa: BLE001 - one engine failing is a table entry
                        rec["engines"].setdefault(eng, {})["error"] = str(e).strip().splitlines()[0][:160]
                if "torch-eager" in engines_wanted:
                    def eager(module: Any = module, inputs: Any = inputs) -> Any:
                        with torch.inference_mode():
                            return module(*inputs).numpy()
                    fns["torch-eager"] = eager
                if "torch-compile" in engines_wanted:
                    try:
                        cmod = torch.compile(module)
                        t0 = time.perf_counter()
                        with torch.inference_mode():
                            cmod(*inputs)
                        rec["engines"].setdefault("torch-compile", {})["compile_s"] = time.perf_counter() - t0

                        def compiled(cmod: Any = cmod, inputs: Any = inputs) -> Any:
                            with torch.inference_mode():
                                return cmod(*inputs).numpy()
                        fns["torch-compile"] = compiled
                    except Exception as e:  # noqa: BLE001 - a peer failing is a table entry
                        rec["engines"].setdefault("torch-compile", {})["error"] = str(e).strip().splitlines()[0][:160]
                for eng, fn in list(fns.items()):
                    try:
                        got = fn()
                        got = got[0] if isinstance(got, list) else got
                        outs[eng] = float(np.max(np.abs(np.asarray(got, np.float64) - ref)))
                    except Exception as e:  # noqa: BLE001
                        rec["engines"].setdefault(eng, {})["error"] = str(e).strip().splitlines()[0][:160]
                        del fns[eng]
                samples = _time_rounds(fns, args.rounds, args.budget)
                for eng, xs in samples.items():
                    a = np.asarray(xs)
                    q1, med, q3 = np.percentile(a, [25, 50, 75])
                    rec["engines"].setdefault(eng, {}).update(
                        {"median_s": float(med), "spread": float((q3 - q1) / med), "n": len(xs),
                         "max_abs_diff": outs.get(eng)})
            except Exception as e:  # noqa: BLE001 - a model that does not build/export is a row
                rec["error"] = str(e).strip().splitlines()[0][:200]
            out.write(json.dumps(rec) + "\n")
            out.flush()
            print(f"[threads={threads}] {name} b={b} s={s}: " + ", ".join(
                f"{k} {v['median_s'] * 1e3:.2f} ms" if "median_s" in v else f"{k} failed"
                for k, v in rec["engines"].items()) + (f" error: {rec['error']}" if "error" in rec else ""),
                file=sys.stderr, flush=True)


def overhead_table(calls: int = 3000) -> str:
    """Per-call overhead: a graph of one 2x8 float32 add, end to end from NumPy to NumPy, on one thread."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from irkit.ir.builder import new_function
    from irkit.ir.core import Module
    from irkit.ir.types import DType, TensorType
    from irkit.targets.registry import get_target

    f, b = new_function("main", [TensorType((2, 8), DType.f32)] * 2, ["x", "y"])
    b.ret(b.create("ik.add", list(f.args), {}).results[0])
    m = Module([f])
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((2, 8)).astype(np.float32) for _ in range(2)]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 8]) for n in ("x", "y", "z")]
    g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "add", vi[:2], vi[2:])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
                                .SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {"x": xs[0], "y": xs[1]}
    fns: dict[str, Callable[[], Any]] = {"onnxruntime (InferenceSession.run)": lambda: sess.run(None, feeds)}
    for name in ("tvm-llvm", "ort", "xla-cpu"):
        try:
            t = get_target(name)
            art = t.lower(m)
            fns[f"irkit {name} (Target.run)"] = lambda t=t, art=art: t.run(art, xs)
        except Exception as e:  # noqa: BLE001
            print(f"{name}: {e}", file=sys.stderr)
    rows = ["| engine | median µs | p90 µs |", "|---|---|---|"]
    for name, fn in fns.items():
        for _ in range(200):
            fn()
        ts = []
        for _ in range(calls):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        q50, q90 = np.percentile(ts, [50, 90])
        rows.append(f"| {name} | {q50 * 1e6:.1f} | {q90 * 1e6:.1f} |")
    return "\n".join(rows) + "\n"


def table(records: list[dict[str, Any]], engines: list[str]) -> str:
    head = "| model | B | S | threads | " + " | ".join(engines) + " | irkit best / peer best |"
    lines = [head, "|" + "---|" * (5 + len(engines))]
    ratios: dict[str, list[float]] = {e: [] for e in engines}
    best_ratios: list[float] = []
    for r in records:
        base = r["engines"].get("ort-file", {}).get("median_s")
        cells = []
        if "error" in r:
            lines.append(f"| {r['model']} | {r['batch']} | {r['seq'] or '-'} | {r['threads']} | "
                         f"failed: {r['error']} |" + " |" * (len(engines) - 1))
            continue
        for e in engines:
            v = r["engines"].get(e, {})
            if "median_s" not in v:
                cells.append("failed" if "error" in v else "-")
                continue
            c = f"{v['median_s'] * 1e3:.3g} ms ±{v['spread'] * 100:.0f}%"
            if base and e != "ort-file":
                ratio = v["median_s"] / base
                ratios[e].append(ratio)
                c += f" **{ratio:.2f}x**"
            if v.get("max_abs_diff") is not None and e != "ort-file":
                c += f" (Δ {v['max_abs_diff']:.1e})"
            cells.append(c)
        mine = [v["median_s"] for e, v in r["engines"].items() if e.startswith("irkit/") and "median_s" in v]
        peer = [v["median_s"] for e, v in r["engines"].items() if e in PEERS and "median_s" in v]
        if mine and peer:
            best_ratios.append(min(mine) / min(peer))
            cells.append(f"**{best_ratios[-1]:.2f}x**")
        else:
            cells.append("-")
        lines.append(f"| {r['model']} | {r['batch']} | {r['seq'] or '-'} | {r['threads']} | " + " | ".join(cells) + " |")
    import math

    geo = []
    for e in engines:
        rs = ratios[e]
        geo.append(f"{math.exp(sum(math.log(x) for x in rs) / len(rs)):.2f}x" if rs else "-")
    best = (f"{math.exp(sum(math.log(x) for x in best_ratios) / len(best_ratios)):.2f}x "
            f"(max {max(best_ratios):.2f}x)" if best_ratios else "-")
    lines.append("| **geomean vs ort-file** | | | | " + " | ".join(geo) + f" | {best} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default=None)
    p.add_argument("--batches", default=None, help="e.g. 1,8")
    p.add_argument("--seqs", default=None, help="e.g. 16,128")
    p.add_argument("--threads", default=None, help="thread counts, e.g. 1,all")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--budget", type=float, default=6.0, help="seconds of timed rounds per shape (at least 5 rounds)")
    p.add_argument("--quick", action="store_true", help=f"models {','.join(QUICK_MODELS)}, batch 1, seq 16")
    p.add_argument("--out", default="-", help="markdown file, or - for stdout")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--worker-out", default=None, help=argparse.SUPPRESS)
    p.add_argument("--overhead", action="store_true", help="only the per-call overhead table (a one-add graph)")
    p.add_argument("--records", default=None, help="also keep the raw per-cell records here (JSON lines)")
    p.add_argument("--table-from", default=None, metavar="RECORDS[,RECORDS]",
                   help="no timing: the table of saved --records files (a later file's cell replaces an earlier one's)")
    args = p.parse_args()
    if args.overhead:
        os.environ.setdefault("TVM_NUM_THREADS", "1")
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
        print(f"CPU: {cpu_model()}; one thread\n\n" + overhead_table())
        return 0
    if args.worker:
        args.threads = int(args.threads)
        args.batches = [int(x) for x in args.batches.split(",")]
        args.seqs = [int(x) for x in args.seqs.split(",")]
        worker(args)
        return 0
    if args.table_from:
        return _report(args, [Path(f) for f in args.table_from.split(",")], os.cpu_count() or 1, None)
    models = args.models or ",".join(QUICK_MODELS if args.quick else MODELS)
    batches = args.batches or ("1" if args.quick else "1,8")
    seqs = args.seqs or ("16" if args.quick else "16,128")
    ncpu = os.cpu_count() or 1
    threads = [ncpu if t.strip() == "all" else int(t) for t in (args.threads or "1,all").split(",")]
    res = Path(tempfile.mkdtemp(prefix="hf_speed_res_")) / "records.jsonl"
    t_start = time.perf_counter()
    wanted = args.engines.split(",")
    # torch (eager and compiled) runs in a process of its own: its OpenMP workers and TVM's/onnxruntime's spinning pools
    # starve each other on a small machine (torch eager measured 100x slower when they shared one).
    groups = [[e for e in wanted if not e.startswith("torch-")], [e for e in wanted if e.startswith("torch-")]]
    for n in dict.fromkeys(threads):
        env = dict(os.environ, TVM_NUM_THREADS=str(n), OMP_NUM_THREADS=str(n),
                   XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=" +
                              ("false" if n == 1 else "true") + f" intra_op_parallelism_threads={n}").strip())
        for group in groups:
            if not group:
                continue
            cmd = [sys.executable, __file__, "--worker", "--worker-out", str(res), "--threads", str(n), "--models",
                   models, "--batches", batches, "--seqs", seqs, "--engines", ",".join(group), "--rounds",
                   str(args.rounds), "--budget", str(args.budget)]
            subprocess.run(cmd, env=env, cwd=ROOT, check=False)
    if args.records:
        from irkit.fileio import atomic_write

        atomic_write(args.records, res.read_text() if res.exists() else "")
    return _report(args, [res], ncpu, t_start)


def _report(args: argparse.Namespace, files: list[Path], ncpu: int, t_start: float | None) -> int:
    """The markdown table of the records in ``files``, merged by (model, batch, seq, threads): engines of
    one file's cell join; a later file's cell replaces an earlier file's."""
    merged: dict[tuple, dict[str, Any]] = {}
    for f in files:
        seen: dict[tuple, dict[str, Any]] = {}
        for line in (f.read_text().splitlines() if f.exists() else []):
            r = json.loads(line)
            key = (r["model"], r["batch"], r["seq"], r["threads"])
            if key in seen:
                seen[key]["engines"].update(r["engines"])
                if "error" in r and "error" not in seen[key]:
                    seen[key]["error"] = r["error"]
            else:
                seen[key] = r
        merged.update(seen)
    order = {m: i for i, m in enumerate(MODELS)}
    records = sorted(merged.values(), key=lambda r: (r["threads"], order.get(r["model"], len(order)), r["model"],
                                                     r["batch"], r["seq"] or 0))
    return _render(args, records, ncpu, t_start)


def _render(args: argparse.Namespace, records: list[dict[str, Any]], ncpu: int, t_start: float | None) -> int:
    import onnxruntime
    import torch
    import tvm

    try:
        import jax
        jv = jax.__version__
    except Exception:  # noqa: BLE001
        jv = "-"
    engines = args.engines.split(",")
    md = (f"CPU: {cpu_model()}, {ncpu} cores; onnxruntime {onnxruntime.__version__}, TVM {tvm.__version__}, "
          f"jax {jv}, torch {torch.__version__}; {len(records)} rows"
          + (f" in {time.perf_counter() - t_start:.0f} s.\n\n" if t_start is not None else " (from saved records).\n\n")
          + f"Command: `python benchmarks/hf_speed.py {' '.join(shlex.quote(a) for a in sys.argv[1:])}`\n\n"
          "Cells: median latency ±spread (interquartile range / median), **ratio to ort-file** (below 1 = "
          "faster than onnxruntime on the original file), (Δ max |difference| from ort-file's output).\n\n"
          + table(records, engines))
    if args.out == "-":
        print(md)
    else:
        from irkit.fileio import atomic_write

        atomic_write(args.out, md)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
