"""Attention fusion on the ONNX exports of the example models: irkit vs onnxruntime's transformer optimizer.

For every example model (tiny by default) and both torch ONNX exporters
(TorchScript, ``dynamo=False``; and dynamo) this exports the model once, then:

- irkit: ``import_onnx`` and the pipeline
  ``canonicalize,fuse-attention,fuse-norm,fuse-activation,cse,dce``; counts
  ``ik.attention`` ops and runs the fused module in the interpreter;
- onnxruntime: ``onnxruntime.transformers.optimizer.optimize_model`` with the
  model type that fits the family (bert, gpt2, t5, vit; Llama has no type of
  its own, ``gpt_neox`` is the nearest), counts fused attention operators
  (Attention, MultiHeadAttention, GroupQueryAttention, ...) and runs the
  optimised model with the CPU execution provider.

"Right" is judged against a float64 evaluation of the same model and weights
(the torch module converted with ``.double()``, fed the same inputs), with the
tolerance irkit's policy gives the model's dtype for reordered arithmetic
(``irkit.check.tolerance``: float32 rtol 2e-4 / atol 2e-5, float16 2e-2,
bfloat16 8e-2).  The same yardstick is applied to torch's own output in the
model's dtype, so a half-precision row shows how far the dtype alone takes a
correct implementation.  Errors are reported as the maximum absolute error
and that error relative to the reference's largest magnitude.  For the GELU,
the table says which fused form onnxruntime chose (``FastGelu`` keeps the
tanh approximation, ``Gelu`` / ``BiasGelu`` are the erf form unless the node
carries ``approximate="tanh"``): an erf ``Gelu`` in a model written with the
tanh formula is a rewrite that changes the function, and its error shows in
the ORT column.

Writes a markdown table to stdout and to ``benchmarks/results/fusion_vs_ort.md``
with the command at its top.

Run: python benchmarks/fusion_vs_ort.py [--models gpt2_tiny,bert_tiny] [--size tiny]
     [--exporters torchscript,dynamo] [--cache DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PIPELINE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,cse,dce"
ORT_TYPES = {"gpt2": "gpt2", "bert": "bert", "t5": "t5", "vit": "vit", "llama": "gpt_neox"}
ORT_ATTENTION_OPS = ("Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention",
                     "PackedMultiHeadAttention", "DecoderMaskedMultiHeadAttention", "DecoderAttention",
                     "DecoderMaskedSelfAttention", "LongformerAttention", "PagedAttention")


def attention_layers(model: Any) -> int:
    """Modules named like an attention that hold no smaller attention module."""
    count = 0
    for m in model.modules():
        if "Attention" in type(m).__name__:
            count += not any(c is not m and "Attention" in type(c).__name__ for c in m.modules())
    return count


def _config(model: Any) -> tuple[int, int]:
    cfg = getattr(model, "config", None)
    heads = getattr(cfg, "heads", None) or getattr(cfg, "num_heads", None) or 0
    hidden = getattr(cfg, "hidden", None) or getattr(cfg, "d_model", None) or 0
    return int(heads), int(hidden)


TANH_GELU = ("gelu-tanh-explicit", "gelu-tanh", "gated-gelu")
"""Registry features of models whose GELU is the tanh approximation (T5 v1.1's gated GELU is)."""
ORT_GELU_OPS = ("FastGelu", "BiasFastGelu", "Gelu", "BiasGelu", "QuickGelu")
_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def _close(got: np.ndarray, want64: np.ndarray, dtype: str) -> tuple[bool, float, float]:
    """(within the dtype's tolerance, max abs error, max abs error / max |reference|)."""
    from irkit.check import tolerance
    from irkit.ir.types import DType

    tol = tolerance(DType(_DTYPES[dtype]), reorders=True)
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want64, dtype=np.float64)
    if got.shape != want.shape:
        return False, float("inf"), float("inf")
    diff = np.abs(got - want)
    err = float(np.max(diff)) if got.size else 0.0
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    ok = bool(np.all(np.isfinite(got)) and np.all(diff <= tol.atol + tol.rtol * np.abs(want)))
    return ok, err, err / scale if scale else err


def _export(entry: Any, exporter: str, cache: Path) -> tuple[Path, list[str], list[np.ndarray], Any, Any]:
    from irkit.testing.onnx_export import export_onnx

    model, inputs, dyn = entry.torch_factory()
    path = cache / f"{entry.name}.{exporter}.onnx"
    np_inputs = [t.detach().cpu().numpy() for t in inputs]
    if path.exists():
        import onnx

        proto = onnx.load(str(path), load_external_data=False)
        inits = {t.name for t in proto.graph.initializer}
        names = [i.name for i in proto.graph.input if i.name not in inits]
    else:
        ex = export_onnx(model, inputs, dyn, path, exporter=exporter)
        names = ex.input_names
    return path, names, np_inputs, model, inputs


