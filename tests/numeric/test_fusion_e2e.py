"""End to end: every example model, from every frontend, fuses every attention layer and keeps its numbers.

For each model of ``examples/models/registry.py`` (eager and SDPA variants,
float32 and half precision) and each way into irkit — torch.export (as
exported, and after ``run_decompositions()``), ONNX from both torch exporters
(TorchScript and dynamo), and JAX (jaxpr and StableHLO) — the pipeline
``canonicalize,fuse-attention,fuse-norm,fuse-activation,cse,dce`` runs with
every rewrite checked numerically; then the number of ``ik.attention`` ops
must equal the number of attention layers of the torch model (each fused
exactly once, no softmax left), and the fused module must give the unfused
module's float64 numbers on the model's own example inputs (whose masks never
mask a whole row) under the tolerance of the module's dtype.

Importing is the slow part (torch.export and the dynamo ONNX exporter take
seconds to tens of seconds per model), so every run covers each tiny model
through the cheap frontends (TorchScript ONNX, StableHLO) plus a few pairs
that reach every frontend and family; the full matrix, and the small models,
run with ``IRKIT_SLOW=1``.
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from irkit.check import compare, module_tolerance
from irkit.interp import run
from irkit.ir import Module
from irkit.passmanager import PassContext, PassManager

PIPELINE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,cse,dce"
FRONTENDS = ("torch", "torch-core", "onnx-torchscript", "onnx-dynamo", "jax", "stablehlo")
CHEAP = ("onnx-torchscript", "stablehlo")
"""Frontends that import a tiny model in about a second: every tiny model runs through them."""
DEFAULT = {("gpt2_tiny", "jax"), ("llama_tiny", "torch"), ("vit_tiny_sdpa", "torch-core"),
           ("t5_tiny", "onnx-dynamo"), ("llama_tiny_bf16_sdpa", "jax"), ("bert_tiny_sdpa", "torch")}
"""Pairs besides the cheap frontends that run in every test run; the rest are marked slow."""


def _registry() -> Any:
    from irkit.testing.onnx_export import find_factory

    find_factory("gpt2_tiny")  # puts the repository root on sys.path
    return pytest.importorskip("examples.models.registry")


def _models() -> list[tuple[str, str]]:
    """(name, size) of every example model."""
    try:
        return [(m.name, m.size) for m in _registry().MODELS]
    except Exception:  # noqa: BLE001 - no registry: nothing to parametrize over
        return []


def attention_layers(model: Any) -> int:
    """Modules named like an attention that hold no smaller attention module."""
    import torch

    count = 0
    for m in model.modules():
        if "Attention" in type(m).__name__ and isinstance(m, torch.nn.Module):
            inner = [c for c in m.modules() if c is not m and "Attention" in type(c).__name__]
            count += not inner
    return count


@functools.cache
def _out_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="irkit-fusion-e2e-"))


@functools.cache
def imported(name: str, frontend: str) -> tuple[Module, list[np.ndarray], int]:
    """The unfused module, its example inputs, and the model's number of attention layers."""
    entry = _registry().get(name)
    model, inputs, dyn = entry.torch_factory()
    layers = attention_layers(model)
    if frontend in ("torch", "torch-core"):
        from irkit.frontends.torch_export import import_torch_factory

        m = import_torch_factory(model, inputs, dyn, decompositions="none" if frontend == "torch" else "core")
        xs = [t.detach().numpy() for t in inputs]
    elif frontend.startswith("onnx-"):
        from irkit.frontends.onnx import import_onnx
        from irkit.testing.onnx_export import export_onnx

        ex = export_onnx(model, inputs, dyn, _out_dir() / f"{name}.{frontend}.onnx", exporter=frontend[5:])
        m = import_onnx(str(ex.path))
        xs = list(ex.inputs)
    else:
        fn, args = entry.jax_factory()
        if frontend == "jax":
            from irkit.frontends.jax import import_jax

            m = import_jax(fn, args)
        else:
            import jax

            from irkit.frontends.jax_stablehlo import import_stablehlo

            m = import_stablehlo(jax.jit(fn).lower(*args).as_text())
        xs = [np.asarray(a) for a in args]
    return m, xs, layers


def _cases() -> list[Any]:
    out = []
    for name, size in _models():
        for fe in FRONTENDS:
            every_run = size == "tiny" and (fe in CHEAP or (name, fe) in DEFAULT)
            marks = () if every_run else (pytest.mark.slow,)
            out.append(pytest.param(name, fe, marks=marks, id=f"{name}-{fe}"))
    return out


@pytest.mark.parametrize("name, frontend", _cases())
def test_model_fuses_every_attention_and_keeps_numbers(name: str, frontend: str) -> None:
    try:
        src, xs, layers = imported(name, frontend)
    except ImportError as e:
        pytest.skip(f"{frontend} is not installed: {e}")
    m = src.clone()
    ctx = PassContext(check_rewrites=True, explain=True)
    PassManager(PIPELINE, ctx=ctx).run(m)
    got = sum(1 for op in m.walk() if op.name == "ik.attention")
    why = "; ".join(nm.describe() for nm in ctx.near_misses if "softmax" in nm.describe())
    assert got == layers, f"{name} via {frontend}: {got} ik.attention for {layers} attention layers. {why}"
    assert not any(op.name == "ik.softmax" for op in m.walk()), why
    want = run(src, xs, float64=True)
    out = run(m, xs)
    tol = module_tolerance(src)
    for w, g in zip(want, out):
        c = compare(g, w, tol)
        assert c.ok, f"{name} via {frontend}: {c.describe()}"
