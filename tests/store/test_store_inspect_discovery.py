"""`inspect` without `--lease-name`, on a file store and on a live namespace (as the chart's
ServiceAccount): it uses the one store it finds there, lists the stores when there are several,
and says so when there is none, instead of showing "0 shard(s)" for a Lease name nobody uses.
Read-only throughout: nothing is created or written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from store_harness import Harness, open_store
from test_store_cli import store_arguments

from checkpoint_runtime import cli
from checkpoint_runtime.store.core import Store

ROWS = {"tn/flowlogs/cursor": "2026-03-01T00:00:00.000000001Z"}


def without_lease_name(arguments: list[str]) -> list[str]:
    index = arguments.index("--lease-name")
    return arguments[:index] + arguments[index + 2 :]


def inspect(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["inspect", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_inspect_without_a_lease_name_finds_the_store_or_says_there_is_none(
    harness: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = without_lease_name(store_arguments(harness, tmp_path))
    if harness.kind == "file":
        harness.folder.mkdir(parents=True, exist_ok=True)  # type: ignore[attr-defined]

    code, out, err = inspect(capsys, *where)
    assert (code, out) == (2, "")  # NoStoreError: a named error
    assert err.startswith("error: NoStoreError: no checkpoint store at ")
    assert err.rstrip().endswith("no store has checkpoint shards there")
    assert harness.object_names() == []  # nothing created

    open_store(harness).batch(ROWS)
    before = {name: harness.raw(name) for name in harness.object_names()}
    code, out, err = inspect(capsys, *where, "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["shard_count"] == 1
    assert f"(store {harness.lease_name})" in document["store"]
    assert {name: harness.raw(name) for name in harness.object_names()} == before


def test_inspect_lists_the_stores_it_finds(
    harness: Harness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    open_store(harness).batch(ROWS)
    other = harness.backend()
    other.lease_name = "other-store"  # type: ignore[misc]
    Store.open(other, writer="w", epoch=1).batch(ROWS)
    found = ", ".join(sorted([harness.lease_name, "other-store"]))
    arguments = store_arguments(harness, tmp_path)

    code, out, err = inspect(capsys, *without_lease_name(arguments))
    assert (code, out) == (2, "")  # NoStoreError: a named error
    assert err.rstrip().endswith(f"it holds 2 stores ({found}): choose one with --lease-name")

    lease_at = arguments.index("--lease-name") + 1
    wrong = [*arguments[:lease_at], "no-such-store", *arguments[lease_at + 1 :]]
    code, out, err = inspect(capsys, *wrong)
    assert (code, out) == (2, "")  # NoStoreError: a named error
    expected = f"store 'no-such-store' has no shards (stores found there: {found})"
    assert err.rstrip().endswith(expected)

    code, out, _ = inspect(capsys, *arguments)
    assert code == 0
    assert "1 shard(s)" in out
