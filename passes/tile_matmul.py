"""``tile-matmul``: choose (m, n, k) tiles — and the dataflow on systolic arrays — per matmul."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from irkit.passes._matmul_shapes import gemm_dims

from irkit.interp import default_bindings
from irkit.ir.core import Module, Op
from irkit.passmanager import Pass, PassContext, register_pass


def _cpu_tile(m: int, k: int, n: int, vector_bits: int, itemsize: int, l1d_kib: int = 32,
              l2_kib: int = 512, cores: int = 1) -> tuple[int, int, int]:
    """The cache tile of a BLIS-style CPU matmul (Low et al., "Analytical modeling is enough
    for high-performance BLIS", TOMS 2016), in the TVM kernel's terms:

    - the micro-kernel streams a ``tile_k x NR`` panel of B (NR = two SIMD vectors), which
      should fill about half of L1: ``tile_k = L1 / 2 / (NR * itemsize)``, a power of two;
    - one task's ``tile_k x tile_n`` block of B is reused across its rows and should fill
      about half of L2: ``tile_n = L2 / 2 / (tile_k * itemsize)``, a multiple of NR;
    - ``tile_m`` = 64 rows of packed A (64 KiB at ``tile_k`` 256) per task, halved while
      there are fewer tasks than cores.

    On this machine (32 KiB L1d, 512 KiB L2, AVX2) that is 64 x 256 x 256, the tile that
    measured fastest (0.93x OpenBLAS at 512^3); each extent is capped at the matrix size.
    """
    itemsize = max(itemsize, 4)  # 16-bit inputs are computed in f32 (no bf16/f16 FMA assumed)
    lanes = max(1, vector_bits // (8 * itemsize))
    nr = 2 * lanes
    tk = 1 << max(1, int(math.log2(max(1, l1d_kib * 1024 // 2 // (nr * itemsize)))))
    tn = max(nr, (l2_kib * 1024 // 2 // (tk * itemsize)) // nr * nr)
    tm = 64
    tk, tn, tm = min(k, tk), min(n, tn), min(m, tm)
    while tm > 8 and -(-m // tm) * -(-n // tn) < cores:
        tm //= 2
    return tm, tn, tk


@register_pass("tile-matmul")
@dataclass(frozen=True)
class TileMatmul(Pass):
    """Choose tile sizes (and the systolic dataflow) for every matmul from the hardware description.

    The tile minimising the target's cost model among legal configurations
    (VMEM/shared memory and register limits) is recorded on the op; the TVM and
    XLA/Pallas lowerings read it.

    before: %c = "ik.matmul"(%a, %b) : (tensor<512x768xbf16>, tensor<768x3072xbf16>) -> ...
    after:  %c = "ik.matmul"(%a, %b) {dataflow = "ws", tile = array<i64: 128, 512, 768>} ...
    """

    target: str = "tpu-v5e"
    """Name of a hardware description in targets/specs (or a path to your own TOML)."""

    def run(self, module: Module, ctx: PassContext) -> bool:
        from irkit.targets.costmodel.tiling import choose_matmul_tile
        from irkit.targets.hwspec import load_spec

        hw = load_spec(self.target)
        changed = False
        for f in module.functions:
            b = default_bindings(f)
            for op in list(f.walk()):
                if op.name not in ("ik.matmul", "ik.contract") or op.parent is None:
                    continue
                dims = gemm_dims(op, b)
                if dims is None:
                    continue
                batch, m, k, n = dims
                dt = op.results[0].type.dtype
                attrs: dict[str, Any] = dict(op.attrs)
                if hw.cpu is not None:
                    attrs["tile"] = _cpu_tile(m, k, n, hw.cpu.vector_bits, dt.itemsize, hw.cpu.l1d_kib,
                                              hw.cpu.l2_kib, hw.cpu.cores)
                    attrs.pop("dataflow", None)
                else:
                    best = choose_matmul_tile(m, k, n, hw, str(dt), batch=batch).best
                    attrs["tile"] = tuple(int(x) for x in best.tile)
                    if best.dataflow:
                        attrs["dataflow"] = best.dataflow
                    else:
                        attrs.pop("dataflow", None)
                if attrs != dict(op.attrs):
                    _set_attrs(op, attrs)
                    changed = True
                ctx.count("matmuls-tiled")
        return changed


def _set_attrs(op: Op, attrs: dict[str, Any]) -> None:
    """Replace an op by an identical one with new attributes (attributes are immutable)."""
    from irkit.ir.builder import Builder

    new = Builder.before_op(op).create(op.name, list(op.operands), attrs, op.loc, result_types=op.result_types)
    for old, nv in zip(op.results, new.results):
        old.replace_all_uses_with(nv)
    op.parent.erase(op)  # type: ignore[union-attr]
