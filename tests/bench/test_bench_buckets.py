"""The leadership-buckets benchmark at its smallest size, so it cannot rot: it runs end to end
with 3 real runtime processes per side on the real API server, its table has a row per replica
and per release on both sides, each side's CPU shares sum to one, and its docs section is
written once and replaced in place. No timing is asserted."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"  # scripts/bench is the package `bench`


@pytest.fixture(scope="module")
def buckets() -> Iterator[ModuleType]:
    sys.path.insert(0, str(SCRIPTS))
    try:
        yield importlib.import_module("bench.buckets")
    finally:
        sys.path.remove(str(SCRIPTS))
        for name in [name for name in sys.modules if name == "bench" or name.startswith("bench.")]:
            del sys.modules[name]


def test_buckets_quick_has_every_replica_and_shares_that_sum_to_one(
    buckets: ModuleType, control_plane: Any, tmp_path: Path
) -> None:
    report = buckets.run(quick=True, plane=control_plane)
    sides = report.measured.sides
    assert sorted(sides) == [1, 6]
    for side in sides.values():
        assert len(side.replicas) == buckets.REPLICAS
        assert sum(side.share(replica) for replica in side.replicas) == pytest.approx(1.0)
    assert sorted(r.buckets for r in sides[6].replicas) == [2, 2, 2]
    assert sorted(r.buckets for r in sides[1].replicas) == [0, 0, 1]
    (table,) = report.tables
    assert len(table.rows) == 2 * (buckets.REPLICAS + 1)
    assert [row[1] for row in table.rows].count("release") == 2
    for row in table.rows:
        assert len(row) == len(table.columns)
    (target,) = report.targets
    assert target.name.startswith("busiest replica's CPU share")

    document = tmp_path / "benchmarks.md"
    document.write_text("# Benchmarks\n\nbefore\n")
    buckets.write_doc(report, document)
    buckets.write_doc(report, document)  # replaced in place, not appended twice
    text = document.read_text()
    assert text.startswith("# Benchmarks\n\nbefore\n")
    assert text.count("## Replicas that share the work") == 1
    bench_all = importlib.import_module("bench.all")
    assert bench_all.KEPT.findall(text) == ["buckets"]
