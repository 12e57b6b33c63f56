"""The release folder: every artifact listed in SHA256SUMS, the checksums and the chart signed
with the release key, the chart pinning the image by the digest of the OCI archive beside it,
one home for the version, and a chart package that is the same bytes every time."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from release_harness import RELEASE_DIR, Release, verify_blob

from checkpoint_testenv.binaries import REPO_ROOT


def test_the_folder_holds_the_artifacts_and_sha256sums_lists_each(release: Release) -> None:
    version = release.record["version"]
    names = {path.name for path in release.folder.iterdir()}
    assert {
        f"checkpoint-runtime-{version}.tgz",
        f"checkpoint-runtime-{version}.tgz.sigstore.json",
        f"checkpoint-runtime-{version}.oci.tar",
        f"checkpoint-runtime-{version}.spdx.json",
        f"checkpoint-runtime-{version}.cdx.json",
        "cosign.pub",
        "release.json",
        "SHA256SUMS",
        "SHA256SUMS.sigstore.json",
    } <= names
    assert not any(name.endswith(".key") for name in names)  # never the private key
    listed = dict(
        reversed(line.split("  ", 1))
        for line in (release.folder / "SHA256SUMS").read_text().splitlines()
    )
    assert set(listed) == names - {"SHA256SUMS", "SHA256SUMS.sigstore.json"}
    for name, digest in listed.items():
        assert hashlib.sha256((release.folder / name).read_bytes()).hexdigest() == digest, name
    # the table at the end names each file with its digest
    for digest in listed.values():
        assert f"sha256:{digest}" in release.output
    assert re.search(rf"^image manifest\s+{release.image['digest']}$", release.output, re.M)


def test_the_checksums_and_the_chart_verify_with_the_release_key_and_fail_when_changed(
    release: Release, tmp_path: Path
) -> None:
    sums = release.folder / "SHA256SUMS"
    chart = release.folder / str(release.record["chart"]["file"])  # type: ignore[index]
    assert verify_blob(release, sums, release.folder / "SHA256SUMS.sigstore.json")
    assert verify_blob(release, chart, chart.with_name(chart.name + ".sigstore.json"))
    changed = tmp_path / "SHA256SUMS"
    changed.write_text(sums.read_text().replace("  cosign.pub", "  cosign.pub.other"))
    assert not verify_blob(release, changed, release.folder / "SHA256SUMS.sigstore.json")


def chart_file(chart: Path, name: str) -> str:
    with tarfile.open(chart) as archive:
        member = archive.extractfile(f"checkpoint-runtime/{name}")
        assert member is not None
        return member.read().decode()


def test_the_chart_pins_the_image_by_the_digest_of_the_oci_archive(release: Release) -> None:
    with tarfile.open(release.folder / str(release.image["file"])) as archive:
        index = archive.extractfile("index.json")
        assert index is not None
        (manifest,) = json.load(index)["manifests"]
    digest = release.image["digest"]
    assert manifest["digest"] == digest
    chart = release.folder / str(release.record["chart"]["file"])  # type: ignore[index]
    values = yaml.safe_load(chart_file(chart, "values.yaml"))["image"]
    assert values == {
        **values,
        "repository": f"{release.registry.host}/checkpoint-runtime",
        "tag": release.record["version"],
        "digest": digest,
    }
    annotations = yaml.safe_load(chart_file(chart, "Chart.yaml"))["annotations"]
    (image,) = yaml.safe_load(annotations["artifacthub.io/images"])
    assert image["image"] == f"{values['repository']}:{values['tag']}@{digest}"
    assert annotations["artifacthub.io/license"] == "Apache-2.0"
    assert yaml.safe_load(annotations["artifacthub.io/changes"])[0]["kind"] == "added"


def test_pyproject_is_the_versions_one_home_and_a_disagreeing_chart_is_refused(
    release_script: ModuleType, tmp_path: Path
) -> None:
    assert release_script.version_mismatches(REPO_ROOT) == []
    copy = tmp_path / "repo"
    shutil.copytree(
        REPO_ROOT / "charts" / "checkpoint-runtime", copy / "charts" / "checkpoint-runtime"
    )
    shutil.copy(REPO_ROOT / "pyproject.toml", copy / "pyproject.toml")
    chart_yaml = copy / "charts" / "checkpoint-runtime" / "Chart.yaml"
    chart_yaml.write_text(chart_yaml.read_text().replace('appVersion: "', 'appVersion: "9', 1))
    mismatches = release_script.version_mismatches(copy)
    assert len(mismatches) == 1
    assert "appVersion" in mismatches[0]


def test_the_release_refuses_a_disagreeing_version_or_a_dirty_tree(
    release_script: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = argparse.Namespace(allow_dirty=False)
    monkeypatch.setattr(release_script, "version_mismatches", lambda: ["Chart.yaml version is '9'"])
    with pytest.raises(release_script.ReleaseError, match=r"Chart\.yaml version is '9'"):
        release_script.release(args)
    monkeypatch.setattr(release_script, "version_mismatches", lambda: [])
    monkeypatch.setattr(release_script, "revision", lambda: "abc-dirty")
    with pytest.raises(release_script.ReleaseError, match="uncommitted changes"):
        release_script.release(args)


def test_the_release_never_clears_a_folder_that_holds_no_release(
    release_script: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """It empties its folder first, so it refuses one with files that are not a release's."""
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.setattr(release_script, "revision", lambda: "abc")
    args = argparse.Namespace(allow_dirty=False, push=None, registry=None, out=tmp_path)
    with pytest.raises(release_script.ReleaseError, match=r"holds files but no release\.json"):
        release_script.release(args)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def package(out: Path, *args: str) -> Path:
    subprocess.run(
        [
            sys.executable,
            str(RELEASE_DIR / "release.py"),
            "--chart-only",
            "--allow-dirty",
            "--out",
            str(out),
            *args,
        ],
        check=True,
        capture_output=True,
        cwd=REPO_ROOT,
    )
    (chart,) = out.glob("*.tgz")
    return chart


