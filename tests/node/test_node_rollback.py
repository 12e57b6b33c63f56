"""`helm rollback` to the previous release after the shards moved to gzip-shards-v3.

The previous release is the repository's own history: the last commit whose runtime writes
gzip-shards-v2, its chart and its image built by its own scripts (as version 0.0.9, so the two
images differ by tag). One release for the module, fed by a real S3 server:

1. revision 1: the previous chart and image; the object-store collector checkpoints v2 shards;
2. revision 2: `helm upgrade` to this chart and image; the shard moves to v3 (its seen-set large
   enough that the base leaves the head for a chunk slot);
3. `helm rollback` to revision 1 without the downgrade step: the previous release's pods refuse
   the v3 shard by name (the container's termination message) and write nothing;
4. the documented way back: scale the runtime to zero, `checkpoint-runtime downgrade --to v2`
   from an operator's machine, scale up again: the previous release opens the rewritten shard
   (v2, readable by the v2 decoder), loses no row and emits nothing twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from checkpoint_runtime.constants import ANNOTATION_FORMAT, SHARD_FORMAT, SHARD_FORMAT_V2
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.naming import object_id
from checkpoint_testenv import helm
from checkpoint_testenv.node import images
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.node.observe import (
    LogFollower,
    describe,
    holder_pod,
    install_ready,
    lease_holder,
    ready,
    restricted_namespace,
    runtime_pods,
    shard_writers,
    stored_chunks,
    stored_heads,
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
from checkpoint_testenv.support.bytecode import child_env
from checkpoint_testenv.support.runtime_process import seen_ids, stored_rows

FEED = "feed-rollback"
SHARD = f"tn1/objectstore/{FEED}"


class Scene:
    """The release and what each step uploaded."""

    def __init__(self, release: helm.Release, previous: images.PreviousRelease) -> None:
        self.release = release
        self.previous = previous
        self.uploaded: list[str] = []
        self.values_file = release.plane.workdir / "helm" / f"{release.namespace}-current.json"


@pytest.fixture(scope="module")
def scene(
    node_cluster: NodeCluster,
    node_s3: S3Server,
    bucket: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Scene]:
    begun = time.monotonic()
    previous = images.previous_release(tmp_path_factory.mktemp("previous"))
    assert node_cluster.containerd is not None
    node_cluster.containerd.import_image(previous.archive)
    print(f"\nprevious release's image built and imported: {time.monotonic() - begun:.1f} s")
    plane = node_cluster.control_plane
    namespace = restricted_namespace(plane, "rollback")
    s3_secret(plane, namespace, node_s3)
    values = s3_values(node_s3, bucket, FEED, maxSeenKeys=20_000)
    old = {**values, "image": {"tag": previous.tag}}
    release = install_ready(plane, namespace, old, chart_dir=previous.chart_dir)
    found = Scene(release, previous)
    found.values_file.write_text(json.dumps(values))
    yield found
    helm.run(plane, "uninstall", release.name, "--namespace", namespace, "--wait")


def upload(scene: Scene, server: S3Server, bucket: str, batch: str, count: int) -> list[str]:
    """`count` objects with long random names (seen rows that compress badly)."""
    names = [long_object_name(batch) for _ in range(count)]
    put_feed_objects(server, bucket, names)
    scene.uploaded += names
    return names


def checkpointed(release: helm.Release) -> set[str]:
    """The object names the stored shard marks as seen (as ids)."""
    return seen_ids(stored_rows(release), SHARD)


def ids(names: list[str]) -> set[str]:
    return {object_id(name) for name in names}


def head_format(release: helm.Release) -> str:
    return stored_heads(release)[SHARD].annotations[ANNOTATION_FORMAT]


def image_of(pod: Any) -> str:
    (container,) = [c for c in pod.spec.containers if c.name == "runtime"]
    return str(container.image)


def scale(release: helm.Release, replicas: int) -> None:
    (name,) = [d["metadata"]["name"] for d in release.manifest if d.get("kind") == "Deployment"]
    with release.plane.admin_api() as api:
        client.AppsV1Api(api).patch_namespaced_deployment_scale(
            name, release.namespace, {"spec": {"replicas": replicas}}
        )


def test_the_previous_release_checkpoints_v2_shards(
    scene: Scene, node_s3: S3Server, bucket: str
) -> None:
    release = scene.release
    pods = runtime_pods(release)
    assert pods
    assert all(image_of(p).endswith(f":{scene.previous.tag}") for p in pods)
    upload(scene, node_s3, bucket, "01", 120)
    wait_for(lambda: checkpointed(release) == ids(scene.uploaded), 180, "batch 1 checkpointed")
    assert head_format(release) == SHARD_FORMAT_V2


def test_upgrading_moves_the_shard_to_v3_chunks(
    scene: Scene, node_s3: S3Server, bucket: str
) -> None:
    release = scene.release
    helm.run(
        release.plane, "upgrade", release.name, helm.CHART_DIR.as_posix(),
        "--namespace", release.namespace, "--values", str(scene.values_file),
        "--wait", "--timeout", "300s",
    )  # fmt: skip
    assert all(not image_of(p).endswith(f":{scene.previous.tag}") for p in runtime_pods(release))
    # Enough long random names that the row-block base passes what stays inline in the head
    # (half of a chunk's target size) and goes into a chunk slot.
    upload(scene, node_s3, bucket, "02", 360)
    wait_for(lambda: checkpointed(release) == ids(scene.uploaded), 180, "batch 2 checkpointed")
    wait_for(lambda: stored_chunks(release).get(SHARD, 0) >= 1, 60, "the base in a chunk slot")
    assert head_format(release) == SHARD_FORMAT


def test_rolling_back_without_the_downgrade_fails_closed_by_name(scene: Scene) -> None:
    release = scene.release
    before = stored_rows(release)
    helm.run(release.plane, "rollback", release.name, "1", "--namespace", release.namespace)

    def refused() -> list[Any]:
        return [
            pod
            for pod in runtime_pods(release)
            if image_of(pod).endswith(f":{scene.previous.tag}")
            for status in pod.status.container_statuses or []
            if status.last_state and status.last_state.terminated
        ]

    wait_for(lambda: bool(refused()), 180, "a previous-release pod refusing the v3 shard")
    (status,) = refused()[0].status.container_statuses
    message = status.last_state.terminated.message or ""
    assert status.last_state.terminated.exit_code != 0
    assert "CorruptShardError" in message, message
    assert f"unknown format '{SHARD_FORMAT}'" in message, message
    assert not any(ready(p) for p in refused())
    # Fail closed: the shard is still v3 and every row is still there.
    assert head_format(release) == SHARD_FORMAT
    assert stored_rows(release).keys() >= before.keys()


def test_downgrade_then_scale_up_the_previous_release_loses_no_row(
    scene: Scene, node_s3: S3Server, bucket: str
) -> None:
    release = scene.release
    # The documented step: stop the runtime, rewrite the shards as v2, start it again.
    scale(release, 0)
    wait_for(lambda: runtime_pods(release) == [], 120, "every runtime pod gone")
    rows = stored_rows(release)
    assert seen_ids(rows, SHARD) == ids(scene.uploaded)
    begun = time.monotonic()
    result = subprocess.run(
        [
            sys.executable, "-m", "checkpoint_runtime", "downgrade", "--to", "v2",
            "--namespace", release.namespace, "--lease-name", release.lease_name,
            "--kubeconfig", str(release.plane.kubeconfig),
        ],
        capture_output=True, text=True, env=child_env(), check=False,
    )  # fmt: skip
    print(f"\ndowngrade --to v2: {time.monotonic() - begun:.1f} s\n{result.stdout}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"rewritten as gzip-shards-v2: {SHARD}" in result.stdout
    heads = stored_heads(release)
    formats = {stored.annotations[ANNOTATION_FORMAT] for stored in heads.values()}
    assert formats == {SHARD_FORMAT_V2}
    decoded: dict[str, str] = {}
    for shard, stored in heads.items():
        decoded |= codec.decode_shard(shard, stored.blob)  # the v2 decoder
    assert decoded == rows
    writers = shard_writers(release)

    scale(release, 2)

    def leading() -> bool:
        holder = holder_pod(lease_holder(release))
        return any(p.metadata.name == holder and ready(p) for p in runtime_pods(release))

    try:  # a holder among the new pods (the Lease names the last holder until then)
        wait_for(leading, 240, "the previous release's leader Ready")
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n{describe(release.plane, release.namespace)}") from None
    successor = holder_pod(lease_holder(release))
    pods = runtime_pods(release)
    assert all(image_of(p).endswith(f":{scene.previous.tag}") for p in pods), describe(
        release.plane, release.namespace
    )
    follower = LogFollower(release, successor)
    third = upload(scene, node_s3, bucket, "03", 20)
    wait_for(lambda: len(follower.objects(FEED)) >= len(third), 180, "batch 3 emitted")
    wait_for(lambda: checkpointed(release) == ids(scene.uploaded), 120, "batch 3 checkpointed")
    wait_more_polls(release, follower, SHARD)  # anything emitted twice would show now
    assert sorted(follower.objects(FEED)) == sorted(third)  # nothing seen before came again
    after = stored_rows(release)
    assert after.keys() >= rows.keys()
    assert head_format(release) == SHARD_FORMAT_V2  # the previous release writes v2
    assert shard_writers(release) != writers  # and it did write
