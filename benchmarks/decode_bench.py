"""Decode speed with a static KV cache: irkit targets vs torch eager (and torch.compile).

For each model and batch: the decode function (1 token per call, the position a
run-time value) is lowered once per target and opened as a session with the
caches resident; the step time is the median wall time of one decode call
(argmax included) at cache position ``--pos`` (default 10 and 1000 where the
cache is long enough: a static cache attends over all its positions, so the
step should be flat in the position).  torch eager runs transformers'
``TorchExportableModuleWithStaticCache`` (the same static cache, updated in
place); ``--torch-compile`` adds ``torch.compile`` of it.  ``--jax`` adds a
JAX peer for GPT-2: a decode step written the way a JAX user writes it (the
transformers weights, one ``[B, H, T, D]`` cache array per layer updated with
``lax.dynamic_update_slice``, ``jax.jit`` with the caches donated), checked
against the torch logits before it is timed.

Run (each line well under 3 minutes on 2 cores):
    python benchmarks/decode_bench.py --model gpt2 --size toy --batch 1,8 --targets ort,tvm-llvm,xla-cpu
    python benchmarks/decode_bench.py --model gpt2 --size full --batch 1 --targets ort,xla-cpu --steps 10
The decode function is run through ``--pipeline`` first (default: the zoo's optimising pipeline,
which fuses each layer's cache update and attention into ``ik.cache_attention``; ``--pipeline none``
times the function as imported).

Writes benchmarks/results/decode_<model>_<size>.md (append with --append).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _median_step(fn, steps: int) -> float:
    fn(0)  # warm-up
    ts = []
    for k in range(steps):
        t0 = time.perf_counter()
        fn(k)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def irkit_steps(dm, target: str, positions: list[int], steps: int) -> tuple[dict[int, float], float]:
    """Median decode-step seconds at each start position, and the compile seconds."""
    from irkit.generate import compile_decoder

    c = compile_decoder(dm, target)
    sess = c.target.open_session(c.decode)
    for i, (shape, dt) in c.state_types.items():
        sess.bind(i, np.zeros(shape, dt))
    r = c.roles
    n = len(c.decode.input_shapes)
    rng = np.random.default_rng(0)
    out = {}
    for p in positions:
        def step(k: int, p: int = p) -> None:
            xs = [None] * n
            xs[r.ids] = rng.integers(0, dm.vocab, size=(c.batch, 1), dtype=np.int64)
            xs[r.position] = np.array([p + k], np.int64)
            logits = sess.run(xs, fetch=[r.logits])[0]
            np.argmax(logits[:, -1, :], axis=-1)
        out[p] = _median_step(step, steps)
    sess.close()
    return out, c.compile_seconds


def torch_steps(model, batch: int, cache_len: int, positions: list[int], steps: int,
                compile_: bool, device: str = "cpu") -> tuple[dict[int, float], float]:
    import torch
    from transformers.integrations.executorch import TorchExportableModuleWithStaticCache

    model.generation_config.cache_implementation = "static"
    w = TorchExportableModuleWithStaticCache(model.to(device), batch, cache_len).to(device).eval()
    fwd = w
    t0 = time.perf_counter()
    if compile_:
        fwd = torch.compile(w, dynamic=False)
    g = torch.Generator().manual_seed(0)
    out = {}
    first = True
    for p in positions:
        def step(k: int, p: int = p) -> None:
            ids = torch.randint(0, model.config.vocab_size, (batch, 1), generator=g).to(device)
            with torch.no_grad():
                logits = fwd(input_ids=ids, cache_position=torch.tensor([p + k], device=device))
            logits[:, -1, :].argmax(-1).cpu()  # the next tokens on the host, as a generate loop needs them
        if first:
            step(0)  # compile (torch.compile) happens here
            first = False
        out[p] = _median_step(step, steps)
    return out, (time.perf_counter() - t0) if compile_ else 0.0


def jax_gpt2_step(model, batch: int, cache_len: int):
    """A jitted GPT-2 decode step (caches donated) with the weights of ``model``, and its initial state."""
    import jax
    import jax.numpy as jnp

    cfg = model.config
    sd = {k: jnp.asarray(v.detach().numpy()) for k, v in model.state_dict().items()}
    L, H, E = cfg.n_layer, cfg.n_head, cfg.n_embd
    Dh, eps = E // H, cfg.layer_norm_epsilon
    layers = [{k.split(".", 3)[3]: v for k, v in sd.items() if k.startswith(f"transformer.h.{i}.")} for i in range(L)]
    params = {"wte": sd["transformer.wte.weight"], "wpe": sd["transformer.wpe.weight"],
              "lnf_w": sd["transformer.ln_f.weight"], "lnf_b": sd["transformer.ln_f.bias"],
              "layers": layers}

    def ln(x, w, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + eps) * w + b

    def step(p, kc, vc, ids, pos):
        x = p["wte"][ids] + p["wpe"][pos][None, None, :]  # [B, 1, E]
        keep = jnp.arange(cache_len) <= pos
        kc, vc = list(kc), list(vc)
        for i, lw in enumerate(p["layers"]):  # unrolled: each layer's cache is its own donated buffer
            h = ln(x, lw["ln_1.weight"], lw["ln_1.bias"]) @ lw["attn.c_attn.weight"] + lw["attn.c_attn.bias"]
            q, k, v = (t.reshape(batch, 1, H, Dh).transpose(0, 2, 1, 3) for t in jnp.split(h, 3, axis=-1))
            kc[i] = jax.lax.dynamic_update_slice(kc[i], k, (0, 0, pos, 0))
            vc[i] = jax.lax.dynamic_update_slice(vc[i], v, (0, 0, pos, 0))
            s = jnp.einsum("bhqd,bhkd->bhqk", q, kc[i]) / jnp.sqrt(Dh).astype(x.dtype)
            a = jax.nn.softmax(jnp.where(keep, s, -jnp.inf), axis=-1)
            o = jnp.einsum("bhqk,bhkd->bhqd", a, vc[i]).transpose(0, 2, 1, 3).reshape(batch, 1, E)
            x = x + o @ lw["attn.c_proj.weight"] + lw["attn.c_proj.bias"]
            h = ln(x, lw["ln_2.weight"], lw["ln_2.bias"]) @ lw["mlp.c_fc.weight"] + lw["mlp.c_fc.bias"]
            x = x + jax.nn.gelu(h, approximate=True) @ lw["mlp.c_proj.weight"] + lw["mlp.c_proj.bias"]
        logits = ln(x, p["lnf_w"], p["lnf_b"]) @ p["wte"].T
        return logits, tuple(kc), tuple(vc)

    fn = jax.jit(step, donate_argnums=(1, 2))
    kc = tuple(jnp.zeros((batch, H, cache_len, Dh), jnp.float32) for _ in range(L))
    vc = tuple(jnp.zeros((batch, H, cache_len, Dh), jnp.float32) for _ in range(L))
    return fn, params, kc, vc


def jax_steps(model, batch: int, cache_len: int, positions: list[int], steps: int) -> tuple[dict[int, float], float]:
    """Median jitted JAX decode-step seconds (GPT-2 only), after checking its logits against torch."""
    import jax
    import torch

    if model.config.model_type != "gpt2":
        raise ValueError(f"the JAX peer is written for GPT-2, not {model.config.model_type}")
    t0 = time.perf_counter()
    fn, params, kc, vc = jax_gpt2_step(model, batch, cache_len)
    ids = np.arange(1, batch + 1, dtype=np.int32)[:, None]
    logits, kc, vc = fn(params, kc, vc, ids, np.int32(0))
    jax.block_until_ready(logits)
    comp = time.perf_counter() - t0
    with torch.no_grad():
        want = model(torch.tensor(ids, dtype=torch.long)).logits.numpy()
    np.testing.assert_allclose(np.asarray(logits), want, rtol=2e-3, atol=2e-3)
    state = {"kc": kc, "vc": vc}
    rng = np.random.default_rng(0)
    out = {}
    for p in positions:
        def step(k: int, p: int = p) -> None:
            x = rng.integers(0, model.config.vocab_size, size=(batch, 1), dtype=np.int32)
            lg, state["kc"], state["vc"] = fn(params, state["kc"], state["vc"], x, np.int32(p + k))
            np.argmax(np.asarray(lg)[:, -1, :], axis=-1)
        out[p] = _median_step(step, steps)
    return out, comp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--size", default="toy", choices=("toy", "full"))
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--targets", default="ort,tvm-llvm,xla-cpu")
    ap.add_argument("--max-cache-len", type=int, default=None)
    ap.add_argument("--pos", default="", help="start positions (default 10 and 1000 where the cache allows)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--torch-compile", action="store_true")
    ap.add_argument("--jax", action="store_true", help="add the jax.jit peer (GPT-2)")
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch intra-op threads (default 1: on a busy 2-core machine more threads oversubscribe "
                         "and torch eager slows down 10x)")
    ap.add_argument("--pipeline", default=None,
                    help="passes run on the decode function before lowering (default: the zoo's optimising "
                         "pipeline, irkit.zoo.run.DEFAULT_PIPELINE; 'none': as imported)")
    ap.add_argument("--torch-device", default="cpu",
                    help="device of the torch peers (cuda: on the GPU, beside irkit's tvm-cuda and xla-gpu)")
    ap.add_argument("--append", action="store_true")
    args = ap.parse_args()

    import torch

    from irkit.commands.generate_cmd import apply_pipeline
    from irkit.zoo.decode import decode_model
    from irkit.zoo.run import DEFAULT_PIPELINE

    pipeline = DEFAULT_PIPELINE if args.pipeline is None else ("" if args.pipeline == "none" else args.pipeline)
    torch.set_num_threads(args.torch_threads)
    rows = []
    for b in [int(x) for x in args.batch.split(",")]:
        t0 = time.perf_counter()
        dm = decode_model(args.model, args.size, batch=b, max_cache_len=args.max_cache_len)
        export_s = time.perf_counter() - t0
        dm_ir = apply_pipeline(dm, pipeline or None)
        L = dm.max_cache_len
        pos = [int(x) for x in args.pos.split(",")] if args.pos else [p for p in (10, 1000) if p + args.steps + 1 < L]
        if not pos:
            pos = [min(10, L - args.steps - 2)]
        engines = [t.strip() for t in args.targets.split(",") if t.strip()]
        for t in engines:
            try:
                st, comp = irkit_steps(dm_ir, t, pos, args.steps)
                rows.append((t, b, st, comp, ""))
            except Exception as e:  # noqa: BLE001 - a target that cannot run this model is a row with the reason
                rows.append((t, b, {}, 0.0, str(e).splitlines()[0][:120]))
            print(rows[-1], flush=True)
        rows.append(("torch eager", b, *torch_steps(dm.torch_model, b, L, pos, args.steps, False,
                                                    args.torch_device), ""))
        print(rows[-1], flush=True)
        if args.torch_compile:
            try:
                rows.append(("torch.compile", b, *torch_steps(dm.torch_model, b, L, pos, args.steps, True,
                                                          args.torch_device), ""))
            except Exception as e:  # noqa: BLE001
                rows.append(("torch.compile", b, {}, 0.0, str(e).splitlines()[0][:120]))
            print(rows[-1], flush=True)
        if args.jax:
            try:
                rows.append(("jax.jit (donated cache)", b, *jax_steps(dm.torch_model, b, L, pos, args.steps), ""))
            except Exception as e:  # noqa: BLE001
                rows.append(("jax.jit (donated cache)", b, {}, 0.0, str(e).splitlines()[0][:120]))
            print(rows[-1], flush=True)
        print(f"# export (torch.export + import) batch {b}: {export_s:.1f} s; "
              f"KV cache {dm.cache_bytes() / 1e6:.2f} MB; weights {dm.weight_bytes() / 1e6:.1f} MB", flush=True)
    cmd = "python benchmarks/decode_bench.py " + " ".join(sys.argv[1:])
    all_pos = sorted({p for r in rows for p in r[2]})
    head = "| engine | batch | " + " | ".join(f"step ms @pos {p} | tok/s @pos {p}" for p in all_pos) + \
        " | compile s | note |"
    lines = [(f"`{cmd}` (model {args.model} {args.size}, cache {L} positions, median of {args.steps} steps, "
              f"torch threads {args.torch_threads} on {args.torch_device}, irkit pipeline {pipeline or 'none'})"), "",
             head, "|" + "---|" * (4 + 2 * len(all_pos))]
    for eng, b, st, comp, note in rows:
        cells = []
        for p in all_pos:
            s = st.get(p)
            cells += [f"{s * 1e3:.3f}" if s else "-", f"{b / s:,.0f}" if s else "-"]
        lines.append(f"| {eng} | {b} | " + " | ".join(cells) + f" | {comp:.1f} | {note} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(__file__).resolve().parent / "results" / f"decode_{args.model}_{args.size}.md"
    from irkit.fileio import atomic_write

    prev = out.read_text() + "\n" if args.append and out.exists() else ""
    atomic_write(out, prev + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
