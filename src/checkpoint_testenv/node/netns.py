"""The network namespace the whole test node lives in, and the veth pair that reaches it.

Every node process runs inside it (entered with `nsenter --net=`: `ip netns exec` would also
remount /sys and hide the cgroup mounts kubelet needs), so the node's, pods' and Services'
addresses never touch the host's network. One veth pair joins it to the host: the host end
carries `host_ip`, the node end `node_ip` (the node's InternalIP, which the API server advertises
and the test process dials).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

NETNS_DIR = Path("/run/netns")
# /30 links for the node, taken from this block; one that a host route already covers is skipped.
_LINK_BLOCK = ipaddress.IPv4Network("10.251.0.0/16")

# Per-namespace settings kube-proxy and the bridge CNI need (iptables sees bridged traffic,
# the node forwards pod traffic, and a ClusterIP may be answered on the node itself).
_SYSCTLS = {
    "net.ipv4.ip_forward": "1",
    "net.ipv4.conf.all.route_localnet": "1",
    "net.bridge.bridge-nf-call-iptables": "1",
}
_KERNEL_MODULES = ("br_netfilter", "overlay", "veth", "bridge")


def run(argv: list[str], what: str) -> str:
    """Run a setup command; fail with its output."""
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed: {' '.join(argv)}\n{result.stderr}{result.stdout}")
    return result.stdout


@dataclass(frozen=True)
class NetNamespace:
    """A created namespace: its name, the veth ends and their addresses."""

    name: str
    host_link: str
    host_ip: str
    node_link: str
    node_ip: str

    @property
    def path(self) -> Path:
        return NETNS_DIR / self.name

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run inside the namespace (nsenter execs it: the PID stays the program's)."""
        return ["nsenter", f"--net={self.path}", "--", *argv]

    def run(self, argv: list[str], what: str) -> str:
        return run(self.wrap(argv), what)

    def delete(self) -> None:
        """Remove the namespace and the host end of the veth pair (the node end goes with it)."""
        subprocess.run(["ip", "link", "delete", self.host_link], capture_output=True, check=False)
        if self.path.exists():
            subprocess.run(["ip", "netns", "delete", self.name], capture_output=True, check=False)


def create(name: str) -> NetNamespace:
    """Create namespace `name` with a veth link to the host and a default route through it."""
    _load_modules()
    host_net, node_net = _free_link()
    suffix = name[-8:]
    namespace = NetNamespace(
        name=name,
        host_link=f"crh{suffix}"[:15],
        host_ip=str(host_net),
        node_link=f"crn{suffix}"[:15],
        node_ip=str(node_net),
    )
    run(["ip", "netns", "add", name], "creating the network namespace")
    try:
        _configure(namespace)
    except BaseException:
        namespace.delete()
        raise
    return namespace


def _configure(ns: NetNamespace) -> None:
    run(
        ["ip", "link", "add", ns.host_link, "type", "veth", "peer", "name", ns.node_link,
         "netns", ns.name],
        "creating the veth pair",
    )  # fmt: skip
    run(["ip", "addr", "add", f"{ns.host_ip}/30", "dev", ns.host_link], "host address")
    run(["ip", "link", "set", ns.host_link, "up"], "host link up")
    ns.run(["ip", "link", "set", "lo", "up"], "loopback up")
    ns.run(["ip", "addr", "add", f"{ns.node_ip}/30", "dev", ns.node_link], "node address")
    ns.run(["ip", "link", "set", ns.node_link, "up"], "node link up")
    # Any destination (a ClusterIP before kube-proxy rewrites it) needs a route from the node.
    ns.run(["ip", "route", "add", "default", "via", ns.host_ip], "default route")
    for key, value in _SYSCTLS.items():
        ns.run(["sysctl", "-qw", f"{key}={value}"], f"sysctl {key}")


def _free_link() -> tuple[ipaddress.IPv4Address, ipaddress.IPv4Address]:
    """A /30 of the link block that neither a host route nor another node's link uses."""
    routes = run(["ip", "-4", "route", "show", "table", "all"], "listing host routes")
    used = {line.split()[0] for line in routes.splitlines() if line and line[0].isdigit()}
    start = os.getpid() % 16384
    subnets = [ipaddress.IPv4Network(net) for net in _LINK_BLOCK.subnets(new_prefix=30)]
    for index in range(len(subnets)):
        subnet = subnets[(start + index) % len(subnets)]
        if str(subnet) not in used and not any(_overlaps(subnet, route) for route in used):
            first, second = list(subnet.hosts())
            return first, second
    raise RuntimeError(f"no free /30 left in {_LINK_BLOCK} for the node's veth pair")


def _overlaps(subnet: ipaddress.IPv4Network, route: str) -> bool:
    try:
        other = ipaddress.ip_network(route, strict=False)
    except ValueError:
        return False
    return other.prefixlen > 0 and subnet.overlaps(other)


def _load_modules() -> None:
    """Load the kernel modules the node needs where modprobe exists (built-in ones need not)."""
    modprobe = shutil.which("modprobe")
    for module in _KERNEL_MODULES:
        if modprobe and not Path(f"/sys/module/{module}").exists():
            subprocess.run([modprobe, module], capture_output=True, check=False)
