"""The irkit tour on a small GPT-2-style block, built in the IR (no downloads).

1. build the block in the IR and print it (MLIR generic syntax);
2. run a pass pipeline with `irkit opt --print-ir-after-change --timing`;
3. run the optimised module on the reference interpreter and check it against
   the float64 oracle of the original.

Run: python examples/demo.py [--layers N] [--out DIR]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from irkit.check import compare_all, module_tolerance
from irkit.interp import random_inputs, run
from irkit.passmanager import PASSES, load_builtin_passes
from irkit.testing.blocks import gpt2_style_module
from irkit.text.io import read_module, write_module
from irkit.text.printer import Printer


def pipeline() -> str:
    """The optimising pipeline: every pass of it that this installation registers."""
    load_builtin_passes()
    wanted = ["canonicalize", "fuse-attention", "fuse-norm", "fuse-activation", "fuse-elementwise", "cse", "dce"]
    return ",".join(p for p in wanted if p in PASSES)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--out", default="out/demo", help="folder for the IR files")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    print("== 1. a GPT-2-style block built in the IR ==")
    m = gpt2_style_module(layers=args.layers, hidden=64, heads=4, vocab=128, seq=16)
    src = out / "block.mlir"
    write_module(m, str(src))
    print(Printer(inline_limit=4).module(m))
    print(f"(written to {src} with its weights in {src.with_suffix('.safetensors')})\n")

    pipe = pipeline()
    opt = out / "block.opt.mlir"
    print(f"== 2. irkit opt -p {pipe} --print-ir-after-change --timing ==")
    cmd = [sys.executable, "-m", "irkit.cli", "opt", str(src), "-p", pipe, "--print-ir-after-change",
           "--timing", "--statistics", "-o", str(opt)]
    r = subprocess.run(cmd)
    if r.returncode:
        return r.returncode

    print("\n== 3. run on the interpreter, check against the float64 oracle ==")
    before = read_module(str(src))
    after = read_module(str(opt))
    xs = random_inputs(before.entry, seed=0, bindings={"B": 2, "S": 16})
    oracle = run(before, xs, float64=True)
    got = run(after, xs)
    rep = compare_all(got, oracle, module_tolerance(after))
    n_before, n_after = before.num_ops(), after.num_ops()
    print(f"ops: {n_before} before, {n_after} after the pipeline")
    for c in rep.comparisons:
        print("  " + c.describe())
    print("numerics OK" if rep.ok else "NUMERICS MISMATCH")
    return 0 if rep.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
