"""Conformance: the frameworks' own test material, run through irkit and its targets.

Three suites, one runner (:func:`run_suite`):

``onnx``   the ONNX backend node tests (``onnx.backend.test.case.node.collect_testcases``):
           single-op models with reference inputs and outputs; peer onnxruntime on
           the original model, and TVM Relax's ONNX importer with ``peers=True``;
``torch``  PyTorch's OpInfo database: up to two float32 CPU samples per op, each
           wrapped in an ``nn.Module``, ``torch.export``-ed and compared with eager
           torch; peer TVM Relax's ``from_exported_program`` with ``peers=True``;
``jax``    JAX's primitive harnesses (f32/i32/bool), imported through the jaxpr and
           through StableHLO text, compared with JAX itself.

Each case ends on each runner as pass, wrong, refused, crash or skip (see
:mod:`irkit.conformance.results`).  Used by ``irkit conformance`` and by the
frontends' own measurements::

    from irkit.conformance import run_suite
    res = run_suite("onnx", ["ort"], filter="test_gather", jobs=2)
    print(res.summary())
"""

from __future__ import annotations

from irkit.conformance.results import STATUSES, CaseResult, SuiteResult
from irkit.conformance.runner import SUITES, Case, run_suite

__all__ = ["STATUSES", "SUITES", "Case", "CaseResult", "SuiteResult", "run_suite"]
