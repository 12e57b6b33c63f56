"""Values that are valid and render, but rarely mean what they say: the gate warns about them.

These need the values, not the render: the chart renders `replicaCount: 3` with the file store
as one replica, and a generated ServiceAccount name looks the same as a chosen one. Advice about
what the render shows (the file store's folder on an emptyDir) lives in the policies instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    file_store = checkpoint.get("store") == "file"
    advice: list[Advice] = []
    replicas = values.get("replicaCount", 1)
    if file_store and replicas > 1:
        advice.append(
            Advice(
                "VALUES-1",
                "replicaCount",
                f"replicaCount is {replicas} but the file store runs exactly one replica (it has "
                "no leader election); the chart renders 1. Use checkpoint.store=kubernetes for "
                "standby replicas, or set replicaCount to 1",
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
    return advice
