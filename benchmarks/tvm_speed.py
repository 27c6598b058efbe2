"""irkit ``tvm-llvm`` against onnxruntime, TVM's own default pipeline and torch eager.

One transformer block (one layer plus embedding and LM head) of the GPT-2-style and the
Llama-style example models (``examples/models``: hidden 256, 8 heads, vocabulary 2048; Llama
with 2 KV heads and a SiLU-gated MLP of 688), at batch 1 and 8, sequence 128 and 512. Every
engine runs the same torch model with the same weights and token ids:

- ``irkit/tvm-llvm``: ``torch.export`` -> irkit IR (static shapes) -> the optimising pipeline
  (``PIPELINE`` below, ending in ``tile-matmul{target=host-cpu}``) -> the ``tvm-llvm`` target
  (scheduled TensorIR kernels in one Relax VM module).
- ``ort``: the same imported irkit module through irkit's ``ort`` target (standard ONNX,
  ``ORT_ENABLE_ALL``), i.e. onnxruntime does its own graph optimisation.
- ``tvm-default``: ``torch.export`` -> ``tvm.relax.frontend.torch.from_exported_program`` ->
  ``tvm.compile`` with TVM's default Relax pipeline for the same LLVM target (host ``mcpu``),
  no tuning. It is two orders of magnitude slower, so it is timed in only a few rounds.
- ``torch-eager``: the module under ``torch.inference_mode``, for context.

Every engine uses the same number of threads (``--threads``, default 2 = every core here):
``TVM_NUM_THREADS`` for both TVM engines, ``intra_op_num_threads`` for onnxruntime,
``torch.set_num_threads`` for torch. Timing is interleaved: each round calls every engine once,
in turn, so machine noise hits all of them alike. Each call includes the host-to-runtime copy
of the token ids and the copy of the logits back to NumPy for every engine.

Usage::

    python benchmarks/tvm_speed.py                       # full table -> results/tvm_speed.md
    python benchmarks/tvm_speed.py --models gpt2 --shapes 1x128 --rounds 5 --out -
"""

from __future__ import annotations

import argparse
import os
import sys

_THREADS = "2"
for _i, _a in enumerate(sys.argv):
    if _a == "--threads" and _i + 1 < len(sys.argv):
        _THREADS = sys.argv[_i + 1]
    elif _a.startswith("--threads="):
        _THREADS = _a.split("=", 1)[1]
os.environ["TVM_NUM_THREADS"] = _THREADS  # read once when TVM's thread pool starts
os.environ.setdefault("OMP_NUM_THREADS", _THREADS)

import contextlib
import io
import platform
import shlex
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PIPELINE = ("canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce,"
            "tile-matmul{target=host-cpu}")
SHAPES = ((1, 128), (1, 512), (8, 128), (8, 512))
ENGINES = ("irkit/tvm-llvm", "ort", "tvm-default", "torch-eager")


def block(family: str, batch: int, seq: int) -> tuple[Any, tuple[Any, ...]]:
    """The torch module of one ``family`` block and its token ids (batch x seq)."""
    if family == "gpt2":
        from examples.models import gpt2 as g

        cfg = g.GPT2Config(hidden=256, layers=1, heads=8, vocab_size=2048, max_positions=512,
                           tie_word_embeddings=False, batch=batch, seq=seq)
        model, inputs, _ = g.gpt2(cfg)
    elif family == "llama":
        from examples.models import llama as ll

        cfg = ll.LlamaConfig(vocab_size=2048, hidden=256, intermediate=688, layers=1, heads=8,
                             kv_heads=2, max_positions=512, batch=batch, seq=seq)
        model, inputs, _ = ll.llama(cfg)
    else:
        raise SystemExit(f"tvm_speed.py: unknown model {family!r}; expected gpt2 or llama")
    return model, inputs


@dataclass
class Engine:
    name: str
    fn: Callable[[], np.ndarray] | None = None
    error: str = ""
    compile_s: float = 0.0
    times: list[float] = field(default_factory=list)
    max_diff: float | None = None
    max_rounds: int | None = None


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[-1][:160] if lines else ''}"


@contextlib.contextmanager
def _quiet():
    import logging
    import warnings

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        old = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(old)


def _logits(out: Any) -> np.ndarray:
    import torch

    while not hasattr(out, "numpy") and not hasattr(out, "logits") and hasattr(out, "__getitem__"):
        out = out[0]  # tuples, lists and TVM's runtime arrays of tensors: the logits come first
    out = getattr(out, "logits", out)
    if isinstance(out, torch.Tensor):
        return out.detach().numpy()
    if hasattr(out, "numpy"):
        return out.numpy()
    return np.asarray(out)


