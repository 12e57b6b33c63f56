"""Find the pinned kube-apiserver, etcd and helm binaries, and the test node's.

They come from scripts/testenv/build.sh (built from the official Go modules, cached per pin set),
or from the folder named by CHECKPOINT_TESTENV_BIN. The node's (kubelet, kube-controller-manager,
kube-scheduler, kube-proxy, CoreDNS and the pause image archive) come from
scripts/testenv/build-node.sh or CHECKPOINT_TESTENV_NODE_BIN. The compatibility tier's extra
kube-apiserver minors come from scripts/testenv/build-apiservers.sh, one folder per minor, or
from CHECKPOINT_TESTENV_APISERVER_1_N (e.g. _1_34). A missing binary is an error, never
a reason to skip or to fall back to something that only looks like an API server.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

BIN_ENV = "CHECKPOINT_TESTENV_BIN"
REQUIRED = ("kube-apiserver", "etcd", "helm")
REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build.sh"
NODE_BIN_ENV = "CHECKPOINT_TESTENV_NODE_BIN"
NODE_REQUIRED = (
    "kubelet", "kube-controller-manager", "kube-scheduler", "kube-proxy", "coredns", "pause.tar"
)  # fmt: skip
NODE_BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-node.sh"
APISERVERS_BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-apiservers.sh"


class BinariesMissing(RuntimeError):
    """The test environment's binaries are not there and could not be built."""


def locate() -> Path:
    """Return the folder holding kube-apiserver, etcd and helm, building them if needed."""
    return locate_built(BIN_ENV, BUILD_SCRIPT, REQUIRED)


def locate_node() -> Path:
    """Return the folder holding the test node's binaries and pause image, building if needed."""
    return locate_built(NODE_BIN_ENV, NODE_BUILD_SCRIPT, NODE_REQUIRED)


def locate_apiserver(minor: str) -> Path:
    """Return kube-apiserver of an extra minor ("1.34"), building it if needed."""
    env = f"CHECKPOINT_TESTENV_APISERVER_{minor.replace('.', '_')}"
    return locate_built(env, APISERVERS_BUILD_SCRIPT, ("kube-apiserver",), minor) / "kube-apiserver"


def locate_built(env: str, script: Path, required: tuple[str, ...], *args: str) -> Path:
    """The folder named by $env, else the one `script` (run with `args`) builds (its last stdout
    line), holding every name in `required` (programs executable, `.tar` archives readable)."""
    configured = os.environ.get(env)
    folder = Path(configured) if configured else _run_build_script(script, env, *args)
    # Image archives are read, everything else is run.
    archives = [name for name in required if name.endswith(".tar")]
    programs = [name for name in required if name not in archives]
    problems = [
        f"{', '.join(names)} not {what}"
        for names, what in (
            ([n for n in programs if not os.access(folder / n, os.X_OK)], "executable"),
            ([n for n in archives if not os.access(folder / n, os.R_OK)], "readable"),
        )
        if names
    ]
    if problems:
        source = f"${env}" if configured else str(script)
        raise BinariesMissing(f"{'; '.join(problems)} in {folder} (from {source})")
    return folder


def _run_build_script(script: Path, env: str, *args: str) -> Path:
    if not script.is_file():
        raise BinariesMissing(f"{script} not found; set ${env} to a binary folder")
    # stderr is left to the terminal: a first build takes minutes and prints its progress there.
    result = subprocess.run(
        [str(script), *args], stdout=subprocess.PIPE, text=True, check=False, cwd=REPO_ROOT
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise BinariesMissing(
            f"{script} failed with exit code {result.returncode}; "
            f"run it by hand to see why, or set ${env}"
        )
    return Path(lines[-1])
