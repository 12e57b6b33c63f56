"""scripts/image/labels.py: the image's OCI labels, each from its one home."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from checkpoint_testenv.binaries import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "image" / "labels.py"
OCI = "org.opencontainers.image."


def labels(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def test_the_labels_come_from_pyproject_the_dockerfile_and_the_revision_given() -> None:
    result = labels("0123abcd")
    assert result.returncode == 0, result.stderr
    printed = dict(line.split("=", 1) for line in result.stdout.splitlines())
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert printed[OCI + "version"] == project["version"]
    assert printed[OCI + "licenses"] == project["license"]
    assert printed[OCI + "revision"] == "0123abcd"
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert f'{OCI}title="{printed[OCI + "title"]}"' in dockerfile
    assert printed[OCI + "description"] in dockerfile
    # the Dockerfile's own licence label agrees with pyproject.toml's
    assert f'{OCI}licenses="{project["license"]}"' in dockerfile
    source = project.get("urls", {}).get("Source")
    assert printed.get(OCI + "source") == source


def test_without_a_revision_there_is_no_revision_label_and_no_argument_is_a_usage_error() -> None:
    result = labels("")
    assert result.returncode == 0
    assert OCI + "revision" not in result.stdout
    assert labels().returncode == 2