def _torch_out(model: Any, inputs: Any, float64: bool = False) -> np.ndarray:
    """The model's output in its own dtype, or of a float64 copy of it (same weights, same inputs)."""
    import copy

    import torch

    if float64:
        model = copy.deepcopy(model).double()
        inputs = tuple(t.double() if torch.is_tensor(t) and t.is_floating_point() else t for t in inputs)
    with torch.no_grad():
        y = model(*inputs)
    y = y[0] if isinstance(y, (tuple, list)) else y
    return y.double().numpy()


def _irkit(path: Path, np_inputs: list[np.ndarray]) -> tuple[int, np.ndarray, float]:
    from irkit.frontends.onnx import import_onnx
    from irkit.interp import run
    from irkit.passmanager import PassContext, PassManager

    m = import_onnx(str(path))
    t0 = time.perf_counter()
    PassManager(PIPELINE, ctx=PassContext()).run(m)
    dt = time.perf_counter() - t0
    n = sum(1 for op in m.walk() if op.name == "ik.attention")
    out = run(m, np_inputs)[0]
    return n, out, dt


def _ort(path: Path, model_type: str, heads: int, hidden: int, names: list[str],
         np_inputs: list[np.ndarray]) -> tuple[int, np.ndarray, float, dict[str, int]]:
    import onnxruntime as ort
    from onnxruntime.transformers.optimizer import optimize_model

    quiet = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = optimize_model(str(path), model_type=model_type, num_heads=heads, hidden_size=hidden,
                             use_gpu=False)
    dt = time.perf_counter() - t0
    stats = opt.get_fused_operator_statistics()
    n = sum(int(stats.get(k, 0)) for k in ORT_ATTENTION_OPS)
    gelus = {k: int(stats[k]) for k in ORT_GELU_OPS if int(stats.get(k, 0) or 0)}
    # An ONNX Gelu (opset 20) or onnxruntime's contrib Gelu may carry approximate="tanh": count
    # the erf ones, the only kind that changes a tanh GELU's function.
    erf = sum(1 for node in opt.model.graph.node if node.op_type in ("Gelu", "BiasGelu")
              and not any(a.name == "approximate" and a.s == b"tanh" for a in node.attribute))
    if erf:
        gelus["erf"] = erf
    out_path = path.with_suffix(f".ort-{model_type}.onnx")
    opt.save_model_to_file(str(out_path))
    sess = ort.InferenceSession(str(out_path), providers=["CPUExecutionProvider"])
    feeds = {}
    for i, name in zip(sess.get_inputs(), names):
        x = np_inputs[names.index(i.name)] if i.name in names else np_inputs[len(feeds)]
        want = {"tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(float)": np.float32,
                "tensor(float16)": np.float16}.get(i.type)
        feeds[i.name] = x.astype(want) if want is not None else x
    out = sess.run(None, feeds)[0]
    return n, out, dt, gelus


