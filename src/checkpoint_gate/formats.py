"""The gate's report in the formats CI systems read (`checkpoint-runtime gate --format NAME`).

conftest's formats, with its shapes: `json` (a list of check results: filename, namespace,
successes, warnings, failures, each finding `{"msg", "metadata"}`), `tap`, `table`, `junit` and
`github` (workflow commands that annotate the file); and `sarif`, SARIF 2.1.0 for code-scanning
UIs. One check result per values document and check (values-schema, render, kubernetes-schema,
runtime-config, policy): its file is the values file that document came from (the last `-f`, the
one that overrides), or the chart's values.yaml for the defaults; its namespace is the check.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any

from checkpoint_gate.engine import Level
from checkpoint_gate.junit import CHECKS, checks_not_run, finding_line, junit_xml
from checkpoint_gate.pipeline import Finding, GateResult

TEXT = "text"
SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL = "checkpoint-runtime gate"


@dataclass(frozen=True)
class Document:
    """One values document's gate result and the file its findings point at."""

    name: str
    file: str  # a path as the user gave it (relative stays relative), "/" separated
    result: GateResult


@dataclass(frozen=True)
class CheckResult:
    """One check over one values document, as conftest reports one namespace over one file."""

    document: Document
    check: str
    failures: list[Finding]
    warnings: list[Finding]
    skipped: str = ""  # why the check did not run, when it did not

    @property
    def passed(self) -> bool:
        return not self.failures and not self.skipped


def check_results(documents: Sequence[Document]) -> list[CheckResult]:
    found = []
    for document in documents:
        not_run = checks_not_run(document.result)
        for check in CHECKS:
            findings = document.result.of_check(check)
            found.append(
                CheckResult(
                    document,
                    check,
                    [f for f in findings if f.level is Level.DENY],
                    [f for f in findings if f.level is Level.WARN],
                    not_run.get(check, ""),
                )
            )
    return found


def _metadata(document: Document, finding: Finding) -> dict[str, str]:
    found = {"document": document.name, "check": finding.check, "rule": finding.rule}
    if finding.obj:
        found["object"] = finding.obj
    if finding.source:
        found["template"] = finding.source
    return found


def _finding_json(document: Document, finding: Finding) -> dict[str, Any]:
    return {"msg": finding_line(finding), "metadata": _metadata(document, finding)}


def as_json(documents: Sequence[Document]) -> str:
    results = []
    for item in check_results(documents):
        entry: dict[str, Any] = {
            "filename": item.document.file,
            "namespace": item.check,
            "successes": 1 if item.passed else 0,
        }
        if item.skipped:
            entry["skipped"] = [{"msg": item.skipped}]
        if item.warnings:
            entry["warnings"] = [_finding_json(item.document, f) for f in item.warnings]
        if item.failures:
            entry["failures"] = [_finding_json(item.document, f) for f in item.failures]
        results.append(entry)
    return json.dumps(results, indent="\t", ensure_ascii=False) + "\n"


def as_tap(documents: Sequence[Document]) -> str:
    """TAP 13: one test point per failure (not ok), per warning (not ok, a TODO: reported, not
    failing), per check without failures (ok) and per check not run (ok, a SKIP)."""
    points: list[str] = []
    for item in check_results(documents):
        where = f"{item.document.file} - {item.check}"
        points += [f"not ok - {where} - {_one_line(finding_line(f))}" for f in item.failures]
        points += [
            f"not ok - {where} - {_one_line(finding_line(f))} # TODO warning" for f in item.warnings
        ]
        if item.passed:
            points.append(f"ok - {where}")
        if item.skipped:
            points.append(f"ok - {where} # SKIP {item.skipped}")
    numbered = [point.replace(" - ", f" {n} - ", 1) for n, point in enumerate(points, 1)]
    return "\n".join(["TAP version 13", f"1..{len(points)}", *numbered]) + "\n"


