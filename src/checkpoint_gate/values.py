"""User values composed as `helm -f a.yaml -f b.yaml --set k=v` composes them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from helm_python import parse_set_string

from checkpoint_gate.manifests import Json
from checkpoint_runtime.errors import ValuesFileError


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> Json:
    """Helm's coalescing of values files: maps merge key by key, anything else is replaced."""
    merged: Json = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(current, value)
        else:
            merged[key] = value
    return merged


def load_values(files: Iterable[Path] = (), sets: Iterable[str] = ()) -> Json:
    """User values as `helm -f a.yaml -f b.yaml --set k=v` would compose them."""
    values: Json = {}
    for path in files:
        values = deep_merge(values, _load_values_file(path))
    for expression in sets:
        try:
            parsed = parse_set_string(expression)
        except ValueError as error:
            raise ValuesFileError(f"--set {expression}", str(error)) from None
        values = deep_merge(values, parsed)
    return values


def _load_values_file(path: Path) -> Json:
    """One values file, or ValuesFileError saying where it went wrong (never a YAML traceback)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValuesFileError(str(path), f"cannot read it: {error}") from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        where = ""
        mark = getattr(error, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ValuesFileError(str(path), f"not valid YAML{where}: {problem}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValuesFileError(str(path), "a values file must hold a mapping")
    return loaded
