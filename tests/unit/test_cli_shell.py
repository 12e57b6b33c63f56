"""The `checkpoint-runtime` shell: lazy subcommands, --version, and no traceback ever."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
import types
from importlib.metadata import packages_distributions, requires, version
from pathlib import Path
from typing import Any

import pytest

import checkpoint_gate
from checkpoint_runtime import cli
from checkpoint_runtime.errors import ConfigError, ConflictError, WriteUncertainError
from checkpoint_testenv.support.bytecode import child_env

HEAVY = (
    "kubernetes",
    "opapywasm",
    "wasmtime",
    "helm_python",
    "kubernetes_validate",
    "fsspec",
    "jsonschema",
)


def fake_command(monkeypatch: pytest.MonkeyPatch, action: Any, extra: str | None = None) -> None:
    """Register `boom`, whose module runs `action` (raising or returning an exit code)."""

    def register(subparsers: Any) -> None:
        parser = subparsers.add_parser("boom")
        parser.set_defaults(func=lambda args: action())

    module = types.ModuleType("fake_boom_command")
    module.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_boom_command", module)
    monkeypatch.setitem(cli.COMMANDS, "boom", cli.Command("fake_boom_command", "boom", extra))


def test_top_level_help_imports_no_subcommand_and_no_heavy_dependency() -> None:
    code = (
        "import sys\n"
        "from checkpoint_runtime import cli\n"
        "try:\n"
        "    cli.main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"heavy = {HEAVY!r}\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in heavy)\n"
        "loaded += sorted(m for m in sys.modules if m.startswith('checkpoint_gate'))\n"
        "print('LOADED', loaded)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), check=True
    )
    assert "usage: checkpoint-runtime" in result.stdout
    assert "LOADED []" in result.stdout


def test_every_command_is_listed_in_the_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name, command in cli.COMMANDS.items():
        assert f"{name}" in out
        assert command.help.split()[0] in out
    assert cli.TRACEBACK_ENV in out


def test_version_prints_the_installed_distribution_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"checkpoint-runtime {version('checkpoint-runtime')}\n"


def test_a_named_error_prints_one_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail() -> int:
        raise ConfigError("store.path", "is not a folder")

    fake_command(monkeypatch, fail)
    assert cli.main(["boom"]) == 2
    captured = capsys.readouterr()
    assert captured.err == "error: ConfigError: store.path: is not a folder\n"
    assert captured.out == ""


def test_an_unexpected_error_prints_one_named_line_and_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail() -> int:
        raise ZeroDivisionError("division\n  by zero")

    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    fake_command(monkeypatch, fail)
    assert cli.main(["boom"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: unexpected ZeroDivisionError: division by zero")
    assert cli.TRACEBACK_ENV in err
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("inner", "code", "prefix"),
    [
        pytest.param(ConflictError("b", "resourceVersion changed"), 2, "error: ", id="named"),
        pytest.param(ZeroDivisionError("by zero"), 3, "error: unexpected ", id="unexpected"),
    ],
)
def test_a_group_of_errors_prints_every_grouped_error_on_its_own_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    inner: Exception,
    code: int,
    prefix: str,
) -> None:
    def fail() -> int:
        nested = ExceptionGroup("inner group", [inner])
        raise ExceptionGroup("2 of 2 shard(s) failed", [WriteUncertainError("a", "lost"), nested])

    monkeypatch.delenv(cli.TRACEBACK_ENV, raising=False)
    fake_command(monkeypatch, fail)
    assert cli.main(["boom"]) == code
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"{prefix}ExceptionGroup: 2 of 2 shard(s) failed")
    assert lines[1:] == [
        "  WriteUncertainError: shard 'a': write outcome unknown: lost",
        "  ExceptionGroup: inner group",
        f"    {type(inner).__name__}: {inner}",
    ]


def test_the_traceback_env_var_adds_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def fail() -> int:
        raise ZeroDivisionError("division by zero")

    monkeypatch.setenv(cli.TRACEBACK_ENV, "1")
    fake_command(monkeypatch, fail)
    assert cli.main(["boom"]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.rstrip().endswith("error: unexpected ZeroDivisionError: division by zero")


def module_importing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, missing: str, extra_modules: set[str]
) -> None:
    """Command `boom` (extra `gate`) whose module imports the uninstalled module `missing`."""
    (tmp_path / "fake_gate_command.py").write_text(f"import {missing}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.EXTRA_MODULES, "gate", frozenset(extra_modules))
    monkeypatch.setitem(cli.COMMANDS, "boom", cli.Command("fake_gate_command", "boom", "gate"))


def test_a_missing_extra_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module_importing(monkeypatch, tmp_path, "cr_absent_gate_dep", {"cr_absent_gate_dep"})
    assert cli.main(["boom", "--help"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: MissingExtraError: `checkpoint-runtime boom` (module 'cr_absent_gate_dep') needs"
        " the 'gate' extra, which is not installed here: pip install 'checkpoint-runtime[gate]'\n"
    )


def test_a_missing_module_outside_the_extra_is_not_blamed_on_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module_importing(monkeypatch, tmp_path, "cr_absent_other", {"cr_absent_gate_dep"})
    assert cli.main(["boom"]) == 3
    assert capsys.readouterr().err.startswith("error: unexpected ModuleNotFoundError")


def test_the_exit_code_of_the_command_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_command(monkeypatch, lambda: 1)
    assert cli.main(["boom"]) == 1


def test_usage_errors_are_named_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: UsageError: checkpoint-runtime: argument COMMAND: ")
    assert "invalid choice" in err
    assert "usage:" not in err


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_each_command_module_registers_the_command_it_is_listed_for(name: str) -> None:
    parser = cli.command_parser(name)
    subparsers = next(
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    )
    assert name in subparsers.choices


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_module_the_gate_imports_from_its_extra_is_known_to_belong_to_it() -> None:
    """A dependency added to the gate extra but not to EXTRA_MODULES would surface, when the
    extra is missing, as an 'unexpected ModuleNotFoundError' instead of the install hint."""
    extra_dists = {
        canonical(re.split(r"[^A-Za-z0-9._-]", requirement, maxsplit=1)[0])
        for requirement in requires(cli.DISTRIBUTION) or []
        if re.search(r"extra == ['\"]gate['\"]", requirement)
    }
    assert extra_dists
    gate_dir = Path(checkpoint_gate.__file__).parent
    imported: set[str] = set()
    for source in gate_dir.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.partition(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.partition(".")[0])
    owners = packages_distributions()
    from_extra = {
        module
        for module in imported
        if {canonical(dist) for dist in owners.get(module, [])} & extra_dists
    }
    assert from_extra
    assert from_extra <= cli.EXTRA_MODULES["gate"]
