"""Object-store scan throughput on a real S3-compatible server (`just bench-s3`).

Starts the pinned SeaweedFS (`weed server -s3`) on 127.0.0.1, uploads N objects of two JSON
lines each, and times the object-store collector over them: the listing alone (objects/s
listed) and one full first poll (list, read every object, emit, checkpoint every chunk into a
file store: objects/s checkpointed). The same objects in a local folder (file://) are the
baseline, run interleaved with the S3 rounds; the ratio column is S3 over that baseline.

    .venv/bin/python scripts/bench/objectstore_s3.py [--objects 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.collectors.objectstore import ObjectStoreCollector
from checkpoint_runtime.constants import DEFAULT_MAX_SEEN_KEYS
from checkpoint_runtime.ops.inspection import table
from checkpoint_runtime.store.core import Store
from checkpoint_testenv import s3server


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-s3-") as scratch:
        work = Path(scratch)
        print("bench-s3: locating or building weed", file=sys.stderr)
        server = s3server.start_s3_server(s3server.locate() / "weed", work / "server")
        try:
            os.environ.update(server.env())
            bucket = server.create_bucket("bench")
            all_names = names(args.objects)
            print(f"bench-s3: uploading {args.objects} objects", file=sys.stderr)
            begun = time.perf_counter()
            server.put_many(bucket, [(f"feed/{n}", body(n)) for n in all_names])
            upload_seconds = time.perf_counter() - begun
            folder = work / "folder"
            for name in all_names:
                path = folder / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(body(name))
            results: dict[str, list[dict[str, float]]] = {"s3": [], "file": []}
            for round_number in range(1, args.rounds + 1):
                print(f"bench-s3: round {round_number}/{args.rounds}", file=sys.stderr)
                results["s3"].append(
                    measure(f"s3://{bucket}/feed", server.endpoint, work, args.objects)
                )
                results["file"].append(measure(folder.as_uri(), None, work, args.objects))
        finally:
            server.stop()
    rows = []
    median = {
        kind: {key: statistics.median(r[key] for r in runs) for key in ("list_s", "poll_s")}
        for kind, runs in results.items()
    }
    for kind in ("s3", "file"):
        m = median[kind]
        rows.append(
            {
                "source": "SeaweedFS s3://" if kind == "s3" else "local folder (baseline)",
                "objects": args.objects,
                "list_s": round(m["list_s"], 2),
                "listed_per_s": round(args.objects / m["list_s"]),
                "poll_s": round(m["poll_s"], 2),
                "checkpointed_per_s": round(args.objects / m["poll_s"]),
                "ratio": round(median["file"]["poll_s"] / m["poll_s"], 2),
            }
        )
    columns = [
        ("source", "source"),
        ("objects", "objects"),
        ("list_s", "list s"),
        ("listed_per_s", "listed/s"),
        ("poll_s", "first poll s"),
        ("checkpointed_per_s", "checkpointed/s"),
        ("ratio", "vs baseline"),
    ]
    print(table(rows, columns))
    print(
        f"\nmedians of {args.rounds} interleaved rounds; upload of {args.objects} objects with "
        f"8 threads: {upload_seconds:.1f} s ({args.objects / upload_seconds:.0f}/s); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
