"""scripts/just and the testenv build, as a developer calls them from their own directory."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import yaml

from checkpoint_testenv.binaries import BUILD_SCRIPT, REPO_ROOT

JUST = REPO_ROOT / "scripts" / "just"


def just(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(JUST), *args], cwd=cwd, capture_output=True, text=True, timeout=600, check=False
    )


def test_render_prints_only_yaml_for_a_values_file_relative_to_the_callers_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "mine.yaml").write_text("replicaCount: 3\n")
    result = just("render", "-f", "mine.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    documents = [doc for doc in yaml.safe_load_all(result.stdout) if doc is not None]
    assert documents
    assert all(isinstance(doc, dict) and "kind" in doc for doc in documents)
    deployment = next(doc for doc in documents if doc["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 3


def test_gate_takes_a_values_file_relative_to_the_callers_directory(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("replicaCount: 3\n")
    result = just("gate", "-f", "mine.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "== mine.yaml" in result.stdout
    assert "gate: 1 of 1 values documents pass" in result.stdout


def test_the_listing_works_from_any_directory(tmp_path: Path) -> None:
    result = just(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Available recipes:" in result.stdout


def test_the_testenv_build_says_when_it_waits_for_another_builds_lock(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    lock = cache / ".testenv.lock"  # scripts/testenv/cache.sh: one lock per kind of build
    holder = subprocess.Popen(["flock", str(lock), "sleep", "60"])
    waiter: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + 10
        while not lock.exists():  # flock creates the file once it holds it
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.2)
        waiter = subprocess.Popen(
            [str(BUILD_SCRIPT)],
            env={**os.environ, "CHECKPOINT_TESTENV_CACHE": str(cache)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert waiter.stderr is not None
        line = waiter.stderr.readline()
        assert line.startswith(f"testenv: another build holds {lock}; waiting for it")
        assert waiter.poll() is None  # still waiting: it never builds while the lock is held
    finally:
        if waiter is not None:
            os.killpg(waiter.pid, signal.SIGKILL)
            waiter.wait()
        holder.kill()
        holder.wait()
