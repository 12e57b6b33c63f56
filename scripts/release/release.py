"""Build the release into one folder: the chart package, the image as an OCI archive, its SBOM,
signatures and checksums; with --push, push the chart and the image to a registry and sign them
there, the SBOM attached to the image's digest as a signed attestation.

    scripts/just release [--registry REGISTRY | --push REGISTRY] [--key cosign.key] [--out DIR]

Everything comes from this checkout: the version from pyproject.toml (the chart's version,
appVersion and image tag must say the same), the image from scripts/image/build.sh (its last
stdout line is a docker-archive), the tools from their pinned builds (helm, crane, cosign, syft,
ntia-conformance-checker). The chart is packaged with SOURCE_DATE_EPOCH from the commit, so two
packages of one commit are the same bytes; the image's manifest digest is written into the
packaged chart (values.yaml image.digest and the artifacthub.io/images annotation), so an
install of the chart pulls that image by digest.

Signatures are cosign's, key-based and offline: none goes to a transparency log. The key is
--key (or $CHECKPOINT_RELEASE_KEY; its password in $COSIGN_PASSWORD); without one the release is
signed with a key made for this run and thrown away, which proves nothing to anyone else (it
says so). Only the public key, cosign.pub, goes into the folder.

Progress goes to stderr; the release ends with a table of what it made (name, size, digest) on
stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import suppliers
import yaml

from checkpoint_testenv import binaries, registry, releasetools

ROOT = Path(__file__).resolve().parents[2]
NAME = "checkpoint-runtime"
CHART = ROOT / "charts" / NAME
IMAGE_BUILD = ROOT / "scripts" / "image" / "build.sh"
KEY_ENV = "CHECKPOINT_RELEASE_KEY"
SBOM_TYPE = "spdxjson"  # cosign attest --type of the SBOM attestation
# The NTIA minimum elements in ntia-conformance-checker's report: of the document, and of each
# component (the report lists the components that lack one).
NTIA_DOCUMENT = ("authorNameProvided", "timestampProvided", "dependencyRelationshipsProvided")
NTIA_COMPONENTS = (
    "componentNames",
    "componentVersions",
    "componentIdentifiers",
    "componentSuppliers",
)
SUPPLIER = "Organization: checkpoint-runtime maintainers"  # the project's own packages' supplier
_STARTED = time.monotonic()


def log(message: str) -> None:
    print(f"release: [{time.monotonic() - _STARTED:4.0f}s] {message}", file=sys.stderr, flush=True)


class ReleaseError(RuntimeError):
    """The release cannot be made as asked; the message says why."""


def run(argv: list[str | Path], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    """Run a tool; its stdout, or a ReleaseError with its stderr."""
    result = subprocess.run(
        [str(arg) for arg in argv],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        check=False,
    )
    if result.returncode != 0:
        name = Path(str(argv[0])).name
        raise ReleaseError(
            f"{name} {' '.join(map(str, argv[1:3]))} failed:\n{result.stderr[-3000:]}"
        )
    return result.stdout


# ---- the version: pyproject.toml is its one home ---------------------------------------------


def project_version(root: Path = ROOT) -> str:
    version: str = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    return version


def version_mismatches(root: Path = ROOT) -> list[str]:
    """Where the chart disagrees with pyproject.toml's version (empty when all agree)."""
    version = project_version(root)
    chart = yaml.safe_load((root / "charts" / NAME / "Chart.yaml").read_text())
    values = yaml.safe_load((root / "charts" / NAME / "values.yaml").read_text())
    said = {
        "Chart.yaml version": str(chart.get("version")),
        "Chart.yaml appVersion": str(chart.get("appVersion")),
        "values.yaml image.tag": str(values.get("image", {}).get("tag")),
    }
    return [f"{where} is {value!r}" for where, value in said.items() if value != version]


# ---- the packaged chart: the image by digest written in --------------------------------------


def pin_image(values: str, repository: str, digest: str) -> str:
    """values.yaml with the image block's repository and digest set (comments kept)."""
    block = re.search(r"^image:\n(?:(?:  .*|\s*)\n)+", values, re.MULTILINE)
    if block is None:
        raise ReleaseError("values.yaml has no top-level image: block")
    text = block[0]
    for key, value in (("repository", repository), ("digest", digest)):
        text, count = re.subn(rf"^  {key}: .*$", f"  {key}: {json.dumps(value)}", text, flags=re.M)
        if count != 1:
            raise ReleaseError(f"values.yaml's image block has {count} {key}: lines, not 1")
    return values[: block.start()] + text + values[block.end() :]


