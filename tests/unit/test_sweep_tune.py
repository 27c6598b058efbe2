"""Tile tuning of the TVM CPU matmul: the candidate space, the cost-model ranking, end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from irkit.sweep.tune import candidates, matmul_sites, model_seconds, single_matmul_text


def _site(a: tuple[int, ...], b: tuple[int, ...]):  # type: ignore[no-untyped-def]
    from irkit.sweep.tune import MatmulSite
    from irkit.text.parser import parse_module

    return matmul_sites(parse_module(single_matmul_text(MatmulSite(0, a, b, "f32", True), None)), {})[0]


def test_candidates_are_clamped_and_unique() -> None:
    s = _site((2, 16, 32), (32, 96))
    c = candidates(s)
    assert c[0] == (16, 128, 32)  # the kernel's default 64x256x256, clamped to the problem
    assert len(c) == len(set(c))
    assert all(tm <= 16 and tn <= 128 and tk <= 32 for tm, tn, tk in c)


def test_cost_model_prefers_tiles_that_fill_the_cores_and_fit_l2() -> None:
    from irkit.targets.hwspec import load_spec

    hw = load_spec("host-cpu")
    s = _site((512, 512), (512, 512))
    # one giant tile keeps one core busy and leaves L2; a grid of cache-sized tiles does neither
    assert model_seconds(s, (64, 128, 128), hw) < model_seconds(s, (256, 512, 512), hw)
    # tiny tiles pay for their steps and re-read A and B many times
    assert model_seconds(s, (64, 128, 128), hw) < model_seconds(s, (8, 16, 16), hw)


@pytest.mark.slow
def test_tune_times_top_k_stores_and_applies(tmp_path: Path) -> None:
    from irkit.targets.registry import get_target

    from irkit.interp import random_inputs, run
    from irkit.sweep.executors import InProcess
    from irkit.sweep.store import Store
    from irkit.sweep.tune import MatmulSite, apply_tuning, tune
    from irkit.text.parser import parse_module

    m = parse_module(single_matmul_text(MatmulSite(0, (128, 256), (256, 256), "f32", True), None))
    with Store(tmp_path / "t.sqlite") as st:
        rep = tune(m, {}, st, InProcess(), top_k=2, budget=8, params={"repeats": 5, "max_seconds": 1.0})
        assert rep.ranked == 8 and rep.measured in (2, 3)  # the top 2, plus the default when not among them
        (site,) = rep.sites
        assert site["best_ms"] <= site["default_ms"]
        (row,) = st.tuning("tvm-llvm")
        assert row["measured"] == rep.measured and row["ranked"] == 8
        again = tune(m, {}, st, InProcess(), top_k=2, budget=8, params={"repeats": 5, "max_seconds": 1.0})
        assert again.sites == rep.sites  # everything came from the store
        assert apply_tuning(m, st) == 1
    op = next(o for o in m.entry.walk() if o.name == "ik.matmul")
    assert list(op.attrs["tile"]) == site["best_tile"]
    xs = random_inputs(m.entry, 3)
    t = get_target("tvm-llvm")
    got = t.run(t.lower(m, {}), xs)[0]
    np.testing.assert_allclose(got, run(m, xs, float64=True)[0], rtol=2e-4, atol=2e-5)
