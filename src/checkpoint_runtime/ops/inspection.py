"""What `checkpoint-runtime inspect` shows per shard: the metrics, as a table or JSON.

Reading only: the store is opened without migration, so inspecting never writes.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT
from checkpoint_runtime.format import sizes

if TYPE_CHECKING:  # `project` prints its table without importing the store
    from checkpoint_runtime.store.core import Store


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
                "headroom_bytes": sizes.headroom_bytes(state.compressed_bytes),
                "headroom_ratio": round(sizes.headroom_ratio(state.compressed_bytes), 4),
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
    }
    if configured is not None:
        for shard in shards:
            shard["configured"] = shard["shard"] in configured
        document["unconfigured_shards"] = [s["shard"] for s in shards if not s["configured"]]
    return document


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
