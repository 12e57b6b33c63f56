"""Render the chart and validate what goes in (values) and what comes out (manifests).

Two renderers give the same manifests: the in-process Helm SDK (helm-python-sdk, fast, no
process per document) and the `helm template` CLI (what platform teams run). Both enforce the
chart's values.schema.json themselves; `ValuesSchema` checks the same schema with jsonschema so
a failure names the key path independently of Helm's message format.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import yaml
from helm_python import Chart, parse_set_string

from checkpoint_gate.goyaml import GoYamlLoader
from checkpoint_runtime import schema_errors
from checkpoint_runtime.errors import ValuesFileError
from checkpoint_runtime.schema_errors import key_path

Json = dict[str, Any]

HELM_ENV = "CHECKPOINT_HELM"
SCHEMA_FILE = "values.schema.json"

DEFAULT_RELEASE = "cr"
DEFAULT_NAMESPACE = "default"
# The Kubernetes schemas manifests are checked against (the test environment's minor version).
KUBERNETES_VERSION = "1.36"


class RenderError(RuntimeError):
    """The chart did not render (bad values, failing template, or Helm's schema check)."""


@dataclass(frozen=True)
class Manifest:
    """One rendered Kubernetes object and the template it came from."""

    source: str
    document: Json

    @property
    def kind(self) -> str:
        return str(self.document.get("kind", ""))

    @property
    def name(self) -> str:
        return str(self.document.get("metadata", {}).get("name", ""))


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


def documents(source: str, text: str) -> list[Manifest]:
    """The manifests of one rendered file, read as Go YAML reads them."""
    # Typed as Go YAML types it (what the API server and conftest see), parsed by libyaml.
    try:
        documents = list(yaml.load_all(text, Loader=GoYamlLoader))
    except yaml.YAMLError as error:
        raise RenderError(f"{source}: the rendered manifest is not YAML: {error}") from None
    return [
        Manifest(source, document)
        for document in documents
        if isinstance(document, dict) and document
    ]


def sort_manifests(manifests: Iterable[Manifest]) -> list[Manifest]:
    """A stable order independent of the renderer: by kind, then name."""
    return sorted(manifests, key=lambda manifest: (manifest.kind, manifest.name))


class SdkRenderer:
    """The chart loaded once into the in-process Helm SDK.

    Helm validates the values against values.schema.json on every render (most of the time of
    a render). A caller that has validated them already passes `validate_values=False`: the
    chart is then loaded from a copy without the schema, so Helm renders without checking again.
    """

    def __init__(self, chart_dir: Path, *, validate_values: bool = True) -> None:
        self.chart_dir = chart_dir
        self.validate_values = validate_values
        if validate_values:
            self._chart = Chart.load(chart_dir)
        else:
            with tempfile.TemporaryDirectory() as scratch:
                copy = Path(scratch) / chart_dir.name
                shutil.copytree(chart_dir, copy, ignore=shutil.ignore_patterns(SCHEMA_FILE))
                self._chart = Chart.load(copy)  # read into memory: the copy can go

    def merged_values(self, values: Json) -> Json:
        """The chart's defaults coalesced with `values`, as an install would use them."""
        return self._chart.merge_values(values)

    def render_text(
        self, values: Json, release: str = DEFAULT_RELEASE, namespace: str = DEFAULT_NAMESPACE
    ) -> dict[str, str]:
        """The rendered manifest files' text, by template path, as Helm wrote them."""
        try:
            rendered = self._chart.render(values=values, name=release, namespace=namespace)
        except Exception as error:  # helm_python raises one class per failure kind
            raise RenderError(str(error)) from error
        return {
            source: rendered[source]
            for source in sorted(rendered)
            if source.endswith((".yaml", ".yml"))
        }

    def render(
        self, values: Json, release: str = DEFAULT_RELEASE, namespace: str = DEFAULT_NAMESPACE
    ) -> list[Manifest]:
        manifests: list[Manifest] = []
        for source, text in self.render_text(values, release, namespace).items():
            manifests.extend(documents(source, text))
        return manifests


_SOURCE = re.compile(r"^# Source: (.+)$", re.MULTILINE)


def parse_helm_template(output: str) -> list[Manifest]:
    """Split `helm template` output into manifests, using its `# Source:` comments."""
    manifests: list[Manifest] = []
    for chunk in re.split(r"^---\s*$", output, flags=re.MULTILINE):
        match = _SOURCE.search(chunk)
        manifests.extend(documents(match.group(1) if match else "", chunk))
    return manifests


def find_helm() -> Path:
    """The helm binary for the CLI renderer: $CHECKPOINT_HELM, else `helm` on PATH."""
    explicit = os.environ.get(HELM_ENV)
    if explicit:
        return Path(explicit)
    found = shutil.which("helm")
    if found is None:
        raise RenderError(f"no helm binary: pass --helm FILE, set ${HELM_ENV}, or put helm on PATH")
    return Path(found)


class CliRenderer:
    """`helm template` in a subprocess, one process per values document."""

    def __init__(self, chart_dir: Path, helm: Path | None = None) -> None:
        self.chart_dir = chart_dir
        self.helm = helm or find_helm()

    def render(
        self, values: Json, release: str = DEFAULT_RELEASE, namespace: str = DEFAULT_NAMESPACE
    ) -> list[Manifest]:
        return parse_helm_template(self.render_text(values, release, namespace))

    def render_text(
        self, values: Json, release: str = DEFAULT_RELEASE, namespace: str = DEFAULT_NAMESPACE
    ) -> str:
        """`helm template`'s output as it printed it."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as handle:
            json.dump(values, handle)  # JSON is YAML: helm reads it with -f
            handle.flush()
            command = [
                str(self.helm),
                "template",
                release,
                str(self.chart_dir),
                "--namespace",
                namespace,
                "-f",
                handle.name,
            ]
            completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise RenderError(completed.stderr.strip() or f"helm exited {completed.returncode}")
        return completed.stdout

    def lint(self, values: Json, *, strict: bool = True) -> subprocess.CompletedProcess[str]:
        """`helm lint [--strict]` of the chart with `values`; the caller reads returncode/output."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as handle:
            json.dump(values, handle)
            handle.flush()
            command = [str(self.helm), "lint", str(self.chart_dir), "-f", handle.name]
            if strict:
                command.append("--strict")
            return subprocess.run(command, capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class SchemaViolation:
    """One values-schema failure, located by its key path (e.g. `checkpoint.store`)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path or '<root>'}: {self.message}"


class ValuesSchema:
    """The chart's values.schema.json, checked with jsonschema (format-agnostic of Helm)."""

    def __init__(self, schema_path: Path) -> None:
        self.schema: Json = json.loads(schema_path.read_text(encoding="utf-8"))
        validator_class = jsonschema.validators.validator_for(self.schema)
        validator_class.check_schema(self.schema)
        self._validator = validator_class(self.schema)
        # The same schema compiled by jsonschema-rs (same draft, same error paths): a valid
        # document, the common case, is accepted at a hundredth of the cost; only an invalid one
        # is walked again by jsonschema for its located errors.
        self._fast = jsonschema_rs.validator_for(self.schema)

    def violations(self, values: Json) -> list[SchemaViolation]:
        """One violation per failing field (not one per `oneOf` branch that did not match)."""
        if self._fast.is_valid(values):
            return []
        found = schema_errors.violations(self._validator.iter_errors(values))
        return [SchemaViolation(path, message) for path, message in found]


# Prometheus-operator kinds have no schema in kubernetes-validate; they get this structural check
# instead (required top-level fields, a closed top level, the fields the chart relies on).
_CRD_SCHEMAS: dict[tuple[str, str], Json] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"$ref": "#/$defs/metadata"},
            "spec": {
                "type": "object",
                "required": ["selector", "endpoints"],
                "properties": {
                    "selector": {"type": "object"},
                    "endpoints": {"type": "array", "minItems": 1, "items": {"type": "object"}},
                    "namespaceSelector": {"type": "object"},
                },
            },
        },
    },
    ("monitoring.coreos.com/v1", "PrometheusRule"): {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": False,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"$ref": "#/$defs/metadata"},
            "spec": {
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
            },
        },
    },
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
        return [f"{key_path(error.instance_path) or '<root>'}: {error.message}" for error in errors]


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
    definitions = utils.schema_contents(
        f"kubernetes-json-schema/{folder}/_definitions.json", version
    )
    registry = jsonschema_rs.Registry([(definitions["$id"], definitions)])
    return jsonschema_rs.Draft202012Validator(schema, registry=registry)


def _schema_version(version: str) -> str:
    """The newest packaged schema folder not newer than `version` (e.g. 1.36 -> 1.36.0)."""
    from kubernetes_validate import utils

    wanted = tuple(int(part) for part in version.split(".")[:2])
    candidates = [v for v in utils.all_versions() if tuple(map(int, v.split(".")[:2])) <= wanted]
    if not candidates:
        raise RenderError(f"kubernetes-validate has no schemas for Kubernetes {version}")
    return str(candidates[-1])


def manifest_label(manifest: Manifest) -> str:
    return f"{manifest.kind} {manifest.name}"
