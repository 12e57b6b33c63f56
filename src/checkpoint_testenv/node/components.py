"""kube-controller-manager, kube-scheduler and kube-proxy of the node (argv and config)."""

from __future__ import annotations

from pathlib import Path

import yaml

from checkpoint_testenv.node.cni import POD_CIDR
from checkpoint_testenv.node.netns import NetNamespace
from checkpoint_testenv.processes import ManagedProcess


def controller_manager(
    netns: NetNamespace, bin_dir: Path, workdir: Path, kubeconfig: Path, pki: Path
) -> ManagedProcess:
    """Controllers: Deployments and ReplicaSets, endpoints, ServiceAccounts and their tokens' root
    CA ConfigMap, garbage collection."""
    argv = [
        str(bin_dir / "kube-controller-manager"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--service-account-private-key-file={pki / 'sa.key'}",
        # Published as kube-root-ca.crt in every namespace: projected token volumes need it.
        f"--root-ca-file={pki / 'ca.crt'}",
        "--use-service-account-credentials=false",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        "--controllers=*,-nodeipam,-bootstrapsigner,-tokencleaner",
        # A deleted node's pods are not what these tests are about; quick pod GC is.
        "--terminated-pod-gc-threshold=50",
    ]
    return ManagedProcess(
        "kube-controller-manager", netns.wrap(argv), workdir / "kube-controller-manager.log"
    )


def scheduler(
    netns: NetNamespace, bin_dir: Path, workdir: Path, kubeconfig: Path
) -> ManagedProcess:
    argv = [
        str(bin_dir / "kube-scheduler"),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
    ]
    return ManagedProcess("kube-scheduler", netns.wrap(argv), workdir / "kube-scheduler.log")


def proxy(
    netns: NetNamespace, bin_dir: Path, workdir: Path, kubeconfig: Path, node_name: str
) -> ManagedProcess:
    """kube-proxy in iptables mode: Service ClusterIPs work from pods and from the node."""
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "hostnameOverride": node_name,
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "bindAddress": netns.node_ip,
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # Leave the kernel's conntrack table size alone (it is not per namespace).
        "conntrack": {"maxPerCore": 0, "min": 0},
    }
    config_file = workdir / "kube-proxy.yaml"
    config_file.write_text(yaml.safe_dump(config))
    argv = [str(bin_dir / "kube-proxy"), f"--config={config_file}"]
    return ManagedProcess("kube-proxy", netns.wrap(argv), workdir / "kube-proxy.log")
