"""User values composed as `helm -f a.yaml -f b.yaml --set k=v` composes them.

Every input is untrusted (a CI gate runs on pull requests): a values file is refused over
MAX_INPUT_FILE_BYTES before it is read, its YAML is streamed first to bound aliases, their
expansion, nesting and string length (limits.check_yaml), and it is then typed as Helm's Go YAML
library types it. `--set` expressions are parsed by Helm's own strvals code (helm_python), all
of them into one map as Helm does (so `a[0].x=1 --set a[0].y=2` keeps both); see setvalues.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from checkpoint_gate.goyaml import GoYamlLoader
from checkpoint_gate.manifests import Json
from checkpoint_gate.setvalues import SetExpression, apply_sets
from checkpoint_runtime import limits
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


def load_values(files: Iterable[Path] = (), sets: Iterable[str | SetExpression] = ()) -> Json:
    """User values as `helm -f a.yaml -f b.yaml --set k=v` would compose them."""
    values: Json = {}
    for path in files:
        values = deep_merge(values, _load_values_file(path))
    expressions = [s if isinstance(s, SetExpression) else SetExpression("set", s) for s in sets]
    values = apply_sets(values, expressions)
    limits.check_document(values, "values")
    return values


def _load_values_file(path: Path) -> Json:
    """One values file, or ValuesFileError saying where it went wrong (never a YAML traceback)."""
    try:
        text = limits.read_text(path, str(path))
    except (OSError, UnicodeDecodeError) as error:
        raise ValuesFileError(str(path), f"cannot read it: {error}") from None
    try:
        limits.check_yaml(text, str(path))
        loaded = yaml.load(text, Loader=GoYamlLoader)
    except yaml.YAMLError as error:
        where = ""
        mark = getattr(error, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ValuesFileError(str(path), f"not valid YAML{where}: {problem}") from None
    except RecursionError:
        raise ValuesFileError(str(path), "not valid YAML: nested too deeply") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValuesFileError(str(path), "a values file must hold a mapping")
    return loaded
