"""The memory projection: what the runtime's state needs at its configured bounds, against the
container's memory limit (read from the cgroup at startup, given to `project` as an option).

The per-row figures are measured constants (constants.py says how); the last tests hold them
against a real store of 200,000 uuid rows with a generous bound, so a figure that is wildly
wrong fails here."""

from __future__ import annotations

import gc
import json
import logging
import os
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from checkpoint_runtime import cli
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.collectors.objectstore import ObjectStoreCollector
from checkpoint_runtime.collectors.sink import open_sink
from checkpoint_runtime.constants import (
    MEMORY_BASELINE_BYTES,
    MEMORY_COMPACTION_BYTES_PER_ROW,
    MEMORY_DECODED_BYTES_PER_ROW,
    MEMORY_POLL_BYTES_PER_ROW,
    PERSIST_CONCURRENCY,
)
from checkpoint_runtime.errors import MemoryLimitError, UsageError
from checkpoint_runtime.format.naming import OBJECTSTORE, collector_namespace
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.runtime import projection, startup
from checkpoint_runtime.runtime.settings import parse
from checkpoint_runtime.store import chunked
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.options import StoreOptions

MI = 1_048_576
PER_ROW = MEMORY_DECODED_BYTES_PER_ROW + MEMORY_COMPACTION_BYTES_PER_ROW  # every shard's row


def config(*max_seen: int, max_chunks: int = 32, folder: str = "/tmp/x") -> dict[str, Any]:
    collectors: list[dict[str, Any]] = [
        {"kind": "objectstore", "feed": f"f{i}", "url": "file:///x", "maxSeenKeys": n}
        for i, n in enumerate(max_seen)
    ]
    collectors.append({"kind": "flowlogs", "url": "http://127.0.0.1:1/"})
    return {
        "store": {"backend": "file", "path": folder, "maxChunks": max_chunks},
        "collectors": collectors,
    }


def shards(document: dict[str, Any]) -> list[projection.ShardProjection]:
    return projection.project(parse(document))


# ---- quantities -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512Mi", 512 * MI),
        ("1Gi", 1024 * MI),
        ("1.5Gi", 1536 * MI),
        ("64Ki", 65_536),
        ("1G", 10**9),
        ("500M", 5 * 10**8),
        ("128k", 128_000),
        ("536870912", 536_870_912),
    ],
)
def test_a_memory_quantity_is_read_as_kubernetes_reads_it(text: str, expected: int) -> None:
    assert projection.memory_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "Mi", "512MB", "512mi", "1e9", "100m", "-1Gi", "1 Gi"])
def test_anything_else_is_a_named_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="is not a memory quantity"):
        projection.memory_bytes(text)


# ---- the projection -----------------------------------------------------------------------------


def test_the_projection_is_the_process_every_row_decoded_the_polls_and_the_rewrites() -> None:
    items = shards(config(1_000_000, 5000))
    report = projection.memory(items)
    rows = sum(item.rows for item in items)
    feed = items[0]
    assert feed.knob == "collectors[0].maxSeenKeys"
    assert feed.rows > 1_000_000
    assert items[2].knob == "collectors[2].replayWindowSeconds"  # flowlogs: no seen-set to poll
    assert report.rows == rows
    assert report.decoded_bytes == rows * MEMORY_DECODED_BYTES_PER_ROW
    feeds = items[0].rows + items[1].rows
    assert report.poll_bytes == feeds * MEMORY_POLL_BYTES_PER_ROW
    # every shard compacts (there are fewer than PERSIST_CONCURRENCY of them)
    assert report.compaction_bytes == rows * MEMORY_COMPACTION_BYTES_PER_ROW
    assert report.projected_bytes == (
        MEMORY_BASELINE_BYTES + rows * PER_ROW + feeds * MEMORY_POLL_BYTES_PER_ROW
    )
    assert report.knob == "collectors[0].maxSeenKeys"
    assert report.limit_bytes is None
    assert report.fits


def test_only_as_many_shards_compact_at_once_as_a_persist_writes() -> None:
    items = shards(config(*[1000 * (i + 1) for i in range(PERSIST_CONCURRENCY + 2)]))
    report = projection.memory(items)
    largest = sorted(items, key=lambda item: item.rows, reverse=True)[:PERSIST_CONCURRENCY]
    assert set(report.compacting) == {item.shard for item in largest}
    assert report.compaction_bytes == sum(i.rows for i in largest) * MEMORY_COMPACTION_BYTES_PER_ROW
    assert report.decoded_bytes == sum(i.rows for i in items) * MEMORY_DECODED_BYTES_PER_ROW
    feeds = [item for item in items if item.knob.endswith(".maxSeenKeys")]
    assert len(feeds) == PERSIST_CONCURRENCY + 2  # every feed polls in its own thread
    assert report.poll_bytes == sum(i.rows for i in feeds) * MEMORY_POLL_BYTES_PER_ROW


