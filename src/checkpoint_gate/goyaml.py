"""Rendered manifests read as Go YAML reads them (sigs.k8s.io/yaml, which helm, kubectl and
conftest use): plain scalars typed by go-yaml v2's rules, not PyYAML's YAML 1.1 ones.

The differences that matter for a manifest: `08`, `1e3`, `0o17`, `1_000` are numbers in Go and
strings in PyYAML; `y`/`n` are booleans in Go; `<<` or `=` as a value are strings in Go (PyYAML
cannot construct them); sexagesimal `1:20` and timestamps stay strings; `.nan`/`.inf` cannot be
turned into JSON. Keys that are not strings become strings (`8`, `true`), as sigs.k8s.io/yaml's
conversion to JSON does. libyaml (CSafeLoader) still does the parsing.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_GO_SCALAR_TAG = "tag:checkpoint-runtime,2026:go-plain-scalar"
_MERGE_TAG = "tag:yaml.org,2002:merge"

_FIXED: dict[str, Any] = {
    **dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE"], True),
    **dict.fromkeys(["on", "On", "ON"], True),
    **dict.fromkeys(["n", "N", "no", "No", "NO", "false", "False", "FALSE"], False),
    **dict.fromkeys(["off", "Off", "OFF"], False),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], None),
    **dict.fromkeys([".nan", ".NaN", ".NAN"], math.nan),
    **dict.fromkeys([".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"], math.inf),
    **dict.fromkeys(["-.inf", "-.Inf", "-.INF"], -math.inf),
}
# go-yaml's yamlStyleFloat, and Go's strconv.ParseInt(s, 0, 64) syntax (underscores removed).
_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_INT = re.compile(r"[-+]?(0[xX][0-9a-fA-F]+|0[oO]?[0-7]+|0[bB][01]+|[1-9][0-9]*|0)")
_GO_UINT = re.compile(r"(0[xX][0-9a-fA-F]+|0[oO]?[0-7]+|0[bB][01]+|[1-9][0-9]*|0)")
_INT64 = 1 << 63


def _go_int(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    if digits[:2] in ("0x", "0X"):
        return sign * int(digits[2:], 16)
    if digits[:2] in ("0b", "0B"):
        return sign * int(digits[2:], 2)
    if digits[:2] in ("0o", "0O"):
        return sign * int(digits[2:], 8)
    if len(digits) > 1 and digits.startswith("0"):
        return sign * int(digits[1:], 8)
    return sign * int(digits)


def _number(value: float) -> int | float:
    # encoding/json writes an integral float64 below 1e21 without a fraction: `8`, not `8.0`.
    return int(value) if value.is_integer() and abs(value) < 1e21 else value


def _float_or_text(text: str, plain: str) -> Any:
    """A float-shaped scalar: its number, or its text when float64 cannot hold it (go-yaml keeps
    a scalar whose strconv.ParseFloat overflows, `61e1008`, as a string)."""
    value = float(plain)
    return text if math.isinf(value) else _number(value)


def go_plain_scalar(text: str) -> Any:
    """The value go-yaml v2 gives an untagged plain scalar, as JSON sees it."""
    if text in _FIXED:
        return _FIXED[text]
    if text == "<<":
        return text
    first = text[0]
    if first == ".":
        if _YAML_FLOAT.fullmatch(text.replace("_", "")):
            return _float_or_text(text, text.replace("_", ""))
        return text
    if not (first.isdigit() and first.isascii()) and first not in "+-":
        return text
    # Timestamps are decoded into interface{} as their text (go-yaml v2's compatibility rule).
    plain = text.replace("_", "")
    if _GO_INT.fullmatch(plain):
        value = _go_int(plain)
        if -_INT64 <= value < _INT64:
            return value
    if _GO_UINT.fullmatch(plain):
        value = _go_int(plain)
        if value < 1 << 64:
            return value
    if _YAML_FLOAT.fullmatch(plain):
        return _float_or_text(text, plain)
    return text


def _json_key(key: Any, node: Node) -> str:
    """sigs.k8s.io/yaml's key conversion: a bool or number key becomes its text."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float) and math.isfinite(key):
        return repr(key).removesuffix(".0")
    raise ConstructorError(None, None, f"unsupported map key {key!r}", node.start_mark)


class GoYamlLoader(yaml.CSafeLoader):
    """CSafeLoader with Go YAML's plain-scalar typing and JSON's string keys."""

    def resolve(self, kind: type[Node], value: str | None, implicit: tuple[bool, bool]) -> str:
        if kind is ScalarNode and implicit[0]:
            # `<<` keeps its tag so that a merge key still merges; as a value it is "<<".
            return _MERGE_TAG if value == "<<" else _GO_SCALAR_TAG
        if kind is ScalarNode:
            return yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG  # quoted: a string
        if kind is SequenceNode:
            return yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG
        return yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG

    def construct_go_scalar(self, node: Node) -> Any:
        value = go_plain_scalar(str(node.value))
        if isinstance(value, float) and not math.isfinite(value):
            raise ConstructorError(
                None, None, f"{node.value} cannot be represented in JSON", node.start_mark
            )
        return value

    def construct_json_mapping(self, node: Node) -> dict[str, Any]:
        assert isinstance(node, MappingNode)
        self.flatten_mapping(node)
        mapping: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = _json_key(self.construct_object(key_node, deep=True), key_node)
            mapping[key] = self.construct_object(value_node, deep=True)
        return mapping


GoYamlLoader.add_constructor(_GO_SCALAR_TAG, GoYamlLoader.construct_go_scalar)
GoYamlLoader.add_constructor(_MERGE_TAG, lambda _loader, _node: "<<")
GoYamlLoader.add_constructor("tag:yaml.org,2002:map", GoYamlLoader.construct_json_mapping)
