"""What a collector kind declares, in one object (`CollectorKindSpec`): how its shard key and rows
are spelled, how its config entry is parsed and validated, how its shard is projected before
startup, and how the runtime builds it. `collectors/registry.py` holds the kinds; the settings,
the startup projection and the runtime derive from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from checkpoint_runtime.collectors import CheckpointMap, Collector
from checkpoint_runtime.collectors.sink import Sink
from checkpoint_runtime.format.naming import CollectorKind


@dataclass(frozen=True)
class CollectorSettings:
    """What every configured collector has, whatever its kind (`collectors[N]` of the config)."""

    kind: str
    namespace: str
    """Its collector namespace: the shard key, e.g. `corp/objectstore/audit`."""
    url: str
    tailnet: str | None
    poll_seconds: float


@dataclass(frozen=True)
class ShardEstimate:
    """A kind's estimate of one collector's shard at its configured bounds."""

    knob: str
    """The key of the collector's config entry that bounds the shard, e.g. `maxSeenKeys`."""
    rows: int
    compressed_bytes: int
    extrapolated: bool
    """Whether the size was scaled up from a smaller encoded sample."""
    max_rows: int | None
    """The most rows the knob may allow with headroom left in one object (None: the kind
    gives no advice)."""
    raw_bytes: int | None = None
    """What the decode bound counts at the configured bounds: the decoded envelope's bytes or
    the rows' characters, whichever is larger (None: not estimated)."""
    max_decoded_rows: int | None = None
    """The most rows whose decoded envelope leaves the advice headroom of the decode bound
    free (None: no advice); a chunked shard's advice is capped by it."""


S = TypeVar("S", bound=CollectorSettings)


@dataclass(frozen=True)
class CollectorKindSpec(Generic[S]):
    """One collector kind."""

    name: str
    """The kind, as in the config (`kind`) and as the kind segment of its keys."""
    shape: CollectorKind
    """Its shard key and rows: name segments after the kind, row kinds and which take an id."""
    instance_fields: tuple[str, ...]
    """The config keys whose values are the name segments, in key order (objectstore: feed)."""
    settings: Callable[[Mapping[str, Any], CollectorSettings, str], S]
    """Parse and validate the kind's config entry (after the schema) into its settings."""
    estimate: Callable[[S, str], ShardEstimate]
    """Project the collector's shard at its bounds, for a reference workload shape."""
    build: Callable[[CheckpointMap, Sink, S], Collector]
    """The collector the runtime runs for these settings."""
    schema: Mapping[str, Any] | None = None
    """The JSON schema of its config entry; None: `$defs.<name>` of the shipped config schema."""
    process_check: Callable[[S, str], None] | None = None
    """A check only the running process makes before anything starts (e.g. that an extra the
    settings need is installed); the render gate, which projects the same config, skips it."""
