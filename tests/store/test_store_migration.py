"""Legacy migration on both backends (SPEC §8; issue 4 acceptance 4)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from store_harness import (
    LEGACY,
    OVERSIZE_ROWS,
    FileHarness,
    Harness,
    KubeHarness,
    RawObject,
    open_store,
)

from checkpoint_runtime.backends.base import Backend, ShardWrite, WriteResult
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.constants import (
    ANNOTATION_LEGACY_DIGEST,
    ANNOTATION_MIGRATED,
    ANNOTATION_MIGRATED_BY,
)
from checkpoint_runtime.errors import (
    CheckpointError,
    ConfigError,
    ConflictError,
    KeyGrammarError,
    LegacyConflictError,
    LegacyFormatError,
    LegacyMigratedElsewhereError,
)
from checkpoint_runtime.format.legacy import byte_digest, encode_legacy, legacy_digest
from checkpoint_runtime.format.reference_rows import CONFIGURATIONS
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store import migration
from checkpoint_runtime.store.core import Store

ROWS = CONFIGURATIONS[1].rows(seen_rows=300)  # three feeds and a flowlogs collector
SHARDS = 4


class Crash(BaseException):
    """Stands for the process dying mid-migration: nothing after it runs."""


@dataclass
class FailingBackend:
    """Delegates to a real backend, failing the `nth` create with `error`."""

    inner: Backend
    nth: int
    error: Callable[[str], BaseException]
    creates: list[str] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        self.creates.append(write.shard)
        if len(self.creates) == self.nth:
            raise self.error(write.shard)
        return self.inner.create_shard(write, deadline)


def snapshot(harness: Harness) -> dict[str, RawObject | None]:
    return {name: harness.raw(name) for name in harness.object_names()}


def test_open_over_legacy_state_migrates_and_leaves_the_legacy_data_unchanged(
    harness: Harness,
) -> None:
    value = encode_legacy(ROWS)
    harness.write_legacy(LEGACY, value)

    store = open_store(harness, legacy_name=LEGACY)

    assert dict(store.items()) == ROWS
    assert len(harness.object_names()) == SHARDS
    after, annotations = harness.legacy(LEGACY)
    assert after == value
    assert annotations[ANNOTATION_MIGRATED] == legacy_digest(value)
    for name in harness.object_names():
        stored = harness.raw(name)
        assert stored is not None
        assert stored.annotations[ANNOTATION_LEGACY_DIGEST] == legacy_digest(value)
    again = open_store(harness, legacy_name=LEGACY)  # a completed migration is not redone
    assert dict(again.items()) == ROWS


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(
            lambda shard: CheckpointError(f"create of {shard} failed"), id="create-failure"
        ),
        pytest.param(lambda shard: ConflictError(shard, "already exists"), id="conflict"),
        pytest.param(lambda shard: Crash(), id="crash-between-shards"),
    ],
)
def test_interrupted_migration_resumes_on_the_next_open(
    harness: Harness, failure: Callable[[str], BaseException]
) -> None:
    value = encode_legacy(ROWS)
    harness.write_legacy(LEGACY, value)
    failing = FailingBackend(harness.backend(LEGACY), nth=2, error=failure)

    with pytest.raises((ExceptionGroup, Crash)):
        Store.open(failing, writer="w", epoch=1)  # type: ignore[arg-type]

    assert 1 <= len(harness.object_names()) < SHARDS
    assert ANNOTATION_MIGRATED not in harness.legacy(LEGACY)[1]  # never mistaken for complete
    store = open_store(harness, legacy_name=LEGACY)
    assert dict(store.items()) == ROWS
    assert harness.legacy(LEGACY) == (
        value,
        {ANNOTATION_MIGRATED: legacy_digest(value), ANNOTATION_MIGRATED_BY: harness.lease_name},
    )


@pytest.mark.parametrize("old_release_keeps_annotations", [True, False])
def test_legacy_changed_after_migration_is_refused_and_nothing_is_written(
    harness: Harness, old_release_keeps_annotations: bool
) -> None:
    original = encode_legacy(ROWS)
    harness.write_legacy(LEGACY, original)
    open_store(harness, legacy_name=LEGACY)
    changed = encode_legacy({**ROWS, "tailnet-1/flowlogs/cursor": "rolled back and ran again"})
    harness.write_legacy(LEGACY, changed)
    if not old_release_keeps_annotations:
        drop_legacy_annotations(harness)
    before = snapshot(harness), harness.legacy(LEGACY)

    with pytest.raises(LegacyConflictError) as raised:
        open_store(harness, legacy_name=LEGACY)

    assert raised.value.legacy_digest == legacy_digest(changed)
    assert raised.value.shards_digest == legacy_digest(original)
    assert legacy_digest(changed) in str(raised.value)
    assert legacy_digest(original) in str(raised.value)
    assert (snapshot(harness), harness.legacy(LEGACY)) == before


def drop_legacy_annotations(harness: Harness) -> None:
    """An old release that rewrites its ConfigMap from scratch loses our annotation."""
    set_legacy_annotations(harness, {})


def set_legacy_annotations(harness: Harness, annotations: dict[str, str]) -> None:
    """Replace the legacy object's annotations, keeping its value."""
    if harness.kind == "file":
        from checkpoint_runtime.backends.file import write_legacy_file

        folder = harness.folder  # type: ignore[attr-defined]
        write_legacy_file(folder, LEGACY, harness.legacy(LEGACY)[0], annotations=annotations)
    else:
        admin, namespace = harness.admin, harness.namespace  # type: ignore[attr-defined]
        item = admin.read_namespaced_config_map(LEGACY, namespace)
        item.metadata.annotations = annotations
        admin.replace_namespaced_config_map(LEGACY, namespace, item)


