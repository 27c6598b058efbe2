"""irkit's analytic cost next to XLA's own cost analysis of the TPU ahead-of-time compiles.

For each example model (``examples/models``, float32, torch.export import, then the
optimising pipeline) and each TPU generation (v4, v5e, v5p, v6e):

* irkit: ``irkit.targets.estimate.estimate(module, "tpu-vX")``: FLOPs, bytes and modelled
  seconds, summed over the IR's ops (a fused region reads its inputs and writes its
  outputs once; the systolic model times the matmuls, the roofline the rest);
* XLA: the ``xla-tpu-vX`` target's artifact of the same module at the same bindings:
  ``compiled.cost_analysis()`` (``flops``, ``transcendentals``, ``bytes accessed``),
  ``compiled.memory_analysis()`` (argument, output, temp, generated code) and the TPU
  compiler's own per-kernel ``estimated_cycles`` from the optimised HLO, summed and turned
  into seconds with the chip's clock from ``targets/specs``.

To say where the byte counts part, the optimised HLO's entry computation is re-counted
here: every kernel's operands and results at their tiled (T(8,128)-padded) sizes, with
asynchronous weight prefetches into VMEM (``copy-start``/``copy-done`` pairs) counted
as a read and a write each, bitcasts free. When this reconstruction lands within a few
per cent of XLA's ``bytes accessed``, those rules are what XLA counts. A few single-op
calibration modules (an aligned and two unaligned matmuls, an elementwise chain) come
first, so each rule can be seen on its own.

Writes benchmarks/results/tpu_cost.md.

Every chip is compiled with f32 dots at ``precision="highest"`` (six bf16 passes, the
f32 rate irkit's TPU descriptions assume: ``f32_passes = 6``); the ``--default-chips``
are compiled once more at the targets' default precision (one bf16 pass) to show what
that changes.

Run: python benchmarks/tpu_cost.py [--models gpt2_tiny,...] [--chips v4,v5e,v5p,v6e]
     [--default-chips v5e]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Loading libtpu takes a machine-wide lock; see targets/xla.py.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

PIPELINE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"
MODELS = (
    "gpt2_tiny",
    "gpt2_small",
    "llama_tiny",
    "llama_small",
    "t5_tiny",
    "t5_small",
    "vit_tiny",
    "vit_small",
)
CHIPS = ("v4", "v5e", "v5p", "v6e")
WHY = """\
## Why they differ

