"""Bounds on untrusted input, checked before anything expensive runs.

A values file, a `--set`, a runtime config or a kubeconfig of a few hundred bytes must never
take gigabytes: the file size is checked before it is read, a YAML document is first streamed
as parser events (no tree is built) to bound its aliases, their expansion, its nesting depth
and its string lengths, and a parsed document is walked once, iteratively, for the same bounds.
Every refusal is an InputLimitError that quotes at most a short prefix of the value.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from checkpoint_runtime.constants import (
    MAX_EXPANDED_NODES,
    MAX_INPUT_FILE_BYTES,
    MAX_ITEMS,
    MAX_KEY_CHARS,
    MAX_NESTING_DEPTH,
    MAX_STRING_CHARS,
    MAX_YAML_ALIASES,
)
from checkpoint_runtime.errors import InputLimitError, quote


def read_text(path: Path | str, source: str, limit: int = MAX_INPUT_FILE_BYTES) -> str:
    """A UTF-8 file's text, refusing a file over `limit` bytes before reading it.

    OSError and UnicodeDecodeError are left to the caller, which names its own error."""
    with open(path, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputLimitError(source, f"the file is larger than {limit} bytes")
    return data.decode("utf-8")


def check_size(text: str, source: str, limit: int = MAX_INPUT_FILE_BYTES) -> None:
    if len(text) > limit:
        raise InputLimitError(source, f"{len(text)} characters, over the limit of {limit}")


def check_yaml(text: str, source: str) -> None:
    """Stream `text`'s YAML events and refuse, before any tree is built: more than
    MAX_YAML_ALIASES aliases, more than MAX_EXPANDED_NODES nodes once aliases are expanded,
    nesting deeper than MAX_NESTING_DEPTH, a scalar longer than MAX_STRING_CHARS.

    A syntax error (libyaml's own nesting limit included) is raised as yaml.YAMLError, for
    the caller to name as it names any YAML error."""
    import yaml

    check_size(text, source)
    stack: list[tuple[int, str | None]] = []  # per open collection: (count at start, anchor)
    anchors: dict[str, int] = {}  # anchor -> values it expands to
    aliases = 0
    expanded = 0
    for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_YAML_ALIASES:
                raise _refuse(source, event, f"more than {MAX_YAML_ALIASES} aliases")
            expanded += anchors.get(str(event.anchor), 1)
        elif isinstance(event, yaml.ScalarEvent):
            if len(event.value) > MAX_STRING_CHARS:
                raise _refuse(
                    source,
                    event,
                    f"a string of {len(event.value)} characters, over the limit of "
                    f"{MAX_STRING_CHARS}: {quote(event.value)}",
                )
            expanded += 1
            if event.anchor:
                anchors[str(event.anchor)] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_NESTING_DEPTH:
                raise _refuse(source, event, f"nested deeper than {MAX_NESTING_DEPTH} levels")
            stack.append((expanded, event.anchor))
            expanded += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            started, anchor = stack.pop()
            if anchor:
                anchors[str(anchor)] = expanded - started
        if expanded > MAX_EXPANDED_NODES:
            raise _refuse(
                source,
                event,
                f"more than {MAX_EXPANDED_NODES} values once its aliases are expanded",
            )


def _refuse(source: str, event: Any, reason: str) -> InputLimitError:
    mark = getattr(event, "start_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return InputLimitError(source, f"YAML refused{where}: {reason}")


def check_document(document: Any, source: str) -> None:
    """Walk a parsed document once (no recursion) and refuse what is out of bounds, naming
    the key path: nesting depth, items of one list or map, key and string length."""
    for path, depth, value in _walk(document):
        if depth > MAX_NESTING_DEPTH:
            raise InputLimitError(_where(source, path), f"nested deeper than {MAX_NESTING_DEPTH}")
        if isinstance(value, str) and len(value) > MAX_STRING_CHARS:
            raise InputLimitError(
                _where(source, path),
                f"a string of {len(value)} characters, over the limit of {MAX_STRING_CHARS}: "
                f"{quote(value)}",
            )
        if isinstance(value, dict | list) and len(value) > MAX_ITEMS:
            raise InputLimitError(
                _where(source, path), f"{len(value)} entries, over the limit of {MAX_ITEMS}"
            )
        if isinstance(value, dict):
            for key in value:
                if isinstance(key, str) and len(key) > MAX_KEY_CHARS:
                    raise InputLimitError(
                        _where(source, path),
                        f"a key of {len(key)} characters, over the limit of {MAX_KEY_CHARS}: "
                        f"{quote(key)}",
                    )


def _where(source: str, path: str) -> str:
    return f"{source}: {path}" if source and path else source or path


def _walk(document: Any) -> Iterator[tuple[str, int, Any]]:
    pending: list[tuple[str, int, Any]] = [("", 0, document)]
    while pending:
        path, depth, value = pending.pop()
        yield path, depth, value
        if depth > MAX_NESTING_DEPTH:
            return
        if isinstance(value, dict):
            if len(value) > MAX_ITEMS:
                return
            pending.extend(
                (f"{path}.{key}" if path else str(key), depth + 1, item)
                for key, item in value.items()
            )
        elif isinstance(value, list):
            if len(value) > MAX_ITEMS:
                return
            pending.extend((f"{path}[{i}]", depth + 1, item) for i, item in enumerate(value))
