"""Bugs the reliability campaign found in code it does not own.

Each test states what SPEC requires. An open bug is a strict xfail: it fails today, and turns
into a failure (XPASS, strict) once fixed, so a fix cannot go unnoticed. A fixed bug keeps its
test as a regression test, marked `@fixed(<the bug as found>)` (recorded for the report only).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes.client.exceptions import ApiException
from rel_support import CountingBackend, leaf_errors

from checkpoint_runtime.backends.file import FileBackend, write_legacy_file
from checkpoint_runtime.errors import (
    CheckpointError,
    ChunksExceededError,
    ConfigError,
    CorruptShardError,
    LegacyFormatError,
    OversizeError,
    WriteUncertainError,
)
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.legacy import decode_legacy, encode_legacy
from checkpoint_runtime.runtime import settings
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.faultproxy import FaultProxy
from checkpoint_testenv.support.kubetarget import KubeTarget

FEED = "tn/objectstore/feed-a"
DEEP = "[" * 100_000
T = TypeVar("T", bound=Callable[..., None])
FIXED: dict[str, str] = {}
"""Test name -> the bug it pinned, for bugs already fixed (listed in docs/reliability.md)."""


def fixed(bug: str) -> Callable[[T], T]:
    """Record that `bug` was found and fixed; the test now guards against a regression."""

    def record(test: T) -> T:
        FIXED[test.__name__] = bug
        return test

    return record


def test_an_open_bug_marked_xfail_is_strict(pytestconfig: pytest.Config) -> None:
    """An xfail that starts passing fails the run (pyproject: xfail_strict), so a fixed bug
    cannot stay marked as open."""
    assert pytestconfig.getini("xfail_strict") is True


@fixed("codec.decode_envelope: deeply nested JSON raises RecursionError, not CorruptShardError")
def test_deeply_nested_envelope_is_a_corrupt_shard() -> None:
    blob = codec.gzip_fixed(DEEP.encode())  # about 150 bytes: admitted by the API server
    with pytest.raises(CorruptShardError):
        codec.decode_shard(FEED, blob)


@fixed("legacy.decode_legacy: deeply nested JSON raises RecursionError, not LegacyFormatError")
def test_deeply_nested_legacy_value_is_a_legacy_format_error() -> None:
    with pytest.raises(LegacyFormatError):
        decode_legacy("old-checkpoints", DEEP)


@fixed("settings.load_document: deeply nested JSON raises RecursionError, not ConfigError")
def test_deeply_nested_config_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(DEEP)
    with pytest.raises(ConfigError):
        settings.load_document(str(path))


def surrogate_envelope(encoding: int) -> bytes:
    group = {
        "kind": "seen",
        "base64": encoding,
        "ids": {"prefix": [0], "suffix": ["\ud800"]},
        "values": {"prefix": [0], "suffix": ["v"]},
    }
    envelope = {"format": "gzip-shards-v1", "shard": FEED, "rows": 1, "groups": [group]}
    return codec.gzip_fixed(json.dumps(envelope).encode())  # ASCII JSON with a \\ud800 escape


@fixed("codec._encode_ids: a lone surrogate id in a base64 group raises UnicodeEncodeError")
def test_lone_surrogate_in_a_base64_id_group_is_a_corrupt_shard() -> None:
    with pytest.raises(CorruptShardError):
        codec.decode_shard(FEED, surrogate_envelope(encoding=1))


@fixed(
    "codec.decode_envelope admits lone surrogates (plain ids) that encode_shard can never "
    "write back (UnicodeEncodeError): the shard opens but can never be persisted again"
)
def test_a_decoded_shard_can_always_be_encoded_again() -> None:
    try:
        rows = codec.decode_shard(FEED, surrogate_envelope(encoding=0))
    except CorruptShardError:
        return  # refusing it at decode time would be a fix too
    codec.encode_shard(FEED, rows)


@fixed(
    "Store.set/batch accept a value with a lone surrogate; persisting it raises "
    "UnicodeEncodeError (not a named error) inside the ExceptionGroup"
)
def test_unencodable_value_is_refused_with_a_named_error(tmp_path: Path) -> None:
    store = Store.open(FileBackend(tmp_path, "cr"), writer="w", epoch=1)
    with pytest.raises((CheckpointError, ExceptionGroup)) as raised:
        store.batch({f"{FEED}/cursor": "\udc80"})
    assert all(isinstance(leaf, CheckpointError) for leaf in leaf_errors(raised.value))


@fixed(
    "KubernetesBackend._resolve: a definitive answer to the read-back (here 403, as a "
    "restarted kube-apiserver gives before its RBAC cache syncs) escapes as ApiRefusedError, "
    "although the write's outcome is unknown (unresolved -> write-uncertain)"
)
def test_unresolvable_read_back_after_a_lost_answer_is_write_uncertain(
    target: KubeTarget, fault_proxy: Callable[[], FaultProxy]
) -> None:
    proxy = fault_proxy()
    lease = target.fresh_lease("bug")
    backend = target.backend(lease, host=proxy.host)
    store = Store.open(backend, writer="w", epoch=1, deadline_seconds=5)
    store.batch({f"{FEED}/cursor": "v1"})
    proxy.drop_response_after_forward(count=1, method="PUT")  # the write commits, unseen
    read = backend.core.read_namespaced_config_map
    calls: list[int] = []

    def forbidden_once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise ApiException(status=403, reason="Forbidden")
        return read(*args, **kwargs)

    backend.core.read_namespaced_config_map = forbidden_once  # type: ignore[method-assign]
    try:
        store.batch({f"{FEED}/cursor": "v2"})
        outcome = "commit"  # a fix that retries the read-back and recognises the write id
    except ExceptionGroup as group:
        outcome = "+".join(type(error).__name__ for error in leaf_errors(group))
    assert target.stored(lease)[FEED].rows[f"{FEED}/cursor"] == "v2"  # it did commit
    assert outcome in ("commit", WriteUncertainError.__name__)


@fixed(
    "migration.migrate_on_open writes the shards that fit before an oversize shard fails "
    "(no error path writes during open); sizes are not checked before the first write"
)
def test_legacy_state_with_a_shard_that_cannot_fit_fails_open_without_writing(
    tmp_path: Path,
) -> None:
    rows = {f"{FEED}/seen/big{index:06d}": random_hex(index) for index in range(5000)}
    rows["tn/flowlogs/cursor"] = "2026-03-01T00:00:00.000000001Z"
    write_legacy_file(tmp_path, "old", encode_legacy(rows))
    backend = CountingBackend(FileBackend(tmp_path, "cr", "old"))
    with pytest.raises(ExceptionGroup) as raised:  # ~1.3 MB compressed: more than one chunk
        Store.open(backend, writer="w", epoch=1, max_chunks=1)
    assert [type(e) for e in leaf_errors(raised.value)] == [ChunksExceededError]
    assert isinstance(leaf_errors(raised.value)[0], OversizeError)
    assert backend.writes == []


def random_hex(seed: int) -> str:
    """512 hex characters of deterministic noise (gzip keeps about half)."""
    return "".join(hashlib.sha512(f"{seed}:{part}".encode()).hexdigest() for part in range(4))


@fixed(
    "settings.load_document catches OSError only: a config file that is not UTF-8 "
    "raises UnicodeDecodeError, not ConfigError"
)
def test_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\xff\xfe{")
    with pytest.raises(ConfigError):
        settings.load_document(str(path))


@fixed(
    "ElectionTimings: leaseDurationSeconds Infinity (accepted by json and the schema) "
    "raises OverflowError from int(), not ConfigError"
)
def test_infinite_lease_duration_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"leaderElection": {"leaseDurationSeconds": Infinity}}')
    with pytest.raises(ConfigError):
        settings.parse(settings.load_document(str(path)))


@fixed(
    "settings: NaN passes the schema's bounds and ElectionTimings' comparisons, so a "
    "config with renewDeadlineSeconds NaN (or deadlineSeconds NaN) is accepted"
)
@pytest.mark.parametrize(
    "document",
    ['{"leaderElection": {"renewDeadlineSeconds": NaN}}', '{"store": {"backend": "file", '
     '"deadlineSeconds": NaN}}'],
    ids=["renew-deadline-nan", "store-deadline-nan"],
)  # fmt: skip
def test_nan_timing_is_a_config_error(tmp_path: Path, document: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(document)
    with pytest.raises(ConfigError):
        settings.parse(settings.load_document(str(path)))
