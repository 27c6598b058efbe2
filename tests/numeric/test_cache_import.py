"""Importing programs with state: a static KV cache from torch.export, donated buffers from
JAX, past/present caches from ONNX.  Each imported function is run for several decode steps
on the float64 interpreter, feeding its state back, and compared with the framework."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from irkit.interp import run, run_function_stateful
from irkit.ir.aliases import get_aliases, get_cache_pairs
from irkit.text import parse_module, print_module

# ---------------------------------------------------------------------------
# torch.export with transformers' static cache

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

MAX_CACHE = 8


def _static_cache_lm(name: str, seed: int = 0, layers: int | None = None):
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    from irkit.zoo.build import _quiet_transformers, entry, make_config

    arch = entry(name)
    config = make_config(arch, "toy", attn="sdpa")
    config.use_cache = True
    if layers is not None:
        config.num_hidden_layers = layers
    torch.manual_seed(seed)
    with _quiet_transformers():
        model = getattr(transformers, arch.model_class)(config).eval()
    model.generation_config.use_cache = True
    model.generation_config.cache_implementation = "static"
    return TorchExportableModuleWithStaticCache(model, batch_size=1, max_cache_len=MAX_CACHE)


def _export(wrapper, n_tokens: int = 1, dynamic: bool = False):
    ids = torch.arange(3, 3 + n_tokens).reshape(1, n_tokens)
    pos = torch.arange(n_tokens)
    dyn = None
    if dynamic:
        s = torch.export.Dim("S", min=1, max=MAX_CACHE)
        dyn = {"input_ids": {1: s}, "cache_position": {0: s}}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.export.export(wrapper, (), {"input_ids": ids, "cache_position": pos}, dynamic_shapes=dyn,
                                   strict=True)


def _torch_steps(wrapper, steps):
    """Logits and the first layer's key cache after each step of the eager wrapper."""
    for b in wrapper.buffers():
        if b.dtype.is_floating_point and "cache" in _buffer_name(wrapper, b):
            b.zero_()
    out = []
    with torch.no_grad():
        for ids, pos in steps:
            logits = wrapper(input_ids=torch.tensor([ids]), cache_position=torch.tensor(pos))
            out.append((logits.numpy().copy(), wrapper.static_cache.layers[0].keys.numpy().copy()))
    return out


def _buffer_name(module, t) -> str:
    for n, b in module.named_buffers():
        if b is t:
            return n
    return ""


