"""A collector kind is one declaration in an immutable kind table: a toy kind, added here and
nowhere else (a new table: the shipped one does not change), is parsed and validated by the
settings, projected at startup, and run by the runtime (its rows persisted by the store through
the key grammar), and a table without it knows nothing of it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.collectors import CheckpointMap, Collector, registry
from checkpoint_runtime.collectors.kind import CollectorKindSpec, CollectorSettings, ShardEstimate
from checkpoint_runtime.collectors.sink import Sink
from checkpoint_runtime.constants import CONFIGMAP_VALUE_LIMIT
from checkpoint_runtime.errors import ConfigError, ExitCode, KeyGrammarError
from checkpoint_runtime.format import naming
from checkpoint_runtime.runtime import projection, settings
from checkpoint_runtime.runtime.lifecycle import Runtime
from checkpoint_runtime.store.core import Store

TOY_BYTES_PER_TICK = 1000
TOY_MAX_TICKS = 50


@dataclass(frozen=True)
class ToySettings(CollectorSettings):
    name: str
    ticks: int


def _toy_settings(entry: Mapping[str, Any], common: CollectorSettings, path: str) -> ToySettings:
    ticks = entry.get("ticks", 3)
    if ticks > TOY_MAX_TICKS:  # what the schema below does not say
        raise ConfigError(f"{path}.ticks", f"at most {TOY_MAX_TICKS}")
    return ToySettings(**vars(common), name=entry["name"], ticks=ticks)


def _toy_estimate(toy: ToySettings, shape: str) -> ShardEstimate:
    return ShardEstimate(
        knob="ticks",
        rows=toy.ticks,
        compressed_bytes=toy.ticks * TOY_BYTES_PER_TICK,
        extrapolated=False,
        max_rows=CONFIGMAP_VALUE_LIMIT // TOY_BYTES_PER_TICK,
    )


class ToyCollector:
    """Writes one `tick/<n>` row per poll and sends a record to the sink."""

    def __init__(self, store: CheckpointMap, sink: Sink, toy: ToySettings) -> None:
        self.store, self.sink, self.toy = store, sink, toy
        self.namespace = toy.namespace
        self.poll_seconds = toy.poll_seconds
        self.polled = threading.Event()

    def poll(self) -> int:
        count = len(self.store.items(f"{self.namespace}/tick/"))
        if count < self.toy.ticks:
            self.sink.emit({"collector": "toy", "tick": count})
            self.sink.flush()  # records first, then the rows that say they were emitted
            rows = {f"{self.namespace}/tick/{count}": "done", f"{self.namespace}/last": str(count)}
            self.store.batch(rows)
        self.polled.set()
        return 1


BUILT: list[ToyCollector] = []


def _toy_build(store: CheckpointMap, sink: Sink, toy: ToySettings) -> Collector:
    BUILT.append(ToyCollector(store, sink, toy))
    return BUILT[-1]


TOY = CollectorKindSpec(
    name="toy",
    shape=naming.CollectorKind(name_segments=1, row_kinds={"tick": True, "last": False}),
    instance_fields=("name",),
    settings=_toy_settings,
    estimate=_toy_estimate,
    build=_toy_build,
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["kind", "name", "url"],
        "properties": {
            "kind": {"const": "toy"},
            "name": {"$ref": "#/$defs/segment"},
            "tailnet": {"$ref": "#/$defs/segment"},
            "url": {"type": "string"},
            "pollSeconds": {"type": "number", "exclusiveMinimum": 0},
            "ticks": {"type": "integer", "minimum": 1},
        },
    },
)


def toy_config(folder: Path, *entries: dict[str, Any]) -> dict[str, Any]:
    return {"store": {"backend": "file", "path": str(folder)}, "collectors": list(entries)}


def toy(name: str = "alpha", **more: Any) -> dict[str, Any]:
    return {"kind": "toy", "tailnet": "corp", "name": name, "url": "toy://", **more}


@pytest.fixture
def toy_kinds() -> registry.KindTable:
    """The shipped kinds and the toy: a new table, whose key grammar spells the toy's rows."""
    BUILT.clear()
    return registry.BUILTIN.with_kind(TOY)


def test_the_settings_parse_and_validate_a_registered_kind(
    toy_kinds: registry.KindTable, tmp_path: Path
) -> None:
    parsed = settings.parse(toy_config(tmp_path, toy(ticks=4), toy("beta")), toy_kinds)
    assert [c.namespace for c in parsed.collectors] == ["corp/toy/alpha", "corp/toy/beta"]
    assert isinstance(parsed.collectors[0], ToySettings)
    assert parsed.collectors[0].ticks == 4
    # its own schema (a missing name) and its own factory (too many ticks), named by key path
    with pytest.raises(ConfigError) as missing:
        settings.parse(toy_config(tmp_path, {"kind": "toy", "url": "toy://"}), toy_kinds)
    assert missing.value.path == "collectors[0]"
    assert "name" in str(missing.value)
    with pytest.raises(ConfigError) as too_many:
        settings.parse(toy_config(tmp_path, toy(ticks=TOY_MAX_TICKS + 1)), toy_kinds)
    assert too_many.value.path == "collectors[0].ticks"
    # the shared rule: two collectors of the kind on one shard
    with pytest.raises(ConfigError) as shared:
        settings.parse(toy_config(tmp_path, toy(), toy()), toy_kinds)
    assert shared.value.path == "collectors[1]"


