"""The manifests a gate run rendered, printed as `helm template` prints them: one YAML stream,
each object under its `# Source:` comment.

They are written from the documents the gate checked (not from Helm's text), so what is printed
is what passed: every string that go-yaml would read as something else (`on`, `0o17`, `1_000`,
`null`) is quoted, and reading the stream the way the API server does gives the same objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from checkpoint_gate.goyaml import go_plain_scalar
from checkpoint_gate.manifests import Manifest


class _GoSafeDumper(yaml.SafeDumper):
    """PyYAML's safe dumper, quoting strings as go-yaml v2 needs them quoted."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> Any:
    quote = text == "" or go_plain_scalar(text) != text or type(go_plain_scalar(text)) is not str
    if quote:
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style='"')
    if "\n" in text:  # a literal block where YAML allows one (the emitter falls back if not)
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|")
    return dumper.represent_str(text)


_GoSafeDumper.add_representer(str, _represent_str)


def manifests_yaml(manifests: Sequence[Manifest], header: str = "") -> str:
    """One YAML stream of `manifests`, in the gate's order; `header` is a leading comment."""
    parts = [f"# {line}\n" for line in header.splitlines()]
    for manifest in manifests:
        body = yaml.dump(
            manifest.document,
            Dumper=_GoSafeDumper,
            sort_keys=False,
            default_flow_style=False,
            allow_unicode=True,
            width=1 << 16,
        )
        parts.append(f"---\n# Source: {manifest.source}\n{body}")
    return "".join(parts)
