"""The chart's RBAC and its token on every minor's own API server, as its ServiceAccount.

The authorizer of each minor grants the ServiceAccount exactly the chart's Role (its own rules
review), in both scopes; the store needs nothing outside it; what the Role does not grant is
refused with 403. The token the pod's projected volume asks for is issued with the chart's
lifetime, bound to its pod, and stops working with the pod.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_runtime.backends.apiclient import api_client
from checkpoint_runtime.runtime import settings as runtime_settings
from checkpoint_testenv import helm
from checkpoint_testenv.controlplane import SERVICE_ACCOUNT_ISSUER, ControlPlane
from checkpoint_testenv.support.kubetarget import KubeTarget
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.rbac import RecordedStores

FEED = "tn/objectstore/feed-a"
FLOWLOGS = "tn/flowlogs"
COLLECTORS = [
    {"kind": "objectstore", "tailnet": "tn", "feed": "feed-a", "url": "file:///f"},
    {"kind": "flowlogs", "tailnet": "tn", "url": "http://flows.example:8080/v1"},
]
Grant = tuple[str, str, str, str]  # (API group, resource, verb, name or "")


def rules_review(plane: ControlPlane, token: str, namespace: str) -> set[Grant]:
    """What the authorizer says the token's identity may do in `namespace`."""
    review = client.V1SelfSubjectRulesReview(
        spec=client.V1SelfSubjectRulesReviewSpec(namespace=namespace)
    )
    with api_client(plane.configuration(token=token)) as api:
        status = client.AuthorizationV1Api(api).create_self_subject_rules_review(review).status
    assert status is not None
    assert not status.incomplete, status.evaluation_error
    return {
        grant
        for rule in status.resource_rules
        for grant in expand(rule.api_groups, rule.resources, rule.verbs, rule.resource_names)
    }


def granted(release: helm.Release) -> set[Grant]:
    """What the ServiceAccount may do in its coordination namespace beyond what a
    ServiceAccount without any binding may do there (this minor's defaults for every
    authenticated identity, e.g. self reviews, and from 1.37 reading ClusterTrustBundles)."""
    plane, namespace = release.plane, release.coordination_namespace
    with plane.admin_api() as api:
        body = client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="unbound"))
        client.CoreV1Api(api).create_namespaced_service_account(namespace, body)
    everyone = rules_review(plane, plane.service_account_token(namespace, "unbound"), namespace)
    return rules_review(plane, release.token, namespace) - everyone


def role_grants(release: helm.Release) -> set[Grant]:
    """What the chart's Role, as rendered, grants."""
    (role,) = [doc for doc in release.manifest if doc["kind"] == "Role"]
    return {
        grant
        for rule in role["rules"]
        for grant in expand(
            rule["apiGroups"], rule["resources"], rule["verbs"], rule.get("resourceNames")
        )
    }


def expand(
    groups: list[str], resources: list[str], verbs: list[str], names: list[str] | None
) -> set[Grant]:
    return {
        (group, resource, verb, name)
        for group in groups
        for resource in resources
        for verb in verbs
        for name in (names or [""])
    }


def forbidden(call: Any) -> str:
    """Run `call`; it must be refused by the authorizer (403); the refusal's message."""
    with pytest.raises(ApiException) as refused:
        call()
    assert refused.value.status == 403, refused.value.body
    return str(refused.value.body)


@pytest.mark.parametrize("scope", ["namespace", "names"])
def test_the_service_account_holds_exactly_the_roles_grants_and_the_store_needs_no_more(
    install: Any, admin: client.CoreV1Api, scope: str
) -> None:
    release: helm.Release = install(
        {"rbac": {"scope": scope}, "checkpoint": {"collectors": COLLECTORS}}
    )
    assert granted(release) == role_grants(release)

    target = KubeTarget.of_release(release, admin)
    try:
        parsed = runtime_settings.parse(release.rendered_config)
        shards = runtime_settings.configured_shards(parsed)
        assert (shards is None) is (scope == "namespace")
        stores = RecordedStores(target.backend, {"shards": shards})
        first = stores.open("a", 1)
        first.batch({f"{FEED}/cursor": "c", f"{FLOWLOGS}/cursor": "f"})
        second = stores.open("b", 2)
        second.take_ownership()
        assert second.get(f"{FEED}/cursor") == "c"
        assert stores.requests
        with release.plane.admin_api() as admin_api:
            rbac = client.RbacAuthorizationV1Api(admin_api)
            roles = rbac.list_namespaced_role(release.coordination_namespace).items
        assert stores.outside(list(roles)) == []
        with api_client(release.configuration()) as api:
            denied(release, api, scope)
    finally:
        target.close()


