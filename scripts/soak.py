#!/usr/bin/env python3
"""The bounded reliability soak (`just soak`): the long versions of tests/reliability.

Starts its own etcd + kube-apiserver on loopback, installs the chart, and runs, each bounded by
a count or a duration: deposed-leader race trials (with Lease deletions), every fault case
several times, SIGKILL crash trials (persist and migration, file store and API server), Lease
recreation with running leaders (recovery time), outages answered by the fault proxy (requests
per outage-second), the load run (50 collectors x 5000 rows persisting every second, 5
minutes by default), and the explorations at --explore depth (full by default: every class of
chunk-race schedules, the fuzz properties at 2000 examples each; `just check` runs a sample of
each, docs/reliability.md "Explorations in two depths"). Prints a table per phase and writes
docs/reliability.md with the figures. A violated guarantee is counted and shown,
never hidden; the exit code is 1 if any occurred.

    just soak                              # the full run (about 15-20 minutes on 2 cores)
    just soak --phases chunks,fuzz --explore sample --seed N   # what `just check` explored
    just soak --minutes 1 --race-trials 50 --crash-trials 12 --fault-rounds 1   # shortened
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "reliability"))

from kubernetes import client  # noqa: E402
from rel_chunk_races import PARTS, Scope, Trial, explore, guard_schedules, random_trials  # noqa: E402
from rel_crash import FilePlace, KubePlace, migrate_trial, persist_trial  # noqa: E402
from rel_faults import CASES, FaultRunner  # noqa: E402
from rel_lease import lease_recreation_trial  # noqa: E402
from rel_load import run_load  # noqa: E402
from rel_outage import outage_trial  # noqa: E402
from rel_races import RaceTrial  # noqa: E402

from checkpoint_runtime import retry  # noqa: E402
from checkpoint_runtime.format import codec  # noqa: E402
from checkpoint_testenv import helm  # noqa: E402
from checkpoint_testenv.controlplane import ControlPlane, running_control_plane  # noqa: E402
from checkpoint_testenv.faultproxy import FaultProxy, ProxyPool  # noqa: E402
from checkpoint_testenv.support import exploration  # noqa: E402
from checkpoint_testenv.support.kubetarget import KubeTarget  # noqa: E402

DOC = ROOT / "docs" / "reliability.md"
EXPLORE_SECTION = "## Explorations in two depths (by hand)"
NODE_SECTION = "## On the node (tests/node, by hand)"
KEPT_SECTIONS = (EXPLORE_SECTION, NODE_SECTION)
"""Written by hand, kept as they are when the soak rewrites the doc (from the first one on)."""
MIB = 1024 * 1024


def table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


class Soak:
    def __init__(self, args: argparse.Namespace, plane: ControlPlane, target: KubeTarget) -> None:
        self.args = args
        self.plane = plane
        self.target = target
        self.sections: list[str] = []
        self.violations: list[str] = []
        self._proxies = ProxyPool(plane)
        self.exploration = exploration.current()  # main() set the depth and seed

    def proxy(self) -> FaultProxy:
        return self._proxies.make()

    def close_proxies(self) -> None:
        self._proxies.close()

    def section(self, title: str, text: str) -> None:
        block = f"## {title}\n\n{text}\n"
        print(block, flush=True)
        self.sections.append(block)

    def violation(self, phase: str, error: BaseException) -> None:
        message = f"{phase}: {type(error).__name__}: {error}"
        print("VIOLATION", message, file=sys.stderr, flush=True)
        traceback.print_exception(error, file=sys.stderr)
        self.violations.append(message)

    # -- phases --------------------------------------------------------------------------------

    def races(self) -> None:
        started = time.monotonic()
        total: Counter[str] = Counter()
        acks = violations = 0
        for seed in range(self.args.seed, self.args.seed + self.args.race_trials):
            try:
                result = RaceTrial(self.target, seed, steps=self.args.race_steps).run()
                total.update(result.outcomes)
                acks += result.acks
            except AssertionError as error:
                violations += 1
                self.violation(f"race seed {seed}", error)
            finally:
                self.target.close()
        seconds = time.monotonic() - started
        rows = [
            ["trials (seeds)", f"{self.args.race_trials} ({self.args.seed}.."
             f"{self.args.seed + self.args.race_trials - 1})"],
            ["steps per trial", self.args.race_steps],
            ["operations", ", ".join(f"{k} {v}" for k, v in sorted(total.items())
                                     if k in ("set", "delete", "flush", "batch", "reopen",
                                              "promote", "take-ownership", "concurrent-flush",
                                              "recreate-lease"))],
            ["acknowledged shard writes", acks],
            ["refused as stale (ConflictError)", total["conflict"]],
            ["refused as fenced (EpochFencedError)", total["fenced"]],
            ["Lease deletions / epoch raised by the new Lease's leader",
             f"{total['recreate-lease']} / {total['epoch-raised']}"],
            ["take-overs refused their renewal (deposed, LeadershipLostError)",
             total["renewal-refused"]],
            ["creates that took over a deposed writer's new shard", total["created-over-older"]],
            ["concurrent flushes with a winner / none eligible",
             f"{total['concurrent-winner']} / {total['concurrent-no-winner']}"],
            ["violations (stale overwrite, lost ack, epoch backwards)", violations],
            ["wall time", f"{seconds:.0f} s"],
        ]  # fmt: skip
        self.section("Deposed-leader races", table(["", "figure"], rows))

    def chunks(self) -> None:
        """Chunked shards: the guard schedules, every schedule of two writers in the small
        scope (one part of each at --explore sample), then random schedules in the larger one
        (tests/reliability/rel_chunk_races.py)."""
        from checkpoint_runtime.store import planner

        saved = planner.INLINE_BASE_MAX_BYTES, planner.CHUNK_TARGET_BYTES
        planner.INLINE_BASE_MAX_BYTES, planner.CHUNK_TARGET_BYTES = 0, 64  # chunk a few rows
        rows: list[list[Any]] = []
        depth, parts = self.exploration, PARTS
        clean, leftover = (depth.part(parts, f"chunk races, leftover {b}") for b in (False, True))
        try:
            runs = [
                (f"the {len(guard_schedules())} guard schedules (every depth)",
                 lambda: (Trial(self.target, Scope(leftover=True, crashes=0), chooser()).run()
                          for chooser in guard_schedules().values())),
                (_every("clean", clean, parts),
                 lambda: explore(self.target, Scope(), part=_part(clean, parts))),
                (_every("a slot left by a crash", leftover, parts),
                 lambda: explore(self.target, Scope(leftover=True), part=_part(leftover, parts))),
                (f"{self.args.chunk_trials} random schedules, 2 chunks, 2 persists each",
                 lambda: random_trials(self.target, Scope(True, 2, 2, 1), self.args.seed,
                                       self.args.chunk_trials)),
            ]  # fmt: skip
            for title, outcomes in runs:
                started, counts, violations = time.monotonic(), Counter[str](), 0
                try:
                    for outcome in outcomes():
                        counts["schedules"] += 1
                        counts["crashed"] += bool(outcome.crashed)
                        counts["acked"] += len(outcome.acked)
                        counts["refused"] += len(outcome.failed)
                except AssertionError as error:
                    violations += 1
                    self.violation(f"chunk races: {title}", error)
                rows.append([title, counts["schedules"], counts["acked"], counts["refused"],
                             counts["crashed"], violations,
                             f"{time.monotonic() - started:.0f} s"])  # fmt: skip
        finally:
            planner.INLINE_BASE_MAX_BYTES, planner.CHUNK_TARGET_BYTES = saved
        headers = ["scope", "schedules", "acked persists", "refused", "with a crash",
                   "violations", "wall time"]  # fmt: skip
        self.section("Chunked-shard races", f"{CHUNK_RACES_NOTE}\n\n{table(headers, rows)}")

    def faults(self) -> None:
        runner = FaultRunner(self.plane, self.target, self.proxy)
        outcomes: dict[str, Counter[str]] = {case.name: Counter() for case in CASES}
        seconds: dict[str, list[float]] = {case.name: [] for case in CASES}
        stored: dict[str, Counter[str]] = {case.name: Counter() for case in CASES}
        for _ in range(self.args.fault_rounds):
            for case in CASES:
                try:
                    result = runner.run(case)
                except AssertionError as error:
                    outcomes[case.name]["VIOLATION"] += 1
                    self.violation(f"fault {case.name}", error)
                    continue
                finally:
                    self.close_proxies()
                outcomes[case.name][result.outcome] += 1
                stored[case.name][result.stored] += 1
                seconds[case.name].append(result.seconds)
                if result.outcome not in case.expected:
                    self.violations.append(f"fault {case.name}: outcome {result.outcome}")
        rows = []
        for case in CASES:
            got = outcomes[case.name]
            verdict = "ok" if set(got) <= set(case.expected) else "UNEXPECTED"
            rows.append(
                [
                    f"`{case.name}`",
                    case.description,
                    " or ".join(case.expected),
                    ", ".join(f"{k} x{v}" for k, v in sorted(got.items())),
                    ", ".join(f"{k} x{v}" for k, v in sorted(stored[case.name].items())),
                    f"{statistics.mean(seconds[case.name]):.1f}" if seconds[case.name] else "-",
                    verdict,
                ]
            )
        text = table(
            ["case", "fault", "expected", "outcomes", "API holds after", "s", "verdict"], rows
        )
        note = (
            "\n\nAfter every case: the servers are up again, the API holds v1 or v2 (v2 whenever "
            "the write was acknowledged), a fresh store reads exactly the API state and writes "
            "v3. `commit` = `batch` returned (recognised by write id where the answer was lost)."
        )
        self.section(f"Faults ({self.args.fault_rounds} round(s) of every case)", text + note)

    def lease(self) -> None:
        """Lease deleted under a running leader, then deleted with the leader paused."""
        results = []
        violations = 0
        started = time.monotonic()
        for seed in range(self.args.seed, self.args.seed + self.args.lease_trials):
            try:
                results.append(lease_recreation_trial(self.target, seed))
            except AssertionError as error:
                violations += 1
                self.violation(f"lease seed {seed}", error)
            finally:
                self.target.close()
        recovery = sorted(r.recovery_seconds for r in results)
        gaps = sorted(r.live_gap_seconds for r in results)
        epochs = ", ".join(f"{a}/{b}/{c}" for a, b, c in sorted({r.epochs for r in results}))
        rows = [
            ["trials (seeds)", f"{self.args.lease_trials} ({self.args.seed}.."
             f"{self.args.seed + self.args.lease_trials - 1})"],
            ["Lease timings (lease / renew deadline / retry)", "3 / 2 / 0.5 s"],
            ["deleted under a running leader: largest gap between its writes p50 / max",
             f"{_pct(gaps, 50):.2f} / {gaps[-1]:.2f} s" if gaps else "-"],
            ["deleted with the leader paused: deletion to the new leader's first write "
             "p50 / max", f"{_pct(recovery, 50):.2f} / {recovery[-1]:.2f} s" if recovery else "-"],
            ["epochs: old leader / new Lease's leader elected / after its renewal", epochs],
            ["the resumed old leader's writes and take-overs refused",
             sum(r.stale_refused for r in results)],
            ["violations (stale write acknowledged, shard not the new leader's, no recovery)",
             violations],
            ["wall time", f"{time.monotonic() - started:.0f} s"],
        ]  # fmt: skip
        note = (
            "\n\nA write every 0.1 s on 3 shards. Without its renewal raising the epoch, the "
            "new Lease's leader (elected at epoch 0) would be refused on every shard stamped "
            "under the old Lease, at every restart: it would never recover."
        )
        self.section("Lease recreation", table(["", "figure"], rows) + note)

    def outage(self) -> None:
        """Every request answered by the proxy for T seconds; the store retries and recovers."""
        cases = [(500, "", None), (503, "ServiceUnavailable", 1), (429, "TooManyRequests", 2)]
        rows = []
        for seconds in (float(value) for value in self.args.outage_seconds.split(",")):
            for status, reason, retry_after in cases:
                try:
                    result = outage_trial(
                        self.target,
                        self.proxy,
                        status=status,
                        reason=reason,
                        retry_after=retry_after,
                        seconds=seconds,
                        shards=self.args.outage_shards,
                    )
                except AssertionError as error:
                    self.violation(f"outage {status} {seconds:g} s", error)
                    rows.append([status, "-", f"{seconds:g}", "VIOLATION", "-", "-", "-"])
                    continue
                finally:
                    self.close_proxies()
                    self.target.close()
                rows.append(
                    [
                        status,
                        retry_after or "-",
                        f"{seconds:g}",
                        result.answered,
                        f"{result.per_shard_per_second:.2f}",
                        f"{result.bound_per_shard / seconds:.2f}",
                        f"{result.recovery_seconds:.2f}",
                    ]
                )
        headers = [
            "status",
            "Retry-After",
            "outage s",
            f"requests ({self.args.outage_shards} shards)",
            "per shard per outage-second",
            "bound",
            "commit after the outage, s",
        ]
        note = (
            "\n\nThe fault proxy answers every request itself (reads and writes) for the whole "
            "outage. The bound is the documented one per shard (write loop and read-back loop "
            f"each at most {retry.UNCAPPED_STEPS + 1} + T / "
            f"{retry.JITTER_MIN * retry.BACKOFF_MAX:g}, or 1 + T / Retry-After) divided by T. "
            "Every batch committed once the server answered again."
        )
        self.section("Outage with backoff", table(headers, rows) + note)

    def crashes(self) -> None:
        kinds: list[tuple[str, str, Callable[[int], Any]]] = [
            ("persist", "file", lambda seed: persist_trial(FilePlace(self.tmp), seed)),
            ("persist", "kubernetes", lambda seed: persist_trial(KubePlace(self.target), seed)),
            ("migrate", "file", lambda seed: migrate_trial(FilePlace(self.tmp), seed)),
            ("migrate", "kubernetes", lambda seed: migrate_trial(KubePlace(self.target), seed)),
        ]
        per_kind = max(1, self.args.crash_trials // len(kinds))
        rows = []
        started = time.monotonic()
        for mode, backend, trial in kinds:
            outcomes: Counter[str] = Counter()
            temp_files = temp_after = 0
            progress: list[int] = []
            for seed in range(self.args.seed, self.args.seed + per_kind):
                try:
                    result = trial(seed)
                except AssertionError as error:
                    outcomes["VIOLATION"] += 1
                    self.violation(f"crash {mode}/{backend} seed {seed}", error)
                    continue
                finally:
                    self.target.close()
                outcomes[result.outcome] += 1
                temp_files += result.temp_files
                temp_after += result.temp_files_after_reopen
                progress.append(result.acknowledged)
            rows.append(
                [
                    mode,
                    backend,
                    per_kind,
                    ", ".join(f"{k} x{v}" for k, v in sorted(outcomes.items())),
                    f"{min(progress)}..{max(progress)}" if progress else "-",
                    f"{temp_files} / {temp_after}",
                ]
            )
        headers = ["trial", "backend", "SIGKILLs", "outcomes", "acknowledged at kill"]
        text = table([*headers, "temp files at kill / after reopen"], rows)
        note = (
            f"\n\n{per_kind * len(kinds)} SIGKILLs in {time.monotonic() - started:.0f} s. "
            "persist: `acked` = every shard at the last acknowledged batch, `in-flight-landed` = "
            "a shard at the batch in flight (never a mix, never older); 'acknowledged at kill' "
            "is the last acknowledged batch. migrate: `resumed` = the next open finished the "
            "migration; 'acknowledged at kill' counts shard writes done before the kill. Every "
            "reopen succeeded with no corrupt shard; file-store shards are also read directly. "
            "Temp files are `.<name>.tmp` files of a write killed before its rename: never "
            "read; the next open of the file store sweeps them."
        )
        self.section(f"Crashes ({per_kind} per kind)", text + note)

    def load(self) -> None:
        self._load(self.args.minutes * 60, self.args.dirty_per_second, f"{self.args.minutes:g} min")

    def saturation(self) -> None:
        """Every collector dirty in every window: how long one persist of all shards takes."""
        self._load(
            self.args.saturation_windows,
            self.args.collectors,
            f"saturated: every shard dirty, {self.args.saturation_windows} windows",
        )

    def _load(self, seconds: float, dirty: int, title: str) -> None:
        try:
            result = run_load(
                self.target,
                self.proxy,
                collectors=self.args.collectors,
                rows=self.args.rows,
                seconds=seconds,
                dirty_per_window=dirty,
            )
        except AssertionError as error:
            self.violation(f"load ({title})", error)
            return
        finally:
            self.close_proxies()
            self.target.close()
        persist = sorted(result.persist_seconds)
        growth = result.rss_growth
        exceeded = sum(w > d for w, d in zip(result.writes, result.dirty, strict=True))
        rows = [
            ["collectors x rows", f"{result.collectors} x {result.rows_per_collector}"],
            ["initial store (one batch, every shard created)", f"{result.setup_seconds:.1f} s"],
            ["windows (1 s each)", result.windows],
            ["dirty shards per window", dirty],
            ["API writes (PUT/POST) / dirty shards, total", f"{sum(result.writes)} / "
             f"{sum(result.dirty)}"],
            ["windows with more writes than dirty shards", exceeded],
            ["persist per window p50 / p95 / max",
             f"{_pct(persist, 50):.2f} / {_pct(persist, 95):.2f} / {persist[-1]:.2f} s"],
            ["windows overrun (persist longer than the second)", result.overruns],
            ["RSS after window 1 / at the end / max",
             f"{result.rss[0] / MIB:.0f} / {result.rss[-1] / MIB:.0f} / "
             f"{max(result.rss) / MIB:.0f} MiB"],
            ["RSS growth after warm-up", f"{growth / MIB:+.1f} MiB"],
            ["errors", 0],
        ]  # fmt: skip
        self.section(f"Load ({title})", table(["", "figure"], rows))

    def suite(self) -> None:
        """What CI runs of the same campaign: the tests per file, counted by collection."""
        command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/reliability"]
        listing = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        per_file: Counter[str] = Counter()
        for line in listing.stdout.splitlines():
            if "::" in line:
                per_file[line.split("::", 1)[0].removeprefix("tests/reliability/")] += 1
        rows = [
            [f"`{name}`", count, SUITE_NOTES.get(name, "")]
            for name, count in sorted(per_file.items())
        ]
        rows.append(["total", sum(per_file.values()), ""])
        self.section("CI suite (pytest tests/reliability)", table(["file", "tests", "what"], rows))

    def fuzz(self) -> None:
        """The campaign's hypothesis properties and API mutations at the soak's depth (pytest
        tests/reliability/test_rel_fuzz.py with CHECKPOINT_EXPLORE and its seed)."""
        import test_rel_fuzz  # its sizes follow the depth main() set

        started = time.monotonic()
        test = "tests/reliability/test_rel_fuzz.py"
        command = [sys.executable, "-m", "pytest", test, "-q", "-p", "no:cacheprovider"]
        environment = {**os.environ, **self.exploration.environment()}
        run = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, env=environment, check=False
        )
        closing = (run.stdout.strip().splitlines() or ["(no output)"])[-1].strip("= ")
        if run.returncode != 0:
            self.violations.append(
                f"fuzz: {closing}; replay: {self.exploration.replay_command(test)}\n"
                f"{run.stdout[-3000:]}"
            )
        rows = [
            ["depth, seed", f"{self.exploration.depth}, {self.exploration.seed}"],
            ["examples per property", test_rel_fuzz.EXAMPLES],
            ["pytest", closing],
            ["wall time", f"{time.monotonic() - started:.0f} s"],
        ]
        self.section("Fuzzing at the soak's depth", table(["", "figure"], rows))

    def atheris(self) -> None:
        """Coverage-guided fuzzing of the decoder, if a Python with atheris was given."""
        if not self.args.atheris:
            return
        corpus = self.tmp / "atheris-corpus"
        corpus.mkdir()
        shard = "tn/objectstore/feed-a"
        rows = {f"{shard}/cursor": "c", f"{shard}/seen/aWQx": "2026-03-01T00:00:00.000000001Z"}
        (corpus / "seed").write_bytes(codec.encode_envelope(shard, rows))
        environment = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{site_packages()}"}
        command = [
            self.args.atheris,
            str(ROOT / "tests" / "reliability" / "atheris_decoder.py"),
            f"-max_total_time={self.args.atheris_seconds}",
            str(corpus),
        ]
        run = subprocess.run(command, capture_output=True, text=True, env=environment, check=False)
        lines = run.stderr.splitlines()
        done = [line for line in lines if line.startswith("Done")]
        status = [line for line in lines if line.startswith("#") and "cov:" in line]
        crashed = run.returncode != 0
        if crashed:
            self.violations.append(f"atheris: decoder crash\n{run.stderr[-1500:]}")
        rows = [
            ["runs", done[0].removeprefix("Done ") if done else "-"],
            ["final libFuzzer status", status[-1].split("\t", 1)[-1] if status else "-"],
            ["crashes (exceptions other than CorruptShardError)", 1 if crashed else 0],
        ]
        self.section("atheris on the shard decoder", table(["", "figure"], rows))

    tmp: Path


SUITE_NOTES = {
    "test_rel_races.py": (
        "20 fixed seeds of deposed-leader interleavings (and 6 that rotate with the commit), "
        "oracle check, negative controls"
    ),
    "test_rel_faults.py": "one test per CI fault case, expected outcome asserted",
    "test_rel_crashes.py": "SIGKILL during persist and migration, torn-write negative control",
    "test_rel_fuzz.py": (
        "hypothesis (150 examples each, seeded by the commit) + 10 seeded API mutations"
    ),
    "test_rel_exploration.py": "the depths, seeds and searches of the explorations, no server",
    "test_rel_bad_inputs.py": "named error per bad input; no write during open",
    "test_rel_load.py": "50 x 5000 rows, 10 windows of 0.25 s, writes == dirty shards, RSS",
    "test_rel_known_bugs.py": "the bugs below: open ones strict xfail, fixed ones regression",
    "test_rel_lease.py": "Lease deleted under a running leader and with it paused: recovery",
    "test_rel_outage.py": "every request answered 500 / 503 for 3 s: retry bound, commit after",
    "test_rel_chunk_races.py": (
        "chunked shards: the 3 guard schedules, one part of 4 of every class of schedules of "
        "two writers (two scopes), 20 random schedules, negative control"
    ),
}
CHUNK_RACES_NOTE = (
    "Two writers, a deposed leader and its successor (which acquires the real Lease mid-run), "
    "each persisting a compaction through the real store; every API call of either waits at a "
    "gate and the explorer picks who goes next or crashes a writer there. Checked after every "
    "call that writes (admin reads, the checker's own decoder): the head never names a chunk "
    "whose content "
    "differs from its manifest, no acknowledged row is lost; at the end a restarted leader reads "
    'the stored state and persists. "Every schedule" is every class of schedules up to the '
    "order of independent calls (sleep sets); the guard schedules are one fixed schedule per "
    "rule of store/chunked.py that breaks the chunks when the rule's guard is missing. The "
    "negative control (leadership proven before the slot is read instead of after) trips the "
    "checker: `pytest tests/reliability/test_rel_chunk_races.py`, which runs the same scopes "
    "(one part of each in `just check`)."
)


def _part(index: int | None, parts: int) -> tuple[int, int] | None:
    return None if index is None else (index, parts)


def _every(scope: str, index: int | None, parts: int) -> str:
    if index is None:
        return f"every schedule, {scope}"
    return f"part {index} of {parts} of the schedules, {scope}"


def site_packages() -> str:
    import sysconfig

    return sysconfig.get_paths()["purelib"]


def _pct(values: list[float], pct: int) -> float:
    return values[min(len(values) - 1, max(0, round(pct / 100 * len(values)) - 1))]


def known_bugs() -> str:
    """Bugs found: open ones (strict xfails) and fixed ones (now regression tests)."""
    import test_rel_known_bugs as module

    rows = []
    for name in sorted(dir(module)):
        function = getattr(module, name)
        for mark in getattr(function, "pytestmark", []):
            if mark.name == "xfail":
                rows.append([f"`{name}`", "open (strict xfail)", mark.kwargs.get("reason", "")])
    for name, bug in sorted(module.FIXED.items()):
        rows.append([f"`{name}`", "fixed (regression test)", bug])
    return table(["test", "state", "bug as found"], rows)


def write_doc(
    args: argparse.Namespace, soak: Soak, wall: float, plane: ControlPlane, load: list[float]
) -> None:
    full = (
        args.minutes >= 5
        and args.race_trials >= 200
        and args.crash_trials >= 50
        and args.fault_rounds >= 3
    )
    kind = "full" if full else "**shortened**"
    flags = " ".join(sys.argv[1:]) or "(defaults)"
    shortened = (
        ""
        if full
        else "The full run is `just soak` (defaults: 200 race trials, 52 SIGKILLs, every fault "
        "case 3 times, 5 minutes of load); this one used fewer trials to fit the session.\n"
    )
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = f"""# Reliability campaign: figures

