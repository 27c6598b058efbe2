"""Window reductions and N-d convolution (pooling, strided and transposed convolutions).

Design note: both ops follow XLA's ``reduce_window`` and ``conv_general_dilated``
with a fixed layout, so every frontend spelling (ONNX MaxPool/AveragePool/Conv/
ConvTranspose, torch pooling and convolution, lax.reduce_window and conv) is a
choice of attributes, not a new op.  Absent ``strides`` / ``dilations`` mean 1s and
absent ``pads`` / ``padding`` mean 0s (an empty tuple is the same); use
:func:`window_attrs` and :func:`conv_attrs` to read them with those defaults filled
in.  Padding runs all befores, then all afters, like ``ik.pad``.  ``ik.conv`` allows
negative padding (a crop, which transposed convolution with large pads needs) and
input (lhs) dilation; ``ik.conv2d`` stays the plain 2-D op the fusion and layout
passes know.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from irkit.ir.ops import (
    AttrSpec,
    Cost,
    OpDef,
    OpError,
    _f,
    _nbytes,
    _numel,
    _out,
    register_op,
    scan_identity,
)
from irkit.ir.types import Dim, TensorType, shape_str

WINDOW_KINDS = ("sum", "max", "min")


def _fill(v: tuple[int, ...] | None, n: int, value: int) -> tuple[int, ...]:
    return tuple(v) if v else (value,) * n


def window_attrs(a: Mapping[str, Any], rank: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...],
                                                            tuple[int, ...]]:
    """(window, strides, pads, dilations) of an ``ik.reduce_window`` with defaults filled in."""
    return (tuple(a["window"]), _fill(a.get("strides"), rank, 1), _fill(a.get("pads"), 2 * rank, 0),
            _fill(a.get("dilations"), rank, 1))


def conv_attrs(a: Mapping[str, Any], spatial: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...],
                                                            tuple[int, ...], int]:
    """(strides, padding, dilations, lhs_dilation, groups) of an ``ik.conv`` with defaults filled in."""
    return (_fill(a.get("strides"), spatial, 1), _fill(a.get("padding"), 2 * spatial, 0),
            _fill(a.get("dilations"), spatial, 1), _fill(a.get("lhs_dilation"), spatial, 1), a.get("groups", 1))


def _window_out(d: Dim, before: int, after: int, w: int, stride: int, dil: int, what: str) -> Dim:
    if not isinstance(d, int):
        raise OpError(f"{what}: windowed dims must be static, got {d}")
    span = d + before + after - dil * (w - 1)
    if span < 1:
        raise OpError(f"{what}: window {w} (dilation {dil}) does not fit the padded size {d + before + after}")
    return (span - 1) // stride + 1


def _check_lengths(what: str, **named: tuple[tuple[int, ...], int]) -> None:
    for name, (v, n) in named.items():
        if len(v) != n:
            raise OpError(f"{what}: {name} needs {n} entries, got {len(v)}")


# ---------------------------------------------------------------------------
# reduce_window


def _reduce_window_infer(ts, a):
    x = ts[0]
    if x.dtype.is_bool:
        raise OpError("operand must be numeric, got i1")
    r = x.rank
    w, s, p, dl = window_attrs(a, r)
    _check_lengths("reduce_window", window=(w, r), strides=(s, r), pads=(p, 2 * r), dilations=(dl, r))
    if any(v < 1 for v in w + s + dl):
        raise OpError("reduce_window: window, strides and dilations must be >= 1")
    if any(v < 0 for v in p):
        raise OpError("reduce_window: pads must be >= 0")
    shape = []
    for i, d in enumerate(x.shape):
        if w[i] == 1 and s[i] == 1 and p[i] == 0 and p[i + r] == 0:
            shape.append(d)  # an untouched (batch, channel) dim may stay symbolic
        else:
            shape.append(_window_out(d, p[i], p[i + r], w[i], s[i], dl[i], "reduce_window"))
    return [TensorType(tuple(shape), x.dtype)]


def _window_slices(out_shape: Sequence[int], window: Sequence[int], strides: Sequence[int],
                   dilations: Sequence[int]) -> Any:
    """For each offset in the window, the strided slice of the padded input it reads."""
    for off in itertools.product(*(range(w) for w in window)):
        yield tuple(slice(k * dl, k * dl + st * (o - 1) + 1, st) if o else slice(0, 0)
                    for k, dl, st, o in zip(off, dilations, strides, out_shape))


def _reduce_window_ref(xs, a, ctx):
    x = _f(xs[0])
    dt = ctx.out_types[0].dtype
    kind = a["kind"]
    r = x.ndim
    w, s, p, dl = window_attrs(a, r)
    if x.dtype.kind in "iu" and kind == "sum":
        x = x.astype(np.uint64 if x.dtype.kind == "u" else np.int64)
    ident = scan_identity(kind, dt)
    xp = np.pad(x, [(p[i], p[i + r]) for i in range(r)], constant_values=ident)
    out_shape = ctx.out_shapes[0]
    fn = {"sum": np.add, "max": np.maximum, "min": np.minimum}[kind]
    acc = np.full(out_shape, ident, dtype=xp.dtype)
    with np.errstate(all="ignore"):
        for sl in _window_slices(out_shape, w, s, dl):
            acc = fn(acc, xp[sl])
    return [_out(acc, dt)]


def _reduce_window_cost(ins, outs, dts, a):
    w = a["window"]
    return Cost(float(_numel(outs[0]) * _numel(w)), _nbytes(ins, dts[:1]), _nbytes(outs, dts[1:]))


register_op(OpDef("ik.reduce_window", "sum/max/min over a sliding window on every dim (pooling); padding holds "
                  "the reduction's identity", ("x",), _reduce_window_infer, _reduce_window_ref, _reduce_window_cost,
                  attrs={"kind": AttrSpec("str", choices=WINDOW_KINDS),
                         "window": AttrSpec("ints"), "strides": AttrSpec("ints", ()), "pads": AttrSpec("ints", ()),
                         "dilations": AttrSpec("ints", ())},
                  traits=frozenset({"pure", "reduction", "reorders", "window"})))


# ---------------------------------------------------------------------------
# conv


def _conv_infer(ts, a):
    x, w = ts[0], ts[1]
    if x.dtype != w.dtype or (len(ts) > 2 and ts[2].dtype != x.dtype):
        raise OpError("operands must have one element type, got " + ", ".join(str(t.dtype) for t in ts))
    if x.dtype.is_bool:
        raise OpError("operands must be numeric, got i1")
    n = x.rank - 2
    if not 1 <= n <= 3 or w.rank != x.rank:
        raise OpError(f"conv wants input N C spatial... and weight O I spatial... with 1 to 3 spatial dims, "
                      f"got input {shape_str(x.shape)} and weight {shape_str(w.shape)}")
    s, p, dl, ld, g = conv_attrs(a, n)
    _check_lengths("conv", strides=(s, n), padding=(p, 2 * n), dilations=(dl, n), lhs_dilation=(ld, n))
    if any(v < 1 for v in s + dl + ld) or g < 1:
        raise OpError("conv: strides, dilations, lhs_dilation and groups must be >= 1")
    cin, wc, o = x.shape[1], w.shape[1], w.shape[0]
    if isinstance(cin, int) and isinstance(wc, int) and cin != wc * g:
        raise OpError(f"input channels {cin} != weight in-channels {wc} x groups {g}")
    if isinstance(o, int) and o % g:
        raise OpError(f"output channels {o} are not a multiple of groups {g}")
    if len(ts) > 2 and ts[2].shape != (o,):
        raise OpError(f"bias must have shape [{o}], got {shape_str(ts[2].shape)}")
    spatial = []
    for i in range(n):
        d, k = x.shape[2 + i], w.shape[2 + i]
        if not isinstance(d, int) or not isinstance(k, int):
            raise OpError("conv spatial dims of input and weight must be static")
        dd = (d - 1) * ld[i] + 1 if d else 0
        spatial.append(_window_out(dd, p[i], p[i + n], k, s[i], dl[i], "conv"))
    return [TensorType((x.shape[0], o) + tuple(spatial), x.dtype)]


def _conv_ref(xs, a, ctx):
    x, w = _f(xs[0]), _f(xs[1])
    n = x.ndim - 2
    s, p, dl, ld, g = conv_attrs(a, n)
    acc = np.float64 if x.dtype == np.float64 else (np.float32 if x.dtype.kind == "f" else np.int64)
    x = x.astype(acc)
    if any(v != 1 for v in ld):
        dil = np.zeros(x.shape[:2] + tuple((d - 1) * f + 1 if d else 0 for d, f in zip(x.shape[2:], ld)), dtype=acc)
        dil[(slice(None), slice(None)) + tuple(slice(None, None, f) for f in ld)] = x
        x = dil
    # Negative padding crops; positive padding adds zeros.
    crop = tuple(slice(max(-p[i], 0), x.shape[2 + i] - max(-p[i + n], 0)) for i in range(n))
    x = x[(slice(None), slice(None)) + crop]
    x = np.pad(x, [(0, 0), (0, 0)] + [(max(p[i], 0), max(p[i + n], 0)) for i in range(n)])
    out_shape = ctx.out_shapes[0]
    o, cg = w.shape[0], w.shape[1]
    og = o // g
    out = np.zeros(out_shape, dtype=acc)
    letters = "defgh"[:n]
    for gi in range(g):
        xg = x[:, gi * cg:(gi + 1) * cg]
        wg = w[gi * og:(gi + 1) * og].astype(acc)
        for off in itertools.product(*(range(k) for k in w.shape[2:])):
            sl = tuple(slice(k * d, k * d + st * (m - 1) + 1, st) if m else slice(0, 0)
                       for k, d, st, m in zip(off, dl, s, out_shape[2:]))
            patch = xg[(slice(None), slice(None)) + sl]
            out[:, gi * og:(gi + 1) * og] += np.einsum(f"nc{letters},oc->no{letters}", patch,
                                                       wg[(slice(None), slice(None)) + off])
    if len(xs) > 2:
        out += _f(xs[2]).astype(acc).reshape((1, -1) + (1,) * n)
    return [_out(out, ctx.out_types[0].dtype)]


def _conv_cost(ins, outs, dts, a):
    w = ins[1]
    return Cost(2.0 * _numel(outs[0]) * _numel(w[1:]), _nbytes(ins, dts[:len(ins)]), _nbytes(outs, dts[len(ins):]))


register_op(OpDef("ik.conv", "N-d convolution (1-3 spatial dims), N C spatial input, O I/groups spatial weight, "
                  "with input (lhs) dilation for transposed convolution", ("x", "weight", "bias?"),
                  _conv_infer, _conv_ref, _conv_cost,
                  attrs={"strides": AttrSpec("ints", ()), "padding": AttrSpec("ints", ()),
                         "dilations": AttrSpec("ints", ()), "lhs_dilation": AttrSpec("ints", ()),
                         "groups": AttrSpec("int", 1)},
                  traits=frozenset({"pure", "contraction", "reorders"})))


__all__ = ["WINDOW_KINDS", "conv_attrs", "window_attrs"]
