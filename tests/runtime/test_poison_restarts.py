"""Poison data never loops: each case runs the real `checkpoint-runtime run` process through a
first start and two restarts and counts what it emitted (SPEC §12: nothing emitted twice).

- a shard file that cannot be read (empty, truncated, another store's under our name): every
  start refuses at open with a named error that names the object and `set-aside`, exits 2 and
  emits nothing; `set-aside` keeps the bytes and the next start runs;
- a legacy flowlogs cursor that is not an RFC 3339 time: migrated, then quarantined with its
  value (shown by `inspect`, counted by a gauge), and no record is emitted twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from checkpoint_runtime.backends.file import write_legacy_file
from checkpoint_runtime.format.naming import shard_name
from checkpoint_testenv.flowlogs import FlowLogServer
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.bytecode import child_env
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import (
    RuntimeProcess,
    runtime_config,
    sink_records,
    write_objects,
)

LEASE = "checkpoint-runtime"
FEED_SHARD = "objectstore/f1"
OBJECTS = [f"o-{i}.json" for i in range(6)]


def objectstore_config(tmp_path: Path) -> dict[str, Any]:
    bucket = tmp_path / "bucket"
    bucket.mkdir(exist_ok=True)
    return {
        "store": {"backend": "file", "path": str(tmp_path / "cp"), "debounceSeconds": 0.2},
        "collectors": [
            {"kind": "objectstore", "feed": "f1", "url": bucket.as_uri(), "pollSeconds": 0.2}
        ],
    }


def emitted(tmp_path: Path) -> list[str]:
    """Every object line 0 emitted by every run so far (each run has its own sink)."""
    return [
        r["object"]
        for sink in sorted(tmp_path.glob("*.records.jsonl"))
        for r in sink_records(sink)
        if r.get("line") == 0
    ]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "checkpoint_runtime.cli", *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, env=child_env(), check=False
    )


@pytest.fixture
def checkpointed(tmp_path: Path, procs: list[RuntimeProcess]) -> Path:
    """A file store in which a first run emitted and checkpointed OBJECTS; its shard file."""
    config = objectstore_config(tmp_path)
    write_objects(tmp_path / "bucket", OBJECTS)
    first = RuntimeProcess(tmp_path, "run0", config)
    procs.append(first.start())
    wait_for(lambda: len(first.objects()) == len(OBJECTS), 30, "the first run emits")
    assert first.terminate() == 0
    shard = tmp_path / "cp" / f"{shard_name(LEASE, FEED_SHARD)}.shard"
    assert shard.is_file()
    return shard


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    header, _, blob = data.partition(b"\n")
    path.write_bytes(header + b"\n" + blob[: len(blob) // 2])


def _foreign(path: Path) -> None:
    header, _, blob = path.read_bytes().partition(b"\n")
    document = json.loads(header)
    document["labels"] = {**document["labels"], "checkpoint-runtime.io/store": "0" * 16}
    path.write_bytes(json.dumps(document).encode() + b"\n" + blob)


def _no_header(path: Path) -> None:
    path.write_bytes(b"\x1f\x8b\x08\x00garbage without a header line")


POISON: dict[str, Callable[[Path], None]] = {
    "empty": _empty,
    "truncated": _truncated,
    "foreign-labels": _foreign,
    "no-header": _no_header,
}


@pytest.mark.parametrize("poison", list(POISON.values()), ids=list(POISON))
def test_an_unreadable_shard_stops_every_restart_with_a_named_error_and_emits_nothing(
    tmp_path: Path, procs: list[RuntimeProcess], checkpointed: Path, poison: Callable[[Path], None]
) -> None:
    poison(checkpointed)
    before = checkpointed.read_bytes()
    write_objects(tmp_path / "bucket", ["late.json"])  # would be emitted by a run that started
    config = objectstore_config(tmp_path)
    for restart in (1, 2):
        proc = RuntimeProcess(tmp_path, f"restart{restart}", config)
        procs.append(proc.start())
        assert proc.wait_exit(30) == 2
        fatal = [e for e in proc.logs() if e.get("level") == "error"]
        assert fatal, proc.logs()
        assert fatal[0]["error"] in (
            "UnreadableShardError",
            "CorruptShardError",
            "ForeignShardError",
        )
        assert "checkpoint-runtime set-aside --path" in fatal[0]["msg"]
        assert checkpointed.name.removesuffix(".shard") in fatal[0]["msg"]
        assert proc.objects() == []
    assert sorted(emitted(tmp_path)) == sorted(OBJECTS)  # 0 duplicates over two restarts
    assert checkpointed.read_bytes() == before  # nothing written over it

    inspected = cli("inspect", "--path", str(tmp_path / "cp"))
    assert inspected.returncode == 2, inspected.stderr
    assert inspected.stderr.startswith("error: "), inspected.stderr
    assert "set-aside" in inspected.stderr

    aside = cli("set-aside", "--path", str(tmp_path / "cp"), "--object", checkpointed.stem)
    assert aside.returncode == 0, aside.stderr
    assert not checkpointed.exists()
    (kept,) = checkpointed.parent.glob(checkpointed.name + ".set-aside-*")
    assert kept.read_bytes() == before  # the bytes are kept


def test_a_legacy_cursor_that_is_no_time_is_quarantined_and_nothing_is_emitted_twice(
    tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    server = FlowLogServer()
    try:
        now = datetime.now(UTC)
        for n in range(1, 400):  # one record every 0.1 s from 2 s ago to 38 s ahead
            server.add(now + timedelta(seconds=-2 + n / 10), n)
        store = tmp_path / "cp"
        write_legacy_file(store, "legacy", json.dumps({"tn1/flowlogs/cursor": "1772323800"}))
        config = {
            "store": {
                "backend": "file",
                "path": str(store),
                "legacyConfigMap": "legacy",
                "debounceSeconds": 0.2,
            },
            "collectors": [
                {"kind": "flowlogs", "tailnet": "tn1", "url": server.url, "pollSeconds": 0.2}
            ],
        }
        numbers: list[int] = []
        for run in range(3):  # the first start and two restarts
            proc = RuntimeProcess(tmp_path, f"flow{run}", config)
            procs.append(proc.start())
            proc.wait_ready()
            wait_for(lambda p=proc: len(p.flow_numbers()) >= 5, 30, f"run {run} emits")
            if run == 0:
                assert proc.metric("checkpoint_quarantined_rows") == 1.0
            assert proc.terminate() == 0, proc.stderr_path.read_text()
            numbers += proc.flow_numbers()
            warnings = [e for e in proc.logs() if "quarantined row cursor" in e.get("msg", "")]
            assert len(warnings) == (1 if run == 0 else 0)
        assert len(numbers) == len(set(numbers)), "a record was emitted twice"
        inspected = cli("inspect", "--path", str(store), "--json")
        assert inspected.returncode == 0, inspected.stderr
        assert json.loads(inspected.stdout)["quarantined"] == [
            {"key": "tn1/flowlogs/quarantine/cursor", "value": "1772323800"}
        ]
    finally:
        server.close()


@pytest.mark.apiserver
def test_a_foreign_configmap_under_a_shard_name_stops_every_start_on_the_api_server(
    chart_install: Callable[..., Release], tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    """A ConfigMap under a configured collector's shard name that is not the store's (no
    labels: discovery by label skips it) is read by name before any collector runs: two starts
    refuse with ForeignShardError naming `set-aside --namespace`, emit nothing, change nothing."""
    release = chart_install()
    bucket = tmp_path / "bucket"
    write_objects(bucket, ["a.json", "b.json"])
    name = shard_name(release.lease_name, "tn1/objectstore/feed-a")
    namespace = release.coordination_namespace
    with release.plane.admin_api() as api:
        core = client.CoreV1Api(api)
        body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"x": "y"})
        version = core.create_namespaced_config_map(namespace, body).metadata.resource_version
        for restart in (1, 2):
            kubeconfig = release.write_kubeconfig(tmp_path / f"kube{restart}")
            proc = RuntimeProcess(
                tmp_path, f"kube{restart}", runtime_config(release, bucket), kubeconfig
            )
            procs.append(proc.start())
            assert proc.wait_exit(60) == 2
            (fatal,) = [e for e in proc.logs() if e.get("msg", "").startswith("lifecycle ended")]
            assert fatal["error"] == "ForeignShardError"
            assert (
                f"checkpoint-runtime set-aside --namespace {namespace} --object {name}"
                in (fatal["msg"])
            )
            assert proc.objects() == []
        stored = core.read_namespaced_config_map(name, namespace)
        assert stored.metadata.resource_version == version  # nothing written over it
