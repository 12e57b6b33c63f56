"""The previous release, taken from the repository's history: one home for its commit and for
extracting its files (the store's compatibility tests, the node's rollback test and the etcd
cost benchmark all run the previous release's own code)."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

from checkpoint_testenv.binaries import REPO_ROOT

PREVIOUS_RELEASE = "bc8f231"
"""The last commit whose runtime writes gzip-shards-v2 (one object per shard, before v3)."""
FIRST_V3 = "347391d"
"""The last commit whose runtime writes gzip-shards-v3 with the JSON column base (its heads
name no `encoding`), before the row-block base."""


class HistoryMissing(RuntimeError):
    """The repository's history (git, or the commit) is not available here."""


def extract_release(destination: Path, *paths: str, revision: str = PREVIOUS_RELEASE) -> Path:
    """Write `paths` (everything when none) of `revision` under `destination`; returns it."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "archive", revision, *paths],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", b"") or b""
        raise HistoryMissing(
            f"git archive {revision} failed: {error} {detail.decode(errors='replace')}".strip()
        ) from error
    destination.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, filter="data")
    return destination
