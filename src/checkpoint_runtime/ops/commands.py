"""The store's subcommands: `inspect`, `project`, `migrate` and `set-aside`.

Each selects a store like the runtime does: from a runtime config (`--config`), or explicitly
with `--path DIR` (file store) or `--namespace NS` (live cluster; kubeconfig or in-cluster).
`inspect` only reads: it creates no folder or lock file, and when no store is named it uses the
one store it finds there (and lists them when there are several, or says there is none).
Errors are raised to the command shell (`checkpoint-runtime`), which prints them as
`error: <ErrorName>: message` (a group: one indented line per grouped error, with its shard and
cause) and exits 2; `project` exits 1 when a shard cannot fit (a finding, not an error).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.constants import (
    CONFIGMAP_VALUE_LIMIT,
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_STORE_NAME,
    LEASE_DURATION_SECONDS,
    MAX_DEADLINE_SECONDS,
    MIN_DEADLINE_SECONDS,
    PROJECTION_ADVICE_HEADROOM,
    PROJECTION_SHAPE,
)
from checkpoint_runtime.errors import (
    ConfigError,
    CorruptShardError,
    ExitCode,
    NoLegacyError,
    NoStoreError,
    UsageError,
    quote,
)
from checkpoint_runtime.ops import inspection
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.runtime.backend import StoreTarget, open_backend

if TYPE_CHECKING:
    from checkpoint_runtime.backends.kubernetes import KubernetesBackend
    from checkpoint_runtime.runtime.settings import RuntimeSettings
    from checkpoint_runtime.store.core import Store
    from checkpoint_runtime.store.seal import Sealing

MIGRATE_WRITER = "checkpoint-runtime-migrate"
SET_ASIDE_HELP = """\
Move a shard object the store cannot read (the one its refusal names) out of its way. A file
store's shard is renamed `<name>.shard.set-aside-<UTC time>`; a ConfigMap is copied to
`<name>-set-aside-<time>` without the store's labels and then deleted under its resourceVersion
(an operator's credentials: the runtime's Role cannot delete). Its bytes are kept; the next
start runs that collector from an empty shard, as for a new one."""


def _load_settings(path: str) -> RuntimeSettings:
    """The runtime config (imported when a command reads one: `inspect --path` does not)."""
    from checkpoint_runtime.runtime.settings import load_settings

    return load_settings(path)


def _store_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_argument_group("store (from --config, or explicitly)")
    where.add_argument("--config", help="runtime config file; its store section selects the store")
    where.add_argument("--path", help="file store folder")
    where.add_argument("--namespace", help="coordination namespace of a live cluster")
    where.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG, else in-cluster)")
    where.add_argument(
        "--lease-name",
        help="store (Lease) name; the chart's is <release>-checkpoint-runtime (default: the one "
        f"store found there for inspect, else {DEFAULT_STORE_NAME})",
    )
    where.add_argument("--legacy-name", help="legacy single ConfigMap (or file) name")
    where.add_argument(
        "--deadline",
        type=deadline_seconds,
        default=None,
        help=f"seconds for the operation ({MIN_DEADLINE_SECONDS:g} to {MAX_DEADLINE_SECONDS:g})",
    )


def deadline_seconds(text: str) -> float:
    """A --deadline: a finite number of seconds within what an operation can use."""
    try:
        value = float(text)
    except ValueError:
        raise UsageError("--deadline", f"{text[:40]!r} is not a number of seconds") from None
    if not math.isfinite(value) or not MIN_DEADLINE_SECONDS <= value <= MAX_DEADLINE_SECONDS:
        raise UsageError(
            "--deadline",
            f"{text[:40]!r} is not between {MIN_DEADLINE_SECONDS:g} and "
            f"{MAX_DEADLINE_SECONDS:g} seconds",
        )
    return value


class _Selection(NamedTuple):
    store: StoreTarget
    kubeconfig: str | None
    deadline: float
    lease_chosen: bool  # named by --lease-name or --config, not defaulted
    where: str

    def open(self, *, read_only: bool = False) -> FileBackend | KubernetesBackend:
        """Its backend (read_only: open nothing for writing, create nothing)."""
        return open_backend(self.store, kubeconfig=self.kubeconfig, read_only=read_only)


def _select(args: argparse.Namespace) -> _Selection:
    """The store the arguments name: from --config, overridden by explicit arguments."""
    lease, legacy, path, namespace = args.lease_name, args.legacy_name, args.path, args.namespace
    deadline = DEFAULT_DEADLINE_SECONDS
    if args.config:
        store = _load_settings(args.config).store
        lease, legacy = lease or store.lease_name, legacy or store.legacy_config_map
        deadline = store.deadline_seconds
        if store.backend == "file":
            path = path or store.path
        else:
            from checkpoint_runtime.runtime import credentials  # the Kubernetes client

            namespace = namespace or credentials.coordination_namespace(store.namespace)
    chosen = lease is not None
    if (path is None) == (namespace is None):
        raise ConfigError("store", "select exactly one store: --path, --namespace or --config")
    target = StoreTarget(
        "file" if path is not None else "kubernetes",
        lease or DEFAULT_STORE_NAME,
        path=path,
        namespace=namespace,
        legacy_config_map=legacy,
    )
    where = str(path) if path is not None else f"namespace {namespace}"
    return _Selection(target, args.kubeconfig, args.deadline or deadline, chosen, where)


def _open_chosen(selection: _Selection, has_legacy_name: bool) -> FileBackend | KubernetesBackend:
    """The backend of the store named, or with none named, of the one store found there
    (read-only); refuse to guess among several."""
    backend = selection.open(read_only=True)
    if selection.lease_chosen:
        return backend
    names = backend.store_names(Deadline(selection.deadline))
    if len(names) > 1:
        backend.close()
        raise NoStoreError(
            selection.where,
            f"it holds {len(names)} stores ({', '.join(names)}): choose one with --lease-name",
        )
    if not names and not has_legacy_name:
        backend.close()
        raise NoStoreError(selection.where, "no store has checkpoint shards there")
    if not names or names[0] == selection.store.lease_name:
        return backend
    backend.close()
    found = selection._replace(store=replace(selection.store, lease_name=names[0]))
    return found.open(read_only=True)


def _open(backend: FileBackend | KubernetesBackend, **options: Any) -> Store:
    """Open without migrating; a shard that cannot be read names the command to set it aside."""
    from checkpoint_runtime.runtime import repair
    from checkpoint_runtime.store.core import Store

    try:
        return Store.open(backend, migrate=False, **options)
    except (CorruptShardError, ExceptionGroup) as error:
        raise repair.with_repair(error, backend) from None


def store_sealing(backend: FileBackend | KubernetesBackend) -> Sealing | None:
    """The seal a command that writes heads uses: the store key on the store's Lease (so the
    runtime reads what it writes), or None (the file store; a Lease without a key yet: the next
    leader adopts what it finds). Credentials that cannot read the Lease are refused, since
    heads written without the key would be refused as foreign."""
    from checkpoint_runtime.runtime.lease import lease_report
    from checkpoint_runtime.store.seal import Sealing, key_bytes

    if isinstance(backend, FileBackend):
        return None
    lease, key = lease_report(backend, int(LEASE_DURATION_SECONDS))
    if "error" in lease:
        raise UsageError(
            "--kubeconfig",
            f"cannot read the store's Lease {lease['name']} ({lease['error']}), whose store key "
            "seals the heads this command writes: use credentials that may get it",
        )
    raw = key_bytes(key) if key else None
    return None if raw is None else Sealing(raw, backend.lease_name)


def _print(args: argparse.Namespace, document: Any, text: str) -> None:
    print(json.dumps(document, indent=2, sort_keys=True) if args.json else text, flush=True)


def _inspect(args: argparse.Namespace) -> int:
    from checkpoint_runtime.runtime import repair
    from checkpoint_runtime.runtime.lease import lease_report
    from checkpoint_runtime.store import migration  # the store and its metrics: not for project
    from checkpoint_runtime.store.seal import Sealing, key_bytes

    selection = _select(args)
    backend = _open_chosen(selection, bool(args.legacy_name))
    configured = None
    own_duration = int(LEASE_DURATION_SECONDS)
    if args.config:  # mark the shards no collector of this config owns
        settings = _load_settings(args.config)
        configured = {c.namespace for c in settings.collectors}
        own_duration = int(settings.timings.lease_duration)
    lease, sealing = None, None
    if not isinstance(backend, FileBackend):  # the file store elects no leader
        lease, key = lease_report(backend, own_duration)
        if key_bytes(key) is not None:  # check each head's seal, as the runtime does
            sealing = Sealing(key_bytes(key) or b"", backend.lease_name)
    store = _open(backend, writer="inspect", deadline_seconds=selection.deadline, sealing=sealing)
    document = inspection.report(store, configured)
    if lease is not None:
        document["lease"] = lease
        document["foreign_heads"] = inspection.foreign_heads(store)
    legacy = backend.read_legacy(store.new_deadline())
    if document["shard_count"] == 0 and legacy is None and not (lease or {}).get("exists"):
        # (a store whose Lease exists is one, shards or not: its Lease is worth showing)
        names = backend.store_names(store.new_deadline())
        found = f"stores found there: {', '.join(names)}" if names else "no store has shards there"
        raise NoStoreError(selection.where, f"store {backend.lease_name!r} has no shards ({found})")
    if legacy is not None:
        document["legacy"] = migration.status(store, legacy).__dict__ | {
            "state": migration.status(store, legacy).state
        }
    columns: tuple[tuple[str, str], ...] = inspection.COLUMNS
    if configured is not None:
        columns = (*columns, inspection.CONFIGURED_COLUMN)
    text = inspection.table(document["shards"], columns)
    text += (
        f"\n{document['shard_count']} shard(s), {document['total_compressed_bytes']} bytes "
        f"stored, limit {document['limit_bytes']} bytes per shard ({document['store']})"
    )
    if legacy is not None:
        text += f"\nlegacy {legacy.name}: {document['legacy']['state']}"
    quarantined = repair.quarantined_rows(store)
    if quarantined:
        document["quarantined"] = [{"key": key, "value": value} for key, value in quarantined]
        text += "".join(
            f"\nquarantined row {key} = {quote(value)} (unparsable; kept, not read)"
            for key, value in quarantined
        )
    if "lease" in document:
        text += f"\n{inspection.lease_note(document['lease'])}"
        buckets = int(document["lease"].get("buckets", 1))
        if buckets > 1 and not isinstance(backend, FileBackend):
            from checkpoint_runtime.runtime.lease import placement_report

            document["placement"] = placement_report(backend, buckets, sorted(store.shard_states()))
            text += f"\n{inspection.placement_note(document['placement'])}"
    if document.get("foreign_heads"):
        hints = {shard: repair.hint(backend, shard) for shard in store.foreign}
        text += f"\n{inspection.foreign_note(document, hints)}"
    for note in (inspection.unconfigured_note(document), inspection.unused_slots_note(document)):
        if note:
            text += f"\n{note}"
    _print(args, document, text)
    return ExitCode.OK


PROJECTION_COLUMNS = (
    ("shard", "SHARD"),
    ("knob", "KNOB"),
    ("rows", "ROWS"),
    ("compressed_bytes", "PROJECTED"),
    ("slot_bytes", "FULLEST"),
    ("headroom_bytes", "HEADROOM"),
    ("headroom_ratio", "FREE%"),
    ("max_rows", "MAX_ROWS"),
)


def _project(args: argparse.Namespace) -> int:
    from checkpoint_runtime.runtime import projection

    settings = _load_settings(args.config)
    projections = projection.project(settings, args.shape)
    rows = [item.as_dict() for item in projections]
    text = inspection.table(
        [{**row, "max_rows": row["max_rows"] or "-"} for row in rows], PROJECTION_COLUMNS
    )
    max_chunks = settings.store.max_chunks
    note = (
        f"FULLEST: the projected bytes of the fullest of {max_chunks} chunk slot(s) "
        f"(store.maxChunks), each one ConfigMap under the {CONFIGMAP_VALUE_LIMIT}-byte limit\n"
        f"MAX_ROWS: the most seen rows that leave {PROJECTION_ADVICE_HEADROOM:.0%} of that "
        "limit free in every slot"
    )
    etcd = projection.etcd_report(settings)
    limit = None if args.memory_limit is None else projection.memory_bytes(args.memory_limit)
    memory = projection.memory(projections, limit)
    document = {
        "shape": args.shape,
        "max_chunks": max_chunks,
        "max_rows_headroom_ratio": PROJECTION_ADVICE_HEADROOM,
        "shards": rows,
        "etcd": etcd.as_dict(),
        "memory": memory.as_dict(),
    }
    text = f"{text}\n{note}\netcd: {etcd.message()}\nmemory: projected at {memory.summary()}"
    _print(args, document, text)
    if etcd.warns:
        print(f"warning: {etcd.message()}", file=sys.stderr)
    failed = False
    for error in (projection.misfit(projections), projection.memory_misfit(memory)):
        if error is not None:
            print(f"error: {error}", file=sys.stderr)
            failed = True
    return ExitCode.FINDING if failed else ExitCode.OK


def _migrate(args: argparse.Namespace) -> int:
    from checkpoint_runtime.store import migration
    from checkpoint_runtime.store.core import Store

    selection = _select(args)
    backend, deadline = selection.open(), selection.deadline
    if not backend.legacy_name:
        raise NoLegacyError(f"{selection.where}: no legacy name given (give --legacy-name)")
    store = _open(backend, writer=MIGRATE_WRITER, deadline_seconds=deadline)
    legacy = backend.read_legacy(store.new_deadline())
    if legacy is None:
        raise NoLegacyError(f"{selection.where}: legacy {backend.legacy_name!r} does not exist")
    if args.from_legacy or args.keep_shards or args.start_empty:
        # An operator override: write under the newest epoch seen so no shard fences us (a
        # leader that stamps a newer epoch meanwhile still fences this write); the heads
        # --from-legacy writes are sealed with the store key, so that the runtime reads them.
        newest = max((s.stamp.epoch for s in store.shard_states().values()), default=0)
        store = Store.open(
            backend,
            writer=MIGRATE_WRITER,
            epoch=newest,
            migrate=False,
            deadline_seconds=deadline,
            sealing=store_sealing(backend) if args.from_legacy else None,  # it writes heads
        )
        resolve = (
            migration.resolve_from_legacy
            if args.from_legacy
            else migration.resolve_keep_shards
            if args.keep_shards
            else migration.resolve_start_empty
        )
        resolve(store, store.new_deadline())
        store = Store.open(backend, writer=MIGRATE_WRITER, migrate=False, deadline_seconds=deadline)
        legacy = backend.read_legacy(store.new_deadline())
        assert legacy is not None
    status = migration.status(store, legacy)
    document = {**status.__dict__, "state": status.state}
    text = (
        f"legacy {status.name}: {status.state}\n  digest now      {status.digest}\n"
        f"  migrated digest {status.migrated_digest}\n"
        f"  migrated by     {', '.join(status.migrated_by) or '-'}\n"
        f"  legacy rows     {status.rows}\n"
        + "\n".join(f"  shard {k}: from {v}" for k, v in sorted(status.shards_from_legacy.items()))
    )
    _print(args, document, text)
    return ExitCode.OK


def _set_aside(args: argparse.Namespace) -> int:
    from checkpoint_runtime.ops import setaside

    selection = _select(args)
    kept = setaside.set_aside(selection.open(), args.object)
    print(f"set aside {args.object!r}: its bytes are kept in {kept}")
    return ExitCode.OK


def register(subparsers: Any) -> None:
    inspect = subparsers.add_parser(
        "inspect", help="per-shard sizes, ratio and headroom (never writes)"
    )
    _store_arguments(inspect)
    inspect.add_argument("--json", action="store_true", help="print JSON instead of a table")
    inspect.set_defaults(func=_inspect)

    project = subparsers.add_parser(
        "project", help="project every shard's size from a config; non-zero if one cannot fit"
    )
    project.add_argument("--config", required=True, help="runtime config file")
    project.add_argument("--shape", default=PROJECTION_SHAPE, choices=("uuid", "old-design"))
    project.add_argument(
        "--memory-limit",
        metavar="QUANTITY",
        help="the container's memory limit (e.g. 512Mi, as resources.limits.memory): non-zero "
        "if the projected memory exceeds it",
    )
    project.add_argument("--json", action="store_true", help="print JSON instead of a table")
    project.set_defaults(func=_project)

    migrate = subparsers.add_parser("migrate", help="show or resolve the legacy migration state")
    _store_arguments(migrate)
    choice = migrate.add_mutually_exclusive_group()
    choice.add_argument("--status", action="store_true", help="only report (the default)")
    choice.add_argument(
        "--from-legacy",
        action="store_true",
        help="legacy wins: rewrite every shard from the current legacy value, then mark it",
    )
    choice.add_argument(
        "--keep-shards",
        action="store_true",
        help="shards win: mark the current legacy value as superseded; shards stay as they are",
    )
    choice.add_argument(
        "--start-empty",
        action="store_true",
        help="this store starts without the rows of a legacy value another store (another "
        "Lease name) migrated: record it in the legacy mark; nothing else is written",
    )
    migrate.add_argument("--json", action="store_true", help="print JSON instead of text")
    migrate.set_defaults(func=_migrate)

    aside = subparsers.add_parser(
        "set-aside",
        help="move a shard object the store cannot read out of its way, keeping its bytes",
        description=SET_ASIDE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _store_arguments(aside)
    aside.add_argument(
        "--object", required=True, help="the shard object's name, as the refusal names it"
    )
    aside.set_defaults(func=_set_aside)
