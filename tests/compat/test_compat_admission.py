"""The chart's admission policy on every minor's own API server, as its ServiceAccount.

Each minor's ValidatingAdmissionPolicy (v1, GA from 1.30) compiles the chart's CEL with that
minor's libraries and cost limits: it admits the store's whole life (elect, persist, take over,
grow into chunk slots) and refuses, with the policy's own message (not a compile or cost error),
the writes RBAC lets through: a ConfigMap create outside the store's names, another Lease, an
update of another application's ConfigMap. (The type-checking warnings of the policy's status
are written by kube-controller-manager, which the bare control plane does not run.)
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_runtime.election.elector import LeaderElector
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.store.core import Store
from checkpoint_testenv import helm
from checkpoint_testenv.support.kubetarget import KubeTarget
from checkpoint_testenv.support.polling import wait_for

FEED = "tn/objectstore/feed-a"
VALUES = {
    "admissionPolicy": {"enabled": True},
    "checkpoint": {
        "collectors": [
            {"kind": "objectstore", "tailnet": "tn", "feed": "feed-a", "url": "file:///f"},
        ]
    },
}


def config_map(name: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), data={"v": "1"})


def refused_by_policy(policy: str, call: Any, message: str) -> None:
    with pytest.raises(ApiException) as refused:
        call()
    body = str(refused.value.body)
    assert refused.value.status == 403, body
    assert f"ValidatingAdmissionPolicy '{policy}'" in body, body
    assert message in body, body


def test_the_policy_admits_the_store_and_refuses_what_rbac_lets_through(
    install: Any, admin: client.CoreV1Api
) -> None:
    release: helm.Release = install(VALUES)
    # Two policies: the store's own (what its ServiceAccount may do) and the reserved names
    # (who else may touch them). Both were admitted by this minor's API server, which compiles
    # and cost-checks every expression on create; this test exercises the first.
    names = sorted(
        d["metadata"]["name"] for d in release.manifest if d["kind"] == "ValidatingAdmissionPolicy"
    )
    (policy,) = [name for name in names if not name.endswith(".reserved")]
    assert names == [policy, f"{policy}.reserved"]
    namespace = release.coordination_namespace
    admin.create_namespaced_config_map(namespace, config_map("another-app"))
    target = KubeTarget.of_release(release, admin)
    with api_client(release.configuration()) as api:
        core = client.CoreV1Api(api)

        # The policy reaches the admission cache asynchronously: probe with a dry run.
        def enforced() -> bool:
            try:
                core.create_namespaced_config_map(namespace, config_map("probe"), dry_run="All")
            except ApiException as probe:
                if probe.status == 403:
                    return True
                raise
            return False

        wait_for(enforced, 60, "the admission policy enforced", interval=0.1)
        try:
            lock = KubernetesLeaseLock(api, namespace, release.lease_name, "replica-a")
            assert LeaderElector(lock).try_acquire_or_renew(timeout=10)  # Lease create
            first = Store.open(target.backend(), writer="a", epoch=1)
            first.batch({f"{FEED}/cursor": "c"})  # shard create
            second = Store.open(target.backend(), writer="b", epoch=2)
            second.take_ownership()  # update
            rows = FeedWorkload(FEED, 10_000, "uuid").rows
            second.batch(rows)  # chunk slots created by their derived names
            reread = Store.open(target.backend(), writer="c", epoch=3)
            assert len(reread.items(f"{FEED}/seen/")) == sum("/seen/" in k for k in rows)
            assert len(target.object_names()) > 1
        finally:
            target.close()

        refused_by_policy(
            policy,
            lambda: core.create_namespaced_config_map(namespace, config_map("mine")),
            "may create only its store's shard and chunk-slot ConfigMaps",
        )
        other_lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name="someone-elses-lease"),
            spec=client.V1LeaseSpec(holder_identity="x", lease_duration_seconds=15),
        )
        refused_by_policy(
            policy,
            lambda: client.CoordinationV1Api(api).create_namespaced_lease(namespace, other_lease),
            "may create only its own Lease",
        )
        current = core.read_namespaced_config_map("another-app", namespace)
        current.data = {"v": "overwritten"}
        refused_by_policy(
            policy,
            lambda: core.replace_namespaced_config_map("another-app", namespace, current),
            "may update only ConfigMaps that carry its store's labels",
        )
