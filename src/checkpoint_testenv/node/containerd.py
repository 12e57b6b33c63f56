"""The node's containerd: its config, its process and the images it is given.

Its root, state and socket are the run's own (nothing under /var/lib/containerd or
/run/containerd), runc with cgroupfs is the runtime, the sandbox image is the locally built pause
image, and pods get their network from the bridge CNI config (cni.py).
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

from checkpoint_testenv.node.netns import NetNamespace, run
from checkpoint_testenv.node.preflight import CNI_BIN_DIR
from checkpoint_testenv.processes import ManagedProcess, wait_until

NAMESPACE = "k8s.io"  # the containerd namespace the CRI plugin (and so kubelet) uses
_START_TIMEOUT = 60.0

_CONFIG = """\
version = 2
root = "{root}"
state = "{state}"
# Plugins the node never uses (and one that would write under /opt).
disabled_plugins = [
  "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  # Root here has no CAP_SYS_RESOURCE: the pause container's negative OOM score would fail.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin_dir}"
    conf_dir = "{cni_conf_dir}"
  # One folder per registry host with its hosts.toml (none by default: pulls go to the host the
  # image names, over HTTPS); read at every pull, so a registry can be added while it runs.
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "{registry_config_path}"
"""

# A registry the node pulls from over plain HTTP (the test registry, on the node link's host
# address): pulls and tag resolution go to it.
_PLAIN_HTTP_HOST = """\
server = "http://{host}"

[host."http://{host}"]
  capabilities = ["pull", "resolve"]
"""


class Containerd:
    """One containerd for the node, with its own root, state and socket."""

    def __init__(self, netns: NetNamespace, workdir: Path, state: Path, sandbox_image: str) -> None:
        self.netns = netns
        self.root = workdir / "containerd"
        self.state = state / "containerd"
        self.socket = state / "containerd.sock"
        self.cni_conf_dir = workdir / "cni" / "net.d"
        self.registry_config_path = workdir / "certs.d"
        config = workdir / "containerd.toml"
        for folder in (self.root, self.state, self.cni_conf_dir, self.registry_config_path):
            folder.mkdir(parents=True, exist_ok=True)
        config.write_text(
            _CONFIG.format(
                root=self.root,
                state=self.state,
                socket=self.socket,
                sandbox_image=sandbox_image,
                cni_bin_dir=CNI_BIN_DIR,
                cni_conf_dir=self.cni_conf_dir,
                registry_config_path=self.registry_config_path,
            )
        )
        self.process = ManagedProcess(
            "containerd",
            netns.wrap(["containerd", "--config", str(config), "--log-level", "warn"]),
            workdir / "containerd.log",
        )

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    def start(self) -> float:
        self.process.start()
        return wait_until(self._answers, self.process, _START_TIMEOUT, "serving")

    def stop(self) -> None:
        self.process.stop(timeout=15.0)

    def ctr(self, *args: str) -> str:
        return run(
            ["ctr", "--address", str(self.socket), "--namespace", NAMESPACE, *args],
            f"ctr {args[0]}",
        )

    def import_image(self, archive: Path) -> float:
        """Import an image archive (docker or OCI) and unpack it; seconds taken."""
        begun = time.monotonic()
        self.ctr("images", "import", str(archive))
        return time.monotonic() - begun

    def pull_over_plain_http(self, host: str) -> None:
        """Pull images named `host/...` (host:port) from that registry over plain HTTP."""
        folder = self.registry_config_path / host
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts.toml").write_text(_PLAIN_HTTP_HOST.format(host=host))

    def images(self) -> list[str]:
        return self.ctr("images", "list", "--quiet").split()

    def task_pid(self, container_id: str) -> int:
        """The host PID of a running container (`containerd://<id>` in a pod's status)."""
        for line in self.ctr("tasks", "list").splitlines()[1:]:
            fields = line.split()
            if fields and fields[0] == container_id.removeprefix("containerd://"):
                return int(fields[1])
        raise RuntimeError(f"no running task for container {container_id}")

    def sandbox_netns_paths(self) -> list[Path]:
        """The network namespace files of the pod sandboxes containerd knows about."""
        paths: list[Path] = []
        for container in self.ctr("containers", "list", "--quiet").split():
            try:
                info = json.loads(self.ctr("containers", "info", container))
            except (RuntimeError, json.JSONDecodeError):
                continue
            spec = info.get("Spec") or {}
            for namespace in (spec.get("linux") or {}).get("namespaces") or []:
                if namespace.get("type") == "network" and namespace.get("path"):
                    paths.append(Path(namespace["path"]))
        return paths

    def kill_tasks(self) -> None:
        """SIGKILL every container task and delete the tasks and containers (forced teardown)."""
        for task in self._tasks():
            self._quiet("tasks", "kill", "--signal", "SIGKILL", task)
        deadline = time.monotonic() + 10.0
        while self._tasks(running_only=True) and time.monotonic() < deadline:
            time.sleep(0.2)
        for task in self._tasks():
            self._quiet("tasks", "delete", "--force", task)
        for container in self.ctr("containers", "list", "--quiet").split():
            self._quiet("containers", "delete", container)

    def _tasks(self, running_only: bool = False) -> list[str]:
        lines = self.ctr("tasks", "list").splitlines()[1:]
        tasks = [line.split() for line in lines if line.strip()]
        return [fields[0] for fields in tasks if not running_only or fields[-1] == "RUNNING"]

    def _quiet(self, *args: str) -> None:
        """A ctr command whose failure (the thing is already gone) does not matter."""
        with contextlib.suppress(RuntimeError):
            self.ctr(*args)

    def _answers(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            self.ctr("version")
        except RuntimeError:
            return False
        return True
