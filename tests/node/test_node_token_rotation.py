"""The runtime's API token is short-lived, and the runtime keeps working across its rotation.

The chart mounts a projected ServiceAccount token of `serviceAccount.tokenExpirationSeconds`
(here the API server's minimum, 600 s) instead of the automounted one. The kubelet writes a new
token at 80% of its life; the old one then stops authenticating at its `exp`. This follows the
leader's token file on the node: it changes, the old token is refused by the API server, and the
leader goes on renewing its Lease and writing its shard afterwards, without a restart and without
losing leadership: its client reread the file.

About 11 minutes: the token's lifetime cannot be shorter than 600 s.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from checkpoint_runtime.constants import ANNOTATION_WRITE_ID
from checkpoint_testenv import helm
from checkpoint_testenv.flowlogs import FlowFeed
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.node.observe import (
    describe,
    holder_pod,
    lease_holder,
    restricted_namespace,
    runtime_pods,
    shard_writers,
    wait_for,
)

pytestmark = pytest.mark.node

EXPIRATION_SECONDS = 600  # the API server refuses a projected token shorter than this
VOLUME = "kube-api-access"
EXPIRY_LEEWAY_SECONDS = 60.0


def _token_file(node: NodeCluster, pod: Any) -> Path:
    """The projected token as the kubelet keeps it on the node for `pod`."""
    volumes = node.workdir / "kubelet" / "pods" / pod.metadata.uid / "volumes"
    return volumes / "kubernetes.io~projected" / VOLUME / "token"


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


def _authenticated(release: helm.Release, token: str) -> bool:
    with release.plane.admin_api() as api:
        review = client.AuthenticationV1Api(api).create_token_review(
            client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token))
        )
    return bool(review.status.authenticated)


def _write_ids(release: helm.Release) -> set[str]:
    with release.plane.admin_api() as api:
        listed = client.CoreV1Api(api).list_namespaced_config_map(release.coordination_namespace)
    return {
        cm.metadata.annotations[ANNOTATION_WRITE_ID]
        for cm in listed.items
        if cm.metadata.annotations and ANNOTATION_WRITE_ID in cm.metadata.annotations
    }


@pytest.fixture(scope="module")
def release(node_cluster: NodeCluster, flow_feed: FlowFeed) -> helm.Release:
    plane = node_cluster.control_plane
    namespace = restricted_namespace(plane, "token")
    values = {
        "serviceAccount": {"tokenExpirationSeconds": EXPIRATION_SECONDS},
        "checkpoint": {
            "collectors": [{"kind": "flowlogs", "url": flow_feed.url, "pollSeconds": 0.5}]
        },
    }
    try:
        return helm.install(plane, namespace, values, wait=True)
    except helm.HelmError as failure:
        raise AssertionError(f"{failure}\n{describe(plane, namespace)}") from failure


def test_the_leader_keeps_writing_after_its_first_token_expired(
    node_cluster: NodeCluster, release: helm.Release
) -> None:
    wait_for(lambda: bool(shard_writers(release)), 60, "a shard written")
    holder = lease_holder(release)
    (leader,) = [pod for pod in runtime_pods(release) if pod.metadata.name == holder_pod(holder)]
    token_file = _token_file(node_cluster, leader)
    first = token_file.read_text()
    claims = _claims(first)
    assert claims["exp"] - claims["iat"] == EXPIRATION_SECONDS, claims
    assert _authenticated(release, first)

    # The kubelet renews the token at 80% of its life (plus jitter and its sync period).
    wait_for(
        lambda: token_file.read_text() != first,
        EXPIRATION_SECONDS,
        "the kubelet writing a new token",
        interval=5.0,
    )
    renewed = token_file.read_text()
    assert _claims(renewed)["iat"] > claims["iat"]

    # Past the first token's exp (plus the API server's 60 s leeway for clock skew, and its
    # 10 s cache of authentication results) it is refused; the pod has only the new one.
    time.sleep(max(0.0, claims["exp"] - time.time()) + EXPIRY_LEEWAY_SECONDS)
    wait_for(lambda: not _authenticated(release, first), 60, "the first token refused")
    assert _authenticated(release, renewed)

    # The leader renews its Lease (every 2 s) and writes shards with the reread token.
    renewed_at = release.read_lease().spec.renew_time
    before = _write_ids(release)
    wait_for(lambda: release.read_lease().spec.renew_time != renewed_at, 30, "a Lease renewal")
    wait_for(lambda: _write_ids(release) - before != set(), 60, "a shard written after expiry")
    assert lease_holder(release) == holder
    (pod,) = [pod for pod in runtime_pods(release) if pod.metadata.name == leader.metadata.name]
    restarts = [status.restart_count for status in pod.status.container_statuses]
    assert restarts == [0], restarts