def _check_against_torch(m, init, wrapper, steps):
    from irkit.frontends.torch_cache import initial_state  # noqa: F401 - the API the test exercises

    f = m.entry
    names = f.arg_names()
    aliases = get_aliases(f)
    assert names[:2] == ["input_ids", "cache_position"]
    n_layers = len(wrapper.static_cache.layers)
    state_names = [f"{w}_{i}" for i in range(n_layers) for w in ("cumulative_length", "key_cache", "value_cache")]
    assert sorted(names[2:]) == sorted(state_names)
    # Every cache argument is aliased to one extra output after the logits.
    assert sorted(aliases.values()) == list(range(2, len(names)))
    assert sorted(aliases) == list(range(1, len(names) - 1))
    for o, a in aliases.items():
        assert f.outputs[o].type == f.args[a].type
    ref = _torch_steps(wrapper, steps)
    state = {i: init[n] for i, n in enumerate(names) if n in init}
    assert set(state) == set(range(2, len(names)))
    k0 = names.index("key_cache_0")
    for (ids, pos), (want_logits, want_k0) in zip(steps, ref):
        outs = run_function_stateful(f, [np.array([ids]), np.array(pos)] + [None] * (len(names) - 2), state,
                                     float64=True)
        np.testing.assert_allclose(outs[0], want_logits, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(state[k0], want_k0, rtol=1e-4, atol=1e-6)
    assert np.abs(state[k0]).max() > 0.05  # the cache was written


@pytest.fixture(scope="module")
def llama_static():
    # One layer keeps torch.export (dynamo) short.  Strict export is what the static cache needs (the
    # non-strict tracer lifts the cache tensors as constants), and dynamo's first use in a process costs
    # half a minute on a busy 2-core machine: the transformers cases are slow tests; the default run
    # covers the same importer paths with the small module below.
    wrapper = _static_cache_lm("llama", layers=1)
    ep = _export(wrapper)
    from irkit.frontends.torch_cache import initial_state

    init = {k: np.array(v, copy=True) for k, v in initial_state(ep).items()}
    return wrapper, ep, init


@pytest.mark.slow
def test_llama_static_cache_raw_export(llama_static):
    from irkit.frontends.torch_export import import_exported_program

    wrapper, ep, init = llama_static
    # As exported: in-place index_copy_/copy_/add_ on BUFFER inputs, no mutation outputs.
    assert any("index_copy_" in str(n.target) for n in ep.graph.nodes)
    m = import_exported_program(ep)
    _check_against_torch(m, init, wrapper, [([5], [0]), ([9], [1]), ([2], [2])])
    # The state survives the text form.
    assert get_aliases(parse_module(print_module(m)).entry) == get_aliases(m.entry)


@pytest.mark.slow
def test_llama_static_cache_decomposed(llama_static):
    from irkit.frontends.torch_export import import_exported_program

    wrapper, ep, init = llama_static
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dec = ep.run_decompositions()
    kinds = {s.kind.name for s in dec.graph_signature.output_specs}
    assert "BUFFER_MUTATION" in kinds
    m = import_exported_program(dec)
    _check_against_torch(m, init, wrapper, [([5], [0]), ([9], [1])])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_static_cache_dynamic_prompt(name):
    """Prefill a 3-token prompt, then decode two tokens, with one program (S symbolic)."""
    from irkit.frontends.torch_cache import initial_state
    from irkit.frontends.torch_export import import_exported_program

    wrapper = _static_cache_lm(name)
    ep = _export(wrapper, n_tokens=2, dynamic=True)
    init = {k: np.array(v, copy=True) for k, v in initial_state(ep).items()}
    m = import_exported_program(ep, dynamic_shapes={"input_ids": {1: torch.export.Dim("S")}})
    _check_against_torch(m, init, wrapper, [([5, 7, 11], [0, 1, 2]), ([9], [3]), ([4], [4])])


@pytest.mark.slow
def test_seq2seq_static_cache_t5():
    """transformers' Seq2SeqLMExportableModule: the encoder, and the decoder with a static self-attention
    cache, decoded for three steps against the exported decoder."""
    from transformers.integrations.executorch import Seq2SeqLMExportableModule

    from irkit.frontends.torch_cache import initial_state
    from irkit.frontends.torch_export import import_exported_program
    from irkit.zoo.build import _quiet_transformers, entry, make_config

    config = make_config(entry("t5"), "toy")
    torch.manual_seed(0)
    with _quiet_transformers():
        model = transformers.T5ForConditionalGeneration(config).eval()
    s2s = Seq2SeqLMExportableModule(model, batch_size=1, max_hidden_seq_length=16, max_cache_length=MAX_CACHE)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s2s.export(encoder_input_ids=torch.tensor([[4, 5, 6, 7]]),
                   encoder_hidden_states=torch.zeros(1, 4, config.d_model))
    enc = import_exported_program(s2s.exported_encoder)
    dec_ep = s2s.exported_decoder
    init = {k: np.array(v, copy=True) for k, v in initial_state(dec_ep).items()}
    f = import_exported_program(dec_ep).entry
    names = f.arg_names()
    assert names[:3] == ["decoder_input_ids", "encoder_hidden_states", "cache_position"]
    assert sorted(get_aliases(f).values()) == list(range(3, len(names)))
    ids = np.array([[4, 5, 6, 7]])
    with torch.no_grad():
        h_ref = s2s.exported_encoder.module()(torch.tensor(ids)).numpy()
    h = run(enc, [ids], float64=True)[0]
    np.testing.assert_allclose(h, h_ref, rtol=1e-4, atol=1e-5)
    state = {i: init[n] for i, n in enumerate(names) if n in init}
    dec = dec_ep.module()
    tok = 0
    for step in range(3):
        with torch.no_grad():
            want = dec(torch.tensor([[tok]]), torch.from_numpy(h_ref), torch.tensor([step])).numpy()
        got = run_function_stateful(f, [np.array([[tok]]), h_ref, np.array([step])] + [None] * len(state), state,
                                    float64=True)
        np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)
        tok = int(want[0, -1].argmax())


