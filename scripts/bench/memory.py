"""Resident memory of a store holding N uuid seen rows (`python -m bench.memory`).

What the memory projection's per-row constants come from. For each size, one process writes a
feed shard of N reference rows (uuid shape) into a file store (maxChunks 32); a fresh process
then, measuring its own resident set (VmRSS / VmHWM of /proc/self/status; the peak is reset
through /proc/self/clear_refs between phases):

- BASE: after importing the runtime (lifecycle, backends, collectors), before opening the store;
- OPEN PEAK / DECODED: the peak while `Store.open` decodes the shard, and what stays resident;
- COMPACT PEAK: the peak while the production encoder (`chunked.encode_compaction`, as a persist
  calls it for a shard without a layout: the snapshot copy, the inline attempt, every chunk)
  rewrites the whole shard, three times over;
- POLL PEAK (another fresh process): the peak of one poll of the feed's collector at capacity
  (maxSeenKeys = N): it copies the seen-set, finds one new object, evicts the oldest seen row
  (sorting the seen-set by object name) and persists.

Per row: DECODED - BASE over N, and each peak's excess over DECODED over N. Sizes are bytes of
the resident set: repeatable to a few percent, not timings.

    PYTHONPATH=scripts .venv/bin/python -m bench.memory [--rows 50000,200000,1000000] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.report import Report, Table, emit, parser

STORE = "memory-bench"
SHARD = "objectstore/memory-bench"
MAX_CHUNKS = 32


def _status() -> dict[str, int]:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def write(folder: str, rows: int) -> None:
    from checkpoint_runtime.backends.file import FileBackend
    from checkpoint_runtime.format.reference_rows import FeedWorkload
    from checkpoint_runtime.store.core import Store

    workload = FeedWorkload(SHARD, rows, "uuid", gap_rows=16)
    store = Store.open(
        FileBackend(Path(folder) / "store", STORE),
        writer="bench",
        max_chunks=MAX_CHUNKS,
        debounce_seconds=0,
        write_budget_bytes_per_second=0,
    )
    store.batch(workload.rows)
    feed = Path(folder) / "feed"
    feed.mkdir()
    (feed / "zzzz-new.json").write_text('{"record":1}\n')  # named past every seen object


def measure(folder: str, phase: str, rows: int) -> dict[str, int]:
    import os

    import fsspec

    import checkpoint_runtime.runtime.lifecycle  # noqa: F401  (what a running runtime imports)
    from checkpoint_runtime.backends.file import FileBackend
    from checkpoint_runtime.collectors.objectstore import ObjectStoreCollector
    from checkpoint_runtime.collectors.sink import open_sink
    from checkpoint_runtime.store import chunked
    from checkpoint_runtime.store.core import Store
    from checkpoint_runtime.store.options import StoreOptions

    fsspec.filesystem("file")  # what a file:// feed's collector loads when it is built
    gc.collect()
    base = _status()["VmRSS"]
    _reset_peak()
    store = Store.open(
        FileBackend(Path(folder) / "store", STORE),
        writer="bench",
        max_chunks=MAX_CHUNKS,
        migrate=False,
        debounce_seconds=0,
    )
    open_peak = _status()["VmHWM"]
    gc.collect()
    decoded = _status()["VmRSS"]
    state = store.shard_states()[SHARD]
    held = len(state.rows)
    _reset_peak()
    if phase == "compact":
        for _ in range(3):
            with store._lock:
                snapshot = dict(state.rows)
            chunked.encode_compaction(
                SHARD, snapshot, None, None, StoreOptions(max_chunks=MAX_CHUNKS)
            )
            del snapshot
    else:  # one poll of the feed at capacity: it finds one new object, evicts one, persists
        collector = ObjectStoreCollector(
            store,
            open_sink("file", os.devnull),
            feed=SHARD.split("/")[-1],
            url=f"file://{Path(folder) / 'feed'}",
            max_seen_keys=rows,
        )
        collector.poll()
    return {
        "rows": held,
        "base": base,
        "open_peak": open_peak,
        "decoded": decoded,
        "peak": _status()["VmHWM"],
    }


def run_size(rows: int) -> dict[str, int]:
    """Both phases on one stored shard, each in a fresh process."""
    with tempfile.TemporaryDirectory() as folder:
        run = [sys.executable, "-m", "bench.memory", "--rows", str(rows)]
        subprocess.run([*run, "--write", folder], check=True, capture_output=True)
        result: dict[str, int] = {}
        for phase in ("compact", "poll"):
            done = subprocess.run(
                [*run, "--measure", folder, "--phase", phase],
                check=True,
                capture_output=True,
                text=True,
            )
            measured = json.loads(done.stdout)
            result.update({k: v for k, v in measured.items() if k != "peak"})
            result[f"{phase}_peak"] = measured["peak"]
        return result


COLUMNS = ("ROWS", "BASE MB", "DECODED MB", "OPEN PEAK MB", "COMPACT PEAK MB", "POLL PEAK MB")
PER_ROW = ("B/ROW DECODED", "B/ROW OPEN", "B/ROW COMPACT", "B/ROW POLL")


def run(quick: bool = False, sizes: tuple[int, ...] = (50_000, 200_000, 1_000_000)) -> Report:
    """One table row per size (--quick: 20,000 rows only)."""
    rows = []
    for size in (20_000,) if quick else sizes:
        m = run_size(size)
        n = m["rows"]
        keys = ("base", "decoded", "open_peak", "compact_peak", "poll_peak")
        per_row = [(m["decoded"] - m["base"]) / n]
        per_row += [(m[k] - m["decoded"]) / n for k in ("open_peak", "compact_peak", "poll_peak")]
        rows.append(
            [f"{n:,}", *(f"{m[k] / 1e6:.1f}" for k in keys), *(f"{v:.0f}" for v in per_row)]
        )
    table = Table(
        "Resident memory of a store of uuid seen rows",
        [*COLUMNS, *PER_ROW],
        rows,
        [
            "B/ROW: DECODED - BASE, and each peak's excess over DECODED, over the rows; the "
            "MEMORY_* constants of the projection are the largest of each, rounded up."
        ],
    )
    return Report("memory", [table])


def main() -> int:
    args = parser(__doc__)
    args.add_argument("--rows", default="50000,200000,1000000", help="sizes, comma-separated")
    args.add_argument("--write", metavar="FOLDER", help=argparse.SUPPRESS)
    args.add_argument("--measure", metavar="FOLDER", help=argparse.SUPPRESS)
    args.add_argument("--phase", choices=("compact", "poll"), default="compact")
    options = args.parse_args()
    if options.write:
        write(options.write, int(options.rows))
        return 0
    if options.measure:
        print(json.dumps(measure(options.measure, options.phase, int(options.rows))))
        return 0
    sizes = tuple(int(text) for text in options.rows.split(","))
    return emit(run(options.quick, sizes), options)


if __name__ == "__main__":
    sys.exit(main())
