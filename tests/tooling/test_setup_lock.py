"""The project's Python locks (scripts/setup/lock.sh) and the virtualenv venv.sh makes from one.

Every Python install of the project (the light virtualenv, the dev tools, the image's wheelhouse,
the scanners' virtualenv) comes from a lock that pins each package by version and by the SHA-256
of its files; the installs pass --require-hashes (tests/tooling/test_pinned_inputs.py).
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from checkpoint_testenv.binaries import REPO_ROOT
from checkpoint_testenv.pylocks import (
    DEV_LOCK,
    GATE_LOCK,
    HEADER,
    IMAGE_LOCKS,
    LOCKS,
    read_lock,
    versions,
)

VENV_SCRIPT = REPO_ROOT / "scripts" / "setup" / "venv.sh"
PROJECT = canonicalize_name("checkpoint-runtime")


def project() -> dict[str, list[str]]:
    table = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return {"": table["dependencies"], **table["optional-dependencies"]}


def requirements_of(extras: set[str]) -> list[Requirement]:
    """The project's requirements with `extras`, the project's own extras expanded (the dev extra
    names checkpoint-runtime[gate,s3])."""
    wanted, done, found = {"", *extras}, set[str](), list[Requirement]()
    while wanted - done:
        extra = (wanted - done).pop()
        done.add(extra)
        for text in project()[extra]:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == PROJECT:
                wanted |= requirement.extras
            else:
                found.append(requirement)
    return found


def image_extras(lock: Path) -> set[str]:
    extra = lock.name.removeprefix("requirements").removesuffix(".lock").removeprefix("-")
    return {extra} if extra else set()


def test_the_locks_are_the_ones_lock_sh_writes() -> None:
    script = (REPO_ROOT / "scripts" / "setup" / "lock.sh").read_text()
    for lock in LOCKS:
        assert lock.is_file(), lock
        relative = lock.relative_to(REPO_ROOT).as_posix()
        assert relative in script or lock in IMAGE_LOCKS, f"lock.sh does not write {relative}"
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    (default_extras,) = (line for line in dockerfile.splitlines() if line.startswith("ARG EXTRAS="))
    extras = default_extras.removeprefix("ARG EXTRAS=")
    assert {lock.name for lock in IMAGE_LOCKS} == {
        "requirements.lock",
        f"requirements-{extras}.lock",
        "requirements-gate.lock",  # the gate image's (scripts/image/build-gate.sh)
    }


@pytest.mark.parametrize("lock", sorted(LOCKS), ids=lambda path: path.name)
def test_every_entry_of_a_lock_is_an_exact_pin_with_its_hashes_written_by_just_lock(
    lock: Path,
) -> None:
    """An entry without a hash, a range, a URL or an editable line fails read_lock; the header
    says the file is written by `scripts/just lock`, not by hand."""
    pins = read_lock(lock)
    assert len(pins) >= 10  # the smallest, the SBOM checker's, pins 14
    assert all(len(pin.hashes) >= 1 for pin in pins)
    assert len({pin.name for pin in pins}) == len(pins)
    assert tuple(lock.read_text().splitlines()[:2]) == HEADER


def test_a_lock_line_without_a_hash_or_with_a_range_is_refused(tmp_path: Path) -> None:
    good = "idna==3.20 \\\n    --hash=sha256:" + "a" * 64 + "\n"
    (tmp_path / "good.lock").write_text(good)
    assert [pin.name for pin in read_lock(tmp_path / "good.lock")] == ["idna"]
    for bad in (
        "idna==3.20\n",
        "idna>=3.20 \\\n    --hash=sha256:" + "a" * 64 + "\n",
        "-e .\n",
        "idna==3.20 --hash=md5:abc\n",
    ):
        (tmp_path / "bad.lock").write_text(good + bad)
        with pytest.raises(ValueError, match=r"bad\.lock"):
            read_lock(tmp_path / "bad.lock")


@pytest.mark.parametrize(
    ("lock", "extras"),
    [(DEV_LOCK, {"dev"}), (GATE_LOCK, {"gate"})]
    + [(lock, image_extras(lock)) for lock in IMAGE_LOCKS],
    ids=lambda value: value.name if isinstance(value, Path) else ",".join(sorted(value)),
)
def test_a_lock_pins_every_requirement_of_its_extras_within_its_range(
    lock: Path, extras: set[str]
) -> None:
    """pyproject.toml and the locks agree: a requirement changed without `just lock` fails."""
    locked = versions(lock)
    for requirement in requirements_of(extras):
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is not in {lock.name}: run scripts/just lock"
        assert locked[name] in requirement.specifier, f"{name}=={locked[name]} vs {requirement}"


def test_the_gate_and_image_locks_pin_the_dev_locks_versions() -> None:
    """One version of a package everywhere: the dev install over the gate template replaces
    nothing, and the image runs what the tests ran."""
    dev = versions(DEV_LOCK)
    for lock in (GATE_LOCK, *IMAGE_LOCKS):
        for name, version in versions(lock).items():
            assert dev.get(name) == version, (
                f"{lock.name}: {name}=={version}, dev.lock {dev.get(name)}"
            )


def test_the_gate_lock_pins_the_build_backend_and_just_as_the_dev_extra_does() -> None:
    locked = versions(GATE_LOCK)
    dev = {canonicalize_name(Requirement(t).name): Requirement(t) for t in project()["dev"]}
    for name in ("hatchling", "rust-just"):
        (wanted,) = dev[name].specifier
        assert wanted.operator == "=="
        assert locked[name] == Version(wanted.version)


@pytest.mark.parametrize("lock", [DEV_LOCK, GATE_LOCK], ids=lambda path: path.name)
def test_the_lock_holds_the_dependencies_of_every_pin_installed_at_its_version(lock: Path) -> None:
    """pip installs the lock with --no-deps: a dependency missing from it would be missing."""
    locked = versions(lock)
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
