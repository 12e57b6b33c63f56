"""Migration from the old release's single ConfigMap.

Order matters: every shard is written (each recording the legacy digest) and only when all are
durable is the legacy object annotated; its data is never changed, so the old release can still
open it after a rollback. An interrupted migration leaves the legacy object unmarked and resumes
on the next open, skipping shards that already carry the same digest. Digests are over the
legacy value's content (canonical JSON), so reformatting it is not a change. A legacy value that
differs from the one the shards came from is refused, with both digests named, until an operator
resolves it (`checkpoint-runtime migrate`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from checkpoint_runtime.backends.base import Backend
from checkpoint_runtime.errors import (
    ConfigError,
    LegacyConflictError,
    LegacyMigratedElsewhereError,
    NoLegacyError,
)
from checkpoint_runtime.format.legacy import LegacyState, byte_digest, decode_legacy
from checkpoint_runtime.format.naming import shard_key
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store.planner import ShardState


class MigrationTarget(Protocol):
    """What migration needs of a store (the Store implements it; migration never imports it)."""

    backend: Backend

    def shard_states(self) -> dict[str, ShardState]: ...

    def require_configured(self, shards: Iterable[str], why: str) -> None: ...

    def install(self, key: str, rows: Mapping[str, str], legacy_digest: str | None) -> None: ...

    def check_fits(self, keys: Iterable[str]) -> None: ...

    def persist_shards(self, keys: Iterable[str], deadline: Deadline) -> None: ...


@dataclass(frozen=True)
class LegacyStatus:
    """What `migrate --status` reports."""

    name: str
    digest: str
    """Digest of the legacy value's content (canonical JSON)."""
    bytes_digest: str
    """Digest of its exact bytes, which releases before the content digest recorded."""
    migrated_digest: str | None
    migrated_by: tuple[str, ...]
    """The stores (Lease names) the mark names as having taken the value over."""
    taken_over_here: bool
    """Whether this store is one of them (or, for a mark without names, has shards from it)."""
    rows: int
    shards_from_legacy: dict[str, str | None]
    """Shard key -> the legacy digest it records (None: not written by a migration)."""

    @property
    def state(self) -> str:
        same = (self.digest, self.bytes_digest)
        if self.migrated_digest in same:
            return (
                "migrated" if self.taken_over_here or not self.rows else "migrated-by-another-store"
            )
        if self.migrated_digest is not None:
            return "legacy-changed-after-migration"
        if any(d not in (None, *same) for d in self.shards_from_legacy.values()):
            return "legacy-changed-after-migration"
        if any(d is None for d in self.shards_from_legacy.values()):
            return "shards-not-from-legacy"
        return "pending" if not self.shards_from_legacy else "interrupted"


def legacy_shards(legacy: LegacyState) -> dict[str, dict[str, str]]:
    """Legacy rows by shard; a key that fits no grammar raises before anything is written."""
    grouped: dict[str, dict[str, str]] = defaultdict(dict)
    for key, value in decode_legacy(legacy.name, legacy.value).items():
        grouped[shard_key(key)][key] = value
    return dict(grouped)


def status(store: MigrationTarget, legacy: LegacyState) -> LegacyStatus:
    states = store.shard_states()
    return LegacyStatus(
        name=legacy.name,
        digest=legacy.digest,
        bytes_digest=byte_digest(legacy.value),
        migrated_digest=legacy.migrated_digest,
        migrated_by=legacy.migrated_by,
        taken_over_here=_taken_over_here(store, legacy),
        rows=sum(len(rows) for rows in legacy_shards(legacy).values()),
        shards_from_legacy={
            key: state.legacy_digest for key, state in states.items() if state.version is not None
        },
    )


