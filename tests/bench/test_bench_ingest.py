"""The ingestion benchmark at its smallest size, so it cannot rot: it runs end to end on the real
S3 server and API server, its tables are well formed, every run did all of its work (the
benchmark itself refuses a run that emitted or read fewer than all), and its docs section is
written once and replaced in place; the profile of the collectors' threads is a table of it.
No timing is asserted."""

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
def ingest() -> Iterator[ModuleType]:
    sys.path.insert(0, str(SCRIPTS))
    try:
        yield importlib.import_module("bench.ingest")
    finally:
        sys.path.remove(str(SCRIPTS))
        for name in [name for name in sys.modules if name == "bench" or name.startswith("bench.")]:
            del sys.modules[name]


def test_ingest_quick_measures_every_side_and_writes_its_section(
    ingest: ModuleType, control_plane: Any, s3_server: Any, tmp_path: Path
) -> None:
    report = ingest.run(quick=True, plane=control_plane, s3=s3_server, profile=True)
    found = report.measured
    assert found.counts == (1, 10)
    for source in ("s3", "flow"):
        for side in ("collector", "bare"):
            for count in found.counts:
                (sample,) = found.samples[(source, side, count)]
                want = found.objects if source == "s3" else count * found.windows
                assert sample.items == want
                assert sample.wall > 0
                assert sample.cpu > 0
    assert [table.title.split(":")[0].split(" (")[0] for table in report.tables] == [
        "Object-store ingestion",
        "Flow-log ingestion",
        "Where 10 collectors' own threads spend their CPU",
    ]
    assert report.tables[2].rows  # the profile of the collectors' threads
    for table in report.tables[:2]:
        assert len(table.rows) == 2 * len(found.counts)
        for row in table.rows:
            assert len(row) == len(table.columns)
        assert float(table.rows[0][-1]) > 0  # the collectors / bare ratio is written

    document = tmp_path / "benchmarks.md"
    document.write_text("# Benchmarks\n\nbefore\n")
    ingest.write_doc(report, document)
    ingest.write_doc(report, document)  # replaced in place, not appended twice
    text = document.read_text()
    assert text.startswith("# Benchmarks\n\nbefore\n")
    assert text.count("## Ingestion throughput of one replica") == 1
    assert text.count("### Object-store ingestion") == 1
    bench_all = importlib.import_module("bench.all")
    kept = bench_all.KEPT.findall(text)  # the full run keeps the section when it rewrites
    assert kept == ["ingest"]
