"""A real OCI registry for the release tests: go-containerregistry's `crane registry serve`.

The binary comes from scripts/testenv/build-registry.sh (built from the Go module at the version
pinned in scripts/testenv/registry/go.mod, cached per pin), or from the folder named by
CHECKPOINT_REGISTRY_BIN. A missing binary is an error, never a reason to skip. The same `crane`
is the registry's client (push, digest, manifest, copy).

The registry listens on 127.0.0.1 (or e.g. the test node link's host address, which the node's
containerd reaches) on a port the kernel picks (the server logs it), over plain HTTP, with no
authentication; manifests are kept in memory and blobs in a temporary folder. It
serves the OCI distribution API but not the referrers API: signatures and attestations are found
under cosign's tags beside the digest they sign (`sha256-<hex>.sig`, `.att`).
"""

from __future__ import annotations

import atexit
import re
import subprocess
import urllib.error
import urllib.request
from functools import cache
from pathlib import Path

from checkpoint_testenv.binaries import REPO_ROOT, locate_built
from checkpoint_testenv.processes import ManagedProcess, wait_until

BIN_ENV = "CHECKPOINT_REGISTRY_BIN"
BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-registry.sh"
_START_TIMEOUT = 30.0
_PORT = re.compile(rb"serving on port (\d+)")


@cache
def locate() -> Path:
    """The folder holding `crane`, building it if needed."""
    return locate_built(BIN_ENV, BUILD_SCRIPT, ("crane",))


class Registry:
    """One `crane registry serve` process on loopback, and `crane` as its client."""

    def __init__(self, crane: Path, workdir: Path, address: str = "127.0.0.1") -> None:
        self.crane_path = crane
        self.workdir = workdir
        self.address = address
        self.port = 0
        self.startup_seconds = 0.0
        (workdir / "blobs").mkdir(parents=True, exist_ok=True)
        argv = [
            str(crane),
            "registry",
            "serve",
            f"--address={address}:0",
            f"--disk={workdir / 'blobs'}",
        ]
        self._process = ManagedProcess("crane registry serve", argv, workdir / "registry.log")

    @property
    def host(self) -> str:
        """host:port, the registry part of an image reference (`{host}/name:tag`)."""
        return f"{self.address}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process.running

    def start(self) -> None:
        """Start the server and wait until it answers the distribution API's version check."""
        atexit.register(self.stop)
        self._process.start()
        self.startup_seconds = wait_until(self._answers, self._process, _START_TIMEOUT, "serving")

    def stop(self) -> None:
        """Shut the server down; safe to call more than once."""
        self._process.stop(timeout=5.0)

    def _answers(self) -> bool:
        if not self.port:
            found = _PORT.search(self._process.log_path.read_bytes())
            if found is None:
                return False
            self.port = int(found[1])
        try:
            with urllib.request.urlopen(f"http://{self.host}/v2/", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    # ---- the client ------------------------------------------------------------------------

    def crane(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run `crane ARGS` against this registry (plain HTTP allowed); output captured."""
        result = subprocess.run(
            [str(self.crane_path), "--insecure", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"crane {' '.join(args)} failed: {result.stderr.strip()}")
        return result

    def digest(self, reference: str) -> str:
        """The manifest digest (`sha256:...`) that `reference` (a tag or a digest) resolves to."""
        return self.crane("digest", reference).stdout.strip()

    def manifest(self, reference: str) -> str:
        """The manifest `reference` resolves to, as the registry serves it."""
        return self.crane("manifest", reference).stdout

    def tags(self, repository: str) -> list[str]:
        """The tags of `repository` (host/name)."""
        return self.crane("ls", repository).stdout.split()


def start_registry(crane: Path, workdir: Path, address: str = "127.0.0.1") -> Registry:
    """Start a Registry in `workdir` (the port is the kernel's choice, so none is ever taken)."""
    registry = Registry(crane, workdir, address)
    try:
        registry.start()
    except BaseException:
        registry.stop()
        raise
    return registry
