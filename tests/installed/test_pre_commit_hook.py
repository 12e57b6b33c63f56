"""The repository's .pre-commit-hooks.yaml, run by pre-commit itself on a scratch repository.

pre-commit (pinned in the dev lock) installs the hook as it does for a user: a virtualenv of
its own with this repository's package and its gate extra (`additional_dependencies`), then
runs `checkpoint-runtime gate` on the changed values files. `pre-commit try-repo` takes the
repository as it is, uncommitted changes included. pip installs from a wheelhouse of
scripts/setup/gate.lock's wheels (downloaded with --require-hashes, kept in the user's cache
per lock), offline: the hook's environment holds the locked versions.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from installed_helpers import REPO_ROOT, clean_env

pytestmark = pytest.mark.installed

GATE_LOCK = REPO_ROOT / "scripts" / "setup" / "gate.lock"
PRE_COMMIT = Path(sys.executable).parent / "pre-commit"
HOOK = "checkpoint-runtime-gate"
TIMEOUT = 900


def gate_wheelhouse() -> Path:
    """The wheels gate.lock pins, checked against its hashes, in the cache per lock content."""
    key = hashlib.sha256(GATE_LOCK.read_bytes()).hexdigest()[:16]
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    wheelhouse = root / "checkpoint-runtime" / "wheelhouses" / key
    if (wheelhouse / ".complete").exists():
        return wheelhouse
    partial = wheelhouse.with_name(f"{key}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--only-binary", ":all:", "--require-hashes", "--dest", str(partial),
         "-r", str(GATE_LOCK)],
        check=True, timeout=TIMEOUT,
    )  # fmt: skip
    (partial / ".complete").touch()
    shutil.rmtree(wheelhouse, ignore_errors=True)
    partial.rename(wheelhouse)
    return wheelhouse


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_pre_commit_runs_the_gate_hook_on_the_changed_values_files(tmp_path: Path) -> None:
    repo = tmp_path / "scratch"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "dev@example.invalid")
    git(repo, "config", "user.name", "dev")
    (repo / "prod-values.yaml").write_text("replicaCount: 2\n", encoding="utf-8")
    (repo / "staging-values.yaml").write_text("image:\n  tag: latest\n", encoding="utf-8")
    (repo / "other.yaml").write_text("replicaCount: many\n", encoding="utf-8")  # not values
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "values")
    env = {key: value for key, value in clean_env().items() if not key.startswith("PIP_")}
    env |= {
        "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(gate_wheelhouse()),
        "PIP_NO_COMPILE": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }

    def hook() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PRE_COMMIT), "try-repo", str(REPO_ROOT), HOOK, "--all-files"],
            cwd=repo, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip

    result = hook()
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "checkpoint-runtime render gate" in out
    assert "DENY values-schema     SCHEMA image.tag" in out
    assert "== staging-values.yaml" in out
    assert "== prod-values.yaml" in out
    assert "other.yaml" not in out  # not a values file: the hook's `files` pattern
    assert "gate: 1 of 2 values documents pass" in out
    assert "Traceback" not in out

    (repo / "staging-values.yaml").write_text("image:\n  tag: 0.1.0\n", encoding="utf-8")
    result = hook()  # the hook's environment is installed once, then reused
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "checkpoint-runtime render gate" in out
    assert "Passed" in out
