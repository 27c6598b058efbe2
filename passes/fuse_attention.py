"""``fuse-attention``: softmax(scale·QKᵀ + bias, mask) V → one ``ik.attention``.

Design note.  The pattern starts at every ``ik.softmax`` (so ``--explain`` can
say, for each softmax that did not fuse, the first condition that failed) and
reads the canonical form that ``canonicalize`` leaves (see
:mod:`passes.canon_attention`):

    P = softmax(where(keep, mul(matmul(Q, transpose(K)), c) + bias, F), axis=-1)
    O = matmul(cast?(P), V)

Walking down from the softmax it peels float casts, ``where`` masks with a fill
≤ -1e4 or -inf, additive terms, and scalar ``mul``/``div`` factors until it
reaches the QKᵀ matmul.  Walking up it finds the single P·V matmul.  Nothing is
taken on trust:

* the key transpose must contract K's innermost (head) dim, and Q's contracted
  dim must be Q's innermost dim;
* the softmax must run over the key axis (the last);
* only scalar factors on the scores path become ``scale`` (a factor on V stays
  in the V operand);
* a keep-mask is causal only when its values are lower-triangular (evaluated,
  not assumed); other constant patterns become an explicit ``mask`` operand;
* an additive term is a mask only when its values are 0 or ≤ -1e4 for every 0/1
  input (evaluated); anything else is a ``bias``.

Variants: a soft-cap ``c1 · tanh(c2 · QKᵀ)`` (c1 > 0; Gemma 2) becomes ``softcap = c1`` and
``scale = c1 · c2``, with no mask or bias inside the tanh; reshapes of the scores that only merge or
split their leading (batch/head) dims and return to QKᵀ's shape are walked through (BLOOM's
``baddbmm`` and DeBERTa-v2 add their ALiBi / relative-position terms in a ``[B·H, S, S]`` view),
each term added in such a view becoming a bias reshaped to the softmax's leading dims; a ``where``
keep-mask with an absorbing finite fill (≤ -1e30) beside a bias is folded into that bias, so a
row with every key masked keeps its unfused value.

Layouts: BHSD as is; BSHD keeps the transposes that produced Q, K and V as the
fused op's operands (K's transpose is rewritten to the BHSD key); 3-D
``[B*H, S, D]`` scores run as ``[1, B*H, S, D]`` with reshapes around the op.
Repeated K/V heads (``expand``+``reshape``, ``repeat_interleave``, an index
``gather``) are passed un-repeated, so ``ik.attention`` expresses GQA.

Refinement: ``ik.attention`` gives zeros for a query row whose every key is
masked.  The unfused spellings disagree there (NaN for -inf, a uniform average
for a finite fill, the unmasked softmax for an additive -10000), so fusing a
mask defines those rows; ``--check-rewrites`` checks everything else.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from irkit.passes.canon_attention import (
    const_scalar,
    emit_op,
    float_splat,
    is_float_cast,
    is_mask_fill,
    keep_pattern,
    op_is,
    reshaped,
    sample_bindings,
    scalar_factor,
    transposed,
)

from irkit.ir.core import Location, Op, Value
from irkit.ir.types import (
    DType,
    SymDim,
    broadcast_shapes,
    dim_prod,
    eval_dim,
    normalize_axis,
)
from irkit.passmanager import Pass, PassContext, register_pass
from irkit.rewrite import Fail, Match, NearMiss, Pattern, Rewriter
from irkit.rewrite.fusion import FusionNote, loc_str, producer_chain, run_fusion
from irkit.rewrite.numeric_check import cone, evaluate, leaves_of, symbols_of

# ---------------------------------------------------------------------------
# The match


@dataclass
class AttentionMatch:
    """Everything the rewrite needs, found by :func:`match_attention`."""

    softmax: Op
    pv: Op
    q: Value
    k_src: Value
    k_perm: tuple[int, ...]
    v_src: Value
    v_perm: tuple[int, ...]
    rank: int
    scale: float
    causal: bool
    masks: list[Value] = field(default_factory=list)
    mask_eqs: list[Value] = field(default_factory=list)
    """Additive terms whose zeros are the kept keys (mask = eq(term, 0))."""
    biases: list[tuple[Value, float]] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    k_small: tuple | None = None
    """GQA: (value, shape) whose reshape is K before its heads were repeated."""
    v_small: tuple | None = None
    softcap: float = 0.0
    """Logit soft-cap: the scaled scores went through ``softcap * tanh(s / softcap)`` (0 = none)."""
    folded: list[tuple[Value, float]] = field(default_factory=list)
    """Keep-masks folded into the bias as ``where(keep, bias, fill)`` (see :func:`_fold_absorbing_masks`)."""
    bias_spaces: dict[int, tuple] = field(default_factory=dict)
    """Index in ``biases`` -> the scores shape where that term was added, for a term added
    below a reshape of the scores' leading (batch/head) dims (BLOOM's ``baddbmm`` over
    ``[B*H, S, S]``); the rewrite reshapes the term into the softmax's space."""


_CHAIN = ("ik.mul", "ik.div", "ik.add", "ik.where", "ik.cast", "ik.sub", "ik.tanh", "ik.reshape")


def _reaches_contraction(v: Value, depth: int = 10) -> bool:
    """True if ``v`` is computed from a matmul through ops of the scores chain."""
    p = v.producer
    if p is None or depth < 0:
        return False
    if p.name in ("ik.matmul", "ik.contract"):
        return True
    if p.name == "ik.transpose":
        q = p.operand(0).producer
        return q is not None and q.name == "ik.contract"
    if p.name == "ik.where":
        return _reaches_contraction(p.operand(1), depth - 1) or _reaches_contraction(p.operand(2), depth - 1)
    if p.name in _CHAIN:
        return any(_reaches_contraction(x, depth - 1) for x in p.operands)
    return False


_MASK_CONE_OPS = frozenset({
    "ik.constant", "ik.iota", "ik.reshape", "ik.broadcast", "ik.transpose", "ik.slice", "ik.cast", "ik.where",
    "ik.add", "ik.sub", "ik.mul", "ik.div", "ik.neg", "ik.not", "ik.and", "ik.or", "ik.xor", "ik.eq", "ik.ne",
    "ik.lt", "ik.le", "ik.gt", "ik.ge", "ik.min", "ik.max", "ik.abs", "ik.concat",
})


