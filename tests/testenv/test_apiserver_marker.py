"""The `apiserver` marker selects exactly the tests that need the control plane, including those
whose fixture fetches it at run time (the store tests' `harness[kubernetes]`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from inner_pytest import run_inner_pytest

from checkpoint_testenv.support.bytecode import child_env

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES_PARAM = re.compile(r"\[(?:[^\]]*-)?kubernetes(?:-[^\]]*)?\]$")


def collect(marker: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-m", marker, "tests/store"],
        capture_output=True, text=True, cwd=ROOT, env=child_env(), check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return {line for line in result.stdout.splitlines() if "::" in line}


def test_the_store_tests_on_the_api_server_are_marked_apiserver() -> None:
    server = collect("apiserver")
    local = collect("not apiserver")

    assert not server & local
    assert not [test for test in local if KUBERNETES_PARAM.search(test)]
    assert any(test.endswith("[file]") for test in local)
    on_kubernetes = [test for test in server if KUBERNETES_PARAM.search(test)]
    assert len(on_kubernetes) >= 30  # every harness test, run on the real API server
    assert {test.replace("[kubernetes]", "[file]") for test in on_kubernetes} <= local | server


CONFTEST = """
import pytest

@pytest.fixture(scope="session")
def control_plane():
    class Plane:
        def create_namespace(self, prefix="test"):
            return "ns-1"
    return Plane()
"""

RUN_TIME_FETCH = """
import pytest

@pytest.fixture(params=["local", {server}])
def where(request):
    if request.param == "server":
        return request.getfixturevalue("namespace")
    return request.param

def test_somewhere(where):
    assert where in ("local", "ns-1")
"""


def run(folder: Path, server_param: str, *options: str) -> str:
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_fetch.py").write_text(RUN_TIME_FETCH.format(server=server_param))
    result = run_inner_pytest(folder / "test_fetch.py", *options)
    return result.stdout


def test_an_unmarked_run_time_fetch_of_the_api_server_fails_naming_the_fix(
    tmp_path: Path,
) -> None:
    out = run(tmp_path, '"server"')
    assert "1 passed, 1 error" in out, out
    assert "test_somewhere[server] uses 'namespace' at run time but is not marked" in out


@pytest.mark.parametrize(
    ("options", "expected"),
    [((), "2 passed"), (("-m", "not apiserver"), "1 passed, 1 deselected")],
)
def test_a_marked_parameter_runs_and_is_deselected_by_not_apiserver(
    tmp_path: Path, options: tuple[str, ...], expected: str
) -> None:
    out = run(tmp_path, 'pytest.param("server", marks=pytest.mark.apiserver)', *options)
    assert expected in out, out
