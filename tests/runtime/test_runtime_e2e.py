"""End to end on the real API server: the chart installed, two `checkpoint-runtime run`
processes with the config the chart rendered and the chart ServiceAccount's token (exactly a
pod's permissions), feeding a generated object-store folder.

Election timings are shortened (3 s lease) so a failover takes seconds; everything else is the
chart's rendered config.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from checkpoint_runtime.constants import ANNOTATION_MIGRATED, LEGACY_DATA_KEY
from checkpoint_runtime.format.legacy import encode_legacy, legacy_digest
from checkpoint_runtime.format.naming import object_id
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.faultproxy import Action, FaultProxy
from checkpoint_testenv.flowlogs import FlowLogServer
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import (
    RuntimeProcess,
    runtime_config,
    seen_ids,
    stored_rows,
    write_objects,
)

SHARD = "tn1/objectstore/feed-a"


@pytest.fixture
def release(chart_install: Callable[..., Release]) -> Release:
    return chart_install()


@pytest.fixture
def bucket(tmp_path: Path) -> Path:
    path = tmp_path / "bucket"
    path.mkdir()
    return path


@pytest.fixture
def flowlogs() -> Iterator[FlowLogServer]:
    server = FlowLogServer()
    yield server
    server.close()


def lease_spec(release: Release) -> client.V1LeaseSpec:
    lease = release.read_lease()
    assert lease.spec is not None
    return lease.spec


def shard_config_maps(release: Release) -> list[client.V1ConfigMap]:
    with release.plane.admin_api() as api:
        listed = client.CoreV1Api(api).list_namespaced_config_map(release.coordination_namespace)
    return [
        cm
        for cm in listed.items
        if cm.metadata is not None and cm.metadata.name.startswith(release.lease_name + "-")
        and cm.binary_data
    ]  # fmt: skip


def emitted_objects(*procs: RuntimeProcess) -> list[str]:
    return [name for proc in procs for name in proc.objects()]


def test_failover_keeps_every_row_and_never_re_emits(
    release: Release,
    bucket: Path,
    tmp_path: Path,
    procs: list[RuntimeProcess],
    flowlogs: FlowLogServer,
) -> None:
    config = runtime_config(release, bucket, flowlogs.url)
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    a = RuntimeProcess(tmp_path, "runtime-a", config, kubeconfig)
    procs.append(a.start())
    a.wait_ready()
    wait_for(a.leading, 20, "a leads")
    b = RuntimeProcess(tmp_path, "runtime-b", config, kubeconfig)
    procs.append(b.start())
    b.wait_ready()  # a standby is ready too
    assert b.metric("checkpoint_leader") == 0.0
    assert lease_spec(release).holder_identity == "runtime-a"

    first_batch = [f"2026/03/01/a-{i:04d}.json" for i in range(150)]
    write_objects(bucket, first_batch)
    for n in range(3):
        flowlogs.add(datetime.now(UTC), n)
    wait_for(lambda: len(a.objects()) == 150, 30, "a emits the first batch")
    wait_for(lambda: len(a.flow_numbers()) == 3, 30, "a emits the first flow logs")
    wait_for(lambda: len(seen_ids(stored_rows(release), SHARD)) == 150, 20, "seen rows stored")
    # The shard is a real ConfigMap written with the chart's RBAC only, visible in /metrics.
    shards = shard_config_maps(release)
    assert len(shards) == 2  # one per collector namespace
    assert a.metric("checkpoint_shard_rows", f'shard="{SHARD}"') == 152.0  # seen + cursor + scan
    headroom = a.metric("checkpoint_shard_headroom_ratio", f'shard="{SHARD}"')
    assert headroom is not None
    assert 0.9 < headroom < 1.0

    transitions = lease_spec(release).lease_transitions or 0
    a.kill()  # SIGKILL: no flush, no release; b must wait out the lease
    took = wait_for(b.leading, 20, "b takes over")
    print(f"\nfailover after SIGKILL of the leader: {took:.2f} s (lease 3 s)")
    spec = lease_spec(release)
    assert spec.holder_identity == "runtime-b"
    assert spec.lease_transitions == transitions + 1
    assert b.metric("checkpoint_leader_epoch") == float(transitions + 1)
    # b took ownership of every shard before its collectors ran (§7): the idle feed shard is
    # already stamped with b's epoch, so a's late write would be fenced.
    for shard in shard_config_maps(release):
        stamps = shard.metadata.annotations  # type: ignore[union-attr]
        assert stamps["checkpoint-runtime.io/epoch"] == str(transitions + 1)

    second_batch = [f"2026/03/01/b-{i:04d}.json" for i in range(20)]
    write_objects(bucket, second_batch)
    for n in range(3, 6):
        flowlogs.add(datetime.now(UTC), n)
    wait_for(lambda: len(b.objects()) == 20, 30, "b emits only the new objects")
    wait_for(lambda: len(b.flow_numbers()) == 3, 30, "b emits only the new flow logs")
    assert sorted(a.flow_numbers() + b.flow_numbers()) == list(range(6))
    assert sorted(b.objects()) == second_batch  # nothing a emitted came out again
    assert sorted(emitted_objects(a, b)) == sorted(first_batch + second_batch)

    assert b.terminate() == 0  # SIGTERM: stop collectors, flush, release
    rows = stored_rows(release)
    assert seen_ids(rows, SHARD) == {object_id(n) for n in first_batch + second_batch}
    released = lease_spec(release)
    assert released.holder_identity in ("", None)
    assert released.lease_duration_seconds == 1
    assert "tn1/flowlogs/cursor" in rows
    # Every shard is stamped by the last leader's term (§7).
    for shard in shard_config_maps(release):
        stamps = shard.metadata.annotations  # type: ignore[union-attr]
        assert stamps["checkpoint-runtime.io/epoch"] == str(transitions + 1)
        assert stamps["checkpoint-runtime.io/writer"] == "runtime-b"


def test_sigterm_flushes_and_releases_the_lease_for_an_immediate_takeover(
    release: Release, bucket: Path, tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    config = runtime_config(release, bucket, debounceSeconds=300)  # only the flush persists sets
    config["leaderElection"] = {
        "enabled": True,
        "leaseDurationSeconds": 30,  # takeover without release would take >= 30 s
        "renewDeadlineSeconds": 10,
        "retryPeriodSeconds": 0.5,
    }
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    a, b = leader_and_standby(tmp_path, config, kubeconfig, procs)
    write_objects(bucket, ["x-0.json", "x-1.json", "x-2.json"])
    wait_for(lambda: len(a.objects()) == 3, 20, "a emits")
    # An idle change (an object vanished) only goes through the debounced persist...
    (bucket / "x-0.json").unlink()
    polls = f'collector="{SHARD}"'
    seen_polls = a.metric("checkpoint_collector_polls_total", polls) or 0
    wait_for(
        lambda: (a.metric("checkpoint_collector_polls_total", polls) or 0) >= seen_polls + 3,
        20,
        "a few idle polls",
    )
    assert '"listed":3' in stored_rows(release)[f"{SHARD}/scan"]
    stopping = time.monotonic()
    assert a.terminate() == 0
    # ...and SIGTERM flushed it before releasing the Lease.
    assert '"listed":2' in stored_rows(release)[f"{SHARD}/scan"]
    wait_for(b.leading, 15, "b takes over after the release")
    took = time.monotonic() - stopping
    print(f"\ntakeover after SIGTERM (released lease): {took:.2f} s (lease 30 s)")
    write_objects(bucket, ["x-3.json"])
    wait_for(lambda: len(b.objects()) == 1, 20, "b emits the new object")
    assert b.objects() == ["x-3.json"]
    # A standby asked to stop just leaves: exit 0, the leader's Lease untouched.
    c = RuntimeProcess(tmp_path, "runtime-c", config, kubeconfig)
    procs.append(c.start())
    c.wait_ready()
    assert c.metric("checkpoint_leader") == 0.0
    before = lease_spec(release)
    assert c.terminate() == 0
    after = lease_spec(release)
    assert after.holder_identity == "runtime-b"
    assert after.lease_transitions == before.lease_transitions
    assert c.records() == []


def test_write_uncertain_ends_the_process_and_the_restart_continues_from_api_state(
    release: Release,
    bucket: Path,
    tmp_path: Path,
    procs: list[RuntimeProcess],
    fault_proxy: Callable[[], FaultProxy],
) -> None:
    proxy = fault_proxy()
    config = runtime_config(release, bucket, deadlineSeconds=3)
    through_proxy = release.write_kubeconfig(tmp_path / "proxy.kubeconfig", host=proxy.host)
    a = RuntimeProcess(tmp_path, "runtime-a", config, through_proxy)
    procs.append(a.start())
    wait_for(a.leading, 20, "a leads")
    write_objects(bucket, ["u-1.json", "u-2.json"])
    wait_for(lambda: len(a.objects()) == 2, 20, "a emits the first objects")
    wait_for(lambda: len(seen_ids(stored_rows(release), SHARD)) == 2, 20, "stored")

    # The next shard PUT commits but its answer is lost, and every read-back fails: the
    # store cannot tell, so it must raise write-uncertain and the process must exit non-zero.
    configmaps = "/configmaps/"
    proxy.set_mode(Action.DROP_RESPONSE_AFTER_FORWARD, 1, "PUT", path_contains=configmaps)
    proxy.set_mode(Action.RESET_BEFORE_FORWARD, None, path_contains=configmaps)
    write_objects(bucket, ["u-3.json"])
    assert a.wait_exit(30) == 2
    fatal = [e for e in a.logs() if e.get("msg", "").startswith("lifecycle ended")]
    assert fatal
    assert fatal[0]["write_uncertain"] is True
    (cause,) = fatal[0]["causes"]  # every grouped error, with its shard
    assert cause["error"] == "WriteUncertainError"
    assert cause["shard"] == SHARD
    assert "write outcome unknown" in cause["message"]
    assert "write outcome unknown" in fatal[0]["msg"]
    dropped = [e for e in proxy.events if e.action is Action.DROP_RESPONSE_AFTER_FORWARD]
    assert [e.upstream_status for e in dropped] == [200]  # the write did commit
    assert "u-3.json" in a.objects()

    # Kubernetes would restart the container; here a new process, direct to the API server.
    proxy.passthrough()
    direct = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    restarted = RuntimeProcess(tmp_path, "runtime-a2", config, direct)
    procs.append(restarted.start())
    wait_for(restarted.leading, 20, "the restarted process leads")
    write_objects(bucket, ["u-4.json"])
    wait_for(lambda: "u-4.json" in restarted.objects(), 20, "the restarted process emits")
    # The committed-but-unacknowledged write is API state: u-3 is not emitted again.
    assert restarted.objects() == ["u-4.json"]
    assert restarted.terminate() == 0
    rows = stored_rows(release)
    assert seen_ids(rows, SHARD) == {object_id(f"u-{i}.json") for i in range(1, 5)}


def test_a_paused_leader_resumes_deposed_and_neither_emits_nor_writes(
    release: Release, bucket: Path, tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    """SIGSTOP is the paused ex-leader client-go warns about: when it resumes, its renew
    deadline has passed, so it stops before emitting or writing, and exits non-zero."""
    config = runtime_config(release, bucket)
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    a, b = leader_and_standby(tmp_path, config, kubeconfig, procs)
    first = [f"p-{i}.json" for i in range(5)]
    write_objects(bucket, first)
    wait_for(lambda: len(seen_ids(stored_rows(release), SHARD)) == 5, 20, "a stored the first")

    assert a.process is not None
    a.process.send_signal(signal.SIGSTOP)
    try:
        wait_for(b.leading, 20, "b takes over from the paused leader")
        later = [f"q-{i}.json" for i in range(5)]
        write_objects(bucket, later)
        wait_for(lambda: len(seen_ids(stored_rows(release), SHARD)) == 10, 20, "b stored more")
    finally:
        a.process.send_signal(signal.SIGCONT)
    assert a.wait_exit(20) == 2
    assert sorted(a.objects()) == first  # nothing emitted after it resumed
    assert sorted(b.objects()) == later
    stamps = shard_config_maps(release)[0].metadata.annotations  # type: ignore[union-attr]
    assert stamps["checkpoint-runtime.io/writer"] == "runtime-b"
    assert seen_ids(stored_rows(release), SHARD) == {object_id(n) for n in first + later}
    assert b.running
    assert b.terminate() == 0


def test_the_runtime_migrates_legacy_state_and_continues_from_it(
    chart_install: Callable[..., Release],
    control_plane: ControlPlane,
    bucket: Path,
    tmp_path: Path,
    procs: list[RuntimeProcess],
) -> None:
    """The old release's single ConfigMap is migrated on open; what its seen-set covers is not
    emitted again, and the legacy data stays exactly as it was (a rollback can still read it)."""
    namespace = control_plane.create_namespace("legacy")
    migrated = [f"old-{i:02d}.json" for i in range(10)]
    fresh = [f"new-{i:02d}.json" for i in range(5)]
    write_objects(bucket, migrated + fresh)
    rows = {
        f"{SHARD}/seen/{object_id(name)}": "2026-03-01T00:00:00.000000000Z" for name in migrated
    }
    rows[f"{SHARD}/cursor"] = migrated[-1]
    value = create_legacy(control_plane, namespace, rows)
    release = chart_install(
        {"checkpoint": {"store": {"legacyConfigMap": "old-checkpoints"}}}, namespace
    )
    config = runtime_config(release, bucket)
    assert config["store"]["legacyConfigMap"] == "old-checkpoints"
    proc = RuntimeProcess(tmp_path, "runtime-a", config, release.write_kubeconfig(tmp_path / "k"))
    procs.append(proc.start())
    wait_for(lambda: len(proc.objects()) == len(fresh), 30, "the fresh objects emitted")
    assert sorted(proc.objects()) == fresh
    assert proc.terminate() == 0
    with control_plane.admin_api() as api:
        legacy = client.CoreV1Api(api).read_namespaced_config_map("old-checkpoints", namespace)
    assert legacy.data == {LEGACY_DATA_KEY: value}  # unchanged
    assert legacy.metadata is not None
    assert (legacy.metadata.annotations or {}).get(ANNOTATION_MIGRATED) == legacy_digest(value)
    assert seen_ids(stored_rows(release), SHARD) == {object_id(n) for n in migrated + fresh}


def create_legacy(plane: ControlPlane, namespace: str, rows: dict[str, str]) -> str:
    value = encode_legacy(rows)
    with plane.admin_api() as api:
        client.CoreV1Api(api).create_namespaced_config_map(
            namespace,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name="old-checkpoints"),
                data={LEGACY_DATA_KEY: value},
            ),
        )
    return value


def leader_and_standby(
    tmp_path: Path, config: dict[str, Any], kubeconfig: Path, procs: list[RuntimeProcess]
) -> tuple[RuntimeProcess, RuntimeProcess]:
    """`runtime-a` started until it leads, then `runtime-b` started until it is a ready standby."""
    a = RuntimeProcess(tmp_path, "runtime-a", config, kubeconfig)
    procs.append(a.start())
    wait_for(a.leading, 20, "a leads")
    b = RuntimeProcess(tmp_path, "runtime-b", config, kubeconfig)
    procs.append(b.start())
    b.wait_ready()
    return a, b


def fatal_log(proc: RuntimeProcess) -> dict[str, Any]:
    fatal = [e for e in proc.logs() if e.get("msg", "").startswith("lifecycle ended")]
    assert len(fatal) == 1, proc.logs()
    return fatal[0]


def failed_start(
    release: Release, bucket: Path, tmp_path: Path, name: str, procs: list[RuntimeProcess]
) -> dict[str, Any]:
    """Run a runtime of `release` that must exit 2 while starting; its one fatal log entry."""
    proc = RuntimeProcess(
        tmp_path,
        name,
        runtime_config(release, bucket),
        release.write_kubeconfig(tmp_path / f"{name}.kubeconfig"),
    )
    procs.append(proc.start())
    assert proc.wait_exit(30) == 2
    return fatal_log(proc)


def test_a_refused_write_is_logged_with_every_shard_its_cause_and_http_status(
    chart_install: Callable[..., Release],
    control_plane: ControlPlane,
    bucket: Path,
    tmp_path: Path,
    procs: list[RuntimeProcess],
) -> None:
    """The chart's Role without `create`: migrating a two-shard legacy value fails, and the
    runtime's log names both shards with the 403, not a count of sub-exceptions."""
    namespace = control_plane.create_namespace("refused")
    create_legacy(
        control_plane,
        namespace,
        {f"{SHARD}/cursor": "old-01.json", "tn1/flowlogs/cursor": "2026-03-01T00:00:00.1Z"},
    )
    release = chart_install(
        {"checkpoint": {"store": {"legacyConfigMap": "old-checkpoints"}}}, namespace
    )
    release.revoke("configmaps", "create")

    fatal = failed_start(release, bucket, tmp_path, "runtime-a", procs)
    assert fatal["error"] == "ExceptionGroup"
    assert "sub-exception" not in fatal["msg"]
    causes = sorted(fatal["causes"], key=lambda cause: cause["shard"])
    assert [(c["error"], c["shard"], c["status"]) for c in causes] == [
        ("ApiRefusedError", "tn1/flowlogs", 403),
        ("ApiRefusedError", SHARD, 403),
    ]
    for cause in causes:
        assert 'cannot create resource "configmaps"' in cause["message"]
        assert cause["message"] in fatal["msg"]
    assert shard_config_maps(release) == []


