"""The runtime's own Prometheus series (leader epoch, collector polls and records), registered
on the store's registry so /metrics serves one set."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge

from checkpoint_runtime.store.metrics import StoreMetrics


@dataclass
class RuntimeMetrics:
    """The runtime's series, on the store's registry so /metrics serves one set."""

    store: StoreMetrics = field(default_factory=StoreMetrics)

    def __post_init__(self) -> None:
        r = self.store.registry
        self.epoch = Gauge("checkpoint_leader_epoch", "Leadership epoch of our term", registry=r)
        self.foreign_lease = Gauge(
            "checkpoint_lease_foreign",
            "1 while the store's Lease is held in a shape none of its replicas writes (labels, "
            "holder identity, duration): a standby that may never lead (not ready; the log "
            "names the Lease and why)",
            registry=r,
        )
        self.quarantined = Gauge(
            "checkpoint_quarantined_rows",
            "Rows a collector could not parse, kept aside with their original value "
            "(`checkpoint-runtime inspect` lists them)",
            registry=r,
        )
        self.records = Counter(
            "checkpoint_collector_records",
            "Records a collector emitted to the sink",
            ["collector"],
            registry=r,
        )
        self.polls = Counter(
            "checkpoint_collector_polls", "Collector polls completed", ["collector"], registry=r
        )
        self.poll_failures = Counter(
            "checkpoint_collector_poll_failures",
            "Collector polls that failed on the source (unreachable, access denied, ...); "
            "state and checkpoints are left as they were and the poll is retried with backoff",
            ["collector", "error"],
            registry=r,
        )
        self.last_success = Gauge(
            "checkpoint_collector_last_success_timestamp_seconds",
            "Unix time at which the collector's last poll (scan) completed; 0 before the first",
            ["collector"],
            registry=r,
        )
        self.bucket_leader = Gauge(
            "checkpoint_bucket_leader",
            "1 while this process leads the bucket (store.buckets > 1), else 0",
            ["bucket"],
            registry=r,
        )
        self.bucket_handovers = Counter(
            "checkpoint_bucket_handovers",
            "Buckets this process handed over (collectors stopped, flushed, Lease released)",
            ["bucket"],
            registry=r,
        )
        self.bucket_leaderless = Gauge(
            "checkpoint_bucket_leaderless_seconds",
            "Seconds this process has seen the bucket's Lease without a live holder (0 while "
            "one holds it); the smallest over the release's pods is how long it has no leader",
            ["bucket"],
            registry=r,
        )
        self.buckets_led = Gauge("checkpoint_buckets_led", "Buckets this process leads", registry=r)
        self.bucket_share = Gauge(
            "checkpoint_bucket_share",
            "The most buckets one process should lead, ceil(buckets / live members), as this "
            "process counts the members",
            registry=r,
        )
        self.bucket_members = Gauge(
            "checkpoint_bucket_members",
            "Live membership slots this process counts (the release's replicas that lead)",
            registry=r,
        )
