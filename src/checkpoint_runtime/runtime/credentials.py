"""API credentials of the runtime: in-cluster in a pod, else a kubeconfig.

Order: `--kubeconfig`, then $KUBECONFIG, then the pod's ServiceAccount (in-cluster config).
Retries are always off (`backends.apiclient`): urllib3's default re-sends a PUT whose answer
was lost.

In a pod the token is a projected, short-lived one that the kubelet replaces before it expires:
the in-cluster loader installs a hook that rereads the token file (at most a minute old) before
each request, on this Configuration and on every copy of it (the backend's and the elector's).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.config import incluster_config

from checkpoint_runtime import limits
from checkpoint_runtime.backends.apiclient import without_retries
from checkpoint_runtime.errors import ConfigError, InputLimitError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_ACCOUNT_NAMESPACE = SERVICE_ACCOUNT_DIR / "namespace"


def kube_configuration(kubeconfig: str | None = None) -> client.Configuration:
    configuration = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path:
        try:
            # Bounded before the client's loader (which has no alias or size limit) reads it.
            limits.check_yaml(limits.read_text(path, "kubeconfig"), "kubeconfig")
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, client_configuration=configuration
            )
        except InputLimitError:
            raise
        except (
            config.ConfigException,
            OSError,
            ValueError,
            TypeError,
            AttributeError,
            KeyError,
            yaml.YAMLError,
        ) as error:
            reason = " ".join(str(error).split())[:200]
            raise ConfigError("kubeconfig", f"cannot use kubeconfig {path}: {reason}") from None
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        try:
            # try_refresh_token: reread the rotated token instead of keeping the first one.
            loader = incluster_config.InClusterConfigLoader(  # type: ignore[no-untyped-call]
                token_filename=str(SERVICE_ACCOUNT_DIR / "token"),
                cert_filename=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
                try_refresh_token=True,
            )
            loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
        except (config.ConfigException, OSError) as error:
            raise ConfigError("kubeconfig", f"in-cluster credentials: {error}") from None
    else:
        raise ConfigError(
            "store.backend",
            "the kubernetes store needs credentials: run in a pod, or pass --kubeconfig "
            "(or set KUBECONFIG)",
        )
    return without_retries(configuration)


def coordination_namespace(configured: str | None) -> str:
    """The namespace of the shards and the Lease: config, then $POD_NAMESPACE, then the pod's."""
    if configured:
        return configured
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    if SERVICE_ACCOUNT_NAMESPACE.is_file():
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    raise ConfigError("store.namespace", "no namespace configured and not running in a pod")
