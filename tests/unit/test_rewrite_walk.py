"""The shared graph walks (irkit.ir.walk, re-exported by irkit.rewrite.walk): bounds, orders, leaves, escapes."""

from __future__ import annotations

import numpy as np

from irkit.interp import Interpreter, int_cast_cone
from irkit.ir import DType, TensorType
from irkit.ir.builder import new_function
from irkit.rewrite.walk import (
    closed_cone,
    cone_leaves,
    escaping_user,
    only_user,
    other_operand,
    producer_chain,
    producer_cone,
    producer_rings,
    user_rings,
)
from irkit.text import parse_module

F32 = TensorType((2, 3), DType.f32)


def _graph():
    """y = tanh(x * 0.5) + w, and z = exp(x * 0.5) read by the return too."""
    f, b = new_function("f", [F32, F32])
    x, w = f.args
    c = b.scalar(0.5, DType.f32)
    h = b.mul(x, c)
    t = b.tanh(h)
    y = b.add(t, w)
    z = b.exp(h)
    b.ret(y, z)
    return f, x, w, c, h, t, y, z


def test_cone_from_an_op_is_depth_first_last_operand_first() -> None:
    f, x, w, c, h, t, y, z = _graph()
    cone = producer_cone(y.producer)
    assert cone is not None and not cone.truncated
    assert [o.name for o in cone.ops] == ["ik.add", "ik.tanh", "ik.mul", "ik.constant"]
    assert cone.leaf_values == [w, x]  # w (the add's last operand) is met first
    topo = cone.topological()
    assert [o.name for o in topo] == ["ik.constant", "ik.mul", "ik.tanh", "ik.add"]
    pos = {id(o): i for i, o in enumerate(topo)}
    assert all(pos[id(a.producer)] < pos[id(o)] for o in topo for a in o.operands if id(a.producer) in pos)


def test_stop_skip_and_enter_bound_the_cone() -> None:
    f, x, w, c, h, t, y, z = _graph()
    cone = producer_cone(y.producer, stop=h, skip=lambda v: v is w)
    assert cone is not None
    assert [o.name for o in cone.ops] == ["ik.add", "ik.tanh"] and cone.leaf_values == [h]
    cone = producer_cone(y, enter=lambda p: p.name != "ik.tanh")  # a value start: walked like an operand
    assert cone is not None and [o.name for o in cone.ops] == ["ik.add"] and set(cone.leaves) == {id(w), id(t)}
    # stop as a collection or a predicate means the same as one value
    for stop in ([h], lambda v: v is h):
        again = producer_cone(y.producer, stop=stop, skip=lambda v: v is w)
        assert again is not None and again.ops == producer_cone(y.producer, stop=h, skip=lambda v: v is w).ops


def test_soft_limit_makes_leaves_and_says_so() -> None:
    f, x, w, c, h, t, y, z = _graph()
    cone = producer_cone(y.producer, limit=2)
    assert cone is not None and cone.truncated
    assert [o.name for o in cone.ops] == ["ik.add", "ik.tanh"]
    assert set(cone.leaves) == {id(w), id(h)}
    full = producer_cone(y.producer, limit=4)
    assert full is not None and not full.truncated and len(full.ops) == 4


def test_hard_bounds_give_up() -> None:
    f, x, w, c, h, t, y, z = _graph()
    assert producer_cone(y, max_ops=3) is None
    assert producer_cone(y, max_ops=4) is not None
    assert producer_cone(y, refuse=lambda o: o.name == "ik.mul") is None
    assert cone_leaves(y, refuse=lambda o: o.name == "ik.exp") == [w, x]  # exp is not in y's cone
    assert producer_cone(y, closed=True) is None  # reaches the arguments
    assert producer_cone(y, stop=[x, w], closed=True) is not None


def test_closed_cone_evaluates_from_given_values() -> None:
    f, x, w, c, h, t, y, z = _graph()
    assert closed_cone(y) is None
    ops = closed_cone(y, [x, w])
    assert ops is not None and [o.name for o in ops] == ["ik.constant", "ik.mul", "ik.tanh", "ik.add"]
    rng = np.random.default_rng(0)
    env = {id(x): rng.standard_normal((2, 3)), id(w): rng.standard_normal((2, 3))}
    it = Interpreter(float64=True)
    for o in ops:
        for r, val in zip(o.results, it._op(o, [env[id(a)] for a in o.operands], {})):
            env[id(r)] = val
    want = np.tanh(env[id(x)] * 0.5) + env[id(w)]
    np.testing.assert_allclose(env[id(y)], want, rtol=1e-12)
    assert closed_cone(h, [h]) == []  # the value itself is given
    assert closed_cone(y, [x, w], max_ops=3) is None
    assert closed_cone(y, [x, w], enter=lambda p: p.name != "ik.tanh") is None


def test_several_starts_share_one_walk() -> None:
    f, x, w, c, h, t, y, z = _graph()
    cone = producer_cone([y, z], stop=[x])
    assert cone is not None
    # the last start is walked first; the shared mul is taken once
    assert [o.name for o in cone.ops] == ["ik.exp", "ik.mul", "ik.constant", "ik.add", "ik.tanh"]
    assert cone.leaf_values == [x, w]
    names = [o.name for o in cone.topological()]
    assert names.index("ik.mul") < names.index("ik.exp") and names.index("ik.mul") < names.index("ik.tanh")


