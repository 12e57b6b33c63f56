"""The image archives a node imports: the pause image and the project's own image.

Both are built by the project's scripts (scripts/testenv/build-node.sh, scripts/image/build.sh),
which print the archive's path as their last stdout line and cache what they built.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from checkpoint_testenv.binaries import REPO_ROOT, BinariesMissing
from checkpoint_testenv.support.releases import HistoryMissing, extract_release

NODE_PINS = REPO_ROOT / "scripts" / "testenv" / "node-versions.env"
APP_IMAGE_SCRIPT = REPO_ROOT / "scripts" / "image" / "build.sh"
APP_IMAGE_ENV = "CHECKPOINT_TESTENV_APP_IMAGE"  # an archive to use instead of building one
PAUSE_ARCHIVE = "pause.tar"


def pause_image() -> str:
    """The pause image's name (its pin in node-versions.env): containerd's sandbox image."""
    for line in NODE_PINS.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "PAUSE_IMAGE":
            return value.strip()
    raise BinariesMissing(f"no PAUSE_IMAGE in {NODE_PINS}")


def app_image_archive() -> Path:
    """Build (or find cached) the project's image, or take $CHECKPOINT_TESTENV_APP_IMAGE."""
    configured = os.environ.get(APP_IMAGE_ENV)
    if configured:
        if not Path(configured).is_file():
            raise BinariesMissing(f"${APP_IMAGE_ENV}={configured} is not a file")
        return Path(configured)
    if not APP_IMAGE_SCRIPT.is_file():
        raise BinariesMissing(f"{APP_IMAGE_SCRIPT} not found: the project's image cannot be built")
    # stderr is left to the terminal: a cold image build takes minutes and reports progress.
    result = subprocess.run(
        [str(APP_IMAGE_SCRIPT)], stdout=subprocess.PIPE, text=True, check=False, cwd=REPO_ROOT
    )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines or not Path(lines[-1]).is_file():
        raise BinariesMissing(
            f"{APP_IMAGE_SCRIPT} failed (exit code {result.returncode}); run it by hand to see why"
        )
    return Path(lines[-1])


PREVIOUS_VERSION = "0.0.9"
"""The version the previous release's image is built as, so its tag differs from this tree's."""


@dataclass(frozen=True)
class PreviousRelease:
    """The previous release's chart folder and image archive, built from the repository's
    history (its own sources, chart and image scripts)."""

    chart_dir: Path
    archive: Path
    tag: str


def previous_release(workdir: Path) -> PreviousRelease:
    """Extract PREVIOUS_RELEASE from git into `workdir` and build its image with its own
    scripts/image/build.sh (cached by content like this tree's image), as PREVIOUS_VERSION."""
    tree = workdir / "previous-release"
    if not (tree / "pyproject.toml").is_file():
        try:
            extract_release(tree)
        except HistoryMissing as error:
            raise BinariesMissing(str(error)) from error
        pyproject = tree / "pyproject.toml"
        text = pyproject.read_text()
        versioned = re.sub(
            r'(?m)^version = "[^"]*"$', f'version = "{PREVIOUS_VERSION}"', text, count=1
        )
        pyproject.write_text(versioned)
    script = tree / "scripts" / "image" / "build.sh"
    result = subprocess.run([str(script)], stdout=subprocess.PIPE, text=True, check=False, cwd=tree)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines or not Path(lines[-1]).is_file():
        raise BinariesMissing(
            f"{script} (the previous release's image) failed (exit code {result.returncode})"
        )
    return PreviousRelease(
        tree / "charts" / "checkpoint-runtime", Path(lines[-1]), PREVIOUS_VERSION
    )
