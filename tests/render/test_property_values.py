"""Property: every values document the chart's schema accepts renders and passes the whole gate,
except where the runtime's own startup check refuses the rendered config (a shard too large for
its ConfigMaps, a state the rendered memory limit cannot hold): there the gate denies it, and
nowhere else.

Documents are generated from charts/checkpoint-runtime/values.schema.json (see
values_strategies.py for how), 1,000 per run, keeping to the cross-field relations the schema
cannot express and the templates refuse with a named error (requests within limits, one
collector per collector namespace; the chart's own tests cover those refusals). The gate runs
in-process, once per document: Helm SDK render, the values schema (which also proves the
generator: a document it did not accept would be denied here), strict Kubernetes schemas, and
the policies compiled to Wasm, both as single documents and as the combined release, all
evaluated by one Wasm instance. A sample of the same documents is also given to conftest
(test_conftest_agrees.py).

The documents are drawn from a seed (values_strategies.property_seed: one per commit, or
$CHECKPOINT_PROPERTY_SEED), so a failure replays; its report names the seed.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, Phase, given, note, seed, settings
from values_strategies import (
    property_seed,
    renderable_values_documents,
    replay_hint,
    values_documents,
)

from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.pipeline import CHECK_RUNTIME, Gate
from checkpoint_gate.runtime_check import memory_limit, rendered_config
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.runtime import startup

GATE = Gate()  # compiled once for all examples (a fixture cannot feed @given's settings)
SEED = property_seed()
HERE = "tests/render/test_property_values.py"

PROPERTY = settings(
    max_examples=1000,
    deadline=None,  # a document takes 50-100 ms, several times that on a loaded machine
    database=None,  # replayed by the seed instead, the same on every machine
    # A document is ~1,000 choices and its gate run ~40 ms: the first draws take longer than
    # too_slow allows for small inputs, by construction, not by a slow or filtering strategy.
    suppress_health_check=[HealthCheck.too_slow],
    # no shrinking: a failing document is reported as drawn (shrinking one took over 5 minutes)
    phases=[Phase.explicit, Phase.generate],
)


@seed(SEED)
@PROPERTY
@given(renderable_values_documents(CHART_DIR / "values.schema.json"))
def test_every_valid_values_document_renders_and_passes_every_policy(
    values: dict[str, Any],
) -> None:
    note(
        replay_hint(
            SEED, f"{HERE}::test_every_valid_values_document_renders_and_passes_every_policy"
        )
    )
    result = GATE.run(values, release="prop", namespace="apps")
    denied = [
        f"{f.check}: {f.message}"
        for f in result.findings
        if f.level.value == "deny" and f.check != CHECK_RUNTIME
    ]
    assert denied == []
    # The one check the schema cannot carry: the runtime's startup check (shard size and memory
    # projections). The gate denies exactly what the runtime refuses on the rendered config, in
    # a container with the rendered memory limit.
    config = rendered_config(result.manifests)
    assert config is not None
    limit = memory_limit(result.manifests)  # what `run` would read from its cgroup
    try:
        startup.check(
            json.loads(config.document["data"]["config.json"]), None if limit is None else limit[0]
        )
        refused = False
    except ConfigError:
        refused = True
    assert refused == bool(result.of_check(CHECK_RUNTIME))
    kinds = {manifest.kind for manifest in result.manifests}
    assert "Deployment" in kinds
    assert kinds.isdisjoint({"ClusterRole", "ClusterRoleBinding"})
    assert GATE.policies._policy.instances_created == 1  # one Wasm instance, reused


@seed(SEED)
@settings(PROPERTY, max_examples=25)
@given(values_documents(CHART_DIR / "values.schema.json"))
def test_generated_documents_are_valid_and_varied_enough_to_matter(values: dict[str, Any]) -> None:
    """The generator produces complete documents the schema accepts (not just the defaults)."""
    note(
        replay_hint(SEED, f"{HERE}::test_generated_documents_are_valid_and_varied_enough_to_matter")
    )
    assert GATE.schema.violations(values) == []
    assert {"checkpoint", "rbac", "serviceAccount", "image"} <= set(values)


def test_requests_above_limits_are_what_the_filter_removes() -> None:
    from values_strategies import requests_within_limits

    base = {
        "resources": {
            "requests": {"cpu": "50m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        }
    }
    values = {**base, "tests": base}
    assert requests_within_limits(values)
    tests = {
        "resources": {
            "requests": {"cpu": "50m", "memory": "1Mi"},
            "limits": {"cpu": "1", "memory": "1Ki"},
        }
    }
    assert not requests_within_limits({**base, "tests": tests})


def test_strings_go_yaml_reads_differently_from_pyyaml_pass_the_gate_as_strings() -> None:
    """Once found by the property test: an annotation value `<<` failed the gate's YAML reading
    (a YAML 1.1 merge tag), though Go YAML, and so the API server, reads it as the string."""
    annotations = {"a": "<<", "b": "=", "c": "08", "d": "true", "e": "y", "f": "1e3"}
    result = GATE.run({"service": {"annotations": annotations}}, release="prop", namespace="apps")
    assert [f.message for f in result.findings if f.level.value == "deny"] == []
    (service,) = [m for m in result.manifests if m.kind == "Service"]
    assert service.document["metadata"]["annotations"] == annotations


def test_a_service_name_starting_with_a_digit_is_denied() -> None:
    """The open chart finding the generator steps around: the gate itself does deny it."""
    result = GATE.run({"fullnameOverride": "5t5hamft"}, release="prop", namespace="apps")
    denied = [f.message for f in result.findings if f.level.value == "deny"]
    assert denied == [
        "HYG-20 Service 5t5hamft: a Service name must be a DNS-1035 label"
        " of at most 63 characters (has 8)"
    ]


def test_requests_above_limits_are_swapped_into_a_renderable_document() -> None:
    from values_strategies import requests_at_most_limits, requests_within_limits

    inverted = {
        "resources": {
            "requests": {"cpu": "2", "memory": "1Gi"},
            "limits": {"cpu": "500m", "memory": "128Mi"},
        },
        "tests": {
            "resources": {
                "requests": {"cpu": "10m", "memory": "16Mi"},
                "limits": {"cpu": "50m", "memory": "32Mi"},
            }
        },
    }
    repaired = requests_at_most_limits(inverted)
    assert requests_within_limits(repaired)
    assert repaired["resources"]["requests"] == {"cpu": "500m", "memory": "128Mi"}
    assert repaired["tests"] == inverted["tests"]
    assert not requests_within_limits(inverted)  # the input is left as it was


def test_the_other_cross_field_relations_are_repaired_not_filtered() -> None:
    """One collector per shard namespace, a Service name starting with a letter (HYG-20), a
    legacy ConfigMap that is not the release's own: each drawn document is repaired to keep
    them (a filter would throw the whole document away), and the repair is a no-op where they
    hold."""
    from values_strategies import (
        collector_namespaces_unique,
        legacy_config_map_not_the_releases,
        legacy_config_map_of_its_own,
        one_collector_per_namespace,
        service_name_starts_with_a_letter,
        service_name_with_a_letter,
    )

    flowlogs = {"kind": "flowlogs", "url": "http://a"}
    shared = {
        "checkpoint": {
            "collectors": [flowlogs, {**flowlogs, "url": "http://b"}, {**flowlogs, "tailnet": "t"}]
        }
    }
    assert not collector_namespaces_unique(shared)
    repaired = one_collector_per_namespace(shared)
    assert repaired["checkpoint"]["collectors"] == [flowlogs, {**flowlogs, "tailnet": "t"}]
    assert collector_namespaces_unique(repaired)
    assert one_collector_per_namespace(repaired) == repaired

    digit = {"fullnameOverride": "5t5hamft"}
    assert not service_name_starts_with_a_letter(digit)
    assert service_name_with_a_letter(digit) == {"fullnameOverride": "ft5hamft"}
    assert service_name_with_a_letter({"fullnameOverride": ""}) == {"fullnameOverride": ""}

    own = {
        "fullnameOverride": "web",
        "serviceAccount": {"create": True},
        "checkpoint": {"store": {"legacyConfigMap": "web-config", "leaseName": "l"}},
    }
    assert not legacy_config_map_not_the_releases(own)
    assert legacy_config_map_of_its_own(own)["checkpoint"]["store"] == {"leaseName": "l"}
    assert own["checkpoint"]["store"]["legacyConfigMap"] == "web-config"  # the input is kept
    other = {**own, "fullnameOverride": "api"}
    assert legacy_config_map_of_its_own(other) == other
