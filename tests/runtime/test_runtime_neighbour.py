"""A neighbour release attacks a store it shares a coordination namespace with, on the real API
server, with the neighbour's own ServiceAccount token (its chart Role, `rbac.scope: names`, no
admission policy: the layout that cannot refuse the neighbour's creates).

Two releases, `alpha` and `beta`, in one namespace. Everything hostile is done as beta:

- squatting alpha's Lease (a holder and a duration no replica of alpha writes): alpha names it
  within one election round (log, `checkpoint_lease_foreign`, `inspect`) and is not ready;
- squatting alpha's flowlogs head with a well-formed v3 head whose cursor is 2099 (alpha's
  labels and annotations, written by the store code itself): alpha names it (log,
  `checkpoint_shard_foreign`, `inspect`), is not ready, never reads it (its flowlogs collector
  does not run), keeps its real rows and goes on collecting its other feed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from checkpoint_runtime import cli
from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import ANNOTATION_STORE_KEY
from checkpoint_runtime.format.naming import lease_labels, object_id, shard_name
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.flowlogs import FlowLogServer
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import (
    FAST_ELECTION,
    RuntimeProcess,
    runtime_config,
    seen_ids,
    write_objects,
)

FEED = "tn1/objectstore/feed-a"
FLOWLOGS = "tn1/flowlogs"
FORGED_CURSOR = "2099-01-01T00:00:00Z"
COLLECTORS = [  # what each release's name-pinned Role is rendered for (runtime_config's)
    {"kind": "objectstore", "tailnet": "tn1", "feed": "feed-a", "url": "file:///feeds"},
    {"kind": "flowlogs", "tailnet": "tn1", "url": "http://127.0.0.1:1/"},
]
VALUES = {"rbac": {"scope": "names"}, "checkpoint": {"collectors": COLLECTORS}}


@pytest.fixture
def releases(
    chart_install: Callable[..., Release], control_plane: ControlPlane
) -> tuple[Release, Release]:
    namespace = control_plane.create_namespace("neighbours")
    return (
        chart_install(VALUES, namespace, release="alpha"),
        chart_install(VALUES, namespace, release="beta"),
    )


@pytest.fixture
def as_beta(releases: tuple[Release, Release]) -> Iterator[client.ApiClient]:
    """An API client with beta's ServiceAccount token, retries off."""
    api = api_client(releases[1].configuration())
    yield api
    api.close()


@pytest.fixture
def flowlogs() -> Iterator[FlowLogServer]:
    server = FlowLogServer()
    yield server
    server.close()


