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

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from checkpoint_runtime.constants import ANNOTATION_EPOCH, ANNOTATION_LEASE_UID, ANNOTATION_WRITER
from checkpoint_runtime.errors import CheckpointError, CorruptShardError, EpochFencedError


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
        if not (raw.isascii() and raw.isdigit()):  # "²".isdigit() is True; int() refuses it
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


class Fence:
    """A store's side of the fence: our stamp, and which stored stamps we may write over.

    We dominate a stamp of our own Lease object with an epoch not newer than ours (`dominates`).
    A stamp of another Lease object of our Lease's name (it was deleted and recreated), or one
    without a Lease object and a newer epoch, is neither refused nor dominated: we may take it
    over once `renew_above` (our elector's guarded renewal) has proved, after the stamp was
    read, that we hold the current Lease, raising our epoch above it. A stamp of our own Lease
    object with a newer epoch is always refused: a newer leader exists.
    """

    def __init__(self, stamp: Stamp) -> None:
        self.stamp = stamp
        self.renew_above: Callable[[int], int] | None = None
        """Renews our Lease, raising our epoch above the given one; returns our epoch."""
        self._superseded: frozenset[Stamp] = frozenset()
        """Stamps proved older than our term by a renewal made after they were read."""
        self._lock = threading.Lock()

    def may_overwrite(self, stored: Stamp) -> bool:
        with self._lock:
            return dominates(self.stamp, stored) or stored in self._superseded

    def check(self, shard: str, stored: Stamp) -> None:
        """Raise EpochFencedError unless we may write over `stored`."""
        if not self.may_overwrite(stored):
            check_not_fenced(shard, self.stamp, stored)

    def provable(self, shard: str, stored: Stamp) -> None:
        """Raise EpochFencedError unless a renewal could prove us newer than `stored`."""
        if self.renew_above is None or not self.stamp.lease or stored.lease == self.stamp.lease:
            check_not_fenced(shard, self.stamp, stored)

    def supersede(self, stamps: frozenset[Stamp]) -> None:
        """Renew our Lease now with an epoch above every one of `stamps`: the proof, made
        after they were read, that our term is newer. Raises what the renewal raises."""
        if self.renew_above is None:
            raise RuntimeError("no renewal to prove our term with")
        epoch = self.renew_above(max(stamp.epoch for stamp in stamps))
        with self._lock:
            if epoch > self.stamp.epoch:
                self.stamp = Stamp(epoch, self.stamp.writer, self.stamp.lease)
            self._superseded |= stamps

    def take_over_created(self, shard: str, theirs: Stamp) -> Stamp | None:
        """Our create met a shard stamped `theirs`, created since we looked. The stamp to write
        over it with, or None if it is not ours to take (a conflict, as before); raises
        EpochFencedError if a newer leader made it.

        Taken over: our own create (its answer lost), an older epoch of our Lease object (a
        deposed leader's), or (after a renewal proves our term newer) another Lease object's.
        """
        ours = self.stamp
        if theirs == ours or theirs in self._superseded:
            return ours
        if dominates(ours, theirs):
            return ours if theirs.epoch < ours.epoch else None  # the same epoch: a conflict
        if not ours.other_lease(theirs) or self.renew_above is None:
            check_not_fenced(shard, ours, theirs)
        try:
            self.supersede(frozenset({theirs}))
        except CheckpointError as unproven:  # we could not renew: not ours to take
            raise EpochFencedError(
                shard, ours.epoch, theirs.epoch, theirs.writer, other_lease=True
            ) from unproven
        return self.stamp
