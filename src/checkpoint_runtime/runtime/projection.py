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

`memory` is the third: the peak resident memory the process needs at the configured bounds,
against the container's memory limit (startup reads it from its cgroup, the render gate from the
rendered Deployment, `project` from --memory-limit). Every shard is held decoded
(MEMORY_DECODED_BYTES_PER_ROW a row); a feed's poll at capacity copies its seen-set and sorts it
to evict (MEMORY_POLL_BYTES_PER_ROW a row of its shard; every collector polls in its own thread,
so all feeds are counted at once); a compaction that rewrites a shard whole adds
MEMORY_COMPACTION_BYTES_PER_ROW a row of it while it encodes (a persist writes up to
PERSIST_CONCURRENCY shards at once, so the compactions of that many of the largest shards are
counted together); plus the process itself (MEMORY_BASELINE_BYTES). The figures are measured
(constants.py says how). A limit below the projection is refused (MemoryLimitError): a process
killed for memory at open, at a poll or at a compaction would restart into the same end.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any

from checkpoint_runtime.constants import (
    COMPACTION_WINDOW_SECONDS,
    CONFIGMAP_VALUE_LIMIT,
    ETCD_QUOTA_WARN_FRACTION,
    MAX_CHUNKS_LIMIT,
    MAX_DECODED_ENVELOPE,
    MEMORY_BASELINE_BYTES,
    MEMORY_COMPACTION_BYTES_PER_ROW,
    MEMORY_DECODED_BYTES_PER_ROW,
    MEMORY_POLL_BYTES_PER_ROW,
    PERSIST_CONCURRENCY,
    PROJECTION_ADVICE_HEADROOM,
    PROJECTION_CHUNK_SKEW_SIGMAS,
    PROJECTION_SHAPE,
)
from checkpoint_runtime.errors import ConfigError, MemoryLimitError, UsageError
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


# ---- memory ------------------------------------------------------------------------------------

MEBIBYTE = 1_048_576
# Kubernetes quantity suffixes of a memory amount -> bytes.
QUANTITY_UNITS = {
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"^(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<unit>[kMGTPE]i?|Ki|m)?$")


def memory_bytes(text: str, what: str = "--memory-limit") -> int:
    """Bytes of a Kubernetes memory quantity (512Mi, 1G, 1.5Gi, 536870912), rounded up; UsageError
    naming `what` for anything else."""
    match = _QUANTITY.match(str(text).strip())
    unit = match.group("unit") or "" if match else ""
    if match is None or unit == "m" or unit not in QUANTITY_UNITS:
        raise UsageError(what, f"{str(text)[:40]!r} is not a memory quantity (e.g. 512Mi, 1Gi)")
    number = Decimal(match.group("number"))
    return math.ceil(number * QUANTITY_UNITS[unit])


@dataclass(frozen=True)
class MemoryProjection:
    """The peak resident memory of the runtime process at its configured bounds, and the
    container's memory limit when known."""

    baseline_bytes: int
    decoded_bytes: int
    poll_bytes: int
    compaction_bytes: int
    compacting: tuple[str, ...]
    """The shards whose whole rewrites are counted at once (the largest, PERSIST_CONCURRENCY
    at most)."""
    rows: int
    knob: str
    """The collector knob of the largest shard ("" without a shard)."""
    knob_rows: int
    knob_row_bytes: int
    """What one row of that shard counts for (decoded, compacting, and polling for a feed)."""
    limit_bytes: int | None = None
    """The container's memory limit (None: unlimited or unknown, nothing to check)."""

    @property
    def projected_bytes(self) -> int:
        return self.baseline_bytes + self.decoded_bytes + self.poll_bytes + self.compaction_bytes

    @property
    def fits(self) -> bool:
        return self.limit_bytes is None or self.projected_bytes <= self.limit_bytes

    @property
    def needed_mebibytes(self) -> int:
        """The smallest limit in Mi that holds the projection."""
        return math.ceil(self.projected_bytes / MEBIBYTE)

    def advised_rows(self) -> int | None:
        """About how many rows the largest shard may hold under the limit, the rest unchanged
        (None: no limit, no knob, or not even without it)."""
        if self.limit_bytes is None or not self.knob or not self.compacting:
            return None
        rest = self.projected_bytes - self.knob_rows * self.knob_row_bytes
        rows = (self.limit_bytes - rest) // self.knob_row_bytes
        return rows if rows > 0 else None

    def summary(self) -> str:
        text = (
            f"{self.projected_bytes} bytes ({self.needed_mebibytes}Mi): "
            f"{self.baseline_bytes} for the process, {self.decoded_bytes} for {self.rows} "
            f"decoded rows, {self.poll_bytes} while the feeds poll at capacity, "
            f"{self.compaction_bytes} while "
            f"{_shards(self.compacting)} compact{'s' if len(self.compacting) == 1 else ''}"
        )
        if self.limit_bytes is None:
            return f"{text}; no memory limit known"
        return f"{text}; limit {self.limit_bytes} bytes ({self.limit_bytes / MEBIBYTE:g}Mi)"

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "compacting": list(self.compacting),
            "projected_bytes": self.projected_bytes,
            "fits": self.fits,
        }


