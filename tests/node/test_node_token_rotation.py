"""The runtime's API token is short-lived, and the runtime keeps working across its rotation.

The chart mounts a projected ServiceAccount token of `serviceAccount.tokenExpirationSeconds`
(here the API server's minimum, 600 s) instead of the automounted one. The kubelet writes a new
token at 80% of its life; the old one then stops authenticating at its `exp`. This follows the
leader's token file on the node: it changes, the old token is refused by the API server, and the
leader goes on renewing its Lease and writing its shard afterwards, without a restart and without
losing leadership: its client reread the file.

The token's lifetime cannot be shorter than 600 s, so this takes about 11 minutes from the
release's install; the release is installed when the node tests start (tests/node/conftest.py)
and this test runs after the others, so the wait overlaps theirs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from checkpoint_runtime.constants import ANNOTATION_WRITE_ID
from checkpoint_testenv import helm
from checkpoint_testenv.node.observe import lease_holder, runtime_pods, wait_for
from checkpoint_testenv.node.tokens import TOKEN_EXPIRATION_SECONDS, FirstToken, token_claims

pytestmark = pytest.mark.node

EXPIRY_LEEWAY_SECONDS = 60.0


@pytest.fixture(scope="module", autouse=True)
def _uninstalled_after(token_release: FirstToken) -> Iterator[None]:
    """The release goes when this module is done (its pods would poll on, and the node with
    them, until the end of the session); helm does not wait for the pods to end."""
    yield
    release = token_release.release
    helm.run(release.plane, "uninstall", release.name, "--namespace", release.namespace)


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


def test_the_leader_keeps_writing_after_its_first_token_expired(
    token_release: FirstToken,
) -> None:
    release, first = token_release.release, token_release.token
    claims = token_claims(first)
    lifetime = claims["exp"] - claims["iat"]
    assert lifetime == TOKEN_EXPIRATION_SECONDS, claims
    assert lease_holder(release) == token_release.holder
    if time.time() < claims["exp"]:
        assert _authenticated(release, first)

    # The kubelet renews the token at 80% of its life (plus jitter and its sync period).
    wait_for(
        lambda: token_release.token_file.read_text() != first,
        max(60.0, claims["exp"] - time.time()),
        "the kubelet writing a new token",
        interval=1.0,  # a read of a file on the node's disk
    )
    renewed = token_release.token_file.read_text()
    assert token_claims(renewed)["iat"] > claims["iat"]

    # Past the first token's exp (plus the API server's 60 s leeway for clock skew, and its
    # 10 s cache of authentication results) it is refused; the pod has only the new one.
    # Asked once a second from now on: the test goes on the moment the server refuses it.
    until_refused = max(0.0, claims["exp"] + EXPIRY_LEEWAY_SECONDS - time.time()) + 60
    wait_for(
        lambda: not _authenticated(release, first),
        until_refused,
        "the first token refused",
        interval=1.0,
    )
    assert _authenticated(release, renewed)

    # The leader renews its Lease (every 2 s) and writes shards with the reread token.
    renewed_at = release.read_lease().spec.renew_time
    before = _write_ids(release)
    wait_for(lambda: release.read_lease().spec.renew_time != renewed_at, 30, "a Lease renewal")
    wait_for(lambda: _write_ids(release) - before != set(), 60, "a shard written after expiry")
    assert lease_holder(release) == token_release.holder
    (pod,) = [p for p in runtime_pods(release) if p.metadata.name == token_release.pod_name]
    restarts = [status.restart_count for status in pod.status.container_statuses]
    assert restarts == [0], restarts