class _RingCache(torch.nn.Module):
    """Buffers written as transformers' StaticLayer writes them: index_copy_ of the cache, copy_ of a
    counter and add_ through an identity ``.to`` of it; plus index_put_ through indexing."""

    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(6, 4))
        self.register_buffer("last", torch.zeros(6))
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))
        self.register_buffer("scale", torch.full((4,), 0.5))  # read only: stays a constant

    def forward(self, x, pos):
        self.cache.index_copy_(0, pos, x * self.scale)
        self.last[pos] = x.sum(1)
        self.count.copy_(pos[0])
        self.count.to(torch.int64).add_(x.shape[0])
        return self.cache.sum(0) + self.count, self.cache.mean() + self.last.sum()


@pytest.mark.parametrize("decomposed", [False, True])
def test_buffer_mutations_become_aliased_state(decomposed):
    from irkit.frontends.torch_cache import initial_state
    from irkit.frontends.torch_export import import_exported_program

    mod = _RingCache()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(mod, (torch.ones(2, 4), torch.tensor([0, 1])), strict=False)
        if decomposed:
            ep = ep.run_decompositions()
    m = import_exported_program(ep)
    f = m.entry
    assert f.arg_names() == ["x", "pos", "cache", "last", "count"]
    assert get_aliases(f) == {2: 2, 3: 3, 4: 4}
    assert "scale" in print_module(m)  # the read-only buffer is a named constant
    init = initial_state(ep)
    state = {2: init["cache"], 3: init["last"], 4: init["count"]}
    rng = np.random.default_rng(2)
    ref = _RingCache()
    for pos in ([0, 1], [2, 3], [4, 5]):
        x = rng.standard_normal((2, 4)).astype(np.float32)
        with torch.no_grad():
            want = [t.numpy() for t in ref(torch.from_numpy(x), torch.tensor(pos))]
        got = run_function_stateful(f, [x, np.array(pos), None, None, None], state, float64=True)
        for g, w in zip(got[:2], want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(state[2], ref.cache.numpy(), rtol=1e-6)
        np.testing.assert_allclose(state[3], ref.last.numpy(), rtol=1e-6)
        assert int(state[4]) == int(ref.count) == pos[0] + 2


def test_user_input_mutation_aliases_its_argument():
    from irkit.frontends.torch_export import import_exported_program

    class Accumulate(torch.nn.Module):
        def forward(self, acc, x):
            acc.add_(x)
            return acc * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(Accumulate(), (torch.ones(3), torch.ones(3)), strict=False).run_decompositions()
    f = import_exported_program(ep).entry
    assert f.arg_names() == ["acc", "x"] and get_aliases(f) == {1: 0}
    state: dict[int, np.ndarray] = {}
    x = np.array([0.5, -1.0, 2.0], np.float32)
    acc = np.array([1.0, 2.0, 3.0], np.float32)
    for step in range(3):
        y, _ = run_function_stateful(f, [acc if step == 0 else None, x], state)
        np.testing.assert_allclose(state[0], acc + (step + 1) * x, rtol=1e-6)
        np.testing.assert_allclose(y, 2 * state[0], rtol=1e-6)


# ---------------------------------------------------------------------------
# JAX: donated cache buffers

jax = pytest.importorskip("jax")


def _jax_decode_step():
    import jax.numpy as jnp
    from jax import lax

    rng = np.random.default_rng(3)
    wq, wk, wv = (jnp.asarray(rng.standard_normal((8, 8)).astype(np.float32) * 0.3) for _ in range(3))

    def step(x, k_cache, v_cache, pos):
        q, k, v = x @ wq, x @ wk, x @ wv
        k_cache = lax.dynamic_update_slice(k_cache, k, (pos, 0))
        v_cache = lax.dynamic_update_slice(v_cache, v, (pos, 0))
        scores = (q @ k_cache.T) / jnp.sqrt(8.0)
        mask = jnp.arange(k_cache.shape[0])[None, :] <= pos
        p = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
        return p @ v_cache, k_cache, v_cache

    return step


def _jax_reference(step, xs):
    k = np.zeros((MAX_CACHE, 8), np.float32)
    v = np.zeros((MAX_CACHE, 8), np.float32)
    outs = []
    for i, x in enumerate(xs):
        y, k, v = step(x, k, v, np.int32(i))
        outs.append((np.asarray(y), np.asarray(k)))
    return outs


def _check_jax(m, step, xs):
    f = m.entry
    assert get_aliases(f) == {1: 1, 2: 2}
    state = {1: np.zeros((MAX_CACHE, 8), np.float32), 2: np.zeros((MAX_CACHE, 8), np.float32)}
    for i, (x, (want_y, want_k)) in enumerate(zip(xs, _jax_reference(step, xs))):
        y, _, _ = run_function_stateful(f, [x, None, None, np.int32(i)], state, float64=True)
        np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(state[1], want_k, rtol=1e-4, atol=1e-6)


def test_jax_donated_cache():
    from irkit.frontends.jax import import_jax

    step = _jax_decode_step()
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((1, 8)).astype(np.float32) for _ in range(3)]
    args = (xs[0], np.zeros((MAX_CACHE, 8), np.float32), np.zeros((MAX_CACHE, 8), np.float32), np.int32(0))
    # donate_argnums given to the importer, and read from a jax.jit wrapper.
    _check_jax(import_jax(step, args, donate_argnums=(1, 2)), step, xs)
    _check_jax(import_jax(jax.jit(step, donate_argnums=(1, 2)), args), step, xs)
    # Not donated: no state.
    assert get_aliases(import_jax(step, args).entry) == {}