def _shards(names: tuple[str, ...]) -> str:
    if not names:
        return "no shard"
    return ("shard " if len(names) == 1 else "shards ") + ", ".join(repr(n) for n in names)


def memory(projections: list[ShardProjection], limit_bytes: int | None = None) -> MemoryProjection:
    """The runtime's peak memory for these shards: every shard decoded, every feed polling at
    capacity, the largest shards' whole rewrites at once, the process itself."""
    rows = sum(item.rows for item in projections)
    largest = sorted(projections, key=lambda item: item.rows, reverse=True)
    compacting = largest[:PERSIST_CONCURRENCY]
    top = largest[0] if largest else None
    per_row = MEMORY_DECODED_BYTES_PER_ROW + MEMORY_COMPACTION_BYTES_PER_ROW
    return MemoryProjection(
        baseline_bytes=MEMORY_BASELINE_BYTES,
        decoded_bytes=rows * MEMORY_DECODED_BYTES_PER_ROW,
        poll_bytes=sum(item.rows for item in projections if _polls(item))
        * MEMORY_POLL_BYTES_PER_ROW,
        compaction_bytes=sum(item.rows for item in compacting) * MEMORY_COMPACTION_BYTES_PER_ROW,
        compacting=tuple(item.shard for item in compacting),
        rows=rows,
        knob=top.knob if top is not None else "",
        knob_rows=top.rows if top is not None else 0,
        knob_row_bytes=per_row + (MEMORY_POLL_BYTES_PER_ROW if top and _polls(top) else 0),
        limit_bytes=limit_bytes,
    )


def _polls(item: ShardProjection) -> bool:
    """A feed: its poll copies and sorts its seen-set (bounded by maxSeenKeys)."""
    return item.knob.endswith(".maxSeenKeys")


def memory_misfit(report: MemoryProjection) -> MemoryLimitError | None:
    """The error naming both knobs when the container's memory limit is below the projection."""
    if report.fits or report.limit_bytes is None:
        return None
    advice = (
        "raise the container's memory limit (resources.limits.memory in the chart) to at "
        f"least {report.needed_mebibytes}Mi"
    )
    rows = report.advised_rows()
    if report.knob:
        advice += f", or lower {report.knob}" + (
            f" (its shard holds {report.knob_rows} rows; about {rows} fit)" if rows else ""
        )
    message = (
        f"the runtime's peak memory is projected at {report.summary()}: it would be killed "
        f"for memory when its state grows there (at open, a poll or a compaction); {advice}"
    )
    return MemoryLimitError(report.knob, message, report.projected_bytes, report.limit_bytes)


def check_memory(projections: list[ShardProjection], limit_bytes: int | None) -> MemoryProjection:
    """The memory projection, or MemoryLimitError when the limit is below it."""
    report = memory(projections, limit_bytes)
    error = memory_misfit(report)
    if error is not None:
        raise error
    return report
