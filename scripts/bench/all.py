"""Every benchmark (`just bench`): writes docs/benchmarks.md and its PNG plots.

Imports every benchmark module and calls its `run()`: the codec, persist, store, scale and
etcd-cost benchmarks share one real control plane (the time-to-NOSPACE run starts its own
small-quota ones); render and cli declare `OWN_PROCESS` and run as `python -m bench.<name>
--report-json FILE` in a process of their own, their reports read back from that file. Every
report brings its tables and the targets it decides.

    PYTHONPATH=scripts .venv/bin/python -m bench.all [--quick] [--out DIR] [--no-external]
"""

from __future__ import annotations

import contextlib
import importlib
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # the Agg backend is chosen before pyplot loads

from bench.report import Report, Target, parser
from checkpoint_testenv.controlplane import running_control_plane

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ON_PLANE = ("persist", "store_ops", "scale", "etcd_cost")
"""Benchmarks that take the shared control plane (`run(quick, plane)`)."""
BEFORE_PLANE = ("codec", "rowblock")
"""Benchmarks of pure encoding, run first (no control plane)."""
EXTERNAL = ("render", "store", "cli")
"""Benchmarks skipped with --no-external (the slow or self-contained ones)."""
SECTIONS = (
    ("codec", "1. Codec"),
    ("persist", "2. Persist cost on the real API server"),
    ("render", "3. Render gate"),
    ("store_ops", "4. Store"),
    ("scale", "5. Store performance at scale"),
    ("store", "6. Shard sizes of the reference configurations"),
    ("etcd_cost", "7. What a persist costs etcd"),
    ("cli", "8. CLI start-up, whole processes"),
    ("rowblock", "9. Row block layout"),
)
TARGET_ORDER = ("rowblock", "scale", "store_ops", "render", "etcd_cost")


def module(name: str) -> ModuleType:
    return importlib.import_module(f"bench.{name}")


@dataclass
class Ran:
    """One benchmark's report, how long it took, and how it ran."""

    name: str
    report: Report | None
    seconds: float = 0.0
    own_process: bool = False
    returncode: int = 0
    stderr: str = ""


