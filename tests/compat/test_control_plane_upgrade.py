"""A control-plane upgrade under a running, writing runtime, and its rollback, one minor at a time.

A `checkpoint-runtime run` process leads and checkpoints an object-store feed on minor N's API
server while objects keep arriving. That API server is stopped and N+1's started in its place
over the same etcd (same port, certificates and service-account keys: what a managed upgrade
replaces), then N's again (the rollback). Each time the runtime keeps its leadership or takes it
again (a process that lost its Lease exits, and is started again as Kubernetes would), no object
is lost, none is emitted twice, and what is stored is the current leader's checkpoint (its
writer and epoch) holding every object emitted.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from checkpoint_runtime.format.naming import object_id
from checkpoint_testenv import binaries, helm, matrix
from checkpoint_testenv.controlplane import ControlPlane, start_control_plane
from checkpoint_testenv.support.kubetarget import KubeTarget
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import (
    RuntimeProcess,
    runtime_config,
    seen_ids,
    stored_rows,
    write_objects,
)

pytestmark = pytest.mark.apiserver

SHARD = "tn1/objectstore/feed-a"  # runtime_config's object-store collector
# A leader keeps its Lease through an API-server restart of up to 20 s (the renew deadline).
STEADY = {"leaseDurationSeconds": 30, "renewDeadlineSeconds": 20, "retryPeriodSeconds": 1}


class Feed:
    """Objects arriving in a bucket folder, one every `interval` seconds, until stopped."""

    def __init__(self, bucket: Path, interval: float = 0.25) -> None:
        self.bucket = bucket
        self.names: list[str] = []
        self._stop = threading.Event()
        self._numbers = itertools.count()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.add()

    def add(self) -> str:
        name = f"o-{next(self._numbers):05d}.json"
        write_objects(self.bucket, [name])
        self.names.append(name)
        return name

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


class Supervisor:
    """The runtime's replicas as Kubernetes runs them: one process at a time, started again
    when it exits (a leader that lost its Lease, or met an error it does not retry, exits to
    start over from the API state). Before each start it notes which objects the stored
    checkpoint already covers: the new process must not emit those again."""

    def __init__(self, workdir: Path, config: dict[str, object], release: helm.Release) -> None:
        self.workdir = workdir
        self.config = config
        self.release = release
        self.kubeconfig = release.write_kubeconfig(workdir / "sa.kubeconfig")
        self.processes: list[RuntimeProcess] = []
        self.covered: dict[str, set[str]] = {}

    @property
    def current(self) -> RuntimeProcess:
        return self.processes[-1]

    def start(self) -> RuntimeProcess:
        name = f"runtime-{len(self.processes)}"
        self.covered[name] = seen_ids(stored_rows(self.release), SHARD) if self.processes else set()
        process = RuntimeProcess(self.workdir, name, self.config, self.kubeconfig)
        self.processes.append(process.start())
        return process

    def leading(self) -> bool:
        if not self.current.running:
            self.start()
        return self.current.leading()

    def emitted(self) -> list[str]:
        return [name for process in self.processes for name in process.objects()]

    def stop(self) -> None:
        for process in self.processes:
            process.stop_quietly()


@pytest.fixture
def feed(tmp_path: Path) -> Iterator[Feed]:
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    found = Feed(bucket)
    yield found
    found.stop()


def server_version(plane: ControlPlane) -> str:
    with plane.admin_api() as api:
        return str(client.VersionApi(api).get_code().git_version)


@pytest.mark.parametrize(
    "pair", [pytest.param(pair, id=f"{pair[0]}-to-{pair[1]}") for pair in matrix.UPGRADES]
)
def test_a_runtime_writing_through_an_upgrade_and_its_rollback_loses_nothing(
    pair: tuple[str, str], tmp_path: Path, feed: Feed
) -> None:
    old, new = (matrix.by_name(name) for name in pair)
    assert new.number == old.number + 1, "a managed upgrade moves one minor at a time"
    try:
        apiservers = {minor.name: matrix.apiserver_binary(minor) for minor in (old, new)}
        bin_dir = binaries.locate()
    except binaries.BinariesMissing as missing:
        pytest.fail(f"API servers unavailable: {missing}", pytrace=False)
    plane = start_control_plane(bin_dir, tmp_path / "plane", apiserver=apiservers[old.name])
    supervisor: Supervisor | None = None
    try:
        assert server_version(plane) == old.version
        release = helm.install(plane, plane.create_namespace("upgrade"))
        config = runtime_config(release, feed.bucket)
        config["leaderElection"].update(STEADY)
        supervisor = Supervisor(tmp_path, config, release)
        supervisor.start()
        feed.start()
        wait_for(supervisor.leading, 30, f"a leader on {old.version}")

        for minor in (new, old):  # the upgrade, then its rollback
            plane.replace_apiserver(apiservers[minor.name])
            assert server_version(plane) == minor.version
            after = feed.add()
            wait_for(supervisor.leading, 60, f"a leader on {minor.version}")
            wait_for(lambda a=after: a in supervisor.emitted(), 30, f"{after} emitted")

        feed.stop()
        last = feed.names[-1]
        wait_for(lambda: last in supervisor.emitted(), 30, "every object emitted")
        leader = supervisor.current
        epoch = leader.metric("checkpoint_leader_epoch")
        assert leader.terminate() == 0  # flushes its checkpoint, releases the Lease

        emitted = supervisor.emitted()
        assert sorted(set(emitted)) == feed.names, "an object was lost"
        for process in supervisor.processes:
            objects = [object_id(name) for name in process.objects()]
            assert len(set(objects)) == len(objects), f"{process.name} emitted an object twice"
            again = set(objects) & supervisor.covered[process.name]
            assert not again, f"{process.name} emitted again what the checkpoint covered"
        assert seen_ids(stored_rows(release), SHARD) >= {object_id(name) for name in feed.names}
        with plane.admin_api() as api:
            stored = KubeTarget.of_release(release, client.CoreV1Api(api)).stored()[SHARD]
        assert (stored.writer, float(stored.epoch)) == (leader.name, epoch)
        exits = [process.wait_exit(0) for process in supervisor.processes[:-1]]
        print(  # the report: how many processes the upgrade took, and why one ended
            f"upgrade {old.name} -> {new.name}: {len(supervisor.processes)} runtime process(es)"
            f" (earlier ones exited {exits}), apiserver ready in"
            f" {[round(s, 1) for s in plane.startup.apiserver]} s"
        )
    finally:
        if supervisor is not None:
            supervisor.stop()
        plane.stop()
