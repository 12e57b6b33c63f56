"""The `checkpoint-runtime gate` command: exit codes, printed verdicts, JUnit XML."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from render_helpers import CI_VALUES

from checkpoint_gate.formats import FORMATS
from checkpoint_gate.paths import CHART_DIR
from checkpoint_runtime.cli import main


def broken_chart(tmp_path: Path) -> Path:
    chart = tmp_path / "checkpoint-runtime"
    shutil.copytree(CHART_DIR, chart)
    role = chart / "templates" / "role.yaml"
    text = role.read_text(encoding="utf-8")
    role.write_text(
        text.replace('"update", "create"]', '"update", "create", "delete"]'), encoding="utf-8"
    )
    return chart


def test_defaults_pass_and_write_junit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "out" / "gate.xml"
    assert main(["gate", "--junit-xml", str(report)]) == 0
    out = capsys.readouterr().out
    assert "PASS: 0 deny" in out
    suites = ET.parse(report).getroot()
    assert suites.get("failures") == "0"
    cases = {case.get("name") for case in suites.iter("testcase")}
    assert cases == {"values-schema", "render", "kubernetes-schema", "runtime-config", "policy"}


def test_broken_chart_is_denied_with_rule_object_and_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "gate.xml"
    code = main(["gate", "--chart", str(broken_chart(tmp_path)), "--junit-xml", str(report)])
    assert code == 1
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "RBAC-3" in line)
    assert line.split()[0] == "DENY"
    assert "Role cr-checkpoint-runtime" in line
    assert "delete configmaps" in line
    assert "checkpoint-runtime/templates/role.yaml" in line
    failures = list(ET.parse(report).getroot().iter("failure"))
    assert len(failures) == 1
    assert "RBAC-3 Role cr-checkpoint-runtime" in (failures[0].text or "")


def test_invalid_values_file_is_denied_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = tmp_path / "my-values.yaml"
    values.write_text("checkpoint:\n  store:\n    backend: nfs\n", encoding="utf-8")
    assert main(["gate", "-f", str(values)]) == 1
    out = capsys.readouterr().out
    assert "values-schema" in out
    assert "checkpoint.store.backend" in out


def test_set_overrides_compose_like_helm(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "--set", "checkpoint.store.backend=file", "--set", "replicaCount=3"]) == 0
    out = capsys.readouterr().out
    assert "5 objects" in out  # file store: no Role, no RoleBinding


def test_helm_cli_engine_runs_the_matrix(helm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "--matrix", "--engine", "cli", "--helm", str(helm), "-q"]) == 0
    out = capsys.readouterr().out
    assert "engine cli" in out
    documents = len(CI_VALUES) + 1  # the defaults and every CI values file
    assert f"{documents} of {documents} values documents pass" in out


def test_unreadable_values_file_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["gate", "-f", str(tmp_path / "missing.yaml")]) == 2


def test_unknown_engine_is_rejected_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gate", "--engine", "kustomize"]) == 2
    assert capsys.readouterr().err.startswith("error: UsageError: checkpoint-runtime gate: ")


def test_a_non_ascii_collector_url_is_denied_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`s3://bucket/café/` once crashed the policy engine; RFC 3986 wants it percent-encoded."""
    values = tmp_path / "v.yaml"
    values.write_text(
        "checkpoint:\n  collectors:\n    - kind: objectstore\n      feed: audit\n"
        "      url: s3://bucket/café/\n",
        encoding="utf-8",
    )
    assert main(["gate", "-f", str(values)]) == 1
    out = capsys.readouterr().out
    denies = [line for line in out.splitlines() if line.split()[:1] == ["DENY"]]
    assert denies, out
    assert any("values-schema" in line and "checkpoint.collectors[0]" in line for line in denies)
    assert "Traceback" not in out
    encoded = tmp_path / "encoded.yaml"
    encoded.write_text(values.read_text(encoding="utf-8").replace("é", "%C3%A9"), "utf-8")
    assert main(["gate", "-f", str(encoded)]) == 0


@pytest.mark.parametrize("url", ['s3://bucket/a"b/', "s3://bucket/a\\\\b/", "s3://b/%zz"])
def test_a_collector_url_outside_rfc_3986_is_denied(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = tmp_path / "v.json"
    collector = {"kind": "objectstore", "feed": "audit", "url": url}
    values.write_text(json.dumps({"checkpoint": {"collectors": [collector]}}), encoding="utf-8")
    assert main(["gate", "-f", str(values)]) == 1
    out = capsys.readouterr().out
    assert any(
        "values-schema" in line and "checkpoint.collectors[0]" in line for line in out.splitlines()
    )


def test_a_file_that_is_not_a_policy_module_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["gate", "--policy", str(CHART_DIR / "values.yaml")]) == 2
    assert "not a compiled policy module" in capsys.readouterr().err


SECRET_SETS = (
    "--set",
    "checkpoint.collectors[0].kind=flowlogs,checkpoint.collectors[0].url=https://r:hunter2-Zx9@flows.example/v1",
    "--set-string",
    "extraEnv[0].name=DB_PASSWORD,extraEnv[0].value=hunter3-Qq",
    "--set-json",
    'podLabels={"team":"hunter4-Yy"}',
)


@pytest.mark.parametrize("form", FORMATS)
def test_a_report_names_set_expressions_by_their_keys_never_their_values(
    form: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junit = tmp_path / "gate.xml"
    code = main(["gate", *SECRET_SETS, "--format", form, "--junit-xml", str(junit)])
    assert code == 1  # the URL's user information is refused
    printed = capsys.readouterr()
    written = printed.out + printed.err + junit.read_text(encoding="utf-8")
    assert "--set checkpoint.collectors[0].kind=...,checkpoint.collectors[0].url=..." in written
    assert "--set-string extraEnv[0].name=...,extraEnv[0].value=..." in written
    assert "--set-json podLabels=..." in written
    for secret in ("hunter2-Zx9", "hunter3-Qq", "hunter4-Yy"):
        assert secret not in written


def test_a_set_under_a_value_that_is_not_a_map_is_refused_without_the_value(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["gate", "--set", "image.tag=hunter5-Ww", "--set", "image.tag.x=1"])
    assert code != 0
    printed = capsys.readouterr()
    assert "it holds a string, not a map" in printed.out + printed.err
    assert "hunter5-Ww" not in printed.out + printed.err
