"""The scanners platform teams run on charts (checkov, kube-score) over the value matrix.

Every render of the matrix (helm template, what users install) must be clean: each check a
scanner fails is either fixed in the chart or suppressed by the manifest itself, in the
annotation the scanner reads, with a reason, and listed with that reason in docs/scanners.md;
and no exception is carried where nothing would fail.
Broken copies of the chart prove that the scanners run and that the suppressions are the only
thing standing between the chart and a finding.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from render_helpers import MATRIX, patched_chart

from checkpoint_gate.manifests import RenderError
from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.render import CliRenderer
from checkpoint_testenv import scanners
from checkpoint_testenv.binaries import REPO_ROOT
from checkpoint_testenv.scanners import Report, render_release, scan_folder

DOC = REPO_ROOT / "docs" / "scanners.md"
SECURITY_CONTEXT = '{{- include "checkpoint-runtime.containerSecurityContext" . | nindent 12 }}'


def case_name(matrix_name: str) -> str:
    return matrix_name.removesuffix("-values.yaml")


@pytest.fixture(scope="module")
def matrix_folder(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scanned-matrix")
    renderer = CliRenderer(CHART_DIR, helm)
    for name, values in MATRIX:
        render_release(folder, renderer, case_name(name), values)
    return folder


@pytest.fixture(scope="module")
def matrix_reports(matrix_folder: Path) -> dict[str, Report]:
    return scan_folder(matrix_folder)


@pytest.mark.parametrize("case", [case_name(name) for name, _ in MATRIX])
def test_the_scanners_find_nothing_unexplained(
    case: str, matrix_reports: dict[str, Report]
) -> None:
    report = matrix_reports[f"{case}.yaml"]
    assert report.unexplained() == []
    # Both scanners read this file: each suppresses something on the default pull policy.
    assert {s.scanner for s in report.suppressions} == {"checkov", "kube-score"}


def documented_exceptions() -> dict[tuple[str, str], str]:
    """(scanner, check) -> reason, from the exceptions table of docs/scanners.md."""
    rows = re.findall(
        r"^\| (checkov|kube-score) \| `([^`]+)` \| [^|]+ \| (.+) \|$", DOC.read_text(), re.M
    )
    return {(scanner, check): reason for scanner, check, reason in rows}


def test_every_exception_is_documented_and_every_documented_one_is_used(
    matrix_reports: dict[str, Report],
) -> None:
    used = {(s.scanner, s.check) for r in matrix_reports.values() for s in r.suppressions}
    documented = documented_exceptions()
    assert documented, f"no exceptions table found in {DOC}"
    assert used - documented.keys() == set(), f"suppressed but not listed in {DOC}"
    assert documented.keys() - used == set(), f"listed in {DOC} but never suppressed"


def documented_reasons() -> set[tuple[str, str, str]]:
    """(scanner, check, reason) of every row of the exceptions table (code marks dropped)."""
    rows = re.findall(
        r"^\| (checkov|kube-score) \| `([^`]+)` \| [^|]+ \| (.+) \|$", DOC.read_text(), re.M
    )
    return {(scanner, check, reason.replace("`", "")) for scanner, check, reason in rows}


def test_the_documented_reasons_are_the_ones_the_manifests_carry(
    matrix_reports: dict[str, Report],
) -> None:
    carried = {
        (s.scanner, s.check, s.reason) for r in matrix_reports.values() for s in r.suppressions
    }
    documented = documented_reasons()
    assert carried - documented == set(), f"a manifest gives a reason not listed in {DOC}"
    assert documented - carried == set(), f"a reason listed in {DOC} that no render gives"


# The annotation lines that carry the exceptions in a render.
EXCEPTION_LINE = re.compile(r"^\s+(checkov\.io/skip\d+|kube-score/ignore): .*\n", re.M)


def test_every_exception_is_needed(
    matrix_reports: dict[str, Report], batch_reports: dict[str, Report]
) -> None:
    """The renders without their exception annotations fail exactly the suppressed checks on
    exactly the suppressed objects: no exception is carried where nothing would fail."""
    for name, report in matrix_reports.items():
        suppressed = {(s.scanner, s.obj, s.check) for s in report.suppressions}
        failed = {(f.scanner, f.obj, f.check) for f in batch_reports[name].findings}
        assert failed == suppressed, name


def test_a_pinned_digest_and_pull_policy_always_need_no_exception(
    batch_reports: dict[str, Report],
) -> None:
    """The image exceptions appear only while the gap is there: a user who pins the digest and
    asks for Always gets a manifest without them, and it still scans clean."""
    report = batch_reports["pinned.yaml"]
    assert report.unexplained() == []
    suppressed = {s.check for s in report.suppressions}
    image_checks = {"CKV_K8S_43", "CKV_K8S_15", "container-image-pull-policy"}
    assert suppressed & image_checks == set()


@dataclass(frozen=True)
class Broken:
    template: str
    old: str
    new: str
    # What the scanners must then report: (scanner, check id) pairs, each on some object.
    expected: frozenset[tuple[str, str]]


SKIP_LINE = (
    'checkov.io/skip{{ add1 $index }}: {{ printf "%s=%s" (index $skip 0) (index $skip 1) | quote }}'
)
KUBE_SCORE_REASON = "# kube-score {{ index . 0 }}: {{ index . 1 }}"
AUTOMOUNT = "      automountServiceAccountToken: false\n"
RUNTIME_NETPOL_IGNORE = (
    '{{- $kubeScore = append $kubeScore (list "pod-networkpolicy" $reason) }}\n{{- else if'
)

VARIANTS: dict[str, Broken] = {
    # A container the chart must never render: both scanners see it.
    "privileged": Broken(
        "deployment.yaml",
        SECURITY_CONTEXT,
        SECURITY_CONTEXT.replace(
            " | nindent", ' | replace "privileged: false" "privileged: true" | nindent'
        ),
        frozenset(
            {("checkov", "CKV_K8S_16"), ("kube-score", "container-security-context-privileged")}
        ),
    ),
    # The automounted token back (the chart mounts a short-lived projected one instead).
    "automounted-token": Broken(
        "deployment.yaml",
        AUTOMOUNT,
        AUTOMOUNT.replace("false", "true"),
        frozenset({("checkov", "CKV_K8S_38")}),
    ),
    # A suppression removed: the check it carried fails again.
    "networkpolicy-ignore-removed": Broken(
        "_scanners.tpl",
        RUNTIME_NETPOL_IGNORE,
        RUNTIME_NETPOL_IGNORE.replace("{{- $kubeScore = append", "{{- $_ := append"),
        frozenset({("kube-score", "pod-networkpolicy")}),
    ),
}


PINNED = {"image": {"digest": "sha256:" + "a" * 64, "pullPolicy": "Always"}}
NO_REASON = [  # the checkov skips lose their "=<reason>", the kube-score ignores their comments
    (
        SKIP_LINE,
        SKIP_LINE.replace('printf "%s=%s" (index $skip 0) (index $skip 1)', "index $skip 0"),
    ),
    (KUBE_SCORE_REASON, "# {{ index . 0 }}"),
]


@pytest.fixture(scope="module")
def batch_reports(
    helm: Path, matrix_folder: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Report]:
    """The other renders these tests scan, in one folder and one checkov run (its start is
    most of a scan): each broken variant and a chart whose suppressions have no reason, with
    the defaults; the defaults with a pinned digest and pull policy Always; and each matrix
    render without its exception annotations, under its own name. Every file is one release of
    its own name and namespace, so checkov links no object across them."""
    renders = tmp_path_factory.mktemp("scanned-batch")
    for name, broken in VARIANTS.items():
        chart = patched_chart(
            tmp_path_factory.mktemp(name) / "checkpoint-runtime",
            broken.template,
            broken.old,
            broken.new,
        )
        render_release(renders, CliRenderer(chart, helm), name, {})
    chart = tmp_path_factory.mktemp("no-reason") / "checkpoint-runtime"
    for old, new in NO_REASON:
        patched_chart(chart, "_scanners.tpl", old, new)
    render_release(renders, CliRenderer(chart, helm), "no-reason", {})
    render_release(renders, CliRenderer(CHART_DIR, helm), "pinned", PINNED)
    for path in matrix_folder.glob("*.yaml"):
        stripped, count = EXCEPTION_LINE.subn("", path.read_text(encoding="utf-8"))
        assert count > 0, path.name
        assert not (renders / path.name).exists(), path.name
        (renders / path.name).write_text(stripped, encoding="utf-8")
    return scan_folder(renders)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_broken_chart_fails_the_scanners(variant: str, batch_reports: dict[str, Report]) -> None:
    report = batch_reports[f"{variant}.yaml"]
    found = {(finding.scanner, finding.check) for finding in report.findings}
    assert VARIANTS[variant].expected <= found, report.unexplained()
    assert report.unexplained() != []


def test_a_suppression_without_a_reason_is_a_problem(batch_reports: dict[str, Report]) -> None:
    """The checkov skips lose their "=<reason>" and the kube-score ignores their comment lines:
    nothing fails, yet every suppression is reported."""
    report = batch_reports["no-reason.yaml"]
    assert report.findings == []
    problems = report.unexplained()
    assert len(problems) == len(report.suppressions)
    assert {s.scanner for s in report.suppressions} == {"checkov", "kube-score"}
    assert all(problem.endswith("suppressed without a reason") for problem in problems)


def test_checkov_runs_without_a_network(
    helm: Path, tmp_path: Path, matrix_reports: dict[str, Report]
) -> None:
    """checkov reaches no server: in a network namespace without any interface but loopback it
    reports exactly what it reports with the machine's network."""
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is missing: apt-get install util-linux"
    render_release(tmp_path, CliRenderer(CHART_DIR, helm), "defaults", {})
    offline = scanners.checkov(tmp_path, wrapper=(unshare, "--net"))
    online = matrix_reports["defaults.yaml"]
    assert offline.findings == []
    assert sorted(offline.suppressions, key=repr) == sorted(
        (s for s in online.suppressions if s.scanner == "checkov"), key=repr
    )


