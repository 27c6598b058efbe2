"""State and aliasing: the ``aliases`` attribute, its verifier rules, text round trip and the
interpreter's stateful runs."""

from __future__ import annotations

import numpy as np
import pytest

from irkit.errors import InputError
from irkit.interp import run, run_function_stateful
from irkit.ir import DType, Location, Module, TensorType, VerifyError, verify
from irkit.ir.aliases import (
    alias_diagnostics,
    donation_aliases,
    get_aliases,
    get_cache_pairs,
    set_aliases,
    set_cache_pairs,
    updated_base,
)
from irkit.ir.builder import new_function
from irkit.ir.core import clone_function
from irkit.passmanager import run_pipeline
from irkit.text import parse_module, print_module

F32 = DType.f32


def _decode_step(n_cache: int = 8, d: int = 4) -> Module:
    """y = sum(cache'); cache' = cache with row ``pos`` set to 2*x; returns (y, cache')."""
    x_t = TensorType((1, d), F32)
    c_t = TensorType((n_cache, d), F32)
    p_t = TensorType((), DType.i32)
    f, b = new_function("main", [x_t, c_t, p_t], ["x", "cache", "pos"], loc=Location("step.py", 7, 1))
    x, cache, pos = f.args
    k = b.mul(x, b.scalar(2.0, F32))
    zero = b.scalar(0, DType.i32)
    starts = b.concat(b.reshape(pos, shape=(1,)), b.reshape(zero, shape=(1,)), axis=0)
    new = b.dynamic_update_slice(cache, k, starts)
    y = b.reduce_sum(new, axes=(0,))
    b.ret(y, new)
    set_aliases(f, {1: 1})
    return Module([f])


def test_aliases_api_and_verifier_accepts():
    m = _decode_step()
    f = m.entry
    assert get_aliases(f) == {1: 1}
    assert f.attrs["aliases"] == ((1, 1),)
    assert alias_diagnostics(f) == []
    verify(m)
    assert updated_base(f.outputs[1]) is f.args[1]
    assert donation_aliases(f, [1]) == {1: 1}
    set_aliases(f, {})
    assert "aliases" not in f.attrs and get_aliases(f) == {}


@pytest.mark.parametrize("pairs, message", [
    (((1, 0),), "output 1 has type tensor<8x4xf32> but argument 0 ('x') has type tensor<1x4xf32>"),
    (((1, 5),), "argument 5 is out of range (the function has 3 arguments)"),
    (((2, 1),), "output 2 is out of range (the function has 2 outputs)"),
    (((0, 1), (1, 1)), "argument 1 ('cache') is paired with outputs 0 and 1"),
    (((1, 1), (1, 1)), "must be a list of [output, arg] integer pairs"),
    (("a",), "must be a list of [output, arg] integer pairs"),
])
def test_verifier_rejects_bad_aliases(pairs, message):
    m = _decode_step()
    m.entry.attrs["aliases"] = pairs
    with pytest.raises(VerifyError) as ei:
        verify(m)
    text = "\n".join(str(d) for d in ei.value.diagnostics)
    assert message in text
    assert "step.py:7:1" in text  # the function's location


def test_aliased_output_returned_twice_is_rejected():
    t = TensorType((2, 2), F32)
    f, b = new_function("main", [t], ["s"], loc=Location("twice.py", 3, 0))
    y = b.add(f.args[0], f.args[0])
    b.ret(y, y)
    set_aliases(f, {0: 0})
    diags = alias_diagnostics(f)
    assert len(diags) == 1 and "is also output 1" in str(diags[0]) and "twice.py:3" in str(diags[0])
    assert donation_aliases(f, [0]) == {}  # never aliases a value returned twice


def test_text_round_trip_keeps_aliases_and_cache_pairs():
    m = _decode_step()
    set_cache_pairs(m.entry, {0: 0})
    m.entry.attrs["cache_pairs"] = ((0, 0),)
    text = print_module(m)
    assert "aliases = [[1, 1]]" in text and "cache_pairs = [[0, 0]]" in text
    m2 = parse_module(text)
    assert get_aliases(m2.entry) == {1: 1}
    assert get_cache_pairs(m2.entry) == {0: 0}
    assert print_module(m2) == text
    # The MLIR-generic spelling of the same attribute parses too.
    m3 = parse_module(text.replace("aliases = [[1, 1]]", "aliases = [array<i64: 1, 1>]"))
    assert get_aliases(m3.entry) == {1: 1}


def test_clone_and_passes_keep_aliases():
    m = _decode_step()
    assert get_aliases(clone_function(m.entry)) == {1: 1}
    assert get_aliases(m.clone().entry) == {1: 1}
    out = run_pipeline(m.clone(), "canonicalize,cse,dce")
    assert get_aliases(out.entry) == {1: 1}
    verify(out)


def test_interpreter_stateful_runs_match_a_numpy_model():
    m = _decode_step()
    rng = np.random.default_rng(1)
    cache0 = rng.standard_normal((8, 4)).astype(np.float32)
    xs = [rng.standard_normal((1, 4)).astype(np.float32) for _ in range(3)]
    state: dict[int, np.ndarray] = {}
    ref = cache0.astype(np.float64).copy()
    for step, x in enumerate(xs):
        inputs = [x, cache0 if step == 0 else None, np.int32(step + 2)]
        y, new = run_function_stateful(m, inputs, state, float64=True)
        ref[step + 2] = 2.0 * x[0]
        np.testing.assert_allclose(new, ref, rtol=1e-12)
        np.testing.assert_allclose(y, ref.sum(0), rtol=1e-12)
        assert state[1] is new  # the resident buffer is the aliased output
    # A stateless run from the same start agrees with the first step.
    y0, _ = run(m, [xs[0], cache0, np.int32(2)])
    first = cache0.copy()
    first[2] = 2 * xs[0][0]
    np.testing.assert_allclose(y0, first.sum(0), rtol=1e-5)


def test_interpreter_stateful_errors():
    m = _decode_step()
    with pytest.raises(InputError, match="input 'cache' .* no resident buffer"):
        run_function_stateful(m, [np.ones((1, 4), np.float32), None, np.int32(0)], {})
    state: dict[int, np.ndarray] = {}
    x = np.full((1, 4), 1.5, np.float32)
    run_function_stateful(m, {"x": x, "cache": np.ones((8, 4), np.float32), "pos": np.int32(0)}, state)
    y, _ = run_function_stateful(m, {"x": x, "pos": np.int32(1)}, state)  # cache from the state
    np.testing.assert_allclose(y, np.full(4, 6 * 1.0 + 2 * 3.0), rtol=1e-6)  # rows 0 and 1 are 2x
