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
here; leaves without a pattern (bounded numbers, plain strings) are drawn by
hypothesis-jsonschema's `from_schema`, strings with a pattern by `_regex` (below).

Generation is constructive where the schema is conditional, so that a draw is a valid document
and is not thrown away (a filter gives up after 3 draws and then discards the whole document: that
was most of the run time, and it made documents with extra volumes, tolerations or env
`valueFrom` so rare they were hardly tested). Each object's conditions are split into branches
before drawing (`_Walker.branches`): `oneOf`/`anyOf` of `required` lists pick which keys are
present, `if` on a property's `const`/`enum` (at any depth) splits that property's values into the
`then` and the `else` side and merges the side's schema into the branch, `dependentSchemas`,
`not: {required}` and `minProperties`/`maxProperties` of 1 pick the keys present. Nothing the
construction guarantees is validated again: an object is filtered by its own subschema
(jsonschema-rs) only where a branch does not guarantee it (a condition the split does not handle,
pattern keys, a keyword not drawn), a string only where its pattern's draw does not (a second
pattern, a `not`, a length), and the finished document not at all: the property test's gate
validates every document against the whole schema and denies one the generator got wrong, and
test_values_generator.py checks the generator itself.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import re._constants as _sre
import re._parser as _sre_parse
import subprocess
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import hypothesis_jsonschema._from_schema as _from_schema
import jsonschema_rs
from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.internal.conjecture import utils as cu
from hypothesis_jsonschema import from_schema

Json = dict[str, Any]

SEED_ENV = "CHECKPOINT_PROPERTY_SEED"


def property_seed() -> int:
    """The seed of the generated documents: $CHECKPOINT_PROPERTY_SEED, else one derived from the
    commit under test, else 0. One commit draws the same documents on every run and machine, so
    a failure replays with `CHECKPOINT_PROPERTY_SEED=<seed> pytest <test>`; the next commit
    draws others, so over commits the tests see more than one fixed sample."""
    explicit = os.environ.get(SEED_ENV)
    if explicit:
        return int(explicit)
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--verify", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            check=True,
        )
        return int(head.stdout.strip()[:8], 16)
    except (OSError, subprocess.CalledProcessError, ValueError):  # no git, not a checkout
        return 0


def replay_hint(seed: int, test: str) -> str:
    return f"replay: {SEED_ENV}={seed} pytest {test}"


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
ANNOTATIONS = {"description", "title", "$comment", "default", "examples"}
# The object-level conditions `_Walker.branches` splits (every other keyword is drawn directly).
CONDITIONS = {
    "if", "then", "else", "allOf", "oneOf", "anyOf", "not", "dependentSchemas",
    "minProperties", "maxProperties",
}  # fmt: skip


# One conjunct of an `if` test: ("present" | "absent", path, None) or ("value", path, values).
Atom = tuple[str, tuple[str, ...], list[Any] | None]


# Object keywords a branch draw satisfies by construction (anything else: the object's filter).
EXACT_OBJECT = {"type", "properties", "required", "additionalProperties"} | ANNOTATIONS


EXACT_ARRAY = {"type", "items", "minItems", "maxItems", "uniqueItems"} | ANNOTATIONS


class _Infeasible(Exception):
    """A branch no document can take (a key both required and absent, an empty value set)."""


def _same(a: Any, b: Any) -> bool:
    """JSON equality: `True` is not `1` (Python's `==` says it is)."""
    return type(a) is type(b) and a == b


