"""Build the image with scripts/image/build.sh and run it for real: podman with runc.

Podman keeps its images and containers in a storage of the test session's own (never the
machine's), runs every container with runc (crun cannot run under hybrid cgroups), explicit
rlimits (root lacks CAP_SYS_RESOURCE here, so podman's defaults fail), no CNI network (`none`,
or `host` to reach the test API server on 127.0.0.1) and the restrictions of the chart's pod:
UID/GID 10001, read-only root filesystem with only /tmp writable, all capabilities dropped, no
privilege escalation.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "image" / "build.sh"
GATE_BUILD_SCRIPT = ROOT / "scripts" / "image" / "build-gate.sh"
INSTALLER = ROOT / "scripts" / "system" / "install-debian.sh"
INSTALL_HINT = "install them with `just system` (scripts/system/install-debian.sh, as root)"
RUNTIME_UID = 10001
# A cold build takes minutes; a cached one waits for any other build holding the lock.
BUILD_TIMEOUT = 1800

# What the chart's pod gets, as podman flags (see templates/deployment.yaml and _helpers.tpl).
POD_RESTRICTIONS = (
    "--user", f"{RUNTIME_UID}:{RUNTIME_UID}",
    "--read-only", "--read-only-tmpfs=false",
    "--tmpfs", "/tmp:rw,size=64m,mode=1777",
    "--cap-drop", "ALL",
    "--security-opt", "no-new-privileges",
    "--ulimit", "nofile=1024:1024",
    "--ulimit", "nproc=4096:4096",
)  # fmt: skip


class ImageError(AssertionError):
    """The image could not be built, loaded or run; the message carries the tool's output."""


def build_image(script: Path = BUILD_SCRIPT) -> tuple[Path, str]:
    """Run build.sh or build-gate.sh (cached after the first build); the archive path and its
    stderr."""
    result = subprocess.run(
        [str(script)], capture_output=True, text=True, check=False, timeout=BUILD_TIMEOUT
    )
    if result.returncode != 0:
        raise ImageError(f"{script} failed ({result.returncode}):\n{result.stderr[-6000:]}")
    lines = result.stdout.strip().splitlines()
    if not lines:
        raise ImageError(f"{script} printed no archive path:\n{result.stderr[-3000:]}")
    return Path(lines[-1]), result.stderr


def archive_config(archive: Path) -> dict[str, Any]:
    """The image config (User, Env, Entrypoint, ...) and its RepoTags, read from the archive."""
    with tarfile.open(archive) as tar:
        manifest = _json_member(tar, "manifest.json")
        (entry,) = manifest
        config: dict[str, Any] = _json_member(tar, entry["Config"])
    config["RepoTags"] = entry["RepoTags"]
    return config


def archive_entries(archive: Path, read: str = "") -> list[tuple[tarfile.TarInfo, bytes]]:
    """Every entry (path, mode, owner, time) of the image's layers in the archive, in order,
    with the first 16 bytes of each file whose name ends with `read` (when given)."""
    with tarfile.open(archive) as tar:
        (entry,) = _json_member(tar, "manifest.json")
        found: list[tuple[tarfile.TarInfo, bytes]] = []
        for layer in entry["Layers"]:
            member = tar.extractfile(layer)
            if member is None:
                raise ImageError(f"{layer} is not a file in the archive")
            with tarfile.open(fileobj=member, mode="r|*") as contents:
                for info in contents:
                    head = b""
                    if read and info.isfile() and info.name.endswith(read):
                        data = contents.extractfile(info)
                        head = data.read(16) if data is not None else b""
                    found.append((info, head))
    return found


def archive_files(archive: Path, wanted: Callable[[str], bool]) -> dict[str, bytes]:
    """The content of each file of the image's layers whose path (no leading ./) is `wanted`."""
    found: dict[str, bytes] = {}
    with tarfile.open(archive) as tar:
        (entry,) = _json_member(tar, "manifest.json")
        for layer in entry["Layers"]:
            member = tar.extractfile(layer)
            if member is None:
                raise ImageError(f"{layer} is not a file in the archive")
            with tarfile.open(fileobj=member, mode="r|*") as contents:
                for info in contents:
                    name = info.name.removeprefix("./")
                    if info.isfile() and wanted(name):
                        data = contents.extractfile(info)
                        found[name] = data.read() if data is not None else b""
    return found


