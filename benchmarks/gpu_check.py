"""GPU check for an NVIDIA GPU machine (made for an H200): build, verify and time in < 10 min.

    pip install -e '.[all,gpu]'                 # CUDA 13 wheels (driver >= 580), JAX's CUDA plugin
    python benchmarks/gpu_check.py              # on a GPU machine -> results/gpu_check.{md,json}
    python benchmarks/gpu_check.py --dry-run    # anywhere: build every CUDA artifact, then stop

What it does, in order (each step prints a line; any failure is a table row, not a crash):

1. Preflight: is there a GPU (``nvidia-smi``), the CUDA driver and libraries
   (:mod:`irkit.targets.cuda_env`: driver version, ``libcudart.so.13`` / NVRTC from the wheels),
   can TVM launch CUDA kernels, does JAX see a CUDA device, does torch have CUDA. Without a
   GPU it exits with status 2 and one line saying so (``--dry-run`` skips the GPU steps).
2. Build: the GPT-2-style and Llama-style example blocks (the torch models of
   ``tvm_speed.py``, imported through ``torch.export`` at ``--batch`` x ``--seq``) and the
   example models of ``examples/models/registry.py`` (``--models``: by default every tiny one,
   i.e. each family, attention form and dtype; ``all`` adds the small sizes; at their own
   example shapes) after the optimising pipeline, lowered for ``tvm-cuda``
   (CUDA source + PTX through nvcc, kernels traced to IR ops) and ``xla-gpu`` (deviceless for
   the H200 when no GPU is attached); plus the fused attention kernel alone. Artifacts are
   written under ``--artifacts``.
3. Check (GPU only): each target's outputs against the torch model run on the same GPU (torch
   with CUDA), else against the float64 interpreter (a CPU build of torch), on random inputs:
   max abs / rel error, pass/fail under the dtype tolerance (:mod:`irkit.check`).
4. Time (GPU only): each target on each block, and the fused attention kernel (f16, causal)
   against torch eager attention (``softmax(q kᵀ / √d) v``) and
   ``torch.nn.functional.scaled_dot_product_attention`` on the same device. Medians of
   ``--repeats`` calls after warm-up, with the inter-quartile spread.

Results: a markdown table and the same rows as JSON (``--out X.md`` also writes ``X.json``).
Nothing here is needed by CI; ``tests`` exercise the build path through ``--dry-run``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PIPELINE = ("canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce,"
            "tile-matmul{target=h200}")
BLOCKS = ("gpt2", "llama")
TARGETS = ("tvm-cuda", "xla-gpu")
TORCH_DEVICE = "cuda"
"""Where the torch peers run (a test sets "cpu" to exercise the decode step without a GPU)."""
ATTN_SHAPES = ((1, 12, 1024, 64), (8, 16, 2048, 64))
"""Fused-attention timing shapes (batch, heads, seq, head dim), causal, f16."""


def log(msg: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- preflight


def preflight() -> dict[str, str]:
    """What this machine can do, as ``{capability: "yes ..." | "no: why"}``."""
    facts: dict[str, str] = {}
    from irkit.targets.cuda_env import cuda_status

    cuda = cuda_status()  # preloads the CUDA 13 wheels' libraries before TVM is imported
    facts["cuda"] = f"{'no: ' + cuda.problem() if cuda.problem() else 'yes'} ({cuda.summary()})"
    smi = shutil.which("nvidia-smi")
    if smi:
        p = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=60, check=False)
        facts["gpu"] = f"yes: {p.stdout.strip()}" if p.returncode == 0 and p.stdout.strip() else \
            f"no: nvidia-smi failed ({p.stderr.strip()[:120]})"
    else:
        facts["gpu"] = "no: nvidia-smi not found"
    try:
        import tvm

        facts["tvm-cuda runtime"] = "yes" if tvm.cuda(0).exist else \
            "no: tvm.cuda(0) does not exist (no GPU, or a TVM wheel built without the CUDA runtime)"
    except Exception as e:  # noqa: BLE001 - any failure means no TVM CUDA here
        facts["tvm-cuda runtime"] = f"no: {type(e).__name__}: {str(e)[:120]}"
    try:
        from irkit.targets.xla_platform import attached_gpu

        dev = attached_gpu()
        facts["jax gpu"] = f"yes: {dev}" if dev is not None else "no: jax sees no CUDA device"
    except Exception as e:  # noqa: BLE001
        facts["jax gpu"] = f"no: {type(e).__name__}: {str(e)[:120]}"
    try:
        import torch

        facts["torch cuda"] = f"yes: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else \
            f"no: torch {torch.__version__} sees no CUDA device"
    except Exception as e:  # noqa: BLE001
        facts["torch cuda"] = f"no: {type(e).__name__}: {str(e)[:120]}"
    from irkit.targets.tvm_kernels.common import find_nvcc

    facts["nvcc"] = f"yes: {find_nvcc()}" if find_nvcc() else "no: nvcc not on PATH / CUDA_HOME"
    return facts


# --------------------------------------------------------------------------- build


TORCH: dict[str, tuple[Any, tuple[Any, ...]]] = {}
"""Block or model name -> (torch module, example inputs): the reference on the GPU."""


def example_models(size: str | None = None) -> list[str]:
    from examples.models.registry import MODELS

    return [m.name for m in MODELS if size is None or m.size == size]


def block_module(name: str, batch: int, seq: int) -> Any:
    """The example block (same configuration as ``tvm_speed.py``) or example model, imported with
    static shapes and run through the pipeline."""
    from irkit.frontends.torch_export import import_torch_factory
    from irkit.passmanager import PassManager

    if name in BLOCKS:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from tvm_speed import block

        model, inputs = block(name, batch, seq)
    else:
        from examples.models.registry import get

        model, inputs, _ = get(name)()
    TORCH[name] = (model, inputs)
    m = import_torch_factory(model, inputs, None)
    PassManager(PIPELINE).run(m)
    return m


def torch_reference(name: str, xs: list[np.ndarray]) -> list[np.ndarray] | None:
    """The torch model's outputs on the GPU for inputs ``xs``; None without torch CUDA."""
    import torch

    if not torch.cuda.is_available() or name not in TORCH:
        return None
    model, inputs = TORCH[name]
    model = model.to("cuda").eval()
    args = [torch.from_numpy(np.ascontiguousarray(x)).to("cuda") for x in xs[:len(inputs)]]
    with torch.no_grad():
        out = model(*args)
    leaves = torch.utils._pytree.tree_leaves(out)
    return [o.detach().float().cpu().numpy() if o.is_floating_point() else o.cpu().numpy() for o in leaves]


