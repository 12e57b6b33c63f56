"""The release tests' helpers: scripts/release/release.py as a module, the release the
session made, and cosign's offline verification with the release's keys."""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from checkpoint_testenv import releasetools
from checkpoint_testenv.registry import Registry
from checkpoint_testenv.releasetools import SigningKeys, cosign

RELEASE_DIR = releasetools.RELEASE_SCRIPT.parent


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
class Release:
    folder: Path
    record: dict[str, object]
    registry: Registry
    keys: SigningKeys
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


def verify(release: Release, reference: str, public: Path | None = None) -> bool:
    """cosign verify REFERENCE with the release's public key (or `public`), offline."""
    trusted_root = release.folder / "trusted-root.json"
    return releasetools.verify(reference, public or release.keys.public, trusted_root)


def verify_blob(release: Release, path: Path, bundle: Path) -> bool:
    result = cosign(
        "verify-blob",
        *releasetools.offline(release.keys.public, release.folder / "trusted-root.json"),
        "--bundle",
        bundle,
        path,
    )
    return result.returncode == 0
