"""IR core: dims, types, builder, uses, clone, verifier messages."""

from __future__ import annotations

import numpy as np
import pytest

from irkit.ir import (Builder, BuildError, DType, Graph, Location, Module, SymDim, TensorType, VerifyError,
                      new_function, parse_dim, verify)
from irkit.ir.core import Op
from irkit.ir.types import broadcast_shapes, dim_floordiv

S, B = SymDim.symbol("S"), SymDim.symbol("B")


def test_symbolic_dims_are_canonical_polynomials() -> None:
    assert B * S == S * B
    assert str(B * S + 1) == "B*S+1"
    assert parse_dim("2*S-1") == 2 * S - 1
    assert parse_dim("S*B") == B * S
    assert dim_floordiv(B * S * 12, 12) == B * S
    assert dim_floordiv(B * S, S) == B
    assert dim_floordiv(S + 1, 2) is None
    assert (S + 1).evaluate({"S": 7}) == 8
    with pytest.raises(ValueError):
        parse_dim("S+")


def test_broadcast_with_symbols() -> None:
    assert broadcast_shapes((B, 1, 8), (S, 1)) == (B, S, 8)
    assert broadcast_shapes((S, 4), (1, 4)) == (S, 4)
    with pytest.raises(ValueError):
        broadcast_shapes((3, 4), (5, 4))


def test_tensor_type_text() -> None:
    t = TensorType((B, S, 768), DType.bf16)
    assert str(t) == 'tensor<?x?x768xbf16, ["B", "S"]>'
    assert str(TensorType((), DType.bool)) == "tensor<i1>"
    assert t.num_elements({"B": 2, "S": 3}) == 2 * 3 * 768
    assert t.nbytes({"B": 1, "S": 1}) == 768 * 2


def test_builder_infers_types_and_tracks_uses() -> None:
    f, b = new_function("main", [TensorType((B, S, 16), DType.f32), TensorType((16, 8), DType.f32)])
    x, w = f.args
    y = b.matmul(x, w)
    assert y.type == TensorType((B, S, 8), DType.f32)
    z = b.add(y, y)
    assert [op.name for op, _ in y.uses] == ["ik.add", "ik.add"]
    r = b.reshape(z, shape=(B * S, 8))
    assert r.type.shape == (B * S, 8)
    b.ret(r)
    verify(Module([f]))
    # replace_all_uses_with moves every use
    e = Builder.before_op(z.producer).exp(y)
    y.replace_all_uses_except(e, e.producer)
    assert len(y.uses) == 1 and y.uses[0][0].name == "ik.exp"
    verify(Module([f]))


def test_builder_rejects_bad_ops_with_location() -> None:
    f, b = new_function("main", [TensorType((4, 5), DType.f32), TensorType((6, 7), DType.f32)])
    b.loc = Location("model.py", 42, 0)
    with pytest.raises(BuildError, match=r"'ik.matmul' at model.py:42.*contracting dims differ"):
        b.matmul(*f.args)
    with pytest.raises(BuildError, match="missing required attribute 'perm'"):
        b.transpose(f.args[0])
    with pytest.raises(BuildError, match="unknown attribute 'bogus'"):
        b.exp(f.args[0], bogus=1)
    with pytest.raises(BuildError, match="one element type"):
        b.add(f.args[0], b.scalar(1, DType.i32))


def test_verifier_reports_every_problem_with_location() -> None:
    f, b = new_function("main", [TensorType((4,), DType.f32)])
    x = f.args[0]
    e = b.exp(x)
    b.ret(e)
    # Corrupt: wrong result type, an op out of order, an unknown op.
    bad = Op("ik.neg", [x], [TensorType((5,), DType.f32)], loc=Location("m.py", 3, 1))
    f.body.insert_before(e.producer, bad)
    late = Op("ik.exp", [x], [x.type])
    f.body.append(late)  # after the terminator
    with pytest.raises(VerifyError) as ei:
        verify(Module([f]))
    msgs = [str(d) for d in ei.value.diagnostics]
    assert any("'ik.neg' at m.py:3:1: result 0 has type tensor<5xf32>, but type inference gives tensor<4xf32>" in m
               for m in msgs), msgs
    assert any("terminator is not the last op" in m for m in msgs)


def test_verifier_catches_use_before_def() -> None:
    f, b = new_function("main", [TensorType((4,), DType.f32)])
    y = b.exp(f.args[0])
    z = b.neg(y)
    b.ret(z)
    f.body.unlink(z.producer)
    f.body.insert_before(y.producer, z.producer)
    with pytest.raises(VerifyError, match="used before it is defined"):
        verify(Module([f]))


def test_clone_is_deep_and_equal() -> None:
    from irkit.testing.blocks import gpt2_style_module
    from irkit.text import print_module

    m = gpt2_style_module(layers=1)
    c = m.clone()
    assert print_module(c) == print_module(m)
    assert next(iter(c.entry.body)) is not next(iter(m.entry.body))
    # editing the clone leaves the original alone
    first = next(iter(c.entry.body))
    assert first.parent is c.entry.body


def test_graph_linked_list_edits() -> None:
    g = Graph([TensorType((2,), DType.f32)])
    b = Builder.at_end(g)
    a1 = b.exp(g.args[0])
    a3 = b.neg(a1)
    Builder.before_op(a3.producer).abs(a1)
    assert [op.name for op in g] == ["ik.exp", "ik.abs", "ik.neg"]
    g.erase(list(g)[1])
    assert [op.name for op in g] == ["ik.exp", "ik.neg"] and len(g) == 2
    with pytest.raises(ValueError, match="still used"):
        g.erase(a1.producer)


def test_dense_is_immutable_and_splat_is_free() -> None:
    from irkit.ir import Dense

    a = np.arange(6, dtype=np.float32)
    d = Dense(a)
    a[0] = 99
    assert d.array[0] == 0
    with pytest.raises(ValueError):
        d.array[0] = 1
    big = Dense.splat(1.5, (99999999999, 99999999999), DType.f32)
    assert big.is_splat and big.shape == (99999999999, 99999999999)
