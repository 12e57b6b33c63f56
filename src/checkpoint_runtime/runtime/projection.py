"""Per-shard startup projection: will every collector's shard fit in its objects?

From the runtime config alone, build a representative payload for every collector's shard with
the production encoder and the conservative (UUID-named) reference workload, and refuse a config
whose shard could not fit, naming the knob to change (collectors[i].maxSeenKeys).

A shard may span `store.maxChunks` chunk slots, each one ConfigMap under the value limit, its
rows spread over them by a hash of the row key. So a shard fits when its fullest slot does:
the mean share of its compressed bytes plus PROJECTION_CHUNK_SKEW_SIGMAS standard deviations of
a hash partition (rows n over k slots: n/k + 4 sqrt(n/k) rows), and when its decoded size stays
under the decode bounds, which cover all chunks together: the base members' bytes under
MAX_DECODED_ENVELOPE and the rows' characters under MAX_DECODED_ROW_CHARS, counted as one
size (`codec_v3.decoded_size`: the larger of the bytes and the characters scaled to the
envelope bound). With maxChunks 1 this is the one-object check.

Each collector kind estimates its own shard (`estimate` of its entry in
`collectors/registry.py`; the shipped kinds' estimates and the feed's advice are in
`collectors/builtin.py`): the advice is one number per shard at the configured maxChunks,
leaving PROJECTION_ADVICE_HEADROOM (5 %) of every slot (and of the decode bound) free.

`etcd_window` is the other half of the report: the most bytes the store may send to the API in
one compaction window of the API server (its write budget over COMPACTION_WINDOW_SECONDS, plus
one object the budget may overshoot by), against the etcd quota the operator declares; past
ETCD_QUOTA_WARN_FRACTION of it, `project` and the render gate warn.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from checkpoint_runtime.constants import (
    COMPACTION_WINDOW_SECONDS,
    CONFIGMAP_VALUE_LIMIT,
    ETCD_QUOTA_WARN_FRACTION,
    MAX_CHUNKS_LIMIT,
    MAX_DECODED_ENVELOPE,
    PROJECTION_ADVICE_HEADROOM,
    PROJECTION_CHUNK_SKEW_SIGMAS,
    PROJECTION_SHAPE,
)
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format import sizes
from checkpoint_runtime.runtime.settings import RuntimeSettings


def fullest_slot_rows(rows: float, max_chunks: int) -> float:
    """Rows of the fullest of `max_chunks` hash slots holding `rows` rows (all of them for 1)."""
    if max_chunks <= 1:
        return rows
    mean = rows / max_chunks
    return mean + PROJECTION_CHUNK_SKEW_SIGMAS * math.sqrt(mean)


def chunked_max_rows(single: int, max_chunks: int) -> int:
    """The most rows over `max_chunks` slots whose fullest slot holds at most `single` rows."""
    if max_chunks <= 1:
        return single
    # r + s sqrt(r) = single, solved for sqrt(r)
    sigmas = PROJECTION_CHUNK_SKEW_SIGMAS
    root = (-sigmas + math.sqrt(sigmas * sigmas + 4 * single)) / 2
    return math.floor(max_chunks * max(root, 0.0) ** 2)


@dataclass(frozen=True)
class ShardProjection:
    """The projected size of one collector's shard at its configured bounds."""

    shard: str
    knob: str
    rows: int
    compressed_bytes: int
    extrapolated: bool
    max_rows: int | None
    """Most seen rows the shard is projected to hold at the configured maxChunks, leaving
    PROJECTION_ADVICE_HEADROOM of every slot free (None: not row-bound); the same number
    whatever the configured bound."""
    max_chunks: int = 1
    raw_bytes: int | None = None
    """The decoded size the decode bounds count, in bytes of MAX_DECODED_ENVELOPE
    (`codec_v3.decoded_size`; None: not estimated)."""

    @property
    def slot_bytes(self) -> int:
        """Projected compressed bytes of the fullest object the shard spreads over."""
        if self.rows <= 0 or self.max_chunks <= 1:
            return self.compressed_bytes
        per_row = self.compressed_bytes / self.rows
        return math.ceil(per_row * fullest_slot_rows(self.rows, self.max_chunks))

    @property
    def headroom_bytes(self) -> int:
        return sizes.headroom_bytes(self.slot_bytes)

    @property
    def headroom_ratio(self) -> float:
        return sizes.headroom_ratio(self.slot_bytes)

    @property
    def decodable(self) -> bool:
        return self.raw_bytes is None or self.raw_bytes <= MAX_DECODED_ENVELOPE

    @property
    def fits(self) -> bool:
        return self.slot_bytes <= CONFIGMAP_VALUE_LIMIT and self.decodable

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "slot_bytes": self.slot_bytes,
            "headroom_bytes": self.headroom_bytes,
            "headroom_ratio": round(self.headroom_ratio, 4),
            "fits": self.fits,
        }


