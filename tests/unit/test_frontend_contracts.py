"""House contracts shared by the frontends: one converter-table style, one unsupported family."""

from __future__ import annotations

import pytest

from irkit.errors import IrkitError, Unsupported, UnsupportedOpsError
from irkit.frontends.common import ConverterTable


def test_converter_table_registers_under_keys() -> None:
    table = ConverterTable("demo", key=lambda name, domain="": (domain, name))

    @table.converter("Relu", "LeakyRelu")
    def relu(x: float) -> float:
        return max(x, 0.0)

    table.add("Neg", lambda x: -x, domain="my.domain")
    assert table[("", "Relu")] is relu and table.get(("", "LeakyRelu")) is relu
    assert table[("my.domain", "Neg")](2.5) == -2.5
    assert table.covers(("", "Relu")) and not table.covers(("my.domain", "Relu"))
    assert table.names == {("", "Relu"), ("", "LeakyRelu"), ("my.domain", "Neg")}
    assert len(table) == 3 and set(table) == table.names
    assert "3 converters" in repr(table)


def test_converter_table_refuses_a_second_registration() -> None:
    table = ConverterTable("demo")
    table.converter("add")(lambda: 1)
    with pytest.raises(ValueError, match="demo: converter for 'add' is defined twice"):
        table.converter("sub", "add")(lambda: 2)
    with pytest.raises(TypeError, match="take no options"):
        table.add("mul", lambda: 3, domain="x")


def test_every_frontend_uses_one_table_style() -> None:
    from irkit.frontends import jax as jax_frontend
    from irkit.frontends import jax_stablehlo, onnx_ops, torch_ops

    tables = {
        "torch": torch_ops.CONVERTERS, "onnx": onnx_ops.CONVERTERS,
        "jax": jax_frontend.PRIMITIVES, "stablehlo": jax_stablehlo._HANDLERS,
    }
    for name, t in tables.items():
        assert isinstance(t, ConverterTable), name
        assert len(t) > 50, (name, len(t))
    assert torch_ops.CONVERTERS.covers("aten.add.Tensor") or torch_ops.CONVERTERS.covers("aten.add")
    assert torch_ops.aten_key("add.Tensor") == "aten.add.Tensor"
    assert torch_ops.aten_key("prims.convert_element_type") == "prims.convert_element_type"
    assert onnx_ops.CONVERTERS.covers(("", "MatMul"))
    assert jax_frontend.PRIMITIVES.covers("dot_general")
    assert jax_stablehlo._HANDLERS.covers("stablehlo.dot_general")


def test_one_unsupported_family_for_all_frontends() -> None:
    from irkit.frontends import common, jax_emit, onnx_ops, torch_cx

    for mod in (torch_cx, onnx_ops, jax_emit, common):
        assert mod.Unsupported is Unsupported, mod.__name__
    assert issubclass(torch_cx.DataDependent, Unsupported)
    assert issubclass(Unsupported, UnsupportedOpsError)
    assert issubclass(UnsupportedOpsError, IrkitError)
    e = Unsupported("dtype complex64")
    assert e.what == "dtype complex64" and str(e) == "dtype complex64"
    ops = {"Loop (control flow)": ["loop_a", "loop_b"], "TopK": ["t"]}
    report = UnsupportedOpsError("m.onnx", ops)
    msg = str(report)
    assert msg.startswith("m.onnx: 3 unsupported op(s) of 2 kind(s): ")
    assert "Loop (control flow) x2 (loop_a, loop_b)" in msg and "TopK x1 (t)" in msg
    assert "\n" not in msg


def test_dynamic_axis_beyond_every_input_rank_is_refused(tmp_path) -> None:
    from irkit.errors import InputError
    from irkit.frontends import import_source

    src = tmp_path / "model.py"
    src.write_text(
        "import numpy as np\n"
        "import torch\n\n"
        "def tiny_torch():\n"
        "    return torch.nn.Linear(3, 2), (torch.randn(4, 3),)\n\n"
        "def tiny_jax():\n"
        "    return (lambda x: x * 2.0), (np.arange(12, dtype=np.float32).reshape(4, 3),)\n"
    )
    for factory in ("tiny_torch", "tiny_jax"):
        with pytest.raises(InputError) as ei:
            import_source(f"{src}:{factory}", dynamic={"S": 7})
        msg = str(ei.value)
        assert msg.startswith("--dynamic S=7: axis 7 is out of range; the inputs have ranks 2"), msg
    m = import_source(f"{src}:tiny_jax", dynamic={"B": 0})
    assert "B" in str(m.entry.arg_types[0])
