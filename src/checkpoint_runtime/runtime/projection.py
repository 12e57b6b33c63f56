"""Per-shard startup projection: will every collector's shard fit in one ConfigMap?

From the runtime config alone, build a representative payload for every collector's shard with
the production encoder and the conservative (UUID-named) reference workload, and refuse a config
whose shard could not fit, naming the knob to change (collectors[i].maxSeenKeys).

The advice is one number per shard, whatever the configured bound: the most seen rows that
leave PROJECTION_ADVICE_HEADROOM (5 %) of the limit free, at the per-row size of the largest
encoded sample (PROJECTION_MAX_ENCODED_ROWS rows). Per-row size falls slowly as a shard grows
(gzip finds more to share), so this errs on the safe side.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any

from checkpoint_runtime.constants import (
    CONFIGMAP_VALUE_LIMIT,
    PROJECTION_ADVICE_HEADROOM,
    PROJECTION_GAP_ROWS,
    PROJECTION_MAX_ENCODED_ROWS,
    PROJECTION_SHAPE,
)
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format import codec, sizes
from checkpoint_runtime.format.reference_rows import FeedWorkload, flowlogs_rows
from checkpoint_runtime.runtime.settings import CollectorSettings, RuntimeSettings


@dataclass(frozen=True)
class ShardProjection:
    """The projected size of one collector's shard at its configured bounds."""

    shard: str
    knob: str
    rows: int
    compressed_bytes: int
    extrapolated: bool
    max_rows: int | None
    """Most seen rows the shard is projected to hold leaving PROJECTION_ADVICE_HEADROOM of the
    limit free (None: not row-bound); the same number whatever the configured bound."""

    @property
    def headroom_bytes(self) -> int:
        return sizes.headroom_bytes(self.compressed_bytes)

    @property
    def headroom_ratio(self) -> float:
        return sizes.headroom_ratio(self.compressed_bytes)

    @property
    def fits(self) -> bool:
        return self.compressed_bytes <= CONFIGMAP_VALUE_LIMIT

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "headroom_bytes": self.headroom_bytes,
            "headroom_ratio": round(self.headroom_ratio, 4),
            "fits": self.fits,
        }


_MAX_WINDOWS = 1e12  # replay windows beyond which nothing is computed: terabytes at any size


@lru_cache(maxsize=256)
def _feed_bytes(namespace: str, encoded_rows: int, shape: str) -> tuple[int, int]:
    """Compressed bytes and row count of a representative feed shard (cached: the render gate
    projects the same config for many values documents)."""
    workload = FeedWorkload(namespace, encoded_rows, shape, gap_rows=PROJECTION_GAP_ROWS)
    return codec.encode_shard(namespace, workload.rows).compressed_bytes, len(workload.rows)


@lru_cache(maxsize=256)
def _flowlogs_bytes(namespace: str, windows: int) -> int:
    return codec.encode_shard(
        namespace, flowlogs_rows(namespace, replay_rows=windows)
    ).compressed_bytes


def _project_feed(index: int, collector: CollectorSettings, shape: str) -> ShardProjection:
    wanted = collector.max_seen_keys
    encoded_rows = min(wanted, PROJECTION_MAX_ENCODED_ROWS)
    size, total_rows = _feed_bytes(collector.namespace, encoded_rows, shape)
    per_row = size / max(encoded_rows, 1)
    projected = size if wanted == encoded_rows else math.ceil(per_row * wanted)
    return ShardProjection(
        shard=collector.namespace,
        knob=f"collectors[{index}].maxSeenKeys",
        rows=wanted + total_rows - encoded_rows,
        compressed_bytes=projected,
        extrapolated=wanted != encoded_rows,
        max_rows=advised_max_rows(collector.namespace, shape),
    )


def advised_max_rows(namespace: str, shape: str = PROJECTION_SHAPE) -> int:
    """The most seen rows a feed shard may be configured for, leaving the advice headroom free:
    from the largest sample, never from the configured bound, so every message agrees."""
    size, _ = _feed_bytes(namespace, PROJECTION_MAX_ENCODED_ROWS, shape)
    budget = CONFIGMAP_VALUE_LIMIT * (1 - PROJECTION_ADVICE_HEADROOM)
    return math.floor(budget * PROJECTION_MAX_ENCODED_ROWS / size)


def _project_flowlogs(index: int, collector: CollectorSettings) -> ShardProjection:
    """The cursor plus one row per replay window; like a feed, at most
    PROJECTION_MAX_ENCODED_ROWS windows are encoded and the size scales linearly beyond."""
    # A tiny pollSeconds makes the ratio overflow to infinity; far past any limit, so cap it.
    ratio = min(collector.replay_window_seconds / collector.poll_seconds, _MAX_WINDOWS)
    windows = max(1, math.ceil(ratio))
    encoded = min(windows, PROJECTION_MAX_ENCODED_ROWS)
    size = _flowlogs_bytes(collector.namespace, encoded)
    projected = size if windows == encoded else math.ceil(size / (encoded + 1) * (windows + 1))
    return ShardProjection(
        shard=collector.namespace,
        knob=f"collectors[{index}].replayWindowSeconds",
        rows=windows + 1,
        compressed_bytes=projected,
        extrapolated=windows != encoded,
        max_rows=None,
    )


def project(settings: RuntimeSettings, shape: str = PROJECTION_SHAPE) -> list[ShardProjection]:
    """One projection per configured collector, in config order."""
    return [
        _project_feed(index, collector, shape)
        if collector.kind == "objectstore"
        else _project_flowlogs(index, collector)
        for index, collector in enumerate(settings.collectors)
    ]


def misfit(projections: list[ShardProjection]) -> ConfigError | None:
    """The error naming the knob of the first shard that could not fit, if any."""
    for item in projections:
        if not item.fits:
            advice = (
                f"; lower it to at most {item.max_rows} (leaves "
                f"{PROJECTION_ADVICE_HEADROOM:.0%} of the limit free)"
                if item.max_rows
                else ""
            )
            return ConfigError(
                item.knob,
                f"shard {item.shard!r} is projected at {item.compressed_bytes} bytes, over the "
                f"{CONFIGMAP_VALUE_LIMIT}-byte ConfigMap limit{advice}",
            )
    return None


def check(settings: RuntimeSettings, shape: str = PROJECTION_SHAPE) -> list[ShardProjection]:
    """Projections, or ConfigError naming the knob of the first shard that could not fit."""
    projections = project(settings, shape)
    error = misfit(projections)
    if error is not None:
        raise error
    return projections
