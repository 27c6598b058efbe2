"""A zoo of real transformers architectures, built from configs with random weights.

>>> import irkit.zoo as zoo
>>> zoo.names()[:3]
['gpt2', 'gptj', 'gpt_neox']
>>> module, inputs = zoo.build("llama", "toy")           # nn.Module, tuple of tensors
>>> zoo.export_pt2("llama", "toy", "llama.pt2")           # torch.export, strict=False
>>> zoo.export_onnx("bert", "toy", "bert.onnx")           # torch.onnx.export(dynamo=True)
>>> module, inputs, dynamic_shapes = zoo.factory("vit")   # what a FILE.py:FACTORY returns

Nothing is downloaded: each entry of :mod:`irkit.zoo.registry` builds a
transformers config in code, the model gets ``torch.manual_seed`` random
weights, and the inputs are random token ids, pixels or audio.  Sizes: ``toy``
(2 layers, hidden 64) and ``full`` (the shape of a published checkpoint).
Tested with transformers 5.24.0 and torch 2.13.0; ``benchmarks/zoo_status.py``
measures how far each architecture gets through irkit (docs/zoo.md).

Importing this package imports neither torch nor transformers.
"""

from __future__ import annotations

from typing import Any

from irkit.zoo.build import (
    SIZES,
    Size,
    ZooError,
    attention_layers,
    build,
    dynamic_shapes,
    entry,
    example_inputs,
    factory,
    make_config,
    names,
    zoo_model_class,
)
from irkit.zoo.registry import ARCHITECTURES, INPUT_NAMES, Arch

TESTED_WITH = {"transformers": "5.24.0", "torch": "2.13.0"}
"""The library versions the zoo's status table was measured with."""


def export_pt2(name: str, size: Size, path: Any, **kw: Any) -> Any:
    """Build ``name`` at ``size`` and save its torch.export program (see :mod:`irkit.zoo.export`)."""
    from irkit.zoo.export import export_pt2 as _export

    return _export(name, size, path, **kw)


def export_onnx(name: str, size: Size, path: Any, **kw: Any) -> Any:
    """Build ``name`` at ``size`` and export it to ONNX with the dynamo exporter (see :mod:`irkit.zoo.export`)."""
    from irkit.zoo.export import export_onnx as _export

    return _export(name, size, path, **kw)


__all__ = [
    "ARCHITECTURES",
    "INPUT_NAMES",
    "SIZES",
    "TESTED_WITH",
    "Arch",
    "Size",
    "ZooError",
    "attention_layers",
    "build",
    "dynamic_shapes",
    "entry",
    "example_inputs",
    "export_onnx",
    "export_pt2",
    "factory",
    "make_config",
    "names",
    "zoo_model_class",
]
