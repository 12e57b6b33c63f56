"""Every option of a store, in one object (`Store(backend, options)` / `Store.open`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from checkpoint_runtime.constants import (
    DEFAULT_COMPACTION_RATIO,
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_DEBOUNCE_SECONDS,
    DEFAULT_MAX_CHUNKS,
    DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND,
    MAX_CHUNKS_LIMIT,
)
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format.naming import COLLECTOR_KINDS, Kinds
from checkpoint_runtime.store.metrics import StoreMetrics
from checkpoint_runtime.store.seal import Sealing


@dataclass(frozen=True)
class StoreOptions:
    """How a store writes: identity, deadlines, the v3 layout bounds and the write budget."""

    writer: str = ""
    epoch: int = 0
    lease_uid: str = ""
    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS
    debounce_seconds: float = DEFAULT_DEBOUNCE_SECONDS
    compaction_ratio: float = DEFAULT_COMPACTION_RATIO
    """A delta may grow to this fraction of its base (compressed) before the next persist
    compacts it; 0 writes every base whole."""
    max_chunks: int = DEFAULT_MAX_CHUNKS
    """Chunk slots per generation of one shard: a state past them fails visibly."""
    write_budget_bytes_per_second: float = DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND
    """Bytes of ConfigMap values the debounced persist sends per second (0: no budget)."""
    shards: frozenset[str] | None = None
    """Discovery by name: exactly these shards (None: by label)."""
    kinds: Kinds = field(default_factory=lambda: COLLECTOR_KINDS)
    """The collector kinds whose keys it reads and writes: a kind table's `shapes`."""
    metrics: StoreMetrics | None = None
    sealing: Sealing | None = None
    """Seal every head written and refuse every head read that is not sealed with the store
    key (store/seal.py); None: no seal (the file store, the operator commands)."""
    clock: Callable[[], float] = field(default=time.monotonic)

    def __post_init__(self) -> None:
        if not self.compaction_ratio >= 0:
            raise ConfigError(
                "compactionRatio", f"must be a number >= 0, got {self.compaction_ratio!r}"
            )
        if type(self.max_chunks) is not int or not 1 <= self.max_chunks <= MAX_CHUNKS_LIMIT:
            raise ConfigError(
                "maxChunks", f"must be an integer 1..{MAX_CHUNKS_LIMIT}, got {self.max_chunks!r}"
            )
        if not self.write_budget_bytes_per_second >= 0:
            raise ConfigError(
                "writeBudgetBytesPerSecond",
                f"must be a number >= 0, got {self.write_budget_bytes_per_second!r}",
            )
