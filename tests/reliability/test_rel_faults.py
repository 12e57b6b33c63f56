"""Each fault ends in a recognised commit or a surfaced named error; nothing acknowledged is
lost; after recovery the state is the API's (SPEC §7; issue 7, scenario 2).

The cases kill and restart the session's kube-apiserver and etcd; every case restores them.
The soak (scripts/soak.py) runs every case repeatedly and writes the table of outcomes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rel_faults import CASES, FaultCase, FaultRunner

from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.faultproxy import FaultProxy
from checkpoint_testenv.support.kubetarget import KubeTarget

CI_CASES = [case for case in CASES if not case.soak_only]


def param(case: FaultCase) -> Any:
    """A case as a test parameter: a soak-only case is reported as skipped, with its reason."""
    marks = [pytest.mark.skip(reason=case.soak_only)] if case.soak_only else []
    return pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", [param(case) for case in CASES])
def test_fault_case_ends_in_the_expected_outcome(
    control_plane: ControlPlane,
    target: KubeTarget,
    fault_proxy: Callable[[], FaultProxy],
    case: FaultCase,
) -> None:
    result = FaultRunner(control_plane, target, fault_proxy).run(case)
    assert result.outcome in case.expected, result
    assert control_plane.apiserver_running
    assert control_plane.etcd_running


def test_the_fault_cases_cover_the_brief() -> None:
    """Every fault the issue names has a case, with a definite expected outcome."""
    names = {case.name for case in CI_CASES}
    for needed in (
        "drop-response-update",
        "reset-before-update",
        "reset-after-update",
        "stall-past-deadline",
        "apiserver-killed-then-restarted",
        "etcd-killed-then-restarted",
    ):
        assert needed in names
    assert all(len(case.expected) == 1 for case in CI_CASES)
