"""Shard sizes of the reference configurations beside the old design's figures (`just bench-store`).

For each configuration (each feed at max_seen_keys 5000, with ordinary flowlogs cursor and
replay rows beside them): the legacy single-ConfigMap raw bytes, shard count, total and largest
compressed shard, bytes per row, and the old design's total / largest. The old design measured
feed shards only, so the feed-only total is printed next to the all-shards total. Sizes are
properties of the bytes, not timings: the numbers are exact and repeatable.

    .venv/bin/python scripts/bench/store.py [--shape old-design|uuid|all] [--rows N]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT, OLD_DESIGN_FIGURES
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.keys import shard_key
from checkpoint_runtime.format.legacy import encode_legacy
from checkpoint_runtime.format.reference_rows import CONFIGURATIONS, SHAPES, Configuration
from checkpoint_runtime.ops.inspection import table
from checkpoint_testenv.baseline import baseline_encode


@dataclass(frozen=True)
class Measured:
    configuration: str
    legacy_raw: int
    shards: int
    total: int
    feed_total: int
    largest: int
    rows: int
    legacy_gzip: int
    baseline_feed_total: int
    baseline_largest: int


def measure(configuration: Configuration, shape: str, seen_rows: int) -> Measured:
    rows = configuration.rows(seen_rows=seen_rows, shape=shape)
    by_shard: dict[str, dict[str, str]] = {}
    for key, value in rows.items():
        by_shard.setdefault(shard_key(key), {})[key] = value
    sizes = {s: codec.encode_shard(s, r).compressed_bytes for s, r in by_shard.items()}
    feeds = set(configuration.feed_shards())
    baseline = {s: len(baseline_encode(by_shard[s])) for s in feeds}
    return Measured(
        configuration=configuration.name,
        legacy_raw=len(encode_legacy(rows)),
        shards=len(sizes),
        total=sum(sizes.values()),
        feed_total=sum(size for shard, size in sizes.items() if shard in feeds),
        largest=max(sizes.values()),
        rows=len(rows),
        legacy_gzip=len(baseline_encode(rows)),
        baseline_feed_total=sum(baseline.values()),
        baseline_largest=max(baseline.values()),
    )


def report(shape: str, seen_rows: int) -> str:
    lines = []
    for configuration in CONFIGURATIONS:
        m = measure(configuration, shape, seen_rows)
        old_total, old_largest = OLD_DESIGN_FIGURES[configuration.name]
        feeds = len(configuration.feed_shards())
        lines.append(
            {
                "configuration": m.configuration,
                "legacy_raw": f"{m.legacy_raw:,}",
                "raw_per_feed": f"{m.legacy_raw // feeds:,}",
                "fits_legacy": "yes" if m.legacy_raw <= CONFIGMAP_VALUE_LIMIT else "NO",
                "shards": m.shards,
                "total": f"{m.total:,}",
                "feed_total": f"{m.feed_total:,}",
                "largest": f"{m.largest:,}",
                "headroom": f"{(1 - m.largest / CONFIGMAP_VALUE_LIMIT) * 100:.1f}%",
                "bytes_per_row": f"{m.total / m.rows:.2f}",
                "old_design": f"{old_total:,} / {old_largest:,}",
                "baseline": f"{m.baseline_feed_total:,} / {m.baseline_largest:,}",
                "legacy_gzip": f"{m.legacy_gzip:,}",
            }
        )
    columns = (
        ("configuration", "CONFIGURATION"),
        ("legacy_raw", "LEGACY RAW"),
        ("raw_per_feed", "RAW/FEED"),
        ("fits_legacy", "LEGACY FITS"),
        ("shards", "SHARDS"),
        ("total", "TOTAL"),
        ("feed_total", "FEED TOTAL"),
        ("largest", "LARGEST"),
        ("headroom", "HEADROOM"),
        ("bytes_per_row", "B/ROW"),
        ("old_design", "OLD TOTAL / LARGEST"),
        ("baseline", "BASELINE FEEDS / LARGEST"),
        ("legacy_gzip", "GZIP(LEGACY)"),
    )
    return table(lines, columns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=(*SHAPES, "all"), default="all")
    parser.add_argument("--rows", type=int, default=5000, help="seen rows per feed")
    args = parser.parse_args()
    for shape in SHAPES if args.shape == "all" else (args.shape,):
        print(f"\nreference configurations, workload {shape!r}, {args.rows} seen rows per feed")
        print(
            "(compressed bytes are the gzip-shards-v2 blobs the API server counts; limit "
            f"{CONFIGMAP_VALUE_LIMIT:,} per shard)\n"
        )
        print(report(shape, args.rows))
    print(
        "\nOLD TOTAL / LARGEST: the old design's figures (feed shards only, measured on"
        " its own generator). BASELINE FEEDS / LARGEST: the old design's encoding (gzip of the"
        " sorted compact JSON map) of each feed shard of THIS workload - the like-for-like"
        " comparison with FEED TOTAL / LARGEST. GZIP(LEGACY): the whole legacy map as one value."
    )


if __name__ == "__main__":
    main()
