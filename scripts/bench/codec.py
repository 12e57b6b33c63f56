"""Codec benchmark: our gzip-shards-v2 blob (a base member) beside the baseline.

The baseline is what the old design and Helm do: gzip of the sorted compact JSON map. Both run
in this one process, interleaved repetition by repetition (the order rotates), and every time
is the median over the repetitions. Two reference workloads (one object-store feed shard each):
`old-design` (base64 names over a shared prefix) and `uuid` (high-entropy object names).

A second table compares deflate back-ends on the same base envelope bytes (zlib, libdeflate
through the `deflate` package, and ISA-L through `isal` when it is installed): the writer uses
libdeflate, chosen by these figures.

The entropy bound is derived from the random bits the generator draws (see ENTROPY_NOTES) and
cross-checked against the generator's own count.

    .venv/bin/python scripts/bench/codec.py [--quick]
"""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import statistics
import sys
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.reference_rows import SHAPES, FeedWorkload
from checkpoint_testenv.baseline import baseline_decode, baseline_encode
from checkpoint_testenv.benchreport import Table, timed_ms

SHARD = "tailnet-1/objectstore/feed-1"
ROWS_AT = 5000
LIMIT = CONFIGMAP_VALUE_LIMIT

# Random bits one seen row draws in format.reference_rows.FeedWorkload, read off the code:
#   old-design: `1 + getrandbits(16)` nanoseconds of timestamp step (uniform over 2^16 values)
#               + `getrandbits(4)` in the object name's tail (the rest of the name is the row
#               index and a fixed prefix/filler): 16 + 4 = 20 bits.
#   uuid:       `1 + getrandbits(40)` of timestamp step + a UUIDv4 from `getrandbits(122)`
#               (the 6 version/variant bits are fixed): 40 + 122 = 162 bits.
# The cursor and scan rows are functions of the last row, so they add nothing. The map loses no
# order information: timestamps strictly increase, so sorting by value recovers the draw
# sequence; hence the map's entropy is exactly the sum of the draws (uuid collisions aside).
ENTROPY_BITS_PER_ROW = {"old-design": 16 + 4, "uuid": 40 + 122}
ENTROPY_NOTES = (
    "Entropy bound = random bits drawn by the generator / 8. Per seen row: old-design 16 bits "
    "(timestamp step `1 + getrandbits(16)`) + 4 bits (name tail `getrandbits(4)`) = 20 bits; "
    "uuid 40 bits (timestamp step) + 122 bits (UUIDv4 random bits) = 162 bits. Cursor and scan "
    "rows derive from the last seen row (0 bits); timestamps strictly increase, so the map keeps "
    "the draw order and its entropy equals the bits drawn. Checked against "
    "FeedWorkload.entropy_bits."
)


# -- the two codecs ---------------------------------------------------------------------------


def envelope_encode(rows: Mapping[str, str]) -> bytes:
    return codec.encode_shard(SHARD, rows).blob


def envelope_decode(blob: bytes) -> dict[str, str]:
    return codec.decode_shard(SHARD, blob)


CODECS: dict[str, tuple[Callable[[Mapping[str, str]], bytes], Callable[[bytes], Any]]] = {
    "envelope": (envelope_encode, envelope_decode),
    "baseline": (baseline_encode, baseline_decode),
}


# -- workloads --------------------------------------------------------------------------------


class RowSource:
    """Rows of FeedWorkload(SHARD, n, shape) for any n up to `most`, from one generation.

    The generator draws row by row, so n rows are the first n seen rows of a longer run plus
    cursor and scan rows rebuilt from the n-th; `check` proves that against the generator.
    """

    def __init__(self, shape: str, most: int) -> None:
        self.shape = shape
        self.most = most
        self._seen = list(FeedWorkload(SHARD, most, shape).rows.items())[:most]

    def rows(self, count: int) -> dict[str, str]:
        if count > self.most:
            raise ValueError(f"{count} rows asked of a source of {self.most}")
        rows = dict(self._seen[:count])
        if count == 0:
            return FeedWorkload(SHARD, 0, self.shape).rows
        last_key, last_stamp = self._seen[count - 1]
        encoded = last_key.rsplit("/", 1)[1]
        name = base64.b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        rows[f"{SHARD}/cursor"] = name
        scan = {"after": name, "listed": count, "at": last_stamp}
        rows[f"{SHARD}/scan"] = json.dumps(scan, separators=(",", ":"))
        return rows

    def check(self, count: int) -> None:
        expected = FeedWorkload(SHARD, count, self.shape).rows
        if self.rows(count) != expected:
            raise RuntimeError(f"RowSource({self.shape}) diverged from FeedWorkload at {count}")


