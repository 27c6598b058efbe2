"""The verifier: structure, SSA dominance, attributes and types.

It checks, for every function and nested region: ops are in topological order
(each operand is a graph argument or the result of an earlier op in the same
region — fused regions are isolated from above), use lists agree with
operands, every op is registered with valid attributes, its result types equal
what type inference gives, and each region ends in the right terminator.
Errors name the op and its location.
"""

from __future__ import annotations

from irkit.ir.aliases import alias_diagnostics
from irkit.ir.core import Diagnostic, Function, Graph, Module, Op
from irkit.ir.ops import OPS, OpError, infer_types


class VerifyError(ValueError):
    """The IR is malformed; ``diagnostics`` lists every problem found."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        more = f" (and {len(diagnostics) - 1} more)" if len(diagnostics) > 1 else ""
        super().__init__(f"verification failed: {diagnostics[0]}{more}")


def verify(module: Module) -> None:
    """Raise :class:`VerifyError` listing every problem in ``module``."""
    diags: list[Diagnostic] = []
    names: set[str] = set()
    for f in module.functions:
        if f.name in names:
            diags.append(Diagnostic(f"duplicate function name @{f.name}"))
        names.add(f.name)
        found = verify_function(f)
        if found:
            _locate(f, found)
        diags.extend(found)
    if diags:
        raise VerifyError(diags)


def _locate(f: Function, diags: list[Diagnostic]) -> None:
    """Give a diagnostic whose op has no source location the op's place instead:
    ``op ik.add#3 of @main`` (the numbering ``irkit compare`` and ``bisect`` use)."""
    pos: dict[int, int] | None = None
    for d in diags:
        if d.op is None or not d.loc.is_unknown or not d.op.loc.is_unknown:
            continue
        if pos is None:
            pos = {id(op): i for i, op in enumerate(f.walk())}
        i = pos.get(id(d.op))
        if i is not None:
            d.message += f" (op {d.op.name}#{i} of @{f.name}; it has no source location)"


def verify_function(f: Function) -> list[Diagnostic]:
    return _verify_graph(f.body, "func.return") + alias_diagnostics(f)


def _verify_graph(g: Graph, terminator: str) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    defined: set[int] = {id(a) for a in g.args}
    n = len(g)
    ops_get = OPS.get
    # Use lists are scanned directly when short; a value with many uses gets a set once.
    use_sets: dict[int, set[tuple[int, int]]] = {}
    for i, op in enumerate(g):
        if op.parent is not g:
            diags.append(Diagnostic("op's parent link is broken", op))
        for j, v in enumerate(op._operands):
            vid = id(v)
            if vid not in defined:
                where = f"'{v.producer.name}'" if v.producer is not None else "an argument of another region"
                diags.append(Diagnostic(
                    f"operand {j} is used before it is defined (produced by {where}; "
                    "ops must be in topological order and regions are isolated)", op))
            uses = v.uses
            if len(uses) <= 8:
                recorded = (op, j) in uses
            else:
                us = use_sets.get(vid)
                if us is None:
                    us = use_sets[vid] = {(id(o), k) for o, k in uses}
                recorded = (id(op), j) in us
            if not recorded:
                diags.append(Diagnostic(f"operand {j}'s use list does not record this use", op))
        d = ops_get(op.name)
        if d is None:
            diags.append(Diagnostic(f"unknown op '{op.name}' (see `irkit list-ops`)", op))
        elif "terminator" in d.traits:
            if i != n - 1:
                diags.append(Diagnostic("terminator is not the last op of its region", op))
            elif op.name != terminator:
                diags.append(Diagnostic(f"region must end in '{terminator}', not '{op.name}'", op))
        elif d.has_region:
            diags.extend(_verify_region_op(op))
        else:
            bad = _verify_types(op)
            if bad:
                diags.extend(bad)
        for r in op.results:
            if r.producer is not op:
                diags.append(Diagnostic("result's producer link is broken", op))
            defined.add(id(r))
    last = g.terminator
    if last is None or last.name != terminator:
        diags.append(Diagnostic(f"region does not end in '{terminator}'"))
    return diags


def _verify_types(op: Op) -> list[Diagnostic] | None:
    results = op.results
    try:
        want = infer_types(op.name, [v.type for v in op._operands], op.attrs)
    except OpError as e:
        return [Diagnostic(str(e), op)]
    if len(want) != len(results):
        return [Diagnostic(f"has {len(results)} results, type inference gives {len(want)}", op)]
    out = None
    for k, (w, r) in enumerate(zip(want, results)):
        t = r.type
        if w is not t and w != t:
            if out is None:
                out = []
            out.append(Diagnostic(f"result {k} has type {t}, but type inference gives {w}", op))
    return out


def _verify_region_op(op: Op) -> list[Diagnostic]:
    if len(op.regions) != 1:
        return [Diagnostic(f"expects one region, has {len(op.regions)}", op)]
    body = op.regions[0]
    diags: list[Diagnostic] = []
    if [a.type for a in body.args] != [v.type for v in op.operands]:
        diags.append(Diagnostic("region argument types differ from the operand types", op))
    diags.extend(_verify_graph(body, "ik.yield"))
    if [v.type for v in body.outputs] != op.result_types:
        diags.append(Diagnostic("result types differ from the types the region yields", op))
    try:
        d = OPS[op.name]
        for k, spec in d.attrs.items():
            if k in op.attrs:
                spec.check(k, op.attrs[k])
    except OpError as e:
        diags.append(Diagnostic(str(e), op))
    return diags


__all__ = ["verify", "verify_function", "VerifyError"]
