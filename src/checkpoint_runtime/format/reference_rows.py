"""Deterministic checkpoint workloads of the reference configurations (tests, projection,
benchmarks).

Two shapes of seen rows:
- `old-design`: base64 object keys over a shared prefix and RFC 3339 nanosecond timestamps that
  differ in their last characters; calibrated so one feed at 5000 seen rows is ~785,001 bytes in the
  legacy JSON form (157 bytes a row), the figure the old design measured.
- `uuid`: realistic high-entropy object names (random UUIDs) with unrelated nanosecond timestamps.

Every random bit comes from `getrandbits`, so `entropy_bits` is exact: it is the lower bound on
what any lossless encoding of the rows can take.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime

from checkpoint_runtime.format.naming import (
    CURSOR,
    FLOWLOGS,
    GAP,
    OBJECTSTORE,
    REPLAY,
    SCAN,
    SEEN,
    collector_namespace,
    object_id,
    rfc3339_from_ns,
)

SHAPES = ("old-design", "uuid")
LEGACY_ROW_BYTES = 157  # `"key":"value",` of one seen row in the old design's JSON
EPOCH_NS = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp()) * 1_000_000_000
TIMESTAMP_CHARS = len("2026-03-01T00:00:00.000000000Z")

# Random bits a row draws, per shape: (timestamp step, object-name randomness).
_STEP_BITS = {"old-design": 16, "uuid": 40}
_NAME_BITS = {"old-design": 4, "uuid": 122}


def _uuid4(rng: random.Random) -> str:
    bits = rng.getrandbits(122)
    # Insert the version (4) and variant (10) bits where a real UUIDv4 carries them.
    value = (bits >> 76) << 80 | 0x4 << 76 | ((bits >> 62) & 0xFFF) << 64 | 0b10 << 62
    value |= bits & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass
class FeedWorkload:
    """Seen, gap, cursor and scan rows of one object-store feed."""

    shard: str
    seen_rows: int
    shape: str = "old-design"
    seed: int = 0
    gap_rows: int = 0
    rows: dict[str, str] = field(init=False)
    entropy_bits: int = field(init=False)

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"unknown workload shape {self.shape!r}; one of {SHAPES}")
        rng = random.Random(f"{self.seed}:{self.shape}:{self.shard}")
        seen_prefix = f"{self.shard}/{SEEN}/"
        # Object names share the feed's prefix; its length makes a legacy row 157 bytes.
        id_chars = LEGACY_ROW_BYTES - 6 - TIMESTAMP_CHARS - len(seen_prefix)
        base = f"logs/{self.shard.replace('/', '-')}/2026/03/01/"
        rows: dict[str, str] = {}
        ns = EPOCH_NS
        bits = 0
        name = ""
        for index in range(self.seen_rows):
            ns += 1 + rng.getrandbits(_STEP_BITS[self.shape])
            if self.shape == "old-design":
                tail = f"{index:08d}-{rng.getrandbits(_NAME_BITS[self.shape]):x}.json.gz"
            else:
                tail = f"{_uuid4(rng)}.json.gz"
            bits += _STEP_BITS[self.shape] + _NAME_BITS[self.shape]
            filler_chars = max(0, (id_chars * 3) // 4 - len(base) - len(tail))
            name = base + "x" * filler_chars + tail
            rows[seen_prefix + object_id(name)] = rfc3339_from_ns(ns)
        for index in range(self.gap_rows):
            start = EPOCH_NS + index * 60_000_000_000
            rows[f"{self.shard}/{GAP}/{index:06d}"] = json.dumps(
                {"from": rfc3339_from_ns(start), "to": rfc3339_from_ns(start + 30_000_000_000)},
                separators=(",", ":"),
            )
        rows[f"{self.shard}/{CURSOR}"] = name
        rows[f"{self.shard}/{SCAN}"] = json.dumps(
            {"after": name, "listed": self.seen_rows, "at": rfc3339_from_ns(ns)},
            separators=(",", ":"),
        )
        self.rows = rows
        self.entropy_bits = bits


def flowlogs_rows(shard: str, replay_rows: int = 12, seed: int = 0) -> dict[str, str]:
    """A flowlogs collector's cursor and replay windows."""
    rng = random.Random(f"{seed}:flowlogs:{shard}")
    cursor = EPOCH_NS + rng.getrandbits(40)
    rows = {f"{shard}/{CURSOR}": rfc3339_from_ns(cursor)}
    for index in range(replay_rows):
        start = cursor - (index + 1) * 300_000_000_000
        window = {"from": rfc3339_from_ns(start), "to": rfc3339_from_ns(start + 300_000_000_000)}
        key = f"{shard}/{REPLAY}/{rfc3339_from_ns(start)}"
        rows[key] = json.dumps(window, separators=(",", ":"))
    return rows


@dataclass(frozen=True)
class Configuration:
    """One reference configuration: tailnets x feeds, each feed at max_seen_keys."""

    name: str
    tailnets: int
    feeds_per_tailnet: int

    def feed_shards(self) -> list[str]:
        return [
            collector_namespace(OBJECTSTORE, f"tailnet-{t + 1}", f"feed-{f + 1}")
            for t in range(self.tailnets)
            for f in range(self.feeds_per_tailnet)
        ]

    def flowlogs_shards(self) -> list[str]:
        return [collector_namespace(FLOWLOGS, f"tailnet-{t + 1}") for t in range(self.tailnets)]

    def rows(
        self, seen_rows: int = 5000, shape: str = "old-design", seed: int = 0
    ) -> dict[str, str]:
        """Every row of the configuration, as the legacy map would hold it."""
        rows: dict[str, str] = {}
        for shard in self.feed_shards():
            rows.update(FeedWorkload(shard, seen_rows, shape, seed).rows)
        for shard in self.flowlogs_shards():
            rows.update(flowlogs_rows(shard, seed=seed))
        return rows


CONFIGURATIONS = (
    Configuration("one-feed", tailnets=1, feeds_per_tailnet=1),
    Configuration("three-feeds", tailnets=1, feeds_per_tailnet=3),
    Configuration("three-tailnets", tailnets=3, feeds_per_tailnet=3),
)
