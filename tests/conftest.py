"""Test configuration: slow cases run only with IRKIT_SLOW=1 (or `-m slow`)."""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("IRKIT_SLOW") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with IRKIT_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
