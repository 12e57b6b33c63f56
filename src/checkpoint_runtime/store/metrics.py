"""Prometheus metrics of the store on a dedicated registry.

A dedicated CollectorRegistry keeps two stores in one process (tests, benchmarks) apart and lets
the runtime serve exactly these series. The chart's PrometheusRule alerts on
`checkpoint_shard_headroom_ratio`; renaming it breaks that alert.
"""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT
from checkpoint_runtime.format import sizes


class StoreMetrics:
    """Every series the store exports; per-shard gauges carry the label `shard` (the shard key)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.shards = Gauge("checkpoint_shards", "Shards the store holds", registry=r)
        self.raw_bytes = Gauge(
            "checkpoint_shard_raw_bytes", "Envelope bytes before gzip", ["shard"], registry=r
        )
        self.compressed_bytes = Gauge(
            "checkpoint_shard_compressed_bytes",
            "Stored gzip bytes (what the API server counts against the limit)",
            ["shard"],
            registry=r,
        )
        self.rows = Gauge("checkpoint_shard_rows", "Rows in the shard", ["shard"], registry=r)
        self.foreign = Gauge(
            "checkpoint_shard_foreign",
            "1 for a shard whose head the store did not write (not sealed with its store key): "
            "refused, never read; its collector does not run until the object is set aside",
            ["shard"],
            registry=r,
        )
        self.compression_ratio = Gauge(
            "checkpoint_shard_compression_ratio",
            "Raw bytes / compressed bytes",
            ["shard"],
            registry=r,
        )
        self.headroom_bytes = Gauge(
            "checkpoint_shard_headroom_bytes",
            f"Bytes left under the {CONFIGMAP_VALUE_LIMIT}-byte limit",
            ["shard"],
            registry=r,
        )
        self.headroom_ratio = Gauge(
            "checkpoint_shard_headroom_ratio",
            "Fraction of the size limit still free (alert when low)",
            ["shard"],
            registry=r,
        )
        self.writes = Counter(
            "checkpoint_writes", "Shard writes that committed", ["shard"], registry=r
        )
        self.conflicts = Counter(
            "checkpoint_conflicts", "Shard writes refused by a conflict", ["shard"], registry=r
        )
        self.uncertain_writes = Counter(
            "checkpoint_uncertain_writes",
            "Shard writes whose outcome was uncertain (resolved or not)",
            ["shard"],
            registry=r,
        )
        self.oversize_rejections = Counter(
            "checkpoint_oversize_rejections",
            "Shard writes refused because the encoded shard exceeds the limit",
            ["shard"],
            registry=r,
        )
        self.persist_seconds = Histogram(
            "checkpoint_persist_seconds", "Duration of one persist of all dirty shards", registry=r
        )
        self.leader = Gauge("checkpoint_leader", "1 while this process leads, else 0", registry=r)
        self.api_bytes_written = Counter(
            "checkpoint_shard_api_bytes_written",
            "Bytes of ConfigMap values sent to the API (head and chunk slots)",
            ["shard"],
            registry=r,
        )
        self.compactions = Counter(
            "checkpoint_shard_compactions",
            "Compactions that wrote chunk slots",
            ["shard"],
            registry=r,
        )
        self.chunks = Gauge(
            "checkpoint_shard_chunks",
            "Active chunk slots of the shard (0: its base is in its head)",
            ["shard"],
            registry=r,
        )
        self.write_budget = Gauge(
            "checkpoint_store_write_budget_bytes_per_second",
            "Configured write budget (bytes of ConfigMap writes per second: values, "
            "annotations and a fixed allowance per object; 0: none)",
            registry=r,
        )

    def per_shard_gauges(self) -> tuple[Gauge, ...]:
        return (
            self.raw_bytes,
            self.compressed_bytes,
            self.rows,
            self.compression_ratio,
            self.headroom_bytes,
            self.headroom_ratio,
            self.chunks,
        )

    def forget_shard(self, shard: str) -> None:
        """Remove a shard's gauges (it no longer exists): no stale size or headroom is served.
        Its counters stay, as counters do."""
        for gauge in self.per_shard_gauges():
            with contextlib.suppress(KeyError):  # never observed
                gauge.remove(shard)

    def observe_shard(
        self,
        shard: str,
        raw_bytes: int,
        compressed_bytes: int,
        rows: int,
        capacity: int = CONFIGMAP_VALUE_LIMIT,
    ) -> None:
        """Record the sizes of a shard as last stored (headroom against `capacity`: one object,
        or maxChunks slots for a chunked shard)."""
        self.raw_bytes.labels(shard).set(raw_bytes)
        self.compressed_bytes.labels(shard).set(compressed_bytes)
        self.rows.labels(shard).set(rows)
        self.compression_ratio.labels(shard).set(
            sizes.compression_ratio(raw_bytes, compressed_bytes)
        )
        self.headroom_bytes.labels(shard).set(sizes.headroom_bytes(compressed_bytes, capacity))
        self.headroom_ratio.labels(shard).set(sizes.headroom_ratio(compressed_bytes, capacity))
