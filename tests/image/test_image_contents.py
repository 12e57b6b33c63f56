"""What the image's layers hold and how it is labelled, read from the archive build.sh made.

No setuid or setgid file: Debian's minbase installs su, mount, passwd and eight more with one
of the bits (and two setgid folders); build.sh removes the bits and keeps the files. The OCI
labels come from scripts/image/labels.py, the image's creation time and every file's time from
SOURCE_DATE_EPOCH (the newest commit of the image's inputs), so the layer does not depend on
when it was built.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from image_harness import ROOT, archive_config, archive_entries

LABELS_SCRIPT = ROOT / "scripts" / "image" / "labels.py"
OCI = "org.opencontainers.image."
# Files Debian installs setuid or setgid into the minbase root filesystem.
FORMERLY_PRIVILEGED = ("usr/bin/su", "usr/bin/passwd", "usr/bin/mount", "usr/sbin/unix_chkpwd")


def build_info(archive: Path) -> dict[str, object]:
    info: dict[str, object] = json.loads((archive.parent / "info.json").read_text())
    return info


def test_no_file_or_folder_of_the_image_is_setuid_or_setgid(image_archive: Path) -> None:
    entries = [entry for entry, _ in archive_entries(image_archive)]
    assert len(entries) > 10_000  # the whole root filesystem was read
    privileged = sorted(f"{e.name} {e.mode & 0o7777:o}" for e in entries if e.mode & 0o6000)
    assert privileged == []
    by_name = {entry.name.removeprefix("./"): entry for entry in entries}
    for path in FORMERLY_PRIVILEGED:  # still there, executable, without the bit
        assert by_name[path].mode & 0o7777 == 0o755, path


def test_the_image_carries_the_oci_labels_of_labels_py(image_archive: Path) -> None:
    info = build_info(image_archive)
    revision = str(info["revision"])
    wanted = subprocess.run(
        [sys.executable, str(LABELS_SCRIPT), revision],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    labels = archive_config(image_archive)["config"]["Labels"]
    assert {key: labels.get(key) for key, _, _ in (w.partition("=") for w in wanted)} == dict(
        w.split("=", 1) for w in wanted
    )
    for key in ("version", "licenses", "revision", "title"):
        assert labels.get(OCI + key), key
    # a commit of this history (build.sh: the newest that changed an input of the image)
    commit = revision.removesuffix("-dirty")
    assert len(commit) == 40
    ancestor = ["git", "-C", str(ROOT), "merge-base", "--is-ancestor", commit, "HEAD"]
    assert subprocess.run(ancestor, check=False).returncode == 0


def test_the_image_and_its_files_are_dated_source_date_epoch(image_archive: Path) -> None:
    epoch = int(str(build_info(image_archive)["source_date_epoch"]))
    assert epoch > 0
    config = archive_config(image_archive)
    created = datetime.fromisoformat(config["created"].replace("Z", "+00:00"))
    assert created == datetime.fromtimestamp(epoch, UTC)
    newest = max(entry.mtime for entry, _ in archive_entries(image_archive))
    assert newest <= epoch  # nothing carries the time of the build


def test_all_bytecode_records_no_time_and_is_never_checked_against_its_source(
    image_archive: Path,
) -> None:
    """Unchecked-hash bytecode (PEP 552 flags 0b01) throughout: a timestamp header (what
    `python3 -m venv` writes for pip and setuptools) would record the install time, and would
    not match the source files' times in the layer, so Python would recompile it at every start
    on the read-only root filesystem."""
    heads = {
        entry.name: head for entry, head in archive_entries(image_archive, read=".pyc") if head
    }
    assert len(heads) > 2000
    flags = {name: int.from_bytes(head[4:8], "little") for name, head in heads.items()}
    assert sorted(name for name, flag in flags.items() if flag != 0b01)[:10] == []
