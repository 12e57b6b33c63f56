"""Complete the supplier of each package of syft's SPDX document from the image's own metadata.

The NTIA minimum elements ask for every component's supplier. syft writes one where it can parse
it (a Debian Maintainer of one person, a Python Author) and NOASSERTION elsewhere: a Debian
package maintained by a team, a Python distribution that names only a Maintainer or an
Author-email, the Windows launchers setuptools ships inside its own folder. This module reads the
same image's metadata that syft read (the dpkg status database, the distributions' METADATA) and
writes the supplier it names; a package it cannot place stays NOASSERTION, so the checker still
fails on it. Nothing else of the document changes.
"""

from __future__ import annotations

import email.parser
import gzip
import json
import re
import tarfile
from pathlib import Path
from typing import Any

NOASSERTION = "NOASSERTION"
_ADDRESS = re.compile(r'^\s*"?([^"<]*?)"?\s*<([^>]+)>\s*$')
_GROUP = re.compile(
    r"\b(team|maintainers|developers|group|project|authority|foundation|community|"
    r"contributors|inc|ltd|llc|gmbh|org)\b",
    re.IGNORECASE,
)


def supplier(name: str, address: str = "") -> str:
    """An SPDX supplier, `Organization: NAME (EMAIL)` for a group (a team, the maintainers, an
    authority...) and `Person: NAME (EMAIL)` otherwise, without the characters SPDX reserves."""
    name = re.sub(r"[()]", "", name).strip()
    address = address.strip()
    kind = "Organization" if _GROUP.search(name) else "Person"
    return f"{kind}: {name}" + (f" ({address})" if address else "")


def from_address(text: str) -> str | None:
    """A supplier from `Name <email>` (the first of a comma-separated list), or a bare name."""
    first = text.split(",")[0].strip()
    if not first:
        return None
    match = _ADDRESS.match(first)
    if match:
        return supplier(match[1] or match[2].split("@")[0], match[2])
    return supplier(first)


def layer_files(layout: Path, wanted: set[str]) -> dict[str, bytes]:
    """The files named in `wanted` (absolute paths) from the image's layers in an OCI layout."""
    (entry,) = json.loads((layout / "index.json").read_text())["manifests"]
    blob = layout / "blobs" / Path(*entry["digest"].split(":"))
    manifest = json.loads(blob.read_text())
    found: dict[str, bytes] = {}
    for layer in manifest["layers"]:
        path = layout / "blobs" / Path(*layer["digest"].split(":"))
        with gzip.open(path) as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                name = "/" + member.name.lstrip("./")
                if name in wanted and member.isfile():
                    extracted = tar.extractfile(member)
                    if extracted is not None:
                        found[name] = extracted.read()
    return found


def dpkg_maintainers(status: str) -> dict[str, str]:
    """Package name -> Maintainer field, from a dpkg status database."""
    maintainers: dict[str, str] = {}
    for stanza in status.split("\n\n"):
        fields = dict(re.findall(r"^(Package|Maintainer): (.*)$", stanza, re.MULTILINE))
        if "Package" in fields and "Maintainer" in fields:
            maintainers[fields["Package"]] = fields["Maintainer"]
    return maintainers


def python_supplier(metadata: bytes) -> str | None:
    """A distribution's supplier from its METADATA: Author, else Maintainer (with emails)."""
    message = email.parser.BytesHeaderParser().parsebytes(metadata)
    for name_field, email_field in (("Author", "Author-email"), ("Maintainer", "Maintainer-email")):
        name = str(message.get(name_field, "")).strip()
        address = str(message.get(email_field, "")).strip()
        if "<" in address:
            return from_address(address)
        if address:
            return supplier(name or address.split("@")[0], address.split(",")[0])
        if name and name.upper() != "UNKNOWN":
            return supplier(name)
    return None


def _source_path(package: dict[str, Any]) -> str:
    """The first file syft read the package from (its sourceInfo lists them)."""
    info = package.get("sourceInfo", "")
    found = re.search(r"(/[^\s,]+)", info)
    return found[1] if found else ""


def complete(document: dict[str, Any], layout: Path, own_name: str, own_supplier: str) -> int:
    """Write the suppliers syft left out; how many packages still have none."""
    packages: list[dict[str, Any]] = document["packages"]
    missing = [p for p in packages if p.get("supplier", NOASSERTION) == NOASSERTION]
    wanted = {"/var/lib/dpkg/status"}
    wanted |= {_source_path(p) for p in missing if _source_path(p).endswith("/METADATA")}
    files = layer_files(layout, wanted)
    maintainers = dpkg_maintainers(files.get("/var/lib/dpkg/status", b"").decode())
    for package in missing:
        purl = next(
            (
                ref["referenceLocator"]
                for ref in package.get("externalRefs", [])
                if ref.get("referenceType") == "purl"
            ),
            "",
        )
        path = _source_path(package)
        found: str | None = None
        if package["name"] == own_name:
            found = own_supplier
        elif purl.startswith("pkg:deb/") and package["name"] in maintainers:
            found = from_address(maintainers[package["name"]])
        elif purl.startswith("pkg:pypi/") and path in files:
            found = python_supplier(files[path])
        if found is not None:
            package["supplier"] = found
    # A file inside a Python distribution's top-level folder (setuptools' Windows launchers)
    # belongs to that distribution.
    folders: dict[str, str] = {}
    for package in packages:
        path = _source_path(package)
        if (
            path.endswith(".dist-info/METADATA")
            and package.get("supplier", NOASSERTION) != NOASSERTION
        ):
            site = path.rsplit("/", 2)[0]
            folders[f"{site}/{package['name'].lower().replace('-', '_')}/"] = package["supplier"]
    for package in missing:
        path = _source_path(package)
        if package.get("supplier", NOASSERTION) == NOASSERTION and path:
            owner = next((s for folder, s in folders.items() if path.startswith(folder)), None)
            if owner is not None:
                package["supplier"] = owner
    return sum(1 for p in packages if p.get("supplier", NOASSERTION) == NOASSERTION)