def migrate_on_open(store: MigrationTarget, deadline: Deadline) -> None:
    """Migrate, resume or refuse, by the rules above; called by Store.open after loading."""
    legacy = store.backend.read_legacy(deadline)
    if legacy is None:
        return
    digest = legacy.digest
    if legacy.migrated_digest is not None:
        if not legacy.matches(legacy.migrated_digest):
            raise LegacyConflictError(
                legacy.name,
                digest,
                legacy.migrated_digest,
                "the legacy value changed after migration (did an old release run again?)",
            )
        if not _taken_over_here(store, legacy):
            rows = len(decode_legacy(legacy.name, legacy.value))
            if rows:  # another store migrated it: this one would start empty beside it
                raise LegacyMigratedElsewhereError(
                    legacy.name, store.backend.lease_name, list(legacy.migrated_by), rows
                )
        return
    grouped = legacy_shards(legacy)
    # Discovery by name could not find these shards again on the next open (a resumed
    # migration would meet them as conflicts); nothing is written.
    store.require_configured(
        grouped,
        f"legacy checkpoint {legacy.name!r} holds rows of them and nothing was migrated; add "
        "those collectors to the config, or migrate once with discovery by label "
        "(store.discovery=labels; the chart's rbac.scope=namespace)",
    )
    stored = {k: s for k, s in store.shard_states().items() if s.version is not None}
    for key, state in sorted(stored.items()):
        if not legacy.matches(state.legacy_digest):
            raise LegacyConflictError(
                legacy.name,
                digest,
                state.legacy_digest or "none",
                f"shard {key!r} exists but was not migrated from this legacy value",
            )
    pending = sorted(set(grouped) - set(stored))
    for key in pending:
        store.install(key, grouped[key], digest)
    store.check_fits(pending)  # an oversize shard fails open before any shard is written
    store.persist_shards(pending, deadline)
    store.backend.mark_legacy(legacy, digest, deadline)


def resolve_from_legacy(store: MigrationTarget, deadline: Deadline) -> LegacyState:
    """Operator choice "legacy wins": rewrite every shard from the current legacy value.

    Shards the legacy value does not mention are emptied (the Role has no delete), then the
    legacy object is marked with its current digest.
    """
    legacy = _require_legacy(store, deadline)
    grouped = legacy_shards(legacy)
    keys = sorted(set(grouped) | set(store.shard_states()))
    for key in keys:
        store.install(key, grouped.get(key, {}), legacy.digest)
    store.persist_shards(keys, deadline)
    store.backend.mark_legacy(legacy, _mark_digest(legacy), deadline)
    return legacy


def resolve_keep_shards(store: MigrationTarget, deadline: Deadline) -> LegacyState:
    """Operator choice "shards win": accept the legacy value's change as superseded."""
    legacy = _require_legacy(store, deadline)
    store.backend.mark_legacy(legacy, _mark_digest(legacy), deadline)
    return legacy


def resolve_start_empty(store: MigrationTarget, deadline: Deadline) -> LegacyState:
    """Operator choice "start empty": this store takes over nothing from a legacy value that
    another store migrated; the mark records it, so it opens without the legacy rows."""
    legacy = _require_legacy(store, deadline)
    if not legacy.matches(legacy.migrated_digest):
        raise ConfigError(
            "--start-empty",
            f"legacy checkpoint {legacy.name!r} is not marked as migrated for its current value "
            f"(state {status(store, legacy).state}): open the store to migrate it, or resolve "
            "it with --from-legacy or --keep-shards",
        )
    store.backend.mark_legacy(legacy, _mark_digest(legacy), deadline)
    return legacy


def _mark_digest(legacy: LegacyState) -> str:
    """The digest to mark with: the recorded one while it still names this value (keeping the
    stores recorded with it), else the value's content digest."""
    recorded = legacy.migrated_digest
    return recorded if recorded is not None and legacy.matches(recorded) else legacy.digest


def _taken_over_here(store: MigrationTarget, legacy: LegacyState) -> bool:
    """Did this store take over the marked legacy value? The mark names the stores; a mark
    without names (an earlier release) is ours if one of our shards came from that value."""
    if legacy.migrated_by:
        return store.backend.lease_name in legacy.migrated_by
    return any(
        legacy.matches(state.legacy_digest)
        for state in store.shard_states().values()
        if state.version is not None
    )


def _require_legacy(store: MigrationTarget, deadline: Deadline) -> LegacyState:
    legacy = store.backend.read_legacy(deadline)
    if legacy is None:
        raise NoLegacyError(store.backend.describe())
    return legacy
