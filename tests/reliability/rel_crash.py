"""SIGKILL crash trials (SPEC §7, §8; issue 7, scenario 3).

A subprocess (crash_worker.py) persists batch after batch, or migrates legacy state, and is
SIGKILLed at a seeded random point: after a random number of acknowledged batches plus a
random delay, or once a random number of migrated shards exist. Then:

- reopening succeeds (no corrupt or torn shard; on the file backend every shard file is read
  directly as well, so a torn file could not hide);
- persist: every shard holds exactly the state after batch `last acknowledged` or the one in
  flight (`+1`), never a mix of two batches and never older than acknowledged;
- migrate: the legacy data is unchanged; it is marked only if every shard is durable; the
  next open resumes and ends with every legacy row in the shards and the legacy object marked.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crash_worker import backend as worker_backend
from crash_worker import persist_rows
from kubernetes import client

from checkpoint_runtime.backends.file import LEGACY_SUFFIX, SHARD_SUFFIX, write_legacy_file
from checkpoint_runtime.constants import ANNOTATION_MIGRATED, ANNOTATION_SHARD_KEY, LEGACY_DATA_KEY
from checkpoint_runtime.errors import CorruptShardError
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.legacy import encode_legacy, legacy_digest
from checkpoint_runtime.format.naming import label_selector
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.support.kubetarget import KubeTarget
from checkpoint_testenv.support.polling import wait_settled

WORKER = Path(__file__).with_name("crash_worker.py")
PERSIST_SHARDS = [f"tn/objectstore/feed-{index}" for index in range(3)]
PERSIST_SEEN = 500
MIGRATE_FEEDS = 20
MIGRATE_SEEN = 200
LEGACY_NAME = "old-checkpoints"
IN_FLIGHT_QUIET, IN_FLIGHT_LIMIT = 0.5, 30.0
"""A write the killed process had already sent may still land: before the reopen, the stored
objects are read until two reads IN_FLIGHT_QUIET s apart agree (at most IN_FLIGHT_LIMIT s)."""


class CrashViolation(AssertionError):
    """A crash left state the guarantees forbid."""


@dataclass(frozen=True)
class CrashResult:
    mode: str
    backend: str
    seed: int
    acknowledged: int
    """persist: the last acknowledged batch; migrate: shard writes acknowledged before the kill."""
    outcome: str
    """persist: `acked` / `in-flight-landed`; migrate: `resumed` / `already-complete`."""
    temp_files: int
    """Temp files a killed file-store write left behind (the rename never happened)."""
    temp_files_after_reopen: int = 0
    """Temp files still there once the next open ran (the file store sweeps them)."""


def expected_rows(shard: str, counter: int) -> dict[str, str]:
    """A shard's rows after batches 1..counter of crash_worker's persist loop."""
    rows: dict[str, str] = {}
    for batch in range(1, counter + 1):
        for key, value in persist_rows(shard, batch, PERSIST_SEEN).items():
            if value is None:
                rows.pop(key, None)
            else:
                rows[key] = value
    return rows


def migrate_legacy_rows() -> dict[str, str]:
    rows: dict[str, str] = {}
    for index in range(MIGRATE_FEEDS):
        rows.update(FeedWorkload(f"tn/objectstore/feed-{index}", MIGRATE_SEEN, seed=index).rows)
    rows["tn/flowlogs/cursor"] = "2026-03-01T00:05:00.000000001Z"
    return rows


class Place:
    """Where a trial's store lives: a fresh folder, or a fresh Lease name in a namespace."""

    kind: str

    def spec(self) -> dict[str, Any]:
        raise NotImplementedError

    def shard_count(self) -> int:
        raise NotImplementedError

    def write_legacy(self, value: str) -> None:
        raise NotImplementedError

    def legacy(self) -> tuple[str, dict[str, str]]:
        raise NotImplementedError

    def check_raw(self) -> int:
        """Read every stored shard bypassing the store; return leftover temp files."""
        return 0

    def settle(self) -> None:
        """Wait until writes the killed worker had sent have landed (a file write is done when
        the process dies: nothing to wait for)."""
        return None

    def temp_files(self) -> int:
        return 0

    def cleanup(self) -> None:
        return None


