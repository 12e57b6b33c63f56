"""Evaluate the conftest policies on rendered manifests in-process, as structured verdicts.

The policies in policy/ are plain conftest policy (`package main`, `deny`/`warn`). `just gen`
compiles them with OPA to a WebAssembly module (policy.wasm beside this file, committed) whose
entrypoint `gate/verdicts` (entrypoint.rego) evaluates them the two ways conftest runs them: one
document at a time (`conftest test`) and the whole release at once (`conftest test --combine`),
where the cross-object rules fire. The module is compiled by wasmtime once per machine and kept
in the user's cache (checkpoint_gate.wasmcache), loaded once per process, and each release is
one evaluation. Both sets of messages are merged; a message found both ways counts
once.

An evaluation error (a policy that fails at run time) never escapes as a traceback: the release
is evaluated again document by document and rule by rule, and each failing pair becomes an
`ENGINE` deny naming the document and the rule.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from opapywasm import UNDEFINED, OpaBuiltinError, OpaWasmError, OpaWasmPolicy, PolicyConfig
from opapywasm import runtime as _wasm_runtime

from checkpoint_gate.manifests import Manifest, manifest_label
from checkpoint_gate.wasmcache import policy_from_wasm

POLICY_WASM = Path(__file__).with_name("policy.wasm")
VERDICTS = "gate/verdicts"
DENY = "main/deny"
WARN = "main/warn"
ENGINE_RULE = "ENGINE"
COMBINED_SOURCE = "<release>"
COMBINED_LABEL = "release (combined)"  # "<kind> <name>" of an ENGINE finding about --combine

# Initial pages of the memory the host gives the module. opapywasm starts every module at 2 pages
# (128 KiB) whatever its `env.memory` import declares, and a module whose data segments need more
# is refused ("memory types incompatible"); a larger start satisfies any declared minimum up to it.
POLICY_MEMORY_PAGES = 16
_wasm_runtime._DEFAULT_MEMORY_PAGES = max(_wasm_runtime._DEFAULT_MEMORY_PAGES, POLICY_MEMORY_PAGES)

# "RBAC-3 Role cr-checkpoint-runtime: rules differ ..." -> rule id, kind, name, detail.
_MESSAGE = re.compile(r"^(?P<rule>[A-Z]+-\d+) (?P<kind>\S+) (?P<name>\S+): (?P<detail>.*)$", re.S)


class Level(StrEnum):
    DENY = "deny"
    WARN = "warn"


class Mode(StrEnum):
    DOCUMENT = "document"  # conftest test: one document per evaluation
    COMBINED = "combined"  # conftest test --combine: the whole release in one input


@dataclass(frozen=True)
class Verdict:
    """One policy message, located: which rule, which object, which template."""

    level: Level
    rule: str
    kind: str
    name: str
    message: str
    source: str

    @property
    def obj(self) -> str:
        return f"{self.kind} {self.name}"


def combined_input(manifests: Sequence[Manifest]) -> list[dict[str, Any]]:
    """conftest's --combine input: one {path, contents} per file; several documents -> a list."""
    by_source: dict[str, list[dict[str, Any]]] = {}
    for manifest in manifests:
        by_source.setdefault(manifest.source, []).append(manifest.document)
    return [
        {"path": path, "contents": documents[0] if len(documents) == 1 else documents}
        for path, documents in by_source.items()
    ]


class PolicyLoadError(ValueError):
    """The compiled policy module is missing, not Wasm, or lacks the gate's entrypoints."""


@cache
def _load(wasm: Path) -> OpaWasmPolicy:
    # One instance: the gate evaluates from one thread; a pool would only cost start-up time.
    config = PolicyConfig(pool_size=1, default_entrypoint=VERDICTS, max_input_bytes=64_000_000)
    try:
        policy = policy_from_wasm(wasm.read_bytes(), config)
    except (OSError, OpaWasmError) as error:
        detail = " ".join(str(error).split())
        raise PolicyLoadError(f"{wasm}: not a compiled policy module: {detail}") from error
    missing = {VERDICTS, DENY, WARN} - set(policy.entrypoints)
    if missing:
        raise PolicyLoadError(f"{wasm}: lacks the entrypoints {sorted(missing)}")
    for name, function in HOST_BUILTINS.items():
        if name in policy.builtins:
            policy.register_builtin(name, function)
    return policy


def _sha256(text: Any) -> str:
    """OPA's crypto.sha256: the hex digest of a string's UTF-8 bytes."""
    if not isinstance(text, str):
        raise OpaBuiltinError(f"crypto.sha256: operand must be a string, got {text!r}")
    return hashlib.sha256(text.encode()).hexdigest()


