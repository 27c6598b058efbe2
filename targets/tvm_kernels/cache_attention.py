"""``ik.cache_attention`` on the TVM targets: the KV-cache rows written in place, then attention.

The op is lowered through its decomposition (:func:`irkit.ir.ops_cache.decompose`):
each cache write is a ``dynamic_update_slice`` at ``[0, 0, p, 0]``, then the prefix
keep-mask and one ``ik.attention`` over the updated caches (the online-softmax
kernel of :mod:`.attention`).  On CPU, when a cache operand is an entry argument
that the function's ``aliases`` attribute pairs with the op's updated-cache result
as an output, and nothing reads the argument after the op, the write is the
in-place kernel :func:`.movement.dynamic_update_slice_inplace` called with Relax's
``call_tir_inplace``: a decode step writes ``S`` rows, not a copy of the cache.
Otherwise (tvm-cuda, or a cache read elsewhere) the functional update is used.

The attention reads only the valid prefix on CPU (float32, no extra mask, at most
``PREFIX_MAX_QUERIES`` new positions: decode steps and short chunks): :func:`prefix_attention`
is one task per (batch row, query head, query row) that walks the keys ``j <= p + i`` in tiles
of ``PREFIX_TILE`` with an online softmax, reading the position at run time.  A decode step at
position 10 of a 1024-position cache then reads 11 cache rows per head, not 1024, and no
transposed copy of the cache is made (the general attention kernel takes ``Kᵀ``).  Longer
queries (prefill) and masked calls keep the general ``ik.attention`` kernel over the keep-mask.

Tested with TVM 0.27 (the ``tirx`` namespace).
"""

from __future__ import annotations

from typing import Any

from irkit.targets.tvm import _OPAQUE, _TVM_DTYPE, TVM_RULES

from irkit.ir.core import Op

PREFIX_MAX_QUERIES = 16
"""Most new positions per call for which the prefix kernel is used (decode: 1)."""

PREFIX_TILE = 32
"""Keys per online-softmax step of the prefix kernel (its score row lives in registers/stack)."""


