"""A representative sample of PyTorch's OpInfo database through the torch.export frontend.

Each op's first two float32 CPU samples (int64 for the bitwise ops) are wrapped in a
module (tensor arguments become inputs, everything else constants), exported with ``torch.export``, imported
(ops without a converter are decomposed with torch's own table on the way), run on
the float64 interpreter and compared with torch eager under float32 tolerances a
little looser than torch.testing's (the oracle is f64, eager f32).  The full
database runs in the conformance loop; this sample keeps CI within a minute or two
while touching every converter family: elementwise, reductions, scans, indexing and
scatter, sorting, convolution, pooling, padding, normalisation and the ops torch
decomposes for us.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("expecttest")  # torch.testing._internal needs it
from torch.testing._internal.common_methods_invocations import op_db

from irkit.frontends.torch_export import import_exported_program, tensor_to_numpy
from irkit.interp import run

OPS = [
    # elementwise (new IR ops and decompositions)
    "acos", "asinh", "atan2", "tan", "lgamma", "digamma", "erfinv", "log1p", "round", "round.decimals_3",
    "trunc", "remainder", "fmod", "floor_divide", "fmax", "isinf", "bitwise_and:int64",
    "bitwise_left_shift:int64",
    "logaddexp", "addcmul", "lerp", "nn.functional.elu", "nn.functional.logsigmoid", "copysign",
    # reductions and scans
    "argmin", "max.reduction_with_dim", "cumsum", "cumprod", "cummax", "logcumsumexp", "median", "kthvalue",
    # indexing, scatter, reorder
    "gather", "take_along_dim", "scatter", "scatter_add", "scatter_reduce.mean", "index_put", "index_copy",
    "index_add", "index_select", "masked_scatter", "masked_fill", "select_scatter", "slice_scatter",
    "diagonal", "diag_embed", "flip", "roll", "diff", "as_strided", "meshgrid.variadic_tensors",
    # sorting and searching
    "sort", "argsort", "topk", "searchsorted", "bucketize",
    # convolution, pooling, padding, resampling
    "nn.functional.conv1d", "nn.functional.conv3d", "nn.functional.conv_transpose2d", "nn.functional.max_pool2d",
    "nn.functional.avg_pool3d", "nn.functional.adaptive_avg_pool2d", "nn.functional.pad.reflect",
    "nn.functional.pad.circular", "nn.functional.interpolate.bilinear",
    # normalisation and losses torch decomposes
    "nn.functional.group_norm", "nn.functional.mse_loss", "nn.functional.cross_entropy",
]

_BY_NAME = {op.name + ("." + op.variant_test_name if op.variant_test_name else ""): op for op in op_db}


def _flatten(obj: Any, tensors: list[Any]) -> Any:
    if isinstance(obj, torch.Tensor):
        tensors.append(obj.detach().clone())
        return ("__tensor__", len(tensors) - 1)
    if isinstance(obj, (list, tuple)):
        items = [_flatten(x, tensors) for x in obj]
        return items if isinstance(obj, list) else tuple(items)
    if isinstance(obj, dict):
        return {k: _flatten(v, tensors) for k, v in obj.items()}
    return obj


def _rebuild(obj: Any, ts: list[Any]) -> Any:
    if isinstance(obj, tuple) and len(obj) == 2 and obj[0] == "__tensor__":
        return ts[obj[1]]
    if isinstance(obj, (list, tuple)):
        items = [_rebuild(x, ts) for x in obj]
        return items if isinstance(obj, list) else tuple(items)
    if isinstance(obj, dict):
        return {k: _rebuild(v, ts) for k, v in obj.items()}
    return obj


class _Sample(torch.nn.Module):
    """One OpInfo sample as a module: tensors are inputs, everything else is a constant."""

    def __init__(self, fn: Any, spec: Any):
        super().__init__()
        self.fn, self.spec = fn, spec

    def forward(self, *ts: Any) -> Any:
        inp, args, kwargs = _rebuild(self.spec, list(ts))
        return self.fn(inp, *args, **kwargs)


def _flat(out: Any) -> list[Any]:
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for o in out for t in _flat(o)]


@pytest.mark.parametrize("name", OPS)
def test_opinfo_sample(name: str) -> None:
    name, _, dtype = name.partition(":")
    op = _BY_NAME.get(name)
    assert op is not None, f"{name} is not in this torch's op_db"
    checked = 0
    for i, s in enumerate(op.sample_inputs("cpu", getattr(torch, dtype or "float32"))):
        if i == 2:
            break
        ts: list[Any] = []
        spec = _flatten((s.input, tuple(s.args), dict(s.kwargs)), ts)
        m = _Sample(op.op, spec).eval()
        with torch.no_grad():
            want = _flat(m(*[t.clone() for t in ts]))
        try:
            ep = torch.export.export(m, tuple(t.clone() for t in ts), strict=False)
        except Exception:  # noqa: BLE001, S112 - a sample torch cannot export is not ours to check
            continue
        mod = import_exported_program(ep, source=f"{name}[{i}]")
        got = run(mod, [tensor_to_numpy(t) for t in ts], float64=True)
        assert len(got) == len(want), f"{name}[{i}]: {len(got)} outputs, torch has {len(want)}"
        for g, w in zip(got, want):
            w = w.detach()
            assert tuple(np.shape(g)) == tuple(w.shape), f"{name}[{i}]: shape {np.shape(g)} vs {tuple(w.shape)}"
            if w.is_floating_point():
                np.testing.assert_allclose(np.asarray(g, np.float64), w.double().numpy(), rtol=1e-4, atol=1e-5,
                                           equal_nan=True, err_msg=f"{name}[{i}]")
            else:
                np.testing.assert_array_equal(np.asarray(g), w.numpy(), err_msg=f"{name}[{i}]")
        checked += 1
    if not checked:
        pytest.skip(f"{name}: no sample torch.export can export")
