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

from checkpoint_runtime.constants import ANNOTATION_MIGRATED, ANNOTATION_MIGRATED_BY, DIGEST_PREFIX
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

    def matches(self, recorded: str | None) -> bool:
        """Does a recorded digest name this value's content? Also accepts the digest of the
        exact bytes, which releases before the content digest recorded."""
        return recorded is not None and recorded in (self.digest, byte_digest(self.value))

    @property
    def migrated_digest(self) -> str | None:
        """The digest recorded when a migration completed, or None if it never did."""
        return self.annotations.get(ANNOTATION_MIGRATED)

    @property
    def migrated_by(self) -> tuple[str, ...]:
        """The stores (Lease names) that took over the marked value: migrated it, or chose to
        start without it. Empty for a mark of a release that did not record them."""
        return tuple(n for n in self.annotations.get(ANNOTATION_MIGRATED_BY, "").split(",") if n)


def marked(annotations: Mapping[str, str], digest: str, store: str) -> dict[str, str]:
    """The legacy object's annotations once `store` has taken over the value of `digest`: the
    stores already recorded for that same digest stay; a new digest starts the list afresh."""
    same = annotations.get(ANNOTATION_MIGRATED) == digest
    stores = annotations.get(ANNOTATION_MIGRATED_BY, "").split(",") if same else []
    return {
        **annotations,
        ANNOTATION_MIGRATED: digest,
        ANNOTATION_MIGRATED_BY: ",".join(sorted({*filter(None, stores), store})),
    }


def legacy_digest(value: str) -> str:
    """Digest of the value's content: SHA-256 of its canonical JSON (keys sorted, no spaces,
    text as UTF-8, not escaped), so a value rewritten with the same rows but other formatting
    (key order, spacing, escapes) keeps its digest, and any change of a key or value changes
    it. A value that is not JSON is digested as its exact bytes."""
    try:
        content = json.loads(value)
    except (ValueError, RecursionError):
        return byte_digest(value)
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        return DIGEST_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    except UnicodeEncodeError:  # a lone surrogate: refused when read, digested as written
        return byte_digest(value)


def byte_digest(value: str) -> str:
    """Digest of the exact stored bytes (what releases before the content digest recorded)."""
    return DIGEST_PREFIX + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


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
