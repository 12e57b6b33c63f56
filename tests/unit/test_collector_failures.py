"""Naming source failures and the retry backoff (the runtime's one retry policy; pure logic;
the real S3 server's errors are exercised in tests/runtime/test_objectstore_s3.py)."""

from __future__ import annotations

import pytest

from checkpoint_runtime.collectors.runner import (
    SourceAccessDeniedError,
    SourceError,
    SourceUnreachableError,
    source_failure,
)
from checkpoint_runtime.constants import COLLECTOR_BACKOFF_MAX_SECONDS
from checkpoint_runtime.retry import collector_backoff


class EndpointConnectionError(Exception):
    """Named like botocore's: matched by name, so the base install needs no botocore."""


def test_connection_failures_are_unreachable_whatever_wraps_them() -> None:
    assert isinstance(source_failure("listing", ConnectionRefusedError()), SourceUnreachableError)
    assert isinstance(source_failure("listing", TimeoutError()), SourceUnreachableError)
    assert isinstance(source_failure("listing", EndpointConnectionError()), SourceUnreachableError)
    try:
        try:
            raise ConnectionResetError("reset by peer")
        except ConnectionResetError as inner:
            raise OSError("request failed") from inner
    except OSError as outer:
        wrapped = outer
    failure = source_failure("reading a.json", wrapped)
    assert isinstance(failure, SourceUnreachableError)
    assert str(failure) == "reading a.json: endpoint unreachable: request failed"


def test_refused_credentials_and_other_failures_are_named_apart() -> None:
    denied = source_failure("listing s3://b/p", PermissionError("InvalidAccessKeyId"))
    assert isinstance(denied, SourceAccessDeniedError)
    assert str(denied) == "listing s3://b/p: access denied: InvalidAccessKeyId"
    other = source_failure("listing s3://b/p", FileNotFoundError("no such bucket"))
    assert type(other) is SourceError


@pytest.mark.parametrize(
    ("poll", "failures", "wait"),
    [
        (10.0, 0, 10.0),
        (10.0, 1, 10.0),
        (10.0, 2, 20.0),
        (10.0, 4, 80.0),
        (10.0, 6, COLLECTOR_BACKOFF_MAX_SECONDS),
        (10.0, 10_000, COLLECTOR_BACKOFF_MAX_SECONDS),
        (0.2, 3, 0.8),
        (900.0, 5, 900.0),  # a poll interval beyond the ceiling is never shortened
    ],
)
def test_backoff_doubles_from_the_poll_interval_up_to_a_ceiling(
    poll: float, failures: int, wait: float
) -> None:
    """The wait after `failures` consecutive source failures (none: the poll interval)."""
    backoff = collector_backoff(poll)
    waits = [poll, *(backoff.delay(SourceError("down")) for _ in range(failures))]
    assert waits[-1] == pytest.approx(wait)
