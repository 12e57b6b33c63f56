"""How full a shard is: the one definition of headroom and compression ratio that the metrics,
`inspect` and the startup projection all report."""

from __future__ import annotations

from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT


def headroom_bytes(compressed_bytes: int, capacity: int = CONFIGMAP_VALUE_LIMIT) -> int:
    """Bytes left under the ConfigMap value limit, or a chunked shard's capacity (negative:
    over it)."""
    return capacity - compressed_bytes


def headroom_ratio(compressed_bytes: int, capacity: int = CONFIGMAP_VALUE_LIMIT) -> float:
    """The free fraction of the ConfigMap value limit (or capacity)."""
    return headroom_bytes(compressed_bytes, capacity) / capacity


def compression_ratio(raw_bytes: int, compressed_bytes: int) -> float:
    """Raw envelope bytes per stored byte (0 for an empty shard)."""
    return raw_bytes / compressed_bytes if compressed_bytes else 0.0
