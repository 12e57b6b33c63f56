"""Every Debian package of the built image is pinned by content in scripts/image/rootfs.lock.

Read from the image's layer (dpkg's database, /var/lib/dpkg/status, what `dpkg-query -W` lists):
each installed package is in the lock at its version and architecture, with the SHA-256 of its
.deb, and each locked package is installed. A package that came from anywhere but the lock's
.debs, or a lock line without a hash, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from image_harness import ROOT, archive_file

LOCK = ROOT / "scripts" / "image" / "rootfs.lock"
SHA256 = re.compile(r"[0-9a-f]{64}")


def installed_packages(status: str) -> set[tuple[str, str, str]]:
    """(name, version, architecture) of each package dpkg's status file holds as installed."""
    found = set()
    for stanza in status.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if fields.get("Status") == "install ok installed":
            found.add((fields["Package"], fields["Version"], fields["Architecture"]))
    return found


def test_every_debian_package_of_the_image_is_in_the_lock_with_its_sha256(
    image_archive: Path,
) -> None:
    status = archive_file(image_archive, "var/lib/dpkg/status").decode()
    installed = installed_packages(status)
    assert len(installed) > 100
    lines = [x.split() for x in LOCK.read_text().splitlines() if x and not x.startswith("#")]
    without_hash = [" ".join(line) for line in lines if not SHA256.fullmatch(line[3])]
    assert without_hash == []
    locked = {(name, version, architecture) for name, version, architecture, *_ in lines}
    assert sorted(installed - locked) == []  # installed, not pinned by content
    assert sorted(locked - installed) == []  # pinned, not installed: the lock is stale
