"""End to end on the real API server: the Lease is deleted and recreated between two leaders.

Two `checkpoint-runtime run` processes lead one after the other (the shards carry epoch 1), the
Lease is deleted, and a third process is elected on the recreated Lease at epoch 0. It must lead
and collect without an operator step: its renewal raises the epoch above the shards' stamps.
Without that it would exit 1 on every start, refused by shards of a newer epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from checkpoint_runtime.constants import ANNOTATION_EPOCH_BASE
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import RuntimeProcess, runtime_config, write_objects


@pytest.fixture
def release(chart_install: Callable[..., Release]) -> Release:
    return chart_install()


def test_a_leader_of_a_recreated_lease_takes_over_without_re_emitting(
    release: Release, tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    config = runtime_config(release, bucket)
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    write_objects(bucket, ["x-0.json", "x-1.json"])
    emitted: list[str] = []
    for name in ("runtime-a", "runtime-b"):  # epochs 0 and 1; each releases on SIGTERM
        proc = RuntimeProcess(tmp_path, name, config, kubeconfig)
        procs.append(proc.start())
        wait_for(proc.leading, 20, f"{name} leads")
        write_objects(bucket, [f"{name}.json"])
        wait_for(lambda p=proc, n=name: f"{n}.json" in p.objects(), 20, f"{name} emits")
        assert proc.terminate() == 0
        emitted += proc.objects()
    assert release.read_lease().spec.lease_transitions == 1

    with release.plane.admin_api() as api:
        client.CoordinationV1Api(api).delete_namespaced_lease(
            release.lease_name, release.coordination_namespace
        )
    c = RuntimeProcess(tmp_path, "runtime-c", config, kubeconfig)
    procs.append(c.start())
    wait_for(c.leading, 20, "runtime-c leads on the recreated Lease")

    lease = release.read_lease()
    assert lease.spec.holder_identity == "runtime-c"
    assert lease.spec.lease_transitions == 0  # a new Lease object
    assert (lease.metadata.annotations or {}).get(ANNOTATION_EPOCH_BASE) == "2"
    assert c.metric("checkpoint_leader_epoch") == 2.0  # above the shards' epoch 1
    write_objects(bucket, ["x-2.json"])
    wait_for(lambda: "x-2.json" in c.objects(), 20, "runtime-c emits the new object")
    assert c.running
    assert sorted(emitted) == ["runtime-a.json", "runtime-b.json", "x-0.json", "x-1.json"]
    assert c.objects() == ["x-2.json"]  # nothing the checkpoint covers is emitted again
