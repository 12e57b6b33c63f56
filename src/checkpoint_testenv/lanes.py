"""The test step of `just check`: the suite in lanes that run side by side, held to a budget.

Most of the suite's wall time is spent waiting, not computing: on pods and kubelet timers in the
node tier, on the API server's round trips and lease timers in the API-server tiers. Run one
after another on 2 cores they leave the machine idle; run side by side, as separate pytest
processes, they overlap. Each lane is one pytest process over some top-level folders of tests/
(tiers), with its own session fixtures: its own control plane, node and S3 server when its tests
ask for them (every fixture takes free ports and folders of its own).

`tests/lanes.toml` is the one home of the lanes, of the test step's budget and of every tier's
share of it. `check_config` refuses a layout that would leave a tier out or run one twice. After
the run the lanes' outputs are printed whole, one after another, then one table: per lane its
verdict and wall seconds, per tier its tests, seconds and share, the slowest tests across all
lanes, and the verdict on the budget. The step fails when a lane fails or when its wall time
passes the budget; a tier past its share is named.

    python -m checkpoint_testenv.lanes [--config tests/lanes.toml] [PYTEST ARGS...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from checkpoint_testenv.tiertimes import TIMES_ENV

DEFAULT_CONFIG = Path("tests/lanes.toml")
EXIT_OVER_BUDGET = 3
SLOWEST = 25


class LaneConfigError(ValueError):
    """tests/lanes.toml is missing a tier, runs one twice, or lacks a budget."""


@dataclass(frozen=True)
class Lane:
    name: str
    paths: tuple[str, ...]


@dataclass(frozen=True)
class Budget:
    step_seconds: float
    ci_limit_seconds: float
    shares: Mapping[str, float]


@dataclass(frozen=True)
class LaneResult:
    lane: Lane
    returncode: int
    seconds: float
    log: Path
    times: Path
    junit: Path


def load_config(path: Path) -> tuple[list[Lane], Budget]:
    """The lanes and the budget of a lanes.toml."""
    try:
        data = tomllib.loads(path.read_text())
        budget = data["budget"]
        lanes = [Lane(name, tuple(spec["paths"])) for name, spec in data["lanes"].items()]
        shares = {tier: float(seconds) for tier, seconds in data["shares"].items()}
        return lanes, Budget(
            float(budget["test_step_seconds"]), float(budget["ci_limit_seconds"]), shares
        )
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as error:
        raise LaneConfigError(f"{path}: {type(error).__name__}: {error}") from error


def check_config(lanes: Sequence[Lane], budget: Budget, tiers: Sequence[str]) -> None:
    """Every tier (a folder of tests/ holding tests) in exactly one lane, with a share."""
    placed: dict[str, str] = {}
    for lane in lanes:
        for path in lane.paths:
            tier = Path(path).name
            if tier in placed:
                raise LaneConfigError(
                    f"tier {tier!r} is in lanes {placed[tier]!r} and {lane.name!r}"
                )
            placed[tier] = lane.name
    missing = sorted(set(tiers) - set(placed))
    if missing:
        raise LaneConfigError(f"tiers in no lane (they would never run): {', '.join(missing)}")
    unknown = sorted(set(placed) - set(tiers))
    if unknown:
        raise LaneConfigError(f"lanes name folders without tests: {', '.join(unknown)}")
    unshared = sorted(set(tiers) - set(budget.shares))
    if unshared:
        raise LaneConfigError(f"tiers without a share of the budget: {', '.join(unshared)}")
    if budget.step_seconds >= budget.ci_limit_seconds:
        raise LaneConfigError("the test step's budget leaves no margin under CI's limit")


def test_tiers(tests: Path) -> list[str]:
    """The top-level folders of tests/ that hold test files."""
    return sorted(
        folder.name
        for folder in tests.iterdir()
        if folder.is_dir() and any(folder.rglob("test_*.py"))
    )


def run_lanes(lanes: Sequence[Lane], pytest_args: Sequence[str], scratch: Path) -> list[LaneResult]:
    """Start every lane at once; wait for all; print each lane's output whole as it ends."""
    started = time.monotonic()
    running: list[tuple[Lane, subprocess.Popen[bytes], Path, Path, Path]] = []
    for lane in lanes:
        log, times, junit = (scratch / f"{lane.name}.{ext}" for ext in ("log", "tsv", "xml"))
        env = {**os.environ, TIMES_ENV: str(times)}
        command = [sys.executable, "-m", "pytest", *lane.paths, f"--junit-xml={junit}"]
        with log.open("wb") as out:
            process = subprocess.Popen(
                [*command, *pytest_args], stdout=out, stderr=subprocess.STDOUT, env=env
            )
        running.append((lane, process, log, times, junit))
        print(f"lanes: {lane.name} started: {' '.join(lane.paths)}", file=sys.stderr, flush=True)
    results: list[LaneResult] = []
    while running:
        for entry in list(running):
            lane, process, log, times, junit = entry
            code = process.poll()
            if code is None:
                continue
            running.remove(entry)
            seconds = time.monotonic() - started
            results.append(LaneResult(lane, code, seconds, log, times, junit))
            verdict = "passed" if code == 0 else f"FAILED (exit {code})"
            print(f"\n===== lane {lane.name}: {verdict} after {seconds:.0f} s =====", flush=True)
            sys.stdout.write(log.read_text(errors="replace"))
            sys.stdout.flush()
        time.sleep(0.5)
    return results