def test_user_rings_and_escapes() -> None:
    f, x, w, c, h, t, y, z = _graph()
    rings = user_rings(h.producer, 2)
    assert [(d, o.name) for d, o in rings] == [(0, "ik.mul"), (1, "ik.tanh"), (1, "ik.exp"), (2, "ik.add"),
                                              (2, "func.return")]
    assert [o.name for _, o in user_rings(h.producer, 5, lambda u: u.name != "ik.exp")] == [
        "ik.mul", "ik.tanh", "ik.add", "func.return"]
    group = [y.producer, t.producer, h.producer]
    assert escaping_user(group, outputs=[y.producer]) == (h.producer, z.producer)  # exp reads h
    assert escaping_user(group) == (y.producer, y.users[0])  # the return reads y
    assert escaping_user([y.producer, t.producer], outputs=[y.producer]) is None


def test_single_use_helpers() -> None:
    f, x, w, c, h, t, y, z = _graph()
    assert only_user(t) is y.producer and only_user(h) is None  # h feeds tanh and exp
    assert other_operand(y.producer, t) is w and other_operand(t.producer, h) is None
    assert [o.name for o in producer_chain(y)] == ["ik.add", "ik.tanh", "ik.mul"]
    assert producer_chain(y, depth=1) == [y.producer]


def test_rings_walk_breadth_first_first_start_first() -> None:
    f, x, w, c, h, t, y, z = _graph()
    cone = producer_rings(y.producer)
    assert [o.name for o in cone.ops] == ["ik.add", "ik.tanh", "ik.mul", "ik.constant"]
    assert cone.leaf_values == [w, x] and not cone.truncated
    # two value starts: each start's producer (distance 1) before any operand's producer
    both = producer_rings([y, z])
    assert [o.name for o in both.ops] == ["ik.add", "ik.exp", "ik.tanh", "ik.mul", "ik.constant"]
    assert both.leaf_values == [w, x]
    names = [o.name for o in both.topological()]
    assert names.index("ik.constant") < names.index("ik.mul") < names.index("ik.tanh") < names.index("ik.add")


def test_rings_depth_limit_free_and_enter() -> None:
    f, x, w, c, h, t, y, z = _graph()
    # add at 0, tanh at 1, mul at 2, the constant at 3
    cone = producer_rings(y.producer, 2)
    assert [o.name for o in cone.ops] == ["ik.add", "ik.tanh", "ik.mul"]
    assert cone.leaf_values == [w, x, c] and cone.truncated
    free = producer_rings(y.producer, 2, free=lambda o: o.name == "ik.constant")
    assert [o.name for o in free.ops] == ["ik.add", "ik.tanh", "ik.mul", "ik.constant"] and not free.truncated
    assert free.leaf_values == [w, x]
    lim = producer_rings(y.producer, limit=2)
    assert [o.name for o in lim.ops] == ["ik.add", "ik.tanh"] and lim.leaf_values == [w, h] and lim.truncated
    assert producer_rings([y.producer, z.producer], limit=1).ops == [y.producer]  # start ops count too
    refused = producer_rings(y, enter=lambda p: p.name != "ik.tanh")
    assert [o.name for o in refused.ops] == ["ik.add"] and refused.leaf_values == [t, w]
    # a value start's producer is at distance 1: depth 0 takes nothing
    assert producer_rings(y, 0).ops == [] and producer_rings(y, 0).leaf_values == [y]


def test_rings_take_each_op_at_its_shortest_distance() -> None:
    f, x, w, c, h, t, y, z = _graph()
    # From add and exp, mul is at distance 1 (exp reads h) though the add's path reaches it at 2:
    # with depth 1 it is taken, and the constant (distance 2) is not.
    cone = producer_rings([y.producer, z.producer], 1)
    assert [o.name for o in cone.ops] == ["ik.add", "ik.exp", "ik.tanh", "ik.mul"]
    assert cone.leaf_values == [w, x, c]


def test_through_continues_the_walk_elsewhere() -> None:
    f, x, w, c, h, t, y, z = _graph()
    plain = producer_cone(y, skip=lambda v: v is h)
    assert plain is not None and [o.name for o in plain.ops] == ["ik.add", "ik.tanh"]
    # walking w also walks z: the exp and its cone join, though y does not read them
    more = producer_cone(y, skip=lambda v: v is h, through=lambda v: [z] if v is w else [])
    assert more is not None and {o.name for o in more.ops} == {"ik.add", "ik.tanh", "ik.exp"}
    assert more.leaf_values == [w]  # w is still a leaf (no producer); h stays skipped


FUSED_CAST = """
"func.func"() ({
^bb0(%x: tensor<4xf32>, %y: tensor<4xf32>):
  %0 = "ik.exp"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ik.tanh"(%y) : (tensor<4xf32>) -> tensor<4xf32>
  %2, %3 = "ik.fused"(%0, %1) ({
  ^bb0(%a: tensor<4xf32>, %b: tensor<4xf32>):
    %4 = "ik.log"(%a) : (tensor<4xf32>) -> tensor<4xf32>
    %5 = "ik.neg"(%b) : (tensor<4xf32>) -> tensor<4xf32>
    "ik.yield"(%4, %5) : (tensor<4xf32>, tensor<4xf32>) -> ()
  }) {kind = "elementwise"} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %6 = "ik.cast"(%2) {to = i32} : (tensor<4xf32>) -> tensor<4xi32>
  "func.return"(%6, %3) : (tensor<4xi32>, tensor<4xf32>) -> ()
}) {function_type = (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xi32>, tensor<4xf32>), sym_name = "f"} : () -> ()
"""


def test_int_cast_cone_follows_one_result_across_the_region() -> None:
    """The cast reads the region's first result: its yield (log) and log's region argument's
    operand (exp) are in the cone, and so is every operand of the fused op (tanh); neg, which
    only the second result yields, is not."""
    f = parse_module(FUSED_CAST).entry
    names = sorted(op.name for op in f.walk() if id(op) in int_cast_cone(f))
    assert names == ["ik.exp", "ik.fused", "ik.log", "ik.tanh"]
