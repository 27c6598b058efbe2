"""``ik.cache_attention`` and ``fuse-cache-attention``: against the float64 interpreter on every target,
and greedy decoding of zoo decoders with the fused pipeline against transformers' ``generate``.

The op tests run a decode-step function whose caches are aliased outputs through a target session
(caches resident, updated by each call, as ``irkit generate`` runs them) at positions 0, a middle one
and T-S, and compare every step's output and the final caches with the interpreter's stateful run.
"""

from __future__ import annotations

import numpy as np
import pytest

from irkit.interp import run, run_function_stateful
from irkit.ir.aliases import get_aliases, set_aliases
from irkit.ir.builder import module_of, new_function
from irkit.ir.types import DType, TensorType

PIPELINE = "canonicalize,fuse-attention,fuse-cache-attention,fuse-norm,fuse-activation,cse,dce"


def _step_module(b=1, hq=4, hk=2, s=1, t=12, d=8, per_row=False, mask=False):
    """q, k_new, v_new, k_cache, v_cache, pos [, mask] -> (out, k_cache', v_cache'), caches aliased."""
    f32 = DType.f32
    types = [TensorType((b, hq, s, d), f32), TensorType((b, hk, s, d), f32), TensorType((b, hk, s, d), f32),
             TensorType((b, hk, t, d), f32), TensorType((b, hk, t, d), f32),
             TensorType((b,) if per_row else (), DType.i64)]
    names = ["q", "k_new", "v_new", "k_cache", "v_cache", "pos"]
    if mask:
        types.append(TensorType((b, 1, s, t), DType.bool))
        names.append("mask")
    f, bb = new_function("step", types, names)
    out, kc, vc = bb.create("ik.cache_attention", list(f.args), {"scale": d ** -0.5}).results
    bb.ret(out, kc, vc)
    set_aliases(f, {1: 3, 2: 4})
    return module_of(f)


def _run_steps(target, m, positions, seed=0):
    from irkit.targets.base import lower_for_session
    from irkit.targets.registry import get_target

    fn = m.entry
    rng = np.random.default_rng(seed)
    shapes = [tuple(a.type.shape) for a in fn.args]
    tg = get_target(target)
    sess = tg.open_session(lower_for_session(tg, m))
    kc0 = rng.standard_normal(shapes[3]).astype(np.float32)
    vc0 = rng.standard_normal(shapes[4]).astype(np.float32)
    sess.bind(3, kc0)
    sess.bind(4, vc0)
    state = {3: kc0.astype(np.float64), 4: vc0.astype(np.float64)}
    for p in positions:
        xs = [rng.standard_normal(shapes[i]).astype(np.float32) for i in range(3)]
        pos = np.array(p, np.int64)  # a tuple: one position per batch row
        extra = []
        if len(fn.args) > 6:
            extra = [rng.random(shapes[6]) < 0.8]
        args = xs + [None, None, pos] + extra
        want = run_function_stateful(m, args, state, float64=True)
        (got,) = sess.run(args, fetch=[0])
        np.testing.assert_allclose(got, want[0], rtol=2e-5, atol=2e-5, err_msg=f"{target} pos {p}")
    np.testing.assert_allclose(sess.read(3), state[3], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(sess.read(4), state[4], rtol=1e-6, atol=1e-6)
    info = getattr(sess.artifact, "info", {}) or {}
    sess.close()
    return info


TARGETS = ["reference", "ort", "xla-cpu", pytest.param("tvm-llvm", marks=pytest.mark.slow)]


@pytest.mark.parametrize("target", TARGETS)
def test_decode_steps_gqa_match_interpreter(target):
    """One token per call at positions 0, 5 and T-S (=11), grouped-query heads, caches resident."""
    _run_steps(target, _step_module(), [0, 5, 11])


@pytest.mark.parametrize("target", TARGETS)
def test_prefill_per_row_positions_and_mask(target):
    """S=3 new rows, batch 2 with per-row positions (0 and T-S), an extra keep-mask."""
    _run_steps(target, _step_module(b=2, hq=2, hk=2, s=3, t=10, per_row=True, mask=True), [(0, 7), (3, 5)],
               seed=1)


def test_tvm_writes_the_cache_in_place():
    """tvm-llvm: the cache rows are written with call_tir_inplace into the resident argument."""
    info = _run_steps("tvm-llvm", _step_module(t=8), [0, 7])
    assert info.get("inplace_args") == [3, 4]


@pytest.mark.slow
@pytest.mark.parametrize("target", ["tvm-cuda", "xla-tpu-v5e"])
def test_compile_only_targets_lower_it(target):
    """No device here: the op (GQA step; per-row positions with a mask) must still compile."""
    from irkit.targets.registry import get_target

    t = get_target(target)
    for m in (_step_module(), _step_module(b=2, s=3, per_row=True, mask=True)):
        assert t.lower(m, {}) is not None


def test_positions_are_clamped_like_dynamic_update_slice():
    m = _step_module(t=6)
    rng = np.random.default_rng(2)
    shapes = [tuple(a.type.shape) for a in m.entry.args]
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes[:5]]
    past = run(m, xs + [np.array(40, np.int64)], float64=True)
    last = run(m, xs + [np.array(5, np.int64)], float64=True)
    for a, b in zip(past, last):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(past[1][:, :, 5:6], xs[1])  # written at T-S
    np.testing.assert_array_equal(past[1][:, :, :5], xs[3][:, :, :5])  # every other row untouched