class FilePlace(Place):
    kind = "file"

    def __init__(self, root: Path) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="crash-", dir=root))

    def spec(self) -> dict[str, Any]:
        return {"backend": "file", "folder": str(self.folder), "lease": "cr"}

    def shard_count(self) -> int:
        return len(list(self.folder.glob("*" + SHARD_SUFFIX)))

    def write_legacy(self, value: str) -> None:
        write_legacy_file(self.folder, LEGACY_NAME, value)

    def legacy(self) -> tuple[str, dict[str, str]]:
        document = json.loads((self.folder / (LEGACY_NAME + LEGACY_SUFFIX)).read_text())
        return document["data"][LEGACY_DATA_KEY], document.get("annotations") or {}

    def check_raw(self) -> int:
        for path in self.folder.glob("*" + SHARD_SUFFIX):
            header_line, _, blob = path.read_bytes().partition(b"\n")
            try:
                header = json.loads(header_line)
                shard = header["annotations"][ANNOTATION_SHARD_KEY]
            except (ValueError, KeyError, TypeError) as error:
                raise CorruptShardError(path.name, f"torn header: {error}") from None
            codec.decode_shard(shard, blob)  # a torn blob fails here
        return self.temp_files()

    def temp_files(self) -> int:
        return len(list(self.folder.glob(".*.tmp")))

    def cleanup(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class KubePlace(Place):
    kind = "kubernetes"

    def __init__(self, target: KubeTarget) -> None:
        self.target = target
        self.lease = target.fresh_lease("crash")

    def spec(self) -> dict[str, Any]:
        configuration = self.target.configuration
        return {
            "backend": "kubernetes",
            "host": configuration.host,
            "ca_file": configuration.ssl_ca_cert,
            "token": configuration.api_key["authorization"],
            "namespace": self.target.namespace,
            "lease": self.lease,
        }

    def shard_count(self) -> int:
        items = self.target.admin.list_namespaced_config_map(
            self.target.namespace, label_selector=label_selector(self.lease)
        ).items
        return len(items)

    def write_legacy(self, value: str) -> None:
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=self.legacy_name), data={LEGACY_DATA_KEY: value}
        )
        self.target.admin.create_namespaced_config_map(self.target.namespace, body)

    @property
    def legacy_name(self) -> str:
        return f"{self.lease}-{LEGACY_NAME}"

    def legacy(self) -> tuple[str, dict[str, str]]:
        item = self.target.admin.read_namespaced_config_map(self.legacy_name, self.target.namespace)
        return item.data[LEGACY_DATA_KEY], dict(item.metadata.annotations or {})

    def check_raw(self) -> int:
        self.target.stored(self.lease)  # decodes every shard with the codec
        return 0

    def _versions(self) -> list[tuple[str, str]]:
        """(name, resourceVersion) of this trial's shards and legacy object."""
        items = self.target.admin.list_namespaced_config_map(self.target.namespace).items
        return sorted(
            (item.metadata.name, item.metadata.resource_version)
            for item in items
            if item.metadata.name.startswith(self.lease + "-")
        )

    def settle(self) -> None:
        wait_settled(self._versions, IN_FLIGHT_QUIET, IN_FLIGHT_LIMIT, f"store {self.lease}")


def _legacy_spec(place: Place) -> dict[str, Any]:
    spec = place.spec()
    spec["legacy"] = place.legacy_name if isinstance(place, KubePlace) else LEGACY_NAME
    return spec


def run_until(
    spec: dict[str, Any], kill_when: Callable[[list[str]], bool], poll: float = 0.005
) -> list[str]:
    """Start a worker, SIGKILL it once `kill_when(lines so far)` holds; return every line."""
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=WORKER.parent,
    )
    assert worker.stdout is not None
    lines: list[str] = []
    os.set_blocking(worker.stdout.fileno(), False)
    selector = selectors.DefaultSelector()
    selector.register(worker.stdout, selectors.EVENT_READ)
    pending = ""
    try:
        while worker.poll() is None:
            if kill_when(lines):
                worker.send_signal(signal.SIGKILL)
                break
            if selector.select(timeout=poll):
                chunk = worker.stdout.read() or ""
                pending += chunk
                *complete, pending = pending.split("\n")
                lines.extend(complete)
        worker.wait(timeout=30)
        rest = worker.stdout.read() or ""
        lines.extend(line for line in (pending + rest).split("\n") if line)
    finally:
        selector.close()
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    if worker.returncode not in (0, -signal.SIGKILL):
        stderr = worker.stderr.read() if worker.stderr else ""
        raise CrashViolation(f"worker failed by itself ({worker.returncode}): {stderr[-2000:]}")
    return lines


