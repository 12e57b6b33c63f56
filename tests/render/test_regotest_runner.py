"""The in-process Rego test runner: it runs the policy tests, and it can fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from checkpoint_runtime.gate import regotest
from checkpoint_runtime.gate.paths import POLICY_DIR

# The whole suite runs as `just policy-test` (about a minute in rego-cpp); here the runner is
# checked on the RBAC part only, which is enough to show that it passes and that it can fail.
RBAC_SUBSET = (
    "documents.rego",
    "rbac.rego",
    "helpers_test.rego",
    "fixtures_test.rego",
    "rbac_test.rego",
)


def rbac_subset(tmp_path: Path) -> Path:
    policy = tmp_path / "policy"
    policy.mkdir()
    for name in RBAC_SUBSET:
        shutil.copy(POLICY_DIR / name, policy / name)
    return policy


def test_every_policy_test_is_discovered() -> None:
    cases = regotest.discover(regotest.load_modules(POLICY_DIR, tests=True))
    assert len(cases) >= 100
    modules = {case.module for case in cases}
    assert modules >= {"rbac_test.rego", "pod_security_test.rego", "hygiene_test.rego"}


def test_the_rbac_policy_tests_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert regotest.main([str(rbac_subset(tmp_path))]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    passed, failed = (int(part.split()[0]) for part in last.split(", "))
    assert failed == 0
    assert passed >= 30


def test_a_failing_policy_test_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = rbac_subset(tmp_path)
    rbac = policy / "rbac.rego"
    # Weaken RBAC-3: drop the "extra permissions" half of the set comparison.
    text = rbac.read_text(encoding="utf-8")
    assert "count(extra) + count(missing) > 0" in text
    rbac.write_text(
        text.replace("count(extra) + count(missing) > 0", "count(missing) > 0"), encoding="utf-8"
    )
    assert regotest.main([str(policy)]) == 1
    out = capsys.readouterr().out
    assert "FAIL rbac_test.rego test_rbac3_extra_delete_verb_is_denied" in out
    assert out.strip().splitlines()[-1].endswith("failed")
    assert not out.strip().endswith(" 0 failed")


def test_no_tests_is_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "main.rego").write_text(
        "package main\n\nimport rego.v1\n\ndeny contains 1 if false\n"
    )
    assert regotest.main([str(tmp_path)]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == "0 passed, 0 failed"


def test_a_compile_error_is_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "broken_test.rego").write_text("package main\n\ntest_x if {\n")
    assert regotest.main([str(tmp_path)]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1] == "0 passed, 1 failed"
