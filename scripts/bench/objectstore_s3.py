"""Object-store scan throughput on a real S3-compatible server (`just bench-s3`).

Starts the pinned SeaweedFS (`weed server -s3`) on 127.0.0.1, uploads N objects of two JSON
lines each, and times the object-store collector over them: the listing alone (objects/s
listed) and one full first poll (list, read every object, emit, checkpoint every chunk into a
file store: objects/s checkpointed). The same objects in a local folder (file://) are the
baseline, run interleaved with the S3 rounds; the ratio column is S3 over that baseline.

    PYTHONPATH=scripts .venv/bin/python -m bench.objectstore_s3 [--quick] [--objects N] [--rounds N]
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.report import Report, Table, emit, parser
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.collectors.objectstore import ObjectStoreCollector
from checkpoint_runtime.constants import DEFAULT_MAX_SEEN_KEYS
from checkpoint_runtime.store.core import Store
from checkpoint_testenv import s3server

Medians = dict[str, dict[str, float]]


class CountingSink:
    def __init__(self) -> None:
        self.records = 0

    def emit(self, record: dict[str, Any]) -> None:
        self.records += 1

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def names(count: int) -> list[str]:
    return [
        f"{index // 1000:02d}/{index % 1000 // 100:02d}/obj-{index:06d}.json"
        for index in range(count)
    ]


def body(name: str) -> bytes:
    return (json.dumps({"object": name, "n": 1}) + "\n" + json.dumps({"n": 2}) + "\n").encode()


def measure(url: str, endpoint: str | None, work: Path, objects: int) -> dict[str, float]:
    store_dir = Path(tempfile.mkdtemp(dir=work, prefix="cp-"))
    store = Store.open(FileBackend(store_dir, "bench"), writer="bench", debounce_seconds=0)
    sink = CountingSink()
    feed = ObjectStoreCollector(
        store, sink, feed="f1", url=url, endpoint_url=endpoint, max_seen_keys=DEFAULT_MAX_SEEN_KEYS
    )
    begun = time.perf_counter()
    listed = len(feed.list_objects())
    list_seconds = time.perf_counter() - begun
    begun = time.perf_counter()
    records = feed.poll()
    poll_seconds = time.perf_counter() - begun
    if listed != objects or records != 2 * objects:
        raise SystemExit(f"{url}: listed {listed}, emitted {records} records; want {objects}")
    return {"list_s": list_seconds, "poll_s": poll_seconds}


def _upload(server: Any, bucket: str, folder: Path, objects: int) -> float:
    """The objects into the bucket and the folder; seconds the upload took."""
    all_names = names(objects)
    print(f"bench-s3: uploading {objects} objects", file=sys.stderr)
    begun = time.perf_counter()
    server.put_many(bucket, [(f"feed/{n}", body(n)) for n in all_names])
    upload_seconds = time.perf_counter() - begun
    for name in all_names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body(name))
    return upload_seconds


def measure_rounds(objects: int, rounds: int) -> tuple[Medians, float]:
    """(medians of list and first-poll seconds per source, upload seconds)."""
    with tempfile.TemporaryDirectory(prefix="bench-s3-") as scratch:
        work = Path(scratch)
        print("bench-s3: locating or building weed", file=sys.stderr)
        server = s3server.start_s3_server(s3server.locate() / "weed", work / "server")
        try:
            os.environ.update(server.env())
            bucket = server.create_bucket("bench")
            folder = work / "folder"
            upload_seconds = _upload(server, bucket, folder, objects)
            results: dict[str, list[dict[str, float]]] = {"s3": [], "file": []}
            for round_number in range(1, rounds + 1):
                print(f"bench-s3: round {round_number}/{rounds}", file=sys.stderr)
                results["s3"].append(measure(f"s3://{bucket}/feed", server.endpoint, work, objects))
                results["file"].append(measure(folder.as_uri(), None, work, objects))
        finally:
            server.stop()
    median = {
        kind: {key: statistics.median(r[key] for r in runs) for key in ("list_s", "poll_s")}
        for kind, runs in results.items()
    }
    return median, upload_seconds


def run(quick: bool = False, objects: int = 10_000, rounds: int = 3) -> Report:
    """S3 scan throughput beside a local folder (500 objects, one round with `quick`)."""
    objects, rounds = (500, 1) if quick else (objects, rounds)
    median, upload_seconds = measure_rounds(objects, rounds)
    table = Table.of(
        "Object-store scan throughput",
        [
            (
                "source",
                lambda kind: "SeaweedFS s3://" if kind == "s3" else "local folder (baseline)",
            ),
            ("objects", lambda kind: str(objects)),
            ("list s", lambda kind: str(round(median[kind]["list_s"], 2))),
            ("listed/s", lambda kind: str(round(objects / median[kind]["list_s"]))),
            ("first poll s", lambda kind: str(round(median[kind]["poll_s"], 2))),
            ("checkpointed/s", lambda kind: str(round(objects / median[kind]["poll_s"]))),
            (
                "vs baseline",
                lambda kind: str(round(median["file"]["poll_s"] / median[kind]["poll_s"], 2)),
            ),
        ],
        ["s3", "file"],
        [
            f"medians of {rounds} interleaved rounds; upload of {objects} objects with "
            f"8 threads: {upload_seconds:.1f} s ({objects / upload_seconds:.0f}/s); "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        ],
    )
    return Report("Object-store scan throughput", [table])


def main(argv: Sequence[str] | None = None) -> int:
    found = parser(__doc__, "500 objects, one round")
    found.set_defaults(format="text")
    found.add_argument("--objects", type=int, default=10_000)
    found.add_argument("--rounds", type=int, default=3)
    args = found.parse_args(argv)
    return emit(run(args.quick, args.objects, args.rounds), args)


if __name__ == "__main__":
    sys.exit(main())
