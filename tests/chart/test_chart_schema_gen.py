"""The values schema is closed, self-contained and documented; `just gen` is in sync and stable.

RENDER_GATE 17 and issue 2 item 3: one source (schemas/values.schema.json), a generated copy in
the chart, a generated values table in the chart README, and a second run changes nothing.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from chart_helpers import CHART_DIR, ROOT, load_yaml

SOURCE = ROOT / "schemas" / "values.schema.json"
RUNTIME_SCHEMA = ROOT / "schemas" / "runtime-config.schema.json"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("checkpoint_gen", ROOT / "scripts" / "gen.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def source() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SOURCE.read_text())
    return schema


CONDITIONS = {"not", "if", "then", "else", "allOf", "dependentSchemas"}


def subschemas(
    node: Any, path: str = "#", conditions: bool = True
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema object inside a schema, with a pointer-ish path for messages.

    conditions=False skips constraint fragments (if/then/not/allOf...), which restate
    properties to constrain them rather than define them.
    """
    if not isinstance(node, dict):
        return
    yield path, node
    for key, child in node.items():
        if key in CONDITIONS and not conditions:
            continue
        if key in {"properties", "patternProperties", "$defs", "dependentSchemas"}:
            for name, sub in child.items():
                yield from subschemas(sub, f"{path}/{key}/{name}", conditions)
        elif key in {"items", "not", "if", "then", "else", "additionalProperties"}:
            yield from subschemas(child, f"{path}/{key}", conditions)
        elif key in {"anyOf", "oneOf", "allOf"}:
            for index, sub in enumerate(child):
                yield from subschemas(sub, f"{path}/{key}/{index}", conditions)


def open_objects(schema: dict[str, Any]) -> list[str]:
    return [
        path
        for path, node in subschemas(schema)
        if node.get("type") == "object" and node.get("additionalProperties") is not False
    ]


def test_schema_is_pinned_and_self_contained(source: dict[str, Any]) -> None:
    assert source["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    refs = [node["$ref"] for _, node in subschemas(source) if "$ref" in node]
    assert refs, "no $ref found: the walker is broken"
    assert [ref for ref in refs if not ref.startswith("#/$defs/")] == []
    for ref in refs:
        assert ref.removeprefix("#/$defs/") in source["$defs"], ref


def test_every_object_in_the_schema_is_closed(source: dict[str, Any]) -> None:
    assert open_objects(source) == []


def test_closed_schema_check_finds_an_open_object() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "object"}}}
    assert open_objects(schema) == ["#", "#/properties/x"]


def test_every_property_has_a_description(source: dict[str, Any]) -> None:
    missing = [
        f"{path}/properties/{name}"
        for path, node in subschemas(source, conditions=False)
        for name, child in node.get("properties", {}).items()
        if not child.get("description")
    ]
    assert missing == []


def test_segment_rules_are_copied_from_the_runtime_config_schema(source: dict[str, Any]) -> None:
    runtime = json.loads(RUNTIME_SCHEMA.read_text())["$defs"]
    ours = source["$defs"]
    for name in ("segment", "dnsLabel", "dnsSubdomainShort"):
        for keyword, rule in runtime[name].items():
            if keyword != "description":
                assert ours[name].get(keyword) == rule, (name, keyword)
    for kind in ("objectstore", "flowlogs"):
        assert ours[kind]["required"] == runtime[kind]["required"]
        assert ours[kind]["properties"].keys() == runtime[kind]["properties"].keys()


def test_chart_schema_and_readme_are_in_sync_with_their_sources(
    gen: ModuleType, source: dict[str, Any]
) -> None:
    chart_schema = (CHART_DIR / "values.schema.json").read_text()
    assert chart_schema == gen.render_chart_schema(source), "run `just gen`"
    readme = (CHART_DIR / "README.md").read_text()
    table = gen.render_values_table(source, load_yaml(CHART_DIR / "values.yaml"))
    assert gen.replace_between_markers(readme, table) == readme, "run `just gen`"


def test_gen_is_idempotent_and_writes_nothing_the_second_time(
    gen: ModuleType, tmp_path: Path
) -> None:
    (tmp_path / "schemas").mkdir()
    shutil.copy(SOURCE, tmp_path / "schemas")
    chart = tmp_path / "charts" / "checkpoint-runtime"
    chart.mkdir(parents=True)
    shutil.copy(CHART_DIR / "values.yaml", chart)
    (chart / "README.md").write_text(
        "# t\n<!-- values-table:start -->\nstale\n<!-- values-table:end -->\n"
    )
    assert gen.write_values_schema(tmp_path) is True
    assert gen.write_values_table(tmp_path, gen.CHART / "README.md") is True
    first = {path: path.read_bytes() for path in chart.iterdir()}
    assert gen.write_values_schema(tmp_path) is False
    assert gen.write_values_table(tmp_path, gen.CHART / "README.md") is False
    assert {path: path.read_bytes() for path in chart.iterdir()} == first
    assert (chart / "values.schema.json").read_text() == (
        CHART_DIR / "values.schema.json"
    ).read_text()


def test_values_table_documents_every_value(gen: ModuleType, source: dict[str, Any]) -> None:
    table = gen.render_values_table(source, load_yaml(CHART_DIR / "values.yaml"))
    keys = {line.split("`")[1] for line in table.splitlines()[2:]}
    assert {"image.tag", "checkpoint.store", "checkpoint.collectors", "sink.path"} <= keys
    assert all("|  |" not in line.split("|", 4)[4] for line in table.splitlines()[2:])


def test_gen_refuses_a_readme_without_markers(gen: ModuleType) -> None:
    with pytest.raises(SystemExit, match="values-table:start"):
        gen.replace_between_markers("# no markers\n", "table")


def test_missing_plugin_is_skipped_but_a_broken_one_is_not(gen: ModuleType) -> None:
    assert gen.load_plugin("checkpoint_runtime.no_such_module", "write") is None
    with pytest.raises(ModuleNotFoundError):
        # the package exists, so an absent *parent* deeper down is a real error
        gen.load_plugin("no_such_package_at_all.sub.module", "write")
