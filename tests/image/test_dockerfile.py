"""The Dockerfile (for users who build with Docker) and the offline image build stay in step.

The Dockerfile is lint-clean and consistent with the chart; the image scripts/image/build.sh
makes has the Dockerfile's user, entrypoint, command, working directory, port, environment and
labels, and installs the same things (the package with the Dockerfile's extras and nothing
else, the files the Dockerfile copies).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml
from image_harness import Podman, archive_config

from checkpoint_runtime.constants import DEFAULT_FILE_STORE_PATH

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
VALUES = ROOT / "charts" / "checkpoint-runtime" / "values.yaml"
DEPLOYMENT = ROOT / "charts" / "checkpoint-runtime" / "templates" / "deployment.yaml"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def final_stage() -> list[tuple[str, str]]:
    """The instructions after the last FROM: what the image a user runs is made of."""
    found = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(found) if keyword == "FROM")
    return found[last_from + 1 :]


def pairs(keyword: str) -> dict[str, str]:
    """KEY=value pairs of every ENV (or LABEL) of the final stage, quotes removed."""
    result: dict[str, str] = {}
    for found, rest in final_stage():
        if found == keyword:
            result.update(word.split("=", 1) for word in shlex.split(rest))
    return result


def last(keyword: str) -> str:
    return [rest for found, rest in final_stage() if found == keyword][-1]


def dockerfile_extras() -> list[str]:
    args = dict(rest.split("=", 1) for keyword, rest in instructions() if keyword == "ARG")
    return [extra for extra in args.get("EXTRAS", "").split(",") if extra]


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


def test_runs_as_the_charts_non_root_uid(image_archive: Path) -> None:
    values = yaml.safe_load(VALUES.read_text())
    security = values["podSecurityContext"]
    chart_user = f"{security['runAsUser']}:{security['runAsGroup']}"
    assert last("USER") == chart_user
    assert archive_config(image_archive)["config"]["User"] == chart_user
    assert not chart_user.startswith("0")


def test_entrypoint_matches_the_charts_args(image_archive: Path) -> None:
    config = archive_config(image_archive)["config"]
    assert json.loads(last("ENTRYPOINT")) == config["Entrypoint"] == ["checkpoint-runtime"]
    assert json.loads(last("CMD")) == config["Cmd"] == ["run"]
    # The chart's args replace CMD; they must start with the subcommand.
    assert 'args: ["run", "--config"' in DEPLOYMENT.read_text()


def test_nothing_is_written_outside_tmp_at_run_time(image_archive: Path) -> None:
    image_env = dict(e.split("=", 1) for e in archive_config(image_archive)["config"]["Env"])
    for env in (pairs("ENV"), image_env):
        assert env["PYTHONDONTWRITEBYTECODE"] == "1"
        assert env["HOME"] == "/tmp"
    assert last("WORKDIR") == archive_config(image_archive)["config"]["WorkingDir"] == "/tmp"
    assert DEFAULT_FILE_STORE_PATH.startswith("/tmp/")


def test_the_offline_image_has_the_dockerfiles_environment_port_and_labels(
    image_archive: Path,
) -> None:
    config = archive_config(image_archive)["config"]
    image_env = dict(e.split("=", 1) for e in config["Env"])
    for key, value in pairs("ENV").items():
        if "$PATH" in value:  # the Dockerfile prepends to its base image's PATH
            assert image_env[key].startswith(value.replace("$PATH", "")), key
        else:
            assert image_env.get(key) == value, key
    exposed = {f"{port}/tcp" if "/" not in port else port for port in last("EXPOSE").split()}
    assert set(config["ExposedPorts"]) == exposed
    labels = pairs("LABEL")
    assert labels
    assert {k: config["Labels"].get(k) for k in labels} == labels


def test_the_archive_carries_the_name_the_chart_renders(image_archive: Path) -> None:
    image = yaml.safe_load(VALUES.read_text())["image"]
    assert image["tag"] == PROJECT["version"]
    config = archive_config(image_archive)
    assert config["RepoTags"] == [f"docker.io/library/{image['repository']}:{image['tag']}"]
    assert config["config"]["Labels"]["org.opencontainers.image.version"] == PROJECT["version"]


# Run inside the image by its own Python (argv: the extras to install): the installed
# distributions, and what checkpoint-runtime with those extras needs, followed transitively
# (requirements behind another distribution's extras are not followed; none is installed).
INSPECT_INSTALL = r"""
import glob, json, re, sys
from importlib import metadata
installed = {d.metadata["Name"] for d in metadata.distributions()}
sys.path.insert(0, glob.glob("/usr/share/python-wheels/pip-*.whl")[0])  # the venv has no pip
from pip._vendor.packaging.requirements import Requirement

