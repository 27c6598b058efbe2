"""Drawing a module: ops labelled with shapes, fused regions grouped and coloured.

The graph is built with networkx.  DOT text is written directly (the
``graphviz`` package renders it when the Graphviz ``dot`` program is installed);
without ``dot``, PNG and SVG are drawn with matplotlib on a layered layout
(networkx topological generations), fused regions as shaded boxes.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import networkx as nx

from irkit.errors import InputError
from irkit.fileio import atomic_write
from irkit.ir.core import Module, Op
from irkit.ir.types import shape_str

COLORS = {"attention": "#e45756", "norm": "#72b7b2", "contraction": "#4c78a8", "activation": "#f58518",
          "shape": "#bab0ac", "elementwise": "#eeca3b", "io": "#9d755d", "other": "#b279a2"}
_FUSED_FILL = {"elementwise": "#fff3c4", "matmul_epilogue": "#dbe9f6", "attention": "#fbd5d5"}


def summary(m: Module, top: int = 8) -> str:
    """A few lines about ``m`` for a terminal or a notebook: each function's signature, its op
    counts (most common first), fused regions by kind, and its weights (count, parameters,
    bytes) — never the weights themselves (``print_module(m, elide_weights=True)`` shows the
    ops with the weights elided)."""
    from collections import Counter

    from irkit.ir.core import Dense
    from irkit.text.printer import type_str

    lines = []
    for f in m.functions:
        args = ", ".join(f"%{n}: {type_str(a.type)}" for n, a in zip(f.arg_names(), f.args))
        res = ", ".join(type_str(t) for t in f.result_types)
        lines.append(f"@{f.name}({args}) -> ({res})")
        ops = Counter(op.name for op in f.walk())
        n = sum(ops.values())
        shown = ", ".join(f"{k} x{v}" for k, v in ops.most_common(top))
        more = f", +{len(ops) - top} more kinds" if len(ops) > top else ""
        lines.append(f"  {n} ops: {shown}{more}")
        fused = Counter(str(op.attrs.get("kind", "elementwise")) for op in f.walk() if op.name == "ik.fused")
        if fused or ops.get("ik.attention"):
            parts = [f"ik.fused x{sum(fused.values())} ({', '.join(f'{k} {v}' for k, v in sorted(fused.items()))})"] \
                if fused else []
            if ops.get("ik.attention"):
                parts.append(f"ik.attention x{ops['ik.attention']}")
            lines.append(f"  fused: {', '.join(parts)}")
        consts = [op.attrs.get("value") for op in f.walk() if op.name == "ik.constant"]
        big = [d for d in consts if isinstance(d, Dense) and not d.is_splat and d.size > 16]
        params = sum(int(d.size) for d in big)
        nbytes = sum(int(d.size) * d.dtype.itemsize for d in big)
        lines.append(f"  weights: {len(big)} tensors, {params:,} parameters, {nbytes / 1e6:.3g} MB")
        aliases = f.attrs.get("aliases") if hasattr(f, "attrs") else None
        if aliases:
            lines.append("  aliases: " + ", ".join(f"output {o} -> arg {a}" for o, a in aliases))
    return "\n".join(lines) + "\n"


def category(op: Op) -> str:
    from irkit.ir.ops import OPS

    d = OPS.get(op.name)
    if op.name == "ik.attention":
        return "attention"
    if d is None:
        return "other"
    if d.has("norm") or op.name in ("ik.softmax", "ik.log_softmax"):
        return "norm"
    if d.has("contraction"):
        return "contraction"
    if op.name in ("ik.gelu", "ik.silu", "ik.relu", "ik.sigmoid", "ik.tanh"):
        return "activation"
    if d.has("shape"):
        return "shape"
    if d.has("elementwise"):
        return "elementwise"
    return "other"


def build_graph(m: Module) -> nx.DiGraph:
    """Nodes: inputs, ops (constants folded into their users' labels), outputs, fused-region members."""
    fn = m.entry
    g = nx.DiGraph()
    producer: dict[int, str] = {}
    for i, a in enumerate(fn.args):
        nid = f"in{i}"
        g.add_node(nid, label=f"{a.name or f'arg{i}'}\n{shape_str(a.type.shape)} {a.type.dtype}", cat="io", group=None)
        producer[id(a)] = nid
    k = 0
    for op in fn.body:
        if op.name == "ik.constant":
            continue
        if op.name == "func.return":
            for j, v in enumerate(op.operands):
                nid = f"out{j}"
                g.add_node(nid, label=f"output {j}\n{shape_str(v.type.shape)}", cat="io", group=None)
                if id(v) in producer:
                    g.add_edge(producer[id(v)], nid)
            continue
        if op.name == "ik.fused" and op.regions:
            grp = f"fused{k}"
            kind = str(op.attrs.get("kind", "elementwise"))
            inner: dict[int, str] = {id(a): producer.get(id(v), "") for a, v in zip(op.regions[0].args, op.operands)}
            for j, iop in enumerate(op.regions[0]):
                if iop.name in ("ik.yield", "ik.constant"):
                    continue
                nid = f"n{k}_{j}"
                shape = shape_str(iop.results[0].type.shape) if iop.results else ""
                g.add_node(nid, label=f"{iop.name[3:]}\n{shape}", cat=category(iop), group=(grp, kind))
                for v in iop.operands:
                    src = inner.get(id(v))
                    if src:
                        g.add_edge(src, nid)
                for r in iop.results:
                    inner[id(r)] = nid
            for r, y in zip(op.results, op.regions[0].outputs):
                producer[id(r)] = inner.get(id(y), "")
            k += 1
            continue
        nid = f"n{k}"
        k += 1
        shape = shape_str(op.results[0].type.shape) if op.results else ""
        extra = ""
        if op.name == "ik.attention":
            extra = f"\nscale={op.attrs['scale']:.3g}" + (" causal" if op.attrs.get("causal") else "")
        g.add_node(nid, label=f"{op.name[3:]}\n{shape}{extra}", cat=category(op), group=None)
        for v in op.operands:
            src = producer.get(id(v))
            if src:
                g.add_edge(src, nid)
        for r in op.results:
            producer[id(r)] = nid
    return g


def to_dot(g: nx.DiGraph) -> str:
    lines = ["digraph irkit {", "  rankdir=TB;",
             '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];']
    groups: dict[Any, list[str]] = {}
    for n, d in g.nodes(data=True):
        if d.get("group"):
            groups.setdefault(d["group"], []).append(n)
    for (gid, kind), members in groups.items():
        lines.append(f"  subgraph cluster_{gid} {{")
        lines.append(f'    label="fused: {kind}"; style=filled; color="{_FUSED_FILL.get(kind, "#eeeeee")}";')
        for n in members:
            lines.append(f"    {n};")
        lines.append("  }")
    for n, d in g.nodes(data=True):
        label = d["label"].replace('"', '\\"').replace("\n", "\\n")
        lines.append(f'  {n} [label="{label}", fillcolor="{COLORS.get(d["cat"], "#dddddd")}"];')
    for a, b in g.edges():
        lines.append(f"  {a} -> {b};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _draw_matplotlib(g: nx.DiGraph, fmt: str) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.patches as patches
    import matplotlib.pyplot as plt

    pos: dict[str, tuple[float, float]] = {}
    for depth, layer in enumerate(nx.topological_generations(g)):
        layer = sorted(layer)
        for i, n in enumerate(layer):
            pos[n] = (i - (len(layer) - 1) / 2.0, -depth)
    widest = max((sum(1 for p in pos.values() if p[1] == y) for y in {p[1] for p in pos.values()}), default=1)
    width = max(6.0, 1.6 * widest)
    height = max(4.0, 0.9 * (1 - min((p[1] for p in pos.values()), default=0)))
    fig, ax = plt.subplots(figsize=(min(width, 60), min(height, 200)))
    groups: dict[Any, list[str]] = {}
    for n, d in g.nodes(data=True):
        if d.get("group"):
            groups.setdefault(d["group"], []).append(n)
    for (_gid, kind), members in groups.items():
        xs = [pos[n][0] for n in members]
        ys = [pos[n][1] for n in members]
        ax.add_patch(patches.FancyBboxPatch((min(xs) - 0.55, min(ys) - 0.45), max(xs) - min(xs) + 1.1,
                                            max(ys) - min(ys) + 0.9, boxstyle="round,pad=0.05",
                                            facecolor=_FUSED_FILL.get(kind, "#eeeeee"), edgecolor="grey", zorder=0))
        ax.text(max(xs) + 0.6, max(ys), f"fused: {kind}", fontsize=6, va="top")
    nx.draw_networkx_edges(g, pos, ax=ax, arrows=True, arrowsize=8, edge_color="#777777", node_size=1500)
    for n, d in g.nodes(data=True):
        x, y = pos[n]
        ax.text(x, y, d["label"], ha="center", va="center", fontsize=6, zorder=3,
                bbox={"boxstyle": "round,pad=0.3", "facecolor": COLORS.get(d["cat"], "#dddddd"), "edgecolor": "none"})
    ax.set_axis_off()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def render(m: Module, output: str, max_ops: int = 400) -> Path:
    """Write the graph of ``m`` to ``output`` (.dot, .svg or .png)."""
    g = build_graph(m)
    if g.number_of_nodes() > max_ops:
        raise InputError(f"the graph has {g.number_of_nodes()} nodes (limit {max_ops}); pass --max-ops, or "
                         "show a smaller module")
    p = Path(output)
    fmt = p.suffix.lower().lstrip(".")
    if fmt not in ("dot", "svg", "png"):
        raise InputError(f"{output}: choose a .dot, .svg or .png output")
    dot = to_dot(g)
    if fmt == "dot":
        atomic_write(p, dot)
        return p
    if shutil.which("dot"):
        import graphviz

        atomic_write(p, graphviz.Source(dot).pipe(format=fmt))
        return p
    atomic_write(p, _draw_matplotlib(g, fmt))
    return p


__all__ = ["render", "build_graph", "to_dot", "category"]
