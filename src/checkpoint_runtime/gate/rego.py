"""A thin, safe layer over regopy (rego-cpp): compile modules once, query entrypoints many times.

Why a layer: `Interpreter.query` recompiles every module on each call (milliseconds per query),
while a built bundle answers in a fraction of that; and regopy crashes the process if an output
that holds an error is printed, so errors are read from the interpreter instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regopy import Interpreter
from regopy.rego_shared import rego_get_error


class RegoError(RuntimeError):
    """A policy failed to compile or to evaluate."""


@dataclass(frozen=True)
class Module:
    """One Rego source file."""

    name: str
    source: str


def load_modules(policy_dir: Path, *, tests: bool) -> list[Module]:
    """The `.rego` files of a conftest policy folder, sorted; `*_test.rego` only if `tests`."""
    paths = sorted(policy_dir.glob("*.rego"))
    return [
        Module(path.name, path.read_text(encoding="utf-8"))
        for path in paths
        if tests or not path.name.endswith("_test.rego")
    ]


class CompiledPolicy:
    """Modules compiled once into a bundle with a fixed set of entrypoints (`package/rule`)."""

    def __init__(self, modules: Iterable[Module], entrypoints: Sequence[str]) -> None:
        self.entrypoints = tuple(entrypoints)
        self._builder = Interpreter()
        for module in modules:
            try:
                self._builder.add_module(module.name, module.source)
            except Exception as error:
                raise RegoError(f"{module.name}: {error}") from error
        try:
            self._bundle = self._builder.build(None, list(self.entrypoints))
        except Exception as error:
            raise RegoError(f"compiling policies: {error}") from error
        if not self._bundle.ok():
            raise RegoError(f"compiling policies: {rego_get_error(self._builder._impl)}")
        self._runner = Interpreter()

    def query(self, entrypoint: str, input_document: Any = None) -> Any:
        """Evaluate one entrypoint on `input_document`; None when the rule is undefined."""
        if input_document is not None:
            self._runner.set_input_term(json.dumps(input_document))
        try:
            output = self._runner.query_bundle_entrypoint(self._bundle, entrypoint)
        except Exception as error:
            raise RegoError(f"{entrypoint}: {error}") from error
        if not output.ok():
            raise RegoError(f"{entrypoint}: {rego_get_error(self._runner._impl)}")
        if len(output) == 0 or not output[0].expressions:
            return None
        return output[0].expressions[0]