def build(blocks: list[str], batch: int, seq: int, outdir: Path, rows: list[dict[str, Any]],
          kernels: bool = True) -> dict[Any, Any]:
    """Lower every block on every target; returns ``{(block, target): (module, artifact)}``."""
    from irkit.targets.registry import get_target, load_targets

    load_targets()
    built: dict[Any, Any] = {}
    for b in blocks:
        m = block_module(b, batch, seq)
        for tname in TARGETS:
            row = {"step": "build", "block": b, "target": tname}
            t0 = time.perf_counter()
            try:
                t = get_target(tname)
                art = t.lower(m, {})
                art.write(outdir / f"{b}_{tname}")
                row["ok"] = True
                row["seconds"] = time.perf_counter() - t0
                files = ", ".join(f"{k} ({len(v) // 1024} KiB)" for k, v in sorted(art.files.items()))
                fus = art.info.get("fusion")
                row["note"] = f"{len(art.kernels)} kernels; {files}" + (f"; {fus}" if fus else "")
                if tname == "tvm-cuda" and "kernels.ptx" not in art.files:
                    row["ok"] = False
                    row["note"] += "; no PTX (nvcc missing)"
                built[(b, tname)] = (m, art)
            except Exception as e:  # noqa: BLE001 - a failed build is a row
                traceback.print_exc()
                row.update(ok=False, seconds=time.perf_counter() - t0, note=_line(e))
            log(f"build {b} {tname}: {'ok' if row['ok'] else 'FAILED'} ({row['seconds']:.1f} s) {row['note'][:160]}")
            rows.append(row)
    # the fused attention kernel alone (what the timing step launches)
    from irkit.targets.tvm_kernels import attention as at
    from irkit.targets.tvm_kernels import common as c

    for shape in ATTN_SHAPES if kernels else ():
        row = {"step": "build", "block": f"attention {'x'.join(map(str, shape))} f16 causal",
               "target": "tvm-cuda kernel"}
        t0 = time.perf_counter()
        try:
            k = at.attention(shape, shape, "float16", causal=True, target="cuda")
            art = c.inspect(k, ptxas=True)
            if art.ptx_error:
                raise RuntimeError(art.ptx_error.splitlines()[0])
            d = outdir / f"attention_{'x'.join(map(str, shape))}"
            d.mkdir(parents=True, exist_ok=True)
            from irkit.fileio import atomic_write

            atomic_write(d / "kernel.cu", art.cuda_source or "")
            atomic_write(d / "kernel.ptx", art.ptx or "")
            atomic_write(d / "ptxas.txt", art.ptxas_info or "")
            regs = [ln.strip() for ln in (art.ptxas_info or "").splitlines() if "registers" in ln]
            row.update(ok=True, seconds=time.perf_counter() - t0,
                       note=f"config {k.config}; {regs[0] if regs else ''}")
            built[("attention", shape)] = k
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            row.update(ok=False, seconds=time.perf_counter() - t0, note=_line(e))
        log(f"build attention {shape}: {'ok' if row['ok'] else 'FAILED'} ({row['seconds']:.1f} s)")
        rows.append(row)
    return built


