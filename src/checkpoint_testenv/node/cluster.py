"""A single-node Kubernetes cluster in its own network namespace, started and torn down here.

Order: network namespace -> etcd + kube-apiserver -> containerd (+ the pause and app images) ->
kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS -> kubelet -> Node Ready and DNS
ready. Teardown stops every process, force-removes the containers, then sweeps what outlives
them (cleanup.py). Every long step reports progress through `progress`.
"""

from __future__ import annotations

import atexit
import os
import secrets
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from checkpoint_testenv.controlplane import write_kubeconfig
from checkpoint_testenv.node import cleanup, cni, components, dns, kubelet, netns, preflight
from checkpoint_testenv.node.containerd import Containerd
from checkpoint_testenv.node.controlplane import NodeControlPlane
from checkpoint_testenv.node.images import pause_image
from checkpoint_testenv.processes import ManagedProcess, wait_until

NODE_NAME = "checkpoint-node"
_READY_TIMEOUT = 180.0

Progress = Callable[[str], None]


def stderr_progress(message: str) -> None:
    print(f"testenv-node: {message}", file=sys.stderr, flush=True)


@dataclass
class NodeTimes:
    """Seconds each start-up step took."""

    control_plane: float = 0.0
    containerd: float = 0.0
    image_imports: dict[str, float] = field(default_factory=dict)
    node_ready: float = 0.0
    total: float = 0.0
    teardown: float = 0.0


