"""``irkit tune`` end to end: tvm-llvm with tuned tiles against its defaults and onnxruntime.

For each model the same imported module goes through the optimising pipeline without
``tile-matmul`` (so the TVM matmul kernel uses its own default tiles), then:

- ``tvm-llvm default``: that module lowered as is;
- ``tvm-llvm tile-matmul``: with ``tile-matmul{target=host-cpu}`` (tiles from the cost model,
  what ``irkit lower`` gets from the optimising pipeline);
- ``tvm-llvm tuned``: ``irkit.sweep.tune.tune`` times the cost model's top K tiles (and the
  defaults) of every distinct matmul into a fresh results store, and ``apply_tuning`` sets the
  fastest on the module (what ``irkit tune -o`` writes and ``irkit lower`` then builds);
- ``ort``: the same module through irkit's ort target (onnxruntime, every graph optimisation on).

Timing is interleaved: each round calls every engine once, in turn (``irkit.bench.measure``,
a few calls per round), and the table gives the median over rounds of each round's median, its
spread (interquartile range / median) and the ratios in the same run.  Every call includes the
copy of the inputs in and the outputs back.  The tuning cost is recorded: matmuls, candidates
ranked, candidates timed, wall seconds.

Run: python benchmarks/tune_e2e.py [--models gpt2,llama,zoo:qwen2,zoo:bert] [--top 3] [--rounds 15]
Writes benchmarks/results/tune_e2e.md (``--out -`` prints it).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BASE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"
TILED = BASE + ",tile-matmul{target=host-cpu}"
MODELS = ("gpt2", "llama", "zoo:qwen2", "zoo:bert")


def _block(family: str, batch: int, seq: int) -> Any:
    """The example GPT-2 / Llama block of benchmarks/tvm_speed.py, imported through torch.export."""
    from irkit.frontends.torch_export import import_torch_factory

    if family == "gpt2":
        from examples.models import gpt2 as g

        cfg = g.GPT2Config(hidden=256, layers=1, heads=8, vocab_size=2048, max_positions=512,
                           tie_word_embeddings=False, batch=batch, seq=seq)
        model, inputs, _ = g.gpt2(cfg)
    else:
        from examples.models import llama as ll

        cfg = ll.LlamaConfig(vocab_size=2048, hidden=256, intermediate=688, layers=1, heads=8,
                             kv_heads=2, max_positions=512, batch=batch, seq=seq)
        model, inputs, _ = ll.llama(cfg)
    return import_torch_factory(model, inputs, None)


def _module(name: str, batch: int, seq: int) -> tuple[Any, dict[str, int]]:
    from irkit.cli import import_zoo
    from irkit.interp import default_bindings

    if name.startswith("zoo:"):
        m = import_zoo(name if name.count(":") == 2 else name + ":toy")
        syms = {str(d) for a in m.entry.args for d in a.type.shape if not isinstance(d, int)}
        # toy zoo models have 64 positions: their sequence is capped there
        want = {s: (batch if s.upper().startswith("B") else min(seq, 64)) for s in syms}
        return m, default_bindings(m.entry, want)
    m = _block(name, batch, seq)
    return m, default_bindings(m.entry, {})


def _inputs(m: Any, b: dict[str, int], seed: int) -> list[np.ndarray]:
    from irkit.interp import random_inputs

    return random_inputs(m.entry, seed=seed, bindings=b)


def run_model(name: str, batch: int, seq: int, top: int, rounds: int, calls: int) -> dict[str, Any]:
    from irkit.targets.registry import get_target

    from irkit.bench import measure
    from irkit.passmanager import run_pipeline
    from irkit.sweep.executors import InProcess
    from irkit.sweep.store import Store
    from irkit.sweep.tune import apply_tuning, tune

    m, b = _module(name, batch, seq)
    base = m.clone()
    run_pipeline(base, BASE)
    tiled = m.clone()
    run_pipeline(tiled, TILED)
    tuned = base.clone()
    with tempfile.TemporaryDirectory() as d, Store(Path(d) / "tune.sqlite") as st:
        rep = tune(base, b, st, InProcess(), top_k=top, timeout=300.0,
                   log=lambda s: print(f"[{name}] {s}", file=sys.stderr, flush=True))
        n_tuned = apply_tuning(tuned, st, "tvm-llvm", b)
    xs = _inputs(base, b, seed=0)
    engines: dict[str, Any] = {}
    compile_s: dict[str, float] = {}
    for label, mod, target in (("tvm-llvm default", base, "tvm-llvm"), ("tvm-llvm tile-matmul", tiled, "tvm-llvm"),
                               ("tvm-llvm tuned", tuned, "tvm-llvm"), ("ort", base, "ort")):
        t = get_target(target)
        t0 = time.perf_counter()
        art = t.lower(mod, b)
        compile_s[label] = time.perf_counter() - t0
        engines[label] = (lambda t=t, art=art: t.run(art, xs))
    ref = [np.asarray(o, np.float64) for o in engines["tvm-llvm default"]()]
    for label, fn in engines.items():  # same numbers before timing them
        for r, o in zip(ref, fn()):
            err = float(np.max(np.abs(np.asarray(o, np.float64) - r))) / (float(np.max(np.abs(r))) or 1.0)
            assert err < 1e-3, f"{name} {label}: relative max error {err:.2e} against tvm-llvm default"
    per: dict[str, list[float]] = {k: [] for k in engines}
    for _ in range(rounds):
        for label, fn in engines.items():
            per[label].append(measure(fn, warmup=1, repeats=calls).median)
    med = {k: float(np.median(v)) for k, v in per.items()}
    q = {k: np.percentile(v, [25, 75]) for k, v in per.items()}
    from irkit.ir.types import eval_dim

    shape = " ".join("x".join(str(eval_dim(d, b)) for d in a.type.shape) for a in base.entry.args)
    return {"model": name, "shape": shape, "median_s": med,
            "spread": {k: float((q[k][1] - q[k][0]) / med[k]) for k in per}, "compile_s": compile_s,
            "tune": {"matmuls": len(rep.sites), "tuned": n_tuned, "ranked": rep.ranked, "timed": rep.measured,
                     "wall_s": rep.wall_seconds, "sites": rep.sites}}


def markdown(rows: list[dict[str, Any]], argv: list[str]) -> str:
    threads = os.environ.get("TVM_NUM_THREADS", str(os.cpu_count()))
    cpu = platform.processor() or platform.machine()
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    out = [f"`python benchmarks/tune_e2e.py {' '.join(argv)}`".replace(" `", "`") + " (input shapes: the entry's "
           "arguments)",
           "",
           f"CPU: {cpu}, {os.cpu_count()} logical cores, TVM threads {threads}; "
           f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Median over rounds of per-round medians "
           "(spread = IQR / median); ratios are of the same run.",
           "",
           "| model | shape | tvm-llvm default ms | tile-matmul ms | tuned ms | ort ms | tuned vs default | "
           "tuned vs tile-matmul | ort / tuned | matmuls set (distinct) | ranked | timed | tuning s |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        m, s, t = r["median_s"], r["spread"], r["tune"]

        def cell(k: str, m: dict[str, float] = m, s: dict[str, float] = s) -> str:
            return f"{m[k] * 1e3:.3f} ({s[k] * 100:.0f}%)"

        out.append(f"| {r['model']} | {r['shape']} | {cell('tvm-llvm default')} | {cell('tvm-llvm tile-matmul')} | "
                   f"{cell('tvm-llvm tuned')} | {cell('ort')} | "
                   f"{m['tvm-llvm default'] / m['tvm-llvm tuned']:.2f}x | "
                   f"{m['tvm-llvm tile-matmul'] / m['tvm-llvm tuned']:.2f}x | {m['ort'] / m['tvm-llvm tuned']:.2f}x | "
                   f"{t['tuned']} ({t['matmuls']}) | {t['ranked']} | {t['timed']} | {t['wall_s']:.0f} |")
    out += ["", "`tuned vs default` > 1 means tuning made it faster than the kernel's default tiles; "
            "`ort / tuned` > 1 means tuned tvm-llvm is faster than onnxruntime.", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--top", type=int, default=3, help="tiles timed per matmul (besides the defaults)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=5, help="timed calls per engine per round")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "tune_e2e.md"))
    args = ap.parse_args(argv)
    rows = [run_model(n, args.batch, args.seq, args.top, args.rounds, args.calls) for n in args.models.split(",")]
    text = markdown(rows, argv)
    if args.out == "-":
        print(text)
    else:
        Path(args.out).write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
