"""How far each architecture of ``irkit.zoo`` gets through irkit, at toy size.

For every architecture: build it (random weights, nothing downloaded); export it
to ``.pt2`` (torch.export, strict=False) and to ONNX (``torch.onnx.export``,
dynamo=True); import each with irkit's torch and ONNX frontends; run the
import on the reference interpreter and compare with eager torch under
irkit.check's tolerance for the module's dtype; run the optimising pipeline
and count the fused ``ik.attention`` ops against the attention layers the model
runs (forward hooks on its attention modules), and check the fused module's
numbers too.  An import that fails reports the missing ops from the
``UnsupportedOpsError`` (the work list of the frontend owners).

    .venv/bin/python benchmarks/zoo_status.py                       # every architecture
    .venv/bin/python benchmarks/zoo_status.py --only gpt2,llama --json zoo.json
    .venv/bin/python benchmarks/zoo_status.py --family decoder --json zoo.json   # merges into zoo.json
    .venv/bin/python benchmarks/zoo_status.py --table-from zoo.json  # print the table only

Each architecture is one row of a markdown table on stdout; ``--json`` keeps
the details (errors, timings, missing ops), merged by name into an existing
file so that families can run in separate processes.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PIPELINE = "canonicalize,fuse-attention,fuse-norm,fuse-activation,fuse-elementwise,cse,dce"
FRONTENDS = ("pt2", "onnx")


def _line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:500]


def _import(frontend: str, path: Path) -> Any:
    if frontend == "pt2":
        from irkit.frontends.torch_export import load_pt2

        return load_pt2(path)
    from irkit.frontends.onnx import import_onnx

    return import_onnx(str(path))


def _numerics(m: Any, xs: list[Any], want: Any) -> tuple[bool, str]:
    """Interpreter (declared dtypes) against eager torch, irkit.check's tolerance for ``m``."""
    from irkit.check import compare, module_tolerance
    from irkit.interp import run

    got = run(m, xs)
    c = compare(got[0], want, module_tolerance(m))
    return c.ok, c.describe()


def measure_path(frontend: str, module: Any, inputs: tuple[Any, ...], dyn: Any, want: Any, layers: int,
                 out_dir: Path, name: str) -> dict[str, Any]:
    """Export, import, run, fuse and run again through one frontend; every stage recorded."""
    from irkit.frontends.common import UnsupportedOpsError
    from irkit.passmanager import PassManager
    from irkit.zoo.export import export_module_onnx, export_module_pt2

    r: dict[str, Any] = {"export": False, "import": False, "numerics": None, "fused": None, "layers": layers}
    t0 = time.perf_counter()
    try:
        fn = export_module_pt2 if frontend == "pt2" else export_module_onnx
        ex = fn(module, inputs, dyn, out_dir / f"{name}.{'pt2' if frontend == 'pt2' else 'onnx'}",
                label=f"zoo:{name}")
        r.update(export=True, dynamic=ex.dynamic, export_note=ex.note, export_s=round(ex.seconds, 1))
    except Exception as e:  # noqa: BLE001 - a status report records every failure
        r["error"] = f"export: {_line(e)}"
        return r
    t1 = time.perf_counter()
    try:
        m = _import(frontend, ex.path)
        r["import"] = True
    except UnsupportedOpsError as e:
        r["missing_ops"] = {k: len(v) for k, v in e.ops.items()}
        r["error"] = f"import: {_line(e)}"
        return r
    except Exception as e:  # noqa: BLE001
        r["error"] = f"import: {_line(e)}"
        return r
    r["import_s"] = round(time.perf_counter() - t1, 1)
    xs = [x.detach().numpy() for x in inputs]
    try:
        r["numerics"], r["numerics_detail"] = _numerics(m, xs, want)
    except Exception as e:  # noqa: BLE001
        r["numerics"] = False
        r["numerics_detail"] = f"interpreter: {_line(e)}"
    try:
        fused = m.clone()
        PassManager(PIPELINE).run(fused)
        r["fused"] = sum(1 for op in fused.walk() if op.name == "ik.attention")
        r["softmax_left"] = sum(1 for op in fused.walk() if op.name == "ik.softmax")
        r["fused_numerics"], r["fused_numerics_detail"] = _numerics(fused, xs, want)
    except Exception as e:  # noqa: BLE001
        r["pipeline_error"] = _line(e)
    r["total_s"] = round(time.perf_counter() - t0, 1)
    return r


def measure(name: str, frontends: tuple[str, ...], out_dir: Path) -> dict[str, Any]:
    """One architecture at toy size through each frontend."""
    import torch

    from irkit import zoo

    arch = zoo.entry(name)
    row: dict[str, Any] = {"name": name, "family": arch.family, "attention": arch.attention}
    t0 = time.perf_counter()
    try:
        module, inputs = zoo.build(name, "toy")
        with torch.no_grad():
            want = module(*inputs).detach().numpy()
        row["attn_impl"] = getattr(getattr(module.model, "config", None), "_attn_implementation", None)
        layers = zoo.attention_layers(module, inputs)
        dyn = zoo.dynamic_shapes(arch, inputs)
    except Exception as e:  # noqa: BLE001
        row["error"] = f"build: {_line(e)}"
        return row
    row["build_s"] = round(time.perf_counter() - t0, 1)
    row["layers"] = layers
    for fe in frontends:
        try:
            row[fe] = measure_path(fe, module, inputs, dyn, want, layers, out_dir, name)
        except Exception as e:  # noqa: BLE001 - never lose the rest of the run
            row[fe] = {"error": f"status script: {_line(e)}", "trace": traceback.format_exc()[-2000:]}
    return row


