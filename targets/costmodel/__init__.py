"""Analytic cost models over shapes and hardware descriptions.

Pure functions of numbers and :class:`~irkit.targets.hwspec.HardwareSpec` objects (or
spec names), so passes (``tile-matmul``, ``assign-layout``) and targets'
``estimate`` share one source of truth:

* :mod:`.systolic`: GEMMs on TPU-like systolic arrays (folds, fill and drain,
  dataflows, double buffering, SCALE-Sim-exact cycle counts), tile and dataflow choice.
* :mod:`.simt`: GEMMs on GPUs (CTA tiles, occupancy, waves, tensor cores, L2).
* :mod:`.roofline`: roofline for any op and device, matmul dispatch by kind,
  attention fused vs unfused.
* :mod:`.tiling`: one entry point for passes: matmul tiles and layout tiles for any spec.

The formulas are written out in docs/hardware.md.
"""

from __future__ import annotations

from irkit.targets.costmodel.roofline import (
    AttentionCost,
    OpCost,
    attention_bytes,
    attention_cost,
    attention_flops,
    matmul_cost,
    op_cost,
    roofline,
)
from irkit.targets.costmodel.simt import (
    DEFAULT_CTA_TILES,
    CtaResources,
    CtaTile,
    SimtGemmCost,
    SimtTileChoice,
    choose_cta_tile,
    cta_resources,
    simt_gemm,
)
from irkit.targets.costmodel.systolic import (
    DATAFLOWS,
    SystolicGemmCost,
    SystolicTileCandidate,
    SystolicTileChoice,
    best_dataflow,
    choose_systolic_tile,
    systolic_gemm,
)
from irkit.targets.costmodel.tiling import (
    MatmulTile,
    MatmulTileChoice,
    choose_matmul_tile,
    layout_tile,
)

__all__ = [
    "DATAFLOWS",
    "DEFAULT_CTA_TILES",
    "AttentionCost",
    "CtaResources",
    "CtaTile",
    "MatmulTile",
    "MatmulTileChoice",
    "OpCost",
    "SimtGemmCost",
    "SimtTileChoice",
    "SystolicGemmCost",
    "SystolicTileCandidate",
    "SystolicTileChoice",
    "attention_bytes",
    "attention_cost",
    "attention_flops",
    "best_dataflow",
    "choose_cta_tile",
    "choose_matmul_tile",
    "choose_systolic_tile",
    "cta_resources",
    "layout_tile",
    "matmul_cost",
    "op_cost",
    "roofline",
    "simt_gemm",
    "systolic_gemm",
]
