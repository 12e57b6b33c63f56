"""Every pip command of the project's scripts installs only what a hashed lock pins.

The scripts (scripts/**/*.sh, scripts/just, the justfile) are read as text: each pip command
that can fetch a package (`pip install`, `pip download`, `pip wheel`, and the uses of an array
holding one) must pass --require-hashes, or --no-index (nothing comes from an index: the
project's own source, or a wheelhouse whose files were checked on download). The exceptions are
listed with their reason; one that no longer applies fails too.
"""

from __future__ import annotations

import re

from checkpoint_testenv.binaries import REPO_ROOT

SCRIPTS = sorted(
    {*REPO_ROOT.glob("scripts/**/*.sh"), REPO_ROOT / "scripts" / "just", REPO_ROOT / "justfile"}
)
# A pip command that fetches, or a use of a shell array defined as one (`pip=(... pip install)`).
FETCH = re.compile(r"\bpip3?\"?\s+(install|download|wheel)\b")
ARRAY = re.compile(r"^\s*(\w+)=\((.*\bpip3?\s+(?:install|download|wheel)\b.*)\)")
# script -> why its pip command may go without --require-hashes
EXCEPTIONS = {
    "scripts/dist.sh": "builds the project's own wheel only (--no-deps); with the project's .venv "
    "it uses the pinned build backend, and without it pip's isolated build environment",
}


def commands(text: str) -> list[str]:
    """The shell commands of a script, `\\`-continued lines joined, comments dropped."""
    joined, current = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        current += " " + line.strip()
        if current.endswith("\\"):
            current = current[:-1]
        else:
            joined.append(current.strip())
            current = ""
    return joined


def fetching_pip_commands(text: str) -> list[str]:
    found, arrays = [], set()
    for command in commands(text):
        array = ARRAY.match(command)
        if array is not None:
            arrays.add(array[1])
            continue
        if FETCH.search(command) or any(f'"${{{name}[@]}}"' in command for name in arrays):
            found.append(command)
    return found


def unchecked(command: str) -> bool:
    return "--require-hashes" not in command and "--no-index" not in command


def test_the_scan_finds_the_projects_pip_commands() -> None:
    """The scan sees what it checks: the installs of venv.sh, install.sh, scripts/just and the
    image build (a scan that found nothing would pass anything)."""
    found = {
        script.relative_to(REPO_ROOT).as_posix(): fetching_pip_commands(script.read_text())
        for script in SCRIPTS
    }
    for script in (
        "scripts/setup/venv.sh",
        "scripts/setup/install.sh",
        "scripts/just",
        "scripts/image/build.sh",
    ):
        assert found[script], f"no pip command found in {script}"
    assert len(found["scripts/image/build.sh"]) == 3  # download, wheel, install


def test_every_pip_command_of_the_scripts_checks_hashes_or_reads_no_index() -> None:
    unexplained, stale = [], []
    for script in SCRIPTS:
        name = script.relative_to(REPO_ROOT).as_posix()
        bad = [c for c in fetching_pip_commands(script.read_text()) if unchecked(c)]
        if bad and name not in EXCEPTIONS:
            unexplained += [f"{name}: {command[:160]}" for command in bad]
        if not bad and name in EXCEPTIONS:
            stale.append(name)
    assert not unexplained, "pip without --require-hashes or --no-index:\n" + "\n".join(unexplained)
    assert not stale, f"exceptions that no longer apply: {stale}"


def test_a_pip_install_without_hashes_is_found() -> None:
    script = 'pip=("$venv/bin/python" -m pip install --quiet)\n"${pip[@]}" -r "$lock"\n'
    assert [unchecked(c) for c in fetching_pip_commands(script)] == [True]
    checked = '"$py" -m pip install --no-deps \\\n  --require-hashes -r "$lock"\n'
    assert [unchecked(c) for c in fetching_pip_commands(checked)] == [False]
