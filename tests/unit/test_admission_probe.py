"""The admission proof's retry (runtime/admission.py): an admitted dry run is asked again while
the deadline lasts, and always ends in the named refusal, even when the last pause overslept
the deadline (a loaded machine), never in a bare DeadlineExceeded."""

from __future__ import annotations

from typing import Any

import pytest

from checkpoint_runtime.errors import AdmissionPolicyNotEnforcedError
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.runtime import admission


class AdmittingCore:
    """A CoreV1Api stand-in whose dry runs are all admitted."""

    def __init__(self) -> None:
        self.dry_runs = 0

    def create_namespaced_config_map_with_http_info(
        self, namespace: str, body: Any, **kwargs: Any
    ) -> tuple[Any, int, dict[str, str]]:
        assert kwargs["dry_run"] == "All"
        self.dry_runs += 1
        return body, 201, {}


class Backend:
    def __init__(self) -> None:
        self.core = AdmittingCore()
        self.namespace = "ns"
        self.lease_name = "release"


@pytest.mark.parametrize(
    ("oversleep", "least_dry_runs"), [(1.0, 3), (50.0, 1)], ids=["on-time", "overslept"]
)
def test_an_admitted_dry_run_ends_in_the_named_refusal(
    monkeypatch: pytest.MonkeyPatch, oversleep: float, least_dry_runs: int
) -> None:
    now = [0.0]
    # A sleep on a loaded machine lasts longer than asked.
    monkeypatch.setattr(
        "checkpoint_runtime.retry.time.sleep", lambda s: now.__setitem__(0, now[0] + s * oversleep)
    )
    backend: Any = Backend()
    with pytest.raises(AdmissionPolicyNotEnforcedError, match="admitted a dry run"):
        admission.check_enforced(backend, "guard", Deadline(0.5, clock=lambda: now[0]))
    assert backend.core.dry_runs >= least_dry_runs
