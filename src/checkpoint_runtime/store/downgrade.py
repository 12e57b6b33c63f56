"""Rollback support: rewrite `gzip-shards-v3` shards as `gzip-shards-v2`, which the previous
release reads. Only a shard whose whole state fits one object can be rewritten; the others are
named and left as they are (the previous release refuses them by name, never reads them wrong).

Each rewrite is a guarded update of the head (its resourceVersion as read, the fence as for
any write), stamped with the store's stamp. Chunk slots are not deleted: once the head is v2
they are unused, and `inspect` lists them with their bytes.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from checkpoint_runtime.backends.base import Backend, ShardWrite
from checkpoint_runtime.constants import (
    ANNOTATION_COMPRESSED_BYTES,
    ANNOTATION_FORMAT,
    ANNOTATION_RAW_BYTES,
    ANNOTATION_ROWS,
    ANNOTATION_WRITE_ID,
    CONFIGMAP_VALUE_LIMIT,
    SHARD_FORMAT,
    SHARD_FORMAT_V2,
)
from checkpoint_runtime.errors import OversizeError
from checkpoint_runtime.format import codec
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.store.planner import Fence, ShardState, check_not_fenced
from checkpoint_runtime.store.seal import Sealing


@dataclass
class DowngradeReport:
    rewritten: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    """Shards already in an older format."""
    too_large: dict[str, int] = field(default_factory=dict)
    """Shards whose state does not fit one object: shard -> its v2 size in bytes."""


def downgrade_to_v2(
    states: dict[str, ShardState],
    backend: Backend,
    fence: Fence,
    deadline: Deadline,
    sealing: Sealing | None = None,
) -> DowngradeReport:
    """Rewrite every v3 shard of `states` (as read) as v2 where it fits, sealed with `sealing`
    when given (store/seal.py); report the rest."""
    report = DowngradeReport()
    for key, state in sorted(states.items()):
        if state.version is None:
            continue
        if state.head_annotations.get(ANNOTATION_FORMAT) != SHARD_FORMAT:
            report.unchanged.append(key)
            continue
        try:
            encoded = codec.encode_shard(key, state.rows)
        except OversizeError as error:
            report.too_large[key] = error.size
            continue
        if encoded.compressed_bytes > CONFIGMAP_VALUE_LIMIT:
            report.too_large[key] = encoded.compressed_bytes
            continue
        check_not_fenced(key, fence.stamp, state.stamp)
        annotations = {
            **state.head_annotations,
            **fence.stamp.annotations(),
            ANNOTATION_FORMAT: SHARD_FORMAT_V2,
            ANNOTATION_RAW_BYTES: str(encoded.raw_bytes),
            ANNOTATION_COMPRESSED_BYTES: str(encoded.compressed_bytes),
            ANNOTATION_ROWS: str(encoded.rows),
            ANNOTATION_WRITE_ID: uuid.uuid4().hex,
        }
        if sealing is not None:
            annotations = sealing.sealed(key, encoded.blob, annotations)
        write = ShardWrite(key, encoded.blob, annotations)
        backend.update_shard(write, state.version, deadline)
        report.rewritten.append(key)
    return report
