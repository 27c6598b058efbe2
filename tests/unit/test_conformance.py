"""The conformance runner on a small deterministic sample of each suite (``irkit conformance``).

Not today's full-suite numbers (CONFORMANCE.md has those, from ``make conformance``):
these check that the runner's results mean something.  Cases known to be right
pass; a case known to be out of scope is a skip whose reason names why; nothing
anywhere is a crash; the isolated worker pool gives the same answers as the
in-process run; the report and the JSON round-trip.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

from irkit.conformance import STATUSES, SuiteResult, run_suite
from irkit.conformance.report import render
from irkit.conformance.runner import matches


def _rows(res: SuiteResult) -> dict[tuple[str, str], Any]:
    return {(r.case, r.runner): r for r in res.results}


def _no_crash(res: SuiteResult) -> None:
    crashes = [f"{r.case} on {r.runner}: {r.reason}" for r in res.results if r.status == "crash"]
    assert not crashes, crashes
    for r in res.results:
        assert r.status in STATUSES
        if r.status in ("refused", "skip"):
            assert r.reason.strip() and "\n" not in r.reason, (r.case, r.runner, r.reason)
        if r.status == "wrong":
            assert r.max_error is not None and r.reason, (r.case, r.runner)


# ---------------------------------------------------------------------------
# ONNX node tests

ONNX_GOOD = ("test_abs", "test_relu", "test_softmax_axis_1", "test_matmul_2d", "test_transpose_default",
             "test_where_example", "test_concat_2d_axis_0")
ONNX_OUT = {"test_if": "control flow op If", "test_sequence_insert_at_back": "sequence op",
            "test_strnormalizer_export_monday_casesensintive_lower": "string op",
            "test_adagrad": "training op", "test_ai_onnx_ml_label_encoder_string_int": "ai.onnx.ml",
            "test_bernoulli": "random-number op", "test_training_dropout": "training"}


@pytest.fixture(scope="module")
def onnx_known() -> SuiteResult:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    return run_suite("onnx", ["ort"], filter=",".join("=" + c for c in ONNX_GOOD + tuple(ONNX_OUT)))


def test_onnx_known_cases(onnx_known: SuiteResult) -> None:
    rows = _rows(onnx_known)
    assert onnx_known.runners == ["reference", "ort", "onnxruntime"]
    for case in ONNX_GOOD:
        for runner in onnx_known.runners:
            assert rows[case, runner].status == "pass", (case, runner, rows[case, runner].reason)
    for case, why in ONNX_OUT.items():
        for runner in onnx_known.runners:
            r = rows[case, runner]
            assert r.status == "skip" and r.reason.startswith("out of scope") and why in r.reason, (case, r)
    _no_crash(onnx_known)
    s = onnx_known.summary()["reference"]
    assert s["in_scope"] == len(ONNX_GOOD) and s["pass"] == len(ONNX_GOOD) and s["pass_pct"] == 100.0
    assert onnx_known.relative_to("ort", "onnxruntime") == (len(ONNX_GOOD), len(ONNX_GOOD))


def test_onnx_sample_spread_over_the_suite() -> None:
    pytest.importorskip("onnxruntime")
    res = run_suite("onnx", [], sample=30)
    assert res.meta["cases"] == 30 and len({r.case for r in res.results}) == 30
    assert len({r.group for r in res.results}) > 20  # spread over many ops, not the first 30 names
    _no_crash(res)
    st = {r.status for r in res.results if r.runner == "reference"}
    assert "pass" in st and st <= set(STATUSES)
    # onnxruntime, the goal's yardstick, passes most of what it is given
    ort = res.summary()["onnxruntime"]
    assert ort["pass"] >= 0.6 * ort["in_scope"]
    assert res.runners == ["reference", "onnxruntime"]


def test_worker_pool_isolates_cases_and_agrees_with_in_process() -> None:
    pytest.importorskip("onnxruntime")
    flt = "=test_abs,=test_relu,=test_if,=test_cumsum_1d"
    inproc = run_suite("onnx", [], filter=flt)
    pooled = run_suite("onnx", [], filter=flt, jobs=2, timeout=120)
    assert [(r.case, r.runner, r.status) for r in inproc.results] == \
        [(r.case, r.runner, r.status) for r in pooled.results]
    assert pooled.meta["jobs"] == 2 and pooled.meta["peak_rss_mb"] > 0


# ---------------------------------------------------------------------------
# PyTorch OpInfo

TORCH_GOOD = ("add", "mul", "exp", "sum", "matmul", "transpose", "cat", "where", "nn.functional.relu")
TORCH_OUT = {"linalg.svd": "linear-algebra decomposition", "bernoulli": "random-number op",
             "empty": "uninitialized memory"}


@pytest.fixture(scope="module")
def torch_known() -> SuiteResult:
    pytest.importorskip("torch")
    return run_suite("torch", [], filter=",".join("=" + c for c in TORCH_GOOD + tuple(TORCH_OUT)))


def test_torch_known_samples(torch_known: SuiteResult) -> None:
    rows = _rows(torch_known)
    for op in TORCH_GOOD:
        for k in (0, 1):
            r = rows[f"{op}#{k}", "reference"]
            assert r.status == "pass", (op, k, r.reason)
            assert r.group == op
    for op, why in TORCH_OUT.items():
        r = rows[f"{op}#0", "reference"]
        assert r.status == "skip" and why in r.reason, r
    _no_crash(torch_known)


def test_torch_samples_are_the_same_in_every_process() -> None:
    pytest.importorskip("torch")
    from irkit.conformance import torch_suite

    a = [c.id for c in torch_suite.collect("=cumsum,=gather")]
    b = [c.id for c in torch_suite.collect("=gather,=cumsum")]
    assert a == b and all(c.endswith(("#0", "#1")) for c in a)
    op = torch_suite._op_db()[torch_suite.collect("=cumsum")[0].payload[0]]
    import torch

    s1, s2 = torch_suite._samples(op, 2), torch_suite._samples(op, 2)
    assert all(torch.equal(x.input, y.input) for x, y in zip(s1, s2))


# ---------------------------------------------------------------------------
# JAX harnesses


@pytest.fixture(scope="module")
def jax_sample() -> SuiteResult:
    pytest.importorskip("jax")
    return run_suite("jax", [], filter="=add,=exp,=cholesky,=random_uniform,=transpose,=reduce_sum,=sign")


def test_jax_known_harnesses(jax_sample: SuiteResult) -> None:
    assert jax_sample.runners == ["jaxpr:reference", "stablehlo:reference"]
    by_group: dict[str, set[str]] = {}
    for r in jax_sample.results:
        by_group.setdefault(r.group, set()).add(r.status)
    assert by_group["cholesky"] == {"skip"} and by_group["random_uniform"] == {"skip"}
    for r in jax_sample.results:
        if r.group in ("cholesky", "random_uniform"):
            assert "out of scope" in r.reason
    for g in ("add", "exp", "transpose", "reduce_sum"):
        passed = [r for r in jax_sample.results if r.group == g and r.runner == "jaxpr:reference"
                  and r.status == "pass"]
        assert passed, (g, [(r.case, r.status, r.reason) for r in jax_sample.results if r.group == g])
    _no_crash(jax_sample)


def test_jax_sample_spread_over_the_suite() -> None:
    pytest.importorskip("jax")
    res = run_suite("jax", [], sample=24)
    assert res.meta["cases"] == 24
    _no_crash(res)
    assert res.summary()["jaxpr:reference"]["pass"] > 0


# ---------------------------------------------------------------------------
# results, report, command line


def test_filter_terms() -> None:
    assert matches("gather", "test_gather_0", "Gather")
    assert matches("=Gather", "test_gather_0", "Gather") and not matches("=gather", "test_gather_0", "Gather")
    assert matches("x, =abs", "test_abs", "Abs") is False or matches("x, =abs", "abs#0", "abs")
    assert not matches("", "a", "b")


def test_json_and_report_round_trip(onnx_known: SuiteResult, tmp_path: Any) -> None:
    p = tmp_path / "onnx.json"
    onnx_known.write_json(p)
    back = SuiteResult.read_json(p)
    assert back.summary() == onnx_known.summary() and len(back.results) == len(onnx_known.results)
    data = json.loads(p.read_text())
    assert data["summary"]["reference"]["pass"] == len(ONNX_GOOD)
    md = render([back], "irkit conformance --suite onnx")
    assert "| reference |" in md and "98% of the in-scope cases onnxruntime passes" in md
    assert "onnxruntime (peer)" in md and "Versions:" in md and "CPU:" in md


def test_cli_conformance(tmp_path: Any, capsys: Any) -> None:
    pytest.importorskip("onnxruntime")
    from irkit.cli import main

    out_json, md = tmp_path / "r.json", tmp_path / "C.md"
    assert main(["conformance", "--suite", "onnx", "--filter", "=test_abs,=test_if", "-q",
                 "--json", str(out_json), "--report", str(md)]) == 0
    text = capsys.readouterr().out
    assert "reference" in text and "goal:" in text
    assert SuiteResult.read_json(out_json).summary()["reference"]["pass"] == 1
    assert "Conformance" in md.read_text()
    assert main(["conformance", "--from-json", str(out_json), "--report", str(md)]) == 0
    assert main(["conformance"]) == 1  # neither --suite nor --from-json: one-line error
    assert main(["conformance", "--suite", "onnx", "--targets", "no-such-target"]) == 1
