"""The NetworkPolicy's egress: open by default, restricted on request to named destinations.

With `networkPolicy.egress.restrict` the policy allows only the API server (kubernetes store),
DNS and the listed destinations, each rule with both destinations and ports. The guards that
keep a restriction from silently allowing everything (no API server address with the kubernetes
store, restrict without the policy) are checked by the schema and, for
`--skip-schema-validation`, by the templates.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import (
    CHART_DIR,
    ROOT,
    Manifest,
    Render,
    coalesce,
    load_yaml,
    one,
    schema_rejection,
)
from helm_python import Chart
from helm_python.errors import HelmRenderError, HelmValuesError
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from checkpoint_testenv.controlplane import ControlPlane  # type: ignore[import-untyped, unused-ignore]

RESTRICTED = load_yaml(ROOT / "ci" / "restricted-egress-values.yaml")
API_CIDRS = ["10.96.0.1/32", "172.18.0.2/32"]


def restricted(**egress: Any) -> dict[str, Any]:
    """Restricted egress with the API server named, plus the given egress overrides."""
    base: dict[str, Any] = {"restrict": True, "apiServer": {"cidrs": API_CIDRS}}
    return {"networkPolicy": {"enabled": True, "egress": {**base, **egress}}}


def egress_of(objects: list[Manifest]) -> list[dict[str, Any]]:
    spec = one(objects, "NetworkPolicy")["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    rules: list[dict[str, Any]] = spec["egress"]
    return rules


def ports_of(rule: dict[str, Any]) -> list[tuple[int, str]]:
    return [(port["port"], port["protocol"]) for port in rule["ports"]]


def test_egress_stays_open_by_default(render: Render) -> None:
    spec = one(render({"networkPolicy": {"enabled": True}}), "NetworkPolicy")["spec"]
    assert spec["policyTypes"] == ["Ingress"]
    assert "egress" not in spec


def test_restricted_egress_allows_the_api_server_dns_and_the_listed_destinations(
    render: Render,
) -> None:
    api, dns, storage, flows = egress_of(render(RESTRICTED))
    assert api["to"] == [{"ipBlock": {"cidr": cidr}} for cidr in API_CIDRS]
    assert ports_of(api) == [(443, "TCP"), (6443, "TCP")]
    assert dns["to"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ]
    assert ports_of(dns) == [(53, "UDP"), (53, "TCP")]
    # Selectors of one entry are one peer (both must match); each CIDR is a peer of its own.
    assert storage["to"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "storage"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "seaweedfs"}},
        }
    ]
    assert ports_of(storage) == [(8333, "TCP")]
    assert flows["to"] == [{"ipBlock": {"cidr": "10.20.30.40/32"}}]
    assert ports_of(flows) == [(8080, "TCP")]


def test_an_entry_with_addresses_and_selectors_and_udp(render: Render) -> None:
    entry = {
        "cidrs": ["169.254.20.10/32", "fd00::a/128"],
        "podSelector": {"matchLabels": {"app": "resolver"}},
        "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53}],
    }
    (_api, rule) = egress_of(render(restricted(dns={"enabled": False}, to=[entry])))
    assert rule["to"] == [
        {"ipBlock": {"cidr": "169.254.20.10/32"}},
        {"ipBlock": {"cidr": "fd00::a/128"}},
        {"podSelector": {"matchLabels": {"app": "resolver"}}},
    ]
    assert ports_of(rule) == [(53, "UDP"), (53, "TCP")]


def test_file_store_needs_no_api_server_rule(render: Render) -> None:
    values = coalesce(
        restricted(apiServer={"cidrs": []}),
        {"checkpoint": {"store": {"backend": "file"}, "file": {"existingClaim": "data"}}},
    )
    (dns,) = egress_of(render(values))
    assert ports_of(dns) == [(53, "UDP"), (53, "TCP")]


def test_restriction_with_nothing_allowed_denies_all_egress(render: Render) -> None:
    values = coalesce(
        restricted(apiServer={"cidrs": []}, dns={"enabled": False}),
        {"checkpoint": {"store": {"backend": "file"}}},
    )
    assert egress_of(render(values)) == []


@pytest.mark.parametrize(
    "values",
    [RESTRICTED, restricted(), restricted(dns={"enabled": False})],
    ids=["ci-file", "api-and-dns", "api-only"],
)
def test_every_egress_rule_names_destinations_and_ports(render: Render, values: Any) -> None:
    for rule in egress_of(render(values)):
        assert rule["to"], rule
        assert rule["ports"], rule


INVALID: list[tuple[str, dict[str, Any], str]] = [
    (
        "restrict-without-policy",
        {"networkPolicy": {"egress": {"restrict": True, "apiServer": {"cidrs": API_CIDRS}}}},
        "/networkPolicy/enabled",
    ),
    (
        "kubernetes-store-without-api-server",
        restricted(apiServer={"cidrs": []}),
        "/networkPolicy/egress/apiServer/cidrs",
    ),
    (
        "cidr-without-prefix",
        restricted(apiServer={"cidrs": ["10.96.0.1"]}),
        "/networkPolicy/egress/apiServer/cidrs/0",
    ),
    (
        "cidr-octet-out-of-range",
        restricted(to=[{"cidrs": ["10.0.0.256/32"], "ports": [{"port": 443}]}]),
        "/networkPolicy/egress/to/0/cidrs/0",
    ),
    (
        "port-zero",
        restricted(apiServer={"cidrs": API_CIDRS, "ports": [0]}),
        "/networkPolicy/egress/apiServer/ports/0",
    ),
    (
        "api-server-without-ports",
        restricted(apiServer={"cidrs": API_CIDRS, "ports": []}),
        "/networkPolicy/egress/apiServer/ports",
    ),
    (
        "destination-without-ports",
        restricted(to=[{"cidrs": ["10.0.0.0/8"]}]),
        "/networkPolicy/egress/to/0",
    ),
    (
        "destination-with-empty-ports",
        restricted(to=[{"cidrs": ["10.0.0.0/8"], "ports": []}]),
        "/networkPolicy/egress/to/0/ports",
    ),
    (
        "ports-without-destination",
        restricted(to=[{"ports": [{"port": 443}]}]),
        "/networkPolicy/egress/to/0",
    ),
    (
        "protocol-sctp",
        restricted(to=[{"cidrs": ["10.0.0.0/8"], "ports": [{"port": 1, "protocol": "SCTP"}]}]),
        "/networkPolicy/egress/to/0/ports/0/protocol",
    ),
    (
        "ipblock-passthrough",
        restricted(to=[{"ipBlock": {"cidr": "0.0.0.0/0"}, "ports": [{"port": 443}]}]),
        "/networkPolicy/egress/to/0",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "path"),
    [pytest.param(overrides, path, id=name) for name, overrides, path in INVALID],
)
def test_invalid_egress_values_are_rejected_naming_the_key_path(
    chart: Chart,
    values_schema: dict[str, Any],
    default_values: dict[str, Any],
    overrides: dict[str, Any],
    path: str,
) -> None:
    message = schema_rejection(chart, values_schema, default_values, overrides, path)
    assert "networkPolicy" in message


def test_the_api_server_rule_names_the_missing_key(chart: Chart) -> None:
    """The cross-key rule sits at the root of the schema; Helm names the key it failed on."""
    with pytest.raises(HelmValuesError) as rejected:
        chart.validate_schema(restricted(apiServer={"cidrs": []}))
    assert "/networkPolicy/egress/apiServer/cidrs" in str(rejected.value)


def test_file_store_may_restrict_egress_without_an_api_server(chart: Chart) -> None:
    chart.validate_schema(
        coalesce(
            restricted(apiServer={"cidrs": []}), {"checkpoint": {"store": {"backend": "file"}}}
        )
    )


@pytest.fixture(scope="module")
def unchecked_chart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chart]:
    """The chart without its schema: what `--skip-schema-validation` renders."""
    copy_dir: Path = tmp_path_factory.mktemp("unchecked") / "checkpoint-runtime"
    shutil.copytree(CHART_DIR, copy_dir)
    (copy_dir / "values.schema.json").unlink()
    with Chart.load(copy_dir) as loaded:
        yield loaded


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"networkPolicy": {"egress": {"restrict": True}}},
            "networkPolicy.egress.restrict needs networkPolicy.enabled",
        ),
        (
            restricted(apiServer={"cidrs": []}),
            "networkPolicy.egress.apiServer.cidrs is required when networkPolicy.egress.restrict"
            " is true with the kubernetes store",
        ),
    ],
    ids=["restrict-without-policy", "kubernetes-store-without-api-server"],
)
def test_templates_refuse_an_open_restriction_even_without_the_schema(
    unchecked_chart: Chart, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(HelmRenderError) as refused:
        unchecked_chart.render(values=overrides, name="cr", namespace="ns")
    assert f"checkpoint-runtime: invalid values: {message}" in str(refused.value)


# --- CIDRs: the chart admits exactly what the API server accepts -------------------------------

CIDR_EDGES = [
    "0.0.0.0/0",
    "10.96.0.1/32",
    "10.0.0.0/24",
    "10.0.0.128/25",
    "255.255.255.255/32",
    "::/0",
    "::1/128",
    "fd00::a/128",
    "2001:DB8::/32",
    "2001:db8:0:0:0:0:0:1/128",
    "1:2:3:4:5:6:7::/112",
    "1:b2dc::/103",
    "8000::/1",
    # refused
    "10.0.0.1/24",  # bits set beyond the prefix: only the template sees them
    "10.0.0.64/25",
    "1:B2DC::e/103",
    "::2:3:4:5:6:7:8/64",
    "ffff::/1",
    "10.96.0.1",
    "10.0.0.256/32",
    "10.0.0.0/33",
    ":dF:7:c0E:D::DE:e7F8/55",
    "1::2::3/64",
    "fe80::1%eth0/64",
]
ACCEPTED = set(CIDR_EDGES[:13])


def chart_admits(chart: Chart, cidr: str) -> bool:
    """The syntax and host bits the chart admits (/0 acknowledged: its own test is below)."""
    values = restricted(apiServer={"cidrs": [cidr]}, allowAnyAddress=True)
    try:
        chart.render(values=values, name="cr", namespace="ns")
    except HelmValuesError:
        return False
    except HelmRenderError as refused:
        if f"networkPolicy.egress.apiServer.cidrs[0]: {cidr} has bits set" not in str(refused):
            raise
        return False
    return True


def api_server_accepts(api: client.ApiClient, namespace: str, cidr: str) -> bool:
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "cidr"},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"ipBlock": {"cidr": cidr}}], "ports": [{"port": 443}]}],
        },
    }
    try:
        client.NetworkingV1Api(api).create_namespaced_network_policy(
            namespace, policy, dry_run="All"
        )
    except ApiException as error:
        if error.status != 422:
            raise
        return False
    return True


def test_the_chart_admits_the_cidrs_the_api_server_accepts(
    chart: Chart, control_plane: ControlPlane
) -> None:
    assert {cidr for cidr in CIDR_EDGES if chart_admits(chart, cidr)} == ACCEPTED
    namespace = control_plane.create_namespace("cidr")
    with control_plane.admin_api() as api:
        accepted = {cidr for cidr in CIDR_EDGES if api_server_accepts(api, namespace, cidr)}
    assert accepted == ACCEPTED


@pytest.mark.parametrize("cidr", ["0.0.0.0/0", "::/0"])
def test_every_address_needs_its_acknowledgement(chart: Chart, cidr: str) -> None:
    for values in (
        restricted(apiServer={"cidrs": [cidr]}),
        restricted(to=[{"cidrs": [cidr], "ports": [{"port": 443}]}]),
    ):
        with pytest.raises(HelmRenderError) as refused:
            chart.render(values=values, name="cr", namespace="ns")
        assert f"{cidr} allows every address" in str(refused.value)
        values["networkPolicy"]["egress"]["allowAnyAddress"] = True
        chart.render(values=values, name="cr", namespace="ns")


def test_destination_cidrs_are_checked_too(chart: Chart) -> None:
    values = restricted(to=[{"cidrs": ["10.0.0.0/8", "10.1.2.3/16"], "ports": [{"port": 443}]}])
    with pytest.raises(HelmRenderError) as refused:
        chart.render(values=values, name="cr", namespace="ns")
    assert "networkPolicy.egress.to[0].cidrs[1]: 10.1.2.3/16 has bits set beyond" in str(
        refused.value
    )
