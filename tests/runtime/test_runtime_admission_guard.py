"""`run` proves its admission policy is enforced before it starts (runtime/admission.py), on the
real API server, as the chart's ServiceAccount.

With admissionPolicy.enabled the chart renders the policy's name into the runtime config; the
runtime then asks for a server-side dry run of a ConfigMap create outside the store's names
(RBAC grants create unpinned, so only the policy can refuse it). Enforced: the policy refuses
the dry run (admission runs on dry-run requests) and the runtime starts. A binding that only
warns, or no binding at all: the dry run is admitted and the runtime refuses to start by name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kubernetes import client

from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.errors import AdmissionPolicyNotEnforcedError
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.runtime import admission
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import RuntimeProcess, runtime_config

VALUES = {
    "admissionPolicy": {"enabled": True},
    "rbac": {"scope": "names"},
    "checkpoint": {
        "collectors": [
            {"kind": "objectstore", "tailnet": "tn1", "feed": "feed-a", "url": "file:///feeds"}
        ]
    },
}
REFUSE_WITHIN = 2.0
"""store.deadlineSeconds of the refused starts: how long an admitted dry run is retried."""


def enforced(release: Release, policy: str) -> bool:
    """One proof attempt as the release's ServiceAccount (the runtime's own check)."""
    backend = KubernetesBackend(
        release.configuration(), release.coordination_namespace, release.lease_name
    )
    try:
        admission.check_enforced(backend, policy, Deadline(0.5))
    except AdmissionPolicyNotEnforcedError:
        return False
    finally:
        backend.close()
    return True


def refused_start(tmp_path: Path, release: Release, name: str) -> str:
    """Start a runtime whose policy is not enforced: exit 2, and the named error's message."""
    bucket = tmp_path / "bucket"
    bucket.mkdir(exist_ok=True)
    config = runtime_config(release, bucket, deadlineSeconds=REFUSE_WITHIN)
    proc = RuntimeProcess(tmp_path, name, config, release.write_kubeconfig(tmp_path / "kc"))
    proc.start()
    assert proc.wait_exit(30) == 2
    (refusal,) = [e for e in proc.logs() if e.get("error") == "AdmissionPolicyNotEnforcedError"]
    assert not [e for e in proc.logs() if e.get("msg") == "waiting for leadership"]
    return str(refusal["msg"])


def test_the_runtime_starts_only_while_its_admission_policy_is_enforced(
    chart_install: Callable[..., Release],
    control_plane: ControlPlane,
    tmp_path: Path,
    procs: list[RuntimeProcess],
) -> None:
    release = chart_install(VALUES, control_plane.create_namespace("guard"))
    policy = release.rendered_config["admissionPolicy"]["name"]
    assert release.rendered_config["admissionPolicy"]["enabled"] is True
    wait_for(lambda: enforced(release, policy), 60, "the policy enforced")

    bucket = tmp_path / "bucket"
    bucket.mkdir()
    kubeconfig = release.write_kubeconfig(tmp_path / "kc")
    started = RuntimeProcess(tmp_path, "guarded", runtime_config(release, bucket), kubeconfig)
    procs.append(started.start())
    wait_for(started.leading, 30, "the guarded runtime leads")
    assert [e for e in started.logs() if e.get("msg") == "admission policy enforced"]
    assert started.terminate() == 0

    with control_plane.admin_api() as api:
        admission_api = client.AdmissionregistrationV1Api(api)
        binding = admission_api.read_validating_admission_policy_binding(policy)
        binding.spec.validation_actions = ["Warn"]
        admission_api.replace_validating_admission_policy_binding(policy, binding)
        wait_for(lambda: not enforced(release, policy), 60, "the warning binding in effect")
        message = refused_start(tmp_path, release, "warned")
        assert f"admission policy {policy} is not enforced" in message
        assert "the API server warned" in message

        admission_api.delete_validating_admission_policy_binding(policy)
        message = refused_start(tmp_path, release, "unbound")
        assert f"admission policy {policy} is not enforced" in message
        assert "binding is missing" in message


def test_the_proof_needs_no_verb_outside_the_namespace_scope_role(
    chart_install: Callable[..., Release], control_plane: ControlPlane
) -> None:
    """The dry run is refused by the policy, not by RBAC, under the default (namespace) Role
    too (the test above runs under the names-scope Role)."""
    values = {**VALUES, "rbac": {"scope": "namespace"}}
    release = chart_install(values, control_plane.create_namespace("guard-ns"))
    policy = release.rendered_config["admissionPolicy"]["name"]
    wait_for(lambda: enforced(release, policy), 60, "the policy enforced")
