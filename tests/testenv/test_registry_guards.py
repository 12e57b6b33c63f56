"""The OCI registry fixture fails loudly without `crane` (never skips), and the registry it
starts is a real, content-addressed one: a pushed image comes back by tag and by digest with the
bytes its digest names, and a tag moved to another image leaves the first one's digest intact."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest
from inner_pytest import fixture_without_binaries

from checkpoint_testenv import registry
from checkpoint_testenv.registry import Registry


def test_registry_fixture_errors_instead_of_skipping(tmp_path: Path) -> None:
    output = fixture_without_binaries(tmp_path, "oci_registry", registry.BIN_ENV)
    assert "OCI test registry unavailable: crane not executable" in output


def layer(path: Path, text: str) -> Path:
    """A one-file layer tarball."""
    with tarfile.open(path, "w") as archive:
        data = text.encode()
        member = tarfile.TarInfo("hello.txt")
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    return path


def test_the_registry_serves_a_pushed_image_by_tag_and_by_digest(
    oci_registry: Registry, tmp_path: Path
) -> None:
    assert oci_registry.host.startswith("127.0.0.1:")  # loopback only
    repository = f"{oci_registry.host}/guards/hello"
    oci_registry.crane("append", "-f", str(layer(tmp_path / "a.tar", "a")), "-t", f"{repository}:1")
    first = oci_registry.digest(f"{repository}:1")
    manifest = oci_registry.manifest(f"{repository}@{first}")
    assert f"sha256:{hashlib.sha256(manifest.encode()).hexdigest()}" == first
    assert oci_registry.tags(repository) == ["1"]

    oci_registry.crane("append", "-f", str(layer(tmp_path / "b.tar", "b")), "-t", f"{repository}:1")
    second = oci_registry.digest(f"{repository}:1")
    assert second != first
    assert oci_registry.manifest(f"{repository}@{first}") == manifest  # the digest still resolves
    with pytest.raises(RuntimeError, match=r"MANIFEST_UNKNOWN|NAME_UNKNOWN|not found"):
        oci_registry.digest(f"{repository}:2")
