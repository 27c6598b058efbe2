"""``tile-matmul``: choose (m, n, k) tiles — and the dataflow on systolic arrays — per matmul."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from irkit.interp import default_bindings
from irkit.ir.core import Module, Op
from irkit.passmanager import Pass, PassContext, register_pass
from irkit.passes._matmul_shapes import gemm_dims


def _cpu_tile(m: int, k: int, n: int, vector_bits: int, itemsize: int) -> tuple[int, int, int]:
    """A register/cache tile for CPUs: N a multiple of the SIMD width (4 vectors wide),
    M a block of 32 rows, K 128 deep, so an A panel, a B panel and the C block fit
    in L2 together (32*128 + 128*64 + 32*64 floats = 56 KiB for 512-bit vectors)."""
    lanes = max(1, vector_bits // (8 * itemsize))
    tn = min(n, 4 * lanes)
    tm = min(m, 32)
    tk = min(k, 128)
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
                    attrs["tile"] = _cpu_tile(m, k, n, hw.cpu.vector_bits, dt.itemsize)
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
