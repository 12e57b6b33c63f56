"""The one way in to a store: the backend a store's settings name, for the runtime process
and for the operator commands alike.

The file store is a folder; the kubernetes store is the coordination namespace of a cluster,
reached with the runtime's credentials (`credentials.kube_configuration`: a kubeconfig, else
in-cluster) through a client whose automatic retries are off. The Kubernetes client is imported
only for a kubernetes store: opening a file store never loads it. A backend is built once, for
one store (Lease name), and never changed afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.format.naming import COLLECTOR_KINDS, Kinds

if TYPE_CHECKING:
    from kubernetes import client
    from prometheus_client import CollectorRegistry

    from checkpoint_runtime.backends.kubernetes import KubernetesBackend


class StoreAddress(Protocol):
    """Which store: the config's store section (`settings.StoreSettings`) or a `StoreTarget`."""

    @property
    def backend(self) -> str: ...
    @property
    def path(self) -> str | None: ...
    @property
    def namespace(self) -> str | None: ...
    @property
    def lease_name(self) -> str: ...
    @property
    def legacy_config_map(self) -> str | None: ...


@dataclass(frozen=True)
class StoreTarget:
    """A store named by an operator command's arguments (no runtime config read)."""

    backend: str
    lease_name: str
    path: str | None = None
    namespace: str | None = None
    legacy_config_map: str | None = None


def open_backend(
    store: StoreAddress,
    *,
    kubeconfig: str | None = None,
    configuration: client.Configuration | None = None,
    read_only: bool = False,
    metrics: CollectorRegistry | None = None,
    kinds: Kinds = COLLECTOR_KINDS,
) -> FileBackend | KubernetesBackend:
    """The backend of `store`: its folder (read_only: create nothing, lock nothing), or its
    namespace through `configuration` (default: the credentials `kubeconfig` names), whose
    etcd-space gate registers its series in `metrics` (a file store has no etcd); its
    ownership checks admit the shard keys of `kinds` (a kind table's `shapes`)."""
    legacy = store.legacy_config_map
    if store.backend == "file":
        folder = store.path or ""
        return FileBackend(folder, store.lease_name, legacy, read_only=read_only, kinds=kinds)
    from checkpoint_runtime.backends.kubernetes import EtcdSpaceGate, KubernetesBackend
    from checkpoint_runtime.runtime import credentials

    if configuration is None:
        configuration = credentials.kube_configuration(kubeconfig)
    namespace = credentials.coordination_namespace(store.namespace)
    return KubernetesBackend(
        configuration,
        namespace,
        store.lease_name,
        legacy,
        space=EtcdSpaceGate(metrics),
        kinds=kinds,
    )


def lease_client(backend: KubernetesBackend) -> client.ApiClient:
    """The elector's own client to the store's cluster: the backend's credentials (a rotated
    token is reread), retries off; the caller closes it."""
    from checkpoint_runtime.backends.apiclient import api_client

    return api_client(backend.api_client.configuration)
