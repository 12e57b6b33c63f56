"""Child processes that cannot outlive the test run.

Each server runs in its own process group, so a kill reaches everything it started. When started
from the main thread the child also gets PR_SET_PDEATHSIG, so even a SIGKILLed pytest leaves no
orphan (the kernel ties that signal to the forking *thread*, hence main thread only); atexit
teardown covers the other cases.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _die_with_parent() -> None:
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ManagedProcess:
    """One server binary with fixed arguments that can be started, killed and started again."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._popen: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    @property
    def pid(self) -> int | None:
        return self._popen.pid if self._popen is not None else None

    def start(self) -> None:
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self._close_log()
        self._log = self.log_path.open("ab")
        in_main_thread = threading.current_thread() is threading.main_thread()
        preexec: Callable[[], None] | None = _die_with_parent if in_main_thread else None
        self._popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,  # runs only prctl, async-signal-safe
        )

    def kill(self) -> None:
        """SIGKILL the whole process group and reap it: a crash, not a shutdown."""
        self._signal_and_wait(signal.SIGKILL, timeout=10.0)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (graceful), then SIGKILL if it has not exited within `timeout` seconds."""
        if not self._signal_and_wait(signal.SIGTERM, timeout):
            self.kill()
        self._close_log()

    def exit_code(self) -> int | None:
        return self._popen.poll() if self._popen is not None else None

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _signal_and_wait(self, signum: int, timeout: float) -> bool:
        """Signal the group and wait for the leader; False if it outlived `timeout`."""
        popen = self._popen
        if popen is None:
            return True
        if popen.returncode is not None:  # exited by itself and already reaped
            self._popen = None
            return True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signum)
        deadline = time.monotonic() + timeout
        # WNOWAIT leaves the leader a zombie, so its group id cannot be reused yet and the
        # sweep below cannot hit a stranger's processes; only then is it reaped.
        while os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait()
        self._popen = None
        return True

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def wait_until(
    ready: Callable[[], bool], process: ManagedProcess, timeout: float, what: str
) -> float:
    """Poll `ready` until true, failing early (with the log) if the process died; seconds taken."""
    started = time.monotonic()
    deadline = started + timeout
    while True:
        if ready():
            return time.monotonic() - started
        code = process.exit_code()
        if code is not None:
            raise RuntimeError(
                f"{process.name} exited with {code} before {what}:\n{process.log_tail()}"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{process.name} not {what} after {timeout} s:\n{process.log_tail()}"
            )
        time.sleep(0.05)
