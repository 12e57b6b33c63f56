"""The value matrix (defaults + ci/*-values.yaml) through both renderers and every check."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from render_helpers import matrix_params

from checkpoint_gate.engine import Level, Mode, PolicyEngine
from checkpoint_gate.manifests import Manifest, RenderError, sort_manifests
from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.render import CliRenderer, SdkRenderer
from checkpoint_gate.validate import KubernetesValidator, ValuesSchema

# SPEC §10, written out independently of the policy: (apiGroups, resources, verbs, resourceNames).
SPEC_RULES = {
    (("",), ("configmaps",), ("create", "get", "list", "update"), ()),
    (("coordination.k8s.io",), ("leases",), ("get", "update"), ("cr-checkpoint-runtime",)),
    (("coordination.k8s.io",), ("leases",), ("create",), ()),
}


def normalised_rules(role: dict[str, Any]) -> set[tuple[tuple[str, ...], ...]]:
    return {
        tuple(
            tuple(sorted(rule.get(field, [])))
            for field in ("apiGroups", "resources", "verbs", "resourceNames")
        )
        for rule in role["rules"]
    }


def of_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [manifest for manifest in manifests if manifest.kind == kind]


def test_defaults_render_exactly_the_spec_rules(sdk: SdkRenderer) -> None:
    manifests = sdk.render({}, release="cr", namespace="apps")
    (role,) = of_kind(manifests, "Role")
    assert normalised_rules(role.document) == SPEC_RULES
    assert role.document["metadata"]["namespace"] == "apps"
    (binding,) = of_kind(manifests, "RoleBinding")
    assert binding.document["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "cr-checkpoint-runtime",
    }
    assert binding.document["subjects"] == [
        {"kind": "ServiceAccount", "name": "cr-checkpoint-runtime", "namespace": "apps"}
    ]


@pytest.mark.parametrize(
    "values", [{"checkpoint": {"store": {"backend": "file"}}}, {"rbac": {"create": False}}]
)
def test_file_store_and_rbac_off_render_no_role_or_binding(
    sdk: SdkRenderer, values: dict[str, Any]
) -> None:
    kinds = {manifest.kind for manifest in sdk.render(values)}
    assert kinds.isdisjoint({"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"})
    assert "Deployment" in kinds


def test_external_service_account_is_bound_but_not_created(sdk: SdkRenderer) -> None:
    manifests = sdk.render({"serviceAccount": {"create": False, "name": "platform-runner"}})
    assert of_kind(manifests, "ServiceAccount") == []
    (binding,) = of_kind(manifests, "RoleBinding")
    assert binding.document["subjects"][0]["name"] == "platform-runner"
    (deployment,) = of_kind(manifests, "Deployment")
    assert (
        deployment.document["spec"]["template"]["spec"]["serviceAccountName"] == "platform-runner"
    )


@pytest.mark.parametrize("values", matrix_params())
def test_no_cluster_scoped_rbac_anywhere_in_the_matrix(
    sdk: SdkRenderer, values: dict[str, Any]
) -> None:
    kinds = {manifest.kind for manifest in sdk.render(values)}
    assert kinds.isdisjoint({"ClusterRole", "ClusterRoleBinding"})


def test_values_cannot_inject_rbac_rules(sdk: SdkRenderer) -> None:
    """RENDER_GATE 10: the RBAC values are rbac.create and rbac.scope, a choice between two
    fixed rule sets; the schema refuses anything else."""
    rbac = ValuesSchema(CHART_DIR / "values.schema.json").schema["properties"]["rbac"]
    assert set(rbac["properties"]) == {"create", "scope"}
    assert rbac["properties"]["scope"]["enum"] == ["namespace", "names"]
    assert rbac["additionalProperties"] is False
    with pytest.raises(RenderError, match="rbac"):
        sdk.render({"rbac": {"create": True, "extraRules": [{"verbs": ["*"]}]}})
    with pytest.raises(RenderError, match="rbac"):
        sdk.render({"rbac": {"create": True, "scope": "cluster"}})


def normalise(manifests: list[Manifest]) -> list[tuple[str, str, str]]:
    """Renderer-independent form: sorted by kind/name, documents re-serialised canonically."""
    return [
        (m.kind, m.name, yaml.safe_dump(m.document, sort_keys=True))
        for m in sort_manifests(manifests)
    ]


@pytest.mark.parametrize("values", matrix_params())
def test_sdk_and_helm_cli_render_the_same_manifests(
    sdk: SdkRenderer, cli: CliRenderer, values: dict[str, Any]
) -> None:
    in_process = sdk.render(values, release="cr", namespace="apps")
    subprocess_ = cli.render(values, release="cr", namespace="apps")
    assert normalise(in_process) == normalise(subprocess_)
    assert {m.source for m in in_process} == {m.source for m in subprocess_}


@pytest.mark.parametrize("values", matrix_params())
def test_manifests_validate_strictly_against_kubernetes_schemas(
    sdk: SdkRenderer, kubernetes: KubernetesValidator, values: dict[str, Any]
) -> None:
    problems = {f"{m.kind} {m.name}": kubernetes.violations(m) for m in sdk.render(values)}
    assert {obj: found for obj, found in problems.items() if found} == {}


def test_strict_kubernetes_validation_rejects_an_unknown_field(
    sdk: SdkRenderer, kubernetes: KubernetesValidator
) -> None:
    (deployment,) = of_kind(sdk.render({}), "Deployment")
    document = {**deployment.document, "spec": {**deployment.document["spec"], "replica": 2}}
    problems = kubernetes.violations(Manifest(deployment.source, document))
    assert any("replica" in problem for problem in problems), problems


def test_strict_kubernetes_validation_rejects_a_wrong_type(
    sdk: SdkRenderer, kubernetes: KubernetesValidator
) -> None:
    (service,) = of_kind(sdk.render({}), "Service")
    document = {**service.document, "spec": {**service.document["spec"], "ports": "8080"}}
    problems = kubernetes.violations(Manifest(service.source, document))
    assert any(problem.startswith("spec.ports") for problem in problems), problems


def test_prometheus_operator_objects_get_the_structural_check(
    sdk: SdkRenderer, kubernetes: KubernetesValidator
) -> None:
    """kubernetes-validate has no CRD schemas: ServiceMonitor/PrometheusRule get a minimal one."""
    manifests = sdk.render(
        {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}}
    )
    (monitor,) = of_kind(manifests, "ServiceMonitor")
    (rule,) = of_kind(manifests, "PrometheusRule")
    assert kubernetes.violations(monitor) == []
    assert kubernetes.violations(rule) == []
    no_endpoints = {**monitor.document, "spec": {"selector": monitor.document["spec"]["selector"]}}
    assert any("endpoints" in p for p in kubernetes.violations(Manifest("", no_endpoints)))
    no_groups = {**rule.document, "spec": {}, "extra": 1}
    problems = kubernetes.violations(Manifest("", no_groups))
    assert any("groups" in p for p in problems)
    assert any("extra" in p for p in problems)


def test_an_unknown_kind_is_reported_not_skipped(kubernetes: KubernetesValidator) -> None:
    manifest = Manifest(
        "", {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    )
    assert kubernetes.violations(manifest) == [
        "no Kubernetes 1.36 schema for example.com/v1 Widget"
    ]


@pytest.mark.parametrize("mode", [Mode.DOCUMENT, Mode.COMBINED])
@pytest.mark.parametrize("values", matrix_params())
def test_policies_pass_for_the_matrix(
    sdk: SdkRenderer, engine: PolicyEngine, values: dict[str, Any], mode: Mode
) -> None:
    verdicts = engine.evaluate(sdk.render(values, release="cr", namespace="apps"), [mode])
    assert [v.message for v in verdicts if v.level is Level.DENY] == []


@pytest.mark.parametrize("values", matrix_params())
def test_helm_lint_strict_passes(cli: CliRenderer, values: dict[str, Any]) -> None:
    completed = cli.lint(values, strict=True)
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_helm_lint_strict_can_fail(cli: CliRenderer) -> None:
    completed = cli.lint({"checkpoint": {"store": "nfs"}}, strict=True)
    assert completed.returncode != 0
    assert "checkpoint" in completed.stdout + completed.stderr


def test_the_gate_renders_without_a_second_values_schema_check(sdk: SdkRenderer) -> None:
    """Helm validates values.schema.json on every SDK render; the gate validates first, so its
    renderer loads the chart without the schema, and schema-invalid values never reach it."""
    invalid = {"checkpoint": {"store": {"backend": "nfs"}}}
    with pytest.raises(RenderError):
        sdk.render(invalid)
    unchecked = SdkRenderer(CHART_DIR, validate_values=False)
    assert unchecked.render(invalid)
    assert [m.document for m in unchecked.render({})] == [m.document for m in sdk.render({})]
