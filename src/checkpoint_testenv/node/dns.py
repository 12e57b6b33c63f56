"""CoreDNS on the node address: Service and Pod names of the cluster domain, nothing else."""

from __future__ import annotations

from pathlib import Path

from checkpoint_testenv.node.kubelet import CLUSTER_DOMAIN
from checkpoint_testenv.node.netns import NetNamespace
from checkpoint_testenv.processes import ManagedProcess

READY_PORT = 8181

_COREFILE = """\
.:53 {{
    bind {address}
    errors
    ready {address}:{ready_port}
    kubernetes {domain} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""


def process(netns: NetNamespace, bin_dir: Path, workdir: Path, kubeconfig: Path) -> ManagedProcess:
    """CoreDNS (not started); `ready_url` answers 200 once it has synced with the API server."""
    corefile = workdir / "Corefile"
    corefile.write_text(
        _COREFILE.format(
            address=netns.node_ip,
            ready_port=READY_PORT,
            domain=CLUSTER_DOMAIN,
            kubeconfig=kubeconfig,
        )
    )
    argv = [str(bin_dir / "coredns"), "-conf", str(corefile)]
    return ManagedProcess("coredns", netns.wrap(argv), workdir / "coredns.log")


def ready_url(netns: NetNamespace) -> str:
    return f"http://{netns.node_ip}:{READY_PORT}/ready"
