"""The projected ServiceAccount token as the kubelet keeps it on the test node."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkpoint_testenv.helm import Release
from checkpoint_testenv.node.cluster import NodeCluster

TOKEN_VOLUME = "kube-api-access"  # the chart's projected token volume
TOKEN_EXPIRATION_SECONDS = 600  # the API server refuses a projected token shorter than this


def projected_token_file(node: NodeCluster, pod: Any) -> Path:
    """The projected token the kubelet wrote for `pod`, on the node's disk."""
    uid: str = pod.metadata.uid
    volumes = node.workdir / "kubelet" / "pods" / uid / "volumes"
    return volumes / "kubernetes.io~projected" / TOKEN_VOLUME / "token"


def token_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT (not verified: the API server's TokenReview judges it)."""
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


@dataclass(frozen=True)
class FirstToken:
    """A release, its leader when it was installed, and that leader's first token."""

    release: Release
    holder: str
    pod_name: str
    token_file: Path
    token: str