def _split_and(v: Value) -> list[Value]:
    p = op_is(v, "ik.and")
    if p is None:
        return [v]
    return _split_and(p.operand(0)) + _split_and(p.operand(1))


class _Classifier:
    """Sorts keep-masks and additive terms into causal / explicit mask / bias, by their values."""

    def __init__(self, scores_shape: tuple, am: AttentionMatch):
        self.shape = scores_shape
        self.am = am

    def keep(self, keep: Value) -> None:
        for c in _split_and(keep):
            kind, detail = keep_pattern(c, self.shape)
            if kind == "causal":
                self.am.causal = True
            elif kind == "all":
                pass
            else:
                if kind == "other":
                    src = c.producer
                    self.am.notes.append(
                        f"the keep-mask from {loc_str(src) if src else 'an argument'} is a constant that is not "
                        f"causal ({detail}); it is passed as an explicit mask, not as causal=true")
                self.am.masks.append(c)

    def additive(self, a: Value, factor: float) -> str | None:
        """Classify ``a`` (added to the scores, then scaled by ``factor``); a reason string on failure."""
        p = a.producer
        if p is not None and p.name == "ik.where":
            k, zero, fill = p.operands
            if float_splat(zero) == 0.0 and is_mask_fill(float_splat(fill)) and k.type.dtype.is_bool:
                self.keep(k)
                return None
        leaves = leaves_of(a, allowed=_MASK_CONE_OPS)
        if leaves is None:
            self.am.biases.append((a, factor))
            return None
        if not leaves:
            return self._constant_additive(a, factor)
        if len(leaves) == 1 and not leaves[0].type.dtype.is_float and self._is_01_mask(a, leaves[0]):
            self.am.mask_eqs.append(a)
            return None
        self.am.biases.append((a, factor))
        return None

    def _bindings(self, a: Value, extra: Sequence[Value] = ()) -> list[dict[str, int]]:
        ops = cone(a, extra) or []
        syms = symbols_of(ops, [a, *extra])
        syms |= {s for d in self.shape if isinstance(d, SymDim) for s in d.symbols}
        return sample_bindings(syms)

    def _constant_additive(self, a: Value, factor: float) -> str | None:
        arrays = []
        for b in self._bindings(a):
            arr = evaluate(a, b)
            if arr is not None:
                arrays.append((b, arr))
        masky = bool(arrays) and all(_is_mask_values(arr) for _, arr in arrays)
        if masky:
            kinds = set()
            for b, arr in arrays:
                kinds.add(_tril_kind(arr == 0, self.shape, b))
            if kinds <= {"causal", "all"} and "causal" in kinds:
                self.am.causal = True
                return None
            if kinds == {"all"}:
                return None
            self.am.notes.append(
                f"the additive constant from {loc_str(a.producer) if a.producer else 'an argument'} holds mask "
                "values but is not causal; "
                "it is kept as a bias")
        self.am.biases.append((a, factor))
        return None

    def _is_01_mask(self, a: Value, leaf: Value) -> bool:
        """``a`` is 0 where the 0/1 ``leaf`` is 1 and a mask value where it is 0, everywhere."""
        seen = False
        for b in self._bindings(a, [leaf]):
            try:
                shape = tuple(eval_dim(d, b) for d in leaf.type.shape)
            except KeyError:
                return False
            for bit, want_keep in ((1, True), (0, False)):
                x = np.full(shape, bit, dtype=leaf.type.dtype.np)
                arr = evaluate(a, b, {id(leaf): x})
                if arr is None:
                    break
                seen = True
                if want_keep and not np.all(arr == 0):
                    return False
                if not want_keep and not np.all((arr == -np.inf) | (arr <= -1e4)):
                    return False
        return seen


def _is_mask_values(arr: np.ndarray) -> bool:
    return bool(np.all((arr == 0) | (arr == -np.inf) | (arr <= -1e4)))


def _tril_kind(keep: np.ndarray, shape: tuple, b: dict[str, int]) -> str:
    try:
        sq, sk = eval_dim(shape[-2], b), eval_dim(shape[-1], b)
        full = np.broadcast_to(keep, tuple(keep.shape[:-2]) + (sq, sk) if keep.ndim >= 2 else (sq, sk))
    except (ValueError, KeyError):
        return "other"
    if np.all(full):
        return "all"
    return "causal" if np.all(full == np.tril(np.ones((sq, sk), dtype=bool))) else "other"


def _unrepeat(v: Value, axis: int) -> tuple[Value, int, tuple] | None:
    """If ``v`` repeats each slice along ``axis`` n times in a row (repeat_interleave semantics),
    return ``(w, n, shape)``: ``reshape(w, shape)`` is the un-repeated tensor."""
    r = v.type.rank
    p = v.producer
    if p is None:
        return None
    if p.name == "ik.gather" and normalize_axis(p.attrs.get("axis", 0), p.operand(0).type.rank) == axis:
        idx = p.operand(1)
        data = p.operand(0)
        if idx.type.rank != 1 or idx.producer is None or idx.producer.name != "ik.constant":
            return None
        ids = idx.producer.attrs["value"].array.astype(np.int64)
        h = data.type.shape[axis]
        if not isinstance(h, int) or h == 0 or len(ids) % h:
            return None
        n = len(ids) // h
        if n > 1 and np.array_equal(ids, np.repeat(np.arange(h), n)):
            return data, n, tuple(data.type.shape)
        return None
    if p.name != "ik.reshape":
        return None
    y = p.operand(0)
    if y.type.rank != r + 1:
        return None
    ys, vs = y.type.shape, v.type.shape
    if ys[:axis] != vs[:axis] or ys[axis + 2:] != vs[axis + 1:]:
        return None
    size = ys[axis + 1]
    if not isinstance(size, int) or size < 2:
        return None
    bp = op_is(y, "ik.broadcast")
    if bp is None:
        return None
    z = bp.operand(0)
    # The kv-head axis comes first and the new axis (size 1, broadcast to n) right after it:
    # head h reads kv head h // n. The other order would be a tile (h % n_kv), not GQA.
    if z.type.rank != r + 1 or z.type.shape[axis + 1] != 1:
        return None
    if any(zd != yd for i, (zd, yd) in enumerate(zip(z.type.shape, ys)) if i != axis + 1):
        return None
    return z, size, tuple(d for i, d in enumerate(z.type.shape) if i != axis + 1)


