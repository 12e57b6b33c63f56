"""The fault proxy produces the uncertain outcomes the store must handle, for real.

The central fact: a PUT that committed but whose answer was lost is re-sent by the Python
client's default urllib3 Retry and comes back 409, hiding the success. With retries=0 the
caller sees a transport error instead, while the server has the write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.faultproxy import Action, FaultProxy

ProxyFactory = Callable[[], FaultProxy]


@pytest.fixture
def admin_core(control_plane: ControlPlane) -> Iterator[client.CoreV1Api]:
    with control_plane.admin_api() as api:
        yield client.CoreV1Api(api)


@pytest.fixture
def proxy(fault_proxy: ProxyFactory) -> FaultProxy:
    return fault_proxy()


def proxied_core(
    control_plane: ControlPlane, proxy: FaultProxy, retries: int | None
) -> client.CoreV1Api:
    configuration = control_plane.configuration(host=proxy.host)
    configuration.retries = retries
    return client.CoreV1Api(client.ApiClient(configuration))


def seed(core: client.CoreV1Api, namespace: str) -> client.V1ConfigMap:
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"v": "old"})
    created: client.V1ConfigMap = core.create_namespaced_config_map(namespace, body)
    return created


def new_version(current: client.V1ConfigMap) -> client.V1ConfigMap:
    current.data = {"v": "new"}
    return current


PutFailure = tuple[client.V1ConfigMap, urllib3.exceptions.HTTPError]
FailedPut = Callable[..., PutFailure]


@pytest.fixture
def failed_put(
    control_plane: ControlPlane, proxy: FaultProxy, admin_core: client.CoreV1Api, namespace: str
) -> FailedPut:
    """Seed the ConfigMap, arm one fault on the proxy (`arm()`), and PUT a new version through
    it without retries: the client must see a transport error. The seeded version and that error.
    """

    def put(arm: Callable[[], object], **request: Any) -> PutFailure:
        current = seed(admin_core, namespace)
        core = proxied_core(control_plane, proxy, retries=0)
        arm()
        with pytest.raises(urllib3.exceptions.HTTPError) as raised:
            core.replace_namespaced_config_map("cm", namespace, new_version(current), **request)
        return current, raised.value

    return put


def test_passthrough_serves_reads_and_writes(
    control_plane: ControlPlane, proxy: FaultProxy, admin_core: client.CoreV1Api, namespace: str
) -> None:
    core = proxied_core(control_plane, proxy, retries=0)
    current = seed(core, namespace)
    core.replace_namespaced_config_map("cm", namespace, new_version(current))

    assert admin_core.read_namespaced_config_map("cm", namespace).data == {"v": "new"}
    assert [(e.method, e.action, e.upstream_status) for e in proxy.events] == [
        ("POST", Action.PASSTHROUGH, 201),
        ("PUT", Action.PASSTHROUGH, 200),
    ]


def test_default_retries_resend_a_committed_put_and_report_conflict(
    control_plane: ControlPlane, proxy: FaultProxy, admin_core: client.CoreV1Api, namespace: str
) -> None:
    current = seed(admin_core, namespace)
    core = proxied_core(control_plane, proxy, retries=None)  # the client's default
    proxy.drop_response_after_forward(count=1, method="PUT")

    with pytest.raises(ApiException) as raised:
        core.replace_namespaced_config_map("cm", namespace, new_version(current))

    assert raised.value.status == 409
    assert '"reason":"Conflict"' in raised.value.body
    # The first PUT committed (the server answered 200, which was dropped); the silent re-send
    # carried the now-stale resourceVersion.
    assert [(e.method, e.action, e.upstream_status) for e in proxy.events] == [
        ("PUT", Action.DROP_RESPONSE_AFTER_FORWARD, 200),
        ("PUT", Action.PASSTHROUGH, 409),
    ]
    assert admin_core.read_namespaced_config_map("cm", namespace).data == {"v": "new"}


def test_without_retries_a_committed_put_surfaces_as_transport_error(
    failed_put: FailedPut, proxy: FaultProxy, admin_core: client.CoreV1Api, namespace: str
) -> None:
    current, _ = failed_put(lambda: proxy.drop_response_after_forward(count=1, method="PUT"))

    assert proxy.counters["drop_response_after_forward"] == 1
    assert proxy.counters.get("passthrough", 0) == 0  # nothing was re-sent
    stored = admin_core.read_namespaced_config_map("cm", namespace)
    assert stored.data == {"v": "new"}  # committed, although the client saw an error
    assert stored.metadata.resource_version != current.metadata.resource_version


def test_reset_after_forward_commits_while_the_client_sees_a_reset(
    failed_put: FailedPut, proxy: FaultProxy, admin_core: client.CoreV1Api, namespace: str
) -> None:
    failed_put(lambda: proxy.reset_after_forward(count=1, method="PUT"))

    assert proxy.events[-1].upstream_status == 200
    assert admin_core.read_namespaced_config_map("cm", namespace).data == {"v": "new"}


def test_reset_before_forward_never_reaches_the_server(
    failed_put: FailedPut, proxy: FaultProxy, admin_core: client.CoreV1Api, namespace: str
) -> None:
    failed_put(lambda: proxy.reset_before_forward(count=1, method="PUT"))

    assert proxy.counters.get("forwarded", 0) == 0
    assert [(e.action, e.upstream_status) for e in proxy.events] == [
        (Action.RESET_BEFORE_FORWARD, None)
    ]
    assert admin_core.read_namespaced_config_map("cm", namespace).data == {"v": "old"}


def test_stall_past_the_deadline_times_out_after_the_commit(
    failed_put: FailedPut, proxy: FaultProxy, admin_core: client.CoreV1Api, namespace: str
) -> None:
    _, error = failed_put(
        lambda: proxy.stall(seconds=2.0, count=1, method="PUT"), _request_timeout=0.5
    )

    assert "timed out" in str(error).lower()
    assert admin_core.read_namespaced_config_map("cm", namespace).data == {"v": "new"}


def test_delay_and_method_filter_leave_other_requests_alone(
    control_plane: ControlPlane, proxy: FaultProxy, namespace: str
) -> None:
    core = proxied_core(control_plane, proxy, retries=0)
    seed(core, namespace)
    proxy.delay(seconds=0.2, count=1, method="GET")
    proxy.drop_response_after_forward(count=1, method="DELETE")

    core.read_namespaced_config_map("cm", namespace)  # delayed, then answered
    core.read_namespaced_config_map("cm", namespace)  # rule used up: passthrough
    core.list_namespaced_config_map(namespace)

    assert [e.action for e in proxy.events] == [
        Action.PASSTHROUGH,
        Action.DELAY,
        Action.PASSTHROUGH,
        Action.PASSTHROUGH,
    ]
    assert proxy.counters["forwarded"] == 4


def test_large_and_streamed_answers_pass_through(
    control_plane: ControlPlane, proxy: FaultProxy, admin_core: client.CoreV1Api, namespace: str
) -> None:
    big = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="big"), data={"v": "x" * 900_000})
    admin_core.create_namespaced_config_map(namespace, big)
    core = proxied_core(control_plane, proxy, retries=0)

    assert len(core.read_namespaced_config_map("big", namespace).data["v"]) == 900_000
    events = watch.Watch().stream(
        core.list_namespaced_config_map, namespace, timeout_seconds=5, _request_timeout=10
    )
    first = next(iter(events))
    assert first["type"] == "ADDED"
    assert first["object"].metadata.name == "big"


def test_proxy_reconnects_upstream_after_an_apiserver_restart(
    control_plane: ControlPlane, proxy: FaultProxy, namespace: str
) -> None:
    """A stale upstream connection must not turn a request into a spurious lost answer."""
    core = proxied_core(control_plane, proxy, retries=0)
    seed(core, namespace)

    control_plane.restart_apiserver()

    assert core.read_namespaced_config_map("cm", namespace).data == {"v": "old"}
    assert proxy.events[-1].upstream_status == 200
