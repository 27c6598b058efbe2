"""Sessions (resident, aliased state) and greedy generation with a KV cache.

Sessions are checked against the interpreter's stateful run; generation against
transformers' own ``model.generate(..., do_sample=False)`` (dynamic cache, eager
PyTorch): the greedy tokens must be identical.
"""

from __future__ import annotations

import numpy as np
import pytest
from irkit.targets.base import lower_for_session
from irkit.targets.registry import get_target

from irkit.errors import IrkitError
from irkit.interp import run_function_stateful
from irkit.ir.aliases import set_aliases
from irkit.ir.builder import module_of, new_function
from irkit.ir.types import DType, TensorType
from irkit.zoo.decode import DECODERS


def _ring_module():
    """A step of a ring buffer: write ``v`` at column ``pos`` of the state and return a weighted
    sum of the updated state (so every output depends on all previous writes)."""
    f, b = new_function("main", [TensorType((2, 6), DType.f32), TensorType((2,), DType.i64),
                                 TensorType((2, 1), DType.f32), TensorType((6, 3), DType.f32)],
                        ["cache", "starts", "v", "w"])
    new = b.dynamic_update_slice(f.args[0], f.args[2], f.args[1])
    y = b.matmul(new, f.args[3])
    b.ret(y, new)
    set_aliases(f, {1: 0})
    return module_of(f)


def _ring_steps(rng, n=7):
    return [(np.array([0, k % 6]), rng.standard_normal((2, 1)).astype(np.float32)) for k in range(n)]


@pytest.mark.parametrize("target", ["reference", "ort", pytest.param("tvm-llvm", marks=pytest.mark.slow)])
def test_session_state_matches_interpreter(target):
    m = _ring_module()
    rng = np.random.default_rng(1)
    cache0 = rng.standard_normal((2, 6)).astype(np.float32)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    tg = get_target(target)
    sess = tg.open_session(lower_for_session(tg, m))
    sess.bind(0, cache0)
    sess.bind(3, w)
    state = {0: cache0.astype(np.float64)}
    for starts, v in _ring_steps(rng):
        want = run_function_stateful(m, [None, starts, v, w.astype(np.float64)], state, float64=True)
        (got,) = sess.run([None, starts, v, None], fetch=[0])
        np.testing.assert_allclose(got, want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sess.read(0), state[0], rtol=1e-6, atol=1e-6)
    # all outputs when fetch is not given; an explicit array for the aliased argument restarts the state
    outs = sess.run([cache0, np.array([0, 2]), np.ones((2, 1), np.float32), None])
    assert len(outs) == 2 and outs[1][0, 2] == 1.0 and outs[1][0, 3] == cache0[0, 3]
    np.testing.assert_allclose(sess.read(0), outs[1])


def test_session_errors_are_one_line():
    m = _ring_module()
    tg = get_target("reference")
    sess = tg.open_session(lower_for_session(tg, m))
    with pytest.raises(IrkitError, match=r"argument 0 \('cache'\) is None but has no resident value") as e:
        sess.run([None, np.array([0, 0]), np.ones((2, 1), np.float32), np.ones((6, 3), np.float32)])
    assert "\n" not in str(e.value)
    with pytest.raises(IrkitError, match=r"argument 2 \('v'\) has shape \(3, 1\), the artifact was compiled for"):
        sess.bind(2, np.ones((3, 1), np.float32))
    with pytest.raises(IrkitError, match="no argument 9"):
        sess.read(9)


# ---------------------------------------------------------------- generation vs transformers

def _hf_greedy(model, prompt, n):
    import torch

    with torch.no_grad():
        out = model.generate(torch.tensor(prompt), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             pad_token_id=0)
    return out[:, prompt.shape[1]:].numpy()


def _decoder(name, batch=1):
    """One export per model and batch (the token count symbolic: prefill and decode are the same function)."""
    from irkit.zoo.decode import decode_model

    return decode_model(name, "toy", batch=batch, max_cache_len=48)


def _prompt(vocab, batch, plen, seed=3):
    return np.random.default_rng(seed).integers(1, vocab, size=(batch, plen), dtype=np.int64)


@pytest.mark.parametrize("name", ["gpt2", "llama"])
@pytest.mark.parametrize("target", ["reference", "ort"])
def test_greedy_matches_transformers(name, target):
    from irkit.generate import generate

    dm = _decoder(name)
    prompt = _prompt(dm.vocab, 1, 5)
    want = _hf_greedy(dm.torch_model, prompt, 8)
    r = generate(dm, target, prompt, 8)
    np.testing.assert_array_equal(r.tokens, want)
    assert r.info["prefill"] == "prefill" and len(r.step_seconds) == 7 and r.ttft_seconds > 0


def test_greedy_token_by_token_prefill():
    """The decode function alone: the prompt goes in one token per call."""
    from irkit.generate import generate

    dm = _decoder("llama")
    prompt = _prompt(dm.vocab, 1, 4, seed=5)
    r = generate(dm.decode, "reference", prompt, 5)
    np.testing.assert_array_equal(r.tokens, _hf_greedy(dm.torch_model, prompt, 5))
    assert r.info["prefill"] == "token-by-token"