_FLOAT_ORDER = (DType.bf16, DType.f16, DType.f32, DType.f64)


def _common_dtype(values: list[Value]) -> list[Value] | None:
    """``values`` with float upcasts peeled so they share one element type, or None.

    Half-precision models often upcast Q/K (JAX) or V (torch's ONNX export) to
    float32 around the attention; ``ik.attention`` computes in float32 inside
    whatever its operand type, so the narrow sources are its operands.
    """
    if len({v.type.dtype for v in values}) == 1:
        return values if values[0].type.dtype.is_float else None
    options: list[dict] = []
    for v in values:
        opts = {v.type.dtype: v}
        x = v
        while x.producer is not None and is_float_cast(x.producer):
            x = x.producer.operand(0)
            opts.setdefault(x.type.dtype, x)
        options.append(opts)
    for dt in _FLOAT_ORDER:
        if all(dt in o for o in options):
            return [o[dt] for o in options]
    return None


def _lifts_rank(scores: Value, result: Value) -> bool:
    """Whether an elementwise op only puts leading 1s on the scores: ``result``'s shape is ``scores``'
    with size-1 dims in front, same dtype (a mask or bias of higher rank broadcast onto rank-3
    ``[B*H, S, S]`` scores at a static batch of 1: BLOOM, DeBERTa).  That is a reshape of the scores,
    which the walk follows like one."""
    s, r = tuple(scores.type.shape), tuple(result.type.shape)
    k = len(r) - len(s)
    return (k > 0 and scores.type.dtype == result.type.dtype and r[k:] == s
            and all(isinstance(d, int) and d == 1 for d in r[:k]))


def _safe_softmax_guard(sm: Op) -> list[Op] | None:
    """The guard ops around softmax ``sm`` that give a fully masked row zeros, the where last.

    Two spellings: torch's ``_safe_softmax``, ``where(any(x != -inf, axis), softmax(x), 0)``, and
    the NaN guard torch's ONNX export puts after a masked softmax,
    ``where(isnan(p), 0, p)`` with ``isnan(p)`` as ``ik.isnan(p)`` or ``p != p``.
    """
    p = sm.results[0]
    users = p.users
    if len(users) == 2 and len(p.uses) in (2, 3):
        nan = next((u for u in users if u.name == "ik.isnan" and len(p.uses) == 2
                    or u.name == "ik.ne" and len(p.uses) == 3 and u.operand(0) is p and u.operand(1) is p), None)
        w = next((u for u in users if u.name == "ik.where"), None)
        if nan is not None and w is not None and w.operand(0) is nan.results[0] \
                and float_splat(w.operand(1)) == 0.0 and w.operand(2) is p and len(nan.results[0].uses) == 1:
            return [nan, w]
        return None
    if len(p.uses) != 1:
        return None
    w = p.users[0]
    if w.name != "ik.where" or w.operand(1) is not p or float_splat(w.operand(2)) != 0.0:
        return None
    x = sm.operand(0)
    r = x.type.rank
    c = w.operand(0)
    chain: list[Op] = []
    v = c
    while v.producer is not None and v.producer.name == "ik.cast":
        chain.append(v.producer)
        v = v.producer.operand(0)
    red = op_is(v, "ik.reduce_max")
    if red is None or not red.attrs.get("keepdims", False):
        return None
    axes = tuple(red.attrs.get("axes") or ())
    if len(axes) != 1 or normalize_axis(axes[0], r) != r - 1:
        return None
    chain.append(red)
    v = red.operand(0)
    while v.producer is not None and v.producer.name == "ik.cast":
        chain.append(v.producer)
        v = v.producer.operand(0)
    ne = op_is(v, "ik.ne")
    if ne is None or ne.operand(0) is not x or float_splat(ne.operand(1)) != -math.inf:
        return None
    chain.append(ne)
    return [*reversed(chain), w]


