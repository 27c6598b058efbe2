"""Test configuration: slow cases run only with IRKIT_SLOW=1 (or `-m slow`)."""

from __future__ import annotations

import os

# libtpu takes a machine-wide lockfile; pytest-xdist workers (and any other JAX
# process) would otherwise fail every TPU ahead-of-time compile.
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest  # noqa: E402


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("IRKIT_SLOW") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with IRKIT_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
