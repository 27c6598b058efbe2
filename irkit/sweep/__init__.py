"""Sweeps: experiment matrices run against a content-keyed results store.

A sweep spec (TOML) names axes (models, frontends, pipelines, targets, dtypes,
dim values) and measurements (estimate, check, bench); :mod:`.spec` expands it
into tasks, :mod:`.runner` keys each task by content and runs what the
:mod:`.store` lacks through an executor from :mod:`.executors` (in-process, a
local process pool, or Ray), and :mod:`.report` writes the tables and plots.
See docs/sweeps.md.
"""

from __future__ import annotations

from .spec import SweepSpec, Task, load_spec
from .store import ResultRow, Store

__all__ = ["ResultRow", "Store", "SweepSpec", "Task", "load_spec"]