def match_attention(sm: Op) -> AttentionMatch | GroupedMatch | Fail:
    """Find the attention around softmax ``sm``, or say why there is none."""
    x = sm.operand(0)
    rank = x.type.rank
    ax = normalize_axis(sm.attrs.get("axis", -1), rank)
    if rank < 2:
        return Fail("the softmax input has rank < 2", sm)
    if ax != rank - 1:
        return Fail(f"softmax is over axis {ax}, not the key axis {rank - 1}", sm)

    # -- torch's _safe_softmax: where(row has a key that is not -inf, softmax(x), 0) is exactly
    #    what ik.attention does with a fully masked row, so the guard fuses too.
    guard = _safe_softmax_guard(sm)
    guard_ops = guard or []

    # -- down: softmax input -> ... -> matmul(Q, Kᵀ)
    ops: list[Op] = [sm, *guard_ops]
    am = AttentionMatch(sm, sm, q=x, k_src=x, k_perm=(), v_src=x, v_perm=(), rank=rank, scale=1.0, causal=False)
    pending: list[tuple[str, Value, float]] = []  # additive terms with the factor applied after them
    factor = 1.0
    softcap = 0.0  # c1 of a soft-cap c1 * tanh(c2 * QKᵀ) met on the way down (0 = none)
    space = tuple(x.type.shape)  # the scores' shape where the walk is (changes under leading-dim reshapes)
    spaces: dict[int, tuple] = {}  # id(additive term) -> its space, for terms below such a reshape
    fills: dict[int, float] = {}  # id(keep-mask of a where) -> the fill the masked scores reach the softmax with
    cur = x
    while True:
        op = cur.producer
        if op is None:
            return Fail("the softmax input is a function argument, not Q·Kᵀ", sm)
        extra = [u for u in cur.users if u is not sm and u not in guard_ops] if cur is x else \
            [u for u, _ in cur.uses][1:]
        if extra:
            return Fail(f"the scores computed by {loc_str(op)} have {len(cur.uses)} uses; fusing would keep "
                        "them alive", op)
        ops.append(op)
        if op.name == "ik.matmul":
            break
        if op.name == "ik.contract" or (op.name == "ik.transpose" and op_is(op.operand(0), "ik.contract")):
            if spaces or space != tuple(x.type.shape):
                return Fail("a grouped (dot_general) attention under a reshape of the scores is not supported", op)
            return match_grouped(sm, op, guard_ops, pending, factor, ops, softcap)
        if op.name == "ik.tanh":
            # Logit soft-capping (Gemma 2): c1 * tanh(c2 * s) is softcap * tanh(scale * s / softcap) with
            # softcap = c1 and scale = c1 * c2; a bias or mask must come after it (above, in this walk).
            if softcap:
                return Fail("the scores pass through two tanh soft-caps", op)
            if not math.isfinite(factor) or factor <= 0:
                return Fail(f"the tanh over the scores is scaled by {factor:g} on its way to the softmax, "
                            "not by a positive soft-cap (softcap * tanh(s / softcap))", op)
            softcap = factor
            factor = 1.0
            cur = op.operand(0)
            continue
        if op.name == "ik.reshape":
            src = op.operand(0)
            ish, osh = tuple(src.type.shape), tuple(op.results[0].type.shape)
            if len(ish) < 2 or ish[-2:] != osh[-2:]:
                return Fail(f"the scores are reshaped from {list(ish)} to {list(osh)} at {loc_str(op)}, which "
                            "changes the query/key dims (only batch/head dims may be merged or split)", op)
            space = ish
            cur = src
            continue
        if op.name == "ik.cast":
            if not is_float_cast(op):
                return Fail(f"the scores pass through a cast to {op.attrs['to']}", op)
            cur = op.operand(0)
            continue
        if op.name == "ik.dropout":
            cur = op.operand(0)
            continue
        if op.name in ("ik.mul", "ik.div"):
            a, c = op.operands
            f = scalar_factor(c, a)
            if f is None and op.name == "ik.mul" and scalar_factor(a, c) is not None:
                f = scalar_factor(a, c)
                a, c = c, a
            if f is None:
                return Fail(f"the scores are multiplied by a non-scalar tensor ({c.type}) at {loc_str(op)}; "
                            "only a scalar factor is a scale", op)
            if op.name == "ik.div":
                if f == 0:
                    return Fail("the scores are divided by zero", op)
                f = 1.0 / f
            factor *= f
            cur = a
            continue
        if op.name == "ik.where":
            k, a, fill = op.operands
            fv = float_splat(fill)
            if not is_mask_fill(fv):
                fv2 = float_splat(a)
                if is_mask_fill(fv2):
                    return Fail("the mask fill is on the then side of the where (canonicalize puts it on the "
                                "else side)", op)
                if fv is None and fv2 is not None:
                    # masked_fill(x, m, c) is where(m, c, x): the constant is on the then side.
                    return Fail(f"the where (a masked_fill) fills masked scores with {fv2:g}, which is not a "
                                "mask value: masks fill with -inf, the dtype's minimum or a large negative "
                                "(<= -1e4)", op)
                what = f"{fv:g}" if fv is not None else "a non-constant tensor"
                return Fail(f"the where fills masked scores with {what}, not a mask value (-inf or <= -1e4)", op)
            lifted = _lifts_rank(a, op.results[0])
            if a.type != op.results[0].type and not lifted:
                return Fail("the where broadcasts the scores to a larger shape", op)
            if factor <= 0:
                return Fail(f"a non-positive factor {factor:g} multiplies masked scores", op)
            if softcap:
                return Fail("a mask is applied inside the tanh soft-cap (ik.attention masks after capping)", op)
            if space != tuple(x.type.shape):
                return Fail(f"a mask is applied under a reshape of the scores (in {list(space)}, not the "
                            f"softmax's {list(x.type.shape)})", op)
            if fv is not None:
                fills[id(k)] = fv * factor
            pending.append(("keep", k, factor))
            if lifted:  # the where also puts leading 1s on the scores: below it the walk is in their shape
                space = tuple(a.type.shape)
            cur = a
            continue
        if op.name in ("ik.add", "ik.sub"):
            lhs, rhs = op.operands
            lc, rc = _reaches_contraction(lhs), _reaches_contraction(rhs)
            if op.name == "ik.sub":
                if not lc or rc:
                    return Fail("the scores are subtracted from something, not shifted by a bias", op)
                return Fail("the scores have a tensor subtracted from them, not added as a bias", op)
            if lc and rc:
                return Fail(f"both operands of {loc_str(op)} come from a matmul; cannot tell scores from bias", op)
            if not lc and not rc:
                return Fail(f"neither operand of {loc_str(op)} comes from Q·Kᵀ", op)
            term, cur = (rhs, lhs) if lc else (lhs, rhs)
            lifted = _lifts_rank(cur, op.results[0])
            if cur.type != op.results[0].type and not lifted:
                return Fail("the additive term broadcasts the scores to a larger shape", op)
            if factor <= 0:
                return Fail(f"a non-positive factor {factor:g} multiplies the biased scores", op)
            if softcap:
                return Fail(f"a tensor is added to the scores inside the tanh soft-cap at {loc_str(op)} "
                            "(ik.attention adds its bias after capping)", op)
            if space != tuple(x.type.shape):
                spaces[id(term)] = space
            pending.append(("add", term, factor))
            if lifted:  # as for the where above
                space = tuple(cur.type.shape)
            continue
        return Fail(f"the softmax input comes from {loc_str(op)}, not from Q·Kᵀ through scale, soft-cap, mask, "
                    "bias, cast or a reshape of batch/head dims", op)
    qk = op
    if tuple(qk.results[0].type.shape) != tuple(x.type.shape):
        return Fail(f"the scores are reshaped between Q·Kᵀ {list(qk.results[0].type.shape)} and the softmax "
                    f"{list(x.type.shape)} and not back to the same shape", qk)
    am.softcap = softcap
    if softcap:
        factor *= softcap
    am.scale = factor
    # -- up: P -> (safe-softmax guard) -> (cast) -> matmul(P, V)
    p = sm.results[0] if not guard_ops else guard_ops[-1].results[0]
    while True:
        users = p.users
        if len(users) != 1 or len(p.uses) != 1:
            names = ", ".join(sorted({u.name for u in users})) or "none"
            return Fail(f"the attention probabilities have {len(p.uses)} uses ({names}), not one P·V matmul",
                        p.producer)
        u = users[0]
        if u.name in ("ik.cast", "ik.dropout") and (u.name == "ik.dropout" or is_float_cast(u)):
            ops.append(u)
            p = u.results[0]
            continue
        break
    if u.name != "ik.matmul":
        return Fail(f"the attention probabilities feed {loc_str(u)}, not a matmul with V", u)
    if u.operand(0) is not p:
        return Fail("the attention probabilities are the right operand of the matmul, not P·V", u)
    pv = u
    v = pv.operand(1)
    ops.append(pv)
    am.pv = pv

    if not math.isfinite(factor) or factor == 0:
        return Fail(f"the scale {factor:g} is not a finite non-zero number", qk)
    q, kt = qk.operands
    r = q.type.rank
    if r != kt.type.rank or r != v.type.rank:
        return Fail(f"Q, Kᵀ and V have ranks {q.type.rank}, {kt.type.rank}, {v.type.rank}; they must agree", qk)
    if r > 4:
        return Fail(f"rank-{r} attention operands (more than one batch dim besides heads) are not supported", qk)
    if r != rank:
        return Fail(f"the scores have rank {r} but the softmax rank {rank}", qk)

    # -- Q: its contracted (last) dim must be Q's own innermost dim
    qp = op_is(q, "ik.transpose")
    if qp is not None and qp.attrs["perm"][-1] != r - 1:
        return Fail(f"the scores' first operand is transposed with perm {list(qp.attrs['perm'])}, which moves "
                    f"dim {qp.attrs['perm'][-1]} into the contraction instead of the head dim", qp)
    # -- K: Kᵀ must be a transpose that puts K's innermost (head) dim second to last
    kp = op_is(kt, "ik.transpose")
    swap = tuple(range(r - 2)) + (r - 1, r - 2)
    if kp is not None:
        perm = tuple(kp.attrs["perm"])
        if perm[-2] != r - 1:
            return Fail(f"the scores' second operand is transposed with perm {list(perm)}, which is not the key "
                        f"transpose (it contracts dim {perm[-2]} of the key, not its head dim {r - 1})", kp)
        am.k_src = kp.operand(0)
        am.k_perm = tuple(perm[i] for i in swap)
    else:
        am.k_src = kt
        am.k_perm = swap
        am.notes.append("the key arrives already transposed; a transpose back to [.., S, D] is inserted")
    vp = op_is(v, "ik.transpose")
    if vp is not None:
        am.v_src, am.v_perm = vp.operand(0), tuple(vp.attrs["perm"])
    else:
        am.v_src, am.v_perm = v, tuple(range(r))
    common = _common_dtype([q, am.k_src, am.v_src])
    if common is None:
        return Fail(f"Q, K and V have element types {q.type.dtype}, {kt.type.dtype}, {v.type.dtype} "
                    "(not one float type, even before upcasts)", pv)
    q, am.k_src, am.v_src = common
    am.q = q

    # -- GQA: un-repeat K and V heads (only together, with the same factor)
    if r == 4:
        ku = _unrepeat(am.k_src, am.k_perm[1])
        vu = _unrepeat(am.v_src, am.v_perm[1])
        if ku is not None and vu is not None and ku[1] == vu[1]:
            am.k_small, am.v_small = (ku[0], ku[2]), (vu[0], vu[2])
            am.notes.append(f"K and V heads repeated {ku[1]}x are passed un-repeated (grouped-query attention)")

    # -- masks and biases, by value
    scores_shape = tuple(qk.results[0].type.shape)
    cl = _Classifier(scores_shape, am)
    fold: list[tuple[int, int, float]] = []  # (first, end) in am.masks of a where's explicit parts, its fill
    for kind, val, f in pending:
        if kind == "keep":
            if not val.type.dtype.is_bool:
                return Fail("the where condition is not boolean", val.producer)
            first = len(am.masks)
            cl.keep(val)
            if id(val) in fills:
                fold.append((first, len(am.masks), fills[id(val)]))
        elif id(val) in spaces:
            # added below a reshape of the batch/head dims: a bias in that space (ALiBi, DeBERTa's
            # relative-position terms), reshaped into the softmax's space by the rewrite
            am.bias_spaces[len(am.biases)] = spaces[id(val)]
            am.biases.append((val, f))
        else:
            why = cl.additive(val, f)
            if why:
                return Fail(why, val.producer)
    for m in am.masks + am.mask_eqs:
        if _bcast_fail(m.type.shape, scores_shape):
            return Fail(f"the mask of shape {list(m.type.shape)} does not broadcast to the scores", m.producer)
    for i, (bval, _) in enumerate(am.biases):
        if _bcast_fail(bval.type.shape, am.bias_spaces.get(i, scores_shape)):
            return Fail(f"the bias of shape {list(bval.type.shape)} does not broadcast to the scores",
                        bval.producer)
    if am.causal and r < 2:
        return Fail("causal mask on rank < 2 scores", qk)
    _fold_absorbing_masks(am, fold)

    # -- the fused op must give exactly the P·V result type
    out_shape = _attention_out_shape(am)
    if out_shape is None or tuple(out_shape) != tuple(pv.results[0].type.shape):
        return Fail("the attention output shape differs from the P·V result (batch dims broadcast)", pv)
    am.ops = ops
    return am