def test_a_legacy_value_reformatted_with_the_same_rows_is_not_an_edit(harness: Harness) -> None:
    """An old release (or an operator's tool) rewrites the value with other key order, spacing
    and escapes but the same rows: the content digest is unchanged, open succeeds, and nothing
    is written."""
    harness.write_legacy(LEGACY, encode_legacy(ROWS))
    open_store(harness, legacy_name=LEGACY)
    reformatted = json.dumps(dict(reversed(list(ROWS.items()))), indent=2, ensure_ascii=False)
    assert reformatted != encode_legacy(ROWS)
    harness.write_legacy(LEGACY, reformatted)
    before = snapshot(harness), harness.legacy(LEGACY)

    store = open_store(harness, legacy_name=LEGACY)

    assert dict(store.items()) == ROWS
    assert (snapshot(harness), harness.legacy(LEGACY)) == before
    status = migration.status(store, store.backend.read_legacy(store.new_deadline()))  # type: ignore[arg-type]
    assert status.state == "migrated"


def test_a_migration_recorded_by_byte_digest_still_counts_as_done(harness: Harness) -> None:
    """Releases before the content digest marked the legacy object with the digest of its exact
    bytes; such a mark is recognised, not refused as a changed legacy."""
    value = json.dumps(ROWS, indent=1)
    harness.write_legacy(LEGACY, value)
    open_store(harness, legacy_name=LEGACY)
    set_legacy_annotations(harness, {ANNOTATION_MIGRATED: byte_digest(value)})

    assert dict(open_store(harness, legacy_name=LEGACY).items()) == ROWS
    harness.write_legacy(LEGACY, encode_legacy({**ROWS, "flowlogs/cursor": "edited"}))
    with pytest.raises(LegacyConflictError):
        open_store(harness, legacy_name=LEGACY)


def test_legacy_appearing_beside_shards_not_from_it_is_refused(harness: Harness) -> None:
    open_store(harness).batch({"tailnet-1/flowlogs/cursor": "new release"})
    harness.write_legacy(LEGACY, encode_legacy(ROWS))
    with pytest.raises(LegacyConflictError, match="none"):
        open_store(harness, legacy_name=LEGACY)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("{not json", LegacyFormatError),
        ('{"flowlogs/cursor": 5}', LegacyFormatError),
        ('{"nonsense-key": "x"}', KeyGrammarError),
    ],
)
def test_bad_legacy_state_is_a_named_error_and_nothing_is_written(
    harness: Harness, value: str, error: type[Exception]
) -> None:
    harness.write_legacy(LEGACY, value)
    with pytest.raises(error):
        open_store(harness, legacy_name=LEGACY)
    assert harness.object_names() == []
    assert ANNOTATION_MIGRATED not in harness.legacy(LEGACY)[1]


def test_operator_resolves_a_changed_legacy_either_way(harness: Harness) -> None:
    harness.write_legacy(LEGACY, encode_legacy(ROWS))
    open_store(harness, legacy_name=LEGACY).batch({"tailnet-1/flowlogs/cursor": "shard side"})
    legacy_rows = {"tailnet-1/flowlogs/cursor": "legacy side"}
    harness.write_legacy(LEGACY, encode_legacy(legacy_rows))

    plain = open_store(harness, legacy_name=LEGACY, migrate=False)
    migration.resolve_keep_shards(plain, plain.new_deadline())
    kept = open_store(harness, legacy_name=LEGACY)
    assert kept.get("tailnet-1/flowlogs/cursor") == "shard side"

    harness.write_legacy(LEGACY, encode_legacy({**legacy_rows, "flowlogs/cursor": "x"}))
    with pytest.raises(LegacyConflictError):
        open_store(harness, legacy_name=LEGACY)
    plain = open_store(harness, legacy_name=LEGACY, migrate=False)
    migration.resolve_from_legacy(plain, plain.new_deadline())
    taken = open_store(harness, legacy_name=LEGACY)
    assert dict(taken.items()) == {**legacy_rows, "flowlogs/cursor": "x"}


