"""Fixtures of the runtime tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from checkpoint_testenv.support.runtime_process import RuntimeProcess


@pytest.fixture
def procs() -> Iterator[list[RuntimeProcess]]:
    """Runtime processes a test starts (append them): killed at the end if still running."""
    started: list[RuntimeProcess] = []
    yield started
    for proc in started:
        proc.stop_quietly()
