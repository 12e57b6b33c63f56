"""The gate's in-process policy verdicts equal conftest's, document by document.

Platform teams run the same policy/ folder with conftest on `helm template` output. Here the
matrix (defaults and every ci/*-values.yaml) is rendered with the helm CLI and given to the pinned
conftest (scripts/testenv/build-policy-tools.sh), once per document (`conftest test`, each
document in its own file so each gets its own result) and once for the release
(`conftest test --combine`); the gate's Wasm engine must find exactly the same messages.

Nothing is written back through PyYAML (whose output Go YAML may type differently): each
document goes to conftest as a JSON file, typed the same by everyone (the engines compared),
and the release as Helm's own text (the gate's YAML reading compared with Go YAML's too).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, seed, settings
from render_helpers import matrix_params
from values_strategies import property_seed, renderable_values_documents, replay_hint

from checkpoint_gate.engine import Level, Mode, PolicyEngine, Verdict
from checkpoint_gate.manifests import Manifest, documents, manifest_label, parse_helm_template
from checkpoint_gate.paths import CHART_DIR, POLICY_DIR
from checkpoint_gate.render import CliRenderer, SdkRenderer
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
    folder.mkdir(exist_ok=True)
    files: dict[str, Manifest] = {}
    for index, manifest in enumerate(manifests):
        path = folder / f"{index:02d}.json"  # conftest reads it with its JSON parser
        path.write_text(json.dumps(manifest.document), encoding="utf-8")
        files[str(path)] = manifest
    return files


def assert_conftest_agrees(
    engine: PolicyEngine, manifests: list[Manifest], rendered: str, folder: Path
) -> Messages:
    """conftest test per document and --combine on the release find what the gate finds.

    `manifests` are the gate's reading of `rendered`, the renderer's text.
    """
    files = write_documents(folder, manifests)
    found = conftest_test([Path(name) for name in files])
    assert set(found) == set(files)
    for name, manifest in files.items():
        gate = by_level(engine.evaluate([manifest], [Mode.DOCUMENT]))
        assert gate == found[name], manifest_label(manifest)
    release = folder / "release.yaml"
    release.write_text(rendered, encoding="utf-8")
    (combined,) = conftest_test([release], combine=True).values()
    assert by_level(engine.evaluate(manifests, [Mode.COMBINED])) == combined
    return combined


def sdk_release(sdk: SdkRenderer, values: dict[str, Any]) -> tuple[list[Manifest], str]:
    """The gate's reading of an SDK render, and the rendered text as one release file."""
    files = sdk.render_text(values, "prop", "apps")
    manifests = [m for source, text in files.items() for m in documents(source, text)]
    return manifests, "".join(f"---\n{text}\n" for text in files.values())


def by_level(verdicts: list[Verdict]) -> Messages:
    return {level.value: {v.message for v in verdicts if v.level is level} for level in Level}


@pytest.mark.parametrize("values", matrix_params())
def test_gate_findings_equal_conftest_document_by_document(
    values: dict[str, Any], cli: CliRenderer, engine: PolicyEngine, tmp_path: Path
) -> None:
    rendered = cli.render_text(values, release="cr", namespace="apps")
    combined = assert_conftest_agrees(engine, parse_helm_template(rendered), rendered, tmp_path)
    assert combined["warn"], "the matrix should give conftest at least the tag-pinning warning"


SEED = property_seed()
GENERATED = "test_gate_findings_equal_conftest_on_generated_values"


@seed(SEED)
@settings(
    max_examples=25,
    deadline=None,  # two conftest processes per document
    database=None,  # replayed by the seed
    # a document with its two conftest runs takes longer than too_slow allows, by design
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.generate],
)
@given(values=renderable_values_documents(CHART_DIR / "values.schema.json"))
def test_gate_findings_equal_conftest_on_generated_values(
    values: dict[str, Any], sdk: SdkRenderer, engine: PolicyEngine
) -> None:
    """The property test's documents, a sample of them: conftest has one process a run."""
    note(replay_hint(SEED, "tests/render/test_conftest_agrees.py::" + GENERATED))
    with tempfile.TemporaryDirectory() as folder:
        assert_conftest_agrees(engine, *sdk_release(sdk, values), Path(folder))


# Failures the generated documents found once, each a string Go YAML types differently from
# PyYAML: `08` (a number to Go), `n` (false to Go: the POD-15 warning's label could not be built),
# `<<` (a merge tag PyYAML cannot construct as a value).
REGRESSIONS = [
    {"checkpoint": {"store": {"backend": "kubernetes", "leaseName": "08"}}},
    {
        "fullnameOverride": "n",
        "image": {
            "repository": "x_nnu__n0qt_e4r------56u.d/o-----0murc3__4z__86g.2t_2b.l1",
            "tag": "W",
        },
    },
    {"service": {"annotations": {"a": "<<", "b": "=", "c": "08", "d": "true", "e": "y"}}},
]


@pytest.mark.parametrize("values", REGRESSIONS, ids=["lease-08", "name-n", "annotations"])
def test_conftest_agrees_where_go_yaml_and_pyyaml_type_strings_differently(
    values: dict[str, Any], sdk: SdkRenderer, cli: CliRenderer, engine: PolicyEngine, tmp_path: Path
) -> None:
    manifests, rendered = sdk_release(sdk, values)
    combined = assert_conftest_agrees(engine, manifests, rendered, tmp_path / "sdk")
    assert any(" is pinned by tag only" in message for message in combined["warn"])
    rendered = cli.render_text(values, release="prop", namespace="apps")
    cli_manifests = parse_helm_template(rendered)
    assert_conftest_agrees(engine, cli_manifests, rendered, tmp_path / "cli")


def test_conftest_and_the_gate_agree_on_a_denied_release(
    cli: CliRenderer, engine: PolicyEngine, tmp_path: Path
) -> None:
    """A release that fails rules in both modes: the comparison above is not of empty sets."""
    manifests = cli.render(
        {"checkpoint": {"store": {"namespace": "kube-system"}}}, namespace="apps"
    )
    role = next(m for m in manifests if m.kind == "Role")
    path = tmp_path / "role.json"
    path.write_text(json.dumps(role.document), encoding="utf-8")
    (found,) = conftest_test([path]).values()
    assert any("namespace kube-system belongs to the cluster" in m for m in found["deny"])
    assert by_level(engine.evaluate([role], [Mode.DOCUMENT])) == found