# --------------------------------------------------------------------------- check and time


def timeit(fn: Callable[[], Any], sync: Callable[[], None], repeats: int, warmup: int = 3) -> tuple[float, float]:
    for _ in range(warmup):
        fn()
    sync()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    a = np.asarray(ts) * 1e3
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return float(med), float((q3 - q1) / med) if med else 0.0


def check_and_time(built: dict[Any, Any], batch: int, seq: int, repeats: int, rows: list[dict[str, Any]],
                   peers: bool = False, compile_peer: bool = False) -> None:
    from irkit.targets.registry import get_target

    from irkit.check import compare_all, module_tolerance
    from irkit.interp import random_inputs
    from irkit.interp import run as interp_run

    for (b, tname), val in built.items():
        if b == "attention":
            continue
        m, art = val
        row = {"step": "check+time", "block": b, "target": tname}
        try:
            t = get_target(tname)
            if art.runner is None:
                raise RuntimeError(f"{tname} cannot run here: {t.availability().reason}")
            xs = random_inputs(m.entry, 0, {})
            got = t.run(art, xs)
            want = torch_reference(b, xs)
            against = "torch (GPU)"
            if want is None or len(want) != len(got):
                want, against = interp_run(m, xs, float64=True), "float64 reference"
            rep = compare_all(got, want, module_tolerance(m))
            worst = max(rep.comparisons, key=lambda c: getattr(c, "max_abs", 0.0))
            med, spread = timeit(lambda: art.runner(xs), lambda: None, repeats)
            row.update(ok=rep.ok, ms=med, spread=spread, against=against,
                       note=f"vs {against} {'ok' if rep.ok else 'FAILED'}: {worst.describe()}; "
                            "ms: NumPy in and out (host copies included)")
            res = time_resident(tname, art, xs, repeats)
            if res is not None:
                rows.append(dict(row))
                row.update(step="time (resident)", ms=res[0], spread=res[1],
                           note="inputs on the GPU, outputs left there, synchronised")
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            row.update(ok=False, note=_line(e))
        log(f"check {b} {tname}: {row.get('note', '')[:160]}")
        rows.append(row)
    if not peers:
        return
    for b in dict.fromkeys(b for b, _ in built if b != "attention"):
        m = built[next(k for k in built if k[0] == b)][0]
        from irkit.interp import random_inputs

        xs = random_inputs(m.entry, 0, {})
        for label, comp in (("torch eager (GPU)", False), ("torch.compile (GPU)", True)):
            if comp and not compile_peer:
                continue
            row = {"step": "time (resident)", "block": b, "target": label}
            try:
                res = time_torch(b, xs, repeats, comp)
                if res is None:
                    continue
                row.update(ok=True, ms=res[0], spread=res[1], note="inputs on the GPU, synchronised")
            except Exception as e:  # noqa: BLE001
                row.update(ok=False, note=_line(e))
            log(f"time {b} {label}: {row.get('ms', row.get('note'))}")
            rows.append(row)


