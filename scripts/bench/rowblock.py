"""Row-block benchmark: the v3 base (format/rowblock.py) beside the baseline and the v2 envelope.

The baseline is gzip + json.loads of the sorted compact JSON map (checkpoint_testenv.baseline).
The row block is measured as the store writes it: a v3 head whose inline base member is the
row block (codec_v3.encode_inline + encode_head: libdeflate level 9; zlib level 9 of the bare
row block beside it for bytes), decoded by codec_v3.decode_head + assemble, every fail-closed
check included (bounded inflate, the head and member lines, rowblock.decode, rows of the
shard). The v2 envelope (format.codec, what shards hold today) is timed in
the same rotation. Both reference workloads (one object-store feed shard each, the codec
benchmark's), 5000 seen rows; every repetition runs every decode once, the order rotating,
then the row block and the baseline back to back (alternating which goes first) for a paired
ratio. Entropy bound: bench.codec's (the random bits the generator draws).

    PYTHONPATH=scripts .venv/bin/python -m bench.rowblock [--quick] [--rows N]
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

from bench import codec as codec_bench
from bench.report import Report, Table, Target, emit, parser, verdict
from checkpoint_runtime.format import codec, codec_v3, rowblock
from checkpoint_runtime.format.codec import gzip_fixed
from checkpoint_runtime.format.codec_v3 import Manifest
from checkpoint_runtime.format.reference_rows import SHAPES, FeedWorkload
from checkpoint_testenv.baseline import baseline_decode, baseline_encode
from checkpoint_testenv.support.timing import alternated, rotated, timed_ms

BYTES_TARGET = {"old-design": 0.62, "uuid": 0.70}
DECODE_TARGET = 1.0


def measure(shape: str, seen_rows: int, repetitions: int) -> tuple[list[str], Target]:
    shard = codec_bench.SHARD
    rows = FeedWorkload(shard, seen_rows, shape).rows
    payload = rowblock.encode(rows, shard=shard)
    inline, raw = codec_v3.encode_inline(shard, rows)
    block = codec_v3.encode_head(shard, Manifest(), len(rows), inline, raw, {}, len(rows)).blob
    baseline = baseline_encode(rows)
    envelope = codec.encode_shard(shard, rows).blob
    decoders: dict[str, Callable[[], Any]] = {
        "rowblock": lambda: codec_v3.assemble(shard, codec_v3.decode_head(shard, block), []).rows,
        "baseline": lambda: baseline_decode(baseline),
        "v2": lambda: codec.decode_shard(shard, envelope),
    }
    for name, decode in decoders.items():
        if decode() != rows:
            raise RuntimeError(f"{name} did not round-trip {shape}")
    samples: dict[str, list[float]] = {name: [] for name in decoders}
    paired: list[float] = []
    order = list(decoders.items())
    for repetition in range(repetitions):
        for name, decode in rotated(order, repetition):
            samples[name].append(timed_ms(decode, collect_first=True))
        pair = [("rowblock", decoders["rowblock"]), ("baseline", decoders["baseline"])]
        times = {
            name: timed_ms(call, collect_first=True) for name, call in alternated(pair, repetition)
        }
        paired.append(times["rowblock"] / times["baseline"])
    median = {name: statistics.median(values) for name, values in samples.items()}
    bound = codec_bench.entropy_bytes(shape, seen_rows)
    ratio = len(block) / len(baseline)
    decode_ratio = statistics.median(paired)
    met = ratio <= BYTES_TARGET[shape] and decode_ratio <= DECODE_TARGET
    target = Target(
        f"base encoding (row block), {shape} workload ({seen_rows} rows)",
        f"bytes <= {BYTES_TARGET[shape]}x baseline, decode <= {DECODE_TARGET:g}x",
        f"bytes {ratio:.3f}x, decode {decode_ratio:.2f}x",
        met,
        f"bytes {len(block):,} vs baseline {len(baseline):,} "
        f"({verdict(ratio, BYTES_TARGET[shape])}), {len(block) / bound:.2f}x the entropy bound "
        f"(v2 {len(envelope) / bound:.2f}x); decode {median['rowblock']:.2f} ms vs "
        f"{median['baseline']:.2f} ms ({verdict(decode_ratio, DECODE_TARGET)}, paired median).",
    )
    row = [
        shape,
        f"{len(block):,}",
        f"{len(gzip_fixed(payload)):,}",
        f"{len(baseline):,}",
        f"{len(envelope):,}",
        f"{ratio:.3f} (<= {BYTES_TARGET[shape]})",
        f"{len(block) / bound:.2f} / {len(envelope) / bound:.2f}",
        f"{median['rowblock']:.2f} / {median['baseline']:.2f} / {median['v2']:.2f}",
        f"{decode_ratio:.2f} (<= {DECODE_TARGET})",
        f"{min(samples['rowblock']) / min(samples['baseline']):.2f}",
        "met" if met else "MISSED",
    ]
    return row, target


def run(quick: bool = False, seen_rows: int | None = None) -> Report:
    """The row block beside the baseline and the v2 envelope: one table."""
    count = seen_rows or (1000 if quick else codec_bench.ROWS_AT)
    repetitions = 3 if quick else 41
    measured = [measure(shape, count, repetitions) for shape in SHAPES]
    table = Table(
        f"Row block at {count} seen rows (one feed shard; decode ms are medians)",
        [
            "workload",
            "row block bytes (libdeflate 9)",
            "(zlib 9)",
            "baseline bytes",
            "v2 envelope bytes",
            "row block / baseline",
            "/ entropy bound (row block / v2)",
            "decode ms (row block / baseline / v2)",
            "decode ratio (paired median)",
            "ratio of minimums",
            "verdict",
        ],
        [row for row, _ in measured],
        [
            "Row block: a v3 head with its inline row-block base member, as the store writes "
            "it (libdeflate 9); decode = codec_v3.decode_head + assemble with every check. "
            "Baseline: "
            "gzip.compress(json.dumps(sorted map)) and gzip.decompress + json.loads. v2: "
            "format.codec.encode_shard/decode_shard. Decode ratio: the median over repetitions of "
            "row block / baseline decode timed back to back, alternating which goes first; the "
            f"ms columns are medians of the rotation ({repetitions} repetitions).",
            codec_bench.ENTROPY_NOTES,
        ],
    )
    return Report("Row block layout", [table], [target for _, target in measured])


def main(argv: Sequence[str] | None = None) -> int:
    found = parser(__doc__, "1000 rows, 3 repetitions")
    found.add_argument("--rows", type=int, help="seen rows per shard (default 5000)")
    args = found.parse_args(argv)
    return emit(run(args.quick, args.rows), args)


if __name__ == "__main__":
    sys.exit(main())
