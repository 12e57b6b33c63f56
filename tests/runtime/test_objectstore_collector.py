"""The object-store collector over a tmp folder with the real file store."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.collectors.objectstore import ObjectStoreCollector
from checkpoint_runtime.collectors.sink import Sink, open_sink
from checkpoint_runtime.format.naming import name_from_object_id, object_id
from checkpoint_runtime.store.core import Store


class ListSink:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.flushed = 0
        self.flushed_records = 0

    def emit(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def flush(self) -> None:
        self.flushed += 1
        self.flushed_records = len(self.records)

    def close(self) -> None:
        pass

    def objects(self) -> list[str]:
        return [r["object"] for r in self.records]


def open_store(folder: Path) -> Store:
    folder.mkdir(exist_ok=True)
    return Store.open(FileBackend(folder, "cr"), writer="test", debounce_seconds=0)


def write_object(bucket: Path, name: str, lines: list[dict[str, Any]]) -> None:
    path = bucket / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def collector(store: Store, sink: Sink, bucket: Path, **kwargs: Any) -> ObjectStoreCollector:
    return ObjectStoreCollector(store, sink, feed="f1", url=str(bucket), **kwargs)


@pytest.fixture
def bucket(tmp_path: Path) -> Path:
    path = tmp_path / "bucket"
    path.mkdir()
    return path


def test_new_objects_are_emitted_once_and_rows_share_the_feed_shard(
    tmp_path: Path, bucket: Path
) -> None:
    for index in range(3):
        write_object(bucket, f"2026/03/01/obj-{index}.json", [{"n": index}, {"n": index + 10}])
    store, sink = open_store(tmp_path / "cp"), ListSink()
    feed = collector(store, sink, bucket, tailnet="tn1")
    assert feed.poll() == 6
    assert feed.poll() == 0
    assert sorted(set(sink.objects())) == [f"2026/03/01/obj-{i}.json" for i in range(3)]
    assert {r["tailnet"] for r in sink.records} == {"tn1"}
    assert list(store.shard_states()) == ["tn1/objectstore/f1"]
    assert store.get("tn1/objectstore/f1/cursor") == "2026/03/01/obj-2.json"
    seen = store.items("tn1/objectstore/f1/seen/")
    assert [name_from_object_id(key.rsplit("/seen/", 1)[1]) for key, _ in seen] == sorted(
        f"2026/03/01/obj-{i}.json" for i in range(3)
    )
    scan = json.loads(store.get("tn1/objectstore/f1/scan") or "{}")
    assert scan["listed"] == 3
    assert not store.dirty_shards()  # batch() persisted synchronously
    write_object(bucket, "2026/03/01/obj-3.json", [{"n": 3}])
    assert feed.poll() == 1
    assert sink.objects()[-1] == "2026/03/01/obj-3.json"


def test_a_restart_does_not_re_emit_what_the_seen_set_covers(tmp_path: Path, bucket: Path) -> None:
    for index in range(5):
        write_object(bucket, f"obj-{index}.json", [{"n": index}])
    sink = ListSink()
    assert collector(open_store(tmp_path / "cp"), sink, bucket).poll() == 5
    # A new process: new Store over the same folder, new collector.
    again = ListSink()
    write_object(bucket, "obj-5.json", [{"n": 5}])
    assert collector(open_store(tmp_path / "cp"), again, bucket).poll() == 1
    assert again.objects() == ["obj-5.json"]


def test_seen_set_is_bounded_and_evicted_objects_are_not_re_emitted(
    tmp_path: Path, bucket: Path
) -> None:
    for index in range(8):
        write_object(bucket, f"obj-{index}.json", [{"n": index}])
    store, sink = open_store(tmp_path / "cp"), ListSink()
    feed = collector(store, sink, bucket, max_seen_keys=3, chunk_objects=2)
    assert feed.poll() == 8
    seen = [
        name_from_object_id(k.rsplit("/seen/", 1)[1])
        for k, _ in store.items("objectstore/f1/seen/")
    ]
    assert sorted(seen) == ["obj-5.json", "obj-6.json", "obj-7.json"]  # oldest names evicted
    assert feed.floor() == "obj-4.json"
    assert feed.poll() == 0
    restarted = ListSink()
    assert collector(open_store(tmp_path / "cp"), restarted, bucket, max_seen_keys=3).poll() == 0
    assert restarted.records == []


def test_an_unreadable_object_becomes_a_gap_row_and_is_not_half_emitted(
    tmp_path: Path, bucket: Path
) -> None:
    write_object(bucket, "a.json", [{"n": 1}])
    (bucket / "b.json").write_text('{"n": 2}\nnot json\n')
    store, sink = open_store(tmp_path / "cp"), ListSink()
    feed = collector(store, sink, bucket)
    assert feed.poll() == 1
    assert sink.objects() == ["a.json"]
    gap = json.loads(store.get(f"objectstore/f1/gap/{object_id('b.json')}") or "{}")
    assert gap["object"] == "b.json"
    assert "line 2" in gap["error"]
    assert feed.poll() == 0  # not retried while the gap row exists
    (bucket / "b.json").write_text('{"n": 2}\n')
    store.batch({f"objectstore/f1/gap/{object_id('b.json')}": None})  # the operator retries it
    assert feed.poll() == 1
    assert sink.objects() == ["a.json", "b.json"]


def test_gzip_objects_are_read(tmp_path: Path, bucket: Path) -> None:
    (bucket / "z.json.gz").write_bytes(gzip.compress(b'{"z": 1}\n{"z": 2}\n'))
    sink = ListSink()
    assert collector(open_store(tmp_path / "cp"), sink, bucket).poll() == 2
    assert [r["record"] for r in sink.records] == [{"z": 1}, {"z": 2}]


def test_records_are_flushed_before_the_seen_rows_are_persisted(
    tmp_path: Path, bucket: Path
) -> None:
    write_object(bucket, "a.json", [{"n": 1}, {"n": 2}])
    store, sink = open_store(tmp_path / "cp"), ListSink()
    flushed_at_batch: list[int] = []
    real_batch = store.batch

    def batch(changes: dict[str, str | None]) -> None:
        flushed_at_batch.append(sink.flushed_records)
        real_batch(changes)

    store.batch = batch  # type: ignore[method-assign]
    assert collector(store, sink, bucket).poll() == 2
    assert flushed_at_batch == [2]


def test_a_failed_checkpoint_write_propagates_and_the_restart_repeats_only_that_chunk(
    tmp_path: Path, bucket: Path
) -> None:
    for index in range(4):
        write_object(bucket, f"obj-{index}.json", [{"n": index}])
    store, sink = open_store(tmp_path / "cp"), ListSink()
    real_batch = store.batch
    calls = 0

    def failing_second(changes: dict[str, str | None]) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("injected store failure")
        real_batch(changes)

    store.batch = failing_second  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="injected"):
        collector(store, sink, bucket, chunk_objects=2).poll()
    assert sink.objects() == ["obj-0.json", "obj-1.json", "obj-2.json", "obj-3.json"]
    again = ListSink()
    assert collector(open_store(tmp_path / "cp"), again, bucket, chunk_objects=2).poll() == 2
    assert again.objects() == ["obj-2.json", "obj-3.json"]  # at-least-once: one chunk repeated


def test_file_urls_as_the_chart_renders_them(tmp_path: Path, bucket: Path) -> None:
    write_object(bucket, "day/one.json", [{"n": 1}])
    sink = ListSink()
    feed = ObjectStoreCollector(
        open_store(tmp_path / "cp"), sink, feed="f1", url=f"file://{bucket}"
    )
    assert feed.poll() == 1
    assert sink.objects() == ["day/one.json"]


class _Killed(BaseException):
    """The process dies here: no handler of the collector runs."""


class _KilledMidRecord:
    """A file sink whose process is killed while it writes its `nth` record: half the line got
    into the file."""

    def __init__(self, path: Path, nth: int) -> None:
        self.path, self.nth, self.emitted = path, nth, 0
        self.sink = open_sink("file", str(path))

    def emit(self, record: dict[str, Any]) -> None:
        self.emitted += 1
        if self.emitted == self.nth:
            line = json.dumps(record, separators=(",", ":"), sort_keys=True)
            with self.path.open("a") as file:
                file.write(line[: len(line) // 2])
            raise _Killed
        self.sink.emit(record)

    def flush(self) -> None:
        self.sink.flush()

    def close(self) -> None:
        self.sink.close()


def test_a_restart_over_a_sink_torn_by_a_kill_repeats_at_most_the_chunk_in_flight(
    tmp_path: Path, bucket: Path
) -> None:
    """The first process dies inside the second record of its second chunk (chunks of 3): the
    file sink ends with half of that line. The restarted process ends the fragment's line before
    its first record and emits the second chunk again; every other line is a whole record."""
    for index in range(9):
        write_object(bucket, f"obj-{index}.json", [{"n": index}])
    path = tmp_path / "records.jsonl"
    first = _KilledMidRecord(path, nth=5)
    with pytest.raises(_Killed):
        collector(open_store(tmp_path / "cp"), first, bucket, chunk_objects=3).poll()
    first.close()  # what the kernel does for a killed process
    second = open_sink("file", str(path))
    assert collector(open_store(tmp_path / "cp"), second, bucket, chunk_objects=3).poll() == 6
    second.close()
    lines = path.read_text().splitlines()
    fragment = lines.pop(4)
    with pytest.raises(json.JSONDecodeError):
        json.loads(fragment)
    objects = [json.loads(line)["object"] for line in lines]
    assert objects == [f"obj-{index}.json" for index in (0, 1, 2, 3, 3, 4, 5, 6, 7, 8)]
    assert lines[5].startswith(fragment)  # the torn record, whole this time
