"""Whole-process start-up: the `checkpoint-runtime` commands as a user runs them, each a fresh
Python process, timed from spawn to exit (wall) and by the CPU time the child used.

The commands run on a file store this script builds (one feed shard of 5000 seen rows) and a
runtime config naming it; the gate on the chart's defaults, twice: with its compiled-policy
cache warm (the usual CI step after the first) and with an empty cache directory (the first run
on a machine). The baseline is the bare interpreter (`python -c pass`), what no command can go
below. Every round runs every command once, the order rotating, so load on the shared machine
hits all alike; min / median / max over the rounds.

With --compare-src DIR the same commands also run against another source tree (another
checkout's `src/`, e.g. the previous commit's) through PYTHONPATH, interleaved with this one,
and the table adds that tree's median and the ratio. Prints tables; asserts nothing.

    PYTHONPATH=scripts .venv/bin/python -m bench.cli [--quick] [--rounds N] [--compare-src DIR]
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path

from bench.report import Report, Table, emit, parser
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.support.timing import rotated

SRC = Path(__file__).resolve().parents[2] / "src"
FEED = "f1"
SEEN_ROWS = 5000
STORE_NAME = "bench"
# Whole-process targets, seconds (median).
TARGETS = {"inspect": 0.3, "project": 0.3, "run --check-config": 0.3, "gate (defaults)": 0.6}
OWN_PROCESS = True
"""all.py runs this benchmark in a process of its own: the children it times are spawned from a
small parent, not from one holding every other benchmark's data."""


@dataclass(frozen=True)
class Command:
    name: str
    argv: tuple[str, ...]  # after `python -m checkpoint_runtime`; empty: the bare interpreter
    fresh_cache: bool = False  # a new, empty XDG_CACHE_HOME for every run


@dataclass
class Samples:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def build_store(folder: Path) -> Path:
    """A file store with one feed shard of SEEN_ROWS rows, and a config naming it; the config."""
    shard = f"objectstore/{FEED}"
    rows = FeedWorkload(shard, SEEN_ROWS, "uuid").rows
    store = Store.open(FileBackend(folder / "store", STORE_NAME), writer="bench", migrate=False)
    store.batch(rows)
    store.flush()
    bucket = folder / "bucket"
    bucket.mkdir()
    config = {
        "store": {"backend": "file", "path": str(folder / "store"), "leaseName": STORE_NAME},
        "collectors": [{"kind": "objectstore", "feed": FEED, "url": bucket.as_uri()}],
    }
    path = folder / "config.json"
    path.write_text(json.dumps(config))
    return path


def commands(folder: Path, config: Path, with_gate: bool) -> list[Command]:
    found = [
        Command("python -c pass (floor)", ()),
        Command("--help", ("--help",)),
        Command("inspect", ("inspect", "--path", str(folder / "store"))),
        Command("project", ("project", "--config", str(config))),
        Command("run --check-config", ("run", "--check-config", "--config", str(config))),
    ]
    if with_gate:
        found.append(Command("gate (defaults)", ("gate", "-q")))
        found.append(Command("gate (defaults), empty cache", ("gate", "-q"), fresh_cache=True))
    return found


def run_once(command: Command, src: Path, cache: Path, scratch: Path) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one whole process; fails loudly if it fails."""
    env = {**os.environ, "PYTHONPATH": str(src), "XDG_CACHE_HOME": str(cache)}
    # As an installed package runs: its modules' bytecode cached (pip compiles a wheel on install).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if command.fresh_cache:
        env["XDG_CACHE_HOME"] = tempfile.mkdtemp(dir=scratch)
    argv = [sys.executable, "-c", "pass"]
    if command.argv:
        argv = [sys.executable, "-m", "checkpoint_runtime", *command.argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0,):
        raise RuntimeError(f"{command.name} exited {done.returncode}: {done.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(
    trees: dict[str, Path], found: list[Command], rounds: int, scratch: Path
) -> dict[tuple[str, str], Samples]:
    caches = {tree: scratch / f"cache-{index}" for index, tree in enumerate(trees)}
    runs = [(tree, command) for command in found for tree in trees]
    for tree, command in runs:  # warm-up: page cache, .pyc files, the policy cache
        run_once(command, trees[tree], caches[tree], scratch)
    samples = {(tree, command.name): Samples() for tree, command in runs}
    for round_ in range(rounds):
        for tree, command in rotated(runs, round_):
            wall, cpu = run_once(command, trees[tree], caches[tree], scratch)
            samples[(tree, command.name)].wall.append(wall)
            samples[(tree, command.name)].cpu.append(cpu)
    return samples


def table(
    trees: dict[str, Path], found: list[Command], samples: dict[tuple[str, str], Samples]
) -> Table:
    this, *others = trees
    headers = ["command", "wall s min / median / max", "CPU s median", "target"]
    for other in others:
        headers += [f"{other}: wall median", f"{other}: CPU median", "wall ratio (this / that)"]
    rows = []
    for command in found:
        mine = samples[(this, command.name)]
        target = TARGETS.get(command.name)
        row = [
            command.name,
            f"{min(mine.wall):.3f} / {statistics.median(mine.wall):.3f} / {max(mine.wall):.3f}",
            f"{statistics.median(mine.cpu):.3f}",
            f"<= {target}" if target else "",
        ]
        for other in others:
            theirs = samples[(other, command.name)]
            ratio = statistics.median(mine.wall) / statistics.median(theirs.wall)
            row += [
                f"{statistics.median(theirs.wall):.3f}",
                f"{statistics.median(theirs.cpu):.3f}",
                f"{ratio:.2f}",
            ]
        rows.append(row)
    rounds = len(samples[(this, found[0].name)].wall)
    notes = [
        f"{rounds} rounds, every command once a round in rotating order (after one warm-up run "
        "each); wall = spawn to exit of `python -m checkpoint_runtime ...`; CPU = the child's "
        "user + system time; bytecode caching on, as in an installed package. Store: one "
        "feed shard of 5000 uuid-shaped seen rows on the file store; `gate -q` on the chart's "
        "defaults.",
        f"load average at the end: {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
        f"({os.cpu_count()} CPUs)",
    ]
    if others:
        notes.append(f"trees: {', '.join(f'{name} = {path}' for name, path in trees.items())}")
    notes.append(
        "On a loaded machine wall time is CPU time stretched by the wait for a core; the CPU "
        "column is what a process needs of an idle one."
    )
    return Table("CLI start-up, whole processes", headers, rows, notes)


def run(
    quick: bool = False, rounds: int = 15, compare_src: Path | None = None, gate: bool = True
) -> Report:
    """Whole-process start-up of the commands (3 rounds with `quick`), optionally interleaved
    with another source tree's."""
    trees = {"this tree": SRC}
    if compare_src:
        trees["compared"] = compare_src.resolve()
    with_gate = gate and find_spec("opapywasm") is not None
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        config = build_store(scratch)
        found = commands(scratch, config, with_gate)
        samples = measure(trees, found, 3 if quick else rounds, scratch)
    return Report("CLI start-up, whole processes", [table(trees, found, samples)])


def main(argv: Sequence[str] | None = None) -> int:
    found = parser(__doc__, "3 rounds (a smoke run)")
    found.add_argument("--rounds", type=int, default=15)
    found.add_argument("--compare-src", type=Path, help="another source tree to interleave")
    found.add_argument("--no-gate", action="store_true", help="skip the gate commands")
    args = found.parse_args(argv)
    report = run(args.quick, args.rounds, args.compare_src, gate=not args.no_gate)
    return emit(report, args)


if __name__ == "__main__":
    sys.exit(main())
