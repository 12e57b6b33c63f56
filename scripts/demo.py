"""The main job, on a real node: install the chart, watch two pods elect, checkpoint, fail over.

1. builds (or reuses) the pinned control plane and node binaries and the project's image;
2. starts a single-node cluster in its own network namespace (kubelet, containerd, kube-proxy,
   CoreDNS) and imports the image;
3. `helm install --wait`s the chart with its defaults plus a flowlogs collector polling a feed
   this script serves, in a namespace that enforces the restricted Pod Security profile;
4. shows the pods, the Lease holder, `checkpoint-runtime inspect` of the live shards (run with
   the chart ServiceAccount's token) and the shard gauges through the Service; runs `helm test`;
5. deletes the leader pod, times the takeover and checks that no record was lost;
6. tears everything down and says what it proved.

Usage: python scripts/demo.py [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client

from checkpoint_testenv import binaries, helm
from checkpoint_testenv.flowlogs import FlowFeed
from checkpoint_testenv.node import images
from checkpoint_testenv.node.cluster import NodeCluster
from checkpoint_testenv.node.observe import (
    ReleaseLogs,
    holder_pod,
    lease_holder,
    ready,
    restricted_namespace,
    runtime_pods,
    service_get,
    shard_writers,
    wait_for,
)
from checkpoint_testenv.support.runtime_process import metric_value

POLL_SECONDS = 0.5
GAUGES = (
    "checkpoint_leader ",
    "checkpoint_shards ",
    "checkpoint_shard_rows{",
    "checkpoint_shard_headroom_bytes{",
    "checkpoint_shard_headroom_ratio{",
)


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def show_pods(release: helm.Release) -> None:
    for pod in runtime_pods(release):
        print(
            f"  {pod.metadata.name:<40} {pod.status.phase:<8} ready={ready(pod)!s:<5} "
            f"ip={pod.status.pod_ip} node={pod.spec.node_name}"
        )


def show_lease(release: helm.Release) -> None:
    spec = release.read_lease().spec
    print(
        f"  Lease {release.coordination_namespace}/{release.lease_name}: holder "
        f"{spec.holder_identity}, transitions {spec.lease_transitions}, "
        f"lease {spec.lease_duration_seconds} s"
    )


def inspect(release: helm.Release, kubeconfig: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "checkpoint_runtime.cli", "inspect",
         "--namespace", release.coordination_namespace, "--lease-name", release.lease_name,
         "--kubeconfig", str(kubeconfig)],
        check=True,
    )  # fmt: skip


def show_gauges(release: helm.Release) -> None:
    """Ask the Service until the leader answers (it balances over both Ready pods)."""
    for _ in range(20):
        body = service_get(release, "/metrics")
        if metric_value(body, "checkpoint_leader") == 1.0:
            break
    for line in body.splitlines():
        if line.startswith(GAUGES):
            print(f"  {line}")


def run_demo(workdir: Path) -> int:
    proved: list[str] = []
    say("builds: control plane, node binaries, the project's image (cached after the first run)")
    control_bin, node_bin = binaries.locate(), binaries.locate_node()
    app_image = images.app_image_archive()
    print(f"  image archive {app_image} ({app_image.stat().st_size >> 20} MiB)")

    say("starting a single-node cluster in its own network namespace")
    node = NodeCluster(control_bin, node_bin, workdir / "node")
    feed: FlowFeed | None = None
    try:
        node.start([app_image])
        assert node.netns is not None
        times = node.times
        print(
            f"  node Ready in {times.total:.1f} s (image import "
            f"{sum(times.image_imports.values()):.1f} s); API server {node.control_plane.host}"
        )
        plane = node.control_plane
        feed = FlowFeed(node.netns.host_ip)
        namespace = restricted_namespace(plane, "demo")
        values = {
            "checkpoint": {
                "collectors": [
                    {"kind": "flowlogs", "tailnet": "demo", "url": feed.url,
                     "pollSeconds": POLL_SECONDS},
                ]
            }
        }  # fmt: skip
        say(f"helm install cr charts/checkpoint-runtime --namespace {namespace} --wait")
        begun = time.monotonic()
        release = helm.install(plane, namespace, values, wait=True)
        print(f"  installed and Ready in {time.monotonic() - begun:.1f} s")
        show_pods(release)
        proved.append(f"helm install --wait: 2 pods Ready in {time.monotonic() - begun:.0f} s")
        logs = ReleaseLogs(release)

        say("leader election on the Lease")
        wait_for(lambda: lease_holder(release) != "", 60, "a Lease holder")
        show_lease(release)
        leader = holder_pod(lease_holder(release))

        say("the leader checkpoints: shards written under its identity")
        wait_for(lambda: bool(shard_writers(release)), 60, "a shard written")
        time.sleep(3)
        for name, writer in shard_writers(release).items():
            print(f"  ConfigMap {name}: writer {writer}")
        kubeconfig = workdir / "chart-sa.kubeconfig"
        release.write_kubeconfig(kubeconfig)
        print("  checkpoint-runtime inspect (as the chart's ServiceAccount):")
        inspect(release, kubeconfig)
        print("  /metrics through the Service:")
        show_gauges(release)
        proved.append("the leader wrote shards (writer = its Lease identity); gauges served")

        say("helm test")
        print(helm.run(plane, "test", "cr", "--namespace", namespace, "--timeout", "120s"))
        proved.append("helm test passed (the Service name resolves, /healthz answers)")

        say(f"failover: deleting the leader pod {leader}")
        begun = time.monotonic()
        with plane.admin_api() as api:
            client.CoreV1Api(api).delete_namespaced_pod(leader, namespace)
        # The other replica, or the ReplicaSet's replacement pod if it starts first, takes over.
        wait_for(lambda: holder_pod(lease_holder(release)) not in ("", leader), 90, "a takeover")
        failover = time.monotonic() - begun
        successor = holder_pod(lease_holder(release))
        show_lease(release)
        print(f"  {successor} took the Lease {failover:.1f} s after the delete")
        logs.refresh()
        logs.followers[leader].join(timeout=90)
        time.sleep(3 * POLL_SECONDS)
        added = feed.stop()
        wait_for(
            lambda: max(logs.flow_numbers(successor), default=0) >= added[-1],
            60,
            "the new leader catching up",
        )
        before, after = logs.flow_numbers(leader), logs.flow_numbers(successor)
        due = [number for number in added if number >= min(before)]
        lost = sorted(set(due) - set(before) - set(after))
        repeated = sorted(set(before) & set(after))
        print(
            f"  records fed since the first poll {len(due)}; emitted by the old leader "
            f"{len(before)}, by the new "
            f"one {len(after)} (from #{min(after)}); lost {len(lost)}; emitted twice "
            f"{len(repeated)}"
        )
        show_pods(release)
        inspect(release, kubeconfig)
        proved.append(
            f"failover after deleting the leader pod: {failover:.1f} s; "
            f"{len(lost)} records lost, {len(repeated)} emitted twice"
        )
        return 0 if not lost else 1
    finally:
        if feed is not None:
            feed.close()
        say("tearing the node down")
        node.stop()
        say("what this run proved")
        for line in proved:
            print(f"  - {line}")
        if node.left_behind:
            print(f"  - NOT cleaned up: {', '.join(node.left_behind)}")
        else:
            print("  - everything the node started is gone (processes, mounts, cgroups, netns)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="checkpoint-demo-"))
    try:
        return run_demo(workdir)
    finally:
        if args.keep:
            print(f"\nwork folder kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