def _ort_runs(path: Path) -> bool:
    """Whether onnxruntime (CPU) can load the export as it is, before any optimisation."""
    import onnxruntime as ort

    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - any load failure answers the question
        return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="", help="comma-separated names (default: every model of --size)")
    ap.add_argument("--size", default="tiny")
    ap.add_argument("--exporters", default="torchscript,dynamo")
    ap.add_argument("--cache", default="", help="directory for the .onnx exports (reused when present)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fusion_vs_ort.md"))
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    from examples.models import registry

    names = [n for n in args.models.split(",") if n] or registry.names(size=args.size)
    cache = Path(args.cache) if args.cache else Path(__import__("tempfile").mkdtemp(prefix="irkit-fusion-ort-"))
    cache.mkdir(parents=True, exist_ok=True)
    rows = []
    t_start = time.perf_counter()
    for name in names:
        entry = registry.get(name)
        for exporter in [e for e in args.exporters.split(",") if e]:
            row = {"model": name, "exporter": exporter}
            try:
                path, in_names, np_inputs, model, inputs = _export(entry, exporter, cache)
            except Exception as e:  # noqa: BLE001 - a failed export is a table entry
                row["error"] = f"export failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
                rows.append(row)
                print(f"{name} {exporter}: {row['error']}", file=sys.stderr)
                continue
            want = _torch_out(model, inputs, float64=True)
            row["torch"] = _close(_torch_out(model, inputs), want, entry.dtype)
            row["dtype"] = entry.dtype
            row["tanh_gelu"] = any(f in entry.features for f in TANH_GELU)
            row["layers"] = attention_layers(model)
            try:
                n, out, dt = _irkit(path, np_inputs)
                row["irkit"] = (n, *_close(out, want, entry.dtype), dt)
            except Exception as e:  # noqa: BLE001
                row["irkit_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
            mt = ORT_TYPES[entry.family]
            heads, hidden = _config(model)
            try:
                n, out, dt, gelus = _ort(path, mt, heads, hidden, in_names, np_inputs)
                row["ort"] = (n, *_close(out, want, entry.dtype), dt, mt, gelus)
            except Exception as e:  # noqa: BLE001
                row["ort_error"] = f"{mt}: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
                if not _ort_runs(path):
                    row["ort_error"] += " (the unoptimised export fails the same way: an onnxruntime CPU limit)"
                traceback.print_exc(limit=1, file=sys.stderr)
            rows.append(row)
            print(f"{name} {exporter}: {row}", file=sys.stderr)
    minutes = (time.perf_counter() - t_start) / 60
    argv = list(sys.argv[1:])
    for i, a in enumerate(argv):  # the cache is a scratch directory: keep machine paths out of the result
        if a == "--cache" and i + 1 < len(argv):
            argv[i + 1] = "DIR"
        elif a.startswith("--cache="):
            argv[i] = "--cache=DIR"
    cmd = "python benchmarks/fusion_vs_ort.py " + " ".join(argv)
    lines = [
        "# Attention fusion: irkit vs onnxruntime's transformer optimizer", "",
        f"Command: `{cmd.strip()}`", "",
        ("Each example model is exported to ONNX by both torch exporters; irkit imports the file and runs "
        f"`{PIPELINE}`; onnxruntime runs `optimize_model(model_type=...)` (default options). *Fused* counts "
        "`ik.attention` ops (irkit) or fused attention operators (onnxruntime: Attention, "
        "MultiHeadAttention, GroupQueryAttention...) against the model's attention layers. *Right* compares "
        "each output with a float64 evaluation of the same torch model and weights on the model's example "
        "inputs, under irkit's tolerance for the model's dtype (float32 rtol 2e-4 / atol 2e-5, float16 2e-2, "
        "bfloat16 8e-2); errors are max abs (and relative to the reference's max magnitude). *torch* is the "
        "model run by torch in its own dtype, judged the same way: the error the dtype alone brings. irkit's "
        "module runs in its interpreter in the model's dtypes, onnxruntime's optimised model in onnxruntime "
        "(CPU). *ORT GELU* is the GELU operator the optimizer fused (FastGelu: tanh form; Gelu/BiasGelu: "
        "erf form unless the node carries approximate=tanh; `tanh→erf` marks an erf GELU in a model written "
        "with the tanh formula). Timings are "
        "single runs on a shared, noisy machine (indicative only). "
        f"Run took {minutes:.1f} min."), "",
        ("| model | dtype | exporter | attention layers | torch in dtype: right (err) | irkit fused | "
         "irkit right (max abs err, rel) | irkit pipeline s | ORT type | ORT fused | ORT GELU | "
         "ORT right (max abs err, rel) | ORT optimize s |"),
        "|---|---|---|---:|---|---:|---|---:|---|---:|---|---|---:|",
    ]

    def verdict(ok: bool, err: float, rel: float) -> str:
        return f"{'yes' if ok else 'NO'} ({err:.1e}, {rel:.1e})"

    tot = {"layers": 0, "irkit": 0, "ort": 0, "irkit_ok": 0, "ort_ok": 0, "n": 0, "tanh_erf": 0}
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | – | {r['exporter']} | – | – | – | {r['error']} | – | – | – | – | – | – |")
            continue
        tot["n"] += 1
        tot["layers"] += r["layers"]
        tv = verdict(*r["torch"])
        if "irkit" in r:
            n, ok, err, rel, dt = r["irkit"]
            tot["irkit"] += n
            tot["irkit_ok"] += ok
            ik = (f"{n}", verdict(ok, err, rel), f"{dt:.2f}")
        else:
            ik = ("–", f"error: {r['irkit_error']}", "–")
        if "ort" in r:
            n, ok, err, rel, dt, mt, gelus = r["ort"]
            tot["ort"] += n
            tot["ort_ok"] += ok
            erf = gelus.pop("erf", 0)
            gl = ", ".join(f"{k}×{v}" for k, v in gelus.items()) or "–"
            if any(k in ("Gelu", "BiasGelu") for k in gelus):
                gl += f" ({erf} erf)" if erf else " (approximate=tanh)"
            if r["tanh_gelu"] and erf:
                gl += " (tanh→erf)"
                tot["tanh_erf"] += 1
            ox = (mt, f"{n}", gl, verdict(ok, err, rel), f"{dt:.2f}")
        else:
            ox = ("–", "–", "–", f"error: {r['ort_error']}", "–")
        lines.append(f"| {r['model']} | {r['dtype']} | {r['exporter']} | {r['layers']} | {tv} | {ik[0]} | {ik[1]} | "
                     f"{ik[2]} | {ox[0]} | {ox[1]} | {ox[2]} | {ox[3]} | {ox[4]} |")
    lines += ["", (f"Totals over {tot['n']} exports: {tot['layers']} attention layers; irkit fused {tot['irkit']} "
              f"({tot['irkit_ok']} of {tot['n']} outputs right); onnxruntime fused {tot['ort']} "
              f"({tot['ort_ok']} of {tot['n']} outputs right; {tot['tanh_erf']} exports with a tanh GELU "
              "rewritten to erf).")]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    from irkit.fileio import atomic_write

    atomic_write(args.out, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
