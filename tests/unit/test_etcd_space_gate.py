"""The stop-and-probe gate of etcd's NOSPACE refusal (pure logic, a settable clock); the real
etcd with a small quota is in tests/store/test_etcd_space_exceeded.py."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from checkpoint_runtime.backends import kubernetes
from checkpoint_runtime.backends.kubernetes import EtcdSpaceGate, is_etcd_space_exceeded
from checkpoint_runtime.constants import ETCD_NOSPACE_MESSAGE, METRIC_ETCD_SPACE_EXCEEDED
from checkpoint_runtime.errors import EtcdSpaceExceededError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def api_error(status: int, message: str, reason: str = "") -> ApiException:
    error = ApiException(status=status, reason="Internal Server Error")
    error.body = json.dumps(
        {"kind": "Status", "code": status, "reason": reason, "message": message}
    )
    return error


def test_only_a_500_naming_the_quota_is_etcd_space_exceeded() -> None:
    assert is_etcd_space_exceeded(500, ETCD_NOSPACE_MESSAGE)
    assert is_etcd_space_exceeded(500, f"rpc error: code = Unknown desc = {ETCD_NOSPACE_MESSAGE}")
    assert not is_etcd_space_exceeded(500, "etcdserver: request timed out")
    assert not is_etcd_space_exceeded(422, ETCD_NOSPACE_MESSAGE)


def test_the_backend_treats_nospace_as_definitive_and_other_500s_as_uncertain() -> None:
    nospace = api_error(500, ETCD_NOSPACE_MESSAGE)
    assert kubernetes._definitive_answer(nospace) is nospace
    assert kubernetes._definitive_answer(api_error(500, "etcdserver: leader changed")) is None
    assert kubernetes._definitive_answer(api_error(503, ETCD_NOSPACE_MESSAGE)) is None


def test_a_refusal_stops_writes_for_the_hold_off_then_one_probe_goes_out() -> None:
    clock = Clock()
    gate = EtcdSpaceGate(first_hold=5.0, max_hold=12.0, clock=clock)
    assert gate.admit("s") is False  # writes flow
    error = gate.refused("s", ETCD_NOSPACE_MESSAGE)
    assert isinstance(error, EtcdSpaceExceededError)
    assert error.retry_after == 5.0
    assert gate.stopped
    assert gate.refusals == 1
    clock.now += 4.0
    with pytest.raises(EtcdSpaceExceededError) as held:
        gate.admit("other")
    assert held.value.retry_after == pytest.approx(1.0)
    assert gate.resume_in() == pytest.approx(1.0)
    assert "not sent" in str(held.value)
    clock.now += 1.0
    assert gate.admit("s") is True  # the probe
    with pytest.raises(EtcdSpaceExceededError):
        gate.admit("other")  # one probe at a time
    assert gate.refused("s", ETCD_NOSPACE_MESSAGE).retry_after == 10.0  # the hold doubles
    gate.settled(True)
    clock.now += 10.0
    assert gate.admit("s") is True
    assert gate.refused("s", ETCD_NOSPACE_MESSAGE).retry_after == 12.0  # up to the maximum
    gate.settled(True)
    clock.now += 12.0
    assert gate.admit("s") is True
    gate.settled(True)
    gate.committed()
    assert not gate.stopped
    assert gate.admit("other") is False
    assert gate.refused("s", ETCD_NOSPACE_MESSAGE).retry_after == 5.0  # a new episode
    assert gate.refusals == 4


def test_a_probe_that_fails_otherwise_lets_the_next_write_probe() -> None:
    clock = Clock()
    gate = EtcdSpaceGate(first_hold=1.0, clock=clock)
    gate.refused("s", ETCD_NOSPACE_MESSAGE)
    clock.now += 1.0
    assert gate.admit("s") is True
    gate.settled(True)  # e.g. a conflict: neither a commit nor a refusal
    assert gate.stopped
    assert gate.admit("s") is True


def test_the_series_are_valid_in_both_exposition_formats() -> None:
    registry = CollectorRegistry()
    gate = EtcdSpaceGate(registry)
    gate.refused("s", ETCD_NOSPACE_MESSAGE)
    gate.refused("s", ETCD_NOSPACE_MESSAGE)
    for text in (generate_latest(registry).decode(), openmetrics_latest(registry).decode()):
        parse = parse_om if text.endswith("# EOF\n") else parse_text
        samples = {s.name: s.value for f in parse(text) for s in f.samples}
        assert samples == {
            METRIC_ETCD_SPACE_EXCEEDED: 1.0,
            f"{METRIC_ETCD_SPACE_EXCEEDED}_total": 2.0,
        }
    gate.committed()
    assert registry.get_sample_value(METRIC_ETCD_SPACE_EXCEEDED) == 0.0
    assert registry.get_sample_value(f"{METRIC_ETCD_SPACE_EXCEEDED}_total") == 2.0
