"""Hypothesis strategies for chart values documents, drawn from the chart's values schema.

Why not `hypothesis_jsonschema.from_schema(whole schema)`: with the pinned versions it does not
work, and would be too slow if it did.
- hypothesis-jsonschema 0.23.1 drives Hypothesis' private `cu.many()` with `.more()`, which
  Hypothesis 6.170 replaced by a context manager and an iterator: every object schema fails with
  "'many' object has no attribute 'more'". `_ManyWithMore` below adapts the new protocol to that
  one call site (kept for leaves whose canonical form still reaches it);
- even with the shim it took 5-90 s per document on this schema (its if/then/else, allOf, anyOf
  of $refs and patternProperties are resolved by rejection sampling at the top level).

So this module walks the schema itself: objects, arrays, `$ref`, `anyOf`/`oneOf` are composed
here; every leaf (strings with patterns, bounded numbers, enums, consts) is drawn by
hypothesis-jsonschema's `from_schema`. Each object is then filtered by its own subschema (with
jsonschema), which enforces if/then/else, allOf and dependentSchemas where they apply, so
rejections stay local instead of discarding whole documents. The top-level document is checked
against the full schema once more.
"""

from __future__ import annotations

import ipaddress
import json
import re
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import hypothesis_jsonschema._from_schema as _from_schema
import jsonschema
import jsonschema_rs
from hypothesis import strategies as st
from hypothesis.internal.conjecture import utils as cu
from hypothesis_jsonschema import from_schema

Json = dict[str, Any]


