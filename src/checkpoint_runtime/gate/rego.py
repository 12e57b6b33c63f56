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

from regopy import Input, Interpreter
from regopy.rego_shared import (
    rego_bundle_query_entrypoint,
    rego_free_output,
    rego_get_error,
    rego_output_ok,
    rego_output_string,
)


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
        """Evaluate one entrypoint on `input_document`; None when the rule is undefined.

        rego-cpp 1.5.2 has two input paths and each has a bug: JSON text is refused when a
        string holds an escaped quote after a backslash ("Invalid escape sequence"), and values
        set from Python come back unescaped when a result string holds a quote. The Python path
        is tried first (it is also faster), the JSON path second; if both fail the query fails
        (closed), it never passes.
        """
        if input_document is None:
            return self._evaluate(entrypoint)
        self._runner.set_input(Input(input_document))
        try:
            return self._evaluate(entrypoint)
        except RegoError as first:
            try:
                self._runner.set_input_term(json.dumps(input_document))
            except Exception as error:
                raise RegoError(f"{first}; as JSON input: {error}") from error
            try:
                return self._evaluate(entrypoint)
            except RegoError as second:
                raise RegoError(f"{first}; as JSON input: {second}") from second

    def _evaluate(self, entrypoint: str) -> Any:
        # The C API directly: regopy's Output parses the JSON itself and hides the raw text.
        try:
            raw_output = rego_bundle_query_entrypoint(
                self._runner._impl, self._bundle._impl, entrypoint
            )
        except Exception as error:
            raise RegoError(f"{entrypoint}: {error}") from error
        try:
            if not rego_output_ok(raw_output):
                raise RegoError(f"{entrypoint}: {rego_get_error(self._runner._impl)}")
            text = rego_output_string(raw_output)
        finally:
            rego_free_output(raw_output)
        if text == "undefined":
            return None
        try:
            decoded = json.loads(text)
        except ValueError as error:
            raise RegoError(f"{entrypoint}: unparseable output {text[:300]!r}") from error
        results = decoded if isinstance(decoded, list) else [decoded]
        expressions = results[0].get("expressions", []) if results else []
        return expressions[0] if expressions else None
