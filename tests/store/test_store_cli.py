"""`inspect` and `migrate` over a live namespace (as the chart's ServiceAccount) and a file store
(SPEC §8, §9; issue 4 acceptance 4 and 5), and the same figures in the Prometheus exposition."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from store_harness import LEGACY, Harness, KubeHarness, open_store, raw_shard

from checkpoint_runtime import cli
from checkpoint_runtime.constants import (
    ANNOTATION_MIGRATED,
    ANNOTATION_MIGRATED_BY,
    CONFIGMAP_VALUE_LIMIT,
)
from checkpoint_runtime.format.legacy import encode_legacy, legacy_digest

ROWS = {
    "tn/objectstore/feed/cursor": "c",
    "tn/objectstore/feed/seen/aWQx": "2026-03-01T00:00:00.000000001Z",
    "tn/flowlogs/cursor": "2026-03-01T00:00:00.000000001Z",
}


def store_arguments(harness: Harness, tmp_path: Path) -> list[str]:
    """Command-line arguments selecting the harness's store; a kubeconfig for the SA token."""
    if harness.kind == "file":
        return ["--path", str(harness.folder), "--lease-name", harness.lease_name]  # type: ignore[attr-defined]
    kube: KubeHarness = harness  # type: ignore[assignment]
    path = kube.release.write_kubeconfig(tmp_path / "kubeconfig")
    return [
        "--namespace",
        kube.namespace,
        "--lease-name",
        kube.lease_name,
        "--kubeconfig",
        str(path),
    ]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_inspect_and_metrics_show_count_size_ratio_and_headroom(
    harness: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(harness)
    store.batch(ROWS)
    feed = raw_shard(harness, "tn/objectstore/feed")
    assert feed is not None
    before = {name: harness.raw(name) for name in harness.object_names()}

    code, out = run(capsys, "inspect", *store_arguments(harness, tmp_path), "--json")
    assert code == 0
    document = json.loads(out)
    assert document["shard_count"] == 2
    shard = next(s for s in document["shards"] if s["shard"] == "tn/objectstore/feed")
    assert shard["compressed_bytes"] == len(feed.blob)
    assert shard["headroom_bytes"] == CONFIGMAP_VALUE_LIMIT - len(feed.blob)
    assert shard["compression_ratio"] == round(shard["raw_bytes"] / len(feed.blob), 2)
    assert shard["rows"] == 2

    code, table = run(capsys, "inspect", *store_arguments(harness, tmp_path))
    assert code == 0
    assert "HEADROOM" in table
    assert "tn/objectstore/feed" in table
    assert {name: harness.raw(name) for name in harness.object_names()} == before  # read only

    exposition = generate_latest(store.metrics.registry).decode()
    for series in (
        "checkpoint_shards 2.0",
        f'checkpoint_shard_compressed_bytes{{shard="tn/objectstore/feed"}} {float(len(feed.blob))}',
        'checkpoint_shard_compression_ratio{shard="tn/objectstore/feed"}',
        'checkpoint_shard_headroom_ratio{shard="tn/objectstore/feed"}',
        'checkpoint_shard_headroom_bytes{shard="tn/flowlogs"}',
    ):
        assert series in exposition


def test_migrate_command_reports_and_resolves_a_changed_legacy(
    harness: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    harness.write_legacy(LEGACY, encode_legacy(ROWS))
    open_store(harness, legacy_name=LEGACY)
    changed = encode_legacy({**ROWS, "tn/flowlogs/cursor": "legacy wins"})
    harness.write_legacy(LEGACY, changed)
    where: list[Any] = [*store_arguments(harness, tmp_path), "--legacy-name", LEGACY]

    code, out = run(capsys, "migrate", *where, "--json")
    assert code == 0
    assert json.loads(out)["state"] == "legacy-changed-after-migration"
    assert cli.main(["inspect", *where]) == 0  # inspect still works and names the state
    assert "legacy-changed-after-migration" in capsys.readouterr().out

    code, out = run(capsys, "migrate", *where, "--from-legacy", "--json")
    assert code == 0
    assert json.loads(out)["state"] == "migrated"
    assert harness.legacy(LEGACY) == (
        changed,
        {ANNOTATION_MIGRATED: legacy_digest(changed), ANNOTATION_MIGRATED_BY: harness.lease_name},
    )
    assert open_store(harness, legacy_name=LEGACY).get("tn/flowlogs/cursor") == "legacy wins"


def test_a_failed_persist_prints_every_shard_its_cause_and_the_http_status(
    kube: KubeHarness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`migrate --from-legacy` under a Role without `create`: every shard's refusal is printed
    (shard, error, 403), not a count of sub-exceptions."""
    kube.write_legacy(LEGACY, encode_legacy(ROWS))
    kube.release.revoke("configmaps", "create")
    where = [*store_arguments(kube, tmp_path), "--legacy-name", LEGACY]

    code = cli.main(["migrate", *where, "--from-legacy"])

    err = capsys.readouterr().err
    assert code == 2  # a named error (a group of them)
    first, *grouped = err.rstrip("\n").split("\n")
    assert first == (
        "error: ExceptionGroup: 2 of 2 shard(s) failed to persist "
        "(tn/flowlogs, tn/objectstore/feed)"
    )
    assert "sub-exception" not in err
    assert len(grouped) == 2
    for line, shard in zip(grouped, ("tn/flowlogs", "tn/objectstore/feed"), strict=True):
        assert line.startswith(f"  ApiRefusedError: writing shard {shard!r}: ")
        assert "API server answered 403 Forbidden" in line
        assert 'cannot create resource "configmaps"' in line
    assert kube.object_names() == []
    assert ANNOTATION_MIGRATED not in kube.legacy(LEGACY)[1]


def test_migrate_start_empty_lets_a_second_store_open_beside_a_migrated_legacy(
    harness: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reinstall under another release name (another Lease name) over a legacy value the first
    store migrated: `migrate` says so, and `--start-empty` is the explicit way to open empty."""
    harness.write_legacy(LEGACY, encode_legacy(ROWS))
    open_store(harness, legacy_name=LEGACY)
    where = store_arguments(harness, tmp_path)
    where[where.index("--lease-name") + 1] = "reinstalled"
    where += ["--legacy-name", LEGACY]

    code, out = run(capsys, "migrate", *where, "--json")
    assert code == 0
    document = json.loads(out)
    assert (document["state"], document["migrated_by"]) == (
        "migrated-by-another-store",
        [harness.lease_name],
    )
    code, out = run(capsys, "migrate", *where, "--start-empty", "--json")
    assert code == 0
    assert json.loads(out)["state"] == "migrated"
    assert harness.legacy(LEGACY)[1][ANNOTATION_MIGRATED_BY] == f"{harness.lease_name},reinstalled"
