"""ONNX function ops: a node irkit has no converter for becomes its ONNX-defined body.

Design note: many ``ai.onnx`` ops are *functions* — the standard gives them a
body of simpler ops (``NegativeLogLikelihoodLoss``, ``CenterCropPad``,
``Shrink``, ``MeanVarianceNormalization``, ``LayerNormalization`` with its
extra outputs...).  ``onnx`` ships those bodies (``OpSchema.get_function_with_opset_version``
and, for bodies that depend on the node's attributes and input types,
``get_context_dependent_function_with_opset_version``); we let ``onnx.inliner``
bind the attributes and rename the body's values, and the importer converts the
resulting nodes like any others.  So the library, not us, defines what these
ops mean.

The body is inlined into a one-node model whose default opset is the body's
own version (the inliner refuses a version mismatch); the body's ops are then
converted by the same converters, which read each op's form (attribute or
input) rather than trusting the model's opset number.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from irkit.ir.types import DType, SymDim

_COUNTER = itertools.count()

# Domains whose ops are out of scope, with the reason given in the error.
OUT_OF_SCOPE_DOMAINS = {
    "ai.onnx.ml": "ai.onnx.ml (classical ML) ops are out of scope",
    "ai.onnx.preview.training": "training ops are out of scope",
    "ai.onnx.training": "training ops are out of scope",
}

# Default-domain ops irkit refuses by design, with the reason.
OUT_OF_SCOPE_OPS: dict[str, str] = {
    **{op: "control flow is out of scope (If folds when its condition is known at import, Scan unrolls "
           "over a static length)" for op in ("If", "Loop", "Scan")},
    **{op: "sequences are out of scope" for op in (
        "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert", "SequenceLength",
        "SequenceMap", "SplitToSequence", "ConcatFromSequence")},
    **{op: "optionals are out of scope" for op in ("Optional", "OptionalGetElement", "OptionalHasElement")},
    **{op: "string ops are out of scope" for op in (
        "StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch")},
    **{op: "random-number ops are out of scope" for op in (
        "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli", "Multinomial")},
    **{op: "training ops are out of scope" for op in ("Gradient", "Momentum", "Adagrad", "Adam")},
    "ImageDecoder": "image decoding is out of scope",
}


def out_of_scope(domain: str, op_type: str) -> str | None:
    """Why (domain, op) is refused by design, or None."""
    if domain in OUT_OF_SCOPE_DOMAINS:
        return OUT_OF_SCOPE_DOMAINS[domain]
    if domain == "":
        return OUT_OF_SCOPE_OPS.get(op_type)
    return None


def _type_proto(dtype: DType, shape: Sequence[Any]) -> Any:
    from onnx import helper

    from irkit.frontends.onnx_load import IR_TO_ONNX

    dims = [d if isinstance(d, int) else str(d) if isinstance(d, SymDim) else None for d in shape]
    return helper.make_tensor_type_proto(IR_TO_ONNX.get(dtype, 1), dims)


def function_body(node: Any, opset: int, input_types: Sequence[tuple[DType, Sequence[Any]] | None]) -> list[Any] | None:
    """The nodes of ``node``'s ONNX function body at ``opset`` (attributes bound, values renamed), or None.

    ``input_types`` gives (dtype, shape) per input (None for a missing optional
    one); context-dependent bodies need them.
    """
    import onnx
    import onnx.inliner
    from onnx import helper

    if node.domain not in ("", "ai.onnx"):
        return None
    try:
        # Any: onnx's stubs for OpSchema lack the function accessors used below (has_function, ...)
        schema: Any = onnx.defs.get_schema(node.op_type, opset, "")
    except onnx.defs.SchemaError:
        return None
    raw: bytes | None = None
    try:
        if schema.has_function:
            vs = [v for v in schema.function_opset_versions if v <= opset]
            if vs:
                raw = schema.get_function_with_opset_version(max(vs))
        if raw is None and schema.has_context_dependent_function:
            vs = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
            if vs:
                types = [(_type_proto(*t) if t is not None else onnx.TypeProto()).SerializeToString()
                         for t in input_types]
                raw = schema.get_context_dependent_function_with_opset_version(max(vs), node.SerializeToString(),
                                                                               types)
    except Exception:  # noqa: BLE001 - onnx builds a body or raises many kinds of errors; no body is the answer
        return None
    if not raw:
        return None
    fp = onnx.FunctionProto()
    fp.ParseFromString(raw)
    if not fp.node:
        return None
    name = f"{node.op_type}__irkit{next(_COUNTER)}"
    fp.name, fp.domain = name, "irkit.fn"
    fn_opset = {o.domain: o.version for o in fp.opset_import}
    call = helper.make_node(name, list(node.input), list(node.output), domain="irkit.fn")
    call.attribute.extend(node.attribute)
    # The inliner binds only attributes the node sets; the schema's defaults fill the rest.
    given = {a.name for a in node.attribute}
    for aname, spec in schema.attributes.items():
        if aname not in given and spec.default_value.type != 0:
            call.attribute.append(spec.default_value)
    ins = []
    for x, t in zip(node.input, input_types):
        if x and t is not None:
            ins.append(helper.make_value_info(x, _type_proto(*t)))
    outs = [helper.make_value_info(o, onnx.TypeProto()) for o in node.output if o]
    g = helper.make_graph([call], "body", ins, outs)
    imports = [helper.make_opsetid(d, v) for d, v in fn_opset.items()]
    if "" not in fn_opset:
        imports.append(helper.make_opsetid("", opset))
    imports.append(helper.make_opsetid("irkit.fn", 1))
    m = helper.make_model(g, opset_imports=imports, functions=[fp])
    try:
        out = onnx.inliner.inline_local_functions(m)
    except Exception:  # noqa: BLE001
        return None
    nodes = list(out.graph.node)
    if any(n.domain == "irkit.fn" for n in nodes):
        return None
    # The inliner keeps body-internal names when the one-node model has no clash; in the real
    # graph they could clash (a body inside a body), so every internal value gets the call's tag.
    keep = {x for x in node.input if x} | {o for o in node.output if o}
    rename = {o: f"{o}__{name}" for n in nodes for o in n.output if o and o not in keep}
    if rename:
        rename_nodes(nodes, rename)
    return nodes


def rename_nodes(nodes: Sequence[Any], rename: dict[str, str]) -> None:
    for n in nodes:
        for i, x in enumerate(n.input):
            if x in rename:
                n.input[i] = rename[x]
        for i, x in enumerate(n.output):
            if x in rename:
                n.output[i] = rename[x]
        for a in n.attribute:
            if a.HasField("g"):
                rename_nodes(a.g.node, rename)
                for o in a.g.output:
                    if o.name in rename:
                        o.name = rename[o.name]
            for g in a.graphs:
                rename_nodes(g.node, rename)


__all__ = ["OUT_OF_SCOPE_DOMAINS", "OUT_OF_SCOPE_OPS", "function_body", "out_of_scope", "rename_nodes"]