def _regex_replace(text: Any, pattern: Any, value: Any) -> str:
    """OPA's regex.replace (Go's ReplaceAllString) for a literal replacement: Go expands `$1`
    and `${name}` in `value`, which this host function does not, so it refuses them."""
    if not all(isinstance(arg, str) for arg in (text, pattern, value)):
        raise OpaBuiltinError("regex.replace: operands must be strings")
    if "$" in value:
        raise OpaBuiltinError(f"regex.replace: group expansion in {value!r} is not supported")
    try:
        return re.sub(pattern, lambda _: str(value), text)
    except re.error as error:
        raise OpaBuiltinError(f"regex.replace: bad pattern {pattern!r}: {error}") from None


# Builtins OPA's Wasm module leaves to the host (conftest has them natively): the RBAC policy
# derives the runtime's shard names with crypto.sha256 and regex.replace.
HOST_BUILTINS: dict[str, Callable[..., Any]] = {
    "crypto.sha256": _sha256,
    "regex.replace": _regex_replace,
}


class PolicyEngine:
    """The compiled policy module (loaded once per process and file); evaluate many releases."""

    def __init__(self, wasm: Path = POLICY_WASM) -> None:
        self.wasm = wasm
        self._policy = _load(wasm)

    def evaluate(
        self,
        manifests: Sequence[Manifest],
        modes: Iterable[Mode] = (Mode.DOCUMENT, Mode.COMBINED),
    ) -> list[Verdict]:
        """Every distinct verdict over the release, denies first, in a stable order."""
        modes = set(modes)
        sources = {(m.kind, m.name): m.source for m in manifests}
        documents = [m.document for m in manifests] if Mode.DOCUMENT in modes else []
        combined = combined_input(manifests) if Mode.COMBINED in modes else []
        try:
            found = self._verdicts(documents, combined, Mode.COMBINED in modes)
        except OpaWasmError:
            found = self._locate_errors(manifests, modes)
        seen: dict[tuple[Level, str], Verdict] = {}
        for level, message, verdict in found:
            seen.setdefault((level, message), verdict or _verdict(level, message, sources))
        order = {Level.DENY: 0, Level.WARN: 1}
        return sorted(seen.values(), key=lambda v: (order[v.level], v.rule, v.obj, v.message))

    def _verdicts(
        self, documents: list[Any], combined: list[Any], with_combined: bool
    ) -> list[tuple[Level, str, Verdict | None]]:
        result = self._policy.evaluate({"documents": documents, "combined": combined})
        if not isinstance(result, dict):
            raise OpaWasmError(f"{VERDICTS} returned {result!r}")
        per_document = result.get("documents", [])
        if not isinstance(per_document, list):
            raise OpaWasmError(f"{VERDICTS} returned documents={per_document!r}")
        outcomes: list[Any] = list(per_document)
        if with_combined:
            outcomes.append(result.get("combined", {}))
        found: list[tuple[Level, str, Verdict | None]] = []
        for outcome in outcomes:
            for level in Level:
                found.extend((level, message, None) for message in _messages(outcome, level))
        return found

    def _locate_errors(
        self, manifests: Sequence[Manifest], modes: set[Mode]
    ) -> list[tuple[Level, str, Verdict | None]]:
        """Evaluate input by input and rule by rule; each failure becomes an ENGINE deny."""
        inputs: list[tuple[str, str, Any]] = []
        if Mode.DOCUMENT in modes:
            inputs += [(manifest_label(m), m.source, m.document) for m in manifests]
        if Mode.COMBINED in modes:
            inputs.append((COMBINED_LABEL, COMBINED_SOURCE, combined_input(manifests)))
        found: list[tuple[Level, str, Verdict | None]] = []
        for label, source, input_document in inputs:
            for level, entrypoint in ((Level.DENY, DENY), (Level.WARN, WARN)):
                try:
                    value = self._policy.evaluate(input_document, entrypoint)
                    messages = _messages({level.value: value}, level)
                except OpaWasmError as error:
                    detail = " ".join(str(error).split())
                    message = f"{ENGINE_RULE} {label}: evaluating {entrypoint} failed: {detail}"
                    kind, _, name = label.partition(" ")
                    verdict = Verdict(Level.DENY, ENGINE_RULE, kind, name, message, source)
                    found.append((Level.DENY, message, verdict))
                    continue
                found.extend((level, message, None) for message in messages)
        return found


def _messages(outcome: Any, level: Level) -> list[str]:
    """The messages of one level out of {"deny": [...], "warn": [...]}; strings only."""
    value = outcome.get(level.value, []) if isinstance(outcome, dict) else None
    if value is UNDEFINED or value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(m, str) for m in value):
        raise OpaWasmError(f"main/{level.value} must be a set of strings, got {value!r}")
    return value


def _verdict(level: Level, message: str, sources: dict[tuple[str, str], str]) -> Verdict:
    match = _MESSAGE.match(message)
    if match is None:  # a policy outside our naming convention still reaches the report
        return Verdict(level, "?", "", "", message, "")
    kind, name = match.group("kind"), match.group("name")
    return Verdict(level, match.group("rule"), kind, name, message, sources.get((kind, name), ""))
