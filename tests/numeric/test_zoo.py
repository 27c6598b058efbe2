"""The zoo of transformers architectures: registry, builds, and .pt2 end to end on the interpreter.

Every toy architecture is built from its config (random weights, nothing
downloaded), exported with torch.export, saved as ``.pt2``, imported with
irkit's safe loader, run on the reference interpreter and compared with eager
torch under irkit.check's tolerance.  A representative sample (a decoder with
learned positions, a GQA/rotary decoder, an encoder with a padding mask, a
ViT, an encoder-decoder, and Whisper's audio encoder) runs every time; the
rest are marked slow (``IRKIT_SLOW=1``).  An architecture whose import is
refused with the one-line list of missing ops is an expected failure there
(a clear refusal, see docs/zoo.md); any other failure, and any wrong number,
fails.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from irkit import zoo
from irkit.check import compare, module_tolerance
from irkit.frontends.common import UnsupportedOpsError
from irkit.interp import run

FAST_E2E = ("gpt2", "llama", "bert", "vit", "bart", "whisper_encoder")
"""Architectures that run through .pt2 in every test run (about 2 minutes together on 2 cores)."""

FAST_BUILD = ("gpt2", "mixtral", "gemma2", "deberta_v2", "t5", "whisper", "swin", "clip", "wav2vec2")
"""Architectures whose eager build runs every time (the rest: slow): one of each family and odd input."""


def _marked(names: Any, fast: tuple[str, ...]) -> list[Any]:
    return [pytest.param(n, marks=() if n in fast else (pytest.mark.slow,), id=n) for n in names]


@functools.cache
def _built(name: str) -> tuple[Any, tuple[Any, ...], Any, np.ndarray]:
    module, inputs, dyn = zoo.factory(name, "toy")
    with torch.no_grad():
        want = module(*inputs).detach().numpy()
    return module, inputs, dyn, want


def test_registry_covers_every_family_and_variant() -> None:
    names = zoo.names()
    assert len(names) >= 30 and len(set(names)) == len(names)
    assert {zoo.entry(n).family for n in names} >= {"decoder", "encoder", "encoder-decoder", "vision", "audio"}
    for must in ("gpt2", "bloom", "mistral", "mixtral", "qwen3", "gemma2", "bert", "deberta_v2", "t5", "whisper",
                 "vit", "swin", "clip", "wav2vec2"):
        assert must in names


@pytest.mark.parametrize("name", zoo.names())
def test_configs_have_toy_and_full_sizes(name: str) -> None:
    arch = zoo.entry(name)
    toy = zoo.make_config(arch, "toy")
    full = zoo.make_config(arch, "full")
    text = getattr(toy, "text_config", None) or toy
    width = next(getattr(text, k) for k in ("hidden_size", "n_embd", "d_model", "dim", "embed_dim")
                 if isinstance(getattr(text, k, None), int))
    assert 32 <= width <= 256, f"{name}: toy hidden size {width}"
    full_text = getattr(full, "text_config", None) or full
    full_width = next(getattr(full_text, k) for k in ("hidden_size", "n_embd", "d_model", "dim", "embed_dim")
                      if isinstance(getattr(full_text, k, None), int))
    assert full_width > width, f"{name}: full size is not larger than toy"


def test_unknown_name_and_size_are_one_line_errors() -> None:
    with pytest.raises(zoo.ZooError, match="no zoo architecture 'gpt3'.*gpt2"):
        zoo.entry("gpt3")
    with pytest.raises(zoo.ZooError, match="unknown zoo size 'huge'"):
        zoo.build("gpt2", "huge")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", _marked(zoo.names(), FAST_BUILD))
def test_toy_builds_and_gives_finite_outputs(name: str) -> None:
    module, inputs, _, want = _built(name)
    assert all(isinstance(x, torch.Tensor) for x in inputs)
    assert want.size > 0 and np.isfinite(want).all(), f"{name}: non-finite eager output"
    assert float(np.abs(want).max()) > 0.0
    assert zoo.attention_layers(module, inputs) >= 2
    # Same seed, same model and inputs: the build is reproducible.
    module2, inputs2 = zoo.build(name, "toy")
    for a, b in zip(inputs, inputs2):
        assert torch.equal(a, b)
    with torch.no_grad():
        np.testing.assert_array_equal(module2(*inputs2).numpy(), want)


@pytest.mark.parametrize("name", _marked(zoo.names(), FAST_E2E))
def test_toy_through_pt2_on_interpreter_matches_eager(name: str, tmp_path: Any) -> None:
    from irkit.frontends.torch_export import load_pt2
    from irkit.zoo.export import export_module_pt2

    module, inputs, dyn, want = _built(name)
    ex = export_module_pt2(module, inputs, dyn, tmp_path / f"{name}.pt2", label=f"zoo:{name}")
    try:
        m = load_pt2(ex.path)
    except UnsupportedOpsError as e:
        if name in FAST_E2E:
            raise
        pytest.xfail(f"refused with the missing ops: {e}")
    if ex.dynamic:
        arg_dims = {str(d) for a in m.entry.args for d in a.type.shape if not isinstance(d, int)}
        assert "B" in arg_dims, f"{name}: dynamic export lost the batch dim name ({arg_dims})"
    got = run(m, [x.numpy() for x in inputs])
    c = compare(got[0], want, module_tolerance(m))
    assert c.ok, f"{name}: {c.describe()}"


def test_factory_imports_with_named_dims() -> None:
    from irkit.frontends.torch_export import import_torch_factory

    module, inputs, dyn, _ = _built("bert")
    m = import_torch_factory(module, inputs, dyn)
    assert [[str(d) for d in a.type.shape] for a in m.entry.args] == [["B", "S"], ["B", "S"]]
    # A batch and sequence length other than the example's: the symbols really are free.
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(4, 256, (3, 11), generator=g)
    mask = torch.ones(3, 11, dtype=torch.long)
    mask[2, 8:] = 0
    with torch.no_grad():
        want = module(ids, mask).numpy()
    got = run(m, [ids.numpy(), mask.numpy()])
    c = compare(got[0], want, module_tolerance(m))
    assert c.ok, c.describe()


def test_moe_experts_export_to_onnx_as_batched_matmuls_and_keep_their_own_choice() -> None:
    """The dynamo ONNX exporter has no translation for transformers' ``grouped_mm`` experts: while
    exporting, every MoE ``*Experts`` layer computes through ``batched_mm`` (the same function from
    standard ops), and the model's own choice comes back afterwards, also when the export fails."""
    from irkit.zoo.export import _onnx_exportable_experts

    module, inputs, _, want = _built("mixtral")
    cfgs = {id(m.config): m.config for m in module.modules() if type(m).__name__.endswith("Experts")}
    assert cfgs, "mixtral toy has no experts layer"
    before = {k: c._experts_implementation for k, c in cfgs.items()}
    assert set(before.values()) != {"batched_mm"}  # transformers' default is another kernel
    with pytest.raises(RuntimeError, match="stop"), _onnx_exportable_experts(module):
        assert {c._experts_implementation for c in cfgs.values()} == {"batched_mm"}
        with torch.no_grad():  # the same function: the eager output does not move
            np.testing.assert_allclose(module(*inputs).numpy(), want, rtol=1e-5, atol=1e-6)
        raise RuntimeError("stop")
    assert {k: c._experts_implementation for k, c in cfgs.items()} == before


