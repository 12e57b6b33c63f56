"""The in-process Rego test runner: it runs the policy tests, and it can fail."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from checkpoint_runtime.gate import regotest
from checkpoint_runtime.gate.paths import POLICY_DIR


def test_all_policy_unit_tests_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert regotest.main([str(POLICY_DIR)]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    passed, failed = (int(part.split()[0]) for part in last.split(", "))
    assert failed == 0
    assert passed >= 100


def test_a_failing_policy_test_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy"
    shutil.copytree(POLICY_DIR, policy)
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
