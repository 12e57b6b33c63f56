"""values.yaml, the CI values files and the values schema agree with each other and the templates.

SPEC §10 / RENDER_GATE 16, 17, 24: every value in values.yaml is used by a template, every
`.Values` reference names a value the schema defines, defaults and the CI matrix validate, and
invalid values are rejected naming their key path (by jsonschema and by Helm itself).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from chart_helpers import CHART_DIR, CI_VALUES, coalesce, load_yaml, schema_rejection
from helm_python import Chart
from helm_python.errors import HelmValuesError
from jsonschema import Draft202012Validator

VALUES_REF = re.compile(r"(?<![\w$])\$?\w*\.Values\.([A-Za-z_][\w.]*)")
ALIAS = re.compile(r"\$(\w+)\s*:?=\s*(\.Values\.[\w.]+|\$\w+\.[\w.]+)")
SERIALISED = re.compile(r"(?:toYaml|toJson|toPrettyJson)\s+(\.Values\.[\w.]+)")
PIPED = re.compile(r"(\.Values\.[\w.]+)\s*\|\s*(?:toYaml|toJson|toPrettyJson)")


def leaf_paths(values: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every leaf of a values document; empty maps and lists are leaves themselves."""
    if isinstance(values, dict) and values:
        for key, child in values.items():
            yield from leaf_paths(child, (*prefix, key))
    else:
        yield prefix


def expand_aliases(source: str) -> str:
    """Rewrite `$x := .Values.a` / `$y := $x.b` aliases so `$y.c` reads `.Values.a.b.c`."""
    aliases: dict[str, str] = {}
    for name, target in ALIAS.findall(source):
        head, _, rest = target.partition(".")
        if head.startswith("$") and head[1:] in aliases:
            target = f"{aliases[head[1:]]}.{rest}"
        if target.startswith(".Values."):
            aliases[name] = target
    for name, target in sorted(aliases.items(), key=lambda item: -len(item[0])):
        source = re.sub(rf"\${name}\.(?=[A-Za-z_])", f"{target}.", source)
    # `$root.Values.x` (the root context passed in a list) is `.Values.x`.
    return re.sub(r"\$\w+\.Values\.", ".Values.", source)


def referenced_paths(sources: list[str]) -> tuple[set[str], set[str]]:
    """(paths read with .Values, paths serialised whole with toYaml/toJson)."""
    read: set[str] = set()
    whole: set[str] = set()
    for source in sources:
        expanded = expand_aliases(source)
        read.update(match.rstrip(".") for match in VALUES_REF.findall(expanded))
        for pattern in (SERIALISED, PIPED):
            whole.update(ref.removeprefix(".Values.") for ref in pattern.findall(expanded))
    return read, whole


def unused_values(values: dict[str, Any], sources: list[str]) -> list[str]:
    read, whole = referenced_paths(sources)
    unused = []
    for path in leaf_paths(values):
        dotted = ".".join(path)
        parents = {".".join(path[:i]) for i in range(1, len(path))}
        if dotted not in read and not parents & whole:
            unused.append(dotted)
    return unused


def schema_has_path(schema: dict[str, Any], path: str) -> bool:
    """Whether the schema defines `path`; list elements (`range $x := .Values.list`) are
    reached through `items`, and alternatives (oneOf/anyOf) count if any defines the key."""

    def defines(node: dict[str, Any], keys: list[str]) -> bool:
        while "$ref" in node:
            node = schema["$defs"][node["$ref"].removeprefix("#/$defs/")]
        if not keys:
            return True
        alternatives = node.get("oneOf", []) + node.get("anyOf", [])
        if "items" in node:
            alternatives.append(node["items"])
        if any(defines(alternative, keys) for alternative in alternatives):
            return True
        child = node.get("properties", {}).get(keys[0])
        return child is not None and defines(child, keys[1:])

    return defines(schema, path.split("."))


def template_sources(chart: Chart) -> list[str]:
    return [template["data"] for template in chart.templates]


# --- the checker itself can fail -----------------------------------------------------------


def test_unused_value_detector_reports_an_unused_value() -> None:
    values = {"image": {"tag": "1"}, "forgotten": {"knob": 1}, "empty": {}}
    sources = ["{{ .Values.image.tag }}"]
    assert unused_values(values, sources) == ["forgotten.knob", "empty"]


def test_unused_value_detector_follows_aliases_and_serialised_parents() -> None:
    values = {"a": {"b": {"c": 1}}, "r": {"x": 1, "y": 2}, "t": {"u": 1}}
    sources = [
        "{{- $a := .Values.a }}{{- $b := $a.b }}{{ $b.c }}",
        "{{ toYaml .Values.r | nindent 4 }}",
        '{{ include "x" (list $ 1) }}{{ $root.Values.t.u }}',
    ]
    assert unused_values(values, sources) == []