def build_engines(family: str, batch: int, seq: int, threads: int, skip: set[str],
                  default_max_tokens: int) -> list[Engine]:
    import torch
    from irkit.targets.registry import get_target, load_targets

    from irkit.frontends.torch_export import import_torch_factory
    from irkit.passmanager import PassManager

    load_targets()
    model, inputs = block(family, batch, seq)
    ids = inputs[0].numpy()
    engines: list[Engine] = []

    eager = Engine("torch-eager")

    def eager_fn() -> np.ndarray:
        with torch.inference_mode():
            return _logits(model(torch.from_numpy(ids)))

    eager.fn = eager_fn
    with _quiet():
        imported = import_torch_factory(model, inputs, None)

    def irkit_engine(name: str, target: str, pipeline: str | None, **kw: Any) -> Engine:
        e = Engine(name)
        try:
            t0 = time.perf_counter()
            m = imported.clone()
            if pipeline:
                PassManager(pipeline).run(m)
            t = get_target(target)
            for k, v in kw.items():
                setattr(t, k, v)
            art = t.lower(m, {})
            e.compile_s = time.perf_counter() - t0
            if art.info.get("fusion"):
                e.error = ""  # built, but say how: the unfused fallback
                e.name += " (unfused fallback)"
            e.fn = lambda: t.run(art, [ids])[0]
        except Exception as ex:  # noqa: BLE001 - a failing engine is a table row
            traceback.print_exc()
            e.error = _first_line(ex)
        return e

    if "irkit/tvm-llvm" not in skip:
        engines.append(irkit_engine("irkit/tvm-llvm", "tvm-llvm", PIPELINE))
    if "ort" not in skip:
        engines.append(irkit_engine("ort", "ort", None, threads=threads))
    if "tvm-default" not in skip and batch * seq <= default_max_tokens:
        engines.append(build_tvm_default(model, inputs, ids))
    engines.append(eager)
    return engines


def build_tvm_default(model: Any, inputs: tuple[Any, ...], ids: np.ndarray) -> Engine:
    e = Engine("tvm-default")
    try:
        import torch
        import tvm
        from irkit.targets.tvm_kernels.common import cpu_target
        from tvm import relax
        from tvm.relax.frontend.torch import from_exported_program

        t0 = time.perf_counter()
        with _quiet():
            ep = torch.export.export(model, inputs)
            mod = from_exported_program(ep)
        ex = tvm.compile(mod, target=cpu_target())
        e.compile_s = time.perf_counter() - t0
        vm = relax.VirtualMachine(ex, tvm.cpu())
        main = vm["main"]
        e.fn = lambda: _logits(main(tvm.runtime.tensor(ids)))
    except Exception as ex:  # noqa: BLE001
        traceback.print_exc()
        e.error = _first_line(ex)
    return e


def measure(engines: list[Engine], rounds: int, slow_rounds: int, budget_s: float) -> None:
    """Warm up, then interleave: every round calls each engine once."""
    ref: np.ndarray | None = None
    live = [e for e in engines if e.fn is not None]
    for e in live:  # warm-up call doubles as the numerics check against torch eager
        try:
            out = e.fn()  # type: ignore[misc]
        except Exception as ex:  # noqa: BLE001
            traceback.print_exc()
            e.error, e.fn = _first_line(ex), None
            continue
        if e.name == "torch-eager":
            ref = out
        e.max_diff = float("nan") if out is None else 0.0
        e._out = out  # type: ignore[attr-defined]
    for e in live:
        if e.fn is not None and ref is not None:
            e.max_diff = float(np.abs(np.asarray(e._out, np.float64) - ref).max())  # type: ignore[attr-defined]
    live = [e for e in live if e.fn is not None]
    for e in live:
        if e.name == "tvm-default":
            e.max_rounds = slow_rounds
    start = time.perf_counter()
    for r in range(rounds):
        for e in live:
            if e.max_rounds is not None and len(e.times) >= e.max_rounds:
                continue
            t0 = time.perf_counter()
            e.fn()  # type: ignore[misc]
            e.times.append(time.perf_counter() - t0)
            if e.max_rounds is not None and e.times[-1] > 20:
                e.max_rounds = len(e.times)  # one call of over 20 s is enough to place it
        if time.perf_counter() - start > budget_s and r >= 2:
            break


