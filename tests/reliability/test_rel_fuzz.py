"""Fuzzing the decoders and the config loader (SPEC §4, §12; issue 7, scenario 4).

Property: whatever the input, the shard decoder, the legacy reader and the config loader either
succeed or raise one of the named errors of checkpoint_runtime.errors, never another exception;
opening a store over such input never writes (backend calls counted; on the API server, the
proxy sees only GETs). Seeded by this run's exploration (checkpoint_testenv.support.exploration):
EXAMPLES.sample examples per property in `just check`, from the commit's seed, so the examples
rotate with the commit and a failure replays with the seed the summary prints; EXAMPLES.full
with CHECKPOINT_EXPLORE=full (the soak). Inputs that reach the bugs pinned in
test_rel_known_bugs.py (deep nesting, lone surrogates, non-UTF-8 files, Infinity/NaN) are left
to those tests.
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from rel_shards import FEED, LEASE, ROWS, envelope, gz, gzip_bomb, plant_in_folder
from rel_support import CountingBackend

from checkpoint_runtime.backends.file import SHARD_SUFFIX, FileBackend, write_legacy_file
from checkpoint_runtime.constants import MAX_DECODED_ENVELOPE, SHARD_DATA_KEY
from checkpoint_runtime.errors import (
    CheckpointError,
    ConfigError,
    CorruptShardError,
    LegacyFormatError,
)
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.legacy import decode_legacy
from checkpoint_runtime.format.naming import shard_key, shard_name
from checkpoint_runtime.runtime import settings as runtime_settings
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.faultproxy import FaultProxy
from checkpoint_testenv.support import exploration
from checkpoint_testenv.support.kubetarget import KubeTarget

EXPLORATION = exploration.current()
EXAMPLES = EXPLORATION.choose(sample=150, full=2000)
API_MUTATIONS = EXPLORATION.choose(sample=10, full=60)
Test = TypeVar("Test", bound=Callable[..., None])


def fuzz(test: Test) -> Test:
    """hypothesis at this run's depth: EXAMPLES examples drawn from this run's seed (salted
    with the test's name: each property draws its own), no example database."""
    configured = settings(
        database=None,
        deadline=None,
        max_examples=EXAMPLES,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )(test)
    return seed(EXPLORATION.salted(test.__name__))(configured)


VALID = codec.encode_shard(FEED, ROWS).blob
ENVELOPE_BYTES = codec.encode_envelope(FEED, ROWS)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False,
    allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner,
    max_size=5),
    max_leaves=20,
)  # fmt: skip


def decode_or_named(blob: bytes) -> dict[str, str] | None:
    """Rows, or None after a CorruptShardError; any other exception fails the property."""
    try:
        rows = codec.decode_shard(FEED, blob)
    except CorruptShardError:
        return None
    assert all(shard_key(key) == FEED for key in rows)  # ownership is an on-disk invariant
    assert codec.decode_shard(FEED, codec.encode_shard(FEED, rows).blob) == rows
    return rows


# -- the shard decoder -------------------------------------------------------------------------


@fuzz
@given(st.binary(max_size=2048))
def test_random_bytes(blob: bytes) -> None:
    decode_or_named(blob)


@fuzz
@given(st.binary(max_size=512))
def test_random_bytes_behind_a_valid_gzip_header(tail: bytes) -> None:
    decode_or_named(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + tail)


@fuzz
@given(st.binary(max_size=4096))
def test_gzip_of_random_bytes(payload: bytes) -> None:
    decode_or_named(codec.gzip_fixed(payload))


@fuzz
@given(st.integers(0, len(VALID)), st.integers(0, 255), st.sampled_from(["flip", "cut", "insert"]))
def test_mutated_valid_blob(position: int, byte: int, how: str) -> None:
    blob = bytearray(VALID)
    if how == "flip" and position < len(blob):
        blob[position] ^= byte or 1
    elif how == "cut":
        del blob[position:]
    else:
        blob.insert(position, byte)
    decode_or_named(bytes(blob))


@fuzz
@given(st.data())
def test_mutated_envelope_bytes(data: st.DataObject) -> None:
    text = bytearray(ENVELOPE_BYTES)
    for _ in range(data.draw(st.integers(1, 4))):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 16)))
        action = data.draw(st.sampled_from(["delete", "duplicate", "replace"]))
        if action == "delete":
            del text[start:end]
        elif action == "duplicate":
            text[start:start] = text[start:end]
        else:
            text[start:end] = data.draw(st.binary(max_size=8))
    decode_or_named(codec.gzip_fixed(bytes(text)))


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*path, index))
    return found


@fuzz
@given(st.data())
def test_structurally_mutated_envelope(data: st.DataObject) -> None:
    """Replace any node of a valid envelope (a count, a prefix, a group...) by any JSON."""
    document: Any = envelope()
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(document)))
        value = data.draw(json_values)
        if not path:
            document = value
            continue
        parent = document
        for part in path[:-1]:
            parent = parent[part]
        parent[path[-1]] = value
    decode_or_named(gz(document))


