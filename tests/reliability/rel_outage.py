"""An API server that fails every request for a while: how hard the store retries, and when it
commits again.

The fault proxy answers every request (reads and writes) itself with `status` for `seconds`
(the server never sees them); a store writing `shards` shards through it retries with the shared
backoff inside its deadline. Counted: the requests answered during the outage, per shard and per
outage-second, against the documented bound (per shard, the write loop and the read-back loop
each send at most `retry.max_attempts(T)`, or `1 + T / Retry-After`); and the time from the end of
the outage to the batch returning. Violations: a batch that fails, a shard that does not hold the
batch afterwards (admin read), or more requests than the bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from checkpoint_runtime import retry
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.faultproxy import Action, FaultProxy
from checkpoint_testenv.support.kubetarget import KubeTarget

FEEDS = [f"tn/objectstore/feed-{i}" for i in range(8)]


class OutageViolation(AssertionError):
    """The store broke a guarantee (or the retry bound) around an outage."""


@dataclass(frozen=True)
class OutageResult:
    status: int
    retry_after: int | None
    seconds: float
    shards: int
    answered: int
    """Requests the proxy answered with `status` during the outage (all shards)."""
    bound_per_shard: int
    recovery_seconds: float
    """From the end of the outage to the batch returning."""

    @property
    def per_shard_per_second(self) -> float:
        return self.answered / self.shards / self.seconds


def bound_per_shard(seconds: float, retry_after: int | None) -> int:
    """Write loop + read-back loop, each bounded by the backoff's formula (with Retry-After R,
    no pause is shorter than R, so also by 1 + T / R)."""
    one_loop = retry.max_attempts(seconds)
    if retry_after:
        one_loop = min(one_loop, 1 + math.floor(seconds / retry_after))
    return 2 * one_loop


def outage_trial(
    target: KubeTarget,
    make_proxy: Callable[[], FaultProxy],
    *,
    status: int,
    reason: str = "",
    retry_after: int | None = None,
    seconds: float,
    shards: int = 3,
) -> OutageResult:
    lease = target.fresh_lease("outage")
    proxy = make_proxy()
    store = Store.open(
        target.backend(lease, host=proxy.host), writer="w", epoch=1, deadline_seconds=seconds + 20
    )
    feeds = FEEDS[:shards]
    store.batch({f"{feed}/cursor": "before" for feed in feeds})
    proxy.answer(status, reason, count=None, retry_after=retry_after, for_seconds=seconds)
    started = time.monotonic()
    store.batch({f"{feed}/cursor": "after" for feed in feeds})
    returned = time.monotonic()
    answered = [e for e in proxy.events if e.action is Action.ANSWER]
    bound = bound_per_shard(seconds, retry_after)
    result = OutageResult(
        status,
        retry_after,
        seconds,
        shards,
        len(answered),
        bound,
        recovery_seconds=max(0.0, returned - (started + seconds)),
    )
    stored = target.stored(lease)
    for feed in feeds:
        if stored[feed].rows != {f"{feed}/cursor": "after"}:
            raise OutageViolation(f"{feed} holds {stored[feed].rows} after the outage")
    if len(answered) > bound * shards:
        raise OutageViolation(
            f"{len(answered)} requests during a {seconds:g} s {status} outage over {shards} "
            f"shards, above the bound of {bound} per shard"
        )
    return result