def tier_rows(results: Sequence[LaneResult]) -> list[tuple[str, int, float]]:
    """(tier, tests, seconds) of every lane's tier times file, slowest first."""
    rows: list[tuple[str, int, float]] = []
    for result in results:
        if result.times.is_file():
            for line in result.times.read_text().splitlines():
                tier, count, seconds = line.split("\t")
                rows.append((tier, int(count), float(seconds)))
    return sorted(rows, key=lambda row: -row[2])


def junit_roots(results: Sequence[LaneResult]) -> list[ET.Element]:
    """The root of every lane's JUnit XML that was written (a lane killed early has none)."""
    roots = []
    for result in results:
        try:
            roots.append(ET.parse(result.junit).getroot())
        except (OSError, ET.ParseError):
            continue
    return roots


def slowest_tests(results: Sequence[LaneResult], count: int = SLOWEST) -> list[tuple[float, str]]:
    """The slowest test cases across the lanes (setup + call + teardown, from their JUnit XML)."""
    cases: list[tuple[float, str]] = []
    for root in junit_roots(results):
        for case in root.iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            cases.append((float(case.get("time", "0") or 0), name))
    return sorted(cases, reverse=True)[:count]


def counts(results: Sequence[LaneResult]) -> dict[str, int]:
    """Tests, failures, errors and skips summed over the lanes' JUnit XML."""
    total = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    for root in junit_roots(results):
        for suite in root.iter("testsuite"):
            for key in total:
                total[key] += int(suite.get(key, "0") or 0)
    return total


def closing_line(results: Sequence[LaneResult], wall: float) -> str:
    """pytest's closing line, for the lanes together."""
    total = counts(results)
    bad = total["failures"] + total["errors"]
    passed = total["tests"] - bad - total["skipped"]
    return (
        f"==== {passed} passed, {total['skipped']} skipped, {total['failures']} failed,"
        f" {total['errors']} errors in {len(results)} lanes in {wall:.0f} s ===="
    )


def verdict(results: Sequence[LaneResult], budget: Budget, wall: float) -> tuple[int, list[str]]:
    """The step's exit status and the lines that explain it."""
    lines: list[str] = []
    failed = [result.lane.name for result in results if result.returncode != 0]
    if failed:
        lines.append(f"lanes: failed: {', '.join(failed)}")
    for tier, _, seconds in tier_rows(results):
        share = budget.shares.get(tier)
        if share is not None and seconds > share:
            lines.append(
                f"lanes: tier {tier} took {seconds:.0f} s, past its share of {share:.0f} s"
            )
    over = wall > budget.step_seconds
    if over:
        lines.append(
            f"lanes: the test step took {wall:.0f} s,"
            f" past its budget of {budget.step_seconds:.0f} s (tests/lanes.toml):"
            " make the new or grown tests cheaper before raising it"
        )
    status = 1 if failed else EXIT_OVER_BUDGET if over else 0
    return status, lines


def report(results: Sequence[LaneResult], budget: Budget, wall: float) -> int:
    """Print the lanes' table on stderr; return the step's exit status."""
    status, lines = verdict(results, budget, wall)
    out = sys.stderr
    print("\nlanes: wall s per lane (side by side)", file=out)
    for result in sorted(results, key=lambda r: -r.seconds):
        mark = "ok" if result.returncode == 0 else f"exit {result.returncode}"
        print(f"  {result.lane.name:<14} {result.seconds:8.0f}  {mark}", file=out)
    print("lanes: tier, tests, s (setup + call + teardown), share", file=out)
    for tier, count, seconds in tier_rows(results):
        print(f"  {tier:<14} {count:6} {seconds:8.0f} {budget.shares.get(tier, 0):8.0f}", file=out)
    print(f"lanes: the {SLOWEST} slowest tests across lanes (s)", file=out)
    for seconds, name in slowest_tests(results):
        print(f"  {seconds:8.1f}  {name}", file=out)
    margin = budget.ci_limit_seconds - budget.step_seconds
    print(
        f"lanes: test step {wall:.0f} s of its budget {budget.step_seconds:.0f} s"
        f" ({margin:.0f} s under CI's limit of {budget.ci_limit_seconds:.0f} s"
        " for everything else)",
        file=out,
    )
    for line in lines:
        print(line, file=out)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG)
    parser.add_argument("--scratch", type=Path, default=None, help="folder for the lanes' logs")
    args, pytest_args = parser.parse_known_args(argv)
    try:
        lanes, budget = load_config(args.config)
        check_config(lanes, budget, test_tiers(args.config.parent))
    except LaneConfigError as error:
        print(f"lanes: {error}", file=sys.stderr)
        return 2
    scratch = args.scratch or Path(os.environ.get("TMPDIR", "/tmp")) / f"lanes-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results = run_lanes(lanes, pytest_args, scratch)
    wall = time.monotonic() - started
    target = os.environ.get(TIMES_ENV)
    if target:
        rows = tier_rows(results)
        Path(target).write_text("".join(f"{t}\t{c}\t{s:.1f}\n" for t, c, s in rows))
    status = report(results, budget, wall)
    print(closing_line(results, wall), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