def parse_link(text: str) -> tuple[str, str]:
    """`--link NAME=URL`: a link Artifact Hub shows on the chart's page (e.g. source, security)."""
    name, _, url = text.partition("=")
    if not name.strip() or not re.fullmatch(r"https://[^\s\"]+", url):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=https://...")
    return name.strip(), url


def annotate(
    chart_yaml: str,
    image: str,
    sign_key: dict[str, str] | None,
    links: list[tuple[str, str]] | None = None,
) -> str:
    """Chart.yaml with artifacthub.io/images naming `image` (by digest) and, given a key's
    fingerprint and address, artifacthub.io/signKey; given links, artifacthub.io/links."""
    old = re.search(r"^(    - name: \S+\n      image: )(\S+)$", chart_yaml, re.MULTILINE)
    if old is None:
        raise ReleaseError("Chart.yaml's artifacthub.io/images names no image")
    text = chart_yaml[: old.start(2)] + image + chart_yaml[old.end(2) :]
    if sign_key:
        text = text.replace(
            "\nannotations:\n",
            "\nannotations:\n  artifacthub.io/signKey: |\n"
            + "".join(f"    {key}: {value}\n" for key, value in sign_key.items()),
            1,
        )
    if links:
        text = text.replace(
            "\nannotations:\n",
            "\nannotations:\n  artifacthub.io/links: |\n"
            + "".join(
                f"    - name: {json.dumps(n)}\n      url: {json.dumps(u)}\n" for n, u in links
            ),
            1,
        )
    return text


def package_chart(
    helm: Path,
    work: Path,
    out: Path,
    image_repo: str,
    digest: str,
    epoch: int,
    sign_key: dict[str, str] | None,
    links: list[tuple[str, str]] | None = None,
) -> Path:
    """`helm package` of a copy of the chart with the image pinned; the same bytes every time
    for the same inputs (helm takes the files' times from SOURCE_DATE_EPOCH)."""
    staged = work / "chart" / NAME
    shutil.rmtree(staged.parent, ignore_errors=True)
    shutil.copytree(CHART, staged)
    values = staged / "values.yaml"
    values.write_text(pin_image(values.read_text(), image_repo, digest))
    chart_yaml = staged / "Chart.yaml"
    tag = project_version()
    reference = f"{image_repo}:{tag}@{digest}" if digest else f"{image_repo}:{tag}"
    chart_yaml.write_text(annotate(chart_yaml.read_text(), reference, sign_key, links))
    run([helm, "package", staged, "--destination", out], env={"SOURCE_DATE_EPOCH": str(epoch)})
    return out / f"{NAME}-{tag}.tgz"


# ---- the image ---------------------------------------------------------------------------------


def build_image() -> Path:
    """scripts/image/build.sh: its last stdout line is the docker-archive (its progress passes
    through to stderr)."""
    result = subprocess.run([IMAGE_BUILD], stdout=subprocess.PIPE, text=True, check=False)
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise ReleaseError(f"{IMAGE_BUILD} failed with exit code {result.returncode}")
    return Path(lines[-1])


def oci_layout(archive: Path, layout: Path, tag: str) -> str:
    """The docker-archive as an OCI layout, layers gzip-compressed; the manifest's digest."""
    shutil.rmtree(layout, ignore_errors=True)
    run(
        [
            "skopeo",
            "copy",
            "--quiet",
            "--dest-compress",
            "--dest-compress-format",
            "gzip",
            f"docker-archive:{archive}",
            f"oci:{layout}:{tag}",
        ]
    )
    (manifest,) = json.loads((layout / "index.json").read_text())["manifests"]
    digest: str = manifest["digest"]
    return digest


