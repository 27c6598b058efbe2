"""tvm-cuda build size: identical kernels compiled once, nvcc unrolls the SIMT matmul's k loop, and
the matmul's thread bindings survive register tiles of extent 1 (no GPU needed)."""

from __future__ import annotations

import re

import pytest
from irkit.targets.registry import get_target
from irkit.targets.tvm_kernels import common as c
from irkit.targets.tvm_kernels import matmul as mm

from irkit.passmanager import run_pipeline
from irkit.testing.blocks import gpt2_style_module

PIPE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"
needs_nvcc = pytest.mark.skipif(c.find_nvcc() is None, reason="nvcc not installed")


def _defined_kernels(src: str) -> list[str]:
    return re.findall(r'^extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\([^;]*\{\s*$', src, re.M)


def _enclosing_loops(script: str, block: str) -> list[str]:
    """The loop headers around ``T.sblock("<block>")`` in a TVMScript listing, outermost first."""
    lines = script.splitlines()
    at = next(i for i, line in enumerate(lines) if f'T.sblock("{block}")' in line)
    indent = len(lines[at]) - len(lines[at].lstrip())
    found = []
    for line in reversed(lines[:at]):
        ind = len(line) - len(line.lstrip())
        if line.strip() and ind < indent:
            indent = ind
            if line.lstrip().startswith("for "):
                found.append(line.strip())
    return found[::-1]


def test_two_identical_layers_compile_one_copy_of_each_kernel() -> None:
    m = gpt2_style_module(layers=2, hidden=32, heads=2, vocab=64, max_pos=32)
    run_pipeline(m, PIPE)
    art = get_target("tvm-cuda").lower(m, {"B": 1, "S": 16})
    src = art.files["kernels.cu"]
    defined = _defined_kernels(src)
    assert defined and len(defined) == len(set(defined))
    assert art.info.get("merged_functions", 0) >= 4  # attention, layer norms, matmuls of layer 2
    # every scheduled kernel names functions that exist in the source (a merged copy names the kept one)
    names = {d.removesuffix("_kernel") for d in defined}
    for k in art.kernels:
        if k.kind != "scheduled TensorIR":
            continue  # a TOPI function can be fused into another or folded away
        for f in k.extra["functions"]:
            assert any(n == f or n.startswith(f + "_") for n in names), (k.name, f)
    # both layers' attention ops are attributed to the one attention kernel kept
    attn = [k for k in art.kernels if any(o.startswith("ik.attention") for o in k.ir_ops)]
    assert len(attn) == 2 and len({tuple(k.extra["functions"]) for k in attn}) == 1
    if c.find_nvcc():
        assert art.files["kernels.ptx"].count(".entry") == len(defined)
        assert "registers" in art.info["ptxas"]


@pytest.mark.parametrize("a_shape,b_shape", [((2, 16, 64), (64, 176)), ((8, 2), (2, 16)), ((64, 64), (64, 256))])
def test_simt_matmul_binds_both_thread_axes(a_shape, b_shape) -> None:
    # a 16-row tile leaves a register tile of extent 1: unrolling the epilogue's last two loops then
    # unrolled threadIdx.x itself, and every thread of a row computed the whole row tile
    k = mm.matmul(a_shape, b_shape, target="cuda", tile_m=64, tile_n=64, tile_k=32)
    script = k.func.script()
    for block in ("C_acc_update", "out"):
        loops = _enclosing_loops(script, block)
        assert any('thread="threadIdx.x"' in h for h in loops), (block, loops)
        assert any('thread="threadIdx.y"' in h for h in loops), (block, loops)


@needs_nvcc
def test_simt_matmul_source_is_small_and_pragmas_sit_on_loops() -> None:
    # k steps and the activation epilogue are left to nvcc (#pragma unroll): 278 KB of CUDA before
    k = mm.matmul((64, 64), (64, 256), target="cuda", tile_k=64, bias=True, activation="gelu_erf")
    lib, _ = c.compile_kernel(k)
    src = c.cuda_source_of(lib)
    assert len(src) < 30_000, len(src)
    lines = [line.strip() for line in src.splitlines()]
    pragmas = [i for i, line in enumerate(lines) if line == "#pragma unroll"]
    assert pragmas and all(lines[i + 1].startswith("for (") for i in pragmas)
    ptx, info = c.cuda_to_ptx(src, "sm_90")
    assert ".entry matmul_kernel" in ptx
    # ptxas assembled the PTX: registers and spills are reported, and nothing spills
    regs = re.search(r"Used (\d+) registers", info)
    assert regs and 0 < int(regs.group(1)) <= 255
    assert "0 bytes spill stores" in info
