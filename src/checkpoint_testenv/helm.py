"""Install the chart into the test control plane with the pinned helm CLI.

On the bare control plane there is no kubelet or controller-manager, so nothing would ever become
ready: what those tests need is what the chart *creates* (its ServiceAccount, Role and RoleBinding,
to act with exactly the chart's permissions, and the runtime config it rendered, read back from
the server). On the test node (`wait=True`) helm waits for real pods, and `run` drives the rest
of a release's life (test, upgrade, uninstall).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from checkpoint_testenv.binaries import REPO_ROOT
from checkpoint_testenv.controlplane import ControlPlane, write_kubeconfig

CHART_DIR = REPO_ROOT / "charts" / "checkpoint-runtime"
DEFAULT_RELEASE = "cr"
CONFIG_KEY = "config.json"
CONFIG_SUFFIX = "-config"
_WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")


class HelmError(RuntimeError):
    """`helm install` failed; the message carries helm's own output."""


@dataclass
class Release:
    """One installed release and the identities and config it produced."""

    plane: ControlPlane = field(repr=False)
    name: str
    namespace: str
    coordination_namespace: str
    service_account: str
    lease_name: str
    rendered_config: dict[str, Any]
    manifest: list[dict[str, Any]] = field(repr=False)

    @cached_property
    def token(self) -> str:
        """A TokenRequest token for the chart's ServiceAccount (fetched on first use)."""
        return self.plane.service_account_token(self.namespace, self.service_account)

    def configuration(self, host: str | None = None) -> client.Configuration:
        """A Configuration authenticated as the chart's ServiceAccount (retries unconfigured)."""
        return self.plane.configuration(token=self.token, host=host)

    def read_lease(self) -> client.V1Lease:
        """The release's Lease, read as admin (ApiException 404 before a candidate created it)."""
        with self.plane.admin_api() as api:
            return client.CoordinationV1Api(api).read_namespaced_lease(
                self.lease_name, self.coordination_namespace
            )

    def write_kubeconfig(self, path: Path, host: str | None = None) -> Path:
        """A kubeconfig with exactly a pod's credentials: the ServiceAccount's bearer token
        (for `host`, e.g. a fault proxy, instead of the API server when given); `path`."""
        return write_kubeconfig(
            path, host or self.plane.host, self.plane.ca_file, self.service_account, self.token
        )

    def revoke(self, resource: str, verb: str, timeout_seconds: float = 10.0) -> None:
        """Drop `verb` on `resource` from the chart's Role (an operator's mistake, a hand-edited
        Role) and wait until the authorizer refuses it to the chart's ServiceAccount."""
        (role_doc,) = [doc for doc in self.manifest if doc.get("kind") == "Role"]
        namespace = role_doc["metadata"].get("namespace") or self.coordination_namespace
        with self.plane.admin_api() as api:
            rbac = client.RbacAuthorizationV1Api(api)
            name = role_doc["metadata"]["name"]
            role = rbac.read_namespaced_role(name, namespace)
            for rule in role.rules or []:
                if resource in (rule.resources or []):
                    rule.verbs = [v for v in rule.verbs if v != verb] or ["get"]
            rbac.replace_namespaced_role(name, namespace, role)
            review = client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user=f"system:serviceaccount:{self.namespace}:{self.service_account}",
                    resource_attributes=client.V1ResourceAttributes(
                        namespace=namespace, verb=verb, resource=resource
                    ),
                )
            )
            authorization = client.AuthorizationV1Api(api)
            deadline = time.monotonic() + timeout_seconds
            while True:
                status = authorization.create_subject_access_review(review).status
                if status is not None and not status.allowed:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the authorizer still allows {verb} {resource}")
                time.sleep(0.1)


def install(
    plane: ControlPlane,
    namespace: str,
    values: dict[str, Any] | None = None,
    release: str = DEFAULT_RELEASE,
    chart_dir: Path = CHART_DIR,
    wait: bool = False,
    timeout_seconds: int = 300,
    chart_ref: str = "",
    helm_args: tuple[str, ...] = (),
) -> Release:
    """`helm install` the chart into an existing namespace and describe what it created.

    `wait`: helm waits until the release's pods are Ready (only a node makes pods).
    `chart_ref`: install this chart instead of `chart_dir` (e.g. `oci://host/charts/name@sha256:…`,
    with `helm_args` such as `--plain-http`).
    """
    if not chart_ref and not (chart_dir / "Chart.yaml").is_file():
        raise HelmError(f"no chart at {chart_dir}")
    helm_dir = plane.workdir / "helm"
    helm_dir.mkdir(exist_ok=True)
    values_file = helm_dir / f"{namespace}-{release}-values.json"
    values_file.write_text(json.dumps(values or {}))
    waiting = ["--wait", "--timeout", f"{timeout_seconds}s"] if wait else []
    output = run(
        plane,
        "install", release, chart_ref or str(chart_dir), "--namespace", namespace,
        "--values", str(values_file), "--output", "json", *waiting, *helm_args,
    )  # fmt: skip
    if chart_ref:  # helm first says what it pulled ("Pulled: …", "Digest: …")
        output = output[output.index("{") :]
    manifest_text = json.loads(output).get("manifest") or run(
        plane, "get", "manifest", release, "--namespace", namespace
    )
    manifest = [doc for doc in yaml.safe_load_all(manifest_text) if isinstance(doc, dict)]
    config_map = _config_map(manifest, release)
    config_namespace = config_map["metadata"].get("namespace") or namespace
    rendered = read_rendered_config(plane, config_namespace, config_map["metadata"]["name"])
    store = rendered.get("store", {})
    return Release(
        plane=plane,
        name=release,
        namespace=namespace,
        coordination_namespace=store.get("namespace") or namespace,
        service_account=_service_account(manifest),
        # The file store has no Lease (one replica, no election).
        lease_name=store.get("leaseName")
        or ("" if store.get("backend") == "file" else _lease_name_from_role(manifest)),
        rendered_config=rendered,
        manifest=manifest,
    )