# ---------------------------------------------------------------------------
# Grouped attention as dot_general: jax.nn.dot_product_attention's spelling


@dataclass
class GroupedMatch:
    """Attention written with ``ik.contract`` over grouped query heads (``[B, T, K, G, H]``).

    ``jax.nn.dot_product_attention`` reshapes Q to ``[B, T, K, G, H]`` (K key/value
    heads, G query heads per group), contracts it with K into ``[B, K, T, G, S]``
    and V back out, with the scores permuted in between.  Each dim is tracked by
    a label — batch dims ``b0, b1``, query dims ``t`` (second to last in the
    softmax's space) and ``g``, key ``s`` — so Q, K and V can be laid out as
    ``ik.attention`` wants (``Hq = K * G`` heads, ``K`` of them for K and V) and
    the output permuted back to what the P·V contraction produced.
    """

    base: AttentionMatch
    q: Value
    q_order: tuple[int, ...]  # Q dims in order b..., g?, t, d
    k: Value
    k_order: tuple[int, ...]  # K dims in order b..., s, d
    v: Value
    v_order: tuple[int, ...]  # V dims in order b..., s, dv
    batch: tuple  # sizes of the batch labels
    g: int | SymDim  # size of g (1 when there is none)
    t: object
    x_shape: tuple  # the softmax's shape
    x_to_c: tuple[int, ...]  # inverse of the transpose between the contraction and the softmax
    c_order: tuple[int, ...]  # contraction dims in order b..., g?, t, s
    out_order: tuple[int, ...]  # fused [b..., g, t, dv] dims -> P·V result order


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def match_grouped(sm: Op, top: Op, guard_ops: list[Op], pending: list, factor: float,
                  ops: list[Op], softcap: float = 0.0) -> GroupedMatch | Fail:
    """The attention around ``sm`` whose scores are ``[transpose](contract(Q, K))``."""
    c = top if top.name == "ik.contract" else top.operand(0).producer
    assert c is not None
    perm = tuple(top.attrs["perm"]) if top.name == "ik.transpose" else tuple(range(c.results[0].type.rank))
    if top is not c:
        ops.append(c)
        if len(c.results[0].uses) != 1:
            return Fail("the scores contraction has another user", c)
    qg, kg = c.operands
    lb, rb = tuple(c.attrs.get("lhs_batch", ())), tuple(c.attrs.get("rhs_batch", ()))
    lc, rc = tuple(c.attrs["lhs_contract"]), tuple(c.attrs["rhs_contract"])
    if len(lc) != 1 or lc[0] != qg.type.rank - 1 or rc[0] != kg.type.rank - 1:
        return Fail("the scores contraction does not contract the head dim (the innermost) of Q and K", c)
    lf = [i for i in range(qg.type.rank) if i not in lb and i not in lc]
    rf = [i for i in range(kg.type.rank) if i not in rb and i not in rc]
    if len(rf) != 1 or len(lf) not in (1, 2) or len(lb) not in (1, 2):
        return Fail(f"a contraction with {len(lb)} batch, {len(lf)} query and {len(rf)} key dims is not "
                    "attention-shaped", c)
    nb = len(lb)
    c_rank = nb + len(lf) + 1
    if perm[-1] != c_rank - 1:
        return Fail("the key axis is not last where the softmax runs", top)
    # Label the contraction's dims: batch i -> i, query dims -> nb + j, key -> c_rank - 1.
    t_c = perm[-2]
    if not nb <= t_c < c_rank - 1:
        return Fail("the dim before the key axis is a batch dim, not a query position", top)
    g_c = next((d for d in range(nb, c_rank - 1) if d != t_c), None)
    c_order = tuple(range(nb)) + ((g_c,) if g_c is not None else ()) + (t_c, c_rank - 1)
    q_of = {nb + j: lf[j] for j in range(len(lf))}
    q_order = tuple(lb) + ((q_of[g_c],) if g_c is not None else ()) + (q_of[t_c], lc[0])
    k_order = tuple(rb) + (rf[0], rc[0])
    # -- up: P -> (guard) -> (cast) -> contract(V, P) or contract(P, V)
    p = sm.results[0] if not guard_ops else guard_ops[-1].results[0]
    while True:
        if len(p.uses) != 1:
            return Fail(f"the attention probabilities have {len(p.uses)} uses, not one P·V contraction",
                        p.producer)
        u = p.users[0]
        if is_float_cast(u) or u.name == "ik.dropout":
            ops.append(u)
            p = u.results[0]
            continue
        break
    if u.name != "ik.contract":
        return Fail(f"the attention probabilities feed {loc_str(u)}, not a contraction with V", u)
    d = u
    ops.append(d)
    p_is_lhs = d.operand(0) is p
    v = d.operand(1) if p_is_lhs else d.operand(0)
    pb, vb = (d.attrs.get("lhs_batch", ()), d.attrs.get("rhs_batch", ()))
    pc, vc = (d.attrs["lhs_contract"], d.attrs["rhs_contract"])
    if not p_is_lhs:
        pb, vb, pc, vc = vb, pb, vc, pc
    x_rank = p.type.rank
    if tuple(pc) != (x_rank - 1,) or len(vc) != 1:
        return Fail("the P·V contraction does not sum over the key axis", d)
    x_to_c = perm  # x dim i is contraction dim perm[i]
    label_of_x = {i: x_to_c[i] for i in range(x_rank)}
    batch_labels = [label_of_x[i] for i in pb]
    if sorted(batch_labels) != list(range(nb)):
        return Fail("the P·V contraction's batch dims are not the scores' batch dims", d)
    v_by_label = {lab: vd for lab, vd in zip(batch_labels, vb)}
    vf = [i for i in range(v.type.rank) if i not in vb and i not in vc]
    if len(vf) != 1:
        return Fail("V has more than one feature dim", d)
    v_order = tuple(v_by_label[i] for i in range(nb)) + (vc[0], vf[0])
    pf = [i for i in range(x_rank) if i not in pb and i not in pc]
    if sorted(label_of_x[i] for i in pf) != sorted(d_ for d_ in c_order[nb:-1]):
        return Fail("the P·V contraction keeps other dims than the query dims", d)
    # The P·V result's dims, as labels of the fused [b..., g?, t, dv] tensor.
    fused_pos = {lab: i for i, lab in enumerate(c_order[:-1])}
    dv_pos = len(c_order) - 1
    out_batch = [fused_pos[label_of_x[i]] for i in pb]
    out_p = [fused_pos[label_of_x[i]] for i in pf]
    out_labels = out_batch + (out_p + [dv_pos] if p_is_lhs else [dv_pos] + out_p)
    common = _common_dtype([qg, kg, v])
    if common is None:
        return Fail("Q, K and V are not of one float type, even before upcasts", c)
    qg, kg, v = common
    qsh = qg.type.shape
    batch = tuple(qsh[i] for i in lb)
    g = qsh[q_of[g_c]] if g_c is not None else 1
    t = qsh[q_of[t_c]]
    if softcap:
        factor *= softcap
    if not math.isfinite(factor) or factor == 0:
        return Fail(f"the scale {factor:g} is not a finite non-zero number", c)
    base = AttentionMatch(sm, d, q=qg, k_src=kg, k_perm=(), v_src=v, v_perm=(), rank=x_rank, scale=factor,
                          causal=False, softcap=softcap)
    cl = _Classifier(tuple(p.type.shape), base)
    for kind, val, f in pending:
        if kind == "keep":
            if not val.type.dtype.is_bool:
                return Fail("the where condition is not boolean", val.producer)
            cl.keep(val)
        else:
            cl.additive(val, f)
    base.ops = ops
    return GroupedMatch(base, qg, q_order, kg, k_order, v, v_order, batch, g, t, tuple(sm.operand(0).type.shape),
                        _inverse(perm), c_order, tuple(out_labels))