def stats(ts: list[float]) -> tuple[float, float, float]:
    a = np.asarray(ts) * 1e3
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return float(med), float((q3 - q1) / med) if med else 0.0, float(a.min())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--shapes", default=",".join(f"{b}x{s}" for b, s in SHAPES))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds (fast engines)")
    ap.add_argument("--slow-rounds", type=int, default=3, help="rounds for tvm-default")
    ap.add_argument("--budget", type=float, default=90.0, help="seconds of timing per shape")
    ap.add_argument("--skip", default="", help="engines to leave out, comma-separated")
    ap.add_argument("--tvm-default-max-tokens", type=int, default=1024,
                    help="run tvm-default only where batch x seq is at most this (one call at "
                         "8x128 takes about a minute here)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/tvm_speed.md"),
                    help="results file ('-' for stdout only)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    shapes = []
    for s in args.shapes.split(","):
        try:
            b, q = (int(x) for x in s.lower().split("x"))
        except ValueError:
            raise SystemExit(f"tvm_speed.py: --shapes entry {s!r} is not BATCHxSEQ (e.g. 8x512)") from None
        shapes.append((b, q))
    skip = {x for x in args.skip.split(",") if x}
    load0 = os.getloadavg()
    t_start = time.perf_counter()
    rows: list[tuple[str, int, int, list[Engine]]] = []
    for family in args.models.split(","):
        for b, s in shapes:
            print(f"== {family} {b}x{s}", file=sys.stderr, flush=True)
            engines = build_engines(family, b, s, args.threads, skip, args.tvm_default_max_tokens)
            measure(engines, args.rounds, args.slow_rounds, args.budget)
            rows.append((family, b, s, engines))
            for e in engines:
                med = stats(e.times)[0] if e.times else float("nan")
                print(f"   {e.name:28s} {med:10.2f} ms  n={len(e.times)} {e.error}", file=sys.stderr)
    text = report(rows, args, argv, load0, time.perf_counter() - t_start)
    if args.out == "-":
        print(text)
    else:
        from irkit.fileio import atomic_write

        atomic_write(Path(args.out), text)
        print(f"wrote {args.out}", file=sys.stderr)
    return 0


def report(rows: list[tuple[str, int, int, list[Engine]]], args: argparse.Namespace,
           argv: list[str] | None, load0: tuple[float, float, float], wall: float) -> str:
    import onnxruntime
    import torch
    import tvm

    cmd = "python benchmarks/tvm_speed.py " + shlex.join(argv if argv is not None else sys.argv[1:])
    load1 = os.getloadavg()
    out = [
        "# irkit tvm-llvm vs onnxruntime, TVM default pipeline and torch eager (CPU)",
        "",
        f"Command: `{cmd.strip()}`",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, LLVM mcpu "
        f"`{_mcpu()}`; load average {load0[0]:.1f} at start, {load1[0]:.1f} at end (the machine is "
        f"shared and noisy: absolute times move by 2x between runs, the ratios of engines timed "
        f"interleaved in the same rounds are what to read). Run took {wall / 60:.1f} min.",
        f"Versions: tvm {tvm.__version__}, onnxruntime {onnxruntime.__version__}, torch {torch.__version__}.",
        f"Threads: {args.threads} for every engine (TVM_NUM_THREADS for both TVM engines, "
        f"onnxruntime intra_op_num_threads, torch.set_num_threads).",
        f"irkit pipeline: `{PIPELINE}`.",
        "Models: one block of the GPT-2-style and Llama-style example models (hidden 256, 8 heads, "
        "vocabulary 2048, embedding + 1 layer + LM head; Llama: 2 KV heads, MLP 688), token ids in, "
        "logits out.",
        f"Timing: 1 warm-up call, then up to {args.rounds} interleaved rounds (fewer once a shape "
        f"has used {args.budget:.0f} s); tvm-default in only the first {args.slow_rounds} (one if a "
        f"call takes over 20 s), and only up to {args.tvm_default_max_tokens} tokens (batch x seq). Median "
        "ms; spread = inter-quartile range / median. Ratios are of medians from the same run.",
        "",
        "## Summary",
        "",
        "| model | batch x seq | tvm-llvm ms | ort ms | tvm-llvm / ort | tvm-default ms | "
        "tvm-default / tvm-llvm | torch eager ms | eager / tvm-llvm |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for family, b, s, engines in rows:
        med = {e.name.split(" ")[0]: stats(e.times)[0] for e in engines if e.times}
        tl, o, td, te_ = (med.get(k) for k in ENGINES)

        def f(x: float | None) -> str:
            return f"{x:.2f}" if x is not None else "—"

        def r(a: float | None, b_: float | None) -> str:
            return f"{a / b_:.2f}×" if a and b_ else "—"

        out.append(f"| {family} | {b}x{s} | {f(tl)} | {f(o)} | {r(tl, o)} | {f(td)} | {r(td, tl)} | "
                   f"{f(te_)} | {r(te_, tl)} |")
    out += ["", "## All engines", "",
            "| model | batch x seq | engine | median ms | spread | min ms | calls | compile s | "
            "max abs diff vs eager | notes |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for family, b, s, engines in rows:
        for e in engines:
            if e.times:
                med, spread, mn = stats(e.times)
                cells = f"{med:.2f} | {spread:.0%} | {mn:.2f} | {len(e.times)}"
            else:
                cells = "failed | | |"
            diff = f"{e.max_diff:.1e}" if e.max_diff is not None else "—"
            comp = f"{e.compile_s:.1f}" if e.compile_s else "—"
            out.append(f"| {family} | {b}x{s} | {e.name} | {cells} | {comp} | {diff} | {e.error} |")
    return "\n".join(out) + "\n"


def _mcpu() -> str:
    from irkit.targets.tvm_kernels.common import host_cpu

    return host_cpu()


if __name__ == "__main__":
    sys.exit(main())
