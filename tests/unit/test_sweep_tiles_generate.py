"""Sweeps: matmul tiles as an axis, and generation (TTFT, decode tokens/s) as a measurement."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from irkit.cli import main
from irkit.sweep.spec import load_spec
from irkit.sweep.store import Store
from irkit.sweep.work import set_tiles

ROOT = Path(__file__).resolve().parents[2]
BLOCK = ROOT / "examples" / "sweeps" / "gpt2_block.mlir"
DECODER = f"{ROOT / 'examples' / 'sweeps' / 'models.py'}:tiny_decoder"


def _spec(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "t.toml"
    p.write_text(textwrap.dedent(body))
    return p


def _matmul_model(tmp_path: Path) -> Path:
    """x[B, 24, 40] @ W[40, 56] + relu: one matmul with a constant B, B symbolic."""
    from irkit.ir import DType, SymDim, TensorType
    from irkit.ir.builder import module_of, new_function
    from irkit.text.io import write_module

    f, b = new_function("main", [TensorType((SymDim.symbol("B"), 24, 40), DType.f32)], ["x"])
    w = b.constant(np.random.default_rng(0).standard_normal((40, 56)).astype(np.float32), DType.f32)
    b.ret(b.relu(b.matmul(f.args[0], w)))
    p = tmp_path / "mm.mlir"
    write_module(module_of(f), str(p))
    return p


def test_tiles_axis_expands_dedupes_and_excludes(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, f"""
        models = ["{BLOCK}"]
        targets = ["reference", "tvm-llvm"]
        measurements = ["estimate", "check"]
        tiles = ["default", [32, 64, 64], {{m = [16, 32], n = [64], k = [64, 128]}}]

        [[exclude]]
        tile = "*x*"
        target = "reference"
        """))
    # [32, 64, 64] is also in the space: 1 default + 4 distinct tiles
    assert spec.tiles == [None, (32, 64, 64), (16, 64, 64), (16, 64, 128), (32, 64, 128)]
    tasks = spec.tasks()
    checks = [t for t in tasks if t.measurement == "check"]
    assert {(t.target, t.axis("tile")) for t in checks} == {
        ("reference", "default"), ("tvm-llvm", "default"), ("tvm-llvm", "32x64x64"), ("tvm-llvm", "16x64x64"),
        ("tvm-llvm", "16x64x128"), ("tvm-llvm", "32x64x128")}
    # the analytic estimate has no tiles: one estimate per target, not one per tile
    assert sorted(t.target for t in tasks if t.measurement == "estimate") == ["reference", "tvm-llvm"]
    t = next(t for t in checks if t.tile == (16, 64, 128))
    assert t.options == {"tile": [16, 64, 128]} and "tile=16x64x128" in t.label()


@pytest.mark.parametrize("tiles, words", [
    ('[[0, 64, 64]]', "is not a tile"),
    ('[[64, 64]]', "is not a tile"),
    ('[{m = [16], n = [64]}]', "has no 'k'"),
    ('[{m = [16], n = [64], k = [-1]}]', "must be positive integers"),
    ('["fast"]', "is not a tile"),
    ('[]', "must not be empty"),
])
def test_tile_mistakes_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], tiles: str,
                                    words: str) -> None:
    p = _spec(tmp_path, f'models = ["{BLOCK}"]\ntargets = ["ort"]\ntiles = {tiles}\n')
    assert main(["sweep", str(p), "--store", str(tmp_path / "s.sqlite"), "--dry-run"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("irkit: error: ") and words in err and "\n" not in err and str(p) in err


def test_generate_option_mistakes_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = _spec(tmp_path, f'models = ["{DECODER}"]\ntargets = ["ort"]\nmeasurements = ["generate"]\n'
                        '[generate]\nnew_tokens = 0\n')
    assert main(["sweep", str(p), "--store", str(tmp_path / "s.sqlite"), "--dry-run"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("irkit: error: ") and "[generate] new_tokens must be >= 1" in err and "\n" not in err


def test_set_tiles_marks_every_float_matmul(tmp_path: Path) -> None:
    from irkit.text.io import read_module

    m = read_module(BLOCK)
    n = set_tiles(m, (16, 64, 32))
    tiled = [op for op in m.entry.walk() if op.name in ("ik.matmul", "ik.contract")]
    assert n == len(tiled) > 0
    assert all(tuple(op.attrs["tile"]) == (16, 64, 32) for op in tiled)


def _tvm_or_skip() -> None:
    from irkit.targets.registry import get_target

    if not get_target("tvm-llvm").availability().can_run:
        pytest.skip("tvm-llvm cannot run here")


def test_tile_sweep_checks_a_tile_on_tvm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A tile task is lowered by the tvm-llvm kernel with that tile (ragged against the 24 x 56 x 40
    problem) and checked against the float64 interpreter; a second run finds it in the store.
    (Several tiles, timed: the slow test below.)"""
    _tvm_or_skip()
    spec = _spec(tmp_path, f"""
        models = ["{_matmul_model(tmp_path)}"]
        targets = ["tvm-llvm"]
        shapes = [{{B = 2}}]
        tiles = [[8, 16, 16]]
        """)
    store = tmp_path / "s.sqlite"
    assert main(["sweep", str(spec), "--store", str(store)]) == 0
    assert "1 ok, 0 failed" in capsys.readouterr().out
    with Store(store, create=False) as st:
        (row,) = st.rows()
    assert row.options == {"tile": [8, 16, 16]} and row.result["ok"] and row.result["matmuls_tiled"] == 1
    assert main(["sweep", str(spec), "--store", str(store)]) == 0
    assert "1 already in the store, 0 to run" in capsys.readouterr().err