def run(plane: ControlPlane, *args: str) -> str:
    """Run the pinned helm against `plane` (its own cache/config/data folders); its stdout."""
    home = plane.workdir / "helm" / "home"
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
        # the discovery cache of the plane's own (not ~/.kube/cache, which outlives the run and
        # is keyed only by host and port: another run's server may reuse the port)
        "KUBECACHEDIR": str(home / "kube-cache"),
        "KUBECONFIG": str(plane.kubeconfig),
    }
    command = [str(plane.bin_dir / "helm"), *args, "--kubeconfig", str(plane.kubeconfig)]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        raise HelmError(f"helm {' '.join(args)} failed:\n{result.stderr}{result.stdout}")
    return result.stdout


def _config_map(manifest: list[dict[str, Any]], release: str) -> dict[str, Any]:
    candidates = [
        doc
        for doc in manifest
        if doc.get("kind") == "ConfigMap"
        and doc["metadata"]["name"].endswith(CONFIG_SUFFIX)
        and CONFIG_KEY in (doc.get("data") or {})
    ]
    if len(candidates) != 1:
        names = [doc["metadata"]["name"] for doc in candidates]
        raise HelmError(
            f"release {release}: expected one '*{CONFIG_SUFFIX}' ConfigMap with {CONFIG_KEY}, "
            f"found {names}"
        )
    return candidates[0]


def read_rendered_config(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    """Read the config back from the server: what was stored, not what helm meant to send."""
    with plane.admin_api() as api:
        stored = client.CoreV1Api(api).read_namespaced_config_map(name, namespace)
    text = (stored.data or {}).get(CONFIG_KEY)
    if text is None:
        raise HelmError(f"ConfigMap {namespace}/{name} has no {CONFIG_KEY} on the server")
    config: dict[str, Any] = json.loads(text)
    return config


def _service_account(manifest: list[dict[str, Any]]) -> str:
    """The account the workload runs as, else the one ServiceAccount the chart created."""
    for doc in manifest:
        if doc.get("kind") in _WORKLOAD_KINDS:
            pod_spec = doc.get("spec", {}).get("template", {}).get("spec", {})
            if pod_spec.get("serviceAccountName"):
                return str(pod_spec["serviceAccountName"])
    accounts = [doc["metadata"]["name"] for doc in manifest if doc.get("kind") == "ServiceAccount"]
    if len(accounts) != 1:
        raise HelmError(f"cannot tell the chart's ServiceAccount: found {accounts}")
    return str(accounts[0])


def _lease_name_from_role(manifest: list[dict[str, Any]]) -> str:
    for doc in manifest:
        if doc.get("kind") != "Role":
            continue
        for rule in doc.get("rules", []):
            if "leases" in rule.get("resources", []) and rule.get("resourceNames"):
                return str(rule["resourceNames"][0])
    raise HelmError("no lease name in the runtime config nor in a Role's resourceNames")


class ReleasePool:
    """Releases of the chart with its default values, each in a namespace of its own that no
    other test has used (what `chart_install()` gives), installed one ahead: while a test runs,
    the next test's release is installed in a thread beside it, so a test waits for none."""

    def __init__(self, plane: ControlPlane, prefix: str = "chart") -> None:
        self._plane = plane
        self._prefix = prefix
        self._installer = ThreadPoolExecutor(1, "release-pool")
        self._next: Future[Release] | None = None

    def _install(self) -> Release:
        return install(self._plane, self._plane.create_namespace(self._prefix))

    def take(self) -> Release:
        """A release no one has taken (an install's failure is raised here, to its taker)."""
        taken = self._next or self._installer.submit(self._install)
        self._next = self._installer.submit(self._install)
        return taken.result()

    def close(self) -> None:
        """Wait for the install under way (its release is left unused) and stop."""
        self._installer.shutdown(wait=True, cancel_futures=True)
