"""Where an image's space goes: file bytes by folder, read from a docker-archive build.sh made.

    python scripts/image/sizes.py ARCHIVE [FOLDER...]

Prints a Markdown table: the total, then each FOLDER given (default: the image's main folders)
and its largest subfolders, in MB (10^6 bytes) of file content (hard links counted once), as
docs/image.md shows them.
"""

from __future__ import annotations

import argparse
import json
import tarfile
from collections import Counter
from pathlib import Path

FOLDERS = (
    "opt/venv/lib/python3.11/site-packages",
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/python3.11",
    "usr/bin",
    "usr/share",
    "var",
)


def folder_bytes(archive: Path) -> tuple[int, Counter[str]]:
    """The total file bytes of the image's layers, and the bytes under each folder."""
    sizes: Counter[str] = Counter()
    total = 0
    with tarfile.open(archive) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        for layer in manifest[0]["Layers"]:
            with tarfile.open(fileobj=tar.extractfile(layer), mode="r|*") as contents:
                for info in contents:
                    if not info.isfile():  # hard links, folders, symlinks: no content of their own
                        continue
                    total += info.size
                    parts = info.name.removeprefix("./").split("/")
                    for depth in range(1, len(parts)):
                        sizes["/".join(parts[:depth])] += info.size
    return total, sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("folders", nargs="*", default=list(FOLDERS))
    parser.add_argument("--top", type=int, default=6, help="subfolders shown per folder")
    args = parser.parse_args()
    total, sizes = folder_bytes(args.archive)
    print("| folder | MB |\n|---|---:|")
    print(f"| everything | {total / 1e6:.1f} |")
    for folder in args.folders:
        print(f"| `/{folder}` | {sizes[folder] / 1e6:.1f} |")
        children = [
            (name, size)
            for name, size in sizes.items()
            if name.startswith(folder + "/") and "/" not in name[len(folder) + 1 :]
        ]
        for name, size in sorted(children, key=lambda item: -item[1])[: args.top]:
            print(f"| &nbsp;&nbsp;`{name[len(folder) + 1 :]}` | {size / 1e6:.1f} |")


if __name__ == "__main__":
    main()