def deterministic_tar(folder: Path, archive: Path, epoch: int) -> None:
    """`folder` as a tar whose bytes depend only on its files: sorted, one owner, one time."""

    def normalize(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = epoch
        info.mode = 0o755 if info.isdir() else 0o644
        return info

    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(folder.rglob("*")):
            tar.add(
                path, arcname=path.relative_to(folder).as_posix(), recursive=False, filter=normalize
            )


# ---- the SBOM ----------------------------------------------------------------------------------


def sbom(layout: Path, out: Path, version: str) -> tuple[Path, Path]:
    """syft's SPDX and CycloneDX documents of the image (its Debian and Python packages),
    the SPDX one checked by ntia-conformance-checker against the NTIA minimum elements."""
    tools = releasetools.locate_sbom_tools()
    spdx = out / f"{NAME}-{version}.spdx.json"
    cyclonedx = out / f"{NAME}-{version}.cdx.json"
    run(
        [
            tools / "syft",
            "scan",
            f"oci-dir:{layout}",
            "--quiet",
            "--source-name",
            NAME,
            "--source-version",
            version,
            "--output",
            f"spdx-json={spdx}",
            "--output",
            f"cyclonedx-json={cyclonedx}",
        ],
        env={"SYFT_CHECK_FOR_APP_UPDATE": "false"},
    )
    document = json.loads(spdx.read_text())
    left = suppliers.complete(document, layout, NAME, SUPPLIER)
    spdx.write_text(json.dumps(document, indent=1) + "\n")
    log(f"sbom: {len(document['packages'])} packages, {left} without a supplier")
    check_sbom(tools / "ntia-checker", spdx)
    return spdx, cyclonedx


def check_sbom(checker: Path, spdx: Path) -> dict[str, object]:
    """ntia-conformance-checker's report on the document; a ReleaseError unless it says the
    document has the NTIA minimum elements (the checker exits 1 then, with its report)."""
    result = subprocess.run(
        [checker, "--comply", "ntia", "--output", "json", spdx],
        capture_output=True,
        text=True,
        check=False,
    )
    if not result.stdout.strip():
        raise ReleaseError(f"ntia-checker printed no report: {result.stderr[-2000:]}")
    report: dict[str, object] = json.loads(result.stdout)
    if report.get("isNtiaConformant") is not True:
        missing = [key for key in NTIA_DOCUMENT if report.get(key) is not True]
        for key in NTIA_COMPONENTS:
            found = report.get(key)
            names = found.get("nonconformantComponents") if isinstance(found, dict) else None
            if names:
                missing.append(f"{key}: {', '.join(map(str, names[:20]))}")
        raise ReleaseError(f"the SBOM misses NTIA minimum elements: {'; '.join(missing)}")
    return report


# ---- signing -----------------------------------------------------------------------------------


@dataclass
class Signer:
    cosign: Path
    key: Path
    public: Path
    trusted_root: Path
    plain_http: bool = False
    env: dict[str, str] = field(default_factory=dict)

    def _http(self) -> list[str]:
        return ["--allow-http-registry"] if self.plain_http else []

    def sign_blob(self, path: Path) -> Path:
        bundle = path.with_name(path.name + ".sigstore.json")
        run(
            [
                self.cosign,
                "sign-blob",
                "--key",
                self.key,
                "--tlog-upload=false",
                "--yes",
                "--new-bundle-format",
                "--bundle",
                bundle,
                path,
            ],
            env=self.env,
        )
        return bundle

    def sign(self, reference: str) -> None:
        run(
            [
                self.cosign,
                "sign",
                "--key",
                self.key,
                "--tlog-upload=false",
                "--yes",
                "--new-bundle-format",
                *self._http(),
                reference,
            ],
            env=self.env,
        )

    def attest(self, reference: str, predicate: Path) -> None:
        run(
            [
                self.cosign,
                "attest",
                "--key",
                self.key,
                "--tlog-upload=false",
                "--yes",
                "--new-bundle-format",
                "--type",
                SBOM_TYPE,
                "--predicate",
                predicate,
                *self._http(),
                reference,
            ],
            env=self.env,
        )

    def verify(self, reference: str) -> None:
        run(
            [
                self.cosign,
                "verify",
                *releasetools.offline(self.public, self.trusted_root),
                *self._http(),
                reference,
            ]
        )

    def verify_attestation(self, reference: str) -> None:
        run(
            [
                self.cosign,
                "verify-attestation",
                *releasetools.offline(self.public, self.trusted_root),
                "--type",
                SBOM_TYPE,
                *self._http(),
                reference,
            ]
        )


def signer(cosign: Path, key: str | None, work: Path, out: Path, plain_http: bool) -> Signer:
    """The release's signer; its public key is written to the folder as cosign.pub."""
    trusted_root = releasetools.write_empty_trusted_root(out / "trusted-root.json")
    if key:
        private = Path(key).resolve()
        public = out / "cosign.pub"
        run([cosign, "public-key", "--key", private, "--outfile", public])
        return Signer(cosign, private, public, trusted_root, plain_http)
    log(
        "WARNING: no signing key (--key or $CHECKPOINT_RELEASE_KEY): signing with a key made "
        "for this run only; its signatures prove nothing to anyone else"
    )
    env = {"COSIGN_PASSWORD": ""}
    keys = work / "keys"
    keys.mkdir()
    run([cosign, "generate-key-pair"], env=env, cwd=keys)
    shutil.copy(keys / "cosign.pub", out / "cosign.pub")
    return Signer(cosign, keys / "cosign.key", out / "cosign.pub", trusted_root, plain_http, env)


def key_fingerprint(public: Path) -> str:
    """The SHA-256 of the public key's PEM file, as `sha256sum cosign.pub` prints it."""
    return hashlib.sha256(public.read_bytes()).hexdigest()


# ---- the folder --------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def write_checksums(out: Path) -> Path:
    sums = out / "SHA256SUMS"
    lines = [f"{sha256(path)}  {path.name}\n" for path in sorted(out.iterdir()) if path.is_file()]
    sums.write_text("".join(lines))
    return sums


def table(out: Path, image: str, digests: dict[str, str]) -> str:
    """name, size, digest of every file of the folder, and the image's manifest digest."""
    rows = [(p.name, f"{p.stat().st_size:,}", f"sha256:{sha256(p)}") for p in sorted(out.iterdir())]
    rows += [(name, "", digest) for name, digest in digests.items()]
    width = max(len(row[0]) for row in rows)
    size_width = max(len(row[1]) for row in rows)
    lines = [f"{'name':<{width}}  {'size (B)':>{size_width}}  digest"]
    lines += [f"{name:<{width}}  {size:>{size_width}}  {digest}" for name, size, digest in rows]
    return f"release of {image} in {out}:\n" + "\n".join(lines)


# ---- the release -------------------------------------------------------------------------------


def commit_time() -> int:
    return int(run(["git", "-C", ROOT, "log", "-1", "--format=%ct"]).strip())


def revision() -> str:
    head = run(["git", "-C", ROOT, "rev-parse", "HEAD"]).strip()
    dirty = run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).strip()
    return head + ("-dirty" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--registry",
        metavar="REGISTRY",
        help="where the release will live (host[:port][/path]): the chart names "
        "the image REGISTRY/checkpoint-runtime; nothing is pushed",
    )
    where.add_argument(
        "--push",
        metavar="REGISTRY",
        help="as --registry, and push and sign the image and the chart there",
    )
    parser.add_argument(
        "--plain-http",
        action="store_true",
        help="talk to the registry over plain HTTP (a registry on loopback)",
    )
    parser.add_argument(
        "--key",
        default=os.environ.get(KEY_ENV),
        help=f"cosign private key (default ${KEY_ENV}; password in $COSIGN_PASSWORD)",
    )
    parser.add_argument(
        "--key-url",
        help="where users fetch cosign.pub: written with its "
        "fingerprint into the chart's artifacthub.io/signKey",
    )
    parser.add_argument(
        "--link",
        type=parse_link,
        action="append",
        metavar="NAME=URL",
        help="a link for the chart's artifacthub.io/links, repeatable: where the source "
        "lives, where to report a vulnerability (e.g. --link security=https://...)",
    )
    parser.add_argument("--out", type=Path, help="the folder (default dist/release/VERSION)")
    parser.add_argument(
        "--image-archive",
        type=Path,
        help="the image's docker-archive (default: scripts/image/build.sh builds it)",
    )
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="release a tree with uncommitted changes (its revision says -dirty)",
    )
    parser.add_argument(
        "--chart-only",
        action="store_true",
        help="package the chart only (with the image digest given by --image-digest)",
    )
    parser.add_argument("--image-digest", default="", help="with --chart-only: the digest to pin")
    args = parser.parse_args(argv)
    try:
        return release(args)
    except ReleaseError as error:
        print(f"release: {error}", file=sys.stderr)
        return 1


