"""House contracts of the passes: option checks, declared pass attributes, patterns that say why."""

from __future__ import annotations

import pytest

from irkit.errors import PipelineError
from irkit.passmanager import parse_pipeline


@pytest.mark.parametrize("text, message", [
    ("canonicalize{max-rewrites=-1}", "pass 'canonicalize': max-rewrites must be >= 0"),
    ("assign-layout{min-dim=-5}", "pass 'assign-layout': min-dim must be >= 1, got -5"),
    ("assign-layout{min-dim=0}", "min-dim must be >= 1, got 0"),
])
def test_negative_numeric_options_are_refused_when_parsed(text: str, message: str) -> None:
    with pytest.raises(PipelineError, match=message):
        parse_pipeline(text)


def test_valid_numeric_options_parse() -> None:
    canon, layout = parse_pipeline("canonicalize{max-rewrites=5},assign-layout{min-dim=8}")
    assert canon.max_rewrites == 5 and layout.min_dim == 8


def _filecheck_functions() -> list:
    """Every function of the FileCheck inputs of the canonicalize and fusion passes."""
    from pathlib import Path

    from irkit.text import parse_module

    root = Path(__file__).resolve().parents[1] / "filecheck"
    out = []
    for sub in ("canonicalize", "canonicalize-attention", "fuse-attention", "fuse-norm",
                "fuse-activation", "fuse-elementwise"):
        for path in sorted((root / sub).glob("*.mlir")):
            for chunk in path.read_text().split("// -----"):
                if '"func.func"' in chunk:
                    try:
                        out.extend(parse_module(chunk).functions)
                    except ValueError:
                        continue  # an input written to test the parser's error
    return out


def test_every_pattern_returns_match_or_fail_with_a_reason() -> None:
    from irkit.passes.canonicalize import canonicalization_patterns
    from irkit.passes.fuse_activation import FuseActivationPattern
    from irkit.passes.fuse_attention import FuseAttentionPattern
    from irkit.passes.fuse_elementwise import ElementwiseGroupPattern, MatmulEpiloguePattern
    from irkit.passes.fuse_norm import FuseNormPattern

    from irkit.rewrite import Fail, Match

    patterns = [*canonicalization_patterns(), FuseAttentionPattern(), FuseNormPattern(),
                FuseActivationPattern(), MatmulEpiloguePattern(), ElementwiseGroupPattern()]
    functions = _filecheck_functions()
    assert len(functions) > 40
    tried = matched = 0
    for f in functions:
        for op in list(f.body):
            for p in patterns:
                if p.roots and op.name not in p.roots or not p.roots and not p.applies_to(op.name):
                    continue
                m = p.match(op)
                tried += 1
                assert isinstance(m, (Match, Fail)), (p.name, op.name, m)
                if isinstance(m, Fail):
                    assert isinstance(m.reason, str) and m.reason.strip(), (p.name, op.name)
                else:
                    matched += 1
    assert tried > 500 and 0 < matched < tried, (tried, matched)


def test_pass_attributes_are_declared_on_the_base_class() -> None:
    from irkit.passmanager import Pass, make_pass

    assert Pass.exact is False and Pass.rounds_ops == ()
    assert make_pass("cse").exact and make_pass("dce").exact
    assert not make_pass("canonicalize").exact
    assert "ik.matmul" in make_pass("mixed-precision").rounds_ops
    assert "exact" not in {o.name for o in Pass.options()}


def test_fusion_graph_walks() -> None:
    from irkit.ir import DType, TensorType
    from irkit.ir.builder import new_function
    from irkit.rewrite.fusion import expression_ops, only_user, other_operand, producer_chain

    f, b = new_function("f", [TensorType((2, 3), DType.f32), TensorType((2, 3), DType.f32)])
    x, w = f.args
    c = b.scalar(0.5, DType.f32)
    h = b.mul(x, c)
    t = b.tanh(h)
    y = b.add(t, w)
    b.ret(y)
    assert only_user(h) is t.producer and only_user(x) is h.producer
    assert other_operand(y.producer, t) is w and other_operand(y.producer, y) is None
    assert [o.name for o in producer_chain(y)] == ["ik.add", "ik.tanh", "ik.mul"]
    ops, leaves = expression_ops(y.producer, x)
    assert {o.name for o in ops} == {"ik.add", "ik.tanh", "ik.mul", "ik.constant"}
    assert set(leaves) == {id(x), id(w)}
    # A walk that does not enter constants and stops at tanh.
    ops, leaves = expression_ops(y.producer, enter=lambda p: p.name != "ik.tanh")
    assert [o.name for o in ops] == ["ik.add"] and set(leaves) == {id(t), id(w)}
    ops, leaves = expression_ops(y.producer, skip=lambda v: v is w, limit=2)
    assert len(ops) == 2 and id(w) not in leaves