def test_a_reason_checkov_cannot_read_is_refused_at_render(
    helm: Path, chart_copy: Callable[[str, str, str], Path], tmp_path: Path
) -> None:
    """checkov splits a skip annotation on "=": a reason holding one would not be read."""
    old = "fails for images preloaded onto nodes"
    chart = chart_copy("_scanners.tpl", old, "fails for images preloaded onto nodes (a=b)")
    with pytest.raises(RenderError, match='CKV_K8S_15 exception contains "="'):
        render_release(tmp_path, CliRenderer(chart, helm), "equals", {})


SCAN_SCRIPT = REPO_ROOT / "scripts" / "scan.py"


def run_scan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCAN_SCRIPT), *args], capture_output=True, text=True, check=False
    )


def test_the_scan_script_lists_each_exception_with_its_reason(tmp_path: Path) -> None:
    values = tmp_path / "mine.yaml"
    values.write_text("checkpoint:\n  store:\n    backend: file\n")
    scanned = run_scan("-f", str(values), "--set", "image.pullPolicy=Always")
    assert scanned.returncode == 0, scanned.stderr
    lines = scanned.stdout.splitlines()
    assert lines[0] == f"values.yaml: {len(lines) - 1} exception(s), 0 unexplained"
    assert "  exception kube-score deployment-strategy Deployment/values-checkpoint-runtime: " + (
        "the file store has no leader election"
    ) in "\n".join(lines)
    assert not any("CKV_K8S_15" in line or "CKV_K8S_38" in line for line in lines)


def test_the_scan_script_names_a_bad_values_file(tmp_path: Path) -> None:
    scanned = run_scan("-f", str(tmp_path / "missing.yaml"))
    assert scanned.returncode == 2
    assert scanned.stderr.startswith("error: ValuesFileError: ")
    assert "missing.yaml: cannot read it" in scanned.stderr
