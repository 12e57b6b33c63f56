"""A release's life with state: a legacy ConfigMap at first install, `helm upgrade` while rows
are being checkpointed, and a rollback-era edit of the legacy data that the pods refuse.

One release for the module, installed over the old release's single ConfigMap (its flowlogs
cursor a little in the past), fed by a flow-log endpoint the test serves.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from checkpoint_runtime.collectors.flowlogs import parse_rfc3339
from checkpoint_runtime.constants import ANNOTATION_MIGRATED, LEGACY_DATA_KEY
from checkpoint_runtime.format.legacy import encode_legacy, legacy_digest
from checkpoint_runtime.format.naming import rfc3339_ns
from checkpoint_testenv import helm
from checkpoint_testenv.flowlogs import FlowFeed
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.node.observe import (
    ReleaseLogs,
    holder_pod,
    install_ready,
    lease_holder,
    restricted_namespace,
    runtime_pods,
    shard_writers,
    wait_for,
)

LEGACY = "old-checkpoints"
CURSOR_KEY = "tn1/flowlogs/cursor"
POLL_SECONDS = 0.5
EXIT_FAILED = 2  # the runtime's exit code for a lifecycle that ended in a named error


class Legacy:
    """The old release's ConfigMap: its value and the cursor time it holds."""

    def __init__(self, cursor: datetime) -> None:
        self.cursor = cursor
        self.value = encode_legacy({CURSOR_KEY: rfc3339_ns(cursor)})


@pytest.fixture(scope="module")
def legacy(flow_feed: FlowFeed) -> Legacy:
    del flow_feed  # feeding already: records follow the cursor
    return Legacy(datetime.now(UTC))


@pytest.fixture(scope="module")
def release(node_cluster: NodeCluster, flow_feed: FlowFeed, legacy: Legacy) -> helm.Release:
    plane = node_cluster.control_plane
    namespace = restricted_namespace(plane, "upgrade")
    with plane.admin_api() as api:
        client.CoreV1Api(api).create_namespaced_config_map(
            namespace,
            client.V1ConfigMap(
                metadata=client.V1ObjectMeta(name=LEGACY), data={LEGACY_DATA_KEY: legacy.value}
            ),
        )
    values = {
        "checkpoint": {
            "store": {"legacyConfigMap": LEGACY},
            "collectors": [
                {"kind": "flowlogs", "tailnet": "tn1", "url": flow_feed.url,
                 "pollSeconds": POLL_SECONDS},
            ],
        }
    }  # fmt: skip
    return install_ready(plane, namespace, values)


@pytest.fixture(scope="module")
def logs(release: helm.Release) -> ReleaseLogs:
    return ReleaseLogs(release)


def _legacy_config_map(release: helm.Release) -> client.V1ConfigMap:
    with release.plane.admin_api() as api:
        return client.CoreV1Api(api).read_namespaced_config_map(LEGACY, release.namespace)


def _collecting_since(logs: ReleaseLogs) -> list[datetime]:
    """When each leader began collecting (its `collecting` log line)."""
    return [
        parse_rfc3339(entry["ts"])
        for follower in logs.followers.values()
        for entry in follower.entries()
        if entry.get("msg") == "collecting"
    ]


def _emitted(logs: ReleaseLogs) -> list[int]:
    logs.refresh()
    return [n for pod in logs.followers for n in logs.flow_numbers(pod)]


def test_the_pod_migrates_the_legacy_config_map_and_continues_from_it(
    release: helm.Release, flow_feed: FlowFeed, legacy: Legacy, logs: ReleaseLogs
) -> None:
    wait_for(
        lambda: (
            (_legacy_config_map(release).metadata.annotations or {}).get(ANNOTATION_MIGRATED)
            == legacy_digest(legacy.value)
        ),
        60,
        "the legacy ConfigMap marked migrated",
    )
    stored = _legacy_config_map(release)
    assert stored.data == {LEGACY_DATA_KEY: legacy.value}  # a rollback can still read it
    # Records from the migrated cursor on are emitted, including those older than the leader's
    # first poll: a fresh start would have begun one poll period before that poll.
    due = sorted(
        record["n"]
        for record in list(flow_feed.server.records)
        if parse_rfc3339(record["at"]) >= legacy.cursor
    )
    wait_for(lambda: bool(_collecting_since(logs)), 60, "the leader collecting")
    first_poll = min(_collecting_since(logs))
    older = [
        r["n"]
        for r in list(flow_feed.server.records)
        if r["n"] in due and parse_rfc3339(r["at"]) < first_poll - timedelta(seconds=POLL_SECONDS)
    ]
    assert older, "no record between the migrated cursor and the first poll: nothing to prove"
    wait_for(lambda: set(due) <= set(_emitted(logs)), 60, "the records since the cursor emitted")