class _ManyWithMore:
    """The `.more()` / `.reject()` protocol of old `cu.many`, on top of the new iterator one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._many = cu.many(*args, **kwargs)
        self._many.__enter__()
        self._elements = iter(self._many)

    def more(self) -> bool:
        try:
            next(self._elements)
        except StopIteration:
            self._many.__exit__(None)
            return False
        return True

    def reject(self, why: str | None = None) -> None:
        self._many.reject(why)


if not hasattr(cu.many, "more"):
    _from_schema.cu = SimpleNamespace(many=_ManyWithMore)

MAX_ITEMS = 3  # arrays and maps stay small: the gate, not the generator, is what is under test
STRUCTURAL = {"properties", "patternProperties", "items"}
ANNOTATIONS = {"description", "title", "$comment", "default", "examples"}


class _Walker:
    def __init__(self, root: Json) -> None:
        self.root = root
        self.defs: Json = root.get("$defs", {})

    def resolve(self, schema: Json) -> Json:
        """Inline a local `$ref` (the schema is self-contained: only #/$defs/...)."""
        while "$ref" in schema:
            ref = schema["$ref"]
            assert ref.startswith("#/$defs/"), f"non-local $ref {ref}"
            target = self.defs[ref.removeprefix("#/$defs/")]
            schema = {**{k: v for k, v in schema.items() if k != "$ref"}, **target}
        return schema

    def validator(self, schema: Json) -> Any:
        """jsonschema's validator of `schema` (used once per document, on the whole of it)."""
        full = {**schema, "$defs": self.defs}
        return jsonschema.validators.validator_for(self.root)(full)

    def fast_validator(self, schema: Json) -> Any:
        """The same check compiled by jsonschema-rs, for the filters run on every draw."""
        full = {**schema, "$defs": self.defs, "$schema": self.root["$schema"]}
        return jsonschema_rs.validator_for(full)

    def strategy(self, schema: Json) -> st.SearchStrategy[Any]:
        schema = self.resolve(schema)
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        for combinator in ("anyOf", "oneOf"):
            if combinator in schema:
                rest = {k: v for k, v in schema.items() if k != combinator}
                options = [
                    self.strategy({**rest, **self.resolve(option)}) for option in schema[combinator]
                ]
                checker = self.fast_validator(schema)
                return st.one_of(options).filter(checker.is_valid)
        kind = schema.get("type")
        if kind == "object" or "properties" in schema or "patternProperties" in schema:
            return self.object(schema)
        if kind == "array":
            return self.array(schema)
        return self.leaf(schema)

    def object(self, schema: Json) -> st.SearchStrategy[Any]:
        properties: Json = schema.get("properties", {})
        required = set(schema.get("required", []))
        fixed = {key: self.strategy(sub) for key, sub in properties.items() if key in required}
        optional = {
            key: self.strategy(sub) for key, sub in properties.items() if key not in required
        }
        base = st.fixed_dictionaries(fixed, optional=optional)
        patterns: Json = schema.get("patternProperties", {})
        if patterns:
            pattern, value_schema = next(iter(patterns.items()))
            keys = st.from_regex(pattern, fullmatch=True).filter(
                lambda k: len(k.split("/")[-1]) <= 63
            )
            extra = st.dictionaries(keys, self.strategy(value_schema), max_size=MAX_ITEMS)
            base = st.tuples(base, extra).map(lambda pair: {**pair[1], **pair[0]})
        return base.filter(self.fast_validator(schema).is_valid)

    def array(self, schema: Json) -> st.SearchStrategy[Any]:
        low = schema.get("minItems", 0)
        high = max(low, min(schema.get("maxItems", MAX_ITEMS), MAX_ITEMS))
        items = self.strategy(schema.get("items", {}))
        lists = st.lists(items, min_size=low, max_size=high)
        return lists.filter(self.fast_validator(schema).is_valid)

    def leaf(self, schema: Json) -> st.SearchStrategy[Any]:
        leaf = {k: v for k, v in schema.items() if k not in ANNOTATIONS}
        return _leaf_strategy(json.dumps(leaf, sort_keys=True))


@cache
def _leaf_strategy(schema_json: str) -> st.SearchStrategy[Any]:
    schema = json.loads(schema_json)
    if schema.get("type") == "string" and "pattern" in schema:
        # Draw from a bounded copy of the pattern (every match of it matches the original),
        # then check the real leaf schema: unbounded repetitions made most of the run time.
        checker = jsonschema_rs.Draft202012Validator(schema)
        return st.from_regex(_bounded(schema["pattern"]), fullmatch=True).filter(checker.is_valid)
    return from_schema(schema)


_REPEAT = re.compile(r"(?<!\\)(\*|\+|\{(\d+),(\d+)\})")


def _bounded(pattern: str, extra: int = 6) -> str:
    """`*` -> `{0,6}`, `+` -> `{1,6}`, `{m,n}` -> `{m,min(n,m+6)}`: a sub-language of `pattern`."""

    def bound(match: re.Match[str]) -> str:
        if match.group(1) == "*":
            return f"{{0,{extra}}}"
        if match.group(1) == "+":
            return f"{{1,{extra}}}"
        low, high = int(match.group(2)), int(match.group(3))
        return f"{{{low},{min(high, low + extra)}}}"

    return _REPEAT.sub(bound, pattern)


def values_documents(schema_path: Path) -> st.SearchStrategy[Json]:
    """Complete values documents that the chart's schema accepts."""
    root: Json = json.loads(schema_path.read_text(encoding="utf-8"))
    walker = _Walker(root)
    document = {k: v for k, v in root.items() if k not in {"$defs", "$schema", "$id"}}
    return walker.strategy(document).filter(walker.validator(document).is_valid)


_CPU = re.compile(r"^(?P<number>[0-9.]+)(?P<milli>m?)$")
_MEMORY_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 10**3, "M": 10**6, "G": 10**9}


def quantity(kind: str, text: str) -> float:
    """A Kubernetes CPU (cores) or memory (bytes) quantity, for the forms the schema allows."""
    if kind == "cpu":
        match = _CPU.match(text)
        assert match, text
        return float(match.group("number")) / (1000 if match.group("milli") else 1)
    for unit, factor in _MEMORY_UNITS.items():
        if text.endswith(unit) and text[: -len(unit)].isdigit():
            return int(text[: -len(unit)]) * factor
    raise AssertionError(text)


def requests_within_limits(values: Json) -> bool:
    """The one relation the schema cannot express and the templates refuse: requests <= limits."""
    for resources in (values["resources"], values["tests"]["resources"]):
        for kind in ("cpu", "memory"):
            if quantity(kind, resources["requests"][kind]) > quantity(
                kind, resources["limits"][kind]
            ):
                return False
    return True