def archive_file(archive: Path, path: str) -> bytes:
    """The content of one file of the image's layers."""
    found = archive_files(archive, lambda name: name == path)
    if path not in found:
        raise ImageError(f"no file {path} in {archive}")
    return found[path]


def _json_member(tar: tarfile.TarFile, name: str) -> Any:
    member = tar.extractfile(name)
    if member is None:
        raise ImageError(f"{name} is not a file in the archive")
    return json.load(member)


def require_tools() -> None:
    """podman, runc and conmon, installed from the pinned Debian packages when missing (as
    build.sh installs its tools); ImageError naming the install command if that fails."""
    tools = ("podman", "runc", "conmon")
    if all(shutil.which(tool) for tool in tools):
        return
    subprocess.run([str(INSTALLER)], check=False, timeout=1800)
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise ImageError(f"{', '.join(missing)} not found: {INSTALL_HINT}")


@dataclass
class Podman:
    """Podman on a private storage (`storage`) and run root (`run`, kept short for sockets)."""

    storage: Path
    run: Path

    def base(self) -> list[str]:
        return [
            "podman", "--root", str(self.storage), "--runroot", str(self.run),
            "--tmpdir", str(self.run / "libpod"), "--storage-driver", "overlay",
            "--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
        ]  # fmt: skip

    def __call__(self, *args: str, timeout: float = 300, check: bool = True) -> str:
        result = subprocess.run(
            [*self.base(), *args], capture_output=True, text=True, check=False, timeout=timeout
        )
        if check and result.returncode != 0:
            raise ImageError(f"podman {' '.join(args)} -> {result.returncode}:\n{result.stderr}")
        return result.stdout

    def load(self, archive: Path) -> str:
        out = self("load", "--quiet", "--input", str(archive))
        return out.strip().rsplit(" ", 1)[-1]  # "Loaded image: <name>"

    def run_once(
        self, image: str, *args: str, options: tuple[str, ...] = (), timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """`podman run --rm` in the foreground as the chart's pod; the completed process."""
        return subprocess.run(
            [*self.base(), "run", "--rm", "--network", "none", *POD_RESTRICTIONS, *options,
             image, *args],
            capture_output=True, text=True, check=False, timeout=timeout,
        )  # fmt: skip

    def start(
        self, image: str, *args: str, options: tuple[str, ...] = (), network: str = "none"
    ) -> Container:
        """`podman run --detach` as the chart's pod; the running container."""
        name = f"cr-image-{uuid.uuid4().hex[:10]}"
        self(
            "run", "--detach", "--name", name, "--log-driver", "k8s-file",
            "--network", network, *POD_RESTRICTIONS,
            *options, image, *args,
        )  # fmt: skip
        return Container(self, name)

    def close(self) -> None:
        self("rm", "--all", "--force", "--time", "0", check=False)
        self("rmi", "--all", "--force", check=False)
        shutil.rmtree(self.storage, ignore_errors=True)
        shutil.rmtree(self.run, ignore_errors=True)


@dataclass
class Container:
    podman: Podman
    name: str

    def logs(self) -> str:
        """The container's stdout then its stderr (podman logs splits them the same way)."""
        result = subprocess.run(
            [*self.podman.base(), "logs", self.name], capture_output=True, text=True, check=False
        )
        return result.stdout + result.stderr

    def running(self) -> bool:
        state = self.podman("inspect", "--format", "{{.State.Running}}", self.name, check=False)
        return state.strip() == "true"

    def signal(self, signal: str) -> None:
        self.podman("kill", "--signal", signal, self.name)

    def wait(self, timeout: float) -> int:
        """The exit code once the container stopped; ImageError if it still runs."""
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() > deadline:
                raise ImageError(f"{self.name} still runs after {timeout} s:\n{self.logs()}")
            time.sleep(0.2)
        code = self.podman("inspect", "--format", "{{.State.ExitCode}}", self.name)
        return int(code.strip())

    def terminate(self, timeout: float = 45) -> int:
        """SIGTERM, as the kubelet sends it, and the exit code."""
        self.signal("TERM")
        return self.wait(timeout)

    def remove(self) -> None:
        self.podman("rm", "--force", "--time", "0", self.name, check=False)


def chown_for_runtime(*paths: Path) -> None:
    """Give the container's UID a host folder or file, as fsGroup/emptyDir would."""
    for path in paths:
        subprocess.run(["chown", "-R", f"{RUNTIME_UID}:{RUNTIME_UID}", str(path)], check=True)
