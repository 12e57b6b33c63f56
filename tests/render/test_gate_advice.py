"""Valid but surprising values pass the gate with a warning that names the key and the fix.

Each case runs the whole gate (schema, render, policies) on a values document that Helm accepts,
and checks the warning appears; the neighbouring sensible values give no such warning.
"""

from __future__ import annotations

from typing import Any

import pytest

from checkpoint_gate.engine import Level
from checkpoint_gate.pipeline import Gate

CLAIM = {"existingClaim": "checkpoint-data"}
FLOWLOGS = {"kind": "flowlogs", "url": "http://flows.example:8080/v1/flows"}


def warnings_of(gate: Gate, values: dict[str, Any], rule: str) -> list[tuple[str, str]]:
    result = gate.run(values)
    assert not result.denied, result.findings
    return [(f.obj, f.message) for f in result.findings if f.level is Level.WARN and f.rule == rule]


def test_file_store_with_replicas_warns_that_one_runs(gate: Gate) -> None:
    values = {"checkpoint": {"store": {"backend": "file"}, "file": CLAIM}, "replicaCount": 3}
    ((key, message),) = warnings_of(gate, values, "VALUES-1")
    assert key == "replicaCount"
    assert "replicaCount is 3" in message
    assert "exactly one replica" in message


@pytest.mark.parametrize(
    "values",
    [
        {"checkpoint": {"store": {"backend": "file"}, "file": CLAIM}, "replicaCount": 1},
        {"checkpoint": {"store": {"backend": "kubernetes"}}, "replicaCount": 3},
    ],
    ids=["file-one-replica", "kubernetes-three-replicas"],
)
def test_replicas_the_chart_honours_do_not_warn(gate: Gate, values: dict[str, Any]) -> None:
    assert warnings_of(gate, values, "VALUES-1") == []


def test_no_rbac_with_a_generated_service_account_warns(gate: Gate) -> None:
    ((key, message),) = warnings_of(gate, {"rbac": {"create": False}}, "VALUES-2")
    assert key == "rbac.create"
    assert "serviceAccount.name" in message


@pytest.mark.parametrize(
    "values",
    [
        {"rbac": {"create": False}, "serviceAccount": {"name": "checkpoint-runner"}},
        {"rbac": {"create": False}, "serviceAccount": {"create": False, "name": "runner"}},
        {"rbac": {"create": False}, "checkpoint": {"store": {"backend": "file"}, "file": CLAIM}},
        {},
    ],
    ids=["named-account", "external-account", "file-store-needs-no-rbac", "defaults"],
)
def test_no_rbac_warning_when_an_account_is_named_or_not_needed(
    gate: Gate, values: dict[str, Any]
) -> None:
    assert warnings_of(gate, values, "VALUES-2") == []


def test_names_scope_without_collectors_warns(gate: Gate) -> None:
    ((key, message),) = warnings_of(gate, {"rbac": {"scope": "names"}}, "VALUES-3")
    assert key == "rbac.scope"
    assert "checkpoint.collectors is empty" in message
    assert "rbac.scope=namespace" in message


@pytest.mark.parametrize(
    "values",
    [
        {"rbac": {"scope": "names"}, "checkpoint": {"collectors": [FLOWLOGS]}},
        {"rbac": {"scope": "namespace"}},
        {"rbac": {"scope": "names"}, "checkpoint": {"store": {"backend": "file"}, "file": CLAIM}},
    ],
    ids=["names-with-a-collector", "namespace-scope", "file-store-has-no-role"],
)
def test_no_names_scope_warning_with_collectors_or_without_names(
    gate: Gate, values: dict[str, Any]
) -> None:
    assert warnings_of(gate, values, "VALUES-3") == []


def test_file_store_on_an_empty_dir_warns_from_the_render(gate: Gate) -> None:
    ((obj, message),) = warnings_of(gate, {"checkpoint": {"store": {"backend": "file"}}}, "STORE-1")
    assert obj.startswith("Deployment ")
    assert "emptyDir" in message
    assert "checkpoint.file.existingClaim" in message
    assert (
        warnings_of(gate, {"checkpoint": {"store": {"backend": "file"}, "file": CLAIM}}, "STORE-1")
        == []
    )


API = {"cidrs": ["10.96.0.1/32"]}
S3_IN_CLUSTER = {
    "kind": "objectstore",
    "feed": "audit",
    "url": "s3://audit/",
    "endpointUrl": "http://s3.storage.svc:8333",
}
FLOWS_BY_ADDRESS = {"kind": "flowlogs", "url": "http://10.20.30.40:8080/flows"}
FILE_OBJECTSTORE = {"kind": "objectstore", "feed": "local", "url": "file:///var/lib/feeds/a"}
TO_S3 = [{"cidrs": ["10.0.0.0/8"], "ports": [{"port": 8333}]}]


