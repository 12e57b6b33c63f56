"""What `checkpoint-runtime inspect` shows per shard: the metrics, as a table or JSON.

Reading only: the store is opened without migration, so inspecting never writes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from checkpoint_runtime.constants import ANNOTATION_FORMAT, CONFIGMAP_VALUE_LIMIT
from checkpoint_runtime.format import sizes

if TYPE_CHECKING:  # `project` prints its table without importing the store
    from checkpoint_runtime.store.core import Store
    from checkpoint_runtime.store.planner import ShardState


def _capacity(store: Store, state: ShardState) -> int:
    chunked = state.layout is not None and state.layout.manifest.partitions > 0
    return CONFIGMAP_VALUE_LIMIT * (store.options.max_chunks if chunked else 1)


def _chunks(state: ShardState) -> int:
    return 0 if state.layout is None else state.layout.manifest.partitions


def shard_report(store: Store) -> list[dict[str, Any]]:
    """One row per stored shard, sorted by shard key."""
    rows = []
    for key, state in sorted(store.shard_states().items()):
        if state.version is None:
            continue
        rows.append(
            {
                "shard": key,
                "rows": len(state.rows),
                "raw_bytes": state.raw_bytes,
                "compressed_bytes": state.compressed_bytes,
                "compression_ratio": round(
                    sizes.compression_ratio(state.raw_bytes, state.compressed_bytes), 2
                ),
                "chunks": _chunks(state),
                "headroom_bytes": sizes.headroom_bytes(
                    state.compressed_bytes, _capacity(store, state)
                ),
                "headroom_ratio": round(
                    sizes.headroom_ratio(state.compressed_bytes, _capacity(store, state)), 4
                ),
                "format": state.head_annotations.get(ANNOTATION_FORMAT, ""),
                "epoch": state.stamp.epoch,
                "writer": state.stamp.writer,
                "legacy_digest": state.legacy_digest,
                "version": state.version,
            }
        )
    return rows


def report(store: Store, configured: Collection[str] | None = None) -> dict[str, Any]:
    """The store's shards; with `configured` (the config's collector namespaces) each shard says
    whether a collector of that config owns it, and the others are listed apart."""
    shards = shard_report(store)
    document: dict[str, Any] = {
        "store": store.backend.describe(),
        "limit_bytes": CONFIGMAP_VALUE_LIMIT,
        "shard_count": len(shards),
        "total_compressed_bytes": sum(s["compressed_bytes"] for s in shards),
        "shards": shards,
        "unused_slots": unused_slots(store),
    }
    if configured is not None:
        for shard in shards:
            shard["configured"] = shard["shard"] in configured
        document["unconfigured_shards"] = [s["shard"] for s in shards if not s["configured"]]
    return document


def lease_note(lease: dict[str, Any]) -> str:
    """The line `inspect` prints about the store's Lease."""
    name = lease["name"]
    if "error" in lease:
        return f"lease {name}: not readable with these credentials ({lease['error']})"
    if not lease["exists"]:
        return f"lease {name}: does not exist (the first replica to run creates it)"
    held = (
        f"held by {lease['holder']!r} for {lease['lease_duration_seconds']} s"
        if lease["holder"]
        else "released"
    )
    line = f"lease {name}: {held}, {lease['lease_transitions']} transition(s)"
    if not lease["store_key"]:
        line += ", no store key yet (heads are not checked: the next leader seals them)"
    if lease["foreign"]:
        line += (
            f"; FOREIGN: {lease['foreign']} (no replica of this store can lead while it is "
            "held: remove it, or let it expire)"
        )
    return line


def placement_note(placement: dict[str, Any]) -> str:
    """The lines `inspect` prints about where a store of several buckets is led."""
    lines = [f"{placement['buckets']} leadership buckets:"]
    for entry in placement["leases"]:
        if "error" in entry:
            held = f"not readable ({entry['error']})"
        elif not entry.get("holder"):
            held = "no holder" if entry.get("exists") else "Lease not created yet"
        else:
            held = f"held by {entry['holder']!r} (renewed {entry['renew_time']})"
        shards = ", ".join(entry["shards"]) or "-"
        lines.append(f"  bucket {entry['bucket']} ({entry['lease']}): {held}; shards: {shards}")
    live = [m["holder"] for m in placement["members"] if m.get("holder")]
    lines.append(f"  membership slots held: {len(live)} ({', '.join(live) or '-'})")
    return "\n".join(lines)