def test_schema_path_lookup_rejects_undefined_paths(values_schema: dict[str, Any]) -> None:
    assert schema_has_path(values_schema, "checkpoint.collectors.feed")
    assert schema_has_path(values_schema, "sink.path")
    assert not schema_has_path(values_schema, "checkpoint.collectors.bogus")
    assert not schema_has_path(values_schema, "image.tagg")


# --- the chart --------------------------------------------------------------------------------


def test_every_value_in_values_yaml_is_used_by_a_template(
    chart: Chart, default_values: dict[str, Any]
) -> None:
    assert unused_values(default_values, template_sources(chart)) == []


def test_every_values_reference_in_templates_is_defined_by_the_schema(
    chart: Chart, values_schema: dict[str, Any]
) -> None:
    read, _ = referenced_paths(template_sources(chart))
    assert read, "no .Values references found: the scanner is broken"
    assert sorted(path for path in read if not schema_has_path(values_schema, path)) == []


def test_defaults_validate_against_the_generated_schema(
    values_schema: dict[str, Any], default_values: dict[str, Any]
) -> None:
    Draft202012Validator.check_schema(values_schema)
    Draft202012Validator(values_schema).validate(default_values)


@pytest.mark.parametrize("values_file", CI_VALUES, ids=lambda path: path.name)
def test_ci_values_validate_with_jsonschema_and_helm(
    chart: Chart,
    values_schema: dict[str, Any],
    default_values: dict[str, Any],
    values_file: Any,
) -> None:
    overrides = load_yaml(values_file)
    Draft202012Validator(values_schema).validate(coalesce(default_values, overrides))
    chart.validate_schema(overrides)


def test_ci_matrix_covers_the_documented_configurations() -> None:
    names = {path.name for path in CI_VALUES}
    assert {
        "default-values.yaml",
        "file-store-values.yaml",
        "three-feeds-values.yaml",
        "optional-all-values.yaml",
        "external-sa-values.yaml",
        "extension-points-values.yaml",
        "no-rbac-values.yaml",
        "other-namespace-values.yaml",
        "restricted-egress-values.yaml",
    } <= names


INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("tag-latest", {"image": {"tag": "latest"}}, "/image/tag"),
    ("tag-Latest", {"image": {"tag": "Latest"}}, "/image/tag"),
    ("tag-empty", {"image": {"tag": ""}}, "/image/tag"),
    ("repository-with-tag", {"image": {"repository": "checkpoint-runtime:1"}}, "/image/repository"),
    ("digest-not-sha256", {"image": {"digest": "md5:abc"}}, "/image/digest"),
    ("store-s3", {"checkpoint": {"store": {"backend": "s3"}}}, "/checkpoint/store/backend"),
    ("unknown-top-level", {"extraRules": []}, ""),
    ("unknown-rbac-key", {"rbac": {"create": True, "rules": []}}, "/rbac"),
    ("securityContext-is-not-a-value", {"securityContext": {"privileged": True}}, ""),
    ("root-user", {"podSecurityContext": {"runAsUser": 0}}, "/podSecurityContext/runAsUser"),
    ("no-limits", {"resources": {"limits": None}}, "/resources"),
    ("zero-replicas", {"replicaCount": 0}, "/replicaCount"),
    (
        "namespace-not-dns",
        {"checkpoint": {"store": {"namespace": "Bad_NS"}}},
        "/checkpoint/store/namespace",
    ),
    (
        "lease-not-dns",
        {"checkpoint": {"store": {"leaseName": "-lease"}}},
        "/checkpoint/store/leaseName",
    ),
    (
        "renew-not-below-lease",
        {"checkpoint": {"leaderElection": {"renewDeadlineSeconds": 20}}},
        "/checkpoint/leaderElection/renewDeadlineSeconds",
    ),
    (
        "fractional-lease-duration",
        {"checkpoint": {"leaderElection": {"leaseDurationSeconds": 15.5}}},
        "/checkpoint/leaderElection/leaseDurationSeconds",
    ),
    ("file-path-over-tmp", {"checkpoint": {"store": {"path": "/tmp"}}}, "/checkpoint/store/path"),
    (
        "sa-external-without-name",
        {"serviceAccount": {"create": False}},
        "/serviceAccount/name",
    ),
    (
        "tailnet-named-flowlogs",
        {"checkpoint": {"collectors": [{"kind": "flowlogs", "tailnet": "flowlogs", "url": "u"}]}},
        "/checkpoint/collectors/0/tailnet",
    ),
    (
        "feed-named-objectstore",
        {
            "checkpoint": {
                "collectors": [{"kind": "objectstore", "feed": "objectstore", "url": "u"}]
            }
        },
        "/checkpoint/collectors/0/feed",
    ),
    (
        "tailnet-named-objectstore",
        {
            "checkpoint": {
                "collectors": [
                    {"kind": "objectstore", "tailnet": "objectstore", "feed": "a", "url": "u"}
                ]
            }
        },
        "/checkpoint/collectors/0/tailnet",
    ),
    (
        "feed-with-slash",
        {"checkpoint": {"collectors": [{"kind": "objectstore", "feed": "a/b", "url": "u"}]}},
        "/checkpoint/collectors/0/feed",
    ),
    (
        "objectstore-without-feed",
        {"checkpoint": {"collectors": [{"kind": "objectstore", "url": "u"}]}},
        "/checkpoint/collectors/0",
    ),
    (
        "unknown-collector-kind",
        {"checkpoint": {"collectors": [{"kind": "syslog", "url": "u"}]}},
        "/checkpoint/collectors/0/kind",
    ),
    ("sink-file-without-path", {"sink": {"kind": "file"}}, "/sink"),
    (
        "headroom-ratio-over-one",
        {"prometheusRule": {"headroomWarningRatio": 1.5}},
        "/prometheusRule/headroomWarningRatio",
    ),
    (
        "network-peer-ipblock",
        {"networkPolicy": {"ingressFrom": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]}},
        "/networkPolicy/ingressFrom/0",
    ),
    ("label-key-invalid", {"nodeSelector": {"bad key": "x"}}, "/nodeSelector"),
    (
        "extra-volume-hostpath",
        {"extraVolumes": [{"name": "root", "hostPath": {"path": "/"}}]},
        "/extraVolumes/0",
    ),
    (
        "extra-volume-two-sources",
        {"extraVolumes": [{"name": "x", "emptyDir": {}, "configMap": {"name": "c"}}]},
        "/extraVolumes/0",
    ),
    (
        "extra-volume-chart-name",
        {"extraVolumes": [{"name": "config", "emptyDir": {}}]},
        "/extraVolumes/0/name",
    ),
    (
        "extra-mount-over-config",
        {"extraVolumeMounts": [{"name": "x", "mountPath": "/etc/checkpoint-runtime"}]},
        "/extraVolumeMounts/0/mountPath",
    ),
    # The extension points cannot move the selectors, shadow the chart's own keys or escalate.
    (
        "pod-label-overrides-selector",
        {"podLabels": {"app.kubernetes.io/name": "other"}},
        "/podLabels",
    ),
    ("pod-label-overrides-chart", {"podLabels": {"helm.sh/chart": "x"}}, "/podLabels"),
    (
        "pod-annotation-overrides-checksum",
        {"podAnnotations": {"checksum/config": "0"}},
        "/podAnnotations",
    ),
    (
        "priority-class-system",
        {"priorityClassName": "system-cluster-critical"},
        "/priorityClassName",
    ),
    ("priority-class-not-dns", {"priorityClassName": "Critical_1"}, "/priorityClassName"),
    (
        "env-overrides-pod-name",
        {"extraEnv": [{"name": "POD_NAME", "value": "x"}]},
        "/extraEnv/0/name",
    ),
    ("env-name-invalid", {"extraEnv": [{"name": "1BAD", "value": "x"}]}, "/extraEnv/0/name"),
    (
        "env-value-and-value-from",
        {
            "extraEnv": [
                {
                    "name": "A",
                    "value": "x",
                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                }
            ]
        },
        "/extraEnv/0",
    ),
    (
        "env-two-sources",
        {
            "extraEnv": [
                {
                    "name": "A",
                    "valueFrom": {
                        "secretKeyRef": {"name": "s", "key": "k"},
                        "configMapKeyRef": {"name": "c", "key": "k"},
                    },
                }
            ]
        },
        "/extraEnv/0/valueFrom",
    ),
    (
        "env-unknown-key",
        {"extraEnv": [{"name": "A", "value": "x", "securityContext": {}}]},
        "/extraEnv/0",
    ),
    (
        "env-from-without-source",
        {"envFrom": [{"prefix": "X_"}]},
        "/envFrom/0",
    ),
    (
        "env-from-both-sources",
        {"envFrom": [{"secretRef": {"name": "s"}, "configMapRef": {"name": "c"}}]},
        "/envFrom/0",
    ),
    (
        "spread-bad-when",
        {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "Maybe",
                }
            ]
        },
        "/topologySpreadConstraints/0/whenUnsatisfiable",
    ),
    (
        "spread-min-domains-soft",
        {
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "ScheduleAnyway",
                    "minDomains": 2,
                }
            ]
        },
        "/topologySpreadConstraints/0/whenUnsatisfiable",
    ),
    # Probes and the Service reach the pod IP: a loopback listener would fail every probe.
    ("bind-loopback", {"service": {"bindAddress": "127.0.0.1"}}, "/service/bindAddress"),
    (
        "pdb-unknown-eviction-policy",
        {"podDisruptionBudget": {"unhealthyPodEvictionPolicy": "Never"}},
        "/podDisruptionBudget/unhealthyPodEvictionPolicy",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "path"),
    [pytest.param(overrides, path, id=name) for name, overrides, path in INVALID],
)
def test_invalid_values_are_rejected_naming_the_key_path(
    chart: Chart,
    values_schema: dict[str, Any],
    default_values: dict[str, Any],
    overrides: dict[str, Any],
    path: str,
) -> None:
    message = schema_rejection(chart, values_schema, default_values, overrides, path)
    assert f"at '{path}'" in message
    with pytest.raises(HelmValuesError):
        chart.render(values=overrides, name="cr", namespace="ns")


