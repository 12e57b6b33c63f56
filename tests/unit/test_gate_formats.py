"""`checkpoint-runtime gate --format NAME`: the report in the formats CI systems read.

Each format is produced by a real gate run (in-process render, schemas, policies) over a values
file that the runtime's memory check denies (MEM-1, located in a template) while the policies
warn (POD-15), and parsed as its consumer would: JSON, TAP 13, the table, JUnit XML, GitHub
workflow commands, and SARIF validated against the SARIF 2.1.0 JSON schema.
"""

from __future__ import annotations

import hashlib
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from checkpoint_gate.engine import Level
from checkpoint_gate.formats import FORMATS, Document, as_github
from checkpoint_gate.pipeline import Finding, GateResult
from checkpoint_runtime.cli import main

SCHEMA = Path(__file__).parent / "data" / "sarif-2.1.0-rtm.5.json"
SCHEMA_SHA256 = "2d99159ae54a3eea97f81781cff48780548657c35949f4b7f25e99a2ba4de4f8"
# Valid for the chart's schema, refused by the runtime's memory check (MEM-1, deny); the
# policies warn that the image is pinned by tag only (POD-15, warn).
LOW_MEMORY = "resources:\n  limits:\n    memory: 16Mi\n  requests:\n    memory: 16Mi\n"


@pytest.fixture
def values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A values file in the working directory, named as a user names it: relative."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "low-memory-values.yaml").write_text(LOW_MEMORY, encoding="utf-8")
    return "low-memory-values.yaml"


