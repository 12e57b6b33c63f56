"""The release tests' helpers: scripts/release/release.py as a module, the session's key pair,
the release it made, and cosign's offline verification."""

from __future__ import annotations

import importlib.util
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from checkpoint_testenv.binaries import REPO_ROOT
from checkpoint_testenv.registry import Registry
from checkpoint_testenv.releasetools import locate_cosign

RELEASE_DIR = REPO_ROOT / "scripts" / "release"


def load_release_script() -> ModuleType:
    """scripts/release/release.py as a module (its folder on the path for its own imports)."""
    if str(RELEASE_DIR) not in sys.path:
        sys.path.insert(0, str(RELEASE_DIR))
    spec = importlib.util.spec_from_file_location("release_script", RELEASE_DIR / "release.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Keys:
    private: Path
    public: Path
    env: dict[str, str]  # COSIGN_PASSWORD for the private key


@dataclass(frozen=True)
class Release:
    folder: Path
    record: dict[str, object]
    registry: Registry
    keys: Keys
    output: str  # stderr (progress), then stdout (the table)

    @property
    def image_ref(self) -> str:
        return str(self.pushed["image"])

    @property
    def chart_ref(self) -> str:
        return str(self.pushed["chart"])

    @property
    def pushed(self) -> dict[str, str]:
        pushed = self.record["pushed"]
        assert isinstance(pushed, dict)
        return pushed

    @property
    def image(self) -> dict[str, str]:
        image = self.record["image"]
        assert isinstance(image, dict)
        return image


def make_keys(folder: Path) -> Keys:
    """A cosign key pair with a random password."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {"COSIGN_PASSWORD": secrets.token_hex(16)}
    subprocess.run(
        [str(locate_cosign()), "generate-key-pair"],
        cwd=folder,
        check=True,
        env={**os.environ, **env},
        capture_output=True,
    )
    return Keys(folder / "cosign.key", folder / "cosign.pub", env)


def cosign(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """cosign ARGS (not checked: the tests read the exit code)."""
    return subprocess.run(
        [str(locate_cosign()), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def verify(release: Release, reference: str, public: Path | None = None) -> bool:
    """cosign verify REFERENCE with the release's public key (or `public`), offline."""
    result = cosign(
        "verify",
        "--key",
        public or release.keys.public,
        "--insecure-ignore-tlog",
        "--new-bundle-format",
        "--trusted-root",
        release.folder / "trusted-root.json",
        "--allow-http-registry",
        reference,
    )
    return result.returncode == 0


def verify_blob(release: Release, path: Path, bundle: Path) -> bool:
    result = cosign(
        "verify-blob",
        "--key",
        release.keys.public,
        "--insecure-ignore-tlog",
        "--new-bundle-format",
        "--trusted-root",
        release.folder / "trusted-root.json",
        "--bundle",
        bundle,
        path,
    )
    return result.returncode == 0