@pytest.mark.slow
def test_greedy_batch_2_tvm():
    """Batch 2 with different rows, on the TVM session (resident tensors)."""
    from irkit.generate import generate

    dm = _decoder("llama", batch=2)
    prompt = _prompt(dm.vocab, 2, 4, seed=5)
    r = generate(dm, "tvm-llvm", prompt, 6)
    np.testing.assert_array_equal(r.tokens, _hf_greedy(dm.torch_model, prompt, 6))
    assert r.info["session"] == "TvmSession"


def test_generate_errors():
    from irkit.generate import generate
    from irkit.zoo.decode import NoCacheError

    dm = _decoder("gpt2")
    with pytest.raises(IrkitError, match="the cache holds 48"):
        generate(dm, "reference", _prompt(dm.vocab, 1, 5), 60)
    with pytest.raises(IrkitError, match="exported for batch 1, the prompt has 2 rows"):
        generate(dm, "reference", _prompt(dm.vocab, 2, 5), 2)
    with pytest.raises(NoCacheError, match="no KV-cache state"):
        generate(module_of(new_function("f", [TensorType((1, 1), DType.i64)])[0]), "reference", [[1]], 1)


ALL_TARGETS = ["reference", "ort", "tvm-llvm", "xla-cpu"]


def test_greedy_opt_explicit_positions():
    """A cheap representative of the other zoo decoders: OPT needs its positions passed explicitly at
    export (its forward reads the cache length back as a number otherwise)."""
    from irkit.generate import generate

    dm = _decoder("opt")
    prompt = _prompt(dm.vocab, 1, 6, seed=4)
    np.testing.assert_array_equal(generate(dm, "reference", prompt, 8).tokens, _hf_greedy(dm.torch_model, prompt, 8))


@pytest.mark.slow
@pytest.mark.parametrize("target", ALL_TARGETS)
@pytest.mark.parametrize("name", DECODERS)
def test_all_decoders_all_targets_32_tokens(name, target):
    from irkit.generate import generate

    dm = _decoder(name)
    prompt = _prompt(dm.vocab, 1, 8, seed=7)
    want = _hf_greedy(dm.torch_model, prompt, 32)
    r = generate(dm, target, prompt, 32)
    np.testing.assert_array_equal(r.tokens, want)


@pytest.mark.slow
def test_tvm_call_tir_inplace_writes_the_callers_tensor():
    """What an in-place KV-cache update on tvm-llvm would build on (docs/generate.md): TVM's
    ``R.call_tir_inplace`` writes the row into the argument tensor itself (same data pointer)."""
    import tvm
    from tvm import relax
    from tvm.script import ir as I
    from tvm.script import relax as R
    from tvm.script import tirx as T

    @I.ir_module
    class Mod:
        @T.prim_func
        def write_row(cache: T.Buffer((4, 16), "float32"), row: T.Buffer((1, 16), "float32"),
                      pos: T.Buffer((1,), "int64")):
            T.func_attr({"tir.noalias": True})
            for j in range(16):
                cache[pos[0], j] = row[0, j]

        @R.function
        def main(cache: R.Tensor((4, 16), "float32"), row: R.Tensor((1, 16), "float32"),
                 pos: R.Tensor((1,), "int64")):
            cls = Mod
            with R.dataflow():
                new = R.call_tir_inplace(cls.write_row, (cache, row, pos), inplace_indices=[0],
                                         out_ty=R.Tensor((4, 16), "float32"))
                s = R.sum(new, axis=[1])
                R.output(new, s)
            return (s, new)

    vm = relax.VirtualMachine(tvm.compile(Mod, target="llvm"), tvm.cpu())
    cache = tvm.runtime.tensor(np.zeros((4, 16), np.float32))
    for p in range(4):
        s, new = vm["main"](cache, tvm.runtime.tensor(np.full((1, 16), p + 1, np.float32)),
                            tvm.runtime.tensor(np.array([p], np.int64)))
        assert new.data_ptr() == cache.data_ptr()
    np.testing.assert_array_equal(cache.numpy()[:, 0], [1, 2, 3, 4])
    np.testing.assert_array_equal(s.numpy(), [16, 32, 48, 64])


def test_generate_pipeline_option_and_ort_inplace_cache():
    """``irkit generate -p``: passes run on the decode function keep the greedy tokens; on ort the KV-cache
    outputs are updated in place (ScatterElements into the argument's own buffer, no ping-pong copy)."""
    from irkit.commands.generate_cmd import apply_pipeline
    from irkit.generate import compile_decoder, generate

    dm = _decoder("gpt2")
    opt = apply_pipeline(dm, "canonicalize,dce")
    assert opt.decode is opt.prefill and opt.decode is not dm.decode and opt.info["pipeline"] == "canonicalize,dce"
    prompt = _prompt(dm.vocab, 1, 5, seed=9)
    want = _hf_greedy(dm.torch_model, prompt, 6)
    np.testing.assert_array_equal(generate(opt, "ort", prompt, 6).tokens, want)
    c = compile_decoder(dm, "ort")
    sess = c.target.open_session(c.decode)
    caches = {o for o, a in sess.aliases.items() if len(c.state_types[a][0]) == 4}
    assert caches and caches <= sess.inplace, (caches, sess.inplace)
