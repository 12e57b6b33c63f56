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
import yaml
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
def source(gen: ModuleType) -> dict[str, Any]:
    """The values schema as `just gen` builds it: the source with the runtime's nodes inlined."""
    schema: dict[str, Any] = gen.load_source_schema(ROOT)
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
    shutil.copy(RUNTIME_SCHEMA, tmp_path / "schemas")
    chart = tmp_path / "charts" / "checkpoint-runtime"
    chart.mkdir(parents=True)
    shutil.copy(CHART_DIR / "values.yaml", chart)
    (chart / "README.md").write_text(
        "# t\n<!-- values-table:start -->\nstale\n<!-- values-table:end -->\n"
    )
    values = chart / "values.yaml"
    values.write_text(values.read_text().replace("\nreplicaCount:", "\n# stale\nreplicaCount:"))
    assert gen.write_values_schema(tmp_path) is True
    assert gen.write_values_comments(tmp_path) is True
    assert gen.write_values_table(tmp_path, gen.CHART / "README.md") is True
    first = {path: path.read_bytes() for path in chart.iterdir()}
    assert gen.write_values_schema(tmp_path) is False
    assert gen.write_values_comments(tmp_path) is False
    assert gen.write_values_table(tmp_path, gen.CHART / "README.md") is False
    assert {path: path.read_bytes() for path in chart.iterdir()} == first
    assert (chart / "values.schema.json").read_text() == (
        CHART_DIR / "values.schema.json"
    ).read_text()
    assert values.read_text() == (CHART_DIR / "values.yaml").read_text()


def test_values_table_documents_every_value(gen: ModuleType, source: dict[str, Any]) -> None:
    table = gen.render_values_table(source, load_yaml(CHART_DIR / "values.yaml"))
    keys = {line.split("`")[1] for line in table.splitlines()[2:]}
    assert {"image.tag", "checkpoint.store.backend", "checkpoint.collectors", "sink.path"} <= keys
    assert all("|  |" not in line.split("|", 4)[4] for line in table.splitlines()[2:])


def test_gen_refuses_a_readme_without_markers(gen: ModuleType) -> None:
    with pytest.raises(SystemExit, match="values-table:start"):
        gen.replace_between_markers("# no markers\n", "table")


def test_missing_plugin_is_skipped_but_a_broken_one_is_not(gen: ModuleType) -> None:
    assert gen.load_plugin("checkpoint_runtime.no_such_module", "write") is None
    with pytest.raises(ModuleNotFoundError):
        # the package exists, so an absent *parent* deeper down is a real error
        gen.load_plugin("no_such_package_at_all.sub.module", "write")


# --- values.yaml comments: each key's schema description, written by `just gen` ---------------

TOY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "replicas": {"description": "How many pods.", "type": "integer"},
        "labels": {"description": "Extra labels.", "$ref": "#/$defs/labels"},
        "peers": {"description": "Peers.", "type": "array"},
        "policy": {
            "description": "The policy.",
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "enabled": {"description": "Render it. " + "Long words wrap. " * 12},
            },
        },
    },
    "$defs": {
        "labels": {
            "type": "object",
            "additionalProperties": False,
            "patternProperties": {"^.+$": {"type": "string"}},
        }
    },
}


def test_values_yaml_comments_are_the_schema_descriptions(
    gen: ModuleType, source: dict[str, Any]
) -> None:
    text = (CHART_DIR / "values.yaml").read_text()
    assert gen.comment_values(source, text) == text, "run `just gen`"


def test_a_key_without_its_comment_or_with_another_one_is_out_of_sync(
    gen: ModuleType, source: dict[str, Any]
) -> None:
    """The sync check above fails when a comment is missing or disagrees with the schema."""
    text = (CHART_DIR / "values.yaml").read_text()
    comment = "# Replicas with the kubernetes store (they elect a leader); the file store always"
    assert f"{comment} runs 1.\nreplicaCount:" in text
    missing = text.replace(f"{comment} runs 1.\n", "")
    assert gen.comment_values(source, missing) == text
    stale = text.replace(f"{comment} runs 1.\n", "# Number of pods.\n")
    assert gen.comment_values(source, stale) == text


def test_commenting_keeps_every_value(gen: ModuleType, source: dict[str, Any]) -> None:
    text = (CHART_DIR / "values.yaml").read_text()
    bare = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    commented = gen.comment_values(source, bare + "\n")
    assert yaml.safe_load(commented) == yaml.safe_load(text)
    assert gen.comment_values(source, commented) == commented


