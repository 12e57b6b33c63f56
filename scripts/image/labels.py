"""The image's OCI labels, each from its one home: printed as KEY=VALUE lines for build.sh.

    python scripts/image/labels.py REVISION

- title, description: the Dockerfile's LABEL (what a Docker build of the Dockerfile carries);
- version: pyproject.toml's project version (the chart's image tag renders the same);
- licenses: pyproject.toml's SPDX `license` (the wheel's metadata says the same);
- source: pyproject.toml's `[project.urls]` Source, when it names one;
- revision: REVISION, the commit of the image's sources (build.sh: the newest commit that
  changed an input of the image, `-dirty` when the tree holds uncommitted changes to them).
"""

from __future__ import annotations

import re
import shlex
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "org.opencontainers.image."


def dockerfile_labels(dockerfile: Path) -> dict[str, str]:
    """KEY=value pairs of the LABEL instructions of the Dockerfile's final stage."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text(encoding="utf-8"))
    labels: dict[str, str] = {}
    for line in text.splitlines():
        keyword, _, rest = line.strip().partition(" ")
        if keyword.upper() == "FROM":
            labels = {}
        elif keyword.upper() == "LABEL":
            labels.update(word.split("=", 1) for word in shlex.split(rest))
    return labels


def labels(revision: str, root: Path = ROOT) -> dict[str, str]:
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    found = dockerfile_labels(root / "Dockerfile")
    found[PREFIX + "version"] = project["version"]
    found[PREFIX + "licenses"] = project["license"]
    source = project.get("urls", {}).get("Source")
    if source:
        found[PREFIX + "source"] = source
    if revision:
        found[PREFIX + "revision"] = revision
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: labels.py REVISION", file=sys.stderr)
        return 2
    for key, value in sorted(labels(argv[0]).items()):
        if "\n" in key + value:
            print(f"labels.py: {key} holds a line break", file=sys.stderr)
            return 1
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