def entropy_bytes(shape: str, seen_rows: int) -> float:
    generated = FeedWorkload(SHARD, min(seen_rows, 50), shape)
    if generated.entropy_bits != ENTROPY_BITS_PER_ROW[shape] * min(seen_rows, 50):
        raise RuntimeError(f"the analytic entropy of {shape} disagrees with the generator")
    return ENTROPY_BITS_PER_ROW[shape] * seen_rows / 8


# -- measuring --------------------------------------------------------------------------------


@dataclass
class Point:
    """One workload size: bytes of both codecs, their median times, and the bound."""

    shape: str
    seen_rows: int
    bytes: dict[str, int]
    encode_ms: dict[str, float]
    decode_ms: dict[str, float]
    bound_bytes: float
    repetitions: int
    paired_decode_ratios: list[float] = field(default_factory=list)
    """Per repetition: envelope decode / baseline decode (the two run back to back)."""

    @property
    def ratio(self) -> float:
        return self.bytes["envelope"] / self.bytes["baseline"]

    @property
    def decode_ratio(self) -> float:
        """The median of the paired ratios (robust to load swings between repetitions); the
        ratio of the medians without pairs."""
        if self.paired_decode_ratios:
            return statistics.median(self.paired_decode_ratios)
        return self.decode_ms["envelope"] / self.decode_ms["baseline"]

    @property
    def encode_ratio(self) -> float:
        return self.encode_ms["envelope"] / self.encode_ms["baseline"]


def measure(shape: str, rows: dict[str, str], seen_rows: int, repetitions: int) -> Point:
    """Encode and decode with both codecs, interleaved: each repetition rotates the order."""
    blobs = {name: encode(rows) for name, (encode, _) in CODECS.items()}
    for name, (_, decode) in CODECS.items():
        if decode(blobs[name]) != rows:
            raise RuntimeError(f"{name} did not round-trip {shape} at {seen_rows} rows")
    operations: list[tuple[str, str, Callable[[], Any]]] = []
    for name, (encode, decode) in CODECS.items():
        blob = blobs[name]
        operations.append((name, "encode", lambda encode=encode: encode(rows)))
        operations.append((name, "decode", lambda decode=decode, blob=blob: decode(blob)))
    samples: dict[tuple[str, str], list[float]] = {(n, op): [] for n, op, _ in operations}
    paired: list[float] = []
    decodes = [(name, call) for name, operation, call in operations if operation == "decode"]
    for repetition in range(repetitions):
        shift = repetition % len(operations)
        for name, operation, call in operations[shift:] + operations[:shift]:
            samples[(name, operation)].append(timed_ms(call, collect_first=True))
        # The decodes once more, back to back in alternating order, for a paired ratio.
        pair = {
            name: timed_ms(call, collect_first=True)
            for name, call in decodes[:: 1 if repetition % 2 else -1]
        }
        paired.append(pair["envelope"] / pair["baseline"])
    median = {key: statistics.median(values) for key, values in samples.items()}
    return Point(
        shape=shape,
        seen_rows=seen_rows,
        bytes={name: len(blob) for name, blob in blobs.items()},
        encode_ms={name: median[(name, "encode")] for name in CODECS},
        decode_ms={name: median[(name, "decode")] for name in CODECS},
        bound_bytes=entropy_bytes(shape, seen_rows),
        repetitions=repetitions,
        paired_decode_ratios=paired,
    )


