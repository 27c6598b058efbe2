"""The irkit tour, part 2: a torch model through every target, checked and compared.

1. import the tiny GPT-2-style block from torch.export (examples/models/gpt2.py);
2. optimise it (canonicalize and fusion passes) and count what fused;
3. lower it to the reference interpreter, ONNX Runtime, TVM (LLVM CPU), XLA CPU and
   XLA TPU v5e (ahead of time, no TPU needed) — whichever this installation has;
4. check every runnable target against the float64 oracle;
5. print the per-kernel comparison table (measured where it ran, estimated from the
   hardware description where it cannot run here).

Run: python examples/tour.py [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PIPELINE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"
WANTED = ["reference", "ort", "tvm-llvm", "xla-cpu", "xla-tpu-v5e"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out/tour")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    from irkit.cli import main as irkit
    from irkit.frontends.torch_export import import_torch_factory
    from irkit.passmanager import run_pipeline
    from irkit.targets.registry import TARGETS, load_targets
    from irkit.text.io import write_module

    from examples.models.gpt2 import gpt2_tiny

    print("== 1. import a GPT-2-style block from torch.export ==")
    module, inputs, dyn = gpt2_tiny()
    m = import_torch_factory(module, inputs, dyn)
    src = out / "gpt2_tiny.mlir"
    write_module(m, str(src))
    print(f"{m.num_ops()} ops -> {src}")

    print(f"\n== 2. optimise: {PIPELINE} ==")
    run_pipeline(m, PIPELINE, check_numerics=True)
    opt = out / "gpt2_tiny.opt.mlir"
    write_module(m, str(opt))
    counts = Counter(op.name for op in m.walk())
    print(f"{m.num_ops()} ops: {counts['ik.attention']} attention, {counts['ik.layer_norm']} layer_norm, "
          f"{counts['ik.gelu']} gelu, {counts['ik.fused']} fused regions -> {opt}")

    load_targets()
    targets = [t for t in WANTED if t in TARGETS]
    print(f"\n== 3-4. lower and check on: {', '.join(targets)} ==")
    rc = irkit(["check", str(opt), "--targets", ",".join(targets)])

    print("\n== 5. compare the kernels side by side ==")
    irkit(["compare", str(opt), "--targets", ",".join(targets), "--artifacts", str(out / "artifacts"),
           "--markdown", str(out / "compare.md")])
    print(f"\nartifacts (kernel sources, HLO, ONNX, manifests) under {out / 'artifacts'}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
