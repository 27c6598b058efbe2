"""Every op's reference kernel against torch (or NumPy where torch has no twin).

Each op in the registry must have a case here: ``test_every_op_has_a_case``
fails when a new op is added without one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from irkit.interp import run
from irkit.ir import OPS, DType, Module, TensorType, new_function, verify
from irkit.ir.core import Dense
from irkit.testing.op_samples import Sample, all_samples, one_op_module, sample_id

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
CASES.append(("ik.bitcast", [f32(3, 4)], {"dtype": DType.i32}, lambda x: tn(T(x).view(torch.int32))))
# torch views to a narrower dtype split the last dim, little-endian, as the IR does
CASES.append(("ik.bitcast", [f32(3, 2)], {"dtype": DType.ui8}, lambda x: tn(T(x).view(torch.uint8).reshape(3, 2, 4))))
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


def _torch_cache_attention(q, kn, vn, kc, vc, pos, scale):
    """transformers' StaticCache update (index_copy_ at pos..pos+S) and SDPA over the cache with the prefix mask."""
    s, t = q.shape[2], kc.shape[2]
    idx = torch.arange(s) + int(pos)
    kt, vt = T(kc.copy()), T(vc.copy())
    kt.index_copy_(2, idx, T(kn))
    vt.index_copy_(2, idx, T(vn))
    keep = (torch.arange(t)[None, :] <= idx[:, None])[None, None]
    return [_sdpa(q, tn(kt), tn(vt), mask=tn(keep), scale=scale), tn(kt), tn(vt)]


case("ik.cache_attention", [f32(1, 4, 2, 8), f32(1, 2, 2, 8), f32(1, 2, 2, 8), f32(1, 2, 9, 8), f32(1, 2, 9, 8),
                            np.array(4, np.int64)], {"scale": 0.35},
     lambda q, kn, vn, kc, vc, p: _torch_cache_attention(q, kn, vn, kc, vc, p, 0.35))


# ---------------------------------------------------------------------------
# Ops added for framework conformance (issue 14)

