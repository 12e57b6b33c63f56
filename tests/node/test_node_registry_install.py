"""The release installed as a platform team installs it: `release.py --push` to a registry the
node reaches (on the node link's host address), the signatures verified with the release key,
`helm install oci://…@sha256:…` with the image by digest, containerd pulling it from that
registry through its hosts.toml (not an import); helm test passes and the store elects and
writes. Then an image signed with another key is pushed under the release's tag: verification
with the release key refuses it, and a pod the digest-pinned release starts afresh still runs the
released image."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from checkpoint_testenv import helm, registry
from checkpoint_testenv.binaries import BinariesMissing
from checkpoint_testenv.flowlogs import FlowFeed
from checkpoint_testenv.node import images
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.node.observe import (
    holder_pod,
    install_ready,
    lease_holder,
    ready,
    restricted_namespace,
    runtime_pods,
    shard_writers,
    wait_for,
)
from checkpoint_testenv.registry import Registry, start_registry
from checkpoint_testenv.releasetools import (
    MadeRelease,
    SigningKeys,
    make_keys,
    push_impostor,
    push_release,
    verify,
)


@dataclass(frozen=True)
class Installed:
    made: MadeRelease
    keys: SigningKeys
    registry: Registry
    release: helm.Release

    @property
    def image_ref(self) -> str:
        return str(self.made.record["pushed"]["image"])

    @property
    def trusted_root(self) -> Path:
        return self.made.folder / "trusted-root.json"


@pytest.fixture(scope="module")
def node_registry(
    node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Registry]:
    """A registry on the node link's host address, which the node's containerd reaches."""
    assert node_cluster.netns is not None
    try:
        crane = registry.locate() / "crane"
    except BinariesMissing as missing:
        pytest.fail(f"OCI test registry unavailable: {missing}", pytrace=False)
    server = start_registry(
        crane, tmp_path_factory.mktemp("node-registry"), node_cluster.netns.host_ip
    )
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def installed(
    node_cluster: NodeCluster,
    node_registry: Registry,
    flow_feed: FlowFeed,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Installed]:
    keys = make_keys(tmp_path_factory.mktemp("node-release-keys"))
    made = push_release(
        node_registry.host,
        keys,
        tmp_path_factory.mktemp("node-release") / "out",
        "--image-archive",
        str(images.app_image_archive()),  # the archive the node fixture took, cached
    )
    chart_ref = str(made.record["pushed"]["chart"])
    trusted_root = made.folder / "trusted-root.json"
    # What the README asks before an install: the chart and the image verify by digest.
    assert verify(chart_ref, keys.public, trusted_root)
    assert verify(str(made.record["pushed"]["image"]), keys.public, trusted_root)
    assert node_cluster.containerd is not None
    node_cluster.containerd.pull_over_plain_http(node_registry.host)
    plane = node_cluster.control_plane
    namespace = restricted_namespace(plane, "oci")
    values = {
        "checkpoint": {
            "collectors": [{"kind": "flowlogs", "url": flow_feed.url, "pollSeconds": 0.5}]
        }
    }
    release = install_ready(
        plane,
        namespace,
        values,
        release="oci",
        chart_ref=f"oci://{chart_ref}",
        helm_args=("--plain-http",),
    )
    try:
        yield Installed(made, keys, node_registry, release)
    finally:
        helm.run(plane, "uninstall", release.name, "--namespace", namespace, "--wait")


def running_images(installed: Installed) -> set[tuple[str, str]]:
    """(the image the pod spec names, the imageID its container runs) of the release's runtime
    containers. (The status's `image` is no help: containerd reports any name of the same image
    config there, e.g. the name the node imported the same image under.)"""
    found = set()
    for pod in runtime_pods(installed.release):
        (spec,) = [c.image for c in pod.spec.containers if c.name == "runtime"]
        (status,) = [s for s in pod.status.container_statuses or [] if s.name == "runtime"]
        found.add((spec, status.image_id))
    return found


def test_the_release_installs_from_the_registry_by_digest_and_the_store_writes(
    installed: Installed, node_cluster: NodeCluster
) -> None:
    digest = str(installed.made.record["image"]["digest"])
    repository = f"{installed.registry.host}/checkpoint-runtime"
    version = installed.made.record["version"]
    assert running_images(installed) == {
        (f"{repository}:{version}@{digest}", f"{repository}@{digest}")
    }
    # pulled from the registry: containerd names it by the registry's reference
    assert node_cluster.containerd is not None
    assert f"{repository}@{digest}" in node_cluster.containerd.images()
    wait_for(lambda: bool(shard_writers(installed.release)), 60, "a shard written")
    wait_for(lambda: lease_holder(installed.release) != "", 30, "a Lease holder")
    holder = lease_holder(installed.release)
    assert holder_pod(holder) in {p.metadata.name for p in runtime_pods(installed.release)}
    assert set(shard_writers(installed.release).values()) == {holder}
    output = helm.run(
        installed.release.plane,
        "test",
        installed.release.name,
        "--namespace",
        installed.release.namespace,
        "--timeout",
        "120s",
    )
    assert "Phase:" in output
    assert "Failed" not in output


def test_a_tampered_image_under_the_tag_is_refused_and_never_runs(
    installed: Installed, tmp_path: Path
) -> None:
    version = str(installed.made.record["version"])
    repository = installed.image_ref.split("@", 1)[0]
    released = running_images(installed)
    impostor = make_keys(tmp_path / "impostor")
    tampered = push_impostor(
        installed.registry, installed.image_ref, f"{repository}:{version}", impostor, tmp_path
    )
    assert installed.registry.digest(f"{repository}:{version}") == tampered
    assert not verify(f"{repository}:{version}", installed.keys.public, installed.trusted_root)
    # a pod started afresh (the leader deleted) pulls the pinned digest, not the tag
    holder = lease_holder(installed.release)
    (leader,) = [
        p for p in runtime_pods(installed.release) if p.metadata.name == holder_pod(holder)
    ]
    plane = installed.release.plane
    with plane.admin_api() as api:
        client.CoreV1Api(api).delete_namespaced_pod(
            leader.metadata.name, installed.release.namespace, grace_period_seconds=0
        )

    def replaced() -> bool:
        pods = runtime_pods(installed.release)
        return (
            len(pods) == 2
            and leader.metadata.name not in {p.metadata.name for p in pods}
            and all(ready(p) for p in pods)
        )

    wait_for(replaced, 120, "the deleted pod replaced and Ready")
    now = running_images(installed)
    assert len(now) == 1  # both pods, the new one included, run one image
    assert now == released
    assert all(tampered not in image_id for _, image_id in running_images(installed))