def _merge(a: Json, b: Json, resolve: Callable[[Json], Json]) -> Json:
    """A schema of the instances valid for both `a` and `b`, as one schema where the keywords
    combine simply (bounds tighten, `required` and `properties` join, `const`
    narrows an `enum`); a pair that does not combine so (two patterns) keeps `b`'s and checks `a`'s
    in an `allOf`, which the per-object filters enforce."""
    a, b = resolve(a), resolve(b)
    merged = dict(a)
    kept: list[Json] = []
    for key, value in b.items():
        if key in ANNOTATIONS:
            continue
        if key not in merged:
            merged[key] = value
        elif key == "properties":
            properties = dict(merged[key])
            for name, sub in value.items():
                if name in properties:
                    properties[name] = _merge(properties[name], sub, resolve)
                elif merged.get("additionalProperties") is not False:
                    properties[name] = sub
                # else: a key the branch leaves out stays out (`b` says nothing of it then)
            merged[key] = properties
        elif key == "required":
            merged[key] = list(dict.fromkeys([*merged[key], *value]))
        elif key == "items":
            merged[key] = _merge(merged[key], value, resolve)
        elif key in {"minItems", "minLength", "minimum", "minProperties"}:
            merged[key] = max(merged[key], value)
        elif key in {"maxItems", "maxLength", "maximum", "maxProperties"}:
            merged[key] = min(merged[key], value)
        elif key == "allOf":
            merged[key] = [*merged[key], *value]
        elif _same(merged[key], value):
            continue
        else:
            kept.append({key: merged[key]})
            merged[key] = value
    if "const" in merged and "enum" in merged:
        if not any(_same(merged["const"], v) for v in merged["enum"]):
            raise _Infeasible(f"const {merged['const']!r} outside {merged['enum']!r}")
        del merged["enum"]
    if kept:
        merged["allOf"] = [*merged.get("allOf", []), *kept]
    return merged


def _required_only(option: Json) -> bool:
    return set(option) == {"required"}


