"""The object-store collector from the shipped image, on the node, reading a real S3 server
(SeaweedFS on the node link's host address, which the pods reach over the node's network) with
credentials from a Secret through the chart's `envFrom`: a scan is emitted and checkpointed, the
leader pod is deleted, and the new leader continues from the checkpoint: nothing lost, nothing
emitted twice."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
from kubernetes import client

from checkpoint_testenv import helm
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.node.observe import (
    ReleaseLogs,
    holder_pod,
    install_ready,
    leader_pod,
    lease_holder,
    restricted_namespace,
    wait_for,
    wait_more_polls,
)
from checkpoint_testenv.node.storage import put_feed_objects, s3_secret, s3_values
from checkpoint_testenv.s3server import S3Server
from checkpoint_testenv.support.runtime_process import seen_ids, stored_rows

FEED = "feed-s3"
SHARD = f"tn1/objectstore/{FEED}"


@pytest.fixture(scope="module")
def release(node_cluster: NodeCluster, node_s3: S3Server, bucket: str) -> Iterator[helm.Release]:
    plane = node_cluster.control_plane
    namespace = restricted_namespace(plane, "s3")
    s3_secret(plane, namespace, node_s3)
    values = s3_values(node_s3, bucket, FEED)
    begun = time.monotonic()
    installed = install_ready(plane, namespace, values)
    print(f"\nhelm install --wait (S3 collector): {time.monotonic() - begun:.1f} s")
    yield installed
    helm.run(plane, "uninstall", installed.name, "--namespace", namespace, "--wait")


def upload(server: S3Server, bucket: str, batch: str, count: int) -> list[str]:
    names = [f"2026/12/{batch}/obj-{index:04d}.json" for index in range(count)]
    put_feed_objects(server, bucket, names)
    return names


def checkpointed(release: helm.Release) -> set[str]:
    return seen_ids(stored_rows(release), SHARD)


def test_s3_scan_from_the_image_survives_deleting_the_leader_pod(
    release: helm.Release, node_s3: S3Server, bucket: str
) -> None:
    logs = ReleaseLogs(release)
    leader = leader_pod(release)
    first = upload(node_s3, bucket, "01", 300)
    wait_for(lambda: sorted(logs.objects(leader, FEED)) == first, 120, "the first batch emitted")
    # Checkpointed: every object of the batch is marked seen in the leader's shard.
    wait_for(lambda: len(checkpointed(release)) == len(first), 60, "the batch checkpointed")

    with release.plane.admin_api() as api:
        client.CoreV1Api(api).delete_namespaced_pod(leader, release.namespace)
    wait_for(lambda: holder_pod(lease_holder(release)) not in ("", leader), 90, "the takeover")
    successor = holder_pod(lease_holder(release))
    second = upload(node_s3, bucket, "02", 200)
    logs.refresh()
    wait_for(lambda: len(logs.objects(successor, FEED)) >= len(second), 120, "the second batch")
    wait_more_polls(release, logs.followers[successor], SHARD)  # a twice-emitted would show
    logs.refresh()
    counts = Counter(logs.objects(leader, FEED) + logs.objects(successor, FEED))
    assert set(counts) == set(first) | set(second), "lost or unexpected objects"
    assert max(counts.values()) == 1, [key for key, n in counts.items() if n > 1][:10]
    assert set(logs.objects(successor, FEED)) == set(second)
    assert len(checkpointed(release)) == len(first) + len(second)
