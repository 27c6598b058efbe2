"""The SIMT-model rank check of benchmarks/simt_rank.py, without a GPU.

The measurement itself needs an NVIDIA GPU (benchmarks/gpu_check.py runs it). Here: the
case set is legal for both TVM's CUDA matmul kernel and the model, the model separates
the tiles it is asked to rank, and the correlation code path gives the right rho for
known orderings of the model's own predictions.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("simt_rank", ROOT / "benchmarks" / "simt_rank.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["simt_rank"] = mod
    spec.loader.exec_module(mod)
    return mod


sr = _load()


def _groups() -> dict[str, list]:
    out: dict[str, list] = {}
    for c in sr.CASES:
        out.setdefault(c.group, []).append(c)
    return out


def test_case_set_is_legal_and_separated_by_the_model() -> None:
    groups = _groups()
    assert len(groups) >= 4 and {c.dtype for c in sr.CASES} == {"float32", "float16"}
    assert len({c.key for c in sr.CASES}) == len(sr.CASES)
    for g, cases in groups.items():
        assert len(cases) >= 5, g
        times = [sr.predicted_seconds(c, "h200") for c in cases]  # raises if a tile is illegal
        assert all(t > 0 for t in times)
        # Ranking is only informative if the model tells the tiles apart.
        assert len({round(t, 12) for t in times}) >= 4, (g, times)
        for c in cases:
            # TVM's kernels would round these up; the model must see the tile that runs.
            assert c.m % c.tile_m == 0 and c.n % c.tile_n == 0 and c.k % c.tile_k == 0
            if c.tensor_core:
                assert c.tile_m % 32 == 0 and c.tile_n % 64 == 0 and c.tile_k % 16 == 0
            else:
                assert c.tile_m % 16 == 0 and c.tile_n % 16 == 0


def test_small_cuda_core_tiles_pay_for_their_loads() -> None:
    """Register blocking: a 2x2 block per thread spends half its issue slots on loads."""
    small = next(c for c in sr.CASES if c.key == "float32 1024x1024x1024 tile 32x32x8")
    big = next(c for c in sr.CASES if c.key == "float32 1024x1024x1024 tile 64x128x16")
    assert sr.predicted_seconds(small) > 1.3 * sr.predicted_seconds(big)


def test_rank_of_the_models_own_order_and_its_reverse() -> None:
    pred = {c.key: sr.predicted_seconds(c, "h200") for c in sr.CASES}
    same = sr.rank({k: 3.7 * v for k, v in pred.items()}, "h200")
    assert same.rho == pytest.approx(1.0) and same.n == len(sr.CASES)
    assert all(r == pytest.approx(1.0) for r, _ in same.groups.values())
    # Reverse the order within every group, keeping each group's times in its own range.
    rev: dict[str, float] = {}
    for cases in _groups().values():
        ordered = sorted(cases, key=lambda c: pred[c.key])
        times = sorted({pred[c.key] for c in cases})
        for c in ordered:
            rev[c.key] = times[len(times) - 1 - times.index(pred[c.key])]
    back = sr.rank(rev, "h200")
    assert all(r == pytest.approx(-1.0) for r, _ in back.groups.values())


def test_rank_of_a_known_permutation() -> None:
    """Swap the measured times of the two fastest distinct tiles of one tie-free subset:
    rho = 1 - 6 * sum(d^2) / (n (n^2 - 1)) with d = +-1 for the swapped pair."""
    g = "float16 2048x768x3072"
    cases = [c for c in sr.CASES if c.group == g]
    pred = {c.key: sr.predicted_seconds(c) for c in cases}
    # one case per distinct prediction, so there are no ties
    seen: dict[float, object] = {}
    for c in cases:
        seen.setdefault(round(pred[c.key], 12), c)
    sub = sorted(seen.values(), key=lambda c: pred[c.key])
    n = len(sub)
    assert n >= 4
    measured = {c.key: pred[c.key] for c in sub}
    a, b = sub[0].key, sub[1].key
    measured[a], measured[b] = measured[b], measured[a]
    res = sr.rank(measured, "h200", cases=sub)
    assert res.rho == pytest.approx(1 - 6 * 2 / (n * (n * n - 1)))
    md = sr.render_markdown(res)
    assert f"| {a} |" in md and "Spearman rho" in md


def test_bad_measurements_are_one_line_errors() -> None:
    pred = {c.key: sr.predicted_seconds(c) for c in sr.CASES}
    with pytest.raises(ValueError, match="no measured time for 1 case"):
        sr.rank({k: v for k, v in list(pred.items())[1:]})
    with pytest.raises(ValueError, match="unknown cases: float32 1x1x1"):
        sr.rank({**pred, "float32 1x1x1 tile 1x1x1": 1.0})
    with pytest.raises(ValueError, match="need seconds > 0"):
        sr.rank({**pred, sr.CASES[0].key: 0.0})
    with pytest.raises(ValueError, match="not a SIMT"):
        sr.rank(pred, "tpu-v5e")


@pytest.mark.slow
def test_each_kind_of_kernel_builds_for_sm_90_with_the_cases_tile() -> None:
    """One CUDA-core and one WMMA case through TVM (CUDA source, no GPU needed)."""
    pytest.importorskip("tvm")
    from irkit.targets.tvm_kernels.common import compile_kernel, cuda_source_of

    for key in ("float32 1024x1024x1024 tile 64x64x16", "float16 1024x1024x1024 tile 64x128x32"):
        case = next(c for c in sr.CASES if c.key == key)
        kernel = sr.build_kernel(case)
        cfg = kernel.config
        assert (cfg["tile_m"], cfg["tile_n"], cfg["tile_k"]) == (
            case.tile_m,
            case.tile_n,
            case.tile_k,
        )
        src = cuda_source_of(compile_kernel(kernel)[0])
        assert "__global__" in src
        assert ("wmma" in src) == case.tensor_core
