"""Evaluate the conftest policies on rendered manifests in-process, as structured verdicts.

The policies are evaluated the two ways conftest runs them: one document at a time
(`conftest test`) and the whole release at once (`conftest test --combine`), where the
cross-object rules fire. Both sets of messages are merged; a message found both ways counts once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from checkpoint_runtime.gate.paths import POLICY_DIR
from checkpoint_runtime.gate.rego import CompiledPolicy, RegoError, load_modules
from checkpoint_runtime.gate.render import Manifest

DENY = "main/deny"
WARN = "main/warn"

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


class PolicyEngine:
    """The policy folder compiled once; evaluate as many renders as you like."""

    def __init__(self, policy_dir: Path = POLICY_DIR) -> None:
        self.policy_dir = policy_dir
        self._policy = CompiledPolicy(load_modules(policy_dir, tests=False), [DENY, WARN])

    def messages(self, input_document: Any) -> dict[Level, list[str]]:
        """Raw deny and warn messages for one conftest-shaped input."""
        found: dict[Level, list[str]] = {}
        for level, entrypoint in ((Level.DENY, DENY), (Level.WARN, WARN)):
            value = self._policy.query(entrypoint, input_document)
            if value is None:
                value = []
            if not isinstance(value, list) or not all(isinstance(m, str) for m in value):
                raise RegoError(f"{entrypoint} must be a set of strings, got {value!r}")
            found[level] = value
        return found

    def evaluate(
        self,
        manifests: Sequence[Manifest],
        modes: Iterable[Mode] = (Mode.DOCUMENT, Mode.COMBINED),
    ) -> list[Verdict]:
        """Every distinct verdict over the release, denies first, in a stable order."""
        sources = {(m.kind, m.name): m.source for m in manifests}
        seen: dict[tuple[Level, str], Verdict] = {}
        for mode in modes:
            inputs: list[Any]
            if mode is Mode.COMBINED:
                inputs = [combined_input(manifests)]
            else:
                inputs = [m.document for m in manifests]
            for input_document in inputs:
                for level, messages in self.messages(input_document).items():
                    for message in messages:
                        seen.setdefault((level, message), _verdict(level, message, sources))
        order = {Level.DENY: 0, Level.WARN: 1}
        return sorted(seen.values(), key=lambda v: (order[v.level], v.rule, v.obj, v.message))


def _verdict(level: Level, message: str, sources: dict[tuple[str, str], str]) -> Verdict:
    match = _MESSAGE.match(message)
    if match is None:  # a policy outside our naming convention still reaches the report
        return Verdict(level, "?", "", "", message, "")
    kind, name = match.group("kind"), match.group("name")
    return Verdict(level, match.group("rule"), kind, name, message, sources.get((kind, name), ""))


def denies(verdicts: Iterable[Verdict]) -> list[Verdict]:
    return [verdict for verdict in verdicts if verdict.level is Level.DENY]
