"""The old release's single-ConfigMap format (schemas/legacy.schema.json).

One ConfigMap, one `data` entry holding a JSON object of every key. The store only reads it and
annotates it after migration; the writer here is the old release's behaviour, kept for tests and
benchmarks.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from checkpoint_runtime.constants import ANNOTATION_MIGRATED, DIGEST_PREFIX
from checkpoint_runtime.errors import LegacyFormatError


@dataclass(frozen=True)
class LegacyState:
    """A legacy object as read: its raw value, annotations and version (for marking it)."""

    name: str
    value: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    version: str = ""

    @property
    def digest(self) -> str:
        return legacy_digest(self.value)

    @property
    def migrated_digest(self) -> str | None:
        """The digest recorded when a migration completed, or None if it never did."""
        return self.annotations.get(ANNOTATION_MIGRATED)


def legacy_digest(value: str) -> str:
    """Digest of the exact stored value: any change by an old release changes it."""
    return DIGEST_PREFIX + hashlib.sha256(value.encode("utf-8")).hexdigest()


def encode_legacy(rows: Mapping[str, str]) -> str:
    """The old release's serialisation: compact JSON of the whole map, keys sorted."""
    return json.dumps(dict(sorted(rows.items())), separators=(",", ":"))


def decode_legacy(name: str, value: str) -> dict[str, str]:
    """Rows of a legacy value, or LegacyFormatError (malformed JSON, non-string values)."""
    try:
        rows = json.loads(value)
    except ValueError as error:
        raise LegacyFormatError(name, f"not JSON: {error}") from None
    except RecursionError:
        raise LegacyFormatError(name, "nests too deeply to be a checkpoint map") from None
    if not isinstance(rows, dict):
        raise LegacyFormatError(name, f"top level is {type(rows).__name__}, not an object")
    for key, item in rows.items():
        if not isinstance(item, str):
            raise LegacyFormatError(
                name, f"value of {key!r} is {type(item).__name__}, not a string"
            )
    try:
        "".join(rows).encode("utf-8")
        "".join(rows.values()).encode("utf-8")
    except UnicodeEncodeError:
        raise LegacyFormatError(name, "a key or value holds a lone surrogate") from None
    return rows
