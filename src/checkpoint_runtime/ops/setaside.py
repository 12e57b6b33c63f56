"""`set-aside`: move a shard object the store cannot read out of its way, explicitly.

A store never skips or overwrites a shard it cannot read (that would re-emit every record the
shard remembered, on every restart): it refuses to open with UnreadableShardError or
CorruptShardError naming the object and this command. The command keeps the bytes: a file-store
shard is renamed `<name>.shard.set-aside-<UTC time>`; a ConfigMap is copied to
`<name>-set-aside-<time>` without the store's labels, then the original is deleted under its
resourceVersion (this needs an operator's credentials: the runtime's Role cannot delete). The
next start opens without that shard: its collector starts from nothing, as for a new shard.
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import LABEL_COMPONENT
from checkpoint_runtime.errors import CheckpointError

SET_ASIDE_COMPONENT = "checkpoint-shard-set-aside"


def stamp() -> str:
    return time.strftime("%Y%m%dt%H%M%Sz", time.gmtime()).lower()


def set_aside(backend: FileBackend | KubernetesBackend, name: str) -> str:
    """Set the object `name` aside; where its bytes are now."""
    if isinstance(backend, FileBackend):
        return str(backend.set_aside(name, stamp()))
    core = backend.core
    try:
        current: Any = core.read_namespaced_config_map(name, backend.namespace)
    except client.ApiException as error:
        raise CheckpointError(
            f"cannot read ConfigMap {name!r}: {error.status} {error.reason}"
        ) from None
    kept = f"{name[: 253 - 28]}-set-aside-{stamp()}"
    labels = dict(current.metadata.labels or {})
    labels[LABEL_COMPONENT] = SET_ASIDE_COMPONENT
    copy = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(
            name=kept, labels=labels, annotations=current.metadata.annotations
        ),
        data=current.data,
        binary_data=current.binary_data,
    )
    try:
        core.create_namespaced_config_map(backend.namespace, copy)
        core.delete_namespaced_config_map(
            name,
            backend.namespace,
            body=client.V1DeleteOptions(
                preconditions=client.V1Preconditions(
                    resource_version=current.metadata.resource_version
                )
            ),
        )
    except client.ApiException as error:
        raise CheckpointError(
            f"cannot set ConfigMap {name!r} aside: {error.status} {error.reason}"
        ) from None
    return f"ConfigMap {backend.namespace}/{kept}"
