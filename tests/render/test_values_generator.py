"""The values generator (values_strategies.py): the property test is only as good as it.

- every pattern of the values schema: the strings `_regex` draws match it as the gate's
  validator (jsonschema-rs, ECMA regular expressions) reads it, within the lengths `_lengths`
  states (a leaf is drawn without a filter only when those lengths fit its schema);
- every object of the schema with conditions (`if`/`then`/`else`, `oneOf`/`anyOf` of required
  keys, `dependentSchemas`, `not`, `minProperties`/`maxProperties`), the document's root
  included: its conditions are split into branches, so it is drawn without a filter; the
  branches together reach every property and every value of a property with a finite set of
  values (enum, const, boolean), and each branch draws only valid objects. Where a filter
  decided instead, a rejected object threw the whole document away: in 200 documents of the
  filtering generator not one extra volume, env `valueFrom` or toleration with an operator was
  left.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings
from values_strategies import CONDITIONS, REPEAT_EXTRA, _domain, _lengths, _regex, _Walker

from checkpoint_gate.paths import CHART_DIR

SCHEMA: dict[str, Any] = json.loads((CHART_DIR / "values.schema.json").read_text("utf-8"))
DEFS: dict[str, Any] = SCHEMA["$defs"]
GENERATOR = settings(
    max_examples=60,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],  # many small draws per example, by design
)


def patterns(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            elif key == "patternProperties":
                yield from value
                yield from patterns(list(value.values()))
            else:
                yield from patterns(value)
    elif isinstance(node, list):
        for value in node:
            yield from patterns(value)


PATTERNS = sorted(set(patterns(SCHEMA)))


@pytest.mark.parametrize("pattern", PATTERNS)
def test_drawn_strings_match_the_pattern_as_the_gate_reads_it(pattern: str) -> None:
    """Drawn as patterns are (unbounded: pattern property keys) and bounded (every leaf)."""
    checker = jsonschema_rs.Draft202012Validator({"type": "string", "pattern": pattern})
    bounds = {extra: _lengths(pattern, extra) for extra in (None, REPEAT_EXTRA)}

    @seed(0)
    @GENERATOR
    @given(_regex(pattern, None), _regex(pattern, REPEAT_EXTRA))
    def draw(unbounded: str, bounded: str) -> None:
        for extra, text in ((None, unbounded), (REPEAT_EXTRA, bounded)):
            assert checker.is_valid(text), text
            assert re.search(pattern, text), text
            lengths = bounds[extra]
            if lengths is not None:
                low, high = lengths
                assert low <= len(text) <= (len(text) if high is None else high), (text, lengths)

    draw()


def test_bounded_lengths_are_those_of_the_bounded_pattern() -> None:
    """`{0,61}` is drawn as at most 6 beyond its minimum, and a class's own `*`/`+`/`{` are
    characters, not repetitions (a textual rewrite of the pattern once turned
    `[...()*+,;=-]` into a class of `{`, `0`, `,`, `6`, `}`)."""
    assert _lengths("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", REPEAT_EXTRA) == (1, 8)
    assert _lengths("^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", None) == (1, 63)
    assert _lengths("^/[^:]*$", REPEAT_EXTRA) == (1, 7)
    assert _lengths("^/[^:]*$", None) == (1, None)

    @seed(0)
    @GENERATOR
    @given(_regex("^[*+{}]+$", REPEAT_EXTRA))
    def draw(text: str) -> None:
        assert set(text) <= set("*+{}")
        assert 1 <= len(text) <= REPEAT_EXTRA

    draw()


def conditional(schema: dict[str, Any]) -> bool:
    return "properties" in schema and bool(set(schema) & CONDITIONS)


def inline_objects(node: dict[str, Any], pointer: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object schema written out under `node` (through properties and items)."""
    yield pointer, node
    for name, sub in node.get("properties", {}).items():
        yield from inline_objects(sub, f"{pointer}/properties/{name}")
    if isinstance(node.get("items"), dict):
        yield from inline_objects(node["items"], f"{pointer}/items")


CONDITIONAL = [f"#/$defs/{name}" for name, schema in sorted(DEFS.items()) if conditional(schema)]
CONDITIONAL += [
    pointer
    for pointer, schema in inline_objects(SCHEMA, "#")
    if conditional(schema) and pointer != "#"  # the root: test_every_conditional_object_is_found
]


def at(pointer: str) -> dict[str, Any]:
    node: Any = SCHEMA
    for part in pointer.removeprefix("#/").split("/"):
        node = node[part]
    return dict(node)


def test_every_conditional_object_is_found() -> None:
    """The list below is not empty by accident (the schema's conditions are where they were)."""
    assert {
        "#/$defs/toleration",
        "#/$defs/extraVolume",
        "#/properties/networkPolicy",
        "#/properties/networkPolicy/properties/egress/properties/to/items",
    } <= set(CONDITIONAL)
    root = {k: v for k, v in SCHEMA.items() if k not in {"$defs", "$schema", "$id"}}
    assert _Walker(SCHEMA).exact_branches(root)[1]  # the root's `if` as well


def reachable(walker: _Walker, schema: dict[str, Any], path: str = "") -> set[str]:
    """Every property path of `schema` and `path=value` for each value of a property with a
    finite set of them, through the objects written out in it (a `$ref`'d object is checked as
    a definition of its own)."""
    found: set[str] = set()
    for name, sub in schema.get("properties", {}).items():
        here = f"{path}.{name}"
        found.add(here)
        if "$ref" in sub and walker.resolve(sub).get("type") == "object":
            continue
        sub = walker.resolve(sub)
        values = _domain(sub)
        if values is not None:
            found |= {f"{here}={json.dumps(value)}" for value in values}
        elif sub.get("type") == "object":
            found |= reachable(walker, sub, here)
    return found


@pytest.mark.parametrize("pointer", CONDITIONAL)
def test_conditional_objects_are_drawn_valid_and_every_way(pointer: str) -> None:
    """Its branches leave no condition to a filter, together reach every property and value
    the schema has, and each draws only valid objects."""
    walker = _Walker(SCHEMA)
    schema = at(pointer)
    branches, exact = walker.exact_branches(schema)
    assert exact, "a condition is left to a filter"
    reached = set().union(*(reachable(walker, branch) for branch in branches))
    assert reachable(walker, walker.resolve(schema)) - reached == set()
    checker = walker.fast_validator(schema)
    for branch in branches:

        @seed(0)
        @settings(GENERATOR, max_examples=20)
        @given(walker.plain_object(branch))
        def draw(drawn: dict[str, Any]) -> None:
            assert checker.is_valid(drawn), drawn

        draw()
