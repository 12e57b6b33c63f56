"""Bad inputs, each with the named error it must produce and nothing lost (SPEC §12; issue 7,
scenario 5): chart values (the gate's values schema, with the key path), runtime config
(ConfigError with the key path), stored shards (CorruptShardError / ForeignShardError, no write
during open, on the file store and the API server), legacy state and oversize payloads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from rel_shards import FEED, ROWS, BadShard, bad_shards, plant_in_folder, plant_in_namespace
from rel_support import CountingBackend, leaf_errors

from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.render import SdkRenderer
from checkpoint_gate.validate import ValuesSchema
from checkpoint_runtime.backends.file import FileBackend, write_legacy_file
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import (
    CONFIGMAP_VALUE_LIMIT,
    LABEL_COMPONENT,
    LEGACY_DATA_KEY,
    SHARD_DATA_KEY,
)
from checkpoint_runtime.errors import (
    ConfigError,
    CorruptShardError,
    KeyGrammarError,
    LegacyConflictError,
    LegacyFormatError,
    OversizeError,
)
from checkpoint_runtime.format.legacy import encode_legacy
from checkpoint_runtime.format.naming import shard_name
from checkpoint_runtime.ops import setaside
from checkpoint_runtime.runtime import projection, settings
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.faultproxy import FaultProxy
from checkpoint_testenv.support.kubetarget import KubeTarget

# -- chart values: the gate's values schema names the key path ------------------------------

OBJECTSTORE = {"kind": "objectstore", "url": "file:///data/feed", "feed": "feed-a"}
CHART_VALUES: list[tuple[str, dict[str, Any], str]] = [
    ("store-kind-unknown", {"checkpoint": {"store": {"backend": "s3"}}},
     "checkpoint.store.backend"),
    ("replicas-negative", {"replicaCount": -1}, "replicaCount"),
    ("unknown-top-level-key", {"bogus": 1}, "<root>"),
    ("objectstore-without-feed", {"checkpoint": {"collectors": [{**OBJECTSTORE, "feed": None}]}},
     "checkpoint.collectors[0]"),
    ("feed-named-like-a-kind",
     {"checkpoint": {"collectors": [{**OBJECTSTORE, "feed": "flowlogs"}]}},
     "checkpoint.collectors[0].feed"),
    ("image-tag-empty", {"image": {"tag": ""}}, "image.tag"),
    ("lease-duration-a-string", {"checkpoint": {"leaderElection": {"leaseDurationSeconds": "15"}}},
     "checkpoint.leaderElection.leaseDurationSeconds"),
    ("deadline-zero", {"checkpoint": {"store": {"deadlineSeconds": 0}}},
     "checkpoint.store.deadlineSeconds"),
    ("file-path-relative", {"checkpoint": {"store": {"path": "relative"}}},
     "checkpoint.store.path"),
    ("lease-name-uppercase", {"checkpoint": {"store": {"leaseName": "UPPER"}}},
     "checkpoint.store.leaseName"),
    ("max-seen-keys-zero",
     {"checkpoint": {"collectors": [{**OBJECTSTORE, "maxSeenKeys": 0}]}},
     "checkpoint.collectors[0].maxSeenKeys"),
]  # fmt: skip


@pytest.fixture(scope="module")
def values_gate() -> tuple[SdkRenderer, ValuesSchema]:
    return SdkRenderer(CHART_DIR), ValuesSchema(CHART_DIR / "values.schema.json")


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_none(v) for v in value]
    return value


@pytest.mark.parametrize(
    ("values", "path"), [c[1:] for c in CHART_VALUES], ids=[c[0] for c in CHART_VALUES]
)
def test_bad_chart_values_are_rejected_with_the_key_path(
    values_gate: tuple[SdkRenderer, ValuesSchema], values: dict[str, Any], path: str
) -> None:
    renderer, schema = values_gate
    violations = schema.violations(renderer.merged_values(_without_none(values)))
    assert path in [violation.path or "<root>" for violation in violations], violations


def test_default_chart_values_pass_the_schema(
    values_gate: tuple[SdkRenderer, ValuesSchema],
) -> None:
    """The negative fixtures above fail for their own reason, not because anything fails."""
    renderer, schema = values_gate
    assert schema.violations(renderer.merged_values({})) == []


# -- runtime config: ConfigError names the key path ------------------------------------------

FLOWLOGS = {"kind": "flowlogs", "url": "http://127.0.0.1:9/flows"}
CONFIGS: list[tuple[str, Any, str]] = [
    ("unknown-top-level-key", {"store": {"backend": "file"}, "extra": 1}, ""),
    ("backend-unknown", {"store": {"backend": "s3"}}, "store.backend"),
    ("feed-named-like-a-kind", {"collectors": [{**OBJECTSTORE, "feed": "objectstore"}]},
     "collectors[0].feed"),
    ("two-collectors-one-shard", {"collectors": [FLOWLOGS, FLOWLOGS]}, "collectors[1]"),
    ("lease-not-longer-than-renew",
     {"leaderElection": {"leaseDurationSeconds": 10, "renewDeadlineSeconds": 10}},
     "leaderElection.renewDeadlineSeconds"),
    ("renew-within-jitter-of-retry",
     {"leaderElection": {"renewDeadlineSeconds": 2, "retryPeriodSeconds": 2}},
     "leaderElection.renewDeadlineSeconds"),
    ("lease-duration-fractional", {"leaderElection": {"leaseDurationSeconds": 15.5}},
     "leaderElection.leaseDurationSeconds"),
    ("file-sink-without-path", {"sink": {"kind": "file"}}, "sink.path"),
    ("http-port-out-of-range", {"http": {"port": 70000}}, "http.port"),
    ("deadline-negative", {"store": {"backend": "file", "deadlineSeconds": -1}},
     "store.deadlineSeconds"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("document", "path"), [c[1:] for c in CONFIGS], ids=[c[0] for c in CONFIGS]
)
def test_bad_runtime_config_is_a_config_error_naming_the_key(document: Any, path: str) -> None:
    with pytest.raises(ConfigError) as raised:
        settings.parse(document)
    assert raised.value.path == path


@pytest.mark.parametrize(
    ("text", "match"),
    [("{not json", "not JSON"), ("[1, 2]", "JSON object"), ("", "not JSON")],
    ids=["not-json", "a-list", "empty-file"],
)
def test_unreadable_config_file_is_a_config_error(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        settings.load_document(str(path))


def test_config_whose_shard_cannot_fit_is_refused_at_startup_naming_the_knob() -> None:
    document = {"collectors": [{**OBJECTSTORE, "maxSeenKeys": 1_000_000}]}
    with pytest.raises(ConfigError) as raised:
        projection.check(settings.parse(document))
    assert raised.value.path == "collectors[0].maxSeenKeys"
    assert "lower it to at most" in raised.value.message


def test_a_good_config_parses() -> None:
    parsed = settings.parse({"collectors": [OBJECTSTORE, FLOWLOGS]})
    assert [c.namespace for c in parsed.collectors] == ["objectstore/feed-a", "flowlogs"]


# -- stored shards: fail closed, named error, no write during open ---------------------------

SHARDS = bad_shards()


@pytest.mark.parametrize("bad", SHARDS, ids=[bad.name for bad in SHARDS])
def test_bad_shard_on_the_file_store_fails_open_without_writing(
    tmp_path: Path, bad: BadShard
) -> None:
    plant_in_folder(tmp_path, bad)
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    backend = CountingBackend(FileBackend(tmp_path, "cr-checkpoint-runtime"))
    with pytest.raises(bad.error, match=bad.match):
        Store.open(backend, writer="w", epoch=2)
    assert backend.writes == []
    after = {path.name: path.read_bytes() for path in tmp_path.iterdir() if path.is_file()}
    assert after == before


def _requests(proxy: FaultProxy) -> list[str]:
    return [event.method for event in proxy.events]


@pytest.mark.parametrize("bad", SHARDS, ids=[bad.name for bad in SHARDS])
def test_bad_shard_on_the_api_server_fails_open_with_only_reads(
    target: KubeTarget, fault_proxy: Callable[[], FaultProxy], bad: BadShard
) -> None:
    lease = target.fresh_lease("bad")
    plant_in_namespace(target, lease, bad)
    proxy = fault_proxy()
    with pytest.raises(bad.error, match=bad.match):
        Store.open(target.backend(lease, host=proxy.host), writer="w", epoch=2)
    assert set(_requests(proxy)) == {"GET"}, proxy.events


def test_shard_configmap_with_data_instead_of_binary_data_is_corrupt(
    target: KubeTarget, fault_proxy: Callable[[], FaultProxy]
) -> None:
    lease = target.fresh_lease("bad")
    Store.open(target.backend(lease), writer="w", epoch=1).batch(ROWS)
    name = shard_name(lease, FEED)
    item = target.admin.read_namespaced_config_map(name, target.namespace)
    item.data = {SHARD_DATA_KEY: "plain text"}
    item.binary_data = None
    target.admin.replace_namespaced_config_map(name, target.namespace, item)
    proxy = fault_proxy()
    with pytest.raises(CorruptShardError, match="expected exactly binaryData"):
        Store.open(target.backend(lease, host=proxy.host), writer="w", epoch=2)
    assert set(_requests(proxy)) == {"GET"}


# -- legacy state --------------------------------------------------------------------------------

LEGACY = "old-checkpoints"
LEGACY_VALUES: list[tuple[str, str, type[Exception], str]] = [
    ("not-json", "{truncated", LegacyFormatError, "not JSON"),
    ("top-level-list", '["a", "b"]', LegacyFormatError, "not an object"),
    ("non-string-value", json.dumps({f"{FEED}/cursor": 7}), LegacyFormatError, "not a string"),
    ("key-of-no-grammar", json.dumps({"nothing/known": "x"}), KeyGrammarError, "fits no"),
    ("row-kind-unknown", json.dumps({f"{FEED}/bogus": "x"}), KeyGrammarError, "row kind"),
]


@pytest.mark.parametrize(
    ("value", "error", "match"), [c[1:] for c in LEGACY_VALUES], ids=[c[0] for c in LEGACY_VALUES]
)
def test_bad_legacy_value_fails_open_without_writing(
    tmp_path: Path, value: str, error: type[Exception], match: str
) -> None:
    write_legacy_file(tmp_path, LEGACY, value)
    backend = CountingBackend(FileBackend(tmp_path, "cr", LEGACY))
    with pytest.raises(error, match=match):
        Store.open(backend, writer="w", epoch=1)
    assert backend.writes == []


def test_legacy_configmap_without_its_data_entry_fails_open_with_only_reads(
    target: KubeTarget, fault_proxy: Callable[[], FaultProxy]
) -> None:
    lease = target.fresh_lease("bad")
    legacy = f"{lease}-legacy"
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=legacy), data={"other": "x"})
    target.admin.create_namespaced_config_map(target.namespace, body)
    proxy = fault_proxy()
    with pytest.raises(LegacyFormatError, match=LEGACY_DATA_KEY):
        Store.open(target.backend(lease, host=proxy.host, legacy_name=legacy), writer="w", epoch=1)
    assert set(_requests(proxy)) == {"GET"}


def test_legacy_changed_after_migration_refuses_open_and_writes_nothing(tmp_path: Path) -> None:
    write_legacy_file(tmp_path, LEGACY, encode_legacy(ROWS))
    Store.open(FileBackend(tmp_path, "cr", LEGACY), writer="w", epoch=1)  # migrates
    write_legacy_file(tmp_path, LEGACY, encode_legacy({**ROWS, f"{FEED}/cursor": "rolled back"}))
    backend = CountingBackend(FileBackend(tmp_path, "cr", LEGACY))
    with pytest.raises(LegacyConflictError, match="resolve it"):
        Store.open(backend, writer="w", epoch=2)
    assert backend.writes == []


# -- oversize payloads -------------------------------------------------------------------------


def incompressible_rows(total_bytes: int) -> dict[str, str]:
    """Seen rows of random hex: gzip cannot shrink them below about half their size."""
    rows = {}
    for index in range(total_bytes // 1000):
        rows[f"{FEED}/seen/id{index:06d}"] = os.urandom(500).hex()
    return rows


def test_oversize_shard_is_refused_naming_shard_size_limit_and_rows(
    target: KubeTarget, fault_proxy: Callable[[], FaultProxy]
) -> None:
    lease = target.fresh_lease("bad")
    store = Store.open(target.backend(lease), writer="w", epoch=1)
    store.batch(ROWS)
    before = target.stored(lease)
    proxy = fault_proxy()
    # one chunk slot (maxChunks 1): the state must fit one object, as before chunking
    backend = target.backend(lease, host=proxy.host)
    store = Store.open(backend, writer="w", epoch=1, max_chunks=1)
    big = incompressible_rows(2 * CONFIGMAP_VALUE_LIMIT + 200_000)
    with pytest.raises(ExceptionGroup) as raised:
        store.batch(big)
    (error,) = leaf_errors(raised.value)
    assert isinstance(error, OversizeError)
    assert (error.shard, error.limit, error.rows) == (
        FEED,
        CONFIGMAP_VALUE_LIMIT,
        len(ROWS) + len(big),
    )
    assert error.size > CONFIGMAP_VALUE_LIMIT
    assert set(_requests(proxy)) == {"GET"}  # refused before any write
    assert target.stored(lease) == before  # the previous shard stays as it was
    assert len(store.items(FEED + "/")) == len(ROWS) + len(big)  # nothing dropped from memory
    assert store.dirty_shards() == [FEED]


def test_key_that_fits_no_grammar_is_refused_before_anything_changes(tmp_path: Path) -> None:
    store = Store.open(FileBackend(tmp_path, "cr"), writer="w", epoch=1)
    with pytest.raises(KeyGrammarError):
        store.batch({f"{FEED}/cursor": "x", "objectstore/flowlogs/cursor": "ambiguous"})
    assert store.items() == []


def test_set_aside_keeps_a_corrupt_shard_configmap_and_frees_its_name(
    target: KubeTarget,
) -> None:
    """The repair the refusal names: the ConfigMap is copied without the store's labels (its
    bytes kept) and deleted under its resourceVersion; the store then opens without it."""
    lease = target.fresh_lease("aside")
    bad = next(b for b in bad_shards() if b.name == "not-gzip")
    plant_in_namespace(target, lease, bad)
    with pytest.raises(CorruptShardError):
        Store.open(target.backend(lease), writer="w", epoch=2)
    name = shard_name(lease, FEED)
    before = target.admin.read_namespaced_config_map(name, target.namespace)
    operator = KubernetesBackend(target.admin.api_client.configuration, target.namespace, lease)
    try:
        kept = setaside.set_aside(operator, name)
    finally:
        operator.close()
    copy_name = kept.rpartition("/")[2]
    copy = target.admin.read_namespaced_config_map(copy_name, target.namespace)
    assert copy.binary_data == before.binary_data
    assert copy.metadata.labels[LABEL_COMPONENT] == setaside.SET_ASIDE_COMPONENT
    with pytest.raises(client.ApiException) as gone:
        target.admin.read_namespaced_config_map(name, target.namespace)
    assert gone.value.status == 404
    assert Store.open(target.backend(lease), writer="w", epoch=2).shard_states() == {}
