"""Planting bad shards where a store will discover them, on the file store and the API server.

A valid shard is written by a real store first, so labels, name and annotations are right;
then its blob or annotations are replaced, bypassing every store check. Opening must then fail
closed with a named error and write nothing (SPEC §4, §12).
"""

from __future__ import annotations

import base64
import functools
import json
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from checkpoint_runtime.backends.file import SHARD_SUFFIX, FileBackend
from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH,
    ANNOTATION_FORMAT,
    ANNOTATION_SHARD_KEY,
    MAX_DECODED_ENVELOPE,
    SHARD_DATA_KEY,
    SHARD_FORMAT_V1,
    SHARD_FORMAT_V2,
)
from checkpoint_runtime.errors import CorruptShardError, ForeignShardError
from checkpoint_runtime.format import codec, codec_v1
from checkpoint_runtime.format.codec import gzip_fast
from checkpoint_runtime.format.naming import shard_name
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.support.kubetarget import KubeTarget

FEED = "tn/objectstore/feed-a"
ROWS = {
    f"{FEED}/cursor": "logs/2026/03/01/000041.json.gz",
    f"{FEED}/scan": '{"after":"logs/2026/03/01/000041.json.gz"}',
    f"{FEED}/seen/bG9ncy8yMDI2LzAzLzAxLzAwMDA0MQ": "2026-03-01T00:00:41.000000001Z",
    f"{FEED}/seen/bG9ncy8yMDI2LzAzLzAxLzAwMDA0Mg": "2026-03-01T00:00:42.000000001Z",
    f"{FEED}/gap/000001": '{"from":"2026-03-01T00:00:00Z","to":"2026-03-01T00:01:00Z"}',
}
LEASE = "cr-checkpoint-runtime"


def envelope() -> dict[str, object]:
    """A v1 envelope: every format ever written stays readable, and fails closed."""
    document: dict[str, object] = json.loads(codec_v1.encode_envelope(FEED, ROWS))
    return document


def gz(document: object) -> bytes:
    return codec.gzip_fixed(json.dumps(document).encode())


def mutated(change: Callable[[dict[str, object]], None]) -> bytes:
    document = envelope()
    change(document)
    return gz(document)


