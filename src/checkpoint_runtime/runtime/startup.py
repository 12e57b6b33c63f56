"""The runtime's startup check: everything `run` refuses before it touches the API (exit 2).

One function, used by `run` itself and by the render gate on the config.json the chart renders,
so the gate can never pass a config the pods would then refuse in a crash loop: the schema and
the rules a schema cannot express (settings.parse), then the per-shard size projection.
"""

from __future__ import annotations

from typing import Any

from checkpoint_runtime.runtime import projection
from checkpoint_runtime.runtime.projection import ShardProjection
from checkpoint_runtime.runtime.settings import RuntimeSettings, parse


def check(document: dict[str, Any]) -> tuple[RuntimeSettings, list[ShardProjection]]:
    """The settings and every shard's projection, or ConfigError naming the config key."""
    settings = parse(document)
    return settings, projection.check(settings)
