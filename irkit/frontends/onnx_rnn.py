"""ONNX RNN, GRU and LSTM, unrolled over their (static) sequence length.

Design note: irkit has no loop op, so a recurrent layer becomes one matmul per
step per direction (the input projection of all steps is one matmul up
front).  The sequence length must be static; ``sequence_lens`` must be known at
import (steps past a batch entry's length output zeros and keep its state, as
ONNX defines).  Gate orders and formulas are the ONNX spec's: LSTM ``iofc``
with peepholes ``iof``, GRU ``zrh`` with ``linear_before_reset``; activations
come from the ``activations`` attribute (with ``activation_alpha/beta``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from irkit.frontends.common import FrontendError
from irkit.frontends.onnx_ops import Emitter, Node, OnnxValue, Unsupported, converter
from irkit.ir.core import Value
from irkit.ir.types import DType

_DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _activation(cx: Emitter, node: Node, name: str, alpha: float | None, beta: float | None,
                dt: DType) -> Callable[[Value], Value]:
    s = lambda v: cx.scalar(v, dt)
    n = name.lower()
    if n == "tanh":
        return lambda x: cx.op("ik.tanh", x)
    if n == "sigmoid":
        return lambda x: cx.op("ik.sigmoid", x)
    if n == "relu":
        return lambda x: cx.op("ik.relu", x)
    if n == "affine":
        return lambda x: cx.op("ik.add", cx.op("ik.mul", x, s(alpha if alpha is not None else 1.0)),
                               s(beta or 0.0))
    if n == "leakyrelu":
        a = alpha if alpha is not None else 0.01
        return lambda x: cx.op("ik.where", cx.op("ik.lt", x, s(0.0)), cx.op("ik.mul", x, s(a)), x)
    if n == "thresholdedrelu":
        a = alpha if alpha is not None else 1.0
        return lambda x: cx.op("ik.where", cx.op("ik.gt", x, s(a)), x, s(0.0))
    if n == "scaledtanh":
        return lambda x: cx.op("ik.mul", cx.op("ik.tanh", cx.op("ik.mul", x, s(beta if beta is not None else 1.0))),
                               s(alpha if alpha is not None else 1.0))
    if n == "hardsigmoid":
        a, b = (alpha if alpha is not None else 0.2), (beta if beta is not None else 0.5)
        return lambda x: cx.op("ik.min", cx.op("ik.max", cx.op("ik.add", cx.op("ik.mul", x, s(a)), s(b)), s(0.0)),
                               s(1.0))
    if n == "elu":
        a = alpha if alpha is not None else 1.0
        return lambda x: cx.op("ik.where", cx.op("ik.lt", x, s(0.0)),
                               cx.op("ik.mul", cx.op("ik.sub", cx.op("ik.exp", x), s(1.0)), s(a)), x)
    if n == "softsign":
        return lambda x: cx.op("ik.div", x, cx.op("ik.add", cx.op("ik.abs", x), s(1.0)))
    if n == "softplus":
        return lambda x: cx.op("ik.log", cx.op("ik.add", cx.op("ik.exp", x), s(1.0)))
    raise FrontendError(f"node '{node.name}' ({node.op_type}): unknown activation '{name}'")


def _slice(cx: Emitter, v: Value, axis: int, lo: int, hi: int) -> Value:
    shape = v.type.shape
    start = [0] * len(shape)
    limit = list(shape)
    start[axis], limit[axis] = lo, hi
    return cx.op("ik.slice", v, start=tuple(start), limit=tuple(limit))


@converter("RNN", "GRU", "LSTM")
def _recurrent(cx: Emitter, node: Node) -> list[OnnxValue | None]:
    kind = node.op_type
    x, w, r = node.req(0, "X"), node.req(1, "W"), node.req(2, "R")
    b, seq_t, h0_t = node.input(3), node.input(4), node.input(5)
    c0_t = node.input(6) if kind == "LSTM" else None
    p_t = node.input(7) if kind == "LSTM" else None
    dt = x.dtype
    layout = int(node.attr("layout", 0))
    xv = cx.ir(x)
    if layout:
        xv = cx.op("ik.transpose", xv, perm=(1, 0, 2))
    seq, batch, _ = xv.type.shape
    if not isinstance(seq, int):
        raise Unsupported(f"{kind} over a dynamic sequence length (irkit unrolls the recurrence)")
    hidden = int(node.attr("hidden_size", w.shape[1] // _GATES[kind] if isinstance(w.shape[1], int) else 0))
    direction = node.attr("direction", "forward")
    dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    if node.attr("input_forget", 0):
        raise Unsupported("LSTM with input_forget=1")
    if not isinstance(batch, int):
        raise Unsupported(f"{kind} over a dynamic batch")
    lens = None
    if seq_t is not None:
        lens = cx.ints(seq_t, node, "sequence_lens")
        if all(n == seq for n in lens):
            lens = None
    names = [str(a) for a in node.attr("activations", [])] or None
    alphas = list(node.attr("activation_alpha", []))
    betas = list(node.attr("activation_beta", []))
    n_act = len(_DEFAULTS[kind])
    clip = node.attr("clip")
    g = _GATES[kind]
    lbr = bool(node.attr("linear_before_reset", 0))

    def state0(t: OnnxValue | None, d: int) -> Value:
        if t is None:
            return cx.op("ik.broadcast", cx.scalar(0.0, dt), shape=(batch, hidden))
        v = cx.ir(t)
        if layout:
            v = cx.op("ik.transpose", v, perm=(1, 0, 2))
        return cx.op("ik.reshape", _slice(cx, v, 0, d, d + 1), shape=(batch, hidden))

    ys, hs, cs = [], [], []
    for d, dname in enumerate(dirs):
        acts_names = names[d * n_act:(d + 1) * n_act] if names else _DEFAULTS[kind]
        acts = [_activation(cx, node, a, alphas[d * n_act + i] if len(alphas) > d * n_act + i else None,
                            betas[d * n_act + i] if len(betas) > d * n_act + i else None, dt)
                for i, a in enumerate(acts_names)]
        wd = cx.op("ik.reshape", _slice(cx, cx.ir(w), 0, d, d + 1), shape=(g * hidden, w.shape[2]))
        rd = cx.op("ik.reshape", _slice(cx, cx.ir(r), 0, d, d + 1), shape=(g * hidden, hidden))
        wt = cx.op("ik.transpose", wd, perm=(1, 0))
        rt = cx.op("ik.transpose", rd, perm=(1, 0))
        # Input projection for all steps at once: [seq*batch, g*hidden].
        xp = cx.op("ik.matmul", cx.op("ik.reshape", xv, shape=(seq * batch, x.shape[2])), wt)
        wb = rb = None
        if b is not None:
            bd = cx.op("ik.reshape", _slice(cx, cx.ir(b), 0, d, d + 1), shape=(2 * g * hidden,))
            wb, rb = _slice(cx, bd, 0, 0, g * hidden), _slice(cx, bd, 0, g * hidden, 2 * g * hidden)
            xp = cx.op("ik.add", xp, wb)
        xp = cx.op("ik.reshape", xp, shape=(seq, batch, g * hidden))
        peep = None
        if p_t is not None:
            peep = cx.op("ik.reshape", _slice(cx, cx.ir(p_t), 0, d, d + 1), shape=(3 * hidden,))
        h = state0(h0_t, d)
        c = state0(c0_t, d) if kind == "LSTM" else None
        outs: list[Value | None] = [None] * seq
        steps = range(seq) if dname == "forward" else range(seq - 1, -1, -1)
        for t in steps:
            xt = cx.op("ik.reshape", _slice(cx, xp, 0, t, t + 1), shape=(batch, g * hidden))
            hr = cx.op("ik.matmul", h, rt)
            if rb is not None and kind != "GRU":
                hr = cx.op("ik.add", hr, rb)

            def gate(v: Value, i: int) -> Value:
                return _slice(cx, v, 1, i * hidden, (i + 1) * hidden)

            def clipped(v: Value) -> Value:
                if clip is None:
                    return v
                return cx.op("ik.min", cx.op("ik.max", v, cx.scalar(-float(clip), dt)), cx.scalar(float(clip), dt))

            if kind == "RNN":
                h_new = acts[0](clipped(cx.op("ik.add", xt, hr)))
                c_new = None
            elif kind == "GRU":
                rbv = cx.op("ik.reshape", rb, shape=(1, g * hidden)) if rb is not None else None
                hz = cx.op("ik.add", gate(hr, 0), gate(rbv, 0)) if rbv is not None else gate(hr, 0)
                hrr = cx.op("ik.add", gate(hr, 1), gate(rbv, 1)) if rbv is not None else gate(hr, 1)
                z = acts[0](clipped(cx.op("ik.add", gate(xt, 0), hz)))
                rr = acts[0](clipped(cx.op("ik.add", gate(xt, 1), hrr)))
                rh = _slice(cx, rd, 0, 2 * hidden, 3 * hidden)
                rh_t = cx.op("ik.transpose", rh, perm=(1, 0))
                if lbr:
                    hh = cx.op("ik.matmul", h, rh_t)
                    if rbv is not None:
                        hh = cx.op("ik.add", hh, gate(rbv, 2))
                    pre = cx.op("ik.add", gate(xt, 2), cx.op("ik.mul", rr, hh))
                else:
                    hh = cx.op("ik.matmul", cx.op("ik.mul", rr, h), rh_t)
                    if rbv is not None:
                        hh = cx.op("ik.add", hh, gate(rbv, 2))
                    pre = cx.op("ik.add", gate(xt, 2), hh)
                hc = acts[1](clipped(pre))
                one_m_z = cx.op("ik.sub", cx.scalar(1.0, dt), z)
                h_new = cx.op("ik.add", cx.op("ik.mul", one_m_z, hc), cx.op("ik.mul", z, h))
                c_new = None
            else:
                pre = cx.op("ik.add", xt, hr)
                gi, go, gf, gc = (gate(pre, i) for i in range(4))
                if peep is not None:
                    gi = cx.op("ik.add", gi, cx.op("ik.mul", _slice(cx, peep, 0, 0, hidden), c))
                    gf = cx.op("ik.add", gf, cx.op("ik.mul", _slice(cx, peep, 0, 2 * hidden, 3 * hidden), c))
                i_ = acts[0](clipped(gi))
                f_ = acts[0](clipped(gf))
                c_hat = acts[1](clipped(gc))
                c_new = cx.op("ik.add", cx.op("ik.mul", f_, c), cx.op("ik.mul", i_, c_hat))
                if peep is not None:
                    go = cx.op("ik.add", go, cx.op("ik.mul", _slice(cx, peep, 0, hidden, 2 * hidden), c_new))
                o_ = acts[0](clipped(go))
                h_new = cx.op("ik.mul", o_, acts[2](c_new))
            if lens is not None:
                # Past a batch entry's length: output 0, keep the state.
                live = cx.constant((np.array(lens) > t).reshape(batch, 1), DType.bool)
                outs[t] = cx.op("ik.where", live, h_new, cx.scalar(0.0, dt))
                h = cx.op("ik.where", live, h_new, h)
                if c_new is not None:
                    c = cx.op("ik.where", live, c_new, c)
            else:
                outs[t] = h_new
                h = h_new
                c = c_new
        y = cx.op("ik.concat", *[cx.op("ik.reshape", o, shape=(1, 1, batch, hidden)) for o in outs], axis=0)
        ys.append(y)
        hs.append(cx.op("ik.reshape", h, shape=(1, batch, hidden)))
        if c is not None:
            cs.append(cx.op("ik.reshape", c, shape=(1, batch, hidden)))
    yv = ys[0] if len(ys) == 1 else cx.op("ik.concat", *ys, axis=1)
    hv = hs[0] if len(hs) == 1 else cx.op("ik.concat", *hs, axis=0)
    cv = (cs[0] if len(cs) == 1 else cx.op("ik.concat", *cs, axis=0)) if cs else None
    if layout:
        yv = cx.op("ik.transpose", yv, perm=(2, 0, 1, 3))
        hv = cx.op("ik.transpose", hv, perm=(1, 0, 2))
        cv = cx.op("ik.transpose", cv, perm=(1, 0, 2)) if cv is not None else None
    outs_ot: list[OnnxValue | None] = [OnnxValue.of(yv), OnnxValue.of(hv)]
    if kind == "LSTM":
        outs_ot.append(OnnxValue.of(cv) if cv is not None else None)
    return outs_ot[:max(node.n_outputs, 1)]


__all__: list[str] = []