def test_two_packages_of_one_commit_are_the_same_bytes_as_the_release(
    release: Release, tmp_path: Path
) -> None:
    """helm takes the files' times from SOURCE_DATE_EPOCH (the commit's time), so the chart
    packaged again, with the release's registry and digest, is the release's chart."""
    pinned = ("--registry", release.registry.host, "--image-digest", release.image["digest"])
    first = package(tmp_path / "a", *pinned)
    second = package(tmp_path / "b", *pinned)
    released = release.folder / str(release.record["chart"]["file"])  # type: ignore[index]
    assert first.read_bytes() == second.read_bytes() == released.read_bytes()
    # and the times in it are the commit's, not the packaging's
    with tarfile.open(first) as archive:
        assert {member.mtime for member in archive} == {release.record["source_date_epoch"]}


def test_the_release_script_answers_help() -> None:
    result = subprocess.run(
        [sys.executable, str(RELEASE_DIR / "release.py"), "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert "--push REGISTRY" in result.stdout


def test_the_sign_key_annotation_names_the_keys_fingerprint_and_where_to_fetch_it(
    release_script: ModuleType, release: Release
) -> None:
    """With --key-url the packaged Chart.yaml carries artifacthub.io/signKey (fingerprint and
    url, both of which Artifact Hub requires)."""
    chart_yaml = (REPO_ROOT / "charts" / "checkpoint-runtime" / "Chart.yaml").read_text()
    fingerprint = release_script.key_fingerprint(release.keys.public)
    assert fingerprint == hashlib.sha256(release.keys.public.read_bytes()).hexdigest()
    key = {"fingerprint": fingerprint, "url": "https://keys.invalid/cosign.pub"}
    text = release_script.annotate(chart_yaml, "REGISTRY/checkpoint-runtime:1@sha256:ab", key)
    annotations = yaml.safe_load(text)["annotations"]
    assert yaml.safe_load(annotations["artifacthub.io/signKey"]) == key
    (image,) = yaml.safe_load(annotations["artifacthub.io/images"])
    assert image == {
        "name": "checkpoint-runtime",
        "image": "REGISTRY/checkpoint-runtime:1@sha256:ab",
    }


def test_links_name_the_source_and_the_security_contact_and_bad_ones_are_refused(
    release_script: ModuleType,
) -> None:
    """`--link NAME=URL` (repeatable) writes artifacthub.io/links; a link that is not
    NAME=https://... is refused by the option's parser, before anything is built."""
    chart_yaml = (REPO_ROOT / "charts" / "checkpoint-runtime" / "Chart.yaml").read_text()
    links = [
        release_script.parse_link("source=https://src.invalid/checkpoint-runtime"),
        release_script.parse_link("security=https://src.invalid/security"),
    ]
    text = release_script.annotate(chart_yaml, "REGISTRY/checkpoint-runtime:1", None, links)
    annotations = yaml.safe_load(text)["annotations"]
    assert yaml.safe_load(annotations["artifacthub.io/links"]) == [
        {"name": "source", "url": "https://src.invalid/checkpoint-runtime"},
        {"name": "security", "url": "https://src.invalid/security"},
    ]
    assert (
        "artifacthub.io/links"
        not in yaml.safe_load(
            release_script.annotate(chart_yaml, "REGISTRY/checkpoint-runtime:1", None)
        )["annotations"]
    )
    for bad in ("security", "=https://x.invalid", "security=http://x.invalid", 'a=https://"'):
        result = subprocess.run(
            [sys.executable, str(RELEASE_DIR / "release.py"), "--link", bad],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 2, bad
        assert "is not NAME=https://" in result.stderr
        assert "Traceback" not in result.stderr
