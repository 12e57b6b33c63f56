"""The chart rendered for every minor as Helm sees that minor, checked with that minor's schemas.

The capabilities are the real server's: `--kube-version` its release and `--api-versions` every
group version its discovery serves. Every object (each optional one switched on) must pass the
strict schemas of that minor, generated from its OpenAPI document (what kubeconform -strict
checks, see checkpoint_gate.validate), which kubernetes-validate packages for each minor.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kubernetes import client
from kubernetes_validate import utils

from checkpoint_gate.manifests import manifest_label, parse_helm_template
from checkpoint_gate.validate import KubernetesValidator
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.helm import CHART_DIR
from checkpoint_testenv.matrix import Minor

EVERY_OBJECT = {
    "admissionPolicy": {"enabled": True},
    "podDisruptionBudget": {"enabled": True},
    "networkPolicy": {"enabled": True},
    "serviceMonitor": {"enabled": True},
    "prometheusRule": {"enabled": True},
    "grafanaDashboard": {"enabled": True},
}
NEEDED = {
    "v1",
    "apps/v1",
    "rbac.authorization.k8s.io/v1",
    "coordination.k8s.io/v1",
    "policy/v1",
    "networking.k8s.io/v1",
    "admissionregistration.k8s.io/v1",
}


def served_api_versions(plane: ControlPlane) -> list[str]:
    """Every group version the server's discovery lists."""
    with plane.admin_api() as api:
        core = client.CoreApi(api).get_api_versions().versions
        groups = client.ApisApi(api).get_api_versions().groups
    return sorted([*core, *(v.group_version for g in groups for v in g.versions)])


def test_the_chart_renders_with_the_minors_capabilities_and_passes_its_schemas(
    kube_minor: Minor, minor_control_plane: ControlPlane, tmp_path: Path
) -> None:
    served = served_api_versions(minor_control_plane)
    assert sorted(NEEDED - set(served)) == []
    values = tmp_path / "values.json"
    values.write_text(json.dumps(EVERY_OBJECT))
    versions = [arg for version in served for arg in ("--api-versions", version)]
    command = [
        str(minor_control_plane.bin_dir / "helm"), "template", "cr", str(CHART_DIR),
        "--namespace", "checkpoints", "--kube-version", kube_minor.kube_version, *versions,
        "--values", str(values),
    ]  # fmt: skip
    rendered = subprocess.run(command, capture_output=True, text=True, check=False)
    assert rendered.returncode == 0, rendered.stderr
    manifests = parse_helm_template(rendered.stdout)
    kinds = {manifest.kind for manifest in manifests}
    assert {"ValidatingAdmissionPolicy", "PodDisruptionBudget", "NetworkPolicy"} <= kinds

    assert f"{kube_minor.name}.0" in utils.all_versions()  # this minor's own schemas
    validator = KubernetesValidator(kube_minor.name)
    found = {manifest_label(m): validator.violations(m) for m in manifests}
    assert {label: errors for label, errors in found.items() if errors} == {}
