"""Regenerate docs/cli.md from the command line's own help (so it never drifts)."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

from irkit.cli import COMMANDS, build_parser


# Prose after a command's help: what the help has no room for.
NOTES = {
    "opt": """
A pass or option that does not exist is an error before the input is read: an unknown
`--print-ir-before/after=NAME` says `did you mean` (a known pass that the pipeline does not run
is a warning, since nothing would be printed), and a bad option value names the pass, the
option and what it accepts:

```
$ irkit opt model.mlir -p 'tile-matmul{target=tpu-v9}'
irkit: error: pass 'tile-matmul': option 'target=tpu-v9': unknown hardware 'tpu-v9'; use one of: a100, h100, h200, host-cpu, tpu-v4, tpu-v5e, tpu-v5p, tpu-v6e, or a path to a .toml file
```

`--statistics` prints, per pass, a row for every rewrite pattern that was tried (how often it
was tried on an op, matched, and applied), then the pass's own counters:

```
fuse-attention
     tried  matched  applied  pattern
         1        1        1  fuse-attention
        10  dead-ops-erased
         1  fused-attentions
```

In Python the same numbers are `PassManager.stats` (see the end of this page).
""",
    "run": """
`--inputs` reads an `.npz`: arrays keyed by argument name, or by position as `arg0`, `arg1`...
or `arr_0`, `arr_1`... (what `numpy.savez(path, x, y)` writes). An array of another dtype is
cast with a warning when no value changes (float64 data for an f32 argument, whole-number
float ids for an i64 one, int32 ids) and refused otherwise (fractional ids, values that
overflow); arguments missing from the file are drawn at random, with a warning that names
them and the seed. A file that is not an `.npz` archive, a `FILE.py` without `:FACTORY` and
an empty `.mlir` file are each one line that says what to do. Parse and verification errors
point at the op: a value whose type disagrees with the function's result type is reported
at the op that produced it, and an op without a source location is named by its place
(`op ik.add#3 of @main`, the numbering `irkit compare` uses).
""",
    "compare": """
For each heavy IR op (matmul, attention, fused region, norm, gather) and each target: the
op's time and how many kernels implement it, measured here with the target's own profiler
(`m`) or estimated from the cost model of the target's hardware spec (`e`; `e*` when the
target ran but its profiler has no call for that op). Below the table: a totals row per
target (every kernel of the module), why each target is measured or estimated
(`estimated: tpu-v5e spec, no device (...)`), each target's artifact folder and files, and
the full source location of every row. `--format table` (the default) fits `--width` columns
(the terminal's, or 120) by printing the targets in groups; `wide` is one table; `long`
lists every kernel of every op by name and file; `csv` is one row per op and target.

```
$ irkit compare m.mlir -p canonicalize,fuse-attention,fuse-norm,fuse-elementwise \\
    --targets reference,ort,xla-tpu-v5e,xla-tpu-v4,xla-gpu --bind B=1,S=16
IR op             loc     reference            ort   xla-tpu-v5e    xla-tpu-v4   xla-gpu
----------------------------------------------------------------------------------------
ik.gather#3       [1]     359.6µs m       13.0µs m   10.2ns e ×7    6.9ns e ×7   2.5ns e
ik.attention#22   [4]     416.2µs m       22.0µs m    3.2µs e ×7    4.5µs e ×7   1.4µs e
ik.fused#41       [6]      4.95ms m   64.0µs m ×13      40.0ns e      27.3ns e   9.8ns e
...
----------------------------------------------------------------------------------------
total (all ops)        8.95ms m ×26  343.0µs m ×59  11.4µs e ×53  16.1µs e ×53  12.7µs e
targets:
  xla-tpu-v5e  estimated: tpu-v5e spec, no device (no TPU attached; ...); 53 kernels, compiled in 3.72 s
...
locations:
  [4]  h.0.attn.out at gpt2_block.py:50; h.0.attn.scores at gpt2_block.py:40
```

(Times from a 2-core CPU machine; yours differ.)
""",
}

PYTHON = """
## From Python

```python
from irkit.passmanager import PassManager
from irkit.show import summary
from irkit.text import read_module, print_module

m = read_module("model.mlir")
pm = PassManager("canonicalize,fuse-attention,cse,dce", check_numerics=True)
pm.run(m)
print(summary(m))                          # signature, op counts, fused regions, weight count and bytes
print(print_module(m, elide_weights=True))  # the ops; weights stay dense_resource<name> references
print(pm.statistics_report())              # what --statistics prints
pm.stats["fuse-attention"]["fused-attentions"]  # the counters: {pass: {name: count}}
```

`print_module(m)` prints the weights too (megabytes for a real model), so that the text parses
back on its own; `write_module(m, "out.mlir")` saves them to a `.safetensors` file beside it.
`run_pipeline(m, pipeline, ctx=PassContext())` leaves the same counters in `ctx.stats`.
"""


def main() -> int:
    p = build_parser()
    out = ["# Command-line reference\n", "Generated by `python scripts/gen_cli_docs.py` from `irkit --help`.\n",
           "Every command prints a user's mistake as one line `irkit: error: ...` and exits 1 "
           "(2 for a usage error); output files are written atomically.\n"]
    buf = io.StringIO()
    with redirect_stdout(buf):
        p.print_help()
    out.append("```\n" + buf.getvalue() + "```\n")
    sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in COMMANDS:
        sp = sub.choices[name]
        buf = io.StringIO()
        with redirect_stdout(buf):
            sp.print_help()
        out.append(f"## irkit {name}\n\n```\n{buf.getvalue()}```\n")
        if name in NOTES:
            out.append(NOTES[name].strip() + "\n")
    out.append(PYTHON.strip() + "\n")
    Path(__file__).resolve().parents[1].joinpath("docs", "cli.md").write_text("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
