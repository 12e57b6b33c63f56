"""The chart's NetworkPolicy enforced on the node by kube-network-policies (SIG Network's
enforcer, built at its pin): a release whose egress is restricted to the API server, DNS and its
collector's endpoint elects, checkpoints, collects and passes `helm test`; from inside a release
pod's network namespace an unlisted address on the node's network is unreachable (and reachable
again once the policy is gone); and the render gate's VALUES-4/VALUES-5 warnings name exactly
what breaks on the node: the collector's requests (its windows kept for replay, nothing
emitted), while election and checkpoints go on.

CoreDNS runs on the node (not as pods), so DNS is allowed the way the chart README describes for
a node-local resolver: `dns.enabled: false` and the resolver's address with port 53 under `to`.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from checkpoint_gate.engine import Level
from checkpoint_gate.pipeline import Gate
from checkpoint_testenv import helm
from checkpoint_testenv.flowlogs import FlowFeed
from checkpoint_testenv.node.cluster import NODE_NAME, NodeCluster
from checkpoint_testenv.node.controlplane import KUBERNETES_SERVICE_IP
from checkpoint_testenv.node.kubelet import CLUSTER_DOMAIN
from checkpoint_testenv.node.netpol import PolicyEnforcer
from checkpoint_testenv.node.observe import (
    ReleaseLogs,
    holder_pod,
    install_ready,
    leader_pod,
    lease_holder,
    pod_get,
    restricted_namespace,
    runtime_pods,
    shard_writers,
    wait_for,
)
from checkpoint_testenv.support.runtime_process import metric_value

APP_UID = 10001
FEED_SERVICE = "flows"
POLL_SECONDS = 0.5


@pytest.fixture(scope="module")
def enforcer(node_cluster: NodeCluster) -> Iterator[PolicyEnforcer]:
    assert node_cluster.netns is not None
    started = PolicyEnforcer(
        node_cluster.netns, node_cluster.control_plane, NODE_NAME, node_cluster.workdir
    )
    begun = time.monotonic()
    started.start()
    print(f"\nkube-network-policies answering its queue in {time.monotonic() - begun:.1f} s")
    try:
        yield started
    finally:
        started.stop()


def feed_port(feed: FlowFeed) -> int:
    return int(feed.url.split(":")[2].split("/")[0])


def feed_by_name(cluster: NodeCluster, namespace: str, feed: FlowFeed) -> str:
    """The feed behind a selector-less Service of the namespace: its URL by the Service name."""
    assert cluster.netns is not None
    port = feed_port(feed)
    with cluster.control_plane.admin_api() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_service(
            namespace,
            {
                "metadata": {"name": FEED_SERVICE},
                "spec": {"ports": [{"name": "http", "port": 80, "targetPort": port}]},
            },
        )
        client.DiscoveryV1Api(api).create_namespaced_endpoint_slice(
            namespace,
            {
                "metadata": {
                    "name": f"{FEED_SERVICE}-host",
                    "labels": {"kubernetes.io/service-name": FEED_SERVICE},
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [cluster.netns.host_ip]}],
                "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
            },
        )
    return f"http://{FEED_SERVICE}.{namespace}.svc.{CLUSTER_DOMAIN}/flowlogs"


def resolver(cluster: NodeCluster) -> dict[str, Any]:
    """The node's CoreDNS (on the node address), port 53."""
    assert cluster.netns is not None
    ports = [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]
    return {"cidrs": [f"{cluster.netns.node_ip}/32"], "ports": ports}


def feed_destination(cluster: NodeCluster, feed: FlowFeed) -> dict[str, Any]:
    assert cluster.netns is not None
    return {"cidrs": [f"{cluster.netns.host_ip}/32"], "ports": [{"port": feed_port(feed)}]}


