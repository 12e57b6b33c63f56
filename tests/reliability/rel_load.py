"""Load (issue 7, scenario 6): many collectors at max_seen_keys, persisting every second.

`collectors` object-store feeds of `rows` seen rows each are stored, then every window (one
second by default, as the runtime persists) `dirty_per_window` of them (seeded choice) advance:
the cursor moves, a new seen row arrives and the oldest is evicted (a bounded seen set). At the
end of each window the store persists. Checked per window: no error, and the API writes the
proxy saw equal the dirty shards of that window (never more: coalesced, unchanged shards
untouched). RSS is sampled per window for the memory-stability figure.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rel_support import rss_bytes

from checkpoint_runtime.format.naming import rfc3339_from_ns
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.faultproxy import FaultProxy
from checkpoint_testenv.support.kubetarget import KubeTarget

TEMPLATE = "tn/objectstore/template"
WRITE_METHODS = {"PUT", "POST"}


@dataclass
class LoadResult:
    collectors: int
    rows_per_collector: int
    windows: int
    setup_seconds: float
    writes: list[int] = field(default_factory=list)
    dirty: list[int] = field(default_factory=list)
    persist_seconds: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)
    overruns: int = 0
    """Windows whose persist did not finish within the second (the loop then runs late)."""

    @property
    def rss_growth(self) -> int:
        """RSS at the end minus RSS after the first window (warm-up excluded)."""
        return self.rss[-1] - self.rss[0] if self.rss else 0


def feed_rows(collectors: int, rows: int) -> dict[str, dict[str, str]]:
    """`collectors` feeds of `rows` seen rows each, cloned from one generated feed."""
    template = FeedWorkload(TEMPLATE, rows).rows
    feeds = {}
    for index in range(collectors):
        shard = f"tn/objectstore/feed-{index:03d}"
        feeds[shard] = {shard + key[len(TEMPLATE) :]: value for key, value in template.items()}
    return feeds


def run_load(
    target: KubeTarget,
    make_proxy: Callable[[], FaultProxy],
    *,
    collectors: int = 50,
    rows: int = 5000,
    seconds: float = 10.0,
    dirty_per_window: int = 5,
    seed: int = 2026,
    period: float = 1.0,
) -> LoadResult:
    """`seconds` of load in windows of `period` seconds (a persist at the end of each)."""
    rng = random.Random(seed)
    proxy = make_proxy()
    lease = target.fresh_lease("load")
    store = Store.open(target.backend(lease, host=proxy.host), writer="load", epoch=1)
    feeds = feed_rows(collectors, rows)
    started = time.monotonic()
    model = {key: value for shard_rows in feeds.values() for key, value in shard_rows.items()}
    store.batch(model)
    result = LoadResult(collectors, rows, 0, time.monotonic() - started)
    seen = {
        shard: sorted(k for k in shard_rows if "/seen/" in k) for shard, shard_rows in feeds.items()
    }
    windows = max(1, round(seconds / period))
    clock = 0
    next_window = time.monotonic()
    for window in range(windows):
        next_window += period
        chosen = rng.sample(sorted(feeds), dirty_per_window)
        for shard in chosen:
            clock += 1
            newest = f"{shard}/seen/new-{window:06d}-{clock:08d}"
            changes: dict[str, str | None] = {
                f"{shard}/cursor": newest,
                newest: rfc3339_from_ns(clock * 1_000_000_000),
                seen[shard].pop(0): None,  # the bounded seen set evicts its oldest row
            }
            seen[shard].append(newest)
            for key, value in changes.items():
                if value is None:
                    store.delete(key)
                    del model[key]
                else:
                    store.set(key, value)
                    model[key] = value
        dirty = store.dirty_shards()
        before = len(proxy.events)
        persist_started = time.monotonic()
        store.flush()
        result.persist_seconds.append(time.monotonic() - persist_started)
        writes = sum(1 for event in proxy.events[before:] if event.method in WRITE_METHODS)
        result.writes.append(writes)
        result.dirty.append(len(dirty))
        if writes > len(dirty):
            raise AssertionError(
                f"window {window}: {writes} API writes for {len(dirty)} dirty shards"
            )
        gc.collect()
        result.rss.append(rss_bytes())
        result.windows += 1
        pause = next_window - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        else:
            result.overruns += 1
            next_window = time.monotonic()
    stored = target.stored(lease)
    api = {key: value for state in stored.values() for key, value in state.rows.items()}
    if api != model or dict(store.items()) != model:
        raise AssertionError("after the load the API state or the store differs from the model")
    if len(stored) != collectors:
        raise AssertionError(f"{len(stored)} shards stored, expected {collectors}")
    return result