@functools.cache
def gzip_bomb(decoded_bytes: int = MAX_DECODED_ENVELOPE + 1) -> bytes:
    """A small gzip that inflates past the decode bound (zeros compress ~1000:1)."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = b"\0" * (1 << 20)
    whole, rest = divmod(decoded_bytes, len(chunk))
    parts = [compressor.compress(chunk) for _ in range(whole)]
    parts.append(compressor.compress(b"\0" * rest))
    return b"".join(parts) + compressor.flush()


def _first_group(document: dict[str, object]) -> dict[str, dict[str, list[object]]]:
    groups = document["groups"]
    assert isinstance(groups, list)
    group: dict[str, dict[str, list[object]]] = groups[0]
    return group


def _set(document: dict[str, object], key: str, value: object) -> None:
    document[key] = value


@dataclass(frozen=True)
class BadShard:
    """One way a stored shard can be bad, and the named error opening it must raise."""

    name: str
    blob: bytes | None
    """Replacement blob (None: keep the valid one)."""
    annotations: Mapping[str, str | None]
    """Annotation overrides (None removes the key)."""
    error: type[Exception]
    match: str


def _valid_blob() -> bytes:
    return codec.encode_shard(FEED, ROWS).blob


def _with_delta(**fields: object) -> bytes:
    """The valid v2 base followed by a delta member with `fields` changed."""
    base = codec.encode_shard(FEED, ROWS).base
    delta = {
        "format": SHARD_FORMAT_V2,
        "member": "delta",
        "shard": FEED,
        "base": base.crc,
        "rows": len(ROWS),
        "set": {"cursor": "moved"},
        "delete": [],
        **fields,
    }
    return base.member + gzip_fast(json.dumps(delta).encode())


def bad_shards() -> list[BadShard]:
    valid = _valid_blob()
    return [
        BadShard("not-gzip", b"PK\x03\x04 a zip, not gzip", {}, CorruptShardError, "bad gzip"),
        BadShard("truncated", valid[: len(valid) // 2], {}, CorruptShardError, "truncated"),
        BadShard("empty-blob", b"", {}, CorruptShardError, "truncated"),
        BadShard(
            "trailing-bytes", valid + b"\x1f\x8b extra", {}, CorruptShardError, "trailing bytes"
        ),
        BadShard("gzip-bomb", gzip_bomb(), {}, CorruptShardError, "exceeds"),
        BadShard("not-json", codec.gzip_fixed(b"{not json"), {}, CorruptShardError, "not JSON"),
        BadShard(
            "unknown-format-version",
            mutated(lambda d: _set(d, "format", "gzip-shards-v9")),
            {},
            CorruptShardError,
            "unknown format",
        ),
        BadShard(
            "envelope-names-another-shard",
            mutated(lambda d: _set(d, "shard", "tn/objectstore/feed-b")),
            {},
            CorruptShardError,
            "names shard",
        ),
        BadShard(
            "foreign-row-kind",
            mutated(lambda d: _first_group(d).__setitem__("kind", "replay")),  # type: ignore[arg-type]
            {},
            CorruptShardError,
            "not a row kind",
        ),
        BadShard(
            "row-count-mismatch",
            mutated(lambda d: _set(d, "rows", 99)),
            {},
            CorruptShardError,
            "envelope says 99 rows",
        ),
        BadShard(
            "extra-envelope-field",
            mutated(lambda d: _set(d, "extra", True)),
            {},
            CorruptShardError,
            "not the v1 set",
        ),
        BadShard(
            "negative-prefix",
            mutated(lambda d: _first_group(d)["values"]["prefix"].__setitem__(0, -1)),
            {},
            CorruptShardError,
            "negative prefix",
        ),
        BadShard(
            "prefix-past-previous-entry",
            mutated(lambda d: _first_group(d)["values"]["prefix"].__setitem__(0, 5)),
            {},
            CorruptShardError,
            "longer than the previous entry",
        ),
        BadShard(
            "delta-for-another-shard",
            _with_delta(shard="tn/objectstore/feed-b"),
            {},
            CorruptShardError,
            "delta member names shard",
        ),
        BadShard(
            "delta-for-another-base",
            _with_delta(base=0),
            {},
            CorruptShardError,
            "written against another base",
        ),
        BadShard(
            "delta-deletes-an-absent-row",
            _with_delta(set={}, delete=["seen/bm9uZQ"], rows=len(ROWS) - 1),
            {},
            CorruptShardError,
            "absent",
        ),
        BadShard(
            "delta-of-another-format",
            _with_delta(format="gzip-shards-v9"),
            {},
            CorruptShardError,
            "unknown format",
        ),
        BadShard(
            "format-annotation-disagrees-with-the-blob",
            None,
            {ANNOTATION_FORMAT: SHARD_FORMAT_V1},
            CorruptShardError,
            "format annotation",
        ),
        BadShard(
            "annotation-unknown-format",
            None,
            {ANNOTATION_FORMAT: "gzip-shards-v0"},
            CorruptShardError,
            "unknown format",
        ),
        BadShard(
            "annotation-epoch-not-integer",
            None,
            {ANNOTATION_EPOCH: "-3"},
            CorruptShardError,
            "epoch annotation",
        ),
        BadShard(
            "annotation-shard-key-missing",
            None,
            {ANNOTATION_SHARD_KEY: None},
            ForeignShardError,
            "shard-key annotation",
        ),
        BadShard(
            "annotation-shard-key-of-another-shard",
            None,
            {ANNOTATION_SHARD_KEY: "tn/objectstore/feed-b"},
            ForeignShardError,
            "misplaced or a hash collision",
        ),
        BadShard(
            "annotation-shard-key-invalid",
            None,
            {ANNOTATION_SHARD_KEY: "no-such-kind/x"},
            ForeignShardError,
            "annotated shard key is invalid",
        ),
    ]


def _annotated(base: Mapping[str, str], overrides: Mapping[str, str | None]) -> dict[str, str]:
    result = dict(base)
    for key, value in overrides.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def plant_in_folder(folder: Path, bad: BadShard) -> None:
    """Write a valid shard with a real store, then replace its blob/annotations in place."""
    Store.open(FileBackend(folder, LEASE), writer="w", epoch=1).batch(ROWS)
    (path,) = folder.glob("*" + SHARD_SUFFIX)
    header_line, _, blob = path.read_bytes().partition(b"\n")
    header = json.loads(header_line)
    header["annotations"] = _annotated(header["annotations"], bad.annotations)
    path.write_bytes(json.dumps(header).encode() + b"\n" + (blob if bad.blob is None else bad.blob))


def plant_in_namespace(target: KubeTarget, lease: str, bad: BadShard) -> None:
    """Write a valid shard with a real store on `target`; then the admin tampers with it."""
    Store.open(target.backend(lease), writer="w", epoch=1).batch(ROWS)
    admin, namespace = target.admin, target.namespace
    name = shard_name(lease, FEED)
    item = admin.read_namespaced_config_map(name, namespace)
    item.metadata.annotations = _annotated(item.metadata.annotations or {}, bad.annotations)
    if bad.blob is not None:
        item.binary_data = {SHARD_DATA_KEY: base64.b64encode(bad.blob).decode()}
    admin.replace_namespaced_config_map(name, namespace, item)
