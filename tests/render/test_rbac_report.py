"""docs/rbac.md: generated from renders, complete, deterministic, and loud about new rules."""

from __future__ import annotations

import shutil
from pathlib import Path

from checkpoint_gate.report import (
    PURPOSES,
    REPORT_PATH,
    render_report,
    rendered_roles,
    write_rbac_report,
)
from checkpoint_testenv.binaries import REPO_ROOT as PROJECT_ROOT


def test_committed_report_is_current() -> None:
    assert (PROJECT_ROOT / REPORT_PATH).read_text(encoding="utf-8") == render_report(
        rendered_roles(PROJECT_ROOT)
    )


def test_every_spec_permission_is_explained() -> None:
    report = render_report(rendered_roles(PROJECT_ROOT))
    assert "unexplained" not in report
    for purpose in PURPOSES.values():
        assert purpose.operation in report
        assert purpose.why_not_narrower in report


def test_file_store_and_rbac_off_render_no_role_in_the_report() -> None:
    rows = {row.values: row for row in rendered_roles(PROJECT_ROOT)}
    assert rows["checkpoint.store.backend=file"].role is None
    assert rows["rbac.create=false"].role is None
    assert rows["defaults"].role is not None


def test_a_widened_role_shows_up_as_unexplained(tmp_path: Path) -> None:
    for part in ("charts", "ci"):
        shutil.copytree(PROJECT_ROOT / part, tmp_path / part)
    role = tmp_path / "charts" / "checkpoint-runtime" / "templates" / "role.yaml"
    text = role.read_text(encoding="utf-8")
    role.write_text(
        text.replace('"update", "create"]', '"update", "create", "delete"]'), encoding="utf-8"
    )
    write_rbac_report(tmp_path)
    report = (tmp_path / REPORT_PATH).read_text(encoding="utf-8")
    line = next(line for line in report.splitlines() if "`delete`" in line)
    assert "unexplained: no store operation needs it" in line


def test_writing_twice_changes_nothing(tmp_path: Path) -> None:
    for part in ("charts", "ci"):
        shutil.copytree(PROJECT_ROOT / part, tmp_path / part)
    write_rbac_report(tmp_path)
    first = (tmp_path / REPORT_PATH).stat().st_mtime_ns
    write_rbac_report(tmp_path)
    assert (tmp_path / REPORT_PATH).stat().st_mtime_ns == first


def test_the_admission_policy_shows_up_with_what_it_narrows() -> None:
    rows = {row.values: row for row in rendered_roles(PROJECT_ROOT)}
    assert rows["defaults"].admission is None
    assert rows["ci/admission-policy-values.yaml"].admission is not None
    report = render_report(rendered_roles(PROJECT_ROOT))
    (line,) = [line for line in report.splitlines() if line.startswith("| ci/admission-policy")
               and "system:serviceaccount:" in line]  # fmt: skip
    assert "system:serviceaccount:apps:cr-checkpoint-runtime" in line
    assert "chunk slots `<head>-c<a or b><0..7>`" in line
    assert "`cr-checkpoint-runtime` only" in line