def _cell(r: dict[str, Any] | None) -> list[str]:
    """export / import / numerics / fused cells of one frontend."""
    if not r:
        return ["-", "-", "-", "-"]
    exp = ("dyn" if r.get("dynamic") else "static") if r.get("export") else "FAIL"
    if r.get("import"):
        imp = "ok"
    elif r.get("missing_ops"):
        imp = "missing: " + ", ".join(sorted(r["missing_ops"]))
    elif r.get("export"):
        imp = "FAIL: " + r.get("error", "")[:80].replace("|", "/")
    else:
        imp = "-"
    num = {True: "ok", False: "MISMATCH", None: "-"}[r.get("numerics")]
    if r.get("fused") is not None:
        fused = f"{r['fused']}/{r.get('layers')}"
        if r.get("fused_numerics") is False:
            fused += " (numerics MISMATCH)"
    elif r.get("pipeline_error"):
        fused = "pipeline error"
    else:
        fused = "-"
    return [exp, imp, num, fused]


def table(rows: list[dict[str, Any]]) -> str:
    head = ["model", "family", "attn impl"]
    for fe in FRONTENDS:
        head += [f"{fe} export", f"{fe} import", f"{fe} numerics", f"{fe} fused attn"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r and not any(fe in r for fe in FRONTENDS):
            cells = [r["name"], r["family"], "-"] + [r["error"][:80]] + ["-"] * (len(head) - 4)
        else:
            cells = [r["name"], r["family"], str(r.get("attn_impl") or "-")]
            for fe in FRONTENDS:
                cells += _cell(r.get(fe))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(rows: list[dict[str, Any]]) -> str:
    out = []
    for fe in FRONTENDS:
        rs = [r.get(fe) or {} for r in rows]
        n = len(rows)
        fused = sum(r.get("fused") is not None and r.get("fused") == r.get("layers")
                    and r.get("fused_numerics") is not False for r in rs)
        out.append(f"{fe}: exported {sum(bool(r.get('export')) for r in rs)}/{n}, "
                   f"imported {sum(bool(r.get('import')) for r in rs)}/{n}, "
                   f"numerics ok {sum(r.get('numerics') is True for r in rs)}/{n}, "
                   f"every attention fused (numbers kept) {fused}/{n}")
    return "\n".join(out)


def missing_by_frontend(rows: list[dict[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """frontend -> missing op -> the models that need it."""
    out: dict[str, dict[str, list[str]]] = {}
    for r in rows:
        for fe in FRONTENDS:
            for op in (r.get(fe) or {}).get("missing_ops", {}):
                out.setdefault(fe, {}).setdefault(op, []).append(r["name"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated architecture names")
    ap.add_argument("--family", help="decoder, encoder, encoder-decoder, vision, audio or vision-text")
    ap.add_argument("--frontends", default=",".join(FRONTENDS), help="pt2,onnx (default both)")
    ap.add_argument("--json", type=Path, help="write (merge by name into) this JSON file")
    ap.add_argument("--table-from", type=Path, help="print the table of an existing JSON file and exit")
    ap.add_argument("--out-dir", type=Path, help="where exports go (default: a temporary folder)")
    a = ap.parse_args(argv)
    from irkit import zoo

    if a.table_from:
        rows = json.loads(a.table_from.read_text())["rows"]
        order = {n: i for i, n in enumerate(zoo.names())}
        rows.sort(key=lambda r: order.get(r["name"], 1 << 30))
        print(table(rows))
        print()
        print(summary(rows))
        return 0
    chosen = a.only.split(",") if a.only else zoo.names()
    for n in chosen:
        zoo.entry(n)  # unknown names fail before any work
    if a.family:
        chosen = [n for n in chosen if zoo.entry(n).family == a.family]
    frontends = tuple(f for f in a.frontends.split(",") if f)
    out_dir = a.out_dir or Path(tempfile.mkdtemp(prefix="irkit-zoo-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore")
    rows = []
    for n in chosen:
        t0 = time.perf_counter()
        row = measure(n, frontends, out_dir)
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(f"[{n}: {row['seconds']}s]", file=sys.stderr, flush=True)
        if a.json:
            _merge(a.json, [row])
    print(table(rows))
    print()
    print(summary(rows))
    return 0


def _merge(path: Path, rows: list[dict[str, Any]]) -> None:
    import torch
    import transformers

    doc = json.loads(path.read_text()) if path.exists() else {"rows": []}
    doc["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__}
    doc["pipeline"] = PIPELINE
    keep = {r["name"]: r for r in doc["rows"]}
    for r in rows:
        keep[r["name"]] = r
    doc["rows"] = list(keep.values())
    from irkit.fileio import atomic_write

    atomic_write(path, json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