def denied(release: helm.Release, api: client.ApiClient, scope: str) -> None:
    """What the Role does not grant comes back 403 from this minor's authorizer."""
    core = client.CoreV1Api(api)
    namespace = release.coordination_namespace
    other = release.plane.create_namespace("other")
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="x"), data={"a": "b"})
    forbidden(lambda: core.delete_namespaced_config_map(release.lease_name, namespace))
    forbidden(lambda: core.list_namespaced_secret(namespace))
    forbidden(lambda: core.create_namespaced_config_map(other, body))
    forbidden(lambda: core.list_config_map_for_all_namespaces())
    message = forbidden(
        lambda: client.CoordinationV1Api(api).read_namespaced_lease("someone-elses", namespace)
    )
    assert f"system:serviceaccount:{release.namespace}:{release.service_account}" in message
    if scope == "names":
        forbidden(lambda: core.list_namespaced_config_map(namespace))
        forbidden(lambda: core.read_namespaced_config_map(f"{release.name}-unrelated", namespace))


def jwt_claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    claims: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return claims


def test_the_projected_token_lives_as_the_chart_asks_and_dies_with_its_pod(
    release: helm.Release, minor_control_plane: ControlPlane
) -> None:
    (deployment,) = [doc for doc in release.manifest if doc["kind"] == "Deployment"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    source = volumes["kube-api-access"]["projected"]["sources"][0]["serviceAccountToken"]
    lifetime = source["expirationSeconds"]
    namespace = release.namespace
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="runtime-0"),
        spec=client.V1PodSpec(
            service_account_name=release.service_account,
            containers=[client.V1Container(name="runtime", image="checkpoint-runtime:0.1.0")],
        ),
    )
    with minor_control_plane.admin_api() as admin_api:
        core = client.CoreV1Api(admin_api)
        created = core.create_namespaced_pod(namespace, pod)

        def token_for(seconds: int) -> str:
            request = client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(
                    audiences=[SERVICE_ACCOUNT_ISSUER],
                    expiration_seconds=seconds,
                    bound_object_ref=client.V1BoundObjectReference(
                        kind="Pod", api_version="v1", name="runtime-0", uid=created.metadata.uid
                    ),
                )
            )
            answer = core.create_namespaced_service_account_token(
                release.service_account, namespace, request
            )
            return str(answer.status.token)

        token = token_for(lifetime)
        claims = jwt_claims(token)
        assert claims["exp"] - claims["iat"] == lifetime  # as asked, not extended
        assert claims["aud"] == [SERVICE_ACCOUNT_ISSUER]
        assert claims["kubernetes.io"]["pod"]["name"] == "runtime-0"
        with pytest.raises(ApiException) as short:
            token_for(599)
        assert short.value.status in (400, 422), short.value.body

        configuration = minor_control_plane.configuration(token=token)
        with api_client(configuration) as api:
            client.CoreV1Api(api).list_namespaced_config_map(namespace)
            core.delete_namespaced_pod("runtime-0", namespace, grace_period_seconds=0)

            def refused() -> bool:
                """401 once the server's authentication cache (seconds) lets the token go."""
                try:
                    client.CoreV1Api(api).list_namespaced_config_map(namespace)
                except ApiException as gone:
                    if gone.status == 401:
                        return True
                    raise
                return False

            wait_for(refused, 30, "the token of a deleted pod refused", interval=0.5)
