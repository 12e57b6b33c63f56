"""A full etcd is a definitive answer, on a real etcd with a small space quota.

A separate etcd + kube-apiserver (SMALL_ETCD_QUOTA_BYTES) is filled with big ConfigMaps until
etcd raises its NOSPACE alarm. Then a store's persist must fail at once with
EtcdSpaceExceededError, having sent its PUT exactly once and read nothing back (the fault proxy
in front of the API server records every request), the store must send no further write during
its hold-off, and once an operator freed space the next write after the hold-off commits and
clears the stop.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from checkpoint_runtime.backends.kubernetes import EtcdSpaceGate, KubernetesBackend
from checkpoint_runtime.constants import (
    DEFAULT_DEADLINE_SECONDS,
    ETCD_NOSPACE_MESSAGE,
    METRIC_ETCD_SPACE_EXCEEDED,
)
from checkpoint_runtime.errors import EtcdSpaceExceededError, leaves
from checkpoint_runtime.format.naming import shard_name
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.metrics import StoreMetrics
from checkpoint_testenv.controlplane import SMALL_ETCD_QUOTA_BYTES, ControlPlane
from checkpoint_testenv.faultproxy import FaultProxy, ProxyEvent
from checkpoint_testenv.support.polling import wait_for

LEASE = "nospace"
FEED = "tn/objectstore/feed-a"
FILLER_BYTES = 900_000  # incompressible filler per ConfigMap, under the 1 MiB value limit
HOLD = 2.0  # the test store's hold-off after a refusal (the product's default is longer)
# Far below the deadline the store would otherwise spend re-sending the PUT (30 s): generous
# for a slow shared machine, yet it fails if even a few backoff rounds ran.
FAST_SECONDS = DEFAULT_DEADLINE_SECONDS / 3


@pytest.fixture(scope="module")
def plane(small_quota_control_plane: ControlPlane) -> ControlPlane:
    return small_quota_control_plane


@pytest.fixture
def admin(plane: ControlPlane) -> Iterator[client.CoreV1Api]:
    with plane.admin_api() as api:
        yield client.CoreV1Api(api)


def fill_etcd(admin: client.CoreV1Api, namespace: str) -> list[str]:
    """Create incompressible ConfigMaps until the API server answers etcd's NOSPACE; their names."""
    names: list[str] = []
    most = 4 * SMALL_ETCD_QUOTA_BYTES // FILLER_BYTES  # a bound, far above what fills it
    for index in range(most):
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=f"filler-{index}"),
            binary_data={"x": base64.b64encode(os.urandom(FILLER_BYTES)).decode()},
        )
        try:
            admin.create_namespaced_config_map(namespace, body)
        except ApiException as error:
            if error.status != 500 or ETCD_NOSPACE_MESSAGE not in (error.body or ""):
                raise
            return names
        names.append(body.metadata.name)
    raise AssertionError(f"{most} ConfigMaps of {FILLER_BYTES} bytes did not fill etcd's quota")


def shard_requests(proxy: FaultProxy, since: int = 0) -> list[ProxyEvent]:
    name = shard_name(LEASE, FEED)
    return [event for event in proxy.events[since:] if name in event.path]


def gauge(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(name)


def test_a_full_etcd_stops_the_store_at_once_without_resending_until_space_is_freed(
    plane: ControlPlane, admin: client.CoreV1Api
) -> None:
    namespace = plane.create_namespace("nospace")
    filler_namespace = plane.create_namespace("filler")
    proxy = FaultProxy.in_front_of(plane)
    metrics = StoreMetrics()
    gate = EtcdSpaceGate(metrics.registry, first_hold=HOLD)
    backend = KubernetesBackend(plane.configuration(host=proxy.host), namespace, LEASE, space=gate)
    try:
        store = Store.open(backend, writer="w", epoch=1, metrics=metrics)
        rows = {f"{FEED}/seen/{index:06d}-{os.urandom(12).hex()}": "1" for index in range(3000)}
        store.batch(rows)  # the shard exists: the next persist is an update (PUT)

        fillers = fill_etcd(admin, filler_namespace)
        assert plane.etcd().alarms() == ["NOSPACE"]

        before = len(proxy.events)
        started = time.monotonic()
        with pytest.raises(ExceptionGroup) as raised:
            store.batch({f"{FEED}/cursor": "after-full"})
        elapsed = time.monotonic() - started
        (error,) = leaves(raised.value)
        assert isinstance(error, EtcdSpaceExceededError), error
        assert error.shard == FEED
        assert elapsed < FAST_SECONDS, f"NOSPACE took {elapsed:.1f} s to report"
        sent = shard_requests(proxy, before)
        # exactly one PUT, answered 500 by the API server; no read-back, no re-send
        assert [(e.method, e.upstream_status) for e in sent] == [("PUT", 500)]
        assert gauge(metrics.registry, METRIC_ETCD_SPACE_EXCEEDED) == 1.0
        assert gauge(metrics.registry, f"{METRIC_ETCD_SPACE_EXCEEDED}_total") == 1.0

        # stopped: a write inside the hold-off is refused without a request
        before = len(proxy.events)
        with pytest.raises(ExceptionGroup) as held:
            store.batch({f"{FEED}/cursor": "still-full"})
        (again,) = leaves(held.value)
        assert isinstance(again, EtcdSpaceExceededError)
        assert "not sent" in str(again)
        assert shard_requests(proxy, before) == []
        assert gauge(metrics.registry, f"{METRIC_ETCD_SPACE_EXCEEDED}_total") == 1.0

        # the operator frees space; after the hold-off the next write probes and commits
        for name in fillers:
            admin.delete_namespaced_config_map(name, filler_namespace)
        plane.etcd().free_space()
        assert plane.etcd().alarms() == []
        wait_for(lambda: gate.resume_in() == 0, HOLD * 5, "the end of the hold-off")
        store.batch({f"{FEED}/cursor": "space-again"})
        assert gauge(metrics.registry, METRIC_ETCD_SPACE_EXCEEDED) == 0.0
        reopened = Store.open(
            KubernetesBackend(plane.configuration(), namespace, LEASE), writer="r", epoch=1
        )
        assert reopened.get(f"{FEED}/cursor") == "space-again"
        assert len(reopened.items(f"{FEED}/seen/")) == len(rows)
    finally:
        backend.close()
        proxy.close()