def run_own_process(name: str, quick: bool, timeout: float = 3600) -> Ran:
    """`python -m bench.<name> --report-json FILE` (its module declares OWN_PROCESS)."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as scratch:
        path = Path(scratch) / "report.json"
        argv = [sys.executable, "-m", f"bench.{name}", "--report-json", str(path)]
        paths = [str(HERE.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        started = time.monotonic()
        answer = subprocess.run(
            [*argv, *(["--quick"] if quick else [])],
            capture_output=True,
            text=True,
            check=False,
            cwd=REPO,
            env=env,
            timeout=timeout,
        )
        report = Report.from_json(path.read_text()) if path.is_file() else None
    return Ran(name, report, time.monotonic() - started, True, answer.returncode, answer.stderr)


def run_one(name: str, quick: bool, **options: Any) -> Ran:
    bench = module(name)
    if getattr(bench, "OWN_PROCESS", False):
        return run_own_process(name, quick)
    started = time.monotonic()
    report = bench.run(quick=quick, **options)
    return Ran(name, report, time.monotonic() - started)


@dataclass
class Results:
    ran: dict[str, Ran] = field(default_factory=dict)
    quick: bool = False
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    seconds: float = 0.0

    def report(self, name: str) -> Report | None:
        ran = self.ran.get(name)
        return ran.report if ran else None

    def targets(self) -> list[Target]:
        return [
            target
            for name in TARGET_ORDER
            if (report := self.report(name)) is not None
            for target in report.targets
        ]


@contextlib.contextmanager
def control_plane(given: Any | None) -> Iterator[Any]:
    if given is not None:
        yield given
        return
    with running_control_plane() as plane:
        yield plane


def collect(plane: Any | None = None, quick: bool = False, external: bool = True) -> Results:
    began = time.monotonic()
    results = Results(quick=quick, load_before=os.getloadavg())
    for name in BEFORE_PLANE:
        results.ran[name] = run_one(name, quick)
    with control_plane(plane) as live:
        for name in ON_PLANE:
            options: dict[str, Any] = {"plane": live}
            if name == "etcd_cost":
                # --quick: no time-to-NOSPACE run (two more control planes, minutes of persists)
                options["parts"] = ("wal", "budget") if quick else ("wal", "budget", "nospace")
            results.ran[name] = run_one(name, quick, **options)
    for name in EXTERNAL if external else ():
        results.ran[name] = run_one(name, quick)
    results.load_after = os.getloadavg()
    results.seconds = time.monotonic() - began
    return results


# -- machine and versions ---------------------------------------------------------------------


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _memory() -> str:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return "unknown"


def _git(*args: str) -> str:
    answer = subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO, check=False)
    return answer.stdout.strip()


def _pins() -> dict[str, str]:
    pins = {}
    with contextlib.suppress(OSError):
        for line in (REPO / "scripts/testenv/versions.env").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.startswith("#"):
                pins[key.strip()] = value.strip()
    return pins


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_info(results: Results) -> list[tuple[str, str]]:
    pins = _pins()
    dirty = " (with uncommitted changes in the tree)" if _git("status", "--porcelain") else ""
    return [
        ("date (UTC)", results.started.strftime("%Y-%m-%d %H:%M:%S")),
        ("commit", _git("rev-parse", "--short", "HEAD") + dirty),
        ("machine", f"{platform.machine()}, {os.cpu_count()} CPUs ({_cpu_model()}), {_memory()}"),
        ("os", platform.platform()),
        (
            "load average (1/5/15 min) before / after",
            " / ".join(
                ", ".join(f"{value:.1f}" for value in load)
                for load in (results.load_before, results.load_after)
            ),
        ),
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("zlib", zlib.ZLIB_RUNTIME_VERSION),
        (
            "packages",
            ", ".join(
                f"{name} {_version(name)}"
                for name in (
                    "checkpoint-runtime",
                    "deflate",
                    "kubernetes",
                    "urllib3",
                    "matplotlib",
                )
            ),
        ),
        (
            "test environment",
            f"kube-apiserver {pins.get('KUBERNETES_VERSION', '?')}, "
            f"etcd {pins.get('ETCD_VERSION', '?')} (--unsafe-no-fsync), "
            f"helm {pins.get('HELM_VERSION', '?')}, all on 127.0.0.1",
        ),
        ("mode", "--quick (smoke sizes, not figures)" if results.quick else "full"),
        ("wall time", f"{results.seconds:.0f} s"),
    ]


# -- plots ------------------------------------------------------------------------------------


def _plot_sizes(axis: Any, shape: str, points: list[Any], most: dict[str, int], limit: int) -> None:
    """Bytes per shard of both codecs and the bound, against the value limit."""
    rows = [p.seen_rows for p in points]
    axis.plot(rows, [p.bytes["envelope"] for p in points], "o-", label="envelope (ours)")
    axis.plot(rows, [p.bytes["baseline"] for p in points], "s-", label="baseline gzip(JSON)")
    axis.plot(rows, [p.bound_bytes for p in points], "--", label="entropy bound")
    axis.axhline(limit, color="red", linewidth=1, label="1,048,576 B limit")
    for name in ("envelope", "baseline", "bound"):
        axis.axvline(most[name], color="grey", linewidth=0.5, linestyle=":")
        axis.annotate(
            f"{name} max {most[name]:,}",
            (most[name], limit),
            rotation=90,
            fontsize=7,
            va="top",
            ha="right",
        )
    _finish_sweep(axis, "compressed bytes", f"{shape}: bytes per shard", loc="lower right")


def _plot_times(axis: Any, shape: str, points: list[Any]) -> None:
    """Median encode and decode time of both codecs."""
    rows = [p.seen_rows for p in points]
    for name, marker in (("envelope", "o"), ("baseline", "s")):
        axis.plot(rows, [p.encode_ms[name] for p in points], marker + "-", label=f"{name} encode")
        axis.plot(rows, [p.decode_ms[name] for p in points], marker + "--", label=f"{name} decode")
    _finish_sweep(axis, "median ms", f"{shape}: encode / decode time")


def _finish_sweep(axis: Any, ylabel: str, title: str, **legend: Any) -> None:
    """Log-log axes over the seen rows of a shard, a grid and the legend."""
    axis.set(
        xscale="log", yscale="log", xlabel="seen rows in the shard", ylabel=ylabel, title=title
    )
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8, **legend)


def plot_codec(results: Results, out: Path) -> list[Path]:
    codec = results.ran["codec"].report.measured  # type: ignore[union-attr]
    shapes = list(codec.at_5000)
    sweep, axes = plt.subplots(1, len(shapes), figsize=(6 * len(shapes), 4.5))
    timing, time_axes = plt.subplots(1, len(shapes), figsize=(6 * len(shapes), 4.5))
    for index, shape in enumerate(shapes):
        points = [p for p in codec.points if p.shape == shape]
        _plot_sizes(axes[index], shape, points, codec.most_rows[shape], module("codec").LIMIT)
        _plot_times(time_axes[index], shape, points)
    paths = [out / "bench-codec-sweep.png", out / "bench-codec-time.png"]
    for figure, path in zip((sweep, timing), paths, strict=True):
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)
    return paths


def plot_persist(results: Results, out: Path) -> list[Path]:
    persist = results.ran["persist"].report.measured  # type: ignore[union-attr]
    figure, (latency_axis, bytes_axis) = plt.subplots(1, 2, figsize=(12, 4.5))
    labels, data = [], []
    for item in persist.latency:
        for what in ("store", "raw", "encode"):
            labels.append(f"{item.shape}\n{'raw PUT' if what == 'raw' else what}")
            data.append(item.samples[what])
    latency_axis.boxplot(data, whis=(1, 99), showfliers=True)
    latency_axis.set_xticks(range(1, len(labels) + 1), labels, fontsize=8)
    latency_axis.set(ylabel="ms", title="persist one dirty 5000-row shard (whiskers p1-p99)")
    latency_axis.grid(True, axis="y", alpha=0.3)
    names = [f"{b.label}\n{b.changed_per_window} row(s)/write" for b in persist.bytes_per_row]
    positions = range(len(names))
    width = 0.4
    bytes_axis.bar(
        [p - width / 2 for p in positions],
        [b.sharded_wire for b in persist.bytes_per_row],
        width,
        label="sharded",
    )
    bytes_axis.bar(
        [p + width / 2 for p in positions],
        [b.legacy_wire for b in persist.bytes_per_row],
        width,
        label="legacy single ConfigMap",
    )
    bytes_axis.set_xticks(list(positions), names, fontsize=7)
    bytes_axis.set(
        yscale="log", ylabel="wire bytes sent per changed row", title="bytes per changed row"
    )
    bytes_axis.set_ylim(bottom=1000)
    bytes_axis.grid(True, axis="y", alpha=0.3)
    bytes_axis.legend(fontsize=8)
    figure.tight_layout()
    path = out / "bench-persist.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return [path]


# -- the document -----------------------------------------------------------------------------

PREAMBLE = [
    "# Benchmarks",
    "",
    "Generated by `just bench` (`PYTHONPATH=scripts .venv/bin/python -m bench.all`); do not edit",
    "by hand. Every comparison runs side by side in one process with its baseline, interleaved,",
    "and reports medians (or p50/p99). CI does not time anything. The machine is shared: other",
    "sessions' test runs may have been competing for its 2 cores (see the load average), so",
    "absolute times are noisy; ratios of interleaved measurements are the meaningful figures.",
    "",
]


def targets_table(results: Results) -> list[str]:
    lines = [
        "## Targets",
        "",
        "| target | wanted | measured | verdict | why |",
        "|---|---|---|---|---|",
    ]
    for target in results.targets():
        verdict = {True: "**met**", False: "**missed**", None: "not evaluated"}[target.met]
        lines.append(
            f"| {target.name} | {target.wanted} | {target.measured} | {verdict} | {target.why} |"
        )
    return [*lines, ""]


def section(ran: Ran | None) -> list[str]:
    """A benchmark's tables; how it ran if in a process of its own, its errors if it failed."""
    if ran is None:
        return ["Not run (`--no-external`).", ""]
    lines = []
    if ran.own_process:
        lines += [
            f"`python -m bench.{ran.name}` in a process of its own (exit {ran.returncode}, "
            f"{ran.seconds:.0f} s):",
            "",
        ]
    if ran.report is not None:
        lines.append(ran.report.markdown())
    if ran.returncode or ran.report is None:
        lines += ["", "stderr (last lines):", "", "```text"]
        lines += [*ran.stderr.strip().splitlines()[-20:], "```", ""]
    return lines


