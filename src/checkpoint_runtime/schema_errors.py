"""One JSON-Schema failure, told once and about the field that is wrong.

jsonschema reports a `oneOf` (a collector is an objectstore or a flowlogs collector) as
"... is not valid under any of the given schemas", with the real reasons in its context. Users
need the field: `most_specific` descends into the branch that came closest (fewest failures,
its `kind` matched), so `collectors[0].tailnet: [1] is not of type 'string'` is what is said.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jsonschema.exceptions import ValidationError

from checkpoint_runtime.errors import quote

# A schema message is cut to this many characters (it quotes the offending value).
MESSAGE_LIMIT = 400

# Keywords whose failure means "this is the other branch", not "this field is wrong".
_DISCRIMINATORS = frozenset({"const", "enum", "additionalProperties", "required"})


def field_path(error: ValidationError) -> str:
    """Where `error` is, as jsonschema's JSONPath without the root: `checkpoint.collectors[0].feed`,
    `podLabels['app.kubernetes.io/name']`; "" for the document itself."""
    return error.json_path.removeprefix("$").removeprefix(".")


def dotted_path(parts: Iterable[Any]) -> str:
    """Path parts as `spec.template.spec.containers[0].image`: a map key after a dot, a list
    index in brackets."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _branch_rank(errors: list[ValidationError]) -> tuple[int, int]:
    discriminating = sum(1 for error in errors if error.validator in _DISCRIMINATORS)
    return (discriminating, len(errors))


def most_specific(error: ValidationError) -> ValidationError:
    """The error inside `anyOf`/`oneOf` contexts that names the wrong field."""
    while error.context:
        branches: dict[Any, list[ValidationError]] = {}
        for inner in error.context:
            branches.setdefault(inner.relative_schema_path[0], []).append(inner)
        closest = min(branches.values(), key=_branch_rank)
        error = min(closest, key=_specificity)
    return error


def _specificity(error: ValidationError) -> tuple[int, bool, str]:
    """Deepest first, then a real failure before a branch mismatch, then document order."""
    return (-len(error.path), error.validator in _DISCRIMINATORS, str(list(error.path)))


def describe(error: ValidationError) -> str:
    """The message; for a failed pattern, the schema's description of the field instead of the
    regular expression (which does not tell a reader which URL schemes or names are allowed);
    for a failed const that carries a `$comment` (a rule across fields), that reason."""
    description = error.schema.get("description") if isinstance(error.schema, dict) else None
    if error.validator == "pattern" and description:
        return f"{quote(error.instance)} is not of the accepted form: {description}"
    reason = error.schema.get("$comment") if isinstance(error.schema, dict) else None
    if error.validator == "const" and reason:  # a cross-field rule says why in its $comment
        return f"{quote(error.instance)}: {reason}"
    return short_message(error.message, error.instance)


def short_message(message: str, instance: Any) -> str:
    """A validator's message with the offending value quoted by a short prefix only."""
    shown = repr(instance)
    if len(shown) > MESSAGE_LIMIT // 4 and shown in message:
        message = message.replace(shown, quote(instance), 1)
    return message if len(message) <= MESSAGE_LIMIT else message[:MESSAGE_LIMIT] + "..."


def violations(errors: Iterable[ValidationError]) -> list[tuple[str, str]]:
    """(key path, message) once per failing field, in document order."""
    found: dict[tuple[str, str], None] = {}
    for error in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        specific = most_specific(error)
        found[(field_path(specific), describe(specific))] = None
    return list(found)
