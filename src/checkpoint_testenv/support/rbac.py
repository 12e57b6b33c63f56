"""What RBAC sees a store send: every request of a backend as the authorizer judges it.

A store's backend is wrapped to record each request as (verb, API group, resource, namespace,
name); `role_allows` judges one against Roles the way the RBAC authorizer does, so a test shows
that a Role grants exactly what the store needs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from checkpoint_runtime.backends.base import Backend
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.store.core import Store

_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/[^/]+)/namespaces/(?P<ns>[^/]+)/"
    r"(?P<resource>[^/?]+)(?:/(?P<name>[^/?]+))?"
)


@dataclass(frozen=True)
class Request:
    verb: str
    api_group: str
    resource: str
    namespace: str
    name: str | None


def authorization_request(method: str, url: str) -> Request:
    """The RBAC verb and resource the API server authorises `method url` as."""
    path = "/" + url.split("://", 1)[-1].split("/", 1)[1]
    match = _PATH.match(path)
    assert match, f"unexpected request path {path}"
    name = match["name"]
    verb = {
        ("GET", False): "list",
        ("GET", True): "get",
        ("POST", False): "create",
        ("PUT", True): "update",
        ("PATCH", True): "patch",
        ("DELETE", True): "delete",
        ("DELETE", False): "deletecollection",
    }[(method, name is not None)]
    if "watch=true" in path:
        verb = "watch"
    return Request(verb, match["group"] or "", match["resource"], match["ns"], name)


def record_requests(backend: KubernetesBackend) -> list[Request]:
    """Every request the backend sends, as RBAC sees it."""
    seen: list[Request] = []
    rest: Any = backend.api_client.rest_client
    original = rest.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(authorization_request(method, url))
        return original(method, url, *args, **kwargs)

    rest.request = request
    return seen


def role_allows(roles: list[Any], request: Request) -> bool:
    for role in roles:
        if role.metadata.namespace != request.namespace:
            continue
        for rule in role.rules or []:
            if (
                request.api_group in (rule.api_groups or [])
                and request.resource in (rule.resources or [])
                and request.verb in (rule.verbs or [])
                and (not rule.resource_names or request.name in rule.resource_names)
            ):
                return True
    return False


@dataclass
class RecordedStores:
    """Opens stores on backends from `backend` and records every request they send."""

    backend: Callable[[], Backend]
    options: dict[str, Any] = field(default_factory=dict)
    """Further `Store.open` arguments (e.g. `shards`)."""
    logs: list[list[Request]] = field(default_factory=list)

    def open(self, writer: str, epoch: int) -> Store:
        backend = self.backend()
        assert isinstance(backend, KubernetesBackend)
        self.logs.append(record_requests(backend))
        return Store.open(backend, writer=writer, epoch=epoch, **self.options)

    @property
    def requests(self) -> list[Request]:
        """Every request sent so far, by all the stores opened."""
        return [request for log in self.logs for request in log]

    def outside(self, roles: list[Any]) -> list[Request]:
        """The requests no Role of `roles` grants (each once, sorted)."""
        return sorted({r for r in self.requests if not role_allows(roles, r)}, key=str)
