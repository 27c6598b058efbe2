"""How well irkit's SIMT cost model ranks the tile configurations of TVM's CUDA matmuls.

NEEDS AN NVIDIA GPU for the measurement; everything else runs anywhere. The GPU check
(benchmarks/gpu_check.py) calls, on the GPU machine::

    from benchmarks.simt_rank import CASES, measure_tvm_cuda, rank, render_markdown
    measured = measure_tvm_cuda(CASES)            # {case.key: median seconds}
    print(render_markdown(rank(measured, "h200")))

``CASES`` is a small set of Transformer GEMMs (GPT-2-small FFN up and down over 2048
tokens, a square 1024³) times the tile configurations TVM's CUDA matmul kernel
(``targets/tvm_kernels/matmul.py``) accepts: f32 on CUDA cores (16×16 threads, each
owning a (tile_m/16)×(tile_n/16) register tile) and f16 through WMMA tensor cores (2×4
warps). For each case the model (:func:`irkit.targets.costmodel.simt_gemm`) is given the
CTA tile that kernel really launches: 8 warps, one shared-memory stage (the kernel stages
A and B tiles without a software pipeline), and for WMMA an ``mma.sync``-class
instruction rather than sm_90's wgmma, which TVM's kernel does not use.

:func:`rank` computes Spearman's rank correlation (``scipy.stats.spearmanr``) between
measured and modelled times over all cases and within each (shape, dtype) group: the
within-group figure is the one that says whether the model picks good tiles.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SHAPES: tuple[tuple[int, int, int], ...] = (
    (2048, 768, 3072),  # GPT-2-small FFN up, 2048 tokens (M, K, N)
    (2048, 3072, 768),  # FFN down
    (1024, 1024, 1024),
)
F32_TILES: tuple[tuple[int, int, int], ...] = (
    (32, 32, 8),
    (32, 64, 16),
    (64, 64, 8),
    (64, 64, 16),
    (64, 64, 32),
    (64, 128, 16),
    (128, 64, 16),
    (128, 128, 16),
)
F16_TILES: tuple[tuple[int, int, int], ...] = (
    # TVM's WMMA kernel needs tile_m a multiple of 32 and tile_n of 64 (2x4 warps of 16x16
    # fragments); the model's 8-warp grid (4x2 warps of m16n8) needs tile_m a multiple of 64.
    (64, 64, 16),
    (64, 64, 32),
    (64, 128, 32),
    (128, 64, 32),
    (128, 128, 32),
    (128, 256, 32),
)


@dataclass(frozen=True)
class GemmCase:
    """One TVM CUDA matmul: ``A[m,k] @ B[k,n]`` with one tile configuration."""

    m: int
    k: int
    n: int
    dtype: str
    """``float32`` (CUDA cores) or ``float16`` (WMMA tensor cores)."""
    tile_m: int
    tile_n: int
    tile_k: int

    @property
    def tensor_core(self) -> bool:
        return self.dtype != "float32"

    @property
    def group(self) -> str:
        """The (shape, dtype) whose tile configurations are ranked against each other."""
        return f"{self.dtype} {self.m}x{self.k}x{self.n}"

    @property
    def key(self) -> str:
        """How measured times are keyed: ``float32 2048x768x3072 tile 64x64x16``."""
        return f"{self.group} tile {self.tile_m}x{self.tile_n}x{self.tile_k}"

    def cta_tile(self) -> Any:
        """The CTA tile TVM's kernel launches for this case, in the SIMT model's terms."""
        from irkit.targets.costmodel.simt import CtaTile

        # Both kernels use 256 threads: 16x16 CUDA-core threads, or a 2x4 grid of warps.
        return CtaTile(self.tile_m, self.tile_n, self.tile_k, warps=8, stages=1)


def _cases() -> tuple[GemmCase, ...]:
    out = [GemmCase(m, k, n, "float32", *t) for (m, k, n) in SHAPES for t in F32_TILES]
    out += [GemmCase(m, k, n, "float16", *t) for (m, k, n) in SHAPES[::2] for t in F16_TILES]
    return tuple(out)


CASES: tuple[GemmCase, ...] = _cases()
"""Every case: 3 shapes x 8 f32 tiles, 2 shapes x 6 f16 tiles."""


def model_spec(case: GemmCase, spec: Any = "h200") -> Any:
    """``spec`` as the model should see it for this kernel: TVM's WMMA kernel issues
    mma.sync-class instructions even on sm_90, so wgmma is turned off."""
    from irkit.targets.hwspec import load_spec

    hw = load_spec(spec)
    if hw.simt is None:
        raise ValueError(f"{hw.name} is not a SIMT (GPU) description; use a100, h100 or h200")
    if case.tensor_core and hw.simt.wgmma:
        hw = dataclasses.replace(hw, simt=dataclasses.replace(hw.simt, wgmma=False))
    return hw


def predicted_seconds(case: GemmCase, spec: Any = "h200") -> float:
    """The SIMT model's time for ``case`` (raises ValueError naming the case if illegal)."""
    from irkit.targets.costmodel.simt import simt_gemm

    dtype = "f32" if case.dtype == "float32" else "f16"
    try:
        return simt_gemm(
            case.m, case.k, case.n, model_spec(case, spec), dtype, tile=case.cta_tile()
        ).seconds
    except ValueError as e:
        raise ValueError(f"{case.key}: {e}") from None