def test_jax_stablehlo_and_hlo_aliasing():
    from irkit.frontends.jax import import_hlo, import_stablehlo

    step = _jax_decode_step()
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((1, 8)).astype(np.float32) for _ in range(2)]
    args = (xs[0], np.zeros((MAX_CACHE, 8), np.float32), np.zeros((MAX_CACHE, 8), np.float32), np.int32(0))
    lowered = jax.jit(step, donate_argnums=(1, 2)).lower(*args)
    text = lowered.as_text()
    assert "tf.aliasing_output = 1" in text and "tf.aliasing_output = 2" in text
    _check_jax(import_stablehlo(text), step, xs)
    # XLA's HLO text keeps the donation in its header: input_output_alias={ {1}: (1, {}, may-alias), ... }.
    hlo = lowered.as_text(dialect="hlo")
    assert "input_output_alias" in hlo.splitlines()[0]
    _check_jax(import_hlo(hlo), step, xs)


# ---------------------------------------------------------------------------
# ONNX: past_key_values.* inputs, present.* outputs

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _onnx_cache_model() -> bytes:
    """One attention layer: present.0.{key,value} = Concat(past, new) along the sequence."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(6)
    d = 8
    inits = [numpy_helper.from_array((rng.standard_normal((d, d)) * 0.3).astype(np.float32), n)
             for n in ("Wq", "Wk", "Wv")]
    inits.append(numpy_helper.from_array(np.array(1 / np.sqrt(d), np.float32), "scale"))
    nodes = [
        helper.make_node("MatMul", ["x", "Wq"], ["q"]),
        helper.make_node("MatMul", ["x", "Wk"], ["k"]),
        helper.make_node("MatMul", ["x", "Wv"], ["v"]),
        helper.make_node("Concat", ["past_key_values.0.key", "k"], ["present.0.key"], axis=1),
        helper.make_node("Concat", ["past_key_values.0.value", "v"], ["present.0.value"], axis=1),
        helper.make_node("Transpose", ["present.0.key"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s0"]),
        helper.make_node("Mul", ["s0", "scale"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "present.0.value"], ["out"]),
    ]
    f = TensorProto.FLOAT
    g = helper.make_graph(
        nodes, "decoder",
        [helper.make_tensor_value_info("x", f, [1, 1, d]),
         helper.make_tensor_value_info("past_key_values.0.key", f, [1, "past", d]),
         helper.make_tensor_value_info("past_key_values.0.value", f, [1, "past", d])],
        [helper.make_tensor_value_info("out", f, [1, 1, d]),
         helper.make_tensor_value_info("present.0.value", f, [1, "total", d]),
         helper.make_tensor_value_info("present.0.key", f, [1, "total", d])],
        inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString()


def _onnx_generate(run_step, n_steps: int = 3):
    rng = np.random.default_rng(7)
    past_k = rng.standard_normal((1, 2, 8)).astype(np.float32)
    past_v = rng.standard_normal((1, 2, 8)).astype(np.float32)
    outs = []
    for _ in range(n_steps):
        x = rng.standard_normal((1, 1, 8)).astype(np.float32)
        y, past_v, past_k = run_step(x, past_k, past_v)
        outs.append(np.asarray(y))
    return outs, past_k


def test_onnx_past_present_pairs():
    from irkit.frontends.onnx import import_onnx

    data = _onnx_cache_model()
    m = import_onnx(data)
    f = m.entry
    assert f.arg_names() == ["x", "past_key_values.0.key", "past_key_values.0.value"]
    assert get_cache_pairs(f) == {1: 2, 2: 1}  # present.0.value -> past value, present.0.key -> past key
    assert get_aliases(f) == {}  # a concat grows: a pairing, not an alias
    assert get_cache_pairs(parse_module(print_module(m)).entry) == {1: 2, 2: 1}

    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want, want_k = _onnx_generate(
        lambda x, k, v: sess.run(None, {"x": x, "past_key_values.0.key": k, "past_key_values.0.value": v}))
    pairs = get_cache_pairs(f)

    def irkit_step(x, k, v):
        outs = run(m, [x, k, v], float64=True)
        nxt = {a: outs[o] for o, a in pairs.items()}  # feed present back as past
        return outs[0], nxt[2], nxt[1]

    got, got_k = _onnx_generate(irkit_step)
    assert got_k.shape == (1, 5, 8)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_k, want_k, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_onnx_dynamo_export_with_cache(tmp_path):
    """A toy Llama exported by torch's dynamo ONNX exporter with its cache as inputs/outputs."""
    from transformers import DynamicCache

    from irkit.frontends.onnx import import_onnx
    from irkit.zoo.build import _quiet_transformers, entry, make_config

    config = make_config(entry("llama"), "toy")
    torch.manual_seed(0)
    with _quiet_transformers():
        model = transformers.LlamaForCausalLM(config).eval()
    n_layers = config.num_hidden_layers
    kvh = config.num_key_value_heads
    hd = config.hidden_size // config.num_attention_heads

    class WithCache(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, *kv):
            cache = DynamicCache(config=config)
            for i in range(n_layers):
                cache.update(kv[2 * i], kv[2 * i + 1], i)
            o = self.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
            outs = [o.logits]
            for layer in o.past_key_values.layers:
                outs += [layer.keys, layer.values]
            return tuple(outs)

    gen = torch.Generator().manual_seed(1)
    kv = [torch.randn(1, kvh, 3, hd, generator=gen) for _ in range(2 * n_layers)]
    ids, mask = torch.tensor([[5, 6]]), torch.ones(1, 5, dtype=torch.long)
    ins = ["input_ids", "attention_mask"] + [f"past_key_values.{i}.{w}" for i in range(n_layers)
                                             for w in ("key", "value")]
    outs = ["logits"] + [f"present.{i}.{w}" for i in range(n_layers) for w in ("key", "value")]
    path = tmp_path / "llama_cache.onnx"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(WithCache(model), (ids, mask, *kv), str(path), dynamo=True, input_names=ins,
                          output_names=outs)
    m = import_onnx(str(path))
    assert get_cache_pairs(m.entry) == {1 + j: 2 + j for j in range(2 * n_layers)}
    feeds = [ids.numpy(), mask.numpy()] + [t.numpy() for t in kv]
    got = run(m, feeds, float64=True)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, dict(zip(ins, feeds)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
