"""Remove everything a node left behind: shims and pod processes, mounts, cgroups, the netns.

Processes the node started directly are stopped by their ManagedProcess. What outlives them --
containerd's shims (they daemonize), the containers they run, the mounts under kubelet's and
containerd's roots, the pods' network namespaces, the node's cgroup subtree (named like its
network namespace) and the network namespace itself -- is found here from the node's recorded
paths, so a run killed before its teardown is swept by the next run (`sweep_stale`).
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
_NETNS_DIRS = ("/run/netns/", "/var/run/netns/")
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
    # A killed run's containerd cannot be asked: its task bundles name the pods' namespaces.
    pod_netns = [*(pod_netns or []), *_bundle_netns(Path(record.state))]
    _kill_shims(record.containerd_socket)
    _kill_cgroup_processes(record.netns)
    _unmount_under([Path(record.workdir), Path(record.state), *pod_netns])
    for path in pod_netns:
        with contextlib.suppress(OSError):
            path.unlink()
    _remove_cgroups(record.netns)
    _remove_links(Path(record.workdir))
    for cached in CNI_CACHE.glob(f"{record.cni_network}-*"):
        cached.unlink(missing_ok=True)
    subprocess.run(["ip", "link", "delete", record.host_link], capture_output=True, check=False)
    if Path("/run/netns", record.netns).exists():
        subprocess.run(["ip", "netns", "delete", record.netns], capture_output=True, check=False)
    shutil.rmtree(record.state, ignore_errors=True)


def leftovers(record: NodeRecord) -> list[str]:
    """What of a node is still there (empty after a complete teardown)."""
    found: list[str] = []
    if Path("/run/netns", record.netns).exists():
        found.append(f"network namespace {record.netns}")
    roots = [Path(record.workdir).resolve(), Path(record.state).resolve()]
    found += [
        f"mount {point}"
        for point in _mount_points()
        if any(point == root or root in point.parents for root in roots)
    ]
    found += [f"cgroup {folder}" for folder in _cgroup_dirs(record.netns)]
    found += [f"shim {pid}" for pid in _shims(record.containerd_socket)]
    found += [f"pod network namespace {path}" for path in _bundle_netns(Path(record.state))]
    return found


def _bundle_netns(state: Path) -> list[Path]:
    """The network namespace files named by the OCI specs of containerd's task bundles."""
    found: list[Path] = []
    for spec_file in state.glob("containerd/io.containerd.runtime.v2.task/*/*/config.json"):
        try:
            spec = json.loads(spec_file.read_text())
        except (OSError, ValueError):
            continue
        for namespace in (spec.get("linux") or {}).get("namespaces") or []:
            path = namespace.get("path") if namespace.get("type") == "network" else None
            # A sandbox's own namespace file; containers joining it name /proc/<pid>/ns/net.
            if path and path.startswith(_NETNS_DIRS) and Path(path).exists():
                found.append(Path(path))
    return sorted(set(found))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _shims(socket: str) -> list[int]:
    """PIDs of the containerd shims serving the containerd at `socket`."""
    pids: list[int] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and socket.encode() in argv:
            pids.append(int(proc.name))
    return pids


def _kill_shims(socket: str) -> None:
    """SIGKILL the containerd shims serving this node's containerd (found by its socket)."""
    for pid in _shims(socket):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def make_cgroup_root(name: str) -> str:
    """Create the node's cgroup subtree `/<name>` in every hierarchy; its path for kubelet.

    A new cpuset cgroup starts with no CPUs and no memory nodes: it gets its parent's.
    """
    for hierarchy in _hierarchies():
        folder = hierarchy / name
        folder.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / knob).exists() and not (folder / knob).read_text().strip():
                (folder / knob).write_text((hierarchy / knob).read_text())
    return f"/{name}"


def _hierarchies() -> list[Path]:
    """The mounted cgroup hierarchies (v1 controllers and the v2 mount beside them)."""
    return [path for path in CGROUP_ROOT.iterdir() if (path / "cgroup.procs").exists()]


def _cgroup_dirs(name: str) -> list[Path]:
    """Every folder of the node's cgroup subtree, deepest first."""
    found: list[Path] = []
    for hierarchy in _hierarchies():
        top = hierarchy / name
        if top.is_dir():
            found.extend(Path(path) for path, _, _ in os.walk(top))
    return sorted(set(found), key=lambda path: len(path.parts), reverse=True)


def _kill_cgroup_processes(name: str) -> None:
    """SIGKILL the pod processes still in the node's cgroups (the shims are gone)."""
    for folder in _cgroup_dirs(name):
        try:
            pids = (folder / "cgroup.procs").read_text().split()
        except OSError:
            continue
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


def _remove_cgroups(name: str) -> None:
    deadline = time.monotonic() + 10.0
    for folder in _cgroup_dirs(name):
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