def gate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["gate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def sarif_validator() -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))


def test_the_vendored_sarif_schema_is_the_one_its_readme_names() -> None:
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256
    assert SCHEMA_SHA256 in (SCHEMA.parent / "README.md").read_text(encoding="utf-8")


def test_json_is_conftests_shape_one_result_per_check(
    values: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = gate(capsys, "-f", values, "--format", "json")
    assert code == 1
    assert "DENY runtime-config" in err  # the readable report moved to stderr
    results = json.loads(out)
    assert [r["namespace"] for r in results] == [
        "values-schema", "render", "kubernetes-schema", "runtime-config", "policy",
    ]  # fmt: skip
    assert {r["filename"] for r in results} == {values}
    by_check = {r["namespace"]: r for r in results}
    (failure,) = by_check["runtime-config"]["failures"]
    assert failure["msg"].startswith("MEM-1 resources.limits.memory: ")
    assert failure["metadata"]["rule"] == "MEM-1"
    assert failure["metadata"]["template"] == "checkpoint-runtime/templates/deployment.yaml"
    assert by_check["runtime-config"]["successes"] == 0
    assert {w["metadata"]["rule"] for w in by_check["policy"]["warnings"]} == {"POD-15"}
    assert by_check["policy"]["successes"] == 1  # warnings do not fail a check
    for result in results:
        assert set(result) <= {
            "filename",
            "namespace",
            "successes",
            "skipped",
            "warnings",
            "failures",
        }


def test_tap_is_one_numbered_plan_with_warnings_as_todo(
    values: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = gate(capsys, "-f", values, "--format", "tap")
    assert code == 1
    version, plan, *points = out.splitlines()
    assert version == "TAP version 13"
    assert plan == f"1..{len(points)}"
    for number, point in enumerate(points, 1):
        assert re.match(rf"(not ok|ok) {number} - {re.escape(values)} - ", point), point
    failing = [p for p in points if p.startswith("not ok") and "# TODO" not in p]
    assert len(failing) == 1
    assert "runtime-config - MEM-1" in failing[0]
    assert any("POD-15" in p and p.endswith("# TODO warning") for p in points)


def test_table_has_a_row_per_result_in_aligned_columns(
    values: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = gate(capsys, "-f", values, "--format", "table")
    assert code == 1
    lines = out.splitlines()
    assert len({len(line) for line in lines}) == 1  # every row as wide as the rules
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line[0] == "|"]
    assert cells[0] == ["RESULT", "FILE", "CHECK", "MESSAGE"]
    assert [c[0] for c in cells[1:]].count("failure") == 1
    assert any(c[0] == "warning" and c[3].startswith("POD-15") for c in cells)


def test_junit_counts_the_failing_check(values: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = gate(capsys, "-f", values, "--format", "junit")
    assert code == 1
    suites = ET.fromstring(out.encode())
    assert suites.get("failures") == "1"
    (failure,) = suites.iter("failure")
    assert failure.get("type") == "runtime-config"


def test_github_annotates_the_values_file_per_finding(
    values: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = gate(capsys, "-f", values, "--format", "github")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"::group::Testing '{values}' against 5 checks"
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == 1
    assert errors[0].startswith(f"::error file={values},line=1,title=runtime-config MEM-1::MEM-1 ")
    assert any(line.startswith("::warning ") and "POD-15" in line for line in lines)
    assert lines[-1] == "5 checks, 4 passed, 2 warnings, 1 failures, 0 not run"


def test_github_escapes_what_would_end_a_command_or_property() -> None:
    finding = Finding("policy", Level.DENY, "X-1", "", "100% sure\nsecond line")
    document = Document("d", "dir,a:b.yaml", GateResult(findings=[finding]))
    (error,) = [line for line in as_github([document]).splitlines() if line.startswith("::error")]
    assert (
        error
        == "::error file=dir%2Ca%3Ab.yaml,line=1,title=policy X-1::X-1: 100%25 sure%0Asecond line"
    )


def test_sarif_validates_against_the_sarif_2_1_0_schema(
    values: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = gate(capsys, "-f", values, "--format", "sarif")
    assert code == 1
    log = json.loads(out)
    sarif_validator().validate(log)
    (run,) = log["runs"]
    levels = {(r["ruleId"], r["level"]) for r in run["results"]}
    assert levels == {("MEM-1", "error"), ("POD-15", "warning")}
    rules = run["tool"]["driver"]["rules"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        assert location["physicalLocation"]["artifactLocation"]["uri"] == values
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 1}]


def test_a_log_outside_the_sarif_schema_is_refused_by_the_validator() -> None:
    """The validation above is real: the schema refuses a level SARIF does not have."""
    log: dict[str, Any] = {
        "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"message": {"text": "m"}}]}],
    }
    sarif_validator().validate(log)
    log["runs"][0]["results"][0]["level"] = "deny"
    with pytest.raises(jsonschema.ValidationError):
        sarif_validator().validate(log)


@pytest.mark.parametrize("name", [f for f in FORMATS if f != "text"])
def test_the_defaults_pass_in_every_format(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gate(capsys, "-q", "--format", name)
    assert code == 0, err
    assert out.strip()
    assert "gate: 1 of 1 values documents pass" in err
    if name == "sarif":
        log = json.loads(out)
        sarif_validator().validate(log)
        assert {r["level"] for r in log["runs"][0]["results"]} <= {"warning"}


def test_checks_after_a_schema_deny_are_reported_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = tmp_path / "v.yaml"
    values.write_text("replicaCount: many\n", encoding="utf-8")
    code, out, _ = gate(capsys, "-f", str(values), "--format", "json")
    assert code == 1
    results = json.loads(out)
    assert [bool(r.get("skipped")) for r in results] == [False, True, True, True, True]
    assert all(r["successes"] == 0 for r in results)
    code, out, _ = gate(capsys, "-f", str(values), "--format", "junit")
    assert ET.fromstring(out.encode()).find("testsuite").get("skipped") == "4"  # type: ignore[union-attr]


def test_a_format_with_the_manifests_on_stdout_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = gate(capsys, "--format", "sarif", "--output", "-")
    assert code == 2
    assert out == ""
    assert err.startswith("error: UsageError: --format: sarif and --output - both print on stdout")
    assert "Traceback" not in err


def test_an_unknown_format_is_refused_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = gate(capsys, "--format", "xml")
    assert code == 2
    assert out == ""
    assert err.startswith("error: UsageError: checkpoint-runtime gate: ")
    assert "Traceback" not in err


def test_each_file_argument_is_its_own_document_over_the_f_files(
    values: str, capsys: pytest.CaptureFixture[str]
) -> None:
    Path("base.yaml").write_text("replicaCount: 2\n", encoding="utf-8")
    Path("ok-values.yaml").write_text("podDisruptionBudget:\n  enabled: true\n", encoding="utf-8")
    code, out, err = gate(capsys, "-f", "base.yaml", values, "ok-values.yaml", "--format", "json")
    assert code == 1
    results = json.loads(out)
    assert [r["filename"] for r in results[::5]] == [values, "ok-values.yaml"]
    assert "== base.yaml + ok-values.yaml " in err
    assert "gate: 1 of 2 values documents pass" in err
    code, _, err = gate(capsys, "--matrix", values)
    assert code == 2
    assert err.startswith("error: UsageError: --matrix: ")


@pytest.mark.parametrize(
    ("argument", "error"),
    [
        ("/dev/zero", "InputLimitError"),
        ("{dir}", "ValuesFileError"),
        ("{dir}/none", "ValuesFileError"),
    ],
)
def test_a_file_argument_that_is_not_a_values_file_is_a_named_error(
    argument: str, error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = gate(capsys, "--format", "sarif", argument.format(dir=tmp_path))
    assert code == 2
    assert out == ""
    assert err.startswith(f"error: {error}: ")
    assert "Traceback" not in err