def plot_links(name: str, plots: dict[str, list[Path]]) -> list[str]:
    labels = {"codec": ("codec sweep", "codec time"), "persist": ("persist",)}
    found = plots.get(name, [])
    return [
        line
        for label, path in zip(labels.get(name, ()), found, strict=False)
        for line in (f"![{label}]({path.name})", "")
    ]


def markdown(results: Results, plots: dict[str, list[Path]]) -> str:
    lines = [*PREAMBLE, "## Machine", "", "| | |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in machine_info(results)]
    lines += ["", *targets_table(results)]
    for name, title in SECTIONS:
        if name == "etcd_cost" and name not in results.ran:
            continue
        lines += [f"## {title} (scripts/bench/{name}.py)", ""]
        lines += section(results.ran.get(name)) + plot_links(name, plots)
    return "\n".join(lines).rstrip() + "\n"


KEPT = re.compile(r"<!-- ([a-z-]+):start.*?<!-- \1:end -->\n?", re.DOTALL)
"""A section written from other measurements (e.g. CI time), between `<!-- name:start ... -->`
and `<!-- name:end -->`: kept as it is when the document is regenerated."""


def regenerated(results: Results, plots: dict[str, list[Path]], previous: str) -> str:
    """The document: this run's sections, then the kept sections of the previous one."""
    kept = [match.group(0).rstrip("\n") + "\n" for match in KEPT.finditer(previous)]
    return "\n".join([markdown(results, plots), *kept])


def write(results: Results, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    plots = {"codec": plot_codec(results, out), "persist": plot_persist(results, out)}
    document = out / "benchmarks.md"
    previous = document.read_text() if document.is_file() else ""
    document.write_text(regenerated(results, plots, previous))
    return document


def main(argv: Sequence[str] | None = None, plane: Any | None = None) -> int:
    found = parser(__doc__, "smoke sizes for every benchmark")
    found.add_argument("--out", type=Path, default=REPO / "docs", help="folder for the report")
    found.add_argument(
        "--no-external", action="store_true", help="skip the slow, self-contained benchmarks"
    )
    args = found.parse_args(argv)
    results = collect(plane, quick=args.quick, external=not args.no_external)
    document = write(results, args.out)
    for target in results.targets():
        verdict = {True: "met", False: "MISSED", None: "not evaluated"}[target.met]
        print(f"{verdict:>13}  {target.name}: {target.measured} (wanted {target.wanted})")
    for ran in results.ran.values():
        print(f"--- bench.{ran.name} ({ran.seconds:.0f} s)")
        if ran.report is None:
            print(f"no report (exit {ran.returncode}):\n{ran.stderr[-2000:]}")
        else:
            print(ran.report.text() if args.format == "text" else ran.report.markdown())
    print(f"wrote {document} and its plots")
    return 0


if __name__ == "__main__":
    sys.exit(main())
