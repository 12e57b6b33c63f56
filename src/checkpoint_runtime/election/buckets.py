"""Leadership buckets: which bucket a collector namespace belongs to, the Leases of a layout of
B buckets, and the placement rule every replica applies (pure functions, no I/O).

- `bucket_of(namespace, B)`: the first 8 bytes of SHA-256 over `BUCKET_HASH_PREFIX` and the
  namespace (UTF-8), as a big-endian integer, modulo B. It depends on the namespace and B only,
  never on which replicas run.
- `bucket_lease_names(lease, B)`: B = 1 is the store's own Lease (`lease`), exactly as a store
  without buckets; B > 1 is `<lease>-NN-of-BB` for NN in 0..B-1 (two digits each).
- `member_lease_names(lease, B)`: B > 1 only: `<lease>-member-NN-of-BB`, B membership slots. A
  replica holds one (renewed like a bucket's Lease) so that every replica counts live members the
  same way: R = the slots held by a holder whose record changed within its lease duration.
  With more replicas than buckets the extra ones hold no slot and lead nothing (each of the B
  members leads at most one bucket then).
- `placement(...)`: what one replica does in one election round: with share = ⌈B/R⌉, a replica
  holding more than its share releases its surplus (the buckets it ranks lowest); one holding
  fewer takes free buckets (no live holder), in its own rendezvous order, up to its share.
  A bucket is only ever taken when free: a held bucket moves only by its holder's release
  (stop its collectors, flush, release: `runtime/buckets.py`) or by its Lease expiring.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from checkpoint_runtime.constants import MAX_BUCKETS

BUCKET_HASH_PREFIX = b"checkpoint-runtime/bucket\x00"
"""Hashed before the namespace, so the bucket hash is this store's own (docs/store.md)."""


def bucket_of(namespace: str, buckets: int) -> int:
    """The bucket (0..buckets-1) that leads the collector namespace `namespace`."""
    if not 1 <= buckets <= MAX_BUCKETS:
        raise ValueError(f"buckets must be 1..{MAX_BUCKETS}, got {buckets}")
    digest = hashlib.sha256(BUCKET_HASH_PREFIX + namespace.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % buckets


def bucket_lease_name(lease: str, index: int, buckets: int) -> str:
    """The Lease of bucket `index` of `buckets`: the store's own Lease when there is one."""
    if buckets == 1:
        return lease
    return f"{lease}-{index:02d}-of-{buckets:02d}"


def bucket_lease_names(lease: str, buckets: int) -> list[str]:
    return [bucket_lease_name(lease, index, buckets) for index in range(buckets)]


def member_lease_names(lease: str, buckets: int) -> list[str]:
    """The membership slots of a layout of `buckets` (none for one bucket: no placement)."""
    if buckets == 1:
        return []
    return [f"{lease}-member-{index:02d}-of-{buckets:02d}" for index in range(buckets)]


def lease_names(lease: str, buckets: int) -> list[str]:
    """Every Lease name a replica of this layout reads or writes: the store's own Lease (it
    carries the layout and the store key), the buckets' and the membership slots'."""
    names = [lease, *bucket_lease_names(lease, buckets), *member_lease_names(lease, buckets)]
    return list(dict.fromkeys(names))


def shards_of_bucket(namespaces: Iterable[str], index: int, buckets: int) -> list[str]:
    return [ns for ns in namespaces if bucket_of(ns, buckets) == index]


def share(buckets: int, members: int) -> int:
    """⌈B/R⌉: the most buckets one replica leads once membership is stable."""
    return math.ceil(buckets / max(members, 1))


def rank(member: int, index: int) -> bytes:
    """Rendezvous weight of bucket `index` for membership slot `member` (higher first)."""
    return hashlib.sha256(f"{member}/{index}".encode()).digest()


@dataclass(frozen=True)
class Placement:
    """One round's decision: buckets to hand over, then free buckets to try, in order."""

    release: tuple[int, ...]
    take: tuple[int, ...]
    share: int


def placement(
    buckets: int,
    member: int | None,
    members: int,
    held: Collection[int],
    free: Collection[int],
) -> Placement:
    """What the replica in membership slot `member` (None: it holds no slot yet) does this
    round, holding `held`, seeing `free` buckets with no live holder and `members` live
    membership slots (itself included)."""
    limit = share(buckets, members)
    if member is None:  # not counted by anyone yet: lead nothing until it is
        return Placement(tuple(sorted(held)), (), limit)
    mine = sorted(held, key=lambda index: rank(member, index), reverse=True)
    release = tuple(mine[limit:])
    room = max(limit - len(held), 0)
    candidates = sorted(
        (index for index in free if index not in held),
        key=lambda index: rank(member, index),
        reverse=True,
    )
    return Placement(release, tuple(candidates[:room]), limit)
