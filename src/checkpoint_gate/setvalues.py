"""`--set`, `--set-string`, `--set-json` and `--set-file` composed onto the values files as Helm
composes them (helm.sh/helm/v3/pkg/cli/values: files, then --set-json, --set, --set-string,
--set-file, each expression parsed *into* the values so far).

Helm's own strvals code (helm_python's bindings) parses each expression, so syntax, escaping and
type inference are Helm's (`1e3` and `5000` are numbers, `true` a bool, `null` a null). The
bindings parse into an empty map only, so the composition is done here: the key path of every
assignment is read with strvals' grammar (`.` a map key, `[n]` a list index, `\\` an escape), and
its value, taken from Helm's parse, is set at that path into the values so far: maps are merged
into, a list index replaces one element (merging a map element) and leaves the others, a list
literal `{a,b}` or a JSON value replaces the whole value. An expression this reading cannot
follow exactly is refused with UnsupportedSetError, never composed differently from Helm.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from checkpoint_runtime.constants import MAX_STRING_CHARS
from checkpoint_runtime.errors import ValuesFileError
from checkpoint_runtime.schema_errors import dotted_path

Path = tuple[str | int, ...]
Json = dict[str, Any]

# Helm's order of application, whatever the order on the command line.
KINDS = ("set-json", "set", "set-string", "set-file")
MAX_INDEX = 65_536  # strvals' MaxIndex


class UnsupportedSetError(ValuesFileError):
    """A --set expression this gate cannot compose exactly as Helm would."""


@dataclass(frozen=True)
class SetExpression:
    kind: str  # one of KINDS
    text: str

    @property
    def source(self) -> str:
        """How reports and errors name the expression: its kind and the keys it sets, never a
        value (a value can be a credential, and reports land in CI logs and code-scanning
        uploads): `--set checkpoint.collectors[0].url=...`."""
        paths = assignment_paths(self.text, json_values=self.kind == "set-json")
        if not paths:
            return f"--{self.kind} ({len(self.text)} characters)"
        return f"--{self.kind} " + ",".join(f"{dotted_path(path)}=..." for path in paths)


def _parser(kind: str) -> Callable[[str], Json]:
    import helm_python

    parsers: dict[str, Callable[[str], Json]] = {
        "set": helm_python.parse_set_string,
        "set-string": helm_python.parse_set_string_values,
        "set-json": helm_python.parse_set_json,
        "set-file": helm_python.parse_set_file,
    }
    return parsers[kind]


def apply_sets(values: Json, expressions: Sequence[SetExpression]) -> Json:
    """`values` with every expression applied in Helm's order."""
    result = copy.deepcopy(values)
    for kind in KINDS:
        for expression in (e for e in expressions if e.kind == kind):
            result = _apply(result, expression)
    return result


def _apply(values: Json, expression: SetExpression) -> Json:
    if len(expression.text) > MAX_STRING_CHARS:
        raise ValuesFileError(expression.source, f"longer than {MAX_STRING_CHARS} characters")
    try:
        parsed = _parser(expression.kind)(expression.text)
    except Exception as error:  # helm_python raises one class per failure kind
        reason = " ".join(str(error).split())[:300]
        raise ValuesFileError(expression.source, reason) from None
    paths = assignment_paths(expression.text, json_values=expression.kind == "set-json")
    if paths is None or _rebuild(parsed, paths) != parsed:
        raise UnsupportedSetError(
            expression.source,
            "this expression cannot be composed exactly as helm would (give the value in a "
            "values file with -f instead)",
        )
    for path in paths:
        found, value = _lookup(parsed, path)
        if found:
            _set(values, path, copy.deepcopy(value))
    return values


def _rebuild(parsed: Json, paths: list[Path]) -> Json:
    """Helm's parse, rebuilt from the paths read here: equal when the reading is exact."""
    rebuilt: Json = {}
    for path in paths:
        found, value = _lookup(parsed, path)
        if found:
            _set(rebuilt, path, copy.deepcopy(value))
    return rebuilt


def _lookup(document: Any, path: Path) -> tuple[bool, Any]:
    node = document
    for step in path:
        if isinstance(step, int):
            if not isinstance(node, list) or step >= len(node):
                return False, None
        elif not isinstance(node, dict) or step not in node:
            return False, None
        node = node[step]
    return True, node


def _set(node: Any, path: Path, value: Any) -> None:
    """strvals' set: create or merge into maps and lists along the path."""
    for index, step in enumerate(path):
        last = index == len(path) - 1
        following = None if last else path[index + 1]
        if last:
            if isinstance(step, int):
                node.extend([None] * (step + 1 - len(node)))
            node[step] = value
            return
        empty: Any = [] if isinstance(following, int) else {}
        if isinstance(step, int):
            node.extend([None] * (step + 1 - len(node)))
            current = node[step]
        else:
            current = node.get(step)
            if step in node and isinstance(empty, dict) and not isinstance(current, dict):
                # strvals asserts that an existing value under a map key is a map: helm fails
                raise ValuesFileError(
                    ".".join(str(part) for part in path[: index + 1]),
                    f"helm refuses to set a key under it: it holds {_kind_of(current)}, not a map",
                )
        if not isinstance(current, type(empty)):
            current = empty
            node[step] = current
        node = current


def assignment_paths(text: str, *, json_values: bool = False) -> list[Path] | None:
    """The key path of every assignment of a strvals expression, in order; None when the
    expression is outside the grammar read here (Helm has parsed it already, so an error is
    not expected)."""
    paths: list[Path] = []
    position = 0
    size = len(text)
    while position < size:
        path: list[str | int] = []
        key: list[str] = []
        after_index = False
        while True:
            if position >= size:
                return None  # a key without a value
            char = text[position]
            if char == "\\":
                if position + 1 >= size:
                    return None
                key.append(text[position + 1])
                position += 2
                after_index = False
                continue
            if char not in ".=[":
                if char == "," or after_index:
                    return None  # a key without a value, or `a[0]x`
                key.append(char)
                position += 1
                continue
            if key:
                path.append("".join(key))
                key = []
            elif not after_index:
                return None  # an empty key
            position += 1
            after_index = False
            if char == "=":
                break
            if char == "[":
                close = text.find("]", position)
                if close < 0 or not text[position:close].isdigit():
                    return None
                number = int(text[position:close])
                if number > MAX_INDEX:
                    return None
                path.append(number)
                position = close + 1
                after_index = True
        paths.append(tuple(path))
        after = _skip_value(text, position, json_values)
        if after is None:
            return None
        position = after
    return paths


def _skip_value(text: str, position: int, json_values: bool) -> int | None:
    """The position after one value and its separating comma."""
    if json_values:
        try:
            _, end = json.JSONDecoder().raw_decode(text, position)
        except ValueError:
            return None
        if end < len(text) and text[end] != ",":
            return None
        return end + 1
    if position < len(text) and text[position] == "{":
        close = text.find("}", position)
        if close < 0:
            return None
        position = close + 1
        if position < len(text) and text[position] != ",":
            return None
        return position + 1
    while position < len(text):
        char = text[position]
        if char == "\\":
            position += 2
            continue
        if char == ",":
            return position + 1
        position += 1
    return position


def _kind_of(value: Any) -> str:
    """What a value is, in YAML's words, without the value itself (it may be a credential)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else "a string"
