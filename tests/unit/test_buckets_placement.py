"""Leadership buckets, the pure parts: the namespace hash (pinned: changing it moves every
collector to another bucket's Lease), the Lease names (one bucket is exactly the store's Lease),
and the placement rule run as rounds of replicas that see each other through their membership
slots: at most ⌈B/R⌉ each once membership is stable, within a bounded number of rounds, and no
bucket ever taken while another replica holds it."""

from __future__ import annotations

import math
import random

import pytest

from checkpoint_runtime.constants import MAX_BUCKETS
from checkpoint_runtime.election.buckets import (
    bucket_lease_names,
    bucket_of,
    lease_names,
    member_lease_names,
    placement,
    shards_of_bucket,
)


def test_the_bucket_hash_is_pinned() -> None:
    # sha256("checkpoint-runtime/bucket\0" + namespace)[:8], big-endian, mod B (docs/store.md)
    assert [bucket_of(n, 4) for n in ("tn1/objectstore/feed-0", "flowlogs")] == [3, 2]
    assert [bucket_of(n, 6) for n in ("tn1/objectstore/feed-0", "flowlogs")] == [3, 4]
    assert bucket_of("corp.example/objectstore/audit", 6) == 0
    assert {bucket_of(f"tn/objectstore/f{i}", 1) for i in range(50)} == {0}


def test_every_bucket_count_spreads_namespaces() -> None:
    namespaces = [f"tn{i % 7}/objectstore/feed-{i}" for i in range(400)]
    for buckets in (2, 3, 6, MAX_BUCKETS):
        counts = [len(shards_of_bucket(namespaces, b, buckets)) for b in range(buckets)]
        assert sum(counts) == len(namespaces)
        assert min(counts) > 0


def test_one_bucket_is_exactly_the_store_lease() -> None:
    assert bucket_lease_names("cr-checkpoint-runtime", 1) == ["cr-checkpoint-runtime"]
    assert member_lease_names("cr-checkpoint-runtime", 1) == []
    assert lease_names("cr-checkpoint-runtime", 1) == ["cr-checkpoint-runtime"]


def test_lease_names_of_several_buckets() -> None:
    names = lease_names("x", 3)
    assert names == [
        "x",
        "x-00-of-03",
        "x-01-of-03",
        "x-02-of-03",
        "x-member-00-of-03",
        "x-member-01-of-03",
        "x-member-02-of-03",
    ]
    longest = lease_names("a" * 63, MAX_BUCKETS)
    assert max(len(name) for name in longest) <= 253  # a Lease name is a DNS subdomain


def converge(
    buckets: int, replicas: int, seed: int, held: dict[int, set[int]] | None = None
) -> tuple[dict[int, set[int]], int]:
    """Rounds of `replicas` (membership slot = replica number) in a random order each round;
    a take succeeds only on a bucket nobody holds (the Lease's compare-and-swap). Returns the
    holdings and the number of rounds until a round changed nothing."""
    rng = random.Random(seed)
    holdings: dict[int, set[int]] = {r: set() for r in range(replicas)} if held is None else held
    for rounds in range(1, 50):
        changed = False
        for replica in rng.sample(sorted(holdings), len(holdings)):
            owned = {b for hs in holdings.values() for b in hs}
            free = set(range(buckets)) - owned
            decision = placement(buckets, replica, len(holdings), holdings[replica], free)
            for index in decision.release:
                holdings[replica].discard(index)
                changed = True
            for index in decision.take:
                owners = [r for r, hs in holdings.items() if index in hs]
                assert not owners, f"bucket {index} taken while {owners} hold it"
                holdings[replica].add(index)
                changed = True
        if not changed:
            return holdings, rounds
    raise AssertionError("placement did not settle in 50 rounds")


@pytest.mark.parametrize(("buckets", "replicas"), [(6, 3), (6, 4), (4, 2), (5, 2), (3, 5), (32, 7)])
def test_placement_settles_within_share(buckets: int, replicas: int) -> None:
    for seed in range(20):
        holdings, rounds = converge(buckets, replicas, seed)
        share = math.ceil(buckets / replicas)
        assert max(len(hs) for hs in holdings.values()) <= share
        assert sorted(b for hs in holdings.values() for b in hs) == list(range(buckets))
        assert rounds <= 2  # one round moves everything; the next confirms it


def test_a_joining_replica_gets_buckets_and_nobody_takes_a_held_one() -> None:
    holdings, _ = converge(6, 2, seed=1)
    assert sorted(len(hs) for hs in holdings.values()) == [3, 3]
    holdings[2] = set()  # a third replica joins
    holdings, rounds = converge(6, 3, seed=2, held=holdings)
    assert sorted(len(hs) for hs in holdings.values()) == [2, 2, 2]
    assert rounds <= 3  # surplus released in the first round, taken by the newcomer


def test_a_leaving_replica_moves_only_its_own_buckets() -> None:
    holdings, _ = converge(6, 3, seed=3)
    kept = {r: set(hs) for r, hs in holdings.items() if r != 2}
    del holdings[2]  # its Leases expire (or were released)
    holdings, _ = converge(6, 2, seed=4, held=holdings)
    for replica, before in kept.items():
        assert before <= holdings[replica]  # a live replica's bucket never moved
    assert sorted(len(hs) for hs in holdings.values()) == [3, 3]


def test_a_replica_without_a_membership_slot_leads_nothing() -> None:
    decision = placement(4, None, 2, {1, 2}, {0, 3})
    assert decision.release == (1, 2)
    assert decision.take == ()