def test_template_requires_a_service_account_name_even_without_the_schema(
    tmp_path: Any,
) -> None:
    """Defence in depth: with --skip-schema-validation the template still refuses."""
    import shutil

    from helm_python.errors import HelmRenderError

    copy_dir = tmp_path / "checkpoint-runtime"
    shutil.copytree(CHART_DIR, copy_dir)
    (copy_dir / "values.schema.json").unlink()
    with Chart.load(copy_dir) as unchecked, pytest.raises(HelmRenderError) as refused:
        unchecked.render(values={"serviceAccount": {"create": False}}, name="cr", namespace="ns")
    assert "serviceAccount.name is required" in str(refused.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}},
            "resources.requests.cpu (2) must not exceed resources.limits.cpu (1500m)",
        ),
        (
            {"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "2000Mi"}}},
            "resources.requests.memory (2Gi) must not exceed resources.limits.memory (2000Mi)",
        ),
        (
            {"tests": {"resources": {"requests": {"memory": "1G"}, "limits": {"memory": "999M"}}}},
            "tests.resources.requests.memory (1G) must not exceed",
        ),
        (
            {
                "checkpoint": {
                    "collectors": [
                        {"kind": "flowlogs", "url": "https://a.example/flows"},
                        {"kind": "flowlogs", "url": "https://b.example/flows"},
                    ]
                }
            },
            'checkpoint.collectors[1]: collector namespace "flowlogs" is already used by '
            "checkpoint.collectors[0]",
        ),
        (
            {
                "checkpoint": {
                    "collectors": [
                        {"kind": "objectstore", "tailnet": "t", "feed": "f", "url": "s3://a/"},
                        {"kind": "objectstore", "feed": "f", "url": "s3://b/"},
                        {"kind": "objectstore", "tailnet": "t", "feed": "f", "url": "s3://c/"},
                    ]
                }
            },
            'checkpoint.collectors[2]: collector namespace "t/objectstore/f"',
        ),
    ],
)
def test_render_time_checks_refuse_naming_the_key(
    chart: Chart, overrides: dict[str, Any], message: str
) -> None:
    """Rules that compare two values, which the schema cannot express, refused while rendering.

    Every such refusal starts with the same prefix, so a values generator can tell "the chart
    refused these values" from "the chart is broken".
    """
    from helm_python.errors import HelmRenderError

    chart.validate_schema(overrides)
    with pytest.raises(HelmRenderError) as refused:
        chart.render(values=overrides, name="cr", namespace="ns")
    assert f"checkpoint-runtime: invalid values: {message}" in str(refused.value)


def test_distinct_collector_namespaces_render(chart: Chart) -> None:
    collectors = [
        {"kind": "objectstore", "feed": "f", "url": "s3://a/"},
        {"kind": "objectstore", "tailnet": "t", "feed": "f", "url": "s3://a/"},
        {"kind": "flowlogs", "url": "https://a.example/flows"},
        {"kind": "flowlogs", "tailnet": "t", "url": "https://a.example/flows"},
    ]
    assert chart.render(values={"checkpoint": {"collectors": collectors}}, name="cr")


def test_equal_requests_and_limits_in_other_units_are_accepted(chart: Chart) -> None:
    resources = {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1000m", "memory": "1024Mi"},
    }
    assert chart.render(values={"resources": resources}, name="cr", namespace="ns")
