"""JUnit XML for CI systems: one test suite per values document, one test case per check.

A check that produced deny findings is a failure (one `<failure>` per case, listing every
finding); warnings go into `<system-out>`; a check without findings passes; a check the gate
did not run (after a values-schema or render deny) is skipped.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from checkpoint_gate.engine import Level
from checkpoint_gate.pipeline import (
    CHECK_KUBERNETES,
    CHECK_POLICY,
    CHECK_RENDER,
    CHECK_RUNTIME,
    CHECK_VALUES,
    Finding,
    GateResult,
)

CHECKS = (CHECK_VALUES, CHECK_RENDER, CHECK_KUBERNETES, CHECK_RUNTIME, CHECK_POLICY)
# A deny of these stops the gate: nothing is rendered from values its schema refuses, and
# nothing is validated when the chart did not render.
STOPPING = (CHECK_VALUES, CHECK_RENDER)


def checks_not_run(result: GateResult) -> dict[str, str]:
    """check -> why it did not run, for the checks after the one whose deny stopped the gate."""
    for stop in STOPPING:
        if any(f.level is Level.DENY for f in result.of_check(stop)):
            after = CHECKS[CHECKS.index(stop) + 1 :]
            return dict.fromkeys(after, f"not run: {stop} denied")
    return {}


def junit_xml(results: Sequence[tuple[str, GateResult]]) -> str:
    """`results`: (values document name, its gate result), in the order they ran."""
    suites = ET.Element("testsuites", name="checkpoint-runtime gate")
    total_tests = total_failures = 0
    for name, result in results:
        suite = ET.SubElement(suites, "testsuite", name=name)
        failures = 0
        not_run = checks_not_run(result)
        for check in CHECKS:
            case = ET.SubElement(suite, "testcase", classname=f"gate.{name}", name=check)
            if check in not_run:
                ET.SubElement(case, "skipped", message=not_run[check])
                continue
            findings = result.of_check(check)
            denied = [f for f in findings if f.level is Level.DENY]
            warned = [f for f in findings if f.level is Level.WARN]
            if denied:
                failures += 1
                failure = ET.SubElement(
                    case, "failure", message=f"{len(denied)} deny finding(s)", type=check
                )
                failure.text = "\n".join(finding_line(f) for f in denied)
            if warned:
                out = ET.SubElement(case, "system-out")
                out.text = "\n".join(finding_line(f) for f in warned)
        suite.set("tests", str(len(CHECKS)))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("skipped", str(len(not_run)))
        total_tests += len(CHECKS)
        total_failures += failures
    suites.set("tests", str(total_tests))
    suites.set("failures", str(total_failures))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def finding_line(finding: Finding) -> str:
    """A finding on one line with its rule, object and template: policy messages already start
    with their rule and object; other checks get both added."""
    rule, obj, message = finding.rule, finding.obj, finding.message
    where = f" ({finding.source})" if finding.source else ""
    if message.startswith(f"{rule} "):
        return f"{message}{where}"
    return f"{rule} {obj}: {message}{where}" if obj else f"{rule}: {message}{where}"


def write_junit_xml(path: Path, results: Sequence[tuple[str, GateResult]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(junit_xml(results), encoding="utf-8")
