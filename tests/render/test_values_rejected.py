"""Invalid values are rejected by Helm's own schema enforcement and by jsonschema, naming the key.

Assert the failure and the key path, never Helm's exact wording (it changed between versions):
Helm names the path as a JSON pointer (/checkpoint/store/backend), jsonschema as
checkpoint.store.backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkpoint_gate.manifests import RenderError
from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.render import CliRenderer, SdkRenderer
from checkpoint_gate.validate import ValuesSchema

# values -> the key path the failure must name
INVALID: dict[str, tuple[dict[str, Any], str]] = {
    "unknown-store": ({"checkpoint": {"store": {"backend": "nfs"}}}, "checkpoint.store.backend"),
    "replicas-as-string": ({"replicaCount": "two"}, "replicaCount"),
    "too-many-replicas": ({"replicaCount": 50}, "replicaCount"),
    "injected-rbac-rules": ({"rbac": {"create": True, "rules": []}}, "rbac"),
    "unknown-top-level-key": ({"extraObjects": []}, ""),
    "root-uid": (
        {"podSecurityContext": {"runAsUser": 0, "runAsGroup": 1, "fsGroup": 1}},
        "podSecurityContext.runAsUser",
    ),
    "bad-lease-name": (
        {"checkpoint": {"store": {"leaseName": "Not_A_Name"}}},
        "checkpoint.store.leaseName",
    ),
    "ambiguous-feed-name": (
        {
            "checkpoint": {
                "collectors": [{"kind": "objectstore", "feed": "flowlogs", "url": "s3://x/"}]
            }
        },
        "checkpoint.collectors[0].feed",
    ),
    "tailnet-not-a-string": (
        {
            "checkpoint": {
                "collectors": [
                    {"kind": "objectstore", "feed": "a", "tailnet": [1], "url": "s3://x/"}
                ]
            }
        },
        "checkpoint.collectors[0].tailnet",
    ),
    "unsupported-url-scheme": (
        {"checkpoint": {"collectors": [{"kind": "objectstore", "feed": "a", "url": "gs://x/"}]}},
        "checkpoint.collectors[0].url",
    ),
    "pod-label-overrides-selector": (
        {"podLabels": {"app.kubernetes.io/instance": "other"}},
        "podLabels",
    ),
    "system-priority-class": ({"priorityClassName": "system-node-critical"}, "priorityClassName"),
    "env-shadows-pod-name": (
        {"extraEnv": [{"name": "POD_NAMESPACE", "value": "x"}]},
        "extraEnv[0].name",
    ),
    "flowlogs-url-not-http": (
        {"checkpoint": {"collectors": [{"kind": "flowlogs", "url": "file:///x"}]}},
        "checkpoint.collectors[0].url",
    ),
    "no-chunk-slots": ({"checkpoint": {"store": {"maxChunks": 0}}}, "checkpoint.store.maxChunks"),
    "too-many-chunk-slots": (
        {"checkpoint": {"store": {"maxChunks": 257}}},
        "checkpoint.store.maxChunks",
    ),
    "write-budget-zero": (
        {"checkpoint": {"store": {"writeBudgetBytesPerSecond": 0}}},
        "checkpoint.store.writeBudgetBytesPerSecond",
    ),
    "token-the-api-server-extends-to-a-year": (
        {"serviceAccount": {"tokenExpirationSeconds": 3607}},
        "serviceAccount.tokenExpirationSeconds",
    ),
    "role-binding-to-the-default-account": (
        {"serviceAccount": {"create": False, "name": "default"}},
        "serviceAccount.name",
    ),
    "break-glass-group-of-every-user": (
        {"admissionPolicy": {"enabled": True, "breakGlassGroup": "system:authenticated"}},
        "admissionPolicy.breakGlassGroup",
    ),
    "etcd-quota-as-string": (
        {"checkpoint": {"store": {"etcdQuotaBytes": "2Gi"}}},
        "checkpoint.store.etcdQuotaBytes",
    ),
}


@pytest.mark.parametrize(("values", "path"), list(INVALID.values()), ids=list(INVALID))
def test_one_violation_per_failing_field_naming_it(
    sdk: SdkRenderer, schema: ValuesSchema, values: dict[str, Any], path: str
) -> None:
    """Told once, about the field: never "is not valid under any of the given schemas"."""
    violations = schema.violations(sdk.merged_values(values))
    assert [v.path for v in violations] == [path]
    assert "is not valid under any of the given schemas" not in violations[0].message


def test_the_gate_reports_a_schema_error_once(sdk: SdkRenderer) -> None:
    from checkpoint_gate.pipeline import Gate

    result = Gate().run(INVALID["tailnet-not-a-string"][0])
    assert [(f.check, f.obj) for f in result.findings] == [
        ("values-schema", "checkpoint.collectors[0].tailnet")
    ]


def pointer(path: str) -> str:
    """checkpoint.collectors[0] -> /checkpoint/collectors/0 (Helm's form)."""
    return "/" + path.replace("[", ".").replace("]", "").replace(".", "/") if path else ""


@pytest.fixture(scope="module")
def schema() -> ValuesSchema:
    return ValuesSchema(CHART_DIR / "values.schema.json")


@pytest.mark.parametrize(("values", "path"), list(INVALID.values()), ids=list(INVALID))
def test_jsonschema_rejects_naming_the_key_path(
    sdk: SdkRenderer, schema: ValuesSchema, values: dict[str, Any], path: str
) -> None:
    violations = schema.violations(sdk.merged_values(values))
    assert violations, "accepted an invalid document"
    assert path in {v.path for v in violations}


@pytest.mark.parametrize(("values", "path"), list(INVALID.values()), ids=list(INVALID))
def test_helm_sdk_schema_enforcement_rejects_naming_the_key_path(
    sdk: SdkRenderer, values: dict[str, Any], path: str
) -> None:
    with pytest.raises(RenderError) as error:
        sdk.render(values)
    assert f"'{pointer(path)}'" in str(error.value) or pointer(path) in str(error.value)


@pytest.mark.parametrize(("values", "path"), list(INVALID.values()), ids=list(INVALID))
def test_helm_cli_schema_enforcement_rejects_naming_the_key_path(
    cli: CliRenderer, values: dict[str, Any], path: str
) -> None:
    with pytest.raises(RenderError) as error:
        cli.render(values)
    assert pointer(path) in str(error.value)
    assert "schema" in str(error.value)


def test_defaults_and_ci_values_are_valid(sdk: SdkRenderer, schema: ValuesSchema) -> None:
    from render_helpers import MATRIX

    problems = {name: schema.violations(sdk.merged_values(values)) for name, values in MATRIX}
    assert {name: found for name, found in problems.items() if found} == {}


def test_key_path_of_the_root_is_empty(sdk: SdkRenderer, schema: ValuesSchema) -> None:
    (violation,) = schema.violations(sdk.merged_values({"extraObjects": []}))
    assert violation.path == ""
    assert "extraObjects" in violation.message


def test_schema_file_exists_where_helm_reads_it() -> None:
    assert (Path(CHART_DIR) / "values.schema.json").is_file()
