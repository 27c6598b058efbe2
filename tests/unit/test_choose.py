"""``irkit choose``: real estimates (and one real measurement) on the tiny GPT-2 of examples/."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from irkit.cli import main

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("choose") / "gpt2.mlir"
    assert main(["import", "examples/models/gpt2.py:gpt2_tiny", "-o", str(p)]) == 0
    return p


def _choose(capsys, *argv: str) -> dict:
    assert main(["choose", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_schema_numbers_and_argmin(gpt2: Path, capsys) -> None:
    d = _choose(capsys, str(gpt2), "-p", "canonicalize,fuse-attention", "--batch", "1,8", "--seq", "16,64",
                "--hardware", "h100,h200,tpu-v5e,tpu-v6e,host-cpu", "--no-measure", "--requests", "1000")
    assert d["cost_unit"] == "USD per 1M requests" and d["requests"] == 1000
    assert len(d["rows"]) == 2 * 2 * 5 and len(d["cheapest"]) == 4
    for r in d["rows"]:
        assert r["kind"] == "estimated" and f"spec {r['spec']}" in r["basis"]
        assert r["latency_s"] > 0 and r["flops"] > 0 and r["bytes"] > 0 and r["bound"] in ("compute", "memory")
        assert math.isclose(r["throughput_seq_per_s"], r["batch"] / r["latency_s"], rel_tol=1e-9)
        assert r["cost_unit"] == "USD per 1M requests" and r["price_usd_per_hour"] > 0 and r["price_source"]
        calls = math.ceil(1000 / r["batch"])
        want = r["price_usd_per_hour"] / 3600 * calls * r["latency_s"] / 1000 * 1e6
        assert math.isclose(r["cost_usd_per_million_requests"], want, rel_tol=1e-9)
    # more work costs more: every hardware's latency grows with S at fixed B
    for h in ("h100", "tpu-v5e"):
        lat = {(r["batch"], r["seq"]): r["latency_s"] for r in d["rows"] if r["hardware"] == h}
        assert lat[(8, 64)] > lat[(8, 16)] and lat[(8, 64)] > lat[(1, 64)]
    for p in d["cheapest"]:
        here = [r for r in d["rows"] if r["batch"] == p["batch"] and r["seq"] == p["seq"]]
        best = min(here, key=lambda r: r["cost_usd_per_million_requests"])
        assert p["hardware"] == best["hardware"]
        assert p["hardware"] in p["reason"] and "-bound at" in p["reason"] and "USD per 1M requests" in p["reason"]


def test_table_has_units_sources_and_a_pick_per_shape(gpt2: Path, capsys) -> None:
    assert main(["choose", str(gpt2), "--batch", "8", "--seq", "64,512", "--hardware", "h100,tpu-v5e",
                 "--no-measure"]) == 0
    out = capsys.readouterr().out
    assert "USD per 1M requests" in out and "latency ms" in out and "$/hour" in out
    assert "latency estimated from spec h100" in out and "example" in out  # the price's source is named
    picks = [ln for ln in out.splitlines() if ln.strip().startswith("B=8 S=")]
    assert len(picks) == 2


def test_latency_budget_filters(gpt2: Path, capsys) -> None:
    args = [str(gpt2), "--batch", "8", "--seq", "64", "--hardware", "h100,tpu-v5e,host-cpu", "--no-measure"]
    d = _choose(capsys, *args)
    lat = {r["hardware"]: r["latency_s"] for r in d["rows"]}
    budget_ms = min(lat.values()) * 1e3 * 1.0001  # only the fastest meets it
    d2 = _choose(capsys, *args, "--latency-budget", repr(budget_ms))
    fastest = min(lat, key=lat.get)
    assert {r["hardware"]: r["meets_budget"] for r in d2["rows"]} == {h: h == fastest for h in lat}
    assert d2["cheapest"][0]["hardware"] == fastest
    d3 = _choose(capsys, *args, "--latency-budget", repr(budget_ms / 10))
    assert d3["cheapest"][0]["hardware"] is None and "none meets" in d3["cheapest"][0]["reason"]


def test_price_file_toml_and_json(gpt2: Path, tmp_path: Path, capsys) -> None:
    args = [str(gpt2), "--batch", "1", "--seq", "32", "--hardware", "h100,tpu-v5e", "--no-measure"]
    base = {r["hardware"]: r for r in _choose(capsys, *args)["rows"]}
    pf = tmp_path / "p.toml"
    pf.write_text("h100 = 1.5\n")
    d = {r["hardware"]: r for r in _choose(capsys, *args, "--price", str(pf))["rows"]}
    assert d["h100"]["price_usd_per_hour"] == 1.5 and d["h100"]["price_source"] == f"--price {pf}"
    assert math.isclose(d["h100"]["cost_usd_per_million_requests"],
                        base["h100"]["cost_usd_per_million_requests"] * 1.5 / base["h100"]["price_usd_per_hour"])
    assert d["tpu-v5e"]["price_source"] == base["tpu-v5e"]["price_source"]  # not in the file: default kept
    pj = tmp_path / "p.json"
    pj.write_text(json.dumps({"prices": {"tpu-v5e": 0.6}}))
    d = {r["hardware"]: r for r in _choose(capsys, *args, "--price", str(pj))["rows"]}
    assert d["tpu-v5e"]["price_usd_per_hour"] == 0.6


@pytest.mark.parametrize("content, name, expect", [
    ("h10 = 3.0\n", "typo.toml", "did you mean 'h100'"),
    ("h100 = -1\n", "neg.toml", "positive number of US dollars per hour"),
    ("h100 = \n", "syntax.toml", "not valid TOML"),
    ('{"tpu-v5": 1}', "typo.json", "did you mean"),
])
def test_bad_price_file_is_one_line(gpt2: Path, tmp_path: Path, capsys, content: str, name: str,
                                    expect: str) -> None:
    pf = tmp_path / name
    pf.write_text(content)
    rc = main(["choose", str(gpt2), "--hardware", "h100,tpu-v5e", "--no-measure", "--price", str(pf)])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and err.startswith("irkit: error:")
    assert name in err and expect in err


def test_unknown_hardware_and_bad_requests_are_one_line(gpt2: Path, capsys) -> None:
    assert main(["choose", str(gpt2), "--hardware", "h1000", "--no-measure"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'h100'" in err
    assert main(["choose", str(gpt2), "--hardware", "h100", "--no-measure", "--bind", "T=3"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "T is not a symbolic dim" in err
    exe = str(Path(sys.executable).parent / "irkit")
    r = subprocess.run([exe, "choose", str(gpt2), "--hardware", "h100", "--no-measure", "--requests", "0"], check=False, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--requests" in r.stderr


def test_generate_prices_decode_from_kv_cache(gpt2: Path, capsys) -> None:
    d = _choose(capsys, str(gpt2), "-p", "canonicalize,fuse-attention", "--batch", "1,4", "--seq", "32,64",
                "--hardware", "h100,h200", "--no-measure", "--generate")
    assert d["cost_unit"] == "USD per 1M generated tokens"
    kv = {(r["batch"], r["seq"]): r["kv_cache_bytes"] for r in d["rows"] if r["hardware"] == "h100"}
    assert kv[(1, 32)] > 0 and kv[(1, 64)] == 2 * kv[(1, 32)] and kv[(4, 32)] == 4 * kv[(1, 32)]
    for r in d["rows"]:
        assert r["gen_unit"] == "USD per 1M generated tokens" and r["weight_bytes"] > 0
        bw = {"h100": 3350e9, "h200": 4800e9}[r["hardware"]]
        assert r["gen_step_s"] >= (r["weight_bytes"] + r["kv_cache_bytes"]) / bw * (1 - 1e-9)
        want = r["price_usd_per_hour"] / 3600 * r["gen_step_s"] / r["batch"] * 1e6
        assert math.isclose(r["gen_cost_usd_per_million_tokens"], want, rel_tol=1e-9)
    for p in d["cheapest"]:
        here = [r for r in d["rows"] if r["batch"] == p["batch"] and r["seq"] == p["seq"]]
        assert p["hardware"] == min(here, key=lambda r: r["gen_cost_usd_per_million_tokens"])["hardware"]
    # without fused attention there is no KV cache to size: one clear line
    assert main(["choose", str(gpt2), "--hardware", "h100", "--no-measure", "--generate"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ik.attention" in err and "fuse-attention" in err


def test_host_cpu_is_measured_and_plot(gpt2: Path, tmp_path: Path, capsys) -> None:
    png = tmp_path / "cost.png"
    d = _choose(capsys, str(gpt2), "--batch", "1,2", "--seq", "8", "--hardware", "host-cpu,tpu-v5e",
                "--cpu-targets", "ort", "--repeats", "3", "--requests", "100", "--plot", str(png))
    cpu = [r for r in d["rows"] if r["hardware"] == "host-cpu"]
    assert all(r["kind"] == "measured" and "ort" in r["basis"] and r["compile_s"] > 0 for r in cpu)
    for r in cpu:  # the measured compile is amortised over the 100 requests
        want = r["price_usd_per_hour"] / 3600 * (r["compile_s"] + math.ceil(100 / r["batch"]) * r["latency_s"])
        assert math.isclose(r["cost_usd_per_million_requests"], want / 100 * 1e6, rel_tol=1e-9)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_mixed_precision_cuts_estimated_bytes(gpt2: Path, capsys) -> None:
    """A cast of a matmul's result is folded into its epilogue, so bf16 compute moves fewer bytes than f32."""
    pipe = "canonicalize,fuse-attention"
    assert main(["estimate", str(gpt2), "-p", pipe, "--target", "h100", "--bind", "B=8,S=64", "--json"]) == 0
    f32 = json.loads(capsys.readouterr().out)
    assert main(["estimate", str(gpt2), "-p", pipe + ",mixed-precision{compute=bf16}", "--target", "h100",
                 "--bind", "B=8,S=64", "--json"]) == 0
    bf16 = json.loads(capsys.readouterr().out)
    assert bf16["total"]["bytes"] < f32["total"]["bytes"]
    assert bf16["total"]["seconds"] < f32["total"]["seconds"]
    assert not [o for o in bf16["ops"] if o["op"].startswith("ik.cast")]  # no cast kernel of its own left