def foreign_heads(store: Store) -> list[dict[str, Any]]:
    """Heads the store key does not seal: never read (their rows are not in the report)."""
    return [
        {"shard": shard, "object": refused.name, "reason": refused.reason}
        for shard, refused in sorted(store.foreign.items())
    ]


def foreign_note(document: dict[str, Any], hints: Mapping[str, str]) -> str:
    """The lines `inspect` prints about heads the store did not write (`hints`: per shard,
    how to set its object aside)."""
    return "\n".join(
        f"FOREIGN head {entry['object']} of shard {entry['shard']}: {entry['reason']} (not "
        f"read; the runtime does not run its collector). {hints.get(entry['shard'], '')}"
        for entry in document.get("foreign_heads", [])
    )


def unused_slots(store: Store) -> list[dict[str, Any]]:
    """Chunk slots no shard uses any more (a shard shrank, went back into its head, or was
    rewritten in an older format): kept, never deleted; an operator may remove them by hand.
    A slot of an index the shard still uses is not listed: the next compaction reuses it."""
    states = store.shard_states()
    found = []
    for stored in store.backend.list_slots(store.new_deadline()):
        state = states.get(stored.shard)
        in_use = _chunks(state) if state is not None else 0
        slot = stored.slot or ""
        if slot[1:].isdigit() and int(slot[1:]) < in_use:
            continue
        found.append({"name": stored.name, "shard": stored.shard, "bytes": len(stored.blob)})
    return sorted(found, key=lambda entry: entry["name"])


def unused_slots_note(document: dict[str, Any]) -> str:
    """The line `inspect` prints about chunk slots no shard uses."""
    unused = document.get("unused_slots") or []
    if not unused:
        return ""
    listed = ", ".join(f"{entry['name']} ({entry['bytes']} bytes)" for entry in unused)
    total = sum(entry["bytes"] for entry in unused)
    return (
        f"{len(unused)} unused chunk slot(s), {total} bytes: {listed} (never deleted by the "
        "store; remove them by hand if wanted)"
    )


def unconfigured_note(document: dict[str, Any]) -> str:
    """The line `inspect --config` prints about shards no configured collector owns."""
    unconfigured = document.get("unconfigured_shards") or []
    if not unconfigured:
        return ""
    return (
        f"{len(unconfigured)} shard(s) of collectors not in the config: "
        f"{', '.join(unconfigured)} (kept, never deleted; a runtime that discovers its shards "
        "by name, store.discovery=names, neither reads nor writes them)"
    )


COLUMNS = (
    ("shard", "SHARD"),
    ("rows", "ROWS"),
    ("raw_bytes", "RAW"),
    ("compressed_bytes", "GZIP"),
    ("compression_ratio", "RATIO"),
    ("chunks", "CHUNKS"),
    ("headroom_bytes", "HEADROOM"),
    ("headroom_ratio", "FREE%"),
    ("epoch", "EPOCH"),
    ("writer", "WRITER"),
)
CONFIGURED_COLUMN = ("configured", "CONFIGURED")


def _cell(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "headroom_ratio":
        return f"{value * 100:.1f}"
    return str(value)


def table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]] = COLUMNS) -> str:
    """A plain aligned text table (numbers right-aligned)."""
    cells = [[title for _, title in columns]] + [
        [_cell(key, row[key]) for key, _ in columns] for row in rows
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    numeric = [
        i > 0 and all(isinstance(r[k], int | float) for r in rows)
        for i, (k, _) in enumerate(columns)
    ]
    out = []
    for line in cells:
        out.append(
            "  ".join(
                text.rjust(widths[i]) if numeric[i] else text.ljust(widths[i])
                for i, text in enumerate(line)
            ).rstrip()
        )
    return "\n".join(out)
