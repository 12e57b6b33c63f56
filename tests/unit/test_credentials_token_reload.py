"""In a pod the runtime's API clients reread the projected token the kubelet rotates.

Pure logic of the client's in-cluster loader over real files; the rotation itself, on a real
node with a real kubelet and API server, is tests/node/test_node_token_rotation.py.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.config import incluster_config

from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.runtime import credentials


class _Later:
    """The loader's `datetime` module with the clock two minutes on (past its reread period)."""

    timedelta = datetime.timedelta

    class datetime(datetime.datetime):  # stands in for datetime.datetime
        @classmethod
        def now(cls, tz: datetime.tzinfo | None = None) -> datetime.datetime:
            return _REAL_DATETIME.now(tz) + datetime.timedelta(minutes=2)


_REAL_DATETIME = datetime.datetime


def _bearer(configuration: client.Configuration) -> str:
    return str(configuration.get_api_key_with_prefix("BearerToken"))


def test_a_rotated_token_is_reread_by_the_backend_and_the_elector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "token").write_text("first-token")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setattr(credentials, "SERVICE_ACCOUNT_DIR", tmp_path)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")

    configuration = credentials.kube_configuration()
    backend = KubernetesBackend(configuration, "ns", "lease")  # its own deep copy
    elector = client.ApiClient(configuration)
    clients = [backend.api_client.configuration, elector.configuration]
    assert [_bearer(c) for c in clients] == ["bearer first-token"] * 2

    (tmp_path / "token").write_text("second-token")
    assert [_bearer(c) for c in clients] == ["bearer first-token"] * 2  # reread once a minute
    monkeypatch.setattr(incluster_config, "datetime", _Later)
    assert [_bearer(c) for c in clients] == ["bearer second-token"] * 2
    assert configuration.retries == 0