def rewrite_grouped(rw: Rewriter, gm: GroupedMatch) -> Value:
    """Build ``ik.attention`` for a :class:`GroupedMatch`; returns the value replacing the P·V result."""
    am = gm.base
    pv = am.pv
    nb = len(gm.batch)
    bsz = gm.batch[0]
    hkv = gm.batch[1] if nb == 2 else 1
    hq = dim_prod([hkv, gm.g])
    q = reshaped(rw, pv, transposed(rw, pv, gm.q, gm.q_order), (bsz, hq, gm.t, gm.q.type.shape[-1]))
    k = reshaped(rw, pv, transposed(rw, pv, gm.k, gm.k_order),
                 (bsz, hkv) + tuple(gm.k.type.shape[i] for i in gm.k_order[nb:]))
    v = reshaped(rw, pv, transposed(rw, pv, gm.v, gm.v_order),
                 (bsz, hkv) + tuple(gm.v.type.shape[i] for i in gm.v_order[nb:]))

    def to_fused(val: Value) -> Value:
        # softmax-space [..] -> contraction space -> [b..., g?, t, s] -> [B, Hq, T, S]
        full = val if tuple(val.type.shape) == gm.x_shape else emit_op(rw, pv, "ik.broadcast", val, shape=gm.x_shape)
        c_space = transposed(rw, pv, full, gm.x_to_c)
        ordered = transposed(rw, pv, c_space, gm.c_order)
        return reshaped(rw, pv, ordered, (bsz, hq, gm.t, gm.x_shape[-1]))

    masks = [to_fused(mv) for mv in am.masks]
    for a in am.mask_eqs:
        masks.append(to_fused(emit_op(rw, pv, "ik.eq", a, const_scalar(rw, pv, 0.0, a.type.dtype))))
    mask = None
    for mv in masks:
        mask = mv if mask is None else emit_op(rw, pv, "ik.and", mask, mv)
    bias = None
    for bval, f in am.biases:
        if f != 1.0:
            bval = emit_op(rw, pv, "ik.mul", bval, const_scalar(rw, pv, f, bval.type.dtype))
        bval = to_fused(bval)
        bias = bval if bias is None else emit_op(rw, pv, "ik.add", bias, bval)
    attrs = _attrs(am)
    loc = Location.fuse([o.loc for o in reversed(am.ops)])
    out = rw.create(pv, "ik.attention", [q, k, v, mask, bias], attrs, loc=loc).results[0]
    # [B, Hq, T, Dv] -> [b..., g?, t, dv] -> the P·V result's order
    split = tuple(gm.batch) + ((gm.g,) if len(gm.c_order) == nb + 3 else ()) + (gm.t, out.type.shape[-1])
    out = transposed(rw, pv, reshaped(rw, pv, out, split), gm.out_order)
    if out.type.dtype != pv.results[0].type.dtype:
        out = emit_op(rw, pv, "ik.cast", out, to=pv.results[0].type.dtype)
    return out


