"""Every op's reference kernel against torch (or NumPy where torch has no twin).

Each op in the registry must have a case here: ``test_every_op_has_a_case``
fails when a new op is added without one.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from irkit.interp import run
from irkit.ir import OPS, DType, Module, TensorType, new_function, verify
from irkit.ir.core import Dense

rng = np.random.default_rng(1234)


def f32(*shape: int, lo: float | None = None) -> np.ndarray:
    x = rng.standard_normal(shape).astype(np.float32)
    if lo is not None:
        x = np.abs(x) + lo
    return x


def ints(*shape: int, hi: int = 10) -> np.ndarray:
    return rng.integers(0, hi, size=shape).astype(np.int64)


def bools(*shape: int) -> np.ndarray:
    return rng.random(shape) < 0.6


T = torch.from_numpy


def tn(x: torch.Tensor) -> np.ndarray:
    return x.detach().numpy()


Case = tuple[str, list[np.ndarray], dict[str, Any], Callable[..., Any]]

CASES: list[Case] = []


def case(name: str, inputs: list[np.ndarray], attrs: dict[str, Any], ref: Callable[..., Any]) -> None:
    CASES.append((name, inputs, attrs, ref))


# elementwise unary
for nm, fn, lo in [("neg", torch.neg, None), ("abs", torch.abs, None), ("exp", torch.exp, None),
                   ("log", torch.log, 0.1), ("sqrt", torch.sqrt, 0.1), ("rsqrt", torch.rsqrt, 0.1),
                   ("reciprocal", torch.reciprocal, 0.1), ("tanh", torch.tanh, None), ("erf", torch.erf, None),
                   ("sigmoid", torch.sigmoid, None), ("sin", torch.sin, None), ("cos", torch.cos, None),
                   ("floor", torch.floor, None), ("ceil", torch.ceil, None), ("sign", torch.sign, None),
                   ("relu", torch.relu, None), ("silu", F.silu, None)]:
    case(f"ik.{nm}", [f32(3, 5, lo=lo) * (1 if lo else 2)], {}, lambda x, fn=fn: tn(fn(T(x))))
case("ik.gelu", [f32(4, 6)], {"approximate": "none"}, lambda x: tn(F.gelu(T(x))))
CASES.append(("ik.gelu", [f32(4, 6)], {"approximate": "tanh"}, lambda x: tn(F.gelu(T(x), approximate="tanh"))))
case("ik.not", [bools(3, 4)], {}, lambda x: ~x)

# binary, with broadcasting
for nm, fn in [("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div),
               ("max", torch.maximum), ("min", torch.minimum), ("rem", torch.fmod)]:
    case(f"ik.{nm}", [f32(2, 3, 4), f32(3, 1, lo=0.5)], {}, lambda x, y, fn=fn: tn(fn(T(x), T(y))))
case("ik.pow", [f32(2, 3, lo=0.1), f32(3, lo=0.1)], {}, lambda x, y: tn(torch.pow(T(x), T(y))))
for nm, fn in [("eq", torch.eq), ("ne", torch.ne), ("lt", torch.lt), ("le", torch.le), ("gt", torch.gt),
               ("ge", torch.ge)]:
    case(f"ik.{nm}", [ints(3, 4, hi=3), ints(4, hi=3)], {}, lambda x, y, fn=fn: tn(fn(T(x), T(y))))
for nm, fn in [("and", np.logical_and), ("or", np.logical_or), ("xor", np.logical_xor)]:
    case(f"ik.{nm}", [bools(3, 4), bools(1, 4)], {}, fn)
case("ik.where", [bools(3, 1), f32(3, 4), f32(4)], {}, lambda c, x, y: tn(torch.where(T(c), T(x), T(y))))
case("ik.cast", [f32(3, 4) * 5], {"to": DType.i32}, lambda x: tn(T(x).to(torch.int32)))
CASES.append(("ik.cast", [f32(3, 4)], {"to": DType.bf16}, lambda x: tn(T(x).to(torch.bfloat16).float())))
case("ik.dropout", [f32(3, 4)], {"p": 0.1}, lambda x: tn(F.dropout(T(x), 0.1, training=False)))

# reductions
def _prod(x: torch.Tensor, dim: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    for d in sorted(dim, reverse=True):
        x = torch.prod(x, dim=d, keepdim=keepdim)
    return x


for nm, fn in [("sum", torch.sum), ("mean", torch.mean), ("max", torch.amax), ("min", torch.amin),
               ("prod", _prod)]:
    case(f"ik.reduce_{nm}", [f32(2, 3, 4)], {"axes": (1, -1), "keepdims": True},
         lambda x, fn=fn: tn(fn(T(x), dim=(1, 2), keepdim=True)))
case("ik.argmax", [f32(3, 7)], {"axis": 1}, lambda x: tn(torch.argmax(T(x), dim=1)))

# normalisations
case("ik.softmax", [f32(2, 3, 5)], {"axis": -1}, lambda x: tn(torch.softmax(T(x), -1)))
case("ik.log_softmax", [f32(2, 3, 5)], {"axis": 1}, lambda x: tn(torch.log_softmax(T(x), 1)))
case("ik.layer_norm", [f32(2, 3, 8), f32(8), f32(8)], {"axis": -1, "eps": 1e-5},
     lambda x, w, b: tn(F.layer_norm(T(x), (8,), T(w), T(b), 1e-5)))
case("ik.rms_norm", [f32(2, 3, 8), f32(8)], {"axis": -1, "eps": 1e-6},
     lambda x, w: tn(F.rms_norm(T(x), (8,), T(w), 1e-6)))

# contractions
case("ik.matmul", [f32(2, 1, 3, 5), f32(4, 5, 6)], {}, lambda x, y: tn(torch.matmul(T(x), T(y))))
case("ik.contract", [f32(2, 5, 3, 4), f32(2, 6, 3, 4)],
     {"lhs_batch": (0, 2), "rhs_batch": (0, 2), "lhs_contract": (3,), "rhs_contract": (3,)},
     lambda x, y: np.einsum("bqhd,bkhd->bhqk", x, y))
case("ik.conv2d", [f32(2, 4, 9, 9), f32(6, 2, 3, 3), f32(6)],
     {"strides": (2, 1), "padding": (1, 0, 1, 2), "dilations": (1, 2), "groups": 2},
     lambda x, w, b: tn(F.conv2d(F.pad(T(x), (0, 2, 1, 1)), T(w), T(b), stride=(2, 1), dilation=(1, 2), groups=2)))

# shape ops
case("ik.reshape", [f32(2, 3, 4)], {"shape": (6, 4)}, lambda x: x.reshape(6, 4))
case("ik.transpose", [f32(2, 3, 4)], {"perm": (2, 0, 1)}, lambda x: tn(T(x).permute(2, 0, 1)))
case("ik.broadcast", [f32(3, 1)], {"shape": (2, 3, 4)}, lambda x: tn(T(x).expand(2, 3, 4)))
case("ik.slice", [f32(5, 6)], {"start": (1, 0), "limit": (5, 6), "step": (2, 3)}, lambda x: x[1:5:2, 0:6:3])
case("ik.concat", [f32(2, 3), f32(2, 1), f32(2, 2)], {"axis": 1}, lambda *xs: tn(torch.cat([T(x) for x in xs], 1)))
case("ik.split", [f32(2, 7)], {"axis": 1, "sizes": (3, 4)}, lambda x: [tn(t) for t in torch.split(T(x), [3, 4], 1)])
case("ik.gather", [f32(10, 4), ints(2, 3, hi=10)], {"axis": 0},
     lambda w, i: tn(F.embedding(T(i), T(w))))
case("ik.iota", [], {"shape": (3, 4), "axis": 1, "dtype": DType.i64}, lambda: tn(torch.arange(4).expand(3, 4)))
case("ik.dim_value", [], {"dim": (7,), "dtype": DType.f32}, lambda: tn(torch.tensor(7.0)))
case("ik.pad", [f32(2, 3)], {"pads": (1, 0, 2, 3), "value": 0.5},
     lambda x: tn(F.pad(T(x), (0, 3, 1, 2), value=0.5)))
_cval = f32(2, 3)
case("ik.constant", [], {"value": Dense(_cval)}, lambda: _cval)


def _sdpa(q, k, v, mask=None, bias=None, scale=1.0, causal=False):
    qt, kt, vt = T(q), T(k), T(v)
    if kt.shape[1] != qt.shape[1]:
        kt = kt.repeat_interleave(qt.shape[1] // kt.shape[1], 1)
        vt = vt.repeat_interleave(qt.shape[1] // vt.shape[1], 1)
    am = None
    if mask is not None:
        am = T(mask)
    if bias is not None:
        am = T(bias) if am is None else torch.where(am, T(bias), torch.tensor(-math.inf))
    return tn(F.scaled_dot_product_attention(qt, kt, vt, attn_mask=am, is_causal=causal, scale=scale))


case("ik.attention", [f32(2, 4, 5, 8), f32(2, 2, 7, 8), f32(2, 2, 7, 8), f32(1, 1, 5, 7)],
     {"scale": 0.3, "causal": False, "_bias": True},
     lambda q, k, v, b: _sdpa(q, k, v, bias=b, scale=0.3))
CASES.append(("ik.attention", [f32(1, 2, 6, 4), f32(1, 2, 6, 4), f32(1, 2, 6, 4), bools(1, 1, 1, 6) | np.eye(1, 6, dtype=bool)],
              {"scale": 0.5, "causal": True},
              lambda q, k, v, m: _sdpa(q, k, v, mask=m & np.tril(np.ones((6, 6), bool)), scale=0.5)))


def _single_op_module(name: str, inputs: list[np.ndarray], attrs: dict[str, Any]) -> Module:
    attrs = dict(attrs)
    as_bias = attrs.pop("_bias", False)
    types = [TensorType(x.shape, DType.from_numpy(x.dtype)) for x in inputs]
    f, b = new_function("main", types)
    args: list[Any] = list(f.args)
    if name == "ik.attention" and as_bias:
        args = args[:3] + [None] + args[3:]
    op = b.create(name, args, attrs)
    b.ret(*op.results)
    m = Module([f])
    verify(m)
    return m


def _as_list(r: Any) -> list[np.ndarray]:
    return [np.asarray(x) for x in r] if isinstance(r, (list, tuple)) else [np.asarray(r)]


@pytest.mark.parametrize("i", range(len(CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_kernel_matches_torch(i: int) -> None:
    name, inputs, attrs, ref = CASES[i]
    m = _single_op_module(name, inputs, attrs)
    want = _as_list(ref(*inputs))
    for f64 in (False, True):
        got = run(m, inputs, float64=f64)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (name, g.shape, w.shape)
            if w.dtype == np.bool_ or w.dtype.kind in "iu":
                np.testing.assert_array_equal(g, w)
            else:
                tol = 1e-2 if "bf16" in str(attrs.get("to", "")) else 2e-5
                np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol)


def test_every_op_has_a_case() -> None:
    covered = {c[0] for c in CASES} | {"ik.fused", "ik.yield", "func.return"}
    missing = sorted(set(OPS) - covered)
    assert not missing, f"ops without a kernel test: {missing}"


def test_fused_region_runs_its_body() -> None:
    from irkit.ir import Graph

    x = f32(3, 4)
    t = TensorType((3, 4), DType.f32)
    f, b = new_function("main", [t])
    body = Graph([t])
    from irkit.ir import Builder

    bb = Builder.at_end(body)
    bb.create("ik.yield", [bb.exp(bb.neg(body.args[0]))], result_types=[])
    (y,) = b.fused([f.args[0]], body, "elementwise")
    b.ret(y)
    m = Module([f])
    verify(m)
    np.testing.assert_allclose(run(m, [x])[0], np.exp(-x), rtol=1e-6)


def test_attention_fully_masked_rows_are_zero() -> None:
    q = f32(1, 1, 3, 4)
    mask = np.zeros((1, 1, 3, 3), dtype=bool)
    mask[0, 0, 0] = True
    m = _single_op_module("ik.attention", [q, q, q, mask], {"scale": 1.0})
    out = run(m, [q, q, q, mask])[0]
    assert np.all(np.isfinite(out)) and np.all(out[0, 0, 1:] == 0) and np.any(out[0, 0, 0] != 0)
