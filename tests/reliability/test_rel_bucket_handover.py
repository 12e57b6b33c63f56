"""Bucket handover races on the real API server (rel_bucket_handover.py): every schedule of a
bucket's old and new owner (a handover with flush and release, a takeover while the old owner
is paused or partitioned away, a release write that fails), and of a change of the number of
buckets (the operator's step, a one-bucket replica and a replica of the replaced layout
reopening): in none do two writers both commit to the shard, nor does a replaced layout commit
after the layout that replaced it. Removing the layout read from the bucket's proof makes the
layout scope fail (shown once by hand; the negative control below keeps it so)."""

from __future__ import annotations

from collections import Counter

import pytest
from rel_bucket_handover import RaceViolation, Scope, explore

from checkpoint_runtime.runtime import buckets
from checkpoint_testenv.support.kubetarget import KubeTarget


def run_scope(target: KubeTarget, name: str) -> Counter[str]:
    search: dict[str, int] = {}
    counts: Counter[str] = Counter()
    for outcome in explore(target, Scope(name), search):
        counts["schedules"] += 1
        counts["crashed"] += bool(outcome.crashed)
        counts[f"commits {len(outcome.commits)}"] += 1
        for writer in outcome.failed:
            counts[f"{writer} refused by the store"] += 1
        for writer in outcome.refused:
            counts[f"{writer} refused by the election"] += 1
    print(f"{name}: {search['runs']} runs, {search['pruned']} stopped early: {dict(counts)}")
    return counts


def test_every_schedule_of_a_handover_has_one_owner_at_a_time(target: KubeTarget) -> None:
    counts = run_scope(target, "handover")
    assert counts["schedules"] > 10
    assert counts["crashed"] > 0
    assert counts["w1 refused by the store"] > 0  # the paused owner's flush came too late
    assert counts["w2 refused by the store"] > 0  # the taker read before the flush landed


def test_every_schedule_of_a_layout_change_keeps_the_replaced_layout_out(
    target: KubeTarget,
) -> None:
    counts = run_scope(target, "layout")
    assert counts["schedules"] > 10
    assert counts["w3 refused by the election"] > 0  # before the operator's step
    assert counts["w1b refused by the store"] > 0  # its proof read the new record


def test_the_checker_catches_a_bucket_proof_without_the_layout_read(
    target: KubeTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: the bucket's proof without reading the record (only the renewal)."""
    import rel_bucket_handover

    def renewal_only(elector, count, recorded, what):  # type: ignore[no-untyped-def]
        return elector.renew_above

    monkeypatch.setattr(rel_bucket_handover, "layout_proof", renewal_only)
    assert buckets.layout_proof is not renewal_only
    with pytest.raises(RaceViolation, match=r"replaced layout committed|committed again"):
        run_scope(target, "layout")
