"""One entry point for the passes: matmul tiles and memory-layout tiles for any spec.

``tile-matmul`` asks :func:`choose_matmul_tile` for the best (tile_m, tile_n, tile_k)
and, on systolic targets, the dataflow; ``assign-layout`` asks :func:`layout_tile`
which 2-D tile the last two dims of a tensor should be padded to. Both dispatch on
the spec's kind to the systolic or SIMT model, so a pass never needs to know which
kind of hardware it is tiling for.
"""

from __future__ import annotations

from dataclasses import dataclass

from irkit.targets.costmodel.simt import SimtGemmCost, choose_cta_tile
from irkit.targets.costmodel.systolic import SystolicGemmCost, choose_systolic_tile
from irkit.targets.hwspec import HardwareSpec, dtype_bytes, load_spec

__all__ = ["MatmulTile", "MatmulTileChoice", "choose_matmul_tile", "layout_tile"]


@dataclass(frozen=True)
class MatmulTile:
    """A tile for one matmul on one spec, with its modelled cost."""

    tile_m: int
    """Rows of C per block (grid block on a TPU, CTA tile on a GPU)."""
    tile_n: int
    """Columns of C per block."""
    tile_k: int
    """Reduction length per step."""
    dataflow: str | None
    """Systolic dataflow (``ws``/``is``/``os``); None on GPUs."""
    warps: int | None
    """Warps per CTA on GPUs; None on systolic targets."""
    stages: int | None
    """Shared-memory pipeline stages on GPUs; None on systolic targets."""
    seconds: float
    """Modelled time of the whole matmul with this tile."""
    cost: SystolicGemmCost | SimtGemmCost
    """The kind-specific cost behind ``seconds``."""

    @property
    def tile(self) -> tuple[int, int, int]:
        """(tile_m, tile_n, tile_k)."""
        return (self.tile_m, self.tile_n, self.tile_k)


@dataclass(frozen=True)
class MatmulTileChoice:
    """The best tile and every legal candidate, best first."""

    best: MatmulTile
    """Fastest candidate."""
    candidates: tuple[MatmulTile, ...]
    """All legal candidates, sorted best first."""


def choose_matmul_tile(
    m: int, k: int, n: int, spec: HardwareSpec | str, dtype: str = "bf16", *, batch: int = 1
) -> MatmulTileChoice:
    """Best tile for ``batch`` matmuls ``[m,k] @ [k,n]`` on ``spec`` (systolic or SIMT).

    Systolic: :func:`~irkit.targets.costmodel.systolic.choose_systolic_tile` (dataflow
    included when the spec says ``auto``). SIMT:
    :func:`~irkit.targets.costmodel.simt.choose_cta_tile`. A CPU spec raises
    ValueError: its tiling belongs to the CPU compiler (TVM), not to this model.
    """
    hw = load_spec(spec)
    if hw.systolic is not None:
        sys_choice = choose_systolic_tile(m, k, n, hw, dtype, batch=batch)
        tiles = tuple(
            MatmulTile(c.tile_m, c.tile_n, c.tile_k, c.dataflow, None, None, c.cost.seconds, c.cost)
            for c in sys_choice.candidates
        )
    elif hw.simt is not None:
        simt_choice = choose_cta_tile(m, k, n, hw, dtype, batch=batch)
        tiles = tuple(
            MatmulTile(
                c.tile.bm, c.tile.bn, c.tile.bk, None, c.tile.warps, c.tile.stages, c.seconds, c
            )
            for c in simt_choice.candidates
        )
    else:
        raise ValueError(
            f"hardware '{hw.name}' is a CPU: matmul tiles are the CPU compiler's choice; "
            "use a systolic or SIMT spec"
        )
    return MatmulTileChoice(best=tiles[0], candidates=tiles)


def layout_tile(spec: HardwareSpec | str, dtype: str) -> tuple[int, int]:
    """(second-minor, minor) multiples the last two dims of a tensor should be padded to.

    TPU: the native memory tile, (8, 128) for 32-bit types, (16, 128) for 16-bit and
    (32, 128) for 8-bit (values pack along sublanes). GPU: rows are free, the minor
    dim wants 16-byte alignment for vector loads: (1, 16 / bytes). CPU: the minor dim
    wants a whole SIMD register: (1, vector_bits / 8 / bytes).
    """
    hw = load_spec(spec)
    size = dtype_bytes(dtype)
    if hw.systolic is not None:
        sublanes, lanes = hw.systolic.native_tile_f32
        return (sublanes * max(1, 4 // size), lanes)
    if hw.simt is not None:
        return (1, max(1, 16 // size))
    assert hw.cpu is not None
    return (1, max(1, hw.cpu.vector_bits // 8 // size))
