"""Fixtures of the reliability campaign: one chart install per module, stores as its account.

The campaign's explorations run at this run's depth and seed (checkpoint_testenv.support.
exploration): the summary names both, and every failing test of the tier carries the one command
that replays it with the same seed.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest
from kubernetes import client

from checkpoint_testenv import helm
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.support import exploration
from checkpoint_testenv.support.kubetarget import KubeTarget

EXPLORATION = exploration.current()
_RAN = pytest.StashKey[bool]()


@pytest.fixture(scope="module")
def release(control_plane: ControlPlane) -> helm.Release:
    """The chart installed once per module: its ServiceAccount's RBAC is what stores get."""
    return helm.install(control_plane, control_plane.create_namespace("rel"))


@pytest.fixture
def target(control_plane: ControlPlane, release: helm.Release) -> Iterator[KubeTarget]:
    """Stores act as the chart's ServiceAccount; the checker reads as admin."""
    with control_plane.admin_api() as api:
        kube = KubeTarget.of_release(release, client.CoreV1Api(api))
        yield kube
        kube.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failure of this tier names the command that replays it with this run's seed."""
    report = yield
    item.config.stash[_RAN] = True
    if report.failed:
        report.sections.append(
            (f"replay ({EXPLORATION.describe()})", EXPLORATION.replay_command(item.nodeid))
        )
    return report


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    if not config.stash.get(_RAN, False):
        return
    terminalreporter.write_line(
        f"reliability explorations: {EXPLORATION.describe()}; a failure replays with "
        f"`{EXPLORATION.replay_command('<test id>')}`; every schedule and example with "
        f"{exploration.EXPLORE_ENV}=full (`just soak` runs them so)"
    )
