"""Per-call overhead of ``xla-cpu`` on a one-add graph: ``Target.run`` and a resident ``Session``.

    python benchmarks/xla_call_overhead.py [--calls 20000] [--size 4]

A graph this small does no work, so the time per call is irkit's and JAX's dispatch
overhead: NumPy in (checks, dtype, host-to-device), the compiled executable, NumPy out.
Three paths are timed: ``Target.run(artifact, inputs)`` (the checked, stateless path),
``Session.run`` with NumPy inputs, and ``Session.run`` with both inputs resident
(``None``: bound once); and, as the floor, JAX's compiled executable called alone on device
arrays. The best of 7 rounds of ``--calls`` calls each, after warm-up (as ``timeit`` advises:
on a shared machine the slower rounds measure the other processes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

IR = """"func.func"() ({
^bb0(%x: tensor<SIZExf32>, %y: tensor<SIZExf32>):
  %0 = "ik.add"(%x, %y) : (tensor<SIZExf32>, tensor<SIZExf32>) -> tensor<SIZExf32>
  "func.return"(%0) : (tensor<SIZExf32>) -> ()
}) {function_type = (tensor<SIZExf32>, tensor<SIZExf32>) -> tensor<SIZExf32>, sym_name = "add"} : () -> ()
"""


def per_call_us(fn, calls: int, rounds: int = 7) -> float:
    for _ in range(min(calls, 500)):
        fn()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--size", type=int, default=4)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from irkit.targets.registry import get_target

    from irkit.text.parser import parse_module

    m = parse_module(IR.replace("SIZE", str(args.size)))
    t = get_target("xla-cpu")
    art = t.lower(m, {})
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(args.size).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(t.run(art, [x, y])[0], x + y, rtol=1e-6)
    rows = {"Target.run (NumPy in/out)": per_call_us(lambda: t.run(art, [x, y]), args.calls)}
    if hasattr(t, "open_session"):
        s = t.open_session(art)
        rows["Session.run (NumPy in/out)"] = per_call_us(lambda: s.run([x, y]), args.calls)
        s.bind(0, x)
        s.bind(1, y)
        np.testing.assert_allclose(s.run([None, None])[0], x + y, rtol=1e-6)
        rows["Session.run (resident inputs)"] = per_call_us(lambda: s.run([None, None]), args.calls)
        exe = art.runner
        xd, yd = exe.put(x, 0), exe.put(y, 1)
        rows["JAX compiled executable alone"] = per_call_us(lambda: exe.compiled(xd, yd), args.calls)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for k, v in rows.items():
            print(f"{k:32} {v:8.1f} us/call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
