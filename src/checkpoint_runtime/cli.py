"""`checkpoint-runtime` command line: one subcommand per module, registered in COMMANDS."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> module exposing `register(subparsers) -> None`; the module sets `func` on its parser,
# a callable taking the parsed namespace and returning the exit code.
COMMANDS: dict[str, str] = {
    "gate": "checkpoint_runtime.gate.cli",
    "run": "checkpoint_runtime.runtime.process",
    "inspect": "checkpoint_runtime.storecli",
    "project": "checkpoint_runtime.storecli",
    "migrate": "checkpoint_runtime.storecli",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="checkpoint-runtime", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module_name in dict.fromkeys(COMMANDS.values()):
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
