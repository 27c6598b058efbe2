"""Attention variants ``fuse-attention`` fuses: logit soft-capping (Gemma 2), ALiBi through a
``[B*H, S, S]`` view (BLOOM's ``baddbmm``) and DeBERTa-v2's relative-position bias terms.

* the fused module keeps the numbers of the unfused one (float64 interpreter), for each positive
  case (a keep-mask filled with finfo.min beside a bias is folded into the bias, so a row with every
  key masked keeps its unfused value) of ``tests/filecheck/fuse-attention/{softcap,batch-reshape}.mlir``;
* ``ik.attention`` with ``softcap`` matches the float64 oracle on every target that runs here
  (onnxruntime through opset-23 Attention and decomposed, XLA:CPU, TVM LLVM), fully masked rows
  included (zeros); the TVM kernel itself, its CUDA build (source and PTX) and XLA:TPU compile;
* slow: the zoo's gemma2, bloom and deberta_v2 through ``.pt2``: every attention layer fused.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")  # see targets/xla.py

from irkit.check import compare_all, module_tolerance
from irkit.interp import run
from irkit.ir.ops import attention_reference
from irkit.passmanager import PassManager
from irkit.testing.op_samples import Sample, one_op_module
from irkit.text import parse_module

FILECHECK = Path(__file__).resolve().parents[1] / "filecheck" / "fuse-attention"
PIPELINE = "canonicalize,fuse-attention,cse,dce"
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None


def _chunks(name: str) -> list[tuple[str, str]]:
    """(sym_name, text) of each split-input chunk of a FileCheck file that fuses (its CHECK names ik.attention)."""
    out = []
    for chunk in (FILECHECK / name).read_text().split("// -----"):
        if "CHECK-NOT: \"ik.attention\"" in chunk:
            continue
        sym = chunk.split('sym_name = "')[1].split('"')[0]
        out.append((sym, chunk))
    return out


CASES = _chunks("softcap.mlir") + _chunks("batch-reshape.mlir")


def _inputs(fn: Any, rng: np.random.Generator) -> list[np.ndarray]:
    xs = []
    for a in fn.args:
        shape = tuple(int(d) for d in a.type.shape)
        if a.type.dtype.is_bool:
            keep = rng.random(shape) < 0.7
            keep[..., 0] = True  # every query row keeps a key: the unfused form is defined everywhere
            xs.append(keep)
        else:
            # large enough that a cap of 30-50 on scores of scale ~0.1-0.35 bends some of them
            xs.append((4.0 * rng.standard_normal(shape)).astype(a.type.dtype.np))
    return xs


@pytest.mark.parametrize("sym,text", CASES, ids=[c[0] for c in CASES])
def test_fused_variant_keeps_the_numbers(sym: str, text: str) -> None:
    m = parse_module(text)
    fused = m.clone()
    PassManager(PIPELINE).run(fused)
    atts = [op for op in fused.walk() if op.name == "ik.attention"]
    assert len(atts) == 1 and not any(op.name == "ik.softmax" for op in fused.walk()), sym
    rng = np.random.default_rng(7)
    for _ in range(3):
        xs = _inputs(m.entry, rng)
        want = run(m, xs, float64=True)
        got = run(fused, xs, float64=True)
        assert np.abs(want[0]).max() > 0.1
        np.testing.assert_allclose(got[0], want[0], rtol=1e-9, atol=1e-9, err_msg=sym)
    if "softcap" in sym or "cap_" in sym:
        assert atts[0].attrs.get("softcap", 0.0) > 0


def test_finfo_min_mask_folded_into_the_bias_keeps_fully_masked_rows() -> None:
    """DeBERTa-v2 masks padded queries too: their rows have every key masked. The unfused softmax over
    finfo.min averages V there; with the mask folded into the bias the fused op gives the same."""
    text = dict(CASES)["deberta_relative_bias"]
    m = parse_module(text)
    fused = m.clone()
    PassManager(PIPELINE).run(fused)
    att = next(op for op in fused.walk() if op.name == "ik.attention")
    assert len(att.operands) == 4  # q, k, v, bias: the mask is inside the bias
    rng = np.random.default_rng(11)
    xs = _inputs(m.entry, rng)
    xs[-1][1, 0, 3, :] = False  # batch 1, query 3: every key masked
    want = run(m, xs, float64=True)[0]
    got = run(fused, xs, float64=True)[0]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got[1, :, 3], xs[2][1].mean(axis=1), rtol=1e-6)  # the mean of V


# --------------------------------------------------------------------------------------------
# ik.attention with softcap on every target


def _softcap_case(bias: bool = False) -> tuple[Any, list[np.ndarray]]:
    rng = np.random.default_rng(3)
    q = (3 * rng.standard_normal((2, 4, 6, 16))).astype(np.float32)
    k = (3 * rng.standard_normal((2, 2, 7, 16))).astype(np.float32)  # GQA: 2 KV heads for 4 query heads
    v = rng.standard_normal((2, 2, 7, 16)).astype(np.float32)
    if bias:
        b = rng.standard_normal((2, 1, 6, 7)).astype(np.float32)
        b[1, :, 4, :] = -np.inf  # a fully masked row through the bias
        return one_op_module("ik.attention", Sample([q, k, v, b], {"scale": 0.25, "softcap": 5.0},
                                                    slots=(0, 1, 2, None, 3))), [q, k, v, b]
    mask = rng.random((2, 1, 6, 7)) < 0.7
    mask[..., 0] = True
    mask[0, :, 2, :] = False  # a fully masked row
    return one_op_module("ik.attention", Sample([q, k, v, mask], {"scale": 0.25, "softcap": 5.0})), [q, k, v, mask]


def test_softcap_reference_caps_before_the_bias() -> None:
    m, xs = _softcap_case(bias=True)
    q, k, v, b = (x.astype(np.float64) for x in xs)
    kk, vv = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    s = 5.0 * np.tanh(0.25 * q @ np.swapaxes(kk, -1, -2) / 5.0) + b
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
    want = np.nan_to_num(p @ vv, nan=0.0)
    got = run(m, xs, float64=True)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    uncapped = attention_reference(*xs[:3], None, xs[3], 0.25, False)
    assert np.abs(uncapped - got).max() > 0.05  # the cap matters on these inputs
    assert np.all(got[1, :, 4] == 0)


TARGETS = ("ort-onnx", "ort-decomposed", "xla-cpu", "tvm-llvm")


def _target(name: str) -> Any:
    if name.startswith("ort"):
        pytest.importorskip("onnxruntime")
        from irkit.targets.ort import OrtTarget

        return OrtTarget(name.split("-")[1])
    from irkit.targets.registry import get_target

    if name == "xla-cpu":
        pytest.importorskip("jax")
    if name == "tvm-llvm":
        pytest.importorskip("tvm")
    return get_target(name)


@pytest.mark.parametrize("bias", [False, True], ids=["mask", "bias"])
@pytest.mark.parametrize("target", TARGETS)
def test_softcap_attention_matches_the_oracle(target: str, bias: bool) -> None:
    m, xs = _softcap_case(bias)
    want = run(m, xs, float64=True)
    t = _target(target)
    got = t.run(t.lower(m), xs)
    dead = (0, slice(None), 2) if not bias else (1, slice(None), 4)
    assert np.all(want[0][dead] == 0)
    assert np.all(np.isfinite(got[0])) and np.all(got[0][dead] == 0), target
    rep = compare_all(got, want, module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]


def test_softcap_float64_on_tvm_unfused_path() -> None:
    """float64 attention runs TVM's unfused TE attention (not the online-softmax kernel): soft-capped too."""
    m, xs = _softcap_case()
    xs = [x.astype(np.float64) if x.dtype == np.float32 else x for x in xs]
    m = one_op_module("ik.attention", Sample(xs, {"scale": 0.25, "softcap": 5.0}))
    t = _target("tvm-llvm")
    got = t.run(t.lower(m), xs)
    want = run(m, xs, float64=True)
    assert np.all(got[0][0, :, 2] == 0)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-10, atol=1e-10)


