"""Properties over random graphs, for every registered pass.

- the printed module parses back to the identical text, and verifies;
- every pass leaves a module that verifies and computes the same numbers as the
  float64 oracle of the input (bitwise the same for passes marked exact);
- canonicalize is idempotent.

Examples per property: IRKIT_FUZZ_EXAMPLES (default 500 per pass in CI; `make fuzz`
runs 10,000 and records the counts in RELIABILITY.md).
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, note, settings

from irkit.check import compare_all, module_tolerance
from irkit.interp import random_inputs, run
from irkit.ir import verify
from irkit.passmanager import PASSES, PassContext, load_builtin_passes, make_pass
from irkit.testing.strategies import SPECIAL_KINDS, drawn_kinds, modules
from irkit.text import parse_module, print_module

N = int(os.environ.get("IRKIT_FUZZ_EXAMPLES", "500"))
SETTINGS = settings(max_examples=N, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

load_builtin_passes()
PASS_NAMES = sorted(PASSES)

# Graphs each property ran, and how many of them held each special kind, for `make fuzz`'s report
# (IRKIT_FUZZ_STATS names the file it appends to: "<test> <drawn> <kind>=<graphs> ...").
_DRAWN = [0]
_KIND_COUNTS: Counter[str] = Counter()


def _count(m):
    _DRAWN[0] += 1
    _KIND_COUNTS.update(drawn_kinds(m))
    return m


def _oracle_seen(outs) -> None:  # type: ignore[no-untyped-def]
    """Counts the graphs whose float64 oracle returned a NaN or an infinity somewhere."""
    if any(o.dtype.kind == "f" and not np.isfinite(o).all() for o in outs):
        _KIND_COUNTS["non-finite output"] += 1


GRAPHS = modules().map(_count)


@pytest.fixture(autouse=True)
def _report_graphs(request):
    _DRAWN[0] = 0
    _KIND_COUNTS.clear()
    yield
    path = os.environ.get("IRKIT_FUZZ_STATS")
    if path:
        kinds = "".join(f" {k.replace(' ', '_')}={_KIND_COUNTS[k]}" for k in (*SPECIAL_KINDS, "non-finite output"))
        with open(path, "a") as f:
            f.write(f"{request.node.name} {_DRAWN[0]}{kinds}\n")


@SETTINGS
@given(GRAPHS)
def test_print_parse_round_trip(m) -> None:
    verify(m)
    text = print_module(m)
    m2 = parse_module(text)
    verify(m2)
    assert print_module(m2) == text


def _slack(p, m, xs):  # type: ignore[no-untyped-def]
    """For a pass that rounds some ops to a lower precision: how much the program's own
    conditioning amplifies that rounding (None for every other pass)."""
    ops = p.rounds_ops
    if not ops:
        return None
    from irkit.check import rounding_slack
    from irkit.ir.types import DType

    return rounding_slack(m, xs, ops, DType.parse(p.compute))


@pytest.mark.parametrize("name", PASS_NAMES)
def test_pass_preserves_semantics(name: str) -> None:
    p = make_pass(name)
    exact = p.exact

    @SETTINGS
    @given(GRAPHS)
    def prop(m) -> None:
        note(print_module(m))
        xs = random_inputs(m.entry, seed=1)
        before = run(m, xs)
        oracle = run(m, xs, float64=True)
        _oracle_seen(oracle)
        after_m = m.clone()
        p.run(after_m, PassContext())
        verify(after_m)
        after = run(after_m, xs)
        if exact:
            for a, b in zip(after, before):
                np.testing.assert_array_equal(a, b)
        rep = compare_all(after, oracle, module_tolerance(after_m), slack=_slack(p, m, xs))
        assert rep.ok, [c.describe() for c in rep.comparisons]
        m2 = parse_module(print_module(after_m))
        assert print_module(m2) == print_module(after_m)

    prop()


@SETTINGS
@given(GRAPHS)
def test_canonicalize_idempotent(m) -> None:
    p = make_pass("canonicalize")
    p.run(m, PassContext())
    once = print_module(m)
    p.run(m, PassContext())
    assert print_module(m) == once


# -- whole pipelines: what a user runs before lowering to each kind of hardware

FUSE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"
PIPELINES = {
    "fuse": FUSE,
    "tpu": f"{FUSE},tile-matmul{{target=tpu-v5e}},assign-layout{{target=tpu-v5e}},canonicalize,cse,dce",
    "gpu": f"{FUSE},tile-matmul{{target=h100}},assign-layout{{target=h100}},canonicalize,cse,dce",
    "bf16": f"{FUSE},mixed-precision{{compute=bf16}},canonicalize,cse,dce",
}


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_pipeline_preserves_semantics(pipeline: str) -> None:
    from irkit.passmanager import run_pipeline

    @SETTINGS
    @given(GRAPHS)
    def prop(m) -> None:
        note(print_module(m))
        xs = random_inputs(m.entry, seed=2)
        oracle = run(m, xs, float64=True)
        _oracle_seen(oracle)
        after_m = m.clone()
        run_pipeline(after_m, PIPELINES[pipeline], verify_each=True)
        after = run(after_m, xs)
        slack = _slack(make_pass("mixed-precision", {"compute": "bf16"}), m, xs) if pipeline == "bf16" else None
        rep = compare_all(after, oracle, module_tolerance(after_m), slack=slack)
        assert rep.ok, [c.describe() for c in rep.comparisons] + [print_module(m)]

    prop()


# -- every target that runs here: its outputs match the oracle on the same random graphs.
# Targets compile each graph, so they get fewer examples than passes:
# IRKIT_FUZZ_TARGET_EXAMPLES (CI 20; `make fuzz` 500), or IRKIT_FUZZ_TARGET_EXAMPLES_<TARGET> for one
# target (IRKIT_FUZZ_TARGET_EXAMPLES_TVM_LLVM, or `scripts/fuzz.py --target-graphs-for tvm-llvm=N`).

NT = int(os.environ.get("IRKIT_FUZZ_TARGET_EXAMPLES", "20"))


def _runnable_targets() -> list[str]:
    from irkit.targets.registry import TARGETS, get_target, load_targets

    load_targets()
    return sorted(n for n in TARGETS if get_target(n).availability().can_run)


@pytest.mark.parametrize("target", _runnable_targets())
@pytest.mark.parametrize("pipeline", ["none", "fuse"])
def test_target_matches_oracle(target: str, pipeline: str) -> None:
    from irkit.interp import bind_symbols
    from irkit.passmanager import run_pipeline
    from irkit.targets.registry import get_target

    t = get_target(target)

    # No shrinking: each step would compile again; the failing module is printed instead.
    nt = int(os.environ.get("IRKIT_FUZZ_TARGET_EXAMPLES_" + target.upper().replace("-", "_"), NT))

    @settings(SETTINGS, max_examples=nt, phases=[Phase.explicit, Phase.reuse, Phase.generate])
    @given(GRAPHS)
    def prop(m) -> None:
        note(print_module(m))
        xs = random_inputs(m.entry, seed=3)
        oracle = run(m, xs, float64=True)
        _oracle_seen(oracle)
        lowered = m.clone()
        if pipeline != "none":
            run_pipeline(lowered, PIPELINES[pipeline])
        art = t.lower(lowered, bind_symbols(lowered.entry, xs))
        got = t.run(art, xs)
        rep = compare_all(got, oracle, module_tolerance(lowered))
        assert rep.ok, [c.describe() for c in rep.comparisons] + [print_module(m)]

    prop()
