"""torch.export converters for less common ATen ops, each checked against eager torch.

Every case exports a small module with ``torch.export``, imports it, runs the
float64 interpreter and compares each output with eager torch (float32) on
random non-zero inputs: adaptive max pooling with uneven windows (values and
indices), group/batch norm statistics and running-statistic updates,
polygamma of order >= 1, erfcx, nanmedian, cdist, segment_reduce, histc and
index_put with a symbolic index count.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from irkit.frontends.torch_export import import_exported_program, tensor_to_numpy
from irkit.interp import run
from irkit.ir import verify
from irkit.ir.aliases import get_aliases


def _check(mod: Any, *xs: Any, rtol: float = 2e-5, atol: float = 1e-5, dynamic_shapes: Any = None,
           runs: tuple[tuple[Any, ...], ...] = ()) -> Any:
    """Export ``mod`` on ``xs``, import it, and compare every output (and every input the module
    updates in place) with eager torch, on ``xs`` and on each extra input tuple in ``runs``."""
    mod = mod.eval()
    ep = torch.export.export(mod, tuple(x.clone() for x in xs), dynamic_shapes=dynamic_shapes, strict=False)
    m = import_exported_program(ep)
    verify(m)
    aliases = get_aliases(m.entry)
    for args in ((*xs,), *runs):
        ts = [x.clone() for x in args]
        with torch.no_grad():
            out = mod(*ts)
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        want = [tensor_to_numpy(o) for o in out] + [tensor_to_numpy(ts[a]) for _, a in sorted(aliases.items())]
        got = run(m, [tensor_to_numpy(x.clone()) for x in args])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
            else:
                np.testing.assert_array_equal(g, w)
    return m


def _rand(*shape: int, seed: int = 0, lo: float = -3.0, hi: float = 3.0) -> Any:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(*shape, generator=g) * (hi - lo) + lo


class _Fn(torch.nn.Module):
    def __init__(self, fn: Any):
        super().__init__()
        self.fn = fn

    def forward(self, *xs: Any) -> Any:
        return self.fn(*xs)


@pytest.mark.parametrize("size,out", [((7,), (3,)), ((5, 7), (3, 4)), ((6, 5), (4, 2)), ((8, 8), (4, 4))])
def test_adaptive_max_pool_uneven_windows_with_indices(size: tuple[int, ...], out: tuple[int, ...]) -> None:
    fn = {1: torch.nn.functional.adaptive_max_pool1d, 2: torch.nn.functional.adaptive_max_pool2d}[len(size)]
    x = _rand(2, 3, *size, seed=1)
    _check(_Fn(lambda t: fn(t, out, return_indices=True)), x)
    _check(_Fn(lambda t: fn(t, out)), x)


def test_adaptive_max_pool3d_uneven_indices() -> None:
    x = _rand(1, 2, 5, 4, 3, seed=2)
    _check(_Fn(lambda t: torch.nn.functional.adaptive_max_pool3d(t, (2, 3, 2), return_indices=True)), x)


def test_polygamma_orders() -> None:
    x = _rand(40, seed=3, lo=-8.5, hi=9.0)
    x = torch.where((x - x.round()).abs() < 0.05, x + 0.3, x)  # away from the poles
    for n in (1, 2, 3):
        _check(_Fn(lambda t, n=n: torch.polygamma(n, t)), x, rtol=1e-4)


def test_special_functions() -> None:
    x = torch.cat([_rand(30, seed=4, lo=-5.0, hi=40.0), torch.tensor([0.0, 1.9999, 2.0, 2.5, -0.5])])
    _check(_Fn(torch.special.erfcx), x)
    _check(_Fn(torch.special.i0), _rand(40, seed=5, lo=-25.0, hi=25.0), rtol=1e-5)
    s = torch.cat([_rand(20, seed=20, lo=-1.0, hi=9.0), torch.tensor([2.0, 0.5, 1.0, 3.0, 2.5, 2.0])])
    q = torch.cat([_rand(20, seed=21, lo=-2.0, hi=10.0), torch.tensor([1.0, 1.0, 1.0, -2.5, -2.5, -2.0])])
    _check(_Fn(torch.special.zeta), s, q, rtol=1e-5)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_cdist(p: float) -> None:
    x1, x2 = _rand(2, 5, 3, seed=6), _rand(2, 4, 3, seed=7)
    _check(_Fn(lambda a, b: torch.cdist(a, b, p=p)), x1, x2, rtol=1e-5)


def test_nanmedian_and_mode() -> None:
    x = _rand(4, 7, seed=8)
    x[0, 2] = x[1, 0] = x[1, 5] = float("nan")
    x[2, 1:] = float("nan")  # one value left (an all-NaN row has no defined index)
    _check(_Fn(lambda t: torch.nanmedian(t, 1)), x)
    _check(_Fn(lambda t: torch.nanmedian(t, 0, keepdim=True)), x)
    _check(_Fn(torch.nanmedian), x)
    r = torch.tensor([[3.0, 1, 3, 2, 1, 5, 1, 3], [2, 2, 2, 1, 1, 1, 7, 7], [5, 4, 3, 9, 8, 7, 6, 0.5]])
    _check(_Fn(lambda t: torch.mode(t, 1)), r)
    _check(_Fn(lambda t: torch.mode(t, 0, keepdim=True)), r.T.contiguous())


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce(reduce: str) -> None:
    data = _rand(7, 3, seed=9)
    lengths = torch.tensor([2, 0, 4, 1])
    _check(_Fn(lambda d, n: torch.segment_reduce(d, reduce, lengths=n)), data, lengths)
    _check(_Fn(lambda d, n: torch.segment_reduce(d, reduce, lengths=n, initial=0.5)), data, lengths)
    offsets = torch.tensor([0, 1, 1, 3, 7])
    _check(_Fn(lambda d, o: torch.segment_reduce(d, reduce, offsets=o)), data, offsets)


def test_bilinear_margin_ranking_angle() -> None:
    x1, x2 = _rand(4, 3, seed=10), _rand(4, 5, seed=11)
    w, b = _rand(2, 3, 5, seed=12), _rand(2, seed=13)
    _check(_Fn(torch.nn.functional.bilinear), x1, x2, w, b)
    y = torch.tensor([1.0, -1.0, 1.0, -1.0])
    for red in ("none", "mean", "sum"):
        _check(_Fn(lambda p, q, t, red=red: torch.nn.functional.margin_ranking_loss(p, q, t, margin=0.3,
                                                                                    reduction=red)),
               x1[:, 0], x2[:, 0], y)
    _check(_Fn(torch.angle), torch.tensor([-2.0, 0.0, 3.5, float("nan"), -0.0]))


def test_spherical_j0_ndtri_hinge() -> None:
    _check(_Fn(torch.special.spherical_bessel_j0), torch.cat([_rand(20, seed=14, lo=-20, hi=20),
                                                              torch.tensor([0.0, 1e-6, -3e-5])]))
    _check(_Fn(torch.special.ndtri), torch.cat([_rand(20, seed=15, lo=0.0, hi=1.0), torch.tensor([1e-6, 0.5])]),
           rtol=1e-5)
    _check(_Fn(torch.special.modified_bessel_i1), _rand(20, seed=16, lo=-30, hi=30))
    x, y = _rand(6, seed=17), torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
    for red in ("none", "mean", "sum"):
        _check(_Fn(lambda p, t, red=red: torch.nn.functional.hinge_embedding_loss(p, t, margin=0.7, reduction=red)),
               x, y)


@pytest.mark.parametrize("kind", ["t", "u", "v", "w"])
def test_chebyshev_polynomials(kind: str) -> None:
    x = torch.cat([_rand(30, seed=18), torch.tensor([1.0, -1.0, 0.0, 1.0, -1.0])])
    n = torch.cat([_rand(30, seed=19, lo=-2.0, hi=12.0), torch.tensor([3.0, 3.0, 4.0, 0.0, 5.0])])
    for name in (f"chebyshev_polynomial_{kind}", f"shifted_chebyshev_polynomial_{kind}"):
        fn = getattr(torch.special, name)
        _check(_Fn(fn), x, n, rtol=1e-5)


def test_put_and_nonzero_static() -> None:
    x = torch.tensor([[0.0, 1.5, 0.0, 2.0], [3.0, 0.0, 0.0, -1.0]])
    _check(_Fn(lambda a: torch.nonzero_static(a, size=6)), x)
    _check(_Fn(lambda a: torch.nonzero_static(a, size=2, fill_value=7)), x)
    i, v = torch.tensor([1, -2, 5]), torch.tensor([2.0, 3.0, 9.0])
    _check(_Fn(lambda a, j, s: a.put(j, s)), x, i, v)
    _check(_Fn(lambda a, j, s: a.put(j, s, accumulate=True)), x, torch.tensor([1, -2, 1]), v)


def test_norm_statistics_and_running_stat_updates() -> None:
    x = _rand(2, 6, 5, seed=22)
    w, b = _rand(6, seed=23), _rand(6, seed=24)
    _check(_Fn(lambda t, g, h: torch.ops.aten.native_group_norm(t, g, h, 2, 6, 5, 3, 1e-5)), x, w, b)
    rm, rv = _rand(6, seed=25), _rand(6, seed=26, lo=0.5, hi=2.0)
    # training mode updates the running statistics (inputs) in place: aliased outputs of the import
    m = _check(_Fn(lambda t, m_, v_: torch.nn.functional.batch_norm(t, m_, v_, w, b, training=True, momentum=0.3)),
               x, rm, rv)
    assert sorted(get_aliases(m.entry).values()) == [1, 2]
    _check(_Fn(lambda t, m_, v_: torch.ops.aten.native_batch_norm(t, w, b, m_, v_, False, 0.1, 1e-5)), x, rm, rv)


def test_moe_grouped_mm_fallback() -> None:
    pytest.importorskip("transformers.integrations.moe")
    op = getattr(getattr(torch.ops, "transformers", None), "grouped_mm_fallback", None)
    if op is None:
        pytest.skip("this transformers has no grouped_mm_fallback op")
    x, w = _rand(7, 4, seed=27), _rand(3, 4, 5, seed=28)
    offs = torch.tensor([2, 2, 6])  # expert 1 gets no rows; row 6 belongs to none (zero)
    _check(_Fn(lambda a, b_, o: op(a, b_, o)), x, w, offs)


def test_index_copy_and_add_scatter_along_the_dim() -> None:
    from torch.export import Dim

    x, src, i = _rand(2, 3, 8, 4, seed=29), _rand(2, 3, 2, 4, seed=30), torch.tensor([5, 1])
    s = Dim("S", max=8)
    m = _check(_Fn(lambda a, j, v: a.index_copy(2, j, v)), x, i, src, dynamic_shapes=((None, {0: s}, {2: s}),),
               runs=((x, torch.tensor([7, 0, 3]), _rand(2, 3, 3, 4, seed=31)),))
    assert {op.name for op in m.walk()} & {"ik.transpose", "ik.scatter_nd"} == set()  # one scatter, layout kept
    _check(_Fn(lambda a, j, v: a.index_add(2, j, v, alpha=2.0)), x, torch.tensor([5, 5]), src)
