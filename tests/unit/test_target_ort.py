"""The `ort` and `reference` targets, and the lower/check/bisect commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from irkit.check import compare_all, module_tolerance
from irkit.cli import main
from irkit.interp import random_inputs, run
from irkit.targets.base import TargetUnavailable
from irkit.targets.registry import get_target
from irkit.testing.blocks import gpt2_style_module
from irkit.text import write_module

ORT_REFUSES = ("ik.erfinv", "ik.lgamma", "ik.digamma", "ik.nextafter")

sys.path.insert(0, str(Path(__file__).parents[1] / "numeric"))
import test_op_kernels as K  # noqa: E402


@pytest.mark.parametrize("i", range(len(K.CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(K.CASES)])
def test_every_op_on_ort(i: int) -> None:
    name, inputs, attrs, _ = K.CASES[i]
    m = K._single_op_module(name, inputs, attrs)
    t = get_target("ort")
    if name in ORT_REFUSES:  # no ONNX operator and no exact decomposition: one clear line naming the op
        with pytest.raises(TargetUnavailable, match=f"ort: cannot lower '{name}' at .*: ONNX has no"):
            t.lower(m)
        return
    if name == "ik.bitcast" and np.dtype(attrs["dtype"].np).itemsize != inputs[0].dtype.itemsize:
        # onnxruntime 1.32 has BitCast kernels for equal widths only: refused with that reason
        with pytest.raises(TargetUnavailable, match="ort: cannot lower 'ik.bitcast' at .*changes the element width"):
            t.lower(m)
        return
    got = t.run(t.lower(m), inputs)
    rep = compare_all(got, run(m, inputs, float64=True), module_tolerance(m))
    assert rep.ok, [c.describe() for c in rep.comparisons]


def test_ort_model_passes_full_checker_and_maps_nodes_to_ir() -> None:
    import onnx

    m = gpt2_style_module(layers=2)
    art = get_target("ort").lower(m, {"B": 1, "S": 8})
    model = onnx.load_from_string(art.files["model.onnx"])
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 23
    mapped = [k for k in art.kernels if k.ir_ops]
    assert len(mapped) >= len(art.kernels) - 2  # all but the output Identities
    assert any("gpt2_block.py:40" in loc for k in mapped for loc in k.locations)


def test_fully_masked_rows_and_both_attention_paths() -> None:
    q = K.f32(1, 2, 3, 4)
    mask = np.zeros((1, 1, 3, 3), dtype=bool)
    mask[..., 0, :2] = True
    m = K._single_op_module("ik.attention", [q, q, q, mask], {"scale": 0.5})
    want = run(m, [q, q, q, mask], float64=True)
    for attention in ("onnx", "decomposed"):
        from irkit.targets.ort import OrtTarget

        t = OrtTarget(attention=attention)
        got = t.run(t.lower(m), [q, q, q, mask])
        # onnxruntime's Attention alone gives NaN for the fully masked rows; the export zeroes them.
        assert np.all(got[0][..., 1:, :] == 0) and np.all(np.isfinite(got[0])), attention
        assert compare_all(got, want, module_tolerance(m)).ok, attention


def test_lower_check_bisect_commands(tmp_path: Path, capsys) -> None:
    src = tmp_path / "g.mlir"
    write_module(gpt2_style_module(layers=1), str(src))
    assert main(["lower", str(src), "--target", "ort", "-o", str(tmp_path / "art"), "--bind", "B=1,S=8"]) == 0
    man = json.loads((tmp_path / "art" / "manifest.json").read_text())
    assert man["bindings"] == {"B": 1, "S": 8} and man["kernels"]
    assert (tmp_path / "art" / "module.mlir").exists()
    capsys.readouterr()
    assert main(["check", str(src), "-p", "canonicalize,cse", "--targets", "reference,ort", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["targets"]["ort"]["ok"] and rep["targets"]["reference"]["ok"]
    assert main(["bisect", str(src), "-p", "canonicalize,cse", "--target", "ort"]) == 0
    assert "stays within tolerance" in capsys.readouterr().out


def test_bisect_finds_a_broken_pass(tmp_path: Path, capsys) -> None:
    plugin = tmp_path / "bad.py"
    plugin.write_text('''
from dataclasses import dataclass
from irkit.passmanager import Pass, register_pass


@register_pass("test-break-softmax")
@dataclass(frozen=True)
class BreakSoftmax(Pass):
    """Replace exp by sigmoid (wrong on purpose).

    before: "ik.exp"  after: "ik.sigmoid"
    """

    def run(self, module, ctx):
        from irkit.ir import Builder
        changed = False
        for op in list(module.entry.body):
            if op.name in ("ik.exp", "ik.softmax"):
                new = Builder.before_op(op).sigmoid(op.operand(0))
                op.results[0].replace_all_uses_with(new)
                op.parent.erase(op)
                changed = True
        return changed
''')
    src = tmp_path / "g.mlir"
    write_module(gpt2_style_module(layers=1), str(src))
    rc = main(["bisect", str(src), "-p", "canonicalize,test-break-softmax,cse", "--target", "ort",
               "--load-pass-plugin", str(plugin)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "first bad pass: test-break-softmax" in out
    assert "changed the module's meaning" in out
    assert "first bad kernel:" in out and ("gpt2_block.py:40" in out or "gpt2_block.py:50" in out)


def test_reference_target_runs() -> None:
    m = gpt2_style_module(layers=1)
    xs = random_inputs(m.entry, 3)
    t = get_target("reference")
    np.testing.assert_array_equal(t.run_module(m, xs)[0], run(m, xs)[0])


def test_where_selecting_booleans() -> None:
    """jax.nn.dot_product_attention's masks select between booleans; ORT's CPU Where has
    no bool kernel (found by the example-model matrix through StableHLO)."""
    from irkit.interp import random_inputs, run
    from irkit.targets.registry import get_target
    from irkit.text import parse_module

    m = parse_module('''
"builtin.module"() ({
  "func.func"() ({
  ^bb0(%c: tensor<4x8xi1>, %x: tensor<4x8xi1>, %y: tensor<8xi1>):
    %0 = "ik.where"(%c, %x, %y) : (tensor<4x8xi1>, tensor<4x8xi1>, tensor<8xi1>) -> tensor<4x8xi1>
    "func.return"(%0) : (tensor<4x8xi1>) -> ()
  }) {function_type = (tensor<4x8xi1>, tensor<4x8xi1>, tensor<8xi1>) -> tensor<4x8xi1>, sym_name = "main"} : () -> ()
}) : () -> ()
''')
    xs = random_inputs(m.entry, seed=0)
    t = get_target("ort")
    got = t.run(t.lower(m, {}), xs)[0]
    np.testing.assert_array_equal(got, run(m, xs)[0])
    assert got.any() and not got.all()
