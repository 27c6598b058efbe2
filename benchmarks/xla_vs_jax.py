"""irkit's ``xla-cpu`` target against plain ``jax.jit`` of the same model.

The model is an example from ``examples/models`` (GPT-2 and Llama families,
float32): irkit imports the torch module through torch.export
(``import_torch_factory``, dynamic batch and sequence) and lowers the IR with
the ``xla-cpu`` target at each (batch, seq), both as imported and after the
optimising pipeline (``--pipelines``); JAX runs the model's JAX twin
(same weights) under ``jax.jit`` with the parameters passed as arguments, the
usual way. Both take NumPy token ids and return NumPy logits.

For each (model, batch, seq): warm up, then time both alternately (irkit, jax,
irkit, jax, ...) so that load on the machine hits both alike; report the median
latency, the spread (half the inter-quartile range over the median) and the
ratio irkit / jax (goal: at most 1.1). Compile times are reported apart:
irkit's ``lower`` (IR -> JAX trace -> StableHLO -> XLA compile) against
``jax.jit(...).lower(...).compile()``; the torch.export import, done once per
model for every shape, is reported in the notes. The largest output difference
between the two is reported as a sanity check.

Writes a markdown table to stdout and to benchmarks/results/xla_vs_jax.md.

Run: python benchmarks/xla_vs_jax.py [--models gpt2,llama] [--batches 1,8] [--seqs 128,512]
     [--pipelines none,opt] [--repeats 15] [--min-seconds 10] [--layers 2] [--hidden 256]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Loading libtpu (JAX does at backend start) takes a machine-wide lock; see targets/xla.py.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")


OPT_PIPELINE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"


def _median_spread(ts: list[float]) -> tuple[float, float]:
    med = statistics.median(ts)
    q = statistics.quantiles(ts, n=4) if len(ts) >= 4 else [min(ts), med, max(ts)]
    return med, (q[2] - q[0]) / 2 / med if med else 0.0


def _model(
    family: str, layers: int, hidden: int
) -> tuple[Any, Any, Callable[..., Any], dict[str, Any]]:
    """(torch model, dynamic shapes, jax apply(params, ids), numpy params)."""
    if family == "gpt2":
        from examples.models.gpt2 import GPT2Config, gpt2, gpt2_jax_apply, numpy_params

        cfg = GPT2Config(
            vocab_size=2048,
            hidden=hidden,
            layers=layers,
            heads=hidden // 32,
            max_positions=1024,
            tie_word_embeddings=False,
            seq=16,
        )
        model, _, dyn = gpt2(cfg)
        return model, dyn, lambda p, ids: gpt2_jax_apply(p, ids, cfg=cfg), numpy_params(model)
    if family == "llama":
        from examples.models.llama import LlamaConfig, llama, llama_jax_apply, numpy_params

        cfg = LlamaConfig(
            vocab_size=2048,
            hidden=hidden,
            intermediate=int(hidden * 2.6875) // 16 * 16,
            layers=layers,
            heads=hidden // 32,
            kv_heads=hidden // 64,
            max_positions=1024,
            seq=16,
        )
        model, _, dyn = llama(cfg)
        return model, dyn, lambda p, ids: llama_jax_apply(p, ids, cfg=cfg), numpy_params(model)
    raise SystemExit(f"unknown model family {family!r}; use gpt2 or llama")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--seqs", default="128,512")
    ap.add_argument("--repeats", type=int, default=15, help="at least this many timed runs of each")
    ap.add_argument(
        "--min-seconds",
        type=float,
        default=10.0,
        help="cheap shapes repeat until each side has run this long (at most 300 runs)",
    )
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument(
        "--pipelines",
        default="none,opt",
        help="'none' (the IR as imported) and/or 'opt' (the optimising pipeline)",
    )
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "xla_vs_jax.md"))
    args = ap.parse_args()

    import jax
    import torch
    from irkit.targets.registry import get_target

    from irkit.fileio import atomic_write
    from irkit.frontends.torch_export import import_torch_factory
    from irkit.interp import bind_symbols
    from irkit.passmanager import run_pipeline

    pipes = [p.strip() for p in args.pipelines.split(",") if p.strip()]
    bad = sorted(set(pipes) - {"none", "opt"})
    if bad:
        raise SystemExit(f"--pipelines: unknown {', '.join(bad)}; use none and/or opt")
    load_start = os.getloadavg()[0]

    target = get_target("xla-cpu")
    rng = np.random.default_rng(0)
    rows: list[str] = []
    notes: list[str] = []
    ratios: list[float] = []
    for family in args.models.split(","):
        model, dyn, apply, np_params = _model(family, args.layers, args.hidden)
        example = (torch.randint(0, 2048, (2, 16), dtype=torch.int64),)
        t0 = time.perf_counter()
        imported = import_torch_factory(model, example, dyn)
        import_s = time.perf_counter() - t0
        notes.append(
            f"{family}: torch.export + import {import_s:.1f} s (once, dynamic B and S), "
            f"{imported.num_ops()} IR ops as imported"
        )
        modules = {}
        for pipe in pipes:
            modules[pipe] = imported.clone()
            if pipe == "opt":
                run_pipeline(modules[pipe], OPT_PIPELINE)
                notes.append(f"{family}: {modules[pipe].num_ops()} IR ops after the pipeline")
        params = {k: jax.device_put(v) for k, v in np_params.items()}
        jax_compiles: dict[tuple[int, int], float] = {}
        for pipe, module in modules.items():
            for b in [int(x) for x in args.batches.split(",")]:
                for s in [int(x) for x in args.seqs.split(",")]:
                    ids = rng.integers(0, 2048, size=(b, s)).astype(np.int64)
                    ids32 = ids.astype(np.int32)
                    bindings = bind_symbols(module.entry, [ids])

                    t0 = time.perf_counter()
                    art = target.lower(module, bindings)
                    irkit_compile = time.perf_counter() - t0

                    if (b, s) not in jax_compiles:  # a second compile would hit JAX's cache
                        t0 = time.perf_counter()
                        jax.jit(apply).lower(params, ids32).compile()
                        jax_compiles[b, s] = time.perf_counter() - t0
                    jax_compile = jax_compiles[b, s]
                    jitted = jax.jit(apply)

                    def run_irkit(art: Any = art, ids: np.ndarray = ids) -> np.ndarray:
                        return target.run(art, [ids])[0]

                    def run_jax(
                        jitted: Any = jitted, params: Any = params, ids32: np.ndarray = ids32
                    ) -> np.ndarray:
                        return np.asarray(jitted(params, ids32))

                    t0 = time.perf_counter()
                    for _ in range(args.warmup):
                        a, j = run_irkit(), run_jax()
                    per_pair = (time.perf_counter() - t0) / max(args.warmup, 1)
                    repeats = max(
                        args.repeats, min(300, int(2 * args.min_seconds / max(per_pair, 1e-6)))
                    )
                    diff = float(np.max(np.abs(a.astype(np.float64) - j.astype(np.float64))))
                    t_irkit, t_jax = [], []
                    for _ in range(repeats):
                        t0 = time.perf_counter()
                        run_irkit()
                        t_irkit.append(time.perf_counter() - t0)
                        t0 = time.perf_counter()
                        run_jax()
                        t_jax.append(time.perf_counter() - t0)
                    mi, si = _median_spread(t_irkit)
                    mj, sj = _median_spread(t_jax)
                    ratio = mi / mj
                    ratios.append(ratio)
                    rows.append(
                        f"| {family} | {pipe} | {b} | {s} | {mi * 1e3:.2f} ±{si:.0%} | "
                        f"{mj * 1e3:.2f} ±{sj:.0%} | "
                        f"**{ratio:.2f}** | {irkit_compile:.2f} | {jax_compile:.2f} | "
                        f"{repeats} | {len(art.kernels)} | {diff:.1e} |"
                    )
                    print(rows[-1], flush=True)

    cmd = "python benchmarks/xla_vs_jax.py " + " ".join(sys.argv[1:])
    import jaxlib

    header = (
        f"Models: examples/models GPT-2 and Llama families, float32, {args.layers} layers, hidden "
        f"{args.hidden}, vocab 2048 (Llama: grouped-query attention, {args.hidden // 32} query / "
        f"{args.hidden // 64} KV heads). irkit: torch.export -> IR -> `xla-cpu`, the IR as imported "
        f"(pipeline `none`) and after `{OPT_PIPELINE}` (`opt`); "
        "JAX: the model's JAX twin under `jax.jit`, parameters as arguments. Both NumPy ids in, "
        "NumPy logits out."
    )
    method = (
        f"Latency: median over `runs` timed runs of each (at least {args.repeats}, more for cheap "
        f"shapes, up to about {args.min_seconds:g} s per side) after {args.warmup} warm-up runs, "
        "the two timed alternately; ± is half the inter-quartile range over the median. "
        "Ratio = irkit / jax (goal <= 1.1). Compile: irkit `lower` (trace + XLA compile) and "
        "`jax.jit(f).lower(...).compile()`, seconds, one run each."
    )
    columns = (
        "| model | pipeline | batch | seq | irkit ms | jax.jit ms | ratio | irkit compile s | jax compile s "
        "| runs | HLO kernels | max abs diff |"
    )
    geo = f"Geometric-mean ratio: {float(np.exp(np.mean(np.log(ratios)))):.3f}" if ratios else ""
    env = (
        f"- jax {jax.__version__}, jaxlib {jaxlib.__version__}, "
        f"Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs shared with other work (1-minute load average "
        f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end): absolute times are "
        "noisy; the ratios, from interleaved runs, are the figures to read."
    )
    text = "\n".join(
        [
            "# irkit xla-cpu vs jax.jit",
            "",
            f"Command: `{cmd.strip()}`",
            "",
            header,
            "",
            method,
            "",
            columns,
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            geo,
            "",
            *[f"- {n}" for n in notes],
            env,
            "",
        ]
    )
    print()
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
