"""PyTorch's OpInfo database on irkit: ``torch.testing._internal.common_methods_invocations.op_db``.

For every op that supports float32 on the CPU, up to two samples
(``op.sample_inputs("cpu", torch.float32)``, drawn under a seed fixed per op)
each become one case: the sample is wrapped in an ``nn.Module`` whose inputs
are the sample's tensors (everything else is a constant), ``torch.export``-ed
(an export failure means the sample is not exportable: skipped, outside the
denominator), imported with irkit, run and compared with eager torch.

Tolerances are ``torch.testing``'s defaults for the output dtype (float32:
rtol 1.3e-6, atol 1e-5), NaNs equal, dtypes equal.  An output that misses them
gets a second opinion (rounding is not a wrong answer): it passes when it is
within 64 float32 ulps of the output's largest magnitude everywhere
(:func:`~irkit.conformance.results.normwise_close`), or as close to eager torch
in float64 as eager torch in float32 is (within the tolerance plus four times
torch's largest float32 error).

Out of scope (skip): samples whose eager result is not reproducible (random
ops, uninitialized memory such as ``empty``: two eager runs under different
seeds disagree), complex or sparse inputs or outputs, samples without tensor outputs.
Peer, with ``peers``: TVM Relax's ``from_exported_program`` on the same
exported program.
"""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from irkit.conformance.results import (
    INTERP,
    CaseResult,
    Tol,
    all_rows,
    classify_error,
    judge,
    rounding_judge,
    run_on_targets,
)
from irkit.conformance.runner import Case
from irkit.ir.aliases import get_aliases

SCOPE_NOTE = ("torch: exportable float32 CPU samples; skipped: not exportable by torch.export, random or "
              "otherwise nondeterministic ops, complex values, sparse tensors, no tensor outputs")
PEER_TVM = "tvm-relax"
SAMPLES_PER_OP = 2
_CASES: list[Case] | None = None

# Linear-algebra decompositions and what is computed through one (Cholesky, QR, SVD, eigen-, LU or LDL
# factorization, triangular solves): out of scope for irkit, like JAX's cholesky/qr/svd/eigh/lu/triangular_solve.
LINALG_DECOMPOSITIONS = frozenset([
    "cholesky", "cholesky_inverse", "cholesky_solve", "geqrf", "ormqr", "lu", "lu_solve", "lu_unpack", "qr", "svd",
    "svd_lowrank", "pca_lowrank", "triangular_solve", "logdet", "pinverse", "linalg.cholesky", "linalg.cholesky_ex",
    "linalg.cond", "linalg.det", "linalg.eig", "linalg.eigh", "linalg.eigvals", "linalg.eigvalsh",
    "linalg.householder_product", "linalg.inv", "linalg.inv_ex", "linalg.ldl_factor", "linalg.ldl_factor_ex",
    "linalg.ldl_solve", "linalg.lstsq", "linalg.lu", "linalg.lu_factor", "linalg.lu_factor_ex", "linalg.lu_solve",
    "linalg.matrix_rank", "linalg.pinv", "linalg.qr", "linalg.slogdet", "linalg.solve", "linalg.solve_ex",
    "linalg.solve_triangular", "linalg.svd", "linalg.svdvals", "linalg.tensorinv", "linalg.tensorsolve",
])
RANDOM_OPS = frozenset([
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal", "rand_like",
    "randint", "randint_like", "randn", "randn_like", "uniform", "nn.functional.dropout", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu",
])
UNINITIALIZED = frozenset(["empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"])


def op_scope(name: str) -> str:
    """'' when OpInfo op ``name`` is in scope, else why not."""
    if name in LINALG_DECOMPOSITIONS:
        return f"out of scope: linear-algebra decomposition ({name})"
    if name in RANDOM_OPS:
        return f"out of scope: random-number op ({name})"
    if name in UNINITIALIZED:
        return f"out of scope: uninitialized memory ({name})"
    return ""


def runner_names(targets: Sequence[str], peers: bool) -> list[str]:
    return [INTERP, *targets] + ([PEER_TVM] if peers else [])


