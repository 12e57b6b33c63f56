"""Proof that the gate can fail: deliberately broken copies of the chart, each denied by name.

Each variant edits one template of a copy of the chart (the edit asserts that the text it
replaces still exists), renders it with the in-process SDK, and expects a deny of one rule id on
one kind of object. If a policy rule is removed or weakened, its variant here fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from checkpoint_gate.engine import Level, PolicyEngine
from checkpoint_gate.render import SdkRenderer

CM_VERBS = 'verbs: ["get", "list", "update", "create"]'
LEASE_PIN = "    resourceNames: [{{ first $leases | quote }}]\n"
ROLE_REF = 'kind: Role\n  name: {{ include "checkpoint-runtime.fullname" . | quote }}'
SUBJECT = "  - kind: ServiceAccount\n"
SERVICE_ACCOUNT = (
    'serviceAccountName: {{ include "checkpoint-runtime.serviceAccountName" . | quote }}\n'
)
VOLUMES = "      volumes:\n"
IMAGE = 'image: {{ include "checkpoint-runtime.image" . | quote }}'
RESOURCES = "          resources:\n            {{- toYaml .Values.resources | nindent 12 }}\n"
API_SERVER_PEERS = (
    "    - to:\n        {{- range $egress.apiServer.cidrs }}\n        - ipBlock:\n"
    "            cidr: {{ . | quote }}\n        {{- end }}\n      ports:\n"
)
RESTRICTED_EGRESS = Path(__file__).resolve().parents[2] / "ci" / "restricted-egress-values.yaml"
LIVENESS = (
    "          livenessProbe:\n            httpGet:\n              path: /healthz\n"
    "              port: http\n            {{- toYaml .Values.probes.liveness | nindent 12 }}\n"
)


# rbac.scope=names with two collectors (one in a tailnet) and a legacy ConfigMap.
NAMES: dict[str, Any] = {
    "rbac": {"scope": "names"},
    "checkpoint": {
        "store": {"legacyConfigMap": "legacy-checkpoints"},
        "collectors": [
            {"kind": "flowlogs", "url": "http://flows.example:8080/v1/flows"},
            {"kind": "objectstore", "tailnet": "corp", "feed": "audit", "url": "file:///f/a"},
        ],
    },
}
NAMES_NONE: dict[str, Any] = {"rbac": {"scope": "names"}}
PINNED_VERBS = 'verbs: ["get", "update"]'
PINNED_NAMES = (
    "    resourceNames:\n      {{- range $names }}\n      - {{ . | quote }}\n      {{- end }}\n"
)


@dataclass(frozen=True)
class Broken:
    template: str
    old: str
    new: str
    rule: str
    kind: str
    # Values that make the broken object render (optional objects are off by default).
    values: dict[str, Any] = field(default_factory=dict)


VARIANTS: dict[str, Broken] = {
    "configmaps-delete-verb": Broken(
        "role.yaml", CM_VERBS, CM_VERBS.replace('"create"', '"create", "delete"'), "RBAC-3", "Role"
    ),
    "configmaps-watch-verb": Broken(
        "role.yaml", CM_VERBS, CM_VERBS.replace('"list"', '"list", "watch"'), "RBAC-3", "Role"
    ),
    "configmaps-patch-verb": Broken(
        "role.yaml", CM_VERBS, CM_VERBS.replace('"update"', '"update", "patch"'), "RBAC-3", "Role"
    ),
    "configmaps-list-missing": Broken(
        "role.yaml", CM_VERBS, CM_VERBS.replace('"list", ', ""), "RBAC-3", "Role"
    ),
    "wildcard-verb": Broken("role.yaml", CM_VERBS, 'verbs: ["*"]', "RBAC-4", "Role"),
    "wildcard-resource": Broken(
        "role.yaml", 'resources: ["configmaps"]', 'resources: ["*"]', "RBAC-4", "Role"
    ),
    "non-resource-urls": Broken(
        "role.yaml",
        "rules:\n",
        'rules:\n  - nonResourceURLs: ["/metrics"]\n    verbs: ["get"]\n',
        "RBAC-4",
        "Role",
    ),
    "cluster-role": Broken(
        "role.yaml", "kind: Role\n", "kind: ClusterRole\n", "RBAC-1", "ClusterRole"
    ),
    "cluster-role-binding": Broken(
        "rolebinding.yaml",
        "kind: RoleBinding\n",
        "kind: ClusterRoleBinding\n",
        "RBAC-1",
        "ClusterRoleBinding",
    ),
    "secrets-access": Broken(
        "role.yaml",
        'resources: ["configmaps"]',
        'resources: ["configmaps", "secrets"]',
        "RBAC-5",
        "Role",
    ),
    "pods-exec-access": Broken(
        "role.yaml",
        "rules:\n",
        'rules:\n  - apiGroups: [""]\n    resources: ["pods/exec"]\n    verbs: ["create"]\n',
        "RBAC-5",
        "Role",
    ),
    "escalate-verb": Broken(
        "role.yaml",
        "rules:\n",
        'rules:\n  - apiGroups: ["rbac.authorization.k8s.io"]\n    resources: ["roles"]\n'
        '    verbs: ["escalate"]\n',
        "RBAC-6",
        "Role",
    ),
    "unpinned-lease-rule": Broken("role.yaml", LEASE_PIN, "", "RBAC-7", "Role"),
    "binding-to-cluster-admin": Broken(
        "rolebinding.yaml",
        ROLE_REF,
        "kind: ClusterRole\n  name: cluster-admin",
        "RBAC-8",
        "RoleBinding",
    ),
    "binding-to-authenticated-group": Broken(
        "rolebinding.yaml",
        SUBJECT,
        "  - kind: Group\n    name: system:authenticated\n    apiGroup: rbac.authorization.k8s.io\n"
        + SUBJECT,
        "RBAC-8",
        "RoleBinding",
    ),
    "root-user": Broken(
        "_helpers.tpl",
        "runAsUser: {{ int64 .Values.podSecurityContext.runAsUser }}",
        "runAsUser: 0",
        "POD-11",
        "Deployment",
    ),
    "unconfined-seccomp": Broken(
        "_helpers.tpl",
        "    - ALL\nseccompProfile:\n  type: RuntimeDefault",
        "    - ALL\nseccompProfile:\n  type: Unconfined",
        "POD-11",
        "Deployment",
    ),
    "privileged-container": Broken(
        "_helpers.tpl", "privileged: false", "privileged: true", "POD-12", "Deployment"
    ),
    "privilege-escalation": Broken(
        "_helpers.tpl",
        "allowPrivilegeEscalation: false",
        "allowPrivilegeEscalation: true",
        "POD-12",
        "Deployment",
    ),
    "writable-root-filesystem": Broken(
        "_helpers.tpl",
        "readOnlyRootFilesystem: true",
        "readOnlyRootFilesystem: false",
        "POD-12",
        "Deployment",
    ),
    "added-capability": Broken(
        "_helpers.tpl",
        "  drop:\n    - ALL",
        "  drop:\n    - ALL\n  add:\n    - NET_ADMIN",
        "POD-12",
        "Pod",
    ),
    "host-network": Broken(
        "deployment.yaml",
        SERVICE_ACCOUNT,
        "hostNetwork: true\n      " + SERVICE_ACCOUNT,
        "POD-13",
        "Deployment",
    ),
    "host-path-volume": Broken(
        "deployment.yaml",
        VOLUMES,
        VOLUMES + "        - name: host\n          hostPath:\n            path: /var/run\n",
        "POD-13",
        "Deployment",
    ),
    "default-service-account": Broken(
        "deployment.yaml",
        SERVICE_ACCOUNT,
        "serviceAccountName: default\n",
        "POD-14",
        "Deployment",
    ),
    "test-pod-with-token": Broken(
        "tests/test-healthz.yaml",
        "automountServiceAccountToken: false",
        "automountServiceAccountToken: true",
        "POD-14",
        "Pod",
    ),
    "latest-image-tag": Broken(
        "deployment.yaml", IMAGE, 'image: "checkpoint-runtime:latest"', "POD-15", "Deployment"
    ),
    "missing-resources": Broken("deployment.yaml", RESOURCES, "", "POD-15", "Deployment"),
    "missing-liveness-probe": Broken("deployment.yaml", LIVENESS, "", "POD-15", "Deployment"),
    "host-path-is-not-an-allowed-volume": Broken(
        "deployment.yaml",
        VOLUMES,
        VOLUMES + "        - name: info\n          downwardAPI:\n            items: []\n",
        "POD-15",
        "Deployment",
    ),
    "selector-with-version-label": Broken(
        "_helpers.tpl",
        'app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}\n'
        "{{- end }}",
        'app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}\n'
        "app.kubernetes.io/version: {{ .Values.image.tag | quote }}\n{{- end }}",
        "HYG-20",
        "Deployment",
    ),
    "egress-rule-to-every-address": Broken(
        "networkpolicy.yaml",
        API_SERVER_PEERS,
        "    - ports:\n",
        "HYG-22",
        "NetworkPolicy",
        yaml.safe_load(RESTRICTED_EGRESS.read_text(encoding="utf-8")),
    ),
    "test-pod-without-delete-policy": Broken(
        "tests/test-healthz.yaml",
        "    helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded\n",
        "",
        "HYG-23",
        "Pod",
    ),
    "test-pod-not-a-hook": Broken(
        "tests/test-healthz.yaml", "    helm.sh/hook: test\n", "", "HYG-23", "Pod"
    ),
    # rbac.scope=names: the pinned rule, the names it pins, and config.json's discovery
    "names-scope-with-list": Broken(
        "role.yaml",
        PINNED_VERBS,
        'verbs: ["get", "list", "update"]',
        "RBAC-3",
        "Role",
        NAMES,
    ),
    "names-scope-create-pinned": Broken(
        "role.yaml",
        PINNED_VERBS,
        'verbs: ["get", "update", "create"]',
        "RBAC-3",
        "Role",
        NAMES,
    ),
    "names-scope-unpinned": Broken("role.yaml", PINNED_NAMES, "", "RBAC-3", "Role", NAMES),
    "names-scope-empty-names-grant-every-name": Broken(
        "role.yaml", "{{- if $names }}", "{{- if true }}", "RBAC-3", "Role", NAMES_NONE
    ),
    "names-scope-wrong-hash-length": Broken(
        "_names.tpl",
        "sha256sum | trunc 16",
        "sha256sum | trunc 15",
        "RBAC-3",
        "Role",
        NAMES,
    ),
    "names-scope-tailnet-left-out": Broken(
        "_names.tpl",
        "{{- if .tailnet }}{{ $parts = append $parts .tailnet }}{{ end }}",
        "",
        "RBAC-3",
        "Role",
        NAMES,
    ),
    "names-scope-legacy-left-out": Broken(
        "_names.tpl",
        "{{- with .Values.checkpoint.store.legacyConfigMap }}"
        "{{ $names = append $names . }}{{ end }}",
        "",
        "RBAC-3",
        "Role",
        NAMES,
    ),
    "names-scope-config-discovers-by-label": Broken(
        "_config.tpl",
        '{{- $_ := set $store "discovery" "names" }}',
        "",
        "RBAC-3",
        "Role",
        NAMES,
    ),
}

# The admission policies on (names scope, a collector, a legacy ConfigMap): each edit of
# admissionpolicy.yaml below changes what the API server would enforce, and the gate compares
# the rendered policies with the ones it derives itself.
ADMISSION: dict[str, Any] = {**NAMES, "admissionPolicy": {"enabled": True}}
VAP, BINDING = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
ADMISSION_EDITS: dict[str, tuple[str, str, str]] = {
    # name: (old text, new text, kind denied)
    "create-validation-loosened": (
        "|| ((object.metadata.name in variables.heads || variables.chunkSlot)"
        " && variables.labelled)",
        "|| object.metadata.name in variables.heads || variables.chunkSlot",
        VAP,
    ),
    "update-validation-dropped": (
        '    - expression: >-\n        !variables.configMap || request.operation != "UPDATE"',
        "    - expression: 'true'\n      message: x\n    - expression: >-\n        true ||"
        ' !variables.configMap || request.operation != "UPDATE"',
        VAP,
    ),
    "lease-validation-removed": (
        "    - expression: 'variables.configMap || object.metadata.name == variables.lease'",
        "    - expression: 'true'",
        VAP,
    ),
    "chunk-slots-unbounded": (
        "int(object.metadata.name.substring(size(h) + 3)) < variables.maxChunks",
        "true",
        VAP,
    ),
    "reserved-names-let-everyone-delete": (
        '(request.operation == "DELETE" && namespaceObject != null',
        '(request.operation == "DELETE" || namespaceObject != null',
        VAP,
    ),
    "reserved-names-skip-leases": (
        'request.resource.resource == "leases" ? {{ if $bucketed }}variables.name in '
        "variables.leases{{ else }}variables.name == variables.lease{{ end }}",
        'request.resource.resource == "leases" ? false',
        VAP,
    ),
    "reserved-names-no-delete": (
        'operations: ["CREATE", "UPDATE", "DELETE"]\n        resources: ["configmaps"]',
        'operations: ["CREATE", "UPDATE"]\n        resources: ["configmaps"]',
        VAP,
    ),
    "reserved-names-in-every-namespace": (
        "    namespaceSelector:\n      matchLabels:\n        kubernetes.io/metadata.name:"
        " {{ $coordination | quote }}\n",
        "",
        VAP,
    ),
    "reserved-names-any-group": (
        "variables.breakGlassGroup in request.userInfo.groups",
        "size(request.userInfo.groups) > 0",
        VAP,
    ),
    "binding-warns-only": ('validationActions: ["Deny"]', 'validationActions: ["Warn"]', BINDING),
    "binding-with-match-resources": (
        '  validationActions: ["Deny"]',
        '  validationActions: ["Deny"]\n  matchResources:\n    namespaceSelector:\n'
        "      matchLabels:\n        nothing: matches",
        BINDING,
    ),
    "reserved-policy-dropped": (
        "kind: ValidatingAdmissionPolicy\nmetadata:\n  name: {{ $reserved",
        'kind: ValidatingAdmissionPolicy\nmetadata:\n  name: {{ printf "%s-other" $reserved',
        VAP,
    ),
}
for _name, (_old, _new, _kind) in ADMISSION_EDITS.items():
    VARIANTS[f"admission-{_name}"] = Broken(
        "admissionpolicy.yaml", _old, _new, "RBAC-11", _kind, ADMISSION
    )


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_broken_chart_is_denied(
    variant: str, chart_copy: Callable[[str, str, str], Path], engine: PolicyEngine
) -> None:
    broken = VARIANTS[variant]
    chart = chart_copy(broken.template, broken.old, broken.new)
    manifests = SdkRenderer(chart).render(broken.values)
    denied = {
        (verdict.rule, verdict.kind)
        for verdict in engine.evaluate(manifests)
        if verdict.level is Level.DENY
    }
    assert (broken.rule, broken.kind) in denied, f"{variant}: denies were {sorted(denied)}"


def test_there_are_at_least_twelve_broken_variants() -> None:
    assert len(VARIANTS) >= 12
    assert len({broken.rule for broken in VARIANTS.values()}) >= 12


@pytest.mark.parametrize(
    "values", [{}, NAMES, NAMES_NONE, ADMISSION], ids=["defaults", "names", "no-names", "admission"]
)
def test_the_unbroken_copy_passes(
    values: dict[str, Any], chart_copy: Callable[[str, str, str], Path], engine: PolicyEngine
) -> None:
    """The copy mechanism itself does not break the chart (a no-op edit passes the gate)."""
    chart = chart_copy("role.yaml", CM_VERBS, CM_VERBS)
    verdicts = engine.evaluate(SdkRenderer(chart).render(values))
    assert [v.message for v in verdicts if v.level is Level.DENY] == []
