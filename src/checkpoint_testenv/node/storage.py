"""Storage a platform team would have on the node: a claim bound to a hostPath volume, and an
S3 bucket the chart reads with credentials from a Secret.

The folder lives on the node's host (the test's own temporary folder) and belongs to the pods'
UID, so a non-root pod can use it; the claim is what the chart is given (the restricted profile
allows claims, not hostPath).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from kubernetes import client

from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.s3server import S3Server

APP_UID = 10001  # the image's user (the chart's runAsUser)
S3_SECRET = "s3-credentials"


def host_claim(plane: ControlPlane, namespace: str, claim: str, folder: Path) -> str:
    """Create a PersistentVolume on `folder` and claim `claim` bound to it; the volume's name."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chown(folder, APP_UID, APP_UID)
    volume = f"{namespace}-{claim}"
    with plane.admin_api() as api:
        core = client.CoreV1Api(api)
        persistent_volume: Any = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "64Mi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "hostPath": {"path": str(folder), "type": "Directory"},
            },
        }
        claim_body: Any = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": {"requests": {"storage": "64Mi"}},
            },
        }
        core.create_persistent_volume(persistent_volume)  # plain dicts are sent as they are
        core.create_namespaced_persistent_volume_claim(namespace, claim_body)
    return volume


def s3_secret(plane: ControlPlane, namespace: str, server: S3Server) -> None:
    """The Secret `S3_SECRET` holding `server`'s credentials (the values' envFrom names it)."""
    with plane.admin_api() as api:
        client.CoreV1Api(api).create_namespaced_secret(
            namespace,
            client.V1Secret(metadata=client.V1ObjectMeta(name=S3_SECRET), string_data=server.env()),
        )


def s3_values(server: S3Server, bucket: str, feed: str, **collector: Any) -> dict[str, Any]:
    """Chart values: one objectstore collector on `s3://<bucket>/feed` of `server` polling every
    0.5 s (plus `collector`'s fields), its credentials from the Secret `S3_SECRET`."""
    return {
        "envFrom": [{"secretRef": {"name": S3_SECRET}}],
        "checkpoint": {
            "collectors": [
                {
                    "kind": "objectstore",
                    "tailnet": "tn1",
                    "feed": feed,
                    "url": f"s3://{bucket}/feed",
                    "endpointUrl": server.endpoint,
                    "pollSeconds": 0.5,
                    **collector,
                }
            ]
        },
    }


def put_feed_objects(server: S3Server, bucket: str, names: list[str], prefix: str = "feed") -> None:
    """Upload one object per name under `prefix/`, each a JSON line naming itself: what the
    node tests' object-store collectors read and emit."""
    body = [(f"{prefix}/{name}", (json.dumps({"object": name}) + "\n").encode()) for name in names]
    server.put_many(bucket, body)


LONG_NAME_HEX = 480
"""Random hex characters in a `long_object_name`: its seen row takes ~5x the compressed bytes
of a 96-character one, so a few hundred objects make a state of several chunk slots."""


def long_object_name(batch: str) -> str:
    """`<batch>/<240 hex>/<240 hex>.json`: an object name whose seen row compresses badly (all
    random), in segments SeaweedFS accepts (it refuses one over 255 characters). Few large rows
    instead of many small ones: the same bytes of state for a fifth of the uploads, reads,
    listing and records of the objects."""
    half = LONG_NAME_HEX // 2
    return f"{batch}/{secrets.token_hex(half // 2)}/{secrets.token_hex(half // 2)}.json"