- FLOPs: both count 2·M·N·K per matmul; XLA counts elementwise work on its rewritten HLO and keeps exp/tanh/rsqrt apart as transcendentals, irkit one FLOP per registry op and element.
- Bytes: XLA counts every asynchronous copy or slice of a weight into on-chip VMEM on its start and on its done, a read and a write each (four times the weight; `prefetch %`); arrays at their (8,128)-tiled size (`args` > 1 where dims are below 128); the layout copies it inserts (`layout %`). irkit counts each operand once at its logical size, but moves intermediates through HBM that XLA's larger fusions keep on chip (the `tanh(x)*x+x` rows). `recon/XLA` near 1 says these rules account for XLA's figure.
- Precision: at the default precision XLA keeps some dot-only intermediates in bf16 (fewer bytes); FLOPs are counted the same.
- Time: irkit models no per-kernel fixed cost, which weighs most on the tiny models; XLA's cycles are divided by the spec's clock, so on v6e they depend on which MXU-count/clock reading is right. v5p is compiled as one program over the chip's two TensorCores (it alone has temporary buffers), and XLA's time for it is not explained by irkit's description.
- The discussion with numbers is in docs/hardware.md ("Whole modules, and XLA's own count of them").
"""


@dataclass
class Row:
    model: str
    chip: str
    precision: str
    bindings: dict[str, int]
    irkit_flops: float
    irkit_bytes: float
    irkit_seconds: float
    irkit_gemm_share: float
    irkit_args: float
    xla_flops: float
    xla_trans: float
    xla_bytes: float
    xla_seconds: float | None
    xla_kernels: int
    xla_timed_kernels: int
    memory: dict[str, int]
    hlo: Any
    compile_s: float


def _args_bytes(module: Any, bindings: dict[str, int], weights_bytes: float) -> float:
    from irkit.ir.types import eval_dim

    total = weights_bytes
    for a in module.entry.args:
        n = math.prod(eval_dim(d, bindings) for d in a.type.shape)
        total += n * a.type.dtype.itemsize
    return total


def measure(module: Any, name: str, chip: str, precision: str = "highest") -> Row:
    from irkit.targets.estimate import estimate
    from irkit.targets.hwspec import load_spec
    from irkit.targets.registry import get_target
    from irkit.targets.xla import hlo_traffic

    from irkit.interp import default_bindings

    spec = load_spec(f"tpu-{chip}")
    bindings = dict(default_bindings(module.entry, None))
    est = estimate(module, spec, bindings)
    t0 = time.perf_counter()
    art = get_target(f"xla-tpu-{chip}").with_options(precision=precision).lower(module, bindings)
    compile_s = time.perf_counter() - t0
    cost = art.info["cost_analysis"]
    cycles = [k.extra["estimated_cycles"] for k in art.kernels if "estimated_cycles" in k.extra]
    gemm = sum(o.flops for o in est.ops if o.model in ("gemm", "attention"))
    return Row(
        model=name,
        chip=chip,
        precision=precision,
        bindings=bindings,
        irkit_flops=est.flops,
        irkit_bytes=est.bytes,
        irkit_seconds=est.seconds,
        irkit_gemm_share=gemm / est.flops if est.flops else 0.0,
        irkit_args=_args_bytes(module, bindings, art.info["weights"]["bytes"]),
        xla_flops=float(cost.get("flops", 0.0)),
        xla_trans=float(cost.get("transcendentals", 0.0)),
        xla_bytes=float(cost.get("bytes accessed", 0.0)),
        xla_seconds=sum(cycles) / spec.clock_hz if cycles and spec.clock_hz else None,
        xla_kernels=len(art.kernels),
        xla_timed_kernels=len(cycles),
        memory=dict(art.info["memory_analysis"]),
        hlo=hlo_traffic(art.files["hlo.txt"]),
        compile_s=compile_s,
    )


def calibration(chip: str) -> list[str]:
    """Single-op modules through the same path: what XLA counts for one op."""
    from irkit.ir import DType, Module, TensorType, new_function, verify

    rows = []
    cases: list[tuple[str, Any]] = []
    for m, k, n in ((256, 512, 1024), (100, 200, 300), (32, 64, 64)):
        f, b = new_function("main", [TensorType((m, k), DType.f32), TensorType((k, n), DType.f32)])
        b.ret(b.matmul(f.args[0], f.args[1]))
        cases.append((f"matmul {m}x{k} @ {k}x{n}", Module([f])))
    for shape in ((256, 1024), (32, 64)):
        f, b = new_function("main", [TensorType(shape, DType.f32)])
        x = f.args[0]
        b.ret(b.add(b.mul(b.tanh(x), x), x))
        cases.append((f"tanh(x)*x+x {shape[0]}x{shape[1]}", Module([f])))
    for label, mod in cases:
        verify(mod)
        r = measure(mod, label, chip, "default")
        rows.append(
            f"| {label} | {r.irkit_flops:.3g} | {r.xla_flops:.3g} | {r.xla_trans:.3g} | "
            f"{r.irkit_bytes / 1e3:.1f} | {r.xla_bytes / 1e3:.1f} | "
            f"{r.xla_bytes / r.irkit_bytes:.2f} | {r.hlo.prefetch / 1e3:.1f} | "
            f"{r.hlo.padded / 1e3:.1f} | {r.hlo.padded / r.xla_bytes:.3f} |"
        )
        print(rows[-1], flush=True)
    return rows


def _r(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--chips", default=",".join(CHIPS))
    ap.add_argument(
        "--default-chips",
        default="v5e",
        help="chips compiled once more at the default precision ('' for none)",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "tpu_cost.md"))
    args = ap.parse_args()

    import jax

    from examples.models.registry import get
    from irkit.fileio import atomic_write
    from irkit.frontends.torch_export import import_torch_factory
    from irkit.passmanager import run_pipeline

    chips = [c.strip().removeprefix("tpu-") for c in args.chips.split(",") if c.strip()]
    bad = sorted(set(chips) - set(CHIPS))
    if bad:
        raise SystemExit(f"--chips: unknown {', '.join(bad)}; use some of {', '.join(CHIPS)}")
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    print("calibration on tpu-v5e", flush=True)
    cal = calibration("v5e")
    rows: list[Row] = []
    notes: list[str] = []
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        model, inputs, dyn = get(name)()
        t0 = time.perf_counter()
        module = import_torch_factory(model, inputs, dyn)
        run_pipeline(module, PIPELINE)
        notes.append(
            f"{name}: import + pipeline {time.perf_counter() - t0:.1f} s, "
            f"{module.num_ops()} IR ops after the pipeline"
        )
        runs = [(c, "highest") for c in chips]
        runs += [(c.strip(), "default") for c in args.default_chips.split(",") if c.strip()]
        for chip, precision in runs:
            r = measure(module, name, chip.removeprefix("tpu-"), precision)
            rows.append(r)
            print(
                f"{name} {chip} {precision} flops {r.xla_flops / r.irkit_flops:.3f} bytes "
                f"{r.xla_bytes / r.irkit_bytes:.2f} recon {r.hlo.padded / r.xla_bytes:.3f} "
                f"time {_r(r.xla_seconds, r.irkit_seconds)} ({r.compile_s:.1f} s)",
                flush=True,
            )

    cmd = "python benchmarks/tpu_cost.py " + " ".join(sys.argv[1:])
    L = [
        "# irkit's TPU cost model vs XLA's cost analysis",
        "",
        f"Command: `{cmd.strip()}`",
        "",
        (
            "Each example model (float32, torch.export, then the optimising pipeline "
            f"`{PIPELINE}`) at its example bindings, on each TPU description in `targets/specs/`. "
            "irkit: `irkit estimate` totals (FLOPs, bytes, modelled time). XLA: the `xla-tpu-*` "
            "target's ahead-of-time compile of the same module (libtpu, no TPU attached): "
            "`cost_analysis()` FLOPs (transcendentals apart), `bytes accessed`, and the TPU "
            "compiler's own `estimated_cycles` per kernel in the optimised HLO, summed and divided "
            "by the spec's clock. These are counts from two models, not measurements: nothing "
            "runs on a TPU, so the machine's load does not enter the numbers (only the compile "
            "times, which are not compared)."
        ),
        "",
        "## Single ops (tpu-v5e)",
        "",
        (
            "What XLA counts for one op (default precision). `recon` is "
            "`irkit.targets.xla.hlo_traffic`'s re-count of the optimised HLO (tiled sizes, each "
            "asynchronous copy or slice into VMEM counted on its start and its done, a read and "
            "a write each, bitcasts free) over XLA's `bytes accessed`."
        ),
        "",
        (
            "| module | irkit FLOPs | XLA FLOPs | XLA transc. | irkit kB | XLA kB | XLA/irkit "
            "| of which prefetch kB | recon kB | recon/XLA |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *cal,
        "",
        "## Example models",
        "",
        (
            "Ratios are XLA / irkit. `gemm %`: share of irkit's FLOPs in matmuls and attention. "
            "`XLA µs`: the TPU compiler's summed `estimated_cycles` over the chip clock in the spec "
            "(on v6e that clock follows the Cloud TPU page, 3.5 GHz with 2 MXUs; at the other "
            "reading, 4 MXUs at about 1.75 GHz, XLA's seconds double). `args`: XLA's "
            "`memory_analysis()` argument bytes over the logical bytes of the inputs and weights. "
            "`recon/XLA`: as above."
        ),
        "",
    ]

    def table(sel: list[Row]) -> list[str]:
        out = [
            (
                "| model | chip | bindings | irkit GFLOP | XLA GFLOP | FLOPs | XLA transc. M | gemm % "
                "| irkit MB | XLA MB | bytes | recon/XLA | prefetch % of XLA | layout % of XLA "
                "| irkit µs | XLA µs | time | args | XLA temp MB |"
            ),
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in sel:
            bind = " ".join(f"{k}={v}" for k, v in sorted(r.bindings.items()))
            xs = r.xla_seconds * 1e6 if r.xla_seconds else float("nan")
            out.append(
                f"| {r.model} | {r.chip} | {bind} | {r.irkit_flops / 1e9:.4g} "
                f"| {r.xla_flops / 1e9:.4g} | **{_r(r.xla_flops, r.irkit_flops)}** "
                f"| {r.xla_trans / 1e6:.3g} | {100 * r.irkit_gemm_share:.0f} "
                f"| {r.irkit_bytes / 1e6:.3g} | {r.xla_bytes / 1e6:.3g} "
                f"| **{_r(r.xla_bytes, r.irkit_bytes)}** | {_r(r.hlo.padded, r.xla_bytes)} "
                f"| {100 * r.hlo.prefetch / r.xla_bytes:.0f} "
                f"| {100 * r.hlo.layout / r.xla_bytes:.0f} | {r.irkit_seconds * 1e6:.3g} "
                f"| {xs:.3g} | **{_r(r.xla_seconds, r.irkit_seconds)}** "
                f"| {_r(float(r.memory.get('argument', 0)), r.irkit_args)} "
                f"| {r.memory.get('temp', 0) / 1e6:.3g} |"
            )
        return out

    L += ["### f32 dots at precision HIGHEST (six bf16 passes, as irkit's f32 model assumes)", ""]
    L += table([r for r in rows if r.precision == "highest"])
    dflt = [r for r in rows if r.precision == "default"]
    if dflt:
        L += [
            "",
            "### The same at the targets' default precision (one bf16 pass)",
            "",
            *table(dflt),
        ]

    def geo(vals: list[float]) -> float:
        vals = [v for v in vals if v > 0]
        return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")

    L += ["", WHY]
    hi = [r for r in rows if r.precision == "highest"]
    if hi:
        L += [
            "",
            (
                "Geometric means over the HIGHEST rows: FLOPs "
                f"{geo([r.xla_flops / r.irkit_flops for r in hi]):.3f}, bytes "
                f"{geo([r.xla_bytes / r.irkit_bytes for r in hi]):.2f}, reconstruction/XLA "
                f"{geo([r.hlo.padded / r.xla_bytes for r in hi]):.3f}, time "
                f"{geo([r.xla_seconds / r.irkit_seconds for r in hi if r.xla_seconds]):.2f}."
            ),
        ]
    L += [
        "",
        "- " + "\n- ".join(notes) if notes else "",
        (
            f"- jax {jax.__version__}, libtpu {_version('libtpu')}, Python "
            f"{platform.python_version()}; run took {(time.perf_counter() - started) / 60:.1f} min "
            f"(1-minute load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at "
            "the end, on a shared 2-core machine; only compile times depend on it)."
        ),
        "",
    ]
    text = "\n".join(L)
    print(text)
    atomic_write(args.out, text)
    return 0


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


if __name__ == "__main__":
    raise SystemExit(main())