def test_legacy_state_with_a_shard_that_cannot_fit_fails_open_before_any_write(
    tmp_path: Path,
) -> None:
    """File backend only: a legacy ConfigMap is itself capped at 1 MiB, so on the API server
    a legacy value cannot hold a shard that would not fit."""
    from checkpoint_runtime.errors import OversizeError
    from checkpoint_runtime.format.reference_rows import FeedWorkload

    harness = FileHarness(tmp_path / "checkpoints")
    huge = FeedWorkload("tailnet-1/objectstore/huge", OVERSIZE_ROWS, "uuid").rows
    harness.write_legacy(LEGACY, encode_legacy({**ROWS, **huge}))

    with pytest.raises(ExceptionGroup) as raised:  # one chunk slot: it cannot fit
        open_store(harness, legacy_name=LEGACY, max_chunks=1)

    (error,) = raised.value.exceptions
    assert isinstance(error, OversizeError)
    assert error.shard == "tailnet-1/objectstore/huge"
    assert harness.object_names() == []  # not even the shards that would fit
    assert ANNOTATION_MIGRATED not in harness.legacy(LEGACY)[1]


def second_store(harness: Harness, lease: str = "reinstalled") -> Backend:
    """A store under another Lease name (a reinstall under another release name), in the same
    place, configured with the same legacy object."""
    if isinstance(harness, FileHarness):
        return FileBackend(harness.folder, lease, LEGACY)
    kube: KubeHarness = harness  # type: ignore[assignment]
    return kube.target.backend(lease, legacy_name=LEGACY)


def test_a_second_store_over_a_legacy_another_store_migrated_refuses_to_start_empty(
    harness: Harness,
) -> None:
    harness.write_legacy(LEGACY, encode_legacy(ROWS))
    open_store(harness, legacy_name=LEGACY)  # the first store migrates and is named in the mark
    assert harness.legacy(LEGACY)[1][ANNOTATION_MIGRATED_BY] == harness.lease_name
    before = snapshot(harness), harness.legacy(LEGACY)

    with pytest.raises(LegacyMigratedElsewhereError) as raised:
        Store.open(second_store(harness), writer="w", epoch=1)

    error = raised.value
    assert (error.store, error.migrated_by, error.rows) == (
        "reinstalled",
        [harness.lease_name],
        len(ROWS),
    )
    assert repr(harness.lease_name) in str(error)
    assert "--start-empty" in str(error)
    assert (snapshot(harness), harness.legacy(LEGACY)) == before  # nothing written

    # The explicit choice: start empty. The first store keeps its rows and still opens.
    plain = Store.open(second_store(harness), writer="w", epoch=1, migrate=False)
    migration.resolve_start_empty(plain, plain.new_deadline())
    assert Store.open(second_store(harness), writer="w", epoch=1).items() == []
    assert harness.legacy(LEGACY)[1][ANNOTATION_MIGRATED_BY] == f"{harness.lease_name},reinstalled"
    assert dict(open_store(harness, legacy_name=LEGACY).items()) == ROWS


def test_a_second_store_can_copy_the_legacy_rows_instead(harness: Harness) -> None:
    harness.write_legacy(LEGACY, encode_legacy(ROWS))
    open_store(harness, legacy_name=LEGACY)

    plain = Store.open(second_store(harness), writer="w", epoch=1, migrate=False)
    migration.resolve_from_legacy(plain, plain.new_deadline())

    assert dict(Store.open(second_store(harness), writer="w", epoch=1).items()) == ROWS
    assert dict(open_store(harness, legacy_name=LEGACY).items()) == ROWS
    assert harness.legacy(LEGACY)[1][ANNOTATION_MIGRATED_BY] == f"{harness.lease_name},reinstalled"


def test_a_mark_without_store_names_is_judged_by_the_shards_that_came_from_it(
    harness: Harness,
) -> None:
    """Earlier releases marked the legacy object without naming the store: the store whose
    shards came from that value opens; any other store is refused."""
    value = encode_legacy(ROWS)
    harness.write_legacy(LEGACY, value)
    open_store(harness, legacy_name=LEGACY)
    set_legacy_annotations(harness, {ANNOTATION_MIGRATED: legacy_digest(value)})

    assert dict(open_store(harness, legacy_name=LEGACY).items()) == ROWS
    with pytest.raises(LegacyMigratedElsewhereError, match="did not record its name"):
        Store.open(second_store(harness), writer="w", epoch=1)


def test_start_empty_is_refused_for_a_legacy_no_store_migrated(harness: Harness) -> None:
    harness.write_legacy(LEGACY, encode_legacy(ROWS))
    plain = open_store(harness, legacy_name=LEGACY, migrate=False)
    with pytest.raises(ConfigError, match="not marked as migrated"):
        migration.resolve_start_empty(plain, plain.new_deadline())
    assert ANNOTATION_MIGRATED not in harness.legacy(LEGACY)[1]
