"""Per-shard startup projection: will every collector's shard fit in one ConfigMap?

From the runtime config alone, build a representative payload for every collector's shard with
the production encoder and the conservative (UUID-named) reference workload, and refuse a config
whose shard could not fit, naming the knob to change (collectors[i].maxSeenKeys).

Each collector kind estimates its own shard (`estimate` of its entry in
`collectors/registry.py`; the shipped kinds' estimates and the feed's advice are in
`collectors/builtin.py`): the advice is one number per shard, leaving
PROJECTION_ADVICE_HEADROOM (5 %) of the limit free.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from checkpoint_runtime.collectors import registry
from checkpoint_runtime.constants import (
    CONFIGMAP_VALUE_LIMIT,
    PROJECTION_ADVICE_HEADROOM,
    PROJECTION_SHAPE,
)
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format import sizes
from checkpoint_runtime.runtime.settings import RuntimeSettings


@dataclass(frozen=True)
class ShardProjection:
    """The projected size of one collector's shard at its configured bounds."""

    shard: str
    knob: str
    rows: int
    compressed_bytes: int
    extrapolated: bool
    max_rows: int | None
    """Most seen rows the shard is projected to hold leaving PROJECTION_ADVICE_HEADROOM of the
    limit free (None: not row-bound); the same number whatever the configured bound."""

    @property
    def headroom_bytes(self) -> int:
        return sizes.headroom_bytes(self.compressed_bytes)

    @property
    def headroom_ratio(self) -> float:
        return sizes.headroom_ratio(self.compressed_bytes)

    @property
    def fits(self) -> bool:
        return self.compressed_bytes <= CONFIGMAP_VALUE_LIMIT

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "headroom_bytes": self.headroom_bytes,
            "headroom_ratio": round(self.headroom_ratio, 4),
            "fits": self.fits,
        }


def project(settings: RuntimeSettings, shape: str = PROJECTION_SHAPE) -> list[ShardProjection]:
    """One projection per configured collector, in config order, by its kind's estimate."""
    projections = []
    for index, collector in enumerate(settings.collectors):
        estimate = registry.kind(collector.kind).estimate(collector, shape)
        projections.append(
            ShardProjection(
                shard=collector.namespace,
                knob=f"collectors[{index}].{estimate.knob}",
                rows=estimate.rows,
                compressed_bytes=estimate.compressed_bytes,
                extrapolated=estimate.extrapolated,
                max_rows=estimate.max_rows,
            )
        )
    return projections


def misfit(projections: list[ShardProjection]) -> ConfigError | None:
    """The error naming the knob of the first shard that could not fit, if any."""
    for item in projections:
        if not item.fits:
            advice = (
                f"; lower it to at most {item.max_rows} (leaves "
                f"{PROJECTION_ADVICE_HEADROOM:.0%} of the limit free)"
                if item.max_rows
                else ""
            )
            return ConfigError(
                item.knob,
                f"shard {item.shard!r} is projected at {item.compressed_bytes} bytes, over the "
                f"{CONFIGMAP_VALUE_LIMIT}-byte ConfigMap limit{advice}",
            )
    return None


def check(settings: RuntimeSettings, shape: str = PROJECTION_SHAPE) -> list[ShardProjection]:
    """Projections, or ConfigError naming the knob of the first shard that could not fit."""
    projections = project(settings, shape)
    error = misfit(projections)
    if error is not None:
        raise error
    return projections