ABSORBING_FILL = 1e30
"""A where-fill at least this large in magnitude absorbs any score added to it (float32's and bfloat16's
``finfo.min`` are about -3.4e38): ``s + fill == fill`` in float32 and float64 for every real score."""


def _fold_absorbing_masks(am: AttentionMatch, fold: list[tuple[int, int, float]]) -> None:
    """Fold explicit keep-masks filled with an absorbing finite value into the bias, when there is one.

    ``where(keep, s, fill)`` with ``fill = finfo(f32).min`` gives a row whose every key is masked the
    uniform average of V; as an ``ik.attention`` mask that row would be zeros.  With a bias already an
    operand (DeBERTa-v2: relative-position terms, and a padding mask that masks whole query rows),
    ``where(keep, bias, fill)`` as the bias keeps every row's unfused value at no extra tensor.
    """
    if not am.biases:
        return
    drop: set[int] = set()
    for first, end, fill in fold:
        if not (math.isfinite(fill) and fill <= -ABSORBING_FILL):
            continue
        for i in range(first, end):
            am.folded.append((am.masks[i], fill))
            drop.add(i)
    if drop:
        am.masks = [m for i, m in enumerate(am.masks) if i not in drop]
        am.notes.append("the keep-mask filled with a finite minimum is folded into the bias "
                        "(a row with every key masked keeps the unfused mean of V)")


def _attrs(am: AttentionMatch) -> dict:
    attrs: dict = {"scale": float(am.scale)}
    if am.causal:
        attrs["causal"] = True
    if am.softcap:
        attrs["softcap"] = float(am.softcap)
    return attrs