def test_a_second_release_over_a_legacy_the_first_migrated_refuses_to_start_empty(
    chart_install: Callable[..., Release],
    control_plane: ControlPlane,
    bucket: Path,
    tmp_path: Path,
    procs: list[RuntimeProcess],
) -> None:
    """A reinstall under another release name (another Lease name) pointed at the same legacy
    ConfigMap: the first release migrated it, so the second exits 1 with a named error instead
    of running without any of the legacy rows."""
    namespace = control_plane.create_namespace("reinstall")
    create_legacy(control_plane, namespace, {f"{SHARD}/cursor": "old-01.json"})
    values = {"checkpoint": {"store": {"legacyConfigMap": "old-checkpoints"}}}
    first = chart_install(values, namespace)
    proc = RuntimeProcess(
        tmp_path, "runtime-a", runtime_config(first, bucket), first.write_kubeconfig(tmp_path / "a")
    )
    procs.append(proc.start())
    wait_for(proc.leading, 30, "the first release leads (after migrating)")
    assert proc.terminate() == 0
    before = {cm.metadata.name for cm in shard_config_maps(first)}

    second = chart_install(values, namespace, release="again")
    assert second.lease_name != first.lease_name

    fatal = failed_start(second, bucket, tmp_path, "runtime-b", procs)
    assert fatal["error"] == "LegacyMigratedElsewhereError"
    assert repr(first.lease_name) in fatal["msg"]
    assert "--start-empty" in fatal["msg"]
    assert shard_config_maps(second) == []  # nothing written
    assert {cm.metadata.name for cm in shard_config_maps(first)} == before
