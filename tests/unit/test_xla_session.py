"""Buffer donation and resident sessions on ``xla-cpu``.

A function with ``aliases`` (outputs that overwrite arguments: a KV cache) lowers with
``input_output_alias`` in the HLO the artifact keeps, and ``XlaTarget.open_session`` runs it
step after step with the cache resident and donated; every step is compared with the
float64 interpreter's stateful run (:func:`irkit.interp.run_function_stateful`).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

from irkit.targets.registry import get_target
from irkit.targets.xla import XlaSession, hlo_input_output_alias

from irkit.errors import IrkitError
from irkit.interp import run_function_stateful
from irkit.text.parser import parse_module

# Two caches of the same type, written by two outputs; the logits-like output 0 has that type
# too, so a naive pairing (first donated buffer of a type to the first output of that type)
# would give output 0 the K cache.
STEP = """"func.func"() ({
^bb0(%x: tensor<1x4xf32>, %k: tensor<6x4xf32>, %v: tensor<6x4xf32>, %pos: tensor<2xi32>):
  %0 = "ik.constant"() {value = dense<0.5> : tensor<f32>} : () -> tensor<f32>
  %1 = "ik.mul"(%x, %0) : (tensor<1x4xf32>, tensor<f32>) -> tensor<1x4xf32>
  %2 = "ik.dynamic_update_slice"(%k, %x, %pos) : (tensor<6x4xf32>, tensor<1x4xf32>, tensor<2xi32>) -> tensor<6x4xf32>
  %3 = "ik.dynamic_update_slice"(%v, %1, %pos) : (tensor<6x4xf32>, tensor<1x4xf32>, tensor<2xi32>) -> tensor<6x4xf32>
  %4 = "ik.add"(%2, %3) : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  "func.return"(%4, %2, %3) : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>) -> ()
}) {function_type = (tensor<1x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<2xi32>) -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>), sym_name = "step", aliases = ALIASES} : () -> ()
"""


def _module(aliases: str = "[[1, 1], [2, 2]]"):
    return parse_module(STEP.replace("ALIASES", aliases), "step.mlir")


@pytest.fixture(scope="module")
def lowered():
    t = get_target("xla-cpu")
    return t, t.lower(_module(), {})


def test_aliases_lower_to_input_output_alias_in_the_hlo(lowered) -> None:
    _, art = lowered
    hlo = art.files["hlo.txt"]
    assert "input_output_alias=" in hlo.splitlines()[0]
    pairs = hlo_input_output_alias(hlo)
    order = art.info.get("hlo_output_order")
    if order is not None:  # HLO output j is the function's output order[j]
        pairs = {order[j]: a for j, a in pairs.items()}
    assert pairs == {1: 1, 2: 2}
    assert art.info["input_output_alias"] == {"1": 1, "2": 2}
    assert art.aliases == {1: 1, 2: 2}
    assert not any("donated" in n for n in art.info["notes"])


def test_no_aliases_no_donation() -> None:
    m = parse_module(STEP.replace(", aliases = ALIASES", ""), "step.mlir")
    art = get_target("xla-cpu").lower(m, {})
    assert "input_output_alias" not in art.files["hlo.txt"].splitlines()[0]
    assert art.aliases == {}


def test_session_steps_match_the_float64_interpreter(lowered) -> None:
    t, art = lowered
    m = _module()
    rng = np.random.default_rng(3)
    k0 = rng.standard_normal((6, 4)).astype(np.float32)
    v0 = rng.standard_normal((6, 4)).astype(np.float32)
    s = t.open_session(art)
    assert isinstance(s, XlaSession)
    s.bind(1, k0)
    s.bind(2, v0)
    state = {1: k0.astype(np.float64), 2: v0.astype(np.float64)}
    for step in range(5):
        x = rng.standard_normal((1, 4)).astype(np.float32)
        pos = np.array([step, 0], np.int32)
        resident = s._vals[1]
        got = s.run([x, None, None, pos])
        want = run_function_stateful(m, [x.astype(np.float64), None, None, pos], state, float64=True)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
        # the K cache's buffer went to XLA (donated) and the output took its place
        assert resident.is_deleted()
        np.testing.assert_allclose(s.read(1), state[1], rtol=1e-6)
        np.testing.assert_allclose(s.read(2), state[2], rtol=1e-6)
    # outputs handed back are copies: the next step (which reuses the buffer) leaves them alone
    before = got[1].copy()
    s.run([np.ones((1, 4), np.float32), None, None, np.array([0, 0], np.int32)])
    np.testing.assert_array_equal(got[1], before)
    assert s.calls == 6


def test_session_fetch_and_errors(lowered) -> None:
    t, art = lowered
    s = t.open_session(art)
    x = np.full((1, 4), 2.0, np.float32)
    with pytest.raises(IrkitError, match=r"argument 1 \('k'\) is None but has no resident value"):
        s.run([x, None, None, np.array([0, 0], np.int32)])
    s.bind(1, np.arange(24, dtype=np.float32).reshape(6, 4))
    s.bind(2, np.zeros((6, 4), np.float32) + 1.0)
    (out0,) = s.run([x, None, None, np.array([2, 0], np.int32)], fetch=[0])
    np.testing.assert_allclose(out0[2], x[0] + 0.5 * x[0])
    np.testing.assert_allclose(out0[0], np.arange(4) + 1.0)
    with pytest.raises(IrkitError, match="has shape"):
        s.bind(1, np.zeros((5, 4), np.float32))


def test_alias_of_another_type_is_one_error() -> None:
    m = parse_module(STEP.replace("ALIASES", "[[1, 1]]").replace('sym_name = "step"', 'sym_name = "step"'),
                     "step.mlir")
    m.entry.attrs["aliases"] = ((1, 0),)  # output 1 is 6x4, argument 0 is 1x4
    with pytest.raises(IrkitError, match=r"alias output 1 -> argument 0: output is float32\[6, 4\], argument is"):
        get_target("xla-cpu").lower(m, {})