class _Walker:
    def __init__(self, root: Json) -> None:
        self.root = root
        self.defs: Json = root.get("$defs", {})
        self._validators: dict[str, Any] = {}
        self._left_to_filter = False  # set while an object's branches are computed

    def resolve(self, schema: Json) -> Json:
        """Inline a local `$ref` (the schema is self-contained: only #/$defs/...)."""
        while "$ref" in schema:
            ref = schema["$ref"]
            assert ref.startswith("#/$defs/"), f"non-local $ref {ref}"
            target = self.defs[ref.removeprefix("#/$defs/")]
            schema = {**{k: v for k, v in schema.items() if k != "$ref"}, **target}
        return schema

    def fast_validator(self, schema: Json) -> Any:
        """`schema` compiled by jsonschema-rs (once per distinct subschema), for the filters."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._validators:
            full = {**schema, "$defs": self.defs, "$schema": self.root["$schema"]}
            self._validators[key] = jsonschema_rs.validator_for(full)
        return self._validators[key]

    def strategy(self, schema: Json) -> st.SearchStrategy[Any]:
        schema = self.resolve(schema)
        if "const" in schema or "enum" in schema:
            values = [schema["const"]] if "const" in schema else schema["enum"]
            checker = self.fast_validator(schema)  # a merged branch may narrow them further
            allowed = [v for v in values if checker.is_valid(v)]
            return st.sampled_from(allowed) if allowed else st.nothing()
        for combinator in ("anyOf", "oneOf"):
            options = schema.get(combinator)
            if options is None or all(_required_only(option) for option in options):
                continue
            rest = {k: v for k, v in schema.items() if k != combinator}
            choices = []
            for option in options:
                try:
                    choices.append(self.strategy(_merge(rest, option, self.resolve)))
                except _Infeasible:
                    continue  # e.g. `const: ""` under a merged `minLength: 1`
            if combinator == "anyOf":  # a draw from any option is valid: nothing to check
                return st.one_of(choices)
            return st.one_of(choices).filter(self.fast_validator(schema).is_valid)
        kind = schema.get("type")
        if kind == "object" or "properties" in schema or "patternProperties" in schema:
            return self.object(schema)
        if kind == "array":
            return self.array(schema)
        return self.leaf(schema)

    def object(self, schema: Json) -> st.SearchStrategy[Any]:
        """The object drawn from its branches; filtered by its schema where a branch does not
        guarantee it (a condition left to the filter, pattern keys, an unknown keyword)."""
        branches, exact = self.exact_branches(schema)
        choices = st.one_of([self.plain_object(branch) for branch in branches])
        return choices if exact else choices.filter(self.fast_validator(schema).is_valid)

    def exact_branches(self, schema: Json) -> tuple[list[Json], bool]:
        """The object's branches, and whether every draw from them is valid by construction."""
        self._left_to_filter = False
        branches = self.branches(self.resolve(schema))
        exact = not self._left_to_filter and all(set(b) <= EXACT_OBJECT for b in branches)
        return branches, exact

    def plain_object(self, schema: Json) -> st.SearchStrategy[Any]:
        """The object's properties and pattern keys, drawn without its conditions."""
        properties: Json = schema.get("properties", {})
        required = set(schema.get("required", []))
        if not required <= set(properties) and not schema.get("patternProperties"):
            return st.nothing()
        fixed = {key: self.strategy(sub) for key, sub in properties.items() if key in required}
        optional = {
            key: self.strategy(sub) for key, sub in properties.items() if key not in required
        }
        base = st.fixed_dictionaries(fixed, optional=optional)
        patterns: Json = schema.get("patternProperties", {})
        if patterns:
            pattern, value_schema = next(iter(patterns.items()))
            keys = _regex(pattern).filter(lambda k: len(k.split("/")[-1]) <= 63)
            extra = st.dictionaries(keys, self.strategy(value_schema), max_size=MAX_ITEMS)
            base = st.tuples(base, extra).map(lambda pair: {**pair[1], **pair[0]})
        return base

    def branches(self, schema: Json) -> list[Json]:
        """`schema` split into condition-free object schemas whose union the filter accepts.

        Conditions are applied one after another, each splitting every branch so far; a
        condition of a form not handled here stays out of the split (the filter enforces it).
        """
        base = {k: v for k, v in schema.items() if k not in CONDITIONS}
        branches = [base]
        for condition in self._conditions(schema):
            branches = [split for branch in branches for split in self._split(branch, condition)]
        unique = {json.dumps(branch, sort_keys=True): branch for branch in branches}
        if not unique:  # no branch is feasible as split: draw the base and let the filter decide
            self._left_to_filter = True
            return [base]
        return list(unique.values())

    def _conditions(self, schema: Json) -> list[Json]:
        """The object's conditions one keyword each (`if` with its `then`/`else`), `allOf`'s
        parts flattened in."""
        found: list[Json] = []
        for key, value in schema.items():
            if key not in CONDITIONS or key in {"then", "else"}:
                continue
            if key == "allOf":
                for part in value:
                    part = self.resolve(part)
                    found.extend(self._conditions(part))
                    found.extend({k: v} for k, v in part.items() if k not in CONDITIONS)
            elif key == "if":
                found.append({k: schema[k] for k in ("if", "then", "else") if k in schema})
            else:
                found.append({key: value})
        return found

    def _split(self, branch: Json, condition: Json) -> Iterator[Json]:
        """Every branch of `branch` under `condition` (one keyword, or `if` and its sides)."""
        key, value = next(iter(condition.items()))
        try:
            if key == "if":
                yield from self._if(branch, value, condition.get("then"), condition.get("else"))
            elif key in {"oneOf", "anyOf"} and all(_required_only(o) for o in value):
                yield from self._one_or_any(branch, [o["required"] for o in value], key)
            elif key == "dependentSchemas":
                yield from self._dependent(branch, value)
            elif key == "not" and _required_only(value):
                for name in value["required"]:  # at least one of them is absent
                    yield from _attempt(_absent, branch, name)
            elif key == "minProperties" and value == 1 and not branch.get("patternProperties"):
                yield from self._at_least_one(branch)
            elif key == "maxProperties" and value == 1 and not branch.get("patternProperties"):
                yield from self._at_most_one(branch)
            else:
                self._left_to_filter = True
                yield branch
        except _Infeasible:
            return

    def _one_or_any(self, branch: Json, options: list[list[str]], key: str) -> Iterator[Json]:
        for index, names in enumerate(options):
            chosen = _attempt(_present_all, branch, names)
            if key == "oneOf":  # exactly one: the keys only the other options need are absent
                others = {n for j, o in enumerate(options) if j != index for n in o} - set(names)
                chosen = [c for one in chosen for c in _attempt(_absent_all, one, sorted(others))]
            yield from chosen

    def _dependent(self, branch: Json, dependents: Json) -> Iterator[Json]:
        branches = [branch]
        for name, schema in dependents.items():
            dependent = self.resolve(schema)
            branches = [
                split
                for current in branches
                for split in [
                    *_attempt(_absent, current, name),
                    *_attempt(_present_merged, current, name, dependent, self.resolve),
                ]
            ]
        yield from branches

    def _at_least_one(self, branch: Json) -> Iterator[Json]:
        if set(branch.get("required", [])) & set(branch.get("properties", {})):
            yield branch
            return
        for name in branch.get("properties", {}):
            yield from _attempt(_present, branch, name)

    def _at_most_one(self, branch: Json) -> Iterator[Json]:
        names = list(branch.get("properties", {}))
        required = set(branch.get("required", []))
        for name in names:
            if required <= {name}:
                yield from _attempt(_absent_all, branch, [n for n in names if n != name])
        if not required:
            yield from _attempt(_absent_all, branch, names)

    def _if(
        self, branch: Json, test: Json, then: Json | None, otherwise: Json | None
    ) -> Iterator[Json]:
        atoms = self._atoms(self.resolve(test))
        if atoms is None:  # not a form split here: the filter decides
            self._left_to_filter = True
            yield branch
            return
        yield from _attempt(self._side, branch, atoms, None, then)
        for index in range(len(atoms)):  # the test fails where one of its atoms fails
            yield from _attempt(self._side, branch, atoms, index, otherwise)

    def _side(
        self, branch: Json, atoms: list[Atom], failing: int | None, side: Json | None
    ) -> Json:
        """`branch` where every atom holds (failing None) or atom `failing` fails, with the
        `then` or `else` schema merged in."""
        if failing is None:
            for atom in atoms:
                branch = self._apply(branch, atom, negate=False)
        else:
            branch = self._apply(branch, atoms[failing], negate=True)
        return _merge(branch, side, self.resolve) if side else branch

    def _atoms(self, test: Json) -> list[Atom] | None:
        """`if`'s test as a conjunction of atoms: ("present", path, None), ("absent", path,
        None) or ("value", path, values) (vacuous where the path is absent); None: other form."""
        atoms: list[Atom] = []

        def walk(schema: Json, path: tuple[str, ...]) -> bool:
            for key, value in schema.items():
                if key in ANNOTATIONS:
                    continue
                if key == "required":
                    atoms.extend(("present", (*path, name), None) for name in value)
                elif key == "not" and _required_only(value) and len(value["required"]) == 1:
                    atoms.append(("absent", (*path, value["required"][0]), None))
                elif key == "properties":
                    for name, sub in value.items():
                        sub = self.resolve(sub)
                        if set(sub) - ANNOTATIONS <= {"const"} and "const" in sub:
                            atoms.append(("value", (*path, name), [sub["const"]]))
                        elif set(sub) - ANNOTATIONS <= {"enum"} and "enum" in sub:
                            atoms.append(("value", (*path, name), list(sub["enum"])))
                        elif not walk(sub, (*path, name)):
                            return False
                else:
                    return False
            return True

        return atoms if walk(test, ()) and atoms else None

    def _apply(self, branch: Json, atom: Atom, *, negate: bool) -> Json:
        """`branch` where `atom` holds (or, negate, fails)."""
        kind, path, values = atom
        *parents, name = path
        if negate:  # it fails only where every key on the path to it is there
            for depth in range(len(parents)):
                branch = self._at(branch, path[:depth], _present, path[depth])
        if kind != "value":
            present = (kind == "present") != negate
            return self._at(branch, tuple(parents), _present if present else _absent, name)
        assert values is not None
        return self._at(branch, tuple(parents), self._narrow, name, values, negate)

    def _narrow(self, schema: Json, name: str, values: list[Any], negate: bool) -> Json:
        """`schema` where property `name` is absent or one of `values` (negate: present and
        none of them)."""
        properties = schema.get("properties", {})
        if name not in properties:
            if negate:
                raise _Infeasible(f"{name}: not a property here")
            return schema
        sub = self.resolve(properties[name])
        domain = _domain(sub)
        if domain is None:  # no finite set to split: draw the values, or leave it to the filter
            self._left_to_filter |= negate
            narrowed = sub if negate else _merge(sub, {"enum": values}, self.resolve)
        else:
            kept = [v for v in domain if any(_same(v, w) for w in values) != negate]
            if not kept:
                if negate:
                    raise _Infeasible(f"{name}: every value it takes passes the test")
                return _absent(schema, name)
            narrowed = {k: v for k, v in sub.items() if k not in {"const", "enum", "type"}}
            narrowed["enum"] = kept
        schema = {**schema, "properties": {**properties, name: narrowed}}
        return _present(schema, name) if negate else schema

    def _at(
        self, schema: Json, path: tuple[str, ...], change: Callable[..., Json], *args: Any
    ) -> Json:
        """`schema` with the object schema at `path` (through `properties`) changed; a path
        through a property the branch leaves out is left as it is (nothing there to change)."""
        if not path:
            return change(schema, *args)
        properties = schema.get("properties", {})
        if path[0] not in properties:
            return schema
        inner = self._at(self.resolve(properties[path[0]]), path[1:], change, *args)
        return {**schema, "properties": {**properties, path[0]: inner}}

    def array(self, schema: Json) -> st.SearchStrategy[Any]:
        low = schema.get("minItems", 0)
        high = max(low, min(schema.get("maxItems", MAX_ITEMS), MAX_ITEMS))
        if schema.get("maxItems", MAX_ITEMS) < low:
            return st.nothing()
        items = self.strategy(schema.get("items", {}))
        unique = (
            (lambda item: json.dumps(item, sort_keys=True)) if schema.get("uniqueItems") else None
        )
        lists = st.lists(items, min_size=low, max_size=high, unique_by=unique)
        if set(schema) <= EXACT_ARRAY:
            return lists
        return lists.filter(self.fast_validator(schema).is_valid)

    def leaf(self, schema: Json) -> st.SearchStrategy[Any]:
        leaf = {k: v for k, v in schema.items() if k not in ANNOTATIONS}
        return _leaf_strategy(json.dumps(leaf, sort_keys=True))