def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()

def needs(name, extras):
    for line in metadata.distribution(name).requires or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras | {""}):
            yield norm(req.name), frozenset(req.extras)

seen, todo = set(), [("checkpoint-runtime", frozenset(sys.argv[1:]))]
while todo:
    name, extras = todo.pop()
    if (name, extras) not in seen:
        seen.add((name, extras))
        todo += needs(name, extras)
root = metadata.distribution("checkpoint-runtime")
direct_url = root.read_text("direct_url.json") or ""
print(json.dumps({
    "version": root.version,
    "installed": sorted({norm(name) for name in installed}),
    "needed": sorted({name for name, _ in seen}),
    "editable": '"editable": true' in direct_url,
}))
"""


def image_python(podman: Podman, image: str, script: str, *args: str) -> Any:
    """Run a script with the image's own Python; its stdout as JSON."""
    result = podman.run_once(image, "-c", script, *args, options=("--entrypoint", "python3"))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_offline_image_installs_what_the_dockerfile_installs(
    podman: Podman, image: str
) -> None:
    """checkpoint-runtime[<the Dockerfile's extras>] with its dependencies, and nothing else
    (not even pip or setuptools): no dev tools, no gate engines, no editable install."""
    extras = dockerfile_extras()
    found = image_python(podman, image, INSPECT_INSTALL, *extras)
    assert found["version"] == PROJECT["version"]
    assert not found["editable"]
    installed, needed = set(found["installed"]), set(found["needed"])
    assert needed - installed == set()
    assert installed - needed == set()
    for extra in extras:  # the extras' own requirements, as pyproject.toml lists them
        names = {re.split(r"[\[<>=!~; ]", r)[0] for r in PROJECT["optional-dependencies"][extra]}
        assert names, extra
        assert names <= installed, extra


HASH_TREE = r"""
import hashlib, json, os, sys
result = {}
for top in sys.argv[1:]:
    for folder, _, files in os.walk(top):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            result[os.path.relpath(path, top) + "@" + top] = digest
print(json.dumps(result))
"""


def test_the_offline_image_holds_the_files_the_dockerfile_copies(
    podman: Podman, image: str
) -> None:
    copies = [rest.split() for keyword, rest in final_stage() if keyword == "COPY"]
    from_context = [c for c in copies if not c[0].startswith("--from")]
    from_build = [c[-1] for c in copies if c[0].startswith("--from")]
    assert from_build
    destinations = [c[-1] for c in from_context]
    in_image = image_python(podman, image, HASH_TREE, *destinations)
    expected = {}
    for *sources, destination in from_context:
        for source in sources:
            assert (ROOT / source).is_dir(), f"COPY {source}: only folders are compared here"
            for path in sorted((ROOT / source).rglob("*")):
                if path.is_file():
                    relative = path.relative_to(ROOT / source)
                    expected[f"{relative}@{destination}"] = hashlib.sha256(
                        path.read_bytes()
                    ).hexdigest()
    assert in_image == expected
    exists = podman.run_once(
        image, "-c", "import os, sys; sys.exit(not all(map(os.path.isdir, sys.argv[1:])))",
        *from_build, options=("--entrypoint", "python3"),
    )  # fmt: skip
    assert exists.returncode == 0, f"missing in the image: {from_build}"
