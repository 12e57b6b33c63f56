"""scripts/bench is one package: every benchmark module exposes `run(quick=...)` returning a
`bench.report.Report`, prints it through the shared options, and declares (not guesses) when
all.py must start it in a process of its own. Imports only; the one benchmark run here is the
cheapest (shard sizes at --quick: pure encoding, no server, no timing)."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOT_BENCHMARKS = {"__init__", "report", "all", "etcd_worker"}
BENCHMARKS = sorted(
    path.stem for path in (ROOT / "scripts/bench").glob("*.py") if path.stem not in NOT_BENCHMARKS
)


@pytest.fixture(autouse=True)
def bench_on_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    yield
    for name in [name for name in sys.modules if name == "bench" or name.startswith("bench.")]:
        del sys.modules[name]


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"bench.{name}")


def test_every_benchmark_is_listed() -> None:
    assert {"codec", "persist", "store_ops", "scale", "etcd_cost", "render", "cli"} <= set(
        BENCHMARKS
    )


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_exposes_run_returning_a_report(name: str) -> None:
    bench = _module(name)
    report = _module("report")
    run = bench.run
    parameters = inspect.signature(run).parameters
    assert "quick" in parameters
    assert parameters["quick"].default is False
    assert inspect.signature(run).return_annotation in ("Report", report.Report)
    assert callable(bench.main)
    assert isinstance(getattr(bench, "OWN_PROCESS", False), bool)


def test_a_quick_run_returns_a_report_that_round_trips_through_json() -> None:
    report_module = _module("report")
    report = _module("store").run(quick=True, shapes=("uuid",))
    assert isinstance(report, report_module.Report)
    assert report.tables
    assert report.tables[0].rows
    again = report_module.Report.from_json(report.to_json())
    assert again.markdown() == report.markdown()


def test_all_runs_own_process_benchmarks_by_their_declared_flag() -> None:
    everything = _module("all")
    own = {name for name in BENCHMARKS if getattr(_module(name), "OWN_PROCESS", False)}
    assert own == {"render", "cli"}
    assert "--help" not in inspect.getsource(everything)


def test_regenerating_the_document_keeps_sections_written_from_other_measurements() -> None:
    everything = _module("all")
    kept = "<!-- ci-time:start (kept) -->\n## CI time\n\n| step | s |\n<!-- ci-time:end -->\n"
    previous = "# Benchmarks\n\nold figures\n\n" + kept
    once = everything.regenerated(everything.Results(), {}, previous)
    assert "old figures" not in once
    assert once.endswith(kept)
    assert everything.regenerated(everything.Results(), {}, once).count(kept) == 1
