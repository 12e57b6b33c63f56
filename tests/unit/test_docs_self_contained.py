"""What users read stands on its own: no product file points at documents outside this
repository, at the team's working papers (spec sections, issues, helpers, briefs), and the
project's own words are explained where a reader first meets them.

Product files: the READMEs, docs/, the chart, the schemas, the policies (their messages are
printed by the gate), src/ (help texts, messages, docstrings), scripts/, ci/, the justfile, the
Dockerfile and pyproject.toml. Tests are not product files.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = (
    "README.md",
    "docs",
    "charts",
    "schemas",
    "policy",
    "src",
    "scripts",
    "ci",
    "justfile",
    "Dockerfile",
    "pyproject.toml",
)
SKIPPED_PARTS = {"__pycache__", ".venv", "node_modules"}

# name -> pattern of a reference a user cannot follow
FORBIDDEN: dict[str, re.Pattern[str]] = {
    "a path outside the repository": re.compile(r"\.\./shared\b|/work/shared\b"),
    "a team document": re.compile(r"\b(?:SPEC|RENDER_GATE|REAL_NODE|KUBERNETES_FACTS)\b"),
    "a spec section": re.compile("\u00a7"),
    "an issue": re.compile(r"\bissues? #?\d+|\bTSO-\d+", re.IGNORECASE),
    "a helper": re.compile(
        r"\b(?:GATE|store|runtime|chart|gate|node|image|perf|artifacts|render|testenv|lead)"
        r" helper\b"
    ),
    "the team's brief or contract": re.compile(
        r"\bteam (?:brief|contract)\b|\bshared contract\b|\bcontract in the team\b",
        re.IGNORECASE,
    ),
}


def product_files() -> list[Path]:
    files: list[Path] = []
    for entry in PRODUCT:
        path = ROOT / entry
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        for candidate in candidates:
            if not candidate.is_file() or SKIPPED_PARTS & set(candidate.parts):
                continue
            if candidate.name.endswith("_test.rego"):
                continue  # the policies' unit tests
            files.append(candidate)
    return files


def test_the_product_files_are_found() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in product_files()}
    assert {"README.md", "charts/checkpoint-runtime/README.md", "policy/rbac.rego"} <= names
    assert "src/checkpoint_runtime/cli.py" in names
    assert "docs/store.md" in names


@pytest.mark.parametrize("kind", list(FORBIDDEN))
def test_no_product_file_refers_to_what_a_user_does_not_have(kind: str) -> None:
    pattern = FORBIDDEN[kind]
    found = []
    for path in product_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary (plots)
        for number, line in enumerate(text.splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert found == [], f"{kind}:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("document", "term", "explanation"),
    [
        ("README.md", "tailnet", "a **tailnet** is a tenant or network name that groups"),
        ("README.md", "collector namespace", "a **collector namespace** is the key prefix"),
        ("README.md", "legacy single-ConfigMap format", "kept every collector's checkpoints"),
        ("charts/checkpoint-runtime/README.md", "tailnet", "**tailnet**: a tenant or"),
        ("charts/checkpoint-runtime/README.md", "collector namespace", "**collector namespace**"),
        ("docs/store.md", "collector namespace", "also called the collector namespace"),
    ],
)
def test_the_projects_own_terms_are_explained_where_first_used(
    document: str, term: str, explanation: str
) -> None:
    text = (ROOT / document).read_text(encoding="utf-8")
    assert explanation in text
    first_use = text.lower().index(term.lower())
    # the explanation is the first use, or follows it within the same paragraph
    assert text.index(explanation) - first_use < 400, (document, term)
