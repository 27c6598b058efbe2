"""torch.export converters of irkit/frontends/torch_ops_special3.py (frexp, embedding_bag,
as_strided_scatter, grid_sampler_3d, histogram/histogramdd, polynomials of a constant degree
tensor), run on the float64 reference interpreter and checked against eager torch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from irkit.errors import UnsupportedOpsError  # noqa: E402
from irkit.frontends.torch_export import _FunctionModule, import_exported_program, tensor_to_numpy  # noqa: E402
from irkit.interp import run  # noqa: E402
from irkit.ir import verify  # noqa: E402

F = torch.nn.functional


def _run(fn: Any, *xs: Any) -> list[np.ndarray]:
    ep = torch.export.export(_FunctionModule(fn), tuple(x.clone() for x in xs), strict=False)
    m = import_exported_program(ep)
    verify(m)
    return [np.asarray(g) for g in run(m, [tensor_to_numpy(x) for x in xs])]


def _flat(out: Any) -> list[Any]:
    if isinstance(out, torch.Tensor):
        return [out]
    res: list[Any] = []
    for o in out:
        res.extend(_flat(o))
    return res


def _check(fn: Any, *xs: Any, rtol: float = 1.3e-6, atol: float = 1e-5, exact: bool = False) -> None:
    got = _run(fn, *xs)
    want = [tensor_to_numpy(t) for t in _flat(fn(*xs))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if exact:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True)


_FREXP = [0.0, -0.0, 1.0, 0.5, 0.75, 3.0, -7.0, 1e-40, -1e-45, 1.17549435e-38, 3.4e38, -3.4e38, 0.1, 1e-3, 6e4,
          float("inf"), -float("inf"), float("nan")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_frexp_matches_torch_bitwise(dtype: Any) -> None:
    """Mantissa and exponent equal torch's exactly: normal and subnormal numbers, signed zeros,
    the largest finite values, infinities and NaN (exponent 0, mantissa the input)."""
    g = torch.Generator().manual_seed(0)
    x = torch.cat([torch.tensor(_FREXP, dtype=torch.float64), torch.randn(200, generator=g, dtype=torch.float64)
                   * torch.exp2(torch.randint(-60, 60, (200,), generator=g).double())]).to(dtype)
    m, e = _run(torch.frexp, x)
    wm, we = torch.frexp(x)
    np.testing.assert_array_equal(m, tensor_to_numpy(wm))
    num = ~np.isnan(m.astype(np.float64))  # signed zeros keep their sign (a NaN's sign means nothing)
    np.testing.assert_array_equal(np.signbit(m.astype(np.float64))[num],
                                  np.signbit(tensor_to_numpy(wm).astype(np.float64))[num])
    assert e.dtype == np.int32
    np.testing.assert_array_equal(e, we.numpy())
    if dtype == torch.float64:  # subnormal float64 inputs too
        tiny = torch.tensor([5e-324, -2.5e-310, 1e-308], dtype=torch.float64)
        np.testing.assert_array_equal(_run(torch.frexp, tiny)[1], torch.frexp(tiny)[1].numpy())


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode: str) -> None:
    g = torch.Generator().manual_seed(1)
    w = torch.randn(10, 4, generator=g)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 9, 0, 7])
    offs = torch.tensor([0, 2, 2, 5])  # bag 1 is empty
    csr = torch.tensor([0, 2, 2, 5, 9])
    for pad in (None, 4, -1):
        _check(lambda a, i, o, pad=pad: F.embedding_bag(i, a, o, mode=mode, padding_idx=pad), w, idx, offs)
        _check(lambda a, i, o, pad=pad: F.embedding_bag(i, a, o, mode=mode, padding_idx=pad,
                                                        include_last_offset=True), w, idx, csr)
    # torch's CPU kernels when the last offset stops short of the indices
    _check(lambda a, i, o: F.embedding_bag(i, a, o, mode=mode, include_last_offset=True), w, idx, offs)
    _check(lambda a, i: F.embedding_bag(i, a, mode=mode), w, idx[:8].reshape(2, 4))
    _check(lambda a, i, o: F.embedding_bag(i, a, o, mode=mode), w, idx[:0], torch.tensor([0, 0]))  # no indices
    wn = w.clone()
    wn[1, 0] = wn[4, 1] = float("nan")  # first in bag 0; inside bag 2 (max: torch keeps only a first NaN)
    wn[3, 2] = float("inf")
    _check(lambda a, i, o: F.embedding_bag(i, a, o, mode=mode), wn, idx, offs)
    if mode == "sum":
        psw = torch.rand(9, generator=g) + 0.25
        _check(lambda a, i, o, p: F.embedding_bag(i, a, o, mode="sum", per_sample_weights=p), w, idx, offs, psw)
        _check(lambda a, i, o, p: F.embedding_bag(i, a, o, mode="sum", per_sample_weights=p, padding_idx=2),
               w.double(), idx, offs, psw.double())
    m = {"sum": 0, "mean": 1, "max": 2}[mode]
    for pad in (-1, 3):  # ATen's padding_idx overload wraps -1 to the last row; _embedding_bag's -1 is none
        _check(lambda a, i, o, pad=pad: torch.ops.aten.embedding_bag.padding_idx(a, i, o, False, m, False, None,
                                                                                  False, pad)[0], w, idx, offs)
        _check(lambda a, i, o, pad=pad: torch.ops.aten._embedding_bag(a, i, o, False, m, False, None, False,
                                                                       pad)[0], w, idx, offs)
    nn = torch.nn.EmbeddingBag.from_pretrained(w, mode=mode)
    _check(lambda i, o: nn(i, o), idx, offs)


def test_embedding_bag_bookkeeping_results_refused() -> None:
    w, idx, offs = torch.randn(6, 3), torch.tensor([0, 5, 2]), torch.tensor([0, 1])

    def f(a: Any, i: Any, o: Any) -> Any:
        out, offset2bag, bag_size, _ = torch.embedding_bag(a, i, o, False, 1)
        return out, bag_size

    with pytest.raises(UnsupportedOpsError, match="offset2bag, bag_size and max_indices"):
        _run(f, w, idx, offs)


def test_as_strided_scatter() -> None:
    g = torch.Generator().manual_seed(2)
    x = torch.randn(4, 5, generator=g)
    for size, stride, off in [((2, 2), (1, 2), 1), ((3, 2), (5, 1), 3), ((4,), (5,), 0), ((), (), 7),
                              ((2, 3), (10, 3), 0), ((5, 4), (1, 5), 0)]:
        src = torch.randn(size, generator=g)
        _check(lambda a, s, size=size, stride=stride, off=off: torch.as_strided_scatter(a, s, size, stride, off),
               x, src, exact=True)
    # an overlapping view (stride 0): eager torch refuses the write, the import refuses it too
    with pytest.raises(UnsupportedOpsError, match="more than once"):
        _run(lambda a, s: torch.as_strided_scatter(a, s, (2, 3), (0, 1), 2), x, torch.randn(2, 3))


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_3d(mode: str, padding: str) -> None:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 4, 5, 6, generator=g)
    grid = torch.rand(2, 3, 4, 2, 3, generator=g) * 3.4 - 1.7  # reaches outside [-1, 1]
    grid[0, 0, 0, 0] = torch.tensor([1.0, -1.0, 0.0])  # exact corners
    grid[1, 0, 0, 0] = torch.tensor([float("nan"), 0.2, 0.1])  # torch: 0 (zeros), the last voxel (clipped)
    grid[1, 1, 1, 1] = torch.tensor([0.3, float("inf"), -float("inf")])
    for align in (False, True):
        _check(lambda a, b, align=align: F.grid_sample(a, b, mode=mode, padding_mode=padding, align_corners=align),
               x, grid)
    if mode == "bilinear":
        _check(lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding, align_corners=False),
               x.double(), grid.double(), rtol=1e-12, atol=1e-12)
        one = torch.randn(1, 2, 1, 1, 1, generator=g)  # a size-1 volume
        _check(lambda a, b: F.grid_sample(a, b, mode=mode, padding_mode=padding, align_corners=True), one, grid[:1])


def test_histogram() -> None:
    g = torch.Generator().manual_seed(4)
    x = torch.randn(200, generator=g)
    w = torch.rand(200, generator=g)
    _check(lambda a: torch.histogram(a, bins=7), x)
    _check(lambda a: torch.histogram(a, bins=5, range=(-1.0, 1.5)), x)
    _check(lambda a, b: torch.histogram(a, bins=5, range=(-1.0, 1.5), weight=b, density=True), x, w)
    _check(lambda a, b: torch.histogram(a, bins=b), x, torch.tensor([-2.0, -0.5, 0.0, 0.1, 3.0]))
    _check(lambda a, b, c: torch.histogram(a, bins=b, weight=c), x.reshape(20, 10),
           torch.tensor([-1.0, 0.0, 1.0]), w.reshape(20, 10))
    _check(lambda a: torch.histogram(a, bins=3), torch.full((6,), 2.5))  # equal min and max
    # values on the edges: the last bin includes the right edge
    _check(lambda a: torch.histogram(a, bins=4, range=(0.0, 4.0)), torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 4.5, -1.0]))
    _check(lambda a: torch.histc(a, bins=6, min=-1.0, max=1.0), x)


def test_histogramdd() -> None:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(120, 3, generator=g)
    w = torch.rand(120, generator=g)
    _check(lambda a: torch.histogramdd(a, bins=[3, 4, 2]), x)
    _check(lambda a: torch.histogramdd(a, bins=3, range=[-1.0, 1.0, 0.0, 2.0, -2.0, 0.5], density=True), x)
    _check(lambda a, b: torch.histogramdd(a, bins=[2, 5, 3], weight=b), x, w)
    _check(lambda a, b, c, d: torch.histogramdd(a, bins=[b, c, d]), x, torch.tensor([-1.0, 0.0, 1.0]),
           torch.tensor([-3.0, 0.5, 1.0, 3.0]), torch.tensor([-0.2, 0.2]))
    _check(lambda a: torch.histogramdd(a, bins=[1, 1]), torch.ones(5, 2))
    _check(lambda a: torch.histogramdd(a, bins=[2, 3]), x.reshape(4, 45, 2))


_POLYS = ["hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"]


@pytest.mark.parametrize("name", _POLYS)
def test_polynomial_constant_tensor_degree(name: str) -> None:
    """A degree tensor that is a constant of the program unrolls to its largest degree, each
    element stopping at its own; one computed at run time is refused with the reason."""
    fn = getattr(torch.special, name)
    x = torch.cat([torch.linspace(-3.0, 3.0, 61, dtype=torch.float64),
                   torch.tensor([1.0, -1.0, 0.0], dtype=torch.float64)]).reshape(8, 8)
    degrees = [-2.0, 0.0, 1.0, 2.0, 3.7, 12.0, 5.0, 0.5]

    def f(v: Any) -> Any:
        return fn(v, torch.tensor(degrees, dtype=torch.float64))

    np.testing.assert_allclose(_run(f, x)[0], f(x).numpy(), rtol=1e-12, atol=1e-12)

    def f32(v: Any) -> Any:
        return fn(v, torch.tensor(7.0))

    xs = x.float()
    np.testing.assert_allclose(_run(f32, xs)[0], f32(xs).numpy(), rtol=1.3e-6, atol=1e-5)
    with pytest.raises(UnsupportedOpsError, match="degree n as a tensor computed at run time"):
        _run(fn, x, torch.tensor(3.0, dtype=torch.float64))


@pytest.mark.parametrize("target", ["xla-cpu", "ort"])
def test_frexp_subnormals_on_targets(target: str) -> None:
    """The integer-only frexp reads subnormal float32 inputs exactly on targets that flush
    subnormal arithmetic to zero (XLA on CPU)."""
    from irkit.targets.registry import get_target

    t = get_target(target)
    if not t.availability().can_run:
        pytest.skip(f"{target}: {t.availability().reason}")
    x = torch.tensor([1e-40, -1e-45, 1.17549435e-38, 3e-39, 0.0, -0.0, 0.1, -6.5e4, float("inf"), float("nan")])
    ep = torch.export.export(_FunctionModule(torch.frexp), (x.clone(),), strict=False)
    m, e = t.run_module(import_exported_program(ep), [x.numpy()])
    wm, we = torch.frexp(x)
    np.testing.assert_array_equal(np.asarray(m), wm.numpy())
    np.testing.assert_array_equal(np.asarray(e), we.numpy())
