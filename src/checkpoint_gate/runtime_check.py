"""The runtime's own startup check, run by the gate on the config.json the chart renders.

The pods run `checkpoint-runtime run --config config.json`; whatever that refuses at startup
(exit 2, a crash loop once installed) the gate denies, with the runtime's message and the Helm
values key of the refused config key. `.Values.checkpoint` is the runtime config in its own
shape, so that key is the config key under `checkpoint.` (`collectors[0].maxSeenKeys` comes from
`checkpoint.collectors[0].maxSeenKeys`); only the two sections the chart adds from other values
are found elsewhere: `http` in `service` (the Service's port is the listener's), `sink` in `sink`.

The runtime also refuses to start when its container's memory limit is below the memory it is
projected to need (MemoryLimitError): the gate gives it the limit the rendered Deployment sets on
the runtime container, and reports that refusal as rule MEM-1 under `resources.limits.memory`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from checkpoint_gate.manifests import Manifest
from checkpoint_runtime.errors import ConfigError, MemoryLimitError
from checkpoint_runtime.runtime import projection, startup

CONFIG_KEY = "config.json"
CONFIG_TEMPLATE = "templates/configmap.yaml"
VALUES_SECTION = "checkpoint"
# config.json sections the chart adds from values outside `checkpoint`: section -> values key.
CHART_SECTIONS = {"http": "service", "sink": "sink"}
RUNTIME_RULE = "RUNTIME"
MEMORY_RULE = "MEM-1"
RUNTIME_CONTAINER = "runtime"
MEMORY_VALUES_KEY = "resources.limits.memory"


@dataclass(frozen=True)
class RuntimeRefusal:
    """What the runtime would refuse: the values key to change and the runtime's message."""

    values_key: str
    config_key: str
    message: str
    source: str = ""
    rule: str = RUNTIME_RULE


def values_key(config_key: str) -> str:
    """`collectors[0].maxSeenKeys` -> `checkpoint.collectors[0].maxSeenKeys`."""
    if not config_key:
        return config_key
    section = config_key.split(".", 1)[0].split("[", 1)[0]
    if section in CHART_SECTIONS:
        return CHART_SECTIONS[section] + config_key[len(section) :]
    return f"{VALUES_SECTION}.{config_key}"


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
    limit = memory_limit(manifests)
    try:
        startup.check(document, None if limit is None else limit[0])
    except MemoryLimitError as error:
        source = manifest.source if limit is None else limit[1]
        return [RuntimeRefusal(MEMORY_VALUES_KEY, error.path, error.message, source, MEMORY_RULE)]
    except ConfigError as error:
        key = values_key(error.path)
        return [RuntimeRefusal(key, error.path, error.message, manifest.source)]
    return []


def memory_limit(manifests: Sequence[Manifest]) -> tuple[int, str] | None:
    """The memory limit (bytes) the rendered Deployment sets on the runtime container, and the
    template it came from; None when it sets none (or not as a quantity the runtime reads)."""
    for manifest in manifests:
        if manifest.kind != "Deployment":
            continue
        pod = (manifest.document.get("spec") or {}).get("template") or {}
        for container in (pod.get("spec") or {}).get("containers") or []:
            if container.get("name") != RUNTIME_CONTAINER:
                continue
            limits = (container.get("resources") or {}).get("limits") or {}
            if "memory" not in limits:
                return None
            try:
                return projection.memory_bytes(str(limits["memory"])), manifest.source
            except ConfigError:
                return None
    return None