def _attempt(build: Callable[..., Json], *args: Any) -> list[Json]:
    """The branch `build(*args)` makes, or none where it is infeasible."""
    try:
        return [build(*args)]
    except _Infeasible:
        return []


def _present(schema: Json, name: str) -> Json:
    if name not in schema.get("properties", {}) and not schema.get("patternProperties"):
        raise _Infeasible(f"{name} required but absent")
    return {**schema, "required": list(dict.fromkeys([*schema.get("required", []), name]))}


def _absent(schema: Json, name: str) -> Json:
    if name in schema.get("required", []):
        raise _Infeasible(f"{name} absent but required")
    properties = {k: v for k, v in schema.get("properties", {}).items() if k != name}
    return {**schema, "properties": properties}


def _absent_all(schema: Json, names: list[str]) -> Json:
    for name in names:
        schema = _absent(schema, name)
    return schema


def _present_all(schema: Json, names: list[str]) -> Json:
    for name in names:
        schema = _present(schema, name)
    return schema


def _present_merged(
    schema: Json, name: str, dependent: Json, resolve: Callable[[Json], Json]
) -> Json:
    return _merge(_present(schema, name), dependent, resolve)


def _domain(schema: Json) -> list[Any] | None:
    """The finite set of values `schema` admits (const, enum, boolean), else None."""
    if "const" in schema:
        return [schema["const"]]
    if "enum" in schema:
        return list(schema["enum"])
    if schema.get("type") == "boolean":
        return [False, True]
    return None


