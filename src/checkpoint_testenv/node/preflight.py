"""What the machine must have before a test node can start, checked up front.

A machine that cannot run the node fails with what is missing and the command that installs it,
never with a stack trace from deep inside a start-up (and never by skipping the node's tests).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from checkpoint_testenv.binaries import REPO_ROOT

INSTALL_COMMAND = "scripts/just system"
PACKAGE_LIST = REPO_ROOT / "scripts" / "system" / "debian-packages.txt"
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ("bridge", "host-local", "loopback")

# command -> the Debian package that provides it (pinned in scripts/system/debian-packages.txt)
_COMMANDS = {
    "containerd": "containerd",
    "containerd-shim-runc-v2": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "nsenter": "util-linux",
    "mount": "mount",
    "ip": "iproute2",
    "iptables": "iptables",
    "conntrack": "conntrack",
}


class NodeUnavailable(RuntimeError):
    """This machine cannot run the test node; the message says what is missing and how to fix."""


def check() -> None:
    """Raise NodeUnavailable naming everything missing (root, commands, CNI plugins, cgroups)."""
    problems: list[str] = []
    if os.geteuid() != 0:
        problems.append("the test node needs root (network namespaces, mounts, cgroups)")
    packages: set[str] = set()
    for command, package in _COMMANDS.items():
        if shutil.which(command) is None:
            problems.append(f"command {command!r} not found (Debian package {package})")
            packages.add(package)
    for plugin in CNI_PLUGINS:
        if not os.access(CNI_BIN_DIR / plugin, os.X_OK):
            problems.append(f"CNI plugin {CNI_BIN_DIR / plugin} missing")
            packages.add("containernetworking-plugins")
    if not Path("/sys/fs/cgroup").is_dir():
        problems.append("/sys/fs/cgroup is not mounted")
    if not problems:
        return
    fix = ""
    if packages:
        fix = (
            f"\ninstall the pinned packages ({', '.join(sorted(packages))}) with "
            f"`{INSTALL_COMMAND}` (versions in {PACKAGE_LIST.relative_to(REPO_ROOT)})"
        )
    raise NodeUnavailable("the test node cannot run here:\n  " + "\n  ".join(problems) + fix)
