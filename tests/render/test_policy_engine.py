"""The policy engine: OPA's Wasm build of policy/, its failure modes, and the OPA tool checks.

The Rego unit tests themselves run once, under `conftest verify`, in `just policy-check`; the
tests here show that the checks around them fail when they should.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from opapywasm import OpaBuiltinError

from checkpoint_gate.engine import ENGINE_RULE, HOST_BUILTINS, Level, PolicyEngine
from checkpoint_gate.paths import POLICY_DIR
from checkpoint_gate.pipeline import CHECK_POLICY, Gate
from checkpoint_testenv import policytools
from checkpoint_testenv.binaries import REPO_ROOT

ENTRYPOINT = REPO_ROOT / policytools.ENTRYPOINT_REGO

# A policy that fails at run time on a Role: two complete definitions of `owner` conflict.
CONFLICTING = """package main

import rego.v1

owner := "a" if input.kind == "Role"

owner := "b" if input.kind == "Role"

deny contains msg if {
	input.kind == "Role"
	msg := concat("", ["X-1 Role ", owner, ": never reached"])
}

warn contains "X-2 Service svc: evaluated" if input.kind == "Service"
"""


def build(policy: Path, tmp_path: Path) -> Path:
    wasm = tmp_path / "policy.wasm"
    wasm.write_bytes(policytools.build_wasm(policy, ENTRYPOINT, policytools.WASM_ENTRYPOINTS))
    return wasm


def test_an_engine_error_is_a_finding_naming_the_document_and_rule(tmp_path: Path) -> None:
    policy = tmp_path / "policy"
    policy.mkdir()
    (policy / "main.rego").write_text(CONFLICTING, encoding="utf-8")
    result = Gate(policy_wasm=build(policy, tmp_path)).run({})
    errors = [f for f in result.of_check(CHECK_POLICY) if f.rule == ENGINE_RULE]
    assert [(f.level, f.obj, f.source) for f in errors] == [
        (Level.DENY, "Role cr-checkpoint-runtime", "checkpoint-runtime/templates/role.yaml")
    ]
    assert "evaluating main/deny failed" in errors[0].message
    assert "conflict" in errors[0].message
    # the other documents were still evaluated
    assert any(f.rule == "X-2" for f in result.findings)


def test_the_committed_module_is_the_policies_compiled_by_the_pinned_opa(tmp_path: Path) -> None:
    """What `just gen` would write (gen-check proves the same on the whole tree)."""
    assert build(POLICY_DIR, tmp_path).read_bytes() == PolicyEngine().wasm.read_bytes()


def policy_copy(tmp_path: Path) -> Path:
    target = tmp_path / "policy"
    shutil.copytree(POLICY_DIR, target)
    return target


def conftest_verify(policy: Path) -> subprocess.CompletedProcess[str]:
    command = [str(policytools.conftest()), "verify", "--no-color", "--policy", str(policy)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_a_failing_policy_test_fails_the_run(tmp_path: Path) -> None:
    policy = policy_copy(tmp_path)
    rbac = policy / "rbac.rego"
    # Weaken RBAC-3: drop the "extra permissions" half of the set comparison.
    text = rbac.read_text(encoding="utf-8")
    assert "count(extra) + count(missing) > 0" in text
    rbac.write_text(
        text.replace("count(extra) + count(missing) > 0", "count(missing) > 0"), encoding="utf-8"
    )
    completed = conftest_verify(policy)
    assert completed.returncode != 0
    assert "test_rbac3_extra_delete_verb_is_denied" in completed.stdout


def test_a_compile_error_is_a_failure(tmp_path: Path) -> None:
    policy = policy_copy(tmp_path)
    (policy / "broken_test.rego").write_text("package main\n\ntest_x if {\n", encoding="utf-8")
    completed = conftest_verify(policy)
    assert completed.returncode != 0
    assert "broken_test.rego" in completed.stdout + completed.stderr


def test_the_coverage_check_names_an_uncovered_line(tmp_path: Path) -> None:
    policy = policy_copy(tmp_path)
    extra = 'deny contains "X-9 Nothing n: no test reaches this" if input.kind == "Nothing"\n'
    (policy / "extra.rego").write_text(f"package main\n\nimport rego.v1\n\n{extra}", "utf-8")
    report = subprocess.run(
        [str(policytools.opa()), "test", "--coverage", str(policy)],
        capture_output=True,
        text=True,
        check=True,
    )
    check = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "policy_coverage.py")],
        input=report.stdout,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 1
    assert "extra.rego: " in check.stdout
    assert "not covered: lines 5" in check.stdout


@pytest.mark.parametrize("name", ["rbac.rego", "hygiene.rego", "pod_security.rego"])
def test_the_policies_stay_plain_conftest_policy(name: str) -> None:
    text = (POLICY_DIR / name).read_text(encoding="utf-8")
    assert text.count("\npackage main\n") == 1
    assert "deny contains msg if" in text


def test_input_the_engine_cannot_take_is_a_finding_for_each_document_and_mode() -> None:
    """A value JSON cannot hold (a YAML date, say) fails the document and the combined release
    with a named ENGINE deny, not a traceback."""
    import datetime

    from checkpoint_gate.engine import COMBINED_LABEL
    from checkpoint_gate.manifests import Manifest

    odd = Manifest(
        "t.yaml",
        {"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"d": datetime.date(2024, 1, 1)}},
    )
    verdicts = PolicyEngine().evaluate([odd])
    assert {(v.rule, v.obj, v.source) for v in verdicts} == {
        (ENGINE_RULE, "ConfigMap x", "t.yaml"),
        (ENGINE_RULE, COMBINED_LABEL, "<release>"),
    }
    assert all(v.level is Level.DENY and "JSON" in v.message for v in verdicts)


def test_host_builtins_match_opa_and_refuse_what_they_cannot_do() -> None:
    """crypto.sha256 and regex.replace, which OPA's Wasm target leaves to the host: the answers
    of the pinned OPA for what the policies use, a named error (never a wrong answer) otherwise."""
    sha256, replace = HOST_BUILTINS["crypto.sha256"], HOST_BUILTINS["regex.replace"]
    cases = {
        "sha": ("crypto.sha256", ["lease\u0000corp/objectstore/audit"]),
        "runs": ("regex.replace", ["A_b..c--d.-x", "[-.]{2,}", "-"]),
        "class": ("regex.replace", ["Corp.Example/Feed_1 x", "[^a-z0-9.-]+", "-"]),
    }
    query = (
        "{"
        + ", ".join(
            f'"{name}": {builtin}({", ".join(json.dumps(arg) for arg in args)})'
            for name, (builtin, args) in cases.items()
        )
        + "}"
    )
    completed = subprocess.run(
        [str(policytools.opa()), "eval", "--format", "raw", query],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    expected = json.loads(completed.stdout)
    assert {name: HOST_BUILTINS[b](*args) for name, (b, args) in cases.items()} == expected
    with pytest.raises(OpaBuiltinError, match="group expansion"):
        replace("ab", "(a)", "$1")
    with pytest.raises(OpaBuiltinError, match="bad pattern"):
        replace("ab", "(", "-")
    with pytest.raises(OpaBuiltinError, match="must be a string"):
        sha256(3)


def test_the_engine_gives_the_policy_module_the_memory_it_declares() -> None:
    """The compiled module's `env.memory` minimum (it grows with the policies' data) fits in what
    the engine starts it with; past that, loading fails with "memory types incompatible"."""
    import wasmtime

    from checkpoint_gate.engine import POLICY_MEMORY_PAGES, POLICY_WASM

    module = wasmtime.Module.from_file(wasmtime.Engine(), str(POLICY_WASM))
    (memory,) = [item.type for item in module.imports if item.name == "memory"]
    assert memory.limits.min <= POLICY_MEMORY_PAGES