def _onnx_ref(op_type: str, inputs: list[np.ndarray], n_out: int = 1, **attrs: Any) -> list[np.ndarray]:
    """Run one ONNX node in onnx's own reference evaluator (the spec's executable form)."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    names = [f"i{k}" for k in range(len(inputs))]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op_type, names, outs, **attrs)
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
          for n, x in zip(names, inputs)]
    graph = helper.make_graph([node], "g", vi, [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                                                for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.0, 1e-30], dtype=np.float32)

for nm, fn, lo, hi in [("tan", torch.tan, -1.4, 1.4), ("asin", torch.asin, -0.95, 0.95),
                       ("acos", torch.acos, -0.95, 0.95), ("atan", torch.atan, -3, 3), ("sinh", torch.sinh, -3, 3),
                       ("cosh", torch.cosh, -3, 3), ("asinh", torch.asinh, -3, 3), ("acosh", torch.acosh, 1.05, 5),
                       ("atanh", torch.atanh, -0.95, 0.95), ("log1p", torch.log1p, -0.9, 3),
                       ("expm1", torch.expm1, -3, 3), ("trunc", torch.trunc, -5, 5),
                       ("erfinv", torch.special.erfinv, -0.95, 0.95), ("lgamma", torch.lgamma, 0.1, 6),
                       ("digamma", torch.special.digamma, 0.1, 6)]:
    case(f"ik.{nm}", [rng.uniform(lo, hi, (3, 5)).astype(np.float32)], {}, lambda x, fn=fn: tn(fn(T(x))))
case("ik.round", [np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49, 3.7, -3.2], np.float32)], {},
     lambda x: tn(torch.round(T(x))))
for nm, fn in [("isnan", torch.isnan), ("isinf", torch.isinf), ("isfinite", torch.isfinite)]:
    case(f"ik.{nm}", [SPECIAL.copy()], {}, lambda x, fn=fn: tn(fn(T(x))))
    CASES.append((f"ik.{nm}", [SPECIAL.astype(np.float16)], {}, lambda x, fn=fn: tn(fn(T(x)))))

_INT_EDGE = np.array([0, 1, -1, 7, 2**31 - 1, -(2**31), 255, 12345], dtype=np.int32)
case("ik.bitwise_not", [_INT_EDGE], {}, lambda x: tn(torch.bitwise_not(T(x))))
CASES.append(("ik.bitwise_not", [np.array([0, 1, 200, 255], np.uint8)], {}, lambda x: tn(torch.bitwise_not(T(x)))))


def _popcount_py(x: np.ndarray) -> np.ndarray:
    bits = 8 * x.dtype.itemsize
    return np.array([(int(v) & ((1 << bits) - 1)).bit_count() for v in x.reshape(-1)], x.dtype).reshape(x.shape)


def _clz_py(x: np.ndarray) -> np.ndarray:
    bits = 8 * x.dtype.itemsize
    return np.array([bits - (int(v) & ((1 << bits) - 1)).bit_length() for v in x.reshape(-1)], x.dtype).reshape(x.shape)


for _x in (_INT_EDGE, np.array([0, 1, 128, 255, 16], np.uint8), np.array([-1, 2**40, 3], np.int64)):
    case("ik.popcount", [_x], {}, _popcount_py)
    case("ik.clz", [_x], {}, _clz_py)

case("ik.atan2", [f32(2, 3, 4), f32(3, 1)], {}, lambda y, x: tn(torch.atan2(T(y), T(x))))
case("ik.nextafter", [f32(2, 3), f32(3)], {}, lambda x, y: tn(torch.nextafter(T(x), T(y))))
_ia, _ib = ints(3, 4, hi=1000) - 500, ints(4, hi=1000) - 500
for nm, fn in [("bitwise_and", torch.bitwise_and), ("bitwise_or", torch.bitwise_or),
               ("bitwise_xor", torch.bitwise_xor)]:
    case(f"ik.{nm}", [_ia.astype(np.int32), _ib.astype(np.int32)], {}, lambda x, y, fn=fn: tn(fn(T(x), T(y))))
    CASES.append((f"ik.{nm}", [np.array([3, 200, 255], np.uint8), np.array([5, 100, 15], np.uint8)], {},
                  lambda x, y, fn=fn: tn(fn(T(x), T(y)))))


def _shift_py(kind: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """XLA's shifts on Python ints: the amount is unsigned; >= the width gives 0 or the sign fill."""
    def go(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        x, y = np.broadcast_arrays(x, y)
        bits = 8 * x.dtype.itemsize
        mask = (1 << bits) - 1
        out = []
        for v, a in zip(x.reshape(-1).tolist(), y.reshape(-1).tolist()):
            a &= mask
            u = v & mask
            if kind == "left":
                r = (u << a) & mask if a < bits else 0
            elif kind == "logical":
                r = u >> a if a < bits else 0
            else:
                s = u - (1 << bits) if u >> (bits - 1) else u
                r = (s >> min(a, bits - 1)) & mask
            out.append(r)
        return np.array(out, dtype=np.uint64).astype(np.dtype(f"u{x.dtype.itemsize}")).view(x.dtype).reshape(x.shape)
    return go


_sv = np.array([1, -1, 12345, -12345, 7, -(2**31), 2**31 - 1, 96], dtype=np.int32)
_sa = np.array([0, 1, 3, 31, 32, 33, -1, 5], dtype=np.int32)
for nm, kind in [("shift_left", "left"), ("shift_right_logical", "logical"),
                 ("shift_right_arithmetic", "arithmetic")]:
    case(f"ik.{nm}", [_sv, _sa], {}, _shift_py(kind))
    CASES.append((f"ik.{nm}", [np.array([1, 128, 255, 3, 200], np.uint8), np.array([0, 1, 7, 8, 9], np.uint8)], {},
                  _shift_py(kind)))
    CASES.append((f"ik.{nm}", [(ints(3, 4, hi=2000) - 1000), ints(4, hi=8)], {}, _shift_py(kind)))

_num, _den = f32(2, 3, 4) * 4, f32(3, 1, lo=0.5) * np.array([[1], [-1], [1]], np.float32)
case("ik.mod", [_num, _den], {}, lambda x, y: tn(torch.remainder(T(x), T(y))))
case("ik.mod", [ints(3, 4, hi=40) - 20, np.array([3, -3, 7, -2])], {}, lambda x, y: tn(torch.remainder(T(x), T(y))))
case("ik.floor_div", [_num, _den], {}, lambda x, y: tn(torch.floor_divide(T(x), T(y))))
case("ik.floor_div", [ints(3, 4, hi=40) - 20, np.array([3, -3, 7, -2])], {},
     lambda x, y: tn(torch.floor_divide(T(x), T(y))))
case("ik.div", [ints(3, 4, hi=40) - 20, np.array([3, -3, 7, -2])], {},
     lambda x, y: tn(torch.div(T(x), T(y), rounding_mode="trunc")))
case("ik.rem", [ints(3, 4, hi=40) - 20, np.array([3, -3, 7, -2])], {}, lambda x, y: tn(torch.fmod(T(x), T(y))))

# argmin / argmax with select_last_index
_ties = np.array([[1.0, 3.0, 3.0, -2.0, -2.0], [0.5, 0.5, 0.5, 0.5, 0.5]], np.float32)
case("ik.argmin", [f32(3, 7)], {"axis": 1}, lambda x: tn(torch.argmin(T(x), dim=1)))
case("ik.argmin", [f32(3, 4, 2)], {"axis": -2, "keepdims": True}, lambda x: tn(torch.argmin(T(x), dim=1, keepdim=True)))
for nm, npfn in [("argmin", np.argmin), ("argmax", np.argmax)]:
    CASES.append((f"ik.{nm}", [_ties], {"axis": 1}, lambda x, f=npfn: f(x, axis=1)))
    CASES.append((f"ik.{nm}", [_ties], {"axis": 1, "select_last_index": True},
                  lambda x, f=npfn: x.shape[1] - 1 - f(x[:, ::-1], axis=1)))


# scans
def _torch_scan(fn: Callable[..., Any], axis: int, reverse: bool, exclusive: bool, ident: float):
    def go(x: np.ndarray) -> np.ndarray:
        t = T(x)
        if reverse:
            t = t.flip(axis)
        r = fn(t, axis)
        r = r[0] if isinstance(r, tuple) else r
        if exclusive:
            first = torch.full_like(r.narrow(axis, 0, 1), ident)
            r = torch.cat([first, r.narrow(axis, 0, r.shape[axis] - 1)], axis)
        if reverse:
            r = r.flip(axis)
        return tn(r)
    return go


for nm, fn, ident in [("cumsum", torch.cumsum, 0.0), ("cumprod", torch.cumprod, 1.0),
                      ("cummax", torch.cummax, -math.inf), ("cummin", torch.cummin, math.inf)]:
    for ax, rev, exc in [(1, False, False), (0, True, False), (-1, False, True), (1, True, True)]:
        case(f"ik.{nm}", [f32(3, 5)], {"axis": ax, "reverse": rev, "exclusive": exc}, _torch_scan(fn, ax, rev, exc, ident))
    iid = {"cummax": -(2**63), "cummin": 2**63 - 1}.get(nm) or int(ident)
    CASES.append((f"ik.{nm}", [ints(3, 4, hi=7) - 3], {"axis": 1, "exclusive": True},
                  _torch_scan(fn, 1, False, True, iid)))

# indexing
case("ik.gather_elements", [f32(3, 5), ints(3, 4, hi=5)], {"axis": 1}, lambda x, i: tn(torch.gather(T(x), 1, T(i))))
_neg = ints(2, 3, hi=8) - 4
case("ik.gather_elements", [f32(4, 3), _neg], {"axis": 0}, lambda x, i: np.take_along_axis(x, i, axis=0))
CASES.append(("ik.gather_elements", [f32(4, 3), _neg], {"axis": 0},
              lambda x, i: _onnx_ref("GatherElements", [x, i], axis=0)))
case("ik.gather_nd", [f32(3, 4, 2), np.array([[0, -1], [2, 1], [-3, 0]])], {},
     lambda x, i: _onnx_ref("GatherND", [x, i]))
CASES.append(("ik.gather_nd", [f32(2, 3, 4), np.array([[[1], [-1]], [[0], [2]]])], {"batch_dims": 1},
              lambda x, i: _onnx_ref("GatherND", [x, i], batch_dims=1)))
CASES.append(("ik.gather_nd", [f32(2, 3, 4), np.array([[1, -1, 0], [0, 2, 3]])], {},
              lambda x, i: _onnx_ref("GatherND", [x, i])))
_dup = np.array([[1, 1, 0], [2, 2, -1]])
for red in ("none", "add", "mul", "max", "min"):
    case("ik.scatter_elements", [f32(3, 4), _dup, f32(2, 3)], {"axis": 1, "reduction": red},
         lambda x, i, u, red=red: _onnx_ref("ScatterElements", [x, i, u], axis=1, reduction=red))
    _ndup = np.array([[1, 0], [1, 0], [-1, 2]])
    case("ik.scatter_nd", [f32(3, 4), _ndup, f32(3)], {"reduction": red},
         lambda x, i, u, red=red: _onnx_ref("ScatterND", [x, i, u], reduction=red) if red != "none" else
         _scatter_nd_last(x, i, u))
CASES.append(("ik.scatter_elements", [f32(4, 3), ints(2, 3, hi=8) - 4, f32(2, 3)], {"axis": 0},
              lambda x, i, u: tn(torch.scatter(T(x), 0, T(np.where(i < 0, i + 4, i)), T(u)))))
CASES.append(("ik.scatter_nd", [f32(4, 3), np.array([[0], [-1], [2]]), f32(3, 3)], {},
              lambda x, i, u: _onnx_ref("ScatterND", [x, i, u])))


def _scatter_nd_last(x: np.ndarray, i: np.ndarray, u: np.ndarray) -> np.ndarray:
    """ScatterND with repeated indices, the last update in row-major order winning (a plain loop)."""
    out = x.copy()
    for k in range(i.shape[0]):
        out[tuple(int(v) for v in i[k])] = u[k]
    return out


def _dyn_slice(x: np.ndarray, s: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    st = [min(max(int(v), 0), d - n) for v, d, n in zip(s, x.shape, sizes)]
    return x[tuple(slice(a, a + n) for a, n in zip(st, sizes))]


def _dyn_update(x: np.ndarray, u: np.ndarray, s: np.ndarray) -> np.ndarray:
    out = x.copy()
    st = [min(max(int(v), 0), d - n) for v, d, n in zip(s, x.shape, u.shape)]
    out[tuple(slice(a, a + n) for a, n in zip(st, u.shape))] = u
    return out


case("ik.dynamic_slice", [f32(5, 6), np.array([1, 2])], {"sizes": (3, 2)}, lambda x, s: _dyn_slice(x, s, (3, 2)))
CASES.append(("ik.dynamic_slice", [f32(5, 6), np.array([4, -3], np.int32)], {"sizes": (3, 4)},
              lambda x, s: tn(T(x)[2:5, 0:4])))
case("ik.dynamic_update_slice", [f32(5, 6), f32(2, 3), np.array([1, 2])], {}, _dyn_update)
CASES.append(("ik.dynamic_update_slice", [f32(5, 6), f32(3, 4), np.array([9, -2], np.int32)], {},
              lambda x, u, s: tn(torch.cat([T(x)[:2], torch.cat([T(u), T(x)[2:, 4:]], 1)], 0))))
case("ik.reverse", [f32(3, 4, 2)], {"axes": (0, -1)}, lambda x: tn(torch.flip(T(x), (0, 2))))

# sorting
_sort_ties = np.array([[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [np.nan, 1.0, -np.inf, np.nan, np.inf, -0.0]], np.float32)


def _torch_sort(axis: int, descending: bool):
    def go(x: np.ndarray) -> list[np.ndarray]:
        r = torch.sort(T(x), dim=axis, descending=descending, stable=True)
        return [tn(r.values), tn(r.indices)]
    return go


case("ik.sort", [f32(3, 5)], {}, _torch_sort(-1, False))
case("ik.sort", [f32(4, 3)], {"axis": 0, "descending": True}, _torch_sort(0, True))
case("ik.sort", [_sort_ties], {}, _torch_sort(-1, False))
case("ik.sort", [_sort_ties], {"descending": True}, _torch_sort(-1, True))
case("ik.sort", [ints(2, 6, hi=4)], {"descending": True}, _torch_sort(-1, True))


def _torch_topk(k: int, axis: int, largest: bool):
    def go(x: np.ndarray) -> list[np.ndarray]:
        # torch.topk does not promise an order among ties; a stable sort cut at k does (ONNX's rule).
        r = torch.sort(T(x), dim=axis, descending=largest, stable=True)
        return [tn(r.values.narrow(axis, 0, k)), tn(r.indices.narrow(axis, 0, k))]
    return go


case("ik.topk", [f32(3, 6)], {"k": 3}, lambda x: [tn(t) for t in torch.topk(T(x), 3)])
case("ik.topk", [f32(5, 3)], {"k": 2, "axis": 0, "largest": False},
     lambda x: [tn(t) for t in torch.topk(T(x), 2, dim=0, largest=False)])
case("ik.topk", [_sort_ties], {"k": 4}, _torch_topk(4, -1, True))
case("ik.topk", [_sort_ties], {"k": 3, "largest": False}, _torch_topk(3, -1, False))
case("ik.topk", [ints(2, 6, hi=3)], {"k": 5}, _torch_topk(5, -1, True))
CASES.append(("ik.topk", [_sort_ties[:1].copy()], {"k": 3}, lambda x: _onnx_ref("TopK", [x, np.array([3])], 2)))

# windows
_pool_x = f32(2, 3, 7, 6)
case("ik.reduce_window", [_pool_x], {"kind": "max", "window": (1, 1, 3, 3), "strides": (1, 1, 2, 2),
                                     "pads": (0, 0, 1, 1, 0, 0, 1, 1)},
     lambda x: tn(F.max_pool2d(T(x), 3, 2, padding=1)))
CASES.append(("ik.reduce_window", [_pool_x], {"kind": "min", "window": (1, 1, 2, 3), "dilations": (1, 1, 2, 1)},
              lambda x: tn(-F.max_pool2d(-T(x), (2, 3), 1, dilation=(2, 1)))))
CASES.append(("ik.reduce_window", [_pool_x], {"kind": "sum", "window": (1, 1, 3, 2), "strides": (1, 1, 2, 1),
                                              "pads": (0, 0, 1, 0, 0, 0, 1, 1)},
              lambda x: tn(F.avg_pool2d(F.pad(T(x), (0, 1, 1, 1)), (3, 2), (2, 1)) * 6)))
CASES.append(("ik.reduce_window", [_pool_x], {"kind": "sum", "window": (1, 1, 2, 2), "dilations": (1, 1, 3, 2)},
              lambda x: tn(F.conv2d(T(x), torch.ones(3, 1, 2, 2), dilation=(3, 2), groups=3))))
CASES.append(("ik.reduce_window", [f32(2, 9)], {"kind": "max", "window": (1, 4), "strides": (1, 3),
                                               "pads": (0, 1, 0, 2)},
              lambda x: tn(F.max_pool1d(F.pad(T(x)[None], (1, 2), value=-math.inf), 4, 3)[0])))
CASES.append(("ik.reduce_window", [ints(1, 5, 4, hi=19) - 9], {"kind": "max", "window": (1, 2, 2)},
              lambda x: tn(F.max_pool2d(T(x).double(), 2, 1).long())))

case("ik.conv", [f32(2, 3, 9), f32(4, 3, 3), f32(4)], {"strides": (2,), "padding": (1, 2)},
     lambda x, w, b: tn(F.conv1d(F.pad(T(x), (1, 2)), T(w), T(b), stride=2)))
CASES.append(("ik.conv", [f32(1, 4, 6, 5), f32(6, 2, 3, 2)],
              {"strides": (1, 2), "padding": (1, 0, 1, 1), "dilations": (2, 1), "groups": 2},
              lambda x, w: tn(F.conv2d(F.pad(T(x), (0, 1, 1, 1)), T(w), stride=(1, 2), dilation=(2, 1), groups=2))))
CASES.append(("ik.conv", [f32(1, 2, 3, 4, 4), f32(2, 2, 2, 2, 3), f32(2)],
              {"strides": (1, 2, 1), "padding": (0, 1, 1, 1, 0, 1)},
              lambda x, w, b: tn(F.conv3d(F.pad(T(x), (1, 1, 1, 0, 0, 1)), T(w), T(b), stride=(1, 2, 1)))))
CASES.append(("ik.conv", [f32(1, 2, 7, 7), f32(2, 2, 2, 2)], {"padding": (-1, 0, 1, -2)},
              lambda x, w: tn(F.conv2d(F.pad(T(x)[:, :, 1:, :5], (0, 0, 0, 1)), T(w)))))
# ConvTranspose as ik.conv: lhs_dilation = stride, padding = dil*(k-1) - pad, kernel flipped with in/out swapped.
_ct_w = f32(3, 2, 3, 2)  # torch ConvTranspose weight: in, out, kh, kw
CASES.append(("ik.conv", [f32(1, 3, 4, 5), np.ascontiguousarray(np.flip(_ct_w, (2, 3)).transpose(1, 0, 2, 3))],
              {"lhs_dilation": (2, 3), "padding": (1, 0, 1, 0), "strides": (1, 1)},
              lambda x, w: tn(F.conv_transpose2d(T(x), T(_ct_w), stride=(2, 3), padding=(1, 1)))))


def _single_op_module(name: str, inputs: list[np.ndarray], attrs: dict[str, Any]) -> Module:
    """A one-op module over ``inputs``; ``_bias`` in attrs puts the 4th input in attention's bias slot."""
    attrs = dict(attrs)
    slots = (0, 1, 2, None, 3) if name == "ik.attention" and attrs.pop("_bias", False) else None
    return one_op_module(name, Sample(list(inputs), attrs, slots))


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


# ---------------------------------------------------------------------------
# irkit.testing.op_samples: every op has samples, each builds a valid one-op module that
# runs in both interpreter modes and round-trips through the text format.

_SAMPLES = all_samples()


def test_every_op_has_samples() -> None:
    from irkit.testing.op_samples import samples

    for name in OPS:
        ss = samples(name)
        assert ss, name
        for s in ss:
            assert all(x.size == 0 or np.any(x != 0) for x in s.inputs), f"{name}: an all-zero input"


@pytest.mark.parametrize("k", range(len(_SAMPLES)), ids=[sample_id(*s) for s in _SAMPLES])
def test_sample_builds_runs_and_round_trips(k: int) -> None:
    from irkit.text import parse_module, print_module

    name, _, s = _SAMPLES[k]
    m = one_op_module(name, s)
    assert any(op.name == name for op in m.entry.walk())
    got = run(m, s.inputs)
    oracle = run(m, s.inputs, float64=True)
    assert len(got) == len(oracle) == len(m.entry.outputs)
    for g, o, r in zip(got, oracle, m.entry.outputs):
        assert g.shape == o.shape == r.type.concrete_shape({})
        assert g.dtype == r.type.dtype.np
        if g.dtype.kind == "f" and not r.type.dtype.is_float:
            raise AssertionError("float result for a non-float type")
        if r.type.dtype.is_float:
            # The declared-precision run agrees with the oracle where both are finite, NaN in the same places.
            np.testing.assert_array_equal(np.isnan(g.astype(np.float64)), np.isnan(o))
    text = print_module(m)
    assert print_module(parse_module(text)) == text


@pytest.mark.parametrize("dt", [np.float32, np.float16, DType.bf16.np])
def test_nextafter_steps_one_ulp_of_the_declared_type_even_in_the_oracle(dt) -> None:
    x = np.array([1.0, 1.0, 0.0, -2.0, 3.0], dtype=dt)
    y = np.array([2.0, 0.0, 1.0, -3.0, 3.0], dtype=dt)
    m = _single_op_module("ik.nextafter", [x, y], {})
    want = np.nextafter(x, y)
    for f64 in (False, True):
        got = run(m, [x, y], float64=f64)[0]
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    assert np.all(want[:4] != x[:4]) and want[4] == x[4]


@pytest.mark.parametrize("name, inputs, attrs, msg", [
    ("ik.gather", [np.arange(1, 7, dtype=np.float32).reshape(3, 2), np.array([0, 3])], {"axis": 0},
     r"gather index 3 out of range \[-3, 3\)"),
    ("ik.gather_elements", [np.ones((2, 3), np.float32), np.array([[0, -4, 1]])], {"axis": 1},
     r"gather_elements index -4 out of range \[-3, 3\)"),
    ("ik.gather_nd", [np.ones((2, 3), np.float32), np.array([[1, 3]])], {}, r"gather_nd index 3 out of range \[-3, 3\)"),
    ("ik.scatter_elements", [np.ones((2, 3), np.float32), np.array([[5]]), np.ones((1, 1), np.float32)],
     {"axis": 1}, r"scatter_elements index 5 out of range \[-3, 3\)"),
    ("ik.scatter_nd", [np.ones((2, 3), np.float32), np.array([[-3]]), np.ones((1, 3), np.float32)], {},
     r"scatter_nd index -3 out of range \[-2, 2\)"),
])
def test_out_of_range_indices_raise_naming_the_range(name, inputs, attrs, msg) -> None:
    from irkit.interp import InterpError

    m = _single_op_module(name, inputs, attrs)
    for f64 in (False, True):
        with pytest.raises(InterpError, match=msg):
            run(m, inputs, float64=f64)


def test_half_types_compute_through_f32_and_round_once() -> None:
    x = np.array([0.3, 1.7, -2.2, 0.9], dtype=np.float16)
    y = x[::-1].copy()
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    for name, ins, attrs, want in [("ik.tan", [x], {}, np.tan(x32)), ("ik.expm1", [x], {}, np.expm1(x32)),
                                   ("ik.atan2", [x, y], {}, np.arctan2(x32, y32)),
                                   ("ik.cumsum", [x], {"axis": 0}, np.cumsum(x32))]:
        got = run(_single_op_module(name, ins, attrs), ins)[0]
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, want.astype(np.float16))


def test_costs_of_new_ops_count_flops_and_bytes() -> None:
    from irkit.ir import op_cost

    m = _single_op_module("ik.conv", [f32(1, 4, 6, 5), f32(6, 2, 3, 2)], {"groups": 2})
    op = next(o for o in m.entry.walk() if o.name == "ik.conv")
    c = op_cost(op, {})
    assert c.flops == 2.0 * (1 * 6 * 4 * 4) * (2 * 3 * 2)
    assert c.bytes_read == 4 * (1 * 4 * 6 * 5 + 6 * 2 * 3 * 2) and c.bytes_written == 4 * 6 * 4 * 4
    m = _single_op_module("ik.reduce_window", [f32(1, 2, 6, 5)], {"kind": "max", "window": (1, 1, 3, 3)})
    op = next(o for o in m.entry.walk() if o.name == "ik.reduce_window")
    assert op_cost(op, {}).flops == (2 * 4 * 3) * 9
    m = _single_op_module("ik.sort", [f32(3, 8)], {})
    op = next(o for o in m.entry.walk() if o.name == "ik.sort")
    c = op_cost(op, {})
    assert c.flops == 24 * 3 and c.bytes_written == 24 * 4 + 24 * 8
