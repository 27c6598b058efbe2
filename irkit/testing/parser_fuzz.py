"""Mutation fuzzing of the IR parser.

Valid IR texts (the synthetic GPT-2 block, the FileCheck inputs, random modules)
are mutated — byte flips, truncations, token swaps, token deletions and
duplications — and parsed.  Every result must be a :class:`ParseError` whose
rendering is ``file:line:col: message``, the line and a caret, or a module (which
must then verify or fail verification with a VerifyError); never another
exception, and never longer than ``limit`` seconds (a hang).

``python -m irkit.testing.parser_fuzz N`` runs N mutations and prints counts.
"""

from __future__ import annotations

import random
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

_TOKEN = re.compile(r'"[^"\n]*"|%[\w#.$-]+|tensor<[^>\n]*>|[\w.]+|\S')


@dataclass
class FuzzReport:
    runs: int = 0
    parse_errors: int = 0
    parsed: int = 0
    verify_errors: int = 0
    failures: list[str] = field(default_factory=list)
    slowest: float = 0.0


def corpus() -> list[str]:
    from irkit.testing.blocks import gpt2_style_module
    from irkit.text.printer import Printer

    texts = [Printer(inline_resources=True).module(gpt2_style_module(layers=1, hidden=8, heads=2, vocab=16, max_pos=8))]
    root = Path(__file__).resolve().parents[2] / "tests" / "filecheck"
    if root.exists():
        for p in sorted(root.rglob("*.mlir")):
            from irkit.text.io import split_chunks

            texts.extend(c for c in split_chunks(p.read_text()) if '"func.func"' in c)
    return texts


def mutate(text: str, rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        b = bytearray(text.encode())
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return b.decode("utf-8", errors="replace")
    if kind == 1:
        return text[: rng.randrange(len(text))]
    toks = [m.group() for m in _TOKEN.finditer(text)]
    spans = [m.span() for m in _TOKEN.finditer(text)]
    if len(toks) < 2:
        return text
    i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
    parts = list(text)
    if kind == 2:  # swap two tokens
        (a0, a1), (b0, b1) = sorted([spans[i], spans[j]])
        if a1 <= b0:
            return text[:a0] + text[b0:b1] + text[a1:b0] + text[a0:a1] + text[b1:]
        return text
    if kind == 3:  # delete a token
        a0, a1 = spans[i]
        return text[:a0] + text[a1:]
    a0, a1 = spans[i]  # duplicate a token
    del parts
    return text[:a1] + " " + toks[i] + text[a1:]


class _Timeout(Exception):
    pass


def run(n: int, seed: int = 0, limit: float = 2.0) -> FuzzReport:
    from irkit.ir.verify import VerifyError, verify
    from irkit.text.parser import ParseError, parse_module

    texts = corpus()
    rng = random.Random(seed)
    rep = FuzzReport()

    def on_alarm(signum, frame):  # type: ignore[no-untyped-def]
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        for i in range(n):
            src = mutate(texts[rng.randrange(len(texts))], rng)
            rep.runs += 1
            t0 = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, limit)
            try:
                m = parse_module(src, "fuzz.mlir")
                rep.parsed += 1
                try:
                    verify(m)
                except VerifyError:
                    rep.verify_errors += 1
            except ParseError as e:
                rep.parse_errors += 1
                r = e.render()
                if r.count("\n") != 2 or not r.startswith("fuzz.mlir:"):
                    rep.failures.append(f"case {i}: malformed error rendering: {r[:200]!r}")
            except _Timeout:
                rep.failures.append(f"case {i}: parse took over {limit} s (hang)")
            except Exception as e:  # noqa: BLE001 - the point: anything else is a bug
                rep.failures.append(f"case {i}: {type(e).__name__}: {str(e)[:200]}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            rep.slowest = max(rep.slowest, time.perf_counter() - t0)
    finally:
        signal.signal(signal.SIGALRM, old)
    return rep


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rep = run(n)
    print(f"{rep.runs} mutated IR texts: {rep.parse_errors} clean parse errors, {rep.parsed} parsed "
          f"({rep.verify_errors} then failed verification), {len(rep.failures)} failures; "
          f"slowest {rep.slowest * 1e3:.1f} ms")
    for f in rep.failures[:20]:
        print("  " + f)
    return 1 if rep.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
