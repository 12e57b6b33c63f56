"""Run the manifest scanners platform teams run on charts (checkov, kube-score) over renders.

The scanners come from scripts/testenv/build-scanners.sh (checkov in a virtualenv of its own,
kube-score built from its Go module, both at the versions pinned in scripts/testenv/scanners/,
cached per pin set), or from the folder named by CHECKPOINT_SCANNERS_BIN. A missing scanner is an
error, never a reason to skip. Both run offline: checkov is told not to fetch the platform's
guidelines and mappings nor to look for a newer version of itself.

Each scan returns what failed (a finding) and what the manifests suppressed on purpose (an
exception, with the reason the manifest gives for it).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from checkpoint_gate.render import CliRenderer
from checkpoint_gate.validate import KUBERNETES_VERSION
from checkpoint_testenv.binaries import REPO_ROOT, locate_built

BIN_ENV = "CHECKPOINT_SCANNERS_BIN"
REQUIRED = ("checkov", "kube-score")
BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-scanners.sh"

# What checkov records for a skip annotation without "=<reason>".
CHECKOV_NO_REASON = "No comment provided"
KUBE_SCORE_IGNORE = "kube-score/ignore"
# kube-score's grade of a check that passed (critical 1, warning 5, almost ok 7).
KUBE_SCORE_OK = 10
# kube-score checks that are off by default and that the chart is held to as well.
KUBE_SCORE_OPTIONAL = ("container-seccomp-profile",)
# The environment that keeps checkov off the network: no platform mapping or guideline download,
# no look-up of a newer checkov release.
CHECKOV_OFFLINE_ENV = {"BC_SKIP_MAPPING": "TRUE", "CKV_SKIP_PACKAGE_UPDATE_CHECK": "TRUE"}


class ScannerFailed(RuntimeError):
    """A scanner did not run to a report (a crash, unreadable output, a parse error)."""


@dataclass(frozen=True)
class Finding:
    """A check a scanner failed on an object, not suppressed by the manifest."""

    scanner: str
    file: str
    obj: str
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.scanner} {self.check} {self.file} {self.obj}: {self.message}"


@dataclass(frozen=True)
class Suppression:
    """A check the manifest suppresses on an object, with the reason it gives."""

    scanner: str
    file: str
    obj: str
    check: str
    reason: str


@dataclass(frozen=True)
class Report:
    findings: list[Finding]
    suppressions: list[Suppression]

    def unexplained(self) -> list[str]:
        """Every finding, and every suppression that gives no reason."""
        problems = [str(finding) for finding in self.findings]
        problems += [
            f"{s.scanner} {s.check} {s.file} {s.obj}: suppressed without a reason"
            for s in self.suppressions
            if not s.reason.strip() or s.reason == CHECKOV_NO_REASON
        ]
        return problems


@cache
def locate() -> Path:
    """The folder holding checkov and kube-score, installing them if needed."""
    return locate_built(BIN_ENV, BUILD_SCRIPT, REQUIRED)


def render_release(
    folder: Path, renderer: CliRenderer, release: str, values: dict[str, Any]
) -> Path:
    """`helm template` of the chart into `folder`/<release>.yaml, in namespace ns-<release>: one
    release per file with its own name and namespace, so that the scanners, which link objects
    across files (a NetworkPolicy to the pods it selects), never mix two renders."""
    path = folder / f"{release}.yaml"
    rendered = renderer.render_text(values, release=release, namespace=f"ns-{release}")
    path.write_text(rendered, encoding="utf-8")
    return path


def scan_folder(folder: Path) -> dict[str, Report]:
    """checkov once over the manifest files of `folder`, kube-score on each: a Report per file
    name. Each file must be one release with its own release name and namespace (see checkov)."""
    together = checkov(folder)
    reports = {}
    for path in sorted(folder.glob("*.yaml")):
        alone = kube_score(path)
        reports[path.name] = Report(
            [f for f in together.findings if f.file == path.name] + alone.findings,
            [s for s in together.suppressions if s.file == path.name] + alone.suppressions,
        )
    return reports


def checkov(folder: Path, *, wrapper: Sequence[str] = ()) -> Report:
    """`checkov --framework kubernetes` over every manifest file in `folder` (one process),
    started through `wrapper` if one is given (e.g. `unshare --net`).

    Checkov links objects across all the files it reads (a NetworkPolicy to the pods it selects),
    so files of different releases must not share a release name and namespace.
    """
    command = [
        *wrapper,
        str(locate() / "checkov"),
        *("--framework", "kubernetes", "--directory", str(folder)),
        *("--output", "json", "--compact", "--skip-download"),
    ]
    completed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **CHECKOV_OFFLINE_ENV},
    )
    # Exit status 1 means "some check failed"; only the JSON report tells.
    try:
        parsed = json.loads(completed.stdout) if completed.stdout.strip() else None
    except json.JSONDecodeError:
        parsed = None
    if completed.returncode not in (0, 1) or parsed is None:
        raise ScannerFailed(
            f"{' '.join(command)} exited {completed.returncode} without a JSON report: "
            f"{completed.stderr.strip()[-2000:]}"
        )
    # One framework gives one report object; an empty folder gives a summary without results.
    reports = parsed if isinstance(parsed, list) else [parsed]
    findings: list[Finding] = []
    suppressions: list[Suppression] = []
    for report in reports:
        results = report.get("results", {})
        if results.get("parsing_errors"):
            raise ScannerFailed(f"checkov could not parse {results['parsing_errors']}")
        for check in results.get("failed_checks", []):
            findings.append(
                Finding(
                    "checkov",
                    Path(check["file_path"]).name,
                    check["resource"],
                    check["check_id"],
                    check["check_name"],
                )
            )
        for check in results.get("skipped_checks", []):
            suppressions.append(
                Suppression(
                    "checkov",
                    Path(check["file_path"]).name,
                    check["resource"],
                    check["check_id"],
                    check["check_result"].get("suppress_comment", ""),
                )
            )
    return Report(findings, suppressions)


def kube_score(manifest: Path) -> Report:
    """`kube-score score` of one manifest file, for the Kubernetes version the gate validates
    against, with the default checks and KUBE_SCORE_OPTIONAL.

    The reasons of kube-score's exceptions are the chart's comment lines
    `# kube-score <check>: <reason>` above the `kube-score/ignore` annotation (kube-score's
    annotation has no room for one); an ignored check without such a line has reason "".
    """
    command = [
        str(locate() / "kube-score"),
        "score",
        *("--output-format", "json", "--kubernetes-version", f"v{KUBERNETES_VERSION}"),
        *(arg for check in KUBE_SCORE_OPTIONAL for arg in ("--enable-optional-test", check)),
        str(manifest),
    ]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    try:
        scored: list[dict[str, Any]] = json.loads(completed.stdout)
    except json.JSONDecodeError:
        scored = []
    if completed.returncode not in (0, 1) or not isinstance(scored, list) or not scored:
        raise ScannerFailed(
            f"{' '.join(command)} exited {completed.returncode} without a JSON report: "
            f"{completed.stderr.strip()[-2000:]}"
        )
    text = manifest.read_text(encoding="utf-8")
    reasons = _kube_score_reasons(text)
    findings: list[Finding] = []
    for obj in scored:
        label = f"{obj['type_meta']['kind']}/{obj['object_meta']['name']}"
        for result in obj["checks"]:
            if result["skipped"] or result["grade"] >= KUBE_SCORE_OK:
                continue
            comments = "; ".join(
                f"{comment.get('path', '')} {comment['summary']}".strip()
                for comment in result.get("comments") or []
            )
            findings.append(
                Finding("kube-score", manifest.name, label, result["check"]["id"], comments)
            )
    suppressions = [
        Suppression("kube-score", manifest.name, label, check, reasons.get((label, check), ""))
        for label, check in _kube_score_ignored(text)
    ]
    return Report(findings, suppressions)


def _kube_score_ignored(text: str) -> list[tuple[str, str]]:
    """(Kind/name, check) of every check a `kube-score/ignore` annotation names."""
    ignored = []
    for document in yaml.safe_load_all(text):
        if not isinstance(document, dict):
            continue
        metadata = document.get("metadata") or {}
        annotation = (metadata.get("annotations") or {}).get(KUBE_SCORE_IGNORE, "")
        label = f"{document.get('kind')}/{metadata.get('name')}"
        ignored += [(label, check.strip()) for check in annotation.split(",") if check.strip()]
    return ignored


def _kube_score_reasons(text: str) -> dict[tuple[str, str], str]:
    """The `# kube-score <check>: <reason>` comment lines of each object, by (Kind/name, check)."""
    reasons: dict[tuple[str, str], str] = {}
    for chunk in text.split("\n---"):
        document = yaml.safe_load(chunk)
        if not isinstance(document, dict):
            continue
        label = f"{document.get('kind')}/{(document.get('metadata') or {}).get('name')}"
        for line in chunk.splitlines():
            comment = line.strip()
            if comment.startswith("# kube-score ") and ": " in comment:
                check, reason = comment.removeprefix("# kube-score ").split(": ", 1)
                reasons[(label, check)] = reason
    return reasons
