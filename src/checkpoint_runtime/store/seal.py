"""The seal: evidence on every shard head that the store's own leader wrote it.

Anyone who may create ConfigMaps in the coordination namespace can create an object under a
shard's name, with the store's labels and annotations (RBAC cannot pin `create` to a name), and
whoever may update it can rewrite one. Labels, names and stamps are all readable or guessable,
so none of them proves who wrote a head. The seal does: an HMAC-SHA256, keyed by the store key,
over what a head says (its shard, its blob's digest, its stamp and the annotations a reader acts
on, `SEALED_ANNOTATIONS`). The store key is 32 random bytes kept in an annotation of the store's
Lease (`ANNOTATION_STORE_KEY`) and nowhere else: only a principal that may `get` the store's
Lease can learn it (the chart's Role pins Lease get to each release's own Lease name; a namespace
`edit` user may read Leases). Heads carry the seal, never the key.

Every head the runtime reads (open, reload, a re-read while chunks moved, a head met by a
create) is checked before it is decoded: a head that is not sealed with the key is foreign
(`ForeignHeadError`), never state. Chunk slots need no seal of their own: a sealed head's
manifest names each active slot's SHA-256, which the reader checks.

Trust on first use (`adopt`): when the store's Lease has no key (the first run of a release
that seals, or the Lease was deleted while no replica ran, so its key is lost), the new leader
makes one, adopts the heads as they are (it cannot tell), reseals every one when it takes
ownership, and only then records the key on its Lease (a guarded update). A crash in between
leaves the Lease without a key, and the next leader adopts again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH,
    ANNOTATION_FORMAT,
    ANNOTATION_LEASE,
    ANNOTATION_LEASE_UID,
    ANNOTATION_LEGACY_DIGEST,
    ANNOTATION_SEAL,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_WRITER,
    SEAL_PREFIX,
    STORE_KEY_BYTES,
)
from checkpoint_runtime.errors import ForeignHeadError

SEALED_ANNOTATIONS = (
    ANNOTATION_SHARD_KEY,
    ANNOTATION_FORMAT,
    ANNOTATION_LEASE,
    ANNOTATION_EPOCH,
    ANNOTATION_WRITER,
    ANNOTATION_LEASE_UID,
    ANNOTATION_LEGACY_DIGEST,
)
"""The head annotations the seal covers: every one a reader acts on (which shard, which format,
the fence's stamp, the legacy digest migration compares). Sizes and the write id are
informational and not covered."""


def new_store_key() -> str:
    """A fresh store key, as the Lease annotation holds it (unpadded base64url)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(STORE_KEY_BYTES)).decode().rstrip("=")


def key_bytes(text: str) -> bytes | None:
    """The key an annotation holds, or None if it is not one (then it is ignored, as absent)."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return None
    return raw if len(raw) == STORE_KEY_BYTES else None


@dataclass(frozen=True)
class Sealing:
    """A store's seal: the key, its store (Lease name), and whether it adopts unsealed heads
    (the key is new this term: trust on first use, until `take_ownership` resealed them)."""

    key: bytes
    lease_name: str
    adopt: bool = False

    def seal(self, shard: str, blob: bytes, annotations: Mapping[str, str]) -> str:
        message = json.dumps(
            [
                SEAL_PREFIX,
                self.lease_name,
                shard,
                hashlib.sha256(blob).hexdigest(),
                [annotations.get(name, "") for name in SEALED_ANNOTATIONS],
            ],
            separators=(",", ":"),
        ).encode()
        return f"{SEAL_PREFIX}:{hmac.new(self.key, message, hashlib.sha256).hexdigest()}"

    def sealed(self, shard: str, blob: bytes, annotations: Mapping[str, str]) -> dict[str, str]:
        """`annotations` with the seal of this head added (replacing any earlier one)."""
        return {**annotations, ANNOTATION_SEAL: self.seal(shard, blob, annotations)}

    def problem(self, shard: str, blob: bytes, annotations: Mapping[str, str]) -> str | None:
        """Why a stored head is not sealed by this store, or None (sealed, or adopted)."""
        found = annotations.get(ANNOTATION_SEAL)
        if found is not None and hmac.compare_digest(found, self.seal(shard, blob, annotations)):
            return None
        if self.adopt:
            return None
        if found is None:
            return "it carries no seal"
        return "its seal does not match the store key (another writer, or edited since)"

    def check(self, shard: str, name: str, blob: bytes, annotations: Mapping[str, str]) -> None:
        """Raise ForeignHeadError unless the head is sealed by this store (or adopted)."""
        problem = self.problem(shard, blob, annotations)
        if problem is not None:
            raise ForeignHeadError(shard, name, problem)