def restricted_values(
    cluster: NodeCluster, url: str, to: list[dict[str, Any]], replicas: int = 2
) -> dict[str, Any]:
    assert cluster.netns is not None
    api = cluster.control_plane
    return {
        "replicaCount": replicas,
        "checkpoint": {
            "collectors": [
                {"kind": "flowlogs", "tailnet": "tn1", "url": url, "pollSeconds": POLL_SECONDS}
            ]
        },
        "networkPolicy": {
            "enabled": True,
            "egress": {
                "restrict": True,
                "apiServer": {
                    # The kubernetes Service's ClusterIP and the API server's own address.
                    "cidrs": [f"{KUBERNETES_SERVICE_IP}/32", f"{cluster.netns.node_ip}/32"],
                    "ports": [443, api.port],
                },
                "dns": {"enabled": False},
                "to": to,
            },
        },
    }


def gate_warnings(values: dict[str, Any]) -> set[str]:
    result = Gate().run(values)
    assert not result.denied, result.findings
    return {f.rule for f in result.findings if f.level is Level.WARN}


def install(cluster: NodeCluster, namespace: str, values: dict[str, Any]) -> helm.Release:
    plane = cluster.control_plane
    begun = time.monotonic()
    installed = install_ready(plane, namespace, values)
    print(f"\nhelm install --wait (egress restricted): {time.monotonic() - begun:.1f} s")
    return installed


def uninstall(release: helm.Release) -> None:
    helm.run(release.plane, "uninstall", release.name, "--namespace", release.namespace, "--wait")


@pytest.fixture(scope="module")
def release(
    node_cluster: NodeCluster, enforcer: PolicyEnforcer, flow_feed: FlowFeed
) -> Iterator[helm.Release]:
    namespace = restricted_namespace(node_cluster.control_plane, "netpol")
    url = feed_by_name(node_cluster, namespace, flow_feed)
    to = [resolver(node_cluster), feed_destination(node_cluster, flow_feed)]
    values = restricted_values(node_cluster, url, to)
    assert gate_warnings(values) & {"VALUES-4", "VALUES-5"} == set()
    installed = install(node_cluster, namespace, values)
    yield installed
    uninstall(installed)


def leader_metric(release: helm.Release, name: str, labels: str = "") -> float | None:
    leader = holder_pod(lease_holder(release))
    return metric_value(pod_get(release, leader, "/metrics"), name, labels)


def test_restricted_release_elects_checkpoints_collects_and_passes_helm_test(
    release: helm.Release,
) -> None:
    policies = [d for d in release.manifest if d.get("kind") == "NetworkPolicy"]
    assert [p["spec"]["policyTypes"] for p in policies] == [["Ingress", "Egress"]]
    pods = runtime_pods(release)
    assert len(pods) == 2
    wait_for(lambda: lease_holder(release) != "", 30, "a Lease holder")
    # Checkpoints: the leader stamps the shards through the API server it is allowed to reach.
    wait_for(lambda: bool(shard_writers(release)), 60, "a shard written")
    assert set(shard_writers(release).values()) == {lease_holder(release)}
    # The collector resolves the feed's Service name (DNS allowed) and reaches its endpoint.
    logs = ReleaseLogs(release)
    leader = holder_pod(lease_holder(release))
    wait_for(lambda: len(logs.flow_numbers(leader)) >= 5, 60, "flow records through the policy")
    output = helm.run(
        release.plane, "test", release.name, "--namespace", release.namespace, "--timeout", "120s"
    )
    assert "Succeeded" in output, output


class Listener:
    """A TCP server on the node link's host address that accepts and closes; counts accepts."""

    def __init__(self, host: str) -> None:
        self.socket = socket.create_server((host, 0))
        self.port = self.socket.getsockname()[1]
        self.accepted = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self.socket.close()


def connects_from_pod(pid: int, host: str, port: int) -> bool:
    """Whether a TCP connect from inside the pod's network namespace, as the app's user,
    succeeds within 3 s."""
    probe = (
        "import socket,sys\n"
        "try:\n"
        f"    socket.create_connection(({host!r}, {port}), timeout=3).close()\n"
        "except OSError:\n"
        "    sys.exit(1)\n"
    )
    command = [
        "nsenter", f"--net=/proc/{pid}/ns/net", "--",
        "setpriv", f"--reuid={APP_UID}", f"--regid={APP_UID}", "--clear-groups",
        "/usr/bin/python3", "-c", probe,  # the host's Debian python, readable by the app user
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, check=False, timeout=20).returncode == 0


