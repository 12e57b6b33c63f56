"""Codec benchmark: the gzip-shards-v2 blob (a base member) beside the baseline.

v2 is the previous shard format (still read, and written by the downgrade path); the base the
store writes now is the row block, measured against the same baseline by bench.rowblock, which
decides the base encoding's targets.

The baseline is what the old design and Helm do: gzip of the sorted compact JSON map. Both run
in this one process, interleaved repetition by repetition (the order rotates), and every time
is the median over the repetitions. Two reference workloads (one object-store feed shard each):
`old-design` (base64 names over a shared prefix) and `uuid` (high-entropy object names).

A second table compares deflate back-ends on the same base envelope bytes (zlib, libdeflate
through the `deflate` package, and ISA-L through `isal` when it is installed): the writer uses
libdeflate, chosen by these figures.

The entropy bound is derived from the random bits the generator draws (see ENTROPY_NOTES) and
cross-checked against the generator's own count.

    PYTHONPATH=scripts .venv/bin/python -m bench.codec [--quick]
"""

from __future__ import annotations

import base64
import importlib
import json
import statistics
import sys
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.report import Report, Table, emit, parser
from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.reference_rows import SHAPES, FeedWorkload
from checkpoint_testenv.baseline import baseline_decode, baseline_encode
from checkpoint_testenv.support.timing import alternated, rotated, timed_ms

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
        for name, operation, call in rotated(operations, repetition):
            samples[(name, operation)].append(timed_ms(call, collect_first=True))
        # The decodes once more, back to back in alternating order, for a paired ratio.
        pair = {
            name: timed_ms(call, collect_first=True)
            for name, call in alternated(decodes, repetition + 1)
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
class CodecMeasured:
    points: list[Point]
    at_5000: dict[str, Point]
    most_rows: dict[str, dict[str, int]]
    """shape -> codec (and "bound") -> most seen rows in one shard."""
    exact: bool
    deflaters: list[Deflater] = field(default_factory=list)


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
        for name, compress in rotated(back_ends, repetition):
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


def _most_rows(shape: str, source: RowSource, measured: list[Point], quick: bool) -> dict[str, int]:
    """Most seen rows in one shard per codec (and the entropy bound's)."""
    most = {"bound": int(LIMIT * 8 // ENTROPY_BITS_PER_ROW[shape])}
    for name, (encode, _) in CODECS.items():
        # Guess from the largest measured size that fits (bytes per row fall as rows grow).
        fitting = [p for p in measured if p.bytes[name] <= LIMIT]
        nearest = max(fitting, key=lambda point: point.seen_rows)
        guess = int(LIMIT * nearest.seen_rows / nearest.bytes[name])
        most[name] = guess if quick else most_rows(source, encode, guess)
    return most


def _sweep(shape: str, source: RowSource, quick: bool) -> list[Point]:
    """The sweep points of one workload, up to the first past the limit."""
    found = []
    for size in _sweep_sizes(quick):
        if size > source.most:
            break
        point = measure(shape, source.rows(size), size, _repetitions(size, quick))
        found.append(point)
        if point.bytes["envelope"] > LIMIT:
            break
    return found


def measure_all(quick: bool = False) -> CodecMeasured:
    measured = CodecMeasured([], {}, {}, exact=not quick)
    for shape in SHAPES:
        ceiling = 2000 if quick else CEILING[shape]
        source = RowSource(shape, max(ceiling, ROWS_AT))
        source.check(min(1000, ceiling))
        at_5000 = measure(shape, source.rows(ROWS_AT), ROWS_AT, 1 if quick else 41)
        measured.at_5000[shape] = at_5000
        measured.deflaters += measure_deflaters(shape, source.rows(ROWS_AT), 1 if quick else 21)
        shape_points = _sweep(shape, source, quick)
        measured.points += shape_points
        measured.most_rows[shape] = _most_rows(shape, source, [at_5000, *shape_points], quick)
    return measured


def run(quick: bool = False) -> Report:
    """The v2 envelope against its baseline: tables and the plots' data (`measured`); the
    base encoding's targets are decided by bench.rowblock (the row block the store writes)."""
    measured = measure_all(quick)
    return Report("Codec", tables(measured), measured=measured)


# -- tables -----------------------------------------------------------------------------------


def _kb(value: float) -> str:
    return f"{value:,.0f}"


HEADLINE_NOTE = (
    "Baseline: gzip.compress(json.dumps(rows, sort_keys=True, separators=(',', ':'))"
    ".encode(), mtime=0). Envelope: format.codec.encode_shard/decode_shard "
    "(a gzip-shards-v2 base member, libdeflate level 9; decode includes every "
    "fail-closed check). Decode ratio: the median over repetitions of envelope / "
    "baseline decode timed back to back (alternating which goes first), so a load swing "
    "between repetitions does not skew it; the ms columns are medians of the rotation."
)
DEFLATERS_NOTE = (
    "Raw deflate streams of the same envelope bytes, interleaved. The writer uses "
    "libdeflate level 9: smaller than zlib 9 at a fraction of its time; level 6 is "
    "faster but larger, level 12 smaller still but several times slower, ISA-L fastest "
    "but largest. ISA-L rows appear "
    "when `isal` is installed (pip install isal==1.9.1); it is not a dependency."
)


def _over(size: float) -> str:
    return _kb(size) + (" (over)" if size > LIMIT else "")


def _per_row(point: Point, size: float) -> str:
    return f"{size / point.seen_rows:.2f}"


def headline_table(measured: CodecMeasured) -> Table:
    return Table.of(
        f"Codec at {ROWS_AT} seen rows (one feed shard; median of interleaved repetitions)",
        [
            ("workload", lambda p: p.shape),
            ("envelope bytes", lambda p: _kb(p.bytes["envelope"])),
            ("baseline bytes", lambda p: _kb(p.bytes["baseline"])),
            ("envelope / baseline", lambda p: f"{p.ratio:.3f}"),
            ("entropy bound", lambda p: _kb(p.bound_bytes)),
            ("envelope / bound", lambda p: f"{p.bytes['envelope'] / p.bound_bytes:.2f}"),
            ("envelope B/row", lambda p: _per_row(p, p.bytes["envelope"])),
            ("baseline B/row", lambda p: _per_row(p, p.bytes["baseline"])),
            ("bound B/row", lambda p: _per_row(p, p.bound_bytes)),
            ("encode ms (env / base)", lambda p: _pair_ms(p.encode_ms)),
            ("decode ms (env / base)", lambda p: _pair_ms(p.decode_ms)),
            ("decode ratio", lambda p: f"{p.decode_ratio:.2f}"),
        ],
        measured.at_5000.values(),
        [HEADLINE_NOTE, ENTROPY_NOTES],
    )


def _pair_ms(times: dict[str, float]) -> str:
    return f"{times['envelope']:.1f} / {times['baseline']:.1f}"


def sweep_table(measured: CodecMeasured) -> Table:
    return Table.of(
        "Codec sweep (bytes per shard and per row; median times)",
        [
            ("workload", lambda p: p.shape),
            ("seen rows", lambda p: f"{p.seen_rows:,}"),
            ("envelope bytes", lambda p: _over(p.bytes["envelope"])),
            ("baseline bytes", lambda p: _over(p.bytes["baseline"])),
            ("ratio", lambda p: f"{p.ratio:.3f}"),
            ("bound bytes", lambda p: _kb(p.bound_bytes)),
            ("env B/row", lambda p: _per_row(p, p.bytes["envelope"])),
            ("base B/row", lambda p: _per_row(p, p.bytes["baseline"])),
            ("env enc ms", lambda p: f"{p.encode_ms['envelope']:.1f}"),
            ("base enc ms", lambda p: f"{p.encode_ms['baseline']:.1f}"),
            ("env dec ms", lambda p: f"{p.decode_ms['envelope']:.1f}"),
            ("base dec ms", lambda p: f"{p.decode_ms['baseline']:.1f}"),
            ("reps", lambda p: str(p.repetitions)),
        ],
        measured.points,
        [f"(over) = larger than the {LIMIT:,}-byte ConfigMap value limit."],
    )


def capacity_table(measured: CodecMeasured) -> Table:
    how = (
        "bisection with the real encoder" if measured.exact else "estimate from 5000 rows (--quick)"
    )
    return Table.of(
        f"Most seen rows in one shard under {LIMIT:,} bytes ({how})",
        [
            ("workload", lambda item: item[0]),
            ("envelope", lambda item: f"{item[1]['envelope']:,}"),
            ("baseline", lambda item: f"{item[1]['baseline']:,}"),
            (
                "envelope / baseline",
                lambda item: f"{item[1]['envelope'] / item[1]['baseline']:.2f}x",
            ),
            ("entropy bound", lambda item: f"{item[1]['bound']:,}"),
        ],
        measured.most_rows.items(),
        ["Rows counted are seen rows; each shard also holds its cursor and scan rows."],
    )


def deflaters_table(measured: CodecMeasured) -> Table:
    return Table.of(
        f"Deflate back-ends on the v2 base envelope at {ROWS_AT} seen rows (median ms)",
        [
            ("workload", lambda item: item.shape),
            ("back-end", lambda item: item.name),
            ("envelope bytes", lambda item: _kb(item.envelope_bytes)),
            ("compressed", lambda item: _kb(item.compressed_bytes)),
            ("/ baseline", lambda item: f"{item.compressed_bytes / item.baseline_bytes:.3f}"),
            ("ms", lambda item: f"{item.median_ms:.2f}"),
        ],
        measured.deflaters,
        [DEFLATERS_NOTE],
    )


def tables(measured: CodecMeasured) -> list[Table]:
    return [
        headline_table(measured),
        deflaters_table(measured),
        sweep_table(measured),
        capacity_table(measured),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__, "small sizes, one repetition").parse_args(argv)
    return emit(run(quick=args.quick), args)


if __name__ == "__main__":
    sys.exit(main())
