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
    error_paths,
    load_yaml,
    one,
)
from helm_python import Chart
from helm_python.errors import HelmRenderError, HelmValuesError

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
        {"checkpoint": {"store": "file", "file": {"existingClaim": "data"}}},
    )
    (dns,) = egress_of(render(values))
    assert ports_of(dns) == [(53, "UDP"), (53, "TCP")]


def test_restriction_with_nothing_allowed_denies_all_egress(render: Render) -> None:
    values = coalesce(
        restricted(apiServer={"cidrs": []}, dns={"enabled": False}),
        {"checkpoint": {"store": "file"}},
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
    assert path in error_paths(values_schema, coalesce(default_values, overrides))
    with pytest.raises(HelmValuesError) as rejected:
        chart.validate_schema(overrides)
    assert "networkPolicy" in str(rejected.value)


def test_the_api_server_rule_names_the_missing_key(chart: Chart) -> None:
    """The cross-key rule sits at the root of the schema; Helm names the key it failed on."""
    with pytest.raises(HelmValuesError) as rejected:
        chart.validate_schema(restricted(apiServer={"cidrs": []}))
    assert "/networkPolicy/egress/apiServer/cidrs" in str(rejected.value)


def test_file_store_may_restrict_egress_without_an_api_server(chart: Chart) -> None:
    chart.validate_schema(
        coalesce(restricted(apiServer={"cidrs": []}), {"checkpoint": {"store": "file"}})
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
