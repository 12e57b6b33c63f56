"""Leadership buckets on the real API server, as the chart's ServiceAccount (its Role pins the
bucket and membership Leases): replicas spread the buckets, hand them over in order, and every
shard carries its bucket's Lease uid.

One process leads every bucket alone (R = 1); a second joins and the first hands its surplus
over (stop, flush, release) until each leads ⌈B/R⌉ = 2; the second stops (SIGTERM: it hands
every bucket over) and the first takes them back. Every object is emitted exactly once across
the two processes and the moves: a handover flushes before it releases, so the next leader's
checkpoint covers everything the last one emitted (the debounce is longer than the test, so
only a handover's flush writes the checkpoints: releasing first fails the test).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from checkpoint_runtime import cli
from checkpoint_runtime.constants import ANNOTATION_BUCKETS, ANNOTATION_LEASE_UID
from checkpoint_runtime.election.buckets import bucket_lease_name, bucket_of
from checkpoint_runtime.format.naming import shard_name
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.buckets import (
    bucketed_config,
    feeds_covering,
    lease_requests,
    led,
)
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import RuntimeProcess, write_objects

BUCKETS = 4


@pytest.fixture
def release(chart_install: Callable[..., Release]) -> Release:
    return chart_install({"checkpoint": {"store": {"buckets": BUCKETS}}})


def inspect_json(release: Release, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`checkpoint-runtime inspect --json` of the release's store, as an operator (admin)."""
    args = ["--namespace", release.coordination_namespace, "--lease-name", release.lease_name]
    capsys.readouterr()
    kubeconfig = str(release.plane.kubeconfig)
    assert cli.main(["inspect", *args, "--kubeconfig", kubeconfig, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_replicas_spread_the_buckets_and_hand_them_over_without_re_emitting(
    release: Release,
    tmp_path: Path,
    procs: list[RuntimeProcess],
    capsys: pytest.CaptureFixture[str],
) -> None:
    feeds = feeds_covering(BUCKETS)
    for feed in feeds:
        (tmp_path / feed).mkdir()
    config = bucketed_config(release, tmp_path, feeds)
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    written: list[str] = []

    def write_round(tag: str) -> None:
        for feed in feeds:
            write_objects(tmp_path / feed, [f"{feed}-{tag}.json"])
            written.append(f"{feed}-{tag}.json")

    a = RuntimeProcess(tmp_path, "runtime-a", config, kubeconfig)
    procs.append(a.start())
    wait_for(lambda: led(a) == BUCKETS, 30, "runtime-a leads every bucket alone")
    write_round("0")
    wait_for(lambda: len(a.objects()) == len(feeds), 20, "runtime-a emits one object per feed")

    b = RuntimeProcess(tmp_path, "runtime-b", config, kubeconfig)
    procs.append(b.start())
    wait_for(lambda: led(a) == 2 and led(b) == 2, 30, "the buckets spread 2/2")
    assert a.metric("checkpoint_bucket_share") == 2.0
    assert b.metric("checkpoint_bucket_members") == 2.0
    handed = sum(
        a.metric("checkpoint_bucket_handovers_total", f'bucket="{index}"') or 0
        for index in range(BUCKETS)
    )
    assert handed == 2  # exactly the surplus moved, nothing else
    write_round("1")
    wait_for(
        lambda: len(a.objects()) + len(b.objects()) == 2 * len(feeds), 20, "both replicas emit"
    )

    # `inspect` shows the placement: each bucket's holder and shards, the membership
    placement = inspect_json(release, capsys)["placement"]
    assert placement["buckets"] == BUCKETS
    assert {holder: len(led) for holder, led in placement["led_by"].items()} == {
        "runtime-a": 2,
        "runtime-b": 2,
    }
    assert sorted(s for entry in placement["leases"] for s in entry["shards"]) == sorted(
        f"tn1/objectstore/{feed}" for feed in feeds
    )
    assert sorted(m["holder"] for m in placement["members"] if m["holder"]) == [
        "runtime-a",
        "runtime-b",
    ]

    # every shard carries its own bucket's Lease uid (the fence of that bucket)
    with release.plane.admin_api() as api:
        from kubernetes import client

        core = client.CoreV1Api(api)
        leases = client.CoordinationV1Api(api)
        root = leases.read_namespaced_lease(release.lease_name, release.coordination_namespace)
        assert (root.metadata.annotations or {}).get(ANNOTATION_BUCKETS) == str(BUCKETS)
        assert not root.spec.holder_identity  # nobody leads through the store's own Lease
        for feed in feeds:
            namespace = f"tn1/objectstore/{feed}"
            index = bucket_of(namespace, BUCKETS)
            lease = leases.read_namespaced_lease(
                bucket_lease_name(release.lease_name, index, BUCKETS),
                release.coordination_namespace,
            )
            head = core.read_namespaced_config_map(
                shard_name(release.lease_name, namespace), release.coordination_namespace
            )
            assert head.metadata.annotations[ANNOTATION_LEASE_UID] == lease.metadata.uid

    assert b.terminate() == 0  # hands both its buckets over
    wait_for(lambda: led(a) == BUCKETS, 30, "runtime-a takes the released buckets back")
    write_round("2")
    wait_for(
        lambda: len(a.objects()) + len(b.objects()) == 3 * len(feeds),
        20,
        "runtime-a emits the third round",
    )
    emitted = a.objects() + b.objects()
    assert sorted(emitted) == sorted(written)  # each object exactly once, across every move
    assert a.running


class _Probe:
    """Stands in front of a held bucket's runner or store and, when the handover calls it,
    reads the bucket's Lease from the API server: who holds it at that moment."""

    def __init__(self, inner: Any, lease: Callable[[], str], seen: list[tuple[str, str]]) -> None:
        self._inner = inner
        self._lease = lease
        self._seen = seen

    def stop(self, timeout: float | None = None) -> None:
        self._seen.append(("stop", self._lease()))
        self._inner.stop(timeout)

    def flush(self) -> None:
        self._seen.append(("flush", self._lease()))
        self._inner.flush()


def test_a_handover_stops_and_flushes_while_the_lease_is_still_held(
    release: Release, tmp_path: Path
) -> None:
    """The order of a handover, seen from the API server: the bucket's Lease still names this
    replica when its collectors are stopped and when its store is flushed, and names nobody
    after. Releasing first (Knative's failure: the Lease released before the reconciler is
    demoted) lets another replica lead the bucket while this one's collectors still run."""
    from kubernetes import client

    from checkpoint_runtime.collectors.sink import open_sink
    from checkpoint_runtime.runtime.backend import lease_client, open_backend
    from checkpoint_runtime.runtime.buckets import BucketLeadership
    from checkpoint_runtime.runtime.metrics import RuntimeMetrics
    from checkpoint_runtime.runtime.settings import parse

    feeds = feeds_covering(BUCKETS)
    for feed in feeds:
        (tmp_path / feed).mkdir()
    settings = parse(bucketed_config(release, tmp_path, feeds))
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    metrics = RuntimeMetrics()
    backend = open_backend(settings.store, kubeconfig=str(kubeconfig))
    api = lease_client(backend)  # type: ignore[arg-type]
    sink = open_sink("file", str(tmp_path / "records.jsonl"))
    fatal: list[BaseException] = []
    leadership = BucketLeadership(
        settings, "probe-a", metrics, backend, api, release.coordination_namespace, sink,
        fatal.append,
    )  # fmt: skip
    try:
        wait_for(lambda: (leadership.round(), len(leadership.held))[1] == BUCKETS, 20, "leads all")
        index = 0
        held = leadership.held[index]
        name = bucket_lease_name(release.lease_name, index, BUCKETS)
        leases = client.CoordinationV1Api(api)

        def holder() -> str:
            lease = leases.read_namespaced_lease(name, release.coordination_namespace)
            return str(lease.spec.holder_identity or "")

        seen: list[tuple[str, str]] = []
        held.runner = _Probe(held.runner, holder, seen)  # type: ignore[assignment]
        held.store = _Probe(held.store, holder, seen)  # type: ignore[assignment]
        leadership.hand_over(index)
        assert seen == [("stop", "probe-a"), ("flush", "probe-a")]
        assert held.steps == ["stopped", "flushed", "released"]
        assert holder() == ""
        assert not fatal
    finally:
        leadership.stop()
        api.close()  # type: ignore[no-untyped-call]
        backend.close()
        sink.close()


def test_three_replicas_spread_six_buckets_and_a_killed_ones_move_alone(
    chart_install: Callable[..., Release], tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    """3 replicas, B = 6: 2/2/2; the Lease traffic measured against its formula; one replica
    SIGKILLed: its two buckets move to the others within the lease duration and a round, no
    other bucket moves, and the other buckets' collectors go on emitting meanwhile."""
    buckets = 6
    release = chart_install({"checkpoint": {"store": {"buckets": buckets}}})
    feeds = feeds_covering(buckets)
    for feed in feeds:
        (tmp_path / feed).mkdir()
    config = bucketed_config(release, tmp_path, feeds)
    timings = config["leaderElection"]
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    replicas = [RuntimeProcess(tmp_path, f"runtime-{n}", config, kubeconfig) for n in "abc"]
    for proc in replicas:
        procs.append(proc.start())
    wait_for(lambda: [led(p) for p in replicas] == [2, 2, 2], 40, "the buckets spread 2/2/2")

    # Lease traffic: each replica renews its membership slot and each bucket it leads once a
    # retry period, and reads the store's Lease, the other slots and the buckets it does not
    # lead once a round (a retry period jittered by up to 1.2 x: 1.6 x on average)
    retry = timings["retryPeriodSeconds"]
    before, started = lease_requests(release), time.monotonic()
    time.sleep(6)  # a window of traffic, not a condition: nothing to wait on
    after, seconds = lease_requests(release), time.monotonic() - started
    updates = (after.get("PUT", 0) - before.get("PUT", 0)) / seconds
    gets = (after.get("GET", 0) - before.get("GET", 0)) / seconds
    expected_updates = (buckets + len(replicas)) / retry
    expected_gets = len(replicas) * (1 + (buckets - 1) + (buckets - 2)) / (1.6 * retry)
    print(
        f"lease traffic, B={buckets} R={len(replicas)} retry={retry}s: {updates:.1f} updates/s "
        f"(formula {expected_updates:.1f}), {gets:.1f} gets/s (formula {expected_gets:.1f})"
    )
    assert 0.6 * expected_updates <= updates <= 1.2 * expected_updates
    assert 0.4 * expected_gets <= gets <= 1.2 * expected_gets

    survivors, killed = replicas[:2], replicas[2]
    moved_before = {
        p.name: [p.metric("checkpoint_bucket_leader", f'bucket="{i}"') for i in range(buckets)]
        for p in survivors
    }
    killed_buckets = {
        i for i in range(buckets) if killed.metric("checkpoint_bucket_leader", f'bucket="{i}"')
    }
    surviving_feeds = [
        f for f in feeds if bucket_of(f"tn1/objectstore/{f}", buckets) not in killed_buckets
    ]
    killed.kill()
    started = time.monotonic()
    delays: list[float] = []
    rounds = 0
    while sum(led(p) for p in survivors) < buckets:
        assert time.monotonic() - started < 30, "the killed replica's buckets did not move"
        for feed in surviving_feeds:  # the other buckets' collectors go on meanwhile
            name = f"{feed}-live-{rounds}.json"
            write_objects(tmp_path / feed, [name])
            written = time.monotonic()
            wait_for(lambda n=name: any(n in p.objects() for p in survivors), 5, f"{name} emitted")
            delays.append(time.monotonic() - written)
        rounds += 1
    moved = time.monotonic() - started
    bound = timings["leaseDurationSeconds"] + 2.2 * retry
    print(
        f"killed replica's buckets {sorted(killed_buckets)} moved in {moved:.2f} s "
        f"(lease {timings['leaseDurationSeconds']} s + a jittered round {2.2 * retry:.1f} s = "
        f"{bound:.1f} s); other buckets' objects emitted within {max(delays):.2f} s "
        f"({len(delays)} objects)"
    )
    assert moved <= bound + 1.5  # + the opening of two stores on a loaded machine
    assert [led(p) for p in survivors] == [3, 3]
    for proc in survivors:  # what each survivor led before, it leads still: nothing else moved
        for index, was in enumerate(moved_before[proc.name]):
            if was:
                assert proc.metric("checkpoint_bucket_leader", f'bucket="{index}"') == 1.0
    assert max(delays) < 2.0


def test_no_bucket_is_led_while_a_one_bucket_leader_holds_the_stores_lease(
    release: Release, tmp_path: Path
) -> None:
    """The store's Lease records four buckets but a one-bucket leader still holds it (the
    record was just changed; its handover, flush then release, has not ended): a replica of
    four buckets leads nothing until it is released, so the two layouts never lead at once."""
    from datetime import UTC, datetime

    from checkpoint_runtime.collectors.sink import open_sink
    from checkpoint_runtime.election.lease_lock import LeaseRecord
    from checkpoint_runtime.runtime.backend import lease_client, open_backend
    from checkpoint_runtime.runtime.buckets import BucketLeadership
    from checkpoint_runtime.runtime.lease import lease_lock
    from checkpoint_runtime.runtime.metrics import RuntimeMetrics
    from checkpoint_runtime.runtime.settings import parse
    from checkpoint_runtime.store.seal import new_store_key

    feeds = feeds_covering(BUCKETS)
    for feed in feeds:
        (tmp_path / feed).mkdir()
    settings = parse(bucketed_config(release, tmp_path, feeds))
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    backend = open_backend(settings.store, kubeconfig=str(kubeconfig))
    api = lease_client(backend)  # type: ignore[arg-type]
    sink = open_sink("file", str(tmp_path / "records.jsonl"))
    fatal: list[BaseException] = []
    namespace = release.coordination_namespace
    holder = lease_lock(api, namespace, release.lease_name, "single-a")
    now = datetime.now(UTC)
    holder.keep_store_key(new_store_key())  # as a one-bucket leader's Lease carries one
    holder.create(LeaseRecord("single-a", 60, now, now, 3, 0, BUCKETS), 10)
    leadership = BucketLeadership(
        settings, "spread-a", RuntimeMetrics(), backend, api, namespace, sink, fatal.append
    )
    try:
        for _ in range(3):
            leadership.round()
            assert not leadership.held
            assert leadership.problem is not None
            assert "is held by 'single-a'" in leadership.problem
        holder.update(LeaseRecord("", 1, now, now, 3, 0, BUCKETS), 10)  # its handover ends
        wait_for(lambda: (leadership.round(), len(leadership.held))[1] == BUCKETS, 20, "leads")
        assert not fatal
    finally:
        leadership.stop()
        api.close()  # type: ignore[no-untyped-call]
        backend.close()
        sink.close()


def test_one_bucket_runs_with_exactly_the_objects_of_a_store_without_buckets(
    chart_install: Callable[..., Release], tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    """The default (one bucket): one Lease, the store's, with no record of a layout, and the
    shard under the name derived from it, as before buckets existed."""
    release = chart_install()
    feeds = feeds_covering(1)
    (tmp_path / feeds[0]).mkdir()
    config = bucketed_config(release, tmp_path, feeds)
    assert "buckets" not in config["store"]  # the chart renders none for one bucket
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    proc = RuntimeProcess(tmp_path, "runtime-a", config, kubeconfig)
    procs.append(proc.start())
    wait_for(proc.leading, 20, "it leads")
    write_objects(tmp_path / feeds[0], ["x.json"])
    wait_for(lambda: proc.objects() == ["x.json"], 20, "it emits")
    assert proc.metric("checkpoint_buckets_led") == 0.0  # led through the store's own Lease
    with release.plane.admin_api() as api:
        from kubernetes import client

        leases = client.CoordinationV1Api(api).list_namespaced_lease(release.coordination_namespace)
        assert [lease.metadata.name for lease in leases.items] == [release.lease_name]
        assert ANNOTATION_BUCKETS not in (leases.items[0].metadata.annotations or {})
        maps = client.CoreV1Api(api).list_namespaced_config_map(
            release.coordination_namespace, label_selector="checkpoint-runtime.io/component"
        )
        heads = [m.metadata.name for m in maps.items if m.metadata.labels.get(
            "checkpoint-runtime.io/component") == "checkpoint-shard"]  # fmt: skip
        assert heads == [shard_name(release.lease_name, f"tn1/objectstore/{feeds[0]}")]


def test_a_bucket_with_a_forged_head_runs_its_other_collectors_and_is_not_ready(
    release: Release, tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    """A head whose seal does not match the store key, in a bucket a replica leads: refused by
    name, its collector not run, the replica not ready; the other collectors run."""
    feeds = feeds_covering(BUCKETS)
    for feed in feeds:
        (tmp_path / feed).mkdir()
    config = bucketed_config(release, tmp_path, feeds)
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    first = RuntimeProcess(tmp_path, "runtime-a", config, kubeconfig)
    procs.append(first.start())
    wait_for(lambda: led(first) == BUCKETS, 30, "it leads every bucket")
    assert first.terminate() == 0  # every head written and sealed by now
    forged = feeds[0]
    with release.plane.admin_api() as api:
        from kubernetes import client

        core = client.CoreV1Api(api)
        name = shard_name(release.lease_name, f"tn1/objectstore/{forged}")
        head = core.read_namespaced_config_map(name, release.coordination_namespace)
        head.metadata.annotations["checkpoint-runtime.io/seal"] = "hmac-sha256-v1:" + "0" * 64
        core.replace_namespaced_config_map(name, release.coordination_namespace, head)
    second = RuntimeProcess(tmp_path, "runtime-b", config, kubeconfig)
    procs.append(second.start())
    wait_for(lambda: "refused foreign shard heads" in second.get("/readyz")[1], 30, "named")
    assert second.get("/readyz")[0] == 503
    for feed in feeds:
        write_objects(tmp_path / feed, [f"{feed}-x.json"])
    others = sorted(f"{feed}-x.json" for feed in feeds if feed != forged)
    wait_for(lambda: sorted(second.objects()) == others, 20, "the other collectors emit")
    assert any(entry.get("error") == "ForeignHeadError" for entry in second.logs())


def test_a_round_whose_reads_fail_changes_nothing(
    release: Release, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed read of the store's Lease, a membership slot or a bucket decides nothing: the
    round leaves every bucket where it is (a hiccup of the API server must not hand buckets
    over, nor make a replica count a member that is not there)."""
    from checkpoint_runtime.collectors.sink import open_sink
    from checkpoint_runtime.runtime.backend import lease_client, open_backend
    from checkpoint_runtime.runtime.buckets import BucketLeadership
    from checkpoint_runtime.runtime.metrics import RuntimeMetrics
    from checkpoint_runtime.runtime.settings import parse

    feeds = feeds_covering(BUCKETS)
    for feed in feeds:
        (tmp_path / feed).mkdir()
    settings = parse(bucketed_config(release, tmp_path, feeds))
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    backend = open_backend(settings.store, kubeconfig=str(kubeconfig))
    api = lease_client(backend)  # type: ignore[arg-type]
    sink = open_sink("file", str(tmp_path / "records.jsonl"))
    fatal: list[BaseException] = []
    leadership = BucketLeadership(
        settings, "probe-a", RuntimeMetrics(), backend, api, release.coordination_namespace,
        sink, fatal.append,
    )  # fmt: skip

    def unreachable(timeout: float) -> None:
        raise ConnectionResetError("injected: the API server did not answer")

    try:
        wait_for(lambda: (leadership.round(), len(leadership.held))[1] == BUCKETS, 20, "leads")
        for lock in (leadership.root.lock, leadership.member_electors[-1].lock):
            with monkeypatch.context() as patch:
                patch.setattr(lock, "get", unreachable)
                leadership.round()
            assert sorted(leadership.held) == list(range(BUCKETS))
            assert leadership.problem is None
            assert leadership.members == 1
        assert not fatal
    finally:
        leadership.stop()
        api.close()  # type: ignore[no-untyped-call]
        backend.close()
        sink.close()