def release(args: argparse.Namespace) -> int:
    version = project_version()
    mismatches = version_mismatches()
    if mismatches:
        raise ReleaseError(f"pyproject.toml says {version}, but " + "; ".join(mismatches))
    rev = revision()
    if rev.endswith("-dirty") and not args.allow_dirty:
        raise ReleaseError("the tree has uncommitted changes; commit them (or --allow-dirty)")
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH") or commit_time())
    target = (args.push or args.registry or "").rstrip("/")
    image_repo = f"{target}/{NAME}" if target else NAME
    out = (args.out or ROOT / "dist" / "release" / version).resolve()
    if out.is_dir() and any(out.iterdir()) and not (out / "release.json").is_file():
        raise ReleaseError(f"{out} holds files but no release.json: name an empty folder")
    shutil.rmtree(out, ignore_errors=True)  # an earlier release, made again from scratch
    out.mkdir(parents=True)
    helm = binaries.locate() / "helm"
    log(f"{NAME} {version} at {rev}, SOURCE_DATE_EPOCH={epoch}, into {out}")

    with tempfile.TemporaryDirectory(prefix="release-") as scratch:
        work = Path(scratch)
        if args.chart_only:
            chart = package_chart(
                helm, work, out, image_repo, args.image_digest, epoch, None, args.link
            )
            log(f"chart: {chart.name}")
            print(table(out, image_repo, {}))
            return 0

        cosign = releasetools.locate_cosign()
        sign = signer(cosign, args.key, work, out, args.plain_http)
        sign_key = None
        if args.key_url:
            sign_key = {"fingerprint": key_fingerprint(sign.public), "url": args.key_url}

        if args.image_archive is None:
            log("image: scripts/image/build.sh (cached by its inputs)")
        archive = args.image_archive or build_image()
        layout = work / "layout"
        digest = oci_layout(archive, layout, version)
        image_file = out / f"{NAME}-{version}.oci.tar"
        deterministic_tar(layout, image_file, epoch)
        log(f"image: {image_repo}:{version}@{digest} ({image_file.name})")

        log("sbom: syft over the image (Debian and Python packages), then ntia-conformance-checker")
        spdx, _ = sbom(layout, out, version)

        chart = package_chart(helm, work, out, image_repo, digest, epoch, sign_key, args.link)
        log(f"chart: {chart.name}, the image pinned by digest")
        sign.sign_blob(chart)

        pushed: dict[str, str] = {}
        if args.push:
            pushed = push(args, sign, layout, chart, spdx, image_repo, version, digest, helm)

        record = {
            "name": NAME,
            "version": version,
            "revision": rev,
            "source_date_epoch": epoch,
            "image": {
                "repository": image_repo,
                "tag": version,
                "digest": digest,
                "file": image_file.name,
            },
            "chart": {"file": chart.name, "sha256": sha256(chart)},
            "sbom": {"spdx": spdx.name, "cyclonedx": f"{NAME}-{version}.cdx.json"},
            "public_key": "cosign.pub",
            "pushed": pushed,
        }
        (out / "release.json").write_text(json.dumps(record, indent=2) + "\n")
        sums = write_checksums(out)
        sign.sign_blob(sums)
        log("SHA256SUMS written and signed")
    print(table(out, f"{image_repo}:{version}", {"image manifest": digest, **pushed}))
    return 0


