"""The store's side of leadership: who wrote a shard, under which epoch of which Lease.

Leader election alone does not fence a paused ex-leader. Every shard therefore carries the
writer identity, the leadership epoch and the uid of the Lease object that epoch belongs to; a new
leader restamps its shards before collectors run (Store.take_ownership), and no store writes over
a shard it does not dominate (`dominates`): a newer epoch of the same Lease object, or any epoch of
another Lease object of the same name (deleted and recreated: its epochs restarted and are not
comparable). A leader takes over the latter only after proving, by a guarded renewal of the Lease
it holds made after reading the shards, that it is the current leader (`Store.take_ownership`).
Together with resourceVersion guards this closes the deposed-leader window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from checkpoint_runtime.constants import ANNOTATION_EPOCH, ANNOTATION_LEASE_UID, ANNOTATION_WRITER
from checkpoint_runtime.errors import CorruptShardError, EpochFencedError


@dataclass(frozen=True)
class Stamp:
    """Leadership epoch, writer identity and Lease object (uid) of one write.

    An empty `lease` is a stamp without a Lease object: written before stamps carried one, or by
    a store that runs without leader election (the file store, the `migrate` command).
    """

    epoch: int
    writer: str
    lease: str = ""

    def annotations(self) -> dict[str, str]:
        stamped = {ANNOTATION_EPOCH: str(self.epoch), ANNOTATION_WRITER: self.writer}
        if self.lease:
            stamped[ANNOTATION_LEASE_UID] = self.lease
        return stamped

    @classmethod
    def from_annotations(cls, shard: str, annotations: Mapping[str, str]) -> Stamp:
        """The stamp a stored shard carries (epoch 0 if it was never stamped)."""
        raw = annotations.get(ANNOTATION_EPOCH, "0")
        if not raw.isdigit():
            raise CorruptShardError(
                shard, f"epoch annotation {raw!r} is not a non-negative integer"
            )
        return cls(
            int(raw),
            annotations.get(ANNOTATION_WRITER, ""),
            annotations.get(ANNOTATION_LEASE_UID, ""),
        )

    def other_lease(self, stored: Stamp) -> bool:
        """`stored` was written under another Lease object than ours (both known)."""
        return bool(self.lease and stored.lease and self.lease != stored.lease)


def dominates(ours: Stamp, stored: Stamp) -> bool:
    """We may write over `stored` without further proof: same Lease object (or one side
    without a Lease object) and an epoch not newer than ours."""
    return not ours.other_lease(stored) and stored.epoch <= ours.epoch


def check_not_fenced(shard: str, ours: Stamp, stored: Stamp) -> None:
    """Refuse to write over a shard we do not dominate (a newer leader stamped it)."""
    if not dominates(ours, stored):
        raise EpochFencedError(
            shard, ours.epoch, stored.epoch, stored.writer, ours.other_lease(stored)
        )
