"""The API server behaviours the store is built on, checked against the real kube-apiserver.

If any of these stops holding (another server, another version, a mock), the store's reasoning
about conflicts, size limits and uncertain writes no longer applies, so these tests must fail.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT
from checkpoint_testenv.controlplane import ControlPlane


@pytest.fixture
def core(control_plane: ControlPlane) -> Iterator[client.CoreV1Api]:
    with control_plane.admin_api() as api:
        yield client.CoreV1Api(api)


def status_body(error: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(error.body)
    return body


def config_map(name: str, **fields: Any) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name), **fields)


def test_server_is_the_pinned_kube_apiserver(control_plane: ControlPlane) -> None:
    with control_plane.admin_api() as api:
        version = client.VersionApi(api).get_code()
    assert (version.major, version.minor) == ("1", "36")
    assert version.git_version.startswith("v1.36.")


def test_stale_resource_version_is_conflict_and_nothing_is_written(
    core: client.CoreV1Api, namespace: str
) -> None:
    created = core.create_namespaced_config_map(namespace, config_map("cm", data={"v": "1"}))
    stale_version = created.metadata.resource_version
    created.data = {"v": "2"}
    core.replace_namespaced_config_map("cm", namespace, created)

    stale = config_map("cm", data={"v": "3"})
    stale.metadata.resource_version = stale_version
    with pytest.raises(ApiException) as raised:
        core.replace_namespaced_config_map("cm", namespace, stale)

    assert raised.value.status == 409
    assert status_body(raised.value)["reason"] == "Conflict"
    assert core.read_namespaced_config_map("cm", namespace).data == {"v": "2"}


def test_create_of_existing_name_is_already_exists(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, config_map("cm", data={"v": "1"}))
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_config_map(namespace, config_map("cm", data={"v": "2"}))

    assert raised.value.status == 409
    assert status_body(raised.value)["reason"] == "AlreadyExists"
    assert core.read_namespaced_config_map("cm", namespace).data == {"v": "1"}


def test_both_409s_are_told_apart_only_by_the_status_body(
    core: client.CoreV1Api, namespace: str
) -> None:
    created = core.create_namespaced_config_map(namespace, config_map("cm"))
    stale = config_map("cm", data={"v": "x"})
    stale.metadata.resource_version = created.metadata.resource_version
    core.replace_namespaced_config_map("cm", namespace, config_map("cm", data={"v": "y"}))

    errors = []
    for call in (
        lambda: core.create_namespaced_config_map(namespace, config_map("cm")),
        lambda: core.replace_namespaced_config_map("cm", namespace, stale),
    ):
        with pytest.raises(ApiException) as raised:
            call()
        errors.append(raised.value)

    assert [error.status for error in errors] == [409, 409]
    assert errors[0].reason == errors[1].reason  # the HTTP phrase says nothing
    assert [status_body(error)["reason"] for error in errors] == ["AlreadyExists", "Conflict"]


def sized_config_map(name: str, total: int) -> client.V1ConfigMap:
    """Values summing to `total` bytes, split over data and binaryData, with long keys and
    labels that must not count."""
    text_size = total // 3
    binary = b"\xff" * (total - text_size)
    long_key = "k" * 253
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, labels={"a" * 63: "b" * 63}),
        data={long_key: "t" * text_size},
        binary_data={"b" + long_key[1:]: base64.b64encode(binary).decode()},
    )


def test_values_of_exactly_the_limit_are_accepted(core: client.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_config_map(
        namespace, sized_config_map("at-limit", CONFIGMAP_VALUE_LIMIT)
    )
    stored = core.read_namespaced_config_map("at-limit", namespace)
    sizes = [len(v) for v in stored.data.values()]
    sizes += [len(base64.b64decode(v)) for v in stored.binary_data.values()]
    assert sum(sizes) == CONFIGMAP_VALUE_LIMIT
    assert created.metadata.resource_version


def test_one_byte_over_the_limit_is_invalid_too_long(
    core: client.CoreV1Api, namespace: str
) -> None:
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_config_map(
            namespace, sized_config_map("over", CONFIGMAP_VALUE_LIMIT + 1)
        )

    assert raised.value.status == 422
    body = status_body(raised.value)
    assert body["reason"] == "Invalid"
    assert [cause["reason"] for cause in body["details"]["causes"]] == ["FieldValueTooLong"]
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("over", namespace)
    assert missing.value.status == 404


def test_binary_data_counts_decoded_bytes_not_base64(
    core: client.CoreV1Api, namespace: str
) -> None:
    # base64 of the limit is 4/3 of it; only the decoded length may count.
    payload = base64.b64encode(b"\x00" * CONFIGMAP_VALUE_LIMIT).decode()
    core.create_namespaced_config_map(
        namespace, config_map("binary", binary_data={"blob": payload})
    )


def test_update_without_resource_version_overwrites_unconditionally(
    core: client.CoreV1Api, namespace: str
) -> None:
    core.create_namespaced_config_map(namespace, config_map("cm", data={"writer": "a"}))
    core.replace_namespaced_config_map("cm", namespace, config_map("cm", data={"writer": "b"}))

    blind = config_map("cm", data={"writer": "c"})
    assert blind.metadata.resource_version is None
    core.replace_namespaced_config_map("cm", namespace, blind)

    assert core.read_namespaced_config_map("cm", namespace).data == {"writer": "c"}


def test_lease_update_without_resource_version_is_invalid(
    control_plane: ControlPlane, namespace: str
) -> None:
    with control_plane.admin_api() as api:
        leases = client.CoordinationV1Api(api)
        spec = client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15)
        leases.create_namespaced_lease(
            namespace, client.V1Lease(metadata=client.V1ObjectMeta(name="lock"), spec=spec)
        )
        blind = client.V1Lease(
            metadata=client.V1ObjectMeta(name="lock"),
            spec=client.V1LeaseSpec(holder_identity="b", lease_duration_seconds=15),
        )
        with pytest.raises(ApiException) as raised:
            leases.replace_namespaced_lease("lock", namespace, blind)

        assert raised.value.status == 422
        assert status_body(raised.value)["reason"] == "Invalid"
        assert leases.read_namespaced_lease("lock", namespace).spec.holder_identity == "a"


def test_create_with_resource_version_is_a_reasonless_500(
    core: client.CoreV1Api, namespace: str
) -> None:
    """The storage layer refuses it with a bare 500 (no reason), which looks like an uncertain
    etcd error: a store must never send a resourceVersion on create."""
    body = config_map("cm")
    body.metadata.resource_version = "1"
    with pytest.raises(ApiException) as raised:
        core.create_namespaced_config_map(namespace, body)

    assert raised.value.status == 500
    status = status_body(raised.value)
    assert status.get("reason", "") == ""
    assert status["message"] == "resourceVersion should not be set on objects to be created"
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("cm", namespace)
    assert missing.value.status == 404