def test_positions_raise_the_sequence_bound_of_a_toy_model() -> None:
    """A toy model holds 64 positions; ``positions`` raises the config's bound (the text config's
    too, for CLIP) so a longer sequence runs, and leaves a larger bound alone."""
    from irkit.zoo.build import make_config

    arch = zoo.entry("gpt2")
    assert make_config(arch).n_positions == 64
    assert make_config(arch, positions=128).n_positions == 128
    assert make_config(arch, positions=8).n_positions == 64
    assert make_config(zoo.entry("clip"), positions=100).text_config.max_position_embeddings == 100
    module, inputs = zoo.build("bert", "toy", batch=1, seq=96, positions=96)
    assert inputs[0].shape == (1, 96)
    with torch.no_grad():
        out = module(*inputs).numpy()
    assert out.shape[1] == 96 and np.isfinite(out).all() and float(np.abs(out).max()) > 0


def test_default_sequence_stays_within_the_model_bound() -> None:
    """At full size the default sequence is 128, cut to the model's own bound (CLIP's text: 77,
    SigLIP's: 64); an explicit ``seq`` is taken as asked."""
    from irkit.zoo.build import example_inputs, make_config

    for name, want in (("clip", 77), ("siglip", 64), ("bert", 128)):
        arch = zoo.entry(name)
        cfg = make_config(arch, "full")
        assert example_inputs(arch, cfg, "full")[0].shape == (1, want), name
    arch = zoo.entry("clip")
    assert example_inputs(arch, make_config(arch, "full"), "full", seq=100)[0].shape == (1, 100)
