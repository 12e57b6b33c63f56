"""Validate what goes in (values, against the chart's values.schema.json with jsonschema, so a
failure names its key path independently of Helm's message format) and what comes out (every
manifest, strictly, against the schemas of one pinned Kubernetes version)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs

from checkpoint_gate.manifests import Json, Manifest, RenderError
from checkpoint_runtime import schema_errors

# The Kubernetes schemas manifests are checked against (the test environment's minor version).
KUBERNETES_VERSION = "1.36"


@dataclass(frozen=True)
class SchemaViolation:
    """One values-schema failure, located by its key path (e.g. `checkpoint.store.backend`)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.message}"


class ValuesSchema:
    """The chart's values.schema.json, checked with jsonschema (format-agnostic of Helm)."""

    def __init__(self, schema_path: Path) -> None:
        self.schema: Json = json.loads(schema_path.read_text(encoding="utf-8"))
        # The schema itself is checked against its draft's meta-schema by jsonschema-rs (a
        # ValueError naming the fault): jsonschema's check_schema takes a second per process.
        jsonschema_rs.meta.validate(self.schema)
        # The same schema compiled by jsonschema-rs (same draft, same error paths): a valid
        # document, the common case, is accepted at a hundredth of the cost; only an invalid one
        # is walked again by jsonschema for its located errors.
        self._fast = jsonschema_rs.validator_for(self.schema)

    @cached_property
    def _validator(self) -> Any:
        """jsonschema's validator, built when a document first fails (for its located errors)."""
        return jsonschema.validators.validator_for(self.schema)(self.schema)

    def violations(self, values: Json) -> list[SchemaViolation]:
        """One violation per failing field (not one per `oneOf` branch that did not match)."""
        if self._fast.is_valid(values):
            return []
        found = schema_errors.violations(self._validator.iter_errors(values))
        return [SchemaViolation(path, message) for path, message in found]


# Prometheus-operator kinds have no schema in kubernetes-validate; they get this structural check
# instead (required top-level fields, a closed top level, the fields the chart relies on).
def _crd_schema(spec: Json) -> Json:
    """A closed top level (apiVersion, kind, metadata, spec) around one kind's `spec` schema."""
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"$ref": "#/$defs/metadata"},
            "spec": spec,
        },
    }


_CRD_SCHEMAS: dict[tuple[str, str], Json] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _crd_schema(
        {
            "type": "object",
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {"type": "object"},
                "endpoints": {"type": "array", "minItems": 1, "items": {"type": "object"}},
                "namespaceSelector": {"type": "object"},
            },
        }
    ),
    ("monitoring.coreos.com/v1", "PrometheusRule"): _crd_schema(
        {
            "type": "object",
            "required": ["groups"],
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["expr"],
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"type": ["string", "integer"]},
                                        "for": {"type": "string"},
                                        "labels": {"type": "object"},
                                        "annotations": {"type": "object"},
                                    },
                                },
                            },
                        },
                    },
                }
            },
        }
    ),
}

_CRD_METADATA: Json = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


class KubernetesValidator:
    """Strict validation against kubernetes-validate's schemas of one pinned Kubernetes version.

    The same check as `kubeconform -strict` with local schemas: both use the schemas
    openapi2jsonschema generates from Kubernetes' OpenAPI document, in their strict variant
    (`additionalProperties: false` on every object). kubernetes_validate.validate() re-reads the
    large definitions file on every call (about 20 ms a document); this compiles one validator
    per (apiVersion, kind) with jsonschema-rs instead, from the same packaged schema files.
    """

    def __init__(self, version: str = KUBERNETES_VERSION, *, strict: bool = True) -> None:
        self.version = version
        self.strict = strict

    def violations(self, manifest: Manifest) -> list[str]:
        document = manifest.document
        key = (str(document.get("apiVersion", "")), manifest.kind)
        if key in _CRD_SCHEMAS:
            validator: Any = _crd_validator(key)
        else:
            validator = _kubernetes_validator(self.version, self.strict, *key)
            if validator is None:
                return [f"no Kubernetes {self.version} schema for {key[0]} {key[1]}"]
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.instance_path))
        return [
            f"{schema_errors.dotted_path(error.instance_path) or '<root>'}: {error.message}"
            for error in errors
        ]


@cache
def _crd_validator(key: tuple[str, str]) -> Any:
    schema = {**_CRD_SCHEMAS[key], "$defs": {"metadata": _CRD_METADATA}}
    return jsonschema_rs.Draft202012Validator(schema)


@cache
def _kubernetes_validator(version: str, strict: bool, api_version: str, kind: str) -> Any:
    from kubernetes_validate import utils

    folder = f"v{_schema_version(version)}-local{'-strict' if strict else ''}"
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = utils.schema_contents(
            f"kubernetes-json-schema/{folder}/{kind.lower()}-{group_version}.json", version
        )
    except FileNotFoundError:
        return None
    return jsonschema_rs.Draft202012Validator(schema, registry=_definitions(version, folder))


@cache
def _definitions(version: str, folder: str) -> Any:
    """The shared definitions every kind's schema refers to, read and indexed once (about a
    tenth of a second: once per process, not once per kind)."""
    from kubernetes_validate import utils

    definitions = utils.schema_contents(
        f"kubernetes-json-schema/{folder}/_definitions.json", version
    )
    return jsonschema_rs.Registry([(definitions["$id"], definitions)])


def _schema_version(version: str) -> str:
    """The newest packaged schema folder not newer than `version` (e.g. 1.36 -> 1.36.0)."""
    from kubernetes_validate import utils

    wanted = tuple(int(part) for part in version.split(".")[:2])
    candidates = [v for v in utils.all_versions() if tuple(map(int, v.split(".")[:2])) <= wanted]
    if not candidates:
        raise RenderError(f"kubernetes-validate has no schemas for Kubernetes {version}")
    return str(candidates[-1])
