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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, seed, settings
from render_helpers import MATRIX
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


@dataclass(frozen=True)
class Release:
    """One release as conftest is given it: each document as a JSON file, and Helm's text."""

    manifests: list[Manifest]  # the gate's reading of `text`
    files: dict[str, Manifest]  # file name -> document
    text: Path


def write_release(folder: Path, manifests: list[Manifest], rendered: str) -> Release:
    files = write_documents(folder, manifests)
    text = folder / "release.yaml"
    text.write_text(rendered, encoding="utf-8")
    return Release(manifests, files, text)


def conftest_documents(releases: list[Release]) -> dict[str, Messages]:
    """`conftest test` of every document of `releases`, in one process (its start is most of a
    run; each file is still evaluated alone, as `conftest test` does)."""
    files = [name for release in releases for name in release.files]
    found = conftest_test([Path(name) for name in files])
    assert set(found) == set(files)
    return found


def assert_release_agrees(
    engine: PolicyEngine, release: Release, found: dict[str, Messages]
) -> Messages:
    """conftest test per document (`found`) and --combine on the release find what the gate
    finds; returns the --combine messages."""
    for name, manifest in release.files.items():
        gate = by_level(engine.evaluate([manifest], [Mode.DOCUMENT]))
        assert gate == found[name], manifest_label(manifest)
    (combined,) = conftest_test([release.text], combine=True).values()
    assert by_level(engine.evaluate(release.manifests, [Mode.COMBINED])) == combined
    return combined


def assert_conftest_agrees(
    engine: PolicyEngine, manifests: list[Manifest], rendered: str, folder: Path
) -> Messages:
    """conftest test per document and --combine on the release find what the gate finds.

    `manifests` are the gate's reading of `rendered`, the renderer's text.
    """
    release = write_release(folder, manifests, rendered)
    return assert_release_agrees(engine, release, conftest_documents([release]))


def sdk_release(sdk: SdkRenderer, values: dict[str, Any]) -> tuple[list[Manifest], str]:
    """The gate's reading of an SDK render, and the rendered text as one release file."""
    files = sdk.render_text(values, "prop", "apps")
    manifests = [m for source, text in files.items() for m in documents(source, text)]
    return manifests, "".join(f"---\n{text}\n" for text in files.values())


def by_level(verdicts: list[Verdict]) -> Messages:
    return {level.value: {v.message for v in verdicts if v.level is level} for level in Level}


@pytest.fixture(scope="module")
def matrix_releases(
    cli: CliRenderer, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, Release], dict[str, Messages]]:
    """The matrix rendered by the helm CLI, by case, and conftest's verdicts on every document
    of every case (one run)."""
    folder = tmp_path_factory.mktemp("conftest-matrix")
    releases = {}
    for index, (name, values) in enumerate(MATRIX):
        rendered = cli.render_text(values, release="cr", namespace="apps")
        releases[name] = write_release(
            folder / f"{index:02d}", parse_helm_template(rendered), rendered
        )
    return releases, conftest_documents(list(releases.values()))


@pytest.mark.parametrize("case", [name for name, _ in MATRIX])
def test_gate_findings_equal_conftest_document_by_document(
    case: str,
    matrix_releases: tuple[dict[str, Release], dict[str, Messages]],
    engine: PolicyEngine,
) -> None:
    releases, found = matrix_releases
    combined = assert_release_agrees(engine, releases[case], found)
    assert combined["warn"], "the matrix should give conftest at least the tag-pinning warning"


SEED = property_seed()
GENERATED = "test_gate_findings_equal_conftest_on_generated_values"


def test_gate_findings_equal_conftest_on_generated_values(
    sdk: SdkRenderer, engine: PolicyEngine, tmp_path: Path
) -> None:
    """The property test's documents, a sample of them (25): the gate's --combine verdicts are
    compared with conftest's in the example, release by release; its per-document verdicts are
    recorded, and every document of the 25 is then given to conftest in one run."""
    drawn: list[dict[str, Any]] = []
    releases: list[Release] = []

    @seed(SEED)
    @settings(
        max_examples=25,
        deadline=None,  # a conftest process per document
        database=None,  # replayed by the seed
        # a document with its conftest run takes longer than too_slow allows, by design
        suppress_health_check=[HealthCheck.too_slow],
        phases=[Phase.explicit, Phase.generate],
    )
    @given(values=renderable_values_documents(CHART_DIR / "values.schema.json"))
    def combined_agrees(values: dict[str, Any]) -> None:
        note(replay_hint(SEED, "tests/render/test_conftest_agrees.py::" + GENERATED))
        release = write_release(tmp_path / f"{len(drawn):02d}", *sdk_release(sdk, values))
        (combined,) = conftest_test([release.text], combine=True).values()
        assert by_level(engine.evaluate(release.manifests, [Mode.COMBINED])) == combined
        drawn.append(values)
        releases.append(release)

    combined_agrees()
    assert len(releases) == 25
    found = conftest_documents(releases)
    for values, release in zip(drawn, releases, strict=True):
        for name, manifest in release.files.items():
            gate = by_level(engine.evaluate([manifest], [Mode.DOCUMENT]))
            replay = replay_hint(SEED, "tests/render/test_conftest_agrees.py::" + GENERATED)
            assert gate == found[name], (manifest_label(manifest), values, replay)


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
