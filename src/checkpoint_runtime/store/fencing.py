"""The store's side of leadership: who wrote a shard, under which epoch.

Leader election alone does not fence a paused ex-leader. Every shard therefore carries the
writer identity and leadership epoch (e.g. the Lease's leaseTransitions); a new leader restamps
its shards before collectors run (Store.take_ownership), and no store writes over a shard stamped
with a newer epoch. Together with resourceVersion guards this closes the deposed-leader window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from checkpoint_runtime.constants import ANNOTATION_EPOCH, ANNOTATION_WRITER
from checkpoint_runtime.errors import CorruptShardError, EpochFencedError


@dataclass(frozen=True, order=True)
class Stamp:
    """Leadership epoch and writer identity of one write."""

    epoch: int
    writer: str

    def annotations(self) -> dict[str, str]:
        return {ANNOTATION_EPOCH: str(self.epoch), ANNOTATION_WRITER: self.writer}

    @classmethod
    def from_annotations(cls, shard: str, annotations: Mapping[str, str]) -> Stamp:
        """The stamp a stored shard carries (epoch 0 if it was never stamped)."""
        raw = annotations.get(ANNOTATION_EPOCH, "0")
        if not (raw.isascii() and raw.isdigit()):  # "²".isdigit() is True; int() refuses it
            raise CorruptShardError(
                shard, f"epoch annotation {raw!r} is not a non-negative integer"
            )
        return cls(int(raw), annotations.get(ANNOTATION_WRITER, ""))


def check_not_fenced(shard: str, ours: Stamp, stored: Stamp) -> None:
    """Refuse to write over a shard a newer leader has stamped."""
    if stored.epoch > ours.epoch:
        raise EpochFencedError(shard, ours.epoch, stored.epoch, stored.writer)
