"""``fuse-cache-attention``: KV-cache write + attention over the valid prefix → one ``ik.cache_attention``.

Design note.  A decode step exported with a static KV cache (transformers'
``StaticCache`` through torch.export, see :mod:`irkit.zoo.decode`) writes the
new keys and values into cache arguments that the function's ``aliases``
attribute pairs with outputs, then attends over the whole updated cache with a
mask that keeps the positions written so far.  After ``fuse-attention`` that
reads, per layer and for K and V alike::

    %kt  = transpose(%k_cache, [2, 0, 1, 3])                   // sequence axis first
    %idx = reshape(add(iota(S), %p), [S, 1])                   // rows p .. p+S-1
    %kw  = scatter_nd(%kt, %idx, transpose(%k_new', ...))      // (or dynamic_update_slice
    %k2  = transpose(%kw, [1, 2, 0, 3])                        //  at [0, 0, p, 0])
    %m   = le(iota(T), reshape(add(iota(S), %p), [1, 1, S, 1]))  // key j <= p + i  [and extra]
    %o   = ik.attention(%q, repeat?(%k2), repeat?(%v2), %m)
    return ..., %k2, %v2     aliases = [[.., k_cache], [.., v_cache]]

and becomes ``%o, %k2, %v2 = ik.cache_attention(%q, %k_new, %v_new, %k_cache,
%v_cache, %p [, extra mask])`` with the outputs and aliases untouched.
Nothing is taken on trust:

* the write must be into a function argument that an output aliases, and the
  updated cache must be that output; the argument may have no other reader (a
  read of the old cache, before the write, blocks the fusion);
* the write covers rows ``[p, p+S)`` of the sequence axis (axis 2 of the BHSD
  cache) exactly: ``scatter_nd`` with indices ``iota(S) + p`` on the
  sequence-first view, ``scatter_elements`` along axis 2 with the index
  ``iota(S) + p`` broadcast to the rows, or ``dynamic_update_slice`` at
  ``[0, 0, p, 0]``;
* the mask is the prefix mask of the same position ``p`` (the same value, or
  the same computation of it), possibly broadcast to the batch (the export at
  batch > 1) and ``and``-ed with an extra mask that the fused op keeps; the
  attention has no bias, no soft-capping and is not ``causal``;
* K and V may be repeated for grouped-query attention (reshape + broadcast +
  reshape); the fused op takes the un-repeated cache.

Positions past the end: the fused op clamps ``p`` into ``[0, T-S]`` (as XLA's
dynamic_update_slice), where the unfused ``scatter_nd`` would fail; a
generation never asks for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from irkit.ir.aliases import get_aliases
from irkit.ir.builder import Builder
from irkit.ir.core import Function, Location, Module, Op, Value
from irkit.ir.ops import named_operands
from irkit.passmanager import Pass, PassContext, register_pass
from irkit.rewrite.driver import erasable_op_names
from irkit.rewrite.pattern import NearMiss

_MAX_DEPTH = 12


def _op(v: Value | None, name: str) -> Op | None:
    p = v.producer if v is not None else None
    return p if p is not None and p.name == name else None


def same_value(a: Value, b: Value, depth: int = 0) -> bool:
    """``a`` and ``b`` are the same value, or the same pure computation of the same values."""
    if a is b:
        return True
    pa, pb = a.producer, b.producer
    if pa is None or pb is None or depth > _MAX_DEPTH:
        return False
    if (pa.name != pb.name or a.index != b.index or pa.num_operands != pb.num_operands or pa.regions or pb.regions
            or dict(pa.attrs) != dict(pb.attrs) or a.type != b.type):
        return False
    return all(same_value(x, y, depth + 1) for x, y in zip(pa.operands, pb.operands))


def _is_iota(v: Value, n: Any | None = None) -> bool:
    """``v`` is ``iota`` over a 1-D integer range (of length ``n`` when given), possibly reshaped."""
    while (r := _op(v, "ik.reshape")) is not None:
        v = r.operand(0)
    p = _op(v, "ik.iota")
    return (p is not None and v.type.rank == 1 and v.dtype.is_int and p.attrs.get("axis", 0) == 0
            and (n is None or v.type.shape[0] == n))


def _positions(v: Value, s: Any) -> Value | None:
    """The scalar ``p`` of ``v = iota(S) + p`` (possibly reshaped), or None."""
    while (r := _op(v, "ik.reshape")) is not None:
        v = r.operand(0)
    add = _op(v, "ik.add")
    if add is None or v.type.rank != 1 or v.type.shape[0] != s:
        return None
    x, y = add.operands
    for it, p in ((x, y), (y, x)):
        if _is_iota(it, s) and p.type.rank == 0 and p.dtype.is_int:
            return p
    return None


def _perm(op: Op) -> tuple[int, ...]:
    return tuple(int(i) for i in op.attrs["perm"])


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


@dataclass
class _Write:
    """A cache write: the updated value, its cache argument, the new rows and the position."""

    updated: Value
    arg: int
    cache: Value
    rows: Value
    rows_perm: tuple[int, ...]
    """Transpose that turns ``rows`` into BHSD (identity: already BHSD)."""
    pos: Value
    ops: list[Op]


def _cache_write(fn: Function, v: Value) -> _Write | str:
    """The cache write producing ``v``, or why ``v`` is not one."""
    args = {id(a): i for i, a in enumerate(fn.args)}
    t = _op(v, "ik.transpose")
    if t is not None:
        sc = _op(t.operand(0), "ik.scatter_nd")
        if sc is None or sc.attrs.get("reduction", "none") != "none":
            return "the key/value is not a cache written by scatter_nd or dynamic_update_slice"
        t0 = _op(sc.operand(0), "ik.transpose")
        if t0 is None or t0.operand(0).type.rank != 4:
            return "the scatter_nd does not write a transposed rank-4 cache"
        p1, p2 = _perm(t0), _perm(t)
        if p1[0] != 2 or tuple(p1[i] for i in p2) != (0, 1, 2, 3):
            return f"the cache is written along axis {p1[0]}, not the sequence axis 2 of [B, H, T, D]"
        cache = t0.operand(0)
        if id(cache) not in args:
            return "the written cache is not a function argument"
        idx = sc.operand(1)
        upd = sc.operand(2)
        s = upd.type.shape[0]
        if idx.type.rank != 2 or idx.type.shape[1] != 1:
            return "the scatter_nd indices are not [S, 1] row positions"
        pos = _positions(idx, s)
        if pos is None:
            return "the rows written are not iota(S) + position"
        return _Write(v, args[id(cache)], cache, upd, _inverse(p1), pos, [t0, sc, t])
    se = _op(v, "ik.scatter_elements")
    if se is not None:
        cache, idx, upd = se.operands
        if id(cache) not in args or cache.type.rank != 4:
            return "the written cache is not a rank-4 function argument"
        if se.attrs.get("reduction", "none") != "none" or se.attrs.get("axis") not in (2, -2):
            return "the scatter_elements does not write along the sequence axis 2 of [B, H, T, D]"
        if upd.type.shape[:2] != cache.type.shape[:2] or upd.type.shape[3] != cache.type.shape[3]:
            return "the scatter_elements writes a part of the heads or head dims"
        pos = _row_index(idx, upd.type.shape[2])
        if pos is None:
            return "the rows written are not iota(S) + position"
        return _Write(v, args[id(cache)], cache, upd, (0, 1, 2, 3), pos, [se])
    d = _op(v, "ik.dynamic_update_slice")
    if d is not None:
        cache, upd, starts = d.operands
        if id(cache) not in args or cache.type.rank != 4:
            return "the written cache is not a rank-4 function argument"
        pos = _starts_position(starts)
        if pos is None:
            return "the dynamic_update_slice starts are not [0, 0, position, 0]"
        if upd.type.shape[:2] != cache.type.shape[:2] or upd.type.shape[3] != cache.type.shape[3]:
            return "the dynamic_update_slice writes a part of the heads or head dims"
        return _Write(v, args[id(cache)], cache, upd, (0, 1, 2, 3), pos, [d])
    return "the key/value is not a cache written by scatter_nd or dynamic_update_slice"


def _row_index(idx: Value, s: Any) -> Value | None:
    """``p`` of a scatter_elements index that is ``iota(S) + p`` along axis 2, broadcast to the rows."""
    while (bc := _op(idx, "ik.broadcast")) is not None:
        idx = bc.operand(0)
    shape = idx.type.shape
    if idx.type.rank == 4 and (shape[2] != s or any(d != 1 for i, d in enumerate(shape) if i != 2)):
        return None
    return _positions(idx, s)


def _const_int(v: Value) -> int | None:
    p = _op(v, "ik.constant")
    if p is None:
        return None
    a = p.attrs["value"].array
    if a.size != 1 or a.dtype.kind not in "iu":
        return None
    return int(a.reshape(-1)[0])


def _starts_position(starts: Value) -> Value | None:
    """``p`` of starts ``[0, 0, p, 0]`` (a concat of rank-1 pieces), or None."""
    c = _op(starts, "ik.concat")
    if c is None or starts.type.shape != (4,):
        return None
    pieces: list[Value | None] = []
    for x in c.operands:
        n = x.type.shape[0] if x.type.rank == 1 else None
        if not isinstance(n, int):
            return None
        pieces += [x] * n if n == 1 else [None] * n
    got = [x for x in pieces if x is not None]
    if len(pieces) != 4 or len(got) != 4:
        return None
    if any(_const_int(got[i]) != 0 for i in (0, 1, 3)):
        return None
    p = got[2]
    while p.type.rank != 0 and (r := _op(p, "ik.reshape")) is not None:
        p = r.operand(0)
    return p if p.type.rank == 0 and p.dtype.is_int else None


def _unrepeat(v: Value) -> tuple[Value, list[Op]]:
    """``v`` with a GQA head repetition (reshape + broadcast + reshape) peeled off."""
    r2 = _op(v, "ik.reshape")
    b = _op(r2.operand(0), "ik.broadcast") if r2 is not None else None
    r1 = _op(b.operand(0), "ik.reshape") if b is not None else None
    if r1 is None or b is None or r2 is None:
        return v, []
    x = r1.operand(0)
    xs, s1, s2 = x.type.shape, r1.results[0].type.shape, b.results[0].type.shape
    if (x.type.rank == 4 and len(s1) == 5 and s1 == (xs[0], xs[1], 1, xs[2], xs[3]) and len(s2) == 5
            and s2[:2] == s1[:2] and s2[3:] == s1[3:] and isinstance(s2[2], int) and isinstance(xs[1], int)
            and v.type.shape == (xs[0], xs[1] * s2[2], xs[2], xs[3])):
        return x, [r2, b, r1]
    return v, []


def _prefix_mask(mask: Value, pos: Value, s: Any, t_len: Any) -> tuple[bool, Value | None] | str:
    """(matched, extra mask) when ``mask`` keeps key ``j <= pos + i`` (and-ed with an extra mask)."""
    while (bc := _op(mask, "ik.broadcast")) is not None and bc.operand(0).type.rank == mask.type.rank:
        mask = bc.operand(0)  # expanded to the batch / heads: the same keep-mask for every row
    a = _op(mask, "ik.and")
    if a is not None:
        for m, extra in ((a.operand(0), a.operand(1)), (a.operand(1), a.operand(0))):
            got = _prefix_mask(m, pos, s, t_len)
            if not isinstance(got, str) and got[1] is None:
                return True, extra
        return "neither side of the mask's 'and' is the prefix mask of the write position"
    for name, swap in (("ik.le", False), ("ik.ge", True)):
        c = _op(mask, name)
        if c is None:
            continue
        keys, rows = (c.operand(1), c.operand(0)) if swap else (c.operand(0), c.operand(1))
        if not _is_iota(keys, t_len) or keys.type.rank not in (1, 4):
            return "the mask does not compare the key index iota(T)"
        if keys.type.rank == 4 and keys.type.shape[:3] != (1, 1, 1):
            return "the mask's key index is not [1, 1, 1, T]"
        if rows.type.rank != 4 or rows.type.shape[:2] != (1, 1) or rows.type.shape[3] != 1:
            return "the mask's query positions are not [1, 1, S, 1]"
        p = _positions(rows, s)
        if p is None:
            return "the mask's query positions are not iota(S) + position"
        if not same_value(p, pos):
            return "the mask's position is not the position the cache is written at"
        return True, None
    return "the mask is not the prefix mask key <= position + query (le/ge of iota)"


@register_pass("fuse-cache-attention")
@dataclass(frozen=True)
class FuseCacheAttention(Pass):
    """Fuse a KV-cache write and the attention over the valid prefix into one ik.cache_attention.

    before: %k2 = transpose(scatter_nd(transpose(%k_cache), iota(S) + %p, %k_new))  (V alike)
            %o = "ik.attention"(%q, %k2, %v2, le(iota(T), iota(S) + %p))
            return ..., %k2, %v2   aliases = [[.., k_cache], [.., v_cache]]
    after:  %o, %k2, %v2 = "ik.cache_attention"(%q, %k_new, %v_new, %k_cache, %v_cache, %p)
    Run it after fuse-attention; aliases are kept.
    """

    exact: ClassVar[bool] = False

    def run(self, module: Module, ctx: PassContext) -> bool:
        n = 0
        for fn in module.functions:
            n += self._run_function(fn, ctx)
        if n:
            ctx.count("cache-attention-fused", n)
            _dce(module)
        return n > 0

    def _run_function(self, fn: Function, ctx: PassContext) -> int:
        aliases = get_aliases(fn)
        if not aliases:
            return 0
        fused = 0
        for op in list(fn.body):
            if op.name != "ik.attention" or op.parent is None:
                continue
            why = self._try(fn, op, aliases)
            if why is None:
                fused += 1
            elif ctx.explain:
                ctx.near_misses.append(NearMiss("fuse-cache-attention", op, why))
        return fused

    def _try(self, fn: Function, att: Op, aliases: dict[int, int]) -> str | None:
        nm = named_operands(att)
        if nm.get("bias") is not None:
            return "the attention has a bias"
        if att.attrs.get("causal", False):
            return "the attention is causal (top-left), not over a cache prefix"
        if float(att.attrs.get("softcap", 0.0) or 0.0) != 0.0:
            return "the attention has logit soft-capping"
        if any(k not in ("scale", "causal", "softcap", "operandSegmentSizes") for k in att.attrs):
            return f"the attention has attributes the fused op does not carry: {sorted(att.attrs)}"
        mask = nm.get("mask")
        if mask is None:
            return "the attention has no mask (a cache needs the prefix mask)"
        q, k0, v0 = nm["q"], nm["k"], nm["v"]
        assert q is not None and k0 is not None and v0 is not None
        k, krep = _unrepeat(k0)
        v, vrep = _unrepeat(v0)
        if (krep and not vrep) or (vrep and not krep):
            return "only one of K and V is repeated"
        kw = _cache_write(fn, k)
        if isinstance(kw, str):
            return kw
        vw = _cache_write(fn, v)
        if isinstance(vw, str):
            return vw
        if kw.arg == vw.arg:
            return "K and V are written into the same cache"
        if not same_value(kw.pos, vw.pos):
            return "K and V are written at different positions"
        outs = fn.outputs
        for w in (kw, vw):
            if not any(a == w.arg and o < len(outs) and outs[o] is w.updated for o, a in aliases.items()):
                return f"the updated cache is not the output aliased to argument {w.arg} (%{w.cache.name})"
            users = w.cache.users
            if len(users) != 1 or users[0] is not w.ops[0]:
                return f"the cache argument %{w.cache.name} is read besides being written (the old cache is read)"
        s, t_len = q.type.shape[2], kw.cache.type.shape[2]
        if kw.rows.type.rank != 4:
            return "the new rows are not rank 4"
        got = _prefix_mask(mask, kw.pos, s, t_len)
        if isinstance(got, str):
            return got
        extra = got[1]
        # dominance: users of the updated caches other than the repeat chain, the attention and the
        # return must come after the attention (the fused op is placed where the attention is)
        body = fn.body.order()
        at = body[id(att)]
        chain = {id(o) for o in krep + vrep} | {id(att)}
        for w in (kw, vw):
            for u in w.updated.users:
                if id(u) in chain or u.name == "func.return":
                    continue
                if body.get(id(u), -1) < at:
                    return "the updated cache is read before the attention"
        b = Builder.before_op(att, Location.fuse([att.loc, *(o.loc for o in kw.ops + vw.ops)]))

        def bhsd(w: _Write) -> Value:
            perm = w.rows_perm
            rows = w.rows
            t = _op(rows, "ik.transpose")
            if t is not None and perm != (0, 1, 2, 3):
                inner = _perm(t)
                perm = tuple(inner[i] for i in perm)
                rows = t.operand(0)
            if perm == (0, 1, 2, 3):
                return rows
            return b.transpose(rows, perm=perm)

        kn, vn = bhsd(kw), bhsd(vw)
        want_k = (kw.cache.type.shape[0], kw.cache.type.shape[1], s, kw.cache.type.shape[3])
        if kn.type.shape != want_k or vn.type.shape[:3] != want_k[:3]:
            return f"the new rows {kn.type} do not match the cache {kw.cache.type}"
        operands = [q, kn, vn, kw.cache, vw.cache, kw.pos] + ([extra] if extra is not None else [])
        new = b.create("ik.cache_attention", operands, {"scale": float(att.attrs["scale"])})
        att.results[0].replace_all_uses_with(new.results[0])
        kw.updated.replace_all_uses_with(new.results[1])
        vw.updated.replace_all_uses_with(new.results[2])
        assert att.parent is not None
        att.parent.erase(att)
        return None


def _dce(module: Module) -> None:
    from irkit.passes.dce import _dce_graph

    erasable = erasable_op_names()
    for f in module.functions:
        _dce_graph(f.body, erasable)


__all__ = ["FuseCacheAttention", "same_value"]
