"""`just gen`: regenerate every generated file from its one source, deterministically.

- charts/checkpoint-runtime/values.schema.json from schemas/values.schema.json (sorted keys,
  stable formatting), so the chart ships exactly the schema the project reviews. The source
  takes `checkpoint` (the runtime config in its own shape) from the runtime's schema: a
  `{"$ref": "runtime-config.schema.json#/<pointer>"}` is replaced by that node of
  schemas/runtime-config.schema.json (its rules, description and default; keys beside the
  `$ref` narrow or reword it), and the runtime's `$defs` are the values schema's;
- a check that every default in values.yaml under a runtime-schema node is that node's
  `default`, so the runtime's defaults are written once;
- the values table of charts/checkpoint-runtime/README.md, from the schema's descriptions and
  the defaults in values.yaml, so the documentation cannot drift from the chart;
- the comment above every key of charts/checkpoint-runtime/values.yaml: that key's schema
  description, wrapped (the values themselves and blank-line-separated comments are kept);
- pluggable generators owned by other modules (the RBAC report of `checkpoint_gate`;
  the Rego unit tests' fixtures and the gate's Wasm policy module, built with the pinned OPA),
  called when they are installed.

Running it twice leaves no diff: outputs depend only on their sources, and files are written
only when their content changes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_SOURCE = Path("schemas/values.schema.json")
RUNTIME_SCHEMA = Path("schemas/runtime-config.schema.json")
RUNTIME_REF = f"{RUNTIME_SCHEMA.name}#"
CHART = Path("charts/checkpoint-runtime")
# Documents that carry the generated values table between the markers below.
VALUES_TABLES = (CHART / "README.md", Path("README.md"))
TABLE_START = "<!-- values-table:start -->"
TABLE_END = "<!-- values-table:end -->"
GENERATED_NOTE = "Generated from schemas/values.schema.json by `just gen`; edit the source."
VALUES_FILE = CHART / "values.yaml"
# values.yaml lines: `key:` at some indent (block YAML), and a YAML comment line.
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_][A-Za-z0-9_.-]*):(?: |$)")
COMMENT_LINE = re.compile(r"^ *#")
COMMENT_WIDTH = 100

# module -> function(root: Path) -> None; a generator whose module is absent is skipped.
PLUGINS: tuple[tuple[str, str], ...] = (
    ("checkpoint_gate.report", "write_rbac_report"),
    # policy/fixtures_test.rego from the default render, and the gate's compiled policy.wasm
    ("checkpoint_testenv.policytools", "write_policy_files"),
)

Json = dict[str, Any]


def write_if_changed(path: Path, content: str) -> bool:
    """Write only on change, so a second run touches nothing (not even mtimes)."""
    if path.exists() and path.read_text(encoding="utf-8") == content:
        return False
    path.write_text(content, encoding="utf-8")
    return True


class SchemaSourceError(SystemExit):
    """The values schema source and the runtime's schema do not compose (a bad pointer, a
    definition written in both)."""


def runtime_node(runtime: Json, pointer: str) -> Any:
    node: Any = runtime
    for part in pointer.removeprefix("/").split("/"):
        if not isinstance(node, dict) or part not in node:
            raise SchemaSourceError(
                f"gen: {SCHEMA_SOURCE}: no {RUNTIME_REF}{pointer} in {RUNTIME_SCHEMA}"
            )
        node = node[part]
    return node


def inline_runtime(node: Any, runtime: Json) -> Any:
    """`node` with every runtime-schema reference replaced by the node it points at; the keys
    beside the `$ref` win (a narrower bound, the chart's wording)."""
    if isinstance(node, list):
        return [inline_runtime(item, runtime) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(RUNTIME_REF):
        target = runtime_node(runtime, ref.removeprefix(RUNTIME_REF))
        node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    return {key: inline_runtime(value, runtime) for key, value in node.items()}


def compose(source: Json, runtime: Json) -> Json:
    """The values schema: the source with the runtime's nodes inlined and its `$defs` added."""
    clash = sorted(source.get("$defs", {}).keys() & runtime["$defs"].keys())
    if clash:
        names = ", ".join(clash)
        raise SchemaSourceError(f"gen: {SCHEMA_SOURCE} redefines {names} of {RUNTIME_SCHEMA}")
    schema: Json = inline_runtime(source, runtime)
    schema["$defs"] = {**schema.get("$defs", {}), **runtime["$defs"]}
    return schema


def load_source_schema(root: Path) -> Json:
    """The values schema as the chart ships it (without the generated-file note)."""
    source = json.loads((root / SCHEMA_SOURCE).read_text(encoding="utf-8"))
    runtime = json.loads((root / RUNTIME_SCHEMA).read_text(encoding="utf-8"))
    return compose(source, runtime)


def render_chart_schema(schema: Json) -> str:
    """The chart's copy: the source plus a do-not-edit note, keys sorted, two-space indent."""
    generated = {"$comment": GENERATED_NOTE, **schema}
    return json.dumps(generated, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_values_schema(root: Path) -> bool:
    content = render_chart_schema(load_source_schema(root))
    return write_if_changed(root / CHART / "values.schema.json", content)


def resolve(schema: Json, node: Json) -> Json:
    """Follow local `#/$defs/...` references (the schema has no remote ones)."""
    while "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"only local $defs references are allowed, got {ref!r}")
        target = schema["$defs"][ref.removeprefix("#/$defs/")]
        # A property's own description wins over the referenced definition's.
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def describe_type(schema: Json, node: Json) -> str:
    """A short human type: string, integer, one of a|b, map, list, ..."""
    node = resolve(schema, node)
    if "const" in node:
        return json.dumps(node["const"])
    if "enum" in node:
        return "one of " + ", ".join(json.dumps(v) for v in node["enum"])
    alternatives = node.get("anyOf") or node.get("oneOf")
    if alternatives:
        return " or ".join(describe_type(schema, alt) for alt in alternatives)
    kind = node.get("type", "any")
    if kind == "object" and "patternProperties" in node:
        return "map"
    if kind == "array":
        return "list"
    return str(kind)


def table_rows(
    schema: Json, node: Json, defaults: Any, prefix: str = ""
) -> Iterator[tuple[str, str, str, str]]:
    """(key, type, default, description) for every documented value, in schema order.

    An object is expanded into its properties only where values.yaml gives it content;
    empty maps and lists (affinity, nodeSelector, collectors) stay one row.
    """
    node = resolve(schema, node)
    for name, child in node.get("properties", {}).items():
        key = f"{prefix}{name}"
        present = isinstance(defaults, dict) and name in defaults
        value = defaults[name] if present else None
        resolved = resolve(schema, child)
        if isinstance(value, dict) and value and "properties" in resolved:
            yield from table_rows(schema, resolved, value, f"{key}.")
            continue
        default = f"`{json.dumps(value, ensure_ascii=False)}`" if present else ""
        yield key, describe_type(schema, child), default, resolved.get("description", "")


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_values_table(schema: Json, defaults: Json) -> str:
    lines = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for key, kind, default, description in table_rows(schema, schema, defaults):
        lines.append(f"| `{key}` | {cell(kind)} | {cell(default)} | {cell(description)} |")
    return "\n".join(lines)


def replace_between_markers(text: str, body: str) -> str:
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise SystemExit(f"gen: a values table needs the markers {TABLE_START} ... {TABLE_END}")
    return f"{text[: start + len(TABLE_START)]}\n{body}\n{text[end:]}"


def write_values_table(root: Path, readme: Path) -> bool:
    schema = load_source_schema(root)
    defaults = yaml.safe_load((root / CHART / "values.yaml").read_text(encoding="utf-8"))
    table = render_values_table(schema, defaults)
    content = replace_between_markers((root / readme).read_text(encoding="utf-8"), table)
    return write_if_changed(root / readme, content)


class ValuesCommentError(SystemExit):
    """values.yaml holds a key the schema does not define (so it has no description)."""


def key_schema(schema: Json, parent: Json | None, key: str, path: str) -> Json | None:
    """The schema of `key` under `parent`; None inside free-form maps and lists (data, not keys)."""
    if parent is None:
        return None
    properties = parent.get("properties")
    if properties is None:
        return None
    if key not in properties:
        if parent.get("additionalProperties") is False and "patternProperties" not in parent:
            message = f"gen: {VALUES_FILE}: {path} is not defined by {SCHEMA_SOURCE}"
            raise ValuesCommentError(message)
        return None
    return resolve(schema, properties[key])


def key_comment(indent: str, description: str) -> list[str]:
    width = COMMENT_WIDTH - len(indent) - 2
    wrapped = textwrap.wrap(description, width, break_long_words=False, break_on_hyphens=False)
    return [f"{indent}# {line}" for line in wrapped]


def comment_values(schema: Json, text: str) -> str:
    """values.yaml with each schema-defined key preceded by exactly its schema description.

    The comment lines directly above a key are replaced; comments separated from a key by a
    blank line (the file header, section notes) and every value are kept as they are. Keys
    inside free-form maps and list items are data and get no comment.
    """
    out: list[str] = []
    pending: list[str] = []
    # (indent, dotted path, schema of the mapping that starts below that key)
    parents: list[tuple[int, str, Json | None]] = [(-1, "", resolve(schema, schema))]
    for line in text.splitlines():
        if COMMENT_LINE.match(line):
            pending.append(line)
            continue
        match = KEY_LINE.match(line)
        if match is None:
            out += pending
            pending = []
            out.append(line)
            continue
        indent, key = match["indent"], match["key"]
        while parents[-1][0] >= len(indent):
            parents.pop()
        _, parent_path, parent = parents[-1]
        path = f"{parent_path}.{key}" if parent_path else key
        node = key_schema(schema, parent, key, path)
        if node is None:
            out += pending
        else:
            out += key_comment(indent, node.get("description", ""))
        pending = []
        out.append(line)
        parents.append((len(indent), path, node))
    out += pending
    return "\n".join(out) + "\n"


class ValuesDefaultError(SystemExit):
    """values.yaml gives a runtime setting another default than the runtime's schema."""


def default_mismatches(schema: Json, node: Json, values: Any, prefix: str = "") -> Iterator[str]:
    """`key: values.yaml says X, the runtime's default is Y` for every differing default."""
    if not isinstance(values, dict):
        return
    for name, child in resolve(schema, node).get("properties", {}).items():
        if name not in values:
            continue
        resolved = resolve(schema, child)
        key = f"{prefix}{name}"
        if "default" in resolved and values[name] != resolved["default"]:
            said, default = json.dumps(values[name]), json.dumps(resolved["default"])
            yield f"{key}: values.yaml says {said}, the runtime's default is {default}"
        yield from default_mismatches(schema, resolved, values[name], f"{key}.")


def check_values_defaults(schema: Json, values: Any) -> None:
    found = list(default_mismatches(schema, schema, values))
    if found:
        raise ValuesDefaultError(f"gen: {VALUES_FILE}: " + "; ".join(found))


def write_values_comments(root: Path) -> bool:
    path = root / VALUES_FILE
    text = path.read_text(encoding="utf-8")
    schema = load_source_schema(root)
    check_values_defaults(schema, yaml.safe_load(text))
    commented = comment_values(schema, text)
    if yaml.safe_load(commented) != yaml.safe_load(text):
        raise ValuesCommentError(f"gen: {VALUES_FILE}: commenting changed the values; not written")
    return write_if_changed(path, commented)


def load_plugin(module_name: str, function_name: str) -> Callable[[Path], object] | None:
    """The generator function, or None when its module is not part of the tree yet.

    Only the absence of that module (or its package) is tolerated; an import error inside
    an existing module is a real failure and propagates.
    """
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name not in {module_name, module_name.rpartition(".")[0]}:
            raise
        return None
    function: Callable[[Path], object] = getattr(module, function_name)
    return function


def generate(root: Path) -> list[str]:
    """Run every generator; returns one log line per step."""
    log = []
    steps: list[tuple[Path, Callable[[Path], bool]]] = [
        (CHART / "values.schema.json", write_values_schema),
        (VALUES_FILE, write_values_comments),
        *((readme, partial(write_values_table, readme=readme)) for readme in VALUES_TABLES),
    ]
    for path, writer in steps:
        log.append(f"{path}: {'updated' if writer(root) else 'unchanged'}")
    for module_name, function_name in PLUGINS:
        plugin = load_plugin(module_name, function_name)
        if plugin is None:
            log.append(f"{module_name}.{function_name}: skipped (module not present)")
            continue
        plugin(root)
        log.append(f"{module_name}.{function_name}: ran")
    return log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="project root (default: this repo)")
    args = parser.parse_args(argv)
    for line in generate(args.root.resolve()):
        print(f"gen: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