def time_resident(tname: str, art: Any, xs: list[np.ndarray], repeats: int) -> tuple[float, float] | None:
    """Median ms of one call with every input already on the GPU and the outputs left there (what a
    serving loop pays), or None where the artifact cannot be called that way."""
    if tname == "tvm-cuda":
        import tvm
        from irkit.targets.tvm_kernels.common import to_tvm
        from irkit.targets.tvm_session import _vm_of

        vm = _vm_of(art)
        if vm is None:
            return None
        dev = tvm.cuda(0)
        args = [to_tvm(np.asarray(x), dev) for x in xs]
        main = vm["main"]
        return timeit(lambda: main(*args), dev.sync, repeats)
    if tname == "xla-gpu":
        import jax

        exe = art.runner
        if not hasattr(exe, "put") or not hasattr(exe, "call"):
            return None
        args = [exe.put(np.asarray(x), i) for i, x in enumerate(xs)]
        if getattr(exe, "donate", None):
            return None  # donated inputs are consumed by the call: not re-runnable on the same buffers
        last: list[Any] = []

        def call() -> None:
            last[:] = [exe.call(args)]

        return timeit(call, lambda: jax.block_until_ready(last), repeats)
    return None


def time_torch(name: str, xs: list[np.ndarray], repeats: int, compile_: bool) -> tuple[float, float] | None:
    """The torch model on the GPU (eager, or ``torch.compile``d), inputs resident, synchronised."""
    import torch

    if not torch.cuda.is_available() or name not in TORCH:
        return None
    model, inputs = TORCH[name]
    model = model.to("cuda").eval()
    args = [torch.from_numpy(np.ascontiguousarray(x)).to("cuda") for x in xs[:len(inputs)]]
    fn = torch.compile(model) if compile_ else model

    def call() -> None:
        with torch.no_grad():
            fn(*args)

    return timeit(call, torch.cuda.synchronize, repeats)


def time_attention(built: dict[Any, Any], repeats: int, rows: list[dict[str, Any]]) -> None:
    """The fused kernel vs torch eager attention and SDPA, same inputs, same GPU."""
    import torch
    import tvm
    from irkit.targets.tvm_kernels import attention as at
    from irkit.targets.tvm_kernels import common as c

    dev = torch.device("cuda")
    for shape in ATTN_SHAPES:
        k = built.get(("attention", shape))
        name = f"attention {'x'.join(map(str, shape))} f16 causal"
        gen = torch.Generator(device=dev).manual_seed(0)
        q, kk, v = (torch.randn(shape, device=dev, dtype=torch.float16, generator=gen) for _ in range(3))
        sync = torch.cuda.synchronize
        scale = 1.0 / np.sqrt(shape[-1])
        mask = torch.ones(shape[2], shape[2], device=dev, dtype=torch.bool).tril()

        def eager() -> Any:
            s = (q @ kk.transpose(-1, -2)) * scale
            return torch.softmax(s.masked_fill(~mask, float("-inf")), -1) @ v

        def sdpa() -> Any:
            return torch.nn.functional.scaled_dot_product_attention(q, kk, v, is_causal=True)

        res = {}
        for label, fn in (("torch eager", eager), ("torch sdpa", sdpa)):
            res[label] = timeit(fn, sync, repeats)
        ref = sdpa().float().cpu().numpy()
        if k is not None and tvm.cuda(0).exist:
            try:
                lib, _ = c.compile_kernel(k)
                tdev = tvm.cuda(0)
                args = [tvm.runtime.tensor(x.cpu().numpy(), tdev) for x in (q, kk, v)]
                out = tvm.runtime.empty(shape, "float16", tdev)
                f = lib[k.name]
                f(*args, out)
                err = float(np.abs(out.numpy().astype(np.float32) - ref).max())
                ref64 = at.reference(*(x.cpu().numpy() for x in (q, kk, v)), causal=True)
                err64 = float(np.abs(out.numpy().astype(np.float64) - ref64).max())
                res["irkit tvm-cuda"] = timeit(lambda: f(*args, out), tdev.sync, repeats)
                note = f"max abs vs sdpa {err:.1e}, vs float64 {err64:.1e}"
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                note = f"irkit kernel: {_line(e)}"
        else:
            note = "irkit kernel not run: TVM has no CUDA runtime here" if k is not None else "irkit kernel not built"
        flops = 4 * shape[0] * shape[1] * shape[2] * shape[2] * shape[3] / 2  # causal half
        for label, (med, spread) in res.items():
            rows.append({"step": "attention", "block": name, "target": label, "ok": True, "ms": med,
                         "spread": spread, "note": f"{flops / med / 1e9:.1f} TF/s" +
                         (f"; {note}" if label == "irkit tvm-cuda" else "")})
        if "irkit tvm-cuda" not in res:
            rows.append({"step": "attention", "block": name, "target": "irkit tvm-cuda", "ok": False, "note": note})
        log(f"attention {shape}: " + ", ".join(f"{k_} {v_[0]:.3f} ms" for k_, v_ in res.items()))