def push(
    args: argparse.Namespace,
    sign: Signer,
    layout: Path,
    chart: Path,
    spdx: Path,
    image_repo: str,
    version: str,
    digest: str,
    helm: Path,
) -> dict[str, str]:
    """Push the image and the chart, sign both by digest, attest the SBOM to the image."""
    crane = registry.locate() / "crane"
    http = ["--insecure"] if args.plain_http else []
    log(f"push: the image to {image_repo}:{version}")
    run([crane, *http, "push", layout, f"{image_repo}:{version}"])
    served = run([crane, *http, "digest", f"{image_repo}:{version}"]).strip()
    if served != digest:
        raise ReleaseError(f"the registry serves {served} for the image, not {digest}")
    image_ref = f"{image_repo}@{digest}"
    sign.sign(image_ref)
    sign.attest(image_ref, spdx)
    log("push: the image signed and its SBOM attested by digest")

    chart_repo = f"oci://{args.push.rstrip('/')}/charts"
    output = run([helm, "push", chart, chart_repo, *(["--plain-http"] if args.plain_http else [])])
    found = re.search(r"^Digest: (sha256:[0-9a-f]{64})$", output, re.MULTILINE)
    if found is None:
        raise ReleaseError(f"helm push printed no digest: {output}")
    chart_ref = f"{chart_repo.removeprefix('oci://')}/{NAME}@{found[1]}"
    sign.sign(chart_ref)
    log(f"push: the chart to {chart_repo}/{NAME}:{version}, signed by digest")

    sign.verify(image_ref)
    sign.verify_attestation(image_ref)
    sign.verify(chart_ref)
    log("push: the signatures and the attestation verify with cosign.pub")
    return {"image": image_ref, "chart": chart_ref}


if __name__ == "__main__":
    sys.exit(main())
