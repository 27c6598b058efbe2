"""The ONNX backend node tests on irkit: ``onnx.backend.test.case.node.collect_testcases(None)``.

Each case is a one-op model (or its function-expanded form) with reference
inputs and outputs.  Runners: the interpreter, the requested targets, peer
``onnxruntime`` on the original model (always: the goal is stated over the
cases onnxruntime passes), and with ``peers`` TVM Relax's ONNX importer
(``tvm.relax.frontend.onnx.from_onnx``, built with ``tvm.compile`` for llvm,
run in the Relax VM).  Outputs are compared with the case's own tolerance
(rtol 1e-3, atol 1e-7 unless the case says otherwise), NaNs equal.  A float
output that misses gets one second opinion (:class:`InexactDataJudge`): where the
stored output itself misses the float64 answer (``onnx.reference`` on the
model with its float inputs cast to float64) by more than that tolerance, e.g.
``test_dft_inverse``, whose data is a complex64 FFT, the output is checked
against the float64 answer instead, and the case's reason says so.

In scope is decided per case from every node in the model (subgraphs and
model-local functions included) and from its input and output types; the
reason for a skip names what put it out of scope.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from irkit.conformance.results import (
    INTERP,
    CaseResult,
    InexactDataJudge,
    Tol,
    all_rows,
    classify_error,
    judge,
    run_on_targets,
)
from irkit.conformance.runner import Case

SCOPE_NOTE = ("out of scope: ai.onnx.ml and ai.onnx.preview.training domains, training-mode Dropout, "
              "string tensors, sequences, optionals, maps, If/Loop/Scan, random-number ops")

PEER_ORT = "onnxruntime"
PEER_TVM = "tvm-relax"

CONTROL_FLOW = {"If", "Loop", "Scan"}
STRING_OPS = {"StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch"}
RANDOM_OPS = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial"}
_CASES: list[Case] | None = None
SUB_BYTE = frozenset({"int2", "uint2", "int4", "uint4", "float4_e2m1fn"})


def runner_names(targets: Sequence[str], peers: bool) -> list[str]:
    return [INTERP, *targets, PEER_ORT] + ([PEER_TVM] if peers else [])


def _all_nodes(model: Any) -> list[Any]:
    """Every node: the graph's, its subgraphs' (recursively) and the model-local functions'."""
    out: list[Any] = []

    def walk(nodes: Any) -> None:
        for n in nodes:
            out.append(n)
            for a in n.attribute:
                if a.HasField("g"):
                    walk(a.g.node)
                for g in a.graphs:
                    walk(g.node)

    walk(model.graph.node)
    for f in model.functions:
        walk(f.node)
    return out


def _type_scope(tp: Any) -> str:
    """Why a value type is out of scope ('' when it is a plain tensor of a non-string type)."""
    import onnx

    kind = tp.WhichOneof("value")
    if kind == "sequence_type":
        return "sequences"
    if kind == "optional_type":
        return "optionals"
    if kind == "map_type":
        return "maps (ai.onnx.ml)"
    if kind in ("tensor_type", "sparse_tensor_type"):
        if getattr(tp, kind).elem_type == onnx.TensorProto.STRING:
            return "string tensors"
        if kind == "sparse_tensor_type":
            return "sparse tensors"
    return ""


def scope_reason(model: Any) -> str:
    """'' when the case is in scope, else the one-line reason it is not (names the op or value)."""
    for n in _all_nodes(model):
        dom = n.domain or "ai.onnx"
        if dom == "ai.onnx.ml":
            return f"out of scope: ai.onnx.ml op {n.op_type}"
        if dom == "ai.onnx.preview.training":
            return f"out of scope: training op {n.op_type} (ai.onnx.preview.training)"
        if n.op_type in CONTROL_FLOW:
            return f"out of scope: control flow op {n.op_type}"
        if "Sequence" in n.op_type:
            return f"out of scope: sequence op {n.op_type}"
        if n.op_type.startswith("Optional"):
            return f"out of scope: optional op {n.op_type}"
        if n.op_type in STRING_OPS:
            return f"out of scope: string op {n.op_type}"
        if n.op_type in RANDOM_OPS:
            return f"out of scope: random-number op {n.op_type}"
        if n.op_type == "Dropout" and len(n.input) >= 3 and n.input[2]:
            return "out of scope: Dropout in training mode (training op; random mask)"
    for v in list(model.graph.input) + list(model.graph.output):
        why = _type_scope(v.type)
        if why:
            return f"out of scope: {why} ({'input' if v in model.graph.input else 'output'} '{v.name}')"
    return ""


