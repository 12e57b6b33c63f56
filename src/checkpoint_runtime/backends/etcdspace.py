"""A full etcd is a definitive answer: stop writing until it clears.

Past its space quota etcd refuses every write in the cluster (the API server answers 500 with
the message `etcdserver: mvcc: database space exceeded`), before the write is applied: nothing
was committed. Re-sending the write, or reading it back to find out, only adds load to a
cluster that already refuses everything, so the backend reports `EtcdSpaceExceededError` at
once and this gate stops its writes:

- after a refusal no write is sent for a hold-off (ETCD_SPACE_FIRST_HOLD_SECONDS, doubling
  after each further refusal up to ETCD_SPACE_MAX_HOLD_SECONDS); a write asked for meanwhile
  fails at once with the same error, without a request;
- once the hold-off has passed, the next write goes out as the probe (only one at a time:
  concurrent writes are refused until it has answered); if it commits, the gate clears and
  every shard writes again; if etcd refuses it, the next, longer hold-off starts.

So a store sends at most one write per hold-off while etcd is full, whatever its load. The
gauge `checkpoint_store_etcd_space_exceeded` is 1 while writes are stopped and the counter
`checkpoint_store_etcd_space_exceeded_total` counts refusals by etcd (not the writes the gate
refused without sending).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric, UnknownMetricFamily
from prometheus_client.registry import Collector

from checkpoint_runtime.constants import (
    ETCD_NOSPACE_MESSAGE,
    ETCD_SPACE_FIRST_HOLD_SECONDS,
    ETCD_SPACE_MAX_HOLD_SECONDS,
    METRIC_ETCD_SPACE_EXCEEDED,
)
from checkpoint_runtime.errors import EtcdSpaceExceededError


def is_etcd_space_exceeded(status: int, message: str) -> bool:
    """Is this API answer etcd's NOSPACE refusal (a 500 whose message names it)?"""
    return status == 500 and ETCD_NOSPACE_MESSAGE in message


class EtcdSpaceGate:
    """The stop-and-probe state of one backend's writes; thread-safe."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        first_hold: float = ETCD_SPACE_FIRST_HOLD_SECONDS,
        max_hold: float = ETCD_SPACE_MAX_HOLD_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.first_hold = first_hold
        self.max_hold = max_hold
        self._clock = clock
        self._lock = threading.Lock()
        self._stopped = False
        self._hold = first_hold
        self._resume_at = 0.0
        self._probing = False
        self._detail = ""
        self.refusals = 0
        """Writes etcd refused for lack of space (the counter's value)."""
        if registry is not None:
            registry.register(_GateCollector(self))

    @property
    def stopped(self) -> bool:
        with self._lock:
            return self._stopped

    def resume_in(self) -> float:
        """Seconds until the next write may go out (0: now, or writes flow)."""
        with self._lock:
            return max(self._resume_at - self._clock(), 0.0) if self._stopped else 0.0

    def admit(self, shard: str) -> bool:
        """May a write of `shard` be sent now? True if it is the probe of a stopped gate,
        False if writes flow; raises EtcdSpaceExceededError if writes are stopped."""
        with self._lock:
            if not self._stopped:
                return False
            wait = self._resume_at - self._clock()
            if wait > 0 or self._probing:
                raise EtcdSpaceExceededError(
                    shard,
                    f"not sent: writes are stopped since etcd refused one ({self._detail})",
                    max(wait, 0.0) if not self._probing else self._hold,
                )
            self._probing = True
            return True

    def settled(self, probe: bool) -> None:
        """The write admitted by `admit` has an answer (whatever it was)."""
        if probe:
            with self._lock:
                self._probing = False

    def refused(self, shard: str, message: str) -> EtcdSpaceExceededError:
        """etcd refused a write of `shard`: stop writes for the next hold-off; the error."""
        with self._lock:
            self.refusals += 1
            hold = self._hold if self._stopped else self.first_hold
            self._stopped = True
            self._detail = message
            self._resume_at = self._clock() + hold
            self._hold = min(hold * 2, self.max_hold)
        return EtcdSpaceExceededError(shard, f"the API server answered 500: {message}", hold)

    def committed(self) -> None:
        """A write committed: etcd has space again, writes flow."""
        with self._lock:
            self._stopped = False
            self._hold = self.first_hold


class _GateCollector(Collector):
    """The gate's two series. They share a base name, so the count cannot be a counter: an
    OpenMetrics counter `x` exposes the sample `x_total` under the family name `x`, which the
    gauge already uses, and a scrape of that exposition fails. It is exported untyped under its
    full name: same sample name, valid in both exposition formats, `rate()` works as usual."""

    def __init__(self, gate: EtcdSpaceGate) -> None:
        self._gate = gate

    def collect(self) -> Iterator[Metric]:
        stopped = GaugeMetricFamily(
            METRIC_ETCD_SPACE_EXCEEDED,
            "1 while the store's writes are stopped because etcd's database is full (NOSPACE)",
        )
        stopped.add_metric([], 1.0 if self._gate.stopped else 0.0)
        yield stopped
        refusals = UnknownMetricFamily(
            f"{METRIC_ETCD_SPACE_EXCEEDED}_total",
            "Writes etcd refused because its database is full (NOSPACE); only grows",
        )
        refusals.add_metric([], float(self._gate.refusals))
        yield refusals
