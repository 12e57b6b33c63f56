"""scripts/image/build.sh as other scripts call it, and the image it makes, run for real.

Every run is `podman run` with runc as the chart's pod runs: UID 10001, read-only root
filesystem, only /tmp writable (a tmpfs), all capabilities dropped, no network.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import tomllib
from pathlib import Path

from image_harness import BUILD_SCRIPT, BUILD_TIMEOUT, Podman

ROOT = Path(__file__).resolve().parents[2]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_a_second_build_is_cached_and_prints_the_same_archive_last(
    image_archive: Path,
) -> None:
    # Another checkout's build may hold the shared cache's lock for minutes: wait like a build.
    result = subprocess.run(
        [str(BUILD_SCRIPT)], capture_output=True, text=True, check=True, timeout=BUILD_TIMEOUT
    )
    assert result.stdout.strip().splitlines()[-1] == str(image_archive)
    assert "cached" in result.stderr
    assert image_archive.is_absolute()
    assert image_archive.is_file()


def test_a_concurrent_caller_says_it_waits_for_the_lock_then_gets_the_archive(
    image_archive: Path,
) -> None:
    lock = image_archive.parent.parent / ".lock"
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        waiting = subprocess.Popen(
            [str(BUILD_SCRIPT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert waiting.stderr is not None
            first_line = waiting.stderr.readline()
            assert "waiting for another image build" in first_line
            assert waiting.poll() is None  # still blocked on the lock we hold
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
        stdout, _ = waiting.communicate(timeout=BUILD_TIMEOUT)
    assert waiting.returncode == 0
    assert stdout.strip().splitlines()[-1] == str(image_archive)


def test_version_prints_the_project_version(podman: Podman, image: str) -> None:
    result = podman.run_once(image, "--version")
    assert result.returncode == 0, result.stderr
    assert VERSION in result.stdout


def test_every_subcommand_of_the_runtime_answers_help(podman: Podman, image: str) -> None:
    for command in ("run", "inspect", "project", "migrate"):
        result = podman.run_once(image, command, "--help")
        assert result.returncode == 0, f"{command}: {result.stderr}"
        assert "usage:" in result.stdout


# Run by the image's Python: every .py file of the standard library and the venv has the
# bytecode the build compiled (the read-only root cannot cache any at run time), and importing
# the runtime writes nothing.
BYTECODE = r"""
import importlib, importlib.util, json, os, sys
checked, missing = 0, []
for top in ("/usr/lib/python3.11", "/opt/venv/lib/python3.11/site-packages"):
    for folder, _, files in os.walk(top):
        for name in files:
            if name.endswith(".py"):
                checked += 1
                path = os.path.join(folder, name)
                if not os.path.exists(importlib.util.cache_from_source(path)):
                    missing.append(path)
importlib.import_module("checkpoint_runtime.runtime.main")
print(json.dumps({"checked": checked, "missing": missing[:20], "n_missing": len(missing)}))
"""


def test_all_bytecode_was_compiled_at_build_time(podman: Podman, image: str) -> None:
    # PYTHONDONTWRITEBYTECODE cleared: the interpreter would cache what it found missing.
    options = ("--entrypoint", "python3", "--env", "PYTHONDONTWRITEBYTECODE=")
    result = podman.run_once(image, "-c", BYTECODE, options=options)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["checked"] > 1000
    assert found["n_missing"] == 0, found["missing"]


def test_the_root_filesystem_is_read_only_and_tmp_is_writable(podman: Podman, image: str) -> None:
    probe = (
        "import os\n"
        "for path in ('/opt/venv/probe', '/tmp/probe'):\n"
        "    try:\n"
        "        open(path, 'w').close(); print(path, 'writable')\n"
        "    except OSError:\n"
        "        print(path, 'read-only')\n"
        "print('uid', os.getuid(), os.getgid())\n"
    )
    result = podman.run_once(image, "-c", probe, options=("--entrypoint", "python3"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:3] == [
        "/opt/venv/probe read-only",
        "/tmp/probe writable",
        "uid 10001 10001",
    ]
