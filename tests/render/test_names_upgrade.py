"""`helm upgrade` that adds a collector extends the pinned names before new runtime pods start.

With rbac.scope=names the Role must name the new collector's shard (its head and chunk slots)
before a runtime that runs that collector reads it; likewise the new chunk slots when maxChunks
grows. Helm applies a release's objects one by one in its install order
(kind order, the order `helm template` prints), on install and on upgrade alike, and the new
runtime pods exist only once the Deployment is updated: so it is enough that the upgraded Role
pins the new name, that the Role comes before the Deployment in that order, and that the
Deployment changes (the config checksum), which is what starts the new pods.
"""

from __future__ import annotations

import json
from typing import Any

from checkpoint_gate.manifests import Manifest
from checkpoint_gate.render import CliRenderer
from checkpoint_runtime.constants import CHUNK_GENERATIONS, DEFAULT_MAX_CHUNKS
from checkpoint_runtime.format.naming import chunk_slot_name, shard_name

FLOWLOGS = {"kind": "flowlogs", "url": "http://flowlogs.default.svc:8080/api/v1/flows"}
AUDIT = {"kind": "objectstore", "tailnet": "corp", "feed": "audit", "url": "s3://audit/corp/"}


def names_values(*collectors: dict[str, Any], max_chunks: int | None = None) -> dict[str, Any]:
    checkpoint: dict[str, Any] = {"collectors": list(collectors)}
    if max_chunks is not None:
        checkpoint["store"] = {"maxChunks": max_chunks}
    return {"rbac": {"scope": "names"}, "checkpoint": checkpoint}


def slots(shard: str, indexes: range) -> set[str]:
    return {chunk_slot_name(shard, g, i) for g in CHUNK_GENERATIONS for i in indexes}


def pinned(manifests: list[Manifest]) -> set[str]:
    (role,) = [m.document for m in manifests if m.kind == "Role"]
    return {
        name
        for rule in role["rules"]
        if "configmaps" in rule["resources"]
        for name in rule.get("resourceNames") or []
    }


def position(manifests: list[Manifest], kind: str) -> int:
    return next(index for index, manifest in enumerate(manifests) if manifest.kind == kind)


def config_checksum(manifests: list[Manifest]) -> str:
    (deployment,) = [m.document for m in manifests if m.kind == "Deployment"]
    return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])


def test_adding_a_collector_pins_its_shard_before_the_deployment_changes(cli: CliRenderer) -> None:
    before = cli.render(names_values(FLOWLOGS), release="cr", namespace="apps")
    after = cli.render(names_values(FLOWLOGS, AUDIT), release="cr", namespace="apps")
    added = shard_name("cr-checkpoint-runtime", "corp/objectstore/audit")

    assert added not in pinned(before)
    assert pinned(after) == pinned(before) | {added} | slots(added, range(DEFAULT_MAX_CHUNKS))
    # the runtime that runs the new collector is a new pod: the Deployment changes...
    assert config_checksum(after) != config_checksum(before)
    (config,) = [m.document for m in after if m.name.endswith("-config")]
    assert AUDIT in json.loads(config["data"]["config.json"])["collectors"]
    # ...and Helm applies it after the Role and its binding, in the order it prints them
    assert position(after, "Role") < position(after, "Deployment")
    assert position(after, "RoleBinding") < position(after, "Deployment")


def test_raising_max_chunks_pins_the_new_slots_before_the_deployment_changes(
    cli: CliRenderer,
) -> None:
    before = cli.render(names_values(AUDIT, max_chunks=4), release="cr", namespace="apps")
    after = cli.render(names_values(AUDIT, max_chunks=6), release="cr", namespace="apps")
    shard = shard_name("cr-checkpoint-runtime", "corp/objectstore/audit")

    assert pinned(before) == {shard} | slots(shard, range(4))
    assert pinned(after) == pinned(before) | slots(shard, range(4, 6))
    assert config_checksum(after) != config_checksum(before)
    assert position(after, "Role") < position(after, "Deployment")
