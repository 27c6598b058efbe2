"""WMMA tensorization without ``Schedule.tensorize``: a workaround for the 0.27 wheel.

Why this exists
---------------
``tvm.s_tir.Schedule.tensorize`` deep-copies the intrinsic's implementation through
``SaveJSON``/``LoadJSON``, and JSON serialisation is broken in apache-tvm 0.27.0.post1. The real
attempt, ``sch.tensorize(loop, "wmma_load_16x16x16_f16_a_shared_dyn")``, dies with::

    !!!!!!! Segfault encountered !!!!!!!
      File "<unknown>", line 0, in tvm::ffi::ToJSONGraph(tvm::ffi::Any const&, tvm::ffi::Any const&)
      File "<unknown>", line 0, in tvm::s_tir::Tensorize(tvm::s_tir::ScheduleState, ...)

and ``tvm.ir.save_json`` on a plain ``IntImm`` segfaults (on a small PrimFunc it hangs) -- the
same bug that makes MetaSchedule crash. Importing ``tvm.s_tir.tensor_intrin`` is also slow
(it parses a few hundred TVMScript intrinsics through ``inspect.stack()``: tens of seconds on a
loaded 2-core host), so the bodies are built here directly.

What it does instead
--------------------
The schedule ``blockize``\\ s each loop nest that should become one WMMA call and marks the
block with its role (:func:`mark`: ``fill``, ``load_a``, ``load_b``, ``mma``, ``store``). After
scheduling, :func:`apply_marked` replaces each marked block's body with the ``nvcuda::wmma``
builtin (``tvm_fill_fragment``, ``tvm_load_matrix_sync``, ``tvm_mma_sync``,
``tvm_store_matrix_sync``) and binds fresh buffers to the block's read/write regions with
``match_buffer`` -- the same TIR that ``tensorize`` produces from TVM's registered WMMA
intrinsics (``tvm/s_tir/tensor_intrin/cuda.py``), including the fragment-index arithmetic.

Unlike ``tensorize`` this does not prove that the marked block computes what the intrinsic
describes; the schedule is trusted to mark 16×16(×16) nests of the right shape. The tests
check the generated CUDA (``wmma::mma_sync`` present, nvcc/ptxas accept it); numerics need a
GPU.
"""

from __future__ import annotations

from typing import Any

import tvm_ffi
from tvm import s_tir, tirx
from tvm.s_tir import MatchBufferRegion, SBlock

MARK = "irkit.wmma"
ROLES = ("fill", "load_a", "load_b", "mma", "store")
WMMA_M = WMMA_N = WMMA_K = 16


def mark(sch: s_tir.Schedule, loop: Any, role: str) -> Any:
    """Blockize the 16×16 nest under ``loop`` and mark it to become the WMMA call ``role``."""
    if role not in ROLES:
        raise ValueError(f"unknown WMMA role {role!r}; expected one of {ROLES}")
    block = sch.blockize(loop)
    sch.annotate(block, MARK, role)
    return block


def _match(region: tirx.BufferRegion, name: str) -> tuple[tirx.Buffer, MatchBufferRegion, Any]:
    """A fresh 16×16 buffer view of ``region`` (symbolic strides and offset, like the
    intrinsic's ``match_buffer``); returns (view, match, row stride)."""
    src = _buffer_of(region)
    stride1 = tirx.Var(f"{name}_s1", "int32")
    stride0 = tirx.Var(f"{name}_s0", "int32")
    view = tirx.decl_buffer(
        (WMMA_M, WMMA_N),
        str(src.dtype),
        name,
        strides=[stride1, stride0],
        elem_offset=tirx.Var(f"{name}_off", "int32"),
        scope=src.scope(),
        data_alignment=64,
        offset_factor=16,
    )
    return view, MatchBufferRegion(view, region), stride1


def _frag_index(view: tirx.Buffer, stride: Any) -> Any:
    """Which 16×16 fragment of the fragment buffer ``view`` starts at (TVM's formula)."""
    off = view.elem_offset
    return (off // stride // WMMA_M) * (stride // WMMA_N) + (off % stride // WMMA_N)


def _buffer_of(region: Any) -> tirx.Buffer:
    """The buffer of a block read/write region (0.27 calls it ``TensorRegion.source``)."""
    return region.source if hasattr(region, "source") else region.buffer


def _first(regions: Any, scope: str) -> Any:
    for r in regions:
        if _buffer_of(r).scope() == scope:
            return r
    raise ValueError(f"no buffer region in scope {scope!r}")


def _replace(block: SBlock) -> SBlock:
    role = block.annotations.get(MARK, None)
    if role is None:
        return block
    role = str(role)
    call: Any
    matches: list[MatchBufferRegion] = []
    m, n, k = WMMA_M, WMMA_N, WMMA_K
    if role == "fill":
        c, mc, cs = _match(block.writes[0], "C")
        matches = [mc]
        call = tirx.call_intrin(
            "void",
            "tirx.tvm_fill_fragment",
            c.data,
            m,
            n,
            k,
            _frag_index(c, cs),
            tirx.const(0, str(c.dtype)),
        )
    elif role in ("load_a", "load_b"):
        a, ma, as_ = _match(block.reads[0], "A")
        c, mc, cs = _match(block.writes[0], "C")
        matches = [ma, mc]
        dtype = str(a.dtype)
        call = tirx.call_intrin(
            "void",
            "tirx.tvm_load_matrix_sync",
            c.data,
            m,
            n,
            k,
            _frag_index(c, cs),
            a.access_ptr("r", ptr_type=dtype),
            as_,
            "row_major",
        )
    elif role == "store":
        a, ma, as_ = _match(block.reads[0], "A")
        c, mc, cs = _match(block.writes[0], "C")
        matches = [ma, mc]
        call = tirx.call_intrin(
            "void",
            "tirx.tvm_store_matrix_sync",
            a.data,
            m,
            n,
            k,
            _frag_index(a, as_),
            c.access_ptr("w", ptr_type=str(c.dtype)),
            cs,
            "row_major",
        )
    else:  # mma
        a, ma, as_ = _match(_first(block.reads, "wmma.matrix_a"), "A")
        b, mb, bs = _match(_first(block.reads, "wmma.matrix_b"), "B")
        c, mc, cs = _match(block.writes[0], "C")
        matches = [ma, mb, mc]
        ci = _frag_index(c, cs)
        call = tirx.call_intrin(
            "void",
            "tirx.tvm_mma_sync",
            c.data,
            ci,
            a.data,
            _frag_index(a, as_),
            b.data,
            _frag_index(b, bs),
            c.data,
            ci,
        )
    annotations = {key: v for key, v in block.annotations.items() if key != MARK}
    return SBlock(
        block.iter_vars,
        block.reads,
        block.writes,
        block.name_hint,
        tirx.Evaluate(call),
        None,
        list(block.alloc_buffers),
        matches,
        annotations,
    )


def apply_marked(func: tirx.PrimFunc) -> tirx.PrimFunc:
    """Replace every block marked by :func:`mark` with its WMMA call."""
    return tvm_ffi.structural_map(func, (SBlock, _replace), order="post")
