"""Resident memory of a store holding N uuid seen rows (`python -m bench.memory`).

What the memory projection's per-row constants come from. For each size, one process writes a
feed shard of N reference rows (uuid shape) into a file store (maxChunks 32); a fresh process
then, measuring its own resident set (VmRSS / VmHWM of /proc/self/status; the peak is reset
through /proc/self/clear_refs between phases):

- BASE: after importing the runtime (lifecycle, backends, collectors), before opening the store;
- OPEN PEAK / DECODED: the peak while `Store.open` decodes the shard, and what stays resident;
- COMPACT PEAK: the peak while the production encoder (`chunked.encode_compaction`, as a persist
  calls it for a shard without a layout: the snapshot copy, the inline attempt, every chunk)
  rewrites the whole shard, three times over.

Per row: DECODED - BASE over N, and each peak's excess over DECODED over N. Sizes are bytes of
the resident set: repeatable to a few percent, not timings.

    PYTHONPATH=scripts .venv/bin/python -m bench.memory [--rows 50000,200000,1000000]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
from pathlib import Path

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
        FileBackend(Path(folder), STORE),
        writer="bench",
        max_chunks=MAX_CHUNKS,
        debounce_seconds=0,
        write_budget_bytes_per_second=0,
    )
    store.batch(workload.rows)


def measure(folder: str) -> dict[str, int]:
    import checkpoint_runtime.runtime.lifecycle  # noqa: F401  (what a running runtime imports)
    from checkpoint_runtime.backends.file import FileBackend
    from checkpoint_runtime.store import chunked
    from checkpoint_runtime.store.core import Store

    gc.collect()
    base = _status()["VmRSS"]
    _reset_peak()
    store = Store.open(
        FileBackend(Path(folder), STORE), writer="bench", max_chunks=MAX_CHUNKS, migrate=False
    )
    open_peak = _status()["VmHWM"]
    gc.collect()
    decoded = _status()["VmRSS"]
    state = store.shard_states()[SHARD]
    _reset_peak()
    for _ in range(3):
        with store._lock:
            snapshot = dict(state.rows)
        chunked.encode_compaction(SHARD, snapshot, None, None, MAX_CHUNKS)
        del snapshot
    compact_peak = _status()["VmHWM"]
    return {
        "rows": len(state.rows),
        "base": base,
        "open_peak": open_peak,
        "decoded": decoded,
        "compact_peak": compact_peak,
    }


def run_size(rows: int) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as folder:
        for mode in ("write", "measure"):
            done = subprocess.run(
                [sys.executable, "-m", "bench.memory", f"--{mode}", folder, "--rows", str(rows)],
                check=True,
                capture_output=True,
                text=True,
            )
        result: dict[str, int] = json.loads(done.stdout)
        return result


def main() -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--rows", default="50000,200000,1000000")
    args.add_argument("--write", metavar="FOLDER")
    args.add_argument("--measure", metavar="FOLDER")
    options = args.parse_args()
    if options.write:
        write(options.write, int(options.rows))
        return 0
    if options.measure:
        print(json.dumps(measure(options.measure)))
        return 0
    header = ("ROWS", "BASE MB", "DECODED MB", "OPEN PEAK MB", "COMPACT PEAK MB")
    print(" ".join(f"{h:>15}" for h in header) + "   B/ROW decoded / open / compact")
    for size in (int(text) for text in options.rows.split(",")):
        m = run_size(size)
        n = m["rows"]
        mb = [m[k] / 1e6 for k in ("base", "decoded", "open_peak", "compact_peak")]
        per_row = (
            (m["decoded"] - m["base"]) / n,
            (m["open_peak"] - m["decoded"]) / n,
            (m["compact_peak"] - m["decoded"]) / n,
        )
        print(
            f"{n:>15} "
            + " ".join(f"{value:>15.1f}" for value in mb)
            + "   "
            + " / ".join(f"{value:.0f}" for value in per_row)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
