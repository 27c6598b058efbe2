"""Op coverage of each target, read from its lowering table (the table *is* the coverage).

A target with a :class:`~irkit.targets.base.LoweringTable` covers exactly the
ops its table has rules for (less any it lists as unsupported); the reference
target covers every op of the registry, since every ``OpDef`` carries its NumPy
kernel.  ``irkit coverage`` and ``tests/unit/test_coverage_tables.py`` read
the same functions, so what the command claims is what the test checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

STRUCTURAL = frozenset({"func.return", "ik.yield"})
"""Terminators: part of every function or region, never lowered on their own."""


def table_ops(target: Any) -> frozenset[str]:
    """The IR ops ``target`` claims to lower, from its lowering table (reference: the whole registry)."""
    from irkit.ir.ops import OPS

    table = getattr(target, "lowering_table", None)
    names = table.names if table is not None else frozenset(OPS)
    return frozenset(n for n in names if n not in STRUCTURAL and target.supports(n))


def op_matrix(targets: Sequence[Any]) -> dict[str, dict[str, bool]]:
    """``op -> {target name -> covered}`` for every op in the registry (terminators left out)."""
    from irkit.ir.ops import OPS

    covered = {t.name: table_ops(t) for t in targets}
    return {op: {t.name: op in covered[t.name] for t in targets} for op in sorted(OPS) if op not in STRUCTURAL}


__all__ = ["STRUCTURAL", "op_matrix", "table_ops"]
