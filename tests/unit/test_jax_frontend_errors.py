"""Bad input to the JAX frontend: one clear line each, pointing at the problem.

Malformed StableHLO and HLO text report MLIR's or XLA's ``file:line:col``;
unsupported primitives and ops are collected and reported once, with counts
and the user's locations; a function that does not trace says where it failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from irkit.frontends.common import FrontendError, UnsupportedOpsError
from irkit.frontends.jax import import_hlo, import_jax, import_stablehlo

GOOD = """module {
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
"""

HERE = Path(__file__).name


def one_line(e: BaseException) -> str:
    msg = str(e)
    assert "\n" not in msg, msg
    return msg


def test_malformed_stablehlo_names_line_and_column() -> None:
    bad = GOOD.replace("stablehlo.tanh %arg0", "stablehlo.tanh %arg9")
    with pytest.raises(FrontendError) as ei:
        import_stablehlo(bad, source_name="model.mlir")
    msg = one_line(ei.value)
    assert msg.startswith("model.mlir:3:"), msg
    assert "undeclared" in msg and "StableHLO parse error" in msg


def test_malformed_stablehlo_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.mlir"
    path.write_text(GOOD.replace("tensor<2x3xf32>)", "tensor<2x3xf32"))
    with pytest.raises(FrontendError) as ei:
        import_stablehlo(path)
    msg = one_line(ei.value)
    assert msg.startswith(f"{path}:2:"), msg


def test_good_stablehlo_imports() -> None:
    m = import_stablehlo(GOOD, source_name="model.mlir")
    assert [op.name for op in m.walk()] == ["ik.tanh", "func.return"]
    # Text without loc(...) gives each op its place in the text.
    tanh = m.entry.body.first
    assert (tanh.loc.file, tanh.loc.line) == ("model.mlir", 3)


def test_malformed_hlo_text_names_line_and_column() -> None:
    text = "HloModule m\nENTRY main {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] add(p, q)\n}\n"
    with pytest.raises(FrontendError) as ei:
        import_hlo(text)
    msg = one_line(ei.value)
    assert msg.startswith("<hlo>:4:"), msg
    assert "HLO parse error" in msg


def test_unsupported_primitives_are_all_listed_once() -> None:
    def f(x: Any) -> Any:
        a = jax.lax.igamma(x, x + 1.0)
        b = jax.lax.igamma(x + 2.0, x)
        c = jnp.linalg.cholesky(x @ x.T + 3.0 * jnp.eye(2))
        d = jax.lax.fori_loop(0, 3, lambda i, v: v * 2.0, x)
        return a + b + c.sum() + d + jnp.tanh(x)

    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3) / 5.0
    with pytest.raises(UnsupportedOpsError) as ei:
        import_jax(f, (x,))
    err = ei.value
    msg = one_line(err)
    # A fori_loop with static bounds is a scan; refused ops say why.
    assert set(err.ops) == {"igamma (a special function with no IR op)",
                            "cholesky (a linear-algebra decomposition; out of scope)", "scan"}, err.ops
    assert len(err.ops["igamma (a special function with no IR op)"]) == 2 and "x2" in msg
    assert all(HERE in loc for locs in err.ops.values() for loc in locs), err.ops
    # The ops downstream of an unsupported one are not reported again.
    assert "add" not in msg


def test_random_primitives_are_refused_by_name() -> None:
    def f(x: Any) -> Any:
        return x + jax.random.normal(jax.random.key(0), x.shape)

    with pytest.raises(UnsupportedOpsError) as ei:
        import_jax(f, (np.ones(3, np.float32),))
    assert any("a random-number primitive; out of scope" in k for k in ei.value.ops), ei.value.ops


def test_unsupported_stablehlo_ops_are_all_listed() -> None:
    def f(x: Any) -> Any:
        special = jax.lax.zeta(x + 2.0, x + 1.0)
        return special + jax.lax.fori_loop(0, 3, lambda i, v: v * 2.0, x)

    x = np.ones((2, 3), np.float32)
    with pytest.raises(UnsupportedOpsError) as ei:
        import_stablehlo(jax.jit(f).lower(x).as_text(debug_info=True))
    err = ei.value
    assert set(err.ops) == {"chlo.zeta (a special function with no IR op)",
                            "while (loops are out of scope (jax writes igamma and friends as while loops))"}, err.ops
    assert all(HERE in loc for locs in err.ops.values() for loc in locs), err.ops


def test_unsupported_form_of_a_supported_primitive_says_why() -> None:
    def f(x: Any) -> Any:
        return jax.lax.reduce(x, np.float32(0), lambda a, b: a + 2.0 * b, (0,))

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with pytest.raises(UnsupportedOpsError) as ei:
        import_jax(f, (x,))
    assert "reduce (reduce with a reducer other than add/mul/max/min on each operand)" in ei.value.ops
    with pytest.raises(UnsupportedOpsError) as ei:
        import_stablehlo(jax.jit(f).lower(x).as_text())
    assert "reduce (reduce with a reducer other than add/max/min/mul/and/or)" in ei.value.ops, ei.value.ops


def test_function_that_fails_to_trace() -> None:
    def f(x: Any) -> Any:
        if x.sum() > 0:  # a Python branch on a traced value
            return x
        return -x

    with pytest.raises(FrontendError) as ei:
        import_jax(f, (np.ones(3, np.float32),))
    msg = one_line(ei.value)
    assert msg.startswith("could not trace") and f"{HERE}:" in msg, msg
    assert "TracerBoolConversionError" in msg or "ConcretizationTypeError" in msg, msg


def test_shape_error_while_tracing() -> None:
    def f(x: Any, y: Any) -> Any:
        return x @ y

    with pytest.raises(FrontendError) as ei:
        import_jax(f, (np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)))
    assert "could not trace" in one_line(ei.value)


def test_bad_polymorphic_shapes() -> None:
    with pytest.raises(FrontendError) as ei:
        import_jax(lambda x: x * 2, (np.ones((2, 3), np.float32),), polymorphic_shapes=["B, S, T"])
    assert "polymorphic_shapes" in one_line(ei.value) and "(2, 3)" in str(ei.value)
    with pytest.raises(FrontendError) as ei:
        import_jax(lambda x: x * 2, (np.ones((2, 3), np.float32),), polymorphic_shapes=["B, ("])
    assert "syntax error" in one_line(ei.value)


def test_non_polynomial_symbolic_dim_is_reported() -> None:
    def f(x: Any) -> Any:
        return x.reshape(x.shape[0] // 2, 2 * x.shape[1])

    with pytest.raises(UnsupportedOpsError) as ei:
        import_jax(f, (np.ones((4, 3), np.float32),), polymorphic_shapes=["B, S"], constraints=["B >= 2"])
    msg = one_line(ei.value)
    assert "reshape" in msg and "polynomial" in msg, msg


def test_unsupported_dtype_argument() -> None:
    with pytest.raises(FrontendError) as ei:
        import_jax(lambda x: x + 1, (np.ones(3, np.complex64),))
    assert "complex64" in one_line(ei.value)


def test_wrong_source_type() -> None:
    with pytest.raises(FrontendError) as ei:
        import_stablehlo(42)
    assert "int" in one_line(ei.value)