@cache
def _leaf_strategy(schema_json: str) -> st.SearchStrategy[Any]:
    schema = json.loads(schema_json)
    if schema.get("type") == "string" and "pattern" in schema:
        # Draw from a bounded copy of the pattern (every match of it matches the original),
        # then check the rest of the leaf schema (lengths, `not`, a second pattern) where the
        # draw does not already guarantee it: unbounded repetitions made most of the run time.
        strings = _regex(schema["pattern"], REPEAT_EXTRA)
        lengths = _lengths(schema["pattern"], REPEAT_EXTRA)
        exact = (
            set(schema) <= {"type", "pattern", "minLength", "maxLength"}
            and lengths is not None
            and schema.get("minLength", 0) <= lengths[0]
            and lengths[1] is not None
            and lengths[1] <= schema.get("maxLength", lengths[1])
        )
        checker = jsonschema_rs.Draft202012Validator(schema)
        return strings if exact else _satisfying(strings, checker.is_valid)
    return from_schema(schema)


LEAF_TRIES = 10  # a leaf's pattern may match mostly values its other keywords refuse


@st.composite
def _satisfying(draw: st.DrawFn, strategy: st.SearchStrategy[Any], valid: Any) -> Any:
    """A value of `strategy` that is `valid`, trying up to LEAF_TRIES draws where `.filter`
    tries 3 and then throws the whole document away (a Gt/Lt node selector value is drawn
    from `-?[0-9]{1,18}` and must also be a label value: half are negative)."""
    for _ in range(LEAF_TRIES):
        value = draw(strategy)
        if valid(value):
            return value
    reject()


