"""Replicas that share the work (`just bench-buckets`): the CPU each of 3 real
`checkpoint-runtime run` processes of one release spends, and the objects each checkpoints,
with the store's leadership buckets (store.buckets = 6) beside the same release with one
bucket (store.buckets = 1: one replica leads everything), in one run.

Each side is a release helm-installed on the real API server (the testenv control plane) and
3 runtime processes as its ServiceAccount, with F object-store collectors over local file://
folders (feeds chosen so every bucket holds F / 6 of them; the leadership settings of the tests:
lease 3 s, retry 0.5 s; no debounced persist: each chunk of 100 objects is one synchronous
batch). Once the placement is settled (2/2/2 with six buckets, one leader with one), every
folder is given a backlog of N objects at once, and over a fixed window the bench reads each
process's CPU seconds (/proc/PID/stat utime + stime, its children excluded) and the records
its file sink received (2 an object). The replicas are saturated when every
folder still holds objects nobody has emitted at the end of the window: the work was there
the whole time, so what limited the rate was the replicas (and the machine), not the feed.

    PYTHONPATH=scripts .venv/bin/python -m bench.buckets [--quick] [--feeds F] [--objects N]
        [--window S] [--write-doc]
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.report import DOCUMENT, Report, Table, Target, emit, parser, verdict, write_section
from checkpoint_testenv import helm
from checkpoint_testenv.controlplane import ControlPlane, running_control_plane
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.buckets import bucketed_config, feeds_covering, lease_requests
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import RuntimeProcess, sink_records

REPLICAS = 3
BUCKETS = (6, 1)
"""The measured side first, then its baseline."""
SHARE_TARGET = 0.45
SECTION = "buckets"
"""docs/benchmarks.md keeps this report between `<!-- buckets:start ... -->` and
`<!-- buckets:end -->` (all.py keeps such sections when it regenerates the document)."""


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process `pid` itself, its children excluded."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (every core, /proc/stat: all but idle and
    iowait)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def emitted_lines(proc: RuntimeProcess) -> int:
    """Records `proc` has emitted so far: lines of its file sink (one unbuffered write() per
    record as it is emitted, each ending in its closing brace; blank lines pad to pages; the
    collector's metric counts a poll only when it ends)."""
    return proc.sink.read_bytes().count(b"}\n") if proc.sink.exists() else 0


def objects_by_feed(procs: Sequence[RuntimeProcess]) -> dict[str, int]:
    """Objects emitted so far by every process, by feed (each object's first record)."""
    found: dict[str, int] = {}
    for proc in procs:
        for record in sink_records(proc.sink):
            if record.get("line") == 0:
                found[record["feed"]] = found.get(record["feed"], 0) + 1
    return found


def stage_backlog(staging: Path, feeds: Sequence[str], objects: int) -> None:
    """`objects` objects of two JSON lines for every feed, in `staging/<feed>/backlog`."""
    for feed in feeds:
        folder = staging / feed / "backlog"
        folder.mkdir(parents=True)
        for index in range(objects):
            name = f"o-{index:06d}.json"
            body = json.dumps({"object": name, "n": 1}) + "\n" + json.dumps({"n": 2}) + "\n"
            (folder / name).write_text(body)


def release_backlog(staging: Path, root: Path, feeds: Sequence[str]) -> None:
    """Every feed's staged backlog moved into its folder (one rename each: a listing sees all
    of it or none)."""
    for feed in feeds:
        os.rename(staging / feed / "backlog", root / feed / "backlog")


@dataclass
class Replica:
    name: str
    buckets: int
    """Buckets it led through the window (0 or 1 with one bucket: whether it led)."""
    cpu: float
    objects: float


@dataclass
class Side:
    buckets: int
    feeds: int
    backlog: int
    window: float
    settle_seconds: float
    replicas: list[Replica]
    lease_puts: float | None
    machine_cores: float
    """The machine's busy cores over the window (every process on it)."""
    left: int
    """The fewest objects of one folder's backlog nobody had emitted at the window's end (> 0:
    every collector had work the whole window, saturated)."""

    @property
    def cpu(self) -> float:
        return sum(replica.cpu for replica in self.replicas)

    @property
    def objects(self) -> float:
        return sum(replica.objects for replica in self.replicas)

    def share(self, replica: Replica) -> float:
        return replica.cpu / self.cpu if self.cpu else 0.0

    @property
    def busiest(self) -> float:
        return max(self.share(replica) for replica in self.replicas)


def placed(procs: Sequence[RuntimeProcess], buckets: int) -> list[int]:
    """The buckets each process leads (with one bucket: 1 for its leader, else 0)."""
    if buckets == 1:
        return [int(proc.leading()) for proc in procs]
    return [int(proc.metric("checkpoint_buckets_led") or 0) for proc in procs]


def measure_side(
    plane: ControlPlane, workdir: Path, buckets: int, feeds_count: int, backlog: int, window: float
) -> Side:
    """One release of `buckets` buckets, 3 replicas, `feeds_count` collectors: settle, feed,
    measure over `window` seconds, stop."""
    namespace = plane.create_namespace(f"bench-buckets-{buckets}")
    release: Release = helm.install(
        plane, namespace, {"checkpoint": {"store": {"buckets": buckets}}}
    )
    root = workdir / f"b{buckets}"
    feeds = feeds_covering(6, feeds_count // 6)  # the same feeds on both sides
    for feed in feeds:
        (root / feed).mkdir(parents=True)
    config = bucketed_config(release, root, feeds)
    kubeconfig = release.write_kubeconfig(root / "sa.kubeconfig")
    staging = workdir / f"staging-b{buckets}"
    stage_backlog(staging, feeds, backlog)  # before the processes start: no CPU taken from them
    procs = [RuntimeProcess(root, f"replica-{n}", config, kubeconfig) for n in range(REPLICAS)]
    want = [1, 0, 0] if buckets == 1 else [buckets // REPLICAS] * REPLICAS
    with contextlib.ExitStack() as stack:
        for proc in procs:
            stack.callback(proc.stop_quietly)
            proc.start()
        began = time.perf_counter()
        wait_for(
            lambda: sorted(placed(procs, buckets), reverse=True) == want,
            90,
            f"the placement settles at {want}",
        )
        settle = time.perf_counter() - began
        time.sleep(2)  # settled, not passing through
        print(f"bench-buckets: B={buckets} settled in {settle:.1f} s; feeding", file=sys.stderr)
        release_backlog(staging, root, feeds)
        pids = [proc.process.pid for proc in procs if proc.process is not None]
        held = placed(procs, buckets)
        puts = lease_requests(release).get("PUT")
        cpu = [process_cpu(pid) for pid in pids]
        busy = machine_busy()
        done = [emitted_lines(proc) for proc in procs]
        began = time.perf_counter()
        time.sleep(window)
        cpu = [process_cpu(pid) - before for pid, before in zip(pids, cpu, strict=True)]
        done = [emitted_lines(proc) - before for proc, before in zip(procs, done, strict=True)]
        busy = machine_busy() - busy
        took = time.perf_counter() - began
        puts_after = lease_requests(release).get("PUT")
        emitted = objects_by_feed(procs)
        if placed(procs, buckets) != held:
            raise RuntimeError(f"B={buckets}: the placement moved during the window")
    replicas = [
        Replica(proc.name, count, seconds, made / 2)
        for proc, count, seconds, made in zip(procs, held, cpu, done, strict=True)
    ]
    lease_puts = None if puts is None or puts_after is None else (puts_after - puts) / took
    return Side(
        buckets,
        len(feeds),
        backlog,
        took,
        settle,
        replicas,
        lease_puts,
        busy / took,
        min(backlog - emitted.get(feed, 0) for feed in feeds),
    )


@dataclass
class Measured:
    sides: dict[int, Side]
    load: tuple[float, float]


def measure(plane: ControlPlane, feeds: int, backlog: int, window: float) -> Measured:
    load = os.getloadavg()[0]
    sides: dict[int, Side] = {}
    with tempfile.TemporaryDirectory(prefix="bench-buckets-") as folder:
        for buckets in BUCKETS:
            sides[buckets] = measure_side(plane, Path(folder), buckets, feeds, backlog, window)
    return Measured(sides, (load, os.getloadavg()[0]))


def report(found: Measured) -> Report:
    rows = []
    for side in found.sides.values():
        for replica in side.replicas:
            rows.append(
                [
                    str(side.buckets),
                    replica.name,
                    str(replica.buckets),
                    f"{replica.cpu:.2f}",
                    f"{replica.cpu / side.window:.2f}",
                    f"{side.share(replica):.1%}",
                    f"{replica.objects / side.window:,.0f}",
                    f"{replica.cpu / replica.objects * 1000:.2f}" if replica.objects else "",
                ]
            )
        rows.append(
            [
                str(side.buckets),
                "release",
                str(side.buckets),
                f"{side.cpu:.2f}",
                f"{side.cpu / side.window:.2f}",
                f"busiest {side.busiest:.1%}",
                f"{side.objects / side.window:,.0f}",
                f"{side.cpu / side.objects * 1000:.2f}" if side.objects else "",
            ]
        )
    spread, one = found.sides[BUCKETS[0]], found.sides[BUCKETS[1]]
    per_side = (
        f"{spread.feeds} object-store collectors over local file:// folders (feeds chosen so "
        f"each of 6 buckets holds {spread.feeds // 6}), {REPLICAS} `checkpoint-runtime run` "
        "processes of one release as its ServiceAccount (lease 3 s, retry 0.5 s, each chunk of "
        "100 objects one synchronous batch, a file sink); once the placement settled, "
        f"{spread.backlog:,} objects of two JSON lines written into every folder at once, then "
        f"a {spread.window:.1f} s window: each process's CPU from /proc/PID/stat (utime + "
        "stime, children excluded), its objects from its file sink's lines / 2 (each chunk "
        "of 100 objects is checkpointed by one synchronous batch right after it is emitted)."
    )
    saturated = ", ".join(
        f"B={side.buckets}: at least {side.left:,} of {side.backlog:,} unread in every folder"
        for side in found.sides.values()
    )
    every = all(side.left > 0 for side in found.sides.values())
    lease = ", ".join(
        f"B={side.buckets}: {side.lease_puts:.1f}/s"
        for side in found.sides.values()
        if side.lease_puts is not None
    )
    notes = [
        per_side,
        f"At the window's end {saturated}: "
        + (
            "the backlog outlasted the window in every folder, so every collector had work "
            "throughout and the replicas, not the feed, set the rate (saturated)."
            if every
            else "some folder ran dry within the window: NOT saturated, the figures are the feed's."
        )
        + " The machine's busy cores over the window (every process: the replicas, the API "
        "server, etcd, anything else running): "
        + ", ".join(f"B={s.buckets}: {s.machine_cores:.2f}" for s in found.sides.values())
        + f" of {os.cpu_count()}."
        + " Placement settled in "
        + ", ".join(f"{s.settle_seconds:.1f} s (B={s.buckets})" for s in found.sides.values())
        + " and did not move during the window.",
        f"Lease PUTs on the API server during the window (apiserver_request_total): {lease}.",
        f"load average {found.load[0]:.1f} before, {found.load[1]:.1f} after, on "
        f"{os.cpu_count()} cores (the API server, etcd and the processes share them).",
    ]
    table = Table(
        f"CPU and objects per replica, {REPLICAS} replicas, B = 6 beside B = 1",
        [
            "B",
            "replica",
            "buckets led",
            "CPU s",
            "cores",
            "share of release CPU",
            "objects/s",
            "CPU ms / object",
        ],
        rows,
        notes,
    )
    lines = [
        f"busiest replica's share of the release's CPU: B=6 {spread.busiest:.1%}, "
        f"B=1 {one.busiest:.1%} (target <= {SHARE_TARGET:.0%}: "
        f"{verdict(spread.busiest, SHARE_TARGET)}); the release's objects/s: "
        f"B=6 {spread.objects / spread.window:,.0f}, B=1 {one.objects / one.window:,.0f} "
        f"({spread.objects / spread.window / max(one.objects / one.window, 1e-9):.2f}x)"
    ]
    target = Target(
        "busiest replica's CPU share, 3 replicas, B = 6, saturated",
        f"<= {SHARE_TARGET:.0%}",
        f"{spread.busiest:.1%} (B=1: {one.busiest:.1%})",
        spread.busiest <= SHARE_TARGET and spread.left > 0,
        "a saturated window: every process's own CPU",
    )
    return Report("Replicas that share the work", [table], [target], lines=lines, measured=found)


def run(
    quick: bool = False,
    plane: ControlPlane | None = None,
    feeds: int = 30,
    objects: int = 4500,
    window: float = 8.0,
) -> Report:
    """Both sides (6 collectors, 100 objects each, a 1 s window with `quick`) on the given
    control plane or one of its own."""
    with contextlib.ExitStack() as stack:
        if plane is None:
            plane = stack.enter_context(running_control_plane())
        found = measure(plane, 6, 100, 1.0) if quick else measure(plane, feeds, objects, window)
    return report(found)


def write_doc(found: Report, document: Path = DOCUMENT) -> None:
    """Replace (or append) this benchmark's section of docs/benchmarks.md with `found`."""
    write_section(
        found,
        SECTION,
        "Replicas that share the work: leadership buckets (scripts/bench/buckets.py)",
        document,
    )


def main(argv: Sequence[str] | None = None) -> int:
    found = parser(__doc__, "6 collectors, 100 objects each, a 1 s window")
    found.add_argument("--feeds", type=int, default=30, help="collectors (a multiple of 6)")
    found.add_argument("--objects", type=int, default=4500, help="backlog per folder")
    found.add_argument("--window", type=float, default=8.0, help="seconds measured")
    found.add_argument(
        "--write-doc", action="store_true", help="write its section of docs/benchmarks.md"
    )
    args = found.parse_args(argv)
    result = run(args.quick, feeds=args.feeds, objects=args.objects, window=args.window)
    if args.write_doc:
        write_doc(result)
    return emit(result, args)


if __name__ == "__main__":
    sys.exit(main())
