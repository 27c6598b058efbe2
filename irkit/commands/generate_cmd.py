"""``irkit generate``: greedy generation with a KV cache on one target (see docs/generate.md)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from irkit.cli import args_for, command
from irkit.errors import InputError

MODEL_HELP = ("zoo:NAME (a zoo decoder LM, e.g. zoo:llama), FILE.py:FACTORY (returns a transformers decoder LM "
              "or an irkit.zoo.decode.DecodeModel), or a .pt2 / .mlir decode function with its cache as aliased "
              "state")


def add_model_args(p: argparse.ArgumentParser) -> None:
    """The options that choose and shape the model (shared with ``irkit bench --generate``)."""
    p.add_argument("--size", choices=("toy", "full"), default="toy", help="zoo size (default toy)")
    p.add_argument("--batch", type=int, default=1, help="batch size (rows generated at once; default 1)")
    p.add_argument("--max-cache-len", type=int, default=None,
                   help="KV-cache positions (default: the model's limit, at most 64 toy / 1024 full)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights and random prompt (default 0)")


def _args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--target", default="reference", help="a runnable target (reference, ort, tvm-llvm, xla-cpu)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt-ids", help="comma-separated prompt token ids, e.g. 1,2,3")
    g.add_argument("--prompt-len", type=int, help="a random prompt of this many tokens (seeded by --seed)")
    p.add_argument("--new-tokens", type=int, required=True, help="tokens to generate")
    add_model_args(p)
    p.add_argument("-p", "--pipeline", default=None,
                   help="passes to run on the decode (and prefill) function before lowering (default: the "
                        "optimising pipeline, which fuses the cache update and attention; 'none': as imported)")
    p.add_argument("--json", action="store_true",
                   help='print {"tokens": [...], "ttft_seconds": ..., "step_seconds": [...]}')


def _positive(name: str, v: int | None) -> None:
    if v is not None and v < 1:
        raise InputError(f"{name} must be >= 1, got {v}")


def parse_prompt(args: argparse.Namespace, vocab: int) -> np.ndarray:
    """The prompt as ``[batch, P]`` int64 ids."""
    if args.prompt_ids is not None:
        try:
            ids = [int(t) for t in args.prompt_ids.split(",") if t.strip()]
        except ValueError:
            raise InputError(f"--prompt-ids '{args.prompt_ids}': expected comma-separated integers, e.g. 1,2,3") \
                from None
        if not ids:
            raise InputError("--prompt-ids: no token ids given, e.g. --prompt-ids 1,2,3")
        bad = [t for t in ids if t < 0 or (vocab and t >= vocab)]
        if bad:
            raise InputError(f"--prompt-ids: token {bad[0]} is outside the vocabulary 0..{vocab - 1}")
        return np.broadcast_to(np.array(ids, np.int64), (args.batch, len(ids))).copy()
    _positive("--prompt-len", args.prompt_len)
    rng = np.random.default_rng(args.seed)
    return rng.integers(0, max(vocab, 2), size=(args.batch, args.prompt_len), dtype=np.int64)


def load_decoder(spec: str, args: argparse.Namespace, prompt_len: int | None) -> Any:
    """A :class:`irkit.zoo.decode.DecodeModel` (or a decode Module) from the MODEL argument."""
    from irkit.zoo.decode import decode_model

    _positive("--batch", args.batch)
    _positive("--max-cache-len", args.max_cache_len)
    if spec.startswith("zoo:"):
        return decode_model(spec[4:], args.size, batch=args.batch, max_cache_len=args.max_cache_len,
                            prompt_len=prompt_len, seed=args.seed)
    if ":" in spec and not Path(spec).exists():
        return _from_factory(spec, args, prompt_len)
    p = Path(spec)
    if not p.exists():
        raise InputError(f"{spec}: no such file (MODEL is {MODEL_HELP})")
    if p.suffix.lower() == ".onnx":
        raise InputError(f"{spec}: ONNX models carry their cache as past/present tensors of growing shape, which "
                         "irkit generate does not run; export a static cache with zoo:NAME or FILE.py:FACTORY")
    from irkit.cli import read_input_module
    from irkit.generate import decode_model_of

    return decode_model_of(read_input_module(spec), p.stem, spec)


def _from_factory(spec: str, args: argparse.Namespace, prompt_len: int | None) -> Any:
    from irkit.frontends.torch_export import load_factory_spec
    from irkit.zoo.decode import DecodeModel, export_static, import_static

    result, label = load_factory_spec(spec)
    if isinstance(result, tuple) and result:
        result = result[0]
    if isinstance(result, DecodeModel):
        return result
    if not hasattr(result, "generation_config") or not hasattr(result, "config"):
        raise InputError(f"{spec}: the factory returned a {type(result).__name__}; irkit generate needs a "
                         "transformers decoder LM (a PreTrainedModel with a generation config) or a DecodeModel")
    model = result.eval()
    model.config.use_cache = True
    cfg = model.config
    limit = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 1024
    cache = args.max_cache_len or min(limit, 1024)
    m = import_static(export_static(model, args.batch, cache, None), spec)  # S symbolic: prefill and decode
    return DecodeModel(label, m, m, args.batch, cache, None, int(getattr(cfg, "vocab_size", 0)), model)


def decode_pipeline(arg: str | None) -> str | None:
    """The ``-p`` of ``irkit generate`` / ``bench --generate``: the zoo's optimising pipeline when not given
    (``fuse-cache-attention`` is what keeps a step from copying the cache), ``None`` for ``none``."""
    from irkit.zoo.run import DEFAULT_PIPELINE

    if arg is None:
        return DEFAULT_PIPELINE
    return None if arg.strip().lower() in ("", "none") else arg


def apply_pipeline(dm: Any, pipeline: str | None) -> Any:
    """``dm`` with ``pipeline`` run on copies of its decode and prefill functions (the same function once
    when it serves as both)."""
    if not pipeline:
        return dm
    import dataclasses

    from irkit.ir.core import Module
    from irkit.passmanager import run_pipeline

    if isinstance(dm, Module):
        return run_pipeline(dm.clone(), pipeline)
    dec = run_pipeline(dm.decode.clone(), pipeline)
    pre = dm.prefill
    if pre is dm.decode:
        pre = dec
    elif pre is not None:
        pre = run_pipeline(pre.clone(), pipeline)
    return dataclasses.replace(dm, decode=dec, prefill=pre, info={**dm.info, "pipeline": pipeline})


@command("generate", "greedy generation with a KV cache on a target (TTFT and per-token step times)")
@args_for(_args)
def cmd_generate(args: argparse.Namespace) -> int:
    from irkit.generate import generate

    _positive("--new-tokens", args.new_tokens)
    _positive("--batch", args.batch)
    plen = parse_prompt(args, 0).shape[1]  # a malformed prompt fails before the (slow) export
    pipeline = decode_pipeline(args.pipeline)
    if pipeline:
        from irkit.passmanager import parse_pipeline

        parse_pipeline(pipeline)  # an unknown pass fails before the (slow) export
    dm = apply_pipeline(load_decoder(args.model, args, plen), pipeline)
    vocab = getattr(dm, "vocab", 0)
    prompt = parse_prompt(args, vocab)
    r = generate(dm, args.target, prompt, args.new_tokens)
    if args.json:
        print(json.dumps(r.to_json()))
        return 0
    steps = np.array(r.step_seconds) if r.step_seconds else np.array([float("nan")])
    for row in r.tokens.tolist():
        print(" ".join(str(t) for t in row))
    print(f"# target {r.target}, batch {r.batch}, prompt {r.prompt_len}, {r.tokens.shape[1]} new tokens; "
          f"compile {r.compile_seconds:.2f} s, TTFT {r.ttft_seconds * 1e3:.2f} ms, step p50 "
          f"{np.median(steps) * 1e3:.2f} ms, {r.decode_tokens_per_second():.1f} decode tokens/s")
    return 0


# ------------------------------------------------------------------ irkit bench --generate

ESTIMATE_SPECS = ("tpu-v5e", "tpu-v6e", "h100", "h200")
"""Hardware descriptions estimated by default in ``irkit bench --generate``."""


def add_bench_generate_args(p: argparse.ArgumentParser) -> None:
    """The options ``irkit bench --generate`` adds to ``irkit bench``."""
    g = p.add_argument_group("generation (--generate)")
    g.add_argument("--generate", action="store_true",
                   help="benchmark greedy generation with a KV cache: INPUT is zoo:NAME or FILE.py:FACTORY "
                        "(see docs/generate.md)")
    g.add_argument("--prompt-len", type=int, default=8, help="prompt tokens (--generate; default 8)")
    g.add_argument("--new-tokens", type=int, default=32, help="generated tokens (--generate; default 32)")
    g.add_argument("--size", choices=("toy", "full"), default="toy", help="zoo size (--generate; default toy)")
    g.add_argument("--max-cache-len", type=int, default=None, help="KV-cache positions (--generate)")
    g.add_argument("--specs", default=",".join(ESTIMATE_SPECS),
                   help="hardware descriptions to estimate (--generate; '' for none)")


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else float("nan")


def bench_rows(dm: Any, targets: list[str], prompt: np.ndarray, new_tokens: int, specs: list[str],
               prices: dict[str, float]) -> list[dict[str, Any]]:
    """Measured rows (one per runnable target) and estimated rows (one per spec) for one model and batch."""
    from irkit.bench import price_for
    from irkit.generate import compile_decoder, generate
    from irkit.targets.estimate import estimate
    from irkit.targets.hwspec import load_spec
    from irkit.targets.registry import get_target

    batch, plen = prompt.shape
    kv = dm.cache_bytes()
    rows: list[dict[str, Any]] = []
    for t in targets:
        tg = get_target(t)
        c = compile_decoder(dm, tg, plen)
        generate(dm, tg, prompt, min(3, new_tokens), compiled=c)  # warm-up (first-call allocations)
        r = generate(dm, tg, prompt, new_tokens, compiled=c)
        p50 = _pct(r.step_seconds, 50)
        dec = batch / p50 if p50 > 0 else float("nan")  # the median step: robust on a busy machine
        price = price_for(t, tg.spec, prices)
        rows.append({"kind": "measured", "target": t, "spec": tg.spec or "", "batch": batch, "prompt_len": plen,
                     "new_tokens": new_tokens, "compile_seconds": c.compile_seconds, "ttft_seconds": r.ttft_seconds,
                     "prefill_tokens_per_second": batch * plen / r.ttft_seconds,
                     "decode_tokens_per_second": dec, "p50_seconds": p50,
                     "p99_seconds": _pct(r.step_seconds, 99), "kv_cache_bytes": kv,
                     "usd_per_million_tokens": (price / 3600 / dec * 1e6) if price and dec > 0 else None})
    from irkit.generate import seq_bindings
    from irkit.zoo.decode import DecodeRoles

    for s in specs:
        hw = load_spec(s)
        step = estimate(dm.decode, hw, seq_bindings(dm.decode, dm.roles, 1)).seconds
        pb = seq_bindings(dm.prefill, DecodeRoles.of(dm.prefill), plen) if dm.prefill is not None else None
        pre = estimate(dm.prefill, hw, pb).seconds if pb is not None else step * plen
        dec = batch / step if step > 0 else float("nan")
        price = price_for(s, s, prices) or hw.price_usd_per_hour
        rows.append({"kind": "estimated", "target": s, "spec": s, "batch": batch, "prompt_len": plen,
                     "new_tokens": new_tokens, "compile_seconds": None, "ttft_seconds": pre,
                     "prefill_tokens_per_second": batch * plen / pre if pre > 0 else None,
                     "decode_tokens_per_second": dec, "p50_seconds": step, "p99_seconds": step, "kv_cache_bytes": kv,
                     "usd_per_million_tokens": (price / 3600 / dec * 1e6) if price and dec > 0 else None})
    return rows


def capacity_lines(dm: Any, specs: list[str], context: int) -> list[str]:
    """Per spec: the largest batch whose weights + KV cache fit the chip's memory at ``context`` tokens."""
    from irkit.targets.hwspec import load_spec

    w = dm.weight_bytes()
    per_token = dm.cache_bytes() / max(dm.batch * dm.max_cache_len, 1)
    out = []
    for s in specs:
        hw = load_spec(s)
        cap = hw.memory.capacity_gb * 1e9 if hw.memory and hw.memory.capacity_gb else None
        if cap is None:
            out.append(f"capacity {s}: memory capacity unknown")
            continue
        b = int((cap - w) // (per_token * context)) if per_token > 0 and cap > w else 0
        out.append(f"capacity {s} ({cap / 1e9:.0f} GB): weights {w / 1e6:,.1f} MB + KV {per_token / 1e3:.1f} kB/token;"
                   f" at context {context}: batch <= {b} ({b * context:,} cached tokens)")
    return out


def rows_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table."""
    def f(v: Any, scale: float = 1.0, nd: int = 2) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v * scale:,.{nd}f}"

    head = ("| row | target / spec | batch | TTFT ms | prefill tok/s | decode tok/s | step p50 ms | step p99 ms "
            "| KV cache MB | $/M tokens |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        usd = r["usd_per_million_tokens"]
        lines.append(f"| {r['kind']} | {r['target']} | {r['batch']} | {f(r['ttft_seconds'], 1e3)} | "
                     f"{f(r['prefill_tokens_per_second'], 1, 0)} | {f(r['decode_tokens_per_second'], 1, 1)} | "
                     f"{f(r['p50_seconds'], 1e3, 3)} | {f(r['p99_seconds'], 1e3, 3)} | "
                     f"{f(r['kv_cache_bytes'], 1e-6, 3)} | {f(usd, 1, 4) if usd is not None else '-'} |")
    return "\n".join(lines)


def bench_generate(args: argparse.Namespace) -> int:
    """``irkit bench INPUT --generate --targets T1,T2 [--batch 1,8] [--price ...]``."""
    from irkit.bench import check_price_keys, parse_prices
    from irkit.fileio import atomic_write
    from irkit.targets.hwspec import list_specs
    from irkit.targets.registry import TARGETS, get_target

    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    for t in targets:
        get_target(t)  # unknown names fail before the slow export
    specs = [s.strip() for s in (args.specs or "").split(",") if s.strip()]
    known = list_specs()
    for s in specs:
        if s not in known:
            raise InputError(f"--specs: unknown hardware description '{s}' (known: {', '.join(known)})")
    prices = parse_prices(args.price)
    check_price_keys(prices, [*TARGETS, *known])
    pipeline = decode_pipeline(getattr(args, "pipeline", None) or None)
    if pipeline:
        from irkit.passmanager import parse_pipeline

        parse_pipeline(pipeline)
    _positive("--new-tokens", args.new_tokens)
    _positive("--prompt-len", args.prompt_len)
    try:
        batches = [int(x) for x in (args.batch or "1").split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--batch: expected comma-separated integers, got '{args.batch}'") from None
    rows: list[dict[str, Any]] = []
    caps: list[str] = []
    for b in batches:
        _positive("--batch", b)
        ns = argparse.Namespace(**{**vars(args), "batch": b, "prompt_ids": None})
        dm = apply_pipeline(load_decoder(args.input, ns, args.prompt_len), pipeline)
        prompt = parse_prompt(ns, dm.vocab)
        rows += bench_rows(dm, targets, prompt, args.new_tokens, specs, prices)
        if b == batches[0]:
            ctx = int(getattr(dm.torch_model.config, "max_position_embeddings", 0) or dm.max_cache_len) \
                if dm.torch_model is not None else dm.max_cache_len
            caps = capacity_lines(dm, specs, ctx)
    table = rows_table(rows)
    print(table)
    for line in caps:
        print(line)
    if args.json_out:
        atomic_write(args.json_out, json.dumps({"rows": rows, "capacity": caps}, indent=2, default=float) + "\n")
    if args.md_out:
        atomic_write(args.md_out, table + "\n\n" + "\n".join(f"- {c}" for c in caps) + "\n")
    return 0