Generated by `just soak` ({kind} run: `scripts/soak.py {flags}`) on {when},
{platform.machine()}, Python {platform.python_version()}; wall time {wall / 60:.1f} min. Real
kube-apiserver + etcd on loopback (control plane up in {plane.startup_total:.1f} s), the chart
installed with the helm CLI, every store acting as the chart's ServiceAccount. Machine load
average (1 min) at the start / end: {load[0]:.1f} / {os.getloadavg()[0]:.1f} on {os.cpu_count()}
cores (other work shared the machine: timings are pessimistic). Violations of a guarantee:
**{len(soak.violations)}**.
{shortened}
What is checked, and how, is described in the docstrings of `tests/reliability/rel_*.py`; CI runs
the same scenarios at a smaller size (`pytest tests/reliability`: fixed seeds, and the sample
depth of the explorations, below). Explorations here: depth {args.explore}, seed {args.seed}.
"""
    bugs = "## Bugs found (`tests/reliability/test_rel_known_bugs.py`)\n\n" + known_bugs() + "\n"
    violations = ""
    if soak.violations:
        violations = "## Violations\n\n" + "\n".join(f"- {v}" for v in soak.violations) + "\n"
    # The sections written by hand (the explorations' depths; the node tests, not part of the
    # soak) are kept as they are.
    text = DOC.read_text() if DOC.is_file() else ""
    starts = [text.index(heading) for heading in KEPT_SECTIONS if heading in text]
    kept = text[min(starts) :] if starts else ""
    DOC.write_text("\n".join([header, *soak.sections, violations, bugs, kept]).rstrip() + "\n")
    print(f"wrote {DOC.relative_to(ROOT)}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="load duration (default 5)")
    parser.add_argument("--race-trials", type=int, default=200)
    parser.add_argument("--race-steps", type=int, default=30)
    parser.add_argument("--chunk-trials", type=int, default=200, help="random chunk schedules")
    parser.add_argument("--crash-trials", type=int, default=52, help="split over 4 kinds")
    parser.add_argument("--fault-rounds", type=int, default=3, help="times every case runs")
    parser.add_argument("--collectors", type=int, default=50)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--dirty-per-second", type=int, default=5)
    parser.add_argument("--seed", type=int, default=5000)
    parser.add_argument(
        "--explore",
        choices=exploration.DEPTHS,
        default="full",
        help="depth of the explorations (default full: every class of chunk schedules, 2000 "
        "examples per fuzz property; sample: what `just check` runs, for --seed)",
    )
    parser.add_argument("--saturation-windows", type=int, default=5)
    parser.add_argument("--lease-trials", type=int, default=10)
    parser.add_argument("--outage-seconds", default="5,15", help="outage lengths, comma-separated")
    parser.add_argument("--outage-shards", type=int, default=3)
    parser.add_argument(
        "--phases",
        default="suite,races,chunks,fuzz,lease,faults,outage,crashes,load,saturation,atheris",
    )
    parser.add_argument("--atheris", help="a Python with atheris installed (optional phase)")
    parser.add_argument("--atheris-seconds", type=int, default=60)
    parser.add_argument("--no-doc", action="store_true", help="print only, keep the doc")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # The explorations of this process and of the pytest runs it starts: --explore, --seed.
    os.environ[exploration.EXPLORE_ENV] = args.explore
    os.environ[exploration.SEED_ENV] = str(args.seed)
    started = time.monotonic()
    load = [os.getloadavg()[0]]
    with (
        tempfile.TemporaryDirectory(prefix="soak-") as workdir,
        running_control_plane(Path(workdir) / "plane") as plane,
    ):
        release = helm.install(plane, plane.create_namespace("soak"))
        with plane.admin_api() as api:
            target = KubeTarget.of_release(release, client.CoreV1Api(api))
            soak = Soak(args, plane, target)
            soak.tmp = Path(workdir)
            for phase in args.phases.split(","):
                print(f"-- {phase}", flush=True)
                getattr(soak, phase)()
            wall = time.monotonic() - started
            if not args.no_doc:
                write_doc(args, soak, wall, plane, load)
    print(f"violations: {len(soak.violations)}")
    return 1 if soak.violations else 0


if __name__ == "__main__":
    sys.exit(main())