def requests_at_most_limits(values: Json) -> Json:
    """The same document with each request above its limit swapped with that limit.

    requests and limits share one schema, so the swap keeps the document valid. Repairing
    instead of filtering matters: with four independent draws, about 15 of 16 generated
    documents had some request above its limit, and generating them was most of the run time.
    """
    repaired = json.loads(json.dumps(values))
    for resources in (repaired["resources"], repaired["tests"]["resources"]):
        for kind in ("cpu", "memory"):
            request, limit = resources["requests"][kind], resources["limits"][kind]
            if quantity(kind, request) > quantity(kind, limit):
                resources["requests"][kind], resources["limits"][kind] = limit, request
    return repaired


def cidrs_without_host_bits(values: Json) -> Json:
    """The same document with every egress CIDR replaced by its network address.

    The schema's pattern cannot see bits beyond the prefix (10.0.0.1/24), which the API server
    refuses and the templates refuse by name; the network address keeps the drawn prefix.
    """
    repaired = json.loads(json.dumps(values))
    egress = repaired.get("networkPolicy", {}).get("egress", {})
    holders = [egress.get("apiServer", {}), *egress.get("to", [])]
    for holder in holders:
        if "cidrs" in holder:
            holder["cidrs"] = list(
                dict.fromkeys(
                    str(ipaddress.ip_network(cidr, strict=False)) for cidr in holder["cidrs"]
                )
            )
    return repaired


def collector_namespace(collector: Json) -> str:
    """The collector's shard namespace: [<tailnet>/]flowlogs or [<tailnet>/]objectstore/<feed>."""
    parts = [collector["tailnet"]] if collector.get("tailnet") else []
    parts.append(collector["kind"])
    if collector["kind"] == "objectstore":
        parts.append(collector["feed"])
    return "/".join(parts)


def collector_namespaces_unique(values: Json) -> bool:
    """The other relation the templates refuse: two collectors sharing one shard."""
    namespaces = [collector_namespace(c) for c in values["checkpoint"].get("collectors", [])]
    return len(namespaces) == len(set(namespaces))


def service_name_starts_with_a_letter(values: Json) -> bool:
    """Open chart finding (reported to the chart owner): the schema lets fullnameOverride start
    with a digit, which makes the Service name an invalid DNS-1035 label on the Kubernetes
    versions Chart.yaml admits (>=1.29; relaxed Service names are only beta in 1.36). The gate
    denies it (HYG-20, see test_property_values.py); generation skips it until the schema does."""
    name = values.get("fullnameOverride", "")
    return not name or name[0].isalpha()


def legacy_config_map_not_the_releases(values: Json) -> bool:
    """The chart refuses a legacyConfigMap that names one of the release's own objects (its
    Lease, config ConfigMap, test pod, ServiceAccount or full name); the schema cannot, as these
    depend on the release. Release-derived default names are left to chance (random names never
    match "<release>-checkpoint-runtime")."""
    store = values["checkpoint"].get("store", {})
    legacy = store.get("legacyConfigMap", "")
    full = values.get("fullnameOverride", "")
    owned = {store.get("leaseName", ""), values["serviceAccount"].get("name", "")}
    if full:
        owned |= {full, f"{full}-config", f"{full[:58].rstrip('-')}-test"}
    return not legacy or legacy not in owned


def renderable_values_documents(schema_path: Path) -> st.SearchStrategy[Json]:
    """Valid documents that also pass the templates' own cross-field checks (requests within
    limits, one collector per collector namespace, CIDRs without host bits, a legacy ConfigMap
    that is not the release's own): relations JSON
    Schema cannot express, which the chart refuses with a named error (the chart's own tests
    cover those refusals)."""
    return (
        values_documents(schema_path)
        .map(requests_at_most_limits)
        .map(cidrs_without_host_bits)
        .filter(collector_namespaces_unique)
        .filter(service_name_starts_with_a_letter)
        .filter(legacy_config_map_not_the_releases)
    )
