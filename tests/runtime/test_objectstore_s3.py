"""The object-store collector's s3:// path against a real S3-compatible server (SeaweedFS).

Credentials reach the collector only through the environment ($AWS_ACCESS_KEY_ID, ...), as in
a pod; the endpoint through the collector's `endpoint_url` (`endpointUrl` in the config).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.collectors.objectstore import ObjectStoreCollector
from checkpoint_runtime.collectors.runner import (
    SourceAccessDeniedError,
    SourceError,
    SourceUnreachableError,
)
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format.naming import name_from_object_id, object_id
from checkpoint_runtime.runtime.settings import parse
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.controlplane import free_port
from checkpoint_testenv.s3server import S3Server

SHARD = "objectstore/f1"


class ListSink:
    """Records in memory; `on_flush` runs once per flush (to act in the middle of a scan)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.on_flush: list[Any] = []

    def emit(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def flush(self) -> None:
        if self.on_flush:
            self.on_flush.pop(0)()

    def close(self) -> None:
        pass

    def objects(self) -> list[str]:
        return [r["object"] for r in self.records if r["line"] == 0]


def body(name: str) -> bytes:
    return (json.dumps({"object": name, "n": 1}) + "\n" + json.dumps({"n": 2}) + "\n").encode()


@pytest.fixture
def s3_env(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Server:
    """The server's credentials in the environment, as a pod gets them from a Secret."""
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    return s3_server


def open_store(folder: Path) -> Store:
    folder.mkdir(exist_ok=True)
    return Store.open(FileBackend(folder, "cr"), writer="test", debounce_seconds=0)


def s3_feed(
    store: Store, sink: ListSink, server: S3Server, bucket: str, prefix: str = "", **kwargs: Any
) -> ObjectStoreCollector:
    return ObjectStoreCollector(
        store,
        sink,
        feed="f1",
        url=f"s3://{bucket}/{prefix}",
        endpoint_url=kwargs.pop("endpoint_url", server.endpoint),
        **kwargs,
    )


def seen_names(store: Store) -> list[str]:
    return sorted(
        name_from_object_id(key.rsplit("/seen/", 1)[1]) for key, _ in store.items(f"{SHARD}/seen/")
    )


def test_a_listing_of_several_pages_is_emitted_once_and_only_under_the_prefix(
    tmp_path: Path, s3_env: S3Server, s3_bucket: str
) -> None:
    names = [f"logs/2026/03/{index // 100:02d}/obj-{index:05d}.json" for index in range(2_500)]
    strays = ["logs-b/x.json", "logsx.json", "other/logs/y.json"]  # share the prefix's text
    s3_env.put_many(s3_bucket, [(name, body(name)) for name in names + strays])
    # The server pages: one ListObjectsV2 answers at most 1,000 keys and says there is more.
    page = s3_env.client().list_objects_v2(Bucket=s3_bucket, Prefix="logs/")
    assert (page["KeyCount"], page["IsTruncated"]) == (1_000, True)

    store, sink = open_store(tmp_path / "cp"), ListSink()
    feed = s3_feed(store, sink, s3_env, s3_bucket, "logs")
    assert feed.poll() == 2 * len(names)
    expected = sorted(name.removeprefix("logs/") for name in names)
    assert sorted(sink.objects()) == expected  # each once, nothing outside logs/
    assert seen_names(store) == expected
    assert json.loads(store.get(f"{SHARD}/scan") or "{}")["listed"] == len(names)
    assert feed.poll() == 0  # a second pass over three pages emits nothing
    restarted = ListSink()
    assert s3_feed(open_store(tmp_path / "cp"), restarted, s3_env, s3_bucket, "logs").poll() == 0


def test_objects_arriving_during_a_scan_are_emitted_by_the_next_poll_exactly_once(
    tmp_path: Path, s3_env: S3Server, s3_bucket: str
) -> None:
    names = [f"m-{index:04d}.json" for index in range(250)]
    s3_env.put_many(s3_bucket, [(name, body(name)) for name in names])
    # Uploaded after the listing, while the first chunk is being checkpointed: before, among
    # and after the names already listed.
    late = ["a-early.json", "m-0100x.json", "z-late.json"]
    store, sink = open_store(tmp_path / "cp"), ListSink()
    sink.on_flush.append(lambda: s3_env.put_many(s3_bucket, [(n, body(n)) for n in late]))
    feed = s3_feed(store, sink, s3_env, s3_bucket, chunk_objects=100)
    assert feed.poll() == 2 * len(names)
    assert sorted(sink.objects()) == names
    assert feed.poll() == 2 * len(late)
    assert sorted(sink.objects()) == sorted(names + late)
    assert len(sink.objects()) == len(set(sink.objects()))
    assert feed.poll() == 0


ODD_NAMES = [
    "with space/and more spaces.json",
    "ünïcödé/日本語/ファイル.json",
    "plus+sign+1.json",
    "percent%20not-a-space.json",
    "quote's & ampersand (1).json",
    "/".join(["d" * 200] * 4) + "/" + "long-" + "n" * 150 + ".json",  # 959 bytes, S3 allows 1,024
]


def test_odd_object_names_round_trip_through_records_and_seen_rows(
    tmp_path: Path, s3_env: S3Server, s3_bucket: str
) -> None:
    assert len(ODD_NAMES[-1].encode()) > 900
    s3_env.put_many(s3_bucket, [(f"feed/{name}", body(name)) for name in ODD_NAMES])
    assert sorted(s3_env.keys(s3_bucket)) == sorted(f"feed/{name}" for name in ODD_NAMES)
    store, sink = open_store(tmp_path / "cp"), ListSink()
    feed = s3_feed(store, sink, s3_env, s3_bucket, "feed")
    assert feed.poll() == 2 * len(ODD_NAMES)
    assert sorted(sink.objects()) == sorted(ODD_NAMES)
    # the record's content came from the object of that exact name
    assert all(r["record"]["object"] == r["object"] for r in sink.records if r["line"] == 0)
    assert seen_names(store) == sorted(ODD_NAMES)
    for name in ODD_NAMES:
        assert store.get(f"{SHARD}/seen/{object_id(name)}") is not None
    again = ListSink()
    assert s3_feed(open_store(tmp_path / "cp"), again, s3_env, s3_bucket, "feed").poll() == 0


def test_wrong_credentials_are_a_named_error_and_leave_the_checkpoints_alone(
    tmp_path: Path, s3_env: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3_env.put_many(s3_bucket, [("a.json", body("a.json")), ("b.json", body("b.json"))])
    store, sink = open_store(tmp_path / "cp"), ListSink()
    assert s3_feed(store, sink, s3_env, s3_bucket).poll() == 4
    s3_env.put(s3_bucket, "c.json", body("c.json"))
    before = dict(store.items(""))

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    wrong = ListSink()
    with pytest.raises(SourceAccessDeniedError, match="access denied"):
        s3_feed(store, wrong, s3_env, s3_bucket).poll()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKNOBODY")
    with pytest.raises(SourceAccessDeniedError):
        s3_feed(store, wrong, s3_env, s3_bucket).poll()
    assert wrong.records == []
    assert dict(store.items("")) == before
    assert not store.dirty_shards()

    for name, value in s3_env.env().items():  # the right Secret again: nothing was lost
        monkeypatch.setenv(name, value)
    right = ListSink()
    assert s3_feed(store, right, s3_env, s3_bucket).poll() == 2
    assert right.objects() == ["c.json"]


def test_an_unreachable_endpoint_is_a_named_error_and_leaves_the_checkpoints_alone(
    tmp_path: Path, s3_env: S3Server, s3_bucket: str
) -> None:
    s3_env.put(s3_bucket, "a.json", body("a.json"))
    store, sink = open_store(tmp_path / "cp"), ListSink()
    assert s3_feed(store, sink, s3_env, s3_bucket).poll() == 2
    before = dict(store.items(""))
    nobody = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(SourceUnreachableError, match="endpoint unreachable"):
        s3_feed(store, sink, s3_env, s3_bucket, endpoint_url=nobody).poll()
    assert dict(store.items("")) == before
    assert sink.objects() == ["a.json"]


def test_a_missing_bucket_is_a_source_error_not_an_empty_feed(
    tmp_path: Path, s3_env: S3Server
) -> None:
    store, sink = open_store(tmp_path / "cp"), ListSink()
    with pytest.raises(SourceError, match="listing s3://no-such-bucket-here"):
        s3_feed(store, sink, s3_env, "no-such-bucket-here").poll()
    assert dict(store.items("")) == {}


def test_an_endpoint_that_goes_away_mid_scan_marks_no_gaps_and_the_next_poll_finishes(
    tmp_path: Path, s3_env: S3Server, s3_bucket: str
) -> None:
    names = [f"o-{index:03d}.json" for index in range(250)]
    s3_env.put_many(s3_bucket, [(name, body(name)) for name in names])
    store, sink = open_store(tmp_path / "cp"), ListSink()
    sink.on_flush.append(s3_env.stop)  # after the first chunk's records, before its rows
    feed = s3_feed(store, sink, s3_env, s3_bucket, chunk_objects=100)
    try:
        with pytest.raises(SourceUnreachableError):
            feed.poll()
    finally:
        s3_env.start()
    assert store.items(f"{SHARD}/gap/") == []
    assert len(seen_names(store)) == 100  # the first chunk was checkpointed
    assert feed.poll() == 2 * 150
    assert sorted(set(sink.objects())) == names
    assert len(sink.objects()) == len(names)


def test_endpoint_url_is_refused_for_a_file_url() -> None:
    config = {
        "collectors": [
            {
                "kind": "objectstore",
                "feed": "f1",
                "url": "file:///data",
                "endpointUrl": "http://127.0.0.1:9000",
            }
        ]
    }
    with pytest.raises(ConfigError, match="applies only to s3:// URLs") as raised:
        parse(config)
    assert raised.value.path == "collectors[0].endpointUrl"
    config["collectors"][0]["url"] = "s3://bucket/prefix"
    assert parse(config).collectors[0].endpoint_url == "http://127.0.0.1:9000"
