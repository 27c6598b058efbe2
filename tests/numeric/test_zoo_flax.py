"""Flax NNX zoo models: same numbers as transformers, both JAX import paths, attention fused.

Each Flax model (GPT-2, Llama, BERT, T5, ViT; irkit/zoo/flax_models.py) gets the
weights of the zoo's transformers model of the same toy config and must give
its outputs (float32 tolerance).  It is then imported into irkit through the
jaxpr (``import_jax``) and through StableHLO text (``jax.jit(f).lower(...).as_text()``
into ``import_stablehlo``); the float64 interpreter on each import must give the
Flax outputs, and the default fusion pipeline must turn every attention layer
into one ``ik.attention`` (and keep the numbers).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
jax = pytest.importorskip("jax")
pytest.importorskip("flax")

from irkit import zoo
from irkit.check import compare, module_tolerance, tolerance
from irkit.interp import run
from irkit.ir.types import DType
from irkit.passmanager import PassManager
from irkit.zoo import flax_models as fm

PIPELINE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"

ATTENTION_LAYERS = {"gpt2": 2, "llama": 2, "bert": 2, "t5": 6, "vit": 2}
"""Attention layers one forward pass runs (T5: 2 encoder self, 2 decoder self, 2 cross)."""

FAST = ("gpt2", "llama", "bert", "t5")
"""Run every time: one of each attention spelling (explicit matmuls, ``jax.nn.dot_product_attention``
with GQA, ``nnx.MultiHeadAttention`` with a padding mask, einsums with a relative bias).  ViT (also
``nnx.MultiHeadAttention``) is marked slow to keep the default run short."""


def _marked(names: Any) -> list[Any]:
    return [pytest.param(n, marks=() if n in FAST else (pytest.mark.slow,), id=n) for n in names]


@functools.cache
def _pair(name: str) -> tuple[Any, Any, tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    hf, m, xs = fm.build_pair(name)
    with torch.no_grad():
        want_hf = hf(*(torch.from_numpy(x.astype(np.int64) if x.dtype == np.int32 else x) for x in xs)).numpy()
    # Jitted: one compile instead of op-by-op dispatch (eager NNX is several times slower here).
    return hf, m, xs, np.asarray(jax.jit(fm.as_function(m))(*xs)), want_hf


@functools.cache
def _imported(name: str, path: str) -> Any:
    _, m, xs, _, _ = _pair(name)
    f = fm.as_function(m)
    if path == "jaxpr":
        from irkit.frontends.jax import import_jax

        return import_jax(f, xs)
    from irkit.frontends.jax import import_stablehlo

    return import_stablehlo(jax.jit(f).lower(*xs).as_text())


def test_flax_names_are_zoo_names_and_errors_are_one_line() -> None:
    assert set(fm.FLAX_NAMES) <= set(zoo.names())
    with pytest.raises(zoo.ZooError, match="no zoo architecture 'gpt3'"):
        fm.flax_model("gpt3")
    with pytest.raises(zoo.ZooError, match="'bloom' has no Flax NNX model.*gpt2"):
        fm.flax_model("bloom")
    with pytest.raises(zoo.ZooError, match="not a zoo Flax model"):
        fm.copy_weights(object(), object())


@pytest.mark.parametrize("name", _marked(fm.FLAX_NAMES))
def test_flax_matches_transformers(name: str) -> None:
    _, _, _, got, want = _pair(name)
    assert got.shape == want.shape and float(np.abs(want).max()) > 0.1
    c = compare(got, want, tolerance(DType.f32))
    assert c.ok, f"{name}: Flax vs transformers: {c.describe()}"


@pytest.mark.slow
@pytest.mark.parametrize("name", fm.FLAX_NAMES)
def test_random_init_model_runs_eagerly_and_differs(name: str) -> None:
    _, m, xs, want, _ = _pair(name)
    np.testing.assert_allclose(np.asarray(m(*xs)), want, rtol=1e-5, atol=1e-5)  # eager == jitted
    fresh = np.asarray(fm.flax_model(name, seed=1)(*xs))  # Flax's own init, no copied weights
    assert fresh.shape == want.shape and np.isfinite(fresh).all()
    assert not np.allclose(fresh, want, atol=1e-3)


@pytest.mark.parametrize("path", ["jaxpr", "stablehlo"])
@pytest.mark.parametrize("name", _marked(fm.FLAX_NAMES))
def test_import_runs_like_flax_and_fuses_every_attention(name: str, path: str) -> None:
    _, _, xs, want, _ = _pair(name)
    m = _imported(name, path)
    got = run(m, list(xs), float64=True)
    c = compare(got[0], want, module_tolerance(m))
    assert c.ok, f"{name} via {path}: interpreter vs Flax: {c.describe()}"
    fused = m.clone()
    PassManager(PIPELINE).run(fused)
    ops = [op.name for op in fused.walk()]
    assert ops.count("ik.attention") == ATTENTION_LAYERS[name], f"{name} via {path}: {ops.count('ik.attention')}"
    assert "ik.softmax" not in ops
    got = run(fused, list(xs), float64=True)
    c = compare(got[0], want, module_tolerance(m))
    assert c.ok, f"{name} via {path}, fused: {c.describe()}"


def test_jaxpr_import_names_arguments_and_weights() -> None:
    from irkit.text.printer import print_module

    m = _imported("bert", "jaxpr")
    assert [a.name for a in m.entry.args] == ["input_ids", "attention_mask"]
    text = print_module(m, elide_weights=True)
    assert "layers.0.attention.query.kernel" in text and "word_embeddings.embedding" in text


@pytest.mark.parametrize("name", [pytest.param("bert", id="bert"), pytest.param("gpt2", marks=pytest.mark.slow, id="gpt2"),
                                  pytest.param("llama", marks=pytest.mark.slow, id="llama")])
def test_jaxpr_import_with_symbolic_batch_and_length(name: str) -> None:
    from irkit.frontends.jax import import_jax

    _, m, example, _, _ = _pair(name)
    f = fm.as_function(m)
    two = name == "bert"
    # GPT-2 and BERT index 64-entry position tables with arange(S): JAX needs the bound.
    cons = [] if name == "llama" else ["S <= 64"]
    mod = import_jax(f, example, polymorphic_shapes=["B, S"] * (2 if two else 1), constraints=cons)
    assert [[str(d) for d in a.type.shape] for a in mod.entry.args] == [["B", "S"]] * (2 if two else 1)
    fused = mod.clone()
    PassManager(PIPELINE).run(fused)
    assert sum(op.name == "ik.attention" for op in fused.walk()) == ATTENTION_LAYERS[name]
    # Another batch and length than the example's (3 x 11), a padded row for BERT.
    rng = np.random.default_rng(3)
    xs = [rng.integers(4, 256, (3, 11)).astype(np.int32)]
    if two:
        mask = np.ones((3, 11), np.int32)
        mask[2, 8:] = 0
        xs.append(mask)
    want = np.asarray(jax.jit(f)(*xs))
    for mm in (mod, fused):
        c = compare(run(mm, xs, float64=True)[0], want, module_tolerance(mod))
        assert c.ok, f"{name} with symbolic B, S: {c.describe()}"


def test_cli_source_zoo_flax_imports_and_fuses() -> None:
    """``zoo-flax:NAME`` is a model source for every command, like ``zoo:NAME``."""
    from irkit.cli import read_input_module

    mod = read_input_module("zoo-flax:bert")
    assert [a.name for a in mod.entry.args] == ["input_ids", "attention_mask"]
    fused = mod.clone()
    PassManager(PIPELINE).run(fused)
    assert sum(op.name == "ik.attention" for op in fused.walk()) == ATTENTION_LAYERS["bert"]