def test_the_projection_uses_the_kinds_estimate(
    toy_kinds: registry.KindTable, tmp_path: Path
) -> None:
    parsed = settings.parse(toy_config(tmp_path, toy(ticks=7)), toy_kinds)
    [shard] = projection.check(parsed)
    assert (shard.shard, shard.knob, shard.rows) == ("corp/toy/alpha", "collectors[0].ticks", 7)
    assert shard.compressed_bytes == 7 * TOY_BYTES_PER_TICK
    big = settings.parse(toy_config(tmp_path, toy(ticks=TOY_MAX_TICKS)), toy_kinds)
    over = replace(big, collectors=[replace(big.collectors[0], ticks=CONFIGMAP_VALUE_LIMIT)])
    with pytest.raises(ConfigError) as refused:
        projection.check(over)
    assert refused.value.path == "collectors[0].ticks"


def test_the_runtime_runs_the_kind_and_the_store_keeps_its_rows(
    toy_kinds: registry.KindTable, tmp_path: Path
) -> None:
    folder = tmp_path / "store"
    sink_path = tmp_path / "sink.jsonl"
    document = toy_config(folder, toy(ticks=2, pollSeconds=0.05))
    document["sink"] = {"kind": "file", "path": str(sink_path)}
    document["http"] = {"bindAddress": "127.0.0.1"}
    runtime = Runtime(settings.parse(document, toy_kinds), identity="toy-test")
    runtime.http_port = 0
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(runtime.run()))
    thread.start()
    try:
        assert _wait_until(lambda: bool(BUILT) and BUILT[0].polled.is_set())
        assert _wait_until(lambda: sink_path.exists() and len(_lines(sink_path)) == 2)
    finally:
        runtime.request_shutdown()
        thread.join(30)
    assert codes == [ExitCode.OK]
    store = runtime.settings.store
    backend = FileBackend(str(folder), store.lease_name, None, kinds=toy_kinds.shapes)
    reopened = Store.open(backend, writer="reader", kinds=toy_kinds.shapes)
    assert dict(reopened.items("corp/toy/alpha/")) == {
        "corp/toy/alpha/last": "1",
        "corp/toy/alpha/tick/0": "done",
        "corp/toy/alpha/tick/1": "done",
    }
    assert [json.loads(line)["tick"] for line in _lines(sink_path)] == [0, 1]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _wait_until(done: Callable[[], bool], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.05)
    return False


def test_a_table_without_the_kind_knows_nothing_of_it(tmp_path: Path) -> None:
    toys = registry.BUILTIN.with_kind(TOY)
    assert naming.shard_key("corp/toy/alpha/last", toys.shapes) == "corp/toy/alpha"
    assert "toy" in toys.kinds()
    assert "toy" not in registry.BUILTIN.kinds()  # adding made a new table
    with pytest.raises(KeyGrammarError):
        naming.shard_key("corp/toy/alpha/last", registry.BUILTIN.shapes)
    with pytest.raises(KeyGrammarError):
        naming.shard_key("corp/toy/alpha/last")  # nor did the shipped grammar change
    with pytest.raises(KeyGrammarError):  # a store of the shipped kinds refuses its keys
        Store(FileBackend(str(tmp_path / "store"), "shipped")).batch({"corp/toy/alpha/last": "1"})
    with pytest.raises(ConfigError) as refused:
        settings.parse(toy_config(tmp_path, toy()))
    assert refused.value.path.startswith("collectors[0]")


def test_a_kind_name_is_registered_once() -> None:
    toys = registry.BUILTIN.with_kind(TOY)
    with pytest.raises(ConfigError, match="already registered"):
        toys.with_kind(TOY)
    with pytest.raises(ConfigError, match="another key shape"):
        registry.BUILTIN.with_kind(replace(TOY, name="objectstore"))
    with pytest.raises(KeyGrammarError, match="already a collector kind"):
        naming.with_kind(naming.COLLECTOR_KINDS, "objectstore", TOY.shape)
    with pytest.raises(TypeError):  # the shipped grammar is read-only: no kind is added to it
        naming.COLLECTOR_KINDS["toy"] = TOY.shape  # type: ignore[index]
    wider = naming.with_kind(toys.shapes, "toy2", TOY.shape)
    assert "toy2" in wider
    assert "toy2" not in toys.shapes  # a new grammar; the table's is as it was
    assert list(registry.BUILTIN.kinds()) == ["objectstore", "flowlogs"]
    assert list(toys.kinds()) == ["objectstore", "flowlogs", "toy"]


def test_the_shipped_kinds_are_the_shipped_schemas_alternatives() -> None:
    """The config schema's collector alternatives derive from the registry; for the shipped
    kinds they are exactly the ones the shipped schema file lists."""
    shipped = json.loads(settings.schema_path().read_text())
    alternatives = shipped["properties"]["collectors"]["items"]["oneOf"]
    assert alternatives == [{"$ref": f"#/$defs/{name}"} for name in registry.BUILTIN.kinds()]
    assert set(registry.BUILTIN.kinds()) == set(naming.COLLECTOR_KINDS)
    assert dict(registry.BUILTIN.shapes) == dict(naming.COLLECTOR_KINDS)
