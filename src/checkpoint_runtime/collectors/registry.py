"""The collector kinds the runtime knows, by name.

A new kind is one `CollectorKindSpec`: its key shape, row kinds, settings factory, shard estimate
and constructor. The config's settings (`runtime/settings.py`), the startup projection
(`runtime/projection.py`) and the running process (`runtime/lifecycle.py`) look the kind up here.

The key grammar (`format/keys.py`) knows the shapes of the kinds shipped with the runtime on its
own, because the store decodes every stored shard (also one of a collector no longer configured)
without importing the collectors; `register` adds the shape of a further kind to the grammar.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from checkpoint_runtime.collectors import builtin
from checkpoint_runtime.collectors.kind import CollectorKindSpec, CollectorSettings
from checkpoint_runtime.constants import DEFAULT_POLL_SECONDS
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format import keys

_KINDS: dict[str, CollectorKindSpec[Any]] = {}
_version = 0


def register(spec: CollectorKindSpec[Any]) -> None:
    """Add a kind (and its key shape to the grammar); refuse a name taken by another kind."""
    global _version
    known = keys.COLLECTOR_KINDS.get(spec.name)
    if known is not None and known != spec.shape:
        raise ConfigError("kind", f"collector kind {spec.name!r} has another key shape")
    if spec.name in _KINDS:
        raise ConfigError("kind", f"collector kind {spec.name!r} is already registered")
    if known is None:
        keys.register_kind(spec.name, spec.shape)
    _KINDS[spec.name] = spec
    _version += 1


def unregister(name: str) -> None:
    """Remove a kind added by `register` (and its key shape)."""
    global _version
    spec = _KINDS.pop(name)
    if spec.shape is not _BUILTIN_SHAPES.get(name):
        keys.unregister_kind(name)
    _version += 1


@contextmanager
def registered(spec: CollectorKindSpec[Any]) -> Iterator[CollectorKindSpec[Any]]:
    """The kind registered for the duration of a `with` block."""
    register(spec)
    try:
        yield spec
    finally:
        unregister(spec.name)


def kinds() -> Mapping[str, CollectorKindSpec[Any]]:
    """Every registered kind, in registration order."""
    return dict(_KINDS)


def version() -> int:
    """Changes whenever a kind is registered or removed (for caches derived from the kinds)."""
    return _version


def kind(name: str) -> CollectorKindSpec[Any]:
    """The registered kind `name`."""
    try:
        return _KINDS[name]
    except KeyError:
        raise ConfigError("kind", f"unknown collector kind {name!r}") from None


def parse_entry(entry: Mapping[str, Any], path: str) -> CollectorSettings:
    """The settings of one config entry (already schema-valid), by its kind's factory."""
    spec = kind(entry["kind"])
    names = [entry[field] for field in spec.instance_fields]
    common = CollectorSettings(
        kind=spec.name,
        namespace=keys.collector_namespace(spec.name, entry.get("tailnet"), *names),
        url=entry["url"],
        tailnet=entry.get("tailnet"),
        poll_seconds=entry.get("pollSeconds", DEFAULT_POLL_SECONDS),
    )
    settings: CollectorSettings = spec.settings(entry, common, path)
    return settings


for _spec in (builtin.OBJECTSTORE, builtin.FLOWLOGS):
    register(_spec)
_BUILTIN_SHAPES = {name: keys.COLLECTOR_KINDS[name] for name in _KINDS}
