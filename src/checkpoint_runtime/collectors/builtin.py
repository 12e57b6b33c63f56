"""The collector kinds shipped with the runtime, one declaration each: objectstore and flowlogs.

Each declares its settings (what its config entry adds to every collector's), how they are parsed
and validated beyond the schema, how its shard is projected at its configured bounds (with the
production encoder on the reference rows), and how the runtime builds it.

The projection encodes at most PROJECTION_MAX_ENCODED_ROWS rows and scales linearly beyond. The
feed's advice is one number per shard, whatever the configured bound: the most seen rows that
leave PROJECTION_ADVICE_HEADROOM of the limit free, at the per-row size of the largest encoded
sample. Per-row size falls slowly as a shard grows (gzip finds more to share), so this errs on
the safe side.
"""

from __future__ import annotations

import contextlib
import json
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import deflate

from checkpoint_runtime import constants, usercache
from checkpoint_runtime.collectors import CheckpointMap, Collector
from checkpoint_runtime.collectors.flowlogs import FlowLogsCollector
from checkpoint_runtime.collectors.kind import CollectorKindSpec, CollectorSettings, ShardEstimate
from checkpoint_runtime.collectors.objectstore import ObjectStoreCollector, check_url
from checkpoint_runtime.collectors.sink import Sink
from checkpoint_runtime.constants import (
    CONFIGMAP_VALUE_LIMIT,
    DEFAULT_MAX_SEEN_KEYS,
    DEFAULT_REPLAY_WINDOW_SECONDS,
    MAX_DECODED_ENVELOPE,
    PROJECTION_ADVICE_HEADROOM,
    PROJECTION_CACHE_KIND,
    PROJECTION_GAP_ROWS,
    PROJECTION_MAX_ENCODED_ROWS,
    PROJECTION_SHAPE,
)
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format import codec, codec_v3, naming
from checkpoint_runtime.format.reference_rows import FeedWorkload, flowlogs_rows

# ---- objectstore: one feed, `[<tailnet>/]objectstore/<feed>` -----------------------------------


@dataclass(frozen=True)
class ObjectStoreSettings(CollectorSettings):
    feed: str
    endpoint_url: str | None
    max_seen_keys: int


def _objectstore_settings(
    entry: Mapping[str, Any], common: CollectorSettings, path: str
) -> ObjectStoreSettings:
    if entry.get("endpointUrl") and not common.url.startswith("s3://"):
        raise ConfigError(f"{path}.endpointUrl", "applies only to s3:// URLs")
    return ObjectStoreSettings(
        **vars(common),
        feed=entry["feed"],
        endpoint_url=entry.get("endpointUrl"),
        max_seen_keys=entry.get("maxSeenKeys", DEFAULT_MAX_SEEN_KEYS),
    )


@cache
def _format_code() -> str:
    """A digest of everything a reference shard's size depends on: the format package's code
    (the reference rows and the encoder), the constants, and the deflate back-ends' versions."""
    sources = sorted(Path(codec.__file__).parent.glob("*.py"))
    return usercache.digest(
        *(path.read_bytes() for path in sources),
        Path(constants.__file__).read_bytes(),
        deflate.__version__,
        zlib.ZLIB_RUNTIME_VERSION,
    )


def decoded_size(rows: Mapping[str, str], envelope_bytes: int) -> int:
    """What the decode bounds count for these rows (codec_v3.decoded_size)."""
    return codec_v3.decoded_size(rows, envelope_bytes)


@lru_cache(maxsize=256)
def _feed_sample(namespace: str, encoded_rows: int, shape: str) -> tuple[int, int, int]:
    """Compressed bytes, decoded size (decoded_size) and row count of a representative feed
    shard (cached: the render gate projects the same config for many values documents, and every
    `project`, `run` and gate process the same few shards: between processes in the user's
    cache, keyed by the code)."""
    key = usercache.digest(_format_code(), namespace, str(encoded_rows), shape)
    cached = usercache.read(PROJECTION_CACHE_KIND, key)
    if cached is not None:
        with contextlib.suppress(ValueError, TypeError):
            size, decoded, rows = json.loads(cached)
            if all(isinstance(value, int) for value in (size, decoded, rows)):
                return size, decoded, rows
    workload = FeedWorkload(namespace, encoded_rows, shape, gap_rows=PROJECTION_GAP_ROWS)
    measured = (*codec_v3.measure(namespace, workload.rows), len(workload.rows))
    usercache.write(PROJECTION_CACHE_KIND, key, json.dumps(measured).encode())
    return measured


def _feed_bytes(namespace: str, encoded_rows: int, shape: str) -> tuple[int, int]:
    """Compressed bytes and row count of a representative feed shard."""
    size, _, rows = _feed_sample(namespace, encoded_rows, shape)
    return size, rows


def advised_max_rows(namespace: str, shape: str = PROJECTION_SHAPE) -> int:
    """The most seen rows a feed shard may be configured for in one object, leaving the advice
    headroom free: from the largest sample, never from the configured bound, so every message
    agrees."""
    size, _ = _feed_bytes(namespace, PROJECTION_MAX_ENCODED_ROWS, shape)
    budget = CONFIGMAP_VALUE_LIMIT * (1 - PROJECTION_ADVICE_HEADROOM)
    return math.floor(budget * PROJECTION_MAX_ENCODED_ROWS / size)


