"""scripts/setup: the light virtualenv's pins (gate.lock) and the virtualenv venv.sh makes."""

from __future__ import annotations

import os
import subprocess
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from checkpoint_testenv.binaries import REPO_ROOT

LOCK = REPO_ROOT / "scripts" / "setup" / "gate.lock"
VENV_SCRIPT = REPO_ROOT / "scripts" / "setup" / "venv.sh"


def pins() -> dict[str, Version]:
    found: dict[str, Version] = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"not a pin: {line}"
            found[canonicalize_name(name)] = Version(version)
    return found


def project() -> dict[str, list[str]]:
    table = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return {"": table["dependencies"], **table["optional-dependencies"]}


def test_the_lock_pins_every_runtime_and_gate_requirement_within_its_range() -> None:
    locked = pins()
    for text in project()[""] + project()["gate"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is not in {LOCK.name}"
        assert locked[name] in requirement.specifier, f"{name}=={locked[name]} vs {requirement}"


def test_the_lock_pins_the_build_backend_and_just_as_the_dev_extra_does() -> None:
    locked = pins()
    dev = {canonicalize_name(Requirement(t).name): Requirement(t) for t in project()["dev"]}
    for name in ("hatchling", "rust-just"):
        (wanted,) = dev[name].specifier
        assert wanted.operator == "=="
        assert locked[name] == Version(wanted.version)


def test_the_lock_holds_the_dependencies_of_every_pin_installed_at_its_version() -> None:
    """pip installs the lock with --no-deps: a dependency missing from it would be missing."""
    locked = pins()
    environment = {**default_environment(), "extra": ""}
    checked = 0
    for name, version in locked.items():
        try:
            installed = distribution(name)
        except PackageNotFoundError:
            continue
        if Version(installed.version) != version:
            continue  # another version's dependencies may differ
        checked += 1
        for text in installed.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                assert canonicalize_name(requirement.name) in locked, f"{name} needs {text}"
    assert checked >= len(locked) // 2


def test_a_virtualenv_from_the_template_runs_its_own_interpreter_and_tools(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "venv"
    result = subprocess.run(
        [str(VENV_SCRIPT), str(venv)], capture_output=True, text=True, timeout=900, check=False
    )
    assert result.returncode == 0, result.stderr
    scripts = [path for path in (venv / "bin").iterdir() if path.is_file()]
    for script in scripts:
        first = script.read_bytes()[:200].split(b"\n", 1)[0]
        if first.startswith(b"#!"):
            assert first.decode().removeprefix("#!").startswith(f"{venv}/bin/python"), script
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "--version"], capture_output=True, text=True, check=True
    )
    assert str(venv / "lib") in pip.stdout  # the venv's own site-packages, not the template's
    just = subprocess.run(
        [str(venv / "bin" / "just"), "--version"], capture_output=True, text=True, check=True
    )
    assert just.stdout.startswith("just ")
    imports = "import helm_python, opapywasm, jsonschema_rs, kubernetes_validate, hatchling"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    subprocess.run([str(venv / "bin" / "python"), "-c", imports], check=True, env=env)
    assert (venv / ".lock-installed").read_text().strip()