def _into_scores_space(rw: Rewriter, before: Op, t: Value, space: tuple, final: tuple) -> Value:
    """Term ``t``, broadcastable to scores of shape ``space``, as a term of the softmax's scores ``final``.

    ``space`` and ``final`` differ only in their leading (batch/head) dims, whose row-major order a
    reshape keeps, so the term keeps its own trailing (query/key) dims and only its leading dims are
    merged or split; a term broadcast along only some of the merged dims is broadcast first.
    """
    ts = tuple(t.type.shape)
    if len(ts) < len(space):
        ts = (1,) * (len(space) - len(ts)) + ts
        t = reshaped(rw, before, t, ts)
    trail = ts[-2:]
    lead_in, lead_out = tuple(space[:-2]), tuple(final[:-2])
    if all(d == 1 for d in ts[:-2]):
        return reshaped(rw, before, t, (1,) * len(lead_out) + trail)
    if tuple(ts[:-2]) != lead_in:
        t = emit_op(rw, before, "ik.broadcast", t, shape=lead_in + trail)
    return reshaped(rw, before, t, lead_out + trail)


def _bcast_fail(shape: tuple, scores: tuple) -> bool:
    try:
        return broadcast_shapes(shape, scores) != tuple(scores) and len(shape) <= len(scores)
    except ValueError:
        return True


def _attention_out_shape(am: AttentionMatch) -> tuple | None:
    q = am.q.type.shape
    v = tuple(am.v_src.type.shape[i] for i in am.v_perm)
    return tuple(q[:-1]) + (v[-1],)


class FuseAttentionPattern(Pattern):
    """Match a softmax and the matmuls around it; rewrite them into ``ik.attention``."""

    name = "fuse-attention"
    roots = ("ik.softmax",)
    explain = True
    benefit = 10

    def __init__(self, notes: list[NearMiss] | None = None):
        self.notes = notes if notes is not None else []

    def match(self, op: Op) -> Match | Fail:
        am = match_attention(op)
        if isinstance(am, Fail):
            return am
        return Match(am=am)

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        if isinstance(m["am"], GroupedMatch):
            gm: GroupedMatch = m["am"]
            out = rewrite_grouped(rw, gm)
            if out.type != gm.base.pv.results[0].type:
                return
            rw.replace_op(gm.base.pv, [out])
            att = next(o for o in producer_chain(out) if o.name == "ik.attention")
            for n in gm.base.notes:
                self.notes.append(FusionNote(self.name, att, n))
            return
        am: AttentionMatch = m["am"]
        pv = am.pv
        loc = Location.fuse([o.loc for o in reversed(am.ops)])
        r = am.rank
        q = am.q
        k_src, v_src = am.k_src, am.v_src
        if am.k_small is not None and am.v_small is not None:
            k_src = reshaped(rw, pv, am.k_small[0], am.k_small[1])
            v_src = reshaped(rw, pv, am.v_small[0], am.v_small[1])
        k = transposed(rw, pv, k_src, am.k_perm)
        v = transposed(rw, pv, v_src, am.v_perm)
        masks: list[Value] = list(am.masks)
        for a in am.mask_eqs:
            zero = const_scalar(rw, pv, 0.0, a.type.dtype)
            masks.append(emit_op(rw, pv, "ik.eq", a, zero))
        mask = None
        for mv in masks:
            mask = mv if mask is None else emit_op(rw, pv, "ik.and", mask, mv)
        bias = None
        scores = tuple(am.softmax.operand(0).type.shape)
        for i, (bval, f) in enumerate(am.biases):
            if f != 1.0:
                bval = emit_op(rw, pv, "ik.mul", bval, const_scalar(rw, pv, f, bval.type.dtype))
            if i in am.bias_spaces:
                bval = _into_scores_space(rw, pv, bval, am.bias_spaces[i], scores)
            bias = bval if bias is None else emit_op(rw, pv, "ik.add", bias, bval)
        for keep, fill in am.folded:
            assert bias is not None  # folded only into an existing bias
            bias = emit_op(rw, pv, "ik.where", keep, bias, const_scalar(rw, pv, fill, bias.type.dtype))
        if r != 4:
            lead = (1,) * (4 - r)
            q = emit_op(rw, pv, "ik.reshape", q, shape=lead + tuple(q.type.shape))
            k = emit_op(rw, pv, "ik.reshape", k, shape=lead + tuple(k.type.shape))
            v = emit_op(rw, pv, "ik.reshape", v, shape=lead + tuple(v.type.shape))
        attrs = _attrs(am)
        out = rw.create(pv, "ik.attention", [q, k, v, mask, bias], attrs, loc=loc).results[0]
        if r != 4:
            out = emit_op(rw, pv, "ik.reshape", out, shape=pv.results[0].type.shape)
        if out.type.dtype != pv.results[0].type.dtype:
            out = emit_op(rw, pv, "ik.cast", out, to=pv.results[0].type.dtype)
        rw.replace_op(pv, [out])
        made = out.producer
        assert made is not None  # created just above
        noted = made if r == 4 else made.operand(0).producer
        assert noted is not None
        for n in am.notes:
            self.notes.append(FusionNote(self.name, noted, n))


def fuse_attention_patterns(notes: list[NearMiss] | None = None) -> list[Pattern]:
    return [FuseAttentionPattern(notes)]


@register_pass("fuse-attention")
@dataclass(frozen=True)
class FuseAttention(Pass):
    """Fuse softmax(scale·QKᵀ + bias, mask)·V into one ``ik.attention`` (any layout, GQA, causal).

    before: %s = "ik.matmul"(%q, %kt) ...   %kt = "ik.transpose"(%k) {perm = [0, 1, 3, 2]}
            %c = "ik.mul"(%s, %scale) ...  %w = "ik.where"(%causal, %c, %ninf) ...
            %p = "ik.softmax"(%w) {axis = -1} ...
            %o = "ik.matmul"(%p, %v) ...
    after:  %o = "ik.attention"(%q, %k, %v) {causal = true, scale = 0.125} ...
    """

    def run(self, module, ctx: PassContext) -> bool:
        notes: list[NearMiss] = []
        return run_fusion(module, ctx, fuse_attention_patterns(notes), "fused-attentions", notes)