def advised_max_decoded_rows(namespace: str, shape: str = PROJECTION_SHAPE) -> int:
    """The most seen rows whose decoded size leaves the advice headroom of the decode bound
    free, from the largest sample's decoded size per row."""
    _, raw, _ = _feed_sample(namespace, PROJECTION_MAX_ENCODED_ROWS, shape)
    budget = MAX_DECODED_ENVELOPE * (1 - PROJECTION_ADVICE_HEADROOM)
    return math.floor(budget * PROJECTION_MAX_ENCODED_ROWS / raw)


def _objectstore_estimate(settings: ObjectStoreSettings, shape: str) -> ShardEstimate:
    wanted = settings.max_seen_keys
    encoded_rows = min(wanted, PROJECTION_MAX_ENCODED_ROWS)
    size, raw, total_rows = _feed_sample(settings.namespace, encoded_rows, shape)
    per_row = size / max(encoded_rows, 1)
    scale = wanted / max(encoded_rows, 1)
    exact = wanted == encoded_rows
    return ShardEstimate(
        knob="maxSeenKeys",
        rows=wanted + total_rows - encoded_rows,
        compressed_bytes=size if exact else math.ceil(per_row * wanted),
        extrapolated=not exact,
        max_rows=advised_max_rows(settings.namespace, shape),
        raw_bytes=raw if exact else math.ceil(raw * scale),
        max_decoded_rows=advised_max_decoded_rows(settings.namespace, shape),
    )


def _objectstore(store: CheckpointMap, sink: Sink, settings: ObjectStoreSettings) -> Collector:
    return ObjectStoreCollector(
        store,
        sink,
        feed=settings.feed,
        url=settings.url,
        endpoint_url=settings.endpoint_url,
        tailnet=settings.tailnet,
        max_seen_keys=settings.max_seen_keys,
        poll_seconds=settings.poll_seconds,
    )


OBJECTSTORE = CollectorKindSpec(
    name=naming.OBJECTSTORE,
    shape=naming.COLLECTOR_KINDS[naming.OBJECTSTORE],
    instance_fields=("feed",),
    settings=_objectstore_settings,
    estimate=_objectstore_estimate,
    build=_objectstore,
    process_check=lambda settings, path: check_url(settings.url, f"{path}.url"),
)


# ---- flowlogs: one source per tailnet, `[<tailnet>/]flowlogs` ----------------------------------


@dataclass(frozen=True)
class FlowLogsSettings(CollectorSettings):
    replay_window_seconds: float


def _flowlogs_settings(
    entry: Mapping[str, Any], common: CollectorSettings, path: str
) -> FlowLogsSettings:
    return FlowLogsSettings(
        **vars(common),
        replay_window_seconds=entry.get("replayWindowSeconds", DEFAULT_REPLAY_WINDOW_SECONDS),
    )


_MAX_WINDOWS = 1e12  # replay windows beyond which nothing is computed: terabytes at any size


@lru_cache(maxsize=256)
def _flowlogs_bytes(namespace: str, windows: int) -> tuple[int, int]:
    """Compressed bytes and decoded size of a flowlogs shard of `windows` replay rows."""
    return codec_v3.measure(namespace, flowlogs_rows(namespace, replay_rows=windows))


def _flowlogs_estimate(settings: FlowLogsSettings, shape: str) -> ShardEstimate:
    """The cursor plus one row per replay window (no seen rows: the shape does not matter)."""
    # A tiny pollSeconds makes the ratio overflow to infinity; far past any limit, so cap it.
    ratio = min(settings.replay_window_seconds / settings.poll_seconds, _MAX_WINDOWS)
    windows = max(1, math.ceil(ratio))
    encoded = min(windows, PROJECTION_MAX_ENCODED_ROWS)
    size, raw = _flowlogs_bytes(settings.namespace, encoded)
    exact = windows == encoded
    return ShardEstimate(
        knob="replayWindowSeconds",
        rows=windows + 1,
        compressed_bytes=size if exact else math.ceil(size / (encoded + 1) * (windows + 1)),
        extrapolated=not exact,
        max_rows=None,
        raw_bytes=raw if exact else math.ceil(raw / (encoded + 1) * (windows + 1)),
    )


def _flowlogs(store: CheckpointMap, sink: Sink, settings: FlowLogsSettings) -> Collector:
    return FlowLogsCollector(
        store,
        sink,
        url=settings.url,
        tailnet=settings.tailnet,
        poll_seconds=settings.poll_seconds,
        replay_window_seconds=settings.replay_window_seconds,
    )


FLOWLOGS = CollectorKindSpec(
    name=naming.FLOWLOGS,
    shape=naming.COLLECTOR_KINDS[naming.FLOWLOGS],
    instance_fields=(),
    settings=_flowlogs_settings,
    estimate=_flowlogs_estimate,
    build=_flowlogs,
)
