"""The collector kinds a runtime knows, by name: one immutable table.

A kind is one `CollectorKindSpec`: its key shape, row kinds, settings factory, shard estimate
and constructor. `BUILTIN` holds the kinds shipped with the runtime; a further kind makes a new
table (`BUILTIN.with_kind(spec)`), never a changed one. The table is passed where it is needed:
`settings.parse` validates and parses the config with it and keeps it in the settings, from which
the startup projection (`runtime/projection.py`) and the running process (`runtime/lifecycle.py`,
`runtime/main.py`) look a kind up.

A table owns its key grammar: `shapes`, the shipped kinds' shapes with every further kind's,
built once with the table, never changed. It is passed where keys of its kinds are read or
written: the settings' shard keys, and the store and its backend in the running process. The
key grammar (`format/naming.py`) still knows the shapes of the shipped kinds on its own, because
the store decodes every stored shard (also one of a collector no longer configured) without
importing the collectors; a table refuses a kind whose name the grammar spells with another shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from checkpoint_runtime.collectors import builtin
from checkpoint_runtime.collectors.kind import CollectorKindSpec, CollectorSettings
from checkpoint_runtime.constants import DEFAULT_POLL_SECONDS
from checkpoint_runtime.errors import ConfigError
from checkpoint_runtime.format import naming


@dataclass(frozen=True, eq=False)
class KindTable:
    """Collector kinds by name, in declaration order; never changed once built (compared and
    hashed by identity, so a cache may be keyed on a table)."""

    specs: tuple[CollectorKindSpec[Any], ...]
    shapes: naming.Kinds = field(init=False)
    """The key grammar of these kinds (read-only): the shipped shapes and every further kind's."""

    def __post_init__(self) -> None:
        seen: set[str] = set()
        shapes = naming.COLLECTOR_KINDS
        for spec in self.specs:
            known = naming.COLLECTOR_KINDS.get(spec.name)
            if known is not None and known != spec.shape:
                raise ConfigError("kind", f"collector kind {spec.name!r} has another key shape")
            if spec.name in seen:
                raise ConfigError("kind", f"collector kind {spec.name!r} is already registered")
            seen.add(spec.name)
            if known is None:
                shapes = naming.with_kind(shapes, spec.name, spec.shape)
        object.__setattr__(self, "shapes", shapes)

    def with_kind(self, spec: CollectorKindSpec[Any]) -> KindTable:
        """A new table: these kinds and `spec` (refused if its name is taken)."""
        return KindTable((*self.specs, spec))

    def kinds(self) -> Mapping[str, CollectorKindSpec[Any]]:
        """Every kind, in declaration order (read-only)."""
        return MappingProxyType({spec.name: spec for spec in self.specs})

    def kind(self, name: str) -> CollectorKindSpec[Any]:
        """The kind `name`."""
        for spec in self.specs:
            if spec.name == name:
                return spec
        raise ConfigError("kind", f"unknown collector kind {name!r}")

    def parse_entry(self, entry: Mapping[str, Any], path: str) -> CollectorSettings:
        """The settings of one config entry (already schema-valid), by its kind's factory."""
        spec = self.kind(entry["kind"])
        names = [entry[key] for key in spec.instance_fields]
        common = CollectorSettings(
            kind=spec.name,
            namespace=naming.collector_namespace(
                spec.name, entry.get("tailnet"), *names, kinds=self.shapes
            ),
            url=entry["url"],
            tailnet=entry.get("tailnet"),
            poll_seconds=entry.get("pollSeconds", DEFAULT_POLL_SECONDS),
        )
        settings: CollectorSettings = spec.settings(entry, common, path)
        return settings


BUILTIN = KindTable((builtin.OBJECTSTORE, builtin.FLOWLOGS))
"""The kinds shipped with the runtime."""
