"""The release in the registry: the image and the chart signed by digest with the release key,
the SBOM attested to the image; an image or a chart pushed under the release's tag by someone
else fails verification, and the digest the chart pins keeps naming the released image."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import yaml
from release_harness import Release, verify, verify_blob

from checkpoint_testenv import binaries, releasetools
from checkpoint_testenv.releasetools import cosign, make_keys, push_impostor


def tag_ref(reference: str, tag: str) -> str:
    """repository@digest -> repository:tag."""
    return f"{reference.split('@', 1)[0]}:{tag}"


def test_the_image_the_chart_and_the_sbom_verify_with_the_release_key(release: Release) -> None:
    version = str(release.record["version"])
    for reference in (release.image_ref, tag_ref(release.image_ref, version), release.chart_ref):
        assert verify(release, reference), reference
    attestation = cosign(
        "verify-attestation",
        *releasetools.offline(release.keys.public, release.folder / "trusted-root.json"),
        "--allow-http-registry",
        "--type",
        "spdxjson",
        release.image_ref,
    )
    assert attestation.returncode == 0, attestation.stderr
    statement = json.loads(base64.b64decode(json.loads(attestation.stdout)["payload"]))
    assert statement["predicateType"] == "https://spdx.dev/Document"
    assert statement["subject"][0]["digest"]["sha256"] == release.image["digest"][len("sha256:") :]


def test_another_key_does_not_verify_the_release(release: Release, tmp_path: Path) -> None:
    other = make_keys(tmp_path / "other")
    assert not verify(release, release.image_ref, public=other.public)
    assert not verify(release, release.chart_ref, public=other.public)


def test_a_tampered_image_under_the_release_tag_fails_and_the_digest_keeps_the_release(
    release: Release, tmp_path: Path
) -> None:
    version = str(release.record["version"])
    tagged = tag_ref(release.image_ref, version)
    released = release.image["digest"]
    original = release.registry.manifest(release.image_ref)
    impostor = make_keys(tmp_path / "impostor")
    try:
        tampered = push_impostor(release.registry, release.image_ref, tagged, impostor, tmp_path)
        assert release.registry.digest(tagged) == tampered != released
        assert not verify(release, tagged)  # signed, but not with the release key
        assert verify(release, tagged, public=impostor.public)  # (the impostor's key would)
        # the digest the chart pins still names the released image, and it still verifies
        assert release.registry.manifest(release.image_ref) == original
        assert verify(release, release.image_ref)
    finally:
        release.registry.crane("tag", release.image_ref, version)
    assert release.registry.digest(tagged) == released


def test_a_modified_chart_pushed_under_the_release_version_fails_verification(
    release: Release, tmp_path: Path
) -> None:
    chart = release.folder / str(release.record["chart"]["file"])  # type: ignore[index]
    modified = tmp_path / "chart" / chart.name
    modified.parent.mkdir()
    with tarfile.open(chart) as source, tarfile.open(modified, "w:gz") as target:
        for member in source:
            data = source.extractfile(member)
            body = data.read() if data is not None else b""
            if member.name.endswith("/values.yaml"):
                body = body.replace(b"replicaCount: 2", b"replicaCount: 3")
                member.size = len(body)
            target.addfile(member, io.BytesIO(body))
    bundle = chart.with_name(chart.name + ".sigstore.json")
    assert not verify_blob(release, modified, bundle)  # the file, offline
    repository = release.chart_ref.split("@", 1)[0]
    original = release.registry.manifest(release.chart_ref)
    helm = binaries.locate() / "helm"
    pushed = subprocess.run(
        [str(helm), "push", str(modified), f"oci://{repository.rsplit('/', 1)[0]}", "--plain-http"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    version = str(release.record["version"])
    try:
        assert pushed.returncode == 0, pushed.stderr
        assert release.registry.digest(f"{repository}:{version}") != release.chart_ref.split("@")[1]
        assert not verify(release, f"{repository}:{version}")
        assert release.registry.manifest(release.chart_ref) == original
        assert verify(release, release.chart_ref)
    finally:
        release.registry.crane("tag", release.chart_ref, version)


def test_helm_renders_the_chart_by_its_digest_with_the_image_by_its_digest(
    release: Release, tmp_path: Path
) -> None:
    """What the README's install does: the chart from the registry by digest; the digest the
    README's sed reads from its values; the Deployment's image by that digest."""
    helm = binaries.locate() / "helm"
    chart = f"oci://{release.chart_ref}"
    env = {**os.environ, "HOME": str(tmp_path)}

    def helm_run(*args: str) -> str:
        return subprocess.run(
            [str(helm), *args, "--plain-http"], capture_output=True, text=True, check=True, env=env
        ).stdout

    values = helm_run("show", "values", chart)
    sed = subprocess.run(
        ["sed", "-n", r's/^  digest: "\(sha256:[0-9a-f]*\)"$/\1/p'],
        input=values,
        capture_output=True,
        text=True,
        check=True,
    )
    assert sed.stdout.strip() == release.image["digest"]
    rendered = list(yaml.safe_load_all(helm_run("template", "checkpoints", chart)))
    (deployment,) = [o for o in rendered if o and o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    repository = f"{release.registry.host}/checkpoint-runtime"
    assert container["image"] == f"{repository}:{release.record['version']}@{sed.stdout.strip()}"