def as_table(documents: Sequence[Document]) -> str:
    rows = [["RESULT", "FILE", "CHECK", "MESSAGE"]]
    for item in check_results(documents):
        file = item.document.file
        if item.passed:
            rows.append(["success", file, item.check, ""])
        if item.skipped:
            rows.append(["skipped", file, item.check, item.skipped])
        rows += [["warning", file, item.check, _one_line(finding_line(f))] for f in item.warnings]
        rows += [["failure", file, item.check, _one_line(finding_line(f))] for f in item.failures]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    rule = "+" + "+".join("-" * (width + 2) for width in widths) + "+"

    def line(row: list[str]) -> str:
        return (
            "|"
            + "|".join(f" {cell:<{width}} " for cell, width in zip(row, widths, strict=True))
            + "|"
        )

    return "\n".join([rule, line(rows[0]), rule, *map(line, rows[1:]), rule]) + "\n"


def _github_data(text: str) -> str:
    """A workflow command's message, escaped as the runner unescapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github_property(text: str) -> str:
    return _github_data(text).replace(":", "%3A").replace(",", "%2C")


def as_github(documents: Sequence[Document]) -> str:
    """GitHub Actions workflow commands: an error or warning annotation on the values file per
    finding, grouped per values document, then the totals."""
    lines: list[str] = []
    totals = {"checks": 0, "passed": 0, "warnings": 0, "failures": 0, "skipped": 0}
    for document in documents:
        items = check_results([document])
        lines.append(f"::group::Testing '{document.name}' against {len(items)} checks")
        for item in items:
            for level, findings in (("error", item.failures), ("warning", item.warnings)):
                for finding in findings:
                    properties = f"file={_github_property(document.file)},line=1," + (
                        f"title={_github_property(f'{item.check} {finding.rule}')}"
                    )
                    lines.append(f"::{level} {properties}::{_github_data(finding_line(finding))}")
            totals["checks"] += 1
            totals["passed"] += item.passed
            totals["warnings"] += len(item.warnings)
            totals["failures"] += len(item.failures)
            totals["skipped"] += bool(item.skipped)
        lines.append("::endgroup::")
    lines.append(
        f"{totals['checks']} checks, {totals['passed']} passed, {totals['warnings']} warnings, "
        f"{totals['failures']} failures, {totals['skipped']} not run"
    )
    return "\n".join(lines) + "\n"


def as_sarif(documents: Sequence[Document]) -> str:
    """SARIF 2.1.0: one run of the gate; a rule per rule id found, a result per finding (error
    for a deny, warning for a warn) located in the values file."""
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    results: list[dict[str, Any]] = []
    for item in check_results(documents):
        for level, findings in (("error", item.failures), ("warning", item.warnings)):
            for finding in findings:
                if finding.rule not in index:
                    index[finding.rule] = len(rules)
                    rules.append(
                        {
                            "id": finding.rule,
                            "shortDescription": {"text": f"{item.check} check {finding.rule}"},
                            "properties": {"check": item.check},
                        }
                    )
                results.append(
                    {
                        "ruleId": finding.rule,
                        "ruleIndex": index[finding.rule],
                        "level": level,
                        "message": {"text": finding_line(finding)},
                        "locations": [
                            {
                                "physicalLocation": {
                                    "artifactLocation": {"uri": item.document.file},
                                    "region": {"startLine": 1},
                                }
                            }
                        ],
                        "properties": _metadata(item.document, finding),
                    }
                )
    failed = any(not item.passed for item in check_results(documents))
    driver: dict[str, Any] = {"name": TOOL, "rules": rules}
    with contextlib.suppress(PackageNotFoundError):  # a source tree that was never installed
        driver["version"] = package_version("checkpoint-runtime")
    log = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {"driver": driver},
                "invocations": [{"executionSuccessful": True, "exitCode": 1 if failed else 0}],
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


FORMATTERS: dict[str, Callable[[Sequence[Document]], str]] = {
    "json": as_json,
    "tap": as_tap,
    "table": as_table,
    "junit": lambda documents: junit_xml([(d.name, d.result) for d in documents]),
    "github": as_github,
    "sarif": as_sarif,
}
FORMATS = (TEXT, *FORMATTERS)
