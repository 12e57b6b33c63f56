"""The release's tools: cosign (signing) and syft with ntia-conformance-checker (the SBOM).

They come from scripts/testenv/build-cosign.sh and build-sbom-tools.sh (built from the Go
modules pinned in scripts/testenv/cosign/ and sbom-tools/, cached per pin), or from the folders
named by CHECKPOINT_COSIGN_BIN and CHECKPOINT_SBOM_TOOLS_BIN. The registry client (crane) is the
test registry's (checkpoint_testenv.registry). A missing binary is an error, never a reason to
skip.

cosign runs offline here: key-based signatures, nothing uploaded to a transparency log, and an
empty trust root (EMPTY_TRUSTED_ROOT) so that verification looks up no public-good instance.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from checkpoint_testenv.binaries import REPO_ROOT, locate_built
from checkpoint_testenv.registry import Registry

COSIGN_BIN_ENV = "CHECKPOINT_COSIGN_BIN"
COSIGN_BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-cosign.sh"
SBOM_TOOLS_BIN_ENV = "CHECKPOINT_SBOM_TOOLS_BIN"
SBOM_TOOLS_BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-sbom-tools.sh"
RELEASE_SCRIPT = REPO_ROOT / "scripts" / "release" / "release.py"

EMPTY_TRUSTED_ROOT = {
    "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
    "tlogs": [],
    "certificateAuthorities": [],
    "ctlogs": [],
    "timestampAuthorities": [],
}
"""A sigstore trust root that trusts no log, CA or timestamp authority: given to cosign with
--trusted-root, it verifies against the public key alone and fetches no trust root."""


@cache
def locate_cosign() -> Path:
    """The `cosign` binary, building it if needed."""
    return locate_built(COSIGN_BIN_ENV, COSIGN_BUILD_SCRIPT, ("cosign",)) / "cosign"


@cache
def locate_sbom_tools() -> Path:
    """The folder holding `syft` and `ntia-checker`, building them if needed."""
    return locate_built(SBOM_TOOLS_BIN_ENV, SBOM_TOOLS_BUILD_SCRIPT, ("syft", "ntia-checker"))


def write_empty_trusted_root(path: Path) -> Path:
    path.write_text(json.dumps(EMPTY_TRUSTED_ROOT, indent=2) + "\n", encoding="utf-8")
    return path


@dataclass(frozen=True)
class SigningKeys:
    """A cosign key pair made for a test session (never a committed key)."""

    private: Path
    public: Path
    env: dict[str, str]  # COSIGN_PASSWORD, the private key's random password


def make_keys(folder: Path) -> SigningKeys:
    """A cosign key pair with a random password, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {"COSIGN_PASSWORD": secrets.token_hex(16)}
    subprocess.run(
        [str(locate_cosign()), "generate-key-pair"],
        cwd=folder,
        check=True,
        env={**os.environ, **env},
        capture_output=True,
    )
    return SigningKeys(folder / "cosign.key", folder / "cosign.pub", env)


def cosign(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """cosign ARGS, output captured (not checked: callers read the exit code)."""
    return subprocess.run(
        [str(locate_cosign()), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def offline(public: Path, trusted_root: Path) -> list[str | Path]:
    """cosign's flags that verify with the release's key and ask nothing of the network: no
    transparency log (the release signs without one), the bundle format it signs in, and its
    empty trusted root (without one cosign fetches sigstore's)."""
    return [
        "--key",
        public,
        "--insecure-ignore-tlog",
        "--new-bundle-format",
        "--trusted-root",
        trusted_root,
    ]


def verify(reference: str, public: Path, trusted_root: Path) -> bool:
    """`cosign verify` of a registry reference with a public key, offline, plain HTTP allowed."""
    result = cosign("verify", *offline(public, trusted_root), "--allow-http-registry", reference)
    return result.returncode == 0


@dataclass(frozen=True)
class MadeRelease:
    folder: Path
    record: dict[str, Any]  # release.json
    output: str  # the script's stderr (progress), then its stdout (the table)


def push_release(
    host: str, keys: SigningKeys, out: Path, *args: str, timeout: float = 900
) -> MadeRelease:
    """scripts/release/release.py --push HOST (plain HTTP) signed with `keys`, into `out`."""
    argv = [
        sys.executable,
        str(RELEASE_SCRIPT),
        "--push",
        host,
        "--plain-http",
        "--key",
        str(keys.private),
        "--out",
        str(out),
        "--allow-dirty",
        *args,
    ]
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO_ROOT,
        env={**os.environ, **keys.env},
        timeout=timeout,
    )
    if result.returncode != 0:
        raise RuntimeError(f"release.py failed ({result.returncode}):\n{result.stderr[-4000:]}")
    record = json.loads((out / "release.json").read_text())
    return MadeRelease(out, record, result.stderr + result.stdout)


def push_impostor(
    registry: Registry, image_ref: str, reference: str, keys: SigningKeys, workdir: Path
) -> str:
    """An image built on `image_ref` (one more layer, replacing the runtime's entrypoint) pushed
    to `reference` (a tag) and signed there with `keys`, as an attacker with push access and a
    key of their own would; its digest."""
    layer = workdir / "impostor-layer.tar"
    with tarfile.open(layer, "w") as archive:
        member = tarfile.TarInfo("opt/venv/bin/checkpoint-runtime")
        data = b"#!/bin/sh\necho impostor\n"
        member.size = len(data)
        member.mode = 0o755
        archive.addfile(member, io.BytesIO(data))
    registry.crane("append", "-b", image_ref, "-f", str(layer), "-t", reference)
    digest = registry.digest(reference)
    signed = cosign(
        "sign",
        "--key",
        keys.private,
        "--tlog-upload=false",
        "--yes",
        "--new-bundle-format",
        "--allow-http-registry",
        f"{reference.rsplit(':', 1)[0]}@{digest}",
        env=keys.env,
    )
    if signed.returncode != 0:
        raise RuntimeError(f"cosign sign failed: {signed.stderr}")
    return digest