def _group(name: str, model: Any, schemas: dict[str, str]) -> str:
    ops = {n.op_type for n in model.graph.node}
    if len(ops) == 1:
        return next(iter(ops))
    toks = name.removeprefix("test_").split("_")
    for k in range(len(toks), 0, -1):
        key = "".join(toks[:k]).lower()
        if key in schemas:
            return schemas[key]
    return min(ops) if ops else "?"


def collect(filter: str | None = None) -> list[Case]:
    """Every node test case, with its model bytes and reference data, and its scope decided."""
    global _CASES
    if _CASES is None:
        import onnx
        from onnx.backend.test.case.node import collect_testcases

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tcs = collect_testcases(None)
        schemas = {s.name.lower(): s.name for s in onnx.defs.get_all_schemas_with_history()}
        cases = []
        for tc in tcs:
            model = tc.model
            if model is None:  # a real-model case downloaded from a URL, not stored in the package
                continue
            ins, outs = tc.data_sets[0] if tc.data_sets else ([], [])
            ins, outs = [_array(x) for x in ins], [_array(x) for x in outs]
            cases.append(Case(tc.name, _group(tc.name, model, schemas),
                              (model.SerializeToString(), list(ins), list(outs), float(tc.rtol), float(tc.atol)),
                              scope_reason(model)))
        cases.sort(key=lambda c: c.id)
        _CASES = cases
    return _CASES


def _array(x: Any) -> Any:
    """Reference data as NumPy (exotic dtypes come as TensorProto); sequences and optionals as they are."""
    import onnx

    if isinstance(x, onnx.TensorProto):
        from onnx.numpy_helper import to_array

        return to_array(x)
    return x


def _input_names(model: Any) -> list[str]:
    init = {t.name for t in model.graph.initializer}
    return [v.name for v in model.graph.input if v.name not in init]


def _plain(dt: np.dtype) -> bool:
    """Whether onnxruntime's Python API takes and returns this dtype as NumPy (not bfloat16, float8, int4...)."""
    return dt.kind in "biuf" and type(dt).__module__.startswith("numpy")


def run_ort(model_bytes: bytes, names: Sequence[str], inputs: Sequence[np.ndarray],
            expected: Sequence[Any] = ()) -> list[np.ndarray]:
    """Run the original model in onnxruntime.  Inputs and outputs of types NumPy itself lacks (bfloat16,
    float8) travel as OrtValues holding their bytes, as onnxruntime's Python API cannot convert them."""
    import ctypes

    import onnx
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"])
    if all(_plain(np.asarray(x).dtype) for x in inputs) and all(
            not isinstance(e, np.ndarray) or _plain(e.dtype) for e in expected):
        return [np.asarray(o) for o in sess.run(None, dict(zip(names, inputs)))]
    sub_byte = [dt.name for dt in [np.asarray(x).dtype for x in inputs] + [e.dtype for e in expected
                                                                          if isinstance(e, np.ndarray)]
                if dt.name in SUB_BYTE]
    if sub_byte:
        # Its Python API wants them packed two or four to a byte; ml_dtypes holds one per byte.
        raise NotImplementedError(f"the harness does not pass {sub_byte[0]} tensors to onnxruntime's Python API")
    types = {v.name: v.type.tensor_type.elem_type for v in onnx.load_from_string(model_bytes).graph.input}
    feeds = {}
    for n, x in zip(names, inputs):
        x = np.ascontiguousarray(x)
        if _plain(x.dtype):
            feeds[n] = ort.OrtValue.ortvalue_from_numpy(x)
        else:
            raw = x.view({1: np.uint8, 2: np.uint16}[x.dtype.itemsize])
            feeds[n] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, types[n])
    out = []
    for k, v in enumerate(sess.run_with_ort_values(None, feeds)):
        e = expected[k] if k < len(expected) else None
        if isinstance(e, np.ndarray) and not _plain(e.dtype):
            data = ctypes.string_at(v.data_ptr(), v.tensor_size_in_bytes())
            out.append(np.frombuffer(data, dtype=e.dtype).reshape(v.shape()).copy())
        else:
            out.append(np.asarray(v.numpy()))
    return out


def tvm_outputs(out: Any) -> list[np.ndarray]:
    """A Relax VM result (a tensor, or nested tuples of them) as a flat list of arrays."""
    if hasattr(out, "numpy"):
        return [out.numpy()]
    if type(out).__name__ in ("Shape", "ShapeTuple"):  # a Relax shape value is one int64 tensor, not N scalars
        return [np.asarray(list(out), np.int64)]
    if isinstance(out, (int, float, bool, np.generic)):
        return [np.asarray(out)]
    flat: list[np.ndarray] = []
    for o in out:
        flat.extend(tvm_outputs(o))
    return flat