def most_rows(source: RowSource, encode: Callable[[Mapping[str, str]], bytes], guess: int) -> int:
    """The most seen rows whose shard is at most LIMIT bytes, by bisection on the real encoder."""

    def fits(count: int) -> bool:
        return len(encode(source.rows(count))) <= LIMIT

    step = max(guess // 200, 16)
    low, high = max(guess - step, 1), min(guess + step, source.most)
    while not fits(low):
        low, high = max(low - 4 * step, 1), low
    while high < source.most and fits(high):
        low, high = high, min(high + 4 * step, source.most)
    if fits(high):
        raise RuntimeError(f"{source.shape}: {high} rows still fit; raise the sweep's ceiling")
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low


@dataclass
class CodecReport:
    points: list[Point]
    at_5000: dict[str, Point]
    most_rows: dict[str, dict[str, int]]
    """shape -> codec (and "bound") -> most seen rows in one shard."""
    exact: bool
    deflaters: list[Deflater] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


@dataclass
class Deflater:
    shape: str
    name: str
    envelope_bytes: int
    compressed_bytes: int
    baseline_bytes: int
    median_ms: float


def _back_ends() -> dict[str, Callable[[bytes], bytes]]:
    found: dict[str, Callable[[bytes], bytes]] = {
        "zlib 9 (v1 writer)": lambda data: zlib.compress(data, 9),
        "zlib 6": lambda data: zlib.compress(data, 6),
    }
    deflate = importlib.import_module("deflate")
    for level in (6, 9, 12):
        found[f"libdeflate {level}"] = lambda data, level=level: deflate.deflate_compress(
            data, level
        )
    try:
        isal_zlib = importlib.import_module("isal.isal_zlib")
    except ImportError:
        return found
    for level in (1, 3):
        found[f"ISA-L {level}"] = lambda data, level=level: isal_zlib.compress(data, level)
    return found


def measure_deflaters(shape: str, rows: dict[str, str], repetitions: int) -> list[Deflater]:
    """Every back-end on the same base envelope, interleaved, the order rotating."""
    envelope = codec.encode_envelope(SHARD, rows)
    baseline = len(baseline_encode(rows))
    back_ends = list(_back_ends().items())
    samples: dict[str, list[float]] = {name: [] for name, _ in back_ends}
    sizes = {name: len(compress(envelope)) for name, compress in back_ends}
    for repetition in range(repetitions):
        shift = repetition % len(back_ends)
        for name, compress in back_ends[shift:] + back_ends[:shift]:
            samples[name].append(
                timed_ms(lambda compress=compress: compress(envelope), collect_first=True)
            )
    return [
        Deflater(shape, name, len(envelope), sizes[name], baseline, statistics.median(times))
        for name, times in samples.items()
    ]


def _repetitions(seen_rows: int, quick: bool) -> int:
    if quick:
        return 1
    return max(3, min(15, 150_000 // max(seen_rows, 1)))


def _sweep_sizes(quick: bool) -> list[int]:
    if quick:
        return [500, 1000]
    sizes, size = [], 1000.0
    while size <= 400_000:
        sizes.append(int(round(size, -2)))
        size *= 2**0.5
    return sizes


# Rows generated per workload: enough for the first sweep point past the limit (256,000; 45,300).
CEILING = {"old-design": 260_000, "uuid": 46_000}


def run(quick: bool = False) -> CodecReport:
    points: list[Point] = []
    at_5000: dict[str, Point] = {}
    most: dict[str, dict[str, int]] = {}
    deflaters: list[Deflater] = []
    for shape in SHAPES:
        ceiling = 2000 if quick else CEILING[shape]
        source = RowSource(shape, max(ceiling, ROWS_AT))
        source.check(min(1000, ceiling))
        at_5000[shape] = measure(shape, source.rows(ROWS_AT), ROWS_AT, 1 if quick else 41)
        deflaters += measure_deflaters(shape, source.rows(ROWS_AT), 1 if quick else 21)
        shape_points = []
        for size in _sweep_sizes(quick):
            if size > source.most:
                break
            point = measure(shape, source.rows(size), size, _repetitions(size, quick))
            shape_points.append(point)
            if point.bytes["envelope"] > LIMIT:
                break
        points += shape_points
        most[shape] = {"bound": int(LIMIT * 8 // ENTROPY_BITS_PER_ROW[shape])}
        for name, (encode, _) in CODECS.items():
            # Guess from the largest measured size that fits (bytes per row fall as rows grow).
            fitting = [p for p in [at_5000[shape], *shape_points] if p.bytes[name] <= LIMIT]
            nearest = max(fitting, key=lambda point: point.seen_rows)
            guess = int(LIMIT * nearest.seen_rows / nearest.bytes[name])
            most[shape][name] = guess if quick else most_rows(source, encode, guess)
    report = CodecReport(points, at_5000, most, exact=not quick, deflaters=deflaters)
    report.tables = tables(report)
    return report


# -- tables -----------------------------------------------------------------------------------


def _kb(value: float) -> str:
    return f"{value:,.0f}"


def tables(report: CodecReport) -> list[Table]:
    headline = Table(
        f"Codec at {ROWS_AT} seen rows (one feed shard; median of interleaved repetitions)",
        [
            "workload",
            "envelope bytes",
            "baseline bytes",
            "envelope / baseline",
            "entropy bound",
            "envelope / bound",
            "envelope B/row",
            "baseline B/row",
            "bound B/row",
            "encode ms (env / base)",
            "decode ms (env / base)",
            "decode ratio",
        ],
        [],
        [
            "Baseline: gzip.compress(json.dumps(rows, sort_keys=True, separators=(',', ':'))"
            ".encode(), mtime=0). Envelope: format.codec.encode_shard/decode_shard "
            "(a gzip-shards-v2 base member, libdeflate level 9; decode includes every "
            "fail-closed check). Decode ratio: the median over repetitions of envelope / "
            "baseline decode timed back to back (alternating which goes first), so a load swing "
            "between repetitions does not skew it; the ms columns are medians of the rotation.",
            ENTROPY_NOTES,
        ],
    )
    for shape, point in report.at_5000.items():
        rows = point.seen_rows
        headline.rows.append(
            [
                shape,
                _kb(point.bytes["envelope"]),
                _kb(point.bytes["baseline"]),
                f"{point.ratio:.3f}",
                _kb(point.bound_bytes),
                f"{point.bytes['envelope'] / point.bound_bytes:.2f}",
                f"{point.bytes['envelope'] / rows:.2f}",
                f"{point.bytes['baseline'] / rows:.2f}",
                f"{point.bound_bytes / rows:.2f}",
                f"{point.encode_ms['envelope']:.1f} / {point.encode_ms['baseline']:.1f}",
                f"{point.decode_ms['envelope']:.1f} / {point.decode_ms['baseline']:.1f}",
                f"{point.decode_ratio:.2f}",
            ]
        )
    sweep = Table(
        "Codec sweep (bytes per shard and per row; median times)",
        [
            "workload",
            "seen rows",
            "envelope bytes",
            "baseline bytes",
            "ratio",
            "bound bytes",
            "env B/row",
            "base B/row",
            "env enc ms",
            "base enc ms",
            "env dec ms",
            "base dec ms",
            "reps",
        ],
        [
            [
                p.shape,
                f"{p.seen_rows:,}",
                _kb(p.bytes["envelope"]) + (" (over)" if p.bytes["envelope"] > LIMIT else ""),
                _kb(p.bytes["baseline"]) + (" (over)" if p.bytes["baseline"] > LIMIT else ""),
                f"{p.ratio:.3f}",
                _kb(p.bound_bytes),
                f"{p.bytes['envelope'] / p.seen_rows:.2f}",
                f"{p.bytes['baseline'] / p.seen_rows:.2f}",
                f"{p.encode_ms['envelope']:.1f}",
                f"{p.encode_ms['baseline']:.1f}",
                f"{p.decode_ms['envelope']:.1f}",
                f"{p.decode_ms['baseline']:.1f}",
                str(p.repetitions),
            ]
            for p in report.points
        ],
        [f"(over) = larger than the {LIMIT:,}-byte ConfigMap value limit."],
    )
    how = "bisection with the real encoder" if report.exact else "estimate from 5000 rows (--quick)"
    capacity = Table(
        f"Most seen rows in one shard under {LIMIT:,} bytes ({how})",
        ["workload", "envelope", "baseline", "envelope / baseline", "entropy bound"],
        [
            [
                shape,
                f"{most['envelope']:,}",
                f"{most['baseline']:,}",
                f"{most['envelope'] / most['baseline']:.2f}x",
                f"{most['bound']:,}",
            ]
            for shape, most in report.most_rows.items()
        ],
        ["Rows counted are seen rows; each shard also holds its cursor and scan rows."],
    )
    deflaters = Table(
        f"Deflate back-ends on the v2 base envelope at {ROWS_AT} seen rows (median ms)",
        ["workload", "back-end", "envelope bytes", "compressed", "/ baseline", "ms"],
        [
            [
                item.shape,
                item.name,
                _kb(item.envelope_bytes),
                _kb(item.compressed_bytes),
                f"{item.compressed_bytes / item.baseline_bytes:.3f}",
                f"{item.median_ms:.2f}",
            ]
            for item in report.deflaters
        ],
        [
            "Raw deflate streams of the same envelope bytes, interleaved. The writer uses "
            "libdeflate level 9: smaller than zlib 9 at a fraction of its time; level 6 is "
            "faster but larger, level 12 smaller still but several times slower, ISA-L fastest "
            "but largest. ISA-L rows appear "
            "when `isal` is installed (pip install isal==1.9.1); it is not a dependency.",
        ],
    )
    return [headline, deflaters, sweep, capacity]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    args = parser.parse_args(argv)
    report = run(quick=args.quick)
    for table in report.tables:
        print(table.markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
