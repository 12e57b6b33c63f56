"""The store's Lease as the runtime and the operator commands see it: the lock over it with the
store's Lease labels, the shape its replicas write it in (`election.foreign`), and what
`inspect` shows of it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkpoint_runtime.constants import (
    ANNOTATION_BUCKETS,
    ANNOTATION_STORE_KEY,
    DEFAULT_DEADLINE_SECONDS,
)
from checkpoint_runtime.election.foreign import LeaseVetting
from checkpoint_runtime.election.lease_lock import KubernetesLeaseLock
from checkpoint_runtime.format.naming import lease_labels

if TYPE_CHECKING:
    from kubernetes import client

    from checkpoint_runtime.backends.kubernetes import KubernetesBackend


def lease_lock(
    api: client.ApiClient,
    namespace: str,
    lease_name: str,
    identity: str,
    store_name: str | None = None,
) -> KubernetesLeaseLock:
    """The lock over the store's Lease (or, given the store's own Lease name `store_name`, one
    of its bucket or membership Leases), labelling it as the store's when it writes it."""
    labels = lease_labels(store_name or lease_name)
    return KubernetesLeaseLock(api, namespace, lease_name, identity, labels)


def vetting(lease_name: str, own_duration: int) -> LeaseVetting:
    """The shape the store's replicas write its Lease in (`own_duration`: this runtime's
    configured leaseDurationSeconds)."""
    return LeaseVetting(own_duration, lease_labels(lease_name))


def lease_report(backend: KubernetesBackend, own_duration: int) -> tuple[dict[str, Any], str]:
    """The store's Lease as `inspect` shows it: holder, duration, transitions, labels, whether
    it carries a store key (never the key), and why it is foreign (None: one of the store's
    replicas can have written it); and the store key ("" if none), to check the heads' seals
    with. A Lease that does not exist says so; one the credentials cannot read, the API's
    answer."""
    from kubernetes.client.exceptions import ApiException

    from checkpoint_runtime.runtime.backend import lease_client

    api = lease_client(backend)
    try:
        lock = lease_lock(api, backend.namespace, backend.lease_name, "inspect")
        name = lock.describe()
        try:
            record = lock.get(timeout=DEFAULT_DEADLINE_SECONDS)
        except ApiException as error:
            return {"name": name, "error": f"{error.status} {error.reason}"}, ""
    finally:
        api.close()  # type: ignore[no-untyped-call]
    if record is None:
        return {"name": name, "exists": False, "foreign": None}, ""
    report = {
        "name": name,
        "exists": True,
        "uid": lock.uid,
        "holder": record.holder_identity,
        "lease_duration_seconds": record.lease_duration_seconds,
        "lease_transitions": record.lease_transitions,
        "labels": dict(lock.labels),
        "foreign": vetting(backend.lease_name, own_duration).foreign(record, lock.labels),
        "store_key": bool(lock.store_key),
        "buckets": record.buckets,
    }
    return report, lock.store_key


def placement_report(backend: KubernetesBackend, buckets: int, shards: list[str]) -> dict[str, Any]:
    """Where the buckets of a store of several buckets are led, as `inspect` shows it: each
    bucket's Lease (holder, last renewal, transitions) and the shards it leads, and each
    membership slot's holder."""
    from kubernetes.client.exceptions import ApiException

    from checkpoint_runtime.election.buckets import (
        bucket_lease_names,
        member_lease_names,
        shards_of_bucket,
    )
    from checkpoint_runtime.runtime.backend import lease_client

    def read(api: client.ApiClient, name: str) -> dict[str, Any]:
        lock = lease_lock(api, backend.namespace, name, "inspect", backend.lease_name)
        try:
            record = lock.get(timeout=DEFAULT_DEADLINE_SECONDS)
        except ApiException as error:
            return {"lease": name, "error": f"{error.status} {error.reason}"}
        if record is None:
            return {"lease": name, "exists": False, "holder": ""}
        renewed = record.renew_time.isoformat() if record.renew_time else None
        return {
            "lease": name,
            "exists": True,
            "holder": record.holder_identity,
            "renew_time": renewed,
            "lease_transitions": record.lease_transitions,
        }

    api = lease_client(backend)
    try:
        leases = [
            read(api, name) | {"bucket": index, "shards": shards_of_bucket(shards, index, buckets)}
            for index, name in enumerate(bucket_lease_names(backend.lease_name, buckets))
        ]
        members = [read(api, name) for name in member_lease_names(backend.lease_name, buckets)]
    finally:
        api.close()  # type: ignore[no-untyped-call]
    holders = sorted({entry["holder"] for entry in leases if entry.get("holder")})
    return {
        "buckets": buckets,
        "leases": leases,
        "members": members,
        "led_by": {
            holder: [e["bucket"] for e in leases if e.get("holder") == holder] for holder in holders
        },
    }


def drop_store_key(backend: KubernetesBackend) -> bool:
    """Remove the store key from the store's Lease, before a rollback to a release that does
    not seal: the heads that release writes carry no seal, and a key left on the Lease would
    make this release refuse them when it returns; without one, its next leader adopts and
    reseals them. An update guarded by the Lease's resourceVersion; True if a key (or a bucket
    record) was removed.
    Run with the runtime stopped (a leader keeps the key it knows and writes it back). The
    record of a number of leadership buckets is removed with it: the older release leads
    every collector through this one Lease."""
    from kubernetes import client as k8s
    from kubernetes.client.exceptions import ApiException

    from checkpoint_runtime.runtime.backend import lease_client

    api = lease_client(backend)
    try:
        leases = k8s.CoordinationV1Api(api)
        try:
            lease = leases.read_namespaced_lease(
                backend.lease_name, backend.namespace, _request_timeout=DEFAULT_DEADLINE_SECONDS
            )
        except ApiException as error:
            if error.status == 404:
                return False
            raise
        metadata = lease.metadata
        annotations = dict(metadata.annotations or {}) if metadata is not None else {}
        # the older release leads every collector through this Lease: one bucket, so the
        # record of another number goes too (this release returns with one bucket)
        layout = annotations.pop(ANNOTATION_BUCKETS, None)
        if metadata is None or (annotations.pop(ANNOTATION_STORE_KEY, None) is None and not layout):
            return False
        metadata.annotations = annotations
        leases.replace_namespaced_lease(
            backend.lease_name,
            backend.namespace,
            lease,
            _request_timeout=DEFAULT_DEADLINE_SECONDS,
        )
        return True
    finally:
        api.close()  # type: ignore[no-untyped-call]
