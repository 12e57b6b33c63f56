"""The image on the kubernetes store, against the test API server, as the chart's pod.

The chart is installed (ServiceAccount, Role, RoleBinding, the rendered config); the container
gets exactly what the kubelet would give it: the rendered config.json at the chart's mount, the
ServiceAccount's token, CA and namespace at the in-cluster path, KUBERNETES_SERVICE_HOST/PORT,
POD_NAME/POD_NAMESPACE, and the Deployment's args. It shares the host's network only to reach
the API server on 127.0.0.1 (its HTTP port is bound to 127.0.0.1 for the same reason).
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from image_harness import Podman, chown_for_runtime
from kubernetes import client

from checkpoint_runtime.constants import ANNOTATION_SHARD_KEY, ANNOTATION_WRITER
from checkpoint_runtime.format.naming import object_id
from checkpoint_testenv.controlplane import free_port
from checkpoint_testenv.helm import Release
from checkpoint_testenv.node.observe import lease_holder
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import seen_ids, stored_rows, write_objects

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SHARD = "objectstore/audit"


def deployment_container(release: Release) -> dict[str, Any]:
    (deployment,) = [d for d in release.manifest if d.get("kind") == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def shard_writers(release: Release) -> dict[str, str]:
    """shard key -> writer annotation, of the store's shard ConfigMaps."""
    with release.plane.admin_api() as api:
        listed = client.CoreV1Api(api).list_namespaced_config_map(release.coordination_namespace)
    return {
        cm.metadata.annotations[ANNOTATION_SHARD_KEY]: cm.metadata.annotations[ANNOTATION_WRITER]
        for cm in listed.items
        if (cm.metadata.annotations or {}).get(ANNOTATION_SHARD_KEY)
    }


def test_a_kubernetes_store_run_elects_itself_and_writes_a_shard_as_the_chart_pod(
    podman: Podman,
    image: str,
    chart_install: Callable[..., Release],
    tmp_path: Path,
) -> None:
    names = [f"obj-{i:02d}.json" for i in range(5)]
    write_objects(tmp_path / "feed", names)
    port = free_port()
    release = chart_install(
        values={
            "replicaCount": 1,
            "service": {"port": port},
            "sink": {"kind": "file", "path": "/tmp/records.jsonl"},
            "checkpoint": {
                "store": {"debounceSeconds": 0.2},
                "collectors": [
                    {"kind": "objectstore", "feed": "audit", "url": "file:///data/feed"}
                ],
            },
        }
    )
    config = json.loads(json.dumps(release.rendered_config))
    assert config["store"]["backend"] == "kubernetes"
    assert config["http"]["port"] == port
    config["http"]["bindAddress"] = "127.0.0.1"  # host network: keep the port off other interfaces
    container = deployment_container(release)
    (config_mount,) = [m for m in container["volumeMounts"] if m["name"] == "config"]
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "config.json").write_text(json.dumps(config))

    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text(release.token)
    (account / "ca.crt").write_bytes(Path(release.plane.ca_file).read_bytes())
    (account / "namespace").write_text(release.namespace)
    chown_for_runtime(account)
    api = urllib.parse.urlsplit(release.plane.host)
    pod_name = f"cr-image-{uuid.uuid4().hex[:6]}"
    env = {
        "KUBERNETES_SERVICE_HOST": str(api.hostname),
        "KUBERNETES_SERVICE_PORT": str(api.port),
        "POD_NAME": pod_name,
        "POD_NAMESPACE": release.namespace,
    }
    assert {e["name"] for e in container["env"]} <= set(env)
    options = (
        "--volume", f"{config_dir}:{config_mount['mountPath']}:ro",
        "--volume", f"{account}:{SERVICE_ACCOUNT_DIR}:ro",
        "--volume", f"{tmp_path / 'feed'}:/data/feed:ro",
        *(arg for key, value in env.items() for arg in ("--env", f"{key}={value}")),
    )  # fmt: skip
    pod = podman.start(image, *container["args"], options=options, network="host")
    try:
        wait_for(
            lambda: lease_holder(release).startswith(pod_name) or not pod.running(),
            60,
            "the container becomes the Lease holder",
        )
        holder = lease_holder(release)
        assert holder.startswith(pod_name), pod.logs()
        wait_for(
            lambda: shard_writers(release).get(SHARD) == holder or not pod.running(),
            60,
            "the leader writes its shard",
        )
        assert shard_writers(release).get(SHARD) == holder, pod.logs()
        assert pod.terminate() == 0, pod.logs()
    finally:
        pod.remove()
    assert lease_holder(release) == ""  # released on SIGTERM
    rows = stored_rows(release)
    assert seen_ids(rows, SHARD) == {object_id(name) for name in names}
