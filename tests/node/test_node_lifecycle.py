"""The test node cleans up after itself, and after a run that was killed before its teardown.

Each test starts its own small node (pause image only, no app image) beside the session's: node
cgroups, sockets and network namespaces are per node, so two never touch each other's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kubernetes import client

from checkpoint_testenv import binaries
from checkpoint_testenv.node import cleanup, preflight
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.node.images import pause_image
from checkpoint_testenv.node.observe import wait_for

pytestmark = pytest.mark.node

# Starts a node with one pod, prints its record, then waits to be killed.
_KILLED_RUN = textwrap.dedent(
    """
    import json, sys, time
    from dataclasses import asdict
    from pathlib import Path
    from checkpoint_testenv import binaries
    from checkpoint_testenv.node.cluster import NodeCluster
    from checkpoint_testenv.node.images import pause_image
    from kubernetes import client
    node = NodeCluster(binaries.locate(), binaries.locate_node(), Path(sys.argv[1]))
    node.start()
    with node.control_plane.admin_api() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod("default", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper"},
            "spec": {"containers": [{"name": "c", "image": pause_image()}]}})
        while core.read_namespaced_pod("sleeper", "default").status.phase != "Running":
            time.sleep(0.2)
    print(json.dumps(asdict(node.record)), flush=True)
    time.sleep(600)
    """
)


def _run_pod(node: NodeCluster) -> None:
    with node.control_plane.admin_api() as api:
        core = client.CoreV1Api(api)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "sleeper"},
            "spec": {"containers": [{"name": "c", "image": pause_image()}]},
        }
        core.create_namespaced_pod("default", pod)
        wait_for(
            lambda: core.read_namespaced_pod("sleeper", "default").status.phase == "Running",
            60,
            "the pod running",
        )


def test_teardown_removes_everything_the_node_started(tmp_path: Path) -> None:
    node = NodeCluster(binaries.locate(), binaries.locate_node(), tmp_path / "node")
    node.start()
    try:
        _run_pod(node)
        assert node.netns is not None
        assert node.netns.path.exists()
        assert node.containerd is not None
        pod_netns = node.containerd.sandbox_netns_paths()
        assert pod_netns
        assert all(path.exists() for path in pod_netns)
    finally:
        node.stop()
    assert node.left_behind == []
    assert not node.netns.path.exists()
    assert not any(path.exists() for path in pod_netns)
    assert not list(Path(cleanup.CGROUP_ROOT).glob(f"*/{node.name}"))


def test_a_killed_run_is_swept_by_the_next(tmp_path: Path) -> None:
    run = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, str(tmp_path / "killed")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert run.stdout is not None
        record = cleanup.NodeRecord(**json.loads(run.stdout.readline()))
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    # Its servers died with it; its containers, mounts, cgroups and namespace did not.
    left = cleanup.leftovers(record)
    assert any(item.startswith("network namespace") for item in left), left
    assert any(item.startswith("shim") for item in left), left
    assert any(item.startswith("mount") for item in left), left
    assert any(item.startswith("pod network namespace") for item in left), left

    assert record.netns in cleanup.sweep_stale()
    assert cleanup.leftovers(record) == []


def test_a_machine_without_the_packages_is_told_how_to_install_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(preflight.NodeUnavailable) as failure:
        preflight.check()
    message = str(failure.value)
    assert "command 'containerd' not found (Debian package containerd)" in message
    assert preflight.INSTALL_COMMAND in message


def test_locate_node_refuses_a_folder_without_the_pause_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in binaries.NODE_REQUIRED:
        if not name.endswith(".tar"):
            (tmp_path / name).write_text("#!/bin/sh\n")
            (tmp_path / name).chmod(0o755)
    monkeypatch.setenv(binaries.NODE_BIN_ENV, str(tmp_path))
    with pytest.raises(binaries.BinariesMissing, match=r"pause\.tar not readable"):
        binaries.locate_node()