def _op_db() -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def _full_name(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _seed(name: str) -> int:
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def _samples(op: Any, n: int) -> list[Any]:
    """The first ``n`` float32 CPU samples of ``op``, the same in every process (seeded by the op's name)."""
    import torch

    torch.manual_seed(_seed(_full_name(op)))
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gen = op.sample_inputs("cpu", torch.float32)
        try:
            for s in gen:
                out.append(s)
                if len(out) >= n:
                    break
        finally:
            close = getattr(gen, "close", None)
            if close is not None:  # or it is finalised later, inside some unrelated trace
                close()
    return out


def collect(filter: str | None = None) -> list[Case]:
    """One case per (op, sample) for the first two float32 samples of every op that supports float32 on CPU.

    ``filter`` is applied to op names first, so a filtered run only draws the samples it needs."""
    global _CASES
    import torch

    if _CASES is not None and filter is None:
        return _CASES
    from irkit.conformance.runner import matches

    cases: list[Case] = []
    for i, op in enumerate(_op_db()):
        name = _full_name(op)
        if filter and not (matches(filter, name, op.name) or matches(filter, f"{name}#0", op.name)
                           or matches(filter, f"{name}#1", op.name)):
            continue
        try:
            if torch.float32 not in op.supported_dtypes("cpu"):
                continue
        except Exception:  # noqa: BLE001 - an OpInfo without dtype information is not a float32 op
            continue
        why = op_scope(op.name)
        if why:
            cases.append(Case(f"{name}#0", op.name, (i, 0), why))
            continue
        try:
            n = len(_samples(op, SAMPLES_PER_OP))
        except Exception as e:  # noqa: BLE001 - the sample generator itself failed
            cases.append(Case(f"{name}#0", op.name, (i, 0), f"OpInfo could not draw samples ({e!s:.120})"))
            continue
        for k in range(n):
            cases.append(Case(f"{name}#{k}", op.name, (i, k)))
    if filter is None:
        _CASES = cases
    return cases


class _SampleModule:
    """Builds the ``nn.Module`` for one sample: its tensors are the inputs, everything else constant."""

    def __init__(self, op: Any, sample: Any):
        import torch
        from torch.utils import _pytree as pytree

        self.op = op
        leaves, self.spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
        self.slots = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        self.leaves = leaves
        self.tensors = [leaves[i].detach().clone() for i in self.slots]

    def module(self) -> Any:
        import torch
        from torch.utils import _pytree as pytree

        outer = self

        class Sample(torch.nn.Module):
            def forward(self, *ts: Any) -> Any:
                leaves = list(outer.leaves)
                for i, t in zip(outer.slots, ts):
                    leaves[i] = t
                inp, args, kwargs = pytree.tree_unflatten(leaves, outer.spec)
                out = outer.op.op(inp, *args, **kwargs)
                flat = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
                return tuple(flat)

        return Sample().eval()

    def eager(self, dtype: Any = None, after: list[Any] | None = None) -> list[Any]:
        """The sample's tensor outputs in eager torch; ``after`` receives the inputs as the call
        left them (an op that updates an input in place: batch norm's running statistics)."""
        import torch

        ts = [t.clone() for t in self.tensors]
        if dtype is not None:
            ts = [t.to(dtype) if t.is_floating_point() else t for t in ts]
        with torch.no_grad():
            out = list(self.module()(*ts))
        if after is not None:
            after.extend(ts)
        return out


def _np(t: Any) -> np.ndarray:
    from irkit.frontends.torch_export import tensor_to_numpy

    return tensor_to_numpy(t.detach().contiguous())


# torch.testing.assert_close defaults, by dtype name
_TOL = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}


def _tol(expected: Sequence[np.ndarray]) -> Tol:
    rt, at = 0.0, 0.0
    for e in expected:
        r, a = _TOL.get(np.asarray(e).dtype.name, (0.0, 0.0))
        rt, at = max(rt, r), max(at, a)
    return Tol(rt or 1.3e-6, at or 1e-5)


def _scope(sm: _SampleModule, expected: list[Any]) -> str:
    import torch

    if not expected:
        return "out of scope: the sample has no tensor outputs"
    for t in list(sm.tensors) + expected:
        if t.layout != torch.strided:
            return f"out of scope: sparse or other non-strided tensors ({t.layout})"
        if t.is_complex():
            return "out of scope: complex values"
    torch.manual_seed(12345)
    again = sm.eager()
    for a, b in zip(expected, again):
        if a.shape != b.shape or not torch.equal(torch.nan_to_num(a), torch.nan_to_num(b)):
            return "out of scope: nondeterministic op (random numbers or uninitialized memory: two eager runs differ)"
    return ""


