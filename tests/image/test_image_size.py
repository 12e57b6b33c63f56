"""What the image leaves out, and its size, read from the archive build.sh made.

The venv holds no pip or setuptools, and none of the folders scripts/image/prune.txt names
(the Kubernetes client's asyncio twin, the dependencies' test suites), nor any line for them
in a RECORD; the Debian part has no iconv modules (dpkg path-exclude). The runtime's own tests
in this tier (file store, Kubernetes store) run on this image, so what is left out is never
loaded.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from image_harness import ROOT, archive_entries, archive_files

SITE = "opt/venv/lib/python3.11/site-packages/"
PRUNE = ROOT / "scripts" / "image" / "prune.txt"
SIZES = ROOT / "scripts" / "image" / "sizes.py"
# The image's file bytes, measured at 230 MB; a bound that catches a folder coming back.
MAX_FILE_BYTES = 240_000_000


def pruned() -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in PRUNE.read_text().splitlines())
    return [line for line in lines if line]


def test_the_image_leaves_out_what_the_runtime_never_loads(image_archive: Path) -> None:
    names = [entry.name.removeprefix("./") for entry, _ in archive_entries(image_archive)]
    assert any(name.startswith(SITE + "kubernetes/client/") for name in names)  # read them all
    left_out = [f"{SITE}{folder}/" for folder in pruned()] + [
        SITE + "pip/",
        SITE + "setuptools/",
        SITE + "pkg_resources/",
        "opt/venv/bin/pip",
        "usr/lib/x86_64-linux-gnu/gconv/",
    ]
    assert len(left_out) > 8
    assert sorted(name for name in names if name.startswith(tuple(left_out))) == []
    records = archive_files(image_archive, lambda name: name.endswith(".dist-info/RECORD"))
    assert len(records) > 40
    listed = re.compile("^(" + "|".join(re.escape(f) for f in pruned()) + ")/", re.MULTILINE)
    assert sorted(n for n, text in records.items() if listed.search(text.decode())) == []
    assert not any(re.search(r"/(pip|setuptools)-[^/]*\.dist-info/", n) for n in records)


def test_the_image_size(image_archive: Path) -> None:
    """Within the bound, and as scripts/image/sizes.py (docs/image.md's table) reports it."""
    sizes = [entry.size for entry, _ in archive_entries(image_archive) if entry.isfile()]
    total = sum(sizes)
    print(f"image file bytes: {total / 1e6:.1f} MB in {len(sizes)} files")
    assert total <= MAX_FILE_BYTES
    table = subprocess.run(
        [sys.executable, str(SIZES), str(image_archive), "opt/venv/lib/python3.11/site-packages"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"| everything | {total / 1e6:.1f} |" in table
    assert "| &nbsp;&nbsp;`kubernetes` |" in table
