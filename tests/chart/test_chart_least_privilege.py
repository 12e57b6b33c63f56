"""Least privilege past the Role: values that cannot widen the grant, bounded local state,
a short-lived token, and the opt-in admission policy, as the chart renders them."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import CHART_DIR, NAMESPACE, RELEASE, Render, by_kind, one, schema_rejection
from helm_python import Chart
from helm_python.errors import HelmRenderError

from checkpoint_runtime.format.naming import shard_name, store_label
from checkpoint_testenv import binaries

FULLNAME = f"{RELEASE}-checkpoint-runtime"
COLLECTORS = [
    {"kind": "flowlogs", "url": "http://flows.example"},
    {"kind": "objectstore", "tailnet": "corp.example", "feed": "audit", "url": "s3://b/p/"},
]
FLOWLOGS_SHARD = shard_name(FULLNAME, "flowlogs")


def _pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "Deployment")["spec"]["template"]["spec"]
    return spec


def _names_scope(legacy: str) -> dict[str, Any]:
    return {
        "rbac": {"scope": "names"},
        "checkpoint": {"collectors": COLLECTORS, "store": {"legacyConfigMap": legacy}},
    }


# --- values that cannot widen the grant ----------------------------------------------------------


@pytest.mark.parametrize(
    ("legacy", "why"),
    [
        (f"{FULLNAME}-config", "the release's own runtime config"),
        (FULLNAME, "the name of the release's Deployment, Service and Role"),
        (f"{FULLNAME}-test", "the release's test pod"),
        ("collector-leader", "the store's Lease"),
        (f"{FLOWLOGS_SHARD}x", None),  # only starts like a shard: allowed
    ],
)
def test_legacy_config_map_naming_the_release_is_refused_at_render(
    render: Render, legacy: str, why: str | None
) -> None:
    values = _names_scope(legacy)
    values["checkpoint"]["store"]["leaseName"] = "collector-leader"
    if why is None:
        role = one(render(values), "Role")
        assert legacy in role["rules"][0]["resourceNames"]
        return
    with pytest.raises(HelmRenderError) as refused:
        render(values)
    message = str(refused.value)
    assert f'checkpoint.store.legacyConfigMap: "{legacy}" is {why}' in message, message


@pytest.mark.parametrize(
    "legacy",
    [
        "kube-root-ca.crt",
        FLOWLOGS_SHARD,
        f"{FLOWLOGS_SHARD}-ca0",
        f"{shard_name(FULLNAME, 'corp.example/objectstore/audit')}-cb7",
    ],
)
def test_schema_refuses_the_ca_bundle_and_store_shaped_names(
    chart: Chart,
    values_schema: dict[str, Any],
    default_values: dict[str, Any],
    legacy: str,
) -> None:
    schema_rejection(
        chart,
        values_schema,
        default_values,
        {"checkpoint": {"store": {"legacyConfigMap": legacy}}},
        "/checkpoint/store/legacyConfigMap",
    )


def test_dropping_the_legacy_config_map_drops_its_update_grant(render: Render) -> None:
    during = one(render(_names_scope("collector-checkpoints")), "Role")
    after = one(render(_names_scope("")), "Role")
    assert "collector-checkpoints" in during["rules"][0]["resourceNames"]
    kept = set(during["rules"][0]["resourceNames"]) - {"collector-checkpoints"}
    assert set(after["rules"][0]["resourceNames"]) == kept
    assert {FLOWLOGS_SHARD, shard_name(FULLNAME, "corp.example/objectstore/audit")} <= kept
    assert all(
        "collector-checkpoints" not in rule.get("resourceNames", []) for rule in after["rules"]
    )


# --- bounded local state -------------------------------------------------------------------------


def _derived_limit(default_values: dict[str, Any], collectors: int) -> str:
    chunks = int(default_values["checkpoint"]["store"].get("maxChunks", 8))
    objects = collectors * (2 + 2 * chunks) + 1
    return f"{max(16, -(-objects * 1280 // 1024))}Mi"


@pytest.mark.parametrize("collectors", [0, 2, 32])
def test_file_store_empty_dir_has_a_size_limit_derived_from_the_collectors(
    render: Render, default_values: dict[str, Any], collectors: int
) -> None:
    feeds = [
        {"kind": "objectstore", "feed": f"f{index}", "url": "s3://b/p/"}
        for index in range(collectors)
    ]
    objects = render({"checkpoint": {"store": {"backend": "file"}, "collectors": feeds}})
    volumes = {volume["name"]: volume for volume in _pod_spec(objects)["volumes"]}
    limit = volumes["checkpoints"]["emptyDir"]["sizeLimit"]
    assert limit == _derived_limit(default_values, collectors)
    if collectors == 32:
        assert limit != "16Mi"  # grows with the collectors past the floor


def test_file_store_size_limit_value_wins(render: Render) -> None:
    objects = render({"checkpoint": {"store": {"backend": "file"}, "file": {"sizeLimit": "2Gi"}}})
    volumes = {volume["name"]: volume for volume in _pod_spec(objects)["volumes"]}
    assert volumes["checkpoints"]["emptyDir"] == {"sizeLimit": "2Gi"}


# --- a short-lived token -------------------------------------------------------------------------


@pytest.mark.parametrize("lifetime", [None, 600, 86400])
def test_kubernetes_store_mounts_a_projected_token_with_a_lifetime(
    render: Render, lifetime: int | None
) -> None:
    values = {} if lifetime is None else {"serviceAccount": {"tokenExpirationSeconds": lifetime}}
    spec = _pod_spec(render(values))
    assert spec["automountServiceAccountToken"] is False
    volumes = {volume["name"]: volume for volume in spec["volumes"]}
    sources = volumes["kube-api-access"]["projected"]["sources"]
    assert sources[0] == {
        "serviceAccountToken": {"path": "token", "expirationSeconds": lifetime or 3600}
    }
    assert sources[1]["configMap"] == {
        "name": "kube-root-ca.crt",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    assert sources[2]["downwardAPI"]["items"] == [
        {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
    ]
    (container,) = spec["containers"]
    mounts = {mount["name"]: mount for mount in container["volumeMounts"]}
    assert mounts["kube-api-access"] == {
        "name": "kube-api-access",
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        "readOnly": True,
    }


@pytest.mark.parametrize("lifetime", [599, 86401])
def test_token_lifetime_outside_what_the_api_server_accepts_is_refused(
    chart: Chart, values_schema: dict[str, Any], default_values: dict[str, Any], lifetime: int
) -> None:
    schema_rejection(
        chart,
        values_schema,
        default_values,
        {"serviceAccount": {"tokenExpirationSeconds": lifetime}},
        "/serviceAccount/tokenExpirationSeconds",
    )


def test_file_store_mounts_no_token_at_all(render: Render) -> None:
    spec = _pod_spec(render({"checkpoint": {"store": {"backend": "file"}}}))
    assert spec["automountServiceAccountToken"] is False
    assert "kube-api-access" not in {volume["name"] for volume in spec["volumes"]}


# --- the admission policy ------------------------------------------------------------------------

POLICY_NAME = f"{FULLNAME}.{NAMESPACE}"
RESERVED_NAME = f"{POLICY_NAME}.reserved"


def named(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [obj for obj in by_kind(objects, kind) if obj["metadata"]["name"] == name]
    return found


def _variables(policy: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item["expression"] for item in policy["spec"]["variables"]}


def test_admission_policy_is_off_by_default(render: Render) -> None:
    kinds = {obj["kind"] for obj in render()}
    assert not kinds & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


@pytest.mark.parametrize("scope", ["namespace", "names"])
def test_admission_policy_pins_the_release_account_names_and_labels(
    render: Render, scope: str
) -> None:
    objects = render(
        {
            "admissionPolicy": {"enabled": True},
            "rbac": {"scope": scope},
            "checkpoint": {
                "collectors": COLLECTORS,
                "store": {"legacyConfigMap": "collector-checkpoints"},
            },
        }
    )
    assert not by_kind(objects, "ClusterRole")
    assert not by_kind(objects, "ClusterRoleBinding")
    policy = named(objects, "ValidatingAdmissionPolicy", POLICY_NAME)
    binding = named(objects, "ValidatingAdmissionPolicyBinding", POLICY_NAME)
    assert "namespace" not in policy["metadata"]
    assert "namespace" not in binding["metadata"]
    assert binding["spec"] == {"policyName": POLICY_NAME, "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    (condition,) = policy["spec"]["matchConditions"]
    account = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"
    assert condition["expression"] == f'request.userInfo.username == "{account}"'
    variables = _variables(policy)
    heads = sorted(
        shard_name(FULLNAME, key) for key in ["flowlogs", "corp.example/objectstore/audit"]
    )
    assert json.loads(variables["heads"]) == heads
    assert json.loads(variables["storeLabel"]) == store_label(FULLNAME)
    assert json.loads(variables["legacy"]) == "collector-checkpoints"
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert [(r["resources"], r["operations"]) for r in rules] == [
        (["configmaps"], ["CREATE", "UPDATE"]),
        (["leases"], ["CREATE"]),
    ]


@pytest.mark.parametrize("group", ["checkpoint-runtime:break-glass", "oncall", ""])
def test_the_reserved_names_policy_names_the_store_its_owner_and_the_break_glass_group(
    render: Render, group: str
) -> None:
    objects = render(
        {
            "admissionPolicy": {"enabled": True, "breakGlassGroup": group},
            "rbac": {"scope": "names"},
            "checkpoint": {
                "collectors": COLLECTORS,
                "store": {"legacyConfigMap": "collector-checkpoints", "namespace": "coord"},
            },
        }
    )
    assert {obj["metadata"]["name"] for obj in by_kind(objects, "ValidatingAdmissionPolicy")} == {
        POLICY_NAME,
        RESERVED_NAME,
    }
    policy = named(objects, "ValidatingAdmissionPolicy", RESERVED_NAME)
    binding = named(objects, "ValidatingAdmissionPolicyBinding", RESERVED_NAME)
    assert binding["spec"] == {"policyName": RESERVED_NAME, "validationActions": ["Deny"]}
    assert policy["spec"]["failurePolicy"] == "Fail"
    constraints = policy["spec"]["matchConstraints"]
    assert constraints["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "coord"}
    }
    assert [(r["resources"], r["operations"]) for r in constraints["resourceRules"]] == [
        (["configmaps"], ["CREATE", "UPDATE", "DELETE"]),
        (["leases"], ["CREATE", "UPDATE", "DELETE"]),
    ]
    account = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"
    (condition,) = policy["spec"]["matchConditions"]
    assert condition["expression"] == f'request.userInfo.username != "{account}"'
    variables = _variables(policy)
    heads = sorted(
        shard_name(FULLNAME, key) for key in ["flowlogs", "corp.example/objectstore/audit"]
    )
    assert json.loads(variables["heads"]) == heads
    assert json.loads(variables["lease"]) == FULLNAME
    assert json.loads(variables["legacy"]) == "collector-checkpoints"
    assert json.loads(variables["breakGlassGroup"]) == group
    (validation,) = policy["spec"]["validations"]
    owner = f"release {RELEASE} (ServiceAccount {account})"
    assert owner in validation["message"]
    assert owner in validation["messageExpression"]
    assert (f"a member of the group {group}," in validation["message"]) is bool(group)


def test_store_label_in_the_chart_is_the_runtime_s(render: Render) -> None:
    policy = named(
        render(
            {
                "admissionPolicy": {"enabled": True},
                "checkpoint": {"store": {"leaseName": "x-leader"}},
            }
        ),
        "ValidatingAdmissionPolicy",
        POLICY_NAME,
    )
    expected = hashlib.sha256(b"store\0x-leader").hexdigest()[:16]
    assert json.loads(_variables(policy)["storeLabel"]) == store_label("x-leader") == expected


def test_admission_policy_is_not_rendered_for_the_file_store(render: Render) -> None:
    objects = render(
        {"admissionPolicy": {"enabled": True}, "checkpoint": {"store": {"backend": "file"}}}
    )
    assert not by_kind(objects, "ValidatingAdmissionPolicy")


@pytest.mark.parametrize(("version", "renders"), [("1.29.4", False), ("1.32.0", True)])
def test_admission_policy_needs_kubernetes_1_30(
    tmp_path: Path, version: str, renders: bool
) -> None:
    """Every minor the chart admits (kubeVersion, from 1.32) serves ValidatingAdmissionPolicy
    v1 (GA in 1.30): an older cluster is refused by the chart's kubeVersion before any
    template renders."""
    values = tmp_path / "values.yaml"
    values.write_text("admissionPolicy:\n  enabled: true\n")
    helm = binaries.locate() / "helm"
    command = [str(helm), "template", RELEASE, str(CHART_DIR), "--kube-version", version]
    completed = subprocess.run([*command, "-f", str(values)], capture_output=True, text=True)
    assert (completed.returncode == 0) is renders, completed.stderr
    if not renders:
        assert f"incompatible with Kubernetes v{version}" in completed.stderr
