"""Leadership buckets on the test node: 3 replicas of the shipped image, B = 6, six flow-log
collectors (one per bucket). The buckets spread 2/2/2; a deleted pod's buckets are led again
within the lease duration and a retry period while every other bucket's collector goes on
polling and persisting; no flow record of a moved bucket is lost or emitted twice; `helm
upgrade` to 2 replicas rebalances to 3/3.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from checkpoint_runtime.election.buckets import bucket_of
from checkpoint_testenv import helm
from checkpoint_testenv.flowlogs import FlowFeed
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.node.observe import (
    ReleaseLogs,
    install_ready,
    pod_metric,
    restricted_namespace,
    runtime_pods,
    wait_for,
)

pytestmark = pytest.mark.node

BUCKETS = 6
ELECTION = {"leaseDurationSeconds": 15, "renewDeadlineSeconds": 10, "retryPeriodSeconds": 1}
POLL_SECONDS = 0.5


def tailnets_covering(buckets: int) -> list[str]:
    """One tailnet per bucket: its flow-log collector (`<tailnet>/flowlogs`) lands there."""
    chosen: dict[int, str] = {}
    number = 0
    while len(chosen) < buckets:
        chosen.setdefault(bucket_of(f"t{number}/flowlogs", buckets), f"t{number}")
        number += 1
    return [chosen[index] for index in range(buckets)]


TAILNETS = tailnets_covering(BUCKETS)


@pytest.fixture(scope="module")
def release(node_cluster: NodeCluster, flow_feed: FlowFeed) -> Iterator[helm.Release]:
    plane = node_cluster.control_plane
    namespace = restricted_namespace(plane, "buckets")
    collectors = [
        {"kind": "flowlogs", "tailnet": t, "url": flow_feed.url, "pollSeconds": POLL_SECONDS}
        for t in TAILNETS
    ]
    values = {
        "replicaCount": 3,
        "checkpoint": {
            "store": {"buckets": BUCKETS},
            "collectors": collectors,
            "leaderElection": ELECTION,
        },
    }
    installed = install_ready(plane, namespace, values)
    yield installed
    helm.run(plane, "uninstall", installed.name, "--namespace", namespace, "--wait")


def pods(release: helm.Release) -> list[str]:
    return sorted(pod.metadata.name for pod in runtime_pods(release))


def led(release: helm.Release, pod: str) -> set[int]:
    """The buckets `pod` leads (none while it does not answer)."""
    try:
        return {
            index
            for index in range(BUCKETS)
            if pod_metric(release, pod, "checkpoint_bucket_leader", f'bucket="{index}"') == 1.0
        }
    except client.ApiException:
        return set()


def polls(release: helm.Release, pod: str, tailnet: str) -> float:
    labels = f'collector="{tailnet}/flowlogs"'
    return pod_metric(release, pod, "checkpoint_collector_polls_total", labels) or 0.0


def flow_numbers(logs: ReleaseLogs, tailnet: str) -> list[int]:
    logs.refresh()
    return [
        int(entry["record"]["n"])
        for follower in logs.followers.values()
        for entry in follower.entries()
        if entry.get("tailnet") == tailnet and isinstance(entry.get("record"), dict)
    ]


def test_buckets_spread_move_alone_and_rebalance(release: helm.Release) -> None:
    logs = ReleaseLogs(release)
    wait_for(
        lambda: sorted(len(led(release, p)) for p in pods(release)) == [2, 2, 2],
        120,
        "the buckets spread 2/2/2",
    )
    placement = {pod: led(release, pod) for pod in pods(release)}
    victim, *survivors = sorted(placement)
    moved = placement[victim]
    kept = {pod: placement[pod] for pod in survivors}
    watched = [(pod, TAILNETS[index]) for pod in survivors for index in sorted(kept[pod])]
    with release.plane.admin_api() as api:
        client.CoreV1Api(api).delete_namespaced_pod(victim, release.namespace)
    started = time.monotonic()
    last = {key: (polls(release, *key), started) for key in watched}
    longest = 0.0
    moved_in: float | None = None
    while moved_in is None:
        now = time.monotonic()
        assert now - started < 60, f"buckets {sorted(moved)} not led again within 60 s"
        for key, (count, since) in list(last.items()):
            seen = polls(release, *key)
            if seen > count:
                longest = max(longest, time.monotonic() - since)
                last[key] = (seen, time.monotonic())
        leaders = {index for pod in pods(release) if pod != victim for index in led(release, pod)}
        if moved <= leaders:
            moved_in = time.monotonic() - started
    for pod in survivors:  # what a survivor led, it leads still: no other bucket moved
        assert kept[pod] <= led(release, pod)
    bound = ELECTION["leaseDurationSeconds"] + ELECTION["retryPeriodSeconds"]
    print(
        f"\ndeleted {victim}: its buckets {sorted(moved)} led again after {moved_in:.1f} s "
        f"(bound {bound} s); the other buckets' collectors polled at most {longest:.1f} s apart"
    )
    assert moved_in <= bound
    assert longest < 3 * POLL_SECONDS + 2.0
    for index in moved:  # nothing lost or emitted twice across the move
        numbers = flow_numbers(logs, TAILNETS[index])
        assert len(numbers) == len(set(numbers)), f"bucket {index}: a record emitted twice"
        assert sorted(numbers) == list(range(min(numbers), max(numbers) + 1)), "a gap"
    wait_for(
        lambda: sorted(len(led(release, p)) for p in pods(release)) == [2, 2, 2],
        90,
        "the replacement pod takes its share: 2/2/2 again",
    )
    helm.run(
        release.plane, "upgrade", release.name, helm.CHART_DIR.as_posix(),
        "--namespace", release.namespace, "--reuse-values", "--set", "replicaCount=2",
        "--wait", "--timeout", "300s",
    )  # fmt: skip
    wait_for(
        lambda: sorted(len(led(release, p)) for p in pods(release)) == [3, 3],
        90,
        "helm upgrade to 2 replicas rebalances to 3/3",
    )
