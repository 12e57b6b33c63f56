"""Fail unless `opa test --coverage` covered every line of the policies (test files aside).

    opa test --coverage policy | python scripts/policy_coverage.py

Reads OPA's coverage report (JSON) on stdin, prints each policy file's coverage and the lines no
test reached, and exits 1 if any non-test line is uncovered or if no policy file was reported.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def uncovered(report: dict[str, Any]) -> dict[str, list[int]]:
    """Policy file -> the lines no test reached (every file, `*_test.rego` left out)."""
    missing: dict[str, list[int]] = {}
    for name, entry in sorted(report.get("files", {}).items()):
        if name.endswith("_test.rego"):
            continue
        lines: list[int] = []
        for span in entry.get("not_covered", []):
            lines.extend(range(span["start"]["row"], span["end"]["row"] + 1))
        missing[name] = lines
    return missing


def main() -> int:
    try:
        report = json.load(sys.stdin)
    except ValueError as error:
        print(f"policy coverage: stdin is not OPA's JSON coverage report: {error}", file=sys.stderr)
        return 1
    missing = uncovered(report)
    if not missing:
        print("policy coverage: the report names no policy file", file=sys.stderr)
        return 1
    for name, lines in missing.items():
        coverage = report["files"][name].get("coverage", 0)
        note = f"; not covered: lines {', '.join(map(str, lines))}" if lines else ""
        print(f"policy coverage: {name}: {coverage:.1f}%{note}")
    if any(missing.values()):
        print("policy coverage: add a test that reaches every line above", file=sys.stderr)
        return 1
    print(f"policy coverage: every line of {len(missing)} policy files is covered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
