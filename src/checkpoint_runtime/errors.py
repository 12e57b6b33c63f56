"""Distinct, exported error types of the checkpoint store.

Callers branch on the type, never on a message: a conflict means "someone else wrote, stop",
write-uncertain means "restart from the API state", oversize means "change a knob".
"""

from __future__ import annotations

from enum import IntEnum

from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT


class ExitCode(IntEnum):
    """The one exit contract of every command."""

    OK = 0
    """Success."""
    FINDING = 1
    """A finding: the gate denied the values, `project` found a shard that cannot fit."""
    ERROR = 2
    """A named error (`error: <Name>: ...`; `run` logs the same name in its JSON line)."""
    BUG = 3
    """An unexpected internal error: a bug to report."""
    INTERRUPTED = 130
    """Interrupted by the user (Ctrl-C), as shells report SIGINT."""


# An offending value is quoted by at most this many characters in an error line.
QUOTE_LIMIT = 80


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """`repr` of a value cut to `limit` characters, saying how long it was when cut."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = len(value) if isinstance(value, str | bytes | list | dict) else len(text)
    return f"{text[:limit]}... ({size} long)"


class CheckpointError(Exception):
    """Base of every error the store raises on purpose."""


class ConfigError(CheckpointError):
    """The runtime configuration is invalid; `path` names the key (e.g. collectors[0].feed)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path or '<root>'}: {message}")
        self.path = path
        self.message = message


class KeyGrammarError(CheckpointError):
    """A key fits no collector's key grammar; it is rejected, never guessed."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"key {key!r} fits no checkpoint key grammar: {reason}")
        self.key = key
        self.reason = reason


class UnencodableTextError(CheckpointError):
    """A key or value is not valid Unicode text (a lone surrogate): it could never be stored."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} or its value holds a lone surrogate, which is not text")
        self.key = key


class DeadlineExceeded(CheckpointError):
    """The one shared deadline of an open, batch, persist or flush ran out."""


class ConflictError(CheckpointError):
    """The shard changed under us (409 Conflict or AlreadyExists); nothing was written."""

    def __init__(self, shard: str, detail: str) -> None:
        super().__init__(f"shard {shard!r}: conflict: {detail}")
        self.shard = shard
        self.detail = detail


class EpochFencedError(ConflictError):
    """The shard is stamped with a newer leadership epoch than ours: we were deposed."""

    def __init__(
        self, shard: str, ours: int, stored: int, stored_writer: str, other_lease: bool = False
    ) -> None:
        if other_lease:
            detail = (
                f"stamped with epoch {stored} by {stored_writer!r} under another Lease object of "
                f"this name (ours: epoch {ours}); only the current leader takes it over, after "
                "renewing its Lease"
            )
        else:
            detail = (
                f"stamped with epoch {stored} by {stored_writer!r}, newer than our epoch {ours}"
            )
        super().__init__(shard, detail)
        self.ours = ours
        self.stored = stored
        self.stored_writer = stored_writer


class WriteUncertainError(CheckpointError):
    """A write may or may not have committed, and reading it back did not tell in time."""

    def __init__(self, shard: str, detail: str) -> None:
        super().__init__(f"shard {shard!r}: write outcome unknown: {detail}")
        self.shard = shard
        self.detail = detail


class EtcdSpaceExceededError(CheckpointError):
    """etcd refused the write because its database is over its space quota (the API server's
    500 `etcdserver: mvcc: database space exceeded`): definitely not committed. The store sends
    no further write until `retry_after` seconds have passed; then one write probes whether
    space was freed. Every write in the cluster fails the same way until an operator frees
    space (compact, defragment, disarm the NOSPACE alarm)."""

    def __init__(self, shard: str, detail: str, retry_after: float) -> None:
        super().__init__(
            f"shard {shard!r}: etcd's database is full, nothing was written: {detail}; no write "
            f"is sent for {retry_after:.3g} s (an operator must free etcd space: compact, "
            "defragment, disarm the NOSPACE alarm)"
        )
        self.shard = shard
        self.detail = detail
        self.retry_after = retry_after


class OversizeError(CheckpointError):
    """An encoded shard exceeds what the API server admits; nothing was written or dropped."""

    def __init__(
        self,
        shard: str,
        size: int,
        limit: int,
        rows: int,
        *,
        server_answer: str | None = None,
        measured: str = "the shard value",
    ) -> None:
        if server_answer is None:
            text = f"shard {shard!r} encodes to {size} bytes, over the limit of {limit} bytes"
        else:  # the API server refused it: its words, and the quantity it measured
            text = (
                f"shard {shard!r}: the API server refused the write as too large "
                f"({server_answer}); {measured}: {size} bytes, limit {limit} bytes"
            )
        super().__init__(f"{text} ({rows} rows); nothing was written and no row was dropped")
        self.shard = shard
        self.size = size
        self.limit = limit
        self.rows = rows
        self.server_answer = server_answer
        """The API server's status and message when it, not the store's own check, refused."""
        self.measured = measured