def run_case(case: Case, targets: Sequence[str], peers: bool) -> list[CaseResult]:
    import torch

    idx, k = case.payload
    op = _op_db()[idx]
    runners = runner_names(targets, peers)
    samples = _samples(op, k + 1)
    if len(samples) <= k:
        return all_rows(case.id, case.group, runners, "skip", "OpInfo drew fewer samples in this process")
    sm = _SampleModule(op, samples[k])
    torch.manual_seed(0)
    after: list[Any] = []
    try:
        expected_t = sm.eager(after=after)
    except Exception as e:  # noqa: BLE001 - eager torch rejects the sample: not a case
        return all_rows(case.id, case.group, runners, "skip", f"eager torch fails on this sample ({e!s:.160})")
    why = _scope(sm, expected_t)
    if why:
        return all_rows(case.id, case.group, runners, "skip", why)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.export(sm.module(), tuple(t.clone() for t in sm.tensors), strict=False)
    except Exception as e:  # noqa: BLE001 - torch.export's own limits: outside the denominator
        msg = " ".join(str(e).split())[:200]
        return all_rows(case.id, case.group, runners, "skip", f"not exportable: {type(e).__name__}: {msg}")
    rand = random_node(ep)
    if rand:
        return all_rows(case.id, case.group, runners, "skip",
                        f"out of scope: random numbers ({rand} in the exported graph)")
    cplx = complex_node(ep)
    if cplx:
        return all_rows(case.id, case.group, runners, "skip",
                        f"out of scope: complex values ({cplx} computes a complex tensor)")
    inputs = [_np(t) for t in sm.tensors]
    expected = [_np(t) for t in expected_t]
    n_user = len(expected)

    rows: list[CaseResult] = []
    mine = [(INTERP, INTERP)] + [(t, t) for t in targets]
    try:
        from irkit.frontends.torch_export import import_exported_program

        m = import_exported_program(ep, source=f"{case.id}")
    except Exception as e:  # noqa: BLE001 - one case never stops the run
        cplx = _complex_only(e)
        if cplx:  # torch's decomposition computes in complex numbers (an inverse FFT of a real input)
            return all_rows(case.id, case.group, runners, "skip", f"out of scope: complex values ({cplx})")
        status, reason = classify_error(e)
        rows.extend(all_rows(case.id, case.group, [r for r, _ in mine], status, reason))
    else:
        # An input the sample updates in place is an aliased output of the import (the IR is
        # functional): it is checked against the input's value after the eager call.
        mutated = [a for _, a in sorted(get_aliases(m.entry).items())]
        expected += [_np(after[a]) for a in mutated]
        tol = _tol(expected)

        def f64() -> list[np.ndarray]:
            after64: list[Any] = []
            out = sm.eager(torch.float64, after=after64)
            return [_np(t) for t in out] + [_np(after64[a]) for a in mutated]

        with np.errstate(all="ignore"):
            rows.extend(run_on_targets(case.id, case.group, m, inputs, expected, tol, mine,
                                       rounding_judge(f64, tol)))
    if peers:
        expected = expected[:n_user]
        tol = _tol(expected)
        second_opinion = rounding_judge(lambda: [_np(t) for t in sm.eager(torch.float64)], tol)
        try:
            got = run_tvm_relax_torch(ep, inputs)[:n_user]
            rows.append(judge(case.id, case.group, PEER_TVM, got, expected, tol, 0.0, second_opinion))
        except Exception as e:  # noqa: BLE001 - a peer's failure is its refusal
            msg = " ".join(str(e).split())
            rows.append(CaseResult(case.id, case.group, PEER_TVM, "refused",
                                   f"tvm-relax: {type(e).__name__}: {msg}"[:500]))
    return rows


def random_node(ep: Any) -> str:
    """The first ATen op of ``ep`` that draws random numbers (tagged ``nondeterministic_seeded``
    and not switched off by ``train=False`` or ``p=0``), as ``aten.op``; '' when there is none.

    OpInfo reseeds some ops before each call (``wrapper_set_seed``: multi-head attention with
    ``dropout_p``), so two eager runs agree and only the graph shows the randomness."""
    import torch

    for node in ep.graph.nodes:
        t = node.target
        if node.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
            continue
        if torch.Tag.nondeterministic_seeded not in t.tags:
            continue
        names = [a.name for a in t._schema.arguments]
        given = dict(zip(names, node.args)) | dict(node.kwargs)
        if given.get("train", given.get("training", True)) is False or given.get("p") in (0, 0.0):
            continue
        return str(t.overloadpacket).replace("aten::", "aten.")
    return ""


def _complex_only(e: BaseException) -> str:
    """The refused op when every op ``e`` refuses is a conversion to a complex dtype, else ''."""
    from irkit.errors import UnsupportedOpsError

    if not isinstance(e, UnsupportedOpsError) or not e.ops:
        return ""
    if all("dtype torch.complex" in k for k in e.ops):
        return next(iter(e.ops)).split(" (")[0] + " to a complex dtype"
    return ""


def complex_node(ep: Any) -> str:
    """The first op of ``ep`` whose result is a complex tensor, as ``aten.op``; '' when there is none.

    A real-valued sample can still compute in complex numbers by design (``fft.irfft`` of a real
    input converts it to complex first); the IR has no complex dtype."""
    import torch

    for node in ep.graph.nodes:
        if node.op != "call_function":
            continue
        val = node.meta.get("val")
        vals = val if isinstance(val, (tuple, list)) else [val]
        if any(isinstance(v, torch.Tensor) and v.is_complex() for v in vals):
            t = node.target
            return str(getattr(t, "overloadpacket", t)).replace("aten::", "aten.").replace("prims::", "prims.")
    return ""


def run_tvm_relax_torch(ep: Any, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """TVM Relax's ``from_exported_program`` (its own decompositions), built for llvm, run in the VM."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    from irkit.conformance.onnx_suite import tvm_outputs

    mod = from_exported_program(ep)
    mod = relax.transform.DecomposeOpsForInference()(mod)
    with tvm.transform.PassContext(opt_level=3):
        ex = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    return tvm_outputs(vm["main"](*[tvm.runtime.tensor(np.ascontiguousarray(x)) for x in inputs]))


def prepare_worker() -> None:
    _op_db()
    import irkit.frontends.torch_export  # noqa: F401


__all__ = ["SCOPE_NOTE", "collect", "run_case", "runner_names"]
