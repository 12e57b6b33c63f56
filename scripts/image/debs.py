"""The image's Debian packages by content: the lock, the cached .deb files, the local repository.

    python scripts/image/debs.py lock PINS INSTALLED URIS OUTPUT
    python scripts/image/debs.py repo LOCK CACHE REPO
    python scripts/image/debs.py check LOCK INSTALLED

- lock: writes rootfs.lock from what a root filesystem built from the Debian sources holds
  (INSTALLED: `dpkg-query -W -f '${Package} ${Version} ${Architecture}\\n'` inside it) and
  where apt found each package (URIS: `apt-get download --print-uris` inside it, whose
  SHA-256 comes from the archive's signed index). lock-debian.sh runs it; never by hand.
- repo: every .deb of the lock, from CACHE (a file per SHA-256, downloaded from the lock's
  URL when missing), each checked against the lock's SHA-256 before use, linked into REPO with
  a Packages index: a flat apt repository holding exactly the locked packages. Prints their
  names, comma-separated (mmdebstrap's --include).
- check: the packages of a built root filesystem (INSTALLED) are exactly the lock's.

Exit 1 with a message naming the package on a hash that differs, a lock line without a
SHA-256, a package installed that the lock lacks, or one locked that is not installed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HEADER = (
    "# The image's Debian packages (every package of its root filesystem), by name, version,\n"
    "# architecture and the SHA-256 of the .deb; written by scripts/image/lock-debian.sh\n"
    "# (`just lock-debian`) from rootfs-packages.txt, never edited by hand.\n"
)
INPUTS_PREFIX = "# pins sha256: "
SUITE = "bookworm"
SHA256 = re.compile(r"[0-9a-f]{64}")
# apt-get download --print-uris: 'URL' FILENAME SIZE SHA256:HEX
PRINT_URIS = re.compile(
    r"^'(?P<url>[^']+)' (?P<file>\S+) (?P<size>\d+) SHA256:(?P<sha>[0-9a-f]{64})$"
)


class LockError(Exception):
    """A lock, a .deb or a root filesystem that does not match; the message names the package."""


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    architecture: str
    sha256: str
    url: str

    def key(self) -> tuple[str, str, str]:
        return (self.name, self.version, self.architecture)

    def filename(self) -> str:
        # apt's name for it: the epoch's colon spelled %3a
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.architecture}.deb"


def inputs_sha256(pins: Path) -> str:
    """The SHA-256 of the pins (one per line, comments dropped): what the lock was written from."""
    return hashlib.sha256("".join(f"{pin}\n" for pin in read_pins(pins)).encode()).hexdigest()


def read_lock(lock: Path) -> list[Package]:
    """The lock's packages; LockError naming the line when one lacks a field or its SHA-256."""
    packages = []
    for number, line in enumerate(lock.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 5 or not SHA256.fullmatch(fields[3]):
            raise LockError(
                f"{lock.name} line {number}: {fields[0]} is not pinned by content: a line is"
                f" NAME VERSION ARCHITECTURE SHA256 URL ({line!r}); regenerate the lock with"
                " `just lock-debian`"
            )
        packages.append(Package(*fields))
    return packages


def read_installed(installed: Path) -> set[tuple[str, str, str]]:
    found = set()
    for line in installed.read_text(encoding="utf-8").splitlines():
        if line.strip():
            name, version, architecture = line.split()
            found.add((name, version, architecture))
    return found


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_lock(pins: Path, installed: Path, uris: Path, output: Path) -> None:
    by_file = {}
    for line in uris.read_text(encoding="utf-8").splitlines():
        match = PRINT_URIS.match(line.strip())
        if match is not None:
            by_file[match["file"]] = match
    packages = []
    for name, version, architecture in sorted(read_installed(installed)):
        package = Package(name, version, architecture, "", "")
        match = by_file.get(package.filename())
        if match is None:
            raise LockError(f"{name} {version} {architecture}: apt printed no URL for it")
        packages.append(Package(name, version, architecture, match["sha"], match["url"]))
    for pin in read_pins(pins):
        name, _, version = pin.partition("=")
        if not any(p.name == name and p.version == version for p in packages):
            raise LockError(f"the pin {pin} of {pins.name} is not what was installed")
    lines = [f"{p.name} {p.version} {p.architecture} {p.sha256} {p.url}" for p in packages]
    output.write_text(
        HEADER
        + f"{INPUTS_PREFIX}{inputs_sha256(pins)}\n"
        + "# name version architecture sha256 url\n"
        + "\n".join(lines)
        + "\n",
        encoding="utf-8",
    )
    print(f"image: {output.name}: {len(packages)} packages", file=sys.stderr)


def read_pins(pins: Path) -> list[str]:
    found = []
    for line in pins.read_text(encoding="utf-8").splitlines():
        pin = line.split("#", 1)[0].strip()
        if pin:
            found.append(pin)
    return found


def cached_deb(package: Package, cache: Path) -> Path:
    """The package's .deb in the cache (named by its SHA-256), downloaded when missing; LockError
    when the file there or the download has another SHA-256 than the lock's."""
    path = cache / f"{package.sha256}.deb"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        print(f"image: downloading {package.filename()} ({package.url})", file=sys.stderr)
        with tempfile.NamedTemporaryFile(dir=cache, suffix=".part", delete=False) as part:
            try:
                with urllib.request.urlopen(package.url, timeout=120) as response:
                    shutil.copyfileobj(response, part)
            except OSError as error:
                os.unlink(part.name)
                raise LockError(
                    f"{package.name} {package.version}: not in the cache ({path}) and"
                    f" {package.url} could not be read ({error}); Debian may no longer serve"
                    " this version: regenerate the lock with `just lock-debian`"
                ) from error
        actual = sha256_of(Path(part.name))
        if actual != package.sha256:
            os.unlink(part.name)
            raise LockError(
                f"{package.name} {package.version}: {package.url} has SHA-256 {actual}, the lock"
                f" says {package.sha256}: refused"
            )
        os.replace(part.name, path)
    actual = sha256_of(path)
    if actual != package.sha256:
        raise LockError(
            f"{package.name} {package.version}: {path} has SHA-256 {actual}, the lock says"
            f" {package.sha256}: refused (delete the file; it is downloaded again)"
        )
    return path


def build_repo(lock: Path, cache: Path, repo: Path) -> list[Package]:
    """A flat apt repository in REPO (created empty) of exactly the lock's .debs, each checked."""
    packages = read_lock(lock)
    repo.mkdir(parents=True)
    stanzas = []
    for package in packages:
        deb = repo / package.filename()
        shutil.copyfile(cached_deb(package, cache), deb)
        if sha256_of(deb) != package.sha256:  # what apt reads is what was checked
            raise LockError(f"{package.name}: {deb} changed while it was copied")
        control = subprocess.run(
            ["dpkg-deb", "--field", str(deb)], capture_output=True, text=True, check=True
        ).stdout.rstrip("\n")
        stanzas.append(
            f"{control}\nFilename: ./{deb.name}\nSize: {deb.stat().st_size}\n"
            f"SHA256: {package.sha256}\n"
        )
    index = "\n".join(stanzas).encode()
    (repo / "Packages").write_bytes(index)
    # A Release naming the suite: mmdebstrap picks the essential packages of its suite
    # (?archive/?codename bookworm) from the repository; apt checks Packages against its hash.
    (repo / "Release").write_text(
        f"Suite: {SUITE}\nCodename: {SUITE}\nArchitectures: amd64 all\nSHA256:\n"
        f" {hashlib.sha256(index).hexdigest()} {len(index)} Packages\n",
        encoding="utf-8",
    )
    return packages


def check_installed(lock: Path, installed: Path) -> None:
    locked = {package.key() for package in read_lock(lock)}
    found = read_installed(installed)
    problems = [f"installed but not in the lock: {' '.join(k)}" for k in sorted(found - locked)]
    problems += [f"locked but not installed: {' '.join(k)}" for k in sorted(locked - found)]
    if problems:
        raise LockError(
            "the root filesystem's packages are not the lock's:\n  " + "\n  ".join(problems)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    lock = commands.add_parser("lock", help="write the lock from a built root filesystem")
    for name in ("pins", "installed", "uris", "output"):
        lock.add_argument(name, type=Path)
    repo = commands.add_parser("repo", help="the lock's .debs, checked, as a flat repository")
    for name in ("lock", "cache", "repo"):
        repo.add_argument(name, type=Path)
    check = commands.add_parser("check", help="the installed packages are exactly the lock's")
    for name in ("lock", "installed"):
        check.add_argument(name, type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "lock":
            write_lock(args.pins, args.installed, args.uris, args.output)
        elif args.command == "repo":
            packages = build_repo(args.lock, args.cache, args.repo)
            print(",".join(package.name for package in packages))
        else:
            check_installed(args.lock, args.installed)
    except LockError as error:
        print(f"image: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
