"""The tvm-llvm prefix kernel of ``ik.cache_attention`` (targets/tvm_kernels/cache_attention.py): against
the float64 NumPy reference, and proof that it reads only the valid prefix of the cache."""

from __future__ import annotations

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

from irkit.targets.tvm_kernels.cache_attention import PREFIX_TILE, prefix_attention  # noqa: E402
from irkit.targets.tvm_kernels.common import cpu_target, to_tvm  # noqa: E402

from irkit.ir.ops_cache import cache_attention_reference  # noqa: E402


def _run(q, kc, vc, pos, scale):
    b, hq, s, d = q.shape
    _, hkv, t, dv = vc.shape
    f = prefix_attention(b, hq, hkv, s, t, d, dv, tuple(pos.shape), str(pos.dtype), scale, name="pa")
    lib = tvm.compile(tvm.IRModule({"pa": f}), target=cpu_target())
    out = tvm.runtime.empty((b, hq, s, dv), "float32", tvm.cpu())
    lib["pa"](to_tvm(q), to_tvm(kc), to_tvm(vc), to_tvm(pos), out)
    return out.numpy()


def _case(rng, b, hq, hkv, s, t, d, dv=None):
    dv = dv or d
    f = np.float32
    return (rng.standard_normal((b, hq, s, d)).astype(f), rng.standard_normal((b, hkv, t, d)).astype(f),
            rng.standard_normal((b, hkv, t, dv)).astype(f))


@pytest.mark.parametrize("b,hq,hkv,s,t,d,positions", [
    (1, 4, 2, 1, 70, 16, [0, 5, PREFIX_TILE - 1, PREFIX_TILE, 69]),  # GQA, tile edges, the last row
    (2, 3, 3, 2, 40, 12, [0, 17, 38, 500]),  # two query rows, head dim not a vector multiple, clamped
    (1, 2, 1, 1, 9, 4, [8]),
])
def test_matches_reference_at_every_position(b, hq, hkv, s, t, d, positions):
    rng = np.random.default_rng(7)
    q, kc, vc = _case(rng, b, hq, hkv, s, t, d)
    for p in positions:
        pos = np.array(p, np.int64)
        want = cache_attention_reference(q, q[:, :hkv], q[:, :hkv], kc, vc, pos, None, 0.3)[0]
        # the reference writes k_new/v_new; the kernel sees caches already written: write them the same way
        pc = min(max(p, 0), t - s)
        kc2, vc2 = kc.copy(), vc.copy()
        kc2[:, :, pc:pc + s] = q[:, :hkv]
        vc2[:, :, pc:pc + s] = q[:, :hkv]
        got = _run(q, kc2, vc2, pos, 0.3)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, err_msg=f"pos {p}")


def test_per_row_positions_int32():
    rng = np.random.default_rng(3)
    q, kc, vc = _case(rng, 3, 2, 2, 1, 33, 8)
    pos = np.array([0, 32, 11], np.int32)
    want = cache_attention_reference(q, kc[:, :, :1], vc[:, :, :1], kc, vc, pos, None, 0.5)[0]
    kc2, vc2 = kc.copy(), vc.copy()
    for r, p in enumerate(pos):
        kc2[r, :, p] = kc[r, :, 0]
        vc2[r, :, p] = vc[r, :, 0]
    np.testing.assert_allclose(_run(q, kc2, vc2, pos, 0.5), want, rtol=2e-5, atol=2e-5)


def test_reads_only_the_valid_prefix():
    """Rows past position p are NaN: a kernel that touched them (even masked, 0 * NaN) would return NaN."""
    rng = np.random.default_rng(11)
    q, kc, vc = _case(rng, 1, 2, 2, 1, 256, 8)
    p = 40
    want = cache_attention_reference(q, kc[:, :, p:p + 1], vc[:, :, p:p + 1], kc, vc, np.array(p), None, 0.4)[0]
    kc[:, :, p + 1:] = np.nan
    vc[:, :, p + 1:] = np.nan
    got = _run(q, kc, vc, np.array(p, np.int64), 0.4)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
