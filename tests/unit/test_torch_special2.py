"""torch.export converters of irkit/frontends/torch_ops_special2.py, checked against eager torch
(float32, torch.testing's default tolerances) and, in float64, against torch's float64 kernels
and SciPy, on grids that include the special values torch defines (0, negative arguments,
infinities, NaN)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from irkit.errors import UnsupportedOpsError  # noqa: E402
from irkit.frontends.torch_export import _FunctionModule, import_exported_program, tensor_to_numpy  # noqa: E402
from irkit.interp import run  # noqa: E402
from irkit.ir import verify  # noqa: E402




def _run(fn: Any, *xs: Any) -> list[np.ndarray]:
    ep = torch.export.export(_FunctionModule(fn), tuple(x.clone() for x in xs), strict=False)
    m = import_exported_program(ep)
    verify(m)
    return [np.asarray(g) for g in run(m, [tensor_to_numpy(x) for x in xs])]


_SPECIAL = [0.0, -0.0, 1e-30, 1e-9, 1e-5, 19.999, 20.0, 20.001, 25.0, 25.001, 100.0, 1e4,
            float("inf"), -float("inf"), float("nan")]


def _grid(lo: float, hi: float, n: int = 400) -> Any:
    g = torch.Generator().manual_seed(7)
    return torch.cat([torch.rand(n, generator=g) * (hi - lo) + lo, torch.tensor(_SPECIAL)])


_UNARY = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
          "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai"]


@pytest.mark.parametrize("name", _UNARY)
def test_unary_special_float32_matches_torch(name: str) -> None:
    fn = getattr(torch.special, name)
    x = _grid(-40.0, 40.0)
    got = _run(fn, x)[0]
    want = fn(x).numpy()
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1.3e-6, atol=1e-5, equal_nan=True)


def test_unary_special_float64_accuracy() -> None:
    """In float64: K to ~1e-12 of SciPy's values (relative), J, Y and Ai to ~1e-10 (absolute below
    1: the power series lose digits to cancellation towards the point where the asymptotic
    expansions take over) -- far below float32 rounding either way."""
    sp = pytest.importorskip("scipy.special")
    x = torch.cat([torch.linspace(-60.0, 60.0, 2401, dtype=torch.float64),
                   torch.tensor([1e-7, 1e-9, 3e-9, 24.9, 25.1, 700.0], dtype=torch.float64)])
    xs = x.numpy()
    refs = {"bessel_j0": sp.j0, "bessel_j1": sp.j1, "bessel_y0": sp.y0, "bessel_y1": sp.y1,
            "modified_bessel_k0": sp.k0, "modified_bessel_k1": sp.k1,
            "scaled_modified_bessel_k0": sp.k0e, "scaled_modified_bessel_k1": sp.k1e,
            "airy_ai": lambda v: sp.airy(v)[0]}
    errs: dict[str, float] = {}
    for name, ref in refs.items():
        got = _run(getattr(torch.special, name), x)[0]
        with np.errstate(all="ignore"):
            want = ref(xs)
        if name.startswith(("modified", "scaled")) or name.startswith("bessel_y"):
            want = np.where(xs < 0, np.nan, want)  # SciPy agrees; explicit for clarity
        scale = np.maximum(np.abs(want), 1.0) if name.startswith(("bessel", "airy")) else np.abs(want)
        err = np.abs(got - want) / np.where(scale > 0, scale, 1.0)
        assert np.array_equal(np.isnan(got), np.isnan(want)), name
        bound = 1e-11 if "modified" in name else 1e-10
        errs[name] = float(np.nanmax(np.where(np.isinf(want), 0.0, err)))
        assert errs[name] < bound, (name, errs[name])


@pytest.mark.parametrize("upper", [False, True])
def test_igamma(upper: bool) -> None:
    sp = pytest.importorskip("scipy.special")
    fn = torch.special.gammaincc if upper else torch.special.gammainc
    a = torch.tensor([0.1, 0.5, 1.0, 2.5, 7.0, 9.0, 20.0, 50.0, 300.0, 0.0, 0.0, 1.0, -1.0, 2.0,
                      float("inf"), float("inf"), 2.0, float("nan"), 5.0, 5.0])
    x = torch.tensor([0.3, 8.9, 1.0, 3.0, 0.01, 19.0, 21.0, 49.0, 320.0, 1.0, 0.0, 0.0, 1.0, -1.0,
                      1.0, float("inf"), float("inf"), 1.0, 6.0, 4.0])
    got = _run(fn, a, x)[0]
    np.testing.assert_allclose(got, fn(a, x).numpy(), rtol=1.3e-6, atol=1e-5, equal_nan=True)
    a64, x64 = a.double(), x.double()
    got64 = _run(fn, a64, x64)[0]
    ref = (sp.gammaincc if upper else sp.gammainc)(a64.numpy()[:9], x64.numpy()[:9])
    np.testing.assert_allclose(got64[:9], ref, rtol=1e-12, atol=1e-15)
    # torch's float64 kernel (Temme's expansion near a = x) is itself good to ~1e-9 there
    np.testing.assert_allclose(got64, fn(a64, x64).numpy(), rtol=1e-8, atol=1e-14, equal_nan=True)


def test_matrix_exp() -> None:
    g = torch.Generator().manual_seed(3)
    for shape, scale in [((5, 5), 3.0), ((3, 4, 4), 0.01), ((2, 3, 3), 40.0), ((1, 1), 2.0)]:
        x = ((torch.rand(*shape, generator=g) * 2 - 1) * scale).double()
        got = _run(torch.linalg.matrix_exp, x)[0]
        want = torch.linalg.matrix_exp(x).numpy()
        assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want)), shape
    z = torch.zeros(1, 3, 3, dtype=torch.float64)
    np.testing.assert_array_equal(_run(torch.linalg.matrix_exp, z + torch.eye(3) * 0.5)[0],
                                  torch.linalg.matrix_exp(z + torch.eye(3) * 0.5).numpy())


# torch.export itself cannot trace r >= 2 with n >= r (its kernel's masked_select leaves
# unbacked sizes it does not return); these are the exportable forms.
@pytest.mark.parametrize("r,rep", [(1, False), (1, True)])
def test_combinations(r: int, rep: bool) -> None:
    x = torch.tensor([0.5, -1.25, 3.0, 7.5])
    got = _run(lambda v: torch.combinations(v, r, rep), x)[0]
    want = torch.combinations(x, r, rep).numpy()
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_nll_loss_and_linear_cross_entropy() -> None:
    g = torch.Generator().manual_seed(5)
    logp = torch.log_softmax(torch.randn(6, 4, generator=g), -1)
    t = torch.tensor([0, 3, 1, -100, 2, 3])
    w = torch.rand(4, generator=g) + 0.5
    for red in ("mean", "sum", "none"):
        f = lambda a, b, c, red=red: torch.nn.functional.nll_loss(a, b, c, reduction=red)  # noqa: E731
        np.testing.assert_allclose(_run(f, logp, t, w)[0], f(logp, t, w).numpy(), rtol=1e-5, atol=1e-6)
    x, lw = torch.randn(5, 3, generator=g), torch.randn(4, 3, generator=g)
    tt = torch.tensor([0, 3, 1, 2, 2])
    f = torch.nn.functional.linear_cross_entropy
    np.testing.assert_allclose(_run(f, x, lw, tt)[0], f(x, lw, tt).numpy(), rtol=1e-5, atol=1e-6)


def test_zero_and_resize_as() -> None:
    x = torch.tensor([[1.5, -2.0], [3.0, 4.0]])

    def zero(v: Any) -> Any:
        return v.clone().zero_() + 1.0

    np.testing.assert_array_equal(_run(zero, x)[0], np.ones((2, 2), np.float32))

    def resize(v: Any, o: Any) -> Any:
        return v.clone().resize_as_(o) * 2.0

    np.testing.assert_array_equal(_run(resize, x, torch.zeros(4))[0], (x.reshape(4) * 2.0).numpy())

    def grow(v: Any, o: Any) -> Any:
        return v.clone().resize_as_(o) * 2.0

    with pytest.raises(UnsupportedOpsError, match="element count"):
        _run(grow, x, torch.zeros(9))


@pytest.mark.parametrize("name", ["hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
                                  "legendre_polynomial_p"])
def test_orthogonal_polynomials_constant_degree(name: str) -> None:
    """Constant degrees unroll the recurrence (float64 result vs torch's float64); a tensor
    degree is refused by name.  (torch returns an uninitialized value for NaN arguments of
    Laguerre and Legendre; irkit returns NaN, so NaN is left out here.)"""
    fn = getattr(torch.special, name)
    x = torch.cat([torch.linspace(-3.0, 3.0, 61, dtype=torch.float64), torch.tensor([1.0, -1.0, 0.0],
                                                                                     dtype=torch.float64)])
    for n in (-2, 0, 1, 2, 3.7, 12):
        got = _run(lambda v, n=n: fn(v, n), x)[0]
        np.testing.assert_allclose(got, fn(x, n).numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(UnsupportedOpsError, match="degree n as a tensor"):
        _run(fn, x, torch.tensor(3.0, dtype=torch.float64))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialiased_resize(mode: str) -> None:
    """Down- and upsampling by sizes and by scale factors (the ``.vec`` overload), vs torch."""
    g = torch.Generator().manual_seed(1)
    x = torch.rand(2, 3, 10, 20, generator=g) * 4 - 2
    for kw in ({"size": (3, 3)}, {"size": (17, 40)}, {"size": (7, 29)}, {"scale_factor": (0.37, 1.7)}):
        f = lambda v, kw=kw: torch.nn.functional.interpolate(v, mode=mode, antialias=True, **kw)  # noqa: E731
        np.testing.assert_allclose(_run(f, x)[0], f(x).numpy(), rtol=1.3e-6, atol=1e-5)