@dataclass(frozen=True)
class RankResult:
    """Spearman's rho between measured and modelled times."""

    spec: str
    rho: float
    pvalue: float
    n: int
    groups: dict[str, tuple[float, int]]
    """Per (shape, dtype): (rho, number of tile configurations)."""
    rows: list[tuple[str, float, float]]
    """(case key, measured seconds, modelled seconds), in CASES order."""


def _spearman(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    from scipy.stats import spearmanr

    r = spearmanr(xs, ys)
    return float(r.statistic), float(r.pvalue)


def rank(
    measured: Mapping[str, float],
    spec: Any = "h200",
    cases: Sequence[GemmCase] = CASES,
) -> RankResult:
    """Rank correlation of ``measured`` (``{case.key: seconds}``) with the model's times.

    Every case in ``cases`` must have a positive measured time; unknown keys are errors
    (a misspelt key must not silently drop a case)."""
    known = {c.key for c in cases}
    unknown = sorted(set(measured) - known)
    if unknown:
        raise ValueError(f"measured times for unknown cases: {', '.join(unknown[:3])}")
    missing = [c.key for c in cases if c.key not in measured]
    if missing:
        raise ValueError(
            f"no measured time for {len(missing)} case(s), e.g. {missing[0]!r}; "
            "time every case in CASES or pass cases="
        )
    bad = [k for k, v in measured.items() if not v > 0]
    if bad:
        raise ValueError(f"measured time for {bad[0]!r} is {measured[bad[0]]!r}; need seconds > 0")
    if len(cases) < 3:
        raise ValueError("need at least 3 cases to rank")
    rows = [(c.key, float(measured[c.key]), predicted_seconds(c, spec)) for c in cases]
    rho, p = _spearman([r[1] for r in rows], [r[2] for r in rows])
    groups: dict[str, tuple[float, int]] = {}
    for g in dict.fromkeys(c.group for c in cases):
        sub = [r for c, r in zip(cases, rows, strict=True) if c.group == g]
        if len(sub) >= 3:
            groups[g] = (_spearman([r[1] for r in sub], [r[2] for r in sub])[0], len(sub))
    name = spec if isinstance(spec, str) else getattr(spec, "name", str(spec))
    return RankResult(name, rho, p, len(rows), groups, rows)


def render_markdown(result: RankResult) -> str:
    """A BENCHMARKS.md section: per-group and overall rho, then every case."""
    lines = [
        f"### SIMT model vs measured TVM CUDA matmuls ({result.spec})",
        "",
        f"Spearman rho over all {result.n} cases: **{result.rho:.3f}** (p = {result.pvalue:.2g}).",
        "",
        "| shape (M x K x N) | tile configurations | rho |",
        "|---|---:|---:|",
        *(f"| {g} | {n} | {rho:.3f} |" for g, (rho, n) in result.groups.items()),
        "",
        "| case | measured ms | model ms | model / measured |",
        "|---|---:|---:|---:|",
        *(f"| {k} | {t * 1e3:.4g} | {p * 1e3:.4g} | {p / t:.2f} |" for k, t, p in result.rows),
        "",
    ]
    return "\n".join(lines)


def build_kernel(case: GemmCase, arch: str = "sm_90") -> Any:
    """TVM's CUDA matmul kernel for ``case`` (builds anywhere; runs on a GPU)."""
    from irkit.targets.tvm_kernels.matmul import matmul

    return matmul(
        (case.m, case.k),
        (case.k, case.n),
        case.dtype,
        tile_m=case.tile_m,
        tile_n=case.tile_n,
        tile_k=case.tile_k,
        tensor_core=case.tensor_core,
        target={"kind": "cuda", "arch": arch},
        name="matmul",
    )


def measure_tvm_cuda(
    cases: Sequence[GemmCase] = CASES, *, arch: str = "sm_90", number: int = 10, repeat: int = 5
) -> dict[str, float]:
    """NEEDS A GPU. Median seconds per call of each case's kernel on ``tvm.cuda(0)``
    (TVM's time_evaluator: ``repeat`` figures, each the mean of ``number`` calls)."""
    import numpy as np
    import tvm
    from irkit.targets.tvm_kernels.common import compile_kernel

    dev = tvm.cuda(0)
    if not dev.exist:
        raise RuntimeError("measure_tvm_cuda needs an NVIDIA GPU (tvm.cuda(0) does not exist)")
    rng = np.random.default_rng(0)
    out: dict[str, float] = {}
    for c in cases:
        kernel = build_kernel(c, arch)
        lib, _ = compile_kernel(kernel)
        args = [
            tvm.runtime.tensor(rng.standard_normal(s.shape).astype(s.dtype), dev)
            for s in kernel.inputs
        ]
        outs = [tvm.runtime.empty(o.shape, o.dtype, dev) for o in kernel.outputs]
        ev = lib.mod.time_evaluator(kernel.name, dev, number=number, repeat=repeat)
        out[c.key] = statistics.median(ev(*args, *outs).results)
    return out


__all__ = [
    "CASES",
    "GemmCase",
    "RankResult",
    "build_kernel",
    "measure_tvm_cuda",
    "model_spec",
    "predicted_seconds",
    "rank",
    "render_markdown",
]