def test_softcap_tvm_kernel_cpu() -> None:
    pytest.importorskip("tvm")
    from irkit.targets.tvm_kernels import attention as at
    from irkit.targets.tvm_kernels import common as c

    rng = np.random.default_rng(5)
    q = (3 * rng.standard_normal((1, 4, 37, 16))).astype(np.float32)
    k = (3 * rng.standard_normal((1, 2, 45, 16))).astype(np.float32)
    v = rng.standard_normal((1, 2, 45, 16)).astype(np.float32)
    bias = rng.standard_normal((37, 45)).astype(np.float32)
    bias[5] = -np.inf
    ker = at.attention(q.shape, k.shape, bias_shape=bias.shape, scale=0.3, causal=True, softcap=7.5,
                       tile_q=16, tile_k=16)
    (out,) = c.run(ker, q, k, v, bias)
    ref = at.reference(q, k, v, bias, scale=0.3, causal=True, softcap=7.5)
    mask = np.broadcast_to(np.isfinite(bias), (1, 1, 37, 45))
    oracle = attention_reference(q, k, v, mask, np.where(np.isfinite(bias), bias, 0), 0.3, True, 7.5)
    np.testing.assert_allclose(ref, oracle, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(out, ref, rtol=2e-4, atol=2e-5)
    assert np.all(out[:, :, 5] == 0)
    with pytest.raises(ValueError, match="softcap"):
        at.attention(q.shape, k.shape, softcap=-1.0)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_softcap_tvm_kernel_cuda_compiles() -> None:
    pytest.importorskip("tvm")
    from irkit.targets.tvm_kernels import attention as at
    from irkit.targets.tvm_kernels import common as c

    k = at.attention((1, 2, 20, 16), (1, 1, 24, 16), "float16", bias_shape=(20, 24), causal=True, softcap=50.0,
                     tile_q=32, tile_k=8, target="cuda")
    art = c.inspect(k, ptxas=False)
    assert art.ptx_error is None and ".entry" in art.ptx
    assert "tanh" in art.cuda_source


@pytest.mark.skipif(not HAS_LIBTPU, reason="libtpu not installed (pip install irkit[tpu])")
def test_softcap_attention_compiles_for_tpu_v5e() -> None:
    from irkit.targets.registry import get_target

    m, _ = _softcap_case()
    art = get_target("xla-tpu-v5e").lower(m)
    assert "ENTRY" in art.files["hlo.txt"] and "tanh" in art.files["hlo.txt"]


def test_softcap_verifier_rejects_a_negative_cap() -> None:
    from irkit.ir.builder import BuildError

    _, xs = _softcap_case()
    with pytest.raises(BuildError, match="softcap must be a finite number >= 0"):
        one_op_module("ik.attention", Sample(xs, {"scale": 0.25, "softcap": -5.0}))


# --------------------------------------------------------------------------------------------
# The zoo's variants end to end (slow: three torch.export runs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemma2", "bloom", "deberta_v2"])
def test_zoo_variant_fuses_every_layer_through_pt2(name: str, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from irkit import zoo
    from irkit.frontends.torch_export import load_pt2
    from irkit.zoo.export import export_module_pt2

    module, inputs, dyn = zoo.factory(name, "toy")
    layers = zoo.attention_layers(module, inputs)
    ex = export_module_pt2(module, inputs, dyn, tmp_path / f"{name}.pt2", label=f"zoo:{name}")
    m = load_pt2(ex.path)
    fused = m.clone()
    PassManager("canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce").run(fused)
    atts = [op for op in fused.walk() if op.name == "ik.attention"]
    assert len(atts) == layers and not any(op.name == "ik.softmax" for op in fused.walk())
    if name == "gemma2":
        assert all(op.attrs.get("softcap") == 50.0 for op in atts)
    xs = [x.detach().numpy() for x in inputs]
    with torch.no_grad():
        eager = module(*inputs).detach().numpy()
    a, b = run(m, xs)[0], run(fused, xs)[0]
    np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)  # padded positions (DeBERTa's masked rows) too
    assert compare_all([b], [eager], module_tolerance(m)).ok
