"""The gate's in-process policy verdicts equal conftest's, document by document.

Platform teams run the same policy/ folder with conftest on `helm template` output. Here the
matrix (defaults and every ci/*-values.yaml) is rendered with the helm CLI and given to the pinned
conftest (scripts/testenv/build-policy-tools.sh), once per document (`conftest test`, each
document in its own file so each gets its own result) and once for the release
(`conftest test --combine`); the gate's Wasm engine must find exactly the same messages.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from render_helpers import matrix_params
from values_strategies import renderable_values_documents

from checkpoint_runtime.gate.engine import Level, Mode, PolicyEngine, Verdict
from checkpoint_runtime.gate.paths import CHART_DIR, POLICY_DIR
from checkpoint_runtime.gate.render import CliRenderer, Manifest, SdkRenderer, manifest_label
from checkpoint_testenv import policytools

Messages = dict[str, set[str]]


def conftest_test(files: list[Path], *, combine: bool = False) -> dict[str, Messages]:
    """conftest's deny (failures) and warn messages, by file name (`Combined` with --combine)."""
    command = [str(policytools.conftest()), "test", "--output", "json", "--policy", str(POLICY_DIR)]
    command += ["--combine"] if combine else []
    completed = subprocess.run(
        [*command, *map(str, files)], capture_output=True, text=True, check=False
    )
    assert completed.returncode in (0, 1), completed.stderr  # 1: something was denied
    results: list[dict[str, Any]] = json.loads(completed.stdout)
    return {
        result["filename"]: {
            "deny": {entry["msg"] for entry in result.get("failures") or []},
            "warn": {entry["msg"] for entry in result.get("warnings") or []},
        }
        for result in results
    }


def write_documents(folder: Path, manifests: list[Manifest]) -> dict[str, Manifest]:
    """Each document in its own file (so conftest reports it alone), by file name."""
    files: dict[str, Manifest] = {}
    for index, manifest in enumerate(manifests):
        path = folder / f"{index:02d}.yaml"
        path.write_text(yaml.safe_dump(manifest.document), encoding="utf-8")
        files[str(path)] = manifest
    return files


def assert_conftest_agrees(
    engine: PolicyEngine, manifests: list[Manifest], folder: Path
) -> Messages:
    """conftest test per document and --combine on the release find what the gate finds."""
    files = write_documents(folder, manifests)
    found = conftest_test([Path(name) for name in files])
    assert set(found) == set(files)
    for name, manifest in files.items():
        gate = by_level(engine.evaluate([manifest], [Mode.DOCUMENT]))
        assert gate == found[name], manifest_label(manifest)
    release = folder / "release.yaml"
    release.write_text(
        yaml.safe_dump_all([manifest.document for manifest in manifests]), encoding="utf-8"
    )
    (combined,) = conftest_test([release], combine=True).values()
    assert by_level(engine.evaluate(manifests, [Mode.COMBINED])) == combined
    return combined


def by_level(verdicts: list[Verdict]) -> Messages:
    return {level.value: {v.message for v in verdicts if v.level is level} for level in Level}


@pytest.mark.parametrize("values", matrix_params())
def test_gate_findings_equal_conftest_document_by_document(
    values: dict[str, Any], cli: CliRenderer, engine: PolicyEngine, tmp_path: Path
) -> None:
    manifests = cli.render(values, release="cr", namespace="apps")
    combined = assert_conftest_agrees(engine, manifests, tmp_path)
    assert combined["warn"], "the matrix should give conftest at least the tag-pinning warning"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(values=renderable_values_documents(CHART_DIR / "values.schema.json"))
def test_gate_findings_equal_conftest_on_generated_values(
    values: dict[str, Any], sdk: SdkRenderer, engine: PolicyEngine
) -> None:
    """The property test's documents, a sample of them: conftest has one process a run."""
    with tempfile.TemporaryDirectory() as folder:
        assert_conftest_agrees(engine, sdk.render(values, "prop", "apps"), Path(folder))


def test_conftest_and_the_gate_agree_on_a_denied_release(
    cli: CliRenderer, engine: PolicyEngine, tmp_path: Path
) -> None:
    """A release that fails rules in both modes: the comparison above is not of empty sets."""
    manifests = cli.render({"checkpoint": {"namespace": "kube-system"}}, namespace="apps")
    role = next(m for m in manifests if m.kind == "Role")
    path = tmp_path / "role.yaml"
    path.write_text(yaml.safe_dump(role.document), encoding="utf-8")
    (found,) = conftest_test([path]).values()
    assert any("namespace kube-system belongs to the cluster" in m for m in found["deny"])
    assert by_level(engine.evaluate([role], [Mode.DOCUMENT])) == found
