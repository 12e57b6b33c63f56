"""The node's kubelet: its configuration and process.

cgroupfs driver (containerd 1.6 cannot tell kubelet its driver), cgroup v1 allowed (this machine
kind mounts v1 hierarchies with a cgroup2 beside them), no swap check, relaxed eviction (a shared
test machine's disk is not the node's to protect), and webhook authentication and authorization
so `kubectl logs` works through the API server's client cert. Everything it writes lives in the
run's folder.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from checkpoint_testenv.node.netns import NetNamespace
from checkpoint_testenv.processes import ManagedProcess

CLUSTER_DOMAIN = "cluster.local"


def config(
    workdir: Path, node_ip: str, client_ca: Path, runtime_endpoint: str, cgroup_root: str
) -> dict[str, object]:
    """The KubeletConfiguration document; pods' cgroups go under `cgroup_root`."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        # The node's own cgroup subtree (made by cleanup.make_cgroup_root): its kubepods never
        # mix with another node's, and teardown removes exactly this subtree.
        "cgroupRoot": cgroup_root,
        "failSwapOn": False,
        # Root here lacks CAP_SYS_RESOURCE: a negative OOM score for kubelet itself fails.
        "oomScoreAdj": 0,
        "protectKernelDefaults": False,
        "containerRuntimeEndpoint": runtime_endpoint,
        "podLogsDir": str(workdir / "pod-logs"),
        "address": node_ip,
        "healthzBindAddress": "127.0.0.1",
        "readOnlyPort": 0,
        "clusterDNS": [node_ip],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(_resolv_conf(workdir, node_ip)),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "nodefs.inodesFree": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # The node's images are imported (never pulled) and its registry is anonymous. With the
        # default (NeverVerifyPreloadedImages, on from 1.35), once the kubelet has pulled an
        # image from the test registry, the same image (one config digest) under the name it
        # was imported by no longer counts as preloaded: a pod naming it makes the kubelet pull
        # it again, from docker.io, which fails. No private image is ever on this node.
        "imagePullCredentialsVerificationPolicy": "NeverVerify",
        "serializeImagePulls": False,
        "maxPods": 32,
        "registerNode": True,
        # Status reaches the API server quickly, so a test sees Ready soon after it is true.
        "nodeStatusUpdateFrequency": "4s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
    }


def process(
    netns: NetNamespace,
    bin_dir: Path,
    workdir: Path,
    node_name: str,
    kubeconfig: Path,
    document: dict[str, object],
) -> ManagedProcess:
    """The kubelet process (not started); its state in `workdir`/kubelet."""
    root = workdir / "kubelet"
    root.mkdir(parents=True, exist_ok=True)
    (workdir / "pod-logs").mkdir(exist_ok=True)
    config_file = workdir / "kubelet-config.yaml"
    config_file.write_text(yaml.safe_dump(document))
    argv = [
        str(bin_dir / "kubelet"),
        f"--config={config_file}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={root}",
        f"--cert-dir={root / 'pki'}",
        f"--hostname-override={node_name}",
        f"--node-ip={netns.node_ip}",
        "--v=1",
    ]
    return ManagedProcess("kubelet", netns.wrap(argv), workdir / "kubelet.log")


def _resolv_conf(workdir: Path, node_ip: str) -> Path:
    """Pods with dnsPolicy Default resolve through the node's CoreDNS too (no host DNS)."""
    path = workdir / "resolv.conf"
    path.write_text(f"nameserver {node_ip}\n")
    return path
