"""How far each architecture of ``irkit.zoo`` gets through irkit, at toy size.

A thin front to ``irkit zoo run`` (the library is :mod:`irkit.zoo.run`) with no
target: build each architecture (random weights), export it to ``.pt2`` and to
ONNX, import each, compare the interpreter with eager torch, run the optimising
pipeline and count the fused ``ik.attention`` ops against the attention layers
the model runs.  Each architecture runs isolated in a worker process.

    .venv/bin/python benchmarks/zoo_status.py                       # every architecture
    .venv/bin/python benchmarks/zoo_status.py --only gpt2,llama --json zoo.json
    .venv/bin/python benchmarks/zoo_status.py --family decoder --json zoo.json   # merges into zoo.json
    .venv/bin/python benchmarks/zoo_status.py --table-from zoo.json  # print the table only

For targets, full sizes, a pass pipeline or plugin, use ``irkit zoo run`` itself
(docs/zoo.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FRONTEND_NAMES = {"pt2": "torch", "torch": "torch", "onnx": "onnx"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated architecture names")
    ap.add_argument("--family", help="decoder, encoder, encoder-decoder, vision, audio or vision-text")
    ap.add_argument("--frontends", default="pt2,onnx", help="pt2 (torch.export), onnx, or both (default)")
    ap.add_argument("--json", help="merge the rows into this JSON file")
    ap.add_argument("--table-from", help="print the table of an existing JSON file and exit")
    ap.add_argument("--out-dir", help="keep the exports in this folder")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    a = ap.parse_args(argv)
    from irkit.cli import main as irkit

    if a.table_from:
        return irkit(["zoo", "table", a.table_from])
    fes = []
    for f in (x for x in a.frontends.split(",") if x):
        if f not in FRONTEND_NAMES:
            ap.error(f"--frontends: unknown frontend '{f}' (pt2 or onnx)")
        fes.append(FRONTEND_NAMES[f])
    args = ["zoo", "run", "--targets", "none", "--frontends", ",".join(fes), "--jobs", str(a.jobs)]
    for flag, v in (("--models", a.only), ("--family", a.family), ("--json", a.json), ("--keep", a.out_dir)):
        if v:
            args += [flag, v]
    return irkit(args)


if __name__ == "__main__":
    sys.exit(main())