def test_a_million_uuid_seen_keys_do_not_fit_the_charts_default_512mi() -> None:
    items = shards(config(1_000_000))
    report = projection.memory(items, 512 * MI)
    assert report.projected_bytes > 512 * MI
    error = projection.memory_misfit(report)
    assert isinstance(error, MemoryLimitError)
    assert error.path == "collectors[0].maxSeenKeys"
    assert (error.projected_bytes, error.limit_bytes) == (report.projected_bytes, 512 * MI)
    assert f"projected at {report.projected_bytes} bytes ({report.needed_mebibytes}Mi)" in str(
        error
    )
    assert f"limit {512 * MI} bytes (512Mi)" in error.message
    assert "resources.limits.memory in the chart" in error.message
    assert f"to at least {report.needed_mebibytes}Mi" in error.message
    assert "or lower collectors[0].maxSeenKeys" in error.message
    with pytest.raises(MemoryLimitError):
        projection.check_memory(items, 512 * MI)


def test_the_limit_the_refusal_advises_is_the_smallest_that_passes() -> None:
    items = shards(config(1_000_000))
    needed = projection.memory(items).needed_mebibytes * MI
    assert projection.check_memory(items, needed).fits
    assert projection.memory_misfit(projection.memory(items, needed - MI)) is not None
    assert projection.check_memory(items, None).limit_bytes is None  # no limit: no check


def test_the_advised_rows_fit_the_limit() -> None:
    report = projection.memory(shards(config(1_000_000)), 512 * MI)
    rows = report.advised_rows()
    assert rows is not None
    assert 0 < rows < 1_000_000
    assert f"about {rows} fit" in str(projection.memory_misfit(report))
    smaller = projection.memory(shards(config(rows - 100)), 512 * MI)
    assert smaller.fits
    assert not projection.memory(shards(config(rows + 1000)), 512 * MI).fits


def test_the_defaults_fit_the_default_limit() -> None:
    assert projection.check_memory(shards(config(5000, 5000, 5000)), 512 * MI).fits
    assert projection.check_memory(shards({}), 512 * MI).projected_bytes == MEMORY_BASELINE_BYTES


# ---- the cgroup reader ------------------------------------------------------------------------


def cgroup(tmp_path: Path, files: dict[str, str], own: str = "0::/\n") -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    self_file = tmp_path / "self-cgroup"
    self_file.write_text(own)
    return root, self_file


@pytest.mark.parametrize(
    ("files", "own", "expected"),
    [
        ({"memory.max": "536870912\n"}, "0::/\n", 536_870_912),  # v2, own namespace
        ({"memory.max": "max\n"}, "0::/\n", None),  # v2 unlimited
        ({}, "0::/\n", None),  # no memory controller to read
        ({"memory/memory.limit_in_bytes": "1073741824\n"}, "4:memory:/\n", 1024 * MI),  # v1
        ({"memory/memory.limit_in_bytes": "9223372036854771712\n"}, "4:memory:/\n", None),
        ({"memory.max": "garbage\n"}, "0::/\n", None),
        # the own cgroup, visible under the mount (no cgroup namespace): its limit counts
        (
            {"memory.max": "max\n", "kubepods/pod1/c1/memory.max": "268435456\n"},
            "0::/kubepods/pod1/c1\n",
            256 * MI,
        ),
        (
            {
                "memory/memory.limit_in_bytes": "9223372036854771712\n",
                "memory/kubepods/c1/memory.limit_in_bytes": "536870912\n",
            },
            "12:cpuset:/kubepods/c1\n4:memory:/kubepods/c1\n0::/\n",
            512 * MI,
        ),
    ],
)
def test_the_container_memory_limit_is_read_from_its_cgroup(
    tmp_path: Path, files: dict[str, str], own: str, expected: int | None
) -> None:
    root, self_file = cgroup(tmp_path, files, own)
    assert startup.container_memory_limit(root, self_file) == expected


def test_without_a_cgroup_file_there_is_no_limit(tmp_path: Path) -> None:
    assert startup.container_memory_limit(tmp_path / "none", tmp_path / "no-self") is None


# ---- the startup refusal ----------------------------------------------------------------------


