"""Write docs/benchmarks.md "CI time" from the logs of `just check` runs, never by hand.

`just check` ends with a block on stderr: the wall and CPU seconds of every step, the test
seconds of every tier, the lanes' wall seconds, the Go module prefetch, the verdict, the commit,
the cores and the load average before and after. This script reads that block from one or more
saved logs (each labelled, e.g. a new machine's first run and a run with the caches kept) and
rewrites the tables between the `ci-times` markers of docs/benchmarks.md, so the figures there
are always a run's own output.

    .venv/bin/python scripts/ci_times.py "new machine, empty caches=cold.log" "caches kept=warm.log"
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
BEGIN = "<!-- ci-times:begin (scripts/ci_times.py writes this part from check logs) -->"
END = "<!-- ci-times:end -->"
_ROW = re.compile(
    r"^  (?P<name>\S.*?)\s+(?P<a>[\d.]+)(?:\s+(?P<b>[\d.]+))?\s*(?P<rest>ok|exit \d+)?$"
)
_VERDICT = re.compile(
    r"^check: (?P<verdict>ok|exit \d+) after (?P<seconds>\d+) s(?: at (?P<commit>\w+))?;"
    r"(?: (?P<cores>\d+) cores;)? load average before (?P<before>[^,]+), after (?P<after>.+)$"
)
_PREFETCH = re.compile(r"^check: Go module prefetch .*: (?P<seconds>\d+) s, exit (?P<code>\d+)")
_START = re.compile(r"^ci: just check from a clean clone, (?P<date>[\d-]+ [\d:]+) UTC")


class LogError(ValueError):
    """The log holds no complete `just check` summary."""


@dataclass
class Run:
    label: str
    steps: dict[str, tuple[float, float]] = field(default_factory=dict)
    tiers: dict[str, tuple[int, float]] = field(default_factory=dict)
    lanes: dict[str, float] = field(default_factory=dict)
    verdict: str = ""
    seconds: int = 0
    commit: str = ""
    cores: str = ""
    load_before: str = ""
    load_after: str = ""
    prefetch: str = ""
    date: str = ""


def parse(label: str, text: str) -> Run:
    """The summary block of a `just check` log (the last one, if the log holds several)."""
    run = Run(label)
    section = ""
    for line in text.splitlines():
        if match := _START.match(line):
            run.date = match["date"]
        if line.startswith("check: time per step"):
            run.steps.clear()
            run.tiers.clear()
            section = "steps"
        elif line.startswith("check: test time per tier"):
            section = "tiers"
        elif line.startswith("lanes: wall s per lane"):
            run.lanes.clear()
            section = "lanes"
        elif line.startswith(("check:", "lanes:")):
            section = ""
            if match := _VERDICT.match(line):
                run.verdict, run.seconds = match["verdict"], int(match["seconds"])
                run.commit, run.cores = match["commit"] or "", match["cores"] or ""
                run.load_before, run.load_after = match["before"], match["after"]
            elif match := _PREFETCH.match(line):
                run.prefetch = f"{match['seconds']} s, exit {match['code']}"
        elif section and (match := _ROW.match(line)):
            name, first, second = match["name"].strip(), float(match["a"]), match["b"]
            if section == "steps":
                run.steps[name] = (first, float(second or 0))
            elif section == "tiers":
                run.tiers[name] = (int(first), float(second or 0))
            else:
                run.lanes[name] = first
    if not run.verdict or not run.steps:
        raise LogError(f"{label}: no `just check` summary (the block of 'check:' lines at its end)")
    return run


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:,.0f}"


def tables(runs: Sequence[Run]) -> list[str]:
    """The markdown of the runs, side by side."""
    lines = ["| run | commit | date (UTC) | cores | load before | load after | verdict | s |"]
    lines.append("|---|---|---|---:|---|---|---|---:|")
    for run in runs:
        lines.append(
            f"| {run.label} | {run.commit or '?'} | {run.date or '?'} | {run.cores or '?'} | "
            f"{run.load_before} | {run.load_after} | {run.verdict} | {run.seconds:,} |"
        )
    header = " | ".join(f"{run.label}: wall s | CPU s" for run in runs)
    lines += ["", f"| step | {header} |", "|---|" + "---:|---:|" * len(runs)]
    for step in _ordered(run.steps for run in runs):
        cells = " | ".join(
            f"{_cell(run.steps.get(step, (None, None))[0])} | "
            f"{_cell(run.steps.get(step, (None, None))[1])}"
            for run in runs
        )
        lines.append(f"| `{step}` | {cells} |")
    header = " | ".join(f"{run.label}: tests | s" for run in runs)
    lines += ["", f"| test tier | {header} |", "|---|" + "---:|---:|" * len(runs)]
    for tier in _ordered(run.tiers for run in runs):
        cells = " | ".join(
            f"{run.tiers[tier][0]:,} | {run.tiers[tier][1]:,.0f}" if tier in run.tiers else " | "
            for run in runs
        )
        lines.append(f"| {tier} | {cells} |")
    if any(run.lanes for run in runs):
        header = " | ".join(f"{run.label}: wall s" for run in runs)
        lines += ["", f"| test lane (side by side) | {header} |", "|---|" + "---:|" * len(runs)]
        for lane in _ordered(run.lanes for run in runs):
            cells = " | ".join(_cell(run.lanes.get(lane)) for run in runs)
            lines.append(f"| {lane} | {cells} |")
    prefetch = "; ".join(f"{run.label}: {run.prefetch}" for run in runs if run.prefetch)
    if prefetch:
        lines += ["", f"Go module prefetch, in the background from the start: {prefetch}."]
    return lines


def _ordered(keyed: Iterable[Mapping[str, object]]) -> list[str]:
    names: list[str] = []
    for mapping in keyed:
        names += [name for name in mapping if name not in names]
    return names


def rewrite(doc: str, body: Sequence[str]) -> str:
    """The doc with the part between the markers replaced."""
    if BEGIN not in doc or END not in doc:
        raise LogError(f"{DOC.name} lacks the markers {BEGIN!r} ... {END!r}")
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + "\n" + "\n".join(body) + "\n" + END + tail


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("runs", nargs="+", metavar="LABEL=LOG")
    parser.add_argument("--doc", type=Path, default=DOC)
    args = parser.parse_args(argv)
    try:
        runs = []
        for spec in args.runs:
            label, sep, path = spec.partition("=")
            if not sep:
                raise LogError(f"{spec!r}: give LABEL=LOG")
            runs.append(parse(label, Path(path).read_text(errors="replace")))
        args.doc.write_text(rewrite(args.doc.read_text(), tables(runs)))
    except (OSError, LogError) as error:
        print(f"ci_times: {error}", file=sys.stderr)
        return 1
    print(f"ci_times: wrote {len(runs)} run(s) into {args.doc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