def decode_rows(spec: str, rows: list[dict[str, Any]], deadline: float, steps: int = 20) -> None:
    """Decode-step times of a zoo decoder on tvm-cuda and xla-gpu (sessions, cache resident) and
    torch eager / torch.compile on the GPU, at positions 10 and 1000 where the cache allows."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from decode_bench import irkit_steps, torch_steps

    from irkit.commands.generate_cmd import apply_pipeline
    from irkit.zoo.decode import decode_model
    from irkit.zoo.run import DEFAULT_PIPELINE

    parts = spec.split(":")
    name, size = parts[0], parts[1] if len(parts) > 1 else "toy"
    batches = [int(x) for x in (parts[2] if len(parts) > 2 else "1").split("+")]
    for b in batches:
        if time.perf_counter() > deadline:
            rows.append({"step": "decode", "block": f"{name} {size} b{b}", "target": "-", "ok": False,
                         "note": "not run: past the deadline"})
            continue
        t0 = time.perf_counter()
        try:
            dm = decode_model(name, size, batch=b)
            dm_ir = apply_pipeline(dm, DEFAULT_PIPELINE)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            rows.append({"step": "decode", "block": f"{name} {size} b{b}", "target": "-", "ok": False,
                         "note": _line(e)})
            continue
        L = dm.max_cache_len
        pos = [p for p in (10, 1000) if p + steps + 1 < L] or [min(10, L - steps - 2)]
        log(f"decode {name} {size} b{b}: export + pipeline {time.perf_counter() - t0:.1f} s, cache {L}")
        engines: list[tuple[str, Callable[[], tuple[dict[int, float], float]]]] = [
            (t, partial(irkit_steps, dm_ir, t, pos, steps)) for t in TARGETS]
        engines += [(f"torch {'compile' if c else 'eager'} ({TORCH_DEVICE})",
                     partial(torch_steps, dm.torch_model, b, L, pos, steps, c, TORCH_DEVICE)) for c in (False, True)]
        for label, fn in engines:
            row: dict[str, Any] = {"step": "decode", "block": f"{name} {size} b{b} (cache {L})", "target": label}
            try:
                st, comp = fn()
                p0 = pos[0]
                row.update(ok=True, ms=st[p0] * 1e3, seconds=comp,
                           note="; ".join(f"pos {p}: {st[p] * 1e3:.3f} ms, {b / st[p]:,.0f} tok/s" for p in pos))
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                row.update(ok=False, note=_line(e))
            log(f"decode {name} {size} b{b} {label}: {row.get('note', '')[:160]}")
            rows.append(row)


# --------------------------------------------------------------------------- report


def _line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {(lines[-1] if lines else '')[:200]}"


def report(facts: dict[str, str], rows: list[dict[str, Any]], argv: list[str], wall: float, dry: bool) -> str:
    cmd = "python benchmarks/gpu_check.py " + shlex.join(argv)
    out = [f"# GPU check{' (dry run: build only)' if dry else ''}", "",
           f"Command: `{cmd.strip()}`", "",
           f"Host: {platform.machine()}, "
           f"{os.cpu_count()} CPU cores; took {wall:.0f} s. irkit pipeline: `{PIPELINE}`.", "",
           "| capability | here |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in facts.items()]
    out += ["", "| step | block | target | ok | ms (median) | spread | seconds | notes |",
            "|---|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        ms = f"{r['ms']:.3f}" if "ms" in r else ""
        sp = f"{r['spread']:.0%}" if "spread" in r else ""
        sec = f"{r['seconds']:.1f}" if "seconds" in r else ""
        note = str(r.get("note", "")).replace("|", "/")
        out.append(f"| {r['step']} | {r['block']} | {r['target']} | {'yes' if r.get('ok') else 'NO'} | "
                   f"{ms} | {sp} | {sec} | {note} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="build every artifact, run nothing")
    ap.add_argument("--blocks", default=",".join(BLOCKS))
    ap.add_argument("--models", default="tiny",
                    help="example models (examples/models/registry.py), comma-separated; 'tiny' (every "
                         "model of tiny size: each family, attention form and dtype), 'all' or 'none'")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--decode", default="",
                    help="zoo decoders to time decode steps of, MODEL:SIZE[:BATCHES], comma-separated "
                         "(e.g. gpt2:full:1+8): tvm-cuda and xla-gpu sessions with the KV cache resident "
                         "against torch eager and torch.compile on the GPU (benchmarks/decode_bench.py)")
    ap.add_argument("--deadline-s", type=float, default=1e9,
                    help="start no new model after this many seconds (the rows say what was not run)")
    ap.add_argument("--artifacts", default="out/gpu_check", help="folder for the built artifacts")
    ap.add_argument("--out", default=None,
                    help="results file (default benchmarks/results/gpu_check.md; a dry run writes "
                         "nothing unless given; '-' for stdout)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    facts = preflight()
    for k, v in facts.items():
        log(f"{k}: {v}")
    if not args.dry_run and not facts["gpu"].startswith("yes"):
        print(f"gpu_check.py: no NVIDIA GPU here ({facts['gpu'][4:]}); run it on a GPU machine, or pass "
              "--dry-run to build the CUDA artifacts without running them", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    blocks = [b for b in args.blocks.split(",") if b]
    for b in blocks:
        if b not in BLOCKS:
            print(f"gpu_check.py: unknown block {b!r}; expected one of {', '.join(BLOCKS)}", file=sys.stderr)
            return 2
    known = example_models()
    named = {"all": known, "none": [], "tiny": example_models("tiny"), "small": example_models("small")}
    models = named.get(args.models) or [x for x in args.models.split(",") if x and x not in named]
    for x in models:
        if x not in known:
            print(f"gpu_check.py: unknown example model {x!r}; expected one of {', '.join(known)}", file=sys.stderr)
            return 2
    blocks += models
    outdir = Path(args.artifacts)
    out = args.out if args.out is not None else (None if args.dry_run else
                                                 str(ROOT / "benchmarks/results/gpu_check.md"))
    deadline = t_start + args.deadline_s

    def save() -> None:  # after every step, so that a run cut short still leaves its rows
        text = report(facts, rows, argv, time.perf_counter() - t_start, args.dry_run)
        if out == "-":
            return
        if out:
            from irkit.fileio import atomic_write

            atomic_write(Path(out), text)
            doc = {"command": ["python", "benchmarks/gpu_check.py", *argv], "dry_run": args.dry_run,
                   "seconds": time.perf_counter() - t_start, "facts": facts, "rows": rows}
            atomic_write(Path(out).with_suffix(".json"), json.dumps(doc, indent=2, default=str) + "\n")

    gpu = not args.dry_run
    if gpu and facts["torch cuda"].startswith("yes"):
        time_attention(build([], args.batch, args.seq, outdir, rows), args.repeats, rows)
    elif gpu:
        rows.append({"step": "attention", "block": "-", "target": "torch", "ok": False,
                     "note": f"torch without CUDA: {facts['torch cuda']}"})
    else:
        build([], args.batch, args.seq, outdir, rows)
    save()
    n_blocks = len(blocks) - len(models)
    steps = [("model", b) for b in blocks[:n_blocks]] + [("decode", d) for d in args.decode.split(",") if d and gpu] + \
        [("model", m) for m in models]
    for kind, what in steps:
        if kind == "decode":
            decode_rows(what, rows, deadline)
        elif time.perf_counter() > deadline:
            rows.append({"step": "build", "block": what, "target": "-", "ok": False,
                         "note": f"not run: past the --deadline-s of {args.deadline_s:.0f} s"})
        else:
            built = build([what], args.batch, args.seq, outdir, rows, kernels=False)
            if gpu:
                check_and_time(built, args.batch, args.seq, args.repeats, rows, peers=True,
                               compile_peer=what in BLOCKS)
        save()
    save()
    if out == "-":
        print(report(facts, rows, argv, time.perf_counter() - t_start, args.dry_run))
    elif out:
        log(f"wrote {out} and {Path(out).with_suffix('.json')}")
    failed = [r for r in rows if not r.get("ok")]
    log(f"done in {time.perf_counter() - t_start:.0f} s; {len(failed)} failing row(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