@pytest.fixture
def root_logging() -> Iterator[None]:
    """`run` configures the root logger for JSON lines on stderr: put it back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def in_a_container(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, limit: str) -> None:
    root, self_file = cgroup(tmp_path, {"memory.max": f"{limit}\n"})
    monkeypatch.setattr(startup, "CGROUP", root)
    monkeypatch.setattr(startup, "SELF_CGROUP", self_file)


@pytest.mark.usefixtures("root_logging")
def test_run_refuses_to_start_below_the_projection_with_a_named_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    in_a_container(monkeypatch, tmp_path, str(512 * MI))
    folder = tmp_path / "cp"
    document = tmp_path / "config.json"
    document.write_text(json.dumps(config(1_000_000, folder=str(folder))))
    for args in (["--check-config"], []):
        code = cli.main(["run", *args, "--config", str(document)])
        stderr = capsys.readouterr().err
        assert code == 2
        assert "Traceback" not in stderr
        entry = json.loads(stderr.splitlines()[-1])
        assert entry["level"] == "error"
        assert entry["error"] == "MemoryLimitError"
        assert entry["key"] == "collectors[0].maxSeenKeys"
        assert f"limit {512 * MI} bytes (512Mi)" in entry["msg"]
        assert "resources.limits.memory" in entry["msg"]
        assert "lower collectors[0].maxSeenKeys" in entry["msg"]
    assert not folder.exists()  # refused before the store was touched


@pytest.mark.usefixtures("root_logging")
def test_run_accepts_the_same_config_under_a_limit_that_holds_it_or_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "config.json"
    document.write_text(json.dumps(config(1_000_000, folder=str(tmp_path / "cp"))))
    needed = projection.memory(shards(config(1_000_000))).needed_mebibytes * MI
    for limit in (str(needed), "max"):
        in_a_container(monkeypatch, tmp_path / limit, limit)
        assert cli.main(["run", "--check-config", "--config", str(document)]) == 0
        out = capsys.readouterr().out
        assert "memory: projected at" in out
        assert (f"limit {needed} bytes" if limit != "max" else "no memory limit known") in out


# ---- project ----------------------------------------------------------------------------------


def test_project_reports_the_memory_and_fails_below_a_given_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "config.json"
    document.write_text(json.dumps(config(1_000_000)))
    assert cli.main(["project", "--config", str(document), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["memory"]
    assert shown["limit_bytes"] is None
    assert shown["fits"]
    assert shown["projected_bytes"] == projection.memory(shards(config(1_000_000))).projected_bytes
    args = ["project", "--config", str(document), "--memory-limit", "512Mi"]
    assert cli.main([*args, "--json"]) == 1
    captured = capsys.readouterr()
    shown = json.loads(captured.out)["memory"]
    assert (shown["limit_bytes"], shown["fits"]) == (512 * MI, False)
    assert "error: collectors[0].maxSeenKeys: the runtime's peak memory" in captured.err
    assert cli.main(args) == 1
    assert "memory: projected at" in capsys.readouterr().out
    assert cli.main(["project", "--config", str(document), "--memory-limit", "2Gi"]) == 0
    assert cli.main(["project", "--config", str(document), "--memory-limit", "2GB"]) == 2
    assert "error: UsageError: --memory-limit: '2GB'" in capsys.readouterr().err


# ---- the measured figures against a real store -----------------------------------------------

MEASURED_ROWS = 200_000
SHARD = collector_namespace(OBJECTSTORE, None, "measured")


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A file store holding one feed shard of MEASURED_ROWS uuid seen rows in 32 chunk slots."""
    folder = tmp_path_factory.mktemp("measured")
    store = Store.open(FileBackend(folder, "cr"), writer="w", max_chunks=32, debounce_seconds=0)
    store.batch(FeedWorkload(SHARD, MEASURED_ROWS, "uuid").rows)
    return folder


def test_decoded_rows_take_no_more_than_the_projection_says(stored: Path) -> None:
    """Python's own count of what a decoded shard holds (tracemalloc): within the measured
    figure per row, and not a third of it (a figure that far off is no measurement)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        store = Store.open(FileBackend(stored, "cr"), writer="r", max_chunks=32, migrate=False)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    rows = len(store.shard_states()[SHARD].rows)
    assert rows >= MEASURED_ROWS
    assert rows * MEMORY_DECODED_BYTES_PER_ROW / 3 < held <= rows * MEMORY_DECODED_BYTES_PER_ROW


def test_a_whole_rewrite_takes_no_more_than_the_projection_says(stored: Path) -> None:
    store = Store.open(FileBackend(stored, "cr"), writer="r", max_chunks=32, migrate=False)
    rows = store.shard_states()[SHARD].rows
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        chunked.encode_compaction(SHARD, dict(rows), None, None, StoreOptions(max_chunks=32))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    bound = len(rows) * MEMORY_COMPACTION_BYTES_PER_ROW
    assert bound / 3 < peak <= bound


def test_a_poll_at_capacity_takes_no_more_than_the_projection_says(
    stored: Path, tmp_path: Path
) -> None:
    """The feed's collector at maxSeenKeys finds one new object: it copies its seen-set, evicts
    the oldest row (a sort of the whole set by object name) and persists (last: it writes)."""
    feed = tmp_path / "feed"
    feed.mkdir()
    (feed / "zzzz-new.json").write_text('{"record":1}\n')  # named past every seen object
    store = Store.open(
        FileBackend(stored, "cr"), writer="r", max_chunks=32, migrate=False, debounce_seconds=0
    )
    sink = open_sink("file", os.devnull)
    collector = ObjectStoreCollector(
        store,
        sink,
        feed="measured",
        url=f"file://{feed}",
        max_seen_keys=MEASURED_ROWS,
    )
    rows = len(store.shard_states()[SHARD].rows)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        assert collector.poll() == 1
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        sink.close()
    assert len(store.shard_states()[SHARD].rows) == rows  # one seen row in, one evicted
    bound = rows * MEMORY_POLL_BYTES_PER_ROW
    assert bound / 3 < peak <= bound
