"""The release's SBOM covers every package the image's own tools list: `dpkg-query -W` and
`pip list`, run inside the image's root filesystem; and the release refuses an SBOM that falls
short of the NTIA minimum elements (ntia-conformance-checker's verdict)."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote

import pytest
from packaging.utils import canonicalize_name
from release_harness import Release

from checkpoint_testenv.releasetools import locate_sbom_tools


def unpack_rootfs(oci_tar: Path, scratch: Path) -> Path:
    """The image's root filesystem: its layers, in order, from the release's OCI archive."""
    layout, rootfs = scratch / "layout", scratch / "rootfs"
    with tarfile.open(oci_tar) as archive:
        archive.extractall(layout, filter="data")

    def blob(digest: str) -> Path:
        return layout / "blobs" / digest.replace(":", "/")

    (entry,) = json.loads((layout / "index.json").read_text())["manifests"]
    for layer in json.loads(blob(entry["digest"]).read_text())["layers"]:
        with tarfile.open(blob(layer["digest"]), "r:gz") as tar:
            tar.extractall(rootfs, filter="fully_trusted")
    return rootfs


def in_image(rootfs: Path, *argv: str) -> str:
    assert os.geteuid() == 0, "listing the image's packages chroots into it: run as root"
    env = {"PATH": "/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}
    return subprocess.run(
        ["chroot", str(rootfs), *argv], capture_output=True, text=True, check=True, env=env
    ).stdout


def pip_in(rootfs: Path) -> list[str]:
    """How the image's venv runs pip: its own, or Debian's pip wheel (python3-pip-whl) for a
    venv made without pip."""
    if list((rootfs / "opt/venv/lib").glob("python3*/site-packages/pip/__init__.py")):
        return ["-m", "pip"]
    (wheel,) = (rootfs / "usr/share/python-wheels").glob("pip-*.whl")
    return [f"/{wheel.relative_to(rootfs)}/pip"]


def sbom_packages(spdx: dict[str, object]) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(Debian, Python) packages of the SPDX document, as (name, version) from their purls."""
    debian, python = set(), set()
    for package in spdx["packages"]:  # type: ignore[attr-defined]
        purls = [
            r["referenceLocator"]
            for r in package.get("externalRefs", [])
            if r["referenceType"] == "purl"
        ]
        for purl in purls:
            kind, _, rest = purl.partition("/")
            name, _, version = unquote(rest.split("?")[0].rsplit("/", 1)[-1]).partition("@")
            if kind == "pkg:deb":
                debian.add((name, version))
            elif kind == "pkg:pypi":
                python.add((canonicalize_name(name), version))
    return debian, python


def test_the_sbom_covers_every_package_dpkg_query_and_pip_list_see_in_the_image(
    release: Release, tmp_path: Path
) -> None:
    rootfs = unpack_rootfs(release.folder / str(release.image["file"]), tmp_path)
    dpkg = {
        tuple(line.split("\t"))
        for line in in_image(
            rootfs, "dpkg-query", "-W", "-f", "${Package}\t${Version}\n"
        ).splitlines()
    }
    pip = {
        (canonicalize_name(entry["name"]), entry["version"])
        for entry in json.loads(
            in_image(
                rootfs,
                "/opt/venv/bin/python",
                *pip_in(rootfs),
                "list",
                "--format",
                "json",
                "--disable-pip-version-check",
            )
        )
    }
    assert len(dpkg) > 80
    assert len(pip) > 30
    assert ("checkpoint-runtime", str(release.record["version"])) in pip
    spdx = json.loads((release.folder / str(release.record["sbom"]["spdx"])).read_text())  # type: ignore[index]
    debian, python = sbom_packages(spdx)
    assert dpkg - debian == set(), "Debian packages the SBOM misses"
    assert pip - python == set(), "Python packages the SBOM misses"
    # every package of the document has a supplier (what the NTIA check asked of the release)
    assert all(p.get("supplier", "NOASSERTION") != "NOASSERTION" for p in spdx["packages"])


def test_an_sbom_without_suppliers_is_refused(release_script: ModuleType, tmp_path: Path) -> None:
    """The release stops on the checker's no: here to a document whose package names no
    supplier."""
    document = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": "probe",
        "documentNamespace": "https://spdx.org/spdxdocs/probe-1",
        "creationInfo": {"created": "2026-01-01T00:00:00Z", "creators": ["Tool: probe"]},
        "packages": [
            {
                "name": "probe",
                "SPDXID": "SPDXRef-probe",
                "versionInfo": "1.0",
                "downloadLocation": "NOASSERTION",
                "supplier": "NOASSERTION",
            }
        ],
        "relationships": [
            {
                "spdxElementId": "SPDXRef-DOCUMENT",
                "relationshipType": "DESCRIBES",
                "relatedSpdxElement": "SPDXRef-probe",
            }
        ],
    }
    spdx = tmp_path / "probe.spdx.json"
    checker = locate_sbom_tools() / "ntia-checker"
    spdx.write_text(json.dumps(document))
    with pytest.raises(release_script.ReleaseError, match="NTIA minimum elements") as refused:
        release_script.check_sbom(checker, spdx)
    assert str(refused.value).endswith("componentSuppliers: probe")
    document["packages"][0]["supplier"] = "Organization: probe makers"  # type: ignore[index]
    spdx.write_text(json.dumps(document))
    assert release_script.check_sbom(checker, spdx)["isNtiaConformant"] is True
