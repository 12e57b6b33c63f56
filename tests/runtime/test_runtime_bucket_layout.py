"""Changing the number of leadership buckets on a running store (1 -> 4 -> 1) on the real API
server, as the chart's ServiceAccount: the step is recording the new number on the store's
Lease; a replica configured with another number leads nothing, and one that leads under the
old layout hands over (stop, flush, release) before the new layout leads any bucket. No object
is emitted twice, no checkpoint is lost, and at no moment do two layouts lead.

A one-bucket replica leads through the store's own Lease; a replica of four buckets leads only
while that Lease records four and has no live holder. So the two layouts' Lease sets never both
lead: the one-bucket layout's only Lease is the gate the other waits on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from checkpoint_runtime.constants import ANNOTATION_BUCKETS, ANNOTATION_LEASE_UID
from checkpoint_runtime.election.buckets import bucket_lease_name, bucket_of
from checkpoint_runtime.format.naming import shard_name
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.buckets import bucketed_config, feeds_covering, led
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import RuntimeProcess, write_objects

BUCKETS = 4


@pytest.fixture
def release(chart_install: Callable[..., Release]) -> Release:
    # the Role of four buckets pins the store's Lease too: both layouts run under it
    return chart_install({"checkpoint": {"store": {"buckets": BUCKETS}}})


def record_layout(release: Release, buckets: int) -> None:
    """The operator's step: record the number of buckets on the store's Lease."""
    with release.plane.admin_api() as api:
        client.CoordinationV1Api(api).patch_namespaced_lease(
            release.lease_name,
            release.coordination_namespace,
            {"metadata": {"annotations": {ANNOTATION_BUCKETS: str(buckets)}}},
        )


def stamps(release: Release, feeds: list[str]) -> set[str]:
    with release.plane.admin_api() as api:
        core = client.CoreV1Api(api)
        return {
            core.read_namespaced_config_map(
                shard_name(release.lease_name, f"tn1/objectstore/{feed}"),
                release.coordination_namespace,
            ).metadata.annotations[ANNOTATION_LEASE_UID]
            for feed in feeds
        }


def lease_uid(release: Release, name: str) -> str:
    with release.plane.admin_api() as api:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(
            name, release.coordination_namespace
        )
        return str(lease.metadata.uid)


def test_changing_the_number_of_buckets_hands_over_between_layouts(
    release: Release, tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    feeds = feeds_covering(BUCKETS)
    for feed in feeds:
        (tmp_path / feed).mkdir()
    four = bucketed_config(release, tmp_path, feeds)
    one = {**four, "store": {**four["store"], "buckets": 1}}
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    written: list[str] = []

    def write_round(tag: str) -> None:
        for feed in feeds:
            write_objects(tmp_path / feed, [f"{feed}-{tag}.json"])
            written.append(f"{feed}-{tag}.json")

    def emitted(*processes: RuntimeProcess) -> list[str]:
        return sorted(name for proc in processes for name in proc.objects())

    # one bucket: the store's Lease, as without buckets
    single = RuntimeProcess(tmp_path, "single-a", one, kubeconfig)
    procs.append(single.start())
    wait_for(single.leading, 20, "the one-bucket replica leads")
    write_round("0")
    wait_for(lambda: len(single.objects()) == len(feeds), 20, "it emits round 0")
    root_uid = lease_uid(release, release.lease_name)
    assert stamps(release, feeds) == {root_uid}

    # a replica of four buckets starts: the Lease records none (one), so it leads nothing
    spread = RuntimeProcess(tmp_path, "spread-a", four, kubeconfig)
    procs.append(spread.start())
    wait_for(lambda: "records 1 bucket" in spread.get("/readyz")[1], 20, "it names the layout")
    assert spread.get("/readyz")[0] == 503
    assert led(spread) == 0

    # the step: record four. The one-bucket leader hands over and exits 2, naming why
    record_layout(release, BUCKETS)
    assert single.wait_exit(20) == 2
    assert any(e.get("error") == "BucketLayoutError" for e in single.logs())
    wait_for(lambda: led(spread) == BUCKETS, 20, "the replica of four buckets leads them all")
    write_round("1")
    wait_for(lambda: len(spread.objects()) == len(feeds), 20, "it emits round 1 only")
    bucket_uids = {
        lease_uid(release, bucket_lease_name(release.lease_name, index, BUCKETS))
        for index in {bucket_of(f"tn1/objectstore/{feed}", BUCKETS) for feed in feeds}
    }
    assert stamps(release, feeds) == bucket_uids  # every shard under its bucket's Lease now

    # a one-bucket replica (an old pod restarting) now refuses to lead
    late = RuntimeProcess(tmp_path, "single-late", one, kubeconfig)
    procs.append(late.start())
    wait_for(lambda: "another bucket layout" in late.get("/readyz")[1], 20, "it names the layout")
    assert not late.leading()

    # and back: record one; the four-bucket replica hands every bucket over and leads none,
    # then the waiting one-bucket replica takes the store's Lease and every shard
    record_layout(release, 1)
    wait_for(lambda: led(spread) == 0, 20, "the replica of four buckets hands over")
    wait_for(late.leading, 20, "the one-bucket replica leads again")
    write_round("2")
    wait_for(lambda: len(late.objects()) == len(feeds), 20, "it emits round 2 only")
    assert stamps(release, feeds) == {root_uid}
    assert emitted(single, spread, late) == sorted(written)  # each object exactly once
    assert spread.running
    assert late.running
