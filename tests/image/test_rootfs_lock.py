"""scripts/image/rootfs.sh installs the locked .debs and nothing else, end to end with mmdebstrap.

Each test runs a copy of rootfs.sh (with debs.py and the image's apt sources) beside a lock of
its own, on a cache of its own holding hard links to the .debs the session's image build
cached: a lock that lacks a dependency fails in apt, which sees no other source, and a cached
.deb whose bytes differ from the lock's stops the build before mmdebstrap runs. Both fail with
exit 1 and a message naming the package. Needs root (mmdebstrap, chroot), as the image build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from image_harness import ROOT, ImageError

IMAGE = ROOT / "scripts" / "image"
LOCK = IMAGE / "rootfs.lock"
DEBS = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "checkpoint-runtime" / "debs"
)
# A library an essential package (coreutils) needs: apt finds it missing before anything is
# installed.
DEPENDENCY = "libacl1"


@pytest.fixture
def scripts(tmp_path: Path, image_archive: Path) -> Path:
    """A copy of the root filesystem's scripts, and a cache with the session's .debs linked
    in (the image build, image_archive, cached every one of them)."""
    if os.geteuid() != 0 or shutil.which("mmdebstrap") is None:
        raise ImageError("rootfs.sh needs root and mmdebstrap: run as root after `just system`")
    folder = tmp_path / "image"
    folder.mkdir()
    for name in ("rootfs.sh", "debs.py", "debian.sources", "rootfs.lock"):
        shutil.copy2(IMAGE / name, folder / name)
    cache = tmp_path / "cache" / "checkpoint-runtime" / "debs"
    cache.mkdir(parents=True)
    for deb in DEBS.glob("*.deb"):
        os.link(deb, cache / deb.name)
    return folder


def rootfs(scripts: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(scripts.parent / "cache"), "SOURCE_DATE_EPOCH": "0"}
    return subprocess.run(
        [str(scripts / "rootfs.sh"), str(scripts.parent / "out")],
        capture_output=True, text=True, check=False, timeout=600, env=env,
    )  # fmt: skip


def test_a_dependency_the_lock_lacks_fails_the_build_naming_it(scripts: Path) -> None:
    lines = LOCK.read_text().splitlines()
    assert any(line.startswith(f"{DEPENDENCY} ") for line in lines)
    kept = [line for line in lines if not line.startswith(f"{DEPENDENCY} ")]
    (scripts / "rootfs.lock").write_text("\n".join(kept) + "\n")
    result = rootfs(scripts)
    assert result.returncode == 1, result.stderr[-3000:]
    assert f"Depends: {DEPENDENCY}" in result.stderr  # apt: ... but it is not installable
    assert "the lock lacks it: regenerate it with `just lock-debian`" in result.stderr
    assert not list((scripts.parent / "out").glob("*/rootfs.tar"))


def test_a_cached_deb_that_differs_from_the_lock_stops_the_build_before_mmdebstrap(
    scripts: Path,
) -> None:
    line = next(x for x in LOCK.read_text().splitlines() if x.startswith(f"{DEPENDENCY} "))
    sha256 = line.split()[3]
    cached = scripts.parent / "cache" / "checkpoint-runtime" / "debs" / f"{sha256}.deb"
    data = cached.read_bytes()
    cached.unlink()  # a hard link to the real cache: replace it, never write through it
    cached.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    result = rootfs(scripts)
    assert result.returncode == 1, result.stderr[-3000:]
    assert f"image: {DEPENDENCY} {line.split()[1]}: {cached} has SHA-256" in result.stderr
    assert f"the lock says {sha256}: refused" in result.stderr
    assert "mmdebstrap" not in result.stderr.replace("with mmdebstrap", "")  # never started
    assert "building the Debian bookworm root filesystem" not in result.stderr
