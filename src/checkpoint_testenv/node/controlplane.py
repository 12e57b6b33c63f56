"""The control plane of a node: the same etcd + kube-apiserver, inside the node's namespace.

It listens on the node address, serves a certificate that is also valid for the `kubernetes`
Service (pods reach it through its ClusterIP with their in-cluster config), authorizes kubelets
with the Node authorizer, admits ServiceAccounts (a controller-manager runs here), and reaches
kubelets by their InternalIP with a client certificate kubelet trusts.
"""

from __future__ import annotations

import ipaddress
import secrets
from pathlib import Path

from checkpoint_testenv import certs
from checkpoint_testenv.controlplane import SERVICE_CLUSTER_IP_RANGE, ControlPlane
from checkpoint_testenv.node.kubelet import CLUSTER_DOMAIN
from checkpoint_testenv.node.netns import NetNamespace

# The `kubernetes` Service's ClusterIP: the first address of the Service range.
KUBERNETES_SERVICE_IP = str(ipaddress.ip_network(SERVICE_CLUSTER_IP_RANGE)[1])
_KUBELET_CLIENT = "apiserver-kubelet-client"


class NodeControlPlane(ControlPlane):
    """etcd + kube-apiserver for a node, run inside its network namespace."""

    def __init__(self, bin_dir: Path, workdir: Path, netns: NetNamespace, node_name: str) -> None:
        self.netns = netns
        self.address = netns.node_ip
        self.node_name = node_name
        self.node_token = secrets.token_hex(24)
        super().__init__(bin_dir, workdir)

    def wrap(self, argv: list[str]) -> list[str]:
        return self.netns.wrap(argv)

    def serving_names(self) -> list[str]:
        service = ["kubernetes", "kubernetes.default", "kubernetes.default.svc"]
        return [KUBERNETES_SERVICE_IP, *service, f"kubernetes.default.svc.{CLUSTER_DOMAIN}"]

    def users(self) -> list[tuple[str, str, str]]:
        """The admin, and the kubelet as the Node authorizer expects it."""
        return [
            *super().users(),
            (self.node_token, f"system:node:{self.node_name}", "system:nodes"),
        ]

    def write_credentials(self) -> None:
        super().write_credentials()
        pki = self.workdir / "pki"
        certs.client_certificate(self._pki, pki, _KUBELET_CLIENT, _KUBELET_CLIENT, "system:masters")

    def apiserver_options(self) -> dict[str, str]:
        pki = self.workdir / "pki"
        options = super().apiserver_options()
        del options["disable-admission-plugins"]  # the controller-manager makes ServiceAccounts
        options.update(
            {
                "bind-address": "0.0.0.0",
                "authorization-mode": "Node,RBAC",
                "enable-admission-plugins": "NodeRestriction",
                # By hostname it would ask the host's DNS, which knows nothing of this node.
                "kubelet-preferred-address-types": "InternalIP",
                "kubelet-client-certificate": str(pki / f"{_KUBELET_CLIENT}.crt"),
                "kubelet-client-key": str(pki / f"{_KUBELET_CLIENT}.key"),
            }
        )
        return options