def persist_trial(place: Place, seed: int) -> CrashResult:
    """Kill the persist loop after 1-4 acknowledged batches plus a random delay."""
    rng = random.Random(seed)
    wanted_acks = rng.randint(1, 4)
    extra = rng.uniform(0.0, 0.4)
    spec = {**place.spec(), "mode": "persist", "shards": PERSIST_SHARDS, "seen": PERSIST_SEEN}
    reached: list[float] = []

    def kill_when(lines: list[str]) -> bool:
        if not reached and sum(line.startswith("ack") for line in lines) >= wanted_acks:
            reached.append(time.monotonic())
        return bool(reached) and time.monotonic() - reached[0] >= extra

    lines = run_until(spec, kill_when)
    acked = max((int(line.split()[1]) for line in lines if line.startswith("ack")), default=0)
    place.settle()
    temp_files = place.check_raw()
    store = Store.open(worker_backend(spec), writer="parent", epoch=2)
    landed = False
    for shard in PERSIST_SHARDS:
        counter = int(store.get(f"{shard}/cursor") or 0)
        if counter not in (acked, acked + 1):
            raise CrashViolation(
                f"seed {seed}: {shard} holds batch {counter}, acknowledged was {acked}"
            )
        rows = dict(store.items(shard + "/"))
        if rows != expected_rows(shard, counter):
            raise CrashViolation(
                f"seed {seed}: {shard} is not exactly the state of batch {counter}"
            )
        landed = landed or counter == acked + 1
    store.take_ownership()
    store.batch({f"{PERSIST_SHARDS[0]}/cursor": "after-crash"})  # the survivor writes on
    outcome = "in-flight-landed" if landed else "acked"
    return CrashResult("persist", place.kind, seed, acked, outcome, temp_files, place.temp_files())


def migrate_trial(place: Place, seed: int) -> CrashResult:
    """Kill the migration once a random number of shards (0..all) exist, plus a delay."""
    rng = random.Random(seed)
    rows = migrate_legacy_rows()
    value = encode_legacy(rows)
    place.write_legacy(value)
    shards_total = MIGRATE_FEEDS + 1
    wanted = rng.randint(0, shards_total)
    extra = rng.uniform(0.0, 0.05)
    spec = {**_legacy_spec(place), "mode": "migrate"}
    reached: list[float] = []

    def kill_when(lines: list[str]) -> bool:
        if not reached and sum(line.startswith("wrote") for line in lines) >= wanted:
            reached.append(time.monotonic())
        return bool(reached) and time.monotonic() - reached[0] >= extra

    lines = run_until(spec, kill_when)
    written = sum(line.startswith("wrote") for line in lines)
    place.settle()
    completed = "migrated" in lines
    stored_value, annotations = place.legacy()
    if stored_value != value:
        raise CrashViolation(f"seed {seed}: the legacy data changed during migration")
    digest = legacy_digest(value)
    marked = annotations.get(ANNOTATION_MIGRATED)
    temp_files = place.check_raw()
    if marked is not None and (marked != digest or place.shard_count() != shards_total):
        raise CrashViolation(f"seed {seed}: legacy marked ({marked}) before every shard existed")
    store = Store.open(worker_backend(spec), writer="parent", epoch=2)  # resumes
    if dict(store.items()) != rows:
        raise CrashViolation(f"seed {seed}: the resumed migration does not hold every legacy row")
    if place.legacy()[1].get(ANNOTATION_MIGRATED) != digest:
        raise CrashViolation(f"seed {seed}: the resumed migration did not mark the legacy object")
    if any(state.legacy_digest != digest for state in store.shard_states().values()):
        raise CrashViolation(f"seed {seed}: a shard does not record the legacy digest")
    outcome = "already-complete" if completed or marked else "resumed"
    return CrashResult(
        "migrate", place.kind, seed, written, outcome, temp_files, place.temp_files()
    )