def run_tvm_relax_onnx(model: Any, names: Sequence[str], inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """TVM Relax's own ONNX path, as TVM's frontend tests build it."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=None)
    mod = from_onnx(model, {n: list(x.shape) for n, x in zip(names, inputs)},
                    {n: str(x.dtype) for n, x in zip(names, inputs)}, opset=opset)
    mod = relax.transform.DecomposeOpsForInference()(mod)
    mod = relax.transform.LegalizeOps()(mod)
    with tvm.transform.PassContext(opt_level=3):
        ex = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    args = [tvm.runtime.tensor(np.ascontiguousarray(x)) for x in inputs]
    return tvm_outputs(vm["main"](*args))


def _peer_error(peer: str, e: BaseException) -> str:
    msg = " ".join(str(e).split())
    return f"{peer}: {type(e).__name__}: {msg}"[:500]


def _shape_operands(names: Sequence[str], inputs: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """The inputs a node test feeds where a real model has constants: axes, pads, shapes, ``k``,
    scales, Range's bounds (rank <= 1, and integer, a scalar, or not the first input). irkit specialises
    them, as a compiler does for shape operands; a case passed this way says so in its reason."""
    return {n: np.asarray(x) for i, (n, x) in enumerate(zip(names, inputs))
            if np.asarray(x).ndim <= 1 and (i > 0 or np.asarray(x).ndim == 0 or np.asarray(x).dtype.kind in "iu")}


def run_case(case: Case, targets: Sequence[str], peers: bool) -> list[CaseResult]:
    import onnx

    from irkit.frontends.onnx import import_onnx

    data, ins, outs, rtol, atol = case.payload
    tol = Tol(rtol, atol)
    model = onnx.load_from_string(data)
    names = _input_names(model)
    inputs = [np.asarray(x) for x in ins]
    second = InexactDataJudge(lambda: float64_outputs(model, names, inputs), tol)
    rows: list[CaseResult] = []
    mine = [(INTERP, INTERP)] + [(t, t) for t in targets]
    frozen: dict[str, np.ndarray] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                m = import_onnx(model)
            except Exception as e:  # noqa: BLE001
                frozen = _shape_operands(names, inputs) if "computed at run time" in str(e) else {}
                if not frozen:
                    raise
                m = import_onnx(model, constants=frozen)
    except Exception as e:  # noqa: BLE001 - one case never stops the run
        status, reason = classify_error(e)
        rows.extend(all_rows(case.id, case.group, [r for r, _ in mine], status, reason))
    else:
        given = [x for n, x in zip(names, inputs) if n not in frozen]
        with np.errstate(all="ignore"):
            got_rows = run_on_targets(case.id, case.group, m, given, outs, tol, mine, second)
        if frozen:
            note = f"specialised: {', '.join(frozen)} bound as constants (the node test feeds them as inputs)"
            for r in got_rows:
                r.reason = f"{note}; {r.reason}" if r.reason else note
        rows.extend(got_rows)
    try:
        got = run_ort(data, names, inputs, outs)
        rows.append(judge(case.id, case.group, PEER_ORT, got, outs, tol, 0.0, second))
    except Exception as e:  # noqa: BLE001 - a peer's failure is its refusal
        rows.append(CaseResult(case.id, case.group, PEER_ORT, "refused", _peer_error("onnxruntime", e)))
    if peers:
        try:
            got = run_tvm_relax_onnx(model, names, inputs)
            rows.append(judge(case.id, case.group, PEER_TVM, got, outs, tol, 0.0, second))
        except Exception as e:  # noqa: BLE001
            rows.append(CaseResult(case.id, case.group, PEER_TVM, "refused", _peer_error("tvm-relax", e)))
    note = second.note()
    if note:
        for r in rows:
            if r.status in ("pass", "wrong"):
                r.reason = f"{r.reason}; {note}" if r.reason else note
    return rows


def float64_outputs(model: Any, names: Sequence[str], inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The case's outputs computed by ONNX's own reference evaluator with every float input cast to float64
    (its NumPy kernels then compute in float64): the float64 answer the stored data is checked against."""
    from onnx.reference import ReferenceEvaluator

    feeds = {n: (x.astype(np.float64) if x.dtype.kind == "f" else x) for n, x in zip(names, inputs)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]


def prepare_worker() -> None:
    import onnx  # noqa: F401
    import onnxruntime  # noqa: F401

    import irkit.frontends.onnx  # noqa: F401


__all__ = ["SCOPE_NOTE", "collect", "float64_outputs", "run_case", "runner_names", "scope_reason"]
