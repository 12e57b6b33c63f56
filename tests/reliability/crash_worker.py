"""A store process for the crash trials, killed with SIGKILL by its parent (rel_crash.py).

Run as `python crash_worker.py '<json>'`. Modes:
- `persist`: batch after batch, each writing counter i into every shard (plus churning seen
  rows), printing `ack <i>` once the batch returned: an acknowledged write.
- `migrate`: open the store over legacy state (the migration runs inside open), printing
  `wrote <shard>` after each shard write and `migrated` at the end.
Every line is flushed at once, so what the parent read before the kill was acknowledged.
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

from checkpoint_runtime.backends.base import Backend, ShardWrite, WriteResult
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store.core import Store


def backend(spec: dict[str, Any]) -> Backend:
    legacy = spec.get("legacy")
    if spec["backend"] == "file":
        return FileBackend(spec["folder"], spec["lease"], legacy)
    # Imported here: the kubernetes client takes a second or more of CPU to import, which a
    # worker on the file store (most of the trials) does not need before it can be killed.
    from kubernetes import client

    from checkpoint_runtime.backends.kubernetes import KubernetesBackend

    configuration = client.Configuration()
    configuration.host = spec["host"]
    configuration.ssl_ca_cert = spec["ca_file"]
    configuration.api_key = {"authorization": spec["token"]}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    return KubernetesBackend(configuration, spec["namespace"], spec["lease"], legacy)


def persist_rows(shard: str, counter: int, seen: int) -> dict[str, str | None]:
    """The rows batch `counter` writes into `shard`: the counter and a sliding seen window."""
    changes: dict[str, str | None] = {f"{shard}/cursor": str(counter)}
    for offset in range(seen // 10):
        row = counter * (seen // 10) + offset
        changes[f"{shard}/seen/{row:010d}"] = f"2026-03-01T00:00:00.{row:09d}Z"
        if row >= seen:
            changes[f"{shard}/seen/{row - seen:010d}"] = None
    return changes


class ReportingBackend:
    """Prints `wrote <shard>` after every shard write returns (progress the parent can see)."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.lease_name = inner.lease_name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def create_shard(self, write: ShardWrite, deadline: Deadline) -> WriteResult:
        result = self.inner.create_shard(write, deadline)
        print(f"wrote {write.shard}", flush=True)
        return result

    def update_shard(self, write: ShardWrite, version: str, deadline: Deadline) -> WriteResult:
        result = self.inner.update_shard(write, version, deadline)
        print(f"wrote {write.shard}", flush=True)
        return result


def tear_writes() -> None:
    """Negative control: replace the file store's atomic replace by an in-place write that
    dies halfway, which is exactly what atomicity rules out."""
    import os
    import signal
    from pathlib import Path

    from checkpoint_runtime.backends import file

    def torn(path: Path, content: bytes) -> None:
        if path.exists():
            with open(path, "r+b") as handle:
                handle.truncate(0)
                handle.write(content[: len(content) // 2])
                handle.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        real(path, content)

    real = file._atomic_write
    file._atomic_write = torn


def main(spec: dict[str, Any]) -> None:
    if spec.get("torn"):
        tear_writes()
    if spec["mode"] == "migrate":
        Store.open(ReportingBackend(backend(spec)), writer="worker", epoch=1)  # type: ignore[arg-type]
        print("migrated", flush=True)
        return
    store = Store.open(backend(spec), writer="worker", epoch=1)
    start = int(spec.get("start", 1))
    for counter in itertools.count(start):
        changes: dict[str, str | None] = {}
        for shard in spec["shards"]:
            changes.update(persist_rows(shard, counter, int(spec["seen"])))
        store.batch(changes)
        print(f"ack {counter}", flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
