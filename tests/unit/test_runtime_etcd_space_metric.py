"""The runtime serves the etcd NOSPACE series on its own registry (what /metrics exposes), from
the gate of the very backend its store writes through."""

from __future__ import annotations

from kubernetes import client

from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import ETCD_NOSPACE_MESSAGE, METRIC_ETCD_SPACE_EXCEEDED
from checkpoint_runtime.runtime.lifecycle import Runtime
from checkpoint_runtime.runtime.settings import parse


def test_the_backends_gate_feeds_the_runtimes_metrics() -> None:
    settings = parse(
        {
            "store": {"backend": "kubernetes", "namespace": "ns"},
            "leaderElection": {"enabled": False},
        }
    )
    configuration = client.Configuration()
    configuration.host = "https://127.0.0.1:1"  # never contacted
    runtime = Runtime(settings, identity="me", kube_configuration=configuration)
    backend, api = runtime._open_backend()
    try:
        assert isinstance(backend, KubernetesBackend)
        registry = runtime.metrics.store.registry
        assert registry.get_sample_value(METRIC_ETCD_SPACE_EXCEEDED) == 0.0
        backend.space.refused("tn/flowlogs", ETCD_NOSPACE_MESSAGE)
        assert registry.get_sample_value(METRIC_ETCD_SPACE_EXCEEDED) == 1.0
        assert registry.get_sample_value(f"{METRIC_ETCD_SPACE_EXCEEDED}_total") == 1.0
    finally:
        backend.close()
        assert api is None