REPEAT_EXTRA = 6  # a repetition is drawn at most this many times beyond its minimum


class _Unsupported(Exception):
    """A regular expression construct `_regex` does not compile (it falls back)."""


@cache
def _regex(pattern: str, extra: int | None = None) -> st.SearchStrategy[str]:
    """Strings that fully match `pattern`, as `st.from_regex(pattern, fullmatch=True)` draws
    them, but each repetition of one character class is one drawn string (`st.text`) instead of
    one draw per character: a tenth of the draws a document needs. With `extra`, repetitions
    are bounded (`*` -> `{0,6}`, `+` -> `{1,6}`, `{m,n}` -> `{m,min(n,m+6)}`): a sub-language of
    `pattern`, as unbounded repetitions made most of the run time. Constructs other than
    literals, classes, groups, alternation, repetition and the anchors around the whole pattern
    fall back to `from_regex` (unbounded)."""
    try:
        return _sequence(_regex_parts(pattern, extra))
    except _Unsupported:
        return st.from_regex(pattern, fullmatch=True)


def _regex_parts(pattern: str, extra: int | None) -> list[Any]:
    """`pattern` parsed, without the anchors around it, repetitions bounded by `extra`;
    _Unsupported for flags."""
    parsed = _sre_parse.parse(pattern)
    if parsed.state.flags & ~_sre.SRE_FLAG_UNICODE:
        raise _Unsupported("flags")
    items = list(parsed)
    if items and items[0] == (_sre.AT, _sre.AT_BEGINNING):
        items = items[1:]
    if items and items[-1] == (_sre.AT, _sre.AT_END):
        items = items[:-1]
    return items if extra is None else _bound(items, extra)


def _bound(items: list[Any], extra: int) -> list[Any]:
    bounded: list[Any] = []
    for op, av in items:
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
            low, high, body = av
            high = max(low, extra) if high is _sre.MAXREPEAT else min(high, low + extra)
            av = (low, high, _bound(list(body), extra))
        elif op is _sre.SUBPATTERN:
            av = (*av[:3], _bound(list(av[3]), extra))
        elif op is _sre.BRANCH:
            av = (av[0], [_bound(list(option), extra) for option in av[1]])
        bounded.append((op, av))
    return bounded


def _lengths(pattern: str, extra: int | None) -> tuple[int, int | None] | None:
    """The shortest and longest match `_regex(pattern, extra)` draws (None: unbounded), or
    None where `_regex` falls back to `from_regex`."""

    def span(items: list[Any]) -> tuple[int, int | None]:
        low: int = 0
        high: int | None = 0
        for op, av in items:
            if _alphabet(op, av) is not None:  # raises where `_regex` would fall back
                one: tuple[int, int | None] = (1, 1)
            elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
                inner = span(list(av[2]))
                top = None if av[1] is _sre.MAXREPEAT or inner[1] is None else av[1] * inner[1]
                one = (av[0] * inner[0], top)
            elif op is _sre.SUBPATTERN:
                one = span(list(av[3]))
            elif op is _sre.BRANCH:
                options = [span(list(option)) for option in av[1]]
                tops = [top for _, top in options if top is not None]
                unbounded = len(tops) < len(options)
                one = (min(bottom for bottom, _ in options), None if unbounded else max(tops))
            else:
                raise _Unsupported(str(op))
            low += one[0]
            high = None if high is None or one[1] is None else high + one[1]
        return low, high

    try:
        return span(_regex_parts(pattern, extra))
    except _Unsupported:
        return None


