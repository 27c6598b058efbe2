"""transformers architectures outside the zoo: what their imports needed, without transformers.

Each fix the unseen architectures (tests/slow/hf_unseen_archs.py) needed is pinned here by a
small module of the same construct, imported and checked against eager torch on the float64
interpreter.  One toy architecture runs end to end when transformers is installed; the whole
set is tests/slow/test_hf_unseen_all.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from irkit.check import compare, module_tolerance  # noqa: E402
from irkit.errors import IrkitError  # noqa: E402
from irkit.frontends.common import UnsupportedOpsError  # noqa: E402
from irkit.frontends.torch_export import import_torch_factory  # noqa: E402
from irkit.interp import run  # noqa: E402


def one_line(e: BaseException) -> str:
    msg = str(e)
    assert "\n" not in msg and "Traceback" not in msg, msg
    assert isinstance(e, IrkitError)
    return msg


def _check(module: Any, inputs: tuple[Any, ...], dyn: Any = None) -> None:
    with torch.no_grad():
        want = module(*inputs).detach().numpy()
    m = import_torch_factory(module, inputs, dyn)
    got = run(m, [x.detach().numpy() for x in inputs])[0]
    c = compare(got, want, module_tolerance(m))
    assert c.ok, c.describe()
    assert np.abs(want).max() > 0.1  # the comparison saw real values


class ShiftGatherThenScaleInPlace(torch.nn.Module):
    """Funnel's relative attention: a reshape/slice view of a fresh product, scaled in place."""

    def forward(self, q: Any, r: Any, mask: Any) -> Any:
        b, n, s, d = q.shape
        att = torch.einsum("bnsd,td->bnst", q, r)  # (B, N, S, 2S)
        att = att.reshape(b, n, 2 * s, s)[:, :, 1:, :]
        att = att.reshape(b, n, s, 2 * s - 1)[..., :s]
        att *= mask
        return att + 0.5


def test_in_place_update_of_a_view_of_a_temporary_imports() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 5, 4, generator=g)
    r = torch.randn(10, 4, generator=g)
    mask = (torch.rand(5, 5, generator=g) > 0.3).float()
    _check(ShiftGatherThenScaleInPlace(), (q, r, mask))


class ViewChainInPlace(torch.nn.Module):
    """An in-place add on a transposed slice of a temporary, then both the view and a later view
    of the updated tensor are read."""

    def forward(self, x: Any) -> Any:
        y = torch.tanh(x) * 2.0
        v = y.transpose(0, 1)[1:]
        v.add_(1.0)
        return v.sum(0) + v[0]


def test_in_place_update_through_a_chain_of_views_matches_torch() -> None:
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(1))
    _check(ViewChainInPlace(), (x,))


class SiblingViewReadAfter(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        y = x * 3.0
        a = y[:, :2]
        b = y[:, 1:]
        a.mul_(2.0)  # changes b's first column too
        return b + 0.0


class BaseReadAfter(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        y = x * 3.0
        y[:, :2].mul_(2.0)
        return y


@pytest.mark.parametrize("module", [SiblingViewReadAfter(), BaseReadAfter()], ids=["sibling", "base"])
def test_in_place_update_of_a_view_read_elsewhere_is_refused(module: Any) -> None:
    with pytest.raises(UnsupportedOpsError) as ei:
        import_torch_factory(module, (torch.randn(3, 4),))
    msg = one_line(ei.value)
    assert "a view (slice) of another tensor that" in msg and "reads afterwards" in msg


# ---------------------------------------------------------------------------- one architecture


def _archs() -> Any:
    pytest.importorskip("transformers")
    here = str(Path(__file__).resolve().parents[1] / "slow")
    if here not in sys.path:
        sys.path.insert(0, here)
    import hf_unseen_archs

    return hf_unseen_archs


def test_unseen_convnext_through_pt2_matches_torch() -> None:
    """ConvNeXt (depthwise 7x7 convolutions, channels-last LayerNorm, layer scale): not in the zoo."""
    row = _archs().check("convnext", "torch")
    assert row["stage"] == "ok", row


# ---------------------------------------------------------------------------- ONNX


def _alibi_slice_model(table: int) -> Any:
    """MPT's position-bias slice as torch.onnx writes it: ``bias[max(0, T - S):]`` with the start
    computed from the input's symbolic length ``S`` (``T`` is the bias table's length)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    i64 = TensorProto.INT64
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
        helper.make_node("Sub", ["t", "s"], ["t_minus_s"]),
        helper.make_node("Max", ["t_minus_s", "zero"], ["start"]),
        helper.make_node("Slice", ["bias", "start", "big", "axis0"], ["b"]),
        helper.make_node("Add", ["x", "b"], ["y"]),
    ]
    inits = [helper.make_tensor("t", i64, [1], [table]), helper.make_tensor("zero", i64, [1], [0]),
             helper.make_tensor("big", i64, [1], [2**62]), helper.make_tensor("axis0", i64, [1], [1])]
    g = helper.make_graph(
        nodes, "alibi_slice",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S"]),
         helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1, table])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S"])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


def test_onnx_max_of_symbolic_dims_folds_when_the_order_holds_for_every_size() -> None:
    """``max(0, 1 - S)`` is 0 for every S >= 1: the slice start folds and the slice is static."""
    ort = pytest.importorskip("onnxruntime")
    from irkit.frontends.onnx import import_onnx

    model = _alibi_slice_model(1)
    m = import_onnx(model)
    rng = np.random.default_rng(0)
    bias = rng.standard_normal((1, 1)).astype(np.float32)
    for s in (1, 5):
        x = rng.standard_normal((2, s)).astype(np.float32)
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"x": x, "bias": bias})[0]
        got = run(m, [x, bias])[0]
        c = compare(got, want, module_tolerance(m))
        assert c.ok, c.describe()


def test_onnx_max_of_symbolic_dims_that_depends_on_the_size_is_refused() -> None:
    """``max(0, 8 - S)`` is 8 - S for S <= 8 and 0 beyond: the slice's size is min(8, S), which a
    polynomial dim cannot say, so the import names the Slice."""
    from irkit.frontends.onnx import import_onnx

    with pytest.raises(UnsupportedOpsError) as ei:
        import_onnx(_alibi_slice_model(8))
    assert "Slice" in one_line(ei.value) and "starts" in one_line(ei.value)
