"""Observing a release on the test node: its pods, Lease, shards, logs and metrics.

Shared by the node tests and the demo; everything is read through the API server as admin.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any

from kubernetes import client

from checkpoint_runtime.backends.base import StoredShard
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import ANNOTATION_WRITER
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store.core import Store
from checkpoint_testenv import helm
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support import polling
from checkpoint_testenv.support.runtime_process import metric_value

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


# Conditions here are read through the API server: five polls a second are enough.
wait_for = functools.partial(polling.wait_for, interval=0.2)


def restricted_namespace(plane: ControlPlane, prefix: str) -> str:
    """A new namespace whose pods must pass the restricted Pod Security profile."""
    name = plane.create_namespace(prefix)
    with plane.admin_api() as api:
        client.CoreV1Api(api).patch_namespace(name, {"metadata": {"labels": RESTRICTED}})
    return name


def selector(release: Release) -> str:
    return f"app.kubernetes.io/instance={release.name},app.kubernetes.io/name=checkpoint-runtime"


def runtime_pods(release: Release) -> list[Any]:
    """The release's runtime pods (not the helm test pod), not being deleted."""
    listed: Any
    with release.plane.admin_api() as api:
        listed = client.CoreV1Api(api).list_namespaced_pod(
            release.namespace, label_selector=selector(release)
        )
    return [
        pod
        for pod in listed.items
        if pod.metadata.deletion_timestamp is None
        and any(c.name == "runtime" for c in pod.spec.containers)
    ]


def ready(pod: Any) -> bool:
    conditions = pod.status.conditions or []
    return pod.status.phase == "Running" and any(
        c.type == "Ready" and c.status == "True" for c in conditions
    )


def lease_holder(release: Release) -> str:
    """The Lease's holder; "" while nobody holds it or before the first candidate created it."""
    lease: Any
    try:
        lease = release.read_lease()
    except client.ApiException as error:
        if error.status == 404:
            return ""
        raise
    return str(lease.spec.holder_identity or "")


def holder_pod(holder: str) -> str:
    """The pod name in a Lease holder identity (`<pod>_<random>`)."""
    return holder.rpartition("_")[0]


def leader_pod(release: Release, timeout: float = 30) -> str:
    """The pod that holds the release's Lease, once one does (within `timeout` seconds)."""
    wait_for(lambda: lease_holder(release) != "", timeout, "a Lease holder")
    return holder_pod(lease_holder(release))


def shard_writers(release: Release) -> dict[str, str]:
    """Shard ConfigMap name -> the writer stamped on it."""
    listed: Any
    with release.plane.admin_api() as api:
        listed = client.CoreV1Api(api).list_namespaced_config_map(release.coordination_namespace)
    return {
        cm.metadata.name: cm.metadata.annotations[ANNOTATION_WRITER]
        for cm in listed.items
        if cm.metadata.annotations and ANNOTATION_WRITER in cm.metadata.annotations
    }


def stored_heads(release: Release) -> dict[str, StoredShard]:
    """Shard -> its own object (the head; not its chunk slots) as stored, undecoded."""
    backend = KubernetesBackend(
        release.plane.configuration(), release.coordination_namespace, release.lease_name
    )
    try:
        return {stored.shard: stored for stored in backend.list_shards(Deadline(30.0))}
    finally:
        backend.close()


def stored_chunks(release: Release) -> dict[str, int]:
    """Shard -> how many chunk slots its stored base spans (0: the base is in the head), read
    as admin with the product's own reader (never migrating)."""
    backend = KubernetesBackend(
        release.plane.configuration(), release.coordination_namespace, release.lease_name
    )
    try:
        states = Store.open(backend, writer="test-reader", migrate=False).shard_states()
    finally:
        backend.close()
    chunks: dict[str, int] = {}
    for shard, state in states.items():
        layout = state.layout
        chunks[shard] = (
            0 if layout is None or layout.inline is not None else (layout.manifest.partitions)
        )
    return chunks


def service_name(release: Release) -> str:
    names = [doc["metadata"]["name"] for doc in release.manifest if doc.get("kind") == "Service"]
    assert len(names) == 1, names
    return str(names[0])


def service_get(release: Release, path: str) -> str:
    """GET `path` on the release's Service (the API server's Service proxy picks a Ready pod)."""
    with release.plane.admin_api() as api:
        answer = client.CoreV1Api(api).connect_get_namespaced_service_proxy_with_path(
            f"{service_name(release)}:http", release.namespace, path.lstrip("/")
        )
    return str(answer)


def pod_get(release: Release, pod: str, path: str) -> str:
    """GET `path` on one pod's HTTP port (through the API server's pod proxy)."""
    port = release.rendered_config["http"]["port"]
    with release.plane.admin_api() as api:
        answer = client.CoreV1Api(api).connect_get_namespaced_pod_proxy_with_path(
            f"{pod}:{port}", release.namespace, path.lstrip("/")
        )
    return str(answer)


def pod_metric(release: Release, pod: str, name: str, labels: str = "") -> float | None:
    """Series `name{labels}` of one pod's /metrics (through the API server's pod proxy)."""
    return metric_value(pod_get(release, pod, "/metrics"), name, labels)


