"""The release, made once per test session by scripts/release/release.py and pushed to the test
registry, signed with a key pair made for this session (never a committed key)."""

from __future__ import annotations

from types import ModuleType

import pytest
from release_harness import Release, load_release_script

from checkpoint_testenv.registry import Registry
from checkpoint_testenv.releasetools import SigningKeys, make_keys, push_release


@pytest.fixture(scope="session")
def release_script() -> ModuleType:
    return load_release_script()


@pytest.fixture(scope="session")
def release_keys(tmp_path_factory: pytest.TempPathFactory) -> SigningKeys:
    return make_keys(tmp_path_factory.mktemp("release-keys"))


@pytest.fixture(scope="session")
def release(
    oci_registry: Registry, release_keys: SigningKeys, tmp_path_factory: pytest.TempPathFactory
) -> Release:
    """`release.py --push` to the test registry (the image from build.sh, cached by its inputs)."""
    made = push_release(oci_registry.host, release_keys, tmp_path_factory.mktemp("release") / "out")
    return Release(made.folder, made.record, oci_registry, release_keys, made.output)
