"""Fixtures of the monitoring tests: the chart renderer, and the series names a live runtime
serves on /metrics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.render import SdkRenderer
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import (
    RuntimeProcess,
    exported_series_names,
    write_objects,
)


@pytest.fixture(scope="session")
def sdk() -> SdkRenderer:
    return SdkRenderer(CHART_DIR)


@pytest.fixture(scope="session")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[set[str]]:
    """The series names a live runtime (file store, one object-store feed) serves on /metrics
    once it leads and has polled and persisted."""
    work = tmp_path_factory.mktemp("scrape")
    bucket = work / "bucket"
    write_objects(bucket, ["a.json", "b.json"])
    config = {
        "store": {"backend": "file", "path": str(work / "cp"), "debounceSeconds": 0.2},
        "collectors": [
            {"kind": "objectstore", "feed": "f1", "url": bucket.as_uri(), "pollSeconds": 0.2}
        ],
    }
    proc = RuntimeProcess(work, "scrape", config).start()
    try:
        proc.wait_ready()
        written = 'shard="objectstore/f1"'
        wait_for(lambda: (proc.metric("checkpoint_writes_total", written) or 0) > 0, 30, "a write")
        status, body = proc.get("/metrics")
        assert status == 200
        yield exported_series_names(body)
    finally:
        proc.stop_quietly()
