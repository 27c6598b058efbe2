"""The long reliability run behind `make fuzz`; writes RELIABILITY.md.

1. random-graph properties (tests/property/test_random_graphs.py) with
   ``--graphs`` graphs for every registered pass, every standard pipeline, the
   print/parse round trip and canonicalize's idempotence, and ``--target-graphs``
   for every target that runs here (CI runs 500 and 20);
2. ``--texts`` mutated IR texts through the parser;
3. the malformed ONNX / .pt2 corpus through the frontends.

Run: make fuzz   (or: python scripts/fuzz.py --graphs 10000 --target-graphs 500 --texts 100000)
``--only graphs,texts,malformed`` runs some stages; the report keeps the sections
of the stages not run from the previous RELIABILITY.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAGES = ("graphs", "texts", "malformed")
TITLES = {"graphs": "## Random graphs", "texts": "## Parser fuzzing", "malformed": "## Malformed models"}


def _commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        # The report itself is rewritten as the run goes: it does not make the code "changed".
        dirty = "\n".join(ln for ln in subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
            capture_output=True, text=True).stdout.splitlines() if not ln.endswith("RELIABILITY.md")).strip()
        return head + (" with local changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown commit"


def _collect(env: dict[str, str]) -> list[str]:
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / "property" / "test_random_graphs.py")],
                       env=env, capture_output=True, text=True, cwd=ROOT)
    return [ln.split("::", 1)[1] for ln in r.stdout.splitlines() if "::" in ln]


def stage_graphs(args: argparse.Namespace, progress: Callable[[list[str]], None]) -> tuple[list[str], bool]:
    """Each property in its own pytest process, ``--workers`` at a time; the report is
    rewritten as each finishes, so a run cut short still records what it completed."""
    from concurrent.futures import ThreadPoolExecutor

    env = dict(os.environ, IRKIT_FUZZ_EXAMPLES=str(args.graphs), IRKIT_FUZZ_TARGET_EXAMPLES=str(args.target_graphs))
    per_target = _per_target(args.target_graphs_for)
    for name, n in per_target.items():
        env["IRKIT_FUZZ_TARGET_EXAMPLES_" + name.upper().replace("-", "_")] = str(n)

    def graphs_of(test: str) -> int:
        if not test.startswith("test_target_matches_oracle"):
            return args.graphs
        for name, n in per_target.items():
            if test.endswith(f"-{name}]"):
                return n
        return args.target_graphs
    tests = _collect(env)
    if args.graphs_filter:
        tests = [t for t in tests if args.graphs_filter in t]
    t0 = time.perf_counter()
    done: dict[str, tuple[bool, float, str]] = {}
    commit_of: dict[str, str] = {}
    ran: dict[str, int] = {}  # examples Hypothesis reports as run and passed
    kinds: dict[str, dict[str, int]] = {}  # graphs with each special kind, per property
    if args.resume:  # properties that passed with the same count keep their row (and its commit)
        previous_kinds = _previous_kinds(Path(args.out))
        for test, n, sec, commit, drawn in _previous_passes(Path(args.out)):
            if test in tests and n == graphs_of(test):
                done[test], commit_of[test] = (True, sec, ""), commit
                if drawn is not None:
                    ran[test] = drawn
                if test in previous_kinds:
                    kinds[test] = previous_kinds[test]
    resumed = len(done)
    head_commit = _commit()

    def one(test: str) -> None:
        s0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            stats = Path(tmp) / "graphs.txt"
            r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                                f"{ROOT / 'tests' / 'property' / 'test_random_graphs.py'}::{test}"],
                               env=dict(env, IRKIT_FUZZ_STATS=str(stats)), capture_output=True, text=True,
                               cwd=ROOT)
            counts = stats.read_text().split() if stats.exists() else []
        if len(counts) >= 2 and counts[1].isdigit():
            ran[test] = int(counts[1])
            kinds[test] = {k.replace("_", " "): int(n) for k, _, n in (c.partition("=") for c in counts[2:])
                           if n.isdigit()}
        done[test] = (r.returncode == 0, time.perf_counter() - s0, (r.stdout + r.stderr)[-4000:])
        commit_of[test] = head_commit
        progress(render())

    def render(final: bool = False) -> list[str]:
        lines = [TITLES["graphs"] + "\n",
                 f"Hypothesis (derandomized), each property in its own process, {args.workers} at a time, "
                 f"{(time.perf_counter() - t0) / 60:.0f} min {'in all' if final else 'so far'}"
                 + (f" (resumed: {resumed} rows kept from the previous report, each with the commit it ran at)"
                    if resumed else "") + f". Graphs per property: {args.graphs} for each "
                 f"pass, pipeline and text property; {args.target_graphs} for each target (each graph is "
                 "compiled)" + "".join(f", {n} for {t}" for t, n in per_target.items()) + ".\n",
                 "| property | graphs | result | minutes | commit |", "|---|---:|---|---:|---|"]
        for test in tests:
            n = graphs_of(test)
            if test in done:
                ok, sec, _ = done[test]
                result = "FAILED" if not ok else f"passed ({ran[test]} drawn)" if test in ran else "passed"
                lines.append(f"| {test} | {n} | {result} | {sec / 60:.1f} | "
                             f"{commit_of.get(test, head_commit)} |")
            else:
                lines.append(f"| {test} | {n} | not run yet | | |")
        failed = [t for t, (ok, _, _) in done.items() if not ok]
        lines.append(f"\n{len(done) - len(failed)} passed, {len(failed)} failed, {len(tests) - len(done)} not run.\n")
        lines += _kinds_table([t for t in tests if t in kinds], kinds)
        for t in failed:
            lines.append(f"`{t}`:\n```\n{done[t][2]}\n```\n")
        return lines

    with ThreadPoolExecutor(max(1, args.workers)) as ex:
        list(ex.map(one, [t for t in tests if t not in done]))
    lines = render(final=True)
    return lines, all(ok for ok, _, _ in done.values()) and len(done) == len(tests)


KINDS = ("nan", "+inf", "-inf", "negative index", "boundary index", "fully masked row", "empty dim",
         "non-finite output")
KINDS_HEAD = "| property | " + " | ".join(KINDS) + " |"


def _kinds_table(tests: list[str], kinds: dict[str, dict[str, int]]) -> list[str]:
    """How many of each property's drawn graphs held each special kind (a property that does not
    run the oracle has no "non-finite output" count)."""
    if not tests:
        return []
    lines = ["Special values: of the graphs drawn for each property, how many held a NaN, +Inf or -Inf "
             "element, a gather index that is negative or on the boundary (n-1, -1, -n), an attention "
             "query row with no key, a zero-size tensor; and how many had a NaN or infinity in the float64 "
             "oracle's outputs.\n", KINDS_HEAD, "|---|" + "---:|" * len(KINDS)]
    for t in tests:
        k = kinds[t]
        cells = [str(k[n]) if n in k and not (n == "non-finite output" and t in _NO_ORACLE) else ""
                 for n in KINDS]
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    return lines + [""]


# Properties that never run the float64 oracle (their "non-finite output" cell stays empty).
_NO_ORACLE = ("test_print_parse_round_trip", "test_canonicalize_idempotent")


def _previous_kinds(path: Path) -> dict[str, dict[str, int]]:
    """The special-kind counts of an earlier report's table, by property."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    out: dict[str, dict[str, int]] = {}
    inside = False
    for ln in lines:
        if ln.strip() == KINDS_HEAD:
            inside = True
            continue
        if inside and not ln.startswith("|"):
            inside = False
        if inside and not ln.startswith("|---"):
            cells = [c.strip() for c in ln.strip().strip("|").split("|")]
            if len(cells) == len(KINDS) + 1:
                out[cells[0]] = {k: int(c) for k, c in zip(KINDS, cells[1:]) if c.isdigit()}
    return out


