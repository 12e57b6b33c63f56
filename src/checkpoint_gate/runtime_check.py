"""The runtime's own startup check, run by the gate on the config.json the chart renders.

The pods run `checkpoint-runtime run --config config.json`; whatever that refuses at startup
(exit 2, a crash loop once installed) the gate denies, with the runtime's message and the Helm
values key of the refused config key. `.Values.checkpoint` is the runtime config in its own
shape, so that key is the config key under `checkpoint.` (`collectors[0].maxSeenKeys` comes from
`checkpoint.collectors[0].maxSeenKeys`); only the two sections the chart adds from other values
are found elsewhere: `http` in `service` (the Service's port is the listener's), `sink` in `sink`.
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
VALUES_SECTION = "checkpoint"
# config.json sections the chart adds from values outside `checkpoint`: section -> values key.
CHART_SECTIONS = {"http": "service", "sink": "sink"}


@dataclass(frozen=True)
class RuntimeRefusal:
    """What the runtime would refuse: the values key to change and the runtime's message."""

    values_key: str
    config_key: str
    message: str
    source: str = ""


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
    try:
        startup.check(document)
    except ConfigError as error:
        key = values_key(error.path)
        return [RuntimeRefusal(key, error.path, error.message, manifest.source)]
    return []
