"""``reference``: the NumPy interpreter as a target (the float64 oracle's native-dtype twin)."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from irkit.interp import default_bindings, run
from irkit.ir.core import Module
from irkit.targets.base import Artifact, Kernel, Target, op_ids, provenance
from irkit.targets.registry import register_target


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

        return Artifact(self.name, {"module.mlir": Printer(inline_resources=False).module(module)}, kernels, 0.0,
                        b, [a.type.concrete_shape(b) for a in fn.args], runner=runner)
