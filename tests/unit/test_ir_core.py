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


def test_integer_dtypes_signed_and_unsigned() -> None:
    from irkit.ir.types import promote

    signed = {DType.i8, DType.i16, DType.i32, DType.i64}
    unsigned = {DType.ui8, DType.ui16, DType.ui32, DType.ui64}
    for d in DType:
        assert d.is_int == (d in signed | unsigned), d
        assert d.is_signed == (d in signed) and d.is_unsigned == (d in unsigned), d
        if d.is_int:
            assert d.bits == 8 * d.itemsize and DType.from_numpy(d.np) is d and DType.parse(str(d)) is d
    assert not DType.bool.is_int and not DType.f32.is_signed and DType.bool.bits == 1
    assert DType.from_numpy(np.uint8) is DType.ui8 and DType.from_numpy(np.int16) is DType.i16
    assert promote(DType.ui8, DType.i8) is DType.i16 and promote(DType.ui32, DType.i64) is DType.i64
    assert promote(DType.ui64, DType.i32) is DType.i64 and promote(DType.ui8, DType.ui16) is DType.ui16
    assert promote(DType.ui8, DType.f16) is DType.f16
    with pytest.raises(ValueError, match="unknown element type 'u8'"):
        DType.parse("u8")


@pytest.mark.parametrize("name, types, attrs, msg", [
    ("ik.tan", [TensorType((3,), DType.i32)], {}, "must be a float type, got i32"),
    ("ik.bitwise_not", [TensorType((3,), DType.f32)], {}, "must be an integer type"),
    ("ik.isnan", [TensorType((3,), DType.i64)], {}, "must be a float type"),
    ("ik.shift_left", [TensorType((3,), DType.i32), TensorType((3,), DType.ui32)], {}, "one element type"),
    ("ik.cumsum", [TensorType((3,), DType.bool)], {"axis": 0}, "numeric, got i1"),
    ("ik.cumsum", [TensorType((3,), DType.f32)], {"axis": 1}, "axis 1 out of range for rank 1"),
    ("ik.gather_elements", [TensorType((3, 4), DType.f32), TensorType((3,), DType.i64)], {"axis": 0},
     "indices rank 1 must equal data rank 2"),
    ("ik.gather_elements", [TensorType((3, 4), DType.f32), TensorType((2, 5), DType.i64)], {"axis": 0},
     "indices dim 1 \\(5\\) exceeds data dim 1 \\(4\\)"),
    ("ik.gather_nd", [TensorType((3, 4), DType.f32), TensorType((2, 3), DType.i64)], {},
     "last dim is 3, must be in \\[1, 2\\]"),
    ("ik.scatter_nd", [TensorType((3, 4), DType.f32), TensorType((2, 1), DType.i64), TensorType((2, 3), DType.f32)],
     {}, "updates shape \\[2, 3\\] must be indices.shape\\[:-1\\] \\+ data.shape\\[1:\\] = \\[2, 4\\]"),
    ("ik.scatter_elements", [TensorType((3,), DType.f32), TensorType((2,), DType.i64), TensorType((2,), DType.f32)],
     {"axis": 0, "reduction": "sub"}, "must be one of none, add, mul, max, min"),
    ("ik.dynamic_slice", [TensorType((3, 4), DType.f32), TensorType((3,), DType.i64)], {"sizes": (1, 1)},
     "starts must be a 1-D tensor of 2 entries"),
    ("ik.dynamic_slice", [TensorType((3, 4), DType.f32), TensorType((2,), DType.i64)], {"sizes": (4, 1)},
     "size 4 on dim 0 must be in \\[0, 3\\]"),
    ("ik.topk", [TensorType((3, 4), DType.f32)], {"k": 5}, "k = 5 must be in \\[0, 4\\]"),
    ("ik.reverse", [TensorType((3, 4), DType.f32)], {"axes": (1, -1)}, "repeat a dim"),
    ("ik.reduce_window", [TensorType((3, 4), DType.f32)], {"kind": "max", "window": (2,)},
     "window needs 2 entries, got 1"),
    ("ik.reduce_window", [TensorType((3, 4), DType.f32)], {"kind": "max", "window": (1, 5)},
     "does not fit the padded size 4"),
    ("ik.conv", [TensorType((1, 4, 5), DType.f32), TensorType((2, 3, 3), DType.f32)], {"groups": 1},
     "input channels 4 != weight in-channels 3 x groups 1"),
    ("ik.conv", [TensorType((1, 4), DType.f32), TensorType((2, 4), DType.f32)], {},
     "1 to 3 spatial dims"),
    ("ik.argmin", [TensorType((3,), DType.f32)], {"axis": 0, "select_last": True}, "unknown attribute 'select_last'"),
])
def test_new_ops_refuse_bad_operands_with_reasons(name, types, attrs, msg) -> None:
    from irkit.ir import OpError, infer_types

    with pytest.raises(OpError, match=msg):
        infer_types(name, types, attrs)
