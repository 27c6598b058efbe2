"""Text format: round trips, sidecars, resources, errors with file:line:col and a caret."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

from irkit.ir import DType, Location, Module, TensorType, new_function, verify
from irkit.testing.blocks import gpt2_style_module
from irkit.text import ParseError, parse_module, print_module, read_module, write_module


def test_round_trip_is_identical() -> None:
    m = gpt2_style_module(layers=2)
    t = print_module(m)
    m2 = parse_module(t)
    verify(m2)
    assert print_module(m2) == t
    assert '"builtin.module"() ({' in t and "dense_resource<h.0.attn.c_attn.weight>" in t
    assert "dialect_resources" in t  # standalone text carries its blobs


def test_file_with_sidecar(tmp_path) -> None:
    m = gpt2_style_module(layers=1)
    p = tmp_path / "m.mlir"
    write_module(m, str(p))
    assert (tmp_path / "m.safetensors").exists()
    assert "dialect_resources" not in p.read_text()
    m2 = read_module(str(p))
    assert print_module(m2) == print_module(m)
    from irkit.interp import random_inputs, run

    xs = random_inputs(m.entry, 0)
    np.testing.assert_array_equal(run(m, xs)[0], run(m2, xs)[0])


def test_missing_sidecar_is_a_clear_error(tmp_path) -> None:
    from irkit.errors import InputError

    m = gpt2_style_module(layers=1)
    p = tmp_path / "m.mlir"
    write_module(m, str(p))
    (tmp_path / "m.safetensors").unlink()
    with pytest.raises(InputError, match="m.safetensors: sidecar not found"):
        read_module(str(p))


def test_locations_and_special_floats_round_trip() -> None:
    f, b = new_function("main", [TensorType((3,), DType.f32)], ["x"])
    b.loc = Location("a \"q\" b.py", 7, 3, name="node/Add")
    y = b.add(f.args[0], b.constant(np.array([np.inf, -np.inf, 1e-30], dtype=np.float32)))
    b.loc = Location.fuse([Location("a.py", 1, 0), Location(name="n2")])
    z = b.mul(y, b.scalar(float("nan"), DType.f32))
    b.ret(z, b.constant(np.array([1.5, -2.25], dtype=DType.bf16.np)))
    m = Module([f])
    t = print_module(m)
    assert 'loc(fused["a.py":1:0, "n2"])' in t
    assert print_module(parse_module(t)) == t


def _err(text: str) -> ParseError:
    with pytest.raises(ParseError) as ei:
        parse_module(text, "in.mlir")
    return ei.value


GOOD = '''"builtin.module"() ({
  "func.func"() ({
  ^bb0(%x: tensor<4xf32>):
    %0 = "ik.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    "func.return"(%0) : (tensor<4xf32>) -> ()
  }) {function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "main"} : () -> ()
}) : () -> ()
'''


def test_parse_error_has_position_and_caret() -> None:
    e = _err(GOOD.replace('"ik.exp"(%x)', '"ik.exp"(%y)'))
    assert (e.line, e.col) == (4, 19)
    r = e.render().splitlines()
    assert r[0] == "in.mlir:4:19: use of undefined value '%y'"
    assert r[2].index("^") == 18


@pytest.mark.parametrize("bad,msg", [
    (GOOD.replace("tensor<4xf32>) -> tensor<4xf32>\n", "tensor<4xf33>) -> tensor<4xf32>\n", 1), "unknown element type"),
    (GOOD.replace("%0 = ", "%0:2 = "), "names 2 results but its type lists 1"),
    (GOOD[:GOOD.index('"func.return"')], "end of input"),
    (GOOD[:120], "expected a tensor type"),
    (GOOD.replace('sym_name = "main"', ""), "expected an attribute name"),
    (GOOD.replace("tensor<4xf32>", "tensor<?xf32>", 1), "dynamic dims but names 0"),
])
def test_parse_errors(bad: str, msg: str) -> None:
    assert msg in str(_err(bad))


def test_huge_declared_shape_does_not_allocate() -> None:
    text = '''"builtin.module"() ({
  "func.func"() ({
  ^bb0():
    %0 = "ik.constant"() {value = dense<1.0> : tensor<99999999999x99999999999xf32>} : () -> tensor<99999999999x99999999999xf32>
    "func.return"(%0) : (tensor<99999999999x99999999999xf32>) -> ()
  }) {function_type = () -> tensor<99999999999x99999999999xf32>, sym_name = "main"} : () -> ()
}) : () -> ()
'''
    t0 = time.perf_counter()
    m = parse_module(text)
    verify(m)
    assert time.perf_counter() - t0 < 1.0
    bad = text.replace("dense<1.0>", "dense<[1.0, 2.0]>")
    with pytest.raises(ParseError, match="too large; use dense_resource"):
        parse_module(bad)
    small = '"ik.constant"() {value = dense<[1.0, 2.0]> : tensor<3xf32>} : () -> tensor<3xf32>'
    with pytest.raises(ParseError, match="dense literal has 2 entries on dim 0"):
        parse_module(GOOD.replace('"ik.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>', small).replace("(%0)", "(%0)"))


def test_mutated_texts_never_crash() -> None:
    """A quick in-suite slice of the parser fuzzer: errors are ParseErrors, never other exceptions."""
    base = print_module(gpt2_style_module(layers=1, hidden=8, heads=2, vocab=16, max_pos=8))
    rng = random.Random(7)
    for i in range(400):
        t = list(base)
        kind = i % 3
        if kind == 0:
            for _ in range(rng.randint(1, 5)):
                t[rng.randrange(len(t))] = chr(rng.randrange(32, 127))
            s = "".join(t)
        elif kind == 1:
            s = base[: rng.randrange(len(base))]
        else:
            toks = base.split(" ")
            a, b = rng.randrange(len(toks)), rng.randrange(len(toks))
            toks[a], toks[b] = toks[b], toks[a]
            s = " ".join(toks)
        try:
            m = parse_module(s)
        except ParseError as e:
            assert e.render().count("\n") == 2
            continue
        try:
            verify(m)
        except ValueError:
            pass


def test_mlir_variants_accepted() -> None:
    # properties <{...}>, an implicit module, location aliases
    text = '''"func.func"() <{function_type = (tensor<2xf32>) -> tensor<2xf32>, sym_name = "f"}> ({
^bb0(%arg0: tensor<2xf32>):
  %0 = "ik.neg"(%arg0) : (tensor<2xf32>) -> tensor<2xf32> loc(#loc1)
  "func.return"(%0) : (tensor<2xf32>) -> ()
}) : () -> ()
#loc1 = loc("x.py":3:4)
'''
    m = parse_module(text)
    verify(m)
    op = next(iter(m.entry.body))
    assert op.loc == Location("x.py", 3, 4)


def test_new_integer_dtypes_round_trip() -> None:
    types = [TensorType((2, 3), d) for d in (DType.i16, DType.ui8, DType.ui16, DType.ui32, DType.ui64)]
    f, b = new_function("main", types, [f"x{i}" for i in range(len(types))])
    outs = []
    for x, d in zip(f.args, (DType.i16, DType.ui8, DType.ui16, DType.ui32, DType.ui64)):
        info = np.iinfo(d.np)
        c = b.constant(np.array([[info.min, info.max, 1], [2, 3, info.max - 1]], dtype=d.np))
        outs.append(b.bitwise_xor(b.add(x, c), b.scalar(5, d)))
    b.ret(*outs, b.cast(f.args[0], to=DType.ui64))
    m = Module([f])
    verify(m)
    t = print_module(m)
    for word in ("2x3xi16>", "2x3xui8>", "2x3xui16>", "2x3xui32>", "2x3xui64>", "18446744073709551615", "-32768"):
        assert word in t, word
    m2 = parse_module(t)
    verify(m2)
    assert print_module(m2) == t
    assert [r.type.dtype for r in m2.entry.outputs][:5] == [DType.i16, DType.ui8, DType.ui16, DType.ui32, DType.ui64]


def test_new_integer_dtype_literal_out_of_range_is_a_clear_error() -> None:
    f, b = new_function("main", [])
    b.ret(b.constant(np.array([1, 254], dtype=np.uint8)))
    text = print_module(Module([f]))
    assert "dense<[1, 254]> : tensor<2xui8>" in text
    with pytest.raises(ParseError, match="256 does not fit ui8"):
        parse_module(text.replace("254", "256"))


def test_new_integer_dtypes_in_the_sidecar(tmp_path) -> None:
    f, b = new_function("main", [])
    dts = (np.uint8, np.uint16, np.uint32, np.uint64, np.int16)
    b.ret(*[b.constant((np.arange(1, 3001) * 7919).astype(dt)) for dt in dts])
    m = Module([f])
    p = tmp_path / "m.mlir"
    write_module(m, str(p))
    assert "dense_resource<" in p.read_text()
    m2 = read_module(str(p))
    assert print_module(m2) == print_module(m)
    got = [op.attrs["value"].array for op in m2.entry.walk() if op.name == "ik.constant"]
    for g, dt in zip(got, dts):
        np.testing.assert_array_equal(g, (np.arange(1, 3001) * 7919).astype(dt))
