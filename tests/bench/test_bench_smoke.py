"""Smoke tests of the benchmark scripts: they run with --quick and print their tables.

No timing is asserted (performance lives in `just bench`, never in CI). What is asserted: the
scripts run end to end on the real API server, every table is well formed, the behavioural
invariants the persist benchmark observes hold (API writes per debounce window never exceed the
dirty shards, none while idle), and all.py writes its report and plots.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"  # scripts/bench is the package `bench`


@pytest.fixture(scope="module")
def bench_all() -> Iterator[ModuleType]:
    sys.path.insert(0, str(SCRIPTS))
    try:
        yield importlib.import_module("bench.all")
    finally:
        sys.path.remove(str(SCRIPTS))
        for name in [name for name in sys.modules if name == "bench" or name.startswith("bench.")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def quick(bench_all: ModuleType, control_plane: Any) -> Any:
    """codec, rowblock, persist, store_ops, scale and etcd_cost once, --quick sizes, on the
    session's control plane."""
    return bench_all.collect(control_plane, quick=True, external=False)


def _assert_well_formed(tables: list[Any]) -> None:
    assert tables
    for table in tables:
        assert table.rows, f"{table.title}: no rows"
        for row in table.rows:
            assert len(row) == len(table.columns), f"{table.title}: {row}"
        printed = table.markdown()
        assert printed.startswith(f"### {table.title}")
        assert printed.count("\n|") == len(table.rows) + 2  # header, rule, rows


def test_codec_script_quick_prints_its_tables() -> None:
    paths = [str(SCRIPTS), *filter(None, [os.environ.get("PYTHONPATH")])]
    answer = subprocess.run(
        [sys.executable, "-m", "bench.codec", "--quick"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
    )
    assert answer.returncode == 0, answer.stderr
    for title in ("### Codec at 5000 seen rows", "### Codec sweep", "### Most seen rows"):
        assert title in answer.stdout
    assert "| old-design |" in answer.stdout
    assert "| uuid |" in answer.stdout


def test_every_benchmark_quick_prints_well_formed_tables(
    quick: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("codec", "rowblock", "persist", "store_ops", "scale", "etcd_cost"):
        report = quick.report(name)
        assert report is not None, name
        _assert_well_formed(report.tables)
        for table in report.tables:
            print(table.markdown())
    printed = capsys.readouterr().out
    assert "### Persist latency" in printed
    assert "### Store.open time" in printed
    assert "### Saturated round" in printed
    assert "### store.batch on shard B" in printed
    assert "| kube-apiserver |" in printed
    assert "### etcd WAL bytes per persist" in printed
    assert "### Write budget: etcd WAL bytes in any 10 s window" in printed


def test_persist_observes_the_debounce_invariants(quick: Any) -> None:
    """Writes per window never exceed the dirty shards, and nothing is written while idle."""
    persist = quick.report("persist")
    assert persist is not None
    for window in persist.measured.windows:
        assert window.windows > 0
        assert window.writes > 0
        assert window.over_budget == 0
        assert window.max_writes <= window.updated_shards
        assert window.stray_writes == 0
        assert window.idle_writes == 0
    for sent in persist.measured.bytes_per_row:
        assert sent.sharded_wire > 0
        assert sent.legacy_wire > sent.sharded_wire  # a byte count, not a time


def test_all_writes_the_report_and_plots(bench_all: ModuleType, quick: Any, tmp_path: Path) -> None:
    document = bench_all.write(quick, tmp_path)
    text = document.read_text()
    assert "## Targets" in text
    for name in (
        "base encoding (row block), uuid workload",
        "persist after 1 changed row(s), uuid",
        "persist after 100 changed row(s), uuid",
        "saturated round",
        "batch on shard B while A's write stalls, kube-apiserver",
        "### etcd WAL bytes per persist",
    ):
        assert name in text
    # The benchmarks outside the control plane (render among them) were not run here: their
    # sections say so instead of disappearing.
    render = text[text.index("## 3. Render gate") :]
    assert render.split("\n\n")[1].startswith("Not run"), render[:200]
    for png in ("bench-codec-sweep.png", "bench-codec-time.png", "bench-persist.png"):
        assert (tmp_path / png).read_bytes().startswith(b"\x89PNG"), png
        assert f"]({png})" in text