class NodeCluster:
    """The node's processes, its namespace and the control plane's clients."""

    def __init__(
        self, control_bin: Path, node_bin: Path, workdir: Path, progress: Progress = stderr_progress
    ) -> None:
        self.control_bin = control_bin
        self.node_bin = node_bin
        self.workdir = workdir
        self.progress = progress
        self.name = f"crnode-{secrets.token_hex(4)}"
        self.state = cleanup.STATE_ROOT / self.name
        self.times = NodeTimes()
        self.netns: netns.NetNamespace | None = None
        self.plane: NodeControlPlane | None = None
        self.containerd: Containerd | None = None
        self._processes: list[ManagedProcess] = []
        self._record: cleanup.NodeRecord | None = None
        # What teardown could not remove (filled by stop(); empty when it removed everything).
        self.left_behind: list[str] = []

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self, images: Sequence[Path] = ()) -> None:
        """Bring the node up with the pause image and `images` imported; stop it on failure."""
        begun = time.monotonic()
        preflight.check()
        for swept in cleanup.sweep_stale():
            self.progress(f"removed the leftovers of an earlier node ({swept})")
        atexit.register(self.stop)
        try:
            self._start(images)
        except BaseException:
            self.stop()
            raise
        self.times.total = time.monotonic() - begun
        self.progress(f"node {NODE_NAME} ready in {self.times.total:.1f} s")

    def stop(self) -> None:
        """Stop everything and remove what the node left behind; safe to call more than once."""
        if self._record is None:
            return
        begun = time.monotonic()
        self.progress("tearing the node down")
        for process in reversed(self._processes):
            process.stop(timeout=10.0)
        pod_netns: list[Path] = []
        if self.containerd is not None:
            if self.containerd.process.running:
                try:
                    pod_netns = self.containerd.sandbox_netns_paths()
                    self.containerd.kill_tasks()
                except RuntimeError as failure:
                    self.progress(f"forced container removal incomplete: {failure}")
            self.containerd.stop()
        if self.plane is not None:
            self.plane.stop()
        cleanup.remove_leftovers(self._record, pod_netns)
        self.left_behind = cleanup.leftovers(self._record)
        self._record = None
        self.times.teardown = time.monotonic() - begun
        if self.left_behind:
            self.progress(f"teardown left behind: {', '.join(self.left_behind)}")
        self.progress(f"node torn down in {self.times.teardown:.1f} s")

    # ---- clients ---------------------------------------------------------------------------

    @property
    def control_plane(self) -> NodeControlPlane:
        if self.plane is None:
            raise RuntimeError("node not started")
        return self.plane

    @property
    def record(self) -> cleanup.NodeRecord:
        """What a teardown (this one, or a later run's sweep) needs to remove the node."""
        if self._record is None:
            raise RuntimeError("node not started")
        return self._record

    def logs(self) -> dict[str, Path]:
        """Each node process's log file."""
        processes = list(self._processes)
        if self.containerd is not None:
            processes.append(self.containerd.process)
        return {process.name: process.log_path for process in processes}

    # ---- internals -------------------------------------------------------------------------

    def _start(self, images: Sequence[Path]) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.progress(f"creating network namespace {self.name}")
        self.netns = ns = netns.create(self.name)
        self.containerd = Containerd(ns, self.workdir, self.state, pause_image())
        self._record = cleanup.NodeRecord(
            owner_pid=os.getpid(),
            netns=ns.name,
            host_link=ns.host_link,
            workdir=str(self.workdir),
            state=str(self.state),
            containerd_socket=str(self.containerd.socket),
            cni_network=self.name,
        )
        self._record.save()

        self.progress(f"starting etcd and kube-apiserver on {ns.node_ip}")
        begun = time.monotonic()
        self.plane = plane = NodeControlPlane(self.control_bin, self.workdir, ns, NODE_NAME)
        plane.start()
        self.times.control_plane = time.monotonic() - begun

        cni.write_config(self.containerd.cni_conf_dir, self.workdir / "cni" / "ipam", self.name)
        self.progress("starting containerd")
        self.times.containerd = self.containerd.start()
        for archive in [self.node_bin / "pause.tar", *images]:
            self.progress(f"importing image {archive.name} ({archive.stat().st_size >> 20} MiB)")
            self.times.image_imports[archive.name] = self.containerd.import_image(archive)

        node_kubeconfig = self.workdir / "kubelet.kubeconfig"
        write_kubeconfig(
            node_kubeconfig, plane.host, plane.ca_file, f"system:node:{NODE_NAME}", plane.node_token
        )
        admin = plane.kubeconfig
        self.progress("starting kube-controller-manager, kube-scheduler, kube-proxy, CoreDNS")
        pki = self.workdir / "pki"
        self._run(components.controller_manager(ns, self.node_bin, self.workdir, admin, pki))
        self._run(components.scheduler(ns, self.node_bin, self.workdir, admin))
        self._run(components.proxy(ns, self.node_bin, self.workdir, admin, NODE_NAME))
        coredns = self._run(dns.process(ns, self.node_bin, self.workdir, admin))

        self.progress("starting kubelet; waiting for the node to be Ready")
        begun = time.monotonic()
        document = kubelet.config(
            self.workdir,
            ns.node_ip,
            plane.ca_file,
            self.containerd.endpoint,
            cleanup.make_cgroup_root(self.name),
        )
        process = kubelet.process(
            ns, self.node_bin, self.workdir, NODE_NAME, node_kubeconfig, document
        )
        self._run(process)
        wait_until(self._node_ready, process, _READY_TIMEOUT, "Ready")
        wait_until(lambda: _http_ok(dns.ready_url(ns)), coredns, _READY_TIMEOUT, "serving DNS")
        wait_until(self._default_account, process, _READY_TIMEOUT, "given a default account")
        self.times.node_ready = time.monotonic() - begun

    def _run(self, process: ManagedProcess) -> ManagedProcess:
        process.start()
        self._processes.append(process)
        return process

    def _node_ready(self) -> bool:
        with self.control_plane.admin_api() as api:
            try:
                node = client.CoreV1Api(api).read_node(NODE_NAME)
            except client.ApiException:
                return False
        conditions = (node.status.conditions or []) if node.status else []
        return any(c.type == "Ready" and c.status == "True" for c in conditions)

    def _default_account(self) -> bool:
        """The controller-manager is working: the default namespace has its ServiceAccount."""
        with self.control_plane.admin_api() as api:
            try:
                client.CoreV1Api(api).read_namespaced_service_account("default", "default")
            except client.ApiException:
                return False
        return True


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False
