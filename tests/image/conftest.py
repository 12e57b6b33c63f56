"""The image, built once per test session by scripts/image/build.sh and run with podman + runc."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from image_harness import GATE_BUILD_SCRIPT, ImageError, Podman, build_image, require_tools

IMAGE_FIXTURES = {"image_build", "image_archive", "podman", "image", "gate_archive", "gate_image"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if IMAGE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.image)


@pytest.fixture(scope="session")
def image_build() -> tuple[Path, str]:
    """(archive, build.sh's stderr): the image built, or taken from the cache, once a session."""
    return build_image()


@pytest.fixture(scope="session")
def image_archive(image_build: tuple[Path, str]) -> Path:
    return image_build[0]


@pytest.fixture(scope="session")
def podman(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Podman]:
    """Podman on storage of this session's own, removed at the end."""
    require_tools()
    if os.geteuid() != 0:
        raise ImageError("the image tests run podman as root (runc, host mounts): run as root")
    # The run root holds conmon's sockets, whose paths must stay under 108 characters.
    short = "/run" if os.access("/run", os.W_OK) else None
    run = Path(tempfile.mkdtemp(prefix="cr-podman-", dir=short))
    engine = Podman(tmp_path_factory.mktemp("podman-storage"), run)
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def image(podman: Podman, image_archive: Path) -> str:
    """The image's name, loaded from the archive build.sh made."""
    return podman.load(image_archive)


@pytest.fixture(scope="session")
def gate_archive() -> Path:
    """The gate image's archive, built by build-gate.sh (or taken from its cache) once a session."""
    return build_image(GATE_BUILD_SCRIPT)[0]


@pytest.fixture(scope="session")
def gate_image(podman: Podman, gate_archive: Path) -> str:
    return podman.load(gate_archive)
