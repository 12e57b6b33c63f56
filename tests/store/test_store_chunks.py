"""Chunked shards (`gzip-shards-v3`, SPEC §4a) on both backends: a head and chunk slots.

A shard grows from one object to several and back; leftover slots are reported by `inspect`;
a persist writes only the head while its delta is small and a compaction only the chunks whose
rows changed, into inactive slots; a conflict on a slot is read, re-proved and only then
written; a crash between chunk writes and the head commit leaves the old state readable; a
reader that meets a compaction reads again, and a chunk that differs from an unchanged head's
manifest is corruption. v2 shards become v3 at their next persist; `downgrade` goes back.
Each guard's test here fails when the guard is removed (checked by hand, see docs/store.md).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from store_harness import Harness, open_store, raw_shard

from checkpoint_runtime.backends.base import Backend, ShardWrite, StoredShard, WriteResult
from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH,
    ANNOTATION_FORMAT,
    ANNOTATION_LEASE,
    ANNOTATION_ROWS,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_WRITER,
    BASE_ENCODING,
    CONFIGMAP_VALUE_LIMIT,
    MAX_DECODED_ENVELOPE,
    SHARD_FORMAT,
    SHARD_FORMAT_V2,
)
from checkpoint_runtime.errors import (
    ChunksExceededError,
    ConflictError,
    CorruptShardError,
)
from checkpoint_runtime.format import codec, codec_v3
from checkpoint_runtime.format.codec import gunzip_members
from checkpoint_runtime.format.naming import chunk_slot_name, shard_labels, shard_name
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.ops import inspection
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store import opening
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.downgrade import downgrade_to_v2
from checkpoint_testenv.support.bytecode import child_env
from checkpoint_testenv.support.kubetarget import RawObject
from checkpoint_testenv.support.releases import (
    FIRST_V3,
    PREVIOUS_RELEASE,
    HistoryMissing,
    extract_release,
)

FEED = "tn/objectstore/feed-a"
SMALL = "tn/flowlogs"


def big_rows(seen: int = 12_000, shard: str = FEED) -> dict[str, str]:
    """`seen` UUID-named seen rows (the realistic, high-entropy workload): a copy of the
    deterministic workload, made once per size up to 100,000 rows."""
    if seen > 100_000:  # the million: made once, and not kept for the rest of the run
        return _seen_rows(seen, shard)
    return dict(_kept_seen_rows(seen, shard))


def _seen_rows(seen: int, shard: str) -> dict[str, str]:
    rows = FeedWorkload(shard, seen, "uuid").rows
    return {key: value for key, value in rows.items() if "/seen/" in key}


_kept_seen_rows = functools.cache(_seen_rows)


def head_document(harness: Harness, shard: str = FEED) -> dict[str, Any]:
    stored = raw_shard(harness, shard)
    assert stored is not None
    first = gunzip_members(stored.blob, MAX_DECODED_ENVELOPE, shard)[0]
    document: dict[str, Any] = json.loads(first.data)
    return document


def slot_object(harness: Harness, slot: str, shard: str = FEED) -> str:
    return chunk_slot_name(shard_name(harness.lease_name, shard), slot[0], int(slot[1:]))


def reopened(harness: Harness, shard: str = FEED) -> dict[str, str]:
    return dict(open_store(harness).items(shard + "/"))


Hook = Callable[[ShardWrite | None, str | None], None]


class Hooked:
    """A backend that runs the next of `hooks[(operation, slot)]` (slot None: the head) before
    delegating; a hook gets the write and the version it is guarded by."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.lease_name = inner.lease_name
        self.hooks: dict[tuple[str, str | None], list[Hook]] = {}
        self.writes: list[tuple[str, str | None]] = []
        self.reads: list[tuple[str, str | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def on(self, operation: str, slot: str | None, *hooks: Hook) -> None:
        self.hooks[(operation, slot)] = list(hooks)

    def _hook(
        self, key: tuple[str, str | None], write: ShardWrite | None, version: str | None
    ) -> None:
        pending = self.hooks.get(key)
        if pending:
            pending.pop(0)(write, version)

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        self._hook(("write", write.slot), write, None)
        self.writes.append(("create", write.slot))
        return self.inner.create_shard(write, deadline)

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        self._hook(("write", write.slot), write, version)
        self.writes.append(("update", write.slot))
        return self.inner.update_shard(write, version, deadline)

    def read_slot(self, shard: str, slot: str, deadline: Deadline) -> Any:
        self._hook(("read", slot), None, None)
        self.reads.append(("read", slot))
        return self.inner.read_slot(shard, slot, deadline)

    def prefetch_slots(self, wanted: Mapping[tuple[str, str], str], deadline: Deadline) -> Any:
        """A list reads every wanted slot: their read hooks run before it."""
        for _, slot in sorted(wanted):
            self._hook(("read", slot), None, None)
        self.reads.append(("list", None))
        return self.inner.prefetch_slots(wanted, deadline)


def noop(write: ShardWrite | None, version: str | None) -> None:
    del write, version


def hooked_store(harness: Harness, **options: Any) -> tuple[Store, Hooked]:
    backend = Hooked(harness.backend())
    options.setdefault("writer", "leader-1")
    options.setdefault("epoch", 1)
    return Store.open(backend, **options), backend  # type: ignore[arg-type]


class Crash(Exception):
    """The process died here."""


def crash(write: ShardWrite | None, version: str | None) -> None:
    del write, version
    raise Crash


def test_a_shard_grows_from_one_object_to_several_and_back_leaving_slots_inspect_reports(
    harness: Harness,
) -> None:
    store = open_store(harness)
    store.batch({f"{FEED}/cursor": "c1", f"{SMALL}/cursor": "f1"})
    assert len(harness.object_names()) == 2  # one object per collector namespace

    rows = big_rows()
    store.batch(rows)
    partitions = head_document(harness)["partitions"]
    assert partitions >= 2
    assert len(harness.object_names()) == 2 + partitions
    model = {f"{FEED}/cursor": "c1", **rows}
    assert reopened(harness) == model
    assert inspection.unused_slots(open_store(harness)) == []

    keep = dict(list(rows.items())[:50])
    store.batch({key: None for key in rows if key not in keep})
    assert head_document(harness)["partitions"] == 0  # back in the head
    assert reopened(harness) == {f"{FEED}/cursor": "c1", **keep}
    assert len(harness.object_names()) == 2 + partitions  # nothing deleted

    report = inspection.report(open_store(harness))
    unused = report["unused_slots"]
    assert {entry["name"] for entry in unused} == {
        slot_object(harness, f"a{i}") for i in range(partitions)
    }
    assert all(entry["bytes"] > 0 for entry in unused)
    assert "unused chunk slot(s)" in inspection.unused_slots_note(report)

    store.batch(rows)  # and back: the slots are reused, never a new name
    assert len(harness.object_names()) == 2 + partitions
    assert reopened(harness) == {f"{FEED}/cursor": "c1", **rows}


def test_a_small_change_writes_the_head_only_and_a_compaction_only_the_changed_chunk(
    harness: Harness,
) -> None:
    store, backend = hooked_store(harness)
    rows = big_rows()
    store.batch(rows)
    before = head_document(harness)
    key = next(iter(rows))

    backend.writes.clear()
    store.batch({key: "changed once"})
    assert backend.writes == [("update", None)]  # the head, carrying the delta

    store, backend = hooked_store(harness, compaction_ratio=0)  # every persist compacts
    backend.writes.clear()
    store.batch({key: "changed twice"})
    index = codec_v3.partition_of(key, before["partitions"])
    inactive = f"b{index}"
    assert backend.writes == [("create", inactive), ("update", None)]
    after = head_document(harness)
    assert after["active"][index] == "b"
    assert [i for i, g in enumerate(after["active"]) if g != before["active"][i]] == [index]
    assert reopened(harness) == {**rows, key: "changed twice"}
    compactions = store.metrics.registry.get_sample_value(
        "checkpoint_shard_compactions_total", {"shard": FEED}
    )
    assert compactions == 1
    assert (
        store.metrics.registry.get_sample_value("checkpoint_shard_chunks", {"shard": FEED})
        == before["partitions"]
    )
    sent = store.metrics.registry.get_sample_value(
        "checkpoint_shard_api_bytes_written_total", {"shard": FEED}
    )
    assert sent is not None
    assert 0 < sent < CONFIGMAP_VALUE_LIMIT // 2


def test_a_conflict_on_an_inactive_slot_is_read_then_reproved_then_written(
    harness: Harness,
) -> None:
    """Someone left content in the slot a compaction writes (a crash, a deposed writer): the
    writer reads it, re-proves (here: no elector, so the head unchanged) and then writes."""
    rows = big_rows()
    open_store(harness).batch(rows)
    key = next(iter(rows))
    index = codec_v3.partition_of(key, head_document(harness)["partitions"])
    name = slot_object(harness, f"b{index}")
    harness.put_raw(
        name,
        RawObject(
            {
                **shard_labels(harness.lease_name),
                "checkpoint-runtime.io/component": "checkpoint-chunk",
            },
            {ANNOTATION_SHARD_KEY: FEED, "checkpoint-runtime.io/slot": f"b{index}"},
            b"left over",
        ),
    )
    store, backend = hooked_store(harness, compaction_ratio=0)
    store.batch({key: "new"})
    assert backend.writes == [("create", f"b{index}"), ("update", f"b{index}"), ("update", None)]
    assert reopened(harness) == {**rows, key: "new"}


def test_a_deposed_writer_that_cannot_reprove_never_writes_the_slot(harness: Harness) -> None:
    rows = big_rows()
    open_store(harness).batch(rows)
    key = next(iter(rows))
    index = codec_v3.partition_of(key, head_document(harness)["partitions"])
    name = slot_object(harness, f"b{index}")
    labels = {
        **shard_labels(harness.lease_name),
        "checkpoint-runtime.io/component": "checkpoint-chunk",
    }
    planted = RawObject(
        labels, {ANNOTATION_SHARD_KEY: FEED, "checkpoint-runtime.io/slot": f"b{index}"}, b"theirs"
    )
    harness.put_raw(name, planted)

    store, _backend = hooked_store(harness, compaction_ratio=0)

    def lost(epoch: int) -> int:
        raise RuntimeError("not leading: cannot renew the Lease")

    store.fence.renew_above = lost
    with pytest.raises(ExceptionGroup) as raised:
        store.batch({key: "mine"})
    (error,) = raised.value.exceptions
    assert isinstance(error, ConflictError)
    assert "re-prove leadership" in str(error)
    stored = harness.raw(name)
    assert stored is not None
    assert stored.blob == b"theirs"
    assert reopened(harness) == rows


def test_a_crash_between_chunk_writes_and_the_head_commit_leaves_the_old_state(
    harness: Harness,
) -> None:
    rows = big_rows()
    open_store(harness).batch(rows)
    key = next(iter(rows))
    store, backend = hooked_store(harness, compaction_ratio=0)
    backend.on("write", None, crash)  # dies after its chunk writes, before the head
    with pytest.raises(ExceptionGroup):
        store.batch({key: "lost"})
    assert (
        "create",
        f"b{codec_v3.partition_of(key, head_document(harness)['partitions'])}",
    ) in backend.writes
    assert reopened(harness) == rows  # the old state, every chunk as the head says

    restarted = open_store(harness, compaction_ratio=0)
    restarted.batch({key: "after restart"})
    assert reopened(harness) == {**rows, key: "after restart"}


def test_a_reader_meeting_a_compaction_reads_again(harness: Harness) -> None:
    rows = big_rows()
    writer = open_store(harness, compaction_ratio=0)
    writer.batch(rows)
    key = next(iter(rows))
    index = codec_v3.partition_of(key, head_document(harness)["partitions"])

    def two_compactions(write: ShardWrite | None, version: str | None) -> None:
        writer.batch({key: "first"})  # a<index> becomes inactive, then is rewritten: the
        writer.batch({key: "second"})  # reader's head names a slot whose content changed

    backend = Hooked(harness.backend())
    backend.on("read", f"a{index}", two_compactions)
    reader = Store.open(backend, writer="reader")  # type: ignore[arg-type]
    assert dict(reader.items(FEED + "/")) == {**rows, key: "second"}


def test_an_open_by_label_lists_the_chunk_slots_instead_of_reading_each(harness: Harness) -> None:
    open_store(harness).batch(big_rows())
    partitions = head_document(harness)["partitions"]
    assert partitions > 1
    backend = Hooked(harness.backend())
    reader = Store.open(backend, writer="reader")  # type: ignore[arg-type]
    assert len(reader.items(FEED + "/")) == len(big_rows())
    by_name = [("read", f"a{index}") for index in range(partitions)]
    # The API server answers one paged list; a file is read by name (as cheap as listing).
    assert backend.reads == [("list", None)] + ([] if harness.kind == "kubernetes" else by_name)


def test_the_slot_list_keeps_only_active_slots_at_the_manifests_version(harness: Harness) -> None:
    store = open_store(harness, compaction_ratio=0)
    rows = big_rows()
    store.batch(rows)
    store.batch({next(iter(rows)): "changed"})  # one index now has both generations written
    slots = head_document(harness)["slots"]
    active = {(FEED, f"a{index}"): slots[f"a{index}"][0] for index in range(2)}
    stale = {(FEED, "a0"): "1", (FEED, "a1"): active[(FEED, "a1")]}
    backend, deadline = harness.backend(), Deadline(30)
    listed = backend.prefetch_slots(active, deadline)
    assert set(listed) <= set(active)
    assert set(backend.prefetch_slots(stale, deadline)) <= {(FEED, "a1")}
    if harness.kind == "kubernetes":
        assert set(listed) == set(active)
        assert {key: item.version for key, item in listed.items()} == active


def test_a_listed_slot_at_another_version_than_the_manifests_is_read_by_name(
    harness: Harness,
) -> None:
    rows = big_rows()
    open_store(harness).batch(rows)
    inner = harness.backend()
    deadline = Deadline(30)
    forged = codec_v3.encode_chunk(FEED, {}, 0, head_document(harness)["partitions"])
    stale = StoredShard(FEED, "stale", forged.blob, {}, "stale-version", "a0")

    class Stale(Hooked):
        def prefetch_slots(self, wanted: Mapping[tuple[str, str], str], deadline: Deadline) -> Any:
            self.reads.append(("list", None))
            return dict.fromkeys(wanted, stale)

    backend = Stale(inner)
    stored = inner.read_shard(FEED, deadline)
    assert stored is not None
    heads = opening.heads([stored])
    source = opening.slots(backend, heads, None, deadline)  # type: ignore[arg-type]
    state = opening.decode(source, stored, deadline, heads[FEED])
    assert state is not None
    assert state.rows == rows
    assert ("read", "a0") in backend.reads


def test_a_chunk_differing_from_an_unchanged_heads_manifest_is_corrupt(
    harness: Harness,
) -> None:
    rows = big_rows()
    open_store(harness).batch(rows)
    document = head_document(harness)
    name = slot_object(harness, "a0")
    stored = harness.raw(name)
    assert stored is not None
    part = codec_v3.partition(rows, document["partitions"])[0]
    forged = {**part, next(iter(part)): "forged value"}
    blob = codec_v3.encode_chunk(FEED, forged, 0, document["partitions"]).blob
    harness.put_raw(name, RawObject(stored.labels, stored.annotations, blob))
    with pytest.raises(CorruptShardError, match="differs from the manifest"):
        open_store(harness)


def test_a_state_past_max_chunks_fails_visibly_and_keeps_every_row(harness: Harness) -> None:
    store = open_store(harness, max_chunks=1)
    store.batch({f"{FEED}/cursor": "c"})
    before = raw_shard(harness, FEED)
    rows = big_rows(60_000)  # ~1.3 MB of row blocks: past one 1 MiB chunk
    with pytest.raises(ExceptionGroup) as raised:
        store.batch(rows)
    (error,) = raised.value.exceptions
    assert isinstance(error, ChunksExceededError)
    assert "maxChunks=1" in str(error)
    assert raw_shard(harness, FEED) == before
    assert dict(store.items(FEED + "/")) == {f"{FEED}/cursor": "c", **rows}
    assert store.dirty_shards() == [FEED]


def test_a_stale_writer_cannot_commit_once_the_current_one_writes_chunks(
    harness: Harness,
) -> None:
    """The head is claimed (committed under the writer's own stamp) before any slot is
    written: a deposed writer paused before its head commit can no longer commit a head that
    names a slot the current writer then rewrites."""
    rows = big_rows()
    open_store(harness, writer="old", epoch=1).batch(rows)
    key = next(iter(rows))
    index = codec_v3.partition_of(key, head_document(harness)["partitions"])

    old, old_backend = hooked_store(harness, writer="old", epoch=1, compaction_ratio=0)
    new, new_backend = hooked_store(harness, writer="new", epoch=2, compaction_ratio=0)
    paused: list[tuple[ShardWrite, str]] = []

    def pause_before_head(write: ShardWrite | None, version: str | None) -> None:
        assert write is not None
        assert version is not None
        paused.append((write, version))  # the old writer wrote b<index> and stops here
        raise Crash

    old_backend.on("write", None, pause_before_head)
    with pytest.raises(ExceptionGroup):
        old.batch({key: "old value"})
    assert ("create", f"b{index}") in old_backend.writes
    resumed: list[BaseException | None] = []

    def old_commits_now(write: ShardWrite | None, version: str | None) -> None:
        (head, guarded_by), deadline = paused[0], Deadline(30)
        try:  # the paused writer wakes up between the new writer's proof and its write
            old_backend.inner.update_shard(head, guarded_by, deadline)
            resumed.append(None)
        except ConflictError as refused:
            resumed.append(refused)

    # new: create b<index> (conflicts: old's), read it, re-prove, [old commits], write it
    new_backend.on("write", f"b{index}", noop, old_commits_now)
    new.batch({key: "new value"})
    assert isinstance(resumed[0], ConflictError)  # the claim made the old commit impossible
    assert reopened(harness)[key] == "new value"  # and never a head naming a foreign chunk


def test_v2_shards_open_unchanged_and_become_v3_at_their_next_persist(harness: Harness) -> None:
    rows = big_rows(3000)
    encoded = codec.encode_shard(FEED, rows)  # the v2 release's writer
    annotations = {
        ANNOTATION_SHARD_KEY: FEED,
        ANNOTATION_FORMAT: SHARD_FORMAT_V2,
        ANNOTATION_LEASE: harness.lease_name,
        ANNOTATION_ROWS: str(len(rows)),
        ANNOTATION_WRITER: "v2-leader",
        ANNOTATION_EPOCH: "1",
    }
    name = shard_name(harness.lease_name, FEED)
    harness.put_raw(name, RawObject(shard_labels(harness.lease_name), annotations, encoded.blob))
    before = harness.raw(name)
    store = open_store(harness, epoch=1)
    assert dict(store.items(FEED + "/")) == rows
    assert harness.raw(name) == before  # open wrote nothing
    store.set(f"{FEED}/cursor", "moved")
    store.flush()
    after = harness.raw(name)
    assert after is not None
    assert after.annotations[ANNOTATION_FORMAT] == SHARD_FORMAT
    assert reopened(harness) == {**rows, f"{FEED}/cursor": "moved"}


def test_downgrade_rewrites_what_fits_as_v2_and_names_the_rest(harness: Harness) -> None:
    small = big_rows(2000, "tn/objectstore/small")
    large = big_rows(40_000)
    store = open_store(harness)
    store.batch({**small, **large})
    store = open_store(harness, writer="downgrade", epoch=1)
    report = downgrade_to_v2(store.shard_states(), store.backend, store.fence, store.new_deadline())
    assert report.rewritten == ["tn/objectstore/small"]
    assert set(report.too_large) == {FEED}
    assert report.too_large[FEED] > CONFIGMAP_VALUE_LIMIT
    stored = raw_shard(harness, "tn/objectstore/small")
    assert stored is not None
    assert stored.annotations[ANNOTATION_FORMAT] == SHARD_FORMAT_V2
    assert codec.decode_shard("tn/objectstore/small", stored.blob) == small  # v2's own decoder
    assert dict(open_store(harness).items()) == {**small, **large}
    assert inspection.unused_slots(open_store(harness))  # the small shard's slots, left


@pytest.mark.parametrize(
    ("commit", "refusal"),
    [
        (PREVIOUS_RELEASE, "unknown format 'gzip-shards-v3'"),
        (FIRST_V3, "head member fields ['active', 'encoding', "),
    ],
)
def test_the_previous_release_refuses_a_v3_shard_by_name(
    harness: Harness, tmp_path: Path, commit: str, refusal: str
) -> None:
    if harness.kind != "file":
        pytest.skip("the previous release's code is run on the file store")
    try:
        extract_release(tmp_path / "previous", "src/checkpoint_runtime", revision=commit)
    except HistoryMissing as error:
        pytest.skip(f"no git history here: {error}")
    open_store(harness).batch({f"{SMALL}/cursor": "v3 now"})
    folder = str(harness.folder)  # type: ignore[attr-defined]
    program = (
        "import sys\n"
        "from checkpoint_runtime.backends.file import FileBackend\n"
        "from checkpoint_runtime.store.core import Store\n"
        "try:\n"
        f"    Store.open(FileBackend({folder!r}, {harness.lease_name!r}), writer='old')\n"
        "except Exception as error:\n"
        "    print(type(error).__name__, error); sys.exit(0)\n"
        "print('OPENED'); sys.exit(1)\n"
    )
    env = child_env({**os.environ, "PYTHONPATH": str(tmp_path / "previous" / "src")})
    result = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("CorruptShardError"), result.stdout
    assert refusal in result.stdout


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_write_budget_stretches_the_busiest_shards_debounce_and_drops_nothing(
    harness: Harness,
) -> None:
    clock = Clock()
    budget = 40_000  # bytes/s: 400 KB per 10 s window
    store = open_store(
        harness, clock=clock, debounce_seconds=1, write_budget_bytes_per_second=budget
    )
    busy = big_rows(12_000)  # ~340 KB of chunks on its first write
    store.batch(busy)
    quiet = f"{SMALL}/cursor"
    key = next(iter(busy))
    # A third of its rows changed: its next persist compacts (its delta past the bound), and
    # the budget expects the chunks rewritten, not the head's size.
    for row in list(busy)[: len(busy) // 3]:
        store.set(row, "busy again")
    store.set(quiet, "quiet")
    clock.now += 2
    assert store.persist_due()
    assert store.dirty_shards() == [FEED]  # the busy shard waits; the quiet one went
    assert store.get(key) == "busy again"  # nothing dropped
    clock.now += 11  # the window slides past the busy shard's bytes
    assert store.persist_due()
    assert store.dirty_shards() == []
    assert reopened(harness)[key] == "busy again"
    gauge = store.metrics.registry.get_sample_value(
        "checkpoint_store_write_budget_bytes_per_second"
    )
    assert gauge == budget


def test_the_downgrade_command_reports_what_it_rewrote_and_what_cannot_be(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from store_harness import FileHarness

    from checkpoint_runtime import cli

    harness = FileHarness(tmp_path / "checkpoints")
    open_store(harness).batch({f"{SMALL}/cursor": "c", **big_rows(40_000)})
    where = ["--path", str(harness.folder), "--lease-name", harness.lease_name]

    code = cli.main(["downgrade", "--to", "v2", *where])

    out = capsys.readouterr().out
    assert code == 1  # a shard could not be rewritten: said, not hidden
    assert f"rewritten as gzip-shards-v2: {SMALL}" in out
    assert f"cannot be rewritten: {FEED} needs" in out
    stored = raw_shard(harness, SMALL)
    assert stored is not None
    assert stored.annotations[ANNOTATION_FORMAT] == SHARD_FORMAT_V2
    # only v2 is a target: a usage error, named (exit 2)
    assert cli.main(["downgrade", "--to", "v3", *where]) == 2


def test_replacing_a_chunked_shard_wholesale_still_writes_only_inactive_slots(
    harness: Harness,
) -> None:
    """`install` (migrate --from-legacy) rewrites every row, but plans from the stored head: a
    crash before its head commit leaves the old chunks readable."""
    rows = big_rows()
    open_store(harness).batch(rows)
    store, backend = hooked_store(harness)
    backend.on("write", None, crash)
    store.install(FEED, dict.fromkeys(rows, "replaced"), None)
    with pytest.raises(ExceptionGroup):
        store.persist_shards([FEED], store.new_deadline())
    assert all(slot is None or slot.startswith("b") for _, slot in backend.writes)
    assert reopened(harness) == rows


MILLION = 1_000_000


def test_a_million_uuid_seen_keys_persist_across_chunk_slots_and_reopen(harness: Harness) -> None:
    """A feed at maxSeenKeys 1,000,000 (uuid names, the projection's worst case) with maxChunks
    32, which the projection accepts: written to the real API server as the chart's
    ServiceAccount, reopened row for row, and a 1-row change then writes the head only."""
    if harness.kind != "kubernetes":
        pytest.skip("the real API server is the point (the file store holds it the same way)")
    rows = big_rows(MILLION)
    # its first write encodes every chunk (~15 s of CPU): more than the default deadline of the
    # whole operation on a shared, loaded machine; later compactions encode the changed chunks
    long = {"max_chunks": 32, "deadline_seconds": 300.0}
    store = open_store(harness, **long)
    store.batch(rows)
    head = head_document(harness)
    assert head["encoding"] == BASE_ENCODING
    assert 20 <= head["partitions"] <= 32
    assert all(size <= CONFIGMAP_VALUE_LIMIT for _, _, size in head["slots"].values())
    del store

    reopened_store = open_store(harness, writer="leader-2", epoch=2, **long)
    assert dict(reopened_store.items(FEED + "/")) == rows
    reopened_store.take_ownership()
    before = {slot: record[0] for slot, record in head_document(harness)["slots"].items()}
    key = next(iter(rows))
    reopened_store.set(key, "2026-03-02T00:00:00Z")
    reopened_store.flush()
    after = head_document(harness)
    assert {slot: record[0] for slot, record in after["slots"].items()} == before  # head only
    del reopened_store
    assert dict(open_store(harness, writer="observer", epoch=0, **long).items(FEED + "/")) == {
        **rows,
        key: "2026-03-02T00:00:00Z",
    }
