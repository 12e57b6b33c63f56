"""Shard ConfigMap names, labels and annotations.

A name is `<lease>-<readable shard key>-<hash>`: operators recognise it, the hash of (Lease name,
shard key) keeps two stores in one namespace apart, and the shard-key annotation is compared on
every read so that a hash collision is detected instead of merged.
"""

from __future__ import annotations

import hashlib
import re

from checkpoint_runtime.constants import (
    CHUNK_GENERATIONS,
    COMPONENT_CHUNK,
    COMPONENT_SHARD,
    LABEL_COMPONENT,
    LABEL_STORE,
    MAX_DNS_SUBDOMAIN,
    SHARD_NAME_HASH_CHARS,
    STORE_LABEL_HASH_CHARS,
)
from checkpoint_runtime.errors import KeyGrammarError

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_NOT_DNS = re.compile(r"[^a-z0-9.-]+")
READABLE_MAX = 80


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def is_dns_subdomain(name: str) -> bool:
    return len(name) <= MAX_DNS_SUBDOMAIN and bool(_DNS_SUBDOMAIN.match(name))


def shard_name(lease_name: str, shard: str) -> str:
    """The ConfigMap name of `shard` in the store identified by `lease_name`."""
    readable = _NOT_DNS.sub("-", shard.lower().replace("/", ".")).strip("-.")[:READABLE_MAX]
    digest = _digest(lease_name, shard)[:SHARD_NAME_HASH_CHARS]
    room = MAX_DNS_SUBDOMAIN - len(digest) - len(readable) - 2
    prefix = _NOT_DNS.sub("-", lease_name.lower())[: max(room, 0)].strip("-.")
    name = "-".join(part for part in (prefix, readable, digest) if part)
    name = re.sub(r"[-.]{2,}", "-", name)
    if not is_dns_subdomain(name):
        raise KeyGrammarError(shard, f"no DNS-1123 ConfigMap name can be derived ({name!r})")
    return name


def chunk_slot_name(shard_name: str, generation: str, index: int) -> str:
    """The ConfigMap name of a v3 shard's chunk slot: `<shard name>-c<generation><index>`.

    `shard_name` is the head's ConfigMap name (`shard_name(lease, shard)`), `generation` `a` or
    `b`, `index` a decimal slot index (below the store's maxChunks)."""
    if generation not in CHUNK_GENERATIONS:
        raise ValueError(f"chunk generation must be one of {CHUNK_GENERATIONS}, got {generation!r}")
    if type(index) is not int or index < 0:
        raise ValueError(f"chunk index must be an integer >= 0, got {index!r}")
    name = f"{shard_name}-c{generation}{index}"
    if not is_dns_subdomain(name):
        raise KeyGrammarError(shard_name, f"no DNS-1123 chunk slot name can be derived ({name!r})")
    return name


def store_label(lease_name: str) -> str:
    """The store label value: a hash, since a Lease name may exceed the 63-character label limit."""
    return _digest("store", lease_name)[:STORE_LABEL_HASH_CHARS]


def shard_labels(lease_name: str) -> dict[str, str]:
    return {LABEL_COMPONENT: COMPONENT_SHARD, LABEL_STORE: store_label(lease_name)}


def chunk_labels(lease_name: str) -> dict[str, str]:
    """A chunk slot's labels: the shard's, with the chunk component (shard discovery skips it)."""
    return {**shard_labels(lease_name), LABEL_COMPONENT: COMPONENT_CHUNK}


def label_selector(lease_name: str) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(shard_labels(lease_name).items()))


def chunk_label_selector(lease_name: str) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(chunk_labels(lease_name).items()))
