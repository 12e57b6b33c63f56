"""NetworkPolicy enforcement on the test node: SIG Network's kube-network-policies.

The binary comes from scripts/testenv/build-network-policies.sh (built from its Go module at the
version pinned in scripts/testenv/network-policies/go.mod, cached per pin), or from the folder
named by CHECKPOINT_NETWORK_POLICIES_BIN. A missing binary is an error, never a reason to skip.

kube-network-policies decides every new pod connection in userspace: it reads the cluster's
NetworkPolicies, Namespaces and Pods through the API server and answers each packet the kernel
queues to its nfqueue with accept or drop. It installs that queue hook with an nftables `queue`
rule, which this kernel cannot load (built without CONFIG_NFT_QUEUE; it logs the failed sync and
keeps answering its queue). So the node installs the same hook with iptables' NFQUEUE target
(the xtables queue, which this kernel has), mirroring kube-network-policies' own rules: on
POSTROUTING (after Service translation, before source NAT), connections already established
pass, the node's own root processes (kubelet probes) pass, and every other packet from or to a
pod goes to the queue, with no bypass: while the enforcer is not answering, pod traffic stops.
Pod traffic to the node itself (the API server and CoreDNS listen on the node address here) is
queued on INPUT as well, since it never reaches POSTROUTING.

The enforcer reads its API credentials the in-cluster way (a token and CA under
/var/run/secrets/kubernetes.io/serviceaccount, the API server from KUBERNETES_SERVICE_HOST/PORT):
it runs in a private mount namespace whose /run is a fresh tmpfs holding them, so nothing on the
host changes.
"""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

from checkpoint_testenv.binaries import REPO_ROOT, locate_built
from checkpoint_testenv.node.cni import POD_CIDR
from checkpoint_testenv.node.controlplane import NodeControlPlane
from checkpoint_testenv.node.netns import NetNamespace
from checkpoint_testenv.processes import ManagedProcess, wait_until

BIN_ENV = "CHECKPOINT_NETWORK_POLICIES_BIN"
BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-network-policies.sh"
BINARY = "kube-network-policies"
QUEUE = 100
CHAIN = "CR-NETPOL"
_READY_TIMEOUT = 60.0
# In the enforcer's own mount namespace: a fresh /run with the in-cluster credentials.
_IN_CLUSTER = (
    "set -e; mount -t tmpfs -o size=1m,mode=0755 checkpoint-netpol /run; "
    "d=/run/secrets/kubernetes.io/serviceaccount; mkdir -p $d; "
    'cp "$1/token" "$1/ca.crt" $d/; shift; exec "$@"'
)


@cache
def locate() -> Path:
    """The folder holding kube-network-policies, building it if needed."""
    return locate_built(BIN_ENV, BUILD_SCRIPT, (BINARY,))


_QUEUE = ["-j", "NFQUEUE", "--queue-num", str(QUEUE)]
_ESTABLISHED = ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"]
# hook -> (chain, rules in order), all in the mangle table.
_HOOKS = {
    # Forwarded and node-originated traffic, after Service translation, before source NAT.
    "POSTROUTING": (
        CHAIN,
        [
            _ESTABLISHED,
            ["-m", "owner", "--uid-owner", "0", "-j", "RETURN"],
            ["-s", POD_CIDR, *_QUEUE],
            ["-d", POD_CIDR, *_QUEUE],
        ],
    ),
    # Pod traffic to the node itself never reaches POSTROUTING: here the API server, CoreDNS
    # and every other node process listen on the node, so it is queued on INPUT too (in a
    # cluster they would be other hosts, where POSTROUTING sees the traffic).
    "INPUT": (f"{CHAIN}-IN", [_ESTABLISHED, ["-s", POD_CIDR, *_QUEUE]]),
}


class PolicyEnforcer:
    """kube-network-policies in the node's namespace, with its queue hook."""

    def __init__(
        self, netns: NetNamespace, plane: NodeControlPlane, node_name: str, workdir: Path
    ) -> None:
        self.netns = netns
        self.workdir = workdir
        credentials = workdir / "network-policies" / "serviceaccount"
        credentials.mkdir(parents=True, exist_ok=True)
        (credentials / "token").write_text(plane.admin_token)
        shutil.copyfile(plane.ca_file, credentials / "ca.crt")
        argv = [
            "unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", _IN_CLUSTER, "sh", str(credentials),
            "env", f"KUBERNETES_SERVICE_HOST={plane.address}",
            f"KUBERNETES_SERVICE_PORT={plane.port}",
            str(locate() / BINARY),
            f"--hostname-override={node_name}",
            f"--nfqueue-id={QUEUE}",
            "--disable-nri",  # containerd 1.6 has no NRI; pod addresses come from the API
            "--netfilter-bug-1766-fix=false",  # fixed in this kernel (6.12+)
            "--metrics-bind-address=127.0.0.1:9080",
            "-v=2",
        ]  # fmt: skip
        self.process = ManagedProcess(BINARY, netns.wrap(argv), workdir / f"{BINARY}.log")
        self.hooked = False

    def start(self) -> None:
        """Start the enforcer, wait until it answers its queue, then hook pod traffic to it."""
        self.process.start()
        wait_until(self.queue_bound, self.process, _READY_TIMEOUT, "bound to its nfqueue")
        for hook, (chain, rules) in _HOOKS.items():
            self._iptables(["-N", chain])
            for rule in rules:
                self._iptables(["-A", chain, *rule])
            self._iptables(["-A", hook, "-j", chain])
        self.hooked = True

    def stop(self) -> None:
        """Unhook pod traffic first (it would stop), then stop the enforcer; idempotent."""
        if self.hooked:
            for hook, (chain, _) in _HOOKS.items():
                self._iptables(["-D", hook, "-j", chain])
                self._iptables(["-F", chain])
                self._iptables(["-X", chain])
            self.hooked = False
        self.process.stop(timeout=10.0)

    def queue_bound(self) -> bool:
        """Whether a process listens on queue QUEUE in the node's namespace."""
        table = self.netns.run(["cat", "/proc/net/netfilter/nfnetlink_queue"], "reading nfqueues")
        return any(line.split()[:1] == [str(QUEUE)] for line in table.splitlines())

    def log(self) -> str:
        path = self.process.log_path
        return path.read_text(errors="replace") if path.exists() else ""

    def _iptables(self, args: list[str]) -> None:
        self.netns.run(["iptables", "-w", "-t", "mangle", *args], f"iptables {' '.join(args)}")
