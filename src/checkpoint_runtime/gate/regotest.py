"""Run the `test_*` rules of policy/*_test.rego in-process with regopy, like `opa test`.

    python -m checkpoint_runtime.gate.regotest policy

A test passes when its rule evaluates to true; undefined or false fails. Exit status is non-zero
on any failure and when no test is found (an empty run proves nothing).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from checkpoint_runtime.gate.rego import CompiledPolicy, Module, RegoError, load_modules

_PACKAGE = re.compile(r"^package\s+([\w.]+)", re.MULTILINE)
_TEST_RULE = re.compile(r"^(test_\w+)\b", re.MULTILINE)


@dataclass(frozen=True)
class TestCase:
    """One `test_*` rule: the entrypoint regopy evaluates and where it was written."""

    module: str
    package: str
    rule: str

    @property
    def entrypoint(self) -> str:
        return "/".join([*self.package.split("."), self.rule])


@dataclass(frozen=True)
class TestResult:
    case: TestCase
    passed: bool
    detail: str = ""


def discover(modules: Sequence[Module]) -> list[TestCase]:
    """Every distinct `test_*` rule head at the start of a line in a `*_test.rego` module."""
    cases: dict[tuple[str, str], TestCase] = {}
    for module in modules:
        if not module.name.endswith("_test.rego"):
            continue
        package = _PACKAGE.search(module.source)
        if package is None:
            continue
        for rule in _TEST_RULE.findall(module.source):
            cases.setdefault(
                (package.group(1), rule), TestCase(module.name, package.group(1), rule)
            )
    return list(cases.values())


def run(policy_dir: Path) -> list[TestResult]:
    """Compile the policy folder once with every test as an entrypoint, then evaluate each."""
    modules = load_modules(policy_dir, tests=True)
    cases = discover(modules)
    if not cases:
        return []
    compiled = CompiledPolicy(modules, [case.entrypoint for case in cases])
    results: list[TestResult] = []
    for case in cases:
        try:
            value = compiled.query(case.entrypoint)
        except RegoError as error:
            results.append(TestResult(case, passed=False, detail=f"error: {error}"))
            continue
        detail = "" if value is True else f"evaluated to {'undefined' if value is None else value}"
        results.append(TestResult(case, passed=value is True, detail=detail))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="regotest", description=__doc__.splitlines()[0])
    parser.add_argument("policy_dir", type=Path, help="conftest policy folder (policy/)")
    args = parser.parse_args(argv)
    try:
        results = run(args.policy_dir)
    except RegoError as error:
        print(f"error: {error}", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    for result in results:
        status = "PASS" if result.passed else "FAIL"
        suffix = f": {result.detail}" if result.detail else ""
        print(f"{status} {result.case.module} {result.case.rule}{suffix}")
    passed = sum(result.passed for result in results)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    if not results:
        print("error: no test_* rules found", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
