"""checkpoint-runtime: the collector runtime, the tools for its checkpoint store, and the render
gate for the Helm chart. `checkpoint-runtime COMMAND --help` describes each command."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NoReturn

from checkpoint_runtime.errors import (
    CheckpointError,
    ExitCode,
    MissingExtraError,
    UsageError,
    describe,
    leaves,
)

PROG = "checkpoint-runtime"
DISTRIBUTION = "checkpoint-runtime"
TRACEBACK_ENV = "CHECKPOINT_RUNTIME_TRACEBACK"


@dataclass(frozen=True)
class Command:
    """A subcommand: the module whose `register(subparsers)` adds its parser (imported only when
    the command runs), its one-line help, and the extra its imports need, if any."""

    module: str
    help: str
    extra: str | None = None


# The extra that provides each third-party module a command may import; a missing one is
# reported as `pip install 'checkpoint-runtime[extra]'` instead of an import traceback.
EXTRA_MODULES: dict[str, frozenset[str]] = {
    "gate": frozenset(
        {"opapywasm", "wasmtime", "jsonschema_rs", "helm_python", "kubernetes_validate", "yaml"}
    ),
}

COMMANDS: dict[str, Command] = {
    "run": Command(
        "checkpoint_runtime.runtime.main",
        "run the collectors with checkpoints in the configured store",
    ),
    "inspect": Command(
        "checkpoint_runtime.ops.commands", "per-shard sizes, ratio and headroom (never writes)"
    ),
    "project": Command(
        "checkpoint_runtime.ops.commands",
        "project every shard's size from a config; non-zero if one cannot fit",
    ),
    "migrate": Command(
        "checkpoint_runtime.ops.commands",
        "show or resolve the migration from the legacy single-ConfigMap checkpoint",
    ),
    "set-aside": Command(
        "checkpoint_runtime.ops.commands",
        "move a shard object the store cannot read out of its way, keeping its bytes",
    ),
    "downgrade": Command(
        "checkpoint_runtime.ops.downgrade",
        "rewrite gzip-shards-v3 shards as v2 before rolling back; names those that cannot",
    ),
    "gate": Command(
        "checkpoint_gate.cli",
        "render the chart with your values and run the policy gate",
        extra="gate",
    ),
}

EPILOG = f"""\
exit status (every command):
  0  success
  1  a finding: the gate denied the values, `project` found a shard that cannot fit
  2  a named error, printed as `error: <ErrorName>: <message>` (`run` logs it as a JSON
     line whose "error" field is the same name): invalid input, arguments or
     configuration, an unreadable store, or a `run` lifecycle that ended on an error
  3  a bug: an unexpected internal error, printed on one line; set {TRACEBACK_ENV}=1 to
     also print its traceback
"""


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are named errors (exit 2), not a bare usage dump."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message)


class VersionAction(argparse.Action):
    """`--version`, reading the installed distribution's metadata only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version(DISTRIBUTION)
        except PackageNotFoundError:
            text = "unknown (not installed)"
        print(f"{PROG} {text}")
        parser.exit()


def top_parser() -> argparse.ArgumentParser:
    """Names and one-line help of every command, importing none of them."""
    parser = Parser(
        prog=PROG,
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        subparsers.add_parser(name, help=command.help, add_help=False)
    return parser


def load_command(name: str) -> ModuleType:
    """Import the module of command `name`; a missing extra becomes MissingExtraError."""
    command = COMMANDS[name]
    try:
        return importlib.import_module(command.module)
    except ModuleNotFoundError as error:
        missing = (error.name or "").partition(".")[0]
        if command.extra and missing in EXTRA_MODULES[command.extra]:
            raise MissingExtraError(
                "", f"`{PROG} {name}` (module {missing!r})", command.extra
            ) from None
        raise


def command_parser(name: str) -> argparse.ArgumentParser:
    """The full parser of one command (its module registers it)."""
    parser = Parser(prog=PROG, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    load_command(name).register(subparsers)
    return parser


def dispatch(argv: list[str]) -> int:
    top, _ = top_parser().parse_known_args(argv)
    args = command_parser(top.command).parse_args(argv)
    return int(args.func(args))


def main(argv: Sequence[str] | None = None) -> int:
    """The console entry point: never a traceback unless ${TRACEBACK_ENV} asks for one."""
    try:
        return dispatch(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as error:
        return report(error)


def report(error: Exception) -> ExitCode:
    """Print an error that ended a command; its exit code (named: 2, anything else: 3)."""
    if named(error):
        print_error(error)
        return ExitCode.ERROR
    return _unexpected(error)


def named(error: BaseException) -> bool:
    """A CheckpointError, or a group of nothing but them."""
    return all(isinstance(leaf, CheckpointError) for leaf in leaves(error))


def print_error(error: BaseException) -> None:
    """`error: Name: message` on stderr, then every grouped error (a persist of several shards
    collects one per shard) on its own indented line: the shard, the cause, an HTTP status."""
    first, *rest = describe(error)
    print("\n".join([f"error: {first}", *rest]), file=sys.stderr)


def _unexpected(error: Exception) -> ExitCode:
    if os.environ.get(TRACEBACK_ENV):
        traceback.print_exception(error)
    hint = "" if os.environ.get(TRACEBACK_ENV) else f" (set {TRACEBACK_ENV}=1 for details)"
    first, *rest = describe(error)  # one line per error, whatever the exception says
    print("\n".join([f"error: unexpected {first}{hint}", *rest]), file=sys.stderr)
    return ExitCode.BUG


if __name__ == "__main__":
    sys.exit(main())
