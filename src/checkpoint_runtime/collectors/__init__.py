"""Collectors: each owns one collector namespace (one shard) and uses only the store's
map interface, so the same collector runs on the file and the kubernetes store. What a collector
is and what it may use are declared here; `runner` polls them, `registry` knows their kinds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class CheckpointMap(Protocol):
    """The part of the store a collector may use."""

    def get(self, key: str) -> str | None: ...

    def items(self, prefix: str = "") -> list[tuple[str, str]]: ...

    def set(self, key: str, value: str) -> None: ...

    def delete(self, key: str) -> None: ...

    def batch(self, changes: Mapping[str, str | None]) -> None: ...


class Collector(Protocol):
    """One scheduled collector."""

    namespace: str
    """Its collector namespace, which is also its shard key."""
    poll_seconds: float

    def poll(self) -> int:
        """Collect once; return how many records were emitted. Store errors propagate."""
