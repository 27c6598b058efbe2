"""Assemble BENCHMARKS.md from the result files the benchmark scripts write.

Each script writes `benchmarks/results/NAME.md` starting with the command that
produced it; this concatenates them under one heading each, in a fixed order.

Run: python benchmarks/collect.py
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent
SECTIONS = [
    ("ir_scaling", "IR core: parse, print, verify and canonicalize,cse,dce on GPT-2-style modules"),
    ("import_torch", "Import time: torch.export frontend vs TVM's from_exported_program"),
    ("import_onnx", "Import time: ONNX frontend vs TVM's from_onnx"),
    ("import_jax", "Import time: JAX frontend (jaxpr and StableHLO)"),
    ("fusion_vs_ort", "Attention fusion: irkit vs onnxruntime's transformer optimizer"),
    ("fusion_scaling", "Fusion pipeline time vs layers"),
    ("scalesim", "Systolic model vs SCALE-Sim v3 cycle counts"),
    ("tvm_gemm", "TVM scheduled GEMM vs NumPy/OpenBLAS, attention kernel"),
    ("xla_vs_jax", "irkit xla-cpu vs plain jax.jit"),
    ("tvm_speed", "irkit tvm-llvm vs onnxruntime and TVM's default pipeline"),
    ("gpu_check", "GPU check (tvm-cuda, xla-gpu, fused attention vs torch)"),
    ("peers", "Peer comparison on the example models"),
    ("sweeps", "Sweeps"),
    ("decode", "Decode (KV cache)"),
    ("pipeline_scaling", "Optimising pipeline scaling"),
]


def main() -> int:
    out = ["# Benchmarks\n",
           "Every table below was produced by the command at its top, in one run, on this project's "
           "development machine (2 vCPUs, AMD EPYC; shared and often heavily loaded, so figures are medians "
           "with spreads and comparisons are ratios measured in the same run). No GPU was available to this "
           "session: GPU numbers are estimates from the hardware descriptions unless stated. Regenerate a "
           "table with its command, then `python benchmarks/collect.py`.\n"]
    for name, title in SECTIONS:
        p = ROOT / "results" / f"{name}.md"
        if p.exists():
            out.append(f"## {title}\n\n{p.read_text().strip()}\n")
        else:
            out.append(f"## {title}\n\n_Not run yet: see `benchmarks/{name}.py`._\n")
    (ROOT.parent / "BENCHMARKS.md").write_text("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
