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

Tested with TVM 0.27 (the ``tirx`` namespace).
"""

from __future__ import annotations

from typing import Any

from irkit.targets.tvm import _OPAQUE, _TVM_DTYPE, TVM_RULES

from irkit.ir.core import Op


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
        for o in g:
            if o.name == "func.return":
                return [lw.env[id(v)] for v in o.operands]
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
