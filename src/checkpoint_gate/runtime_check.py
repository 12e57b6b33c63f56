"""The runtime's own startup check, run by the gate on the config.json the chart renders.

The pods run `checkpoint-runtime run --config config.json`; whatever that refuses at startup
(exit 2, a crash loop once installed) the gate denies, with the runtime's message and the Helm
values key that produced the refused config key (`collectors[0].maxSeenKeys` comes from
`checkpoint.collectors[0].maxSeenKeys`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from checkpoint_gate.manifests import Manifest
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.runtime import startup

CONFIG_KEY = "config.json"
CONFIG_TEMPLATE = "templates/configmap.yaml"

# Runtime config key -> the values key the chart renders it from (longest prefix wins).
VALUES_KEYS: dict[str, str] = {
    "collectors": "checkpoint.collectors",
    "store.backend": "checkpoint.store",
    "store.namespace": "checkpoint.namespace",
    "store.leaseName": "checkpoint.leaseName",
    "store.legacyConfigMap": "checkpoint.legacyConfigMap",
    "store.path": "checkpoint.file.path",
    "store.deadlineSeconds": "checkpoint.deadlineSeconds",
    "store.debounceSeconds": "checkpoint.debounceSeconds",
    "store.maxChunks": "checkpoint.maxChunks",
    "store.writeBudgetBytesPerSecond": "checkpoint.writeBudgetBytesPerSecond",
    "store.etcdQuotaBytes": "checkpoint.etcdQuotaBytes",
    "store.discovery": "rbac.scope",
    "store": "checkpoint",
    "leaderElection.enabled": "checkpoint.store",
    "leaderElection": "checkpoint.leaderElection",
    "http.port": "service.port",
    "http": "service",
    "sink": "sink",
}


@dataclass(frozen=True)
class RuntimeRefusal:
    """What the runtime would refuse: the values key to change and the runtime's message."""

    values_key: str
    config_key: str
    message: str
    source: str = ""


def values_key(config_key: str) -> str:
    """`collectors[0].maxSeenKeys` -> `checkpoint.collectors[0].maxSeenKeys`."""
    for prefix in sorted(VALUES_KEYS, key=len, reverse=True):
        if config_key == prefix or config_key.startswith((prefix + ".", prefix + "[")):
            return VALUES_KEYS[prefix] + config_key[len(prefix) :]
    return config_key


def rendered_config(manifests: Sequence[Manifest]) -> Manifest | None:
    """The chart's runtime ConfigMap, whose config.json the pods will read."""
    for manifest in manifests:
        data = manifest.document.get("data") or {}
        if (
            manifest.kind == "ConfigMap"
            and manifest.source.endswith(CONFIG_TEMPLATE)
            and CONFIG_KEY in data
        ):
            return manifest
    return None


def refusals(manifests: Sequence[Manifest]) -> list[RuntimeRefusal]:
    """The startup refusal of the rendered config, if any (the runtime stops at the first)."""
    manifest = rendered_config(manifests)
    if manifest is None:
        return [RuntimeRefusal("", "", f"the chart rendered no {CONFIG_KEY} for the runtime")]
    try:
        document = json.loads(str(manifest.document["data"][CONFIG_KEY]))
    except ValueError as error:
        message = f"the rendered {CONFIG_KEY} is not JSON: {error}"
        return [RuntimeRefusal("", "", message, manifest.source)]
    try:
        startup.check(document)
    except ConfigError as error:
        key = values_key(error.path)
        return [RuntimeRefusal(key, error.path, error.message, manifest.source)]
    return []
