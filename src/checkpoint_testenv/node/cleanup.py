"""Remove everything a node left behind: shims and pod processes, mounts, cgroups, the netns.

Processes the node started directly are stopped by their ManagedProcess. What outlives them --
containerd's shims (they daemonize), the containers they run, the mounts under kubelet's and
containerd's roots, the pods' network namespaces, the kubepods cgroups and the node's own network
namespace -- is found here from the node's recorded paths, so a run killed before its teardown is
swept by the next run (`sweep_stale`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

STATE_ROOT = Path("/run/checkpoint-testenv")
CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBEPODS = "kubepods"
CONTAINER_LOG_LINKS = Path("/var/log/containers")
CNI_CACHE = Path("/var/lib/cni/results")


@dataclass(frozen=True)
class NodeRecord:
    """What a node's teardown needs to know, written to its state folder when it starts."""

    owner_pid: int
    netns: str
    host_link: str
    workdir: str
    state: str
    containerd_socket: str
    cni_network: str

    def save(self) -> None:
        Path(self.state).mkdir(parents=True, exist_ok=True)
        (Path(self.state) / "node.json").write_text(json.dumps(asdict(self)))


def sweep_stale() -> list[str]:
    """Clean up after nodes whose owning process is gone; the netns names swept."""
    swept: list[str] = []
    if not STATE_ROOT.is_dir():
        return swept
    for record_file in STATE_ROOT.glob("*/node.json"):
        try:
            record = NodeRecord(**json.loads(record_file.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if _alive(record.owner_pid):
            continue
        remove_leftovers(record)
        swept.append(record.netns)
    return swept


def remove_leftovers(record: NodeRecord, pod_netns: list[Path] | None = None) -> None:
    """Kill the shims and their containers, unmount, remove cgroups, links and the netns.

    `pod_netns`: the pods' network namespace files containerd still had (unmounted and removed).
    """
    _kill_shims(record.containerd_socket)
    _kill_cgroup_processes()
    _unmount_under([Path(record.workdir), Path(record.state), *(pod_netns or [])])
    for path in pod_netns or []:
        with contextlib.suppress(OSError):
            path.unlink()
    _remove_cgroups()
    _remove_links(Path(record.workdir))
    for cached in CNI_CACHE.glob(f"{record.cni_network}-*"):
        cached.unlink(missing_ok=True)
    subprocess.run(["ip", "link", "delete", record.host_link], capture_output=True, check=False)
    if Path("/run/netns", record.netns).exists():
        subprocess.run(["ip", "netns", "delete", record.netns], capture_output=True, check=False)
    shutil.rmtree(record.state, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_shims(socket: str) -> None:
    """SIGKILL the containerd shims serving this node's containerd (found by its socket)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and socket.encode() in argv:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(proc.name), signal.SIGKILL)


def _kubepods_dirs() -> list[Path]:
    """Every kubepods cgroup folder, deepest first."""
    found: list[Path] = []
    for hierarchy in CGROUP_ROOT.iterdir():
        top = hierarchy / KUBEPODS
        if top.is_dir():
            found.extend(Path(path) for path, _, _ in os.walk(top))
            found.append(top)
    return sorted(set(found), key=lambda path: len(path.parts), reverse=True)


def _kill_cgroup_processes() -> None:
    """SIGKILL the pod processes still in the node's kubepods cgroups (the shims are gone)."""
    for folder in _kubepods_dirs():
        try:
            pids = (folder / "cgroup.procs").read_text().split()
        except OSError:
            continue
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def _remove_cgroups() -> None:
    deadline = time.monotonic() + 10.0
    for folder in _kubepods_dirs():
        while True:
            try:
                folder.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)


def _mount_points() -> list[Path]:
    points: list[Path] = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        field = line.split()[4]
        points.append(Path(field.encode().decode("unicode_escape")))
    return points


def _unmount_under(roots: list[Path]) -> None:
    """Unmount every mount point at or under one of `roots`, deepest first."""
    resolved = [root.resolve() for root in roots]
    for point in sorted(_mount_points(), key=lambda path: len(path.parts), reverse=True):
        if any(point == root or root in point.parents for root in resolved):
            result = subprocess.run(["umount", str(point)], capture_output=True, check=False)
            if result.returncode != 0:
                subprocess.run(["umount", "--lazy", str(point)], capture_output=True, check=False)


def _remove_links(workdir: Path) -> None:
    """kubelet's /var/log/containers links that point into this node's pod logs."""
    if not CONTAINER_LOG_LINKS.is_dir():
        return
    for link in CONTAINER_LOG_LINKS.iterdir():
        with contextlib.suppress(OSError):
            if link.is_symlink() and str(workdir) in os.readlink(link):
                link.unlink()
