"""A sweep with one worker, two workers and Ray: wall time and same-store check.

Runs ``irkit sweep SPEC`` (default ``examples/sweeps/smoke.toml``; ``examples/sweeps/cpu.toml``
is the CPU-bound one, with no timing tasks) three times into fresh stores
(``--jobs 1``, ``--jobs 2``, ``--ray`` on a local 2-CPU cluster), then compares
the stores: the same task keys with the same statuses and check verdicts, and
the wall time of each (ratios in the same run). Writes
``benchmarks/results/sweeps-<spec name>.md``.

Run: python benchmarks/sweep_scaling.py [--spec examples/sweeps/cpu.toml]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "examples" / "sweeps" / "smoke.toml"
MODES = [("--jobs 1", ["--jobs", "1"]), ("--jobs 2", ["--jobs", "2"]), ("--ray (local, 2 CPUs)", ["--ray"])]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", type=Path, default=SPEC, help="the sweep to run (default: %(default)s)")
    args = ap.parse_args(argv)
    spec = args.spec.resolve()
    from irkit.sweep.store import Store

    rows = []
    stores: dict[str, dict[str, tuple[str, object]]] = {}
    busy: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as d:
        for label, flags in MODES:
            store = Path(d) / f"{len(rows)}.sqlite"
            load0 = os.getloadavg()[0]
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-c", "import sys; from irkit.cli import main; sys.exit(main())",
                                "sweep", str(spec), "--store", str(store), *flags],
                               capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            with Store(store, create=False) as st:
                res = st.rows()
            stores[label] = {x.key: (x.status, x.result.get("ok")) for x in res}
            busy[label] = sum(x.duration for x in res)
            rows.append((label, r.returncode, len(res), sum(x.status == "ok" for x in res), wall, load0))
            print(f"{label}: rc {r.returncode}, {len(res)} results, {wall:.1f} s", file=sys.stderr)
    base = rows[0][4]
    same = all(stores[m[0]] == stores[MODES[0][0]] for m in MODES)
    rel = spec.relative_to(ROOT) if spec.is_relative_to(ROOT) else spec
    head = (f"`python benchmarks/sweep_scaling.py --spec {rel}` ({rows[0][2]} tasks; "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end)")
    lines = [head,
             "",
             "| executor | exit | results | ok | wall s | vs --jobs 1 | task seconds (sum) | load avg at start |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, rc, n, ok, wall, load in rows:
        lines.append(f"| {label} | {rc} | {n} | {ok} | {wall:.1f} | {wall / base:.2f}x | {busy[label]:.1f} | "
                     f"{load:.1f} |")
    lines += ["", f"Same store contents (task keys, statuses, check verdicts) for all three: {'yes' if same else 'NO'}."]
    out = ROOT / "benchmarks" / "results" / f"sweeps-{spec.stem}.md"
    from irkit.fileio import atomic_write

    atomic_write(out, "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