def test_verifier_errors_are_one_line():
    from irkit.ir.builder import BuildError

    f32 = DType.f32
    f, bb = new_function("bad", [TensorType((1, 3, 1, 8), f32), TensorType((1, 2, 1, 8), f32),
                                 TensorType((1, 2, 1, 8), f32), TensorType((1, 2, 6, 8), f32),
                                 TensorType((1, 2, 6, 8), f32), TensorType((), DType.i64)])
    with pytest.raises(BuildError, match="query heads 3 are not a multiple of key/value heads 2") as e:
        bb.create("ik.cache_attention", list(f.args), {"scale": 0.5})
    assert "\n" not in str(e.value)
    f, bb = new_function("bad2", [TensorType((1, 2, 1, 8), f32)] * 3 + [TensorType((1, 2, 6, 8), f32)] * 2
                         + [TensorType((), DType.f32)])
    with pytest.raises(BuildError, match="pos must be an integer tensor"):
        bb.create("ik.cache_attention", list(f.args), {"scale": 0.5})


def test_cost_reads_the_prefix_not_the_cache():
    from irkit.ir.ops import op_cost

    m = _step_module(t=1024)
    op = next(o for o in m.entry.body if o.name == "ik.cache_attention")
    full = op_cost(op, {})
    op.attrs = {**op.attrs, "prefix_len": 10}
    short = op_cost(op, {})
    row = 2 * 2 * 8 * 4  # one row of K and V: heads x head_dim x f32
    assert short.bytes_written == full.bytes_written == 4 * 8 * 4 + row  # out + the S new rows, no cache copy
    assert full.bytes_read - short.bytes_read == (1024 - 10) * row


# ---------------------------------------------------------------- the pass on zoo decoders


def _fused(dm):
    """The decode model with its decode (and prefill) function through the fused pipeline."""
    from dataclasses import replace

    from irkit.passmanager import run_pipeline

    dec = run_pipeline(dm.decode.clone(), PIPELINE)
    pre = dec if dm.prefill is dm.decode else (run_pipeline(dm.prefill.clone(), PIPELINE) if dm.prefill else None)
    return replace(dm, decode=dec, prefill=pre)


def _decoder(name):
    from irkit.zoo.decode import decode_model

    return decode_model(name, "toy", max_cache_len=48)


def _hf_greedy(model, prompt, n):
    import torch

    with torch.no_grad():
        out = model.generate(torch.tensor(prompt), max_new_tokens=n, min_new_tokens=n, do_sample=False,
                             pad_token_id=0)
    return out[:, prompt.shape[1]:].numpy()


def _layers(dm):
    return sum(1 for op in dm.decode.entry.walk() if op.name == "ik.scatter_nd") // 2


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama", "mistral"])
def test_pass_fuses_every_layer_and_keeps_numbers(name):
    dm = _decoder(name)
    fd = _fused(dm)
    fn = fd.decode.entry
    assert sum(1 for op in fn.walk() if op.name == "ik.cache_attention") == _layers(dm) > 0
    assert not any(op.name in ("ik.scatter_nd", "ik.attention") for op in fn.walk())
    assert get_aliases(fn) == get_aliases(dm.decode.entry)
    rng = np.random.default_rng(4)
    for plen, start in ((3, 0), (1, 20), (1, 47)):
        xs = []
        for a in fn.args:
            shape = [plen if not isinstance(d, int) else d for d in a.type.shape]
            if a.name == "input_ids":
                xs.append(rng.integers(1, dm.vocab, size=shape, dtype=np.int64))
            elif a.name == "cache_position":
                xs.append(np.arange(start, start + plen, dtype=np.int64))
            elif a.dtype.is_int:
                xs.append(np.array(start, np.int64))
            else:
                xs.append(rng.standard_normal(shape).astype(np.float32))
        want = run(dm.decode, xs, float64=True)
        got = run(fd.decode, xs, float64=True)
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-7, atol=1e-7)  # fuse-norm/activation reassociate


GREEDY_TARGETS = ["reference", "ort", "xla-cpu", "tvm-llvm"]


@pytest.mark.parametrize("name, target", [("llama", "reference")] + [
    pytest.param(n, t, marks=pytest.mark.slow) for n in ("gpt2", "llama") for t in GREEDY_TARGETS
    if (n, t) != ("llama", "reference")])
def test_greedy_with_fused_pipeline_matches_transformers(name, target):
    from irkit.generate import generate

    dm = _decoder(name)
    fd = _fused(dm)
    assert any(op.name == "ik.cache_attention" for op in fd.decode.entry.walk())
    prompt = np.random.default_rng(3).integers(1, dm.vocab, size=(1, 5), dtype=np.int64)
    r = generate(fd, target, prompt, 12)
    np.testing.assert_array_equal(r.tokens, _hf_greedy(dm.torch_model, prompt, 12))


def test_pass_error_free_on_functions_without_state():
    """No aliases: nothing to fuse, the module is unchanged (and no error)."""
    from irkit.passmanager import run_pipeline
    from irkit.text import print_module

    f, bb = new_function("f", [TensorType((1, 2, 3, 4), DType.f32)] * 3)
    bb.ret(bb.attention(*f.args, scale=0.5))
    m = module_of(f)
    before = print_module(m)
    run_pipeline(m, "fuse-cache-attention")
    assert print_module(m) == before

