"""The Kubernetes minors the compatibility tier runs on, read from where they are pinned.

The main control plane's minor is versions.env's KUBERNETES_VERSION (build.sh builds it with etcd
and helm); every extra minor is one scripts/testenv/apiserver-1.N/ module whose go.mod requires
k8s.io/kubernetes at its version (build-apiservers.sh builds only its kube-apiserver, which runs
over the main build's etcd). Nothing else lists the versions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from checkpoint_testenv import binaries
from checkpoint_testenv.binaries import REPO_ROOT

TESTENV = REPO_ROOT / "scripts" / "testenv"
VERSIONS_ENV = TESTENV / "versions.env"
_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")
UPGRADES = (("1.33", "1.34"), ("1.36", "1.37"))
"""The control-plane upgrades (and their rollbacks) run under a writing store: N to N+1."""


@dataclass(frozen=True)
class Minor:
    """One Kubernetes minor of the matrix: its pinned release and where its pin lives."""

    version: str
    """The pinned release, e.g. v1.34.4."""
    main: bool
    """The main control plane's minor (every other tier runs on it)."""

    @property
    def number(self) -> int:
        """The minor number (34 of v1.34.4)."""
        return int(_parse(self.version)[0])

    @property
    def name(self) -> str:
        """ "1.34": the name of its module folder, its test ids and its README row."""
        return f"1.{self.number}"

    @property
    def kube_version(self) -> str:
        """The release without its "v" (helm's --kube-version, /version's gitVersion minus v)."""
        return self.version.removeprefix("v")


def _parse(version: str) -> tuple[str, str]:
    match = _VERSION.match(version)
    if match is None:
        raise ValueError(f"not a Kubernetes v1.N.P release: {version!r}")
    return match[1], match[2]


def _env_value(path: Path, name: str) -> str:
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    raise ValueError(f"{path} sets no {name}")


def go_pin(go_mod: Path, module: str) -> str:
    """The version `go_mod` requires of `module` (as cache.sh's go_pin reads it)."""
    for line in go_mod.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0] == module:
            return fields[1]
    raise ValueError(f"{go_mod} requires no {module}")


@cache
def matrix() -> tuple[Minor, ...]:
    """Every minor, oldest first: the main one and one per apiserver-1.N/ module."""
    return read_matrix(TESTENV)


def read_matrix(testenv: Path) -> tuple[Minor, ...]:
    """The minors pinned under `testenv` (versions.env and apiserver-1.N/go.mod), oldest first;
    a module whose pin is not its folder's minor, or a minor pinned twice, is an error."""
    minors = [Minor(_env_value(testenv / VERSIONS_ENV.name, "KUBERNETES_VERSION"), main=True)]
    for go_mod in sorted(testenv.glob("apiserver-1.*/go.mod")):
        minor = Minor(go_pin(go_mod, "k8s.io/kubernetes"), main=False)
        if go_mod.parent.name != f"apiserver-{minor.name}":
            raise ValueError(f"{go_mod} pins {minor.version}, not its folder's minor")
        minors.append(minor)
    numbers = [minor.number for minor in minors]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"a minor is pinned twice: {[m.version for m in minors]}")
    return tuple(sorted(minors, key=lambda minor: minor.number))


def kube_version_range(minors: tuple[Minor, ...]) -> str:
    """The Helm `kubeVersion` that admits exactly `minors` (any patch, vendor suffixes too):
    one `>=1.A.0-0 <1.B.0-0` per run of consecutive minors, joined by ` || `."""
    runs: list[list[int]] = []
    for number in sorted(minor.number for minor in minors):
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return " || ".join(f">=1.{run[0]}.0-0 <1.{run[-1] + 1}.0-0" for run in runs)


def main_minor() -> Minor:
    """The main control plane's minor."""
    (main,) = [minor for minor in matrix() if minor.main]
    return main


def by_name(name: str) -> Minor:
    """The minor named `name` ("1.34")."""
    for minor in matrix():
        if minor.name == name:
            return minor
    raise KeyError(f"no minor {name} in the matrix: {[m.name for m in matrix()]}")


def apiserver_binary(minor: Minor) -> Path:
    """The kube-apiserver of `minor`, built if needed (the main build's for the main minor)."""
    if minor.main:
        return binaries.locate() / "kube-apiserver"
    return binaries.locate_apiserver(minor.name)
