"""Render the chart.

Two renderers give the same manifests: the in-process Helm SDK (helm-python-sdk, fast, no
process per document) and the `helm template` CLI (what platform teams run). Both enforce the
chart's values.schema.json themselves (checkpoint_gate.validate checks it again, by key path).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from helm_python import Chart

from checkpoint_gate.manifests import Json, Manifest, RenderError, documents, parse_helm_template

HELM_ENV = "CHECKPOINT_HELM"
SCHEMA_FILE = "values.schema.json"

DEFAULT_RELEASE = "cr"
DEFAULT_NAMESPACE = "default"


class SdkRenderer:
    """The chart loaded once into the in-process Helm SDK.

    Helm validates the values against values.schema.json on every render (most of the time of
    a render). A caller that has validated them already passes `validate_values=False`: the
    chart is then loaded from a copy without the schema, so Helm renders without checking again.
    """

    def __init__(self, chart_dir: Path, *, validate_values: bool = True) -> None:
        self.chart_dir = chart_dir
        self.validate_values = validate_values
        if validate_values:
            self._chart = Chart.load(chart_dir)
        else:
            with tempfile.TemporaryDirectory() as scratch:
                copy = Path(scratch) / chart_dir.name
                shutil.copytree(chart_dir, copy, ignore=shutil.ignore_patterns(SCHEMA_FILE))
                self._chart = Chart.load(copy)  # read into memory: the copy can go

    def merged_values(self, values: Json) -> Json:
        """The chart's defaults coalesced with `values`, as an install would use them."""
        return self._chart.merge_values(values)

    def render_text(
        self, values: Json, release: str = DEFAULT_RELEASE, namespace: str = DEFAULT_NAMESPACE
    ) -> dict[str, str]:
        """The rendered manifest files' text, by template path, as Helm wrote them."""
        try:
            rendered = self._chart.render(values=values, name=release, namespace=namespace)
        except Exception as error:  # helm_python raises one class per failure kind
            raise RenderError(str(error)) from error
        return {
            source: rendered[source]
            for source in sorted(rendered)
            if source.endswith((".yaml", ".yml"))
        }

    def render(
        self, values: Json, release: str = DEFAULT_RELEASE, namespace: str = DEFAULT_NAMESPACE
    ) -> list[Manifest]:
        manifests: list[Manifest] = []
        for source, text in self.render_text(values, release, namespace).items():
            manifests.extend(documents(source, text))
        return manifests


def find_helm() -> Path:
    """The helm binary for the CLI renderer: $CHECKPOINT_HELM, else `helm` on PATH."""
    explicit = os.environ.get(HELM_ENV)
    if explicit:
        return Path(explicit)
    found = shutil.which("helm")
    if found is None:
        raise RenderError(f"no helm binary: pass --helm FILE, set ${HELM_ENV}, or put helm on PATH")
    return Path(found)


class CliRenderer:
    """`helm template` in a subprocess, one process per values document."""

    def __init__(self, chart_dir: Path, helm: Path | None = None) -> None:
        self.chart_dir = chart_dir
        self.helm = helm or find_helm()

    def render(
        self, values: Json, release: str = DEFAULT_RELEASE, namespace: str = DEFAULT_NAMESPACE
    ) -> list[Manifest]:
        return parse_helm_template(self.render_text(values, release, namespace))

    def render_text(
        self, values: Json, release: str = DEFAULT_RELEASE, namespace: str = DEFAULT_NAMESPACE
    ) -> str:
        """`helm template`'s output as it printed it."""
        args = ["template", release, str(self.chart_dir), "--namespace", namespace]
        completed = self._helm(args, values)
        if completed.returncode != 0:
            raise RenderError(completed.stderr.strip() or f"helm exited {completed.returncode}")
        return completed.stdout

    def lint(self, values: Json, *, strict: bool = True) -> subprocess.CompletedProcess[str]:
        """`helm lint [--strict]` of the chart with `values`; the caller reads returncode/output."""
        return self._helm(["lint", str(self.chart_dir), *(["--strict"] if strict else [])], values)

    def _helm(self, args: list[str], values: Json) -> subprocess.CompletedProcess[str]:
        """Run helm with `values` given as a file (`-f`); JSON is YAML, so helm reads it."""
        with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8") as handle:
            json.dump(values, handle)
            handle.flush()
            command = [str(self.helm), *args, "-f", handle.name]
            return subprocess.run(command, capture_output=True, text=True, check=False)