def log_text(release: Release, pod: str, container: str = "runtime") -> str:
    """Everything `container` of `pod` has logged so far (read once, not followed)."""
    with release.plane.admin_api() as api:
        text: Any = client.CoreV1Api(api).read_namespaced_pod_log(
            pod, release.namespace, container=container
        )
    return str(text)


def wait_more_polls(
    release: Release, follower: LogFollower, shard: str, polls: int = 3, timeout: float = 60
) -> None:
    """Wait until the collector of `shard` in the followed pod has completed `polls` more
    polls, and the follower holds every line its container had logged by then: anything
    those polls emitted (a record emitted twice, say) is in `follower` when this returns."""
    labels = f'collector="{shard}"'

    def count() -> float:
        return pod_metric(release, follower.pod, "checkpoint_collector_polls_total", labels) or 0

    start = count()
    wait_for(lambda: count() >= start + polls, timeout, f"{polls} more polls of {shard}")
    logged = log_text(release, follower.pod, follower.container).count("\n")  # whole lines
    wait_for(lambda: len(follower.lines) >= logged, timeout, "the log follower caught up")


class LogFollower:
    """Streams one container's log (follow) in a thread until the container ends."""

    def __init__(self, release: Release, pod: str, container: str = "runtime") -> None:
        self.lines: list[str] = []
        self._release = release
        self.pod = pod
        self.container = container
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        with self._release.plane.admin_api() as api:
            stream: Any = client.CoreV1Api(api).read_namespaced_pod_log(
                self.pod,
                self._release.namespace,
                container=self.container,
                follow=True,
                _preload_content=False,
            )
            pending = b""
            for chunk in stream.stream(4096):
                pending += chunk
                *complete, pending = pending.split(b"\n")
                self.lines.extend(line.decode(errors="replace") for line in complete)
            if pending:
                self.lines.append(pending.decode(errors="replace"))

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def entries(self) -> list[dict[str, Any]]:
        parsed: list[dict[str, Any]] = []
        for line in list(self.lines):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                parsed.append(value)
        return parsed

    def objects(self, feed: str) -> list[str]:
        """The object keys this container emitted from `feed` (an object's first line names it)."""
        return [
            str(entry["object"])
            for entry in self.entries()
            if entry.get("line") == 0 and "object" in entry and entry.get("feed") == feed
        ]

    def flow_numbers(self) -> list[int]:
        """The `n` of every flowlogs record this container emitted (its stdout sink)."""
        return [
            int(entry["record"]["n"])
            for entry in self.entries()
            if entry.get("collector") == "flowlogs" and isinstance(entry.get("record"), dict)
        ]


class ReleaseLogs:
    """Follows the runtime container of every pod of a release, including replacement pods."""

    def __init__(self, release: Release) -> None:
        self.release = release
        self.followers: dict[str, LogFollower] = {}
        self.refresh()

    def refresh(self) -> None:
        """Start following pods that appeared since (a follower reads a log from its start)."""
        for pod in runtime_pods(self.release):
            name = pod.metadata.name
            if name not in self.followers and pod.status.phase == "Running":
                self.followers[name] = LogFollower(self.release, name)

    def flow_numbers(self, pod: str) -> list[int]:
        return self.followers[pod].flow_numbers() if pod in self.followers else []

    def objects(self, pod: str, feed: str) -> list[str]:
        """The object keys `pod` emitted from `feed`; none for a pod not followed (yet)."""
        return self.followers[pod].objects(feed) if pod in self.followers else []


def install_ready(
    plane: ControlPlane, namespace: str, values: dict[str, Any], **options: Any
) -> Release:
    """`helm install --wait`; a failure is raised with `describe(plane, namespace)`, what a failed
    install needs to explain itself."""
    try:
        return helm.install(plane, namespace, values, wait=True, **options)
    except helm.HelmError as failure:
        raise AssertionError(f"{failure}\n{describe(plane, namespace)}") from failure


def describe(plane: ControlPlane, namespace: str, log_lines: int = 15) -> str:
    """Pods, their containers' states and last log lines, and the events of `namespace`: what
    a failed `helm install --wait` needs to explain itself."""
    out: list[str] = []
    pods: Any
    events: Any
    with plane.admin_api() as api:
        core = client.CoreV1Api(api)
        pods = core.list_namespaced_pod(namespace)
        for pod in pods.items:
            out.append(f"pod {pod.metadata.name}: {pod.status.phase}")
            for status in pod.status.container_statuses or []:
                state = status.state.to_dict() if status.state else {}
                current = {k: v for k, v in state.items() if v}
                out.append(f"  {status.name}: ready={status.ready} restarts={status.restart_count}")
                out.append(f"    {current}")
                try:
                    log = core.read_namespaced_pod_log(
                        pod.metadata.name, namespace, container=status.name, tail_lines=log_lines
                    )
                except client.ApiException as error:
                    log = f"(no log: {error.reason})"
                out.extend(f"    | {line}" for line in str(log).splitlines())
        events = core.list_namespaced_event(namespace)
    for event in events.items:
        out.append(f"event {event.involved_object.name}: {event.reason}: {event.message}")
    return "\n".join(out)
