"""The declared Kubernetes range is the tested one, and the chart README's table is the matrix.

Chart.yaml's kubeVersion runs from the oldest minor of the matrix to the newest (Helm refuses
every other), and the support table lists each minor with the release its API server is built
from and the upgrades run on it, the node only on the main minor.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from checkpoint_testenv import binaries, matrix
from checkpoint_testenv.helm import CHART_DIR

README = CHART_DIR / "README.md"
_TABLE = re.compile(r"<!-- support-table:start -->\n(.*?)<!-- support-table:end -->", re.DOTALL)


def declared_range() -> str:
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    return str(chart["kubeVersion"])


def test_kube_version_is_the_tested_range() -> None:
    assert declared_range() == matrix.kube_version_range(matrix.matrix())
    assert f"`kubeVersion` in Chart.yaml is `{declared_range()}`" in README.read_text()


def test_a_range_admits_exactly_the_minors_given() -> None:
    def minors(*numbers: int) -> tuple[matrix.Minor, ...]:
        return tuple(matrix.Minor(f"v1.{n}.1", main=False) for n in numbers)

    assert matrix.kube_version_range(minors(34, 32, 33)) == ">=1.32.0-0 <1.35.0-0"
    assert matrix.kube_version_range(minors(32, 33, 36, 37)) == (
        ">=1.32.0-0 <1.34.0-0 || >=1.36.0-0 <1.38.0-0"
    )


@pytest.mark.parametrize(
    ("version", "installs"),
    [
        pytest.param(f"{m.name}.0", True, id=f"{m.name}.0")
        for m in (matrix.matrix()[0], matrix.matrix()[-1])
    ]
    + [
        pytest.param(f"1.{matrix.matrix()[0].number - 1}.9", False, id="below"),
        pytest.param(f"1.{matrix.matrix()[-1].number + 1}.0", False, id="above"),
        pytest.param(f"{matrix.matrix()[0].name}.2-eks-1", True, id="vendor-suffix"),
    ],
)
def test_helm_refuses_a_minor_outside_the_range(
    tmp_path: Path, version: str, installs: bool
) -> None:
    helm = binaries.locate() / "helm"
    command = [str(helm), "template", "cr", str(CHART_DIR), "--kube-version", version]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    assert (completed.returncode == 0) is installs, completed.stderr
    if not installs:
        assert f"which is incompatible with Kubernetes v{version}" in completed.stderr


def support_rows() -> list[list[str]]:
    found = _TABLE.search(README.read_text())
    assert found, "the chart README has no support table"
    lines = [line for line in found.group(1).splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_the_readme_support_table_is_the_matrix() -> None:
    rows = support_rows()
    assert [(row[0], row[1]) for row in rows] == [(m.name, m.version) for m in matrix.matrix()]
    upgrades = {minor: set() for minor, *_ in rows}
    for old, new in matrix.UPGRADES:
        upgrades[old].add(f"upgrade to {new} and rollback")
        upgrades[new].add(f"upgrade from {old} and rollback")
    for minor, _, tested in rows:
        parts = [part.strip() for part in tested.split(";")]
        assert parts[0] == "compatibility tests", minor
        runs_all = minor == matrix.main_minor().name
        assert ("every other test, the node included" in parts) is runs_all, minor
        rest = {p for p in parts[1:] if p != "every other test, the node included"}
        assert rest == upgrades[minor], minor


def write_pins(testenv: Path, main: str, modules: dict[str, str]) -> Path:
    testenv.mkdir()
    (testenv / "versions.env").write_text(f"# pins\nKUBERNETES_VERSION={main}\n")
    for folder, version in modules.items():
        (testenv / folder).mkdir()
        (testenv / folder / "go.mod").write_text(
            f"module m\n\nrequire (\n\tk8s.io/kubernetes {version}\n)\n"
        )
    return testenv


def test_the_matrix_is_read_from_the_pins_and_refuses_a_mismatch(tmp_path: Path) -> None:
    pins = write_pins(tmp_path / "ok", "v1.36.3", {"apiserver-1.34": "v1.34.4"})
    assert [(m.name, m.version, m.main) for m in matrix.read_matrix(pins)] == [
        ("1.34", "v1.34.4", False),
        ("1.36", "v1.36.3", True),
    ]
    wrong = write_pins(tmp_path / "wrong", "v1.36.3", {"apiserver-1.34": "v1.35.4"})
    with pytest.raises(ValueError, match="not its folder's minor"):
        matrix.read_matrix(wrong)
    twice = write_pins(tmp_path / "twice", "v1.36.3", {"apiserver-1.36": "v1.36.1"})
    with pytest.raises(ValueError, match="pinned twice"):
        matrix.read_matrix(twice)
