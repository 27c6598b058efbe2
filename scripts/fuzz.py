"""The long reliability run behind `make fuzz`; writes RELIABILITY.md.

1. random-graph properties for every registered pass (IRKIT_FUZZ_EXAMPLES graphs each,
   10,000 by default here; CI runs 500);
2. 100,000 mutated IR texts through the parser;
3. the malformed ONNX / .pt2 corpus through the frontends.

Run: make fuzz   (or: python scripts/fuzz.py --graphs 10000 --texts 100000)
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", type=int, default=10000, help="random graphs per pass and property")
    ap.add_argument("--texts", type=int, default=100000, help="mutated IR texts")
    ap.add_argument("--out", default=str(ROOT / "RELIABILITY.md"))
    args = ap.parse_args()
    lines = [f"# Reliability runs\n\nProduced by `python scripts/fuzz.py --graphs {args.graphs} --texts {args.texts}` "
             f"on {datetime.date.today()} ({os.cpu_count()} cores).\n"]

    t0 = time.perf_counter()
    env = dict(os.environ, IRKIT_FUZZ_EXAMPLES=str(args.graphs))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                        str(ROOT / "tests" / "property" / "test_random_graphs.py"), "-rA"],
                       env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    passed = [ln for ln in r.stdout.splitlines() if ln.startswith("PASSED")]
    failed = [ln for ln in r.stdout.splitlines() if ln.startswith("FAILED")]
    lines.append("## Random graphs\n")
    lines.append(f"{args.graphs} graphs per property and pass (hypothesis, derandomized), {dt / 60:.1f} min.\n")
    lines.append("| property | result |\n|---|---|")
    for ln in passed + failed:
        name = ln.split("::", 1)[-1].split(" ")[0]
        lines.append(f"| {name} | {'passed' if ln.startswith('PASSED') else 'FAILED'} |")
    lines.append(f"\n{len(passed)} passed, {len(failed)} failed.\n")
    if failed:
        lines.append("```\n" + r.stdout[-6000:] + "\n```\n")

    from irkit.testing import malformed, parser_fuzz

    t0 = time.perf_counter()
    rep = parser_fuzz.run(args.texts)
    dt = time.perf_counter() - t0
    lines.append("## Parser fuzzing\n")
    lines.append(f"{rep.runs} mutated IR texts (byte flips, truncations, token swaps, deletions, duplications) "
                 f"in {dt:.0f} s: {rep.parse_errors} clean `file:line:col` errors, {rep.parsed} parsed "
                 f"({rep.verify_errors} then rejected by the verifier), **{len(rep.failures)} failures**; slowest "
                 f"case {rep.slowest * 1e3:.0f} ms.\n")
    for f in rep.failures[:50]:
        lines.append(f"- {f}")

    folder = Path(tempfile.mkdtemp(prefix="irkit-malformed-"))
    cases = malformed.generate(folder)
    outcomes = [malformed.check(p) for p in cases]
    bad = [o for o in outcomes if not o.clean or o.seconds > 1.0 or o.peak_bytes > 256 << 20]
    lines.append("\n## Malformed models\n")
    lines.append(f"{len(cases)} generated malformed ONNX and .pt2 files (`python -m irkit.testing.malformed`): "
                 f"{len(cases) - len(bad)} met with one clean error line (or imported, where the mutation was "
                 f"harmless), **{len(bad)} failures**; slowest {max(o.seconds for o in outcomes):.3f} s, largest "
                 f"allocation {max(o.peak_bytes for o in outcomes) / 2**20:.1f} MiB.\n")
    for o in bad[:50]:
        lines.append(f"- {o.path.relative_to(folder)}: {o.seconds:.2f} s, {o.message}")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 1 if failed or rep.failures or bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
