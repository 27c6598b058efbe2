"""Unit tests of the fusion machinery: value checks, explain, statistics and the per-rewrite checker."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from irkit.errors import NumericsError
from irkit.ir import Builder, Dense, DType, Op, SymDim, TensorType, verify
from irkit.ir.builder import module_of, new_function
from irkit.passmanager import PassContext, PassManager, load_builtin_passes, run_pipeline
from irkit.rewrite import Match, Pattern, Rewriter, apply_patterns, splat_constant
from irkit.rewrite.numeric_check import RewriteChecker, cone, evaluate

load_builtin_passes()

from irkit.passes.canon_attention import keep_pattern, same_value
from irkit.passes.fuse_attention import _unrepeat, match_attention


def T(*shape: object, dt: DType = DType.f32) -> TensorType:
    return TensorType(tuple(shape), dt)  # type: ignore[arg-type]


def _attention(mask: np.ndarray | None = None, fill: float = -1e9, scale: float = 0.5, s: int = 4):
    f, b = new_function("main", [T(1, 2, s, 8)] * 3, ["q", "k", "v"])
    q, k, v = f.args
    x = b.mul(b.matmul(q, b.transpose(k, perm=(0, 1, 3, 2))), b.scalar(scale, DType.f32))
    if mask is not None:
        x = b.where(b.constant(mask), x, b.scalar(fill, DType.f32))
    o = b.matmul(b.softmax(x, axis=-1), v)
    b.ret(o)
    m = module_of(f)
    verify(m)
    return m


# ---------------------------------------------------------------------------
# value checks


def test_keep_pattern_tells_causal_from_other_constants() -> None:
    _f, b = new_function("main", [], [])
    tril = b.constant(np.tril(np.ones((5, 5), dtype=bool)))
    triu = b.constant(np.triu(np.ones((5, 5), dtype=bool)))
    ones = b.constant(np.ones((1, 5), dtype=bool))
    b.ret(tril, triu, ones)
    assert keep_pattern(tril, (1, 2, 5, 5))[0] == "causal"
    kind, detail = keep_pattern(triu, (1, 2, 5, 5))
    assert kind == "other" and "query 0 keeps key 1" in detail
    assert keep_pattern(ones, (1, 2, 5, 5))[0] == "all"


def test_keep_pattern_checks_symbolic_iota_compare_at_several_sizes() -> None:
    s = SymDim.symbol("S")
    _f, b = new_function("main", [], [])
    row = b.iota(shape=(s, s), axis=0, dtype=DType.i64)
    col = b.iota(shape=(s, s), axis=1, dtype=DType.i64)
    causal = b.le(col, row)
    shifted = b.lt(col, row)  # strictly below the diagonal: query 0 keeps nothing
    b.ret(causal, shifted)
    assert keep_pattern(causal, (1, 1, s, s))[0] == "causal"
    assert keep_pattern(shifted, (1, 1, s, s))[0] == "other"


@pytest.mark.parametrize("window", [3, 8, 100])
def test_a_sliding_window_is_not_causal_though_it_is_at_small_sizes(window: int) -> None:
    """keep = (kv <= q) & (kv > q - w) equals the causal mask at every size up to w: the check
    must look past the window (Mistral's mask, exported through ONNX, was fused as causal)."""
    s = SymDim.symbol("S")
    _f, b = new_function("main", [], [])
    row = b.iota(shape=(s, s), axis=0, dtype=DType.i64)
    col = b.iota(shape=(s, s), axis=1, dtype=DType.i64)
    in_window = b.gt(col, b.sub(row, b.scalar(window, DType.i64)))
    b.ret(in_window)
    kind, detail = keep_pattern(in_window, (1, 1, s, s))
    assert kind == "other"
    if window >= 8:  # past the fixed sample sizes: found at the size just past the window
        assert f"'S': {window + 2}" in detail


def test_a_window_too_large_to_check_is_not_called_causal() -> None:
    s = SymDim.symbol("S")
    _f, b = new_function("main", [], [])
    row = b.iota(shape=(s, s), axis=0, dtype=DType.i64)
    col = b.iota(shape=(s, s), axis=1, dtype=DType.i64)
    in_window = b.gt(col, b.sub(row, b.scalar(1 << 20, DType.i64)))
    b.ret(in_window)
    assert keep_pattern(in_window, (1, 1, s, s))[0] == "unknown"


def test_keep_pattern_of_an_input_is_unknown() -> None:
    f, b = new_function("main", [T(4, 4, dt=DType.bool)], ["m"])
    b.ret(f.args[0])
    assert keep_pattern(f.args[0], (1, 1, 4, 4))[0] == "unknown"


def test_unrepeat_accepts_repeat_interleave_and_rejects_tile() -> None:
    f, b = new_function("main", [T(1, 2, 6, 8)], ["k"])
    k = f.args[0]
    rep = b.reshape(b.broadcast(b.reshape(k, shape=(1, 2, 1, 6, 8)), shape=(1, 2, 3, 6, 8)), shape=(1, 6, 6, 8))
    tile = b.reshape(b.broadcast(b.reshape(k, shape=(1, 1, 2, 6, 8)), shape=(1, 3, 2, 6, 8)), shape=(1, 6, 6, 8))
    idx_rep = b.gather(k, b.constant(np.array([0, 0, 0, 1, 1, 1], dtype=np.int64)), axis=1)
    idx_tile = b.gather(k, b.constant(np.array([0, 1, 0, 1, 0, 1], dtype=np.int64)), axis=1)
    b.ret(rep, tile, idx_rep, idx_tile)
    got = _unrepeat(rep, 1)
    assert got is not None and got[1] == 3 and got[2] == (1, 2, 6, 8)
    assert _unrepeat(tile, 1) is None
    got = _unrepeat(idx_rep, 1)
    assert got is not None and got[0] is k and got[1] == 3
    assert _unrepeat(idx_tile, 1) is None


def test_same_value_is_structural() -> None:
    f, b = new_function("main", [T(4), T(4)], ["x", "y"])
    x, y = f.args
    a1, a2, a3 = b.sub(x, y), b.sub(x, y), b.sub(y, x)
    b.ret(a1, a2, a3)
    assert same_value(a1, a2)
    assert not same_value(a1, a3)


def test_cone_evaluation_uses_constant_values() -> None:
    f, b = new_function("main", [T(3)], ["x"])
    c = b.add(b.constant(np.arange(3, dtype=np.float32)), b.scalar(1.0, DType.f32))
    d = b.add(c, f.args[0])
    b.ret(d)
    assert np.array_equal(evaluate(c, {}), [1.0, 2.0, 3.0])
    assert evaluate(d, {}) is None  # depends on an argument
    assert cone(d) is None


# ---------------------------------------------------------------------------
# the matcher says why


@pytest.mark.parametrize("mutate, reason", [
    (lambda b, s: b.softmax(s, axis=2), "softmax is over axis 2, not the key axis 3"),
    (lambda b, s: b.softmax(b.exp(s), axis=-1), "the softmax input comes from 'ik.exp'"),
])
def test_match_attention_failure_reasons(mutate, reason: str) -> None:
    f, b = new_function("main", [T(1, 2, 4, 4)] * 3, ["q", "k", "v"])
    q, k, v = f.args
    s = b.matmul(q, b.transpose(k, perm=(0, 1, 3, 2)))
    p = mutate(b, s)
    b.ret(b.matmul(p, v))
    got = match_attention(p.producer)
    assert not got and reason in got.reason  # type: ignore[union-attr]


def test_explain_reports_every_softmax_that_did_not_fuse() -> None:
    f, b = new_function("main", [T(2, 10)], ["logits"])
    b.ret(b.softmax(f.args[0], axis=-1))  # a classifier head, not attention
    m = module_of(f)
    ctx = PassContext(explain=True)
    PassManager("canonicalize,fuse-attention", ctx=ctx).run(m)
    msgs = [nm.describe() for nm in ctx.near_misses]
    assert any("fuse-attention: 'ik.softmax'" in x and "function argument" in x for x in msgs), msgs


def test_statistics_count_fusions_per_pass() -> None:
    m = _attention(np.tril(np.ones((4, 4), dtype=bool)))
    ctx = PassContext()
    PassManager("canonicalize,fuse-attention,fuse-norm,fuse-activation", ctx=ctx).run(m)
    assert ctx.stats["fuse-attention"]["fused-attentions"] == 1
    assert ctx.stats["fuse-norm"]["fused-norms"] == 0
    assert ctx.stats["fuse-activation"]["fused-activations"] == 0


def test_statistics_count_fusions_per_function() -> None:
    fused = _attention(np.tril(np.ones((4, 4), dtype=bool))).entry
    unfused = _attention(np.tril(np.ones((4, 4), dtype=bool)), fill=-100.0).entry  # -100 is not a mask value
    fused.name, unfused.name = "fused", "unfused"
    m = module_of(fused, unfused)
    ctx = PassContext()
    PassManager("canonicalize,fuse-attention", ctx=ctx).run(m)
    stats = ctx.stats["fuse-attention"]
    assert stats["fused-attentions"] == 1
    assert stats["fused-attentions@fused"] == 1
    assert stats["fused-attentions@unfused"] == 0


def test_causal_flag_only_for_a_lower_triangular_constant() -> None:
    for mask, causal in ((np.tril(np.ones((4, 4), dtype=bool)), True), (np.triu(np.ones((4, 4), dtype=bool)), False)):
        m = _attention(mask)
        run_pipeline(m, "canonicalize,fuse-attention,cse,dce")
        att = [op for op in m.walk() if op.name == "ik.attention"]
        assert len(att) == 1 and att[0].attrs.get("causal", False) == causal
        assert (att[0].num_operands == 4) == (not causal)


def test_finite_fill_above_threshold_is_not_a_mask() -> None:
    m = _attention(np.tril(np.ones((4, 4), dtype=bool)), fill=-100.0)
    run_pipeline(m, "canonicalize,fuse-attention")
    assert not any(op.name == "ik.attention" for op in m.walk())


# ---------------------------------------------------------------------------
# --check-rewrites


@dataclass
class _WrongScale(Pattern):
    """A deliberately wrong 'fusion': rewrites softmax(x) into softmax(2x)."""

    name: str = "wrong-scale"
    roots: tuple = ("ik.softmax",)

    def match(self, op: Op) -> Match | None:
        p = op.operand(0).producer
        done = p is not None and p.name == "ik.mul" and splat_constant(p.operand(1)) == 2.0
        return None if done else Match()

    def rewrite(self, rw: Rewriter, op: Op, m: Match) -> None:
        x = op.operand(0)
        two = rw.create(op, "ik.constant", [], {"value": Dense.splat(2.0, (), DType.f32)}).results[0]
        y = rw.create(op, "ik.mul", [x, two], {}).results[0]
        rw.replace_op(op, [rw.create(op, "ik.softmax", [y], dict(op.attrs)).results[0]])


def test_checker_catches_a_wrong_rewrite_and_names_it() -> None:
    m = _attention()
    with pytest.raises(NumericsError, match=r"pattern 'wrong-scale' at ik.softmax .*changed the numbers"):
        apply_patterns(m, [_WrongScale()], on_rewrite=RewriteChecker())


def test_checker_passes_a_right_rewrite_and_exercises_fully_masked_rows() -> None:
    f, b = new_function("main", [T(2, 2, 4, 8)] * 3 + [T(2, 4, dt=DType.i64)], ["q", "k", "v", "attention_mask"])
    q, k, v, am = f.args
    s = b.mul(b.matmul(q, b.transpose(k, perm=(0, 1, 3, 2))), b.scalar(0.25, DType.f32))
    pad = b.mul(b.sub(b.scalar(1.0, DType.f32), b.cast(b.reshape(am, shape=(2, 1, 1, 4)), to=DType.f32)),
                b.scalar(-10000.0, DType.f32))
    b.ret(b.matmul(b.softmax(b.add(s, pad), axis=-1), v))
    m = module_of(f)
    run_pipeline(m, "canonicalize")
    checker = RewriteChecker(seed=3)
    from irkit.passes.fuse_attention import fuse_attention_patterns

    apply_patterns(m, fuse_attention_patterns(), on_rewrite=checker)
    assert checker.checked == 1
    # Batch 0's mask is forced to all zeros: those rows are fully masked and were set aside.
    assert checker.masked_positions > 0


def test_check_rewrites_runs_in_every_fusion_pass() -> None:
    m = _attention(np.tril(np.ones((4, 4), dtype=bool)), fill=-math.inf)
    ctx = PassContext(check_rewrites=True)
    PassManager("canonicalize,fuse-attention", ctx=ctx).run(m)
    assert ctx.stats["fuse-attention"]["rewrites-checked"] == 1


def test_builder_graph_is_untouched_by_failed_matches() -> None:
    m = _attention(np.tril(np.ones((4, 4), dtype=bool)), fill=-100.0)
    before = m.num_ops()
    run_pipeline(m, "fuse-attention")
    assert m.num_ops() == before
    assert isinstance(Builder, type)