def _sequence(items: list[Any]) -> st.SearchStrategy[str]:
    """The concatenation of `items`: literal runs and groups are folded into one join of the
    drawn parts instead of a draw each (a draw costs more than a join)."""
    pieces = _pieces(items)
    drawn = [piece for piece in pieces if not isinstance(piece, str)]
    if not drawn:
        return st.just("".join(pieces))  # type: ignore[arg-type]
    if pieces == drawn[:1]:
        return drawn[0]
    join = _Join(pieces)
    if len(drawn) == 1:
        return drawn[0].map(lambda value: join((value,)))
    return st.tuples(*drawn).map(join)


def _literal(items: list[Any]) -> str | None:
    """`items` as the one string they match, or None where they match several."""
    pieces = _pieces(items)
    return "".join(pieces) if all(isinstance(p, str) for p in pieces) else None  # type: ignore[arg-type]


def _pieces(items: list[Any]) -> list[str | st.SearchStrategy[str]]:
    pieces: list[str | st.SearchStrategy[str]] = []
    for op, av in items:
        if op is _sre.SUBPATTERN:
            if av[1] or av[2]:
                raise _Unsupported("group flags")
            found = _pieces(list(av[3]))
        else:
            found = [chr(av) if op is _sre.LITERAL else _item(op, av)]
        for piece in found:
            if isinstance(piece, str) and pieces and isinstance(pieces[-1], str):
                pieces[-1] += piece
            else:
                pieces.append(piece)
    return pieces


class _Join:
    """Literal pieces and drawn strings, in order, as one string."""

    def __init__(self, pieces: list[str | st.SearchStrategy[str]]) -> None:
        self.pieces = pieces

    def __call__(self, drawn: tuple[str, ...]) -> str:
        values = iter(drawn)
        return "".join(p if isinstance(p, str) else next(values) for p in self.pieces)


def _alphabet(op: Any, av: Any) -> st.SearchStrategy[str] | None:
    """One character of a class, or None where `op` is not a one-character construct."""
    if op is _sre.LITERAL:
        return st.just(chr(av))
    if op is _sre.NOT_LITERAL:
        return st.characters(codec="utf-8", exclude_characters=chr(av))
    if op is _sre.ANY:
        return st.characters(codec="utf-8", exclude_characters="\n")
    if op is not _sre.IN:
        return None
    negated = bool(av) and av[0][0] is _sre.NEGATE
    chars: set[str] = set()
    for kind, value in av[1:] if negated else av:
        if kind is _sre.LITERAL:
            chars.add(chr(value))
        elif kind is _sre.RANGE:
            chars.update(chr(c) for c in range(value[0], value[1] + 1))
        else:
            raise _Unsupported(str(kind))
    if negated:
        return st.characters(codec="utf-8", exclude_characters="".join(sorted(chars)))
    return st.sampled_from(sorted(chars))


def _item(op: Any, av: Any) -> st.SearchStrategy[str]:
    one = _alphabet(op, av)
    if one is not None:
        return one
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
        low, high, body = av
        high = None if high is _sre.MAXREPEAT else high
        body = list(body)
        if len(body) == 1 and body[0][0] is not _sre.SUBPATTERN:
            alphabet = _alphabet(*body[0])
            if alphabet is not None:
                return st.text(alphabet, min_size=low, max_size=high)
        if (low, high) == (0, 1):
            literal = _literal(body)
            if literal is not None:
                return st.sampled_from(["", literal])
            return st.one_of(st.just(""), _sequence(body))
        return st.lists(_sequence(body), min_size=low, max_size=high).map("".join)
    if op is _sre.BRANCH:
        literals = [_literal(list(option)) for option in av[1]]
        if None not in literals:
            return st.sampled_from(literals)
        return st.one_of([_sequence(list(option)) for option in av[1]])
    raise _Unsupported(str(op))