def _previous_passes(path: Path) -> list[tuple[str, int, float, str, int | None]]:
    """(property, graphs, seconds, commit, graphs drawn) of the rows that passed in an earlier report."""
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for ln in text.splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[2].startswith("passed") and cells[1].isdigit():
            try:
                drawn = re.search(r"\((\d+) drawn\)", cells[2])
                out.append((cells[0], int(cells[1]), float(cells[3]) * 60, cells[4],
                            int(drawn.group(1)) if drawn else None))
            except ValueError:
                continue
    return out


def _per_target(specs: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for spec in specs:
        name, _, n = spec.partition("=")
        if not name or not n.isdigit():
            raise SystemExit(f"fuzz.py: --target-graphs-for expects TARGET=N (e.g. tvm-llvm=150), got {spec!r}")
        out[name] = int(n)
    return out


def stage_texts(args: argparse.Namespace, progress: Callable[[list[str]], None]) -> tuple[list[str], bool]:
    from irkit.testing import parser_fuzz

    from concurrent.futures import ProcessPoolExecutor

    t0 = time.perf_counter()
    k = max(1, args.workers)
    sizes = [args.texts // k + (1 if i < args.texts % k else 0) for i in range(k)]
    with ProcessPoolExecutor(k) as ex:  # one seed per worker: disjoint, reproducible mutation streams
        parts = list(ex.map(parser_fuzz.run, sizes, range(k)))
    rep = parser_fuzz.FuzzReport(
        runs=sum(p.runs for p in parts), parse_errors=sum(p.parse_errors for p in parts),
        parsed=sum(p.parsed for p in parts), verify_errors=sum(p.verify_errors for p in parts),
        failures=[f"seed {i}, {f}" for i, p in enumerate(parts) for f in p.failures],
        slowest=max(p.slowest for p in parts))
    dt = time.perf_counter() - t0
    lines = [TITLES["texts"] + "\n",
             f"{rep.runs} mutated IR texts (byte flips, truncations, token swaps, deletions, duplications; "
             f"{k} processes, seeds 0-{k - 1}) in {dt:.0f} s: {rep.parse_errors} clean `file:line:col` errors, {rep.parsed} parsed "
             f"({rep.verify_errors} then rejected by the verifier), **{len(rep.failures)} failures**; slowest "
             f"case {rep.slowest * 1e3:.0f} ms.\n"]
    lines += [f"- {f}" for f in rep.failures[:50]]
    return lines, not rep.failures


def stage_malformed(args: argparse.Namespace, progress: Callable[[list[str]], None]) -> tuple[list[str], bool]:
    from irkit.testing import malformed

    folder = Path(tempfile.mkdtemp(prefix="irkit-malformed-"))
    cases = malformed.generate(folder)
    malformed.warm_up(folder)
    outcomes = [malformed.check(p) for p in cases]
    bad = [o for o in outcomes if not o.clean or o.seconds > 1.0 or o.peak_bytes > 256 << 20]
    lines = [TITLES["malformed"] + "\n",
             f"{len(cases)} generated malformed ONNX and .pt2 files (`python -m irkit.testing.malformed`): "
             f"{len(cases) - len(bad)} met with one clean error line (or imported, where the mutation was "
             f"harmless), **{len(bad)} failures**; slowest {max(o.seconds for o in outcomes):.3f} CPU s "
             f"({max(o.wall_seconds for o in outcomes):.3f} s wall), largest "
             f"allocation {max(o.peak_bytes for o in outcomes) / 2**20:.1f} MiB.\n"]
    lines += [f"- {o.path.relative_to(folder)}: {o.seconds:.2f} CPU s, {o.message}" for o in bad[:50]]
    return lines, not bad


def _previous_sections(path: Path) -> dict[str, str]:
    """The sections of an existing report: by stage, and the others (written by hand: what a run
    found and what became of it) by their title, kept as they are."""
    if not path.exists():
        return {}
    text = path.read_text()
    out: dict[str, str] = {}
    starts = [m.start() + 1 for m in re.finditer(r"\n## ", text)]
    for i, j in zip(starts, starts[1:] + [len(text)]):
        body = text[i:j].rstrip() + "\n"
        title = body.split("\n", 1)[0]
        stage = next((st for st, t in TITLES.items() if t == title), None)
        out[stage or title] = body
    return out


def main() -> int:
    from irkit.fileio import atomic_write

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", type=int, default=10000, help="random graphs per pass, pipeline and property")
    ap.add_argument("--target-graphs", type=int, default=500, help="random graphs per runnable target")
    ap.add_argument("--target-graphs-for", action="append", default=[], metavar="TARGET=N",
                    help="another count for one target (a TVM build takes seconds per graph), repeatable")
    ap.add_argument("--texts", type=int, default=100000, help="mutated IR texts")
    ap.add_argument("--workers", type=int, default=2, help="processes at a time")
    ap.add_argument("--graphs-filter", default="", help="only the properties whose test id contains this")
    ap.add_argument("--resume", action="store_true",
                    help="keep the properties that passed (same count) in the previous report, with "
                         "the commit they ran at; run the rest")
    ap.add_argument("--only", default=",".join(STAGES), help="comma list of stages: " + ", ".join(STAGES))
    ap.add_argument("--out", default=str(ROOT / "RELIABILITY.md"))
    args = ap.parse_args()
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in STAGES]
    if unknown:
        ap.error(f"unknown stage {unknown[0]!r}; expected some of {', '.join(STAGES)}")
    out = Path(args.out)
    sections = _previous_sections(out)
    head = ("# Reliability runs\n\nProduced by `python scripts/fuzz.py` (`make fuzz`: "
            "`--graphs 10000 --target-graphs 500 --texts 100000`); each section says when and at which commit it "
            "ran. Every failure found becomes a regression test; this file lists none open when all sections say "
            "0 failed.\n")
    commit = _commit()

    def write(stage: str, lines: list[str]) -> None:
        when = f"_Run on {datetime.date.today()} at commit {commit}, {os.cpu_count()} cores._\n"
        sections[stage] = "\n".join([lines[0], when, *lines[1:]]) + "\n"
        others = [sections[k] for k in sections if k not in STAGES]
        atomic_write(out, head + "\n" + "\n".join([sections[s] for s in STAGES if s in sections] + others))

    ok = True
    for stage in only:
        print(f"fuzz: {stage} ...", flush=True)
        fn = {"graphs": stage_graphs, "texts": stage_texts, "malformed": stage_malformed}[stage]
        lines, good = fn(args, lambda lines, stage=stage: write(stage, lines))
        ok &= good
        write(stage, lines)
    print(f"wrote {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
