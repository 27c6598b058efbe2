"""``irkit generate`` and ``irkit bench --generate``: JSON output, tokens, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from irkit.cli import main
from irkit.testing.blocks import gpt2_style_module
from irkit.text import write_module


def _one_line_error(capsys, what: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("irkit: error:") and "\n" not in err and "Traceback" not in err, err
    assert what in err, err
    return err


def test_generate_json_matches_transformers(capsys) -> None:
    import torch

    from irkit.zoo.decode import decode_model

    rc = main(["generate", "zoo:gpt2", "--target", "ort", "--prompt-ids", "5,17,42,7", "--new-tokens", "6",
               "--max-cache-len", "48", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"tokens", "ttft_seconds", "step_seconds"}
    assert len(out["tokens"]) == 1 and len(out["tokens"][0]) == 6 and len(out["step_seconds"]) == 5
    assert out["ttft_seconds"] > 0 and all(s > 0 for s in out["step_seconds"])
    dm = decode_model("gpt2", "toy", max_cache_len=48)  # the same model the command built (same seed)
    with torch.no_grad():
        want = dm.torch_model.generate(torch.tensor([[5, 17, 42, 7]]), max_new_tokens=6, min_new_tokens=6,
                                       do_sample=False, pad_token_id=0)[:, 4:]
    np.testing.assert_array_equal(np.array(out["tokens"]), want.numpy())


def test_generate_text_output_random_prompt(capsys) -> None:
    rc = main(["generate", "zoo:gpt2", "--prompt-len", "3", "--seed", "4", "--new-tokens", "3",
               "--max-cache-len", "48"])
    assert rc == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines[0].split()) == 3 and lines[1].startswith("# target reference, batch 1, prompt 3")


def test_unknown_model_is_one_line(capsys) -> None:
    assert main(["generate", "zoo:nosuchlm", "--prompt-ids", "1,2", "--new-tokens", "2"]) == 1
    _one_line_error(capsys, "no zoo architecture 'nosuchlm'")
    assert main(["generate", "zoo:bert", "--prompt-ids", "1,2", "--new-tokens", "2"]) == 1
    _one_line_error(capsys, "generation needs a decoder LM")
    assert main(["generate", "nofile.pt2", "--prompt-ids", "1,2", "--new-tokens", "2"]) == 1
    _one_line_error(capsys, "nofile.pt2: no such file")


def test_model_without_cache_is_one_line(tmp_path: Path, capsys) -> None:
    p = tmp_path / "nocache.mlir"
    write_module(gpt2_style_module(layers=1), str(p))
    assert main(["generate", str(p), "--prompt-ids", "1,2", "--new-tokens", "2"]) == 1
    _one_line_error(capsys, "has no KV-cache state")


def test_bad_options_are_one_line(capsys) -> None:
    assert main(["generate", "zoo:gpt2", "--prompt-ids", "1,x", "--new-tokens", "2"]) == 1
    _one_line_error(capsys, "--prompt-ids '1,x': expected comma-separated integers")
    assert main(["generate", "zoo:gpt2", "--prompt-ids", "1,2", "--new-tokens", "0"]) == 1
    _one_line_error(capsys, "--new-tokens must be >= 1")
    assert main(["generate", "zoo:gpt2", "--prompt-ids", "1,2", "--new-tokens", "100", "--max-cache-len", "48"]) == 1
    _one_line_error(capsys, "the cache holds 48")
    assert main(["bench", "zoo:gpt2", "--generate", "--targets", "reference", "--specs", "tpu-v99"]) == 1
    _one_line_error(capsys, "--specs: unknown hardware description 'tpu-v99'")


def test_bench_generate_rows(tmp_path: Path, capsys) -> None:
    js = tmp_path / "gen.json"
    rc = main(["bench", "zoo:gpt2", "--generate", "--targets", "ort", "--new-tokens", "4", "--prompt-len", "4",
               "--max-cache-len", "48", "--specs", "h200,tpu-v5e", "--price", "h200=3.5,ort=0.1", "--json", str(js)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "| measured | ort | 1 |" in out and "| estimated | h200 | 1 |" in out
    assert "capacity h200 (141 GB)" in out and "capacity tpu-v5e" in out
    data = json.loads(js.read_text())
    measured = [r for r in data["rows"] if r["kind"] == "measured"]
    est = {r["target"]: r for r in data["rows"] if r["kind"] == "estimated"}
    assert measured[0]["decode_tokens_per_second"] > 0 and measured[0]["usd_per_million_tokens"] > 0
    assert measured[0]["kv_cache_bytes"] == 2 * 2 * 1 * 4 * 48 * 16 * 4  # layers x (k, v) x B x heads x L x hd x f32
    # decode is memory-bound: the estimated step is at least the bytes it must read over the HBM bandwidth
    assert est["h200"]["p50_seconds"] >= measured[0]["kv_cache_bytes"] / 4.8e12
    assert est["h200"]["usd_per_million_tokens"] is not None


def test_generate_from_mlir_file_with_aliases(tmp_path: Path, capsys) -> None:
    """A decode function saved as IR text (aliases and the symbolic token count round-trip)."""
    import torch

    from irkit.zoo.decode import decode_model

    dm = decode_model("gpt2", "toy", max_cache_len=48)
    p = tmp_path / "gpt2_decode.mlir"
    write_module(dm.decode, str(p))
    assert main(["generate", str(p), "--target", "reference", "--prompt-ids", "9,8,7", "--new-tokens", "4",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["tokens"]
    with torch.no_grad():
        want = dm.torch_model.generate(torch.tensor([[9, 8, 7]]), max_new_tokens=4, min_new_tokens=4,
                                       do_sample=False, pad_token_id=0)[:, 3:]
    np.testing.assert_array_equal(np.array(got), want.numpy())


def test_decode_pipeline_defaults_to_the_optimising_one() -> None:
    from irkit.commands.generate_cmd import decode_pipeline
    from irkit.zoo.run import DEFAULT_PIPELINE

    assert "fuse-cache-attention" in DEFAULT_PIPELINE
    assert decode_pipeline(None) == DEFAULT_PIPELINE
    assert decode_pipeline("none") is None and decode_pipeline("None ") is None
    assert decode_pipeline("canonicalize,dce") == "canonicalize,dce"
