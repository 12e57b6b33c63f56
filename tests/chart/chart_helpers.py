"""Helpers of the chart tests: paths, Helm's values merge, and views of rendered manifests."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_python import Chart
from helm_python.errors import HelmValuesError
from jsonschema import Draft202012Validator, ValidationError

from checkpoint_gate.goyaml import GoYamlLoader

ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "charts" / "checkpoint-runtime"
CI_VALUES = sorted((ROOT / "ci").glob("*-values.yaml"))
RELEASE = "cr"
NAMESPACE = "release-ns"

Manifest = dict[str, Any]
Render = Callable[..., list[Manifest]]


def load_yaml(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    return loaded or {}


def coalesce(defaults: Any, overrides: Any) -> Any:
    """Helm's merge of user values over defaults: maps merge, null deletes, the rest replaces."""
    if not (isinstance(defaults, dict) and isinstance(overrides, dict)):
        return copy.deepcopy(overrides)
    merged = copy.deepcopy(defaults)
    for key, value in overrides.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = coalesce(merged.get(key), value)
    return merged


def manifests_of(rendered: dict[str, str]) -> list[Manifest]:
    """The Kubernetes objects of a render (NOTES.txt and empty documents left out)."""
    objects: list[Manifest] = []
    for template, text in sorted(rendered.items()):
        if not template.endswith((".yaml", ".yml")):
            continue
        # Read as Go YAML reads it (helm, kubectl, the API server), not as YAML 1.1.
        objects.extend(doc for doc in yaml.load_all(text, Loader=GoYamlLoader) if doc)
    return objects


def by_kind(objects: list[Manifest], kind: str) -> list[Manifest]:
    return [obj for obj in objects if obj["kind"] == kind]


def one(objects: list[Manifest], kind: str) -> Manifest:
    matching = by_kind(objects, kind)
    assert len(matching) == 1, f"expected one {kind}, got {len(matching)}"
    return matching[0]


def runtime_config(objects: list[Manifest]) -> dict[str, Any]:
    """The runtime's config.json (the one ConfigMap that carries it; the optional dashboard
    ConfigMap does not)."""
    (config_map,) = [obj for obj in by_kind(objects, "ConfigMap") if "config.json" in obj["data"]]
    config: dict[str, Any] = json.loads(config_map["data"]["config.json"])
    return config


def error_paths(schema: dict[str, Any], document: dict[str, Any]) -> set[str]:
    """JSON-pointer paths of every error, nested oneOf/anyOf causes included."""
    paths: set[str] = set()

    def visit(error: ValidationError) -> None:
        paths.add("".join(f"/{part}" for part in error.absolute_path))
        for cause in error.context or ():
            visit(cause)

    for error in Draft202012Validator(schema).iter_errors(document):
        visit(error)
    return paths


def schema_rejection(
    chart: Chart,
    values_schema: dict[str, Any],
    default_values: dict[str, Any],
    overrides: dict[str, Any],
    path: str,
) -> str:
    """Assert that jsonschema names `path` among the errors of the coalesced values and that
    Helm's own schema check refuses `overrides`; Helm's message, for the caller to check."""
    assert path in error_paths(values_schema, coalesce(default_values, overrides))
    with pytest.raises(HelmValuesError) as rejected:
        chart.validate_schema(overrides)
    return str(rejected.value)
