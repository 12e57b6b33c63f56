"""A collector whose state spans several chunk slots survives deleting the leader pod.

The object-store collector from the shipped image reads a real S3 server (SeaweedFS on the node
link's host address). Its seen-set is made large (long random object names, `maxSeenKeys`
raised) so its shard's base moves from the head into several chunk slots (gzip-shards-v3). The
leader pod is deleted; the successor opens the chunked shard, checkpoints on, and every object
is emitted exactly once and is marked seen in the stored shards (read back with the product's
reader).
"""

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
    stored_chunks,
    wait_for,
    wait_more_polls,
)
from checkpoint_testenv.node.storage import (
    long_object_name,
    put_feed_objects,
    s3_secret,
    s3_values,
)
from checkpoint_testenv.s3server import S3Server
from checkpoint_testenv.support.runtime_process import seen_ids, stored_rows

FEED = "feed-big"
SHARD = f"tn1/objectstore/{FEED}"
FIRST = 1200  # about 300 KB of compressed seen rows with these names: three chunks
SECOND = 100
SEEN_KEYS = 20_000


@pytest.fixture(scope="module")
def release(node_cluster: NodeCluster, node_s3: S3Server, bucket: str) -> Iterator[helm.Release]:
    plane = node_cluster.control_plane
    namespace = restricted_namespace(plane, "chunked")
    s3_secret(plane, namespace, node_s3)
    values = s3_values(node_s3, bucket, FEED, maxSeenKeys=SEEN_KEYS)
    installed = install_ready(plane, namespace, values)
    yield installed
    helm.run(plane, "uninstall", installed.name, "--namespace", namespace, "--wait")


def upload(server: S3Server, bucket: str, batch: str, count: int) -> list[str]:
    """`count` objects with long random names (their seen rows compress badly: a big base)."""
    names = [long_object_name(batch) for _ in range(count)]
    put_feed_objects(server, bucket, names)
    return sorted(names)


def checkpointed(release: helm.Release) -> set[str]:
    return seen_ids(stored_rows(release), SHARD)


def test_a_state_spanning_several_chunks_survives_deleting_the_leader_pod(
    release: helm.Release, node_s3: S3Server, bucket: str
) -> None:
    logs = ReleaseLogs(release)
    leader = leader_pod(release)
    begun = time.monotonic()
    first = upload(node_s3, bucket, "01", FIRST)
    print(f"\nuploaded {FIRST} objects: {time.monotonic() - begun:.1f} s")
    wait_for(lambda: len(logs.objects(leader, FEED)) >= FIRST, 300, "the first batch emitted")
    wait_for(lambda: len(checkpointed(release)) == FIRST, 120, "the first batch checkpointed")
    chunks = stored_chunks(release)[SHARD]
    assert chunks >= 2, f"the shard's base spans {chunks} chunk slot(s): nothing to prove"
    print(f"first batch checkpointed in {chunks} chunks: {time.monotonic() - begun:.1f} s")

    with release.plane.admin_api() as api:
        client.CoreV1Api(api).delete_namespaced_pod(leader, release.namespace)
    wait_for(lambda: holder_pod(lease_holder(release)) not in ("", leader), 90, "the takeover")
    successor = holder_pod(lease_holder(release))
    second = upload(node_s3, bucket, "02", SECOND)
    logs.refresh()
    wait_for(lambda: len(logs.objects(successor, FEED)) >= SECOND, 180, "the second batch")
    wait_for(
        lambda: len(checkpointed(release)) == FIRST + SECOND, 120, "the second batch checkpointed"
    )
    wait_more_polls(release, logs.followers[successor], SHARD)  # a twice-emitted would show
    logs.refresh()
    counts = Counter(logs.objects(leader, FEED) + logs.objects(successor, FEED))
    assert set(counts) == set(first) | set(second), "lost or unexpected objects"
    assert max(counts.values()) == 1, [key for key, n in counts.items() if n > 1][:10]
    assert set(logs.objects(successor, FEED)) == set(second)
    assert stored_chunks(release)[SHARD] >= 2
    print(f"takeover and second batch: {time.monotonic() - begun:.1f} s")
