"""Every (op, target) pair a lowering table claims holds: the one-op module runs and matches the float64 oracle.

``irkit coverage`` answers from the targets' lowering tables
(:mod:`irkit.conformance.coverage`); this test keeps those answers true.  For each
op a runnable target's table claims, each sample of ``irkit.testing.op_samples``
(special values, ties, negative indices, narrow and unsigned integers) is built
into a one-op module, lowered and run; the result must match the float64
interpreter under the module's tolerance, with the oracle's values beyond the
declared float type's range taken as the infinities every real target gives.
A rule may refuse one *instance* (a dtype or attribute it has no kernel for) with
a one-line ``TargetUnavailable`` naming the op, but an op whose every sample is
refused is not covered, and the table must not claim it.

The default run checks the first sample of every op on ``reference``, ``ort`` and
``xla-cpu`` and a representative set of ops on ``tvm-llvm`` (a TVM build per
case); ``IRKIT_SLOW=1`` checks every sample of every claimed pair.
"""

from __future__ import annotations

import os
from typing import Any

import ml_dtypes
import numpy as np
import pytest

os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")

from irkit.targets.base import TargetUnavailable
from irkit.targets.registry import get_target

from irkit.check import Tolerance, compare_all, module_tolerance
from irkit.conformance.coverage import STRUCTURAL, op_matrix, table_ops
from irkit.interp import run
from irkit.ir.ops import OPS
from irkit.testing.op_samples import one_op_module, sample_id, samples

RUNNABLE = ("reference", "ort", "tvm-llvm", "xla-cpu")
TVM_DEFAULT = frozenset({
    "ik.add", "ik.exp", "ik.round", "ik.atan2", "ik.mod", "ik.shift_right_arithmetic", "ik.argmin", "ik.cumsum",
    "ik.gather_elements", "ik.scatter_nd", "ik.dynamic_slice", "ik.sort", "ik.topk", "ik.reduce_window", "ik.conv",
    "ik.matmul", "ik.softmax", "ik.where", "ik.cast", "ik.reduce_sum", "ik.bitcast",
})
"""Ops tvm-llvm checks by default: each family of lowering (elementwise, integer, scans, indexing, sorting,
windows, contractions) once; the rest run with IRKIT_SLOW=1."""


def _available(target: str) -> bool:
    try:
        return get_target(target).availability().can_run
    except Exception:  # noqa: BLE001 - a target whose package is missing is not runnable here
        return False


def _oracle(m: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    want = run(m, inputs, float64=True)
    out = []
    for w, v in zip(want, m.entry.outputs):
        if v.dtype.is_float:
            big = float(ml_dtypes.finfo(v.dtype.np).max)
            with np.errstate(all="ignore"):
                w = np.where(np.abs(w) > big, np.copysign(np.inf, w), w)
        out.append(w)
    return out


def _tolerance(m: Any) -> Any:
    """The module's tolerance; exact where a float8 type appears (the samples with float8 are
    conversions and bitcasts, which have exactly one right answer)."""
    if any(v.type.dtype.is_float8 for op in m.entry.walk() for v in (*op.operands, *op.results)) or \
            any(a.type.dtype.is_float8 for a in m.entry.args):
        return Tolerance(0.0, 0.0)
    return module_tolerance(m)


def _claimed(target: str) -> list[str]:
    return sorted(table_ops(get_target(target)))


def _pairs() -> list[Any]:
    slow_all = bool(os.environ.get("IRKIT_SLOW"))
    out = []
    for target in RUNNABLE:
        if not _available(target):
            continue
        for name in _claimed(target):
            default = target != "tvm-llvm" or name in TVM_DEFAULT
            marks = () if default else (pytest.mark.slow,)
            out.append(pytest.param(target, name, slow_all, id=f"{target}-{name}", marks=marks))
    return out


def _run_sample(target: str, name: str, index: int) -> str:
    """'pass' or 'refused: reason'; a wrong answer or any other exception fails the test."""
    s = samples(name)[index]
    m = one_op_module(name, s)
    t = get_target(target)
    try:
        got = t.run(t.lower(m), s.inputs)
    except TargetUnavailable as e:
        msg = str(e)
        assert "\n" not in msg.strip() and name in msg, f"{target} refused {sample_id(name, index, s)} without " \
                                                       f"a one-line reason naming the op: {msg!r}"
        return f"refused: {msg}"
    with np.errstate(all="ignore"):
        rep = compare_all(got, _oracle(m, s.inputs), _tolerance(m))
    assert rep.ok, f"{target} {sample_id(name, index, s)}: " + "; ".join(c.describe() for c in rep.comparisons)
    return "pass"


@pytest.mark.parametrize("target,name,every_sample", _pairs())
def test_claimed_pair_matches_the_oracle(target: str, name: str, every_sample: bool) -> None:
    n = len(samples(name))
    outcomes = [_run_sample(target, name, i) for i in (range(n) if every_sample else range(1))]
    if not every_sample and outcomes[0] != "pass" and n > 1:
        outcomes += [_run_sample(target, name, i) for i in range(1, n)]
    assert any(o == "pass" for o in outcomes), (
        f"{target}'s lowering table claims {name}, but every sample is refused: {outcomes[0]} "
        f"(drop the rule or make it lower something)")


def test_reference_covers_the_whole_registry_and_coverage_reads_the_tables() -> None:
    ops = set(OPS) - STRUCTURAL
    ref = get_target("reference")
    assert table_ops(ref) == ops
    for target in ("ort", "tvm-llvm", "xla-cpu"):
        t = get_target(target)
        assert t.lowering_table is not None, f"{target} declares no lowering table"
        assert table_ops(t) == {n for n in t.lowering_table.names if t.supports(n)} - STRUCTURAL
    matrix = op_matrix([ref, get_target("ort")])
    assert set(matrix) == ops and all(row["reference"] for row in matrix.values())


def test_coverage_ops_prints_the_matrix(capsys: Any) -> None:
    from irkit.cli import main

    assert main(["coverage", "--ops", "--targets", "reference,ort"]) == 0
    out = capsys.readouterr().out
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 4 and cells[0].startswith("ik."):
            rows[cells[0]] = cells[2:]
    assert set(rows) == set(OPS) - STRUCTURAL
    ort = get_target("ort")
    assert all(v == ["yes", "yes" if ort.supports(op) else "NO"] for op, v in rows.items())
    assert main(["coverage"]) == 1  # no model and no --ops: a one-line error


def test_coverage_reads_a_pt2(tmp_path: Any, capsys: Any) -> None:
    torch = pytest.importorskip("torch")
    from irkit.cli import main
    from irkit.frontends.torch_export import save_pt2

    class Small(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.cumsum(torch.relu(x) * 2.0, dim=1)

    ep = torch.export.export(Small(), (torch.randn(2, 3),))
    path = tmp_path / "small.pt2"
    save_pt2(ep, path)
    assert main(["coverage", str(path), "--targets", "reference,ort"]) == 0
    out = capsys.readouterr().out
    assert "aten.cumsum.default" in out and "aten.relu.default" in out
    assert "ik.cumsum" in out.split("IR ops after import")[1]