def test_bombs_just_past_the_bound_and_split_over_two_members_are_refused() -> None:
    with pytest.raises(CorruptShardError, match="exceeds"):
        codec.decode_shard(FEED, gzip_bomb(MAX_DECODED_ENVELOPE + 1))
    half = gzip_bomb(MAX_DECODED_ENVELOPE // 2 + 1)  # each member is under the bound alone
    with pytest.raises(CorruptShardError, match="exceeds"):  # the bound covers all members
        codec.decode_shard(FEED, half + half)


# -- opening a store over a fuzzed shard file never writes -------------------------------------


@fuzz
@given(st.binary(max_size=1024), st.booleans())
def test_store_open_over_a_fuzzed_shard_file_writes_nothing(junk: bytes, keep_header: bool) -> None:
    with tempfile.TemporaryDirectory() as folder:
        from rel_shards import BadShard

        plant_in_folder(Path(folder), BadShard("fuzz", junk, {}, CorruptShardError, ""))
        if not keep_header:
            (path,) = Path(folder).glob("*" + SHARD_SUFFIX)
            path.write_bytes(junk)
        backend = CountingBackend(FileBackend(folder, LEASE))
        with contextlib.suppress(CheckpointError):
            Store.open(backend, writer="w", epoch=2)
        assert backend.writes == []


# -- the legacy reader -------------------------------------------------------------------------


@fuzz
@given(st.text(max_size=300) | json_values.map(json.dumps))
def test_legacy_reader(value: str) -> None:
    try:
        rows = decode_legacy("old", value)
    except LegacyFormatError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in rows.items())


legacy_keys = st.sampled_from(sorted(ROWS)) | st.text(max_size=30)


@fuzz
@given(st.dictionaries(legacy_keys, st.text(max_size=20) | st.integers(), max_size=6))
def test_store_open_over_fuzzed_legacy_state_writes_nothing_on_error(rows: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        write_legacy_file(Path(folder), "old", json.dumps(rows))
        backend = CountingBackend(FileBackend(folder, LEASE, "old"))
        try:
            store = Store.open(backend, writer="w", epoch=1)
        except CheckpointError:
            assert backend.writes == []
            return
        assert dict(store.items()) == rows  # a legacy state that opens migrated every row


# -- the config loader -------------------------------------------------------------------------


segments = st.sampled_from(["tn", "tn-2", "feed-a", "a.b", "flowlogs", "objectstore", "A", ""])
seconds = st.sampled_from([0, 0.5, 1, 2, 2.4, 10, 15, 15.5, 30, 600, 601, -1])
collector = st.fixed_dictionaries(
    {"kind": st.sampled_from(["objectstore", "flowlogs"]), "url": st.sampled_from(["x", ""])},
    optional={
        "tailnet": segments,
        "feed": segments,
        "maxSeenKeys": st.sampled_from([0, 1, 5000, 1_000_000, 1_000_001]),
        "pollSeconds": seconds,
        "replayWindowSeconds": seconds,
    },
)
config_documents = st.fixed_dictionaries(
    {},
    optional={
        "store": st.fixed_dictionaries(
            {"backend": st.sampled_from(["file", "kubernetes", "s3"])},
            optional={"deadlineSeconds": seconds, "debounceSeconds": seconds, "path": segments},
        ),
        "leaderElection": st.fixed_dictionaries(
            {},
            optional={
                "enabled": st.booleans(),
                "leaseDurationSeconds": seconds,
                "renewDeadlineSeconds": seconds,
                "retryPeriodSeconds": seconds,
            },
        ),
        "sink": st.fixed_dictionaries(
            {"kind": st.sampled_from(["stdout", "file"])}, optional={"path": segments}
        ),
        "http": st.fixed_dictionaries({}, optional={"port": st.sampled_from([0, 1, 8080, 70000])}),
        "collectors": st.lists(collector, max_size=4),
    },
)
"""Documents shaped like the runtime-config schema, near its edges (a hand-written strategy:
hypothesis-jsonschema 0.23.1 cannot build object schemas with the pinned Hypothesis)."""


def parse_or_named(document: Any) -> None:
    """Settings, or a ConfigError (which names its key path); anything else fails."""
    with contextlib.suppress(ConfigError):
        runtime_settings.parse(document)


@fuzz
@given(json_values)
def test_config_parse_of_arbitrary_json(document: Any) -> None:
    parse_or_named(document)


@fuzz
@given(config_documents)
def test_config_parse_of_schema_shaped_documents(document: dict[str, Any]) -> None:
    """Documents near the schema's edges reach the checks a schema cannot make (timings order,
    two collectors sharing a shard) as well as the schema's own."""
    parse_or_named(document)


@fuzz
@given(st.text(max_size=400))
def test_config_file_of_arbitrary_text(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "config.json"
        path.write_text(text, encoding="utf-8")
        try:
            document = runtime_settings.load_document(str(path))
        except ConfigError:
            return
        parse_or_named(document)


# -- on the API server: fuzzed blobs planted by the admin, opened as the chart's account ------


def seeded_mutations(count: int, salt: int) -> list[bytes]:
    rng = random.Random(salt)
    blobs = []
    for _ in range(count):
        blob = bytearray(VALID)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(blob))
            blob[position] = rng.randrange(256)
        if rng.random() < 0.3:
            del blob[rng.randrange(len(blob)) :]
        blobs.append(bytes(blob))
    return blobs


@pytest.mark.parametrize(
    "blob",
    seeded_mutations(API_MUTATIONS, EXPLORATION.salted("api mutations")),
    ids=[f"mutation-{i}" for i in range(API_MUTATIONS)],
)
def test_open_over_a_fuzzed_shard_on_the_api_server_only_reads(
    target: KubeTarget, fault_proxy: Callable[[], FaultProxy], blob: bytes
) -> None:
    lease = target.fresh_lease("fuzz")
    Store.open(target.backend(lease), writer="w", epoch=1).batch(ROWS)
    name = shard_name(lease, FEED)
    item = target.admin.read_namespaced_config_map(name, target.namespace)
    item.binary_data = {SHARD_DATA_KEY: base64.b64encode(blob).decode()}
    target.admin.replace_namespaced_config_map(name, target.namespace, item)
    proxy = fault_proxy()
    with contextlib.suppress(CheckpointError):  # anything else fails the test
        Store.open(target.backend(lease, host=proxy.host), writer="w", epoch=2)
    assert {event.method for event in proxy.events} == {"GET"}
