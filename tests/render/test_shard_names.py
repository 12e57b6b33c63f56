"""The chart's shard names are the runtime's, character for character.

With `rbac.scope=names` the chart pins the Role to names it derives itself (templates/_names.tpl)
while the runtime derives them in Python (`naming.shard_name`, `naming.chunk_slot_name`); the two
must never differ, or the runtime is refused its own shards. Three comparisons:

- the template helpers alone, over arbitrary ASCII Lease names and shard keys (odd characters,
  empty parts, long names, truncation at every boundary), in a scratch chart holding only
  `_names.tpl`: the helper must equal `shard_name` for every input, not only for valid ones; and
  the chunk slot helper equals `chunk_slot_name` for every generation and index below maxChunks;
- the whole chart over generated collector sets and maxChunks: the Role's pinned names equal the
  names the runtime derives from the config.json the same render gives it (its own settings
  parser, so the set of shard keys and maxChunks are the runtime's too): every shard's head and
  its 2 x maxChunks chunk slots, plus the legacy ConfigMap;
- the same renders through the gate: the RBAC policy derives the names a third time (in Rego)
  and denies any difference, so no deny means the policy agrees as well.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from checkpoint_gate.engine import Level
from checkpoint_gate.manifests import Manifest
from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.pipeline import Gate
from checkpoint_gate.render import SdkRenderer
from checkpoint_runtime.constants import (
    CHUNK_GENERATIONS,
    DEFAULT_MAX_CHUNKS,
    MAX_CHUNKS_LIMIT,
    MAX_DNS_SUBDOMAIN,
)
from checkpoint_runtime.format.naming import (
    COLLECTOR_KINDS,
    READABLE_MAX,
    chunk_slot_name,
    shard_name,
)
from checkpoint_runtime.runtime import settings as runtime_settings

PROBE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: probe
data:
  {{- $out := list }}
  {{- range .Values.pairs }}
  {{- $out = append $out (include "checkpoint-runtime.shardName" .) }}
  {{- end }}
  names: {{ $out | toJson | quote }}
  {{- $slots := list }}
  {{- range .Values.slots }}
  {{- $slots = append $slots (include "checkpoint-runtime.chunkSlotNames" . | fromJsonArray) }}
  {{- end }}
  slots: {{ $slots | toJson | quote }}
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> SdkRenderer:
    """A chart of `_names.tpl` and one template that prints shardName of each (lease, shard)."""
    chart = tmp_path_factory.mktemp("probe") / "names-probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: names-probe\nversion: 0.0.0\n")
    shutil.copy(CHART_DIR / "templates" / "_names.tpl", chart / "templates" / "_names.tpl")
    (chart / "templates" / "probe.yaml").write_text(PROBE)
    return SdkRenderer(chart, validate_values=False)


def chart_names(probe: SdkRenderer, pairs: list[tuple[str, str]]) -> list[str]:
    (manifest,) = probe.render({"pairs": [list(pair) for pair in pairs]})
    names: list[str] = json.loads(manifest.document["data"]["names"])
    return names


def chart_slots(probe: SdkRenderer, shards: list[tuple[str, int]]) -> list[list[str]]:
    """chunkSlotNames of each (shard ConfigMap name, maxChunks)."""
    (manifest,) = probe.render({"slots": [list(shard) for shard in shards]})
    slots: list[list[str]] = json.loads(manifest.document["data"]["slots"])
    return slots


def runtime_slots(shard: str, max_chunks: int) -> list[str]:
    return [
        chunk_slot_name(shard, generation, index)
        for generation in CHUNK_GENERATIONS
        for index in range(max_chunks)
    ]


ascii_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=300)
# Mostly the characters names are made of, so runs of dots and dashes and truncation points
# inside them are common rather than rare.
name_text = st.text(st.sampled_from("abcXYZ019-._/"), max_size=300)
pairs = st.lists(st.tuples(st.one_of(ascii_text, name_text), st.one_of(ascii_text, name_text)))

EDGES = [
    ("", ""),
    ("-", "/"),
    ("Lease_Name", "Corp.Example/ObjectStore/Audit"),
    ("a" * MAX_DNS_SUBDOMAIN, "t" * 63 + "/objectstore/" + "f" * 63),
    ("a" * 300, "x" * 300),
    # readable parts cut at READABLE_MAX right after a dot, a dash, inside a run of both
    ("lease", "t" * (READABLE_MAX - 1) + "./x"),
    ("lease", "t" * (READABLE_MAX - 1) + "-x"),
    ("lease", "t" * (READABLE_MAX - 2) + ".-.-x"),
    ("lease.", "--/--"),
    # the Lease prefix cut to the room left, at and around a dot
    ("p" * 154 + ".q" * 50, "s" * READABLE_MAX),
    ("p" * 155 + "." + "q" * 100, "s" * READABLE_MAX),
    ("p" * 156 + "-" + "q" * 100, "s" * (READABLE_MAX + 5)),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs)
@example(EDGES)
def test_the_template_helper_equals_shard_name(
    probe: SdkRenderer, pairs: list[tuple[str, str]]
) -> None:
    assert chart_names(probe, pairs) == [shard_name(lease, shard) for lease, shard in pairs]


# Shard names as the chart meets them: from Lease names and shard keys the schemas admit.
valid_shard_names = st.tuples(
    st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z0-9]{1,63}(/objectstore/[a-z0-9._-]{1,63})?", fullmatch=True),
).map(lambda pair: shard_name(*pair))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(valid_shard_names, st.integers(1, MAX_CHUNKS_LIMIT)), max_size=4))
@example([(shard_name("l" * 63, "t" * 63 + "/objectstore/" + "f" * 63), MAX_CHUNKS_LIMIT)])
@example([(shard_name("cr-checkpoint-runtime", "flowlogs"), 1)])
def test_the_chunk_slot_helper_equals_chunk_slot_name(
    probe: SdkRenderer, shards: list[tuple[str, int]]
) -> None:
    assert chart_slots(probe, shards) == [runtime_slots(name, count) for name, count in shards]


# --- the whole chart, over generated collector sets ----------------------------------------

_SEGMENT = st.from_regex(r"[a-z0-9]([-a-z0-9_.]{0,61}[a-z0-9])?", fullmatch=True).filter(
    lambda segment: segment not in COLLECTOR_KINDS
)
_LONG_SEGMENT = (
    st.integers(1, 63)
    .flatmap(lambda n: st.text(st.sampled_from("ab9-._"), min_size=n, max_size=n))
    .map(lambda text: "a" + text[1:-1] + "z" if len(text) > 1 else "a")
)
segments = st.one_of(_SEGMENT, _LONG_SEGMENT)
lease_names = st.one_of(
    st.just(""),
    st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?", fullmatch=True),
)


@st.composite
def collector(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(sorted(COLLECTOR_KINDS)))
    entry: dict[str, Any] = {"kind": kind}
    if draw(st.booleans()):
        entry["tailnet"] = draw(segments)
    if kind == "objectstore":
        entry["feed"] = draw(segments)
        entry["url"] = "file:///var/lib/feeds/x"
    else:
        entry["url"] = "http://flows.example:8080/v1/flows"
    return entry


def _namespace(entry: dict[str, Any]) -> str:
    return "/".join(
        part for part in (entry.get("tailnet"), entry["kind"], entry.get("feed")) if part
    )


collector_sets = st.lists(collector(), max_size=12, unique_by=_namespace)

GATE = Gate()


def names_values(
    collectors: list[Any], lease: str, legacy: str, max_chunks: int = DEFAULT_MAX_CHUNKS
) -> dict[str, Any]:
    return {
        "rbac": {"scope": "names"},
        "checkpoint": {
            "collectors": collectors,
            "store": {"leaseName": lease, "legacyConfigMap": legacy, "maxChunks": max_chunks},
        },
    }


def pinned_configmap_names(manifests: list[Manifest]) -> list[str]:
    (role,) = [m.document for m in manifests if m.kind == "Role"]
    rules = [rule for rule in role["rules"] if "configmaps" in rule["resources"]]
    pinned = [rule for rule in rules if rule.get("resourceNames")]
    assert all(set(rule["verbs"]) == {"get", "update"} for rule in pinned), rules
    assert [rule["verbs"] for rule in rules if not rule.get("resourceNames")] == [["create"]]
    return [name for rule in pinned for name in rule["resourceNames"]]


def runtime_names(manifests: list[Manifest]) -> list[str]:
    """The names the runtime derives from the config.json of the same render."""
    (config,) = [m.document for m in manifests if m.name.endswith("-config")]
    parsed = runtime_settings.parse(json.loads(config["data"]["config.json"]))
    assert parsed.store.discovery == "names"
    lease = parsed.store.lease_name
    heads = {shard_name(lease, c.namespace) for c in parsed.collectors}
    names = heads | {
        slot for head in heads for slot in runtime_slots(head, parsed.store.max_chunks)
    }
    if parsed.store.legacy_config_map:
        names.add(parsed.store.legacy_config_map)
    return sorted(names)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    collector_sets,
    lease_names,
    st.one_of(st.just(""), lease_names.filter(bool)),
    st.integers(1, 16),
)
@example([{"kind": "flowlogs", "url": "http://flows.example:8080/v1/flows"}], "", "", 1)
@example([{"kind": "objectstore", "feed": "big", "url": "file:///x"}], "", "", MAX_CHUNKS_LIMIT)
@example(
    [
        {"kind": "objectstore", "tailnet": "t" * 63, "feed": "f" * 63, "url": "file:///x"},
        {
            "kind": "objectstore",
            "tailnet": "a" * 62 + "z",
            "feed": "b.c" + "d" * 60,
            "url": "s3://b",
        },
    ],
    "l" * 63,
    "legacy-checkpoints",
    DEFAULT_MAX_CHUNKS,
)
def test_the_charts_pinned_names_are_the_runtimes(
    collectors: list[Any], lease: str, legacy: str, max_chunks: int
) -> None:
    # The chart refuses a legacy ConfigMap named like the store's own Lease (the Role would
    # grant update on it); that refusal has its own tests.
    assume(not legacy or legacy != lease)
    values = names_values(collectors, lease, legacy, max_chunks)
    result = GATE.run(values, release="prop", namespace="apps")
    assert [f.message for f in result.findings if f.level is Level.DENY] == []
    pinned = pinned_configmap_names(result.manifests)
    assert pinned == runtime_names(result.manifests)
    assert len(pinned) == len(collectors) * (1 + 2 * max_chunks) + (1 if legacy else 0)


def test_a_name_the_chart_got_wrong_is_denied_by_the_policy(tmp_path: Path) -> None:
    """The third derivation is live: a chart whose helper differs by one digit is denied."""
    chart = tmp_path / "checkpoint-runtime"
    shutil.copytree(CHART_DIR, chart)
    helper = chart / "templates" / "_names.tpl"
    text = helper.read_text(encoding="utf-8")
    assert "sha256sum | trunc 16" in text
    helper.write_text(text.replace("sha256sum | trunc 16", "sha256sum | trunc 15"))
    values = names_values([{"kind": "flowlogs", "url": "http://f.example/v1"}], "", "")
    result = Gate(chart_dir=chart).run(values, release="prop", namespace="apps")
    denied = [f.message for f in result.findings if f.level is Level.DENY]
    assert len(denied) == 1
    assert denied[0].startswith("RBAC-3 Role prop-checkpoint-runtime:")