def test_comments_wrap_and_only_schema_keys_get_one(gen: ModuleType) -> None:
    text = (
        "---\n# header, kept\n\n# a stale note\nreplicas: 2\n\n# section note, kept\n\n"
        "labels:\n  app.kubernetes.io/part-of: x\npeers:\n  - name: a\n    port: 1\n"
        "policy:\n  enabled: true\n"
    )
    lines = gen.comment_values(TOY_SCHEMA, text).splitlines()
    assert lines[:5] == ["---", "# header, kept", "", "# How many pods.", "replicas: 2"]
    assert lines[6:10] == ["# section note, kept", "", "# Extra labels.", "labels:"]
    # map entries and list items are data: no comment
    assert lines[10:15] == [
        "  app.kubernetes.io/part-of: x",
        "# Peers.",
        "peers:",
        "  - name: a",
        "    port: 1",
    ]
    assert lines[15:17] == ["# The policy.", "policy:"]
    wrapped = lines[17:-1]
    assert len(wrapped) > 1
    assert all(line.startswith("  # ") and len(line) <= 100 for line in wrapped)
    description = TOY_SCHEMA["properties"]["policy"]["properties"]["enabled"]["description"]
    assert " ".join(line.removeprefix("  # ") for line in wrapped) == description.strip()
    assert lines[-1] == "  enabled: true"


def test_a_key_the_schema_does_not_define_is_refused(gen: ModuleType) -> None:
    with pytest.raises(SystemExit, match=r"policy\.enable is not defined"):
        gen.comment_values(TOY_SCHEMA, "policy:\n  enable: true\n")


# --- one config shape: `checkpoint` is the runtime config, its rules and defaults the runtime's --


def runtime_paths(node: dict[str, Any], prefix: str = "") -> set[str]:
    """Every key path of the runtime config schema's objects (store.deadlineSeconds, ...)."""
    paths = set()
    for name, child in node.get("properties", {}).items():
        paths.add(f"{prefix}{name}")
        paths |= runtime_paths(child, f"{prefix}{name}.")
    return paths


def values_paths(values: Any, prefix: str = "") -> set[str]:
    if not isinstance(values, dict):
        return set()
    paths = set()
    for name, child in values.items():
        paths.add(f"{prefix}{name}")
        paths |= values_paths(child, f"{prefix}{name}.")
    return paths


def test_checkpoint_values_have_the_runtime_config_s_shape() -> None:
    """Every key under `checkpoint` but the chart's own `file` is the runtime config key of the
    same path, so the chart renders it with toJson and the gate names a refused key by prefix."""
    runtime = json.loads(RUNTIME_SCHEMA.read_text())
    checkpoint = load_yaml(CHART_DIR / "values.yaml")["checkpoint"]
    chart_own = {path for path in values_paths(checkpoint) if path.split(".")[0] == "file"}
    assert chart_own == {"file", "file.existingClaim", "file.sizeLimit"}
    assert values_paths(checkpoint) - chart_own <= runtime_paths(runtime)


def test_runtime_rules_and_defaults_reach_the_values_schema(source: dict[str, Any]) -> None:
    runtime = json.loads(RUNTIME_SCHEMA.read_text())
    store = source["properties"]["checkpoint"]["properties"]["store"]["properties"]
    assert (
        store["deadlineSeconds"] == runtime["properties"]["store"]["properties"]["deadlineSeconds"]
    )
    assert store["deadlineSeconds"]["default"] == 30
    assert source["$defs"]["objectstore"] == runtime["$defs"]["objectstore"]
    # a node beside its $ref narrows the runtime's rule: the chart's disjoint election ranges
    lease = source["properties"]["checkpoint"]["properties"]["leaderElection"]["properties"]
    assert (lease["renewDeadlineSeconds"]["minimum"], lease["renewDeadlineSeconds"]["maximum"]) == (
        10,
        14,
    )
    assert lease["renewDeadlineSeconds"]["description"]  # the runtime's wording, inherited


def test_a_values_default_other_than_the_runtime_s_is_refused(gen: ModuleType) -> None:
    schema = gen.load_source_schema(ROOT)
    values = load_yaml(CHART_DIR / "values.yaml")
    gen.check_values_defaults(schema, values)  # in sync
    values["checkpoint"]["store"]["deadlineSeconds"] = 31
    with pytest.raises(
        gen.ValuesDefaultError, match=r"checkpoint\.store\.deadlineSeconds: .*31.*30"
    ):
        gen.check_values_defaults(schema, values)


def test_gen_writes_no_values_yaml_with_another_default(gen: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    shutil.copy(SOURCE, tmp_path / "schemas")
    shutil.copy(RUNTIME_SCHEMA, tmp_path / "schemas")
    chart = tmp_path / "charts" / "checkpoint-runtime"
    chart.mkdir(parents=True)
    text = (
        (CHART_DIR / "values.yaml")
        .read_text()
        .replace("    deadlineSeconds: 30\n", "    deadlineSeconds: 45\n")
    )
    assert "deadlineSeconds: 45" in text
    (chart / "values.yaml").write_text(text)
    with pytest.raises(gen.ValuesDefaultError, match="the runtime's default is 30"):
        gen.write_values_comments(tmp_path)


def test_gen_refuses_a_definition_written_in_both_schemas_and_a_bad_pointer(
    gen: ModuleType,
) -> None:
    runtime = json.loads(RUNTIME_SCHEMA.read_text())
    with pytest.raises(gen.SchemaSourceError, match="redefines segment"):
        gen.compose({"$defs": {"segment": {"type": "string"}}}, runtime)
    bad = {"properties": {"x": {"$ref": "runtime-config.schema.json#/properties/nope"}}}
    with pytest.raises(gen.SchemaSourceError, match="/properties/nope"):
        gen.compose(bad, runtime)
