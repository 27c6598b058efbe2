"""TVM hand-scheduled GEMM and fused attention vs NumPy, on this CPU.

    python benchmarks/tvm_gemm.py                      # 512³ and 1024³, 1 and 2 threads
    python benchmarks/tvm_gemm.py --threads 1 --repeats 11 --out gemm.md

Each thread count runs in its own subprocess with ``TVM_NUM_THREADS``, ``OMP_NUM_THREADS`` and
``OPENBLAS_NUM_THREADS`` set before anything is imported (both thread pools read them once).
Inside, TVM and NumPy are timed alternately, repeat by repeat, so both see the same machine
state; the table gives medians, the min-max spread, and the median of the per-repeat ratios
(TVM GF/s over NumPy GF/s). Compile time is reported apart from run time.

With more than one thread, each side waits ``--settle`` seconds (default 0.25) before it is
timed: both thread pools spin for a while after a call (OpenBLAS's workers for about 0.1 s), and
on a 2-core machine the side timed right after the other ran on one core. Measured here before
the pause: TVM 2-thread GEMM at 34 GF/s timed right after NumPy, 233 GF/s alone.

GEMM rows per size: the default tiles (``matmul.default_tiles``); the tiles ``irkit tune`` would pick
(its cost model's ``--tune-top`` best-ranked tiles, each timed here, the fastest kept); and those
tiles with B a constant packed once at build time, as a model's weight is (the kernel then skips
its per-call B packing, which OpenBLAS pays on every call).

Attention: the fused online-softmax kernel against a NumPy reference that materialises the
score matrix (``q @ kᵀ``, causal mask, max-subtracted softmax, ``@ v``) at a GPT-2-small shape
(1 × 12 heads × S × 64, causal).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from typing import Any


def _child(args: argparse.Namespace) -> None:
    import numpy as np
    from irkit.targets.tvm_kernels import attention as at
    from irkit.targets.tvm_kernels import common as c
    from irkit.targets.tvm_kernels import matmul as mm

    rng = np.random.default_rng(0)
    rows: list[dict] = []

    def settle() -> None:  # let the other side's spinning pool threads go idle
        if args.threads_one > 1:
            time.sleep(args.settle)
    def measure(k: Any, a: Any, b_in: Any, lib: Any, flops: float) -> tuple[list[float], list[float], list[float]]:
        number = max(1, int(2e9 // flops))  # ~2 GFLOP per timed batch
        tvm_gf, np_gf, ratio = [], [], []
        for _ in range(args.repeats):
            settle()
            t = float(np.mean(c.time_kernel(k, a, b_in, lib=lib, number=number, repeat=1)))
            settle()
            start = time.perf_counter()
            for _ in range(number):
                a @ b
            t_np = (time.perf_counter() - start) / number
            tvm_gf.append(flops / t / 1e9)
            np_gf.append(flops / t_np / 1e9)
            ratio.append(tvm_gf[-1] / np_gf[-1])
        return tvm_gf, np_gf, ratio

    def tuned_tile(n: int, a: Any, b: Any) -> tuple[int, int, int]:
        """The tuner's choice: its cost model's top ``--tune-top`` tiles (irkit.sweep.tune), timed here."""
        from irkit.targets.hwspec import load_spec

        from irkit.sweep.tune import MatmulSite, candidates, model_seconds

        site = MatmulSite(0, (n, n), (n, n), "f32", True)
        hw = load_spec("host-cpu")
        cands = candidates(site)
        ranked = sorted(cands, key=lambda t: model_seconds(site, t, hw))[: args.tune_top]
        if cands[0] not in ranked:
            ranked.append(cands[0])
        best, best_t = ranked[0], float("inf")
        for tile in ranked:
            kt = mm.matmul((n, n), (n, n), tile_m=tile[0], tile_n=tile[1], tile_k=tile[2])
            lib = c.compile_kernel(kt)[0]
            settle()
            t = min(c.time_kernel(kt, a, b, lib=lib, number=max(1, int(5e8 // (2.0 * n**3))), repeat=3))
            if t < best_t:
                best, best_t = tile, t
        return best

    for n in args.sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        flops = 2.0 * n**3
        variants: list[tuple[str, dict[str, Any], bool]] = [("default tiles", {}, False)]
        if args.tune_top:
            tm, tn, tk = tuned_tile(n, a, b)
            tiles = {"tile_m": tm, "tile_n": tn, "tile_k": tk}
            variants += [("tuned tiles", tiles, False), ("tuned tiles, B constant (packed at build)", tiles, True)]
        for label, tiles, packed in variants:
            k = mm.matmul((n, n), (n, n), b_packed=packed, **tiles)
            lib, compile_s = c.compile_kernel(k)
            b_in = mm.pack_b(b, k.config["padded"], k.config["micro"][1]) if packed else b
            (out,) = c.run(k, a, b_in, lib=lib)
            err = float(np.abs(out - a @ b).max())
            tvm_gf, np_gf, ratio = measure(k, a, b_in, lib, flops)
            rows.append(
                {
                    "kind": "gemm",
                    "variant": label,
                    "n": n,
                    "tvm": tvm_gf,
                    "numpy": np_gf,
                    "ratio": ratio,
                    "compile_s": compile_s,
                    "max_abs_err": err,
                    "config": {k_: k.config[k_] for k_ in ("tile_m", "tile_n", "tile_k", "micro")},
                }
            )
    for s in args.attn_seq:
        shape = (1, 12, s, 64)
        q, kk, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
        ker = at.attention(shape, shape, causal=True)
        lib, compile_s = c.compile_kernel(ker)
        (out,) = c.run(ker, q, kk, v, lib=lib)
        mask = np.tril(np.ones((s, s), dtype=bool))
        scale = np.float32(1 / 8)

        err = float(np.abs(out - _numpy_attention(q, kk, v, mask, scale)).max())
        tvm_ms, np_ms, ratio = [], [], []
        for _ in range(args.repeats):
            settle()
            t = float(np.mean(c.time_kernel(ker, q, kk, v, lib=lib, number=2, repeat=1)))
            settle()
            start = time.perf_counter()
            _numpy_attention(q, kk, v, mask, scale)
            _numpy_attention(q, kk, v, mask, scale)
            t_np = (time.perf_counter() - start) / 2
            tvm_ms.append(t * 1e3)
            np_ms.append(t_np * 1e3)
            ratio.append(t_np / t)
        rows.append(
            {
                "kind": "attention",
                "n": s,
                "tvm": tvm_ms,
                "numpy": np_ms,
                "ratio": ratio,
                "compile_s": compile_s,
                "max_abs_err": err,
                "gflops": ker.flops / 1e9,
            }
        )
    print("RESULT " + json.dumps({"threads": args.threads_one, "cpu": c.host_cpu(), "rows": rows}))


def _numpy_attention(q: Any, k: Any, v: Any, mask: Any, scale: Any) -> Any:
    """The reference: materialised scores, causal mask, max-subtracted softmax, then @ v."""
    import numpy as np

    sc = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    sc = np.where(mask, sc, -np.inf)
    e = np.exp(sc - sc.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


def _stats(xs: list[float]) -> str:
    xs = sorted(xs)
    med = xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])
    return f"{med:.1f} ({xs[0]:.1f}–{xs[-1]:.1f})"


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[512, 1024])
    p.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    p.add_argument(
        "--attn-seq",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[1024],
        help="GPT-2-small attention sequence lengths ('' to skip)",
    )
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--tune-top", type=int, default=4,
                   help="time the tuner's K best-ranked tiles per size and report the fastest (0: default tiles only)")
    p.add_argument("--settle", type=float, default=0.25,
                   help="seconds each side waits before it is timed, with more than one thread")
    p.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "tvm_gemm.md"),
        help="results file ('-' to print only)",
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--threads-one", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args)
        return
    results = []
    for nt in args.threads:
        env = dict(os.environ)
        for var in (
            "TVM_NUM_THREADS",
            "OMP_NUM_THREADS",
            "OPENBLAS_NUM_THREADS",
            "MKL_NUM_THREADS",
        ):
            env[var] = str(nt)
        cmd = [
            sys.executable,
            __file__,
            "--child",
            "--threads-one",
            str(nt),
            "--repeats",
            str(args.repeats),
            "--sizes",
            ",".join(map(str, args.sizes)),
            "--attn-seq",
            ",".join(map(str, args.attn_seq)),
            "--settle",
            str(args.settle),
            "--tune-top",
            str(args.tune_top),
        ]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            sys.exit(f"benchmark child ({nt} threads) failed:\n{proc.stderr[-3000:]}")
        results.append(json.loads(line[0][len("RESULT ") :]))
    cpu = results[0]["cpu"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    command = "python benchmarks/tvm_gemm.py " + " ".join(shlex.quote(x) for x in sys.argv[1:])
    lines = [
        "# TVM scheduled GEMM and fused attention vs NumPy/OpenBLAS (CPU)",
        "",
        f"Command: `{command.strip()}`",
        "",
        "The machine is shared and noisy (2 vCPUs, often at load 10+): TVM and NumPy are timed "
        "alternately within each repeat, so read the per-repeat ratios, not absolute GF/s.",
        "",
        (
            f"TVM hand-scheduled kernels vs NumPy on `{cpu}` (LLVM host CPU), {args.repeats} repeats, "
            f"TVM and NumPy timed alternately; median (min–max). Load average at the end: {load:.1f}."
        ),
        "",
        "| kernel | threads | TVM | NumPy | ratio TVM/NumPy | compile s | max abs err |",
        "|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for r in res["rows"]:
            if r["kind"] == "gemm":
                cfg = r["config"]
                name = (f"GEMM f32 {r['n']}³ (GF/s), {r['variant']} {cfg['tile_m']}×{cfg['tile_n']}×{cfg['tile_k']}"
                        f" micro {cfg['micro'][0]}×{cfg['micro'][1]}")
                ratio = _median(r["ratio"])
            else:
                name = f"attention 1×12×{r['n']}×64 causal (ms)"
                ratio = _median(r["ratio"])  # NumPy time / TVM time: higher is better for TVM
            lines.append(
                f"| {name} | {res['threads']} | {_stats(r['tvm'])} | {_stats(r['numpy'])} | "
                f"{ratio:.2f} | {r['compile_s']:.2f} | {r['max_abs_err']:.1e} |"
            )
    lines += [
        "",
        (
            "Ratio: GEMM rows divide GF/s (TVM / NumPy); attention rows divide times (NumPy / TVM), "
            "so above 1 means TVM is faster in both."
        ),
    ]
    text = "\n".join(lines)
    print(text)
    if args.out != "-":
        from irkit.fileio import atomic_write

        atomic_write(args.out, text + "\n")


if __name__ == "__main__":
    main()
