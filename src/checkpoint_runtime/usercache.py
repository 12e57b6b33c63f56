"""Derived artifacts kept between processes in the user's cache directory.

`$XDG_CACHE_HOME/checkpoint-runtime/<kind>/<key>` (else `~/.cache/...`): what a process would
otherwise recompute on every start from inputs that never change under a given key (the gate's
compiled policy module, the projection's reference-shard sizes). The caller's key names every
input, so an entry is never stale, only absent.

Best effort, never a failure: a cache that cannot be read or written (no home, a read-only file
system in a pod) is a miss. Writes are atomic (a temporary file in the same folder, then a
rename), so concurrent processes each write a whole entry and a reader sees an old whole entry,
a new whole entry, or none. Every entry carries the SHA-256 of its payload, so a truncated or
corrupt entry is a miss and the next write replaces it.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from checkpoint_runtime.constants import USER_CACHE_ENV, USER_CACHE_FOLDER

_MAGIC = b"ckpt-cache-1\n"
_DIGEST_BYTES = hashlib.sha256().digest_size


def cache_root() -> Path | None:
    """The product's folder in the user's cache directory (None: no home to put it in)."""
    configured = os.environ.get(USER_CACHE_ENV)
    if configured and os.path.isabs(configured):
        return Path(configured) / USER_CACHE_FOLDER
    try:
        return Path.home() / ".cache" / USER_CACHE_FOLDER
    except RuntimeError:  # no home directory for this user
        return None


def digest(*parts: bytes | str) -> str:
    """A cache key naming every input: the hex SHA-256 of the length-prefixed parts."""
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "big") + data)
    return hasher.hexdigest()


def _path(kind: str, key: str) -> Path | None:
    root = cache_root()
    return None if root is None else root / kind / key


def read(kind: str, key: str) -> bytes | None:
    """The payload stored under kind/key, or None (absent, unreadable or corrupt)."""
    path = _path(kind, key)
    if path is None:
        return None
    try:
        entry = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + _DIGEST_BYTES
    if len(entry) < head or not entry.startswith(_MAGIC):
        return None
    payload = entry[head:]
    if hashlib.sha256(payload).digest() != entry[len(_MAGIC) : head]:
        return None
    return payload


def write(kind: str, key: str, payload: bytes) -> bool:
    """Store payload under kind/key atomically; False (and nothing changed) if it cannot."""
    path = _path(kind, key)
    if path is None:
        return False
    entry = _MAGIC + hashlib.sha256(payload).digest() + payload
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError:
        return False
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(entry)
        os.replace(scratch, path)
    except OSError:
        Path(scratch).unlink(missing_ok=True)
        return False
    return True