def values_documents(schema_path: Path) -> st.SearchStrategy[Json]:
    """Complete values documents that the chart's schema accepts (the root object's filter is
    the whole schema)."""
    root: Json = json.loads(schema_path.read_text(encoding="utf-8"))
    walker = _Walker(root)
    document = {k: v for k, v in root.items() if k not in {"$defs", "$schema", "$id"}}
    return walker.strategy(document)


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


# The chart's refusals of credentials in clear (_validate.tpl, checkSecrets), in Python's re.
URL_USERINFO = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@")
SECRET_NAME = re.compile(
    r"(?i)(secret|passw(or)?d|token|credential|private_?key|api_?key|access_?key|session_?key)"
)
SECRET_VALUE = re.compile(
    r"AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY|[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]*:[^/?#\s]*@"
    r"|\b(gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,})"
)


def no_credentials_in_clear(values: Json) -> Json:
    """The same document without what the templates refuse as credentials in clear: user
    information in a collector URL (dropped from the URL), an extraEnv literal whose name or
    value looks like a secret (the variable dropped), and a /0 egress CIDR without
    networkPolicy.egress.allowAnyAddress (the acknowledgement set)."""
    repaired = json.loads(json.dumps(values))
    for collector in repaired.get("checkpoint", {}).get("collectors", []):
        while URL_USERINFO.search(collector["url"]):
            scheme, rest = collector["url"].split("://", 1)
            authority_end = min([i for i in map(rest.find, "/?#") if i >= 0] or [len(rest)])
            authority = rest[:authority_end]
            collector["url"] = f"{scheme}://{authority.rsplit('@', 1)[1]}{rest[authority_end:]}"
    if "extraEnv" in repaired:
        repaired["extraEnv"] = [
            variable
            for variable in repaired["extraEnv"]
            if "value" not in variable
            or not (SECRET_NAME.search(variable["name"]) or SECRET_VALUE.search(variable["value"]))
        ]
    egress = repaired.get("networkPolicy", {}).get("egress", {})
    holders = [egress.get("apiServer", {}), *egress.get("to", [])]
    if any(cidr.endswith("/0") for holder in holders for cidr in holder.get("cidrs", [])):
        egress["allowAnyAddress"] = True
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


def one_collector_per_namespace(values: Json) -> Json:
    """The same document without the collectors whose shard namespace an earlier one has
    (fewer collectors stay valid: the list has no minimum)."""
    repaired = json.loads(json.dumps(values))
    collectors = repaired["checkpoint"].get("collectors")
    if collectors:
        first = {collector_namespace(c): c for c in reversed(collectors)}
        repaired["checkpoint"]["collectors"] = [
            c for c in collectors if first[collector_namespace(c)] is c
        ]
    return repaired


def service_name_with_a_letter(values: Json) -> Json:
    """The same document with a fullnameOverride's leading digit made a letter (0 -> a,
    9 -> j): still a DNS label of the same length."""
    name = values.get("fullnameOverride", "")
    if not name or name[0].isalpha():
        return values
    return {**values, "fullnameOverride": "abcdefghij"[int(name[0])] + name[1:]}


def legacy_config_map_of_its_own(values: Json) -> Json:
    """The same document without a legacyConfigMap that names one of the release's objects."""
    if legacy_config_map_not_the_releases(values):
        return values
    repaired = json.loads(json.dumps(values))
    del repaired["checkpoint"]["store"]["legacyConfigMap"]
    return repaired


def renderable_values_documents(schema_path: Path) -> st.SearchStrategy[Json]:
    """Valid documents that also pass the templates' own cross-field checks (requests within
    limits, one collector per collector namespace, CIDRs without host bits, a legacy ConfigMap
    that is not the release's own, no credentials in clear), and a Service name the gate
    accepts (HYG-20): relations JSON Schema cannot express, which the chart refuses with a
    named error (the chart's own tests cover those refusals). Each is a repair of the drawn
    document, not a filter: a filter that refuses throws the whole document away and draws it
    again (one in eleven was)."""
    return (
        values_documents(schema_path)
        .map(requests_at_most_limits)
        .map(cidrs_without_host_bits)
        .map(one_collector_per_namespace)
        .map(service_name_with_a_letter)
        .map(legacy_config_map_of_its_own)
        .map(no_credentials_in_clear)
    )
