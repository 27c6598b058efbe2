"""``reference``: the NumPy interpreter as a target (the float64 oracle's native-dtype twin)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import numpy as np
from irkit.targets.base import Artifact, Kernel, Target, op_ids, provenance
from irkit.targets.registry import register_target

from irkit.interp import Interpreter, bind_symbols, default_bindings, run
from irkit.ir.core import Module


@register_target("reference")
class ReferenceTarget(Target):
    """Runs the IR op by op on the reference interpreter."""

    summary = "the reference interpreter (NumPy), op by op"
    spec = "host-cpu"

    def lower(self, module: Module, bindings: Mapping[str, int] | None = None) -> Artifact:
        from irkit.text.printer import Printer

        fn = module.entry
        b = default_bindings(fn, bindings)
        ids = op_ids(module)
        kernels = []
        for op in fn.body:
            if op.name in ("func.return", "ik.constant"):
                continue
            names, locs = provenance([op], ids)
            kernels.append(Kernel(name=names[0], kind=op.name, ir_ops=names, locations=locs, file="module.mlir"))
        frozen = module.clone()

        def runner(xs: Sequence[np.ndarray]) -> list[np.ndarray]:
            return run(frozen, list(xs))

        def profiler(xs: Sequence[np.ndarray]) -> list[tuple[str, float]]:
            """Each op of the entry function timed on the interpreter, by its ``ik.name#N``."""
            fids = op_ids(frozen)
            it = Interpreter()
            env: dict[int, np.ndarray] = {id(a): x for a, x in zip(frozen.entry.args, it._inputs(frozen.entry, xs))}
            bound = bind_symbols(frozen.entry, xs)
            out: list[tuple[str, float]] = []
            for op in frozen.entry.body:
                if op.name == "func.return":
                    break
                t0 = time.perf_counter()
                res = it._op(op, [env[id(v)] for v in op.operands], bound)
                out.append((fids[id(op)], time.perf_counter() - t0))
                for r, y in zip(op.results, res):
                    env[id(r)] = y
            return out

        return Artifact(self.name, {"module.mlir": Printer(inline_resources=False).module(module)}, kernels, 0.0,
                        b, [a.type.concrete_shape(b) for a in fn.args], runner=runner, profiler=profiler)
