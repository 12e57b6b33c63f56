"""The image's Dockerfile: lint-clean and consistent with the chart that runs it.

No container engine runs here, so the image itself is not built; these checks pin what the
chart depends on (UID, entrypoint, writable paths) to the values the chart sets.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from checkpoint_runtime.constants import DEFAULT_FILE_STORE_PATH

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
VALUES = ROOT / "charts" / "checkpoint-runtime" / "values.yaml"
DEPLOYMENT = ROOT / "charts" / "checkpoint-runtime" / "templates" / "deployment.yaml"


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run(
        [hadolint, str(DOCKERFILE)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_image_is_pinned_by_an_exact_slim_version() -> None:
    args = dict(
        rest.split("=", 1) for keyword, rest in instructions() if keyword == "ARG" and "=" in rest
    )
    image = args["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+", image), image
    froms = [rest.split()[0] for keyword, rest in instructions() if keyword == "FROM"]
    assert froms
    assert all(ref == "${PYTHON_IMAGE}" for ref in froms)


def test_runs_as_the_charts_non_root_uid() -> None:
    values = yaml.safe_load(VALUES.read_text())
    users = [rest for keyword, rest in instructions() if keyword == "USER"]
    assert users[-1] == f"{values['podSecurityContext']['runAsUser']}:" + str(
        values["podSecurityContext"]["runAsGroup"]
    )
    assert not users[-1].startswith("0")


def test_entrypoint_matches_the_charts_args() -> None:
    entry = [rest for keyword, rest in instructions() if keyword == "ENTRYPOINT"]
    cmd = [rest for keyword, rest in instructions() if keyword == "CMD"]
    assert entry == ['["checkpoint-runtime"]']
    assert cmd == ['["run"]']
    # The chart's args replace CMD; they must start with the subcommand.
    assert 'args: ["run", "--config"' in DEPLOYMENT.read_text()


def test_nothing_is_written_outside_tmp_at_run_time() -> None:
    env = " ".join(rest for keyword, rest in instructions() if keyword == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert "HOME=/tmp" in env
    assert DEFAULT_FILE_STORE_PATH.startswith("/tmp/")
