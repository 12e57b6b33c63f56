"""The size of the Role a name-pinned store needs (store.discovery names, the chart's rbac.scope
names): every name it pins, projected from the config the way the chart derives them, against
what one Role object can hold. The runtime refuses a config past it at startup and the render
gate (which runs the runtime's startup check on the rendered config) before install, naming the
numbers, rather than letting the API server refuse the Role or etcd the request.

Pinned: per configured collector its head and 2 x maxChunks chunk slots, the legacy ConfigMap,
and the store's Leases (one, or with B buckets 1 + 2B: the buckets' and membership slots').
Each name is in one rule; a name costs its length plus `NAME_OVERHEAD_BYTES` of encoding.
"""

from __future__ import annotations

from dataclasses import dataclass

from checkpoint_runtime.constants import DISCOVERY_NAMES, MAX_BUCKETS
from checkpoint_runtime.election.buckets import lease_names
from checkpoint_runtime.errors import RoleSizeError
from checkpoint_runtime.format.naming import chunk_slot_name, shard_name
from checkpoint_runtime.runtime.settings import RuntimeSettings

ROLE_MAX_BYTES = 1_048_576
"""What one Role may take: below etcd's default request limit (1.5 MiB), with room for the
object's metadata and managed fields, which the API server adds."""
NAME_OVERHEAD_BYTES = 8
"""A name in a rule's resourceNames beside its characters (quotes, separator, indentation)."""
ROLE_BASE_BYTES = 4096
"""The Role without its pinned names: metadata, labels, the rules themselves."""


@dataclass(frozen=True)
class RoleSize:
    configmap_names: int
    lease_names: int
    projected_bytes: int


def project(settings: RuntimeSettings) -> RoleSize | None:
    """The Role's projected size for a name-pinned store, or None (it pins no ConfigMap)."""
    store = settings.store
    if store.backend != "kubernetes" or store.discovery != DISCOVERY_NAMES:
        return None
    names: list[str] = []
    for collector in settings.collectors:
        head = shard_name(store.lease_name, collector.namespace)
        names.append(head)
        names += [
            chunk_slot_name(head, generation, index)
            for generation in "ab"
            for index in range(store.max_chunks)
        ]
    if store.legacy_config_map:
        names.append(store.legacy_config_map)
    leases = lease_names(store.lease_name, store.buckets)
    size = ROLE_BASE_BYTES + sum(len(n) + NAME_OVERHEAD_BYTES for n in [*names, *leases])
    return RoleSize(len(names), len(leases), size)


def check(settings: RuntimeSettings) -> None:
    """Refuse a config whose name-pinned Role could not be one Role object (RoleSizeError)."""
    size = project(settings)
    if size is None or size.projected_bytes <= ROLE_MAX_BYTES:
        return
    # the buckets are named when the Role would hold the rest without their Leases
    bucket_leases = lease_names(settings.store.lease_name, settings.store.buckets)[1:]
    without = size.projected_bytes - sum(len(n) + NAME_OVERHEAD_BYTES for n in bucket_leases)
    raise RoleSizeError(
        "store.buckets" if without <= ROLE_MAX_BYTES else "collectors",
        f"the name-pinned Role would hold {size.configmap_names} ConfigMap names (each "
        f"collector's head and 2 x maxChunks {settings.store.max_chunks} chunk slots) and "
        f"{size.lease_names} Lease names ({settings.store.buckets} bucket(s), at most "
        f"{MAX_BUCKETS}): {size.projected_bytes} bytes projected, more than one Role holds "
        f"({ROLE_MAX_BYTES}); lower maxChunks or the collectors, or pin nothing (store.discovery "
        "labels, the chart's rbac.scope namespace)",
    )
