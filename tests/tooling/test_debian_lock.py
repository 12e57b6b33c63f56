"""scripts/image/rootfs.lock and debs.py: every Debian package of the image pinned by content.

The lock lists every package of the image's root filesystem by name, version, architecture and
the SHA-256 of its .deb; rootfs.sh installs from a repository debs.py makes of exactly those
.debs, each checked against the lock first. Here: the committed lock is complete and current,
and debs.py refuses a .deb whose hash differs, a lock line without a hash, and a root
filesystem holding a package the lock lacks. The .debs are real ones, built by dpkg-deb.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_testenv.binaries import REPO_ROOT

IMAGE = REPO_ROOT / "scripts" / "image"
SCRIPT = IMAGE / "debs.py"
LOCK = IMAGE / "rootfs.lock"
PINS = IMAGE / "rootfs-packages.txt"
LINE = re.compile(r"^(\S+) (\S+) (amd64|all) ([0-9a-f]{64}) (https?://\S+\.deb)$")


def debs(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def lock_lines() -> list[str]:
    return [line for line in LOCK.read_text().splitlines() if line and not line.startswith("#")]


def test_every_line_of_the_lock_pins_a_package_by_version_and_sha256() -> None:
    lines = lock_lines()
    assert len(lines) > 100  # minbase + python3: the whole root filesystem
    unpinned = [line for line in lines if not LINE.match(line)]
    assert unpinned == []
    names = [line.split()[0] for line in lines]
    assert len(names) == len(set(names))  # one version of each
    # the essentials of the image are in it
    assert {"base-files", "dpkg", "libc6", "python3.11", "ca-certificates"} <= set(names)


def test_the_lock_was_written_from_the_current_pins() -> None:
    """A pin changed without `just lock-debian` fails: the lock records its inputs' hash, and
    every pin of rootfs-packages.txt is in it at that version."""
    header = {
        key: value
        for key, _, value in (
            line[2:].partition(": ") for line in LOCK.read_text().splitlines() if line[:2] == "# "
        )
    }
    pins = [line.split("#", 1)[0].strip() for line in PINS.read_text().splitlines()]
    pins = [pin for pin in pins if pin]
    assert len(pins) >= 8
    written_from = hashlib.sha256("".join(f"{pin}\n" for pin in pins).encode()).hexdigest()
    assert header["pins sha256"] == written_from
    locked = {line.split()[0]: line.split()[1] for line in lock_lines()}
    for pin in pins:
        name, version = pin.split("=")
        assert locked.get(name) == version, pin


def build_deb(folder: Path, name: str, version: str = "1.0") -> Path:
    """A real (tiny) Debian package, built by dpkg-deb."""
    tree = folder / f"{name}-tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "usr" / "share" / name).mkdir(parents=True)
    (tree / "usr" / "share" / name / "data").write_text(f"{name}\n")
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: t <t@example.org>\n"
        "Priority: optional\nDescription: test package\n"
    )
    deb = folder / f"{name}_{version}_all.deb"
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)],
        check=True, capture_output=True,
    )  # fmt: skip
    return deb


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_lock(path: Path, *lines: str) -> Path:
    path.write_text("# name version architecture sha256 url\n" + "".join(f"{x}\n" for x in lines))
    return path


def test_the_repository_holds_exactly_the_locked_debs_each_checked(tmp_path: Path) -> None:
    one, two = build_deb(tmp_path, "one"), build_deb(tmp_path, "two", "2:3.4-1")
    lock = write_lock(
        tmp_path / "rootfs.lock",
        f"one 1.0 all {sha256(one)} {one.as_uri()}",
        f"two 2:3.4-1 all {sha256(two)} {two.as_uri()}",
    )
    cache, repo = tmp_path / "cache", tmp_path / "repo"
    result = debs("repo", lock, cache, repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "one,two"  # mmdebstrap's --include
    # downloaded into the cache under its hash, copied into the repository under apt's name
    assert sorted(p.name for p in cache.iterdir()) == sorted(f"{sha256(d)}.deb" for d in (one, two))
    assert (repo / "two_2%3a3.4-1_all.deb").read_bytes() == two.read_bytes()
    index = (repo / "Packages").read_text()
    digest = hashlib.sha256(index.encode()).hexdigest()
    assert "Package: one\nVersion: 1.0\n" in index
    assert f"Filename: ./two_2%3a3.4-1_all.deb\nSize: {two.stat().st_size}\n" in index
    assert f"SHA256: {sha256(one)}" in index
    release = (repo / "Release").read_text()
    assert f" {digest} {len(index.encode())} Packages" in release
    assert "Suite: bookworm\n" in release


def test_a_cached_deb_whose_sha256_differs_from_the_lock_is_refused(tmp_path: Path) -> None:
    good = build_deb(tmp_path, "one")
    lock = write_lock(tmp_path / "rootfs.lock", f"one 1.0 all {sha256(good)} {good.as_uri()}")
    cache = tmp_path / "cache"
    cache.mkdir()
    # another package's bytes under the locked hash's name: what a tampered cache holds
    (cache / f"{sha256(good)}.deb").write_bytes(build_deb(tmp_path, "evil").read_bytes())
    result = debs("repo", lock, cache, tmp_path / "repo")
    assert result.returncode == 1
    assert f"one 1.0: {cache / sha256(good)}.deb has SHA-256" in result.stderr
    assert f"the lock says {sha256(good)}: refused" in result.stderr
    assert not (tmp_path / "repo" / "one_1.0_all.deb").exists()


def test_a_download_whose_sha256_differs_from_the_lock_is_refused_and_not_cached(
    tmp_path: Path,
) -> None:
    served = build_deb(tmp_path, "one")  # the server now has other bytes than were locked
    locked = "0" * 64
    lock = write_lock(tmp_path / "rootfs.lock", f"one 1.0 all {locked} {served.as_uri()}")
    cache = tmp_path / "cache"
    result = debs("repo", lock, cache, tmp_path / "repo")
    assert result.returncode == 1
    assert f"one 1.0: {served.as_uri()} has SHA-256 {sha256(served)}" in result.stderr
    assert f"the lock says {locked}: refused" in result.stderr
    assert list(cache.iterdir()) == []


def test_a_lock_line_without_a_sha256_is_refused(tmp_path: Path) -> None:
    deb = build_deb(tmp_path, "one")
    lock = write_lock(tmp_path / "rootfs.lock", f"one 1.0 all {deb.as_uri()}")
    result = debs("repo", lock, tmp_path / "cache", tmp_path / "repo")
    assert result.returncode == 1
    assert "rootfs.lock line 2: one is not pinned by content" in result.stderr


@pytest.mark.parametrize(
    ("installed", "problem"),
    [
        ("one 1.0 all\ntwo 1.0 all\n", "installed but not in the lock: two 1.0 all"),
        ("one 1.1 all\n", "installed but not in the lock: one 1.1 all"),
        ("", "locked but not installed: one 1.0 all"),
    ],
    ids=["a package the lock lacks", "another version", "a locked package missing"],
)
def test_a_root_filesystem_whose_packages_are_not_the_locks_is_refused(
    tmp_path: Path, installed: str, problem: str
) -> None:
    lock = write_lock(tmp_path / "rootfs.lock", f"one 1.0 all {'a' * 64} http://x/one.deb")
    listing = tmp_path / "installed"
    listing.write_text(installed)
    result = debs("check", lock, listing)
    assert result.returncode == 1
    assert "the root filesystem's packages are not the lock's" in result.stderr
    assert problem in result.stderr
    listing.write_text("one 1.0 all\n")
    assert debs("check", lock, listing).returncode == 0
