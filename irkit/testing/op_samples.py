"""Small inputs for every op in the registry, special values included.

``samples(op_name)`` gives a list of :class:`Sample` for any registered op: small
shapes, random non-zero data, and the special values an op must handle the same
way on every target (NaN and ±Inf for float ops, halves for ``round``, ties for
``argmax``/``sort``/``topk``, negative and boundary indices for the gathers and
scatters, duplicate scatter indices, out-of-range ``dynamic_slice`` starts, a fully
masked attention row, shifts by the bit width or more, unsigned and narrow integer
types).  ``one_op_module(op_name, sample)`` builds the one-op module a sample
describes; its inputs are ``sample.inputs``.  A test that checks a target's lowering
of an op against the float64 oracle is then::

    for s in samples(name):
        m = one_op_module(name, s)
        got = target.run(target.lower(m), s.inputs)
        want = irkit.interp.run(m, s.inputs, float64=True)

Samples are deterministic (seeded by the op name).  Undefined behaviour is left out
on purpose: no integer division by zero, no float-to-integer casts of NaN or of values
out of range, no out-of-range gather indices (those raise in the reference).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from irkit.ir.builder import Builder, new_function
from irkit.ir.core import Dense, Graph, Module, Value
from irkit.ir.ops import BINARY, COMPARE, LOGICAL, OPS, UNARY
from irkit.ir.types import DType, TensorType
from irkit.ir.verify import verify

BuildFn = Callable[[Builder, list[Value]], Sequence[Value]]


@dataclass(frozen=True)
class Sample:
    """One way to call an op: its inputs (function arguments, in order), its attributes,
    and optionally where each input goes or a builder for ops that need more than one op.

    ``slots`` maps the op's operand slots to input positions (None leaves an optional
    operand out), e.g. ``(0, 1, 2, None, 3)`` is attention with a bias and no mask.
    ``build(b, args)`` replaces the default single ``b.create`` (for ``ik.fused`` and
    ``func.return``) and returns the values the function returns.
    """

    inputs: list[np.ndarray]
    attrs: dict[str, Any] = field(default_factory=dict)
    slots: tuple[int | None, ...] | None = None
    build: BuildFn | None = None
    note: str = ""
    """What the sample exercises (``"NaN/Inf"``, ``"negative indices"``...), for test ids."""


def one_op_module(op_name: str, sample: Sample) -> Module:
    """A verified module whose function ``main`` takes ``sample.inputs`` and returns the
    results of one ``op_name`` op (or of ``sample.build``)."""
    types = [TensorType(x.shape, DType.from_numpy(x.dtype)) for x in sample.inputs]
    f, b = new_function("main", types, [f"x{i}" for i in range(len(types))])
    args: list[Value] = list(f.args)
    if sample.build is not None:
        outs = list(sample.build(b, args))
    else:
        operands: list[Value | None] = list(args) if sample.slots is None else \
            [None if i is None else args[i] for i in sample.slots]
        outs = list(b.create(op_name, operands, dict(sample.attrs)).results)
    b.ret(*outs)
    m = Module([f])
    verify(m)
    return m


def samples(op_name: str) -> list[Sample]:
    """Samples for ``op_name`` (any registered op); KeyError for an unknown op."""
    if op_name not in OPS:
        raise KeyError(f"unknown op '{op_name}'")
    rng = np.random.default_rng(zlib.crc32(op_name.encode()))
    short = op_name.split(".", 1)[1]
    if short in UNARY:
        return _unary(short, rng)
    if short in BINARY:
        return _binary(short, rng)
    if short in COMPARE:
        return _compare(rng)
    if short in LOGICAL:
        return [Sample([_bools(rng, 3, 4), _bools(rng, 1, 4)])]
    return _SPECIAL[op_name](rng)


def all_samples() -> list[tuple[str, int, Sample]]:
    """``(op name, index, sample)`` for every op in the registry."""
    return [(n, i, s) for n in sorted(OPS) for i, s in enumerate(samples(n))]


def sample_id(op_name: str, index: int, sample: Sample) -> str:
    """A readable test id: ``ik.gather-1-negative indices``."""
    return f"{op_name}-{index}" + (f"-{sample.note}" if sample.note else "")


# ---------------------------------------------------------------------------
# Data helpers (never all zeros)


def _f32(rng: np.random.Generator, *shape: int, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    if lo is not None and hi is not None:
        x = rng.uniform(lo, hi, size=shape)
    else:
        x = rng.standard_normal(shape)
        if lo is not None:
            x = np.abs(x) + lo
    return x.astype(np.float32)


def _ints(rng: np.random.Generator, *shape: int, lo: int = -20, hi: int = 20, dtype: Any = np.int32,
          nonzero: bool = False) -> np.ndarray:
    x = rng.integers(lo, hi, size=shape)
    if nonzero:
        x = np.where(x == 0, 1, x)
    return x.astype(dtype)


def _bools(rng: np.random.Generator, *shape: int) -> np.ndarray:
    x = rng.random(shape) < 0.6
    x.flat[0] = True
    return x


_SPECIAL_F = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-30, 100.0],
                      dtype=np.float32).reshape(3, 4)


# Input ranges of the float unary ops with a restricted (or pole-free) domain.
_DOMAIN: dict[str, tuple[float, float]] = {
    "log": (0.1, 4.0), "sqrt": (0.1, 4.0), "rsqrt": (0.1, 4.0), "reciprocal": (0.2, 3.0),
    "asin": (-0.95, 0.95), "acos": (-0.95, 0.95), "atanh": (-0.95, 0.95), "erfinv": (-0.95, 0.95),
    "acosh": (1.05, 5.0), "log1p": (-0.9, 3.0), "lgamma": (0.1, 6.0), "digamma": (0.1, 6.0),
    "tan": (-1.4, 1.4), "exp": (-3.0, 3.0), "expm1": (-3.0, 3.0), "sinh": (-3.0, 3.0), "cosh": (-3.0, 3.0),
}


def _unary(name: str, rng: np.random.Generator) -> list[Sample]:
    domain = UNARY[name][2]
    if domain == "int":
        return [Sample([_ints(rng, 3, 5, lo=-1000, hi=1000)]),
                Sample([np.array([0, 1, -1, 2**31 - 1, -(2**31), 255, 7], dtype=np.int32)], note="boundary"),
                Sample([_ints(rng, 2, 4, lo=0, hi=256, dtype=np.uint8)], note="ui8"),
                Sample([_ints(rng, 2, 3, lo=-(2**40), hi=2**40, dtype=np.int64)], note="i64")]
    lo, hi = _DOMAIN.get(name, (-3.0, 3.0))
    out = [Sample([_f32(rng, 3, 5, lo=lo, hi=hi)])]
    if name == "round":
        out.append(Sample([np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49, 3.5], dtype=np.float32)],
                          note="halves"))
    if domain == "numeric":
        out.append(Sample([_ints(rng, 3, 4, nonzero=True)], note="i32"))
    out.append(Sample([_SPECIAL_F.copy()], note="NaN-Inf"))
    return out


def _binary(name: str, rng: np.random.Generator) -> list[Sample]:
    domain = BINARY[name][3]
    if domain == "int":
        if name.startswith("shift"):
            amounts = np.array([0, 1, 3, 31, 32, 33, 7, 5], dtype=np.int32)
            vals = np.array([1, -1, 12345, -12345, 7, -(2**31), 2**31 - 1, 96], dtype=np.int32)
            u8 = np.array([1, 128, 255, 3, 200, 17], dtype=np.uint8)
            return [Sample([_ints(rng, 3, 4, lo=-1000, hi=1000), _ints(rng, 4, lo=0, hi=8)]),
                    Sample([vals, amounts], note="amount at-above bit width"),
                    Sample([u8, np.array([0, 1, 7, 8, 9, 2], dtype=np.uint8)], note="ui8")]
        return [Sample([_ints(rng, 3, 4, lo=-1000, hi=1000), _ints(rng, 4, lo=-1000, hi=1000)]),
                Sample([_ints(rng, 2, 3, lo=0, hi=256, dtype=np.uint8), _ints(rng, 3, lo=0, hi=256, dtype=np.uint8)],
                       note="ui8")]
    if name == "pow":
        out = [Sample([_f32(rng, 2, 3, lo=0.1), _f32(rng, 3, lo=-2.0, hi=2.0)]),
               Sample([_ints(rng, 2, 3, lo=-4, hi=5), _ints(rng, 3, lo=0, hi=4)], note="i32")]
    elif name == "nextafter":
        out = [Sample([_f32(rng, 2, 3), _f32(rng, 3)]),
               Sample([np.array([1.0, 1.0, 0.0, -0.0, 2.0], np.float16),
                       np.array([2.0, 0.0, 1.0, -1.0, 2.0], np.float16)], note="f16")]
    else:
        y = _f32(rng, 3, 1, lo=0.5) * np.where(rng.random((3, 1)) < 0.5, -1, 1).astype(np.float32)
        out = [Sample([_f32(rng, 2, 3, 4) * 3, y])]
        if domain == "numeric":
            out.append(Sample([_ints(rng, 3, 4, lo=-50, hi=50), _ints(rng, 4, lo=-9, hi=10, nonzero=True)],
                              note="i32 signs"))
            if name in ("add", "sub", "mul", "max", "min", "div", "mod", "floor_div", "rem"):
                out.append(Sample([_ints(rng, 3, 4, lo=1, hi=250, dtype=np.uint8),
                                   _ints(rng, 4, lo=1, hi=9, dtype=np.uint8)], note="ui8"))
    if name == "add":
        out.append(Sample([_f32(rng, 0, 3), _f32(rng, 3)], note="empty"))
    nan_pairs = np.array([[np.nan, 1.0], [1.0, np.nan], [np.inf, 1.0], [-np.inf, 2.0], [np.inf, np.inf],
                          [np.inf, -np.inf], [0.0, -0.0], [-3.0, 2.0], [3.0, -2.0], [1.0, 0.0]], dtype=np.float32)
    out.append(Sample([nan_pairs[:, 0].copy(), nan_pairs[:, 1].copy()], note="NaN-Inf"))
    return out


def _compare(rng: np.random.Generator) -> list[Sample]:
    a = np.array([np.nan, 1.0, np.inf, -np.inf, 0.0, 2.0], dtype=np.float32)
    b = np.array([np.nan, np.nan, np.inf, 1.0, -0.0, 2.0], dtype=np.float32)
    return [Sample([_f32(rng, 3, 4), _f32(rng, 4)]),
            Sample([_ints(rng, 3, 4, lo=0, hi=3, dtype=np.int64), _ints(rng, 4, lo=0, hi=3, dtype=np.int64)],
                   note="i64 ties"),
            Sample([a, b], note="NaN-Inf")]


# ---------------------------------------------------------------------------
# Every other op, one function each


def _s_not(rng):
    return [Sample([_bools(rng, 3, 4)])]


def _s_gelu(rng):
    return [Sample([_f32(rng, 4, 6)], {"approximate": "none"}), Sample([_f32(rng, 4, 6)], {"approximate": "tanh"}),
            Sample([_SPECIAL_F.copy()], {"approximate": "none"}, note="NaN-Inf")]


def _s_where(rng):
    return [Sample([_bools(rng, 3, 1), _f32(rng, 3, 4), _f32(rng, 4)]),
            Sample([_bools(rng, 3, 4), _ints(rng, 3, 4), _ints(rng, 1, 4)], note="i32"),
            Sample([_bools(rng, 3, 4), _SPECIAL_F.copy(), _f32(rng, 3, 4)], note="NaN-Inf")]


def _s_cast(rng):
    return [Sample([_f32(rng, 3, 4) * 5], {"to": DType.i32}),
            Sample([_f32(rng, 3, 4)], {"to": DType.bf16}),
            Sample([_f32(rng, 3, 4)], {"to": DType.f16}),
            Sample([_ints(rng, 3, 4, dtype=np.int64)], {"to": DType.f32}, note="i64"),
            Sample([_f32(rng, 3, 4, lo=0.5, hi=250.0)], {"to": DType.ui8}, note="ui8"),
            Sample([_ints(rng, 3, 4, lo=-300, hi=300)], {"to": DType.i8}, note="wraps"),
            Sample([_f32(rng, 3, 4)], {"to": DType.bool}, note="i1"),
            Sample([_SPECIAL_F.copy()], {"to": DType.f16}, note="NaN-Inf"),
            *[Sample([_F8_SRC.copy()], {"to": dt, "saturate": sat}, note=f"{dt}{'-sat' if sat else ''}")
              for dt in _FLOAT8 for sat in (False, True)],
            *[Sample([np.arange(256, dtype=np.uint8).view(dt.np).reshape(16, 16)], {"to": to}, note=f"all {dt}")
              for dt, to in zip(_FLOAT8, (DType.f32, DType.f16, DType.f32, DType.bf16))]]


_FLOAT8 = (DType.f8e4m3fn, DType.f8e4m3fnuz, DType.f8e5m2, DType.f8e5m2fnuz)
# Float8 conversion cases: NaN, ±Inf, -0.0, ties to even (1.0625 -> 1.0, 1.1875 -> 1.25 on E4M3), values
# just inside and beyond each type's largest finite value (240, 448, 57344), subnormals and underflow.
_F8_SRC = np.array([np.nan, np.inf, -np.inf, -0.0, 1.0625, 1.1875, -2.5, 239.0, 250.0, 448.0, 460.0, 470.0,
                    -1000.0, 57344.0, 61440.0, 1e6, 0.0039, -0.0019, 1e-6, 3.3],
                   dtype=np.float32).reshape(4, 5)
_NEG_NAN_F32 = np.array([0xFFC00000], np.uint32).view(np.float32)[0]


def _s_bitcast(rng):
    f = _SPECIAL_F.copy()
    f[0, 1] = _NEG_NAN_F32  # NaN with the sign bit
    words = np.array([0x3F800000, 0x80000000, 0x7F800000, 0xFFC00000, 0x00000001, 0x7F7FFFFF],
                     np.uint32).view(np.int32).reshape(2, 3)
    return [Sample([f], {"dtype": DType.i32}, note="f32 NaN -0 Inf"),
            Sample([words], {"dtype": DType.f32}, note="i32 to f32"),
            Sample([f], {"dtype": DType.ui8}, note="narrower"),
            Sample([_ints(rng, 3, 2, lo=0, hi=255, dtype=np.uint8)], {"dtype": DType.f16}, note="wider"),
            Sample([np.arange(256, dtype=np.uint8).reshape(16, 16)], {"dtype": DType.f8e4m3fn}, note="ui8 to f8"),
            Sample([_f32(rng, 2, 3).astype(np.float64)], {"dtype": DType.ui32}, note="f64 to ui32"),
            Sample([_ints(rng, 2, 4, lo=-30000, hi=30000, dtype=np.int16)], {"dtype": DType.bf16}, note="i16 to bf16"),
            Sample([_ints(rng, 3, 2, dtype=np.int64)], {"dtype": DType.f64}, note="i64 to f64")]


def _s_dropout(rng):
    return [Sample([_f32(rng, 3, 4)], {"p": 0.1})]


def _s_reduce(rng):
    special = _SPECIAL_F.copy()
    return [Sample([_f32(rng, 2, 3, 4)], {"axes": (1, -1), "keepdims": True}),
            Sample([_f32(rng, 2, 3, 4)], {"axes": (), "keepdims": False}, note="all axes"),
            Sample([_ints(rng, 3, 4, lo=-5, hi=6, nonzero=True)], {"axes": (0,)}, note="i32"),
            Sample([special], {"axes": (1,)}, note="NaN-Inf")]


def _s_arg(rng):
    ties = np.array([[1.0, 3.0, 3.0, -2.0, -2.0], [0.5, 0.5, 0.5, 0.5, 0.5], [-1.0, 4.0, 2.0, 4.0, -1.0]],
                    dtype=np.float32)
    nan = np.array([[1.0, np.nan, 3.0], [np.inf, 2.0, -np.inf]], dtype=np.float32)
    return [Sample([_f32(rng, 3, 7)], {"axis": 1}),
            Sample([_f32(rng, 3, 4, 2)], {"axis": -2, "keepdims": True}),
            Sample([ties], {"axis": 1}, note="ties first"),
            Sample([ties], {"axis": 1, "select_last_index": True}, note="ties last"),
            Sample([_ints(rng, 4, 3, lo=-3, hi=3)], {"axis": 0}, note="i32"),
            Sample([nan], {"axis": 1}, note="NaN-Inf")]


def _s_scan(rng):
    return [Sample([_f32(rng, 3, 5)], {"axis": 1}),
            Sample([_f32(rng, 3, 5)], {"axis": 1, "exclusive": True}, note="exclusive"),
            Sample([_f32(rng, 4, 3)], {"axis": 0, "reverse": True}, note="reverse"),
            Sample([_f32(rng, 2, 3, 4)], {"axis": -1, "reverse": True, "exclusive": True}, note="reverse exclusive"),
            Sample([_ints(rng, 3, 4, lo=-3, hi=4, nonzero=True)], {"axis": 1, "exclusive": True}, note="i32"),
            Sample([_SPECIAL_F.copy()], {"axis": 1}, note="NaN-Inf")]


def _s_softmax(rng):
    masked = _f32(rng, 2, 5)
    masked[0, 1:3] = -np.inf
    return [Sample([_f32(rng, 2, 3, 5)], {"axis": -1}), Sample([_f32(rng, 2, 3, 5)], {"axis": 1}),
            Sample([masked], {"axis": -1}, note="-Inf entries")]


def _s_layer_norm(rng):
    return [Sample([_f32(rng, 2, 3, 8), _f32(rng, 8), _f32(rng, 8)], {"axis": -1, "eps": 1e-5}),
            Sample([_f32(rng, 2, 3, 4)], {"axis": 1}, note="no weight")]


def _s_rms_norm(rng):
    return [Sample([_f32(rng, 2, 3, 8), _f32(rng, 8)], {"axis": -1, "eps": 1e-6})]


def _s_matmul(rng):
    return [Sample([_f32(rng, 2, 1, 3, 5), _f32(rng, 4, 5, 6)]),
            Sample([_ints(rng, 3, 4, lo=-5, hi=5), _ints(rng, 4, 2, lo=-5, hi=5)], note="i32")]


def _s_contract(rng):
    return [Sample([_f32(rng, 2, 5, 3, 4), _f32(rng, 2, 6, 3, 4)],
                   {"lhs_batch": (0, 2), "rhs_batch": (0, 2), "lhs_contract": (3,), "rhs_contract": (3,)})]


def _s_conv2d(rng):
    return [Sample([_f32(rng, 2, 4, 9, 9), _f32(rng, 6, 2, 3, 3), _f32(rng, 6)],
                   {"strides": (2, 1), "padding": (1, 0, 1, 2), "dilations": (1, 2), "groups": 2}),
            Sample([_f32(rng, 1, 3, 5, 5), _f32(rng, 2, 3, 3, 3)], {}, note="no bias")]


def _s_conv(rng):
    return [Sample([_f32(rng, 2, 3, 9), _f32(rng, 4, 3, 3), _f32(rng, 4)], {"strides": (2,), "padding": (1, 2)},
                   note="1-d"),
            Sample([_f32(rng, 1, 4, 6, 5), _f32(rng, 6, 2, 3, 2)],
                   {"strides": (1, 2), "padding": (1, 0, 1, 1), "dilations": (2, 1), "groups": 2}, note="2-d groups"),
            Sample([_f32(rng, 1, 2, 4, 3), _f32(rng, 3, 2, 3, 3)],
                   {"lhs_dilation": (2, 2), "padding": (2, 2, 2, 2)}, note="transposed"),
            Sample([_f32(rng, 1, 2, 7, 7), _f32(rng, 2, 2, 2, 2)], {"padding": (-1, 0, 1, -2)},
                   note="negative padding"),
            Sample([_f32(rng, 1, 2, 3, 4, 4), _f32(rng, 2, 2, 2, 2, 3), _f32(rng, 2)],
                   {"strides": (1, 2, 1), "padding": (0, 1, 1, 1, 0, 1)}, note="3-d")]


def _s_reshape(rng):
    return [Sample([_f32(rng, 2, 3, 4)], {"shape": (6, 4)})]


def _s_transpose(rng):
    return [Sample([_f32(rng, 2, 3, 4)], {"perm": (2, 0, 1)})]


def _s_broadcast(rng):
    return [Sample([_f32(rng, 3, 1)], {"shape": (2, 3, 4)})]


def _s_slice(rng):
    return [Sample([_f32(rng, 5, 6)], {"start": (1, 0), "limit": (5, 6), "step": (2, 3)}),
            Sample([_f32(rng, 4, 3)], {"start": (2, 0), "limit": (2, 3)}, note="empty")]


def _s_concat(rng):
    return [Sample([_f32(rng, 2, 3), _f32(rng, 2, 1), _f32(rng, 2, 2)], {"axis": 1}),
            Sample([_f32(rng, 2, 3), _f32(rng, 0, 3)], {"axis": 0}, note="empty piece")]


def _s_split(rng):
    return [Sample([_f32(rng, 2, 7)], {"axis": 1, "sizes": (3, 4)})]


def _s_gather(rng):
    edge = np.array([[0, 9, -1], [-10, 5, -3]], dtype=np.int64)
    return [Sample([_f32(rng, 10, 4), _ints(rng, 2, 3, lo=0, hi=10, dtype=np.int64)], {"axis": 0}),
            Sample([_f32(rng, 3, 5), _ints(rng, 4, lo=0, hi=5)], {"axis": 1}, note="axis 1 i32"),
            Sample([_f32(rng, 10, 4), edge], {"axis": 0}, note="negative and boundary indices")]


def _s_gather_elements(rng):
    edge = np.array([[0, -1, 4], [-5, 2, 3]], dtype=np.int64)
    return [Sample([_f32(rng, 3, 5), _ints(rng, 3, 4, lo=0, hi=5, dtype=np.int64)], {"axis": 1}),
            Sample([_f32(rng, 4, 3), _ints(rng, 2, 3, lo=-4, hi=4)], {"axis": 0}, note="negative indices"),
            Sample([_f32(rng, 2, 5), edge], {"axis": -1}, note="boundary indices")]


def _s_gather_nd(rng):
    idx = np.array([[0, -1], [2, 1], [-3, 0]], dtype=np.int64)
    return [Sample([_f32(rng, 3, 4, 2), idx], {}, note="negative indices"),
            Sample([_f32(rng, 3, 4), _ints(rng, 2, 1, lo=-3, hi=3, dtype=np.int64)], {}, note="k=1 rows"),
            Sample([_f32(rng, 2, 3, 4), np.array([[[1], [-1]], [[0], [2]]], np.int64)], {"batch_dims": 1},
                   note="batch_dims 1")]


def _s_scatter_elements(rng):
    dup = np.array([[1, 1, 0], [2, 2, -1]], dtype=np.int64)
    return [Sample([_f32(rng, 3, 4), np.array([[0, 2, -1], [3, 1, 0]], np.int64), _f32(rng, 2, 3)],
                   {"axis": 1}, note="negative indices"),
            Sample([_f32(rng, 3, 4), dup, _f32(rng, 2, 3)], {"axis": 1}, note="duplicates last wins"),
            Sample([_f32(rng, 3, 4), dup, _f32(rng, 2, 3)], {"axis": 1, "reduction": "add"}, note="add"),
            Sample([_f32(rng, 3, 4), dup, _f32(rng, 2, 3)], {"axis": 1, "reduction": "mul"}, note="mul"),
            Sample([_f32(rng, 3, 4), dup, _f32(rng, 2, 3)], {"axis": 1, "reduction": "max"}, note="max"),
            Sample([_f32(rng, 4, 3), _ints(rng, 2, 3, lo=-4, hi=4), _f32(rng, 2, 3)],
                   {"axis": 0, "reduction": "min"}, note="min axis 0")]


def _s_scatter_nd(rng):
    idx = np.array([[0], [-1], [2]], dtype=np.int64)
    dup = np.array([[1, 0], [1, 0], [-1, 2]], dtype=np.int64)
    return [Sample([_f32(rng, 4, 3), idx, _f32(rng, 3, 3)], {}, note="rows negative indices"),
            Sample([_f32(rng, 3, 4), dup, _f32(rng, 3)], {}, note="duplicates last wins"),
            Sample([_f32(rng, 3, 4), dup, _f32(rng, 3)], {"reduction": "add"}, note="add"),
            Sample([_f32(rng, 3, 4), dup, _f32(rng, 3)], {"reduction": "mul"}, note="mul"),
            Sample([_f32(rng, 3, 4), dup, _f32(rng, 3)], {"reduction": "max"}, note="max"),
            Sample([_f32(rng, 3, 4), dup, _f32(rng, 3)], {"reduction": "min"}, note="min")]


def _s_dynamic_slice(rng):
    return [Sample([_f32(rng, 5, 6), np.array([1, 2], np.int64)], {"sizes": (3, 2)}),
            Sample([_f32(rng, 5, 6), np.array([4, -3], np.int32)], {"sizes": (3, 4)}, note="clamped starts")]


def _s_dynamic_update_slice(rng):
    return [Sample([_f32(rng, 5, 6), _f32(rng, 2, 3), np.array([1, 2], np.int64)]),
            Sample([_f32(rng, 5, 6), _f32(rng, 3, 4), np.array([9, -2], np.int32)], note="clamped starts")]


def _s_reverse(rng):
    return [Sample([_f32(rng, 3, 4, 2)], {"axes": (0, -1)}), Sample([_ints(rng, 5)], {"axes": (0,)}, note="i32")]


def _s_sort(rng):
    ties = np.array([[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [np.nan, 1.0, -np.inf, np.nan, np.inf, -0.0]], np.float32)
    return [Sample([_f32(rng, 3, 5)], {}), Sample([_f32(rng, 4, 3)], {"axis": 0, "descending": True}),
            Sample([ties], {"axis": -1}, note="ties NaN ascending"),
            Sample([ties], {"axis": -1, "descending": True}, note="ties NaN descending"),
            Sample([_ints(rng, 2, 6, lo=-3, hi=3)], {"descending": True}, note="i32 ties")]


def _s_topk(rng):
    ties = np.array([[3.0, 1.0, 3.0, 2.0, 1.0, 3.0], [np.nan, 1.0, -np.inf, np.nan, np.inf, 2.0]], np.float32)
    return [Sample([_f32(rng, 3, 6)], {"k": 3}), Sample([_f32(rng, 5, 3)], {"k": 2, "axis": 0, "largest": False}),
            Sample([ties], {"k": 4}, note="ties NaN largest"),
            Sample([ties], {"k": 3, "largest": False}, note="ties NaN smallest"),
            Sample([_ints(rng, 2, 6, lo=-3, hi=3)], {"k": 6}, note="i32 ties all")]


def _s_reduce_window(rng):
    x = _f32(rng, 1, 2, 6, 5)
    return [Sample([x], {"kind": "max", "window": (1, 1, 3, 3), "strides": (1, 1, 2, 2),
                         "pads": (0, 0, 1, 1, 0, 0, 1, 1)}, note="max pool padded"),
            Sample([x], {"kind": "sum", "window": (1, 1, 2, 2), "dilations": (1, 1, 2, 1)}, note="sum dilated"),
            Sample([_f32(rng, 2, 7)], {"kind": "min", "window": (1, 3), "strides": (1, 2), "pads": (0, 2, 0, 1)},
                   note="min 1-d"),
            Sample([_ints(rng, 1, 5, 4, lo=-9, hi=9)], {"kind": "max", "window": (1, 2, 2), "pads": (0, 1, 0, 0, 0, 1)},
                   note="i32"),
            Sample([_SPECIAL_F.copy()], {"kind": "max", "window": (2, 2)}, note="NaN-Inf")]


def _s_iota(rng):
    return [Sample([], {"shape": (3, 4), "axis": 1, "dtype": DType.i64}),
            Sample([], {"shape": (5,), "axis": 0, "dtype": DType.f32}, note="f32")]


def _s_dim_value(rng):
    return [Sample([], {"dim": (7,), "dtype": DType.f32})]


def _s_pad(rng):
    return [Sample([_f32(rng, 2, 3)], {"pads": (1, 0, 2, 3), "value": 0.5})]


def _s_constant(rng):
    return [Sample([], {"value": Dense(_f32(rng, 2, 3))}),
            Sample([], {"value": Dense(np.array([1, 2, 250], np.uint8))}, note="ui8")]


def _s_attention(rng):
    mask = np.ones((1, 1, 4, 5), dtype=bool)
    mask[0, 0, 1] = False  # query row 1 sees no key: the reference gives zeros
    mask[0, 0, 2, 3:] = False
    return [Sample([_f32(rng, 2, 4, 5, 8), _f32(rng, 2, 2, 7, 8), _f32(rng, 2, 2, 7, 8), _f32(rng, 1, 1, 5, 7)],
                   {"scale": 0.3}, slots=(0, 1, 2, None, 3), note="bias GQA"),
            Sample([_f32(rng, 1, 2, 6, 4), _f32(rng, 1, 2, 6, 4), _f32(rng, 1, 2, 6, 4)],
                   {"scale": 0.5, "causal": True}, note="causal"),
            Sample([_f32(rng, 1, 2, 4, 4), _f32(rng, 1, 2, 5, 4), _f32(rng, 1, 2, 5, 4), mask],
                   {"scale": 0.5}, note="fully masked row"),
            # scores up to |scale*qk| ~ 30, well past the cap of 5; row 1 keeps no key
            Sample([_f32(rng, 1, 2, 4, 4) * 4, _f32(rng, 1, 2, 5, 4) * 4, _f32(rng, 1, 2, 5, 4), mask],
                   {"scale": 0.5, "softcap": 5.0}, note="softcap")]


def _fused_body(b: Builder, args: list[Value]) -> list[Value]:
    x = args[0]
    body = Graph([x.type])
    bb = Builder.at_end(body)
    bb.create("ik.yield", [bb.exp(bb.neg(body.args[0]))], result_types=[])
    return b.fused([x], body, "elementwise")


def _s_fused(rng):
    return [Sample([_f32(rng, 3, 4)], build=_fused_body)]


def _s_return(rng):
    return [Sample([_f32(rng, 3, 4), _ints(rng, 2)], build=lambda b, args: args)]


_SPECIAL: dict[str, Callable[[np.random.Generator], list[Sample]]] = {
    "ik.not": _s_not, "ik.gelu": _s_gelu, "ik.where": _s_where, "ik.cast": _s_cast, "ik.dropout": _s_dropout,
    "ik.bitcast": _s_bitcast,
    **{f"ik.reduce_{k}": _s_reduce for k in ("sum", "mean", "max", "min", "prod")},
    "ik.argmax": _s_arg, "ik.argmin": _s_arg,
    **{f"ik.{k}": _s_scan for k in ("cumsum", "cumprod", "cummax", "cummin")},
    "ik.softmax": _s_softmax, "ik.log_softmax": _s_softmax, "ik.layer_norm": _s_layer_norm,
    "ik.rms_norm": _s_rms_norm, "ik.matmul": _s_matmul, "ik.contract": _s_contract, "ik.conv2d": _s_conv2d,
    "ik.conv": _s_conv, "ik.reshape": _s_reshape, "ik.transpose": _s_transpose, "ik.broadcast": _s_broadcast,
    "ik.slice": _s_slice, "ik.concat": _s_concat, "ik.split": _s_split, "ik.gather": _s_gather,
    "ik.gather_elements": _s_gather_elements, "ik.gather_nd": _s_gather_nd,
    "ik.scatter_elements": _s_scatter_elements, "ik.scatter_nd": _s_scatter_nd,
    "ik.dynamic_slice": _s_dynamic_slice, "ik.dynamic_update_slice": _s_dynamic_update_slice,
    "ik.reverse": _s_reverse, "ik.sort": _s_sort, "ik.topk": _s_topk, "ik.reduce_window": _s_reduce_window,
    "ik.iota": _s_iota, "ik.dim_value": _s_dim_value, "ik.pad": _s_pad, "ik.constant": _s_constant,
    "ik.attention": _s_attention, "ik.fused": _s_fused, "ik.yield": _s_fused, "func.return": _s_return,
}


def _s_cache_attention(rng):
    """KV-cache attention: a scalar position, per-row positions (0 and T-S), GQA, an extra
    mask that leaves one query row no key, and a position past the end (clamped to T-S)."""
    mask = np.ones((1, 1, 2, 6), dtype=bool)
    mask[0, 0, 0, :] = False
    return [Sample([_f32(rng, 1, 4, 2, 8), _f32(rng, 1, 2, 2, 8), _f32(rng, 1, 2, 2, 8), _f32(rng, 1, 2, 6, 8),
                    _f32(rng, 1, 2, 6, 8), np.array(3, np.int64)], {"scale": 0.35}, note="GQA"),
            Sample([_f32(rng, 2, 2, 1, 4), _f32(rng, 2, 2, 1, 4), _f32(rng, 2, 2, 1, 4), _f32(rng, 2, 2, 5, 4),
                    _f32(rng, 2, 2, 5, 4), np.array([0, 4], np.int64)], {"scale": 0.5}, note="per-row pos 0 and T-S"),
            Sample([_f32(rng, 1, 2, 2, 4), _f32(rng, 1, 2, 2, 4), _f32(rng, 1, 2, 2, 4), _f32(rng, 1, 2, 6, 4),
                    _f32(rng, 1, 2, 6, 4), np.array(9, np.int32), mask], {"scale": 0.5},
                   note="masked row, pos clamped")]


_SPECIAL["ik.cache_attention"] = _s_cache_attention


__all__ = ["Sample", "all_samples", "one_op_module", "sample_id", "samples"]