def restricted_egress(collectors: list[dict[str, Any]], **egress: Any) -> dict[str, Any]:
    return {
        "checkpoint": {"collectors": collectors},
        "networkPolicy": {
            "enabled": True,
            "egress": {"restrict": True, "apiServer": API, **egress},
        },
    }


def test_restricted_egress_without_destinations_for_network_collectors_warns(gate: Gate) -> None:
    values = restricted_egress([S3_IN_CLUSTER, FLOWS_BY_ADDRESS, FILE_OBJECTSTORE])
    ((key, message),) = warnings_of(gate, values, "VALUES-4")
    assert key == "networkPolicy.egress.to"
    assert "checkpoint.collectors[0] (http://s3.storage.svc:8333)" in message
    assert "checkpoint.collectors[1] (http://10.20.30.40:8080/flows)" in message
    assert "collectors[2]" not in message  # a file:// object store reads a mounted folder


@pytest.mark.parametrize(
    "values",
    [
        restricted_egress([S3_IN_CLUSTER], to=TO_S3),
        restricted_egress([FILE_OBJECTSTORE]),
        restricted_egress([]),
        {"checkpoint": {"collectors": [S3_IN_CLUSTER]}, "networkPolicy": {"enabled": True}},
    ],
    ids=["destination-listed", "file-objectstore", "no-collectors", "egress-open"],
)
def test_no_egress_destination_warning_when_nothing_is_blocked(
    gate: Gate, values: dict[str, Any]
) -> None:
    assert warnings_of(gate, values, "VALUES-4") == []


def test_restricted_egress_without_dns_for_host_names_warns(gate: Gate) -> None:
    aws = {"kind": "objectstore", "feed": "aws", "url": "s3://bucket/prefix/"}
    collectors = [S3_IN_CLUSTER, aws, FLOWS_BY_ADDRESS]
    values = restricted_egress(collectors, to=TO_S3, dns={"enabled": False})
    ((key, message),) = warnings_of(gate, values, "VALUES-5")
    assert key == "networkPolicy.egress.dns.enabled"
    assert "(s3.amazonaws.com, s3.storage.svc)" in message


def test_an_unparsable_endpoint_is_still_named(gate: Gate) -> None:
    """The schema admits URLs urlsplit cannot parse (e.g. a stray "]"): still a network peer."""
    odd = {"kind": "flowlogs", "url": "https://r]%95"}
    ((_, message),) = warnings_of(gate, restricted_egress([odd]), "VALUES-4")
    assert "checkpoint.collectors[0] (https://r]%95)" in message


@pytest.mark.parametrize(
    "values",
    [
        restricted_egress([S3_IN_CLUSTER], to=TO_S3),
        restricted_egress([FLOWS_BY_ADDRESS], to=TO_S3, dns={"enabled": False}),
        restricted_egress(
            [S3_IN_CLUSTER],
            dns={"enabled": False},
            to=[*TO_S3, {"cidrs": ["169.254.20.10/32"], "ports": [{"port": 53}]}],
        ),
    ],
    ids=["dns-allowed", "addresses-only", "resolver-listed"],
)
def test_no_dns_warning_when_names_resolve_or_none_are_used(
    gate: Gate, values: dict[str, Any]
) -> None:
    assert warnings_of(gate, values, "VALUES-5") == []


def test_a_write_budget_that_could_fill_a_quarter_of_the_etcd_quota_warns(gate: Gate) -> None:
    values = {"checkpoint": {"store": {"etcdQuotaBytes": 512 * 1024**2}}}
    ((key, message),) = warnings_of(gate, values, "ETCD-1")
    assert key == "checkpoint.store.writeBudgetBytesPerSecond"
    assert "158334976 bytes" in message
    assert "29.5% of the declared etcd quota" in message
    assert "past 25%" in message


@pytest.mark.parametrize(
    "values",
    [
        {},
        {
            "checkpoint": {
                "store": {"etcdQuotaBytes": 512 * 1024**2, "writeBudgetBytesPerSecond": 65536}
            }
        },
        {
            "checkpoint": {
                "store": {"backend": "file", "etcdQuotaBytes": 16 * 1024**2},
                "file": CLAIM,
            }
        },
    ],
    ids=["defaults", "budget-lowered", "file-store-writes-no-etcd"],
)
def test_a_budget_within_a_quarter_of_the_quota_does_not_warn(
    gate: Gate, values: dict[str, Any]
) -> None:
    assert warnings_of(gate, values, "ETCD-1") == []
