"""Every runnable target on every example model, from every frontend, matches the float64 oracle.

For each (model, frontend) pair of the fusion end-to-end matrix
(``test_fusion_e2e.imported``: torch.export as exported and decomposed, ONNX from
both torch exporters, JAX jaxpr and StableHLO) and each target that runs here
(``ort``, ``xla-cpu``, ``tvm-llvm``), the module is lowered as imported and after
the optimising pipeline, run on the model's own example inputs, and compared
with the float64 interpreter on the unoptimised module under the tolerance of
the module's dtype.  A few pairs covering every family, dtype and frontend kind
run every time; the whole matrix runs with ``IRKIT_SLOW=1``.
"""

from __future__ import annotations

import pytest
from test_fusion_e2e import _models, imported

from irkit.check import compare_all, module_tolerance
from irkit.interp import bind_symbols, run
from irkit.passmanager import run_pipeline

TARGETS = ("ort", "xla-cpu", "tvm-llvm")
PIPELINES = {"as-imported": "", "optimised": "canonicalize,fuse-attention,fuse-norm,fuse-activation,"
                                               "fuse-elementwise,cse,dce"}
FRONTENDS = ("torch", "torch-core", "onnx-torchscript", "onnx-dynamo", "jax", "stablehlo")
EVERY_RUN = {("gpt2_tiny", "onnx-torchscript"), ("llama_tiny_bf16", "stablehlo"), ("t5_tiny", "onnx-torchscript")}


def _cases() -> list:
    out = []
    for name, _size in _models():
        for fe in FRONTENDS:
            for target in TARGETS:
                for pipe in PIPELINES:
                    marks = () if (name, fe) in EVERY_RUN else (pytest.mark.slow,)
                    out.append(pytest.param(name, fe, target, pipe, marks=marks, id=f"{name}-{fe}-{target}-{pipe}"))
    return out


@pytest.mark.parametrize("name, frontend, target, pipeline", _cases())
def test_target_matches_oracle_on_example(name: str, frontend: str, target: str, pipeline: str) -> None:
    from irkit.targets.registry import get_target, load_targets

    load_targets()
    t = get_target(target)
    if not t.availability().can_run:
        pytest.skip(f"{target}: {t.availability().reason}")
    try:
        src, xs, _layers = imported(name, frontend)
    except ImportError as e:
        pytest.skip(f"{frontend} is not installed: {e}")
    m = src.clone()
    if PIPELINES[pipeline]:
        run_pipeline(m, PIPELINES[pipeline])
    art = t.lower(m, bind_symbols(m.entry, xs))
    got = t.run(art, xs)
    rep = compare_all(got, run(src, xs, float64=True), module_tolerance(src))
    assert rep.ok, f"{name} via {frontend} on {target} ({pipeline}): " + "; ".join(
        c.describe() for c in rep.comparisons if not c.ok)