class CorruptShardError(CheckpointError):
    """A stored shard cannot be decoded or violates the format's invariants; fail closed."""

    def __init__(self, shard: str, reason: str) -> None:
        super().__init__(f"shard {shard!r} is corrupt: {reason}")
        self.shard = shard
        self.reason = reason


class ForeignShardError(CorruptShardError):
    """An object looks like one of our shards but its labels, name or annotations disagree."""


class ForeignHeadError(ForeignShardError):
    """A shard head the store did not write: it is not sealed with the store key (a neighbour
    created or rewrote it). Never read as state: the runtime opens without it, does not run
    its collector and is not ready until an operator sets the object aside."""

    def __init__(self, shard: str, name: str, reason: str) -> None:
        super().__init__(shard, reason)
        self.name = name
        self.args = (
            f"shard {shard!r}: its head {name} was not written by this store ({reason}); "
            "refused, never read as state",
        )


class ApiRefusedError(CheckpointError):
    """The API server gave a definitive answer the store cannot act on (403, 400, other 422)."""

    def __init__(
        self, what: str, status: int, reason: str, message: str, shard: str | None = None
    ) -> None:
        super().__init__(f"{what}: API server answered {status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.shard = shard


class LegacyFormatError(CheckpointError):
    """The legacy single-ConfigMap value is not a JSON object of string values."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"legacy checkpoint {name!r} is malformed: {reason}")
        self.name = name
        self.reason = reason


class LegacyConflictError(CheckpointError):
    """The legacy value differs from the one the shards were migrated from; open refuses."""

    def __init__(
        self, legacy_name: str, legacy_digest: str, shards_digest: str, detail: str
    ) -> None:
        super().__init__(
            f"legacy checkpoint {legacy_name!r} now has digest {legacy_digest}, but the shards "
            f"record {shards_digest}: {detail}. Nothing was written; resolve it with "
            "`checkpoint-runtime migrate --from-legacy` (legacy wins) or `--keep-shards` "
            "(shards win)"
        )
        self.legacy_name = legacy_name
        self.legacy_digest = legacy_digest
        self.shards_digest = shards_digest
        self.detail = detail


class LegacyMigratedElsewhereError(CheckpointError):
    """The legacy value was migrated by other stores (other Lease names), not by this one:
    opening would start empty beside checkpoints that exist. Open refuses and writes nothing."""

    def __init__(self, legacy_name: str, store: str, migrated_by: list[str], rows: int) -> None:
        by = ", ".join(repr(name) for name in migrated_by) or "a store that did not record its name"
        super().__init__(
            f"legacy checkpoint {legacy_name!r} was migrated by store {by}, not by this store "
            f"{store!r}, which holds none of its {rows} rows: opening would start empty. "
            "Nothing was written. To continue that store's checkpoints, use its Lease name "
            "(store.leaseName; the chart's is <release>-checkpoint-runtime); to copy the legacy "
            "rows into this store, run `checkpoint-runtime migrate --from-legacy`; to start "
            "empty on purpose, run `checkpoint-runtime migrate --start-empty`"
        )
        self.legacy_name = legacy_name
        self.store = store
        self.migrated_by = migrated_by
        self.rows = rows


class UnconfiguredShardError(CheckpointError):
    """A store that discovers its shards by name was asked to hold a shard it was not given."""

    def __init__(self, shards: list[str], detail: str) -> None:
        super().__init__(
            f"collector namespace(s) {', '.join(repr(s) for s in shards)} are not among the "
            f"store's configured shards (it discovers its shards by name, so it can read no "
            f"other): {detail}"
        )
        self.shards = shards
        self.detail = detail


class MissingExtraError(ConfigError):
    """A config or a command needs an optional part of the package (an extra) not installed."""

    def __init__(self, path: str, feature: str, extra: str) -> None:
        super().__init__(
            path,
            f"{feature} needs the {extra!r} extra, which is not installed here: "
            f"pip install 'checkpoint-runtime[{extra}]'",
        )
        if not path:  # a command, not a config key, needs it: no key path to name
            self.args = (self.message,)
        self.feature = feature
        self.extra = extra


class StorePathError(ConfigError):
    """A file store's folder cannot be created or used (missing parent, not a folder, denied)."""

    def __init__(self, path: str, folder: str, reason: str) -> None:
        super().__init__(path, f"file store folder {folder}: {reason}")
        self.folder = folder
        self.reason = reason


class MemoryLimitError(ConfigError):
    """The container's memory limit is below the memory the runtime is projected to need at its
    configured bounds: it would be killed for memory at open or at the first compaction, and
    restarted into the same end. `path` names the collector knob of the largest shard."""

    def __init__(self, path: str, message: str, projected_bytes: int, limit_bytes: int) -> None:
        super().__init__(path, message)
        self.projected_bytes = projected_bytes
        self.limit_bytes = limit_bytes


class NoStoreError(CheckpointError):
    """A read-only command found no checkpoint store where it was pointed; nothing was created."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"no checkpoint store at {where}: {reason}")
        self.where = where
        self.reason = reason


class NoLegacyError(CheckpointError):
    """A legacy resolution was asked for, but the store has no legacy checkpoint object."""

    def __init__(self, where: str) -> None:
        super().__init__(f"no legacy checkpoint found for {where}")
        self.where = where


class ValuesFileError(CheckpointError):
    """A Helm values file (or --set expression) cannot be read, parsed, or is not a mapping."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason


class UsageError(ConfigError):
    """A command-line argument is invalid (`path` names the option, e.g. --deadline)."""


class InputLimitError(ConfigError):
    """An input exceeds a bound checked before any expensive work (file size, YAML aliases,
    nesting depth, string length, item count); `path` names the file or key."""


class ChartError(CheckpointError):
    """The chart folder the gate was pointed at cannot be loaded or rendered."""


class AdmissionPolicyNotEnforcedError(CheckpointError):
    """The config says the store's admission policy is installed, and the API server does not
    enforce it: `run` refuses to start (runtime/admission.py)."""

    def __init__(self, policy: str, reason: str) -> None:
        super().__init__(f"admission policy {policy} is not enforced: {reason}")
        self.policy = policy


class LeadershipLostError(CheckpointError):
    """The runtime lost (or could not keep) its Lease: it stopped writing and exits so that
    Kubernetes restarts it from the API state."""


class BucketLayoutError(CheckpointError):
    """The store's Lease records another number of leadership buckets than this replica is
    configured with: it handed its buckets over and leads none until the record is its own."""


class RoleSizeError(ConfigError):
    """The names a name-pinned Role would have to hold for the configured buckets and
    collectors are more than the chart lets one Role hold."""


class UnreadableShardError(CorruptShardError):
    """A stored shard object cannot even be read as a shard (empty, truncated, not ours): the
    store refuses to open, writes nothing, and names the object and the command that sets it
    aside."""

    def __init__(self, shard: str, reason: str, repair: str) -> None:
        super().__init__(shard, f"{reason}; nothing was written. {repair}")
        self.repair = repair


class PackageDataError(CheckpointError):
    """A file the package ships (a schema, the chart, a policy) is missing: a broken install."""


def describe(error: BaseException) -> list[str]:
    """`Name: message` of an error, one line each; a group gives its own line and then every
    grouped error (nested groups too), indented, so no cause is hidden behind a count."""
    if isinstance(error, BaseExceptionGroup):
        lines = [f"{type(error).__name__}: {error.message}"]
        for inner in error.exceptions:
            lines.extend("  " + line for line in describe(inner))
        return lines
    return [f"{type(error).__name__}: {' '.join(str(error).split())}"]


def leaves(error: BaseException) -> list[BaseException]:
    """The errors a (possibly nested) group holds, or the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


__all__ = [
    "ApiRefusedError",
    "ChartError",
    "CheckpointError",
    "ConfigError",
    "ConflictError",
    "CorruptShardError",
    "DeadlineExceeded",
    "EpochFencedError",
    "EtcdSpaceExceededError",
    "ExitCode",
    "ForeignShardError",
    "InputLimitError",
    "KeyGrammarError",
    "LeadershipLostError",
    "LegacyConflictError",
    "LegacyFormatError",
    "LegacyMigratedElsewhereError",
    "MissingExtraError",
    "NoLegacyError",
    "NoStoreError",
    "OversizeError",
    "PackageDataError",
    "StorePathError",
    "UnencodableTextError",
    "UnreadableShardError",
    "UsageError",
    "ValuesFileError",
    "WriteUncertainError",
    "describe",
    "leaves",
    "quote",
]


class ChunksExceededError(OversizeError):
    """A v3 shard's state needs more chunk slots than `maxChunks` allows; nothing was written."""

    def __init__(self, shard: str, size: int, rows: int, max_chunks: int, largest: int) -> None:
        super().__init__(shard, size, max_chunks * CONFIGMAP_VALUE_LIMIT, rows)
        self.args = (
            f"shard {shard!r} needs more than maxChunks={max_chunks} chunk slots: its base is "
            f"{size} compressed bytes and its largest chunk {largest} bytes, over the "
            f"{CONFIGMAP_VALUE_LIMIT}-byte limit of one slot ({rows} rows); raise maxChunks "
            "or lower the collector's bound; nothing was written and no row was dropped",
        )
        self.max_chunks = max_chunks
        self.largest = largest