def test_an_unlisted_address_is_unreachable_from_inside_a_release_pod(
    node_cluster: NodeCluster, release: helm.Release, flow_feed: FlowFeed
) -> None:
    assert node_cluster.netns is not None
    assert node_cluster.containerd is not None
    host = node_cluster.netns.host_ip
    pod = runtime_pods(release)[0]
    (status,) = [s for s in pod.status.container_statuses if s.name == "runtime"]
    pid = node_cluster.containerd.task_pid(status.container_id)
    unlisted = Listener(host)
    try:
        assert connects_from_pod(pid, host, feed_port(flow_feed)), "the listed endpoint"
        assert not connects_from_pod(pid, host, unlisted.port), "the unlisted port got through"
        assert unlisted.accepted == 0
        # The same connect without the policy: it is the policy that blocks, nothing else.
        (policy,) = [d for d in release.manifest if d.get("kind") == "NetworkPolicy"]
        name = policy["metadata"]["name"]
        with release.plane.admin_api() as api:
            networking = client.NetworkingV1Api(api)
            networking.delete_namespaced_network_policy(name, release.namespace)
            try:
                wait_for(lambda: connects_from_pod(pid, host, unlisted.port), 30, "unblocked")
            finally:
                networking.create_namespaced_network_policy(release.namespace, policy)
        wait_for(lambda: not connects_from_pod(pid, host, unlisted.port), 30, "blocked again")
    finally:
        unlisted.close()


def log_messages(logs: ReleaseLogs, pod: str) -> list[str]:
    follower = logs.followers.get(pod)
    return [str(e.get("msg", "")) for e in follower.entries()] if follower else []


def assert_only_the_collector_breaks(release: helm.Release, symptom: str) -> None:
    """Election and checkpoints go on; the collector's requests fail with `symptom` (each
    window kept in the shard for replay) and nothing is emitted."""
    leader = leader_pod(release)
    logs = ReleaseLogs(release)
    wait_for(
        lambda: any(symptom in m for m in log_messages(logs, leader) if "kept for replay" in m),
        90,
        f"the collector failing ({symptom})",
    )
    # Checkpoints: the leader stamps the shard that keeps the failed windows for replay.
    wait_for(lambda: bool(shard_writers(release)), 60, "a shard written")
    assert set(shard_writers(release).values()) == {lease_holder(release)}
    assert leader_metric(release, "checkpoint_leader") == 1.0
    assert logs.flow_numbers(leader) == [], "records got through a policy that blocks them"


def test_without_the_collector_endpoint_values4_warns_and_only_the_collector_fails(
    node_cluster: NodeCluster, enforcer: PolicyEnforcer, flow_feed: FlowFeed
) -> None:
    namespace = restricted_namespace(node_cluster.control_plane, "netpol-v4")
    # The endpoint by address (no name to resolve), DNS allowed, `to` lists nothing else.
    values = restricted_values(node_cluster, flow_feed.url, [], replicas=1)
    values["networkPolicy"]["egress"]["dns"] = {"enabled": True}
    assert gate_warnings(values) & {"VALUES-4", "VALUES-5"} == {"VALUES-4"}
    release = install(node_cluster, namespace, values)
    try:
        assert_only_the_collector_breaks(release, "timed out")
    finally:
        uninstall(release)


def test_without_dns_values5_warns_and_only_the_named_collector_fails(
    node_cluster: NodeCluster, enforcer: PolicyEnforcer, flow_feed: FlowFeed
) -> None:
    namespace = restricted_namespace(node_cluster.control_plane, "netpol-v5")
    url = feed_by_name(node_cluster, namespace, flow_feed)
    # The endpoint is listed, but no resolver: its name cannot be looked up.
    values = restricted_values(
        node_cluster, url, [feed_destination(node_cluster, flow_feed)], replicas=1
    )
    assert gate_warnings(values) & {"VALUES-4", "VALUES-5"} == {"VALUES-5"}
    release = install(node_cluster, namespace, values)
    try:
        assert_only_the_collector_breaks(release, "name resolution")
    finally:
        uninstall(release)