def inspect_json(release: Release, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """`checkpoint-runtime inspect --json` of a release's store, as an operator (admin)."""
    kubeconfig = release.plane.kubeconfig
    args = ["--namespace", release.coordination_namespace, "--lease-name", release.lease_name]
    capsys.readouterr()
    assert cli.main(["inspect", *args, "--kubeconfig", str(kubeconfig), "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def logged(proc: RuntimeProcess, error: str) -> list[dict[str, Any]]:
    return [entry for entry in proc.logs() if entry.get("error") == error]


def ts(entry: dict[str, Any]) -> datetime:
    return datetime.strptime(entry["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def test_a_squatted_lease_is_named_within_one_election_round_and_the_victim_is_not_ready(
    releases: tuple[Release, Release],
    as_beta: client.ApiClient,
    tmp_path: Path,
    procs: list[RuntimeProcess],
    capsys: pytest.CaptureFixture[str],
) -> None:
    alpha, _ = releases
    client.CoordinationV1Api(as_beta).create_namespaced_lease(
        alpha.coordination_namespace,
        client.V1Lease(
            metadata=client.V1ObjectMeta(name=alpha.lease_name),
            spec=client.V1LeaseSpec(
                holder_identity="beta-squatter", lease_duration_seconds=2_147_483_647
            ),
        ),
    )
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    config = runtime_config(alpha, bucket)
    victim = RuntimeProcess(tmp_path, "alpha-a", config, alpha.write_kubeconfig(tmp_path / "kc"))
    procs.append(victim.start())
    answers: list[tuple[int, str]] = []

    def named() -> bool:
        answers.append(victim.get("/readyz"))
        return "foreign lease" in answers[-1][1] or not victim.running

    wait_for(named, 30, "the standby names the foreign lease")
    assert victim.running
    assert all(status != 200 for status, _ in answers)  # never ready meanwhile
    assert answers[-1][0] == 503
    assert "leaseDurationSeconds 2147483647" in answers[-1][1]
    assert victim.metric("checkpoint_lease_foreign") == 1.0
    assert victim.metric("checkpoint_leader") == 0.0
    (foreign,) = logged(victim, "ForeignLeaseError")
    assert alpha.lease_name in foreign["msg"]
    (waiting,) = [e for e in victim.logs() if e.get("msg") == "waiting for leadership"]
    round_seconds = FAST_ELECTION["retryPeriodSeconds"]
    assert ts(foreign) - ts(waiting) < timedelta(seconds=round_seconds)  # the first read

    lease = inspect_json(alpha, capsys)["lease"]
    assert lease["holder"] == "beta-squatter"
    assert "leaseDurationSeconds 2147483647" in lease["foreign"]


def test_a_forged_head_with_a_far_future_cursor_is_refused_and_the_real_rows_kept(
    releases: tuple[Release, Release],
    tmp_path: Path,
    procs: list[RuntimeProcess],
    flowlogs: FlowLogServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alpha, beta = releases
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    config = runtime_config(alpha, bucket, flowlogs.url)
    first_config = {**config, "collectors": config["collectors"][:1]}  # flowlogs added later
    kubeconfig = alpha.write_kubeconfig(tmp_path / "kc")
    first_batch = [f"a-{i:02d}.json" for i in range(5)]
    write_objects(bucket, first_batch)
    first = RuntimeProcess(tmp_path, "alpha-a", first_config, kubeconfig)
    procs.append(first.start())
    wait_for(lambda: len(first.objects()) == len(first_batch), 30, "the first objects emitted")
    assert first.terminate() == 0
    lease = alpha.read_lease().metadata
    assert ANNOTATION_STORE_KEY in (lease.annotations or {})  # the first leader sealed its heads
    assert lease.labels == lease_labels(alpha.lease_name)  # and labelled the Lease it created

    # As beta: a well-formed v3 head under alpha's flowlogs shard name, with alpha's labels and
    # annotations, created by the store's own code (create is not pinned to names).
    forger = KubernetesBackend(beta.configuration(), alpha.coordination_namespace, alpha.lease_name)
    try:
        Store(forger, writer="beta-squatter").batch({f"{FLOWLOGS}/cursor": FORGED_CURSOR})
    finally:
        forger.close()
    head = shard_name(alpha.lease_name, FLOWLOGS)
    with alpha.plane.admin_api() as api:
        core = client.CoreV1Api(api)
        forged = core.read_namespaced_config_map(head, alpha.coordination_namespace)

    second_batch = [f"b-{i:02d}.json" for i in range(3)]
    write_objects(bucket, second_batch)
    flowlogs.add(datetime.now(UTC), 1)
    victim = RuntimeProcess(tmp_path, "alpha-b", config, kubeconfig)
    procs.append(victim.start())
    answers: list[tuple[int, str]] = []

    def named() -> bool:
        answers.append(victim.get("/readyz"))
        return "foreign shard heads" in answers[-1][1] or not victim.running

    wait_for(named, 30, "the leader names the forged head")
    assert victim.running
    assert answers[-1][0] == 503
    assert FLOWLOGS in answers[-1][1]
    assert victim.metric("checkpoint_shard_foreign", f'shard="{FLOWLOGS}"') == 1.0
    (refused,) = logged(victim, "ForeignHeadError")
    assert refused["object"] == head
    assert "set-aside" in refused["msg"]
    # The other feed goes on from its real rows: only the new objects come out.
    wait_for(lambda: len(victim.objects()) == len(second_batch), 30, "the new objects emitted")
    assert sorted(victim.objects()) == second_batch
    assert victim.flow_numbers() == []  # the forged cursor's collector never ran
    assert victim.terminate() == 0

    with alpha.plane.admin_api() as api:
        core = client.CoreV1Api(api)
        after = core.read_namespaced_config_map(head, alpha.coordination_namespace)
    assert after.metadata.resource_version == forged.metadata.resource_version  # left as it is
    document = inspect_json(alpha, capsys)
    (entry,) = document["foreign_heads"]
    assert (entry["shard"], entry["object"]) == (FLOWLOGS, head)
    assert FLOWLOGS not in [shard["shard"] for shard in document["shards"]]
    feed = KubernetesBackend(
        alpha.plane.configuration(), alpha.coordination_namespace, alpha.lease_name
    )
    try:
        rows = dict(Store.open(feed, writer="reader", migrate=False, shards=[FEED]).items(""))
    finally:
        feed.close()
    assert seen_ids(rows, FEED) == {object_id(name) for name in first_batch + second_batch}