def test_helm_upgrade_while_checkpointing_loses_no_row(
    release: helm.Release, flow_feed: FlowFeed, logs: ReleaseLogs
) -> None:
    wait_for(lambda: bool(_emitted(logs)), 60, "records emitted")
    first = min(_emitted(logs))
    before = holder_pod(lease_holder(release))
    # A changed value changes the config checksum: the Deployment rolls both pods.
    helm.run(
        release.plane, "upgrade", release.name, helm.CHART_DIR.as_posix(),
        "--namespace", release.namespace, "--reuse-values",
        "--set", "checkpoint.store.debounceSeconds=2", "--wait", "--timeout", "300s",
    )  # fmt: skip
    wait_for(lambda: holder_pod(lease_holder(release)) not in ("", before), 120, "a new leader")
    leader = holder_pod(lease_holder(release))
    live = flow_feed.added[-1]  # the feed runs on into the new leader's term

    def leader_emitting_live() -> bool:
        logs.refresh()
        return max(logs.flow_numbers(leader), default=0) > live

    wait_for(leader_emitting_live, 60, "the new leader emitting records added after it led")
    added = flow_feed.stop()
    wait_for(lambda: max(_emitted(logs)) >= added[-1], 60, "the last record emitted")
    emitted = _emitted(logs)
    lost = sorted({n for n in added if n >= first} - set(emitted))
    assert lost == [], f"lost across the upgrade: {lost[:20]}"
    rendered = helm.read_rendered_config(release.plane, release.namespace, _config_name(release))
    assert rendered["store"]["debounceSeconds"] == 2


def test_a_rollback_era_edit_of_the_legacy_data_is_refused_by_name(
    release: helm.Release, legacy: Legacy
) -> None:
    # The old release, rolled back to, ran again and rewrote its ConfigMap.
    edited = encode_legacy({CURSOR_KEY: rfc3339_ns(datetime.now(UTC))})
    with release.plane.admin_api() as api:
        client.CoreV1Api(api).patch_namespaced_config_map(
            LEGACY, release.namespace, {"data": {LEGACY_DATA_KEY: edited}}
        )
    shards = shard_writers(release)
    # `kubectl rollout restart`: every new leader opens the store again.
    restart = {"kubectl.kubernetes.io/restartedAt": datetime.now(UTC).isoformat()}
    with release.plane.admin_api() as api:
        client.AppsV1Api(api).patch_namespaced_deployment(
            _deployment_name(release),
            release.namespace,
            {"spec": {"template": {"metadata": {"annotations": restart}}}},
        )

    def refused() -> list[Any]:
        return [
            pod
            for pod in runtime_pods(release)
            for status in pod.status.container_statuses or []
            if status.last_state and status.last_state.terminated
        ]

    wait_for(lambda: bool(refused()), 180, "a pod refusing to open the store")
    pod = refused()[0]
    (status,) = pod.status.container_statuses
    # What `kubectl describe pod` shows: the last run ended in error, the container restarts.
    assert status.last_state.terminated.exit_code == EXIT_FAILED
    assert status.restart_count >= 1
    # ... and why: the chart's FallbackToLogsOnError makes the error the termination message.
    assert "LegacyConflictError" in (status.last_state.terminated.message or "")
    with release.plane.admin_api() as api:
        log = client.CoreV1Api(api).read_namespaced_pod_log(
            pod.metadata.name, release.namespace, container="runtime", previous=True
        )
    errors = [entry.get("error") for entry in map(json.loads, log.splitlines())]
    assert "LegacyConflictError" in errors, log
    assert legacy_digest(edited) in log
    assert legacy_digest(legacy.value) in log
    assert shard_writers(release) == shards  # nothing was written


def _config_name(release: helm.Release) -> str:
    (name,) = [
        d["metadata"]["name"]
        for d in release.manifest
        if d.get("kind") == "ConfigMap" and d["metadata"]["name"].endswith(helm.CONFIG_SUFFIX)
    ]
    return str(name)


def _deployment_name(release: helm.Release) -> str:
    (name,) = [d["metadata"]["name"] for d in release.manifest if d.get("kind") == "Deployment"]
    return str(name)
