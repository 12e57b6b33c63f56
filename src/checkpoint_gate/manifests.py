"""Rendered manifests: one Kubernetes object and the template it came from, read from Helm's
output the way Go YAML types it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from checkpoint_gate.goyaml import GoYamlLoader

Json = dict[str, Any]


class RenderError(RuntimeError):
    """The chart did not render (bad values, failing template, or Helm's schema check)."""


@dataclass(frozen=True)
class Manifest:
    """One rendered Kubernetes object and the template it came from."""

    source: str
    document: Json

    @property
    def kind(self) -> str:
        return str(self.document.get("kind", ""))

    @property
    def name(self) -> str:
        return str(self.document.get("metadata", {}).get("name", ""))


def documents(source: str, text: str) -> list[Manifest]:
    """The manifests of one rendered file, read as Go YAML reads them."""
    # Typed as Go YAML types it (what the API server and conftest see), parsed by libyaml.
    try:
        documents = list(yaml.load_all(text, Loader=GoYamlLoader))
    except yaml.YAMLError as error:
        raise RenderError(f"{source}: the rendered manifest is not YAML: {error}") from None
    return [
        Manifest(source, document)
        for document in documents
        if isinstance(document, dict) and document
    ]


def sort_manifests(manifests: Iterable[Manifest]) -> list[Manifest]:
    """A stable order independent of the renderer: by kind, then name."""
    return sorted(manifests, key=lambda manifest: (manifest.kind, manifest.name))


_SOURCE = re.compile(r"^# Source: (.+)$", re.MULTILINE)


def parse_helm_template(output: str) -> list[Manifest]:
    """Split `helm template` output into manifests, using its `# Source:` comments."""
    manifests: list[Manifest] = []
    for chunk in re.split(r"^---\s*$", output, flags=re.MULTILINE):
        match = _SOURCE.search(chunk)
        manifests.extend(documents(match.group(1) if match else "", chunk))
    return manifests


def manifest_label(manifest: Manifest) -> str:
    return f"{manifest.kind} {manifest.name}"
