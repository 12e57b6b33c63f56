"""A command run as a child process with its wall time, CPU time and peak RSS measured.

The peak RSS of a child reaped by its parent (wait4, RUSAGE_CHILDREN) starts from the parent's
own high-water mark: a vfork'd child execs from the parent's memory, and Linux keeps that
mark. A test process of a few hundred MiB would make every child look that large. So the
command is started by a tiny launcher (a fresh `python -S`, a few MiB) that forks and execs
it, reaps it with wait4 and writes that rusage: the command's own peak, from a small start.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

_LAUNCHER = """
import json, os, sys
report, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        os.execvp(argv[0], argv)
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as handle:
    json.dump({"status": status, "maxrss_kib": usage.ru_maxrss,
               "cpu": usage.ru_utime + usage.ru_stime}, handle)
sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)
"""


@dataclass(frozen=True)
class Measured:
    code: int
    stdout: str
    stderr: str
    seconds: float
    """Wall-clock seconds."""
    cpu_seconds: float
    """User + system CPU seconds of the command (its cost, whatever else the machine ran)."""
    peak_rss_bytes: int
    killed: bool


def run_measured(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> Measured:
    """Run `argv`; its exit code, output, wall and CPU seconds and peak RSS. The command (and
    anything it started) is killed after `timeout` seconds."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "rusage.json"
        out_path, err_path = Path(scratch) / "out", Path(scratch) / "err"
        killed = False
        started = time.monotonic()
        with out_path.open("wb") as out, err_path.open("wb") as err:
            process = subprocess.Popen(
                [sys.executable, "-S", "-c", _LAUNCHER, str(report), *argv],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                killed = True
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        seconds = time.monotonic() - started
        usage = json.loads(report.read_text()) if report.exists() else {}
        status = usage.get("status")
        return Measured(
            code=os.waitstatus_to_exitcode(status) if status is not None else process.returncode,
            stdout=out_path.read_text("utf-8", "replace"),
            stderr=err_path.read_text("utf-8", "replace"),
            seconds=seconds,
            cpu_seconds=float(usage.get("cpu", 0.0)),
            peak_rss_bytes=int(usage.get("maxrss_kib", 0)) * 1024,
            killed=killed,
        )
