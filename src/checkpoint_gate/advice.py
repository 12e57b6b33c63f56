"""Values that are valid and render, but rarely mean what they say: the gate warns about them.

These need the values, not the render: the chart renders `replicaCount: 3` with the file store
as one replica, and a generated ServiceAccount name looks the same as a chosen one. Advice about
what the render shows (the file store's folder on an emptyDir) lives in the policies instead.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from checkpoint_runtime.constants import (
    DEFAULT_ETCD_QUOTA_BYTES,
    DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND,
)
from checkpoint_runtime.runtime.projection import EtcdWindow, etcd_window

Json = dict[str, Any]


@dataclass(frozen=True)
class Advice:
    """One surprising value: a rule id, the values key it is about, and why."""

    rule: str
    key: str
    message: str


def advise(values: Json) -> list[Advice]:
    """Advice on a merged values document (the chart's defaults coalesced with the user's)."""
    checkpoint = values.get("checkpoint", {})
    store = checkpoint.get("store") or {}
    file_store = store.get("backend") == "file"
    advice: list[Advice] = []
    replicas = values.get("replicaCount", 1)
    if file_store and replicas > 1:
        advice.append(
            Advice(
                "VALUES-1",
                "replicaCount",
                f"replicaCount is {replicas} but the file store runs exactly one replica (it has "
                "no leader election); the chart renders 1. Use "
                "checkpoint.store.backend=kubernetes for standby replicas, or set replicaCount "
                "to 1",
            )
        )
    rbac_create = values.get("rbac", {}).get("create", True)
    account = values.get("serviceAccount", {}).get("name", "")
    if not file_store and not rbac_create and not account:
        advice.append(
            Advice(
                "VALUES-2",
                "rbac.create",
                "rbac.create is false but serviceAccount.name is empty: the runtime runs as the "
                "generated ServiceAccount, which no Role of this chart grants anything, so every "
                "store call is refused (403) unless your own RoleBinding names that generated "
                "account; set serviceAccount.name to the account your Role is bound to",
            )
        )
    scope = values.get("rbac", {}).get("scope", "namespace")
    if not file_store and scope == "names" and not checkpoint.get("collectors"):
        advice.append(
            Advice(
                "VALUES-3",
                "rbac.scope",
                "rbac.scope is names but checkpoint.collectors is empty: the Role pins ConfigMap "
                "access to the shards of the configured collectors, and there are none, so the "
                "runtime can read and write no checkpoint; list the collectors in "
                "checkpoint.collectors (the pinned names are derived from them), or use "
                "rbac.scope=namespace",
            )
        )
    advice += egress_advice(values)
    if not file_store:
        window = etcd_values_window(store)
        if window.warns:
            key = "checkpoint.store.writeBudgetBytesPerSecond"
            advice.append(Advice("ETCD-1", key, window.message()))
    return advice


def etcd_values_window(store: Json) -> EtcdWindow:
    """The release's worst-case bytes per API server compaction window against the declared
    etcd quota (checkpoint.store.writeBudgetBytesPerSecond, checkpoint.store.etcdQuotaBytes)."""
    return etcd_window(
        int(store.get("writeBudgetBytesPerSecond", DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND)),
        int(store.get("etcdQuotaBytes", DEFAULT_ETCD_QUOTA_BYTES)),
    )


def collector_endpoints(collectors: list[Json]) -> list[tuple[int, str, str]]:
    """(index, endpoint, host) of every collector that reaches the network.

    file:// object stores read a mounted folder; an s3:// one without endpointUrl talks to AWS
    S3 (or $AWS_ENDPOINT_URL) by host name.
    """
    endpoints = []
    for index, collector in enumerate(collectors):
        url = str(collector.get("url", ""))
        if collector.get("kind") == "objectstore":
            if not url.startswith("s3://"):
                continue
            url = str(collector.get("endpointUrl", "https://s3.amazonaws.com"))
        endpoints.append((index, url, host_of(url)))
    return endpoints


def host_of(url: str) -> str:
    """The URL's host, or "" when the schema's URL characters do not make a parsable one."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def egress_advice(values: Json) -> list[Advice]:
    """A restricted egress that allows none of the collectors' endpoints, or no name lookup."""
    policy = values.get("networkPolicy", {})
    egress = policy.get("egress", {})
    if not (policy.get("enabled") and egress.get("restrict")):
        return []
    endpoints = collector_endpoints(values.get("checkpoint", {}).get("collectors") or [])
    advice: list[Advice] = []
    destinations = egress.get("to") or []
    if endpoints and not destinations:
        named = ", ".join(f"checkpoint.collectors[{i}] ({url})" for i, url, _ in endpoints)
        advice.append(
            Advice(
                "VALUES-4",
                "networkPolicy.egress.to",
                f"networkPolicy.egress.restrict is true but networkPolicy.egress.to is empty, "
                f"while {named} reach the network: no egress rule of this chart allows them, so "
                "their polls fail unless another NetworkPolicy allows that traffic; list each "
                "endpoint's addresses (cidrs) or pods (selectors) with its port in "
                "networkPolicy.egress.to",
            )
        )
    hosts = sorted({host for _, _, host in endpoints if host and not is_address(host)})
    resolver_listed = any(
        port.get("port") == 53 for entry in destinations for port in entry.get("ports", [])
    )
    if hosts and not egress.get("dns", {}).get("enabled") and not resolver_listed:
        advice.append(
            Advice(
                "VALUES-5",
                "networkPolicy.egress.dns.enabled",
                f"networkPolicy.egress.restrict is true and DNS is not allowed, but the "
                f"collectors name hosts ({', '.join(hosts)}): the runtime cannot resolve them; "
                "set networkPolicy.egress.dns.enabled, or list your resolver with port 53 in "
                "networkPolicy.egress.to",
            )
        )
    return advice
