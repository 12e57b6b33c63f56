"""`checkpoint.store.backend=file` on an existing PVC: the checkpoint outlives the pod.

The test creates what a platform team would have: a PersistentVolume (hostPath on the node,
owned by the pod's UID) and a claim bound to it, then installs the chart with that claim. The
pod is deleted; its replacement (one replica, `Recreate`) opens the same files and continues the
flowlogs collector from the stored cursor.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from checkpoint_testenv import helm
from checkpoint_testenv.flowlogs import FlowFeed
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.node.observe import (
    ReleaseLogs,
    install_ready,
    ready,
    restricted_namespace,
    runtime_pods,
    wait_for,
)
from checkpoint_testenv.node.storage import host_claim

CLAIM = "checkpoints"
POLL_SECONDS = 0.5


@pytest.fixture(scope="module")
def volume_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pv") / "checkpoints"


@pytest.fixture(scope="module")
def file_release(node_cluster: NodeCluster, flow_feed: FlowFeed, volume_dir: Path) -> helm.Release:
    plane = node_cluster.control_plane
    namespace = restricted_namespace(plane, "file")
    host_claim(plane, namespace, CLAIM, volume_dir)
    values = {
        "checkpoint": {
            "store": {"backend": "file"},
            "file": {"existingClaim": CLAIM},
            "collectors": [{"kind": "flowlogs", "url": flow_feed.url, "pollSeconds": POLL_SECONDS}],
        }
    }
    return install_ready(plane, namespace, values)


def test_file_store_state_survives_pod_deletion(
    file_release: helm.Release, flow_feed: FlowFeed, volume_dir: Path
) -> None:
    (first,) = runtime_pods(file_release)
    first_name = first.metadata.name
    logs = ReleaseLogs(file_release)
    wait_for(lambda: len(logs.flow_numbers(first_name)) >= 10, 60, "records emitted")
    wait_for(lambda: any(volume_dir.rglob("*")), 30, "checkpoint files on the volume")

    with file_release.plane.admin_api() as api:
        client.CoreV1Api(api).delete_namespaced_pod(first_name, file_release.namespace)
    logs.followers[first_name].join(timeout=60)
    assert logs.followers[first_name].done

    def replacement_ready() -> bool:
        pods = runtime_pods(file_release)
        return len(pods) == 1 and pods[0].metadata.name != first_name and ready(pods[0])

    wait_for(replacement_ready, 120, "the replacement pod Ready")
    (second,) = runtime_pods(file_release)
    logs.refresh()
    second_name = second.metadata.name
    live = flow_feed.added[-1]  # the feed runs on into the replacement's life
    wait_for(
        lambda: max(logs.flow_numbers(second_name), default=0) > live,
        60,
        "the replacement emitting records added after it was Ready",
    )
    added = flow_feed.stop()
    wait_for(
        lambda: max(logs.flow_numbers(second_name), default=0) >= added[-1],
        60,
        "the replacement emitting the last record",
    )
    before, after = logs.flow_numbers(first_name), logs.flow_numbers(second_name)
    due = {number for number in added if number >= min(before)}
    assert due <= set(before) | set(after), f"lost: {sorted(due - set(before) - set(after))[:20]}"
    # The replacement continued from the cursor on the volume, not from its own first poll
    # (which would have lost every record of the downtime).
    assert min(after) <= max(before) + int(2 * POLL_SECONDS / flow_feed.interval) + 2
