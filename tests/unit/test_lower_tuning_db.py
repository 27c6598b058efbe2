"""`irkit lower --tuning-db STORE`: the tiles `irkit tune` stored are set before lowering."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from irkit.cli import main

# Two matmuls of different shapes: the store holds a tile for the first one only.
_TWO_MATMULS = """\
"builtin.module"() ({
  "func.func"() ({
  ^bb0(%a: tensor<16x32xf32>, %b: tensor<32x24xf32>, %c: tensor<24x8xf32>):
    %0 = "ik.matmul"(%a, %b) : (tensor<16x32xf32>, tensor<32x24xf32>) -> tensor<16x24xf32>
    %1 = "ik.matmul"(%0, %c) : (tensor<16x24xf32>, tensor<24x8xf32>) -> tensor<16x8xf32>
    "func.return"(%1) : (tensor<16x8xf32>) -> ()
  }) {function_type = (tensor<16x32xf32>, tensor<32x24xf32>, tensor<24x8xf32>) -> tensor<16x8xf32>, \
sym_name = "main"} : () -> ()
}) : () -> ()
"""


def _lower_with_store(tmp_path: Path, target: str, capsys) -> tuple[Path, object]:
    """Store a tile for the first matmul (for ``target``) and one for the second under another
    target, run `irkit lower --tuning-db`; returns the written module.mlir and the source module."""
    from irkit.sweep.store import Store
    from irkit.sweep.tune import matmul_sites, tuning_key
    from irkit.text.parser import parse_module

    src = tmp_path / "mm.mlir"
    src.write_text(_TWO_MATMULS)
    m = parse_module(_TWO_MATMULS)
    first, second = matmul_sites(m, {})
    other = "xla-cpu" if target != "xla-cpu" else "tvm-llvm"
    with Store(tmp_path / "tune.sqlite") as st:
        st.put_tuning(tuning_key(target, first), target, "matmul", (16, 24, 32), {"tile": [8, 8, 16]},
                      seconds=1e-5, default_seconds=2e-5, ranked=4, measured=2)
        # a choice stored for another target is not used
        st.put_tuning(tuning_key(other, second), other, "matmul", (16, 8, 24), {"tile": [4, 4, 4]},
                      seconds=1e-5, default_seconds=2e-5, ranked=4, measured=2)
    out = tmp_path / "art"
    assert main(["lower", str(src), "--target", target, "--tuning-db", str(tmp_path / "tune.sqlite"),
                 "-o", str(out)]) == 0
    assert f"1 matmul(s) tiled from {tmp_path / 'tune.sqlite'}" in capsys.readouterr().err
    lowered = parse_module((out / "module.mlir").read_text())
    mm = [op for op in lowered.entry.walk() if op.name == "ik.matmul"]
    assert tuple(mm[0].attrs["tile"]) == (8, 8, 16)
    assert "tile" not in mm[1].attrs
    return out / "module.mlir", m


def test_lower_applies_stored_tiles_and_keeps_defaults_elsewhere(tmp_path: Path, capsys) -> None:
    _lower_with_store(tmp_path, "reference", capsys)


@pytest.mark.slow
def test_lower_tvm_with_stored_tiles_matches_the_interpreter(tmp_path: Path, capsys) -> None:
    pytest.importorskip("tvm")
    from irkit.targets.registry import get_target

    from irkit.interp import random_inputs, run
    from irkit.text.parser import parse_module

    path, m = _lower_with_store(tmp_path, "tvm-llvm", capsys)
    lowered = parse_module(path.read_text())
    t = get_target("tvm-llvm")
    xs = random_inputs(lowered.entry, 7)
    assert all(np.abs(x).max() > 0 for x in xs)
    got = t.run(t.lower(lowered, {}), xs)[0]
    np.testing.assert_allclose(got, run(m, xs, float64=True)[0], rtol=2e-4, atol=2e-5)


def test_lower_tuning_db_missing_store_is_one_line(tmp_path: Path, capsys) -> None:
    src = tmp_path / "mm.mlir"
    src.write_text(_TWO_MATMULS)
    rc = main(["lower", str(src), "--target", "reference", "--tuning-db", str(tmp_path / "nope.sqlite"),
               "-o", str(tmp_path / "art")])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.count("\n") == 1 and "nope.sqlite: no such results store" in err and "Traceback" not in err
    assert not (tmp_path / "art").exists()