@pytest.mark.slow
def test_tile_sweep_times_each_tile_on_tvm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _tvm_or_skip()
    spec = _spec(tmp_path, f"""
        name = "tiles"
        models = ["{_matmul_model(tmp_path)}"]
        targets = ["tvm-llvm"]
        measurements = ["check", "bench"]
        shapes = [{{B = 2}}]
        tiles = ["default", [8, 16, 8], [32, 64, 64]]

        [bench]
        warmup = 1
        repeats = 3
        max_seconds = 1.0
        """)
    store = tmp_path / "s.sqlite"
    assert main(["sweep", str(spec), "--store", str(store), "--report", str(tmp_path / "rep")]) == 0
    assert "6 ok, 0 failed" in capsys.readouterr().out
    with Store(store, create=False) as st:
        by = {(r.measurement, tuple(r.options.get("tile", ()))): r for r in st.rows()}
    assert len(by) == 6
    for tile in ((), (8, 16, 8), (32, 64, 64)):
        assert by[("check", tile)].result["ok"]
        assert by[("bench", tile)].result["median"] > 0
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "| 8x16x8 |" in report and "| 32x64x64 |" in report


def test_generate_measurement_on_a_tiny_decoder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TTFT and decode tokens/s per target and tile, in-process; targets generate the same tokens."""
    spec = _spec(tmp_path, f"""
        name = "gen"
        models = ["{DECODER}"]
        targets = ["reference", "ort"]
        measurements = ["generate"]
        shapes = [{{B = 1, S = 4}}, {{B = 2, S = 8}}]   # generation ignores shapes: one task each
        tiles = ["default", [16, 32, 32]]

        [generate]
        prompt_len = 5
        new_tokens = 6
        warmup_tokens = 2
        """)
    store = tmp_path / "g.sqlite"
    assert main(["sweep", str(spec), "--store", str(store), "--report", str(tmp_path / "rep")]) == 0
    assert "4 ok, 0 failed" in capsys.readouterr().out
    with Store(store, create=False) as st:
        rows = st.rows()
    assert len(rows) == 4 and all(r.measurement == "generate" and r.bindings == {} for r in rows)
    for r in rows:
        x = r.result
        assert x["ttft_seconds"] > 0 and x["decode_tokens_per_second"] > 0 and x["step_p50_seconds"] > 0
        assert (x["batch"], x["prompt_len"], x["new_tokens"], x["prefill"]) == (1, 5, 6, "prefill")
        assert len(x["tokens"]) == 6 and x["kv_cache_bytes"] == 2 * 32 * 32 * 4
        assert x.get("matmuls_tiled", 0) == (6 if r.options.get("tile") else 0)
    assert len({tuple(r.result["tokens"]) for r in rows}) == 1  # greedy: same tokens everywhere
    assert "## generate" in (tmp_path / "rep" / "report.md").read_text()
    assert "decode tok/s" in (tmp_path / "rep" / "report.md").read_text()
    # the decode build is cached: a second run neither rebuilds nor re-measures
    assert main(["sweep", str(spec), "--store", str(store)]) == 0
    err = capsys.readouterr().err
    assert "4 already in the store, 0 to run" in err and "building" not in err


def test_example_specs_parse() -> None:
    tiles = load_spec(ROOT / "examples" / "sweeps" / "tiles.toml")
    assert len(tiles.tiles) == 9 and len(tiles.tasks()) == 18
    gen = load_spec(ROOT / "examples" / "sweeps" / "generate.toml")
    tasks = gen.tasks()
    assert {t.measurement for t in tasks} == {"generate"}
    assert {(t.target, t.axis("tile")) for t in tasks if t.tile} == {("tvm-llvm", "16x64x32")}
    assert len(tasks) == 2 * (4 + 1)
