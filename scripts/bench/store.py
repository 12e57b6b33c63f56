"""Shard sizes of the reference configurations beside the old design's figures (`just bench-store`).

For each configuration (each feed at max_seen_keys 5000, with ordinary flowlogs cursor and
replay rows beside them): the legacy single-ConfigMap raw bytes, shard count, total and largest
compressed shard, bytes per row, and the old design's total / largest. The old design measured
feed shards only, so the feed-only total is printed next to the all-shards total. Sizes are
properties of the bytes, not timings: the numbers are exact and repeatable.

    PYTHONPATH=scripts .venv/bin/python -m bench.store [--shape old-design|uuid|all] [--rows N]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from bench.report import Report, Table, emit, parser
from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT, OLD_DESIGN_FIGURES
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.legacy import encode_legacy
from checkpoint_runtime.format.naming import shard_key
from checkpoint_runtime.format.reference_rows import CONFIGURATIONS, SHAPES, Configuration
from checkpoint_testenv.baseline import baseline_encode

FOOTNOTE = (
    "OLD TOTAL / LARGEST: the old design's figures (feed shards only, measured on its own "
    "generator). BASELINE FEEDS / LARGEST: the old design's encoding (gzip of the sorted "
    "compact JSON map) of each feed shard of THIS workload - the like-for-like comparison with "
    "FEED TOTAL / LARGEST. GZIP(LEGACY): the whole legacy map as one value."
)


@dataclass(frozen=True)
class Measured:
    configuration: str
    feeds: int
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
        feeds=len(feeds),
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


def _old_design(m: Measured) -> str:
    old_total, old_largest = OLD_DESIGN_FIGURES[m.configuration]
    return f"{old_total:,} / {old_largest:,}"


def configuration_table(shape: str, seen_rows: int) -> Table:
    """One row per reference configuration."""
    return Table.of(
        f"reference configurations, workload {shape!r}, {seen_rows} seen rows per feed",
        [
            ("CONFIGURATION", lambda m: m.configuration),
            ("LEGACY RAW", lambda m: f"{m.legacy_raw:,}"),
            ("RAW/FEED", lambda m: f"{m.legacy_raw // m.feeds:,}"),
            ("LEGACY FITS", lambda m: "yes" if m.legacy_raw <= CONFIGMAP_VALUE_LIMIT else "NO"),
            ("SHARDS", lambda m: str(m.shards)),
            ("TOTAL", lambda m: f"{m.total:,}"),
            ("FEED TOTAL", lambda m: f"{m.feed_total:,}"),
            ("LARGEST", lambda m: f"{m.largest:,}"),
            ("HEADROOM", lambda m: f"{(1 - m.largest / CONFIGMAP_VALUE_LIMIT) * 100:.1f}%"),
            ("B/ROW", lambda m: f"{m.total / m.rows:.2f}"),
            ("OLD TOTAL / LARGEST", _old_design),
            (
                "BASELINE FEEDS / LARGEST",
                lambda m: f"{m.baseline_feed_total:,} / {m.baseline_largest:,}",
            ),
            ("GZIP(LEGACY)", lambda m: f"{m.legacy_gzip:,}"),
        ],
        [measure(configuration, shape, seen_rows) for configuration in CONFIGURATIONS],
        [
            "compressed bytes are the gzip-shards-v2 blobs the API server counts; limit "
            f"{CONFIGMAP_VALUE_LIMIT:,} per shard",
            FOOTNOTE,
        ],
    )


def run(quick: bool = False, shapes: Sequence[str] = SHAPES, seen_rows: int = 5000) -> Report:
    """Shard sizes of the reference configurations (1000 rows per feed with `quick`)."""
    rows = 1000 if quick else seen_rows
    tables = [configuration_table(shape, rows) for shape in shapes]
    return Report("Shard sizes of the reference configurations", tables)


def main(argv: Sequence[str] | None = None) -> int:
    found = parser(__doc__, "1000 seen rows per feed")
    found.set_defaults(format="text")
    found.add_argument("--shape", choices=(*SHAPES, "all"), default="all")
    found.add_argument("--rows", type=int, default=5000, help="seen rows per feed")
    args = found.parse_args(argv)
    shapes = SHAPES if args.shape == "all" else (args.shape,)
    return emit(run(args.quick, shapes, args.rows), args)


if __name__ == "__main__":
    sys.exit(main())