@dataclass(frozen=True)
class EtcdWindow:
    """The most bytes one store may send to the API in one compaction window, against the etcd
    quota the operator declared."""

    window_seconds: int
    budget_bytes_per_second: int
    worst_case_bytes: int
    quota_bytes: int
    warn_fraction: float = ETCD_QUOTA_WARN_FRACTION

    @property
    def fraction(self) -> float:
        return self.worst_case_bytes / self.quota_bytes

    @property
    def warns(self) -> bool:
        return self.fraction > self.warn_fraction

    def message(self) -> str:
        text = (
            f"one store writes at most {self.worst_case_bytes} bytes to the API in a "
            f"{self.window_seconds} s compaction window (write budget "
            f"{self.budget_bytes_per_second} bytes/s), {self.fraction:.1%} of the declared etcd "
            f"quota of {self.quota_bytes} bytes"
        )
        if not self.warns:
            return text
        return (
            f"{text}: past {self.warn_fraction:.0%}, etcd (which holds the whole cluster) could "
            "run out of space; lower writeBudgetBytesPerSecond or declare the quota etcd really "
            "has (etcdQuotaBytes)"
        )

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "fraction": round(self.fraction, 4), "warns": self.warns}


def etcd_window(budget_bytes_per_second: int, quota_bytes: int) -> EtcdWindow:
    """Worst case: the budget over a whole window, plus one object it may overshoot by."""
    worst = budget_bytes_per_second * COMPACTION_WINDOW_SECONDS + CONFIGMAP_VALUE_LIMIT
    return EtcdWindow(COMPACTION_WINDOW_SECONDS, budget_bytes_per_second, worst, quota_bytes)


def etcd_report(settings: RuntimeSettings) -> EtcdWindow:
    store = settings.store
    return etcd_window(store.write_budget_bytes_per_second, store.etcd_quota_bytes)


def project(settings: RuntimeSettings, shape: str = PROJECTION_SHAPE) -> list[ShardProjection]:
    """One projection per configured collector, in config order, by its kind's estimate."""
    max_chunks = settings.store.max_chunks
    projections = []
    for index, collector in enumerate(settings.collectors):
        estimate = settings.kinds.kind(collector.kind).estimate(collector, shape)
        advice = estimate.max_rows
        if advice is not None:
            advice = chunked_max_rows(advice, max_chunks)
            if estimate.max_decoded_rows is not None:
                advice = min(advice, estimate.max_decoded_rows)
        projections.append(
            ShardProjection(
                shard=collector.namespace,
                knob=f"collectors[{index}].{estimate.knob}",
                rows=estimate.rows,
                compressed_bytes=estimate.compressed_bytes,
                extrapolated=estimate.extrapolated,
                max_rows=advice,
                max_chunks=max_chunks,
                raw_bytes=estimate.raw_bytes,
            )
        )
    return projections


def misfit(projections: list[ShardProjection]) -> ConfigError | None:
    """The error naming the knob of the first shard that could not fit, if any."""
    for item in projections:
        if item.fits:
            continue
        advice = (
            f"; lower it to at most {item.max_rows} (leaves "
            f"{PROJECTION_ADVICE_HEADROOM:.0%} of the limit free)"
            if item.max_rows
            else ""
        )
        if item.decodable and item.max_chunks < MAX_CHUNKS_LIMIT:
            advice += f"{' or' if advice else ';'} raise store.maxChunks (now {item.max_chunks})"
        problems = []
        if item.slot_bytes > CONFIGMAP_VALUE_LIMIT and item.max_chunks <= 1:
            problems.append(
                f"is projected at {item.compressed_bytes} bytes, over the "
                f"{CONFIGMAP_VALUE_LIMIT}-byte ConfigMap limit"
            )
        elif item.slot_bytes > CONFIGMAP_VALUE_LIMIT:
            problems.append(
                f"is projected at {item.compressed_bytes} bytes over {item.max_chunks} chunk "
                f"slots (store.maxChunks), the fullest at {item.slot_bytes} bytes, over the "
                f"{CONFIGMAP_VALUE_LIMIT}-byte ConfigMap limit"
            )
        if not item.decodable:
            problems.append(
                f"decodes to {item.raw_bytes} bytes, over the {MAX_DECODED_ENVELOPE}-byte "
                "decode bound of one shard"
            )
        problem = ", and ".join(problems)
        return ConfigError(item.knob, f"shard {item.shard!r} {problem}{advice}")
    return None


def check(settings: RuntimeSettings, shape: str = PROJECTION_SHAPE) -> list[ShardProjection]:
    """Projections, or ConfigError naming the knob of the first shard that could not fit."""
    projections = project(settings, shape)
    error = misfit(projections)
    if error is not None:
        raise error
    return projections