def prefix_attention(b: int, hq: int, hkv: int, s: int, t: int, d: int, dv: int, pos_shape: tuple[int, ...],
                     pos_dtype: str, scale: float, lanes: int = 8, name: str = "prefix_attention") -> Any:
    """PrimFunc ``(q, k_cache, v_cache, pos, out)``: float32 attention of ``q [b, hq, s, d]`` over the
    rows ``j <= clamp(pos, 0, t - s) + i`` of the (already updated) caches ``[b, hkv, t, d|dv]``;
    ``pos`` is rank 0 or ``[b]``.  Work and memory traffic scale with the position, not ``t``."""
    import math

    from irkit.targets.tvm_kernels.common import f32, fast_exp, largest_divisor, softmax_weight
    from tvm import tirx
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script.builder import ir as T

    group = hq // hkv
    vd, vv = largest_divisor(d, lanes), largest_divisor(dv, lanes)
    tk = PREFIX_TILE
    lowest = f32(-3.4028234663852886e38)
    neg_inf = tirx.const(-math.inf, "float32")

    def st(buf: Any, value: Any, *idx: Any) -> None:
        T.buffer_store(buf, value, list(idx))

    with IRBuilder() as ib:
        with T.prim_func():
            T.func_name(name)
            q = T.arg("q", T.buffer((b, hq, s, d), "float32"))
            kc = T.arg("k_cache", T.buffer((b, hkv, t, d), "float32"))
            vc = T.arg("v_cache", T.buffer((b, hkv, t, dv), "float32"))
            pos = T.arg("pos", T.buffer(tuple(pos_shape), pos_dtype))
            out = T.arg("out", T.buffer((b, hq, s, dv), "float32"))
            T.func_attr({"tirx.noalias": True, "global_symbol": name})
            loop = T.parallel if b * hq * s > 1 else T.serial
            with loop(0, b * hq * s) as task:
                bi = task // (hq * s)
                hi = task // s % hq
                i = task % s
                hk = hi // group
                raw = pos[()] if not pos_shape else pos[bi]
                p = tirx.max(tirx.min(tirx.Cast("int32", tirx.max(tirx.min(raw, tirx.const(t, pos_dtype)),
                                                                  tirx.const(0, pos_dtype))),
                                      tirx.const(t - s, "int32")), tirx.const(0, "int32"))
                n = p + i + 1  # keys visible to query row i
                srow = T.alloc_buffer((tk,), "float32", scope="local")
                part = T.alloc_buffer((vd,), "float32", scope="local")
                acc = T.alloc_buffer((dv,), "float32", scope="local")
                red = T.alloc_buffer((4,), "float32", scope="local")  # m, l, tile max / sum, alpha
                st(red, lowest, 0)
                st(red, f32(0.0), 1)
                with T.vectorized(0, dv) as dd:
                    st(acc, f32(0.0), dd)
                with T.serial(0, (n + tk - 1) // tk) as tile:
                    k0 = tile * tk
                    with T.serial(0, tk) as j:
                        kj = tirx.min(k0 + j, n - 1)
                        with T.vectorized(0, vd) as ln:
                            st(part, f32(0.0), ln)
                        with T.serial(0, d // vd) as do:
                            with T.vectorized(0, vd) as ln:
                                st(part, part[ln] + q[bi, hi, i, do * vd + ln] * kc[bi, hk, kj, do * vd + ln], ln)
                        with T.serial(1, vd) as ln:
                            st(part, part[0] + part[ln], 0)
                        st(srow, tirx.Select(k0 + j < n, part[0] * f32(scale), neg_inf), j)
                    st(red, srow[0], 2)
                    with T.serial(1, tk) as j:
                        st(red, tirx.max(red[2], srow[j]), 2)
                    m_new = tirx.max(red[0], red[2])
                    st(red, fast_exp(red[0] - m_new), 3)
                    st(red, m_new, 0)
                    with T.vectorized(0, tk) as j:
                        st(srow, softmax_weight(srow[j], red[0], cpu=True), j)
                    st(red, f32(0.0), 2)
                    with T.serial(0, tk) as j:
                        st(red, red[2] + srow[j], 2)
                    st(red, red[1] * red[3] + red[2], 1)
                    with T.vectorized(0, dv) as dd:
                        st(acc, acc[dd] * red[3], dd)
                    with T.serial(0, tk) as j:
                        kj = tirx.min(k0 + j, n - 1)
                        with T.serial(0, dv // vv) as do:
                            with T.vectorized(0, vv) as ln:
                                dd = do * vv + ln
                                st(acc, acc[dd] + srow[j] * vc[bi, hk, kj, dd], dd)
                with T.vectorized(0, dv) as dd:
                    st(out, acc[dd] / red[1], bi, hi, i, dd)
    return ib.get()


def _prefix_ok(lw: Any, op: Op) -> bool:
    """Whether the prefix kernel serves ``op`` on this lowerer (CPU, float32, static, no extra mask)."""
    if lw.gpu or len(op.operands) > 6:
        return False
    shapes = [lw.shape(v) for v in op.operands[:5]]
    if any(not isinstance(x, (int,)) for sh in shapes for x in sh):
        return False
    if any(getattr(v.dtype, "value", None) != "f32" for v in op.operands[:5]):
        return False
    return shapes[0][2] <= PREFIX_MAX_QUERIES and shapes[3][2] >= 1


def _emit_prefix(lw: Any, op: Op, q: Any, kc: Any, vc: Any, pos: Any, name: str) -> Any:
    from irkit.targets.tvm_kernels.common import simd_lanes

    relax = lw.relax
    b, hq, s, d = (int(x) for x in lw.shape(op.operands[0]))
    _, hkv, t, _ = (int(x) for x in lw.shape(op.operands[3]))
    dv = int(lw.shape(op.operands[4])[3])
    pv = op.operands[5]
    func = prefix_attention(b, hq, hkv, s, t, d, dv, tuple(int(x) for x in lw.shape(pv)), _TVM_DTYPE[pv.dtype],
                            float(op.attrs["scale"]), simd_lanes(lw.target, "float32"), name=name)
    func = func.with_attr("tirx.is_scheduled", True).with_attr("op_pattern", _OPAQUE)
    gv = lw.bb.add_func(func, name)
    lw.function[name] = gv.name_hint
    lw.kernels.append((name, [op]))
    return lw.bb.emit(relax.call_tir(gv, [q, kc, vc, pos], relax.TensorType([b, hq, s, dv], "float32")))


def _in_place_ok(lw: Any, op: Op, operand: int, result: int) -> int | None:
    """The entry argument index of ``op``'s cache operand when it may be updated in place, else None."""
    if lw.gpu:
        return None
    from irkit.ir.aliases import get_aliases

    fn = lw.module.entry
    x = op.operand(operand)
    arg = next((i for i, a in enumerate(fn.args) if a is x), None)
    if arg is None or op.parent is None or op.parent is not fn.body:
        return None
    outs = fn.outputs
    if not any(a == arg and o < len(outs) and outs[o] is op.results[result] for o, a in get_aliases(fn).items()):
        return None
    body = list(op.parent)
    top = next(i for i, t in enumerate(body) if t is op)
    for i, t in enumerate(body):
        if i <= top:
            continue
        nested = [t, *(o for r in t.regions for o in r.walk())]
        if any(v is x for o in nested for v in o.operands):
            return None  # read after the update: it needs the old value
    return arg


def _emit_inplace(lw: Any, dus: Op, ins: list[Any], name: str) -> Any:
    from irkit.targets.tvm_kernels.movement import dynamic_update_slice_inplace

    relax = lw.relax
    x = dus.operand(0)
    xs_, us_ = lw.shape(x), lw.shape(dus.operand(1))
    func = dynamic_update_slice_inplace(xs_, us_, len(xs_), _TVM_DTYPE[x.dtype], _TVM_DTYPE[dus.operand(2).dtype],
                                        name=name)
    func = func.with_attr("tirx.is_scheduled", True).with_attr("op_pattern", _OPAQUE)
    gv = lw.bb.add_func(func, name)
    lw.function[name] = gv.name_hint
    lw.kernels.append((name, [dus]))
    return lw.bb.emit(relax.call_tir_inplace(gv, ins, [0], relax.TensorType(xs_, _TVM_DTYPE[x.dtype])))


@TVM_RULES.rule("ik.cache_attention")
def _cache_attention(lw: Any, op: Op, ins: list[Any]) -> list[Any] | None:
    from irkit.ir.ops_cache import decompose

    try:
        g = decompose(op, lw.b)
    except ValueError as e:
        raise lw.refuse(op, str(e)) from None
    base = lw.ids[id(op)]
    ids = dict(lw.ids)
    for k, o in enumerate(g):
        ids[id(o)] = f"{base}_{k}_{o.name.split('.', 1)[-1]}"
    saved, lw.ids = lw.ids, ids
    try:
        for a, v in zip(g.args, ins):
            lw.env[id(a)] = v
        caches = {id(g.args[3]): (3, 1), id(g.args[4]): (4, 2)}
        live = None
        if _prefix_ok(lw, op):
            # only the ops the outputs need once ik.attention is the prefix kernel (not the keep-mask)
            body = list(g)
            need = {id(v) for v in body[-1].operands}
            live = set()
            for o in reversed(body[:-1]):
                if any(id(r) in need for r in o.results):
                    live.add(id(o))
                    srcs = [o.operand(0), o.operand(1), o.operand(2)] if o.name == "ik.attention" else o.operands
                    need.update(id(v) for v in srcs)
        for o in g:
            if o.name == "func.return":
                return [lw.env[id(v)] for v in o.operands]
            if live is not None and id(o) not in live:
                continue
            if live is not None and o.name == "ik.attention":
                q_, k_, v_, p_ = (lw.env[id(v)] for v in (o.operand(0), o.operand(1), o.operand(2), g.args[5]))
                lw.env[id(o.results[0])] = _emit_prefix(lw, op, q_, k_, v_, p_, lw.kname(o))
                continue
            if o.name == "ik.dynamic_update_slice" and id(o.operand(0)) in caches:
                arg = _in_place_ok(lw, op, *caches[id(o.operand(0))])
                if arg is not None:
                    try:
                        res = _emit_inplace(lw, o, [lw.env[id(v)] for v in o.operands], lw.kname(o))
                    except Exception:  # noqa: BLE001 - the functional update below is always correct
                        res = None
                    if res is not None:
                        lw.inplace_args.add(arg)
                        lw.env[id(o.results[0])] = res
                        continue
            lw.lower_op(o)
    finally:
        lw.ids = saved
    raise lw.refuse(op, "internal: the decomposition has no return")
