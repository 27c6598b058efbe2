"""irkit's printed IR is readable by MLIR itself (generic form, unregistered ops allowed).

The check uses the MLIR Python bindings that ship in jaxlib: the upstream MLIR
parser must accept every module irkit prints — symbolic dims in the tensor
encoding, ``loc(...)``, ``dense<...>``, ``dense_resource<...>`` with the blob
inline (``dialect_resources``) or in a sidecar, fused ops with regions — and
MLIR's own generic re-print must keep every op.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from irkit.passmanager import run_pipeline
from irkit.testing.blocks import gpt2_style_module
from irkit.testing.strategies import modules
from irkit.text.printer import Printer, print_module

pytest.importorskip("jax")
from jax._src.lib.mlir import ir  # noqa: E402 - MLIR's own Python bindings, as shipped in jaxlib


def mlir_parse(text: str):
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    return ir.Module.parse(text, ctx)


def op_names(text: str) -> list[str]:
    import re

    return re.findall(r'"((?:ik|func|builtin)\.[a-z_0-9]+)"\(', text)


@pytest.mark.parametrize("inline", [True, False], ids=["inline-resources", "sidecar-resources"])
@pytest.mark.parametrize("pipeline", ["", "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise"])
def test_mlir_parses_what_irkit_prints(inline: bool, pipeline: str) -> None:
    m = gpt2_style_module(layers=2)
    if pipeline:
        run_pipeline(m, pipeline)
    text = Printer(inline_resources=True).module(m) if inline else print_module(m)
    mod = mlir_parse(text)
    again = mod.operation.get_asm(print_generic_op_form=True)
    assert op_names(again) == op_names(text)  # every op, in order, regions included
    if pipeline:
        assert '"ik.fused"' in again and '"ik.attention"' in again


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(modules())
def test_mlir_parses_random_modules(m) -> None:
    text = Printer(inline_resources=True).module(m)
    mod = mlir_parse(text)
    assert op_names(mod.operation.get_asm(print_generic_op_form=True)) == op_names(text)
